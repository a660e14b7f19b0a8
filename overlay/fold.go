package overlay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
)

// ErrNothingToCommit is returned by Commit with AllowEmpty unset when the
// upper layer holds no change.
var ErrNothingToCommit = errors.New("nothing to commit")

// CommitOptions describe the commit recording a worktree.
type CommitOptions struct {
	Message    string
	Session    *objects.Session
	AllowEmpty bool // record a commit even when nothing changed (sessions do)
	// Branch, when set, is a new branch to record the commit on, starting
	// at the worktree's base; the worktree's own branch is left alone (the
	// way out when that branch moved while the worktree was open).
	Branch string
	// Attach, when set, runs inside the commit's transaction before the
	// commit is written, to store what the commit will name (a session's
	// syscall log, set in Session). Stored in a transaction of its own it
	// was unreachable until the commit, and an art gc in between deleted
	// it. An error from Attach abandons the commit.
	Attach func(tx *repo.Tx) error

	beforeBegin func() // tests: runs between the staging and the transaction
}

// Commit folds the upper layer into new trees along the changed paths,
// writes the commit, clears the upper layer, removes the worktree and
// advances its branch, all in one transaction. The FS must not be used
// afterwards.
func (fs *FS) Commit(o CommitOptions) (_ objects.ID, err error) {
	// Store every dirty block first, then stop the writer: after that the
	// SQLite tables and memory agree.
	fs.ns.Lock()
	for _, n := range fs.inodes {
		n.mu.Lock()
		fs.storeDirtyLocked(n)
		n.mu.Unlock()
	}
	fs.ns.Unlock()
	// The session's end journals what is left as art's own write, which
	// may use the host's reserve (space.go): what the agent wrote and
	// was not refused is kept.
	if err := fs.p.sync(false, artRoom); err != nil {
		return objects.Zero, err
	}
	if err := fs.p.drain(); err != nil {
		return objects.Zero, fmt.Errorf("commit worktree #%d: %w", fs.wt.ID, err)
	}
	if err := fs.p.close(); err != nil {
		return objects.Zero, fmt.Errorf("commit worktree #%d: %w", fs.wt.ID, err)
	}
	fs.ns.Lock()
	defer fs.ns.Unlock()

	// Much to store is staged in transactions of its own first (see
	// repo.Repo.StageAbove); a commit that then fails drops it again.
	todo, ids := fs.changedFiles()
	staged, err := fs.stageFiles(todo)
	if err != nil {
		return objects.Zero, fmt.Errorf("commit worktree #%d: %w", fs.wt.ID, err)
	}
	defer func() {
		if err == nil {
			return
		}
		if derr := staged.Drop(); derr != nil {
			fs.logf("remove what the failed commit stored: %v (art gc removes it)", derr)
		}
	}()

	if o.beforeBegin != nil {
		o.beforeBegin()
	}
	tx, err := fs.r.Begin()
	if err != nil {
		return objects.Zero, err
	}
	defer tx.Rollback()
	target := fs.wt.Branch
	if o.Branch != "" {
		target = o.Branch
		if err := repo.CheckBranchName(target); err != nil {
			return objects.Zero, err
		}
		if tip, err := tx.BranchTip(target); err == nil {
			return objects.Zero, fmt.Errorf("commit worktree #%d: branch %s already exists (at %s); name a new branch", fs.wt.ID, target, tip.Short())
		} else if !errors.Is(err, repo.ErrNoBranch) {
			return objects.Zero, err
		}
	} else if tip, err := tx.BranchTip(fs.wt.Branch); err != nil {
		return objects.Zero, fmt.Errorf("commit worktree #%d: %w", fs.wt.ID, err)
	} else if tip != fs.wt.Base {
		return objects.Zero, fmt.Errorf("commit worktree #%d: branch %s moved from %s to %s while the worktree was open; record the work on a new branch with 'art commit --worktree %d -b NEW'",
			fs.wt.ID, fs.wt.Branch, fs.wt.Base.Short(), tip.Short(), fs.wt.ID)
	}
	files, err := fs.storeFiles(tx, todo, ids, staged)
	if err != nil {
		return objects.Zero, fmt.Errorf("commit worktree #%d: %w", fs.wt.ID, err)
	}
	root := fs.inodes[RootIno]
	rootTree, err := fs.foldDir(tx, root, files)
	if err != nil {
		return objects.Zero, fmt.Errorf("commit worktree #%d: %w", fs.wt.ID, err)
	}
	if rootTree == fs.root && !o.AllowEmpty {
		return objects.Zero, ErrNothingToCommit
	}
	if o.Attach != nil {
		if err := o.Attach(tx); err != nil {
			return objects.Zero, fmt.Errorf("commit worktree #%d: %w", fs.wt.ID, err)
		}
	}
	c := &objects.Commit{Tree: rootTree, Parents: []objects.ID{fs.wt.Base}, Time: time.Now().UnixNano(), Author: repo.Author(), Message: o.Message, Session: o.Session}
	id, err := tx.PutCommit(c)
	if err != nil {
		return objects.Zero, err
	}
	if err := tx.SetBranch(target, id); err != nil {
		return objects.Zero, err
	}
	if err := tx.DeleteWorktree(fs.wt); err != nil {
		return objects.Zero, err
	}
	if err := tx.Commit(); err != nil {
		return objects.Zero, fmt.Errorf("commit worktree #%d: %w", fs.wt.ID, err)
	}
	// The journal may hold fsynced data the commit now holds: make the
	// commit as durable before the journal goes (the WAL is not fsynced
	// at commit). If that fails the journal stays; replaying it into the
	// deleted worktree is harmless.
	if err := syncFile(fs.r.Path + "-wal"); err != nil {
		fs.logf("sync repository after the commit: %v (the journal is kept)", err)
		fs.p.j.close()
		return id, nil
	}
	if err := fs.p.j.remove(); err != nil {
		fs.logf("remove journal: %v", err)
	}
	return id, nil
}

// Close stops the writer after persisting everything, without
// committing: the worktree stays (interrupted) with its pending changes.
func (fs *FS) Close() error {
	fs.ns.Lock()
	for _, n := range fs.inodes {
		n.mu.Lock()
		fs.storeDirtyLocked(n)
		n.mu.Unlock()
	}
	fs.ns.Unlock()
	err := fs.p.sync(false, artRoom) // as at commit
	if err == nil {
		err = fs.p.drain()
	}
	if cerr := fs.p.close(); err == nil {
		err = cerr
	}
	if err == nil {
		// What the journal held is in SQLite; it must be as durable
		// there before the journal goes.
		err = syncFile(fs.r.Path + "-wal")
	}
	if err != nil {
		fs.p.j.close() // keep it: the next Open replays it
		return err
	}
	return fs.p.j.remove()
}

// Discard removes worktree wt, which this process owns, with its upper
// layer and its journal, after its Commit found nothing to record
// (ErrNothingToCommit: the journal is applied, and only its header is
// left, which stayed behind).
func Discard(r *repo.Repo, wt *repo.Worktree) error {
	tx, err := r.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := tx.DeleteWorktree(wt); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	os.Remove(JournalPath(r, wt))
	return nil
}

// stageFiles stages the content of the changed files (todo) when there
// is much of it (repo.Repo.StageAbove); nil otherwise. ns must be held.
func (fs *FS) stageFiles(todo []changedFile) (*repo.Staged, error) {
	var total int64
	for _, f := range todo {
		total += f.n.size
	}
	if total <= fs.r.StageAbove {
		return nil, nil
	}
	st, err := fs.r.StageFiles(context.Background(), len(todo), func(i int) (io.Reader, error) {
		return &nodeReader{fs: fs, n: todo[i].n}, nil
	}, nil)
	return st, fs.storeErr(todo, err)
}

// storeErr names the file a store of todo failed on.
func (fs *FS) storeErr(todo []changedFile, err error) error {
	var fe *repo.FileError
	if errors.As(err, &fe) {
		return fmt.Errorf("store %s: %w", fs.pathIn(todo[fe.Index]), fe.Err)
	}
	return err
}

// storeFiles stores the content of the changed files (todo, from
// changedFiles) and returns the id of every file the fold reaches (ids:
// unchanged ones keep their lower content's id). The changed ones are
// read, chunked, hashed and compressed on every CPU (repo.Tx.PutFiles):
// one at a time, the commit of a session that had written a 418 MB Go
// module cache took 9 s here. What staged holds is taken as it is, unless
// a gc ran since, which may have deleted it. ns must be held.
func (fs *FS) storeFiles(tx *repo.Tx, todo []changedFile, ids map[*inode]objects.ID, staged *repo.Staged) (map[*inode]objects.ID, error) {
	var stored []repo.StoredFile
	if staged != nil {
		ok, err := staged.Usable(tx)
		if err != nil {
			return nil, err
		}
		if ok {
			stored = staged.Files
		}
	}
	if stored == nil {
		var err error
		stored, err = tx.PutFiles(context.Background(), len(todo), func(i int) (io.Reader, error) {
			return &nodeReader{fs: fs, n: todo[i].n}, nil
		}, nil)
		if err != nil {
			return nil, fs.storeErr(todo, err)
		}
	}
	for i, f := range todo {
		// A size that disagrees with what was read would make a tree
		// entry its content contradicts (fsck checks entry sizes).
		if stored[i].Size != f.n.size {
			return nil, fmt.Errorf("store %s: read %d bytes of %d", fs.pathIn(f), stored[i].Size, f.n.size)
		}
		ids[f.n] = stored[i].ID
	}
	return ids, nil
}

// changedFile is a file whose content a commit stores, with a name it has
// (files keep no location of their own).
type changedFile struct {
	n    *inode
	dir  *inode
	name string
}

// pathIn is a changed file's home-relative path, for messages.
func (fs *FS) pathIn(f changedFile) string {
	if f.dir.ino == RootIno {
		return f.name
	}
	return fs.pathOf(f.dir) + "/" + f.name
}

// changedFiles lists the files whose content a commit stores, and the
// lower id of each file whose content is unchanged since copy-up. ns
// must be held.
func (fs *FS) changedFiles() ([]changedFile, map[*inode]objects.ID) {
	ids := map[*inode]objects.ID{}
	var todo []changedFile
	fs.walkChanged(fs.inodes[RootIno], ids, &todo)
	return todo, ids
}

// walkChanged walks the upper directories below d as foldDir does,
// recording the lower id of each file whose content is unchanged since
// copy-up and listing the others in todo; a file with several names is
// seen once.
func (fs *FS) walkChanged(d *inode, ids map[*inode]objects.ID, todo *[]changedFile) {
	if d == nil || !d.upper {
		return
	}
	for name, n := range fs.liveDirents(d) {
		switch n.typ {
		case objects.TypeDir:
			fs.walkChanged(n, ids, todo)
		case objects.TypeFile:
			if _, seen := ids[n]; seen {
				continue
			}
			if n.blocks.len() == 0 && len(n.dirty) == 0 && !n.base.IsZero() && n.baseSize == n.size && fs.baseIsWhole(n) {
				ids[n] = n.base // content unchanged since copy-up
				continue
			}
			ids[n] = objects.Zero // stored by storeFiles
			*todo = append(*todo, changedFile{n, d, name})
		}
	}
}

// foldDir returns the tree id of a directory with the upper layer applied.
// Directories never copied up keep their lower tree id without being read;
// files has the id of every file below (storeFiles).
func (fs *FS) foldDir(tx *repo.Tx, d *inode, files map[*inode]objects.ID) (objects.ID, error) {
	if !d.upper {
		return d.lowerTree, nil
	}
	var t objects.Tree
	if !d.lowerTree.IsZero() {
		lower, err := fs.r.LoadTree(d.lowerTree)
		if err != nil {
			return objects.Zero, err
		}
		for i := range lower.Entries {
			e := lower.Entries[i]
			if _, changed := d.dirents[e.Name]; changed {
				continue
			}
			// An in-place copy-up always adds a dirent, so a lower entry
			// without one is unchanged, unless it was deleted through an
			// open handle path (whiteouts cover that).
			if n := fs.inodes[lowerIno(d.ino, e.Name)]; n != nil && n.deleted {
				continue
			}
			t.Entries = append(t.Entries, e)
		}
	}
	for name, n := range fs.liveDirents(d) {
		if sessionOnly(n.typ) {
			continue
		}
		e, err := fs.foldNode(tx, n, name, files)
		if err != nil {
			return objects.Zero, err
		}
		t.Entries = append(t.Entries, e)
	}
	t.Sort()
	id, err := tx.PutTree(&t)
	if err != nil {
		return objects.Zero, fmt.Errorf("directory /%s: %w", fs.pathOf(d), err)
	}
	return id, nil
}

// foldNode returns the tree entry for a node.
func (fs *FS) foldNode(tx *repo.Tx, n *inode, name string, files map[*inode]objects.ID) (objects.Entry, error) {
	e := objects.Entry{Name: name, Type: n.typ, Mode: n.mode, MTime: n.mtime, Xattrs: n.xattrs}
	switch n.typ {
	case objects.TypeDir:
		id, err := fs.foldDir(tx, n, files)
		if err != nil {
			return e, err
		}
		e.ID = id
	case objects.TypeSymlink:
		e.Target = n.target
		e.Size = uint64(len(n.target))
	case objects.TypeFile:
		id, ok := files[n]
		if !ok || id.IsZero() {
			return e, fmt.Errorf("store %s: no content stored for it", name) // a bug of the fold's two walks
		}
		e.Size = uint64(n.size)
		e.ID = id
	}
	return e, nil
}

// baseIsWhole reports whether the node's base content is exactly baseSize
// long (no truncate cut it).
func (fs *FS) baseIsWhole(n *inode) bool {
	fr, err := objects.OpenFile(fs.r, n.base)
	return err == nil && fr.Size() == n.baseSize
}

// nodeReader streams a node's current content for folding.
type nodeReader struct {
	fs  *FS
	n   *inode
	off int64
}

func (r *nodeReader) Read(p []byte) (int, error) {
	if r.off >= r.n.size {
		return 0, io.EOF
	}
	if len(p) > 1<<20 {
		p = p[:1<<20]
	}
	// The caller holds ns; take the node lock as Read does.
	r.n.mu.Lock()
	k, err := r.fs.readLocked(r.n, p, r.off)
	r.n.mu.Unlock()
	r.off += int64(k)
	if err != nil {
		return k, err
	}
	return k, nil
}
