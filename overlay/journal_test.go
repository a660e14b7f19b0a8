package overlay

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"testing"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
)

// FuzzDecodeRecord: a journal left by a crash is read back at the next
// mount; a damaged record must be an error, never a panic, and a record
// that decodes re-encodes to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	data := []byte("block data")
	id := objects.Hash(data)
	rec := &record{
		inodes: []inodeRow{
			{ino: 7, typ: objects.TypeFile, mode: 0o644, nlink: 1, size: 10, mtime: 1, ctime: 2, atime: 3, base: id[:], baseSize: 4, xattrs: encodeXattrs([]objects.Xattr{{Name: "user.a", Value: []byte("v")}})},
			{ino: 8, deleted: true},
			{ino: 9, typ: objects.TypeSymlink, mode: 0o777, nlink: 1, target: "../x"},
			{ino: 10, typ: TypeSocket, mode: 0o755, nlink: 1, owned: true, uid: 65534, gid: 1 << 31},
		},
		dirents: []direntRow{{key: direntKey{dir: 1, name: "a\nb"}, ino: 7, present: true}, {key: direntKey{dir: 1, name: "gone"}}},
		blocks:  []blockRow{{key: blockKey{ino: 7, idx: 0}, id: id, present: true}, {key: blockKey{ino: 7, idx: 3}}},
		chunks:  map[objects.ID]*pendingChunk{id: {raw: data, enc: objects.EncRaw, data: data}},
	}
	f.Add(encodeRecord(rec))
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		again, err := decodeRecord(encodeRecord(r))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if len(again.inodes) != len(r.inodes) || len(again.dirents) != len(r.dirents) || len(again.blocks) != len(r.blocks) || len(again.chunks) != len(r.chunks) {
			t.Fatal("round trip changed the record")
		}
	})
}

// TestDecodeRecordRoundTrip checks a record with every kind of row.
func TestDecodeRecordRoundTrip(t *testing.T) {
	data := []byte("hello")
	id := objects.Hash(data)
	rec := &record{
		inodes: []inodeRow{
			{ino: 2, typ: objects.TypeDir, mode: 0o755, nlink: 2, mtime: -5},
			{ino: 3, typ: objects.TypeFile, mode: 0o644, nlink: 1, target: "", owned: true, uid: 1000, gid: 4294967295},
		},
		dirents: []direntRow{{key: direntKey{dir: 1, name: "d"}, ino: 2, present: true}},
		blocks:  []blockRow{{key: blockKey{ino: 3, idx: 1 << 40}, id: id, present: true}},
		chunks:  map[objects.ID]*pendingChunk{id: {raw: data, enc: objects.EncRaw, data: data}},
	}
	got, err := decodeRecord(encodeRecord(rec))
	if err != nil {
		t.Fatal(err)
	}
	if x := got.inodes[1]; x.owned != true || x.uid != 1000 || x.gid != 4294967295 || got.inodes[0].owned {
		t.Fatalf("owner round trip: %+v", got.inodes)
	}
	if got.inodes[0].mtime != -5 || got.dirents[0].key.name != "d" || got.blocks[0].key.idx != 1<<40 || string(got.chunks[id].raw) != "hello" {
		t.Fatalf("round trip: %+v", got)
	}
	// A chunk whose data does not hash to its id is refused.
	bad := encodeRecord(&record{chunks: map[objects.ID]*pendingChunk{objects.Hash([]byte("other")): {raw: data, enc: objects.EncRaw, data: data}}})
	if _, err := decodeRecord(bad); err == nil {
		t.Fatal("a chunk with the wrong id was accepted")
	}
}

// TestJournalAppendPieces appends records of more pieces than one writev(2)
// takes (IOV_MAX) and reads the frames back as replay does.
func TestJournalAppendPieces(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "journal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	j := &journal{f: f, path: f.Name()}
	var want []*record
	for _, n := range []int{0, 1, 1500} {
		rec := &record{chunks: map[objects.ID]*pendingChunk{}, inodes: []inodeRow{{ino: uint64(n + 2), typ: objects.TypeFile, mode: 0o644, nlink: 1}}}
		for i := range n {
			data := []byte(fmt.Sprintf("chunk %d of %d", i, n))
			id := objects.Hash(data)
			rec.chunks[id] = &pendingChunk{raw: data, enc: objects.EncRaw, data: data}
			rec.blocks = append(rec.blocks, blockRow{key: blockKey{ino: uint64(n + 2), idx: int64(i)}, id: id, present: true})
		}
		if err := j.append(rec, 0, agentRoom); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for i, rec := range want {
		if len(b) < 12 || binary.LittleEndian.Uint32(b) != frameMagic {
			t.Fatalf("record %d: no frame", i)
		}
		n := binary.LittleEndian.Uint32(b[4:])
		payload := b[12 : 12+n]
		if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(b[8:]) {
			t.Fatalf("record %d: checksum mismatch", i)
		}
		got, err := decodeRecord(payload)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		for id, c := range rec.chunks {
			if g := got.chunks[id]; g == nil || !bytes.Equal(g.data, c.data) {
				t.Fatalf("record %d: chunk %s not read back", i, id.Short())
			}
		}
		if len(got.chunks) != len(rec.chunks) || len(got.blocks) != len(rec.blocks) || got.inodes[0].ino != rec.inodes[0].ino {
			t.Fatalf("record %d: read back %d chunks, %d blocks", i, len(got.chunks), len(got.blocks))
		}
		if rec.size != int64(12+n) {
			t.Fatalf("record %d: size %d, frame %d", i, rec.size, 12+n)
		}
		total += rec.size
		b = b[12+n:]
	}
	if len(b) != 0 || total == 0 {
		t.Fatalf("%d bytes after the last frame", len(b))
	}
}

// Chunks are journaled uncompressed and compressed by the applier; a
// journal written before (zstd chunks) still replays. Both kinds land in
// the chunks table compressed where that helps, and load back intact.
func TestApplyCompressesJournaledChunks(t *testing.T) {
	r, wt, fs := newWorktreeFS(t)
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	text := bytes.Repeat([]byte("func main() { fmt.Println(\"hello\") }\n"), 500)
	old := bytes.Repeat([]byte("an older journal's chunk\n"), 500)
	noise := make([]byte, 4096)
	x := uint64(88172645463325252)
	for i := range noise {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		noise[i] = byte(x)
	}
	oldEnc, how := objects.Compress(old)
	if how != objects.EncZstd {
		t.Fatalf("test chunk did not compress")
	}
	recs := []*record{
		{chunks: map[objects.ID]*pendingChunk{
			objects.Hash(text):  {raw: text, enc: objects.EncRaw, data: text},
			objects.Hash(noise): {raw: noise, enc: objects.EncRaw, data: noise},
		}},
		{chunks: map[objects.ID]*pendingChunk{
			objects.Hash(old):  {raw: old, enc: objects.EncZstd, data: oldEnc},
			objects.Hash(text): {raw: text, enc: objects.EncRaw, data: text},
		}},
	}
	if err := applyRecords(r, wt.ID, recs); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		data       []byte
		compressed bool
	}{{"journaled text", text, true}, {"journaled noise", noise, false}, {"older zstd chunk", old, true}} {
		id := objects.Hash(c.data)
		got, err := r.LoadChunk(id)
		if err != nil || !bytes.Equal(got, c.data) {
			t.Fatalf("%s: loaded %d bytes, err %v; want the %d bytes stored", c.name, len(got), err, len(c.data))
		}
		var stored int
		if err := r.DB.QueryRow(`SELECT length(data) FROM chunks WHERE id=?`, id[:]).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if (stored < len(c.data)) != c.compressed {
			t.Errorf("%s: %d bytes stored for %d (compressed should be %v)", c.name, stored, len(c.data), c.compressed)
		}
	}
}

// replayJournal applies only a journal that is this worktree's, and of it
// only whole frames whose checksum holds: a journal left by an earlier
// worktree of the same id (ids are reused once a worktree is gone), or a
// frame torn or damaged by a crash, must not reach the upper layer.
func TestReplayJournalTakesOnlyItsOwn(t *testing.T) {
	frame := func(rec *record) []byte {
		payload := encodeRecord(rec)
		b := binary.LittleEndian.AppendUint32(nil, frameMagic)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(payload, crcTable))
		return append(b, payload...)
	}
	row := func(ino uint64) *record {
		return &record{inodes: []inodeRow{{ino: ino, typ: objects.TypeFile, mode: 0o644, nlink: 1, size: 3}}}
	}
	for _, tc := range []struct {
		name    string
		journal func(wt *repo.Worktree) []byte
		want    []uint64 // inodes replayed
	}{
		{"its own", func(wt *repo.Worktree) []byte {
			return append(append(journalHeader(wt), frame(row(7))...), frame(row(8))...)
		}, []uint64{7, 8}},
		{"an earlier worktree's of the same id", func(wt *repo.Worktree) []byte {
			old := *wt
			old.Created--
			return append(journalHeader(&old), frame(row(7))...)
		}, nil},
		{"a damaged frame and what follows it", func(wt *repo.Worktree) []byte {
			bad := frame(row(8))
			bad[len(bad)-1] ^= 1
			return append(append(append(journalHeader(wt), frame(row(7))...), bad...), frame(row(9))...)
		}, []uint64{7}},
		{"a torn frame", func(wt *repo.Worktree) []byte {
			f := frame(row(8))
			return append(append(journalHeader(wt), frame(row(7))...), f[:len(f)-1]...)
		}, []uint64{7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, wt := newWorktree(t)
			path := JournalPath(r, wt)
			if err := os.WriteFile(path, tc.journal(wt), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := replayJournal(r, wt, path); err != nil {
				t.Fatal(err)
			}
			rows, err := r.DB.Query(`SELECT ino FROM upper_inodes WHERE wt=? ORDER BY ino`, wt.ID)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []uint64
			for rows.Next() {
				var ino uint64
				if err := rows.Scan(&ino); err != nil {
					t.Fatal(err)
				}
				got = append(got, ino)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("replayed inodes %v, want %v", got, tc.want)
			}
		})
	}
}

// Once replayed, the journal starts over: what it held is in SQLite, and
// left behind the new header, old frames would be replayed again after
// newer ones at the next crash.
func TestOpenJournalStartsEmpty(t *testing.T) {
	r, wt := newWorktree(t)
	payload := encodeRecord(&record{inodes: []inodeRow{{ino: 7, typ: objects.TypeFile, mode: 0o644, nlink: 1}}})
	b := journalHeader(wt)
	b = binary.LittleEndian.AppendUint32(b, frameMagic)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(payload, crcTable))
	b = append(b, payload...)
	if err := os.WriteFile(JournalPath(r, wt), b, 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := openJournal(r, wt)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	st, err := j.f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != int64(len(journalHeader(wt))) {
		t.Fatalf("journal holds %d bytes after its replay, want its header's %d", st.Size(), len(journalHeader(wt)))
	}
}
