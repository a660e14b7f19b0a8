package fuse

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/overlay"
	"github.com/artproject/art/repo"
)

// requireFUSE skips the test when the facility to mount is missing (no
// /dev/fuse, or no fusermount3 for a non-root user), saying why.
func requireFUSE(t testing.TB) {
	t.Helper()
	if err := CheckFUSE(); err != nil {
		t.Skipf("FUSE is not usable here, skipping: %v", err)
	}
}

// wsName is the basename of the host directory pushed as the lower layer:
// its content appears at /<wsName>/ in the mount.
const wsName = "ws"

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testMount is a real repository with one worktree mounted through FUSE.
type testMount struct {
	t      testing.TB
	Repo   *repo.Repo
	DBPath string
	Branch string
	Dir    string // the mount point
	WT     *repo.Worktree
	OFS    *overlay.FS
	srv    *Server

	allowOther bool           // mounted with allow_other
	faults     *ringFaults    // failures injected into the io_uring transport
	maxHeld    int64          // overlay.Options.MaxHeld at the next open
	owner      *overlay.Owner // overlay.Options.Owner at the next open (nil: this process's user)

	artLog  *syncBuffer // internal errors of the overlay (must stay empty)
	fuseLog *syncBuffer // go-fuse and adapter messages (no panics allowed)
	// AllowLog lets a test that provokes internal errors (corruption)
	// keep the overlay log non-empty.
	AllowLog bool
}

// WS returns the path of the pushed workspace inside the mount.
func (m *testMount) WS(rel ...string) string {
	return filepath.Join(append([]string{m.Dir, wsName}, rel...)...)
}

// newTestMount creates a repository in a temporary directory, pushes the
// directory prepared by setup (if setup is not nil) as the lower layer,
// creates a worktree on main and mounts it. Without setup, main starts at
// a commit of the empty tree. Cleanup unmounts, closes everything, and
// fails the test if a mount or a file descriptor is left behind.
func newTestMount(t testing.TB, setup func(dir string)) *testMount {
	t.Helper()
	return newTestMountAs(t, setup, false)
}

// newTestMountAs is newTestMount, with allow_other when allowOther is set
// (other users reach the mount).
func newTestMountAs(t testing.TB, setup func(dir string), allowOther bool) *testMount {
	t.Helper()
	return newTestMountWith(t, setup, allowOther, nil)
}

// newTestMountWith is newTestMountAs, with failures injected into the
// io_uring transport.
func newTestMountWith(t testing.TB, setup func(dir string), allowOther bool, faults *ringFaults) *testMount {
	t.Helper()
	requireFUSE(t)
	fdsBefore := openFDs(t)
	tmp := t.TempDir()
	m := &testMount{t: t, DBPath: filepath.Join(tmp, "repo", "art.db"), Branch: "main", Dir: filepath.Join(tmp, "mnt"), artLog: &syncBuffer{}, fuseLog: &syncBuffer{}, allowOther: allowOther, faults: faults}
	r, err := repo.Init(m.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	m.Repo = r
	if setup != nil {
		host := filepath.Join(tmp, "host", wsName)
		if err := os.MkdirAll(host, 0o755); err != nil {
			t.Fatal(err)
		}
		setup(host)
		if _, err := r.Push(context.Background(), repo.PushOptions{Dir: host, Branch: m.Branch, Message: "lower"}); err != nil {
			r.Close()
			t.Fatalf("push lower layer: %v", err)
		}
	} else {
		emptyCommit(t, r, m.Branch)
	}
	if err := os.Mkdir(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.cleanup(fdsBefore) })
	m.WT = m.createWorktree()
	m.open()
	m.mount()
	return m
}

// emptyCommit points branch at a commit of the empty tree.
func emptyCommit(t testing.TB, r *repo.Repo, branch string) objects.ID {
	t.Helper()
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	tree, err := tx.EmptyTree()
	if err != nil {
		t.Fatal(err)
	}
	id, err := tx.PutCommit(&objects.Commit{Tree: tree, Time: time.Now().UnixNano(), Author: "test", Message: "empty"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.SetBranch(branch, id); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return id
}

func (m *testMount) createWorktree() *repo.Worktree {
	m.t.Helper()
	wt, _, err := m.Repo.CreateWorktree(m.Branch, "mount", m.Dir, "")
	if err != nil {
		m.t.Fatalf("create worktree: %v", err)
	}
	return wt
}

func (m *testMount) open() {
	m.t.Helper()
	owner := overlay.Owner{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	if m.owner != nil {
		owner = *m.owner
	}
	ofs, err := overlay.Open(m.Repo, m.WT, overlay.Options{Log: log.New(m.artLog, "", 0), MaxHeld: m.maxHeld, Owner: owner})
	if err != nil {
		m.t.Fatalf("overlay.Open: %v", err)
	}
	m.OFS = ofs
}

func (m *testMount) mount() {
	m.t.Helper()
	srv, err := Mount(m.Dir, m.OFS, Options{
		AllowOther: m.allowOther,
		faults:     m.faults,
		Debug:      os.Getenv("ART_FUSE_DEBUG") != "",
		Log:        log.New(io.MultiWriter(m.fuseLog, debugSink()), "", log.Lmicroseconds),
	})
	if err != nil {
		m.t.Fatalf("mount %s: %v", m.Dir, err)
	}
	m.srv = srv
	liveMu.Lock()
	liveMounts[m.Dir] = true
	liveMu.Unlock()
}

func debugSink() io.Writer {
	if os.Getenv("ART_FUSE_DEBUG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// unmount unmounts and waits for the server to stop.
func (m *testMount) unmount() {
	m.t.Helper()
	if m.srv == nil {
		return
	}
	var err error
	for i := 0; i < 50; i++ {
		if err = m.srv.Unmount(); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // a file closed just before may still be busy in the kernel
	}
	if err != nil {
		m.t.Errorf("unmount %s: %v", m.Dir, err)
		abortMount(m.Dir)
	}
	m.srv.Wait()
	m.srv = nil
}

var (
	liveMu     sync.Mutex
	liveMounts = map[string]bool{}
)

// abortLiveMounts is the last resort before the test binary dies (test
// timeout): abort every mount it still serves, so the exit cannot hang.
func abortLiveMounts() {
	liveMu.Lock()
	defer liveMu.Unlock()
	for dir := range liveMounts {
		fmt.Fprintf(os.Stderr, "aborting the FUSE mount at %s before the test binary exits\n", dir)
		abortMount(dir)
	}
}

// closeFS persists and closes the overlay without committing.
func (m *testMount) closeFS() {
	m.t.Helper()
	if m.OFS == nil {
		return
	}
	if err := m.OFS.Close(); err != nil {
		m.t.Errorf("overlay Close: %v", err)
	}
	m.OFS = nil
}

// Remount unmounts, closes the overlay (the upper layer stays in the
// repository) and mounts the SAME worktree again.
func (m *testMount) Remount() {
	m.t.Helper()
	m.unmount()
	m.closeFS()
	// The persisted upper layer, pending changes and all, is a valid
	// repository state: fsck must accept it.
	if res, err := m.Repo.Fsck(nil); err != nil {
		m.t.Fatalf("fsck of the worktree between mounts: %v", err)
	} else if len(res.Problems) > 0 {
		m.t.Fatalf("fsck of the worktree between mounts: %v", res.Problems)
	}
	m.open()
	m.mount()
}

// Commit unmounts and folds the worktree into a commit on the branch,
// then mounts a new worktree of that commit.
func (m *testMount) Commit(msg string) objects.ID {
	m.t.Helper()
	id, err := m.CommitErr(msg)
	if err != nil {
		m.t.Fatalf("commit: %v", err)
	}
	return id
}

// CommitErr is Commit returning the error of the commit; on error the
// same worktree is remounted.
func (m *testMount) CommitErr(msg string) (objects.ID, error) {
	m.t.Helper()
	m.unmount()
	id, err := m.OFS.Commit(overlay.CommitOptions{Message: msg, Session: &objects.Session{Mode: "mount"}})
	if err != nil {
		// The overlay cannot be used after a failed commit attempt: reopen.
		m.OFS = nil
		m.open()
		m.mount()
		return id, err
	}
	m.OFS = nil
	m.WT = m.createWorktree()
	m.open()
	m.mount()
	return id, nil
}

func (m *testMount) cleanup(fdsBefore map[string]string) {
	t := m.t
	m.unmount()
	liveMu.Lock()
	delete(liveMounts, m.Dir)
	liveMu.Unlock()
	m.closeFS()
	if m.Repo != nil {
		m.Repo.Close()
	}
	if mounted, err := IsMountpoint(m.Dir); err != nil {
		t.Errorf("read mountinfo: %v", err)
	} else if mounted {
		t.Errorf("leftover mount at %s", m.Dir)
		syscall.Unmount(m.Dir, syscall.MNT_DETACH)
	}
	if s := m.artLog.String(); s != "" && !m.AllowLog {
		t.Errorf("overlay logged internal errors:\n%s", s)
	}
	if s := m.fuseLog.String(); strings.Contains(s, "panic") {
		t.Errorf("FUSE adapter panicked:\n%s", s)
	}
	checkFDLeak(t, fdsBefore)
}

// openFDs lists this process's open descriptors (fd → target), ignoring
// pipes and epoll instances the runtime and go-fuse create on demand.
func openFDs(t testing.TB) map[string]string {
	out := map[string]string{}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the fd of ReadDir itself, closed meanwhile
		}
		// go-fuse's splice package keeps one /dev/null open for the
		// process once it has spliced.
		if strings.HasPrefix(target, "pipe:") || strings.HasPrefix(target, "anon_inode:") || strings.HasPrefix(target, "/proc/") || target == os.DevNull {
			continue
		}
		out[e.Name()] = target
	}
	return out
}

// checkFDLeak fails the test if descriptors opened since before are still
// open. It gives them two seconds: go-fuse's Server.Wait returns when the
// request loops end, and the goroutine running Serve closes /dev/fuse only
// after that (a CI run caught the check in between).
func checkFDLeak(t testing.TB, before map[string]string) {
	if before == nil {
		return
	}
	var leaked []string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		leaked = leaked[:0]
		for fd, target := range openFDs(t) {
			if before[fd] != target {
				leaked = append(leaked, fd+" -> "+target)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			break
		}
	}
	sort.Strings(leaked)
	if len(leaked) > 0 {
		t.Errorf("file descriptors leaked by the test mount: %s", strings.Join(leaked, ", "))
	}
}

// mountsUnder returns the mount points below dir in /proc/self/mountinfo.
func mountsUnder(dir string) []string {
	mps, _ := MountPoints()
	var out []string
	for _, p := range mps {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}

// --- tree snapshots ---------------------------------------------------

// fileInfo is what a tree comparison looks at for one path.
type fileInfo struct {
	Type   string
	Mode   uint32
	Size   int64
	Sum    string // content hash of files
	Target string
	Mtime  int64
	Xattrs string
	Ino    uint64
	Nlink  uint64
}

func (f fileInfo) String() string {
	return fmt.Sprintf("%s mode=%o size=%d sum=%.12s target=%q mtime=%d xattrs=%q", f.Type, f.Mode, f.Size, f.Sum, f.Target, f.Mtime, f.Xattrs)
}

func typeName(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		return "file"
	case syscall.S_IFDIR:
		return "dir"
	case syscall.S_IFLNK:
		return "symlink"
	case syscall.S_IFIFO:
		return "fifo"
	}
	return fmt.Sprintf("type%o", mode&syscall.S_IFMT)
}

// snapshot walks root (not following symlinks) and describes every path.
func snapshot(t testing.TB, root string) map[string]fileInfo {
	t.Helper()
	out := map[string]fileInfo{}
	var walk func(rel string)
	walk = func(rel string) {
		p := filepath.Join(root, rel)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatalf("lstat %s: %v", p, err)
		}
		fi := fileInfo{Type: typeName(st.Mode), Mode: st.Mode & 0o7777, Mtime: st.Mtim.Nano(), Ino: st.Ino, Nlink: uint64(st.Nlink)}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			fi.Size = st.Size
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatalf("read %s: %v", p, err)
			}
			if int64(len(data)) != st.Size {
				t.Errorf("%s: read %d bytes, stat says %d", p, len(data), st.Size)
			}
			sum := sha256.Sum256(data)
			fi.Sum = fmt.Sprintf("%x", sum)
		case syscall.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				t.Fatalf("readlink %s: %v", p, err)
			}
			fi.Target = target
			fi.Size = st.Size
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFLNK {
			fi.Xattrs = xattrString(p)
		}
		out[rel] = fi
		if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			ents, err := os.ReadDir(p)
			if err != nil {
				t.Fatalf("readdir %s: %v", p, err)
			}
			for _, e := range ents {
				walk(filepath.Join(rel, e.Name()))
			}
		}
	}
	walk(".")
	return out
}

// xattrString lists user.* xattrs as name=value pairs.
func xattrString(p string) string {
	sz, err := unix.Llistxattr(p, nil)
	if err != nil || sz == 0 {
		return ""
	}
	buf := make([]byte, sz)
	sz, err = unix.Llistxattr(p, buf)
	if err != nil {
		return ""
	}
	var parts []string
	for _, name := range strings.Split(strings.TrimRight(string(buf[:sz]), "\x00"), "\x00") {
		if !strings.HasPrefix(name, "user.") {
			continue
		}
		v := make([]byte, 64<<10)
		n, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			continue
		}
		parts = append(parts, name+"="+string(v[:n]))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// cmpOpts choose what compareTrees looks at.
type cmpOpts struct {
	mtime    func(rel string) bool // compare the mtime of rel
	dirModes bool
}

// compareTrees reports every difference between two snapshots.
func compareTrees(want, got map[string]fileInfo, o cmpOpts) []string {
	var diffs []string
	var names []string
	for k := range want {
		names = append(names, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		w, wok := want[k]
		g, gok := got[k]
		switch {
		case !gok:
			diffs = append(diffs, fmt.Sprintf("%s: missing (want %v)", k, w))
			continue
		case !wok:
			diffs = append(diffs, fmt.Sprintf("%s: unexpected %v", k, g))
			continue
		}
		if w.Type != g.Type || w.Size != g.Size || w.Sum != g.Sum || w.Target != g.Target || w.Xattrs != g.Xattrs ||
			(w.Mode != g.Mode && (w.Type != "dir" || o.dirModes) && w.Type != "symlink") ||
			(o.mtime != nil && o.mtime(k) && w.Mtime != g.Mtime) {
			diffs = append(diffs, fmt.Sprintf("%s:\n    want %v\n    got  %v", k, w, g))
		}
	}
	return diffs
}

// errnoOf returns the errno in err (0 for nil, 0xffff for other errors).
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0xffff
}
