package repo

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/artproject/art/objects"
)

// ErrConflict is returned when a pull would overwrite or delete host
// content that the repository does not hold.
var ErrConflict = errors.New("pull conflicts with changes on the host")

// PullOptions configures a pull into a host workspace.
type PullOptions struct {
	Dir    string
	Commit objects.ID // the commit whose /<workspace>/ is written
	Force  bool       // overwrite host changes instead of refusing
	// Branch is the branch whose tip Commit is, when the pull is of a
	// branch ("" otherwise): a later push onto that branch merges the
	// host's changes with the branch's since (repo/merge.go), while a
	// push after pulling some other commit records the host as it is.
	Branch string
	Report func(line string)

	afterPlan    func() // tests: runs between planning and writing the host
	beforeRecord func() // tests: runs between writing the host and recording the sync state
}

// PullResult summarises a pull.
type PullResult struct {
	Created, Updated, Deleted int
	Ignored                   int // stored paths .artignore left out (not written)
	Conflicts                 []string
	// ReplacedPush is the host's last push when the pulled commit does
	// not build on it and holds another workspace: the pull replaced
	// what that push recorded (the repository keeps it there). Zero
	// otherwise.
	ReplacedPush objects.ID
}

// hostConflicts are the conflicts that are changes on the host: not
// what the commit would have git run (checkGitRisk), which is for review.
func (p *puller) hostConflicts() []string {
	var out []string
	for _, c := range p.conflicts {
		if !p.riskConflicts[c] {
			out = append(out, c)
		}
	}
	return out
}

// bothChanged are the host's changes among the conflicts that the commit
// changed too since the host last synced: a push would conflict on those
// (the others it records as the host has them).
func (p *puller) bothChanged() []string {
	var out []string
	for _, c := range p.hostConflicts() {
		if !p.hostOnly[c] {
			out = append(out, c)
		}
	}
	return out
}

// pullAdvice ends a refused pull's list: what to do with the host's
// changes, when there are any, then what --force does.
func (p *puller) pullAdvice(branch string) string {
	switch {
	case len(p.hostConflicts()) == 0:
		return "nothing listed changed on the host: review it, then pull with --force, which writes what the commit holds"
	case GitMergeAdvice(p.bothChanged(), "", "", "", "") != "":
		// A push would conflict on the same git files: gitAdvice. Git
		// files the host alone changed (the user's commit on a
		// branch whose session did not commit) a push records, as
		// any other.
		return "--force writes what the commit holds"
	}
	return p.r.pushFirstAdvice(branch) + "; --force writes what the commit holds"
}

// gitAdvice is GitMergeAdvice for the host's changes among the conflicts
// that the commit changed too.
func (p *puller) gitAdvice(o PullOptions, name string) string {
	rev := o.Branch
	if rev == "" || rev == DetachedHead {
		rev = o.Commit.Short()
	}
	return GitMergeAdvice(p.bothChanged(), p.r.Path, p.dir, name, rev)
}

// pushFirstAdvice is what a refused pull of a commit (the tip of branch,
// when not "") advises doing with the host's changes. A plain 'art push'
// records them on HEAD's branch: advised for a pull of another branch or
// of an older commit, it led the user to a pull that then replaced them
// on the host without a word (a git workspace lost the user's own
// commits from its .git that way). Onto another branch, 'art push -b
// BRANCH' merges them into it, and the pull then brings both.
func (r *Repo) pushFirstAdvice(branch string) string {
	h, err := r.Head()
	switch {
	case err != nil:
	case branch == DetachedHead || (branch != "" && branch == h.Branch):
		return "push host changes first with 'art push'"
	case branch != "":
		return fmt.Sprintf("merge host changes into %s first with 'art push -b %s'", QuotePath(branch), ShellArg(branch))
	}
	return "this commit is no branch's tip: record host changes with 'art push' to keep them in the repository; the pull then replaces them here"
}

// replacedPush returns the commit of the host's last push when a pull of
// commit (workspace tree wsTree) replaces what it recorded: that commit is
// not one commit builds on, and the workspace differs. Zero when the host
// last synced by a pull (its content came from the repository) or never.
func (tx *Tx) replacedPush(dir, name string, commit, wsTree objects.ID) (objects.ID, error) {
	since, ok, err := tx.syncedCommit(dir)
	if err != nil || !ok || since == commit {
		return objects.Zero, err
	}
	c, err := tx.LoadCommit(since)
	if err != nil {
		return objects.Zero, err
	}
	if s := c.Session; s == nil || s.Mode != "push" || s.Workspace != name {
		return objects.Zero, nil
	}
	if t, err := tx.LoadTree(c.Tree); err != nil {
		return objects.Zero, err
	} else if e, ok := t.Find(name); ok && e.ID == wsTree {
		return objects.Zero, nil
	}
	if ok, err := tx.isAncestor(since, commit, maxMergeSearch); err != nil || ok {
		return objects.Zero, err
	}
	return since, nil
}

type pullOp uint8

const (
	opKeep   pullOp = iota // same content; metadata may be refreshed
	opWrite                // create or replace with the stored entry
	opDelete               // remove the host entry (the repository held it)
	opLeave                // host-only content the repository never held
)

type pullNode struct {
	name   string
	rel    string
	stored *objects.Entry
	host   *hostEntry
	op     pullOp
	kids   []*pullNode
	// wrote is the stat of what write created (files, links, fifos),
	// taken before it was renamed into place; raced is set when the host
	// changed the entry while the pull ran, which then leaves it alone.
	wrote *unix.Stat_t
	raced bool
	// hooks is set on a git directory's hooks directory, gitState on the
	// state directory of an interrupted rebase or cherry-pick (gitexec.go).
	hooks, gitState bool
}

type puller struct {
	r         *Repo
	dir       string
	sc        *scanner
	host      map[string]*hostEntry
	conflicts []string
	blockers  []string // what even --force cannot override
	raced     []string // entries the host changed while the pull ran
	// touched counts the changes the pull itself made to each host inode
	// (a chmod, new times, an unlinked or replaced name): another name of
	// the same inode (a hard link) then shows a new ctime that is no sign
	// of a change by the host.
	touched map[uint64]int
	res     PullResult
	report  func(string)
	ws      string       // workspace name, for reported paths
	synced  []*hostEntry // the stored tree as written, for the sync state
	commit  objects.ID   // the commit being pulled
	// pushed is the workspace's tree in the commit's nearest ancestor
	// made by art push (the host's own state; gitexec.go), once looked up.
	pushed     objects.ID
	pushedDone bool
	// hooksDirs are the workspace's core.hooksPath directories
	// (findHooksPaths).
	hooksDirs map[string]bool
	wsTree    objects.ID // the workspace's tree in the commit
	gitRisks  []string   // the conflicts checkGitRisk found (GitRisks)
	// riskConflicts are those conflicts as listed: what the commit would
	// have git run, no change on the host (pullAdvice).
	riskConflicts map[string]bool
	risksOnly     bool // planning for GitRisks only: skip what is as pushed
	// syncedNames caches the entries of each directory's sync-state row
	// (syncedIn); emptied is a host workspace with nothing in it.
	syncedNames map[string]map[string]syncedEntry
	emptied     bool
	// hostOnly are the conflicts, as listed, of paths the commit holds
	// as the host last synced them: changed (or deleted) on the host
	// alone, which a push records without a conflict of its own.
	hostOnly map[string]bool
}

// CheckPullTarget refuses targets that are, or lie inside, a symlink.
func CheckPullTarget(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	// Every existing component of the path must be a real directory.
	p := "/"
	for _, c := range strings.Split(strings.Trim(abs, "/"), "/") {
		if c == "" {
			continue
		}
		p = filepath.Join(p, c)
		st, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("pull target %s: %w", abs, err)
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("pull target %s: %s is a symbolic link; pull into the real path instead (art never writes through links)", abs, p)
		}
		if !st.IsDir() {
			return "", fmt.Errorf("pull target %s: %s is not a directory", abs, p)
		}
	}
	return abs, nil
}

// openDirNoSymlinks opens directory abs for pull's writes with no
// symbolic link in any component (openat2 RESOLVE_NO_SYMLINKS), as
// CheckPullTarget found it: checked there and opened by path here, a
// directory on the way that another user owns (their workspace's parent,
// a shared directory) swapped for a link meanwhile had root's pull write
// the commit into whatever directory of that name the link led to.
func openDirNoSymlinks(abs string) (int, error) {
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(root)
	rel := strings.TrimPrefix(filepath.Clean(abs), "/")
	if rel == "" {
		rel = "."
	}
	fd, err := openBeneath(root, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if errors.Is(err, unix.ENOSYS) { // before Linux 5.6: the last component only
		return unix.Open(abs, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	return fd, err
}

// mkdirAllNoSymlinks is os.MkdirAll(abs, 0o755) that never goes through
// a symbolic link (MkdirAll follows them, and made the pull's workspace
// where another user's link, swapped in after CheckPullTarget, led).
func mkdirAllNoSymlinks(abs string) error {
	cur, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { unix.Close(cur) }()
	p := "/"
	for _, c := range strings.Split(strings.Trim(filepath.Clean(abs), "/"), "/") {
		if c == "" {
			continue
		}
		p = filepath.Join(p, c)
		next, err := unix.Openat(cur, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if err := unix.Mkdirat(cur, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				return &os.PathError{Op: "mkdir", Path: p, Err: err}
			}
			next, err = unix.Openat(cur, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return fmt.Errorf("%s is a symbolic link or not a directory (art never writes through links)", p)
		}
		if err != nil {
			return &os.PathError{Op: "open", Path: p, Err: err}
		}
		unix.Close(cur)
		cur = next
	}
	return nil
}

// Pull makes the host directory match /<workspace>/ of a commit.
func (r *Repo) Pull(o PullOptions) (*PullResult, error) {
	dir, err := CheckPullTarget(o.Dir)
	if err != nil {
		return nil, err
	}
	name, err := WorkspaceName(dir)
	if err != nil {
		return nil, err
	}
	// A workspace that moved with its repository takes its record along
	// (see workspaceKey): without it, every file it holds that the
	// commit changed was a conflict.
	if err := r.adoptMoved(dir); err != nil {
		return nil, err
	}
	gcGen, err := gcGeneration(r.DB)
	if err != nil {
		return nil, err
	}
	c, err := r.LoadCommit(o.Commit)
	if err != nil {
		return nil, err
	}
	ws, ok, err := r.Lookup(c.Tree, []string{name})
	if err != nil {
		return nil, err
	}
	if !ok || ws.Type != objects.TypeDir {
		return nil, fmt.Errorf("pull: commit %s has no workspace %q (%s); pull into a directory named like one of them", o.Commit.Short(), name, r.workspaceNames(c.Tree))
	}
	if err := mkdirAllNoSymlinks(dir); err != nil {
		return nil, fmt.Errorf("pull: create %s: %w", dir, err)
	}
	p := &puller{r: r, dir: dir, ws: name, report: o.Report, host: map[string]*hostEntry{}, touched: map[uint64]int{}, commit: o.Commit, wsTree: ws.ID}
	if p.sc, err = newScanner(r, dir, nil); err != nil {
		return nil, err
	}
	if p.sc.synced, err = r.loadSyncRows(dir); err != nil {
		return nil, err
	}
	if _, err := p.sc.scan(); err != nil {
		return nil, fmt.Errorf("pull: %w", err)
	}
	for _, e := range p.sc.all {
		p.host[e.rel] = e
	}
	root := &pullNode{rel: "", stored: &ws, host: p.host[""], op: opKeep}
	if err := p.findHooksPaths(ws.ID); err != nil {
		return nil, err
	}
	if err := p.plan(root); err != nil {
		return nil, err
	}
	chmodRoot := p.planRootMode(root, dir, name)
	sort.Strings(p.conflicts)
	if len(p.blockers) > 0 {
		sort.Strings(p.blockers)
		// The conflicts too, in the same report: listed only once the
		// way was clear, they took a second round.
		also := ""
		if len(p.conflicts) > 0 && !o.Force {
			also = fmt.Sprintf("\nalso, %d path(s) need a decision:\n  %s\n(%s over them)%s",
				len(p.conflicts), strings.Join(p.conflicts, "\n  "), p.pullAdvice(o.Branch), p.gitAdvice(o, name))
		}
		return &PullResult{Conflicts: p.blockers}, fmt.Errorf("%w: nothing was changed; these paths cannot be replaced:\n  %s\n(move them out of %s, then pull again)%s",
			ErrConflict, strings.Join(p.blockers, "\n  "), dir, also)
	}
	if need, avail, ok := p.roomFor(dir, root); !ok && !o.Force {
		return &PullResult{}, fmt.Errorf("%w: nothing was changed; the commit's files take %d MiB more in %s, which has %d MiB available (content repeated in a commit, hard links among it, is stored once in the repository and written out in full here); free space or pull elsewhere, or pull anyway with --force",
			ErrConflict, need>>20, dir, avail>>20)
	}
	if len(p.conflicts) > 0 && !o.Force {
		return &PullResult{Conflicts: p.conflicts}, fmt.Errorf("%w: nothing was changed; %d path(s) need a decision:\n  %s\n(%s over all of them)%s",
			ErrConflict, len(p.conflicts), strings.Join(p.conflicts, "\n  "), p.pullAdvice(o.Branch), p.gitAdvice(o, name))
	}
	if o.afterPlan != nil {
		o.afterPlan()
	}
	// The pull ends by recording the sync state: a repository that cannot
	// take it (read-only, locked) must fail the pull before the host is
	// touched, not after. The write that checks it marks the pull begun
	// (pullingKey), until that record.
	dfd, err := openDirNoSymlinks(dir)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return nil, fmt.Errorf("pull: nothing was changed: a directory on the way to %s was replaced by a symbolic link since the pull began (art never writes through links); pull into the real path", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("pull: open %s: %w", dir, err)
	}
	if err := r.markPulling(dir, o.Commit); err != nil {
		unix.Close(dfd)
		return nil, fmt.Errorf("pull: nothing was changed: the repository %s cannot record a pull: %w", r.Path, err)
	}
	err = p.applyDir(dfd, root)
	if err == nil && chmodRoot {
		// Listed and counted as any directory's mode (refresh): a pull
		// that changed only the root's said nothing and "0 updated".
		to := hostMode(root.stored, root.host)
		if err = unix.Fchmod(dfd, to); err != nil {
			err = fmt.Errorf("chmod %s: %w", dir, err)
		} else {
			if p.report != nil {
				p.report("MODE " + QuotePath("/"+p.ws) + fmt.Sprintf(" (%04o -> %04o)", root.host.mode&0o7777, to&0o7777))
			}
			p.res.Updated++
		}
	}
	unix.Close(dfd)
	if err != nil {
		return nil, fmt.Errorf("pull into %s: %w", dir, err)
	}
	if o.beforeRecord != nil {
		o.beforeRecord()
	}
	// Record what the host now holds of the repository.
	if err := p.recordSynced(root); err != nil {
		return nil, err
	}
	tx, err := r.Begin()
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	commit := o.Commit
	if gen, err := gcGeneration(tx); err != nil {
		return nil, err
	} else if gen != gcGen {
		// A gc ran while this pull read the commit: it may have deleted
		// the commit and content the pull wrote to the host. The sync
		// state must not name what is gone (a push would trust it), so
		// those entries are dropped: the next push reads those files
		// again, and a pull treats them as never synced.
		if p.synced, err = tx.keepStored(p.synced); err != nil {
			return nil, err
		}
		if ok, err := tx.hasCommit(commit); err != nil {
			return nil, err
		} else if !ok {
			commit = objects.Zero
		}
	}
	if p.res.ReplacedPush, err = tx.replacedPush(dir, name, o.Commit, ws.ID); err != nil {
		return nil, err
	}
	if err := tx.saveSynced(dir, p.synced); err != nil {
		return nil, err
	}
	if err := tx.setWorkspace(dir, name, commit, o.Branch); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("pull: record sync state: %w", err)
	}
	p.res.Conflicts = p.conflicts
	if len(p.raced) > 0 {
		sort.Strings(p.raced)
		return &p.res, fmt.Errorf("%w: %d path(s) changed on the host while the pull ran and were left as the host has them:\n  %s\n(the rest was pulled; pull again to bring them up to date)",
			ErrConflict, len(p.raced), strings.Join(p.raced, "\n  "))
	}
	return &p.res, nil
}

// roomFor reports whether the host filesystem at dir has room for what
// the plan writes: the bytes of the files it writes less those of the
// host files it replaces or deletes, against what an unprivileged user
// may still use there (pull runs as root, and the host keeps its
// reserve). An agent's 100 hard links to a 20 MB file, 100 KB in the
// repository, made a pull write 1.9 GB, and a thousand links to a 16 GiB
// file would have filled any disk.
func (p *puller) roomFor(dir string, root *pullNode) (need, avail int64, ok bool) {
	var walk func(n *pullNode)
	walk = func(n *pullNode) {
		switch n.op {
		case opWrite:
			if n.stored != nil && n.stored.Type == objects.TypeFile {
				need += int64(n.stored.Size)
			}
			if n.host != nil && n.host.typ == objects.TypeFile {
				need -= n.host.size
			}
		case opDelete:
			if n.host != nil && n.host.typ == objects.TypeFile {
				need -= n.host.size
			}
		}
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(root)
	var st unix.Statfs_t
	if need <= 0 || unix.Statfs(dir, &st) != nil || st.Blocks == 0 {
		return need, 0, true
	}
	bs := st.Frsize
	if bs <= 0 {
		bs = st.Bsize
	}
	avail = int64(st.Bavail) * bs
	return need, avail, need <= avail
}

// markPulling records that a pull of commit into dir begins writing the
// host (pullingKey). It is also the check that the repository takes a
// write (not read-only, not locked past the busy timeout): BEGIN alone
// succeeds on a read-only file, a write statement does not.
func (r *Repo) markPulling(dir string, commit objects.ID) error {
	tx, err := r.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value`, pullingKey(dir), commit.String()); err != nil {
		return err
	}
	return tx.Commit()
}

func (r *Repo) workspaceNames(root objects.ID) string {
	t, err := r.LoadTree(root)
	if err != nil {
		return "unreadable tree"
	}
	var names []string
	for _, e := range t.Entries {
		if e.Type == objects.TypeDir && !strings.HasPrefix(e.Name, ".") {
			names = append(names, e.Name)
		}
	}
	if len(names) == 0 {
		return "it holds no workspace"
	}
	return "it holds: " + strings.Join(names, ", ")
}

// hostID returns the content id of a host file, from the stat cache or by
// hashing it.
func (p *puller) hostID(h *hostEntry) (objects.ID, error) {
	if h.known || h.typ != objects.TypeFile {
		return h.id, nil
	}
	id, size, err := hashHostFile(p.dir, h.rel, h.ino)
	if err != nil {
		return objects.Zero, fmt.Errorf("pull: read %s: %w", h.rel, err)
	}
	h.id, h.size, h.known = id, size, true
	return id, nil
}

// unchangedSinceSync reports whether the host entry still holds what the
// last push or pull recorded for it.
func (p *puller) unchangedSinceSync(h *hostEntry) (bool, error) {
	s := h.old
	if s == nil || s.typ != h.typ || h.typ != objects.TypeDir && s.mode != h.mode {
		return false, nil
	}
	switch h.typ {
	case objects.TypeFile:
		id, err := p.hostID(h)
		return id == s.id, err
	case objects.TypeSymlink:
		return h.target == s.target, nil
	}
	return true, nil
}

// maxGitIndex bounds the git index files pull compares (sameGitIndex).
const maxGitIndex = 256 << 20

// indexRefreshedOnly reports whether the host's git index h differs from
// what the workspace last synced only in what git's refresh of it
// changes (stat data and caches; see sameGitIndex): git status on the
// host after a pull does that, and the index says the same.
func (p *puller) indexRefreshedOnly(h *hostEntry) (bool, error) {
	ok, err := hostIndexRefreshedOnly(p.r, p.dir, h)
	if err != nil {
		return false, fmt.Errorf("pull: %w", err)
	}
	return ok, nil
}

// hostIndexRefreshedOnly is indexRefreshedOnly for the workspace dir, which
// status shares: the first git status after a pull had art status and
// art run call the workspace changed.
func hostIndexRefreshedOnly(r *Repo, dir string, h *hostEntry) (bool, error) {
	s := h.old
	if s == nil || s.typ != objects.TypeFile || h.typ != objects.TypeFile || s.mode != h.mode ||
		s.size > maxGitIndex || h.size > maxGitIndex {
		return false, nil
	}
	synced, err := r.ReadFile(s.id, s.size)
	if err != nil {
		return false, nil // gone from the repository: a change as any other
	}
	root, err := openHostRoot(dir)
	if err != nil {
		return false, err
	}
	defer root.close()
	f, err := root.open(h.rel, h.ino)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", h.rel, err)
	}
	defer f.Close()
	host, err := io.ReadAll(io.LimitReader(f, maxGitIndex+1))
	if err != nil {
		return false, fmt.Errorf("read %s: %w", h.rel, err)
	}
	return len(host) <= maxGitIndex && sameGitIndex(host, synced), nil
}

// planRootMode decides whether the pull gives the workspace's root the
// commit's mode (a session's chmod of it, which art diff shows): it did
// not. A root whose mode the host changed since the last sync conflicts,
// as any directory's does.
func (p *puller) planRootMode(root *pullNode, dir, name string) bool {
	h := root.host
	if h == nil || h.typ != objects.TypeDir || hostMode(root.stored, h) == h.mode {
		return false
	}
	base, synced := p.r.syncedRootMode(dir, name)
	if synced && !modeKept(h.mode, base) {
		p.conflict(".", fmt.Sprintf("mode changed on the host to %04o; the commit has %04o", h.mode&0o7777, hostMode(root.stored, h)&0o7777))
		return true // written only with --force, as every conflict
	}
	if synced {
		p.checkDirMode(root, h.mode)
	} else {
		p.checkDirMode(root, noMode) // made by this pull, or never synced: as a new directory
	}
	return true
}

// syncedIn returns what the sync state holds for name in the host
// directory dir (relative). For a name the scan did not find, ok says
// the user deleted it. A workspace the host emptied entirely (or a first
// pull) takes the commit whole: deleting everything to pull a fresh copy
// is common.
func (p *puller) syncedIn(dir, name string) (syncedEntry, bool) {
	if p.emptied {
		return syncedEntry{}, false
	}
	if p.syncedNames == nil {
		p.syncedNames = map[string]map[string]syncedEntry{}
		root := p.host[""]
		if root == nil || len(root.kids) == 0 {
			p.emptied = true
			return syncedEntry{}, false
		}
	}
	names, ok := p.syncedNames[dir]
	if !ok {
		names = map[string]syncedEntry{}
		if row, ok := p.sc.synced[dir]; ok {
			if _, err := decodeSyncRow(dir, row, func(n string, e *syncedEntry) { names[n] = *e }); err != nil {
				names = map[string]syncedEntry{} // a damaged row: never synced
			}
		}
		p.syncedNames[dir] = names
	}
	e, ok := names[name]
	return e, ok
}

// keptSince reports whether the commit's entry e is what the host last
// synced there (s): a conflict on it is the host's change alone.
// Directories never are (what is below them may differ).
func keptSince(s *syncedEntry, e *objects.Entry) bool {
	if s == nil || s.typ != e.Type || e.Type == objects.TypeDir || !modeKept(s.mode, e.Mode) {
		return false
	}
	switch e.Type {
	case objects.TypeFile:
		return s.id == e.ID
	case objects.TypeSymlink:
		return s.target == e.Target
	}
	return true
}

// conflictHostOnly records a conflict as conflict does, marking it as
// the host's change alone when hostOnly.
func (p *puller) conflictHostOnly(rel, why string, hostOnly bool) {
	p.conflict(rel, why)
	if hostOnly {
		if p.hostOnly == nil {
			p.hostOnly = map[string]bool{}
		}
		p.hostOnly[p.conflicts[len(p.conflicts)-1]] = true
	}
}

// sameContent reports whether the host entry already holds the stored one
// (mode and times aside).
func (p *puller) sameContent(h *hostEntry, e *objects.Entry) (bool, error) {
	if h.typ != e.Type {
		return false, nil
	}
	switch e.Type {
	case objects.TypeFile:
		id, err := p.hostID(h)
		return id == e.ID, err
	case objects.TypeSymlink:
		return h.target == e.Target, nil
	}
	return true, nil
}

// conflict records a conflict; the name is quoted when it holds control
// characters (an agent's newline must not forge a line of the list).
func (p *puller) conflict(rel, why string) {
	p.conflicts = append(p.conflicts, QuotePath(rel)+" ("+why+")")
}

// ignoreFileChanged is the conflict of an .artignore the commit changes:
// it decides what push leaves out, and a commit (an agent's work)
// emptying it would have the next push store the host's secrets. The user
// takes it knowingly.
const ignoreFileChanged = "changed in the commit; it decides what push leaves out, so review it, then pull with --force"

// conflictOnContent records the conflict, if any, of a host file or link
// (h) whose content differs from the commit's: unchangedOnHost says
// whether the host still has what it last synced. One line per path: an
// .artignore changed on both sides was listed twice, with advice for
// each that did not resolve the other.
func (p *puller) conflictOnContent(rel string, h *hostEntry, e *objects.Entry, unchangedOnHost bool) {
	switch {
	case isIgnoreFile(rel) && !unchangedOnHost:
		p.conflict(rel, "changed on the host and in the commit; it decides what push leaves out: compare the two, then pull with --force to take the commit's, or push yours to a new branch with -b NAME")
	case isIgnoreFile(rel):
		p.conflict(rel, ignoreFileChanged)
	case unchangedOnHost:
	case h.old == nil:
		p.conflict(rel, "made on the host, where the commit has another")
	default:
		p.conflictHostOnly(rel, "changed on the host", keptSince(h.old, e))
	}
}

// MaxPullPath bounds the paths pull writes, twice the overlay's bound on
// a path made in a session (overlay.MaxPathLen), which moving a directory
// below another gets around. Pull holds a directory open per level and
// each node its path: an agent's chain of 20,000 directories took 1.4 GB
// and every descriptor, and failed half written.
const MaxPullPath = 16 << 10

// plan decides, for one directory present in the stored tree, what happens
// to each name in it, and records conflicts. It changes nothing.
func (p *puller) plan(n *pullNode) error {
	t, err := p.r.LoadTree(n.stored.ID)
	if err != nil {
		return err
	}
	gitDir := looksLikeGitDir(n.name, t)
	names := map[string]bool{}
	for i := range t.Entries {
		e := &t.Entries[i]
		names[e.Name] = true
		rel := joinRel(n.rel, e.Name)
		if len(rel) > MaxPullPath {
			return fmt.Errorf("pull: %s…: a path longer than %d bytes (the commit nests directories that deep; a session can move a deep directory below another); nothing was written: look at it with 'art mount --ro', or remove it in a session",
				QuotePath(rel[:120]), MaxPullPath)
		}
		if p.sc.excluded(rel, e.Type == objects.TypeDir) {
			// Never written: the host's own .art and ignored paths. The
			// branch keeps them (push leaves them as they are); said,
			// since the pull is otherwise silent about them.
			if IsDirName(e.Name) {
				// Art's own directory's name (an old build or an agent
				// stored it): never written, and said, as above.
				p.say("SKIP", rel, " (named like art's own "+DirName+" directory, which a pull never writes; the commit keeps it)")
				p.res.Ignored++
			} else if n.host == nil {
				// In a directory the pull makes: the host has nothing
				// there, and the directory arrives without it (it
				// looked empty, and deleting it dropped the entry
				// from the branch at the next push).
				p.say("SKIP", rel, " (left out by .artignore; the commit keeps it)")
				p.res.Ignored++
			} else if p.host[rel] == nil {
				var st unix.Stat_t
				if lstatPath(filepath.Join(p.dir, filepath.FromSlash(rel)), &st) != nil {
					p.say("SKIP", rel, " (left out by .artignore; the commit keeps it)")
					p.res.Ignored++
				} else if a, ok, err := p.pushedEntry(rel); err != nil {
					return err
				} else if ok && (a.Type != e.Type || a.ID != e.ID) {
					// The host has its own: a session's change there
					// since the last push went unsaid ("0 updated").
					p.say("SKIP", rel, " (left out by .artignore; the commit changed it since the last push, the host's is kept)")
					p.res.Ignored++
				}
			}
			continue
		}
		if _, ok := isPullTemp(e.Name); ok && e.Type != objects.TypeDir {
			// A pull's own temporaries are never content (push skips
			// them, the next pull removes dead ones); one in a commit
			// (an agent's file) would block every later pull.
			p.say("SKIP", rel, " (named like a pull's temporary file, which is never written)")
			continue
		}
		if p.sc.isRepoPath(filepath.Join(p.dir, filepath.FromSlash(rel))) {
			// A stored entry named like the repository (another host's
			// workspace, or an agent's file) never replaces it.
			p.say("SKIP", rel, " (the repository's own file is never written)")
			continue
		}
		kid := &pullNode{name: e.Name, rel: rel, stored: e}
		if n.host != nil && n.host.typ == objects.TypeDir {
			kid.host = p.host[rel]
		}
		n.kids = append(n.kids, kid)
		h := kid.host
		switch {
		case h == nil:
			kid.op = opWrite
			var s syncedEntry
			deleted := false
			if n.host != nil && n.host.typ == objects.TypeDir {
				s, deleted = p.syncedIn(n.rel, e.Name)
			}
			if deleted {
				// The user's deletion is a change too: a pull that
				// wrote the entry back undid it, and the next push
				// recorded it again.
				// One conflict for a directory: the entries below have
				// no host side (kid.host is nil), so planning them adds
				// none. They are planned all the same, or --force wrote
				// the directory empty and recorded the workspace as
				// synced with the commit, and the next push recorded
				// every file below as deleted.
				p.conflictHostOnly(rel, "deleted on the host", keptSince(&s, e))
			}
			if e.Type == objects.TypeDir {
				p.checkDirMode(kid, noMode)
			}
			if isIgnoreFile(rel) && len(p.sc.synced) > 0 {
				// New in a workspace synced before, it would decide
				// what the next push leaves out (an agent's could hide
				// the user's files from it, or, not a regular file,
				// fail every command). A first pull takes it.
				p.conflict(rel, "added in the commit; it decides what push leaves out, so review it, then pull with --force")
			}
			if n.host != nil && n.host.typ == objects.TypeDir {
				var st unix.Stat_t
				if lstatPath(filepath.Join(p.dir, filepath.FromSlash(rel)), &st) == nil {
					// Something the scan does not track (a socket, a
					// device) holds the name.
					p.blockers = append(p.blockers, QuotePath(rel)+" (a socket or device file is in the way; the commit has a "+e.Type.String()+" there)")
				}
			}
		case h.typ == objects.TypeDir && e.Type == objects.TypeDir:
			kid.op = opKeep
			if h.old != nil && h.old.typ == objects.TypeDir && h.old.mode != h.mode && hostMode(e, h) != h.mode {
				// The user's chmod (a directory made private) is a
				// change as a file's is: a pull that reset it
				// reopened the directory, and said nothing.
				p.conflict(rel, fmt.Sprintf("mode changed on the host to %04o; the commit has %04o", h.mode&0o7777, hostMode(e, h)&0o7777))
			}
			p.checkDirMode(kid, h.mode)
		default:
			same, err := p.sameContent(h, e)
			if err != nil {
				return err
			}
			if same {
				kid.op = opKeep
				if h.typ != objects.TypeDir && h.mode != hostMode(e, h) && h.old != nil && h.old.mode != h.mode {
					p.conflict(rel, "mode changed on the host")
				}
				break
			}
			kid.op = opWrite
			if h.typ == objects.TypeDir {
				if isIgnoreFile(rel) {
					p.conflict(rel, ignoreFileChanged)
				}
				// Replacing a directory removes what is below it.
				if err := p.planRemoval(kid); err != nil {
					return err
				}
				abs := filepath.Join(p.dir, filepath.FromSlash(rel))
				if h.old == nil || h.old.typ != objects.TypeDir {
					// Made on the host (in place of a file the pull
					// would now write): an empty one was deleted, mode
					// and all, as if the repository had held it.
					p.conflict(rel, "a directory made on the host; the commit has a "+e.Type.String()+" there")
				}
				switch {
				case p.sc.holdsRepo(abs):
					p.blockers = append(p.blockers, QuotePath(rel)+" (a directory holding the repository; the commit has a "+e.Type.String()+" there)")
				case len(kid.kids) > 0 && p.hasKept(kid) || p.holdsUntracked(h):
					p.blockers = append(p.blockers, QuotePath(rel)+" (a directory holding files the repository never had; the commit has a "+e.Type.String()+" there)")
				}
				if err := p.checkGitRisk(gitDir, n, kid); err != nil {
					return err
				}
				continue
			}
			ok, err := p.unchangedSinceSync(h)
			if err != nil {
				return err
			}
			if !ok && gitDir && e.Name == "index" {
				if ok, err = p.indexRefreshedOnly(h); err != nil {
					return err
				}
			}
			p.conflictOnContent(rel, h, e, ok)
		}
		if err := p.checkGitRisk(gitDir, n, kid); err != nil {
			return err
		}
		if e.Type == objects.TypeDir {
			if p.risksOnly {
				// What the last push stored is the user's own: only
				// subtrees changed since hold news (GitRisks).
				if a, ok, err := p.pushedEntry(rel); err != nil {
					return err
				} else if ok && a.Type == objects.TypeDir && a.ID == e.ID {
					continue
				}
			}
			if err := p.plan(kid); err != nil {
				return err
			}
		}
	}
	if n.host == nil || n.host.typ != objects.TypeDir {
		return nil
	}
	for _, h := range n.host.kids {
		name := filepath.Base(h.rel)
		if names[name] {
			continue
		}
		kid := &pullNode{name: name, rel: h.rel, host: h}
		n.kids = append(n.kids, kid)
		if err := p.planRemoval(kid); err != nil {
			return err
		}
	}
	return nil
}

// planRemoval plans the deletion of a host entry the stored tree lacks:
// content the repository held and that is unchanged is deleted, content it
// never held is left alone, and held content changed on the host conflicts.
func (p *puller) planRemoval(n *pullNode) error {
	h := n.host
	if n.op != opWrite {
		n.op = opDelete
	}
	if h.typ == objects.TypeDir {
		if (h.old == nil || h.old.typ != objects.TypeDir) && n.op != opWrite {
			n.op = opLeave // a directory the repository never held
			return nil
		}
		for _, k := range h.kids {
			kid := &pullNode{name: filepath.Base(k.rel), rel: k.rel, host: k}
			n.kids = append(n.kids, kid)
			if err := p.planRemoval(kid); err != nil {
				return err
			}
		}
		return nil
	}
	if h.old == nil {
		if n.op == opWrite {
			return nil // replaced below
		}
		n.op = opLeave
		return nil
	}
	ok, err := p.unchangedSinceSync(h)
	if err != nil {
		return err
	}
	if !ok {
		p.conflict(h.rel, "changed on the host, deleted in the commit")
	} else if isIgnoreFile(h.rel) && n.op == opDelete {
		p.conflict(h.rel, "deleted in the commit; it decides what push leaves out, so review that, then pull with --force")
	}
	return nil
}

// holdsUntracked reports whether the host directory h holds, at any depth,
// entries the scan does not list (ignored files, sockets, devices): a
// pull replacing h could not remove them.
func (p *puller) holdsUntracked(h *hostEntry) bool {
	fd, names, err := readDir(filepath.Join(p.dir, filepath.FromSlash(h.rel)))
	if err != nil {
		return true
	}
	unix.Close(fd)
	kids := map[string]*hostEntry{}
	for _, k := range h.kids {
		kids[path.Base(k.rel)] = k
	}
	for _, name := range names {
		k := kids[name]
		switch {
		case k == nil && strings.HasPrefix(name, pullTemp):
			// a dead pull's temporary, removed with the directory
		case k == nil:
			return true
		case k.typ == objects.TypeDir && p.holdsUntracked(k):
			return true
		}
	}
	return false
}

// hasKept reports whether removing n would leave host-only content behind.
func (p *puller) hasKept(n *pullNode) bool {
	for _, k := range n.kids {
		if k.op == opLeave || p.hasKept(k) {
			return true
		}
	}
	return false
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// applyDir carries out the plan for one directory through its fd. Every
// operation is relative to dfd and never follows a symlink.
func (p *puller) applyDir(dfd int, n *pullNode) error {
	// Temporaries of a pull that was killed before its rename.
	for _, name := range p.sc.deadTemps[n.rel] {
		if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove %s left by an interrupted pull: %w", joinRel(n.rel, name), err)
		}
	}
	// Deletions first, so a type change can reuse the name.
	for _, k := range n.kids {
		// A file replaced by a file, link or fifo is renamed over
		// atomically; only a directory on either side is removed first.
		replaceDir := k.op == opWrite && k.host != nil && (k.host.typ == objects.TypeDir || k.stored.Type == objects.TypeDir)
		if k.op == opDelete || replaceDir || k.op == opLeave && k.host != nil && k.host.typ == objects.TypeDir {
			if err := p.remove(dfd, k); err != nil {
				return err
			}
		}
	}
	for _, k := range n.kids {
		switch {
		case k.stored == nil:
			continue
		case k.op == opWrite:
			if err := p.write(dfd, k); err != nil {
				return err
			}
		case k.op == opKeep:
			if err := p.refresh(dfd, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// remove deletes what the plan says of a host entry; content the
// repository never held stays.
func (p *puller) remove(dfd int, n *pullNode) error {
	if n.host.typ != objects.TypeDir {
		if n.op == opLeave {
			return nil
		}
		if err := unix.Unlinkat(dfd, n.name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove %s: %w", n.rel, err)
		}
		p.touched[n.host.ino]++
		p.res.Deleted++
		p.say("DELETE", n.rel, "")
		return nil
	}
	if n.op == opLeave {
		return nil
	}
	sub, err := unix.Openat(dfd, n.name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", n.rel, err)
	}
	for _, name := range p.sc.deadTemps[n.rel] {
		unix.Unlinkat(sub, name, 0)
	}
	for _, k := range n.kids {
		if k.host == nil {
			continue
		}
		if err := p.remove(sub, k); err != nil {
			unix.Close(sub)
			return err
		}
	}
	unix.Close(sub)
	err = unix.Unlinkat(dfd, n.name, unix.AT_REMOVEDIR)
	if err == nil {
		p.res.Deleted++
		p.say("DELETE", n.rel+"/", "")
		return nil
	}
	if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
		return nil // host-only content is kept
	}
	return fmt.Errorf("remove %s: %w", n.rel, err)
}

// say reports one line: KIND, the path (relative to the workspace, shown
// relative to the home as push shows it, quoted when it holds control
// characters) and what follows it.
func (p *puller) say(kind, rel, rest string) {
	if p.report != nil {
		p.report(kind + " " + QuotePath("/"+p.ws+"/"+rel) + rest)
	}
}

const pullTemp = ".art-pull-tmp"

// createTemp creates a fresh temporary entry with create, which must fail
// with EEXIST on an existing name (O_EXCL, symlinkat, mkfifoat). Names are
// random and nothing is removed to make room, so whatever the directory
// holds (a stored or host file called like a temporary, say) is never hit.
func createTemp(create func(name string) error) (string, error) {
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s-%d-%x", pullTemp, os.Getpid(), rand.Uint64())
		err := create(name)
		if errors.Is(err, unix.EEXIST) && i < 100 {
			continue
		}
		return name, err
	}
}

// write creates the stored entry under its name, atomically for files,
// links and fifos (temporary name, then rename).
func (p *puller) write(dfd int, n *pullNode) (werr error) {
	e := n.stored
	counted := func() {
		if n.host == nil {
			p.res.Created++
		} else {
			p.res.Updated++
		}
	}
	// Files, links and fifos are reported once installed: one the host
	// changed meanwhile is left alone and reported as such instead.
	defer func() {
		if werr != nil || n.raced || e.Type == objects.TypeDir || n.wrote == nil {
			return
		}
		counted()
		switch e.Type {
		case objects.TypeFile:
			p.say("FILE", n.rel, fmt.Sprintf(" (%d bytes, %s)", e.Size, e.ID.Short()))
		case objects.TypeSymlink:
			p.say("LINK", n.rel, " -> "+QuotePath(e.Target))
		case objects.TypeFifo:
			p.say("FIFO", n.rel, "")
		}
	}()
	switch e.Type {
	case objects.TypeDir:
		if err := unix.Mkdirat(dfd, n.name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("create directory %s: %w", n.rel, err)
		}
		counted()
		p.say("DIR", n.rel, "")
		return p.refresh(dfd, n)
	case objects.TypeFile:
		var fd int
		tmp, err := createTemp(func(name string) (err error) {
			fd, err = unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
			return err
		})
		if err != nil {
			return fmt.Errorf("write %s: %w", n.rel, err)
		}
		f := os.NewFile(uintptr(fd), n.rel)
		err = p.writeContent(f, e)
		if err == nil {
			// New content never inherits the host file's setuid: the
			// agent's bytes in a root setuid binary would be root's.
			err = unix.Fchmod(fd, hostMode(e, nil))
		}
		if err == nil {
			ts := unix.NsecToTimespec(e.MTime)
			err = unix.UtimesNanoAt(dfd, tmp, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
		}
		var st unix.Stat_t
		if err == nil {
			err = unix.Fstat(fd, &st)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			n.wrote = &st
			err = p.install(dfd, tmp, n)
		}
		if err != nil {
			unix.Unlinkat(dfd, tmp, 0)
			return fmt.Errorf("write %s: %w", n.rel, err)
		}
	case objects.TypeSymlink:
		tmp, err := createTemp(func(name string) error { return unix.Symlinkat(e.Target, dfd, name) })
		if err == nil {
			ts := unix.NsecToTimespec(e.MTime)
			unix.UtimesNanoAt(dfd, tmp, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
			if err = p.installStat(dfd, tmp, n); err != nil {
				unix.Unlinkat(dfd, tmp, 0)
			}
		}
		if err != nil {
			return fmt.Errorf("write link %s: %w", n.rel, err)
		}
	case objects.TypeFifo:
		tmp, err := createTemp(func(name string) error { return unix.Mkfifoat(dfd, name, hostMode(e, nil)) })
		if err == nil {
			// mkfifoat applied the umask; a fifo (unlike a file) can be
			// changed through an O_PATH descriptor without opening it.
			err = chmodNoFollow(dfd, tmp, objects.TypeFifo, hostMode(e, nil))
		}
		if err == nil {
			ts := unix.NsecToTimespec(e.MTime)
			unix.UtimesNanoAt(dfd, tmp, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
			if err = p.installStat(dfd, tmp, n); err != nil {
				unix.Unlinkat(dfd, tmp, 0)
			}
		}
		if err != nil {
			return fmt.Errorf("write fifo %s: %w", n.rel, err)
		}
	}
	return nil
}

// unsafeModeBits are mode bits a pull never gives a host entry: set-user-ID
// and set-group-ID (a pull by root would otherwise install an agent's
// setuid-root shell on the host) and write permission for others (an
// agent could make the user's files writable by every local user).
const unsafeModeBits = unix.S_ISUID | unix.S_ISGID | 0o002

// hostMode is the mode a pull gives the host entry of e, where h is what
// the host has there when the pull keeps its content (nil when it writes
// new content): unsafe bits are never added, but those a kept host entry
// already has (the user's own setgid directory, say) stay when the commit
// has them too.
func hostMode(e *objects.Entry, h *hostEntry) uint32 {
	m := e.Mode &^ unsafeModeBits
	if h != nil && h.typ == e.Type {
		m |= e.Mode & unsafeModeBits & h.mode
	}
	return m
}

// noMode is checkDirMode's "no host directory yet".
const noMode = ^uint32(0)

// checkDirMode records a conflict when the commit gives a host directory
// a mode that shuts its owner out (no read or search), or, for one the host has (mode from),
// opens it to writes by its group or others: an agent's chmod 0 src left
// the user's src unreadable after a pull, and art diff does not show
// directory modes. A mode as the workspace's last push stored it is the
// user's own.
func (p *puller) checkDirMode(n *pullNode, from uint32) {
	to := hostMode(n.stored, n.host)
	shut := to&0o500 != 0o500 // read-only ones (Go's module cache) are common
	opened := from != noMode && to&0o022&^from != 0
	if !shut && !opened {
		return
	}
	if a, ok, err := p.pushedEntry(n.rel); err == nil && ok && a.Type == objects.TypeDir && a.Mode == n.stored.Mode {
		return
	}
	if shut {
		p.conflict(n.rel, fmt.Sprintf("a directory mode %04o that shuts its owner out; review it, then pull with --force", to))
	} else {
		p.conflict(n.rel, fmt.Sprintf("a directory mode %04o that lets others write where %04o did not; review it, then pull with --force", to, from&0o7777))
	}
}

// errRaced stops the installation of one entry whose name the host changed
// while the pull ran.
var errRaced = errors.New("changed on the host while the pull ran")

// installStat records the stat of the temporary tmp, then installs it.
func (p *puller) installStat(dfd int, tmp string, n *pullNode) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, tmp, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	n.wrote = &st
	return p.install(dfd, tmp, n)
}

// install renames the temporary tmp to n's name, unless the host changed
// that name since the scan: a name the scan found free is only taken if
// still free (RENAME_NOREPLACE), and an entry being replaced must still be
// the one the scan saw. A raced entry is left as the host has it, the
// temporary removed, and the pull reports it at the end.
func (p *puller) install(dfd int, tmp string, n *pullNode) error {
	var err error
	if n.host == nil || n.host.typ == objects.TypeDir {
		err = unix.Renameat2(dfd, tmp, dfd, n.name, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			// A filesystem without RENAME_NOREPLACE: check, then rename.
			var st unix.Stat_t
			if err = unix.Fstatat(dfd, n.name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
				err = unix.EEXIST
			} else if errors.Is(err, unix.ENOENT) {
				err = unix.Renameat(dfd, tmp, dfd, n.name)
			}
		}
		if errors.Is(err, unix.EEXIST) {
			err = errRaced
		}
	} else {
		var st unix.Stat_t
		if serr := unix.Fstatat(dfd, n.name, &st, unix.AT_SYMLINK_NOFOLLOW); serr != nil || !p.unchangedSinceScan(n.host, &st) {
			err = errRaced
		} else if err = unix.Renameat(dfd, tmp, dfd, n.name); err == nil {
			p.touched[st.Ino]++
		}
	}
	if errors.Is(err, errRaced) {
		unix.Unlinkat(dfd, tmp, 0)
		p.race(n)
		return nil
	}
	return err
}

func (p *puller) race(n *pullNode) {
	n.raced = true
	p.raced = append(p.raced, QuotePath(n.rel))
}

// sameHostStat reports whether st is still the entry the scan saw.
func sameHostStat(h *hostEntry, st *unix.Stat_t) bool {
	return statType(st.Mode) == h.typ && st.Ino == h.ino && st.Mtim.Nano() == h.mtime && st.Ctim.Nano() == h.ctime &&
		(h.typ != objects.TypeFile || st.Size == h.size)
}

// unchangedSinceScan reports whether st is still the entry h the scan saw.
// For an inode the pull itself changed through another name, times and
// the link count moved with that change, so only identity and size count.
func (p *puller) unchangedSinceScan(h *hostEntry, st *unix.Stat_t) bool {
	if p.touched[st.Ino] > 0 {
		return statType(st.Mode) == h.typ && st.Ino == h.ino && (h.typ != objects.TypeFile || st.Size == h.size)
	}
	return sameHostStat(h, st)
}

// chmodNoFollow changes the mode of name in dfd if it is an entry of type
// typ, never a symbolic link's target: the entry is opened with
// O_PATH|O_NOFOLLOW, checked, and changed through that descriptor.
func chmodNoFollow(dfd int, name string, typ objects.Type, mode uint32) error {
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if statType(st.Mode) != typ {
		return errRaced
	}
	return chmodFD(fd, mode)
}

// chmodFD changes the mode of what an O_PATH descriptor refers to:
// fchmodat2 with AT_EMPTY_PATH (Linux 6.6), else through /proc/self/fd,
// which reaches the same inode.
func chmodFD(fd int, mode uint32) error {
	err := unix.Fchmodat(fd, "", mode, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EBADF) {
		err = unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), mode)
	}
	return err
}

// writeContent writes a file's stored content into f, leaving holes where
// it holds runs of 64 KiB of zeros: an agent's sparse file (cheap in the
// repository, whose chunks dedupe zeros) must not fill the host's disk.
func (p *puller) writeContent(f *os.File, e *objects.Entry) error {
	fr, err := objects.NewFileReader(p.r, e.ID, int64(e.Size))
	if err != nil {
		return err
	}
	buf := make([]byte, holeBlock)
	var off int64
	for {
		n, err := io.ReadFull(fr, buf)
		if n > 0 {
			if !objects.IsZero(buf[:n]) {
				if _, werr := f.WriteAt(buf[:n], off); werr != nil {
					return werr
				}
			}
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
	}
	return f.Truncate(off) // the size, trailing holes included
}

// holeBlock is the unit in which a pull leaves zeros out as holes.
const holeBlock = 64 << 10

// refresh brings an entry whose content already matches up to date:
// directory contents, modes and times.
func (p *puller) refresh(dfd int, n *pullNode) error {
	e := n.stored
	ts := unix.NsecToTimespec(e.MTime)
	switch e.Type {
	case objects.TypeDir:
		sub, err := unix.Openat(dfd, n.name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", n.rel, err)
		}
		defer unix.Close(sub)
		if err := p.applyDir(sub, n); err != nil {
			return err
		}
		if to := hostMode(e, n.host); n.host != nil && n.host.mode != to {
			// Listed and counted: a pull that changed only modes
			// said "0 updated".
			p.say("MODE", n.rel, fmt.Sprintf(" (%04o -> %04o)", n.host.mode&0o7777, to&0o7777))
			p.res.Updated++
		}
		if err := unix.Fchmod(sub, hostMode(e, n.host)); err != nil {
			return fmt.Errorf("chmod %s: %w", n.rel, err)
		}
		return unix.UtimesNanoAt(sub, ".", []unix.Timespec{ts, ts}, 0)
	case objects.TypeFile, objects.TypeFifo:
		if n.host != nil && n.host.mode == hostMode(e, n.host) && n.host.mtime == e.MTime {
			return nil
		}
		// The entry must still be what the scan saw (and never a link
		// swapped in since, whose target a chmod would change).
		fd, err := unix.Openat(dfd, n.name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			p.race(n)
			return nil
		}
		if err != nil {
			return fmt.Errorf("open %s: %w", n.rel, err)
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("stat %s: %w", n.rel, err)
		}
		if n.host == nil || !p.unchangedSinceScan(n.host, &st) {
			p.race(n)
			return nil
		}
		if to := hostMode(e, n.host); n.host.mode != to {
			p.say("MODE", n.rel, fmt.Sprintf(" (%04o -> %04o)", n.host.mode&0o7777, to&0o7777))
			p.res.Updated++
		}
		if err := chmodFD(fd, hostMode(e, n.host)); err != nil {
			return fmt.Errorf("chmod %s: %w", n.rel, err)
		}
		if err := unix.UtimesNanoAt(dfd, n.name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("set times of %s: %w", n.rel, err)
		}
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("stat %s: %w", n.rel, err)
		}
		n.wrote = &st
		p.touched[st.Ino]++
		return nil
	case objects.TypeSymlink:
		return unix.UtimesNanoAt(dfd, n.name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	}
	return nil
}

// recordSynced re-reads the stat of every stored path as now on the host.
func (p *puller) recordSynced(root *pullNode) error {
	var walk func(n *pullNode) error
	walk = func(n *pullNode) error {
		for _, k := range n.kids {
			if k.stored == nil {
				continue
			}
			if k.raced {
				continue // not recorded: the next push or pull looks again
			}
			var st unix.Stat_t
			abs := filepath.Join(p.dir, filepath.FromSlash(k.rel))
			if err := lstatPath(abs, &st); errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				p.race(k) // removed by the host meanwhile (with what is below)
				continue
			} else if err != nil {
				return fmt.Errorf("pull: stat %s: %w", abs, err)
			}
			if !p.holdsStored(k, &st) {
				// Changed since the pull wrote or checked it: the stat
				// must not vouch for the stored content.
				p.race(k)
				continue
			}
			h := &hostEntry{rel: k.rel, typ: k.stored.Type, mode: st.Mode & objects.PermMask, mtime: st.Mtim.Nano(),
				ctime: st.Ctim.Nano(), ino: st.Ino, target: k.stored.Target, id: k.stored.ID}
			if h.typ == objects.TypeFile || h.typ == objects.TypeSymlink {
				h.size = st.Size
			}
			p.synced = append(p.synced, h)
			if k.stored.Type == objects.TypeDir {
				if err := walk(k); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(root)
}

// holdsStored reports whether st, taken after the pull, is the entry the
// pull wrote or refreshed for k, or, for one it left untouched, the entry
// the scan saw.
func (p *puller) holdsStored(k *pullNode, st *unix.Stat_t) bool {
	e := k.stored
	if statType(st.Mode) != e.Type {
		return false
	}
	if e.Type == objects.TypeDir {
		return true
	}
	switch {
	case k.wrote != nil && k.op == opKeep && p.touched[st.Ino] > 1:
		// Refreshed here, then again through another name (a hard
		// link): the last refresh's mode and times are what it has.
		return st.Ino == k.wrote.Ino && st.Size == k.wrote.Size
	case k.wrote != nil:
		w := k.wrote
		return st.Ino == w.Ino && st.Size == w.Size && st.Mtim == w.Mtim && st.Mode == w.Mode
	case k.op == opKeep && k.host != nil && e.Type == objects.TypeSymlink:
		return st.Ino == k.host.ino // a link's target changes only with a new inode
	case k.op == opKeep && k.host != nil:
		return p.unchangedSinceScan(k.host, st)
	}
	return false
}

// keepStored returns the entries whose content the repository still
// holds (directories, links and fifos name no content).
func (tx *Tx) keepStored(entries []*hostEntry) ([]*hostEntry, error) {
	var kept []*hostEntry
	for _, e := range entries {
		if e.typ == objects.TypeFile {
			ok, err := tx.exists(`SELECT 1 FROM files WHERE id=? UNION ALL SELECT 1 FROM chunks WHERE id=? LIMIT 1`, e.id[:], e.id[:])
			if err != nil {
				return nil, fmt.Errorf("look up %s: %w", e.rel, err)
			}
			if !ok {
				continue
			}
		}
		kept = append(kept, e)
	}
	return kept, nil
}

// hasCommit reports whether a commit is stored.
func (tx *Tx) hasCommit(id objects.ID) (bool, error) {
	return tx.exists(`SELECT 1 FROM commits WHERE id=?`, id[:])
}
