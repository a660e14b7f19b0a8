package faults

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // read the repository's tables directly (worktrees, corruption)

	"github.com/artproject/art/fuse"
)

// cmdTimeout bounds every art command: a command that takes longer hangs,
// which the issue forbids as firmly as a panic.
const cmdTimeout = 3 * time.Minute

// requireRoot skips tests that mount tmpfs or need allow_other.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root (mounts a size-limited tmpfs, FUSE allow_other); run as root")
	}
}

// requireFUSE skips when FUSE cannot be used at all.
func requireFUSE(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("skipping: /dev/fuse is not usable (%v); install fuse3 or pass --device /dev/fuse", err)
	}
	f.Close()
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			t.Skipf("skipping: not root and fusermount3 is missing (%v); install fuse3", err)
		}
	}
}

// requireSandbox skips when art run cannot work here.
func requireSandbox(t testing.TB) {
	t.Helper()
	requireFUSE(t)
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skipf("skipping: bwrap is missing (%v); install bubblewrap", err)
	}
}

// env is one test's world: a base directory the sandbox user can traverse
// (outside /tmp, which sandboxes replace), a repository and a workspace.
type env struct {
	t      *testing.T
	base   string
	db     string // base/repo/art.db
	ws     string // base/host/ws: the host workspace ("ws" inside the home)
	mu     sync.Mutex
	mounts []string // mount points this test made or learnt about
	// recorded lists commits art reported (or recovered) earlier in the
	// test: every later kill must leave them intact.
	recorded []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", "art-faults-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	e := &env{t: t, base: base, db: filepath.Join(base, "repo", "art.db"), ws: filepath.Join(base, "host", "ws")}
	for _, d := range []string{filepath.Dir(e.db), e.ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// Every test cleans its mounts: a leftover is a failure.
		for _, mp := range e.leftoverMounts() {
			t.Errorf("mount left behind at %s", mp)
			syscall.Unmount(mp, syscall.MNT_DETACH)
		}
		if !t.Failed() || os.Getenv("ART_FAULTS_KEEP") == "" {
			os.RemoveAll(base)
		} else {
			t.Logf("kept %s (ART_FAULTS_KEEP)", base)
		}
	})
	return e
}

// trackMount registers a mount point to check at cleanup.
func (e *env) trackMount(mp string) {
	e.mu.Lock()
	e.mounts = append(e.mounts, mp)
	e.mu.Unlock()
}

func (e *env) leftoverMounts() []string {
	e.mu.Lock()
	known := append([]string(nil), e.mounts...)
	e.mu.Unlock()
	var out []string
	for _, mp := range mountPoints() {
		if strings.HasPrefix(mp, e.base+"/") || mp == e.base {
			out = append(out, mp)
			continue
		}
		for _, k := range known {
			if mp == k {
				out = append(out, mp)
			}
		}
	}
	// Deepest first, so nested mounts come off in order.
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// mountPoints lists the mount points of this mount namespace.
func mountPoints() []string {
	mps, _ := fuse.MountPoints()
	return mps
}

func isMounted(mp string) bool {
	for _, m := range mountPoints() {
		if m == mp {
			return true
		}
	}
	return false
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// result is what one art command did.
type result struct {
	args   []string
	stdout string
	stderr string
	code   int
	dur    time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("art %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, clip(r.stdout), clip(r.stderr))
}

func clip(s string) string {
	if len(s) > 4000 {
		return s[:2000] + "\n...\n" + s[len(s)-2000:]
	}
	return s
}

// artCmd prepares an art command on this env's repository.
func (e *env) artCmd(ctx context.Context, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, artBin, args...)
	c.Dir = e.base
	c.Env = append(os.Environ(), "ART_DB="+e.db, "NO_COLOR=1")
	return c
}

// art runs one art command to completion (bounded by cmdTimeout) and
// fails the test on a panic, a hang, or SQLite's busy error in its output.
func (e *env) art(args ...string) result {
	e.t.Helper()
	return e.artIn(nil, args...)
}

func (e *env) artIn(stdin io.Reader, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	c := e.artCmd(ctx, args...)
	// A hung art is asked for its goroutines (Go prints them on SIGQUIT)
	// before it is killed: the failure then says where it hung.
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGQUIT) }
	c.WaitDelay = 10 * time.Second
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr, c.Stdin = &out, &errb, stdin
	start := time.Now()
	err := c.Run()
	r := result{args: args, stdout: out.String(), stderr: errb.String(), dur: time.Since(start)}
	if ctx.Err() != nil {
		e.t.Fatalf("art %s hung (stopped with SIGQUIT after %v)\nstdout:\n%s\nstderr, with its goroutines:\n%s",
			strings.Join(args, " "), cmdTimeout, clip(r.stdout), r.stderr[max(0, len(r.stderr)-64<<10):])
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		e.t.Fatalf("art %s: %v", strings.Join(args, " "), err)
	}
	checkOutput(e.t, r.String(), r.stdout+r.stderr)
	return r
}

// artOK runs a command that must succeed.
func (e *env) artOK(args ...string) result {
	e.t.Helper()
	r := e.art(args...)
	if r.code != 0 {
		e.t.Fatalf("expected success:\n%s", r)
	}
	return r
}

var (
	panicRE = regexp.MustCompile(`(?m)^(panic: |fatal error: |goroutine \d+ \[running\]|.*art fuse: panic in )`)
	busyRE  = regexp.MustCompile(`(?i)database is locked|SQLITE_BUSY`)
)

// checkOutput fails the test on a panic or a busy database anywhere in an
// art process's output.
func checkOutput(t testing.TB, what, out string) {
	t.Helper()
	if panicRE.MatchString(out) {
		t.Errorf("panic in art:\n%s", what)
	}
	if busyRE.MatchString(out) {
		t.Errorf("SQLITE_BUSY surfaced:\n%s", what)
	}
}

// fsck runs art fsck, which must be clean.
func (e *env) fsck(context string) {
	e.t.Helper()
	r := e.art("fsck")
	if r.code != 0 {
		e.t.Fatalf("art fsck after %s is not clean:\n%s", context, r)
	}
}

// proc is an art process the test may kill.
type proc struct {
	e      *env
	args   []string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	stdout *syncBuf
	stderr *syncBuf
	done   chan struct{}
	err    error
	start  time.Time
	end    time.Time // set when the process has ended, before done closes
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
	// lines receives each complete line when set.
	lines chan string
	part  []byte
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	if s.lines != nil {
		s.part = append(s.part, p...)
		for {
			i := bytes.IndexByte(s.part, '\n')
			if i < 0 {
				break
			}
			line := string(s.part[:i])
			s.part = s.part[i+1:]
			select {
			case s.lines <- line:
			default: // nobody waits for lines any more
			}
		}
	}
	return len(p), nil
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startArt starts an art command in the background.
func (e *env) startArt(args ...string) *proc {
	e.t.Helper()
	return e.startArtFor(2*cmdTimeout, args...)
}

// startArtFor is startArt for a process that may run for up to limit (it
// is killed after that).
func (e *env) startArtFor(limit time.Duration, args ...string) *proc {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	p := &proc{e: e, args: args, cancel: cancel, stdout: &syncBuf{}, stderr: &syncBuf{lines: make(chan string, 256)}, done: make(chan struct{})}
	p.cmd = e.artCmd(ctx, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	// A sandbox that outlived art could hold the output pipes open; Wait
	// must not depend on it.
	p.cmd.WaitDelay = 10 * time.Second
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		cancel()
		e.t.Fatalf("start art %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.end = time.Now()
		cancel()
		close(p.done)
	}()
	e.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if e.t.Failed() {
			e.t.Logf("art %s (pid %d) wrote on stderr:\n%s", strings.Join(args, " "), p.cmd.Process.Pid, clip(p.stderr.String()))
		}
	})
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill9 delivers SIGKILL and waits for the process; it reports whether the
// kill landed (the process was still running).
func (p *proc) kill9() bool {
	if p.exited() {
		return false
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// killAfter waits d (or until the process ends) and then kills it.
func (p *proc) killAfter(d time.Duration) bool {
	select {
	case <-p.done:
		return false
	case <-time.After(time.Until(p.start.Add(d))):
	}
	return p.kill9()
}

// wait waits for the process to end by itself and returns its result.
func (p *proc) wait(timeout time.Duration) result {
	p.e.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.done
		p.e.t.Fatalf("art %s hung (killed after %v)\nstderr:\n%s", strings.Join(p.args, " "), timeout, p.stderr.String())
	}
	return p.result()
}

func (p *proc) result() result {
	r := result{args: p.args, stdout: p.stdout.String(), stderr: p.stderr.String(), dur: time.Since(p.start)}
	select {
	case <-p.done:
		r.dur = p.end.Sub(p.start)
	default:
	}
	if p.cmd.ProcessState != nil {
		r.code = p.cmd.ProcessState.ExitCode()
	}
	checkOutput(p.e.t, r.String(), r.stdout+r.stderr)
	return r
}

// waitLine waits for a stderr line matching re and returns its submatches.
func (p *proc) waitLine(re *regexp.Regexp, timeout time.Duration) []string {
	p.e.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l := <-p.stderr.lines:
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-p.done:
			// Drain what is buffered.
			for {
				select {
				case l := <-p.stderr.lines:
					if m := re.FindStringSubmatch(l); m != nil {
						return m
					}
				default:
					p.e.t.Fatalf("art %s ended before printing %q:\n%s", strings.Join(p.args, " "), re, p.result())
				}
			}
		case <-deadline:
			p.e.t.Fatalf("art %s: no %q after %v:\n%s", strings.Join(p.args, " "), re, timeout, p.stderr.String())
		}
	}
}

var mountedRE = regexp.MustCompile(`mounted at (.*) \(worktree #(\d+)\)`)

// mount starts art mount of a branch at a fresh mount point and waits until
// it serves; it returns the process, the mount point and the worktree id.
func (e *env) mount(branch string) (*proc, string, string) {
	e.t.Helper()
	return e.mountFor(2*cmdTimeout, branch)
}

// mountFor is mount for a mount that may stay up for up to limit.
func (e *env) mountFor(limit time.Duration, branch string) (*proc, string, string) {
	e.t.Helper()
	mp, err := os.MkdirTemp(e.base, "mnt-")
	if err != nil {
		e.t.Fatal(err)
	}
	os.Chmod(mp, 0o755)
	e.trackMount(mp)
	p := e.startArtFor(limit, "mount", "-b", branch, mp)
	m := p.waitLine(mountedRE, time.Minute)
	waitFor(e.t, 30*time.Second, "the mount at "+mp, func() bool { return isMounted(mp) })
	return p, mp, m[2]
}

// stopMount ends art mount with SIGTERM (unmount and commit) and returns
// the commit id it printed ("" when nothing changed).
func (e *env) stopMount(p *proc, mp string) (string, result) {
	e.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	r := p.wait(cmdTimeout)
	if isMounted(mp) {
		e.t.Errorf("art mount ended but %s is still mounted", mp)
	}
	m := regexp.MustCompile(`\[\S+ ([0-9a-f]{12})\] mount session`).FindStringSubmatch(r.stdout)
	if m == nil {
		return "", r
	}
	return m[1], r
}

// commitInfo is art log/show --json output.
type commitInfo struct {
	ID      string `json:"id"`
	Tree    string `json:"tree"`
	Message string `json:"message"`
	Session struct {
		Mode     string `json:"mode"`
		Status   string `json:"status"`
		ExitCode int    `json:"exit_code"`
	} `json:"session"`
}

func (e *env) show(rev string) commitInfo {
	e.t.Helper()
	r := e.artOK("show", "--json", rev)
	var c commitInfo
	if err := json.Unmarshal([]byte(r.stdout), &c); err != nil {
		e.t.Fatalf("art show --json %s: %v\n%s", rev, err, r.stdout)
	}
	return c
}

// tip returns the full id of a branch's latest commit.
func (e *env) tip(branch string) string {
	e.t.Helper()
	return e.show(branch).ID
}

// branchTipRO reads a branch's tip from the database directly
// (read-only): unlike an art command (e.tip), it records no pending session
// on the way.
func (e *env) branchTipRO(branch string) string {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.db+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	var id []byte
	if err := db.QueryRow(`SELECT commit_id FROM refs WHERE name=?`, branch).Scan(&id); err != nil {
		e.t.Fatalf("read branch %s: %v", branch, err)
	}
	return hex.EncodeToString(id)
}

// worktreeRow is one row of the worktrees table.
type worktreeRow struct {
	ID         int64
	Branch     string
	Mountpoint string
	State      string
	Kind       string
}

// worktrees reads the worktrees table directly (read-only), e.g. to learn
// the mount point of a session that is about to be killed.
func (e *env) worktrees() []worktreeRow {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.db+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, branch, mountpoint, state, kind FROM worktrees ORDER BY id`)
	if err != nil {
		e.t.Fatalf("read worktrees: %v", err)
	}
	defer rows.Close()
	var out []worktreeRow
	for rows.Next() {
		var w worktreeRow
		if err := rows.Scan(&w.ID, &w.Branch, &w.Mountpoint, &w.State, &w.Kind); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, w)
	}
	return out
}

// entry is what a manifest records of one path.
type entry struct {
	Type   byte // 'f', 'd', 'l'
	Mode   fs.FileMode
	Size   int64
	Sum    string
	Target string
}

// manifest maps slash-separated relative paths to entries.
type manifest map[string]entry

// snapshot records a directory tree (skipping .art).
func snapshot(t testing.TB, dir string) manifest {
	t.Helper()
	m := manifest{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if rel == ".art" {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			m[rel] = entry{Type: 'd', Mode: info.Mode().Perm()}
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			m[rel] = entry{Type: 'l', Target: target}
		case info.Mode().IsRegular():
			sum, n, err := hashFile(p)
			if err != nil {
				return err
			}
			m[rel] = entry{Type: 'f', Mode: info.Mode().Perm(), Size: n, Sum: sum}
		default:
			m[rel] = entry{Type: '?'}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return m
}

func hashFile(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

func sumBytes(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// compare reports the differences between an expected and an actual
// manifest and counts what matched as verified.
func compare(want, got manifest) []string {
	var diffs []string
	var files int
	var bytes int64
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			diffs = append(diffs, "missing "+p)
		case g != w:
			diffs = append(diffs, fmt.Sprintf("differs %s: want %+v, got %+v", p, w, g))
		case w.Type == 'f':
			files++
			bytes += w.Size
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, "unexpected "+p)
		}
	}
	sort.Strings(diffs)
	stats.verified(files, bytes)
	return diffs
}

// pullVerify exports a commit into a directory named like the workspace
// and compares it with what was pushed or written.
func (e *env) pullVerify(rev string, want manifest) {
	e.t.Helper()
	dir := filepath.Join(e.base, "export", filepath.Base(e.ws))
	r := e.art("pull", "-q", "-m", dir, "--commit", rev)
	if r.code != 0 {
		e.t.Fatalf("pull of %s failed:\n%s", rev, r)
	}
	if d := compare(want, snapshot(e.t, dir)); len(d) > 0 {
		noteLost(e.t, d)
		e.t.Fatalf("commit %s does not hold what was recorded (%d differences):\n  %s", rev, len(d), strings.Join(first(d, 30), "\n  "))
	}
	stats.add(func(c *campaign) { c.CommitsVerified++ })
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("... and %d more", len(s)-n))
	}
	return s
}

// goroot returns the Go toolchain's root.
func goroot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(goBin, "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// copyTree copies regular files, directories and symlinks.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case info.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, info.Mode().Perm()|0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}

// goTree fills dir with real source from $GOROOT/src: the named
// subdirectories.
func goTree(t testing.TB, dir string, subdirs ...string) {
	t.Helper()
	root := filepath.Join(goroot(t), "src")
	for _, s := range subdirs {
		copyTree(t, filepath.Join(root, s), filepath.Join(dir, s))
	}
}

// mutate changes a tree the way an agent or a user would: edits, new
// files, deletions; with touchAll, every mtime changes (the stat cache
// misses, so the next push reads everything again).
func mutate(t testing.TB, rng *rand.Rand, dir string, edits int, touchAll bool) {
	t.Helper()
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	if len(files) == 0 {
		return
	}
	for i := 0; i < edits; i++ {
		p := files[rng.IntN(len(files))]
		switch rng.IntN(4) {
		case 0:
			os.Remove(p)
		case 1:
			b := make([]byte, rng.IntN(300<<10))
			fillRand(rng, b)
			os.WriteFile(filepath.Join(filepath.Dir(p), fmt.Sprintf("new-%d-%d.bin", i, rng.Uint32())), b, 0o644)
		default:
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err == nil {
				fmt.Fprintf(f, "\n// edit %d %d\n", i, rng.Uint64())
				f.Close()
			}
		}
	}
	if touchAll {
		now := time.Now()
		for _, p := range files {
			os.Chtimes(p, now, now)
		}
	}
}

// fillRand fills b with seeded, incompressible bytes.
func fillRand(rng *rand.Rand, b []byte) {
	for i := 0; i < len(b); i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

// lines returns the non-empty lines of s.
func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// tryTip returns a branch's tip, or "" when the branch has no commit.
func (e *env) tryTip(branch string) string {
	e.t.Helper()
	r := e.art("show", "--json", branch)
	if r.code != 0 {
		return ""
	}
	var c commitInfo
	if err := json.Unmarshal([]byte(r.stdout), &c); err != nil {
		e.t.Fatalf("art show --json %s: %v", branch, err)
	}
	return c.ID
}

// noteLost records differences that lose recorded data (a missing or
// changed path; an extra path is not a loss) for the campaign summary.
func noteLost(t testing.TB, diffs []string) {
	n := 0
	for _, d := range diffs {
		if !strings.HasPrefix(d, "unexpected ") {
			n++
		}
	}
	if n > 0 {
		stats.add(func(c *campaign) { c.Lost = append(c.Lost, fmt.Sprintf("%s: %d path(s)", t.Name(), n)) })
	}
}

// remember adds a branch's current commit to the ones later kills must not
// touch.
func (e *env) remember(branch string) {
	e.t.Helper()
	e.recorded = append(e.recorded, e.tip(branch))
}

// recheck shows every remembered commit: each still resolves to itself
// (fsck has re-hashed every object it reaches).
func (e *env) recheck() {
	e.t.Helper()
	for _, id := range e.recorded {
		if got := e.show(id).ID; got != id {
			e.t.Fatalf("commit %s now shows as %s", id, got)
		}
	}
	stats.add(func(c *campaign) { c.CommitsVerified += len(e.recorded) })
}
