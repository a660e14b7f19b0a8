package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestExitStatus(t *testing.T) {
	requireBwrap(t)
	home := newHome(t)
	// A file that exists but is not executable, inside the home.
	if err := os.WriteFile(filepath.Join(home, "ws", "noexec.sh"), []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chownAgent(t, home)
	tests := []struct {
		name       string
		argv       []string
		code       int
		sig        syscall.Signal
		stderrHas  string
		stdoutWant string
	}{
		{name: "true", argv: []string{"true"}, code: 0},
		{name: "exit 3", argv: []string{"sh", "-c", "exit 3"}, code: 3},
		{name: "SIGKILL", argv: []string{"sh", "-c", "kill -KILL $$"}, code: 128 + 9, sig: syscall.SIGKILL},
		{name: "SIGTERM", argv: []string{"sh", "-c", "kill -TERM $$"}, code: 128 + 15, sig: syscall.SIGTERM},
		{name: "not found in PATH", argv: []string{"art-no-such-command", "x"}, code: 127, stderrHas: "not found"},
		{name: "not found by path", argv: []string{"/no/such/file"}, code: 127, stderrHas: "not found"},
		{name: "not executable", argv: []string{"/etc/passwd"}, code: 126, stderrHas: "Permission denied"},
		{name: "relative not executable", argv: []string{"./noexec.sh"}, code: 126, stderrHas: "Permission denied"},
		{name: "directory", argv: []string{"/etc"}, code: 126},
		{name: "dash-named command", argv: []string{"-n"}, code: 127},
		{name: "command output", argv: []string{"echo", "hello"}, code: 0, stdoutWant: "hello\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := run(t, Config{Home: home, Workspace: "ws", Argv: tc.argv}, "")
			if o.Err != nil {
				t.Fatalf("Run: %v (stderr %q)", o.Err, o.Stderr)
			}
			if o.ExitCode != tc.code || o.Signal != tc.sig {
				t.Errorf("exit code %d signal %v, want %d signal %v (stderr %q)", o.ExitCode, o.Signal, tc.code, tc.sig, o.Stderr)
			}
			if tc.stderrHas != "" && !strings.Contains(o.Stderr, tc.stderrHas) {
				t.Errorf("stderr %q does not mention %q", o.Stderr, tc.stderrHas)
			}
			if tc.stdoutWant != "" && o.Stdout != tc.stdoutWant {
				t.Errorf("stdout %q, want %q", o.Stdout, tc.stdoutWant)
			}
			if o.TimedOut || o.Interrupted != 0 {
				t.Errorf("unexpected TimedOut=%v Interrupted=%v", o.TimedOut, o.Interrupted)
			}
			if o.Start.IsZero() || o.End.Before(o.Start) {
				t.Errorf("bad Start/End %v %v", o.Start, o.End)
			}
		})
	}
}

func TestStdioSeparateAndStdin(t *testing.T) {
	requireBwrap(t)
	o := run(t, baseConfig(t, "sh", "-c", "echo out; echo err >&2; cat; echo more"), "from stdin\n")
	if o.Err != nil || o.ExitCode != 0 {
		t.Fatalf("err %v code %d", o.Err, o.ExitCode)
	}
	if o.Stdout != "out\nfrom stdin\nmore\n" || o.Stderr != "err\n" {
		t.Errorf("stdout %q stderr %q", o.Stdout, o.Stderr)
	}
}

func TestArgvPassesExactly(t *testing.T) {
	requireBwrap(t)
	args := []string{
		"plain", "with space", "  lead and trail  ", "it's", `"double"`, `back\slash`,
		"line1\nline2", "", "-n", "--", "$HOME", "$(id)", "`id`", "*", "a;b|c&d", "tab\there", "ünïcødé",
	}
	o := run(t, baseConfig(t, append([]string{"printf", `%s\0`}, args...)...), "")
	if o.Err != nil || o.ExitCode != 0 {
		t.Fatalf("err %v code %d stderr %q", o.Err, o.ExitCode, o.Stderr)
	}
	got := strings.Split(strings.TrimSuffix(o.Stdout, "\x00"), "\x00")
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", args) {
		t.Errorf("argv changed:\n got %q\nwant %q", got, args)
	}
}

func TestEnvironment(t *testing.T) {
	requireBwrap(t)
	t.Setenv("ART_SECRET_TOKEN", "s3cret")
	cfg := baseConfig(t, "env")
	cfg.Env = []string{"FOO=bar baz=qux", "EMPTY=", "TERM=xterm-test"}
	cfg.Lang = "en_US.UTF-8"
	o := run(t, cfg, "")
	if o.Err != nil || o.ExitCode != 0 {
		t.Fatalf("err %v code %d stderr %q", o.Err, o.ExitCode, o.Stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(o.Stdout), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	want := map[string]string{
		"HOME": "/home/agent", "PATH": DefaultPath, "PWD": "/home/agent/ws", "TERM": "xterm-test",
		"LANG": "en_US.UTF-8", "USER": "agent", "FOO": "bar baz=qux", "EMPTY": "",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("environment:\n got %v\nwant %v", got, want)
	}
	if strings.Contains(o.Stdout, "s3cret") {
		t.Error("host environment leaked into the sandbox")
	}

	// Defaults for TERM and LANG.
	o = run(t, baseConfig(t, "sh", "-c", `echo "$TERM $LANG"`), "")
	if strings.TrimSpace(o.Stdout) != "dumb C.UTF-8" {
		t.Errorf("defaults: %q", o.Stdout)
	}

	for _, bad := range []string{"NOEQUALS", "1ABC=x", "A-B=x", "=x", "A B=x"} {
		cfg := baseConfig(t, "true")
		cfg.Env = []string{bad}
		if o := run(t, cfg, ""); o.Err == nil || !strings.Contains(o.Err.Error(), "KEY=VALUE") {
			t.Errorf("env %q: error %v, want a KEY=VALUE error", bad, o.Err)
		}
	}
}

func TestWorkdirAndHomeWrites(t *testing.T) {
	requireBwrap(t)
	cfg := baseConfig(t, "sh", "-c", `pwd; echo data > file.txt; mkdir -p ~/.cache/x && echo c > ~/.cache/x/f`)
	o := run(t, cfg, "")
	if o.Err != nil || o.ExitCode != 0 {
		t.Fatalf("err %v code %d stderr %q", o.Err, o.ExitCode, o.Stderr)
	}
	if o.Stdout != "/home/agent/ws\n" {
		t.Errorf("cwd %q", o.Stdout)
	}
	for path, want := range map[string]string{"ws/file.txt": "data\n", ".cache/x/f": "c\n"} {
		got, err := os.ReadFile(filepath.Join(cfg.Home, path))
		if err != nil || string(got) != want {
			t.Errorf("%s on the host: %q, %v", path, got, err)
		}
	}
	// No workspace: cwd is the home itself.
	cfg.Workspace = ""
	cfg.Argv = []string{"pwd"}
	if o := run(t, cfg, ""); o.Stdout != "/home/agent\n" {
		t.Errorf("cwd without workspace %q (%v)", o.Stdout, o.Err)
	}
}

func TestConfigErrors(t *testing.T) {
	requireBwrap(t)
	home := newHome(t)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no command", Config{Home: home}, "no command"},
		{"no home", Config{Argv: []string{"true"}}, "home"},
		{"missing home", Config{Home: "/nonexistent/art", Argv: []string{"true"}}, "home"},
		{"missing workspace", Config{Home: home, Workspace: "nope", Argv: []string{"true"}}, "does not exist"},
		{"escaping workspace", Config{Home: home, Workspace: "../x", Argv: []string{"true"}}, "relative path"},
		{"root user", Config{Home: home, Argv: []string{"true"}, User: "root"}, "refusing to run the agent as root"},
		{"unknown user", Config{Home: home, Argv: []string{"true"}, User: "art-no-such-user"}, "unknown agent user"},
		{"bind guest home", Config{Home: home, Argv: []string{"true"}, Binds: []Bind{{Host: "/etc", Guest: "/home"}}}, "cover the agent home"},
		{"relative hide", Config{Home: home, Argv: []string{"true"}, Hide: []string{"rel"}}, "absolute"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := run(t, tc.cfg, "")
			if o.Err == nil || !strings.Contains(o.Err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", o.Err, tc.want)
			}
			if o.ExitCode != 125 {
				t.Errorf("exit code %d, want 125", o.ExitCode)
			}
		})
	}
}

func TestUserSpecs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("user switching needs root")
	}
	for spec, want := range map[string][2]int{"": {65534, 65534}, "nobody": {65534, 65534}, "65534": {65534, 65534}, "1234:4321": {1234, 4321}} {
		uid, gid, err := AgentUser(spec)
		if err != nil || uid != want[0] || gid != want[1] {
			t.Errorf("AgentUser(%q) = %d, %d, %v; want %v", spec, uid, gid, err, want)
		}
	}
	for _, bad := range []string{"root", "0", "0:0", "x:y", "art-no-such-user"} {
		if _, _, err := AgentUser(bad); err == nil {
			t.Errorf("AgentUser(%q) accepted", bad)
		}
	}
	// The sandbox runs as the chosen numeric user.
	cfg := baseConfig(t, "sh", "-c", "id -u; id -g; id -G")
	cfg.User = "65534:65534"
	if o := run(t, cfg, ""); o.Stdout != "65534\n65534\n65534\n" {
		t.Errorf("ids inside: %q %v %q", o.Stdout, o.Err, o.Stderr)
	}
}

func TestTimeoutKillsWholeTree(t *testing.T) {
	requireBwrap(t)
	m1, m2, m3, m4 := marked(987001), marked(987002), marked(987003), marked(987004)
	cfg := baseConfig(t, "sh", "-c", "sleep "+m1+" & (sleep "+m2+" &) ; setsid sleep "+m3+" & echo started; sleep "+m4)
	cfg.Timeout = 4 * time.Second // the clock starts before bwrap: room for a loaded machine to print "started"
	begin := time.Now()
	o := run(t, cfg, "")
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	if !o.TimedOut || o.ExitCode != 124 {
		t.Errorf("TimedOut %v exit %d, want true 124", o.TimedOut, o.ExitCode)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	if o.Stdout != "started\n" {
		t.Errorf("stdout %q", o.Stdout)
	}
	for _, m := range []string{m1, m2, m3, m4} {
		if pids := processesWith("sleep " + m); len(pids) > 0 {
			t.Errorf("process 'sleep %s' survived: pids %v", m, pids)
		}
	}
}

func TestContextCancel(t *testing.T) {
	requireBwrap(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	m := marked(987010)
	res, err := Run(ctx, baseConfig(t, "sleep", m), Stdio{})
	if err != context.Canceled || res.ExitCode != 137 || res.TimedOut {
		t.Errorf("got %+v, %v", res, err)
	}
	if pids := processesWith(m); len(pids) > 0 {
		t.Errorf("survivors %v", pids)
	}
}

// TestEscapes runs attempts to get out of the sandbox; each must fail.
func TestEscapes(t *testing.T) {
	requireBwrap(t)
	// A directory and a file to hide, outside and inside the home.
	secretDir, err := os.MkdirTemp("", "art-secret-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(secretDir) })
	os.Chmod(secretDir, 0o755)
	os.WriteFile(filepath.Join(secretDir, "secret.txt"), []byte("TOPSECRET"), 0o644)
	// Hidden paths outside /tmp (the sandbox's /tmp is private anyway).
	varDir, err := os.MkdirTemp("/var/tmp", "art-secret-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(varDir) })
	secretFile := varDir + ".db"
	os.WriteFile(secretFile, []byte("TOPSECRET"), 0o644)
	t.Cleanup(func() { os.Remove(secretFile) })
	os.Chmod(varDir, 0o755)
	os.WriteFile(filepath.Join(varDir, "secret.txt"), []byte("TOPSECRET"), 0o644)

	// Another user's home on the host.
	otherHome, err := os.MkdirTemp("/home", "art-test-other-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(otherHome) })
	os.Chmod(otherHome, 0o755)
	os.WriteFile(filepath.Join(otherHome, "secret.txt"), []byte("TOPSECRET"), 0o644)

	// A process outside the sandbox to attach to.
	victim := exec.Command("sleep", "987020")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Process.Kill(); victim.Wait() })
	vpid := victim.Process.Pid

	home := newHome(t)
	inHome := filepath.Join(home, "ws", ".art")
	os.Mkdir(inHome, 0o755)
	os.WriteFile(filepath.Join(inHome, "art.db"), []byte("TOPSECRET"), 0o644)
	chownAgent(t, home)

	ptraceAttach := fmt.Sprintf(`import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, %d, None, None)  # PTRACE_ATTACH
print("ptrace", r, os.strerror(ctypes.get_errno()))
sys.exit(0 if r == 0 else 1)`, vpid)

	tests := []struct {
		name   string
		script string
		needs  string // host tool needed
	}{
		{"write /usr", "touch /usr/art-escape", ""},
		{"write /etc", "echo x >> /etc/passwd", ""},
		{"write /home", "touch /home/art-escape", ""},
		{"write hidden tmpfs", "touch " + varDir + "/x", ""},
		{"read /etc/shadow", "cat /etc/shadow", ""},
		{"list /root", `test -n "$(ls -A /root)"`, ""},
		{"other homes", `ls -A /home | grep -v '^agent$'`, ""},
		{"other home file", "cat " + otherHome + "/secret.txt", ""},
		{"hidden dir in /tmp", "cat " + secretDir + "/secret.txt", ""},
		{"hidden dir outside /tmp", "cat " + varDir + "/secret.txt", ""},
		{"hidden dir listing", `test -n "$(ls -A ` + varDir + `)"`, ""},
		{"hidden file", "cat " + secretFile, ""},
		{"hidden path inside the home", `cat /home/agent/ws/.art/art.db || test -n "$(ls -A /home/agent/ws/.art)"`, ""},
		{"unmount hidden path", "umount /home/agent/ws/.art", ""},
		{"mount", "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m", ""},
		{"unshare -r", "unshare -r true", "/usr/bin/unshare"},
		{"unshare -U", "unshare -U true", "/usr/bin/unshare"},
		{"strace outside pid", fmt.Sprintf("strace -p %d -e trace=none -o /dev/null & sleep 1; kill -0 $! 2>/dev/null", vpid), "/usr/bin/strace"},
		{"ptrace outside pid", "python3 -c '" + ptraceAttach + "'", "/usr/bin/python3"},
		{"kill outside pid", fmt.Sprintf("kill -9 %d", vpid), ""},
		{"see outside pid", fmt.Sprintf("test -e /proc/%d", vpid), ""},
		{"be root", `test "$(id -u)" = 0`, ""},
		{"setuid root via su", "su -c true root </dev/null", ""},
		{"chroot", "chroot / true", ""},
		{"raw socket", `python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)'`, "/usr/bin/python3"},
	}
	cfg := Config{Home: home, Workspace: "ws", Hide: []string{secretDir, secretFile, varDir, inHome}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needs != "" {
				requireTool(t, tc.needs)
			}
			cfg := cfg
			cfg.Argv = []string{"sh", "-c", tc.script}
			o := run(t, cfg, "")
			if o.Err != nil {
				t.Fatalf("Run: %v", o.Err)
			}
			t.Logf("exit %d stdout %q stderr %q", o.ExitCode, o.Stdout, o.Stderr)
			if o.ExitCode == 0 {
				t.Errorf("escape %q succeeded (stdout %q stderr %q)", tc.script, o.Stdout, o.Stderr)
			}
			if strings.Contains(o.Stdout+o.Stderr, "TOPSECRET") {
				t.Errorf("secret visible: %q %q", o.Stdout, o.Stderr)
			}
		})
	}
	if err := syscall.Kill(vpid, 0); err != nil {
		t.Errorf("victim process was harmed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(inHome, "art.db")); err != nil {
		t.Errorf("hidden file in the home disappeared: %v", err)
	}
}

func TestNoPrivileges(t *testing.T) {
	requireBwrap(t)
	o := sh(t, "grep -E '^(NoNewPrivs|CapEff|CapPrm|CapBnd|CapAmb|Uid):' /proc/self/status")
	for _, want := range []string{"NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000"} {
		if !strings.Contains(o.Stdout, want) {
			t.Errorf("missing %q in:\n%s", want, o.Stdout)
		}
	}
	if os.Geteuid() == 0 && !strings.Contains(o.Stdout, "Uid:\t65534\t65534\t65534\t65534") {
		t.Errorf("not running as nobody:\n%s", o.Stdout)
	}
}

func TestNetwork(t *testing.T) {
	requireBwrap(t)
	requireTool(t, "/bin/bash")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello-from-host\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && cat <&3`, port)
	cfg := baseConfig(t, "bash", "-c", script)
	o := run(t, cfg, "")
	if o.Err != nil || o.ExitCode == 0 || strings.Contains(o.Stdout, "hello") {
		t.Errorf("without Net: connected (exit %d, %q, %v)", o.ExitCode, o.Stdout, o.Err)
	}
	cfg.Net = true
	o = run(t, cfg, "")
	if o.Err != nil || o.ExitCode != 0 || o.Stdout != "hello-from-host\n" {
		t.Errorf("with Net: exit %d stdout %q stderr %q err %v", o.ExitCode, o.Stdout, o.Stderr, o.Err)
	}
}

func TestSeccompFD(t *testing.T) {
	requireBwrap(t)
	cfg := baseConfig(t, "sh", "-c", "grep ^Seccomp: /proc/self/status; ls /proc/self/fd")
	cfg.TmpSize = 64 << 20 // as root, fd 6 is passed too (tmpfs.go)
	// One BPF instruction after the sandbox's rules: return SECCOMP_RET_ALLOW.
	for _, then := range [][]byte{nil, {0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x7f}} {
		cfg.Seccomp = then
		o := run(t, cfg, "")
		if o.Err != nil || !strings.Contains(o.Stdout, "Seccomp:\t2") {
			t.Errorf("seccomp filter not applied: %q %q %v", o.Stdout, o.Stderr, o.Err)
		}
		// Only stdio and the fd ls itself opens are left open.
		fds := strings.Fields(strings.SplitN(o.Stdout, "\n", 2)[1])
		if len(fds) > 4 {
			t.Errorf("descriptors leaked into the sandbox: %v", fds)
		}
	}
	cfg.Seccomp = []byte{1, 2, 3}
	if o := run(t, cfg, ""); o.Err == nil || o.ExitCode != 125 || !strings.Contains(o.Err.Error(), "not a whole number of instructions") {
		t.Errorf("a torn program: %+v %v", o.Result, o.Err)
	}
}

func TestStarterHook(t *testing.T) {
	requireBwrap(t)
	var called int
	cfg := baseConfig(t, "sh", "-c", "exit 7")
	cfg.Starter = func(cmd *exec.Cmd) (func() (syscall.WaitStatus, error), error) {
		called++
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return func() (syscall.WaitStatus, error) {
			var ws syscall.WaitStatus
			_, err := syscall.Wait4(cmd.Process.Pid, &ws, 0, nil)
			return ws, err
		}, nil
	}
	o := run(t, cfg, "")
	if called != 1 || o.Err != nil || o.ExitCode != 7 {
		t.Errorf("called %d exit %d err %v", called, o.ExitCode, o.Err)
	}
}

func TestSetupFailureIsAnError(t *testing.T) {
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a home the agent user cannot reach")
	}
	parent := t.TempDir() // mode 0700, owned by root
	home := filepath.Join(parent, "home")
	os.Mkdir(home, 0o755)
	var stderr bytes.Buffer
	res, err := Run(context.Background(), Config{Home: home, Argv: []string{"true"}}, Stdio{Stderr: &stderr})
	if err == nil || res.ExitCode != 125 {
		t.Fatalf("got %+v, %v", res, err)
	}
	if !strings.Contains(err.Error(), "cannot be searched by uid 65534") || !strings.Contains(err.Error(), filepath.Dir(parent)) {
		t.Errorf("error does not explain: %v", err)
	}
	if !strings.Contains(stderr.String(), "bwrap") {
		t.Errorf("bwrap's message missing: %q", stderr.String())
	}
}

func TestCheckTools(t *testing.T) {
	requireBwrap(t)
	if err := CheckTools(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	err := CheckTools()
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y bubblewrap") {
		t.Errorf("missing bwrap: %v", err)
	}
}

func TestArgs(t *testing.T) {
	requireBwrap(t)
	home := newHome(t)
	cfg := Config{Home: home, Workspace: "ws", Argv: []string{"true"}}
	a, err := Args(cfg)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(a, " ")
	for _, want := range []string{"--ro-bind / /", "--unshare-all", "--disable-userns", "--new-session", "--die-with-parent",
		"--cap-drop ALL", "--clearenv", "--chdir /home/agent/ws", "--bind " + home + " /home/agent", "--tmpfs /root", "--tmpfs /home"} {
		if !strings.Contains(joined, want) {
			t.Errorf("args lack %q: %s", want, joined)
		}
	}
	if strings.Contains(joined, "--share-net") {
		t.Error("--share-net without Net")
	}
	cfg.Net, cfg.Interactive = true, true
	a, _ = Args(cfg)
	joined = strings.Join(a, " ")
	if !strings.Contains(joined, "--share-net") || !strings.Contains(joined, "--new-session") || !strings.Contains(joined, "setsid' -w -c") {
		t.Errorf("Net/Interactive args: %s", joined)
	}
	if a[len(a)-1] != "true" || a[len(a)-2] != "art-sandbox" {
		t.Errorf("command not last: %q", a[len(a)-3:])
	}
}

func TestCheckToolsBrokenBwrap(t *testing.T) {
	dir, err := os.MkdirTemp("", "art-fake-bwrap-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	script := "#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "bwrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	err = CheckTools()
	if err == nil || !strings.Contains(err.Error(), "No permissions to create new namespace") || !strings.Contains(err.Error(), "user.max_user_namespaces") {
		t.Errorf("CheckTools with a failing bwrap: %v", err)
	}
}

// TestHideReachability: paths the agent cannot reach are skipped (bwrap,
// running as the agent's user, could not mount over them); paths it can
// reach through a search-only directory are hidden.
func TestHideReachability(t *testing.T) {
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to build a root-only directory")
	}
	base, err := os.MkdirTemp("/var/tmp", "art-hide-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	closed := filepath.Join(base, "closed")     // 0700: agent cannot enter
	searchOnly := filepath.Join(base, "search") // 0711: agent can pass through
	for _, d := range []string{closed + "/repo/.art", searchOnly + "/repo/.art"} {
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "art.db"), []byte("TOPSECRET"), 0o644)
	}
	os.Chmod(base, 0o755)
	os.Chmod(closed, 0o700)
	os.Chmod(searchOnly, 0o711)
	cfg := baseConfig(t, "sh", "-c", "cat "+searchOnly+"/repo/.art/art.db; cat "+closed+"/repo/.art/art.db; ls -A "+searchOnly+"/repo/.art")
	cfg.Hide = []string{closed + "/repo/.art", searchOnly + "/repo/.art"}
	o := run(t, cfg, "")
	if o.Err != nil {
		t.Fatalf("Run: %v (%q)", o.Err, o.Stderr)
	}
	if strings.Contains(o.Stdout, "TOPSECRET") || o.Stdout != "" || !strings.Contains(o.Stderr, "search/repo/.art/art.db: No such file") {
		t.Errorf("hidden file readable: %+v %q %q", o.Result, o.Stdout, o.Stderr)
	}
	// The control: without Hide, the search-only path is readable.
	cfg.Hide = nil
	if o := run(t, cfg, ""); !strings.Contains(o.Stdout, "TOPSECRET") {
		t.Errorf("control failed: %q %q", o.Stdout, o.Stderr)
	}
}

// TestNonRootCaller runs art (the helper) as an unprivileged user: bwrap then
// runs as that user, without switching.
func TestNonRootCaller(t *testing.T) {
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("already not root: the other tests cover this case")
	}
	// A copy of the test binary and a result directory the user can reach.
	dir, err := os.MkdirTemp("", "art-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(t, "sh", "-c", "id -u; grep -E '^(NoNewPrivs|CapEff):' /proc/self/status; cat /etc/shadow; touch /home/agent/ws/mine")
	cmd, resFile := helperCmdAt(t, cfg, filepath.Join(dir, "result.json"))
	cmd.Path = bin
	cmd.Env = []string{"PATH=/usr/bin:/bin", cmd.Env[len(cmd.Env)-1]} // just the helper spec
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out.String())
	}
	r := readHelperResult(t, resFile)
	if r.Err != "" || r.ExitCode != 0 {
		t.Errorf("result %+v\n%s", r, out.String())
	}
	for _, want := range []string{"65534\n", "NoNewPrivs:\t1", "CapEff:\t0000000000000000", "/etc/shadow: Permission denied"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.Home, "ws", "mine")); err != nil {
		t.Errorf("write in the home: %v", err)
	}
}

// TestOutputFilesNotShared: output redirected to a file (art run >> log)
// reaches the agent as a pipe, not as the caller's open file: with the
// file itself, ftruncate(1, 0) emptied the caller's log and pwrite could
// write anywhere in it. Output to the same file twice (2>&1) keeps its
// order; a file opened for writing too is not the agent's stdin either.
func TestOutputFilesNotShared(t *testing.T) {
	requireBwrap(t)
	perl := "/usr/bin/perl" // under /usr: visible in the sandbox
	if _, err := os.Stat(perl); err != nil {
		t.Skip("skipping: /usr/bin/perl is missing (the agent's truncate)")
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "host.log")
	if err := os.WriteFile(log, []byte("the caller's log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	script := `for my $fh (\*STDIN, \*STDOUT, \*STDERR) { print STDERR "truncate worked\n" if truncate($fh, 0); }
syswrite(STDOUT, "1\n"); syswrite(STDERR, "2\n"); syswrite(STDOUT, "3\n");`
	in, err := os.OpenFile(filepath.Join(dir, "in.txt"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	in.WriteString("input\n")
	in.Seek(0, io.SeekStart)
	defer in.Close()
	cfg := baseConfig(t, perl, "-e", script)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, cfg, Stdio{Stdin: in, Stdout: f, Stderr: f})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	got, _ := os.ReadFile(log)
	if want := "the caller's log\n1\n2\n3\n"; string(got) != want {
		t.Errorf("host log %q, want %q", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "in.txt")); string(b) != "input\n" {
		t.Errorf("stdin file %q, want it untouched", b)
	}
}

// TestStopGivesGrace: a timeout, or a signal to art, first gives the
// sandbox's processes the signal and StopGrace to end on their own (a
// git removing its index.lock), then SIGKILL for what is left. SIGKILL at
// once left an agent's git lock files in the commit.
func TestStopGivesGrace(t *testing.T) {
	requireBwrap(t)
	for _, tc := range []struct {
		name   string
		script string
		signal syscall.Signal // sent to Run's signal channel; 0: a timeout
		want   syscall.Signal // Result.Signal
		clean  bool           // the trap ran
	}{
		{"timeout, cleans up", `trap 'echo cleaned > cleaned; exit 3' TERM; echo started; while :; do sleep 0.05; done`, 0, syscall.SIGTERM, true},
		{"timeout, ignores it", `trap '' TERM; echo started; while :; do sleep 0.05; done`, 0, syscall.SIGKILL, false},
		{"SIGINT, cleans up", `trap 'echo cleaned > cleaned; exit 3' INT; echo started; while :; do sleep 0.05; done`, syscall.SIGINT, syscall.SIGINT, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(t, "sh", "-c", tc.script)
			var out syncWriter
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if tc.signal == 0 {
				cfg.Timeout = 3 * time.Second // the clock starts before bwrap: room for sh to set its trap
			} else {
				sigs := make(chan os.Signal, 1)
				cfg.Signals = sigs
				go func() {
					for !strings.Contains(out.String(), "started") {
						time.Sleep(10 * time.Millisecond)
					}
					time.Sleep(100 * time.Millisecond)
					sigs <- tc.signal
				}()
			}
			begin := time.Now()
			res, err := Run(ctx, cfg, Stdio{Stdout: &out, Stderr: &out})
			took := time.Since(begin)
			if err != nil {
				t.Fatal(err)
			}
			if res.Signal != tc.want {
				t.Errorf("Signal %v, want %v (%+v)", res.Signal, tc.want, res)
			}
			_, err = os.Stat(filepath.Join(cfg.Home, "ws", "cleaned"))
			if cleaned := err == nil; cleaned != tc.clean {
				t.Errorf("the agent's clean-up ran: %v, want %v", cleaned, tc.clean)
			}
			if !tc.clean && (took < StopGrace || took > StopGrace+10*time.Second) {
				t.Errorf("took %v, want StopGrace (%v) and a little", took, StopGrace)
			}
			if tc.clean && took > StopGrace+5*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}

// syncWriter is a bytes.Buffer safe for a reader and a writer at once.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestStdinDirectoryNotShared: a directory given as stdin (art run < /)
// reached the agent as it was, and /proc/self/fd/0 then led to the host's
// root, hidden paths included, writable as the agent's user. It is read
// through a pipe now (EISDIR: empty input).
func TestStdinDirectoryNotShared(t *testing.T) {
	requireBwrap(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o777) // writable by the agent's user, were it reachable
	in, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out syncWriter
	cfg := baseConfig(t, "sh", "-c", "ls /proc/self/fd/0/ 2>&1; echo x > /proc/self/fd/0/escaped; echo done")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := Run(ctx, cfg, Stdio{Stdin: in, Stdout: &out, Stderr: &out}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "escaped")); err == nil {
		t.Errorf("the agent wrote into the directory given as stdin:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "done") {
		t.Errorf("output %q", out.String())
	}
}

// TestOutputFileFull: output to a file that cannot take it (a full
// filesystem) gives the agent an error, as writing there itself would:
// the copy gave up and the agent blocked on the full pipe for ever.
func TestOutputFileFull(t *testing.T) {
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to mount a small tmpfs")
	}
	small := filepath.Join(t.TempDir(), "small")
	os.Mkdir(small, 0o755)
	if err := syscall.Mount("tmpfs", small, "tmpfs", 0, "size=256k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(small, syscall.MNT_DETACH) })
	f, err := os.Create(filepath.Join(small, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var errOut syncWriter
	cfg := baseConfig(t, "sh", "-c", "head -c 3000000 /dev/zero; echo rc=$? >&2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, cfg, Stdio{Stdout: f, Stderr: &errOut})
	if err != nil || ctx.Err() != nil || res.TimedOut {
		t.Fatalf("Run: %+v, %v (context %v)", res, err, ctx.Err())
	}
	if !strings.Contains(errOut.String(), "rc=") || strings.Contains(errOut.String(), "rc=0") {
		t.Errorf("the agent saw no error writing to a full file: %q", errOut.String())
	}
}

// --user U runs the agent with U's supplementary groups, as a login gives
// them: they were dropped, and a file U reads through a group was
// unreadable inside.
func TestAgentUserKeepsItsGroups(t *testing.T) {
	name, gid := groupUser(t)
	// A file only the group reads, where the agent can reach it.
	dir, err := os.MkdirTemp("", "art-groups-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("for the group\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(secret, 0, gid); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(t, "cat", secret)
	cfg.User = name
	cfg.Binds = []Bind{{Host: dir, Guest: "/mnt", ReadOnly: true}}
	cfg.Argv = []string{"cat", "/mnt/secret"}
	o := run(t, cfg, "")
	if o.Err != nil || o.ExitCode != 0 || o.Stdout != "for the group\n" {
		t.Fatalf("the agent could not read its group's file: %+v", o)
	}
}

// groupUser makes a user whose primary group is nogroup and who belongs to
// a group of its own, removed when the test ends: the user's name and that
// group's id.
func groupUser(t *testing.T) (string, int) {
	t.Helper()
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root (only root runs the agent as another user)")
	}
	for _, tool := range []string{"useradd", "groupadd", "userdel", "groupdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s is missing (%v)", tool, err)
		}
	}
	name := fmt.Sprintf("art%d", os.Getpid()%100000)
	if out, err := exec.Command("groupadd", name+"g").CombinedOutput(); err != nil {
		t.Skipf("skipping: groupadd: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("groupdel", name+"g").Run() })
	if out, err := exec.Command("useradd", "-M", "-N", "-g", "nogroup", "-G", name+"g", name).CombinedOutput(); err != nil {
		t.Skipf("skipping: useradd: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	g, err := user.LookupGroup(name + "g")
	if err != nil {
		t.Fatal(err)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		t.Fatal(err)
	}
	return name, gid
}

// TestHideReachableThroughGroup hides a repository that the agent's user
// reaches only through a supplementary group: it was judged out of reach
// (only the primary group was compared), left unhidden, and readable.
func TestHideReachableThroughGroup(t *testing.T) {
	name, gid := groupUser(t)
	base, err := os.MkdirTemp("/var/tmp", "art-hidegroup-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	grp := filepath.Join(base, "grp")
	dotArt := filepath.Join(grp, "repo", ".art")
	if err := os.MkdirAll(dotArt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dotArt, "art.db"), []byte("TOPSECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(grp, 0, gid); err != nil {
		t.Fatal(err)
	}
	os.Chmod(grp, 0o750)
	cfg := baseConfig(t, "cat", filepath.Join(dotArt, "art.db"))
	cfg.User = name
	cfg.Hide = []string{dotArt}
	o := run(t, cfg, "")
	if o.Err != nil {
		t.Fatalf("Run: %v (%q)", o.Err, o.Stderr)
	}
	if strings.Contains(o.Stdout, "TOPSECRET") || !strings.Contains(o.Stderr, "No such file") {
		t.Errorf("the repository reached through a group was readable: %+v %q %q", o.Result, o.Stdout, o.Stderr)
	}
	// The control: without Hide, the group lets the agent read it.
	cfg.Hide = nil
	if o := run(t, cfg, ""); !strings.Contains(o.Stdout, "TOPSECRET") {
		t.Errorf("control failed: %q %q", o.Stdout, o.Stderr)
	}
}

func TestCannotWrite(t *testing.T) {
	name, gid := groupUser(t)
	dir := t.TempDir()
	tests := []struct {
		mode  os.FileMode
		group int
		want  string // "" when the user can write
	}{
		{0o755, 0, "who cannot write"},
		{0o777, 0, ""},
		{0o770, gid, ""}, // through its supplementary group
		{0o750, gid, "mode 0750"},
		{0o707, gid, "who cannot write"}, // the group's bits decide, not the others'
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%04o", tc.mode), func(t *testing.T) {
			os.Chown(dir, 0, tc.group)
			os.Chmod(dir, tc.mode)
			got := CannotWrite(name, dir)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("CannotWrite = %q, want %q", got, tc.want)
			}
		})
	}
	if got := CannotWrite(name, filepath.Join(dir, "missing")); got != "" {
		t.Errorf("a missing directory: %q", got)
	}
	if got := CannotWrite("no-such-user-art", dir); got != "" {
		t.Errorf("an unknown user: %q", got)
	}
}

// A path the sandbox hides that goes away between art's look and bwrap's
// mounts (another art mount that ended, its directory removed) fails the
// setup: bwrap cannot make the mount point again on the read-only root.
// Run says so with ErrCoveredPathGone, which art answers by running
// again; a run that starts after it covers what is there.
func TestCoveredPathGoneDuringSetup(t *testing.T) {
	requireBwrap(t)
	dir := hostTempDir(t, "art-covered-")
	os.Chmod(dir, 0o755) // within the agent's reach: hidden
	gone := filepath.Join(dir, "mnt")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(t, "true")
	cfg.Hide = []string{gone}
	cfg.Starter = func(cmd *exec.Cmd) (func() (syscall.WaitStatus, error), error) {
		os.Remove(gone) // after the plan, before bwrap
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return func() (syscall.WaitStatus, error) {
			err := cmd.Wait()
			if cmd.ProcessState == nil {
				return 0, err
			}
			return cmd.ProcessState.Sys().(syscall.WaitStatus), nil
		}, nil
	}
	res, err := Run(context.Background(), cfg, Stdio{})
	if !errors.Is(err, ErrCoveredPathGone) || !strings.Contains(err.Error(), gone) || res.ExitCode != 125 {
		t.Fatalf("got %+v, %v; want ErrCoveredPathGone naming %s", res, err, gone)
	}
	cfg.Starter = nil
	if res, err := Run(context.Background(), cfg, Stdio{}); err != nil || res.ExitCode != 0 {
		t.Errorf("the run after: %+v, %v", res, err)
	}
}
