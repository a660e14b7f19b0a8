package overlay

import (
	"iter"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/policy"
)

// get returns a node by number; ns must be held.
func (fs *FS) get(ino uint64) (*inode, error) {
	n := fs.inodes[ino]
	if n == nil || n.deleted {
		return nil, errNoEnt
	}
	return n, nil
}

// lowerEntry finds name in a directory's lower tree.
func (fs *FS) lowerEntry(d *inode, name string) (*objects.Entry, error) {
	if d.lowerTree.IsZero() {
		return nil, nil
	}
	t, err := fs.r.LoadTree(d.lowerTree)
	if err != nil {
		return nil, fs.ioErr("read directory", err)
	}
	e, ok := t.Find(name)
	if !ok {
		return nil, nil
	}
	return e, nil
}

// child resolves name in directory d to a node; ns must be held (read or
// write). Lower nodes are materialised on first lookup.
func (fs *FS) child(d *inode, name string) (*inode, error) {
	if d.typ != objects.TypeDir {
		return nil, errNotDir
	}
	if ino, ok := d.dirents[name]; ok {
		if ino == 0 {
			return nil, errNoEnt
		}
		n, err := fs.get(ino)
		if err != nil {
			return nil, err
		}
		return fs.admit(d, name, n)
	}
	e, err := fs.lowerEntry(d, name)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, errNoEnt
	}
	ino := lowerIno(d.ino, name)
	if n := fs.inodes[ino]; n != nil {
		if n.deleted {
			return nil, errNoEnt
		}
		return fs.admit(d, name, n)
	}
	n := newLowerInode(d.ino, e, fs.opts.Owner)
	if n.typ == objects.TypeDir {
		n.nlink = 2 + fs.subdirs(n)
	}
	fs.inodes[ino] = n
	fs.xattrMem.Add(xattrBytes(n.xattrs))
	return fs.admit(d, name, n)
}

// subdirs counts the directories directly in d, which a directory's link
// count adds to its 2 (each one's ".." links it): those of its lower tree
// no upper entry replaced or removed, and its upper ones, less those the
// path policy hides (the count must not tell they are there; no one can
// make or move one into a hidden name, so linkSubdir keeps it so). ns
// must be held. A lower tree that cannot be read counts none; listing the
// directory reports the damage.
func (fs *FS) subdirs(d *inode) uint32 {
	var n uint32
	if !d.lowerTree.IsZero() {
		if t, err := fs.r.LoadTree(d.lowerTree); err == nil {
			for _, e := range t.Entries {
				if e.Type != objects.TypeDir {
					continue
				}
				if _, replaced := d.dirents[e.Name]; replaced {
					continue
				}
				if c := fs.inodes[lowerIno(d.ino, e.Name)]; c != nil && c.deleted {
					continue
				}
				if fs.decide(d, e.Name, true) == policy.None {
					continue
				}
				n++
			}
		}
	}
	for name, c := range fs.liveDirents(d) {
		if c.typ == objects.TypeDir && fs.decide(d, name, true) != policy.None {
			n++
		}
	}
	return n
}

// linkSubdir changes directory d's link count by delta: a subdirectory
// made, removed or moved in or out.
func (fs *FS) linkSubdir(d *inode, delta int) {
	d.mu.Lock()
	if d.nlink > 0 { // not removed
		d.nlink = uint32(max(int(d.nlink)+delta, 2))
	}
	d.mu.Unlock()
	fs.p.dirtyInode(d)
}

// admit applies the path policy to a node reached as name in d: hidden
// names do not exist; others remember what they allow.
func (fs *FS) admit(d *inode, name string, n *inode) (*inode, error) {
	perm := fs.decide(d, name, n.typ == objects.TypeDir)
	if perm == policy.None {
		return nil, errNoEnt
	}
	n.mu.Lock()
	n.perm = perm
	n.mu.Unlock()
	return n, nil
}

// Lookup finds name in directory dir.
func (fs *FS) Lookup(dir uint64, name string) (Attr, error) {
	if len(name) > objects.MaxNameLen {
		return Attr{}, errNameLong
	}
	// Materialising a lower node writes the inode table: take ns for writing.
	fs.ns.Lock()
	defer fs.ns.Unlock()
	d, err := fs.get(dir)
	if err != nil {
		return Attr{}, err
	}
	n, err := fs.child(d, name)
	if err != nil {
		return Attr{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	fs.baseZeroRuns(n) // once per node: st_blocks counts its holes
	return n.attr(), nil
}

// bury moves n, made in this session and freed, to fs.dead until the
// kernel forgets it; fs.ns must be held for writing. Only its attributes
// may still be asked for (fstat of a descriptor the kernel holds without
// an open, such as O_PATH, or a working directory), and an open the
// kernel looked it up for before it was freed (Open revives it). Nothing
// else looks it up by number (the fallbacks that look for deleted lower
// entries use lower numbers), and the persister holds it until its
// deletion is journaled. It keeps no data, only the names of its blocks:
// freed nodes kept whole until the mount ended made art's memory grow
// with every temporary file a session made (200,000 files created and
// deleted: 284 MB). (Should the kernel's forget be served before the last
// release, it stays until the mount ends.)
func (fs *FS) bury(n *inode) {
	n.reader = nil
	fs.dead[n.ino] = n
	delete(fs.inodes, n.ino)
}

// Forget is the kernel forgetting a node: a freed one (dead) is then
// gone for good. Called for every node, live or not.
func (fs *FS) Forget(ino uint64) {
	fs.ns.Lock()
	delete(fs.dead, ino)
	fs.ns.Unlock()
}

// NodeCounts reports how many nodes the overlay holds in memory, and how
// many freed ones still wait for the kernel to forget them (diagnostics,
// tests).
func (fs *FS) NodeCounts() (nodes, freed int) {
	fs.ns.RLock()
	defer fs.ns.RUnlock()
	return len(fs.inodes), len(fs.dead)
}

// Getattr returns a node's attributes.
func (fs *FS) Getattr(ino uint64) (Attr, error) {
	fs.ns.RLock()
	n := fs.inodes[ino]
	if n == nil {
		n = fs.dead[ino]
	}
	fs.ns.RUnlock()
	if n == nil {
		return Attr{}, errNoEnt
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	fs.baseZeroRuns(n) // once per node: st_blocks counts its holes
	return n.attr(), nil
}

// Readdir lists a directory: lower entries not hidden or replaced, then
// upper entries, sorted by name.
func (fs *FS) Readdir(dir uint64) ([]DirEntry, error) {
	fs.ns.RLock()
	defer fs.ns.RUnlock()
	d, err := fs.get(dir)
	if err != nil {
		return nil, err
	}
	if d.typ != objects.TypeDir {
		return nil, errNotDir
	}
	ents, err := fs.readdirAll(d)
	if err != nil {
		return nil, err
	}
	if pol := fs.opts.Policy; pol != nil && !pol.IsFullAccess() {
		kept := ents[:0]
		for _, e := range ents {
			if fs.decide(d, e.Name, e.Type == objects.TypeDir) != policy.None {
				kept = append(kept, e)
			}
		}
		ents = kept
	}
	return ents, nil
}

// readdirAll lists every entry of a directory, hidden ones included; ns
// must be held.
func (fs *FS) readdirAll(d *inode) ([]DirEntry, error) {
	var out []DirEntry
	if !d.lowerTree.IsZero() {
		t, err := fs.r.LoadTree(d.lowerTree)
		if err != nil {
			return nil, fs.ioErr("read directory", err)
		}
		out = make([]DirEntry, 0, len(t.Entries)+len(d.dirents))
		for i := range t.Entries {
			e := &t.Entries[i]
			if _, changed := d.dirents[e.Name]; changed {
				continue
			}
			ino := lowerIno(d.ino, e.Name)
			typ := e.Type
			if n := fs.inodes[ino]; n != nil {
				if n.deleted {
					continue
				}
				typ = n.typ
			}
			out = append(out, DirEntry{Name: e.Name, Ino: ino, Type: typ})
		}
	}
	for name, n := range fs.liveDirents(d) {
		out = append(out, DirEntry{Name: name, Ino: n.ino, Type: n.typ})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// liveDirents yields the names d's upper layer gives to nodes that exist
// (not whiteouts, not deleted nodes), in no order; ns must be held.
func (fs *FS) liveDirents(d *inode) iter.Seq2[string, *inode] {
	return func(yield func(string, *inode) bool) {
		for name, ino := range d.dirents {
			if ino == 0 {
				continue
			}
			n := fs.inodes[ino]
			if n == nil || n.deleted {
				continue
			}
			if !yield(name, n) {
				return
			}
		}
	}
}

// isEmpty reports whether a directory has no visible entries.
func (fs *FS) isEmpty(d *inode) (bool, error) {
	for _, ino := range d.dirents {
		if ino != 0 {
			if n := fs.inodes[ino]; n != nil && !n.deleted {
				return false, nil
			}
		}
	}
	if d.lowerTree.IsZero() {
		return true, nil
	}
	t, err := fs.r.LoadTree(d.lowerTree)
	if err != nil {
		return false, fs.ioErr("read directory", err)
	}
	for _, e := range t.Entries {
		if _, changed := d.dirents[e.Name]; changed {
			continue
		}
		if n := fs.inodes[lowerIno(d.ino, e.Name)]; n != nil && n.deleted {
			continue
		}
		return false, nil
	}
	return true, nil
}

// copyUp makes sure n and its directory chain have upper rows, and that
// n's directory names it explicitly. ns must be held for writing.
func (fs *FS) copyUp(n *inode) {
	if n.upper {
		return
	}
	if n.ino != RootIno {
		if p := fs.inodes[n.parent]; p != nil {
			fs.copyUp(p)
			if p.dirents == nil {
				p.dirents = map[string]uint64{}
			}
			if _, ok := p.dirents[n.name]; !ok {
				p.dirents[n.name] = n.ino
				fs.p.dirtyDirent(p.ino, n.name)
			}
		}
	}
	n.upper = true
	fs.p.dirtyInode(n)
}

// touchDir updates a directory's times after a change of its entries.
func (fs *FS) touchDir(d *inode) {
	now := time.Now().UnixNano()
	d.mu.Lock()
	d.mtime, d.ctime = now, now
	d.mu.Unlock()
	fs.copyUp(d)
	fs.p.dirtyInode(d)
}

// setDirent records name → ino in d (ino 0 hides a lower entry).
func (fs *FS) setDirent(d *inode, name string, ino uint64) {
	if d.dirents == nil {
		d.dirents = map[string]uint64{}
	}
	d.dirents[name] = ino
	fs.p.dirtyDirent(d.ino, name)
}

// removeName removes name from d: a whiteout if the lower tree has it,
// otherwise the dirent goes away.
func (fs *FS) removeName(d *inode, name string) error {
	e, err := fs.lowerEntry(d, name)
	if err != nil {
		return err
	}
	if e != nil {
		fs.setDirent(d, name, 0)
	} else {
		delete(d.dirents, name)
		fs.p.dirtyDirent(d.ino, name)
	}
	return nil
}

// dropLink decrements a node's link count and frees it when nothing
// refers to it any more.
func (fs *FS) dropLink(n *inode) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.typ == objects.TypeDir {
		n.nlink = 0
	} else if n.nlink > 0 {
		n.nlink--
	}
	n.ctime = time.Now().UnixNano()
	fs.maybeFree(n)
}

// maybeFree marks a node deleted when it has no links and no open
// handles; n.mu must be held, and fs.ns for writing.
func (fs *FS) maybeFree(n *inode) {
	if n.nlink == 0 && n.opens == 0 && !n.deleted {
		n.deleted = true
		// Its content stays named (blocks, base): the kernel may have
		// looked it up just before the rename that freed it, and open
		// it now (Open); the data is stored (a close stores it), and
		// the blocks map is all it holds.
		fs.clearDirty(n)
		fs.xattrMem.Add(-xattrBytes(n.xattrs))
		n.xattrs = nil
		fs.p.dirtyInodeLocked(n)
		if n.ino&lowerBit == 0 {
			fs.bury(n)
		}
	} else if n.upper {
		fs.p.dirtyInodeLocked(n)
	}
}

// newNode allocates an upper node in directory d under name.
func (fs *FS) newNode(d *inode, name string, typ objects.Type, mode uint32, owner Owner) *inode {
	now := time.Now().UnixNano()
	ino := fs.nextIno
	fs.nextIno++
	n := &inode{ino: ino, typ: typ, mode: mode & objects.PermMask, nlink: 1, mtime: now, ctime: now, atime: now, upper: true, parent: d.ino, name: name, perm: policy.Write, uid: owner.UID, gid: owner.GID}
	if typ == objects.TypeDir {
		n.nlink = 2
		n.dirents = map[string]uint64{}
		fs.linkSubdir(d, +1)
	}
	fs.inodes[ino] = n
	fs.copyUp(d)
	fs.setDirent(d, name, ino)
	fs.touchDir(d)
	fs.p.dirtyInode(n)
	return n
}

// newOwner is the owner of a node as creates in directory d, as on a local
// disk (inode_init_owner): the creator's user, and the directory's group
// when the directory is set-group-ID, else the creator's. d.mu must be
// held.
func (fs *FS) newOwner(d *inode, as *Owner) Owner {
	o := fs.opts.Owner
	if as != nil {
		o = *as
	}
	if d.mode&syscall.S_ISGID != 0 {
		o.GID = d.gid
	}
	return o
}

func (fs *FS) checkWritable() error {
	if fs.opts.ReadOnly {
		return errROFS
	}
	return nil
}

// create makes a new node for as (nil: the mount's owner); ns is taken
// here.
func (fs *FS) create(dir uint64, name string, typ objects.Type, mode uint32, target string, as *Owner) (Attr, error) {
	if err := fs.checkWritable(); err != nil {
		return Attr{}, err
	}
	if !objects.ValidName(name) {
		if len(name) > objects.MaxNameLen {
			return Attr{}, errNameLong
		}
		return Attr{}, errInval
	}
	fs.ns.Lock()
	defer fs.ns.Unlock()
	d, err := fs.get(dir)
	if err != nil {
		return Attr{}, err
	}
	if d.typ != objects.TypeDir {
		return Attr{}, errNotDir
	}
	if _, err := fs.child(d, name); err == nil {
		return Attr{}, errExist
	} else if err != errNoEnt {
		return Attr{}, err
	}
	if err := fs.checkNewName(d, name, typ == objects.TypeDir); err != nil {
		return Attr{}, err
	}
	// A directory created in a set-group-ID directory inherits the bit,
	// as on every local filesystem (inode_init_owner).
	d.mu.Lock()
	owner := fs.newOwner(d, as)
	if typ == objects.TypeDir && d.mode&syscall.S_ISGID != 0 {
		mode |= syscall.S_ISGID
	}
	d.mu.Unlock()
	n := fs.newNode(d, name, typ, mode, owner)
	n.target = target
	if typ == objects.TypeSymlink {
		n.size = int64(len(target))
	}
	return n.attr(), nil
}

// Mkdir creates a directory. A directory created where a lower one was
// deleted is opaque: it starts empty.
func (fs *FS) Mkdir(dir uint64, name string, mode uint32, as *Owner) (Attr, error) {
	return fs.create(dir, name, objects.TypeDir, mode, "", as)
}

// Create creates an empty regular file and opens it.
func (fs *FS) Create(dir uint64, name string, mode uint32, as *Owner) (Attr, error) {
	a, err := fs.create(dir, name, objects.TypeFile, mode, "", as)
	if err == nil {
		fs.Opened(a.Ino)
	}
	return a, err
}

// Tmpfile creates an open regular file in no directory (open with
// O_TMPFILE): it gets a name only if it is linked into place, and is freed
// on its last close otherwise.
func (fs *FS) Tmpfile(dir uint64, mode uint32, as *Owner) (Attr, error) {
	if err := fs.checkWritable(); err != nil {
		return Attr{}, err
	}
	fs.ns.Lock()
	defer fs.ns.Unlock()
	d, err := fs.get(dir)
	if err != nil {
		return Attr{}, err
	}
	if d.typ != objects.TypeDir {
		return Attr{}, errNotDir
	}
	now := time.Now().UnixNano()
	ino := fs.nextIno
	fs.nextIno++
	if err := fs.canChange(d, nil); err != nil {
		return Attr{}, err
	}
	d.mu.Lock()
	owner := fs.newOwner(d, as)
	d.mu.Unlock()
	n := &inode{ino: ino, typ: objects.TypeFile, mode: mode & objects.PermMask, mtime: now, ctime: now, atime: now, upper: true, opens: 1, perm: policy.Write, uid: owner.UID, gid: owner.GID}
	fs.inodes[ino] = n
	fs.p.dirtyInode(n)
	return n.attr(), nil
}

// Mkfifo creates a named pipe.
func (fs *FS) Mkfifo(dir uint64, name string, mode uint32, as *Owner) (Attr, error) {
	return fs.create(dir, name, objects.TypeFifo, mode, "", as)
}

// Mknod creates a socket (the inode a unix socket binds to) or a device
// node; both last for the session only (see TypeSocket).
func (fs *FS) Mknod(dir uint64, name string, typ objects.Type, mode, rdev uint32, as *Owner) (Attr, error) {
	switch typ {
	case TypeSocket:
		return fs.create(dir, name, typ, mode, "", as)
	case TypeCharDev, TypeBlockDev:
		return fs.create(dir, name, typ, mode, strconv.FormatUint(uint64(rdev), 10), as)
	}
	return Attr{}, errInval
}

// Symlink creates a symbolic link; the target is stored verbatim.
func (fs *FS) Symlink(dir uint64, name, target string, as *Owner) (Attr, error) {
	if target == "" || len(target) > objects.MaxTargetLen {
		return Attr{}, errNameLong
	}
	return fs.create(dir, name, objects.TypeSymlink, 0o777, target, as)
}

// Readlink returns a symlink's target.
func (fs *FS) Readlink(ino uint64) (string, error) {
	fs.ns.RLock()
	n, err := fs.get(ino)
	fs.ns.RUnlock()
	if err != nil {
		return "", err
	}
	if n.typ != objects.TypeSymlink {
		return "", errInval
	}
	n.mu.Lock() // Lookup updates perm under it
	perm := n.perm
	n.mu.Unlock()
	if perm <= policy.View {
		return "", errAccess // a link's target is its content
	}
	return n.target, nil
}

// Link adds a hard link to a non-directory.
func (fs *FS) Link(ino, dir uint64, name string) (Attr, error) {
	if err := fs.checkWritable(); err != nil {
		return Attr{}, err
	}
	if !objects.ValidName(name) {
		return Attr{}, errInval
	}
	fs.ns.Lock()
	defer fs.ns.Unlock()
	n, err := fs.get(ino)
	if err != nil {
		return Attr{}, err
	}
	if n.typ == objects.TypeDir {
		return Attr{}, errPerm
	}
	d, err := fs.get(dir)
	if err != nil {
		return Attr{}, err
	}
	if _, err := fs.child(d, name); err == nil {
		return Attr{}, errExist
	} else if err != errNoEnt {
		return Attr{}, err
	}
	// Protected content keeps its one name: no second name for it.
	if err := fs.canChange(n, nil); err != nil {
		return Attr{}, err
	}
	if err := fs.checkNewName(d, name, false); err != nil {
		return Attr{}, err
	}
	fs.copyUp(n)
	fs.copyUp(d)
	fs.setDirent(d, name, n.ino)
	fs.touchDir(d)
	n.mu.Lock()
	n.nlink++
	n.ctime = time.Now().UnixNano()
	a := n.attr()
	n.mu.Unlock()
	fs.p.dirtyInode(n)
	return a, nil
}

// Unlink removes a non-directory name.
func (fs *FS) Unlink(dir uint64, name string) error {
	return fs.remove(dir, name, false)
}

// Rmdir removes an empty directory.
func (fs *FS) Rmdir(dir uint64, name string) error {
	return fs.remove(dir, name, true)
}

func (fs *FS) remove(dir uint64, name string, isDir bool) error {
	if err := fs.checkWritable(); err != nil {
		return err
	}
	fs.ns.Lock()
	defer fs.ns.Unlock()
	d, err := fs.get(dir)
	if err != nil {
		return err
	}
	n, err := fs.child(d, name)
	if err != nil {
		return err
	}
	if err := fs.canChange(d, func() string { return fs.pathOf(d) }); err != nil {
		return err
	}
	if err := fs.canChange(n, func() string { return joinPath(fs.pathOf(d), name) }); err != nil {
		return err
	}
	if isDir {
		if n.typ != objects.TypeDir {
			return errNotDir
		}
		empty, err := fs.isEmpty(n)
		if err != nil {
			return err
		}
		if !empty {
			return errNotEmpty
		}
	} else if n.typ == objects.TypeDir {
		return errIsDir
	}
	fs.copyUp(d)
	if err := fs.removeName(d, name); err != nil {
		return err
	}
	if isDir {
		fs.linkSubdir(d, -1)
	}
	fs.touchDir(d)
	if n.upper || n.nlink > 1 || n.opens > 0 {
		fs.copyUp(n)
	}
	fs.dropLink(n)
	if !n.upper && n.deleted {
		// A lower node that was never copied up: the whiteout is enough,
		// but the in-memory node must stay marked deleted for open handles.
		n.deleted = true
	}
	return nil
}

// Rename flags (as renameat2).
const (
	RenameNoReplace = 1 << 0
	RenameExchange  = 1 << 1
)

// Rename moves a name, replacing or exchanging with the target as flags say.
func (fs *FS) Rename(dir uint64, name string, newDir uint64, newName string, flags uint32) error {
	if err := fs.checkWritable(); err != nil {
		return err
	}
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return errInval
	}
	if !objects.ValidName(newName) {
		return errInval
	}
	fs.ns.Lock()
	defer fs.ns.Unlock()
	d, err := fs.get(dir)
	if err != nil {
		return err
	}
	nd, err := fs.get(newDir)
	if err != nil {
		return err
	}
	if nd.typ != objects.TypeDir {
		return errNotDir
	}
	src, err := fs.child(d, name)
	if err != nil {
		return err
	}
	dst, err := fs.child(nd, newName)
	if err != nil && err != errNoEnt {
		return err
	}
	if dst == src {
		return nil // same node (or hard links to it): nothing to do
	}
	// The policy: both names and both directories must be writable, and
	// a directory moves only if nothing below it is protected.
	if err := fs.canChange(src, nil); err != nil {
		return err
	}
	if err := fs.canChange(d, nil); err != nil {
		return err
	}
	if err := fs.checkNewName(nd, newName, src.typ == objects.TypeDir); err != nil {
		return err
	}
	if dst != nil {
		if err := fs.canChange(dst, nil); err != nil {
			return err
		}
		if dst.typ == objects.TypeDir {
			if err := fs.checkSubtree(dst); err != nil {
				return err
			}
		}
	}
	if src.typ == objects.TypeDir {
		if err := fs.checkSubtree(src); err != nil {
			return err
		}
	}
	if flags&RenameExchange != 0 && fs.decide(d, name, dst != nil && dst.typ == objects.TypeDir) < policy.Write {
		return errAccess
	}
	// A directory must not move below itself.
	if src.typ == objects.TypeDir {
		for p := nd; ; {
			if p == src {
				return errInval
			}
			if p.ino == RootIno {
				break
			}
			pp := fs.inodes[p.parent]
			if pp == nil {
				break
			}
			p = pp
		}
	}
	if flags&RenameExchange != 0 {
		if dst == nil {
			return errNoEnt
		}
		if dst.typ == objects.TypeDir {
			for p := d; ; {
				if p == dst {
					return errInval
				}
				if p.ino == RootIno {
					break
				}
				pp := fs.inodes[p.parent]
				if pp == nil {
					break
				}
				p = pp
			}
		}
		fs.copyUp(src)
		fs.copyUp(dst)
		fs.copyUp(d)
		fs.copyUp(nd)
		fs.setDirent(d, name, dst.ino)
		fs.setDirent(nd, newName, src.ino)
		fs.relocate(src, nd, newName)
		fs.relocate(dst, d, name)
		if d != nd && (src.typ == objects.TypeDir) != (dst.typ == objects.TypeDir) {
			if src.typ == objects.TypeDir { // it moved to nd, dst's non-directory to d
				fs.linkSubdir(d, -1)
				fs.linkSubdir(nd, +1)
			} else {
				fs.linkSubdir(nd, -1)
				fs.linkSubdir(d, +1)
			}
		}
		fs.touchDir(d)
		fs.touchDir(nd)
		return nil
	}
	if dst != nil {
		if flags&RenameNoReplace != 0 {
			return errExist
		}
		switch {
		case src.typ == objects.TypeDir && dst.typ != objects.TypeDir:
			return errNotDir
		case src.typ != objects.TypeDir && dst.typ == objects.TypeDir:
			return errIsDir
		case dst.typ == objects.TypeDir:
			empty, err := fs.isEmpty(dst)
			if err != nil {
				return err
			}
			if !empty {
				return errNotEmpty
			}
		}
	}
	fs.copyUp(src)
	fs.copyUp(d)
	fs.copyUp(nd)
	if err := fs.removeName(d, name); err != nil {
		return err
	}
	fs.setDirent(nd, newName, src.ino)
	fs.relocate(src, nd, newName)
	if src.typ == objects.TypeDir && d != nd {
		fs.linkSubdir(d, -1)
		fs.linkSubdir(nd, +1)
	}
	if dst != nil {
		if dst.typ == objects.TypeDir {
			fs.linkSubdir(nd, -1) // replaced
		}
		if dst.upper || dst.nlink > 1 || dst.opens > 0 {
			fs.copyUp(dst)
		}
		fs.dropLink(dst)
	}
	fs.touchDir(d)
	if nd != d {
		fs.touchDir(nd)
	}
	src.mu.Lock()
	src.ctime = time.Now().UnixNano()
	src.mu.Unlock()
	fs.p.dirtyInode(src)
	return nil
}

// relocate records a node's new place (directories track their parent).
func (fs *FS) relocate(n *inode, d *inode, name string) {
	n.parent, n.name = d.ino, name
	fs.p.dirtyInode(n)
}
