package repo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/artproject/art/internal/owner"
	"github.com/artproject/art/objects"
)

// PushOptions configures a push of a host workspace.
type PushOptions struct {
	Dir     string // host workspace directory
	Branch  string // branch to commit on; "" means HEAD's
	Message string
	Session *objects.Session
	// Report receives one line per stored entry that changed since the last
	// sync ("FILE /ws/a.go (12 bytes, 1a2b3c4d5e6f)", "DIR /ws/sub", "LINK /ws/l -> t").
	Report func(line string)
	// Warn receives warnings (skipped sockets and devices).
	Warn func(msg string)
	// Progress is called with bytes hashed so far and bytes to hash.
	Progress func(done, total int64)
	// AllowEmpty records a commit even when the push changes nothing on
	// the branch (as git commit --allow-empty).
	AllowEmpty bool

	beforeBegin func() // tests: runs between the scan and the transaction
}

// PushResult summarises a push.
type PushResult struct {
	Commit     objects.ID
	Parent     objects.ID
	Branch     string
	Files      int   // regular files in the workspace
	Dirs       int   // directories
	Links      int   // symlinks
	Hashed     int   // files read because the stat cache missed
	TreesBuilt int   // directory trees encoded (the others were reused)
	NewObjects int   // objects added to the repository
	NewBytes   int64 // stored bytes added
	Duration   time.Duration
	// Merged counts the paths the branch changed since the workspace
	// last synced (commit MergedSince) that the push kept: the host's
	// changes went on top of them.
	Merged      int
	MergedSince objects.ID
	// KeptUnsynced counts the entries of the commit the workspace last
	// synced with that its .artignore left out, the host's no longer
	// does, and the host does not have and never had (no sync row
	// lists them): kept, not taken for deletions.
	KeptUnsynced int
	// Unchanged: the push changed nothing on the branch and recorded no
	// commit (Commit is the branch's tip); the workspace's sync state was
	// brought up to date all the same. MergedSince is then set when the
	// branch holds changes the workspace lacks: the commit it synced with.
	Unchanged bool
}

// DetachedHead is what the workspaces table records as the branch of a
// sync with a detached HEAD's commit: a branch's tip all the same for the
// next push's merge (a name no branch can have).
const DetachedHead = "HEAD"

// PushMerged is the session status of a push whose commit merged the
// host's changes with the branch's.
const PushMerged = "merged"

// ErrPushConflict is returned when the host and the branch changed the
// same paths differently since the workspace last synced.
var ErrPushConflict = errors.New("push conflicts with changes on the branch")

// WorkspaceName returns the name a host directory has inside the home.
func WorkspaceName(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	name := filepath.Base(abs)
	if !objects.ValidName(name) || abs == "/" {
		return "", fmt.Errorf("workspace %s: its base name cannot name a directory in the home; use a named directory", abs)
	}
	return name, nil
}

// CheckWorkspaceDir checks that dir exists and is a directory.
func CheckWorkspaceDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("no workspace directory given (pass -m DIR)")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w (create it, or pass an existing directory with -m)", abs, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("workspace %s: not a directory (pass a directory with -m)", abs)
	}
	// As root, no other user's link on the way: they can have it lead to
	// any directory of that name (root's push then stored it, and run
	// showed it to the agent). The scan opens the workspace the same way.
	if fd, err := owner.OpenDir(abs); errors.Is(err, owner.ErrForeignLink) {
		return "", fmt.Errorf("workspace %s: %w", abs, err)
	} else if err == nil {
		unix.Close(fd)
	}
	return abs, nil
}

// errChanged is a host file replaced between the scan and its read.
var errChanged = errors.New("replaced while art read the workspace")

// hostRoot is an open workspace directory, below which files the scan saw
// are opened (see open).
type hostRoot struct {
	path string
	fd   int
}

func openHostRoot(path string) (*hostRoot, error) {
	fd, err := openWorkspaceDir(path)
	if err != nil {
		return nil, err
	}
	return &hostRoot{path: path, fd: fd}, nil
}

// openWorkspaceDir opens the workspace directory path for reading,
// following no other user's symbolic link on the way as root
// (owner.OpenDir). CheckWorkspaceDir refuses such a link, but a directory
// above the workspace that another user owns, swapped for their link
// after that check, had root's push read whatever directory of the
// workspace's name the link led to.
func openWorkspaceDir(path string) (int, error) {
	pfd, err := owner.OpenDir(path)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

func (r *hostRoot) close() { unix.Close(r.fd) }

// open opens the regular file the scan saw at rel (inode ino, 0 for any):
// never through a symbolic link in any component (openat2
// RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH; a directory swapped for a link to
// /etc after the scan had push store root-only files), never a fifo
// (which would block), and never another file where the caller gives the
// inode.
func (r *hostRoot) open(rel string, ino uint64) (*os.File, error) {
	abs := filepath.Join(r.path, filepath.FromSlash(rel))
	fd, err := openBeneath(r.fd, filepath.FromSlash(rel), &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH,
	})
	if errors.Is(err, unix.ENOSYS) { // before Linux 5.6: the last component only
		fd, err = openPath(abs, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	}
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return nil, fmt.Errorf("open %s: %w", abs, errChanged)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: abs, Err: err}
	}
	f := os.NewFile(uintptr(fd), abs)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || ino != 0 && st.Ino != ino {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", abs, errChanged)
	}
	return f, nil
}

// hashHostFile hashes the file rel below root (see hostRoot.open), for
// callers that read a few files (pull's conflict checks, status).
func hashHostFile(root, rel string, ino uint64) (objects.ID, int64, error) {
	r, err := openHostRoot(root)
	if err != nil {
		return objects.Zero, 0, err
	}
	defer r.close()
	return hashFile(r, rel, ino)
}

// hashFile reads and hashes one file below root (see hostRoot.open),
// returning its id and size.
func hashFile(root *hostRoot, rel string, ino uint64) (objects.ID, int64, error) {
	f, err := root.open(rel, ino)
	if err != nil {
		return objects.Zero, 0, err
	}
	defer f.Close()
	ch := objects.NewChunker(f, nil)
	h := objects.NewHasher()
	var size int64
	for {
		c, err := ch.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return objects.Zero, 0, err
		}
		h.Write(c)
		size += int64(len(c))
	}
	return h.Sum(), size, nil
}

// errGCRaced: a gc committed between a push's reading of its stat cache
// and its transaction, so the cache may name content gc deleted.
var errGCRaced = errors.New("a gc ran during the push")

// Push snapshots a host workspace into a new commit.
//
// The stat cache is read before the push's transaction (which holds the
// write lock only while it stores), so a gc may delete content the cache
// names in between. The transaction sees that gc's generation changed and
// the push starts over with the cache gc pruned; it gives up after three
// tries.
func (r *Repo) Push(ctx context.Context, o PushOptions) (*PushResult, error) {
	for try := 1; ; try++ {
		res, err := r.push(ctx, o)
		if !errors.Is(err, errGCRaced) {
			return res, err
		}
		if try == 3 {
			return nil, fmt.Errorf("push %s: %w three times; run it again once gc is done", o.Dir, err)
		}
	}
}

func (r *Repo) push(ctx context.Context, o PushOptions) (_ *PushResult, err error) {
	start := time.Now()
	dir, err := CheckWorkspaceDir(o.Dir)
	if err != nil {
		return nil, err
	}
	name, err := WorkspaceName(dir)
	if err != nil {
		return nil, err
	}
	if dir, err = r.workspaceKey(dir); err != nil {
		return nil, fmt.Errorf("push %s: %w", o.Dir, err)
	}
	if id, ok, err := r.UnfinishedPull(dir); errors.Is(err, ErrPullMarkDamaged) {
		if o.Warn != nil {
			o.Warn(err.Error())
		}
	} else if err != nil {
		return nil, err
	} else if ok && o.Warn != nil {
		o.Warn(fmt.Sprintf("a pull of %s into %s did not finish: this push records the workspace half pulled (to finish the pull instead: art pull -m %s --commit %s)", id.Short(), dir, ShellArg(dir), id.Short()))
	}
	sc, err := newScanner(r, dir, o.Warn)
	if err != nil {
		return nil, err
	}
	// Read the stored rows while the scan lists and stats directories.
	ready := make(chan struct{})
	var loadErr error
	var gcGen int64
	go func() {
		defer close(ready)
		if gcGen, loadErr = gcGeneration(r.DB); loadErr == nil {
			sc.synced, loadErr = r.loadSyncRows(dir)
		}
	}()
	sc.syncedReady = ready
	root, err := sc.scan()
	<-ready
	if loadErr != nil {
		return nil, loadErr
	}
	if err != nil {
		return nil, fmt.Errorf("push %s: %w", dir, err)
	}
	res := &PushResult{}
	var todo []*hostEntry
	var total int64
	for _, e := range sc.all {
		switch e.typ {
		case objects.TypeFile:
			res.Files++
			if !e.known {
				todo = append(todo, e)
				total += e.size
			}
		case objects.TypeDir:
			res.Dirs++
		case objects.TypeSymlink:
			res.Links++
		}
	}
	res.Dirs-- // the workspace root itself
	res.Hashed = len(todo)

	files, err := openHostRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("push: %w", err)
	}
	defer files.close()
	// Hash and compress with all cores; one writer owns the transaction.
	var done int64
	openFile := func(i int) (io.Reader, error) {
		// A file replaced since the scan (an editor's save) is read as
		// it is now: its stat no longer matches what is recorded for
		// it, so the next push reads it again.
		return files.open(todo[i].rel, 0)
	}
	progress := func(i int, size int64) {
		if o.Progress != nil {
			done += size
			o.Progress(done, total)
		}
	}
	fileErr := func(err error) error {
		var fe *FileError
		if errors.As(err, &fe) {
			abs := filepath.Join(dir, filepath.FromSlash(todo[fe.Index].rel))
			return fmt.Errorf("push %s: %w (%s; nothing was committed)", abs, fe.Err, readAdvice(fe.Err))
		}
		return fmt.Errorf("push %s: %w", dir, err)
	}
	// Much to store is stored in transactions of its own first (see
	// Repo.StageAbove); a push that then fails drops it again.
	var staged *Staged
	if total > r.StageAbove {
		if staged, err = r.StageFiles(ctx, len(todo), openFile, progress); err != nil {
			return nil, fileErr(err)
		}
		defer func() {
			if err == nil {
				return
			}
			if derr := staged.Drop(); derr != nil {
				err = fmt.Errorf("%w (and removing the %.1f MiB it stored before failed: %v; art gc removes it)", err, float64(staged.NewBytes)/(1<<20), derr)
			}
		}()
	}

	if o.beforeBegin != nil {
		o.beforeBegin()
	}
	tx, err := r.Begin()
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if gen, err := gcGeneration(tx); err != nil {
		return nil, err
	} else if gen != gcGen {
		return nil, errGCRaced
	}

	var stored []StoredFile
	if staged != nil {
		// No gc ran since the scan (checked above), so none since the
		// staging either: what it stored is there.
		staged.countIn(tx)
		stored = staged.Files
	} else if stored, err = tx.PutFiles(ctx, len(todo), openFile, progress); err != nil {
		return nil, fileErr(err)
	}
	for i, e := range todo {
		e.id, e.size = stored[i].ID, stored[i].Size
	}

	// Commit on the branch, keeping the rest of the home from the parent.
	head, err := tx.Head()
	if err != nil {
		return nil, err
	}
	branch := o.Branch
	var parent objects.ID
	newBranch := false
	if branch == "" {
		branch = head.Branch
		parent = head.Commit
	} else {
		if err := CheckBranchName(branch); err != nil {
			return nil, err
		}
		if parent, err = tx.BranchTip(branch); errors.Is(err, ErrNoBranch) {
			parent, newBranch = head.Commit, true
		} else if err != nil {
			return nil, err
		}
	}
	// The commit the host last synced with, where its content grew from.
	syncedWith, hasSynced, err := tx.syncedCommit(dir)
	if err != nil {
		return nil, err
	}
	if (parent.IsZero() || newBranch) && hasSynced {
		// A branch this push starts (-b NEW, or HEAD's unborn one) starts
		// where the host's content grew from, the commit it synced with.
		// A root commit claimed no history (a later push found no common
		// base with the branch the host came from), and one on HEAD's tip
		// claimed a history the host never had: a later push back onto
		// HEAD's branch took every stale host file for a change and undid
		// its sessions (push -b, as a conflict advises, then push).
		parent = syncedWith
	}
	// What the parent holds of the workspace: its xattrs, which the host
	// does not show (pull does not write them), are kept for entries the
	// host has as they were.
	var prevWS objects.ID
	var prevEntry *objects.Entry
	if !parent.IsZero() {
		pc, err := tx.LoadCommit(parent)
		if err != nil {
			return nil, err
		}
		if e := tx.prevEntries(pc.Tree)[name]; e != nil && e.Type == objects.TypeDir {
			prevWS, prevEntry = e.ID, e
		}
	}
	wsTree, built, err := tx.buildTree(root, true, prevWS)
	if err != nil {
		return nil, fmt.Errorf("push %s: %w", dir, err)
	}
	res.TreesBuilt = built
	hostTree := wsTree // the host's own, for the commit of it a merge records
	kept := 0
	if wsTree, err = tx.keepExcluded(sc, "", wsTree, prevWS, &kept); err != nil {
		return nil, err
	}
	if hasSynced && len(sc.synced) > 0 {
		// What the commit the host synced with holds where its
		// .artignore left out what the host's no longer does.
		if ok, err := tx.hasCommit(syncedWith); err != nil {
			return nil, err
		} else if ok {
			sw, err := tx.LoadCommit(syncedWith)
			if err != nil {
				return nil, err
			}
			if e := tx.prevEntries(sw.Tree)[name]; e != nil && e.Type == objects.TypeDir {
				was, err := tx.ignoreOf(e.ID)
				if err != nil {
					return nil, fmt.Errorf("push %s: %w", dir, err)
				}
				n := 0
				if wsTree, err = tx.keepUnsynced(sc, was, "", wsTree, e.ID, &n); err != nil {
					return nil, err
				}
				kept += n
				res.KeptUnsynced = n
			}
		}
	}
	onto := branch // for messages
	if onto == "" {
		onto = "HEAD"
	}
	if !hasSynced && prevEntry != nil && wsTree != prevWS {
		// A directory that never synced, named like a workspace the
		// branch holds: a copied workspace (a moved one takes its old
		// record along, see workspaceKey) or another directory of that
		// name. Its snapshot replaced the branch's wholesale, undoing
		// every session since the original last synced, with no word.
		// On a new branch (-b NEW), which starts on HEAD's commit, it
		// claimed that history: a later push onto HEAD's branch merged
		// from there and took every session file it lacked for a
		// deletion.
		holder := onto
		if newBranch {
			if holder = head.Branch; holder == "" {
				holder = "HEAD"
			}
		}
		if err := tx.checkFirstPush(dir, name, holder, wsTree, prevWS); err != nil {
			return nil, err
		}
	}
	var since objects.ID  // the commit the host last synced with, when merged
	rootMode := root.mode // the workspace root's own mode in the commit
	if !newBranch && !parent.IsZero() {
		// The branch moved since the workspace last synced (an agent's
		// sessions): the host's changes since then go on top of the
		// branch's, which a snapshot of the host would undo.
		s, base, err := tx.syncedBase(dir, name, parent)
		if err != nil {
			return nil, fmt.Errorf("push %s: %w", dir, err)
		}
		if !s.IsZero() {
			var m mergeResult
			var baseTree objects.ID
			if base != nil {
				baseTree = base.ID
			}
			if base != nil && prevEntry != nil {
				// The root's own mode, which no tree below holds.
				switch {
				case prevEntry.Mode == base.Mode || prevEntry.Mode == root.mode:
				case modeKept(root.mode, base.Mode):
					rootMode = prevEntry.Mode
					m.fromTip++
				default:
					m.conflicts = append(m.conflicts, ". (its mode, changed here and on the branch)")
				}
			}
			merged := wsTree
			if wsTree != prevWS && baseTree != prevWS {
				if merged, err = tx.merge3("", baseTree, wsTree, prevWS, &m); err != nil {
					return nil, fmt.Errorf("push %s: %w", dir, err)
				}
			}
			if len(m.conflicts) > 0 {
				sort.Strings(m.conflicts)
				list := m.conflicts
				more := ""
				if len(list) > 20 {
					list, more = list[:20], fmt.Sprintf("\n  ... and %d more", len(m.conflicts)-20)
				}
				// Made as on the branch, git's own files (refs, logs)
				// drop the host's commits: git merges those instead.
				orMake := fmt.Sprintf(", or make those paths here as they are on %s and push again", onto)
				git := GitMergeAdvice(m.conflicts, tx.r.Path, dir, name, onto)
				if git != "" {
					orMake = ""
				}
				return nil, fmt.Errorf("%w: nothing was committed; %d path(s) changed both here and on %s since %s last synced (commit %s):\n  %s%s\n(push to a new branch with -b NAME and compare with 'art diff %s NAME'%s)%s",
					ErrPushConflict, len(m.conflicts), onto, dir, s.Short(), strings.Join(list, "\n  "), more, onto, orMake, git)
			}
			if m.fromTip > 0 {
				wsTree, res.Merged, res.MergedSince, since = merged, m.fromTip, s, s
			} else {
				rootMode = root.mode
			}
		}
	}
	// The entries are reported once the push is recorded: a push refused
	// after this point (a live session on the branch) listed them as
	// stored.
	report := func() {
		if o.Report != nil {
			for _, e := range sc.all[1:] {
				reportEntry(o.Report, name, e, e.old)
			}
		}
	}

	if err := tx.checkNoLiveWorktree(branch); err != nil {
		return nil, err
	}
	var baseRoot objects.ID
	if !parent.IsZero() {
		pc, err := tx.LoadCommit(parent)
		if err != nil {
			return nil, err
		}
		baseRoot = pc.Tree
	} else if baseRoot, err = tx.EmptyTree(); err != nil {
		return nil, err
	}
	// When merged: the tree of the commit the host last synced with.
	var sinceTree objects.ID
	if !since.IsZero() {
		sinceCommit, err := tx.LoadCommit(since)
		if err != nil {
			return nil, err
		}
		sinceTree = sinceCommit.Tree
	}
	if !o.AllowEmpty && !newBranch && !parent.IsZero() && tx.holdsDir(baseRoot, name, wsTree, rootMode) &&
		(since.IsZero() || tx.holdsDir(sinceTree, name, hostTree, root.mode)) {
		// Nothing to record: the branch already holds this tree, and
		// the host has no change since it synced. (A merge that only
		// took the branch's changes recorded two commits without a
		// change, the host's tree and the merge.) The workspace root's
		// own mtime is not a change: pull does not set it, and its
		// writes there move it (each push after a pull recorded a
		// commit of that alone), as does a session's new or removed
		// entry at the root (the merge put the host's back).
		res, err := r.finishUnchangedPush(tx, res, dir, name, sc, parent, since, branch, start)
		if err == nil {
			report()
		}
		return res, err
	}
	newRoot, err := tx.ReplaceAt(baseRoot, []string{name}, &objects.Entry{Type: objects.TypeDir, Mode: rootMode, ID: wsTree, MTime: root.mtime})
	if err != nil {
		return nil, err
	}
	// When merged: the host's own tree, on the commit it last synced with.
	var hostRoot objects.ID
	if !since.IsZero() {
		if hostRoot, err = tx.ReplaceAt(sinceTree, []string{name}, &objects.Entry{Type: objects.TypeDir, Mode: root.mode, ID: hostTree, MTime: root.mtime}); err != nil {
			return nil, err
		}
	}
	msg := o.Message
	if msg == "" {
		msg = "push " + name
	}
	sess := o.Session
	if sess == nil {
		sess = &objects.Session{Mode: "push", Workspace: name, Start: start.UnixNano(), End: time.Now().UnixNano(), Version: Version}
	}
	synced := objects.Zero // what the workspace now holds, as a commit
	c := &objects.Commit{Tree: newRoot, Time: time.Now().UnixNano(), Author: Author(), Message: msg, Session: sess}
	if !parent.IsZero() {
		c.Parents = []objects.ID{parent}
	}
	if !since.IsZero() {
		// The host's own tree is a commit of its own on what it last
		// synced with, and the branch gets a merge of it: the next push
		// merges from what the host holds (from the merge, it took the
		// host's stale files for its changes and undid the session).
		own := *sess
		if synced, err = tx.PutCommit(&objects.Commit{Tree: hostRoot, Time: c.Time, Author: c.Author, Message: msg, Session: &own, Parents: []objects.ID{since}}); err != nil {
			return nil, err
		}
		c.Parents = append(c.Parents, synced)
		if res.Merged > 0 {
			c.Message = fmt.Sprintf("%s (merged with %s)", msg, onto)
		}
	}
	if res.Merged > 0 || kept > 0 {
		// Not the host's own tree: pull's check of what git runs must
		// not take the branch's changes in it for the user's.
		merged := *sess
		merged.Status = PushMerged
		c.Session = &merged
	}
	cid, err := tx.PutCommit(c)
	if err != nil {
		return nil, err
	}
	if synced.IsZero() {
		synced = cid
	}
	if err := tx.Advance(branch, cid); err != nil {
		return nil, err
	}
	if err := tx.writePushRows(dir, sc); err != nil {
		return nil, err
	}
	marker := branch
	if marker == "" {
		marker = DetachedHead // HEAD's tip all the same: the next push merges from it
	}
	if err := tx.setWorkspace(dir, name, synced, marker); err != nil {
		return nil, err
	}
	res.NewObjects, res.NewBytes = tx.NewObjects, tx.NewBytes
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("push %s: commit transaction: %w (nothing was recorded)", dir, err)
	}
	report()
	res.Commit, res.Parent, res.Branch = cid, parent, branch
	res.Duration = time.Since(start)
	return res, nil
}

// finishUnchangedPush ends a push that records no commit: the stat cache
// and the sync state are written as a push writes them, the workspace
// synced with what it holds (the tip, or the commit it last synced with
// when the branch moved on without it).
func (r *Repo) finishUnchangedPush(tx *Tx, res *PushResult, dir, name string, sc *scanner, tip, since objects.ID, branch string, start time.Time) (*PushResult, error) {
	synced := since
	if synced.IsZero() {
		synced = tip
	}
	if err := tx.writePushRows(dir, sc); err != nil {
		return nil, err
	}
	marker := branch
	if marker == "" {
		marker = DetachedHead
	}
	if err := tx.setWorkspace(dir, name, synced, marker); err != nil {
		return nil, err
	}
	res.NewObjects, res.NewBytes = tx.NewObjects, tx.NewBytes
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("push %s: commit transaction: %w (nothing was recorded)", dir, err)
	}
	res.Commit, res.Parent, res.Branch, res.Unchanged = tip, tip, branch, true
	res.Merged, res.MergedSince = 0, since
	res.Duration = time.Since(start)
	return res, nil
}

func reportEntry(report func(string), ws string, e *hostEntry, old *syncedEntry) {
	p := QuotePath("/" + ws + "/" + e.rel)
	switch e.typ {
	case objects.TypeFile:
		if old != nil && old.typ == e.typ && old.id == e.id && old.mode == e.mode {
			return
		}
		report(fmt.Sprintf("FILE %s (%d bytes, %s)", p, e.size, e.id.Short()))
	case objects.TypeDir:
		if old != nil && old.typ == e.typ {
			return
		}
		report("DIR " + p)
	case objects.TypeSymlink:
		if old != nil && old.typ == e.typ && old.target == e.target {
			return
		}
		report("LINK " + p + " -> " + QuotePath(e.target))
	case objects.TypeFifo:
		if old != nil && old.typ == e.typ {
			return
		}
		report("FIFO " + p)
	}
}

// buildTree stores the trees of a scanned directory and returns the id of
// its own and how many trees it encoded: it encodes them bottom-up, then
// stores the missing ones at once. It sets the id of every directory
// entry, and leaves rowSame true only for directories whose sync-state
// row stays as stored, tree id included.
//
// With reuse, a directory whose row lists the same entries, subdirectory
// ids included, and records a tree id keeps that tree without encoding it
// (see syncstate.go): after a one-line edit only the trees along the
// edited path are built. A reused tree is only trusted once the
// repository is seen to hold it (gc may have freed it since; one that is
// held has all its subtrees); if one is missing, every tree is built
// afresh.
func (tx *Tx) buildTree(root *hostEntry, reuse bool, prev objects.ID) (objects.ID, int, error) {
	var trees []EncodedTree
	var reused []objects.ID // the outermost reused trees
	// build returns d's tree id and whether it was reused; prev gives d's
	// tree in the parent commit, if any, read only for a tree that is
	// built (most are reused).
	var build func(d *hostEntry, prev func() objects.ID) (objects.ID, bool, error)
	build = func(d *hostEntry, prev func() objects.ID) (objects.ID, bool, error) {
		t := &objects.Tree{Entries: make([]objects.Entry, 0, len(d.kids))}
		var kidsReused []objects.ID
		var beforeM map[string]*objects.Entry
		loaded := false
		before := func() map[string]*objects.Entry {
			if !loaded {
				loaded, beforeM = true, tx.prevEntries(prev())
			}
			return beforeM
		}
		for _, k := range d.kids {
			e := objects.Entry{Name: path.Base(k.rel), Type: k.typ, Mode: k.mode, MTime: k.mtime}
			switch k.typ {
			case objects.TypeFile:
				e.ID, e.Size = k.id, uint64(k.size)
			case objects.TypeDir:
				name := e.Name
				prevKid := func() objects.ID {
					if pe := before()[name]; pe != nil && pe.Type == objects.TypeDir {
						return pe.ID
					}
					return objects.Zero
				}
				id, wasReused, err := build(k, prevKid)
				if err != nil {
					return objects.Zero, false, err
				}
				e.ID = id
				if wasReused {
					kidsReused = append(kidsReused, id)
				}
				if k.old == nil || k.old.id != id {
					d.rowSame = false
				}
			case objects.TypeSymlink:
				e.Target, e.Size = k.target, uint64(len(k.target))
			}
			t.Entries = append(t.Entries, e)
		}
		if reuse && d.rowSame && !d.rowTree.IsZero() {
			d.id = d.rowTree
			return d.id, true, nil
		}
		if m := before(); m != nil {
			for i := range t.Entries {
				e := &t.Entries[i]
				if pe := m[e.Name]; pe != nil && pe.Type == e.Type && pe.Mode == e.Mode && (e.Type != objects.TypeFile || pe.ID == e.ID) && pe.Target == e.Target {
					e.Xattrs = pe.Xattrs
				}
			}
		}
		reused = append(reused, kidsReused...)
		raw, id, err := objects.EncodeTree(t)
		if err != nil {
			return objects.Zero, false, fmt.Errorf("tree of %q: %w", d.rel, err)
		}
		trees = append(trees, EncodedTree{ID: id, Raw: raw})
		if id != d.rowTree {
			d.rowSame = false // the row must record this tree
		}
		d.id = id
		return id, false, nil
	}
	id, rootReused, err := build(root, func() objects.ID { return prev })
	if err != nil {
		return objects.Zero, 0, err
	}
	if rootReused {
		reused = append(reused, id)
	}
	if len(reused) > 0 {
		missing, err := tx.missingTrees(reused)
		if err != nil {
			return objects.Zero, 0, err
		}
		if len(missing) > 0 {
			clearRowSame(root)
			return tx.buildTree(root, false, prev)
		}
	}
	return id, len(trees), tx.PutTrees(trees)
}

// holdsDir reports whether tree holds at name, one component, the
// directory id with mode and nothing else (no xattrs), whatever the
// times in it: a directory's own mtime, or its files' and
// subdirectories' (a touch, a host tool that rewrote a file with the
// same bytes). Those are no change to art status or art diff either,
// and each push recorded a commit of "0 added, 0 modified, 0 deleted".
func (tx *Tx) holdsDir(tree objects.ID, name string, id objects.ID, mode uint32) bool {
	e := tx.prevEntries(tree)[name]
	if e == nil || e.Type != objects.TypeDir || e.Mode != mode || e.Size != 0 || e.Target != "" || len(e.Xattrs) != 0 {
		return false
	}
	if e.ID == id {
		return true
	}
	same, err := tx.sameIgnoringTimes(id, e.ID, false)
	return err == nil && same
}

// prevEntries indexes the entries of tree id by name (none for the zero
// id, or a tree gc removed).
func (tx *Tx) prevEntries(id objects.ID) map[string]*objects.Entry {
	if id.IsZero() {
		return nil
	}
	t, err := tx.LoadTree(id)
	if err != nil {
		return nil
	}
	m := make(map[string]*objects.Entry, len(t.Entries))
	for i := range t.Entries {
		m[t.Entries[i].Name] = &t.Entries[i]
	}
	return m
}

// clearRowSame marks every directory's row as changed, for a rebuild
// that does not trust the recorded directory ids.
func clearRowSame(d *hostEntry) {
	d.rowSame = false
	for _, k := range d.kids {
		if k.typ == objects.TypeDir {
			clearRowSame(k)
		}
	}
}

// writePushRows makes the sync state of a workspace what the push saw:
// it writes the rows of directories that changed (buildTree set rowSame
// and the directory ids) and deletes the rows of directories that are
// gone. The stored rows were read before the transaction; if another push
// or pull of the same workspace wrote some meanwhile, the state mixes rows
// of both, each one true observation of its directory whose tree id (if
// any) certifies only that row's own entries (see syncstate.go).
func (tx *Tx) writePushRows(workspace string, sc *scanner) error {
	scanned := make(map[string]bool, len(sc.synced))
	for _, d := range sc.all {
		if d.typ != objects.TypeDir {
			continue
		}
		scanned[d.rel] = true
		if d.rowSame {
			continue
		}
		b := appendSyncRowHeader(make([]byte, 0, 80*len(d.kids)+64), d.id)
		for _, k := range d.kids {
			b = appendSyncRowEntry(b, path.Base(k.rel), &syncedEntry{typ: k.typ, mode: k.mode, id: k.id, size: k.size,
				mtime: k.mtime, ctime: k.ctime, ino: k.ino, target: k.target})
		}
		if _, err := tx.Exec(`INSERT INTO synced_dirs(workspace, dir, data) VALUES(?, ?, ?) ON CONFLICT(workspace, dir) DO UPDATE SET data=excluded.data`, workspace, d.rel, packSyncRow(b)); err != nil {
			return fmt.Errorf("save sync state: %w", err)
		}
	}
	for dir := range sc.synced {
		if scanned[dir] {
			continue
		}
		if _, err := tx.Exec(`DELETE FROM synced_dirs WHERE workspace=? AND dir=?`, workspace, dir); err != nil {
			return fmt.Errorf("save sync state: %w", err)
		}
	}
	return nil
}

func (tx *Tx) setWorkspace(dir, name string, id objects.ID, branch string) error {
	var commit any // NULL for the zero id: no commit
	if !id.IsZero() {
		commit = id[:]
	}
	_, err := tx.Exec(`INSERT INTO workspaces(path, name, commit_id, branch, synced_at) VALUES(?,?,?,?,?)
		ON CONFLICT(path) DO UPDATE SET name=excluded.name, commit_id=excluded.commit_id, branch=excluded.branch, synced_at=excluded.synced_at`,
		dir, name, commit, branch, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("record workspace %s: %w", dir, err)
	}
	// A push or pull that records the workspace ends any unfinished pull.
	if _, err := tx.Exec(`DELETE FROM meta WHERE key=?`, pullingKey(dir)); err != nil {
		return fmt.Errorf("record workspace %s: %w", dir, err)
	}
	return nil
}

// pullingKey is the meta key that marks a pull into dir as begun and not
// finished: set before a pull writes the host, removed with the sync state
// it records. A pull killed or failed half way (ENOSPC) leaves the
// workspace part pulled, and art status then said "changed since the last
// push/pull; record it with art push", which would record that half.
func pullingKey(dir string) string { return "pulling " + dir }

// UnfinishedPull returns the commit of a pull into dir (absolute) that
// began writing the host and did not finish, if any.
func (r *Repo) UnfinishedPull(dir string) (objects.ID, bool, error) {
	var v string
	err := r.DB.QueryRow(`SELECT value FROM meta WHERE key=?`, pullingKey(dir)).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return objects.Zero, false, nil
	}
	if err != nil {
		return objects.Zero, false, fmt.Errorf("read the pull state of %s: %w", dir, err)
	}
	id, err := objects.ParseID(v)
	if err != nil {
		return objects.Zero, false, fmt.Errorf("%w: the record of an unfinished pull into %s is damaged (%v); a pull (art pull -m %s --force) or a push (art push -m %s) replaces it", ErrPullMarkDamaged, dir, err, ShellArg(dir), ShellArg(dir))
	}
	return id, true, nil
}

// ErrPullMarkDamaged is UnfinishedPull's error for a marker whose commit
// cannot be read: push, which replaces the marker, goes on with a warning.
var ErrPullMarkDamaged = errors.New("unreadable pull state")

// Version is art's version, recorded in commits.
const Version = "0.1.0"

// Author names who made a commit: user@host of the art process.
func Author() string {
	u := os.Getenv("SUDO_USER")
	if u == "" {
		if cur, err := user.Current(); err == nil {
			u = cur.Username
		} else {
			u = fmt.Sprint(os.Getuid())
		}
	}
	h, _ := os.Hostname()
	return u + "@" + h
}
