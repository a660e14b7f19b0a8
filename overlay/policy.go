package overlay

import (
	"sync"
	"sync/atomic"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/policy"
	"github.com/artproject/art/repo"
)

// Path policies are enforced here, in the model, so they hold for every
// program in the sandbox. Every node carries the permission of the name it
// was last reached by (perm); the zero value is none, so a node that was
// somehow never decided is hidden, not exposed. Content below write can
// have only one name: linking, renaming and removing it are refused, and
// so is renaming or removing a directory above it.

// pathOf returns the home-relative path of a directory; ns must be held.
// Directories have one parent, so the chain is well defined.
func (fs *FS) pathOf(d *inode) string {
	if d.ino == RootIno {
		return ""
	}
	var parts []string
	for n := d; n != nil && n.ino != RootIno; n = fs.inodes[n.parent] {
		parts = append(parts, n.name)
		if len(parts) > 4096 {
			break // a cycle would be a bug; refuse rather than loop
		}
	}
	size := len(parts) - 1
	for _, p := range parts {
		size += len(p)
	}
	b := make([]byte, 0, size)
	for i := len(parts) - 1; i >= 0; i-- {
		b = append(b, parts[i]...)
		if i > 0 {
			b = append(b, '/')
		}
	}
	return string(b)
}

// decide returns the permission of name in directory d; ns must be held.
func (fs *FS) decide(d *inode, name string, isDir bool) policy.Perm {
	pol := fs.opts.Policy
	if pol == nil || pol.IsFullAccess() {
		return policy.Write
	}
	p := fs.pathOf(d)
	if p == "" {
		p = name
	} else {
		p += "/" + name
	}
	return pol.Decide(p, isDir)
}

// canChange reports whether the agent may change node n; EACCES if not,
// counted as a refusal (path, when not nil, gives n's path; ns must then
// be held).
func (fs *FS) canChange(n *inode, path func() string) error {
	n.mu.Lock() // Lookup updates perm under it
	perm := n.perm
	n.mu.Unlock()
	if perm < policy.Write {
		where := ""
		if path != nil {
			where = path()
		}
		fs.refused(where)
		return errAccess
	}
	return nil
}

// refusals counts the changes the path policy refused: a program sees
// only EACCES, which says nothing of a policy, so art reports them when
// the session ends (PolicyRefusals).
type refusals struct {
	n     atomic.Int64
	mu    sync.Mutex
	first string // the first refused path that was known
}

func (fs *FS) refused(path string) {
	fs.refusals.n.Add(1)
	if path != "" {
		fs.refusals.mu.Lock()
		if fs.refusals.first == "" {
			fs.refusals.first = path
		}
		fs.refusals.mu.Unlock()
	}
}

// PolicyRefusals reports how many changes the path policy refused in
// this mount, and the home-relative path of the first one whose path was
// known ("" if none was).
func (fs *FS) PolicyRefusals() (int64, string) {
	fs.refusals.mu.Lock()
	defer fs.refusals.mu.Unlock()
	return fs.refusals.n.Load(), fs.refusals.first
}

// MaxPathLen bounds the length of a path in the home (from its root, as
// "ws/a/b"). A local disk takes any depth, and programs (pjdfstest among
// them) build paths of PATH_MAX (4096) below their working directory, so
// the bound is twice that; push and pull reach paths longer than one
// system call takes by pieces (repo.atPath). It is there at all because
// commit, diff and pull walk a tree recursively, holding a directory open
// per level. (A directory moved below another keeps its subtree, which
// this checks only at the moved directory itself.)
const MaxPathLen = 8 << 10

// pathLen is the length of d's path from the root ("ws/a" is 4); ns must
// be held.
func (fs *FS) pathLen(d *inode) int {
	n := 0
	for p := d; p != nil && p.ino != RootIno; p = fs.inodes[p.parent] {
		n += len(p.name) + 1
	}
	return max(n-1, 0)
}

// checkNewName checks that name may be created or replaced in d: the
// directory itself is writable and the new path is.
func (fs *FS) checkNewName(d *inode, name string, isDir bool) error {
	if err := fs.canChange(d, func() string { return fs.pathOf(d) }); err != nil {
		return err
	}
	if fs.pathLen(d)+1+len(name) > MaxPathLen {
		return errNameLong
	}
	if repo.IsDirName(name) {
		// .art directories hold a repository and its host-only config
		// (binds.json, policy.json). push and pull skip the name at any
		// depth, so an entry made here would be recorded but never
		// exported, and must never pass for the host's (a .art link to a
		// directory of the agent's, pulled into a workspace without its
		// own .art, once did): refuse it, of any type, whatever the policy,
		// and in any case (.ART is .art on a case-insensitive host).
		return errAccess
	}
	if repo.IsPullTempName(name) && !isDir {
		// Named like a pull's temporary: push would skip it and its
		// presence would block every pull. Refuse it.
		return errAccess
	}
	if fs.decide(d, name, isDir) < policy.Write {
		fs.refused(joinPath(fs.pathOf(d), name))
		return errAccess
	}
	return nil
}

// joinPath is dir/name, or name at the root ("").
func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// checkSubtree refuses moving or removing a directory that holds anything
// below write (hidden, view-only or read-only content); ns must be held.
func (fs *FS) checkSubtree(d *inode) error {
	pol := fs.opts.Policy
	if pol == nil || pol.IsFullAccess() || !pol.MayRestrictBelow(fs.pathOf(d)) {
		return nil
	}
	ents, err := fs.readdirAll(d)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if fs.decide(d, e.Name, e.Type == objects.TypeDir) < policy.Write {
			return errAccess
		}
		if e.Type == objects.TypeDir {
			c, err := fs.child(d, e.Name)
			if err != nil {
				return err
			}
			if err := fs.checkSubtree(c); err != nil {
				return err
			}
		}
	}
	return nil
}
