package cmd

// Escape attempts through art run (issue 4, "Tests"): each must fail and
// have no effect. The workspace and its repository lie outside /tmp (see
// newBase), so the host workspace is in the sandbox's read-only view of
// the host and the repository has to be hidden for real.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artproject/art/sandbox"
	"github.com/creack/pty"
)

// needsScopes marks escape attempts that Landlock scopes stop.
const needsScopes = "landlock-scopes"

func TestRunEscapes(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n"})
	writeFiles(t, r.base, map[string]string{"decoy/art.db": "not a repository\n"})
	hostBefore := hashTree(t, r.ws)
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)

	// A host process to attack.
	victim := exec.Command("sleep", "300")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { victim.Process.Kill(); victim.Wait() }()
	vpid := victim.Process.Pid

	// A listener on the host's loopback.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			b, _ := io.ReadAll(io.LimitReader(c, 64))
			c.Close()
			accepted <- string(b)
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	connect := fmt.Sprintf(`python3 -c 'import socket; s = socket.create_connection(("127.0.0.1", %d), timeout=5); s.sendall(b"hello"); s.close()'`, port)
	// A listener on an abstract unix socket of the host, reachable by
	// name from the host's network namespace (--net shares it).
	abstract := "art-escape-" + tag
	aln, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer aln.Close()
	go func() {
		for {
			c, err := aln.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- "abstract"
		}
	}()
	connectAbstract := fmt.Sprintf(`python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("\0%s")'`, abstract)
	noConnection := func(t *testing.T) {
		select {
		case m := <-accepted:
			t.Errorf("the host listener got a connection from the sandbox (%q)", m)
		default:
		}
	}
	noFile := func(p string) func(t *testing.T) {
		return func(t *testing.T) {
			if _, err := os.Lstat(p); err == nil {
				os.Remove(p)
				t.Errorf("%s was created on the host", p)
			}
		}
	}

	hostWS := r.ws
	tests := []struct {
		name    string
		script  string // exits 0 only if the escape worked
		args    []string
		env     []string
		after   func(t *testing.T)
		needs   string
		wantOut string // the attempt's control output
	}{
		{name: "write /usr", script: "echo x > /usr/art-escape-" + tag, after: noFile("/usr/art-escape-" + tag)},
		{name: "write /etc", script: "echo x > /etc/art-escape-" + tag, after: noFile("/etc/art-escape-" + tag)},
		{name: "write the host workspace", script: "echo x > " + hostWS + "/escape.txt", after: noFile(filepath.Join(hostWS, "escape.txt"))},
		{name: "delete in the host workspace", script: "rm " + hostWS + "/a.txt"},
		{name: "read /etc/shadow", script: "cat /etc/shadow"},
		// The control: find does see a decoy next to the workspace.
		{name: "find the repository", script: "find / -name 'art.db*' 2>/dev/null >/tmp/found; grep -F " + r.base + "/decoy/art.db /tmp/found && echo DECOY-FOUND; grep -v -F " + r.base + "/decoy/ /tmp/found >&2; grep -F " + r.ws + " /tmp/found", wantOut: "DECOY-FOUND"},
		{name: "read the repository file", script: "head -c 16 " + r.db + " | grep -a SQLite"},
		{name: "list the repository directory", script: `test -n "$(ls -A ` + filepath.Dir(r.db) + `)"`},
		{name: "the repository in the home", script: "ls -A /home/agent/WS/.art"},
		{name: "list /root", script: `test -n "$(ls -A /root)"`},
		{name: "loopback without --net", script: connect, after: noConnection},
		{name: "abstract unix socket with --net", script: connectAbstract, args: []string{"--net"}, after: noConnection, needs: needsScopes},
		{name: "abstract unix socket with --net --trace", script: connectAbstract, args: []string{"--net", "--trace", "--trace-log", "/dev/null"}, after: noConnection, needs: needsScopes},
		{name: "mount", script: "mkdir -p /tmp/x && mount -t tmpfs none /tmp/x", needs: "mount"},
		{name: "unshare", script: "unshare -r true", needs: "unshare"},
		{name: "strace outside pid", script: fmt.Sprintf("timeout 5 strace -p %d -e trace=none -o /dev/null; test $? = 124", vpid), needs: "strace"},
		{name: "ptrace outside pid", script: fmt.Sprintf(`python3 -c 'import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); sys.exit(0 if libc.ptrace(16, %d, 0, 0) == 0 else 1)'`, vpid)},
		{name: "kill outside pid", script: fmt.Sprintf("kill -9 %d", vpid)},
		// The overlay makes device nodes for a caller the kernel lets
		// (root on the host, for pjdfstest); the agent has no CAP_MKNOD.
		{name: "make a block device node in the home", script: "mknod disk b 8 0 && ls -l disk", needs: "mknod"},
		{name: "make a character device node in the home", script: "mknod null c 1 3 && ls -l null", needs: "mknod"},
		{name: "secret in the environment", script: "env | grep -e xyz -e ART_", env: []string{"ART_SECRET_TOKEN=xyz"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needs == needsScopes && !sandbox.ScopesSupported() {
				t.Skip("skipping: this kernel has no Landlock scopes (Linux 6.12+ with Landlock enabled), which close the host's abstract sockets")
			} else if tc.needs != "" && tc.needs != needsScopes {
				if _, err := exec.LookPath(tc.needs); err != nil {
					t.Skipf("skipping: %s is not installed (%v); this escape attempt needs it", tc.needs, err)
				}
			}
			r.t = t
			args := append([]string{"run", "-i=false"}, tc.args...)
			args = append(args, "--", "sh", "-c", "echo STARTED; "+tc.script)
			res := runArt(t, r.ws, artEnv(tc.env...), nil, args...)
			t.Logf("%s", res)
			if !strings.HasPrefix(res.stdout, "STARTED\n") || res.code == 125 || res.code == 124 {
				t.Fatalf("the attempt did not run: %s", res)
			}
			if res.code == 0 {
				t.Errorf("escape %q succeeded:\n%s", tc.script, res)
			}
			if !strings.Contains(res.stdout, tc.wantOut) {
				t.Errorf("the attempt's control failed: stdout lacks %q", tc.wantOut)
			}
			if tc.after != nil {
				tc.after(t)
			}
		})
	}
	r.t = t

	// The control: with --net the same connection works.
	res := r.run("--net", "--", "sh", "-c", connect)
	if res.code != 0 {
		t.Errorf("connecting to the host's loopback with --net failed: %s", res)
	} else {
		select {
		case m := <-accepted:
			if m != "hello" {
				t.Errorf("listener got %q", m)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("listener got nothing with --net")
		}
	}

	// Only documented variables (and --env) pass.
	res = runArt(t, r.ws, artEnv("ART_SECRET_TOKEN=xyz", "AWS_SECRET_ACCESS_KEY=abc"), nil, "run", "-i=false", "--env", "MINE=1", "--", "env")
	if res.code != 0 {
		t.Fatalf("env: %s", res)
	}
	allowed := map[string]bool{"HOME": true, "PATH": true, "PWD": true, "TERM": true, "LANG": true, "USER": true, "MINE": true, "SHLVL": true, "_": true,
		// git's stat configuration (gitStatEnv), documented with the rest.
		"GIT_CONFIG_COUNT": true, "GIT_CONFIG_KEY_0": true, "GIT_CONFIG_VALUE_0": true, "GIT_CONFIG_KEY_1": true, "GIT_CONFIG_VALUE_1": true}
	for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
		k, _, _ := strings.Cut(line, "=")
		if !allowed[k] {
			t.Errorf("unexpected variable inside the sandbox: %q", line)
		}
	}
	checkContains(t, "env inside", res.stdout, "MINE=1\n", "HOME=/home/agent\n", "USER=agent\n")
	checkLacks(t, "env inside", res.stdout, "xyz", "abc")

	if hashTree(t, r.ws) != hostBefore {
		t.Errorf("the host workspace changed")
	}
	if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the host process was harmed: %v", err)
	}
	if tracer := tracerPid(t, vpid); tracer != "0" {
		t.Errorf("the host process is traced by %s", tracer)
	}
}

func tracerPid(t *testing.T, pid int) string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "TracerPid:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// TestRunNoTIOCSTI: the caller's terminal, handed to a non-interactive
// session as stdin/stdout/stderr, cannot be used to inject keystrokes
// into the caller's shell (the sandbox is in a session of its own).
func TestRunNoTIOCSTI(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n"})
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("skipping: cannot open a pty (%v); the TIOCSTI test needs /dev/ptmx", err)
	}
	defer ptmx.Close()
	script := `
import fcntl, os, sys, termios
print("isatty", os.isatty(0), os.isatty(1))
hits = []
for fd in (0, 1, 2):
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
        hits.append(fd)
    except OSError:
        pass
try:
    fd = os.open("/dev/tty", os.O_RDWR)
    fcntl.ioctl(fd, termios.TIOCSTI, b"x")
    hits.append("/dev/tty")
except OSError:
    pass
print("INJECTED" if hits else "refused", hits)
sys.exit(1 if hits else 0)
`
	c := exec.Command(artBinary(t), "run", "-i=false", "--", "python3", "-c", script)
	c.Dir = r.ws
	c.Env = artEnv()
	c.Stdin, c.Stdout, c.Stderr = tty, tty, tty
	// The terminal is art's controlling terminal, as in a user's shell.
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(ptmx) // ends with EIO once art is gone
		out <- string(b)
	}()
	err = c.Wait()
	var output string
	select {
	case output = <-out:
	case <-time.After(30 * time.Second):
		t.Fatal("no EOF on the terminal")
	}
	if err != nil {
		t.Errorf("art: %v\n%s", err, output)
	}
	checkContains(t, "terminal output", output, "isatty True True", "\nrefused []")
	checkLacks(t, "terminal output", output, "\nINJECTED [")
}

// TestRunAgentConfigIgnored: binds.json and policy.json come from the
// host's .art/config only. The agent cannot create .art directories in its
// home, and whatever it writes never takes effect on a later run, not even
// after the session is exported with art pull.
func TestRunAgentConfigIgnored(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n"})
	base := r.head()
	binds := `[{"host": "/", "guest": "/tmp/hostroot", "readonly": false}]`
	policy := `{"default": "none", "rules": []}`
	res := r.run("--", "sh", "-c", fmt.Sprintf(`
mkdir .art && echo "MKDIR-OK"
mkdir sub && mv -T sub .art && echo "RENAME-OK"
mkdir -p deep/.art && echo "DEEP-OK"
mkdir -p .art/config; echo '%s' > .art/config/binds.json; echo '%s' > .art/config/policy.json
mkdir -p /home/agent/.art/config && echo "HOME-OK"
true`, binds, policy))
	if res.code != 0 {
		t.Fatalf("%s", res)
	}
	checkLacks(t, "stdout", res.stdout, "MKDIR-OK", "RENAME-OK", "DEEP-OK", "HOME-OK")
	for path := range r.nameStatus(base, "HEAD") {
		if strings.Contains(path, ".art") {
			t.Errorf("the session recorded %s", path)
		}
	}
	for _, name := range []string{"binds.json", "policy.json"} {
		if _, err := os.Stat(filepath.Join(r.ws, ".art", "config", name)); err == nil {
			t.Errorf("host .art/config/%s exists after the agent's session", name)
		}
	}
	check := func(when string) {
		t.Helper()
		res := r.run("--", "sh", "-c", "test ! -e /tmp/hostroot && cat a.txt")
		if res.code != 0 || res.stdout != "a\n" {
			t.Errorf("%s: the agent's config took effect: %s", when, res)
		}
		if p := r.show("HEAD").Session.Policy; len(p) != 0 {
			t.Errorf("%s: a policy was recorded: %s", when, p)
		}
	}
	check("next run")
	r.mustArt("pull", "-m", r.ws, "--commit", "HEAD")
	check("after art pull")
}

// The host workspace is hidden in the sandbox (the agent works on its
// home): files the path policy or .artignore keep out of the home must not
// be readable at their host path through the read-only host root.
func TestRunHidesHostWorkspace(t *testing.T) {
	r := newRepo(t, map[string]string{"kept.txt": "visible\n", ".env": "SECRET=1\n"})
	os.WriteFile(filepath.Join(r.ws, ".artignore"), []byte(".env\n"), 0o644)
	res := r.run("--", "sh", "-c", "cat /home/agent/WS/kept.txt; cat "+filepath.Join(r.ws, ".env")+" && echo LEAKED")
	if !strings.Contains(res.stdout, "visible") {
		t.Fatalf("the home lost its workspace: %v", res)
	}
	if strings.Contains(res.stdout, "SECRET") || strings.Contains(res.stdout, "LEAKED") {
		t.Fatalf("the host workspace is readable inside the sandbox: %v", res)
	}
}

// A repository or .art owned by the user agents run as (an agent working
// on the host workspace with --direct could have made it, binds.json and
// all) is refused.
func TestRunRefusesAgentOwnedConfig(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: not root; agents run as another user (whose files this test plants) only when art runs as root")
	}
	r := newRepo(t, map[string]string{"a": "a\n"})
	before := r.commitCount()
	if err := os.Chown(filepath.Join(r.ws, ".art"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	res := r.run("--", "true")
	if res.code != 125 || !strings.Contains(res.stderr, "belongs to uid 65534, the user agents run as") {
		t.Fatalf("run with an agent-owned .art: %v", res)
	}
	// Run by that user through sudo, it is theirs.
	res = runArt(t, r.ws, []string{"SUDO_UID=65534"}, nil, "run", "-i=false", "--", "true")
	if strings.Contains(res.stderr, "belongs to uid") {
		t.Fatalf("sudo by the agents' user themselves: %v", res)
	}
	os.Chown(filepath.Join(r.ws, ".art"), 0, 0)
	before = r.commitCount()
	r.checkNothingRecorded(before)
}

// The agent's home is a FUSE mount other host users could reach by its
// path: allow_other, and its root shows the home's own mode (0755). A local
// user read the user's workspace through it while a session ran; the
// private directory around the mount point keeps them out, and goes with
// the session.
func TestRunHomeUnreachableForOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root (the home is allow_other only when art runs as root)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("skipping: setpriv (util-linux) is missing: %v", err)
	}
	r := newRepo(t, map[string]string{"secret.txt": "TOPSECRET\n"})
	// The session's own TMPDIR, where its mount point is made: other
	// sessions' homes on this machine are not this one. Open to all, as
	// /tmp is, so that only art's own directory can keep the user out.
	tmp, err := os.MkdirTemp("", "art-tmpdir-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	c, wait := r.startEnv([]string{"TMPDIR=" + tmp}, "run", "-i=false", "--", "sh", "-c", "sleep 30")
	var mnt string
	waitUntil := time.Now().Add(20 * time.Second)
	for mnt == "" && time.Now().Before(waitUntil) {
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		for _, line := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], tmp+"/art-home-") && strings.Contains(line, "fuse.art") {
				mnt = f[4]
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if mnt == "" {
		c.Process.Kill()
		t.Fatalf("the session's home never appeared:\n%s", wait())
	}
	// "nobody" is the agent's user: another one.
	out, err := exec.Command(setpriv, "--reuid=daemon", "--regid=daemon", "--clear-groups", "cat", filepath.Join(mnt, filepath.Base(r.ws), "secret.txt")).CombinedOutput()
	c.Process.Signal(syscall.SIGTERM)
	res := wait()
	if err == nil || strings.Contains(string(out), "TOPSECRET") {
		t.Errorf("another local user read the agent's home at %s: %q", mnt, out)
	}
	if !strings.Contains(string(out), "Permission denied") {
		t.Errorf("want permission denied, got %q (%v)", out, err)
	}
	t.Logf("session: %s", strings.TrimSpace(res.stderr))
	if _, err := os.Lstat(filepath.Dir(mnt)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mount point's directory %s is left behind (%v)", filepath.Dir(mnt), err)
	}
}

// Sessions running at once mount their homes side by side in TMPDIR, in
// directories their agents' user (nobody, for every session) may enter.
// With a TMPDIR outside /tmp (which the sandbox replaces), an agent read
// another session's home, another branch's live files, through the
// read-only view of the host: TMPDIR is hidden.
func TestRunOtherSessionsHomesHidden(t *testing.T) {
	r := newRepo(t, map[string]string{"a": "a\n"})
	r.mustArt("branch", "other")
	tmp := filepath.Join(r.base, "tmpdir")
	if err := os.Mkdir(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(tmp, 0o1777)
	env := []string{"TMPDIR=" + tmp}
	c, wait := r.startEnv(env, "run", "-i=false", "-b", "other", "--", "sh", "-c", "echo OTHER-BRANCH > secret.txt; sleep 30")
	var mnt string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if m, _ := filepath.Glob(filepath.Join(tmp, "art-home-*", "home", "WS", "secret.txt")); len(m) > 0 {
			mnt = m[0]
			break
		}
	}
	if mnt == "" {
		c.Process.Kill()
		t.Fatalf("the other session never wrote its file:\n%s", wait())
	}
	res := runArt(t, r.ws, artEnv(env...), nil, "run", "-i=false", "--", "sh", "-c", "cat "+mnt+" && echo LEAKED")
	c.Process.Signal(syscall.SIGTERM)
	wait()
	if strings.Contains(res.stdout, "OTHER-BRANCH") || strings.Contains(res.stdout, "LEAKED") {
		t.Fatalf("an agent read another session's home at %s: %v", mnt, res)
	}
}

// TestRunHidesOtherArtMounts: a live art mount of the user's (as root,
// allow_other) outside the directories the sandbox replaces showed in the
// read-only view of the host's root, and an agent of any session read
// another branch's live files there.
func TestRunHidesOtherArtMounts(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n"})
	r.mustArt("branch", "other")
	mnt := filepath.Join(r.base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	c, wait := r.start("mount", "-b", "other", mnt)
	t.Cleanup(func() { c.Process.Signal(syscall.SIGINT); wait() })
	waitFor(t, "the art mount", 30*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(mnt, "WS", "a.txt"))
		return err == nil && string(b) == "a\n"
	})
	for _, mode := range [][]string{nil, {"--direct"}} {
		args := append(append([]string{}, mode...), "--", "sh", "-c", "ls -A "+mnt+"; cat "+mnt+"/WS/a.txt")
		res := r.run(args...)
		if res.code == 0 || strings.Contains(res.stdout, "a\n") || !strings.Contains(res.stderr, "No such file") {
			t.Errorf("%v: the agent read a live art mount of another branch:\n%s", mode, res)
		}
	}
	// The mount itself is untouched.
	if b, err := os.ReadFile(filepath.Join(mnt, "WS", "a.txt")); err != nil || string(b) != "a\n" {
		t.Errorf("the art mount after the run: %q %v", b, err)
	}
}

// TestRunBesideDeadArtMount: an art mount whose server died stays
// mounted, dead, until its repository's next command; once the kernel has
// forgotten its root's attributes, every access to it fails (ENOTCONN or
// ECONNABORTED), and a run of any other repository that tried to hide it
// failed on it. Runs skip it (nothing of it can be read).
func TestRunBesideDeadArtMount(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n"})
	mnt := filepath.Join(r.base, "dead")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	mount := exec.Command(os.Args[0], mnt)
	mount.Args[0] = "art-test-deadfuse"
	if out, err := mount.CombinedOutput(); err != nil {
		t.Fatalf("art-test-deadfuse: %v\n%s", err, out)
	}
	if _, err := os.Lstat(mnt); !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) {
		t.Fatalf("the mount is not dead: lstat %s: %v", mnt, err)
	}
	for _, mode := range [][]string{nil, {"--direct"}} {
		args := append(append([]string{}, mode...), "--", "sh", "-c", "cat a.txt")
		if res := r.run(args...); res.code != 0 || res.stdout != "a\n" {
			t.Errorf("%v: a run beside a dead art mount:\n%s", mode, res)
		}
	}
}

// A sandbox whose setup failed because a path it covers went away
// meanwhile (another art mount ended) is set up again, at most
// setupAttempts times in all, with a note; other failures, and traced
// runs, are not retried.
func TestRunSandboxRetriesCoveredPathGone(t *testing.T) {
	gone := fmt.Errorf("%w: /var/tmp/x/mnt", sandbox.ErrCoveredPathGone)
	other := errors.New("bwrap could not set up the sandbox")
	tests := []struct {
		name   string
		traced bool
		errs   []error // what each run returns; nil: the command ran
		runs   int
		code   int
		notes  int
	}{
		{"gone once", false, []error{gone, nil}, 2, 0, 1},
		{"gone every time", false, []error{gone, gone, gone, gone}, setupAttempts, 125, setupAttempts - 1},
		{"another failure", false, []error{other, nil}, 1, 125, 0},
		{"no failure", false, []error{nil}, 1, 0, 0},
		{"gone once, traced", true, []error{gone, nil}, 1, 125, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			run := func(context.Context, sandbox.Config, sandbox.Stdio) (sandbox.Result, error) {
				err := tc.errs[runs]
				runs++
				if err != nil {
					return sandbox.Result{ExitCode: 125}, err
				}
				return sandbox.Result{}, nil
			}
			var stderr bytes.Buffer
			res, _ := runSandbox(context.Background(), &stderr, sandbox.Config{}, sandbox.Stdio{}, !tc.traced, run)
			if runs != tc.runs || res.ExitCode != tc.code {
				t.Errorf("%d runs, exit %d; want %d, %d", runs, res.ExitCode, tc.runs, tc.code)
			}
			if n := strings.Count(stderr.String(), "setting the sandbox up again"); n != tc.notes {
				t.Errorf("%d notes, want %d:\n%s", n, tc.notes, &stderr)
			}
		})
	}
}
