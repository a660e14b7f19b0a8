package overlay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zeebo/blake3"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/policy"
	"github.com/artproject/art/repo"
)

// BlockSize is the granularity of file data in the upper layer.
const BlockSize = 64 << 10

// RootIno is the inode number of the home directory.
const RootIno uint64 = 1

const lowerBit = uint64(1) << 62

// Attr is what stat reports for a node.
type Attr struct {
	Ino   uint64
	Type  objects.Type
	Mode  uint32 // permission bits
	Nlink uint32
	Size  int64
	Rdev  uint32 // device nodes: the device number (Linux encoding)
	UID   uint32 // owner (see Owner)
	GID   uint32
	Atime int64 // ns
	Mtime int64
	Ctime int64
	// Alloc is about how many bytes a file occupies (st_blocks): the
	// visible lower content plus the blocks written since; holes take
	// nothing.
	Alloc int64
}

// DirEntry is one name in a directory listing.
type DirEntry struct {
	Name string
	Ino  uint64
	Type objects.Type
}

// Options configure a mounted worktree.
type Options struct {
	// Log receives internal errors (corrupt objects, failed persistence).
	Log *log.Logger
	// ReadOnly refuses every change with EROFS.
	ReadOnly bool
	// Policy decides per path what the agent may do; nil is full access.
	Policy *policy.Policy
	// MaxHeld is how much written data may wait in memory for SQLite
	// before writers wait for it (0: 64 MiB; see persister.throttle).
	MaxHeld int64
	// MaxDirty is how much unflushed data all files may hold in memory
	// before writes store it (0: 256 MiB; see dirtyTotalLimit).
	MaxDirty int64
	// Owner owns the lower nodes and every node no one gave another
	// owner: the mount's user.
	Owner Owner
}

// Owner is a node's user and group. Trees record no owner (as git), so
// every committed node belongs to the mount's owner (Options.Owner); in
// the upper layer a node belongs to whoever created it, or was given
// with chown, for the session: root on the host, running pjdfstest or
// making files for another user, gets what a local disk would do.
type Owner struct{ UID, GID uint32 }

type inode struct {
	mu sync.Mutex

	ino    uint64
	typ    objects.Type
	mode   uint32
	nlink  uint32
	size   int64
	atime  int64
	mtime  int64
	ctime  int64
	target string
	xattrs []objects.Xattr
	uid    uint32
	gid    uint32

	// perm is what the policy allows on the name the node was last reached
	// by (policy.go); the zero value, none, hides it.
	perm policy.Perm
	// mark is the persister's change counter at the node's last change.
	mark uint64
	// upper is set once the node has an upper inode row; ns guards it.
	upper bool
	// deleted is set when the node is gone (nlink 0 and no opens).
	deleted bool

	// Files: the lower content the node started from and how much of it
	// is still visible; blocks written since (persisted and dirty).
	base     objects.ID
	baseSize int64
	blocks   blockIDs
	dirty    map[int64][]byte
	// storedSize is the size the stored blocks stand for while dirty
	// holds data (the size when the first dirty block appeared, cut by
	// truncation): the journal records no more, so a crash never turns
	// data only in memory into a stretch of zeros.
	storedSize int64
	reader     *objects.FileReader // lazily opened reader of base
	opens      int
	// zeroRuns are the stretches of base stored as zero chunks (holes
	// when it was committed: pull leaves them holes), sorted; known when
	// zeroOf is base (baseZeroRuns).
	zeroRuns [][2]int64
	zeroOf   objects.ID

	// Directories: the lower tree (zero when opaque or new) and the
	// entries changed in the upper layer (ino 0 = whiteout).
	lowerTree objects.ID
	dirents   map[string]uint64
	// parent and name locate a directory, or a lower node not yet copied
	// up (which can only be where the lower tree has it). Files copied up
	// need no location: their directories hold explicit dirents.
	parent uint64
	name   string
}

// Sockets and device nodes live only in a worktree's upper layer, for the
// session: a socket means nothing once its listener is gone, and a device
// node is the host's business, so a commit leaves them out (as push skips
// them on the host). They exist so that what works on a local disk works
// here: a program binding a unix socket in its home (git's fsmonitor,
// gpg-agent, language servers), root running mknod. The numbers are not
// tree types (objects rejects them); the upper layer stores them in its
// type column, and a device number in the target column, in decimal.
const (
	TypeSocket   objects.Type = 16
	TypeCharDev  objects.Type = 17
	TypeBlockDev objects.Type = 18
)

// sessionOnly reports whether a node of type t is left out of commits.
func sessionOnly(t objects.Type) bool {
	return t == TypeSocket || t == TypeCharDev || t == TypeBlockDev
}

func (n *inode) attr() Attr {
	a := Attr{Ino: n.ino, Type: n.typ, Mode: n.mode, Nlink: n.nlink, Size: n.size, Atime: n.atime, Mtime: n.mtime, Ctime: n.ctime, UID: n.uid, GID: n.gid}
	switch n.typ {
	case TypeCharDev, TypeBlockDev:
		rdev, _ := strconv.ParseUint(n.target, 10, 32)
		a.Rdev = uint32(rdev)
	case objects.TypeSymlink:
		a.Size = int64(len(n.target))
	case objects.TypeFile:
		a.Alloc = min(n.baseAlloc()+int64(n.blocks.len()+len(n.dirty))*BlockSize, n.size)
	}
	return a
}

// baseAlloc is how much of the visible base content is data, not zero
// chunks (as far as known: baseZeroRuns).
func (n *inode) baseAlloc() int64 {
	a := n.baseSize
	if n.zeroOf == n.base && !n.base.IsZero() {
		for _, r := range n.zeroRuns {
			a -= max(0, min(r[1], n.baseSize)-r[0])
		}
	}
	return a
}

// minHoleScan is the base size from which a file's chunk list is read for
// holes: smaller files are taken as all data, without the query.
const minHoleScan = 2 * objects.MaxChunk

// baseZeroRuns finds the stretches of n's base content stored as zero
// chunks, which st_blocks and SEEK_HOLE report as holes: a sparse file was
// reported all data once committed (du showed 5 GiB for 640 KiB written,
// and cp, tar -S and rsync -S copied every zero). n.mu must be held.
func (fs *FS) baseZeroRuns(n *inode) [][2]int64 {
	if n.typ != objects.TypeFile || n.base.IsZero() || n.baseSize < minHoleScan {
		return nil
	}
	if n.zeroOf == n.base {
		return n.zeroRuns
	}
	fr := n.reader
	if fr == nil {
		// Not kept: a large file stat'ed, never read, would hold its
		// chunk list for the life of the mount.
		var err error
		if fr, err = objects.OpenFile(fs.r, n.base); err != nil {
			return nil // as data; the read that needs it says why
		}
	}
	refs, starts := fr.Chunks()
	zero := objects.ZeroChunk()
	var runs [][2]int64
	for i, r := range refs {
		if r.ID != zero {
			continue
		}
		if k := len(runs); k > 0 && runs[k-1][1] == starts[i] {
			runs[k-1][1] = starts[i+1]
		} else {
			runs = append(runs, [2]int64{starts[i], starts[i+1]})
		}
	}
	n.zeroOf, n.zeroRuns = n.base, runs
	return runs
}

// inZeroRun reports whether [start, end) lies inside one of runs.
func inZeroRun(runs [][2]int64, start, end int64) bool {
	i := sort.Search(len(runs), func(i int) bool { return runs[i][1] > start })
	return i < len(runs) && runs[i][0] <= start && end <= runs[i][1]
}

// FS is one mounted worktree.
type FS struct {
	r    *repo.Repo
	wt   *repo.Worktree
	opts Options
	// maxSize bounds a file's size: MaxFileSize, or less (see
	// fileSizeLimit).
	maxSize int64
	root    objects.ID // lower root tree

	ns     sync.RWMutex
	inodes map[uint64]*inode
	// dead holds the nodes made in this session and freed (maybeFree)
	// until the kernel forgets them (Forget), trimmed to their attributes
	// and the names of their content: a process may still stat one
	// through a descriptor or its working directory, and open one the
	// kernel looked up just before a rename over it freed it (Open).
	dead    map[uint64]*inode
	nextIno uint64
	// xattrMem is the size of the xattrs of the nodes in memory
	// (MaxXattrTotal).
	xattrMem atomic.Int64
	// dirtyBlocks counts the blocks in all nodes' dirty maps
	// (dirtyTotalLimit).
	dirtyBlocks atomic.Int64
	refusals    refusals // by the path policy (policy.go)

	p *persister
}

// errno values returned by the model; the FUSE adapter passes them on.
var (
	errNoEnt    = syscall.ENOENT
	errExist    = syscall.EEXIST
	errNotDir   = syscall.ENOTDIR
	errIsDir    = syscall.EISDIR
	errNotEmpty = syscall.ENOTEMPTY
	errInval    = syscall.EINVAL
	errIO       = syscall.EIO
	errROFS     = syscall.EROFS
	errAccess   = syscall.EACCES
	errPerm     = syscall.EPERM
	errNameLong = syscall.ENAMETOOLONG
	errStale    = syscall.ESTALE
)

// Open loads a worktree's upper layer over its base commit.
func Open(r *repo.Repo, wt *repo.Worktree, opts Options) (*FS, error) {
	c, err := r.LoadCommit(wt.Base)
	if err != nil {
		return nil, fmt.Errorf("open worktree #%d: %w", wt.ID, err)
	}
	if opts.Log == nil {
		opts.Log = log.Default()
	}
	fs := &FS{r: r, wt: wt, opts: opts, root: c.Tree, inodes: map[uint64]*inode{}, dead: map[uint64]*inode{}, maxSize: fileSizeLimit(r.Path)}
	now := time.Now().UnixNano()
	root := &inode{ino: RootIno, typ: objects.TypeDir, mode: 0o755, nlink: 2, lowerTree: c.Tree, mtime: now, ctime: now, atime: now, perm: policy.Write, uid: opts.Owner.UID, gid: opts.Owner.GID}
	fs.inodes[RootIno] = root
	// Changes journaled before a crash reach SQLite before anything loads.
	j, err := openJournal(r, wt)
	if err != nil {
		return nil, fmt.Errorf("open worktree #%d: %w", wt.ID, err)
	}
	if err := fs.load(); err != nil {
		j.close()
		return nil, fmt.Errorf("open worktree #%d: %w", wt.ID, err)
	}
	fs.p = newPersister(fs, j)
	return fs, nil
}

// Owner returns the mount's owner: the owner of every node no one gave
// another.
func (fs *FS) Owner() Owner { return fs.opts.Owner }

// Repo returns the repository the worktree belongs to.
func (fs *FS) Repo() *repo.Repo { return fs.r }

// Worktree returns the worktree.
func (fs *FS) Worktree() *repo.Worktree { return fs.wt }

// lowerIno derives the stable number of a lower node from its parent and name.
func lowerIno(parent uint64, name string) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], parent)
	h := blake3.New()
	h.Write(b[:])
	h.Write([]byte(name))
	var sum [8]byte
	h.Digest().Read(sum[:])
	return binary.LittleEndian.Uint64(sum[:])&(lowerBit-1) | lowerBit
}

// newLowerInode materialises a lower entry as an in-memory node of owner.
func newLowerInode(parent uint64, e *objects.Entry, owner Owner) *inode {
	n := &inode{
		ino: lowerIno(parent, e.Name), typ: e.Type, mode: e.Mode, nlink: 1,
		mtime: e.MTime, ctime: e.MTime, atime: e.MTime, target: e.Target,
		parent: parent, name: e.Name, uid: owner.UID, gid: owner.GID,
	}
	if len(e.Xattrs) > 0 {
		n.xattrs = append([]objects.Xattr(nil), e.Xattrs...)
	}
	switch e.Type {
	case objects.TypeFile:
		n.size = int64(e.Size)
		n.base, n.baseSize = e.ID, int64(e.Size)
	case objects.TypeDir:
		n.lowerTree = e.ID
		n.nlink = 2
	}
	return n
}

// logf reports an internal error with context.
func (fs *FS) logf(format string, args ...any) {
	fs.opts.Log.Printf("art overlay (worktree #%d): "+format, append([]any{fs.wt.ID}, args...)...)
}

// ioErr logs err and returns EIO: corrupt or unreadable objects never
// surface as wrong data.
func (fs *FS) ioErr(what string, err error) error {
	fs.logf("%s: %v", what, err)
	return errIO
}

// Errno converts an error from this package to a syscall.Errno.
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}
