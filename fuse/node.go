package fuse

import (
	"context"
	"fmt"
	"log"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/overlay"
)

// The go-fuse interfaces Node implements.
var (
	_ = (fs.NodeLookuper)((*Node)(nil))
	_ = (fs.NodeGetattrer)((*Node)(nil))
	_ = (fs.NodeSetattrer)((*Node)(nil))
	_ = (fs.NodeReaddirer)((*Node)(nil))
	_ = (fs.NodeMkdirer)((*Node)(nil))
	_ = (fs.NodeMknoder)((*Node)(nil))
	_ = (fs.NodeCreater)((*Node)(nil))
	_ = (fs.NodeOpener)((*Node)(nil))
	_ = (fs.NodeUnlinker)((*Node)(nil))
	_ = (fs.NodeRmdirer)((*Node)(nil))
	_ = (fs.NodeRenamer)((*Node)(nil))
	_ = (fs.NodeLinker)((*Node)(nil))
	_ = (fs.NodeSymlinker)((*Node)(nil))
	_ = (fs.NodeReadlinker)((*Node)(nil))
	_ = (fs.NodeGetxattrer)((*Node)(nil))
	_ = (fs.NodeSetxattrer)((*Node)(nil))
	_ = (fs.NodeRemovexattrer)((*Node)(nil))
	_ = (fs.NodeListxattrer)((*Node)(nil))
	_ = (fs.NodeStatfser)((*Node)(nil))
	_ = (fs.NodeFsyncer)((*Node)(nil))
	_ = (fs.NodeTmpfiler)((*Node)(nil))

	_ = (fs.FileReader)((*handle)(nil))
	_ = (fs.FileWriter)((*handle)(nil))
	_ = (fs.FileFlusher)((*handle)(nil))
	_ = (fs.FileFsyncer)((*handle)(nil))
	_ = (fs.FileReleaser)((*handle)(nil))
	_ = (fs.FileLseeker)((*handle)(nil))
	_ = (fs.FileAllocater)((*handle)(nil))
)

// shared is what every node of one mount refers to.
type shared struct {
	ofs *overlay.FS
	log *log.Logger
	lat *latencies
}

// creator is who asks for a new node, which becomes its owner.
func creator(ctx context.Context) *overlay.Owner {
	if c, ok := gofuse.FromContext(ctx); ok {
		return &overlay.Owner{UID: c.Uid, GID: c.Gid}
	}
	return nil // the mount's owner
}

// Node is one inode of the mount; it holds only its number.
type Node struct {
	fs.Inode
	s *shared
}

func (n *Node) ino() uint64 { return n.StableAttr().Ino }

var _ = (fs.NodeOnForgetter)((*Node)(nil))

// OnForget: the kernel holds the node no more; a freed one's attributes
// can go (overlay.FS.Forget).
func (n *Node) OnForget() { n.s.ofs.Forget(n.ino()) }

// guard turns a panic in a request into EIO and a log line, and records
// the request's latency when ART_DEBUG_LATENCY is set.
func (s *shared) guard(op string, errno *syscall.Errno, start time.Time) {
	if s.lat != nil {
		s.lat.add(op, time.Since(start))
	}
	if r := recover(); r != nil {
		s.log.Printf("art fuse: panic in %s: %v\n%s", op, r, debug.Stack())
		*errno = syscall.EIO
	}
}

func typeMode(t objects.Type) uint32 {
	switch t {
	case objects.TypeDir:
		return syscall.S_IFDIR
	case objects.TypeSymlink:
		return syscall.S_IFLNK
	case objects.TypeFifo:
		return syscall.S_IFIFO
	case overlay.TypeSocket:
		return syscall.S_IFSOCK
	case overlay.TypeCharDev:
		return syscall.S_IFCHR
	case overlay.TypeBlockDev:
		return syscall.S_IFBLK
	}
	return syscall.S_IFREG
}

func (s *shared) fill(a overlay.Attr, out *gofuse.Attr) {
	out.Ino = a.Ino
	out.Mode = typeMode(a.Type) | a.Mode
	out.Nlink = a.Nlink
	out.Rdev = a.Rdev
	out.Size = uint64(a.Size)
	out.Blocks = (uint64(a.Size) + 511) / 512
	if a.Type == objects.TypeFile {
		out.Blocks = (uint64(a.Alloc) + 511) / 512 // holes take no space
	}
	out.Blksize = 4096
	out.Uid, out.Gid = a.UID, a.GID
	setTime := func(ns int64, sec *uint64, nsec *uint32) {
		// Floor division: a time before 1970 has a negative second and
		// a nanosecond part in [0, 1e9), as the kernel expects.
		s, n := ns/1e9, ns%1e9
		if n < 0 {
			s, n = s-1, n+1e9
		}
		*sec = uint64(s)
		*nsec = uint32(n)
	}
	setTime(a.Atime, &out.Atime, &out.Atimensec)
	setTime(a.Mtime, &out.Mtime, &out.Mtimensec)
	setTime(a.Ctime, &out.Ctime, &out.Ctimensec)
}

func (n *Node) newChild(ctx context.Context, a overlay.Attr, out *gofuse.EntryOut) *fs.Inode {
	n.s.fill(a, &out.Attr)
	return n.NewInode(ctx, &Node{s: n.s}, fs.StableAttr{Mode: typeMode(a.Type), Ino: a.Ino})
}

// Lookup resolves a name in this directory.
func (n *Node) Lookup(ctx context.Context, name string, out *gofuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer n.s.guard("lookup", &errno, time.Now())
	a, err := n.s.ofs.Lookup(n.ino(), name)
	if err != nil {
		return nil, overlay.Errno(err)
	}
	return n.newChild(ctx, a, out), 0
}

// Getattr reports attributes.
func (n *Node) Getattr(ctx context.Context, f fs.FileHandle, out *gofuse.AttrOut) (errno syscall.Errno) {
	defer n.s.guard("getattr", &errno, time.Now())
	a, err := n.s.ofs.Getattr(n.ino())
	if err != nil {
		return overlay.Errno(err)
	}
	n.s.fill(a, &out.Attr)
	return 0
}

// Setattr changes mode, owner, size, times. Who may do what was checked
// by the kernel against the attributes this mount reported
// (default_permissions): chown needs CAP_CHOWN, chgrp ownership and
// membership of the group.
func (n *Node) Setattr(ctx context.Context, f fs.FileHandle, in *gofuse.SetAttrIn, out *gofuse.AttrOut) (errno syscall.Errno) {
	defer n.s.guard("setattr", &errno, time.Now())
	var s overlay.SetAttr
	if uid, ok := in.GetUID(); ok {
		s.UID = &uid
	}
	if gid, ok := in.GetGID(); ok {
		s.GID = &gid
	}
	if m, ok := in.GetMode(); ok {
		m &= 0o7777
		s.Mode = &m
	}
	if sz, ok := in.GetSize(); ok {
		v := int64(sz)
		s.Size = &v
	}
	// With FUSE_HANDLE_KILLPRIV_V2 (see Mount) the kernel leaves clearing
	// set-ID bits to us. Truncate by a caller without CAP_FSETID and chown
	// of a file say so (FATTR_KILL_SUIDGID); where the kernel would have
	// cleared them itself it sends a SETATTR that sets nothing:
	// chown(f, -1, -1), and fallocate or write to a set-ID file by a caller
	// without CAP_FSETID. That covers every write, so WRITE_KILL_SUIDGID,
	// which go-fuse's node API does not pass on, is not needed: a set-ID
	// file never gets the kernel's "nothing to clear" mark (S_NOSEC), so
	// each such write is preceded by that SETATTR, and all mode changes
	// go through this mount, so the kernel's view of the mode is right.
	// (The kernel's writeback cache, which this mount does not use, would
	// change that path.)
	const attrFields = gofuse.FATTR_MODE | gofuse.FATTR_UID | gofuse.FATTR_GID | gofuse.FATTR_SIZE |
		gofuse.FATTR_ATIME | gofuse.FATTR_MTIME | gofuse.FATTR_ATIME_NOW | gofuse.FATTR_MTIME_NOW | gofuse.FATTR_CTIME
	s.KillSUIDGID = in.Valid&gofuse.FATTR_KILL_SUIDGID != 0 ||
		in.Valid&attrFields == 0 && n.StableAttr().Mode&syscall.S_IFMT != syscall.S_IFDIR
	// Clamped to what the overlay holds (objects.TimeNs): UnixNano wraps
	// a time after 2262 round to before 1900.
	if t, ok := in.GetATime(); ok {
		v := objects.TimeNs(t.Unix(), int64(t.Nanosecond()))
		s.Atime = &v
	}
	if t, ok := in.GetMTime(); ok {
		v := objects.TimeNs(t.Unix(), int64(t.Nanosecond()))
		s.Mtime = &v
	}
	a, err := n.s.ofs.Setattr(n.ino(), s)
	if err != nil {
		return overlay.Errno(err)
	}
	n.s.fill(a, &out.Attr)
	return 0
}

// Readdir lists the directory.
func (n *Node) Readdir(ctx context.Context) (_ fs.DirStream, errno syscall.Errno) {
	defer n.s.guard("readdir", &errno, time.Now())
	ents, errno := n.list()
	if errno != 0 {
		return nil, errno
	}
	return &dirStream{DirStream: fs.NewListDirStream(ents), list: n.list}, 0
}

// list is the directory's listing as readdir returns it.
func (n *Node) list() ([]gofuse.DirEntry, syscall.Errno) {
	ents, err := n.s.ofs.Readdir(n.ino())
	if err != nil {
		return nil, overlay.Errno(err)
	}
	// "." and ".." first, as every local filesystem lists them.
	parent := n.ino()
	if _, p := n.Parent(); p != nil {
		parent = p.StableAttr().Ino
	}
	out := make([]gofuse.DirEntry, 0, len(ents)+2)
	out = append(out, gofuse.DirEntry{Name: ".", Ino: n.ino(), Mode: syscall.S_IFDIR}, gofuse.DirEntry{Name: "..", Ino: parent, Mode: syscall.S_IFDIR})
	for _, e := range ents {
		out = append(out, gofuse.DirEntry{Name: e.Name, Ino: e.Ino, Mode: typeMode(e.Type)})
	}
	return out, 0
}

// dirStream serves a listing taken at opendir (go-fuse's list stream:
// offsets are positions in it, so telldir/seekdir work). Seeking back to
// the start (rewinddir) lists the directory again: POSIX wants the stream
// to show what the directory holds then (the list stream replayed the
// old listing).
type dirStream struct {
	fs.DirStream
	list func() ([]gofuse.DirEntry, syscall.Errno)
}

func (d *dirStream) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off == 0 {
		ents, errno := d.list()
		if errno != 0 {
			return errno
		}
		d.DirStream = fs.NewListDirStream(ents)
		return 0
	}
	return d.DirStream.(fs.FileSeekdirer).Seekdir(ctx, off)
}

// Mkdir creates a directory.
func (n *Node) Mkdir(ctx context.Context, name string, mode uint32, out *gofuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer n.s.guard("mkdir", &errno, time.Now())
	a, err := n.s.ofs.Mkdir(n.ino(), name, mode&0o7777, creator(ctx))
	if err != nil {
		return nil, overlay.Errno(err)
	}
	return n.newChild(ctx, a, out), 0
}

// Mknod creates fifos, regular files, sockets and device nodes (the last
// two for the session only: overlay.TypeSocket). The kernel lets only a
// caller with CAP_MKNOD in the initial namespace make a device node, so an
// agent in the sandbox cannot, except the whiteout 0:0 (no device) that
// Linux 5.8+ lets anyone make; the mount is nodev besides.
func (n *Node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *gofuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer n.s.guard("mknod", &errno, time.Now())
	var a overlay.Attr
	var err error
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO:
		a, err = n.s.ofs.Mkfifo(n.ino(), name, mode&0o7777, creator(ctx))
	case syscall.S_IFREG, 0:
		a, err = n.s.ofs.Create(n.ino(), name, mode&0o7777, creator(ctx))
		if err == nil {
			n.s.ofs.Released(a.Ino)
		}
	case syscall.S_IFSOCK:
		a, err = n.s.ofs.Mknod(n.ino(), name, overlay.TypeSocket, mode&0o7777, 0, creator(ctx))
	case syscall.S_IFCHR:
		a, err = n.s.ofs.Mknod(n.ino(), name, overlay.TypeCharDev, mode&0o7777, dev, creator(ctx))
	case syscall.S_IFBLK:
		a, err = n.s.ofs.Mknod(n.ino(), name, overlay.TypeBlockDev, mode&0o7777, dev, creator(ctx))
	default:
		return nil, syscall.EINVAL
	}
	if err != nil {
		return nil, overlay.Errno(err)
	}
	return n.newChild(ctx, a, out), 0
}

// Create creates and opens a regular file.
func (n *Node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *gofuse.EntryOut) (_ *fs.Inode, _ fs.FileHandle, _ uint32, errno syscall.Errno) {
	defer n.s.guard("create", &errno, time.Now())
	a, err := n.s.ofs.Create(n.ino(), name, mode&0o7777, creator(ctx))
	if err != nil {
		return nil, nil, 0, overlay.Errno(err)
	}
	return n.newChild(ctx, a, out), &handle{s: n.s, ino: a.Ino}, gofuse.FOPEN_KEEP_CACHE, 0
}

// Tmpfile creates and opens a regular file in no directory (O_TMPFILE).
func (n *Node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *gofuse.EntryOut) (_ *fs.Inode, _ fs.FileHandle, _ uint32, errno syscall.Errno) {
	defer n.s.guard("tmpfile", &errno, time.Now())
	a, err := n.s.ofs.Tmpfile(n.ino(), mode&0o7777, creator(ctx))
	if err != nil {
		return nil, nil, 0, overlay.Errno(err)
	}
	return n.newChild(ctx, a, out), &handle{s: n.s, ino: a.Ino}, gofuse.FOPEN_KEEP_CACHE, 0
}

// Open opens a file.
func (n *Node) Open(ctx context.Context, flags uint32) (_ fs.FileHandle, _ uint32, errno syscall.Errno) {
	defer n.s.guard("open", &errno, time.Now())
	write := flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC) != 0
	// O_TRUNC arrives as a separate setattr: go-fuse does not negotiate
	// FUSE_ATOMIC_O_TRUNC.
	if err := n.s.ofs.Open(n.ino(), write); err != nil {
		return nil, 0, overlay.Errno(err)
	}
	openFlags := uint32(gofuse.FOPEN_KEEP_CACHE)
	if !write {
		// A read-only handle has nothing to store at close (writers' data
		// is stored by their own close): the kernel skips the FLUSH round
		// trip, one of the few requests reading a file costs.
		openFlags |= gofuse.FOPEN_NOFLUSH
	}
	return &handle{s: n.s, ino: n.ino()}, openFlags, 0
}

// Unlink removes a name.
func (n *Node) Unlink(ctx context.Context, name string) (errno syscall.Errno) {
	defer n.s.guard("unlink", &errno, time.Now())
	return overlay.Errno(n.s.ofs.Unlink(n.ino(), name))
}

// Rmdir removes an empty directory.
func (n *Node) Rmdir(ctx context.Context, name string) (errno syscall.Errno) {
	defer n.s.guard("rmdir", &errno, time.Now())
	return overlay.Errno(n.s.ofs.Rmdir(n.ino(), name))
}

// Rename moves a name (RENAME_NOREPLACE and RENAME_EXCHANGE supported).
func (n *Node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) (errno syscall.Errno) {
	defer n.s.guard("rename", &errno, time.Now())
	np, ok := newParent.(*Node)
	if !ok {
		return syscall.EXDEV
	}
	return overlay.Errno(n.s.ofs.Rename(n.ino(), name, np.ino(), newName, flags))
}

// Link adds a hard link named name to target.
func (n *Node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *gofuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer n.s.guard("link", &errno, time.Now())
	t, ok := target.(*Node)
	if !ok {
		return nil, syscall.EXDEV
	}
	a, err := n.s.ofs.Link(t.ino(), n.ino(), name)
	if err != nil {
		return nil, overlay.Errno(err)
	}
	return n.newChild(ctx, a, out), 0
}

// Symlink creates a symbolic link.
func (n *Node) Symlink(ctx context.Context, target, name string, out *gofuse.EntryOut) (_ *fs.Inode, errno syscall.Errno) {
	defer n.s.guard("symlink", &errno, time.Now())
	a, err := n.s.ofs.Symlink(n.ino(), name, target, creator(ctx))
	if err != nil {
		return nil, overlay.Errno(err)
	}
	return n.newChild(ctx, a, out), 0
}

// Readlink returns the link target.
func (n *Node) Readlink(ctx context.Context) (_ []byte, errno syscall.Errno) {
	defer n.s.guard("readlink", &errno, time.Now())
	t, err := n.s.ofs.Readlink(n.ino())
	if err != nil {
		return nil, overlay.Errno(err)
	}
	return []byte(t), 0
}

// Getxattr returns an attribute; with an empty dest, its size.
func (n *Node) Getxattr(ctx context.Context, attr string, dest []byte) (_ uint32, errno syscall.Errno) {
	defer n.s.guard("getxattr", &errno, time.Now())
	v, err := n.s.ofs.GetXattr(n.ino(), attr)
	if err != nil {
		return 0, overlay.Errno(err)
	}
	if len(dest) == 0 {
		return uint32(len(v)), 0
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// Setxattr sets an attribute.
func (n *Node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) (errno syscall.Errno) {
	defer n.s.guard("setxattr", &errno, time.Now())
	if err := n.s.ofs.SetXattr(n.ino(), attr, data, flags, false); err != nil {
		return overlay.Errno(err)
	}
	if attr == "system.posix_acl_access" {
		// An access ACL sets the mode bits, behind the kernel's back (it
		// does not invalidate attributes here without FUSE_POSIX_ACL,
		// which go-fuse does not negotiate): with attributes cached for
		// an hour, permissions the ACL revoked would keep being granted.
		n.NotifyContent(-1, 0)
	}
	return 0
}

// Removexattr removes an attribute.
func (n *Node) Removexattr(ctx context.Context, attr string) (errno syscall.Errno) {
	defer n.s.guard("removexattr", &errno, time.Now())
	return overlay.Errno(n.s.ofs.SetXattr(n.ino(), attr, nil, 0, true))
}

// Listxattr lists attribute names, NUL-terminated.
func (n *Node) Listxattr(ctx context.Context, dest []byte) (_ uint32, errno syscall.Errno) {
	defer n.s.guard("listxattr", &errno, time.Now())
	names, err := n.s.ofs.ListXattr(n.ino())
	if err != nil {
		return 0, overlay.Errno(err)
	}
	var b []byte
	for _, nm := range names {
		b = append(b, nm...)
		b = append(b, 0)
	}
	if len(dest) == 0 {
		return uint32(len(b)), 0
	}
	if len(dest) < len(b) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

// Statfs reports the free space of the repository's filesystem.
func (n *Node) Statfs(ctx context.Context, out *gofuse.StatfsOut) (errno syscall.Errno) {
	defer n.s.guard("statfs", &errno, time.Now())
	st, err := n.s.ofs.Statfs()
	if err != nil {
		return overlay.Errno(err)
	}
	out.FromStatfsT(&st)
	return 0
}

// Fsync on a node without a handle (fsync of a directory or O_PATH).
func (n *Node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) (errno syscall.Errno) {
	defer n.s.guard("fsync", &errno, time.Now())
	return overlay.Errno(n.s.ofs.Fsync(n.ino()))
}

// handle is an open file.
type handle struct {
	s   *shared
	ino uint64
}

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (_ gofuse.ReadResult, errno syscall.Errno) {
	defer h.s.guard("read", &errno, time.Now())
	k, err := h.s.ofs.Read(h.ino, dest, off)
	if err != nil {
		return nil, overlay.Errno(err)
	}
	return gofuse.ReadResultData(dest[:k]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (_ uint32, errno syscall.Errno) {
	defer h.s.guard("write", &errno, time.Now())
	k, err := h.s.ofs.Write(h.ino, data, off)
	if err != nil {
		return uint32(k), overlay.Errno(err)
	}
	return uint32(k), 0
}

func (h *handle) Flush(ctx context.Context) (errno syscall.Errno) {
	defer h.s.guard("flush", &errno, time.Now())
	return overlay.Errno(h.s.ofs.Flush(h.ino))
}

func (h *handle) Fsync(ctx context.Context, flags uint32) (errno syscall.Errno) {
	defer h.s.guard("fsync", &errno, time.Now())
	return overlay.Errno(h.s.ofs.Fsync(h.ino))
}

func (h *handle) Release(ctx context.Context) (errno syscall.Errno) {
	defer h.s.guard("release", &errno, time.Now())
	h.s.ofs.Released(h.ino)
	return 0
}

func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (_ uint64, errno syscall.Errno) {
	defer h.s.guard("lseek", &errno, time.Now())
	const seekData, seekHole = 3, 4
	if whence != seekData && whence != seekHole {
		return 0, syscall.EINVAL
	}
	o, err := h.s.ofs.SeekData(h.ino, int64(off), whence == seekHole)
	if err != nil {
		return 0, overlay.Errno(err)
	}
	return uint64(o), 0
}

func (h *handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) (errno syscall.Errno) {
	defer h.s.guard("fallocate", &errno, time.Now())
	keep := mode&unix.FALLOC_FL_KEEP_SIZE != 0
	switch mode &^ unix.FALLOC_FL_KEEP_SIZE {
	case 0:
		return overlay.Errno(h.s.ofs.Allocate(h.ino, int64(off), int64(size), keep))
	case unix.FALLOC_FL_PUNCH_HOLE:
		if !keep {
			return syscall.EOPNOTSUPP // as Linux: a hole keeps the size
		}
		return overlay.Errno(h.s.ofs.ZeroRange(h.ino, int64(off), int64(size), true))
	case unix.FALLOC_FL_ZERO_RANGE:
		return overlay.Errno(h.s.ofs.ZeroRange(h.ino, int64(off), int64(size), keep))
	}
	return syscall.EOPNOTSUPP // collapse, insert, unshare
}

// raiseReadAhead sets the kernel's read-ahead for the FUSE mount at dir to
// bytes. The kernel caps a FUSE mount's read-ahead at the default 128 KiB
// whatever the server offers in INIT, so a sequential read arrives as
// 128 KiB requests; at 1 MiB the same read takes a third less time here.
// The setting belongs to the mount's own backing device and goes with it.
// Only root may write it.
func raiseReadAhead(dir string, bytes int) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return err
	}
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	return os.WriteFile(p, []byte(strconv.Itoa(bytes>>10)), 0)
}
