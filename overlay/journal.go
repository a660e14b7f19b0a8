package overlay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"syscall"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
	"golang.org/x/sys/unix"
)

// The journal of a worktree is a file next to the repository,
// "<db>-wt<ID>.journal": a header naming the worktree (id and creation
// time, so a journal left by an older worktree with a reused id is never
// replayed), then frames of [magic u32][length u32][crc32c u32][record].
// A torn last frame (art killed inside write(2)) fails its length or
// checksum and ends the replay; everything before it is whole.

const (
	journalMagic = "artjrnl1"
	frameMagic   = 0x61726a31 // "arj1"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

type journal struct {
	f    *os.File
	path string
	// hard is set when the journal was fsynced since its last reset: it
	// then holds data fsync(2) promised, which must not go before SQLite
	// holds it as durably.
	hard bool
}

type inodeRow struct {
	ino                       uint64
	deleted                   bool
	typ                       objects.Type
	mode, nlink               uint32
	size, mtime, ctime, atime int64
	base                      []byte
	baseSize                  int64
	target                    string
	xattrs                    []byte
	// owned: the node has an owner of its own (uid, gid), not the mount's.
	owned    bool
	uid, gid uint32
}

type direntRow struct {
	key     direntKey
	ino     uint64
	present bool
}

type blockRow struct {
	key     blockKey
	id      objects.ID
	present bool
}

// record is one snapshot of dirty upper-layer state.
type record struct {
	mark    uint64
	size    int64 // bytes in the journal, once appended
	inodes  []inodeRow
	dirents []direntRow
	blocks  []blockRow
	chunks  map[objects.ID]*pendingChunk
}

func (r *record) empty() bool {
	return len(r.inodes) == 0 && len(r.dirents) == 0 && len(r.blocks) == 0
}

// JournalPath returns where a worktree's journal lives.
func JournalPath(r *repo.Repo, wt *repo.Worktree) string {
	return fmt.Sprintf("%s-wt%d.journal", r.Path, wt.ID)
}

func journalHeader(wt *repo.Worktree) []byte {
	b := []byte(journalMagic)
	b = binary.LittleEndian.AppendUint64(b, uint64(wt.ID))
	b = binary.LittleEndian.AppendUint64(b, uint64(wt.Created))
	return b
}

// openJournal replays a journal left by a crash into SQLite, then opens a
// fresh one for this mount.
func openJournal(r *repo.Repo, wt *repo.Worktree) (*journal, error) {
	path := JournalPath(r, wt)
	if err := replayJournal(r, wt, path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	if _, err := f.Write(journalHeader(wt)); err != nil {
		f.Close()
		return nil, fmt.Errorf("write journal: %w", err)
	}
	return &journal{f: f, path: path}, nil
}

func replayJournal(r *repo.Repo, wt *repo.Worktree, path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	hdr := journalHeader(wt)
	if len(data) < len(hdr) || string(data[:len(hdr)]) != string(hdr) {
		return nil // another worktree's, or torn before its header: nothing of ours
	}
	var recs []*record
	for b := data[len(hdr):]; len(b) >= 12; {
		if binary.LittleEndian.Uint32(b) != frameMagic {
			break
		}
		n := binary.LittleEndian.Uint32(b[4:])
		sum := binary.LittleEndian.Uint32(b[8:])
		if uint64(n) > uint64(len(b)-12) {
			break // torn
		}
		payload := b[12 : 12+n]
		if crc32.Checksum(payload, crcTable) != sum {
			break
		}
		rec, err := decodeRecord(payload)
		if err != nil {
			return fmt.Errorf("journal %s: %w", path, err)
		}
		recs = append(recs, rec)
		b = b[12+n:]
	}
	if len(recs) > 0 {
		if err := applyRecords(r, wt.ID, recs); err != nil {
			return fmt.Errorf("replay journal: %w", err)
		}
		// The journal is emptied next: the replayed records, which may
		// hold fsynced data, must first be as durable in SQLite (its WAL
		// is not fsynced at commit).
		if err := syncFile(r.Path + "-wal"); err != nil {
			return fmt.Errorf("replay journal: sync repository: %w", err)
		}
	}
	return nil
}

// journalReserve is room a journal append leaves free beyond what applying
// the journal to SQLite needs, so that small records (the deletion that
// frees a full disk, say) and the commit still fit.
const journalReserve = 1 << 20

// append writes one record with a single writev(2) (more only past
// IOV_MAX pieces). pending is how many journaled bytes SQLite has not
// absorbed yet: a record is refused with ENOSPC unless the filesystem
// keeps room (by room's rule) to apply it and them, or the journal could
// fill the disk with data nothing can apply and nothing can free. Applying n journaled
// bytes takes about n in SQLite's WAL and, once the checkpoint copies
// them, n more in the database file, while the journal still holds them;
// a thirty-second of it covers page and frame headers.
func (j *journal) append(rec *record, pending int64, room spaceRule) error {
	pieces := recordPieces(rec)
	var size int
	var sum uint32
	for _, p := range pieces {
		size += len(p)
		sum = crc32.Update(sum, crcTable, p)
	}
	hdr := make([]byte, 12)
	binary.LittleEndian.PutUint32(hdr, frameMagic)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(size))
	binary.LittleEndian.PutUint32(hdr[8:], sum)
	frameLen := int64(len(hdr) + size)
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(j.f.Fd()), &st); err == nil && st.Blocks > 0 {
		free := room.space(&st)
		apply := frameLen + pending
		if free < frameLen+2*apply+apply/32+journalReserve {
			return fmt.Errorf("append %d bytes to %s (%d free, %d not yet applied): %w", frameLen, j.path, free, pending, syscall.ENOSPC)
		}
	}
	rec.size = frameLen
	off, err := j.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if err := writevAll(int(j.f.Fd()), append([][]byte{hdr}, pieces...)); err != nil {
		// A torn frame would end every later replay early: cut it off.
		if terr := j.f.Truncate(off); terr == nil {
			j.f.Seek(off, io.SeekStart)
		}
		return fmt.Errorf("append to %s: %w", j.path, err)
	}
	return nil
}

// writevAll writes bufs in order at the file offset of fd, with as few
// writev(2) calls as IOV_MAX and short writes allow. bufs is consumed.
func writevAll(fd int, bufs [][]byte) error {
	const iovMax = 1024
	for len(bufs) > 0 {
		if len(bufs[0]) == 0 {
			bufs = bufs[1:]
			continue
		}
		n, err := unix.Writev(fd, bufs[:min(len(bufs), iovMax)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		for n > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
			} else {
				bufs[0] = bufs[0][n:]
				n = 0
			}
		}
	}
	return nil
}

func (j *journal) sync() error {
	if err := j.f.Sync(); err != nil {
		return err
	}
	j.hard = true
	return nil
}

// reset empties the journal once everything in it is in SQLite.
func (j *journal) reset() error {
	if err := j.f.Truncate(int64(len(journalMagic) + 16)); err != nil {
		return err
	}
	j.hard = false
	_, err := j.f.Seek(0, io.SeekEnd)
	return err
}

// remove deletes the journal (the worktree is committed or closed clean).
func (j *journal) remove() error {
	j.f.Close()
	return os.Remove(j.path)
}

func (j *journal) close() error { return j.f.Close() }

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// recordSize bounds the encoded size of r, so that encoding it (megabytes
// of block data, at write-storm rates) allocates and copies it once.
func recordSize(r *record) int {
	n := 4 * binary.MaxVarintLen64
	for _, c := range r.chunks {
		n += objects.IDSize + 3*binary.MaxVarintLen64 + len(c.data)
	}
	for _, x := range r.inodes {
		n += 18*binary.MaxVarintLen64 + len(x.base) + len(x.target) + len(x.xattrs)
	}
	for _, d := range r.dirents {
		n += 4*binary.MaxVarintLen64 + len(d.key.name)
	}
	n += len(r.blocks) * (2*binary.MaxVarintLen64 + 1 + objects.IDSize)
	return n
}

// encodeRecord returns the encoding of r in one slice.
func encodeRecord(r *record) []byte {
	b := make([]byte, 0, recordSize(r))
	for _, p := range recordPieces(r) {
		b = append(b, p...)
	}
	return b
}

// recordPieces returns the encoding of r as consecutive pieces. Chunk data
// is referenced, not copied: a record holds every block written since the
// last one (hundreds of megabytes in a write storm), and copying it into
// one buffer cost more than writing it.
func recordPieces(r *record) [][]byte {
	data := 0
	for _, c := range r.chunks {
		data += len(c.data)
	}
	meta := make([]byte, 0, recordSize(r)-data)
	pieces := make([][]byte, 0, 2*len(r.chunks)+1)
	start := 0
	meta = binary.AppendUvarint(meta, uint64(len(r.chunks)))
	for id, c := range r.chunks {
		meta = append(meta, id[:]...)
		meta = binary.AppendUvarint(meta, uint64(len(c.raw)))
		meta = binary.AppendUvarint(meta, uint64(c.enc))
		meta = binary.AppendUvarint(meta, uint64(len(c.data)))
		pieces = append(pieces, meta[start:], c.data)
		start = len(meta)
	}
	meta = appendRecordTail(meta, r)
	return append(pieces, meta[start:])
}

// appendRecordTail appends the encoding of r's inodes, dirents and blocks.
func appendRecordTail(b []byte, r *record) []byte {
	b = binary.AppendUvarint(b, uint64(len(r.inodes)))
	for _, x := range r.inodes {
		b = binary.AppendUvarint(b, x.ino)
		if x.deleted {
			b = append(b, 1)
			continue
		}
		if x.owned {
			b = append(b, 2, byte(x.typ)) // the owner follows the row
		} else {
			b = append(b, 0, byte(x.typ))
		}
		b = binary.AppendUvarint(b, uint64(x.mode))
		b = binary.AppendUvarint(b, uint64(x.nlink))
		b = binary.AppendVarint(b, x.size)
		b = binary.AppendVarint(b, x.mtime)
		b = binary.AppendVarint(b, x.ctime)
		b = binary.AppendVarint(b, x.atime)
		b = appendBytes(b, x.base)
		b = binary.AppendVarint(b, x.baseSize)
		b = appendBytes(b, []byte(x.target))
		b = appendBytes(b, x.xattrs)
		if x.owned {
			b = binary.AppendUvarint(b, uint64(x.uid))
			b = binary.AppendUvarint(b, uint64(x.gid))
		}
	}
	b = binary.AppendUvarint(b, uint64(len(r.dirents)))
	for _, d := range r.dirents {
		b = binary.AppendUvarint(b, d.key.dir)
		b = appendBytes(b, []byte(d.key.name))
		if d.present {
			b = append(b, 1)
			b = binary.AppendUvarint(b, d.ino)
		} else {
			b = append(b, 0)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(r.blocks)))
	for _, k := range r.blocks {
		b = binary.AppendUvarint(b, k.key.ino)
		b = binary.AppendVarint(b, k.key.idx)
		if k.present {
			b = append(b, 1)
			b = append(b, k.id[:]...)
		} else {
			b = append(b, 0)
		}
	}
	return b
}

func decodeRecord(b []byte) (*record, error) {
	d := &objects.Decoder{B: b}
	r := &record{chunks: map[objects.ID]*pendingChunk{}}
	for i, n := uint64(0), d.Uvarint(1<<64-1); i < n && d.Err == nil; i++ {
		id := d.ID()
		raw := d.Uvarint(1<<64 - 1)
		enc := d.Uvarint(1<<64 - 1)
		data := d.Bytes(d.Uvarint(1<<64 - 1))
		if raw > objects.MaxChunk {
			d.Err = objects.ErrCorrupt
			break
		}
		plain, err := objects.Decompress(data, int(enc), int(raw))
		if err != nil || objects.Hash(plain) != id {
			return nil, fmt.Errorf("journal chunk %s: %w", id.Short(), objects.ErrCorrupt)
		}
		r.chunks[id] = &pendingChunk{raw: plain, enc: int(enc), data: data}
	}
	for i, n := uint64(0), d.Uvarint(1<<64-1); i < n && d.Err == nil; i++ {
		x := inodeRow{ino: d.Uvarint(1<<64 - 1)}
		switch d.Byte() {
		case 1:
			x.deleted = true
			r.inodes = append(r.inodes, x)
			continue
		case 2:
			x.owned = true
		}
		x.typ = objects.Type(d.Byte())
		x.mode = uint32(d.Uvarint(1<<64 - 1))
		x.nlink = uint32(d.Uvarint(1<<64 - 1))
		x.size, x.mtime, x.ctime, x.atime = d.Varint(), d.Varint(), d.Varint(), d.Varint()
		if base := d.Bytes(d.Uvarint(1<<64 - 1)); len(base) > 0 {
			x.base = base
		}
		x.baseSize = d.Varint()
		x.target = string(d.Bytes(d.Uvarint(1<<64 - 1)))
		if xa := d.Bytes(d.Uvarint(1<<64 - 1)); len(xa) > 0 {
			x.xattrs = xa
		}
		if x.owned {
			x.uid, x.gid = uint32(d.Uvarint(1<<32-1)), uint32(d.Uvarint(1<<32-1))
		}
		r.inodes = append(r.inodes, x)
	}
	for i, n := uint64(0), d.Uvarint(1<<64-1); i < n && d.Err == nil; i++ {
		e := direntRow{key: direntKey{dir: d.Uvarint(1<<64 - 1), name: string(d.Bytes(d.Uvarint(1<<64 - 1)))}}
		if d.Byte() == 1 {
			e.present, e.ino = true, d.Uvarint(1<<64-1)
		}
		r.dirents = append(r.dirents, e)
	}
	for i, n := uint64(0), d.Uvarint(1<<64-1); i < n && d.Err == nil; i++ {
		k := blockRow{key: blockKey{ino: d.Uvarint(1<<64 - 1), idx: d.Varint()}}
		if d.Byte() == 1 {
			k.present, k.id = true, d.ID()
		}
		r.blocks = append(r.blocks, k)
	}
	if d.Err != nil || len(d.B) != 0 {
		return nil, fmt.Errorf("journal record: %w", objects.ErrCorrupt)
	}
	return r, nil
}
