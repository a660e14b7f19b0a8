package overlay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/overlay"
	"github.com/artproject/art/repo"
)

// These tests drive the overlay model directly, without FUSE; the fuse
// package's tests run the same semantics through a real mount.

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type env struct {
	t   *testing.T
	r   *repo.Repo
	wt  *repo.Worktree
	fs  *overlay.FS
	log *logBuf
}

// newEnv makes a repository whose main branch holds the workspace "ws"
// prepared by setup (nil: an empty tree), and opens a worktree on it.
func newEnv(t *testing.T, setup func(dir string)) *env {
	t.Helper()
	tmp := t.TempDir()
	r, err := repo.Init(filepath.Join(tmp, "art.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if setup != nil {
		host := filepath.Join(tmp, "ws")
		os.Mkdir(host, 0o755)
		setup(host)
		if _, err := r.Push(context.Background(), repo.PushOptions{Dir: host, Branch: "main", Message: "lower"}); err != nil {
			t.Fatal(err)
		}
	} else {
		tx, _ := r.Begin()
		tree, _ := tx.EmptyTree()
		id, err := tx.PutCommit(&objects.Commit{Tree: tree, Time: 1, Author: "t", Message: "empty"})
		if err != nil {
			t.Fatal(err)
		}
		tx.SetBranch("main", id)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	wt, _, err := r.CreateWorktree("main", "mount", "", "")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, r: r, wt: wt, log: &logBuf{}}
	e.open()
	t.Cleanup(func() {
		if e.fs != nil {
			e.fs.Close()
		}
		if s := e.log.String(); s != "" {
			t.Errorf("overlay logged internal errors:\n%s", s)
		}
	})
	return e
}

func (e *env) open() {
	e.t.Helper()
	fs, err := overlay.Open(e.r, e.wt, overlay.Options{Log: log.New(e.log, "", 0)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.fs = fs
}

// reopen closes the overlay (persisting the upper layer) and opens the
// same worktree again.
func (e *env) reopen() {
	e.t.Helper()
	if err := e.fs.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open()
}

// commit folds the worktree into a commit and opens a new worktree on it.
func (e *env) commit() objects.ID {
	e.t.Helper()
	id, err := e.fs.Commit(overlay.CommitOptions{Message: "test"})
	e.fs = nil
	if err != nil {
		e.t.Fatalf("commit: %v", err)
	}
	e.wt, _, err = e.r.CreateWorktree("main", "mount", "", "")
	if err != nil {
		e.t.Fatal(err)
	}
	e.open()
	return id
}

// walk resolves a slash-separated path from the root.
func (e *env) walk(p string) (overlay.Attr, error) {
	a, err := e.fs.Getattr(overlay.RootIno)
	if err != nil {
		return a, err
	}
	for _, c := range strings.Split(strings.Trim(p, "/"), "/") {
		if c == "" {
			continue
		}
		if a, err = e.fs.Lookup(a.Ino, c); err != nil {
			return a, err
		}
	}
	return a, nil
}

func (e *env) ino(p string) uint64 {
	e.t.Helper()
	a, err := e.walk(p)
	if err != nil {
		e.t.Fatalf("%s: %v", p, err)
	}
	return a.Ino
}

func (e *env) read(p string) string {
	e.t.Helper()
	a, err := e.walk(p)
	if err != nil {
		e.t.Fatalf("%s: %v", p, err)
	}
	buf := make([]byte, a.Size+10)
	n, err := e.fs.Read(a.Ino, buf, 0)
	if err != nil {
		e.t.Fatalf("read %s: %v", p, err)
	}
	return string(buf[:n])
}

func (e *env) write(dir, name, content string) uint64 {
	e.t.Helper()
	a, err := e.fs.Create(e.ino(dir), name, 0o644, nil)
	if err != nil {
		e.t.Fatalf("create %s/%s: %v", dir, name, err)
	}
	if _, err := e.fs.Write(a.Ino, []byte(content), 0); err != nil {
		e.t.Fatal(err)
	}
	if err := e.fs.Flush(a.Ino); err != nil {
		e.t.Fatal(err)
	}
	e.fs.Released(a.Ino)
	return a.Ino
}

func (e *env) names(p string) string {
	e.t.Helper()
	ents, err := e.fs.Readdir(e.ino(p))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range ents {
		out = append(out, d.Name)
	}
	return strings.Join(out, " ")
}

func lower(dir string) {
	os.MkdirAll(filepath.Join(dir, "a", "sub"), 0o755)
	os.MkdirAll(filepath.Join(dir, "b", "deep", "er"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", "x"), []byte("lower x"), 0o644)
	os.WriteFile(filepath.Join(dir, "a", "sub", "y"), []byte("lower y"), 0o644)
	os.WriteFile(filepath.Join(dir, "b", "deep", "er", "z"), []byte("lower z"), 0o644)
	os.WriteFile(filepath.Join(dir, "top"), []byte("lower top"), 0o644)
}

func TestCommitNothing(t *testing.T) {
	e := newEnv(t, lower)
	e.read("ws/a/x") // reading copies nothing up
	_, err := e.fs.Commit(overlay.CommitOptions{Message: "nothing"})
	if !errors.Is(err, overlay.ErrNothingToCommit) {
		t.Fatalf("commit without changes: %v", err)
	}
	e.fs = nil
	// The worktree is still there: the failed commit changed nothing.
	wts, err := e.r.Worktrees()
	if err != nil || len(wts) != 1 {
		t.Fatalf("worktrees after an empty commit: %d %v", len(wts), err)
	}
	e.open()
	id, err := e.fs.Commit(overlay.CommitOptions{Message: "empty", AllowEmpty: true})
	e.fs = nil
	if err != nil {
		t.Fatal(err)
	}
	if tip, _ := e.r.BranchTip("main"); tip != id {
		t.Errorf("branch at %s, want %s", tip.Short(), id.Short())
	}
}

// TestCommitAttach: what Attach stores is in the commit's transaction:
// an error there abandons the commit and keeps the worktree; on success
// the commit names the object, so a gc right after keeps it (stored in a
// transaction of its own, a session's syscall log was deleted by a gc
// that ran before the commit).
func TestCommitAttach(t *testing.T) {
	e := newEnv(t, lower)
	e.write("ws", "new", "x")
	_, err := e.fs.Commit(overlay.CommitOptions{Message: "m", Attach: func(*repo.Tx) error { return errors.New("attach failed") }})
	e.fs = nil
	if err == nil || !strings.Contains(err.Error(), "attach failed") {
		t.Fatalf("commit with a failing Attach: %v", err)
	}
	if wts, err := e.r.Worktrees(); err != nil || len(wts) != 1 || wts[0].Pending == 0 {
		t.Fatalf("worktrees after the abandoned commit: %+v %v", wts, err)
	}
	e.open()
	sess := &objects.Session{Mode: "run"}
	log := strings.Repeat("a syscall log line\n", 10000)
	var logID objects.ID
	id, err := e.fs.Commit(overlay.CommitOptions{Message: "m", Session: sess, Attach: func(tx *repo.Tx) error {
		id, _, err := tx.PutFile(strings.NewReader(log))
		logID = id
		sess.TraceID = &id
		return err
	}})
	e.fs = nil
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.GC(e.r.WorktreeRoots); err != nil {
		t.Fatal(err)
	}
	c, err := e.r.LoadCommit(id)
	if err != nil || c.Session == nil || c.Session.TraceID == nil || *c.Session.TraceID != logID {
		t.Fatalf("commit %+v, %v: does not name the attached log %s", c, err, logID.Short())
	}
	fr, err := objects.OpenFile(e.r, logID)
	if err != nil {
		t.Fatalf("the attached log after gc: %v", err)
	}
	if got, err := io.ReadAll(fr); err != nil || string(got) != log {
		t.Fatalf("the attached log after gc: %d bytes, %v", len(got), err)
	}
}

// TestCommitAttachEndsTransaction: an Attach that fails after SQLite
// rolled the transaction back by itself (a full disk) fails the commit
// with nothing recorded and the worktree kept, and a new overlay of the
// worktree then records it (art run does so without the session's log).
func TestCommitAttachEndsTransaction(t *testing.T) {
	e := newEnv(t, lower)
	e.write("ws", "new", "kept across the failed commit")
	tip, _ := e.r.BranchTip("main")
	_, err := e.fs.Commit(overlay.CommitOptions{Message: "m", Attach: func(tx *repo.Tx) error {
		var pages int64
		if err := tx.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
			return err
		}
		if _, err := tx.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+2)); err != nil {
			return err
		}
		big := make([]byte, 4<<20)
		for i := range big {
			big[i] = byte(i * 7919 >> 3)
		}
		_, _, err := tx.PutFile(bytes.NewReader(big))
		if err == nil {
			return errors.New("the full disk was not full")
		}
		return err
	}})
	e.fs = nil
	if err == nil {
		t.Fatal("a commit whose Attach failed was recorded")
	}
	e.r.DB.Exec(`PRAGMA max_page_count = 1073741823`)
	if now, _ := e.r.BranchTip("main"); now != tip {
		t.Fatalf("main moved to %s by a failed commit", now.Short())
	}
	if res, err := e.r.Fsck(nil); err != nil || len(res.Problems) > 0 {
		t.Fatalf("fsck after the failed commit: %v %v", err, res.Problems)
	}
	e.open()
	if got := e.read("ws/new"); got != "kept across the failed commit" {
		t.Fatalf("the worktree after the failed commit: %q", got)
	}
	id, err := e.fs.Commit(overlay.CommitOptions{Message: "again"})
	e.fs = nil
	if err != nil {
		t.Fatal(err)
	}
	if now, _ := e.r.BranchTip("main"); now != id {
		t.Fatalf("main at %s, want %s", now.Short(), id.Short())
	}
	if res, err := e.r.Fsck(nil); err != nil || len(res.Problems) > 0 {
		t.Fatalf("fsck: %v %v", err, res.Problems)
	}
}

// TestFoldAlongChangedPaths: a commit rewrites only the directories on the
// path of a change; untouched subtrees keep their ids.
func TestFoldAlongChangedPaths(t *testing.T) {
	e := newEnv(t, lower)
	base, _ := e.r.BranchTip("main")
	c0, _ := e.r.LoadCommit(base)
	e.write("ws/a/sub", "new", "new file")
	id := e.commit()
	c1, _ := e.r.LoadCommit(id)
	same := func(p string) bool {
		parts := strings.Split(p, "/")
		a, _, err1 := e.r.Lookup(c0.Tree, parts)
		b, _, err2 := e.r.Lookup(c1.Tree, parts)
		if err1 != nil || err2 != nil {
			t.Fatalf("lookup %s: %v %v", p, err1, err2)
		}
		return a.ID == b.ID
	}
	for _, p := range []string{"ws/b", "ws/b/deep", "ws/a/x", "ws/top"} {
		if !same(p) {
			t.Errorf("%s changed id although nothing under it changed", p)
		}
	}
	for _, p := range []string{"ws", "ws/a", "ws/a/sub"} {
		if same(p) {
			t.Errorf("%s kept its id although a file under it was added", p)
		}
	}
	if got := e.read("ws/a/sub/new"); got != "new file" {
		t.Errorf("after commit: %q", got)
	}
}

// TestSetgidDirectoryInherited: regression. A directory created in a
// set-group-ID directory did not inherit the bit, unlike on every local
// filesystem (found by the fuse package's model test).
func TestSetgidDirectoryInherited(t *testing.T) {
	e := newEnv(t, lower)
	mode := uint32(0o2775)
	if _, err := e.fs.Setattr(e.ino("ws/a"), overlay.SetAttr{Mode: &mode}); err != nil {
		t.Fatal(err)
	}
	d, err := e.fs.Mkdir(e.ino("ws/a"), "child", 0o755, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Mode != 0o2755 {
		t.Errorf("directory in a setgid directory: mode %o, want 2755", d.Mode)
	}
	f, err := e.fs.Create(e.ino("ws/a"), "file", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.fs.Released(f.Ino)
	if f.Mode != 0o644 {
		t.Errorf("file in a setgid directory: mode %o, want 644", f.Mode)
	}
	d2, _ := e.fs.Mkdir(e.ino("ws/b"), "plain", 0o755, nil)
	if d2.Mode != 0o755 {
		t.Errorf("directory in a plain directory: mode %o", d2.Mode)
	}
}

// TestTmpfile: regression. O_TMPFILE was refused (EOPNOTSUPP); a file
// created in no directory is freed on its last close unless linked.
func TestTmpfile(t *testing.T) {
	e := newEnv(t, lower)
	a, err := e.fs.Tmpfile(e.ino("ws/a"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Nlink != 0 {
		t.Errorf("tmpfile nlink %d", a.Nlink)
	}
	e.fs.Write(a.Ino, []byte("kept"), 0)
	if got := e.names("ws/a"); got != "sub x" {
		t.Errorf("tmpfile shows up in its directory: %s", got)
	}
	if _, err := e.fs.Link(a.Ino, e.ino("ws/b"), "linked"); err != nil {
		t.Fatal(err)
	}
	e.fs.Flush(a.Ino)
	e.fs.Released(a.Ino)
	b, err := e.fs.Tmpfile(e.ino("ws"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.fs.Write(b.Ino, []byte("dropped"), 0)
	e.fs.Released(b.Ino)
	if _, err := e.fs.Getattr(b.Ino); err == nil {
		if _, err := e.fs.Read(b.Ino, make([]byte, 10), 0); err == nil {
			t.Errorf("released tmpfile is still readable")
		}
	}
	e.reopen()
	if got := e.read("ws/b/linked"); got != "kept" {
		t.Errorf("linked tmpfile after reopen: %q", got)
	}
	e.commit()
	if got := e.read("ws/b/linked"); got != "kept" {
		t.Errorf("linked tmpfile after commit: %q", got)
	}
	if got := e.names("ws"); got != "a b top" {
		t.Errorf("workspace after commit: %s", got)
	}
}

// TestSparseAlloc: regression. st_blocks reported the full size of a
// sparse file; holes must take no space.
func TestSparseAlloc(t *testing.T) {
	e := newEnv(t, nil)
	a, err := e.fs.Create(overlay.RootIno, "sparse", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.fs.Released(a.Ino)
	if _, err := e.fs.Write(a.Ino, []byte("x"), 100<<20); err != nil {
		t.Fatal(err)
	}
	for _, stage := range []string{"dirty", "flushed"} {
		got, _ := e.fs.Getattr(a.Ino)
		if got.Size != 100<<20+1 || got.Alloc > overlay.BlockSize {
			t.Errorf("%s: size %d, alloc %d", stage, got.Size, got.Alloc)
		}
		e.fs.Flush(a.Ino)
	}
	if off, err := e.fs.SeekData(a.Ino, 0, false); err != nil || off != 100<<20-100<<20%overlay.BlockSize {
		t.Errorf("SEEK_DATA: %d %v", off, err)
	}
	if off, err := e.fs.SeekData(a.Ino, 0, true); err != nil || off != 0 {
		t.Errorf("SEEK_HOLE: %d %v", off, err)
	}
	// A dense file occupies its size.
	d := e.write("", "dense", strings.Repeat("d", 200<<10))
	if got, _ := e.fs.Getattr(d); got.Alloc < 200<<10 || got.Alloc > 200<<10+overlay.BlockSize {
		t.Errorf("dense file: alloc %d for %d bytes", got.Alloc, got.Size)
	}
}

// TestBlockGrowth: a block's buffer grows with the writes into it (a
// small file does not take a whole block); what lies between the written
// parts, and past a truncation, reads as zeros, whatever the block held
// before.
func TestBlockGrowth(t *testing.T) {
	e := newEnv(t, nil)
	a, err := e.fs.Create(overlay.RootIno, "grown", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.fs.Released(a.Ino)
	want := make([]byte, 0, overlay.BlockSize+10)
	write := func(p []byte, off int) {
		t.Helper()
		if _, err := e.fs.Write(a.Ino, p, int64(off)); err != nil {
			t.Fatal(err)
		}
		if end := off + len(p); end > len(want) {
			old := len(want)
			want = want[:end]
			clear(want[old:])
		}
		copy(want[off:], p)
	}
	truncate := func(size int) {
		t.Helper()
		sz := int64(size)
		if _, err := e.fs.Setattr(a.Ino, overlay.SetAttr{Size: &sz}); err != nil {
			t.Fatal(err)
		}
		old := len(want)
		want = want[:size]
		if size > old {
			clear(want[old:])
		}
	}
	check := func(step string) {
		t.Helper()
		got := make([]byte, len(want)+100)
		k, err := e.fs.Read(a.Ino, got, 0)
		if err != nil || !bytes.Equal(got[:k], want) {
			t.Fatalf("%s: read %d bytes (%v), differing from the %d written", step, k, err, len(want))
		}
	}
	junk := func(n int) []byte { return bytes.Repeat([]byte{0xa5}, n) }
	write(junk(100), 0)
	write(junk(3000), 5000) // past the first page: a hole between
	check("two writes with a hole")
	truncate(50)
	write([]byte("x"), 3000) // the truncated bytes must not come back
	check("truncate, then a write past the old data")
	write(junk(10), overlay.BlockSize-5) // across into the next block
	check("a write across a block boundary")
	truncate(overlay.BlockSize + 2)
	truncate(overlay.BlockSize + 9)
	check("truncate down and up within the second block")
	e.fs.Flush(a.Ino)
	check("flushed")
}

// TestPersistAndReopen: the upper layer survives a close and reopen of
// the worktree: contents, whiteouts, opaque directories, renames, links,
// symlinks, xattrs, times and inode numbers.
func TestPersistAndReopen(t *testing.T) {
	e := newEnv(t, lower)
	fs := e.fs
	e.write("ws", "new", "new content")
	if err := fs.Unlink(e.ino("ws"), "top"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Rename(e.ino("ws/a"), "sub", e.ino("ws/b"), "moved", 0); err != nil {
		t.Fatal(err)
	}
	if err := fs.Unlink(e.ino("ws/b/deep/er"), "z"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Rmdir(e.ino("ws/b/deep"), "er"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Mkdir(e.ino("ws/b/deep"), "er", 0o700, nil); err != nil { // opaque
		t.Fatal(err)
	}
	if _, err := fs.Link(e.ino("ws/a/x"), e.ino("ws"), "xlink"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Symlink(e.ino("ws"), "sym", "a/x", nil); err != nil {
		t.Fatal(err)
	}
	if err := fs.SetXattr(e.ino("ws/a/x"), "user.k", []byte("v"), 0, false); err != nil {
		t.Fatal(err)
	}
	mt := int64(1234567890123456789)
	if _, err := fs.Setattr(e.ino("ws/new"), overlay.SetAttr{Mtime: &mt}); err != nil {
		t.Fatal(err)
	}
	// An unlinked file still open when the worktree closes is garbage.
	g := e.write("ws", "gone", "gone")
	fs.Opened(g)
	fs.Unlink(e.ino("ws"), "gone")

	inos := map[string]uint64{}
	for _, p := range []string{"ws", "ws/a", "ws/a/x", "ws/b/moved", "ws/b/moved/y", "ws/new", "ws/xlink", "ws/sym", "ws/b/deep/er"} {
		inos[p] = e.ino(p)
	}
	e.reopen()
	for p, want := range inos {
		if got := e.ino(p); got != want {
			t.Errorf("%s: inode %d after reopen, was %d", p, got, want)
		}
	}
	checks := func(stage string) {
		if got := e.names("ws"); got != "a b new sym xlink" {
			t.Errorf("%s: ws holds %s", stage, got)
		}
		if got := e.names("ws/a"); got != "x" {
			t.Errorf("%s: ws/a holds %s", stage, got)
		}
		if got := e.names("ws/b/deep/er"); got != "" {
			t.Errorf("%s: opaque directory holds %s", stage, got)
		}
		if got := e.read("ws/b/moved/y"); got != "lower y" {
			t.Errorf("%s: moved child: %q", stage, got)
		}
		if got := e.read("ws/new"); got != "new content" {
			t.Errorf("%s: new: %q", stage, got)
		}
		if a, _ := e.walk("ws/new"); a.Mtime != mt {
			t.Errorf("%s: mtime %d, want %d", stage, a.Mtime, mt)
		}
		if v, err := e.fs.GetXattr(e.ino("ws/a/x"), "user.k"); err != nil || string(v) != "v" {
			t.Errorf("%s: xattr %q %v", stage, v, err)
		}
		if target, err := e.fs.Readlink(e.ino("ws/sym")); err != nil || target != "a/x" {
			t.Errorf("%s: symlink %q %v", stage, target, err)
		}
	}
	checks("reopened")
	if a, _ := e.walk("ws/xlink"); a.Nlink != 2 || a.Ino != e.ino("ws/a/x") {
		t.Errorf("hard link after reopen: nlink %d", a.Nlink)
	}
	e.commit()
	checks("committed")
}

func TestReadOnly(t *testing.T) {
	e := newEnv(t, lower)
	e.fs.Close()
	fs, err := overlay.Open(e.r, e.wt, overlay.Options{ReadOnly: true, Log: log.New(e.log, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	e.fs = fs
	ws := e.ino("ws")
	if _, err := fs.Create(ws, "f", 0o644, nil); !errors.Is(err, syscall.EROFS) {
		t.Errorf("create: %v", err)
	}
	if _, err := fs.Write(e.ino("ws/top"), []byte("x"), 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write: %v", err)
	}
	if err := fs.Unlink(ws, "top"); !errors.Is(err, syscall.EROFS) {
		t.Errorf("unlink: %v", err)
	}
	if err := fs.Rename(ws, "top", ws, "x", 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("rename: %v", err)
	}
	// An open for writing is refused at the open, as on a read-only
	// filesystem (it used to succeed, and only the write failed).
	if err := fs.CheckOpen(e.ino("ws/top"), true); !errors.Is(err, syscall.EROFS) {
		t.Errorf("open for writing: %v", err)
	}
	if err := fs.CheckOpen(e.ino("ws/top"), false); err != nil {
		t.Errorf("open for reading: %v", err)
	}
	if got := e.read("ws/top"); got != "lower top" {
		t.Errorf("read: %q", got)
	}
}

// TestBranchMoved: a commit whose branch moved since the worktree opened
// is refused with a hint, and changes nothing.
func TestBranchMoved(t *testing.T) {
	e := newEnv(t, lower)
	e.write("ws", "f", "x")
	tx, _ := e.r.Begin()
	tree, _ := tx.EmptyTree()
	other, _ := tx.PutCommit(&objects.Commit{Tree: tree, Time: 2, Author: "t", Message: "elsewhere"})
	tx.SetBranch("main", other)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	_, err := e.fs.Commit(overlay.CommitOptions{Message: "late"})
	e.fs = nil
	if err == nil || !strings.Contains(err.Error(), "moved") {
		t.Fatalf("commit after the branch moved: %v", err)
	}
	if tip, _ := e.r.BranchTip("main"); tip != other {
		t.Errorf("branch moved by a refused commit")
	}
	wts, _ := e.r.Worktrees()
	if len(wts) != 1 || wts[0].Pending == 0 {
		t.Errorf("worktree after a refused commit: %+v", wts)
	}
}

// TestConcurrentOperations runs namespace and data operations from many
// goroutines (meant for -race): no single lock serialises requests, so the
// per-inode and namespace locking must hold.
func TestConcurrentOperations(t *testing.T) {
	e := newEnv(t, lower)
	fs := e.fs
	ws := e.ino("ws")
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			d, err := fs.Mkdir(ws, fmt.Sprintf("g%d", g), 0o755, nil)
			if err != nil {
				errs <- err
				return
			}
			for i := 0; i < 50; i++ {
				name := fmt.Sprintf("f%d", i)
				a, err := fs.Create(d.Ino, name, 0o644, nil)
				if err != nil {
					errs <- err
					return
				}
				data := bytes.Repeat([]byte{byte(g), byte(i)}, 40000)
				fs.Write(a.Ino, data, int64(i*1000))
				buf := make([]byte, len(data))
				if n, err := fs.Read(a.Ino, buf, int64(i*1000)); err != nil || !bytes.Equal(buf[:n], data) {
					errs <- fmt.Errorf("g%d/%s: read back %d bytes, %v", g, name, n, err)
				}
				if i%5 == 0 {
					fs.Flush(a.Ino)
				}
				fs.Released(a.Ino)
				if i%3 == 0 {
					fs.Rename(d.Ino, name, ws, fmt.Sprintf("r%d-%d", g, i), 0)
				}
				if i%7 == 0 {
					fs.Readdir(ws)
					fs.Lookup(ws, "top")
					fs.Read(e.ino("ws/a/x"), make([]byte, 10), 0)
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	e.reopen()
	if n := len(strings.Fields(e.names("ws"))); n != 3+8+8*17 {
		t.Errorf("%d entries in ws after the concurrent run", n)
	}
	e.commit()
	if got := e.read("ws/r3-9"); len(got) != 9000+80000 {
		t.Errorf("r3-9 after commit: %d bytes", len(got))
	}
}

// TestLookupRacesWithData: regression. Lookup records the path policy's
// verdict on the node (under the node's lock) while Write, Setattr,
// SetXattr and Readlink read it without that lock: a data race between a
// stat and a write or readlink of the same node (found by go test -race
// on the posixtest OpenSymlinkRace case).
func TestLookupRacesWithData(t *testing.T) {
	e := newEnv(t, lower)
	ws := e.ino("ws")
	if _, err := e.fs.Symlink(ws, "sym", "top", nil); err != nil {
		t.Fatal(err)
	}
	top, sym := e.ino("ws/top"), e.ino("ws/sym")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	loop := func(f func(i int) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := f(i); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	loop(func(int) error { _, err := e.fs.Lookup(ws, "top"); return err })
	loop(func(int) error { _, err := e.fs.Lookup(ws, "sym"); return err })
	loop(func(int) error { _, err := e.fs.Readlink(sym); return err })
	loop(func(i int) error { _, err := e.fs.Write(top, []byte("x"), int64(i%1000)); return err })
	loop(func(i int) error {
		mt := int64(i)
		_, err := e.fs.Setattr(top, overlay.SetAttr{Mtime: &mt})
		return err
	})
	loop(func(int) error { return e.fs.SetXattr(top, "user.i", []byte("v"), 0, false) })
	time.Sleep(500 * time.Millisecond) // let the loops overlap
	close(stop)
	wg.Wait()
}

// A commit that cannot read a changed file's content (here its lower
// chunks are corrupt) fails naming the file, with the branch and the
// worktree left as they were. The commit now stores changed files on
// every CPU; the failure of one of them must still stop it whole.
func TestCommitNamesFileItCannotRead(t *testing.T) {
	content := make([]byte, 300_000)
	for i := range content {
		content[i] = byte(i*7 + i/251)
	}
	e := newEnv(t, func(dir string) {
		os.Mkdir(filepath.Join(dir, "sub"), 0o755)
		os.WriteFile(filepath.Join(dir, "sub", "big"), content, 0o644)
	})
	for i := range 20 { // other files for the other workers
		e.write("ws", fmt.Sprintf("f%d", i), strings.Repeat(fmt.Sprint(i), 1000))
	}
	ino := e.ino("ws/sub/big")
	e.fs.Opened(ino)
	if _, err := e.fs.Write(ino, []byte("X"), 0); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Flush(ino); err != nil {
		t.Fatal(err)
	}
	e.fs.Released(ino)
	tip, err := e.r.BranchTip("main")
	if err != nil {
		t.Fatal(err)
	}
	// Corrupt the lower file's chunks past the first (the write read the
	// first into the chunk cache), as a bad disk would.
	ch := objects.NewChunker(bytes.NewReader(content), nil)
	for first := true; ; first = false {
		c, err := ch.Next()
		if err != nil {
			break
		}
		if !first {
			if _, err := e.r.DB.Exec(`UPDATE chunks SET data=zeroblob(length(data)) WHERE id=?`, func() []byte { id := objects.Hash(c); return id[:] }()); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, err = e.fs.Commit(overlay.CommitOptions{Message: "test"})
	e.fs = nil
	if err == nil || !strings.Contains(err.Error(), "store ws/sub/big:") {
		t.Fatalf("commit over a corrupt file: %v, want an error naming ws/sub/big", err)
	}
	if now, _ := e.r.BranchTip("main"); now != tip {
		t.Errorf("the failed commit moved main to %s", now.Short())
	}
	if wts, err := e.r.Worktrees(); err != nil || len(wts) != 1 || wts[0].ID != e.wt.ID {
		t.Errorf("worktrees after the failed commit: %v, %v", wts, err)
	}
	e.log.mu.Lock()
	e.log.b.Reset() // the corruption was logged, as it should be
	e.log.mu.Unlock()
}

// Sockets and device nodes can be made, linked, renamed and survive a
// reopen of the worktree, but a commit leaves them out: they belong to the
// session (overlay.TypeSocket).
func TestSessionOnlyNodes(t *testing.T) {
	e := newEnv(t, lower)
	ws := e.ino("ws")
	nodes := []struct {
		name string
		typ  objects.Type
		rdev uint32
	}{
		{"sock", overlay.TypeSocket, 0},
		{"null", overlay.TypeCharDev, 1<<8 | 3},
		{"loop", overlay.TypeBlockDev, 7<<8 | 1},
	}
	for _, n := range nodes {
		a, err := e.fs.Mknod(ws, n.name, n.typ, 0o640, n.rdev, nil)
		if err != nil {
			t.Fatalf("mknod %s: %v", n.name, err)
		}
		if a.Type != n.typ || a.Rdev != n.rdev || a.Mode != 0o640 || a.Size != 0 {
			t.Errorf("%s: attr %+v", n.name, a)
		}
	}
	if _, err := e.fs.Mknod(ws, "file", objects.TypeFile, 0o644, 0, nil); err == nil {
		t.Error("Mknod made a regular file; only sockets and devices are its business")
	}
	if _, err := e.fs.Mknod(ws, "sock", overlay.TypeSocket, 0o644, 0, nil); err == nil {
		t.Error("Mknod over an existing name succeeded")
	}
	if _, err := e.fs.Link(e.ino("ws/null"), ws, "null2"); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Rename(ws, "loop", e.ino("ws/a"), "loop", 0); err != nil {
		t.Fatal(err)
	}
	// One replaces a lower file: the commit must record that file deleted.
	if err := e.fs.Unlink(ws, "top"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Mknod(ws, "top", overlay.TypeSocket, 0o600, 0, nil); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	if a, err := e.walk("ws/a/loop"); err != nil || a.Type != overlay.TypeBlockDev || a.Rdev != 7<<8|1 {
		t.Errorf("block device after reopen: %+v %v", a, err)
	}
	if a, err := e.walk("ws/null2"); err != nil || a.Type != overlay.TypeCharDev || a.Rdev != 1<<8|3 || a.Nlink != 2 {
		t.Errorf("linked char device after reopen: %+v %v", a, err)
	}
	if got := e.names("ws"); got != "a b null null2 sock top" {
		t.Errorf("ws after reopen holds %s", got)
	}
	id := e.commit()
	c, err := e.r.LoadCommit(id)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := e.r.Fsck(nil); err != nil || len(res.Problems) > 0 {
		t.Errorf("fsck after the commit: %v %v", res, err)
	}
	if got := e.names("ws"); got != "a b" {
		t.Errorf("the commit %s kept session-only nodes or the replaced file: ws holds %s", c.Tree.Short(), got)
	}
	if got := e.names("ws/a"); got != "sub x" {
		t.Errorf("ws/a holds %s after the commit", got)
	}
}

// A directory's link count is 2 plus its subdirectories, as on ext4, for
// lower directories, through mkdir, rmdir, rename and exchange, and after
// a reopen.
func TestDirectoryLinkCounts(t *testing.T) {
	e := newEnv(t, lower) // ws: a/{sub,x}, b/deep/er/z, top
	nlink := func(p string) uint32 {
		t.Helper()
		a, err := e.walk(p)
		if err != nil {
			t.Fatal(err)
		}
		return a.Nlink
	}
	check := func(stage string, want map[string]uint32) {
		t.Helper()
		for p, n := range want {
			if got := nlink(p); got != n {
				t.Errorf("%s: %s has %d links, want %d", stage, p, got, n)
			}
		}
	}
	check("lower", map[string]uint32{"": 3, "ws": 4, "ws/a": 3, "ws/a/sub": 2, "ws/b": 3, "ws/b/deep": 3})
	ws := e.ino("ws")
	if _, err := e.fs.Mkdir(ws, "c", 0o755, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Rename(e.ino("ws/a"), "sub", e.ino("ws/b"), "sub", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Create(ws, "f", 0o644, nil); err != nil {
		t.Fatal(err)
	}
	// Exchange a directory for a file across directories.
	if err := e.fs.Rename(ws, "f", e.ino("ws/b"), "deep", overlay.RenameExchange); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint32{"ws": 6, "ws/a": 2, "ws/b": 3, "ws/c": 2, "ws/f": 3}
	check("changed", want)
	// Replace an empty directory by another, then remove one.
	for _, p := range []string{"ws/c", "ws/b"} {
		if _, err := e.fs.Mkdir(e.ino(p), "d", 0o755, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.fs.Rename(e.ino("ws/c"), "d", e.ino("ws/b"), "d", 0); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Unlink(e.ino("ws/a"), "x"); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Rmdir(ws, "a"); err != nil {
		t.Fatal(err)
	}
	want = map[string]uint32{"ws": 5, "ws/b": 4, "ws/c": 2, "ws/f": 3, "ws/b/d": 2}
	check("replaced and removed", want)
	e.reopen()
	check("reopened", want)
	e.commit()
	check("committed", want)
}

// A directory whose tree encodes past 64 MiB (1,024 files with a 64 KiB
// xattr each, within the xattr memory bound) is committed, read back and
// passes fsck: it used to make its branch unreadable.
func TestCommitLargeDirectoryTree(t *testing.T) {
	e := newEnv(t, nil)
	ws, err := e.fs.Mkdir(overlay.RootIno, "ws", 0o755, nil)
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte{'x'}, 65530)
	const files = 1024
	for i := range files {
		a, err := e.fs.Create(ws.Ino, fmt.Sprintf("f%04d", i), 0o644, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.fs.Released(a.Ino)
		if err := e.fs.SetXattr(a.Ino, "user.x", value, 0, false); err != nil {
			t.Fatalf("xattr of file %d: %v", i, err)
		}
	}
	e.commit()
	ents, err := e.fs.Readdir(e.ino("ws"))
	if err != nil || len(ents) < files {
		t.Fatalf("the committed directory lists %d entries: %v", len(ents), err)
	}
	if v, err := e.fs.GetXattr(e.ino("ws/f1023"), "user.x"); err != nil || len(v) != len(value) {
		t.Errorf("xattr after the commit: %d bytes, %v", len(v), err)
	}
	if res, err := e.r.Fsck(nil); err != nil || len(res.Problems) > 0 {
		t.Errorf("fsck: %v %v", res.Problems, err)
	}
}

// A lower file whose size a session changed with no write (truncate(2)
// shorter or longer) is stored as it now reads, not taken for its
// unchanged lower content: the commit's entry and content agree.
func TestCommitOfAResizedLowerFile(t *testing.T) {
	const content = "hello, world\n"
	for _, tc := range []struct {
		name   string
		size   int64
		reopen bool // the worktree is closed and opened again before the commit
	}{
		{"shorter", 5, false},
		{"longer", 20, false},
		{"empty", 0, false},
		{"shorter, after a reopen", 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(dir string) {
				os.WriteFile(filepath.Join(dir, "f"), []byte(content), 0o644)
			})
			size := tc.size
			if _, err := e.fs.Setattr(e.ino("ws/f"), overlay.SetAttr{Size: &size}); err != nil {
				t.Fatal(err)
			}
			if tc.reopen {
				e.reopen()
			}
			e.commit()
			want := (content + strings.Repeat("\x00", 20))[:size]
			if got := e.read("ws/f"); got != want {
				t.Errorf("f after the commit = %q, want %q", got, want)
			}
			if res, err := e.r.Fsck(nil); err != nil || len(res.Problems) > 0 {
				t.Fatalf("fsck: %v %v", err, res.Problems)
			}
		})
	}
}
