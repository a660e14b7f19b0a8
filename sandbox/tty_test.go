package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// testTerm is a pty the test owns and hands to Run as the caller's terminal.
type testTerm struct {
	m, s *os.File
	mu   sync.Mutex
	buf  bytes.Buffer
}

func newTestTerm(t *testing.T) *testTerm {
	t.Helper()
	m, s, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	if err := pty.Setsize(m, &pty.Winsize{Rows: 33, Cols: 101}); err != nil {
		t.Fatal(err)
	}
	tt := &testTerm{m: m, s: s}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := m.Read(b)
			tt.mu.Lock()
			tt.buf.Write(b[:n])
			tt.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { s.Close(); m.Close() })
	return tt
}

// drain waits until everything written to the terminal has been read.
func (tt *testTerm) drain() {
	quiet := 0
	for i := 0; i < 200 && quiet < 3; i++ {
		n, err := unix.IoctlGetInt(int(tt.m.Fd()), unix.TIOCINQ)
		if err != nil {
			return
		}
		if n == 0 {
			quiet++
		} else {
			quiet = 0
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (tt *testTerm) output() string {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.buf.String()
}

func (tt *testTerm) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(tt.output(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %q; output so far: %q", s, tt.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (tt *testTerm) termios(t *testing.T) *unix.Termios {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(tt.s.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return tio
}

// runInteractive runs cfg interactively on tt; input is typed by typer.
func runInteractive(t *testing.T, tt *testTerm, cfg Config, typer func()) (Result, error) {
	t.Helper()
	cfg.Interactive = true
	before := tt.termios(t)
	type ret struct {
		r   Result
		err error
	}
	ch := make(chan ret, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		r, err := Run(ctx, cfg, Stdio{Stdin: tt.s, Stdout: tt.s})
		ch <- ret{r, err}
	}()
	if typer != nil {
		typer()
	}
	r := <-ch
	tt.drain()
	if after := tt.termios(t); *after != *before {
		t.Errorf("terminal settings not restored:\nbefore %+v\nafter  %+v", before, after)
	}
	return r.r, r.err
}

func TestInteractivePty(t *testing.T) {
	requireBwrap(t)
	requireTool(t, "/bin/bash")
	tt := newTestTerm(t)
	cfg := baseConfig(t, "bash", "-c", `stty size; tty; test -t 0 && test -t 1 && test -t 2 && echo ALL-TTY; echo "TERM=$TERM"; ps -o pid=,pgid=,sid=,tpgid=,comm= -p $$; exit 4`)
	cfg.Term = "xterm-256color"
	res, err := runInteractive(t, tt, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := tt.output()
	t.Logf("output: %q", out)
	if res.ExitCode != 4 {
		t.Errorf("exit code %d, want 4", res.ExitCode)
	}
	lines := strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n")
	if len(lines) < 5 || lines[0] != "33 101" {
		t.Fatalf("stty size: %q", out)
	}
	if !strings.HasPrefix(lines[1], "/dev/") || strings.Contains(out, "not a tty") {
		t.Errorf("tty: %q", lines[1])
	}
	if lines[2] != "ALL-TTY" || lines[3] != "TERM=xterm-256color" {
		t.Errorf("output %q", out)
	}
	// bash is session leader, process-group leader and in the foreground.
	f := strings.Fields(lines[4])
	if len(f) < 5 || f[0] != f[1] || f[0] != f[2] || f[0] != f[3] {
		t.Errorf("bash is not a foreground session leader: %q", lines[4])
	}
}

func TestInteractiveJobControl(t *testing.T) {
	requireBwrap(t)
	requireTool(t, "/bin/bash")
	tt := newTestTerm(t)
	cfg := baseConfig(t, "bash", "--norc", "--noprofile", "-i")
	cfg.Env = []string{"PS1=PROMPT$ "}
	res, err := runInteractive(t, tt, cfg, func() {
		tt.waitFor(t, "PROMPT$ ")
		tt.m.WriteString("sleep 987040 &\n")
		tt.waitFor(t, "[1]")
		tt.m.WriteString("jobs\n")
		tt.waitFor(t, "Running")
		tt.m.WriteString("kill %1; wait; echo JOB-DONE\n")
		tt.waitFor(t, "JOB-DONE\r\n")
		tt.m.WriteString("exit 5\n")
	})
	if err != nil {
		t.Fatal(err)
	}
	out := tt.output()
	if res.ExitCode != 5 {
		t.Errorf("exit code %d, want 5; output %q", res.ExitCode, out)
	}
	for _, bad := range []string{"no job control", "cannot set terminal process group", "Inappropriate ioctl"} {
		if strings.Contains(out, bad) {
			t.Errorf("job control broken: %q", out)
		}
	}
}

func TestInteractiveCtrlCReachesAgent(t *testing.T) {
	requireBwrap(t)
	requireTool(t, "/usr/bin/python3")
	tt := newTestTerm(t)
	script := "import time\ntry:\n    print('READY', flush=True)\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    print('KBI', flush=True)\n    time.sleep(0.5)\n    print('STILL-ALIVE', flush=True)\n"
	res, err := runInteractive(t, tt, baseConfig(t, "python3", "-c", script), func() {
		tt.waitFor(t, "READY")
		tt.m.Write([]byte{3}) // Ctrl-C, typed on the caller's terminal
	})
	if err != nil {
		t.Fatal(err)
	}
	out := tt.output()
	if res.ExitCode != 0 || res.Interrupted != 0 || !strings.Contains(out, "KBI") || !strings.Contains(out, "STILL-ALIVE") {
		t.Errorf("result %+v output %q", res, out)
	}
}

func TestInteractiveTIOCSTIStaysInside(t *testing.T) {
	requireBwrap(t)
	requireTool(t, "/usr/bin/python3")
	tt := newTestTerm(t)
	script := `import fcntl, termios
for c in b"echo INJECTED\n":
    fcntl.ioctl(0, termios.TIOCSTI, bytes([c]))
with open("/dev/tty", "rb", buffering=0) as t:
    fcntl.ioctl(t, termios.TIOCSTI, b"Z")
print("READ", input())`
	res, err := runInteractive(t, tt, baseConfig(t, "python3", "-c", script), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := tt.output()
	// The injected bytes were read back by the agent from its own pty.
	if res.ExitCode != 0 || !strings.Contains(out, "READ echo INJECTED") {
		t.Errorf("result %+v output %q", res, out)
	}
	// Nothing is waiting in the caller's terminal's input queue.
	if n, err := unix.IoctlGetInt(int(tt.s.Fd()), unix.TIOCINQ); err != nil || n != 0 {
		t.Errorf("caller's terminal has %d pending input bytes (%v)", n, err)
	}
}

// startHelper runs Run in a child process with tt as its controlling
// terminal and stdio, the way art runs in a user's terminal.
func startHelper(t *testing.T, tt *testTerm, cfg Config) (*exec.Cmd, string) {
	t.Helper()
	cmd, resFile := helperCmd(t, cfg)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tt.s, tt.s, tt.s
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, resFile
}

func TestTIOCSTINonInteractive(t *testing.T) {
	requireBwrap(t)
	requireTool(t, "/usr/bin/python3")
	inject := `import fcntl, termios
fcntl.ioctl(0, termios.TIOCSTI, b"x")
print("INJECT-OK")`

	// Control: without the sandbox, TIOCSTI on a controlling terminal works.
	tt := newTestTerm(t)
	ctl := exec.Command("python3", "-c", inject)
	ctl.Stdin, ctl.Stdout, ctl.Stderr = tt.s, tt.s, tt.s
	ctl.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := ctl.Run(); err != nil {
		t.Skipf("TIOCSTI is disabled on this host (%v); nothing to test", err)
	}

	// In the sandbox, with art's controlling terminal as stdin, it fails.
	tt = newTestTerm(t)
	cmd, resFile := startHelper(t, tt, baseConfig(t, "python3", "-c", inject))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v; output %q", err, tt.output())
	}
	r := readHelperResult(t, resFile)
	tt.drain()
	out := tt.output()
	if r.Err != "" || r.ExitCode == 0 || strings.Contains(out, "INJECT-OK") {
		t.Errorf("TIOCSTI into the caller's terminal was not refused: %+v output %q", r, out)
	}
	t.Logf("sandbox output: %q", out)
	if !strings.Contains(out, "Operation not permitted") && !strings.Contains(out, "Input/output error") {
		t.Errorf("unexpected failure: %q", out)
	}
	if n, err := unix.IoctlGetInt(int(tt.s.Fd()), unix.TIOCINQ); err != nil || n != 0 {
		t.Errorf("caller's terminal has %d pending input bytes (%v)", n, err)
	}
}

// TestBackgroundRunKeepsTerminalInput: art run -i=false started in the
// background of its terminal (a shell's "art run ... &") gives the agent
// no terminal input. The agent's own session is out of job control's
// reach, so where a background job reading the terminal is stopped, the
// agent read the line the user typed at the shell.
func TestBackgroundRunKeepsTerminalInput(t *testing.T) {
	requireBwrap(t)
	tt := newTestTerm(t)
	cfg := baseConfig(t, "sh", "-c", `echo ready; sleep 1; read x; echo "agent read [$x]"`)
	cmd, resFile := startInJobShell(t, tt, cfg)
	tt.waitFor(t, "ready")
	if _, err := tt.m.Write([]byte("typed-at-the-shell\n")); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("shell: %v; output %q", err, tt.output())
	}
	if r := readHelperResult(t, resFile); r.Err != "" || r.ExitCode != 0 {
		t.Fatalf("sandbox: %+v output %q", r, tt.output())
	}
	tt.waitFor(t, "agent read [")
	if out := tt.output(); !strings.Contains(out, "agent read []") {
		t.Errorf("the agent of a background run read the terminal: %q", out)
	}
}

// TestSignalsKillSandbox sends art (the helper) SIGINT, SIGTERM and SIGHUP
// while it runs a sandbox with a background child.
func TestSignalsKillSandbox(t *testing.T) {
	requireBwrap(t)
	for _, tc := range []struct {
		sig         syscall.Signal
		interactive bool
	}{
		{syscall.SIGINT, false},
		{syscall.SIGTERM, false},
		{syscall.SIGHUP, false},
		{syscall.SIGTERM, true},
	} {
		name := tc.sig.String()
		if tc.interactive {
			name += " interactive"
		}
		t.Run(name, func(t *testing.T) {
			tt := newTestTerm(t)
			before := tt.termios(t)
			marker := marked(98706*10 + int(tc.sig)%10)
			cfg := baseConfig(t, "sh", "-c", "sleep "+marker+" & echo READY; wait")
			cfg.Interactive = tc.interactive
			cmd, resFile := startHelper(t, tt, cfg)
			tt.waitFor(t, "READY")
			begin := time.Now()
			cmd.Process.Signal(tc.sig)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("helper: %v; output %q", err, tt.output())
			}
			if d := time.Since(begin); d > 10*time.Second {
				t.Errorf("Run took %v to return after %v", d, tc.sig)
			}
			r := readHelperResult(t, resFile)
			if r.Err != "" || r.Interrupted != tc.sig || r.ExitCode != 128+int(tc.sig) {
				t.Errorf("result %+v", r)
			}
			if pids := processesWith("sleep " + marker); len(pids) > 0 {
				t.Errorf("sandbox processes survived: %v", pids)
			}
			if after := tt.termios(t); *after != *before {
				t.Errorf("terminal settings not restored")
			}
		})
	}
}

func TestInteractiveWithoutTerminal(t *testing.T) {
	requireBwrap(t)
	// Interactive mode also works when the caller's stdio are not terminals.
	var out bytes.Buffer
	cfg := baseConfig(t, "sh", "-c", `read line; echo "got $line"; test -t 0 && echo TTY`)
	cfg.Interactive = true
	res, err := Run(context.Background(), cfg, Stdio{Stdin: strings.NewReader("hello\n"), Stdout: &out})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(out.String(), "\r", "")))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if !strings.Contains(out.String(), "got hello") || !strings.Contains(out.String(), "TTY") {
		t.Errorf("output %q", lines)
	}
}

func TestInteractiveWindowResize(t *testing.T) {
	requireBwrap(t)
	tt := newTestTerm(t)
	cfg := baseConfig(t, "sh", "-c", `trap 'stty size; exit 0' WINCH; stty size; echo READY; i=0; while [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done; exit 1`)
	cfg.Interactive = true
	cmd, resFile := startHelper(t, tt, cfg)
	tt.waitFor(t, "READY")
	// Resizing the caller's terminal sends art SIGWINCH; art resizes the pty.
	if err := pty.Setsize(tt.m, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	r := readHelperResult(t, resFile)
	tt.drain()
	out := tt.output()
	if r.Err != "" || r.ExitCode != 0 || !strings.Contains(out, "33 101") || !strings.Contains(out, "40 120") {
		t.Errorf("result %+v output %q", r, out)
	}
}

// TestInteractiveExitStatus checks that the setsid step of interactive runs
// keeps exit statuses and argv exactly as in non-interactive runs.
func TestInteractiveExitStatus(t *testing.T) {
	requireBwrap(t)
	home := newHome(t)
	tests := []struct {
		argv []string
		code int
		out  string
	}{
		{[]string{"sh", "-c", "exit 3"}, 3, ""},
		{[]string{"sh", "-c", "kill -KILL $$"}, 137, ""},
		{[]string{"art-no-such-command"}, 127, ""},
		{[]string{"-n"}, 127, ""},
		{[]string{"/etc/passwd"}, 126, ""},
		{[]string{"printf", "[%s]", "a b", "-c", "--", "x\ny"}, 0, "[a b][-c][--][x\r\ny]"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.argv, " "), func(t *testing.T) {
			var out bytes.Buffer
			res, err := Run(context.Background(), Config{Home: home, Workspace: "ws", Argv: tc.argv, Interactive: true}, Stdio{Stdout: &out})
			if err != nil || res.ExitCode != tc.code {
				t.Errorf("exit %d err %v, want %d; output %q", res.ExitCode, err, tc.code, out.String())
			}
			if tc.out != "" && out.String() != tc.out {
				t.Errorf("output %q, want %q", out.String(), tc.out)
			}
		})
	}
}

// Non-interactive mode hands art's terminal to the agent as it is; the
// settings the agent changes (echo off, raw mode) are restored when the
// sandbox is gone, as they were before it.
func TestNonInteractiveRestoresTerminalSettings(t *testing.T) {
	requireBwrap(t)
	tt := newTestTerm(t)
	before, err := unix.IoctlGetTermios(int(tt.s.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if before.Lflag&unix.ECHO == 0 {
		t.Fatal("test terminal starts without echo")
	}
	wsBefore, err := unix.IoctlGetWinsize(int(tt.s.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		t.Fatal(err)
	}
	ldBefore, err := unix.IoctlGetInt(int(tt.s.Fd()), unix.TIOCGETD)
	if err != nil {
		t.Fatal(err)
	}
	flBefore, err := unix.FcntlInt(tt.s.Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	// TIOCSETD to N_NULL (27): a terminal that discards all input and
	// output. O_NONBLOCK and O_APPEND on the file description the
	// caller shares: the user's shell then failed its next read.
	script := `stty -echo raw rows 3 cols 7; echo changed; python3 -c 'import fcntl, struct; fcntl.ioctl(1, 0x5423, struct.pack("i", 27))' || echo no-null-ldisc >&2
python3 -c 'import fcntl, os; fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK | os.O_APPEND)'`
	cmd, resFile := startHelper(t, tt, baseConfig(t, "sh", "-c", script))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v; output %q", err, tt.output())
	}
	if r := readHelperResult(t, resFile); r.Err != "" || r.ExitCode != 0 {
		t.Fatalf("sandbox: %+v output %q", r, tt.output())
	}
	after, err := unix.IoctlGetTermios(int(tt.s.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if *after != *before {
		t.Errorf("terminal settings changed by the agent outlive the sandbox: lflag %#x, was %#x", after.Lflag, before.Lflag)
	}
	if ws, err := unix.IoctlGetWinsize(int(tt.s.Fd()), unix.TIOCGWINSZ); err != nil || *ws != *wsBefore {
		t.Errorf("window size after the sandbox %+v, was %+v (%v)", ws, wsBefore, err)
	}
	if ld, err := unix.IoctlGetInt(int(tt.s.Fd()), unix.TIOCGETD); err != nil || ld != ldBefore {
		t.Errorf("line discipline after the sandbox %d, was %d (%v)", ld, ldBefore, err)
	}
	if fl, err := unix.FcntlInt(tt.s.Fd(), unix.F_GETFL, 0); err != nil || fl != flBefore {
		t.Errorf("file status flags after the sandbox %#o, were %#o (%v)", fl, flBefore, err)
	}
}

// TestInteractiveOutputClosed: when nobody reads art's output any more
// (art run | head, in a terminal, so with a pty), the agent's terminal is
// hung up: it gets SIGHUP and EIO and the session ends, instead of the
// agent blocking on a full pty nobody drains, and art waiting forever.
func TestInteractiveOutputClosed(t *testing.T) {
	requireBwrap(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	go func() { // head -1: one read, then gone
		buf := make([]byte, 64)
		r.Read(buf)
		r.Close()
	}()
	cfg := baseConfig(t, "sh", "-c", "yes")
	cfg.Interactive = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	begin := time.Now()
	res, err := Run(ctx, cfg, Stdio{Stdin: strings.NewReader(""), Stdout: w})
	if err != nil || ctx.Err() != nil {
		t.Fatalf("Run: %+v, %v (context: %v)", res, err, ctx.Err())
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	if res.ExitCode == 0 {
		t.Errorf("the agent writing to a hung-up terminal exited 0: %+v", res)
	}
}

// The end of a piped stdin reaches an interactive command as the pty's EOF
// once it has read what came before, and again while it runs: an EOF
// written at once reached bash before readline took the terminal out of
// canonical mode, became a NUL, and the session never ended; one after a
// partial line only sent the line.
func TestInteractivePipedStdinEnds(t *testing.T) {
	requireBwrap(t)
	cases := []struct {
		name, input string
		argv        []string
		want        int
	}{
		{"shell", "echo one\n", []string{"bash", "--norc"}, 0},
		{"shell running a command at the end", "echo one\nsleep 1; echo two\n", []string{"bash", "--norc"}, 0},
		{"shell exit status", "exit 3\n", []string{"bash", "--norc"}, 3},
		{"partial last line", "a\nb", []string{"cat"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			go func() { w.WriteString(c.input); w.Close() }()
			defer r.Close()
			cfg := baseConfig(t, c.argv...)
			cfg.Interactive = true
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out bytes.Buffer
			res, err := Run(ctx, cfg, Stdio{Stdin: r, Stdout: &out})
			if err != nil || res.TimedOut || res.ExitCode != c.want {
				t.Fatalf("want exit %d, got %+v %v\noutput %q", c.want, res, err, out.String())
			}
		})
	}
}

// startInJobShell starts art (the helper) with cfg as a background job of
// a job-control shell whose terminal is tt, as "art run ... &" typed at a
// shell; the shell prints the job's pid ("PID=123") and waits for it.
func startInJobShell(t *testing.T, tt *testTerm, cfg Config) (*exec.Cmd, string) {
	t.Helper()
	helper, resFile := helperCmd(t, cfg)
	cmd := exec.Command("/bin/sh", "-c", `set -m; "$@" & echo "PID=$!"; wait $!`, "sh", helper.Path)
	cmd.Args = append(cmd.Args, helper.Args[1:]...)
	cmd.Env = helper.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tt.s, tt.s, tt.s
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, resFile
}

// TestStopDoesNotLeaveTheAgentRunning sends art (the helper) SIGTSTP, as
// Ctrl-Z on the terminal of a non-interactive run does. Art alone was
// stopped: the sandbox, in a session of its own, ran on, reading what the
// user typed at the shell, past --timeout. Art now keeps running and says
// why.
func TestStopDoesNotLeaveTheAgentRunning(t *testing.T) {
	requireBwrap(t)
	tt := newTestTerm(t)
	// Art as a job of its own: a process group whose stop the kernel
	// carries out (not orphaned).
	cmd, resFile := startInJobShell(t, tt, baseConfig(t, "sh", "-c", "echo READY; sleep 1; echo DONE"))
	tt.waitFor(t, "READY")
	var pid int
	if _, err := fmt.Sscanf(tt.output()[strings.Index(tt.output(), "PID="):], "PID=%d", &pid); err != nil {
		t.Fatalf("no pid in %q: %v", tt.output(), err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) }) // never left stopped
	syscall.Kill(pid, syscall.SIGTSTP)
	tt.waitFor(t, "cannot be stopped (Ctrl-Z)")
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) STATE ...
	if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) == 0 || f[0] == "T" {
		t.Errorf("art stopped: %q", stat)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("shell: %v; output %q", err, tt.output())
	}
	if r := readHelperResult(t, resFile); r.Err != "" || r.ExitCode != 0 {
		t.Fatalf("sandbox: %+v output %q", r, tt.output())
	}
	tt.waitFor(t, "DONE")
}

// Input typed ahead of an agent that never reads it does not hold the end
// of the session up: the stdin pump, blocked writing to the agent's full
// pty, was not woken by the agent's side closing, and art waited a second
// for it twice before it restored the terminal and returned.
func TestInteractiveUnreadInputDoesNotDelayEnd(t *testing.T) {
	requireBwrap(t)
	tt := newTestTerm(t)
	cfg := baseConfig(t, "sh", "-c", "sleep 1")
	typed := make(chan struct{})
	res, err := runInteractive(t, tt, cfg, func() {
		go func() {
			defer close(typed)
			line := append(bytes.Repeat([]byte("x"), 99), '\n')
			for i := 0; i < 2000; i++ { // 200 KB: more than both ptys' queues hold
				if _, err := tt.m.Write(line); err != nil {
					return
				}
			}
		}()
	})
	returned := time.Now()
	// The rest of the typing stays in the test's own terminal: flush it
	// so that the writer returns.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		_ = unix.IoctlSetInt(int(tt.s.Fd()), unix.TCFLSH, unix.TCIFLUSH)
		select {
		case <-typed:
			end = time.Time{}
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	if d := returned.Sub(res.End); d > time.Second {
		t.Errorf("Run returned %v after the sandbox ended", d)
	}
}

// Continued after a stop (kill -STOP, then fg), an interactive run puts
// its terminal back in raw mode: the shell had restored its own modes, and
// art went on with a cooked terminal, every key echoed twice and Ctrl-C
// ending the session instead of reaching the agent. A SIGWINCH does too:
// the two share a channel of one, where a SIGCONT that came while a
// SIGWINCH waited was dropped.
func TestInteractiveRawAgainAfterStop(t *testing.T) {
	requireBwrap(t)
	for _, sig := range []syscall.Signal{syscall.SIGCONT, syscall.SIGWINCH} {
		t.Run(sig.String(), func(t *testing.T) {
			tt := newTestTerm(t)
			cooked := *tt.termios(t)
			cfg := baseConfig(t, "sh", "-c", "echo READY; sleep 3")
			var raw, after unix.Termios
			_, err := runInteractive(t, tt, cfg, func() {
				tt.waitFor(t, "READY")
				raw = *tt.termios(t)
				// What the shell does when art stops, then fg's SIGCONT.
				if err := unix.IoctlSetTermios(int(tt.s.Fd()), unix.TCSETS, &cooked); err != nil {
					t.Error(err)
				}
				syscall.Kill(os.Getpid(), sig)
				time.Sleep(300 * time.Millisecond)
				after = *tt.termios(t)
			})
			if err != nil {
				t.Fatal(err)
			}
			if raw.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG) != 0 {
				t.Fatalf("not raw while the session runs: lflag %#o", raw.Lflag)
			}
			if after != raw {
				t.Errorf("after %v: lflag %#o iflag %#o, want raw as before the stop (lflag %#o iflag %#o)", sig, after.Lflag, after.Iflag, raw.Lflag, raw.Iflag)
			}
		})
	}
}
