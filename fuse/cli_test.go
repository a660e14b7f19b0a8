package fuse

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/artproject/art/internal/testenv"
	"github.com/artproject/art/repo"
)

var (
	artOnce sync.Once
	artBin  string
	artErr  error
	artDir  string
)

// artBinary builds the art command once per test process.
func artBinary(t *testing.T) string {
	t.Helper()
	artOnce.Do(func() {
		artDir, artErr = os.MkdirTemp("", "art-fuse-test-")
		if artErr != nil {
			return
		}
		artBin = filepath.Join(artDir, "art")
		build := exec.Command("go", "build", "-o", artBin, "github.com/artproject/art")
		build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the Makefile builds it
		out, err := build.CombinedOutput()
		if err != nil {
			artErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if artErr != nil {
		t.Fatalf("build art: %v", artErr)
	}
	return artBin
}

func TestMain(m *testing.M) {
	flag.Parse()
	// The test binary's own timeout panics and exits; a file still open
	// on a mount it serves would then hang the exit in the kernel. Abort
	// the mounts shortly before that.
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 0 {
			margin := min(d/10, 20*time.Second)
			time.AfterFunc(d-margin, abortLiveMounts)
		}
	}
	// Interrupted (Ctrl-C, kill): the same, then exit.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		abortLiveMounts()
		fmt.Fprintf(os.Stderr, "test binary: %v\n", s)
		os.Exit(2)
	}()
	code := m.Run()
	if artDir != "" {
		os.RemoveAll(artDir)
	}
	os.Exit(code)
}

// artResult is one run of the art binary.
type artResult struct {
	code           int
	stdout, stderr string
}

func (r artResult) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// artTimeout bounds one art command of these tests: a command that hangs
// (a mount that succeeded where a refusal was expected, say) fails its
// test instead of the whole run.
const artTimeout = 5 * time.Minute

func art(t *testing.T, dir string, args ...string) artResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), artTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, artBinary(t), args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("art %v did not end within %v:\n%s%s", args, artTimeout, stdout.String(), stderr.String())
	}
	res := artResult{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run art %v: %v", args, err)
	}
	return res
}

func artOK(t *testing.T, dir string, args ...string) artResult {
	t.Helper()
	r := art(t, dir, args...)
	if r.code != 0 {
		t.Fatalf("art %s: %v", strings.Join(args, " "), r)
	}
	return r
}

// cliRepo is a repository made with the art binary: main holds a pushed
// workspace named ws.
type cliRepo struct {
	t    *testing.T
	db   string
	host string // the pushed host workspace
	tmp  string
}

func newCLIRepo(t *testing.T) *cliRepo {
	t.Helper()
	requireFUSE(t)
	tmp := t.TempDir()
	c := &cliRepo{t: t, db: filepath.Join(tmp, "repo", "art.db"), host: filepath.Join(tmp, "host", wsName), tmp: tmp}
	if err := os.MkdirAll(c.host, 0o755); err != nil {
		t.Fatal(err)
	}
	setupCasesLower(c.host)
	artOK(t, tmp, "init", "-d", c.db)
	artOK(t, tmp, "push", "-d", c.db, "-m", c.host, "-M", "lower")
	return c
}

// state is what a refused command must leave unchanged: the log of every
// branch and the worktree table.
func (c *cliRepo) state() string {
	c.t.Helper()
	log := artOK(c.t, c.tmp, "log", "-d", c.db, "--all", "--json").stdout
	r, err := repo.Open(c.db)
	if err != nil {
		c.t.Fatal(err)
	}
	defer r.Close()
	wts, err := r.Worktrees()
	if err != nil {
		c.t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(log)
	for _, w := range wts {
		fmt.Fprintf(&b, "worktree #%d %s %s pid=%d %s", w.ID, w.Branch, w.State, w.Pid, w.Mountpoint)
		// A live mount applies its journal to its upper rows whenever
		// it likes, so their count is not state a refused command could
		// have changed; it once failed TestMovedBranchWorkGoesToNewBranch
		// when the applier ran between the two snapshots.
		if w.State != repo.StateLive {
			fmt.Fprintf(&b, " pending=%d", w.Pending)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// mountProc is a running 'art mount'.
type mountProc struct {
	cmd    *exec.Cmd
	dir    string
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

// startMount runs 'art mount' and waits until it reports the mount (or
// exits). There is no sleep: art prints its line after the INIT exchange.
func (c *cliRepo) startMount(branch, dir string) *mountProc {
	c.t.Helper()
	return c.startMountArgs(dir, "-b", branch)
}

// startMountArgs is startMount with art mount's flags given.
func (c *cliRepo) startMountArgs(dir string, flags ...string) *mountProc {
	t := c.t
	t.Helper()
	cmd := exec.Command(artBinary(t), append(append([]string{"mount", "-d", c.db}, flags...), dir)...)
	cmd.Dir = c.tmp
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &mountProc{cmd: cmd, dir: dir, stderr: &syncBuffer{}, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		said := false
		for sc.Scan() {
			p.stderr.Write([]byte(sc.Text() + "\n"))
			if !said && strings.Contains(sc.Text(), "mounted at") {
				said = true
				ready <- true
			}
		}
		io.Copy(io.Discard, pr)
		p.err = cmd.Wait()
		close(p.done)
		if !said {
			ready <- false
		}
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
		if mounted, _ := IsMountpoint(dir); mounted {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("art mount exited before mounting: %v\n%s", p.err, p.stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("art mount did not report the mount within a minute:\n%s", p.stderr)
	}
	return p
}

// kill9 kills art mount with SIGKILL and waits for it to be gone.
func (p *mountProc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
}

func (p *mountProc) wait(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("art mount did not exit:\n%s", p.stderr)
	}
}

// TestCrash kills art with SIGKILL during a write storm, then checks that
// fsck accepts the repository, the next command removes the dead mount,
// 'art commit' records the interrupted worktree and every file fsynced or
// closed before the kill is in that commit with its content.
func TestCrash(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	p := c.startMount("main", mnt)
	storm := filepath.Join(mnt, wsName, "storm")
	if err := os.Mkdir(storm, 0o755); err != nil {
		t.Fatal(err)
	}

	// Acknowledged changes to lower content and to the namespace: random
	// writes into a lower file made durable by fsync (the descriptor stays
	// open), a rename and an unlink made durable by fsync of the directory.
	ws := filepath.Join(mnt, wsName)
	bigWant, err := os.ReadFile(filepath.Join(ws, "big"))
	if err != nil {
		t.Fatal(err)
	}
	big, err := os.OpenFile(filepath.Join(ws, "big"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	rng := rand.New(rand.NewSource(99))
	for i := 0; i < 20; i++ {
		off := rng.Intn(len(bigWant) + 100000)
		chunk := make([]byte, rng.Intn(70000))
		rng.Read(chunk)
		if _, err := big.WriteAt(chunk, int64(off)); err != nil {
			t.Fatal(err)
		}
		if end := off + len(chunk); end > len(bigWant) {
			bigWant = append(bigWant, make([]byte, end-len(bigWant))...)
		}
		copy(bigWant[off:], chunk)
	}
	if err := big.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(ws, "file"), filepath.Join(ws, "dir", "renamed")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ws, "other")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{ws, filepath.Join(ws, "dir")} {
		df, err := os.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := df.Sync(); err != nil {
			t.Errorf("fsync of directory %s: %v", d, err)
		}
		df.Close()
	}

	var mu sync.Mutex
	durable := map[string][]byte{} // rel → content acknowledged by fsync or close
	var open []*os.File
	stop := make(chan struct{})
	var wg sync.WaitGroup
	content := func(w, i int) []byte {
		rng := rand.New(rand.NewSource(int64(w*100000 + i)))
		b := make([]byte, rng.Intn(150<<10))
		rng.Read(b)
		return b
	}
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rel := fmt.Sprintf("storm/w%d-%04d", w, i)
				data := content(w, i)
				f, err := os.OpenFile(filepath.Join(mnt, wsName, rel), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
				if err != nil {
					return // the mount is gone
				}
				if _, err := f.Write(data); err != nil {
					f.Close()
					return
				}
				switch i % 3 {
				case 0: // fsync, keep it open
					if f.Sync() != nil {
						f.Close()
						return
					}
					mu.Lock()
					durable[rel] = data
					open = append(open, f)
					mu.Unlock()
				case 1: // close
					if f.Close() != nil {
						return
					}
					mu.Lock()
					durable[rel] = data
					mu.Unlock()
				default: // left open and unflushed: no guarantee
					mu.Lock()
					open = append(open, f)
					mu.Unlock()
				}
			}
		}(w)
	}
	// Let the storm run until a good number of files are durable.
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(durable)
		mu.Unlock()
		if n >= 300 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	acked := map[string][]byte{}
	for k, v := range durable {
		acked[k] = v
	}
	mu.Unlock()
	p.kill9(t)
	close(stop)
	wg.Wait()
	for _, f := range open {
		f.Close()
	}
	t.Logf("%d files acknowledged (fsync or close) before the kill", len(acked))
	if len(acked) == 0 {
		t.Fatal("no file was acknowledged before the kill")
	}

	if mounted, _ := IsMountpoint(mnt); !mounted {
		t.Fatal("the dead mount vanished before any art command ran (nothing left to test)")
	}
	// The next art command (here fsck) removes the dead mount.
	r := artOK(t, c.tmp, "fsck", "-d", c.db)
	t.Logf("fsck: %s%s", r.stdout, r.stderr)
	if mounted, _ := IsMountpoint(mnt); mounted {
		t.Errorf("art fsck left the stale mount at %s:\n%v", mnt, r)
	}
	if !strings.Contains(r.stderr, "stale mount") {
		t.Errorf("art fsck does not say it removed the stale mount:\n%v", r)
	}
	r = artOK(t, c.tmp, "status", "-d", c.db, "-m", c.host)
	if mounted, _ := IsMountpoint(mnt); mounted {
		t.Errorf("art status left the stale mount at %s:\n%v", mnt, r)
	}
	if !strings.Contains(r.stdout+r.stderr, "interrupted") {
		t.Errorf("art status does not show the interrupted worktree:\n%v", r)
	}
	r = artOK(t, c.tmp, "commit", "-d", c.db)
	if !strings.HasPrefix(r.stdout, "[main ") {
		t.Errorf("art commit: %v", r)
	}
	artOK(t, c.tmp, "fsck", "-d", c.db)

	// Inspect the commit: pull it into a host directory named ws.
	pulled := filepath.Join(c.tmp, "pulled", wsName)
	artOK(t, c.tmp, "pull", "-d", c.db, "-m", pulled, "--commit", "main", "-q")
	for rel, want := range acked {
		got, err := os.ReadFile(filepath.Join(pulled, rel))
		if err != nil {
			t.Errorf("%s (acknowledged before the kill): %v", rel, err)
		} else if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, want %d (acknowledged before the kill)", rel, len(got), len(want))
		}
	}
	if b, err := os.ReadFile(filepath.Join(pulled, "dir", "sub", "c")); err != nil || string(b) != "lower c\n" {
		t.Errorf("lower content after recovery: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(pulled, "big")); err != nil || !bytes.Equal(b, bigWant) {
		t.Errorf("lower file written and fsynced before the kill: %d bytes, want %d, %v", len(b), len(bigWant), err)
	}
	if b, err := os.ReadFile(filepath.Join(pulled, "dir", "renamed")); err != nil || string(b) != "lower file\n" {
		t.Errorf("file renamed before the kill: %q %v", b, err)
	}
	for _, gone := range []string{"file", "other"} {
		if _, err := os.Lstat(filepath.Join(pulled, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s (renamed or removed before the kill): %v", gone, err)
		}
	}
	// Nothing is left to commit and the branch is free again.
	if r := art(t, c.tmp, "commit", "-d", c.db); r.code == 0 {
		t.Errorf("second art commit succeeded: %v", r)
	}
	os.RemoveAll(mnt)
	os.Mkdir(mnt, 0o755)
	p = c.startMount("main", mnt)
	if b, err := os.ReadFile(filepath.Join(mnt, wsName, "storm", "w0-0001")); err != nil {
		t.Errorf("remount of main after recovery: %v", err)
	} else if want, ok := acked["storm/w0-0001"]; ok && !bytes.Equal(b, want) {
		t.Errorf("remount of main after recovery: storm/w0-0001 differs")
	}
	if err := os.WriteFile(filepath.Join(mnt, wsName, "after"), []byte("after recovery"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t)
	if p.err != nil {
		t.Errorf("art mount after SIGTERM: %v\n%s", p.err, p.stderr)
	}
	if mounted, _ := IsMountpoint(mnt); mounted {
		t.Errorf("art mount left %s mounted after SIGTERM", mnt)
	}
	// SIGTERM recorded the session as a commit.
	if out := artOK(t, c.tmp, "log", "-d", c.db, "--oneline", "-n", "1").stdout; !strings.Contains(out, "mount session") {
		t.Errorf("no 'mount session' commit after SIGTERM:\n%s", out)
	}
	// It ended when it was committed, not at the zero time (1970).
	if out := artOK(t, c.tmp, "show", "-d", c.db, "HEAD").stdout; !strings.Contains(out, "ended:") || strings.Contains(out, "1970") {
		t.Errorf("art show of the mount session has no end time:\n%s", out)
	}
	artOK(t, c.tmp, "pull", "-d", c.db, "-m", pulled, "--commit", "main", "-q")
	if b, err := os.ReadFile(filepath.Join(pulled, "after")); err != nil || string(b) != "after recovery" {
		t.Errorf("file of the SIGTERM session: %q %v", b, err)
	}
}

// TestMountBadInput: every refused 'art mount' / 'art commit' exits
// non-zero with a message naming the cause, and changes nothing.
func TestMountBadInput(t *testing.T) {
	c := newCLIRepo(t)
	file := filepath.Join(c.tmp, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	full := filepath.Join(c.tmp, "full")
	os.MkdirAll(filepath.Join(full, "something"), 0o755)
	// A mount point that is already a mount: a live test mount.
	busy := newTestMount(t, nil)
	live := filepath.Join(c.tmp, "live")
	os.Mkdir(live, 0o755)
	other := filepath.Join(c.tmp, "other")
	os.Mkdir(other, 0o755)

	cases := []struct {
		name  string
		args  []string
		want  []string // substrings of stderr
		setup func(t *testing.T)
	}{
		{"missing mount point", []string{"mount", "-b", "main", filepath.Join(c.tmp, "nope")}, []string{"mount point", "no such file", "create an empty directory"}, nil},
		{"not a directory", []string{"mount", "-b", "main", file}, []string{"not a directory"}, nil},
		{"not empty", []string{"mount", "-b", "main", full}, []string{"not empty"}, nil},
		{"already a mount", []string{"mount", "-b", "main", busy.Dir}, []string{"already a mount point of art", "fusermount3 -u " + busy.Dir}, nil},
		// Not "unmount it first: fusermount3 -u /proc": fusermount3 is
		// advice for FUSE mounts only.
		{"a mount point of another filesystem", []string{"mount", "-b", "main", "/proc"}, []string{"already a mount point (proc); choose an empty directory that is not a mount point"}, nil},
		{"missing branch", []string{"mount", "-b", "nosuch", other}, []string{"nosuch", "art branch"}, nil},
		{"bad branch name", []string{"mount", "-b", "../x", other}, []string{"x"}, nil},
		// Not "no such branch (create it with 'art branch bad..x')",
		// which refuses the name.
		{"invalid branch name", []string{"mount", "-b", "bad..x", other}, []string{`invalid branch name "bad..x": contains '..'`}, nil},
		{"nothing to commit", []string{"commit"}, []string{"nothing to commit"}, nil},
		{"unknown worktree", []string{"commit", "--worktree", "99"}, []string{"99"}, nil},
		{"second live mount on the branch", []string{"mount", "-b", "main", other}, []string{"in use", "-b"}, func(t *testing.T) {
			c.startMount("main", live)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup(t)
			}
			before := c.state()
			r := art(t, c.tmp, append(tc.args, "-d", c.db)...)
			if r.code == 0 {
				t.Fatalf("art %s succeeded: %v", strings.Join(tc.args, " "), r)
			}
			for _, w := range tc.want {
				if !strings.Contains(strings.ToLower(r.stderr), strings.ToLower(w)) {
					t.Errorf("message lacks %q: %v", w, r)
				}
			}
			if strings.Count(strings.TrimSpace(r.stderr), "\n") > 3 {
				t.Errorf("message is not short: %v", r)
			}
			if after := c.state(); after != before {
				t.Errorf("state changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if mounted, _ := IsMountpoint(other); mounted {
				t.Errorf("%s was mounted", other)
			}
			if ents, _ := os.ReadDir(other); len(ents) != 0 {
				t.Errorf("%s was written", other)
			}
		})
	}

	// /dev/fuse missing: in a private mount namespace with an empty /dev.
	t.Run("no /dev/fuse", func(t *testing.T) {
		if _, err := exec.LookPath("unshare"); err != nil || os.Geteuid() != 0 {
			t.Skip("skipping: needs root and unshare to hide /dev/fuse")
		}
		before := c.state()
		script := `mount -t tmpfs none /dev && exec "$0" "$@"`
		cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, artBinary(t), "mount", "-b", "other", other, "-d", c.db)
		cmd.Dir = c.tmp
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("art mount without /dev/fuse succeeded:\n%s", out)
		}
		if !strings.Contains(string(out), "/dev/fuse") || !strings.Contains(string(out), "fuse3") {
			t.Errorf("message does not say what to install: %s", out)
		}
		if after := c.state(); after != before {
			t.Errorf("state changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}

// TestCleanupStaleRightAfterDeath: regression. CleanupStale used stat(2)
// to tell a dead mount, which the kernel answers from its attribute cache
// for up to the attribute timeout after the server died, so a command run
// right after the crash left the dead mount in place. CheckMountpoint
// named the dead mount a missing directory.
func TestCleanupStaleRightAfterDeath(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	p := c.startMount("main", mnt)
	if _, err := os.Stat(mnt); err != nil { // the root's attributes are now cached
		t.Fatal(err)
	}
	// A live mount is left alone.
	if done, err := CleanupStale(mnt); done || err != nil {
		t.Fatalf("CleanupStale of a live mount: %v %v", done, err)
	}
	p.kill9(t)
	_, err := CheckMountpoint(mnt)
	if err == nil || !strings.Contains(err.Error(), "died") {
		t.Errorf("CheckMountpoint of a dead mount: %v", err)
	}
	done, err := CleanupStale(mnt)
	if err != nil || !done {
		t.Fatalf("CleanupStale right after the server died: %v %v", done, err)
	}
	if mounted, _ := IsMountpoint(mnt); mounted {
		t.Fatal("dead mount still there")
	}
	if _, err := CheckMountpoint(mnt); err != nil {
		t.Errorf("mount point after cleanup: %v", err)
	}
}

// TestCleanupStaleThroughOwnLink: regression. A mount made through the
// caller's own symbolic link records the link's path; CleanupStale looked
// that path up in the mount table as given, never found the dead mount
// (the table names the directory the link leads to), and so left it in
// place after every later command.
func TestCleanupStaleThroughOwnLink(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(c.tmp, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, link, target string }{
		{"relative", filepath.Join(c.tmp, "sub", "rel"), "../mnt"},
		{"absolute", filepath.Join(c.tmp, "abs"), mnt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.Symlink(tc.target, tc.link); err != nil {
				t.Fatal(err)
			}
			p := c.startMountArgs(tc.link, "--ro", "-b", "main")
			if done, err := CleanupStale(tc.link); done || err != nil {
				t.Fatalf("CleanupStale of a live mount: %v %v", done, err)
			}
			p.kill9(t)
			done, err := CleanupStale(tc.link)
			if err != nil || !done {
				t.Errorf("CleanupStale(%s) of a dead mount: %v %v", tc.link, done, err)
			}
			if mounted, _ := IsMountpoint(mnt); mounted {
				syscall.Unmount(mnt, syscall.MNT_DETACH)
				t.Fatal("dead mount still there")
			}
		})
	}
}

// TestDeadServerErrnos: the answers that name a dead server, wrapped or
// not, and ones that do not. ECANCELED is what a request gets while an
// io_uring connection whose server died is torn down (CI saw statfs
// return it right after the kill, and the dead mount was called live).
func TestDeadServerErrnos(t *testing.T) {
	for _, tc := range []struct {
		err  error
		dead bool
	}{
		{syscall.ENOTCONN, true},
		{syscall.ECONNABORTED, true},
		{syscall.ECANCELED, true},
		{&os.PathError{Op: "statfs", Path: "/m", Err: syscall.ECANCELED}, true},
		{fmt.Errorf("check: %w", syscall.ENOTCONN), true},
		{nil, false},
		{syscall.ENOENT, false},
		{syscall.EIO, false},
		{syscall.EINTR, false},
	} {
		if got := deadServer(tc.err); got != tc.dead {
			t.Errorf("deadServer(%v) = %v, want %v", tc.err, got, tc.dead)
		}
	}
}

// TestCrashResume: after a kill -9, mounting the branch again resumes the
// interrupted worktree with everything acknowledged before the kill, and
// its next clean end records one commit with all of it.
func TestCrashResume(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	p := c.startMount("main", mnt)
	want := map[string]string{}
	for i := 0; i < 50; i++ {
		rel := fmt.Sprintf("f%02d", i)
		content := strings.Repeat(rel, i*100)
		if err := os.WriteFile(filepath.Join(mnt, wsName, rel), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		want[rel] = content
	}
	if err := os.Remove(filepath.Join(mnt, wsName, "other")); err != nil {
		t.Fatal(err)
	}
	d, _ := os.Open(filepath.Join(mnt, wsName))
	d.Sync()
	d.Close()
	p.kill9(t)

	// art mount itself removes the dead mount (TestMountAfterKillOnSameMountPoint)
	// and resumes the worktree.
	p = c.startMount("main", mnt)
	if !strings.Contains(p.stderr.String(), "resuming interrupted worktree") {
		t.Errorf("art mount did not say it resumes the interrupted worktree:\n%s", p.stderr)
	}
	// Its check of what git would run read the tip, not these changes.
	if !strings.Contains(p.stderr.String(), "not checked for what git would run") {
		t.Errorf("art mount did not say the resumed changes are unchecked:\n%s", p.stderr)
	}
	for rel, content := range want {
		b, err := os.ReadFile(filepath.Join(mnt, wsName, rel))
		if err != nil || string(b) != content {
			t.Errorf("%s after resume: %d bytes, %v", rel, len(b), err)
		}
	}
	if _, err := os.Lstat(filepath.Join(mnt, wsName, "other")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file removed before the kill is back: %v", err)
	}
	os.WriteFile(filepath.Join(mnt, wsName, "more"), []byte("more"), 0o644)
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t)
	if p.err != nil {
		t.Fatalf("art mount: %v\n%s", p.err, p.stderr)
	}
	pulled := filepath.Join(c.tmp, "pulled", wsName)
	artOK(t, c.tmp, "pull", "-d", c.db, "-m", pulled, "--commit", "main", "-q")
	want["more"] = "more"
	for rel, content := range want {
		if b, err := os.ReadFile(filepath.Join(pulled, rel)); err != nil || string(b) != content {
			t.Errorf("%s in the commit: %d bytes, %v", rel, len(b), err)
		}
	}
	if r := art(t, c.tmp, "commit", "-d", c.db); r.code == 0 {
		t.Errorf("a worktree is left after the resumed session committed: %v", r)
	}
}

// rawWorktreeState is every column of the worktrees rows, the size of
// their upper layers and their journals' content: what claiming a
// worktree changes and c.state() does not show.
func rawWorktreeState(t *testing.T, db string) string {
	t.Helper()
	r, err := repo.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rows, err := r.DB.Query(`SELECT id, branch, hex(base), pid, pid_start, mountpoint, state, kind, session, next_ino, created, updated,
		(SELECT count(*) FROM upper_inodes i WHERE i.wt=w.id), (SELECT count(*) FROM upper_dirents d WHERE d.wt=w.id), (SELECT count(*) FROM upper_blocks b WHERE b.wt=w.id)
		FROM worktrees w ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		v := make([]any, 15)
		p := make([]any, len(v))
		for i := range v {
			p[i] = &v[i]
		}
		if err := rows.Scan(p...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, v...)
		j, _ := os.ReadFile(fmt.Sprintf("%s-wt%v.journal", db, v[0]))
		fmt.Fprintf(&b, "journal %x\n", sha256.Sum256(j))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A branch with a live or interrupted worktree refuses a push (the
// worktree's commit would find the branch moved). When the branch moved
// anyway (here: as a push of an older build, which did not refuse while
// the worktree was interrupted, moved it), 'art commit' says so and 'art
// commit -b NEW' records the work on a new branch from the worktree's
// base; it used to suggest -b, which did not exist, and the work could
// not be recorded at all.
func TestMovedBranchWorkGoesToNewBranch(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	p := c.startMount("main", mnt)
	if err := os.WriteFile(filepath.Join(mnt, wsName, "agent.txt"), []byte("agent work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := c.state()
	r := art(t, c.tmp, "push", "-d", c.db, "-m", c.host)
	if r.code == 0 || !strings.Contains(r.stderr, "in use by worktree") || !strings.Contains(r.stderr, "-b NAME") {
		t.Fatalf("push to the branch of a live mount: %v", r)
	}
	if after := c.state(); after != before {
		t.Fatalf("the refused push changed the repository:\n%s\n---\n%s", before, after)
	}
	p.kill9(t)

	if err := os.WriteFile(filepath.Join(c.host, "host.txt"), []byte("host work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = art(t, c.tmp, "push", "-d", c.db, "-m", c.host, "-q")
	if r.code == 0 || !strings.Contains(r.stderr, "holds interrupted worktree #1") || !strings.Contains(r.stderr, "'art commit --worktree 1'") {
		t.Fatalf("push to the branch of an interrupted mount: %v", r)
	}
	artOK(t, c.tmp, "push", "-d", c.db, "-m", c.host, "-q", "-b", "host")
	moveBranch(t, c.db, "main", "host")
	mainTip := artOK(t, c.tmp, "log", "-d", c.db, "--oneline", "-n", "1", "main").stdout
	// Each refused commit leaves the repository as it was, the worktree's
	// row, upper layer and journal included: they used to be claimed
	// (journal replayed, owner cleared, updated bumped) before the
	// branch was checked.
	artOK(t, c.tmp, "status", "-d", c.db) // removes the dead mount
	before = rawWorktreeState(t, c.db)
	r = art(t, c.tmp, "commit", "-d", c.db)
	if r.code == 0 || !strings.Contains(r.stderr, "moved") || !strings.Contains(r.stderr, "-b NEW") {
		t.Fatalf("art commit on a moved branch: %v", r)
	}
	if r := art(t, c.tmp, "commit", "-d", c.db, "-b", "main"); r.code == 0 || !strings.Contains(r.stderr, "already exists") {
		t.Fatalf("art commit -b naming an existing branch: %v", r)
	}
	if r := art(t, c.tmp, "commit", "-d", c.db, "-b", "bad..x"); r.code == 0 || !strings.Contains(r.stderr, `invalid branch name "bad..x"`) {
		t.Fatalf("art commit -b naming an invalid branch: %v", r)
	}
	if after := rawWorktreeState(t, c.db); after != before {
		t.Fatalf("the refused commits changed the repository:\n%s\n---\n%s", before, after)
	}
	r = artOK(t, c.tmp, "commit", "-d", c.db, "-b", "rescued")
	// The result on stdout, as push and mount print theirs.
	if !strings.HasPrefix(r.stdout, "[rescued ") {
		t.Errorf("art commit -b: %v", r)
	}
	if got := artOK(t, c.tmp, "log", "-d", c.db, "--oneline", "-n", "1", "main").stdout; got != mainTip {
		t.Errorf("main moved: %q, was %q", got, mainTip)
	}
	pulled := filepath.Join(c.tmp, "pulled", wsName)
	artOK(t, c.tmp, "pull", "-d", c.db, "-m", pulled, "--commit", "rescued", "-q")
	if b, err := os.ReadFile(filepath.Join(pulled, "agent.txt")); err != nil || string(b) != "agent work\n" {
		t.Errorf("agent.txt on rescued: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(pulled, "host.txt")); err == nil {
		t.Error("rescued does not start at the worktree's base")
	}
	artOK(t, c.tmp, "fsck", "-d", c.db)
}

// moveBranch points branch at the tip of another, as an older art's push
// did under an interrupted worktree.
func moveBranch(t *testing.T, db, branch, to string) {
	t.Helper()
	r, err := repo.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.DB.Exec(`UPDATE refs SET commit_id=(SELECT commit_id FROM refs WHERE name=?) WHERE name=?`, to, branch); err != nil {
		t.Fatal(err)
	}
}

// 'art mount' on the mount point of a session killed with SIGKILL removes
// the dead mount first (it used to refuse, saying any art command would
// remove it) and resumes the worktree.
func TestMountAfterKillOnSameMountPoint(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	p := c.startMount("main", mnt)
	if err := os.WriteFile(filepath.Join(mnt, wsName, "kept.txt"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.kill9(t)
	p = c.startMount("main", mnt)
	if !strings.Contains(p.stderr.String(), "stale mount") {
		t.Errorf("art mount does not say it removed the stale mount:\n%s", p.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, wsName, "kept.txt")); err != nil || string(b) != "kept\n" {
		t.Errorf("kept.txt after the remount: %q %v", b, err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t)
}

// SIGTERM sent the moment art mount says that SIGTERM unmounts and
// commits does exactly that: the handler was installed after the message,
// and a signal on that line killed art with nothing committed.
func TestMountSIGTERMRightAfterTheMessage(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	for i := range 10 {
		os.RemoveAll(mnt)
		os.Mkdir(mnt, 0o755)
		p := c.startMount("main", mnt)
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.wait(t)
		if p.err != nil {
			t.Fatalf("try %d: art mount after an early SIGTERM: %v\n%s", i, p.err, p.stderr)
		}
		if mounted, _ := IsMountpoint(mnt); mounted {
			t.Fatalf("try %d: %s still mounted after SIGTERM", i, mnt)
		}
	}
}

// TestMountBusyAtTheEnd: Ctrl-C or SIGTERM to art mount while a process
// still holds the mount (a shell cd'd into it) says so, naming it, and
// records the session once it lets go; a further signal cuts it off.
// Before, art detached the mount and waited in silence for as long as the
// holder lived, and a second Ctrl-C claimed it was recording.
func TestMountBusyAtTheEnd(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	for _, end := range []string{"holder leaves", "second signal"} {
		t.Run(end, func(t *testing.T) {
			os.RemoveAll(mnt)
			os.Mkdir(mnt, 0o755)
			p := c.startMount("main", mnt)
			f := filepath.Join(mnt, wsName, "busy-"+strings.ReplaceAll(end, " ", "-"))
			if err := os.WriteFile(f, []byte("written before the end\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			holder := exec.Command("sleep", "60")
			holder.Dir = filepath.Join(mnt, wsName)
			if err := holder.Start(); err != nil {
				t.Fatal(err)
			}
			defer holder.Process.Kill()
			p.cmd.Process.Signal(syscall.SIGTERM)
			said := fmt.Sprintf("is still in use (pid %d (sleep))", holder.Process.Pid)
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.stderr.String(), said); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("art did not say the mount is in use:\n%s", p.stderr)
				}
			}
			select {
			case <-p.done:
				t.Fatalf("art mount ended while the mount was held:\n%s", p.stderr)
			case <-time.After(500 * time.Millisecond):
			}
			if end == "holder leaves" {
				holder.Process.Kill()
				holder.Wait()
			} else {
				p.cmd.Process.Signal(syscall.SIGTERM)
			}
			p.wait(t)
			if p.err != nil {
				t.Fatalf("art mount: %v\n%s", p.err, p.stderr)
			}
			if mounted, _ := IsMountpoint(mnt); mounted {
				t.Fatalf("%s still mounted", mnt)
			}
			if end == "second signal" && !strings.Contains(p.stderr.String(), "cutting "+mnt+" off") {
				t.Errorf("no word of the cut:\n%s", p.stderr)
			}
			if strings.Contains(p.stderr.String(), "recording the session") {
				t.Errorf("art claimed to record while it waited for the holder:\n%s", p.stderr)
			}
			r := artOK(t, c.tmp, "show", "-d", c.db, "--stat", "main")
			if !strings.Contains(r.stdout, filepath.Base(f)) {
				t.Errorf("the session's file is not in its commit:\n%s", r.stdout)
			}
		})
	}
}

// TestMountWarnsOfWhatGitRuns: a commit holding what git would run on the
// host, made by no push (a hook an earlier session wrote), is served live
// by a mount, where git run by the user runs it; art mount says so, as
// art pull holds it back. What the user pushed is not news.
func TestMountWarnsOfWhatGitRuns(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	p := c.startMount("main", mnt)
	if strings.Contains(p.stderr.String(), "warning") {
		t.Errorf("a warning for what the user pushed:\n%s", p.stderr)
	}
	hook := filepath.Join(mnt, wsName, ".git", "hooks", "post-checkout")
	if err := os.MkdirAll(filepath.Dir(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hook, []byte("#!/bin/sh\nid\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t)
	if p.err != nil {
		t.Fatalf("art mount: %v\n%s", p.err, p.stderr)
	}
	p = c.startMount("main", mnt)
	want := wsName + "/.git/hooks/post-checkout (a git hook, which git runs as a command on this host)"
	if s := p.stderr.String(); !strings.Contains(s, "warning: main holds what git would run") || !strings.Contains(s, want) || !strings.Contains(s, "art diff") {
		t.Errorf("no warning naming the hook:\n%s", s)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t)
}

// TestMountOutlivesClosedStderr: the reader of art mount's messages going
// away (art mount 2>&1 | head -1) must not kill art with its mount up:
// Go's default for a write to a closed stderr pipe is to die of SIGPIPE,
// which left a stale mount and an interrupted worktree.
func TestMountOutlivesClosedStderr(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	cmd := exec.Command(artBinary(t), "mount", "-d", c.db, "-b", "main", mnt)
	cmd.Dir = c.tmp
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close() // nobody reads: every message art writes meets a closed pipe
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if mounted, _ := IsMountpoint(mnt); mounted {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if mounted, _ := IsMountpoint(mnt); mounted {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("art mount exited before mounting: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("not mounted within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // past the "mounted at" message
	select {
	case err := <-done:
		t.Fatalf("art mount died once mounted: %v", err)
	default:
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("art mount after SIGTERM: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("art mount did not exit after SIGTERM")
	}
	if mounted, _ := IsMountpoint(mnt); mounted {
		t.Error("still mounted after SIGTERM")
	}
	if s := artOK(t, c.tmp, "status", "-d", c.db).stdout; strings.Contains(s, "interrupted") {
		t.Errorf("an interrupted worktree left:\n%s", s)
	}
}

// TestRecoveryRacesResume: art commit of an interrupted worktree and a
// session resuming it, started at once, must not both go on. Before, both
// did: the commit folded and deleted the worktree under the resumed mount,
// whose later writes, acknowledged, were in no commit. Now one of them is
// refused (in use), and whatever the mount takes ends up in a commit.
func TestRecoveryRacesResume(t *testing.T) {
	c := newCLIRepo(t)
	for i := range 4 {
		branch := fmt.Sprintf("m%d", i)
		artOK(t, c.tmp, "branch", "--db", c.db, branch, "main")
		mnt := filepath.Join(c.tmp, "mnt-"+branch)
		os.Mkdir(mnt, 0o755)
		p := c.startMount(branch, mnt)
		if err := os.WriteFile(filepath.Join(mnt, wsName, "before"), []byte("before"), 0o644); err != nil {
			t.Fatal(err)
		}
		p.kill9(t)
		artOK(t, c.tmp, "status", "-d", c.db) // removes the dead mount

		commit := exec.Command(artBinary(t), "commit", "-d", c.db, "-b", "rescued-"+branch)
		commit.Dir = c.tmp
		var commitOut bytes.Buffer
		commit.Stdout, commit.Stderr = &commitOut, &commitOut
		mount := exec.Command(artBinary(t), "mount", "-d", c.db, "-b", branch, mnt)
		mount.Dir = c.tmp
		mountErr := &syncBuffer{}
		mount.Stderr = mountErr
		if err := commit.Start(); err != nil {
			t.Fatal(err)
		}
		if err := mount.Start(); err != nil {
			t.Fatal(err)
		}
		mountDone := make(chan error, 1)
		go func() { mountDone <- mount.Wait() }()
		commitErr := commit.Wait()
		t.Cleanup(func() {
			mount.Process.Kill()
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		})
		mounted := false
		deadline := time.Now().Add(30 * time.Second)
		for !mounted && time.Now().Before(deadline) {
			if mounted, _ = IsMountpoint(mnt); mounted {
				break
			}
			select {
			case err := <-mountDone:
				mountDone <- err
				deadline = time.Now() // it exited: refused
			default:
				time.Sleep(10 * time.Millisecond)
			}
		}
		if commitErr != nil && !mounted {
			t.Fatalf("round %d: both refused: commit %v: %s; mount: %s", i, commitErr, commitOut.String(), mountErr)
		}
		if !mounted {
			if !strings.Contains(mountErr.String(), "in use") {
				t.Errorf("round %d: mount refused without saying why: %s", i, mountErr)
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(mnt, wsName, "precious"), []byte("precious"), 0o644); err != nil {
			t.Fatal(err)
		}
		d, _ := os.Open(filepath.Join(mnt, wsName))
		d.Sync()
		d.Close()
		mount.Process.Signal(syscall.SIGTERM)
		if err := <-mountDone; err != nil {
			t.Fatalf("round %d: art mount: %v\n%s\n(art commit: %v: %s)", i, err, mountErr, commitErr, commitOut.String())
		}
		// The mount's commit holds what it took.
		pulled := filepath.Join(c.tmp, "pulled-"+branch, wsName)
		artOK(t, c.tmp, "pull", "-d", c.db, "-m", pulled, "--commit", branch, "-q")
		if b, err := os.ReadFile(filepath.Join(pulled, "precious")); err != nil || string(b) != "precious" {
			t.Errorf("round %d: a write acknowledged by the mount is in no commit: %q, %v\n(art commit: %v: %s)", i, b, err, commitErr, commitOut.String())
		}
	}
	artOK(t, c.tmp, "fsck", "-d", c.db)
}

// TestMountSignalsWhileCommitting: a signal after the one that ends the
// mount (a second Ctrl-C) must not kill art while it commits: it did, and
// left the session to 'art commit'.
func TestMountSignalsWhileCommitting(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	p := c.startMount("main", mnt)
	big := make([]byte, 48<<20)
	for i := range big {
		big[i] = byte(i*7 + i>>11)
	}
	if err := os.WriteFile(filepath.Join(mnt, wsName, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	for sent := 0; ; sent++ {
		p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(10 * time.Millisecond):
			continue
		}
		break
	}
	if p.err != nil {
		t.Fatalf("art mount under repeated SIGINT: %v\n%s", p.err, p.stderr)
	}
	if mounted, _ := IsMountpoint(mnt); mounted {
		t.Error("still mounted")
	}
	if r := art(t, c.tmp, "commit", "-d", c.db); r.code == 0 {
		t.Errorf("a worktree was left to 'art commit': %v", r)
	}
	pulled := filepath.Join(c.tmp, "pulled", wsName)
	artOK(t, c.tmp, "pull", "-d", c.db, "-m", pulled, "--commit", "main", "-q")
	if b, err := os.ReadFile(filepath.Join(pulled, "big")); err != nil || !bytes.Equal(b, big) {
		t.Errorf("big in the commit: %d bytes, %v", len(b), err)
	}
}

// TestWaitOrAbortEndsAHeldConnection: a copy of the mount in another mount
// namespace (as a process of the sandbox left orphaned holds one) keeps
// the connection after art's unmount, and Wait never returned: art run
// hung after the session. WaitOrAbort aborts it after its bound.
func TestWaitOrAbortEndsAHeldConnection(t *testing.T) {
	m := newTestMount(t, nil)
	holder := testenv.HoldMountNamespace(t, nil)
	// The warnings name it (art's own namespace is never named).
	if who := strings.Join(m.srv.NamespaceHolders(100), ", "); !strings.Contains(who, fmt.Sprintf("pid %d ", holder.Process.Pid)) {
		t.Errorf("NamespaceHolders = %q, not naming the holder %d", who, holder.Process.Pid)
	}
	begin := time.Now()
	// Over /dev/fuse, go-fuse's Unmount itself waits for the serving to
	// end: it aborts after HeldWait; over io_uring, WaitOrAbort does.
	if err := m.srv.Unmount(); err != nil {
		t.Fatal(err)
	}
	aborted := m.srv.WaitOrAbort(time.Second)
	if m.srv.Transport() == "io_uring" && !aborted {
		t.Error("the connection held in another namespace ended by itself")
	}
	if d := time.Since(begin); d > HeldWait+10*time.Second {
		t.Errorf("took %v", d)
	}
	m.srv = nil
}

// TestMountEndsWhileACopyIsHeld: a mount namespace made while art mount
// runs (every sandbox of an 'art run' makes one) holds a copy of the
// mount, which keeps the connection after art's unmount. Ctrl-C of art
// mount then waited, silently, until that namespace ended (the other
// session's whole length). Now it cuts the connection off as soon as it
// sees the copy (well within HeldWait), says nothing of it, and records the
// session with what was written.
func TestMountEndsWhileACopyIsHeld(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: only root can abort a FUSE connection (and make a mount namespace)")
	}
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	p := c.startMount("main", mnt)
	if err := os.WriteFile(filepath.Join(mnt, wsName, "written"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Started after the mount: its namespace holds a copy of it.
	holder := testenv.HoldMountNamespace(t, nil)
	begin := time.Now()
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
		if d := time.Since(begin); d >= HeldWait {
			t.Errorf("art mount took %v after Ctrl-C to let go of a copy it had seen", d)
		}
	case <-time.After(HeldWait + 20*time.Second):
		t.Errorf("art mount still waiting %v after Ctrl-C, for the copy of its mount in another namespace:\n%s", time.Since(begin), p.stderr)
		holder.Process.Kill() // which lets it end
		p.wait(t)
	}
	if p.err != nil {
		t.Fatalf("art mount: %v\n%s", p.err, p.stderr)
	}
	if msg := p.stderr.String(); strings.Contains(msg, "connection") {
		t.Errorf("art mount spoke of what sessions side by side do:\n%s", msg)
	}
	pulled := filepath.Join(c.tmp, "pulled", wsName)
	artOK(t, c.tmp, "pull", "-d", c.db, "-m", pulled, "--commit", "main", "-q")
	if b, err := os.ReadFile(filepath.Join(pulled, "written")); err != nil || string(b) != "kept\n" {
		t.Errorf("written in the commit: %q, %v", b, err)
	}
}

// TestMountWaitsForAUserInAnotherNamespace: a copy of the mount in another
// mount namespace is not always an idle sandbox's: a process the user
// started in a namespace of its own (unshare -m, a container) works in the
// mount there. Ctrl-C of art mount cut its connection at once and
// recorded the session in silence: what it wrote from then on failed
// (ENOTCONN), and a file it had mapped was recorded as zeros. Now art
// names it and waits until it lets go, as for a busy mount.
func TestMountWaitsForAUserInAnotherNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: only root can abort a FUSE connection (and make a mount namespace)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("skipping: unshare (util-linux) is missing")
	}
	python, _ := exec.LookPath("python3")
	// Each script gets the workspace in the mount as $1, says "ready"
	// once it uses the mount, waits for a line, then writes "late".
	for _, tc := range []struct {
		name, script string
		python       bool
	}{
		{"open file", `exec 3>>"$1/f"; echo ready; read x; echo late >&3`, false},
		{"working directory", `cd "$1"; echo ready; read x; echo late > f`, false},
		{"mapped file", `exec python3 -c '
import mmap, os, sys
fd = os.open(sys.argv[1] + "/f", os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 5)
m = mmap.mmap(fd, 5)
os.close(fd)
print("ready", flush=True)
sys.stdin.readline()
m[:] = b"late\n"
' "$1"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.python && python == "" {
				t.Skip("skipping: python3 is missing")
			}
			c := newCLIRepo(t)
			mnt := filepath.Join(c.tmp, "mnt")
			os.Mkdir(mnt, 0o755)
			p := c.startMount("main", mnt)
			user := exec.Command(unshare, "--mount", "--propagation", "private", "sh", "-c", tc.script, "sh", filepath.Join(mnt, wsName))
			in, err := user.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := user.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := user.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { user.Process.Kill(); user.Wait() })
			if _, err := io.ReadFull(out, make([]byte, 6)); err != nil {
				t.Fatalf("the user in its own namespace: %v", err)
			}
			p.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-p.done:
				t.Errorf("art mount ended while a process still used the mount in another namespace:\n%s", p.stderr)
			case <-time.After(2 * time.Second):
			}
			if s := p.stderr.String(); !strings.Contains(s, fmt.Sprintf("still in use in another mount namespace (pid %d ", user.Process.Pid)) {
				t.Errorf("art mount did not name the user:\n%s", s)
			}
			in.Write([]byte("go\n"))
			in.Close()
			if err := user.Wait(); err != nil {
				t.Errorf("the user: %v", err)
			}
			p.wait(t)
			if p.err != nil {
				t.Fatalf("art mount: %v\n%s", p.err, p.stderr)
			}
			pulled := filepath.Join(c.tmp, "pulled", wsName)
			artOK(t, c.tmp, "pull", "-d", c.db, "-m", pulled, "--commit", "main", "-q")
			if b, err := os.ReadFile(filepath.Join(pulled, "f")); err != nil || string(b) != "late\n" {
				t.Errorf("f in the commit: %q, %v", b, err)
			}
		})
	}
}

// TestMountWarnsWhenGitCheckFails: the check for what git would run is a
// warning; a commit it cannot read (a tree gone: art fsck names it) is
// still served, with a warning saying the check was not made.
func TestMountWarnsWhenGitCheckFails(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	p := c.startMount("main", mnt)
	if err := os.MkdirAll(filepath.Join(mnt, wsName, "made", "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t)
	r, err := repo.Open(c.db)
	if err != nil {
		t.Fatal(err)
	}
	tip, _ := r.BranchTip("main")
	cm, _ := r.LoadCommit(tip)
	made, ok, err := r.Lookup(cm.Tree, []string{wsName, "made"})
	if err != nil || !ok {
		t.Fatalf("made: %v %v", ok, err)
	}
	if _, err := r.DB.Exec(`DELETE FROM trees WHERE id=?`, made.ID[:]); err != nil {
		t.Fatal(err)
	}
	r.Close()
	p = c.startMount("main", mnt) // fails the test unless it mounts
	if s := p.stderr.String(); !strings.Contains(s, "warning: could not check "+wsName+" for what git would run") {
		t.Errorf("no warning that the check failed:\n%s", s)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t)
}

// TestMountReadOnlyView: art mount --ro serves the branch's tip and claims
// nothing. It used to resume the branch's interrupted worktree and delete
// it, pending work and all, at its end; and while it was served, a session
// on the branch was refused as if the view were one.
func TestMountReadOnlyView(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	view := filepath.Join(c.tmp, "view")
	os.Mkdir(mnt, 0o755)
	os.Mkdir(view, 0o755)
	p := c.startMount("main", mnt)
	pending := filepath.Join(mnt, wsName, "pending.txt")
	if err := os.WriteFile(pending, []byte("fsynced before the kill\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := os.Open(pending); err == nil {
		f.Sync()
		f.Close()
	}
	p.kill9(t)
	tip := artOK(t, c.tmp, "log", "-d", c.db, "-n", "1", "--oneline").stdout

	v := c.startMountArgs(view, "--ro", "-b", "main")
	if strings.Contains(v.stderr.String(), "resuming") {
		t.Errorf("the read-only view resumed the interrupted worktree:\n%s", v.stderr)
	}
	if _, err := os.Lstat(filepath.Join(view, wsName, "pending.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the view serves uncommitted work, not the branch's tip (%v)", err)
	}
	if err := os.WriteFile(filepath.Join(view, wsName, "new"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("a write into the view: %v, want EROFS", err)
	}
	st := artOK(t, c.tmp, "status", "-d", c.db).stdout
	if !strings.Contains(st, "read-only view of") || !strings.Contains(st, "interrupted mount") {
		t.Errorf("art status does not show the view and the interrupted worktree apart:\n%s", st)
	}
	r, err := repo.Open(c.db)
	if err != nil {
		t.Fatal(err)
	}
	wts, err := r.Worktrees()
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wts {
		if w.Kind == repo.KindView {
			cr := art(t, c.tmp, "commit", "-d", c.db, "--worktree", fmt.Sprint(w.ID))
			if cr.code == 0 || !strings.Contains(cr.stderr, "read-only view") {
				t.Errorf("art commit --worktree of the view: want a refusal naming it, got %v", cr)
			}
		}
	}

	// The branch is free for a session while the view is served: it
	// resumes the interrupted worktree and records it.
	p = c.startMount("main", mnt)
	if !strings.Contains(p.stderr.String(), "resuming interrupted worktree") {
		t.Errorf("the mount beside the view did not resume the interrupted worktree:\n%s", p.stderr)
	}
	if b, err := os.ReadFile(pending); err != nil || string(b) != "fsynced before the kill\n" {
		t.Errorf("pending work after the view: %q, %v", b, err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t)
	if p.err != nil {
		t.Fatalf("art mount: %v\n%s", p.err, p.stderr)
	}
	// The view still serves the commit it began with.
	if _, err := os.ReadDir(filepath.Join(view, wsName)); err != nil {
		t.Errorf("the view after the branch moved: %v", err)
	}
	v.cmd.Process.Signal(syscall.SIGTERM)
	v.wait(t)
	if v.err != nil || strings.Contains(v.stderr.String(), "commit") {
		t.Errorf("the view's end: %v\n%s", v.err, v.stderr)
	}
	if mounted, _ := IsMountpoint(view); mounted {
		t.Errorf("%s still mounted", view)
	}
	show := artOK(t, c.tmp, "show", "-d", c.db, "--stat", "main").stdout
	if !strings.Contains(show, "pending.txt") {
		t.Errorf("the pending work is not in the branch's commit:\n%s", show)
	}
	if got := artOK(t, c.tmp, "log", "-d", c.db, "-n", "1", "--oneline").stdout; got == tip {
		t.Errorf("the branch did not move")
	}

	// A view whose art was killed is removed by the next command,
	// recording nothing.
	before := c.state()
	v = c.startMountArgs(view, "--ro", "-b", "main")
	v.kill9(t)
	st = artOK(t, c.tmp, "status", "-d", c.db).stdout
	if strings.Contains(st, "view") {
		t.Errorf("a dead view is still listed:\n%s", st)
	}
	if mounted, _ := IsMountpoint(view); mounted {
		t.Errorf("the dead view's mount was left at %s", view)
	}
	if after := c.state(); after != before {
		t.Errorf("a killed view changed the repository:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if cr := art(t, c.tmp, "commit", "-d", c.db); cr.code == 0 {
		t.Errorf("something to commit after the views: %v", cr)
	}
	if left, _ := filepath.Glob(c.db + "-wt*.journal"); len(left) > 0 {
		t.Errorf("journals left behind: %v", left)
	}
}

// An interrupted mount that changed nothing (killed before any write) is
// removed by 'art commit', which says so: kept, it stayed in art status
// for good and kept push off its branch.
func TestCommitRemovesAnEmptyInterruptedWorktree(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	p := c.startMount("main", mnt)
	p.kill9(t)
	artOK(t, c.tmp, "status", "-d", c.db) // removes the dead mount
	r := art(t, c.tmp, "commit", "-d", c.db)
	if r.code != 1 || !strings.Contains(r.stderr, "nothing to commit: worktree #1 had no changes; removed it") {
		t.Fatalf("art commit of an empty interrupted worktree: %v", r)
	}
	if st := artOK(t, c.tmp, "status", "-d", c.db).stdout; strings.Contains(st, "#1") {
		t.Errorf("the worktree is still listed:\n%s", st)
	}
	if _, err := os.Stat(c.db + "-wt1.journal"); err == nil {
		t.Errorf("its journal is still there")
	}
	if err := os.WriteFile(filepath.Join(c.host, "host.txt"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	artOK(t, c.tmp, "push", "-d", c.db, "-m", c.host, "-q")
	artOK(t, c.tmp, "fsck", "-d", c.db)
}

// A mount that changed nothing records nothing and leaves nothing behind:
// no worktree, and no journal (its header stayed, one per such mount).
func TestMountWithoutChangesLeavesNothing(t *testing.T) {
	c := newCLIRepo(t)
	mnt := filepath.Join(c.tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	p := c.startMount("main", mnt)
	p.cmd.Process.Signal(syscall.SIGINT)
	p.wait(t)
	if !strings.Contains(p.stderr.String(), "nothing changed; no commit recorded") {
		t.Fatalf("art mount with nothing changed: %v\n%s", p.err, p.stderr)
	}
	if journals, _ := filepath.Glob(c.db + "-wt*.journal"); len(journals) > 0 {
		t.Errorf("journals left: %v", journals)
	}
	if st := artOK(t, c.tmp, "status", "-d", c.db).stdout; strings.Contains(st, "#1") {
		t.Errorf("the worktree is still listed:\n%s", st)
	}
}
