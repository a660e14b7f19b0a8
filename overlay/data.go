package overlay

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"sort"
	"syscall"
	"time"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/policy"
)

// dirtyLimit is how much unflushed data one file may hold in memory
// before its blocks are stored.
const dirtyLimit = 16 << 20

// Opened records an open handle; unlinked nodes live until Released.
func (fs *FS) Opened(ino uint64) {
	fs.ns.RLock()
	n := fs.inodes[ino]
	fs.ns.RUnlock()
	if n == nil {
		return
	}
	n.mu.Lock()
	n.opens++
	n.mu.Unlock()
}

// Released drops an open handle, freeing an unlinked node with none left.
func (fs *FS) Released(ino uint64) {
	fs.ns.Lock()
	defer fs.ns.Unlock()
	n := fs.inodes[ino]
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.opens > 0 {
		n.opens--
	}
	if n.nlink == 0 && n.opens == 0 {
		fs.maybeFree(n)
		if !n.upper {
			delete(fs.inodes, ino)
		}
	}
}

func (fs *FS) node(ino uint64) (*inode, error) {
	fs.ns.RLock()
	n := fs.inodes[ino]
	fs.ns.RUnlock()
	if n == nil || (n.deleted && n.opens == 0) {
		return nil, errNoEnt
	}
	return n, nil
}

// blockData returns the current content of block idx (up to BlockSize,
// shorter at the end of the file); n.mu must be held.
func (fs *FS) blockData(n *inode, idx int64) ([]byte, error) {
	start := idx * BlockSize
	end := min(start+BlockSize, n.size)
	if end <= start {
		return nil, nil
	}
	if b, ok := n.dirty[idx]; ok {
		return b, nil
	}
	buf := make([]byte, end-start)
	if id, ok := n.blocks.get(idx); ok {
		data, pending := fs.p.pendingChunk(id)
		if !pending {
			var err error
			if data, err = fs.r.LoadChunk(id); err != nil {
				return nil, fs.ioErr("read block", err)
			}
		}
		copy(buf, data)
		return buf, nil
	}
	if start < n.baseSize {
		if err := fs.readBase(n, buf[:min(end, n.baseSize)-start], start); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// readBase reads lower content; n.mu must be held.
func (fs *FS) readBase(n *inode, p []byte, off int64) error {
	if n.reader == nil {
		fr, err := objects.OpenFile(fs.r, n.base)
		if err != nil {
			return fs.ioErr("open lower file", err)
		}
		n.reader = fr
	}
	if _, err := n.reader.ReadAt(p, off); err != nil && err != io.EOF {
		return fs.ioErr("read lower file", err)
	}
	return nil
}

// Read reads file data at off into p.
func (fs *FS) Read(ino uint64, p []byte, off int64) (int, error) {
	n, err := fs.node(ino)
	if err != nil {
		return 0, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.typ != objects.TypeFile {
		return 0, errIsDir
	}
	return fs.readLocked(n, p, off)
}

// readLocked reads file data; n.mu must be held.
func (fs *FS) readLocked(n *inode, p []byte, off int64) (int, error) {
	if off >= n.size {
		return 0, nil
	}
	want := min(int64(len(p)), n.size-off)
	// Fast path: untouched lower content reads straight from the store.
	if len(n.dirty) == 0 && n.blocks.len() == 0 && off+want <= n.baseSize {
		if err := fs.readBase(n, p[:want], off); err != nil {
			return 0, err
		}
		return int(want), nil
	}
	for done := int64(0); done < want; {
		pos := off + done
		idx := pos / BlockSize
		inBlock := pos - idx*BlockSize
		c := min(want-done, BlockSize-inBlock)
		if err := fs.readBlock(n, idx, inBlock, p[done:done+c]); err != nil {
			return int(done), err
		}
		done += c
	}
	return int(want), nil
}

// readBlock fills dst with the content of block idx from offset inBlock
// on, straight from where it lives (no block-sized copy: a 1 MiB read
// touches 16 blocks); bytes the block does not store read as zeros. dst
// must lie within the file's size; n.mu must be held.
func (fs *FS) readBlock(n *inode, idx, inBlock int64, dst []byte) error {
	fill := func(b []byte) {
		k := 0
		if inBlock < int64(len(b)) {
			k = copy(dst, b[inBlock:])
		}
		clear(dst[k:])
	}
	if b, ok := n.dirty[idx]; ok {
		fill(b)
		return nil
	}
	if id, ok := n.blocks.get(idx); ok {
		data, pending := fs.p.pendingChunk(id)
		if !pending {
			var err error
			if data, err = fs.r.LoadChunk(id); err != nil {
				return fs.ioErr("read block", err)
			}
		}
		fill(data)
		return nil
	}
	pos := idx*BlockSize + inBlock
	k := int64(0)
	if pos < n.baseSize {
		k = min(int64(len(dst)), n.baseSize-pos)
		if err := fs.readBase(n, dst[:k], pos); err != nil {
			return err
		}
	}
	clear(dst[k:])
	return nil
}

// Write writes p at off.
func (fs *FS) Write(ino uint64, p []byte, off int64) (int, error) {
	if err := fs.checkWritable(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, errInval
	}
	n, err := fs.node(ino)
	if err != nil {
		return 0, err
	}
	if err := fs.canChange(n, nil); err != nil {
		return 0, err
	}
	if err := fs.p.throttle(); err != nil {
		return 0, err
	}
	if err := fs.ensureUpper(n); err != nil {
		return 0, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.typ != objects.TypeFile {
		return 0, errIsDir
	}
	end := off + int64(len(p))
	if end > fs.maxSize {
		return 0, syscall.EFBIG
	}
	if len(n.dirty) == 0 {
		n.storedSize = n.size
	}
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		idx := pos / BlockSize
		inBlock := int(pos - idx*BlockSize)
		c := min(len(p)-done, BlockSize-inBlock)
		b, ok := n.dirty[idx]
		if !ok {
			cur, err := fs.blockData(n, idx)
			if err != nil {
				return done, err
			}
			b = make([]byte, len(cur), blockCap(max(len(cur), inBlock+c), 0))
			copy(b, cur)
		}
		if need := inBlock + c; need > len(b) {
			if need > cap(b) {
				nb := make([]byte, len(b), blockCap(need, cap(b)))
				copy(nb, b)
				b = nb
			}
			b = b[:need] // bytes past a block's length are always zero
		}
		copy(b[inBlock:], p[done:done+c])
		fs.putDirty(n, idx, b)
		done += c
	}
	if end > n.size {
		// Blocks between the old end and this write stay holes.
		n.size = end
	}
	now := time.Now().UnixNano()
	n.mtime, n.ctime = now, now
	fs.p.dirtyInodeLocked(n)
	if len(n.dirty)*BlockSize > dirtyLimit || fs.dirtyBlocks.Load()*BlockSize > fs.dirtyTotalLimit() {
		fs.storeDirtyLocked(n)
	}
	return done, nil
}

// dirtyTotalLimit is how much unflushed data all files together may hold
// in memory (Options.MaxDirty; default 256 MiB): past it, each write
// stores its file's blocks, which then count against the persister's
// limit and the agent's share of the disk. With only the per-file bound,
// an agent's many open files each kept 16 MiB in art's memory, for the
// session's end to journal it all, past the disk's reserve for the host.
func (fs *FS) dirtyTotalLimit() int64 {
	if fs.opts.MaxDirty > 0 {
		return fs.opts.MaxDirty
	}
	return 256 << 20
}

// putDirty sets dirty block idx of n; n.mu must be held.
func (fs *FS) putDirty(n *inode, idx int64, b []byte) {
	if n.dirty == nil {
		n.dirty = map[int64][]byte{}
	}
	if _, ok := n.dirty[idx]; !ok {
		fs.dirtyBlocks.Add(1)
	}
	n.dirty[idx] = b
}

// dropDirty forgets dirty block idx of n; n.mu must be held.
func (fs *FS) dropDirty(n *inode, idx int64) {
	if _, ok := n.dirty[idx]; ok {
		delete(n.dirty, idx)
		fs.dirtyBlocks.Add(-1)
	}
}

// clearDirty forgets all of n's dirty blocks; n.mu must be held.
func (fs *FS) clearDirty(n *inode) {
	fs.dirtyBlocks.Add(-int64(len(n.dirty)))
	n.dirty = nil
}

// blockCap is the capacity of a dirty block's buffer that must hold need
// bytes and had old: at least a page, at least twice the old capacity,
// at most BlockSize. A small file's block then takes what it needs (an
// untar of the Go tree allocated and cleared 64 KiB per file, 0.7 GB, a
// tenth of art's CPU time), and a block written in steps is copied a
// handful of times at most.
func blockCap(need, old int) int {
	return min(BlockSize, max(need, 2*old, 4096))
}

// MaxFileSize bounds file sizes (and so block indexes).
const MaxFileSize = 1 << 50

// fileSizeLimit is the largest file the overlay takes (EFBIG beyond): the
// size of the filesystem holding the repository at path, but at least
// minFileSizeLimit (on a small disk a file runs out of space first, with
// ENOSPC, as on a local disk). A commit hashes every byte of a file, holes
// included, so an agent's 1 PiB sparse file would keep the commit (and
// every later command, which records interrupted sessions first) busy for
// days.
func fileSizeLimit(path string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil || st.Blocks == 0 {
		return MaxFileSize
	}
	total := uint64(st.Blocks) * uint64(st.Bsize)
	return int64(min(max(total, minFileSizeLimit), MaxFileSize))
}

// minFileSizeLimit is the least fileSizeLimit gives.
const minFileSizeLimit = 16 << 30

// ensureUpper copies a node up before its first change. upper is ns's to
// guard (copyUp sets it holding ns, not the node's lock): reading it under
// the node's lock raced with a concurrent copy-up (go test -race, a write
// and a setxattr of one lower file).
func (fs *FS) ensureUpper(n *inode) error {
	fs.ns.RLock()
	up := n.upper
	fs.ns.RUnlock()
	if up {
		return nil
	}
	fs.ns.Lock()
	fs.copyUp(n)
	fs.ns.Unlock()
	return nil
}

// storeDirtyLocked turns dirty blocks into stored chunks (queued for the
// next batch); n.mu must be held.
func (fs *FS) storeDirtyLocked(n *inode) {
	if len(n.dirty) == 0 {
		return
	}
	// A few blocks (most files, closed one after another by a build or an
	// untar) are journaled as they are and compressed by the applier, off
	// the path of the close; more (a large file, a write storm) are
	// compressed here, so that the journal stays small.
	compress := len(n.dirty) >= compressInlineBlocks
	blocks := make([]storedBlock, 0, len(n.dirty))
	for idx, b := range n.dirty {
		// Trailing zeros are not stored: a short block reads as zeros.
		blocks = append(blocks, storedBlock{idx: idx, data: objects.TrimZeros(b)})
	}
	if !compress {
		for i := range blocks {
			blocks[i].id = fs.p.putChunk(blocks[i].data, false)
		}
	} else {
		// Hashing and compressing are most of a large file's close:
		// spread them over the CPUs (the encoders are per CPU too).
		onEveryCPU(len(blocks), func(i int) {
			blocks[i].id = fs.p.putChunk(blocks[i].data, true)
		})
	}
	for _, b := range blocks {
		n.blocks.set(b.idx, b.id)
		fs.p.storedBlock(n.ino, b.idx, b.id)
	}
	fs.clearDirty(n)
	fs.p.dirtyInodeLocked(n)
}

// storedBlock is a dirty block on its way to the persister.
type storedBlock struct {
	idx  int64
	data []byte
	id   objects.ID
}

// compressInlineBlocks is how many dirty blocks a file stores at once
// before the request storing them compresses them itself.
const compressInlineBlocks = 4

// SetAttr is a change of attributes; nil fields are left alone.
type SetAttr struct {
	Mode  *uint32
	UID   *uint32 // chown; the kernel checked who may (default_permissions)
	GID   *uint32
	Size  *int64
	Atime *int64 // ns
	Mtime *int64
	Ctime bool // set ctime to now (always done on any change)
	// KillSUIDGID clears set-user-ID, and set-group-ID when group-execute
	// is set: what the kernel asks of a FUSE filesystem (which then does it
	// itself, FUSE_HANDLE_KILLPRIV_V2) when a file is written, truncated
	// or fallocated by a caller without CAP_FSETID, and on chown. An
	// explicit Mode wins.
	KillSUIDGID bool
}

// killSetID is mode without the set-ID bits KillSUIDGID clears.
func killSetID(mode uint32) uint32 {
	m := mode &^ syscall.S_ISUID
	if m&(syscall.S_ISGID|syscall.S_IXGRP) == syscall.S_ISGID|syscall.S_IXGRP {
		m &^= syscall.S_ISGID
	}
	return m
}

// Setattr changes mode, owner, size or times.
func (fs *FS) Setattr(ino uint64, s SetAttr) (Attr, error) {
	if err := fs.checkWritable(); err != nil {
		return Attr{}, err
	}
	n, err := fs.node(ino)
	if err != nil {
		return Attr{}, err
	}
	if err := fs.canChange(n, nil); err != nil {
		return Attr{}, err
	}
	if err := fs.ensureUpper(n); err != nil {
		return Attr{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now().UnixNano()
	if s.Size != nil {
		if n.typ == objects.TypeDir {
			return Attr{}, errIsDir
		}
		if n.typ != objects.TypeFile {
			return Attr{}, errInval
		}
		if *s.Size < 0 || *s.Size > fs.maxSize {
			return Attr{}, syscall.EFBIG
		}
		if err := fs.truncateLocked(n, *s.Size); err != nil {
			return Attr{}, err
		}
		n.mtime = now
	}
	if s.UID != nil {
		n.uid = *s.UID
	}
	if s.GID != nil {
		n.gid = *s.GID
	}
	if s.Mode != nil {
		n.mode = *s.Mode & objects.PermMask
	} else if s.KillSUIDGID {
		n.mode = killSetID(n.mode)
	}
	if s.Atime != nil {
		n.atime = *s.Atime
	}
	if s.Mtime != nil {
		n.mtime = *s.Mtime
	}
	n.ctime = now
	fs.p.dirtyInodeLocked(n)
	return n.attr(), nil
}

// truncateLocked sets the file size; n.mu must be held.
func (fs *FS) truncateLocked(n *inode, size int64) error {
	if size >= n.size {
		n.size = size // the new range is a hole
		return nil
	}
	if len(n.dirty) == 0 {
		n.storedSize = n.size
	}
	n.storedSize = min(n.storedSize, size)
	last := size / BlockSize
	inLast := size - last*BlockSize
	// Keep the part of the boundary block below size.
	if inLast > 0 {
		b, err := fs.blockData(n, last)
		if err != nil {
			return err
		}
		keep := int(min(int64(len(b)), inLast))
		nb := make([]byte, keep, blockCap(keep, 0))
		copy(nb, b)
		fs.putDirty(n, last, nb)
		last++
	}
	for idx := range n.dirty {
		if idx >= last {
			fs.dropDirty(n, idx)
		}
	}
	for idx := range n.blocks.all() {
		if idx >= last {
			n.blocks.del(idx)
			fs.p.dirtyBlock(n.ino, idx, objects.Zero)
		}
	}
	n.size = size
	n.baseSize = min(n.baseSize, size)
	return nil
}

// Flush stores the file's dirty data and waits until it is committed:
// once it returns, the data survives a crash of art.
func (fs *FS) Flush(ino uint64) error {
	n, err := fs.node(ino)
	if err != nil {
		return nil // already gone: nothing to keep
	}
	n.mu.Lock()
	fs.storeDirtyLocked(n)
	clean := fs.p.persisted(n)
	n.mu.Unlock()
	if clean {
		return nil // a read-only open, or nothing new since the last snapshot
	}
	return fs.p.sync(false, agentRoom)
}

// Fsync is Flush plus an fsync of the journal, so the data survives a
// power loss too, not only a crash of art.
func (fs *FS) Fsync(ino uint64) error {
	n, err := fs.node(ino)
	if err == nil {
		n.mu.Lock()
		fs.storeDirtyLocked(n)
		n.mu.Unlock()
	}
	return fs.p.sync(true, agentRoom)
}

// Allocate implements fallocate mode 0 and KEEP_SIZE (space is not
// reserved: the repository grows as data is written).
func (fs *FS) Allocate(ino uint64, off, length int64, keepSize bool) error {
	if off < 0 || length <= 0 {
		return errInval
	}
	if keepSize {
		return nil
	}
	size, err := fs.sizeOf(ino)
	if err != nil {
		return err
	}
	if off+length > size {
		s := off + length
		_, err := fs.Setattr(ino, SetAttr{Size: &s})
		return err
	}
	return nil
}

// sizeOf is the size of file ino.
func (fs *FS) sizeOf(ino uint64) (int64, error) {
	n, err := fs.node(ino)
	if err != nil {
		return 0, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.size, nil
}

// ZeroRange implements fallocate's PUNCH_HOLE and ZERO_RANGE: [off,
// off+length) reads as zeros after it, and without keepSize the file grows
// to its end. Blocks that hold data get zeros written (a block of zeros
// is one chunk, stored once); holes stay holes. Before, both modes failed
// with EOPNOTSUPP and the data stayed.
func (fs *FS) ZeroRange(ino uint64, off, length int64, keepSize bool) error {
	if off < 0 || length <= 0 || off > math.MaxInt64-length {
		return errInval
	}
	end := off + length
	n, err := fs.node(ino)
	if err != nil {
		return err
	}
	size, err := fs.sizeOf(ino)
	if err != nil {
		return err
	}
	zeros := make([]byte, BlockSize)
	for pos := off; pos < min(end, size); {
		next := min((pos/BlockSize+1)*BlockSize, end, size)
		n.mu.Lock()
		data := fs.holdsData(n, pos/BlockSize)
		n.mu.Unlock()
		if data {
			if _, err := fs.Write(ino, zeros[:next-pos], pos); err != nil {
				return err
			}
		}
		pos = next
	}
	if !keepSize && end > size {
		_, err := fs.Setattr(ino, SetAttr{Size: &end})
		return err
	}
	return nil
}

// holdsData reports whether block idx of n may hold data (SEEK_DATA): it
// was written, or it is lower content that is not a zero chunk; n.mu must
// be held.
func (fs *FS) holdsData(n *inode, idx int64) bool {
	if _, ok := n.dirty[idx]; ok {
		return true
	}
	if _, ok := n.blocks.get(idx); ok {
		return true
	}
	start := idx * BlockSize
	return start < n.baseSize && !inZeroRun(fs.baseZeroRuns(n), start, min(start+BlockSize, n.baseSize))
}

// SeekData returns the next offset >= off holding data (SEEK_DATA) or a
// hole (SEEK_HOLE). Unwritten ranges beyond the lower content are holes.
func (fs *FS) SeekData(ino uint64, off int64, hole bool) (int64, error) {
	n, err := fs.node(ino)
	if err != nil {
		return 0, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if off < 0 || off >= n.size {
		return 0, syscall.ENXIO
	}
	for idx := off / BlockSize; idx*BlockSize < n.size; idx++ {
		if fs.holdsData(n, idx) != hole {
			return max(off, idx*BlockSize), nil
		}
	}
	if hole {
		return n.size, nil
	}
	return 0, syscall.ENXIO
}

// Xattr limits enforced on the agent's extended attributes.
var (
	errNoData = syscall.ENODATA
	errRange  = syscall.ERANGE
	errTooBig = syscall.E2BIG
)

// GetXattr returns an extended attribute's value.
func (fs *FS) GetXattr(ino uint64, name string) ([]byte, error) {
	n, err := fs.node(ino)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range n.xattrs {
		if x.Name == name {
			return x.Value, nil
		}
	}
	return nil, errNoData
}

// ListXattr returns the names of a node's extended attributes.
func (fs *FS) ListXattr(ino uint64) ([]string, error) {
	n, err := fs.node(ino)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var names []string
	for _, x := range n.xattrs {
		names = append(names, x.Name)
	}
	return names, nil
}

// Xattr set flags (as setxattr).
const (
	XattrCreate  = 1
	XattrReplace = 2
)

// SetXattr sets (value != nil) or removes (value == nil) an attribute.
func (fs *FS) SetXattr(ino uint64, name string, value []byte, flags uint32, remove bool) error {
	if err := fs.checkWritable(); err != nil {
		return err
	}
	if name == "" || len(name) > objects.MaxXattrName || bytes.IndexByte([]byte(name), 0) >= 0 {
		return errRange
	}
	if len(value) > objects.MaxXattrSize {
		return errTooBig
	}
	n, err := fs.node(ino)
	if err != nil {
		return err
	}
	if err := fs.canChange(n, nil); err != nil {
		return err
	}
	if err := fs.ensureUpper(n); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if name == aclAccess && !remove {
		mode, minimal, err := aclMode(value)
		if err != nil {
			return err
		}
		// Setting an access ACL changes the mode bits (POSIX.1e); a
		// minimal ACL is nothing but the mode, so it is not stored.
		n.mode = n.mode&^0o777 | mode
		if minimal {
			n.ctime = time.Now().UnixNano()
			fs.p.dirtyInodeLocked(n)
			return nil
		}
	}
	i := sort.Search(len(n.xattrs), func(i int) bool { return n.xattrs[i].Name >= name })
	exists := i < len(n.xattrs) && n.xattrs[i].Name == name
	switch {
	case remove && !exists:
		return errNoData
	case exists && !remove && flags&XattrCreate != 0:
		return errExist
	case !exists && !remove && flags&XattrReplace != 0:
		return errNoData
	case !exists && !remove && len(n.xattrs) >= objects.MaxXattrs:
		return syscall.ENOSPC
	}
	old := xattrBytes(n.xattrs)
	size := old
	if exists {
		size -= int64(len(name) + len(n.xattrs[i].Value))
	}
	if !remove {
		size += int64(len(name) + len(value))
		if size > MaxXattrBytes {
			return syscall.ENOSPC
		}
	}
	if grow := size - old; grow > 0 && fs.xattrMem.Add(grow) > MaxXattrTotal {
		fs.xattrMem.Add(-grow)
		return syscall.ENOSPC
	} else if grow < 0 {
		fs.xattrMem.Add(grow)
	}
	switch {
	case remove:
		n.xattrs = append(n.xattrs[:i], n.xattrs[i+1:]...)
	case exists:
		n.xattrs[i].Value = append([]byte(nil), value...)
	default:
		n.xattrs = append(n.xattrs, objects.Xattr{})
		copy(n.xattrs[i+1:], n.xattrs[i:])
		n.xattrs[i] = objects.Xattr{Name: name, Value: append([]byte(nil), value...)}
	}
	n.ctime = time.Now().UnixNano()
	fs.p.dirtyInodeLocked(n)
	return nil
}

// MaxXattrBytes bounds the names and values of one file's xattrs together,
// as local filesystems do (ext4: one block; XFS: 64 KiB per value). They
// live in memory and in every journal record of the file, so without a
// bound an agent's 16 MiB per file (256 values of 64 KiB) made art's
// memory grow without limit (160 MiB of xattrs: 1.9 GB).
const MaxXattrBytes = 64 << 10

// MaxXattrTotal bounds the xattrs of all the files of a mount that art
// holds in memory (ENOSPC beyond). With one file bounded, many files still
// made art's memory grow without limit (2,000 files of 60 KiB: 390 MB),
// memory that --memory, which bounds the sandbox, does not cover.
const MaxXattrTotal = 64 << 20

// xattrBytes is the size MaxXattrBytes and MaxXattrTotal count.
func xattrBytes(xs []objects.Xattr) int64 {
	var n int64
	for _, x := range xs {
		n += int64(len(x.Name) + len(x.Value))
	}
	return n
}

// aclAccess is the xattr through which tools (cp -p, sed -i, tar) set
// POSIX ACLs; FUSE passes it on as an xattr.
const aclAccess = "system.posix_acl_access"

// aclMode decodes a POSIX ACL xattr (version 2: entries of u16 tag, u16
// perm, u32 id) into the permission bits it implies, and whether it holds
// only the three entries equivalent to a mode.
func aclMode(v []byte) (mode uint32, minimal bool, err error) {
	const (
		userObj  = 0x01
		user     = 0x02
		groupObj = 0x04
		group    = 0x08
		mask     = 0x10
		other    = 0x20
	)
	if len(v) < 4 || (len(v)-4)%8 != 0 || binary.LittleEndian.Uint32(v) != 2 {
		return 0, false, errInval
	}
	var u, g, o, m uint32
	hasMask := false
	minimal = true
	for b := v[4:]; len(b) > 0; b = b[8:] {
		tag := binary.LittleEndian.Uint16(b)
		perm := uint32(binary.LittleEndian.Uint16(b[2:])) & 7
		switch tag {
		case userObj:
			u = perm
		case groupObj:
			g = perm
		case other:
			o = perm
		case mask:
			m, hasMask = perm, true
		case user, group:
			minimal = false
		default:
			return 0, false, errInval
		}
	}
	if hasMask {
		g = m // with a mask, the group bits of the mode are the mask
		if minimal {
			minimal = false
		}
	}
	return u<<6 | g<<3 | o, minimal, nil
}

// CheckOpen applies the path policy to an open: view-only content cannot
// be opened, read-only content not for writing (or truncating).
func (fs *FS) CheckOpen(ino uint64, write bool) error {
	return fs.open(ino, write, false)
}

// Open checks an open as CheckOpen does and counts it (Opened), at once:
// a node whose last name goes between the two is not freed under the new
// handle.
//
// The kernel may open a file freed since it looked its name up: another
// process renamed a new file over it (a build replacing a tool, a config
// written atomically). On a local disk that open gets the old file; here
// about one in thirty failed with ENOENT. A freed file still names its
// content until the kernel forgets it, so the open revives it as what it
// would have been had the open come first: a file unlinked while open
// (reopen). Any other freed node gives ESTALE, on which the kernel looks
// the name up again.
func (fs *FS) Open(ino uint64, write bool) error {
	return fs.open(ino, write, true)
}

func (fs *FS) open(ino uint64, write, count bool) error {
	if write {
		// A read-only mount refuses the open itself, as a read-only
		// filesystem does, not only the first write.
		if err := fs.checkWritable(); err != nil {
			return err
		}
	}
	// ns held for reading: maybeFree, which frees a node, holds it for
	// writing; a freed node is revived under the write lock.
	fs.ns.RLock()
	n := fs.inodes[ino]
	if count && (n == nil && fs.dead[ino] != nil || n != nil && n.deleted) {
		fs.ns.RUnlock()
		return fs.reopen(ino, write)
	}
	defer fs.ns.RUnlock()
	if n == nil || n.deleted {
		return errStale
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := fs.openPerm(n, write); err != nil {
		return err
	}
	if count {
		n.opens++
	}
	return nil
}

// openPerm applies the path policy to an open of n; n.mu must be held.
// An open for writing refused is a refused change (refusals).
func (fs *FS) openPerm(n *inode, write bool) error {
	switch {
	case n.perm <= policy.View && n.typ != objects.TypeDir:
		return errAccess
	case write && n.perm < policy.Write:
		fs.refused("")
		return errAccess
	}
	return nil
}

// reopen opens a freed file (Open): it is a file unlinked while open
// again, its inode row and blocks journaled anew, so that art gc, which
// reads the upper layer's rows, keeps its content while it is open, and
// what is written through it persists until its release frees it again.
// Its extended attributes went when it was freed.
func (fs *FS) reopen(ino uint64, write bool) error {
	fs.ns.Lock()
	defer fs.ns.Unlock()
	n := fs.inodes[ino]
	if n == nil {
		n = fs.dead[ino]
	}
	if n == nil {
		return errStale // forgotten meanwhile
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.deleted { // revived meanwhile by another open
		if err := fs.openPerm(n, write); err != nil {
			return err
		}
		n.opens++
		return nil
	}
	if n.typ != objects.TypeFile {
		return errStale
	}
	if err := fs.openPerm(n, write); err != nil {
		return err
	}
	delete(fs.dead, ino)
	fs.inodes[ino] = n
	n.deleted = false
	n.opens++
	if n.upper {
		fs.p.dirtyInodeLocked(n)
		for idx, id := range n.blocks.all() {
			fs.p.dirtyBlock(ino, idx, id)
		}
	}
	return nil
}
