package cmd

// Helpers for the end-to-end tests of art run (run_*_test.go): they run the
// real art binary (the test binary registered as "art" by TestMain through
// testscript) with real bwrap, FUSE and SQLite.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artproject/art/fuse"
)

var (
	artBinOnce sync.Once
	artBinPath string
	artBinErr  error
)

// artBinary returns the art program: the copy of this test binary that
// testscript.Main put in $PATH as "art", or else one built with go build.
func artBinary(t *testing.T) string {
	t.Helper()
	artBinOnce.Do(func() {
		if p, err := exec.LookPath("art"); err == nil && strings.Contains(p, "testscript-main") {
			artBinPath = p
			return
		}
		dir, err := os.MkdirTemp("", "art-run-bin-")
		if err != nil {
			artBinErr = err
			return
		}
		p := filepath.Join(dir, "art")
		build := exec.Command("go", "build", "-o", p, "github.com/artproject/art")
		build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the Makefile builds it
		out, err := build.CombinedOutput()
		if err != nil {
			artBinErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		artBinPath = p
	})
	if artBinErr != nil {
		t.Fatalf("no art binary: %v", artBinErr)
	}
	return artBinPath
}

// requireSandbox skips the test when the host cannot run art run at all.
func requireSandbox(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skipf("skipping: bwrap is not installed (%v); install bubblewrap to run the art run tests", err)
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("skipping: /dev/fuse is not usable (%v); the art run tests need FUSE", err)
	}
	f.Close()
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			t.Skipf("skipping: not root and fusermount3 is not installed (%v)", err)
		}
	}
}

// newBase returns an empty directory that the agent's user can traverse.
// It lies outside /tmp when possible: the sandbox has a private /tmp, so
// only there does the host workspace (and the repository in it) show up in
// the sandbox's read-only view of the host, which the escape tests need.
func newBase(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "art-run-test-")
	if err != nil {
		dir, err = os.MkdirTemp("", "art-run-test-")
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// testRepo is a host workspace with its repository in WS/.art.
type testRepo struct {
	t    *testing.T
	base string // holds the workspace; traversable by the agent's user
	ws   string // the host workspace
	db   string
}

// writeFiles creates files below dir; a name ending in / is a directory.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// newRepo makes a workspace named WS holding files, runs art init and art
// push.
func newRepo(t *testing.T, files map[string]string) *testRepo {
	return newRepoNamed(t, "WS", files, nil)
}

// newRepoNamed is newRepo with a workspace name and a hook run before the
// push (to set modes).
func newRepoNamed(t *testing.T, name string, files map[string]string, prepare func(ws string)) *testRepo {
	t.Helper()
	requireSandbox(t)
	base := newBase(t)
	r := &testRepo{t: t, base: base, ws: filepath.Join(base, name)}
	r.db = filepath.Join(r.ws, ".art", "art.db")
	if err := os.Mkdir(r.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, r.ws, files)
	if prepare != nil {
		prepare(r.ws)
	}
	r.mustArt("init", "-m", r.ws)
	r.mustArt("push", "-m", r.ws, "-q")
	return r
}

type artResult struct {
	stdout, stderr string
	code           int
}

func (res artResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
}

// artEnv is the environment art runs with: the test's, without a
// repository override, plus extra.
func artEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ART_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, append([]string{"NO_COLOR=1", "TZ=UTC"}, extra...)...)
}

// artCmd prepares art ARGS in dir. Stdin is /dev/null (not a terminal).
func artCmd(t *testing.T, ctx context.Context, dir string, env []string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	c := exec.CommandContext(ctx, artBinary(t), args...)
	c.Dir = dir
	c.Env = env
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	c.WaitDelay = 5 * time.Second
	return c, &stdout, &stderr
}

// runArt runs art to completion (at most two minutes).
func runArt(t *testing.T, dir string, env []string, stdin io.Reader, args ...string) artResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, stdout, stderr := artCmd(t, ctx, dir, env, args...)
	c.Stdin = stdin
	err := c.Run()
	res := artResult{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("art %q: %v", args, err)
		}
		res.code = ee.ExitCode()
	}
	return res
}

// art runs art ARGS in the workspace.
func (r *testRepo) art(args ...string) artResult {
	r.t.Helper()
	return runArt(r.t, r.ws, artEnv(), nil, args...)
}

func (r *testRepo) mustArt(args ...string) artResult {
	r.t.Helper()
	res := r.art(args...)
	if res.code != 0 {
		r.t.Fatalf("art %q: %s", args, res)
	}
	return res
}

// run runs art run -i=false ARGS.
func (r *testRepo) run(args ...string) artResult {
	r.t.Helper()
	return r.art(append([]string{"run", "-i=false"}, args...)...)
}

// start starts art ARGS in the background; wait returns its result.
func (r *testRepo) start(args ...string) (c *exec.Cmd, wait func() artResult) {
	r.t.Helper()
	return r.startEnv(nil, args...)
}

// startEnv is start with extra environment variables.
func (r *testRepo) startEnv(env []string, args ...string) (c *exec.Cmd, wait func() artResult) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	c, stdout, stderr := artCmd(r.t, ctx, r.ws, append(artEnv(), env...), args...)
	if err := c.Start(); err != nil {
		cancel()
		r.t.Fatal(err)
	}
	var once sync.Once
	var res artResult
	wait = func() artResult {
		once.Do(func() {
			defer cancel()
			err := c.Wait()
			res = artResult{stdout: stdout.String(), stderr: stderr.String()}
			if ee, ok := err.(*exec.ExitError); ok {
				res.code = ee.ExitCode()
			} else if err != nil {
				res.code = -1
			}
		})
		return res
	}
	r.t.Cleanup(func() {
		if c.ProcessState == nil {
			c.Process.Kill()
			wait()
		}
	})
	return c, wait
}

type sessionInfo struct {
	Mode      string          `json:"mode"`
	Argv      []string        `json:"argv"`
	Workspace string          `json:"workspace"`
	Status    string          `json:"status"`
	ExitCode  int             `json:"exit_code"`
	Signal    string          `json:"signal"`
	Start     int64           `json:"start"`
	End       int64           `json:"end"`
	Version   string          `json:"version"`
	Policy    json.RawMessage `json:"policy"`
}

type commitInfo struct {
	ID       string       `json:"id"`
	Parents  []string     `json:"parents"`
	Message  string       `json:"message"`
	Tree     string       `json:"tree"`
	Session  *sessionInfo `json:"session"`
	Added    int          `json:"added"`
	Modified int          `json:"modified"`
	Deleted  int          `json:"deleted"`
}

func (r *testRepo) show(rev string) commitInfo {
	r.t.Helper()
	res := r.mustArt("show", "--json", rev)
	var c commitInfo
	if err := json.Unmarshal([]byte(res.stdout), &c); err != nil {
		r.t.Fatalf("art show --json %s: %v\n%s", rev, err, res.stdout)
	}
	return c
}

func (r *testRepo) head() string { r.t.Helper(); return r.show("HEAD").ID }

// commits lists every commit of every branch.
func (r *testRepo) commits() []commitInfo {
	r.t.Helper()
	res := r.mustArt("log", "--all", "--json")
	var cs []commitInfo
	if err := json.Unmarshal([]byte(res.stdout), &cs); err != nil {
		r.t.Fatalf("art log --json: %v\n%s", err, res.stdout)
	}
	return cs
}

func (r *testRepo) commitCount() int { r.t.Helper(); return len(r.commits()) }

type statusInfo struct {
	Branch    string         `json:"branch"`
	Worktrees []worktreeJSON `json:"worktrees"`
}

func (r *testRepo) status() statusInfo {
	r.t.Helper()
	res := r.mustArt("status", "--json")
	var s statusInfo
	if err := json.Unmarshal([]byte(res.stdout), &s); err != nil {
		r.t.Fatalf("art status --json: %v\n%s", err, res.stdout)
	}
	return s
}

// nameStatus returns art diff --name-status A B as path -> status.
func (r *testRepo) nameStatus(a, b string) map[string]string {
	r.t.Helper()
	res := r.mustArt("diff", "--name-status", a, b)
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
		if line == "" {
			continue
		}
		st, path, ok := strings.Cut(line, "\t")
		if !ok {
			r.t.Fatalf("odd art diff --name-status line %q", line)
		}
		m[path] = st
	}
	return m
}

// checkNothingRecorded checks that a refused run left no commit and no
// worktree behind.
func (r *testRepo) checkNothingRecorded(before int) {
	r.t.Helper()
	if n := r.commitCount(); n != before {
		r.t.Errorf("commit count %d, want %d (nothing recorded)", n, before)
	}
	if wts := r.status().Worktrees; len(wts) != 0 {
		r.t.Errorf("worktrees left behind: %+v", wts)
	}
}

func (r *testRepo) writeConfig(name, content string) {
	r.t.Helper()
	dir := filepath.Join(r.ws, ".art", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// hashTree hashes a host directory (names, types, modes, sizes, mtimes,
// contents, link targets), leaving out .art directories.
func hashTree(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".art" {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%s\x00%v\x00%d\x00%d\x00", rel, info.Mode(), info.Size(), info.ModTime().UnixNano())
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h.Write([]byte(target))
		}
		h.Write([]byte{0})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLiveFile waits until the home of the repository's live session
// holds WS/name with content want, and returns the home's mount point.
func (r *testRepo) waitLiveFile(name, want string, d time.Duration) string {
	r.t.Helper()
	var mnt string
	waitFor(r.t, name+" in the session's home", d, func() bool {
		for _, w := range r.status().Worktrees {
			if w.State == "live" && w.Mountpoint != "" {
				mnt = w.Mountpoint
			}
		}
		if mnt == "" {
			return false
		}
		b, err := os.ReadFile(filepath.Join(mnt, "WS", name))
		return err == nil && string(b) == want
	})
	return mnt
}

// mounted reports whether dir is a mount point in /proc/self/mountinfo.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	ok, err := fuse.IsMountpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// processWith reports whether some process has s in its command line.
func processWith(s string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func checkContains(t *testing.T, what, s string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(s, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, s)
		}
	}
}

func checkLacks(t *testing.T, what, s string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(s, w) {
			t.Errorf("%s contains %q:\n%s", what, w, s)
		}
	}
}

// endWithin waits at most d for art started with start to end; past it,
// art is killed and the test fails with msg.
func endWithin(t *testing.T, c *exec.Cmd, wait func() artResult, d time.Duration, msg string) artResult {
	t.Helper()
	exited := make(chan artResult, 1)
	go func() { exited <- wait() }()
	select {
	case res := <-exited:
		return res
	case <-time.After(d):
		c.Process.Kill()
		t.Fatal(msg)
		return artResult{}
	}
}
