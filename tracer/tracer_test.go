//go:build linux

package tracer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// trace runs cmd under Run with both sinks and returns the result and the
// events read back from the JSON log.
func trace(t *testing.T, cmd *exec.Cmd, opts Options) (Result, []Event, string) {
	t.Helper()
	needPtrace(t)
	var text, js bytes.Buffer
	opts.Text, opts.JSON = &text, &js
	res, err := Run(cmd, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	evs, err := ReadJSON(&js)
	if err != nil {
		t.Fatalf("ReadJSON: %v", err)
	}
	if int64(len(evs)) != res.Events {
		t.Errorf("Result.Events = %d, JSON has %d events", res.Events, len(evs))
	}
	if n := strings.Count(text.String(), "\n"); n != len(evs) {
		t.Errorf("text log has %d lines, JSON %d events", n, len(evs))
	}
	t.Cleanup(func() {
		if t.Failed() {
			logTail(t, text.String())
		}
	})
	return res, evs, text.String()
}

func logTail(t *testing.T, s string) {
	lines := strings.Split(s, "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	for i, l := range lines {
		if len(l) > 300 {
			lines[i] = l[:300] + "..."
		}
	}
	t.Logf("text log (tail):\n%s", strings.Join(lines, "\n"))
}

var ptraceOnce struct {
	sync.Once
	err error
}

// needPtrace skips the test when this environment forbids ptrace (a
// container without CAP_SYS_PTRACE under Yama scope 2 or 3, or a seccomp
// policy denying it).
func needPtrace(t *testing.T) {
	ptraceOnce.Do(func() { _, ptraceOnce.err = Run(exec.Command("/bin/true"), Options{}) })
	if ptraceOnce.err != nil {
		if errors.Is(ptraceOnce.err, syscall.EPERM) || errors.Is(ptraceOnce.err, syscall.ENOSYS) {
			t.Skipf("ptrace is not permitted here: %v", ptraceOnce.err)
		}
		t.Fatalf("tracing /bin/true: %v", ptraceOnce.err)
	}
}

// closedPort returns a TCP port on 127.0.0.1 with no listener.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func find(evs []Event, f func(*Event) bool) *Event {
	for i := range evs {
		if f(&evs[i]) {
			return &evs[i]
		}
	}
	return nil
}

func pathArg(e *Event, n int) string {
	if a := e.arg(ArgPath, n); a != nil {
		return a.Str
	}
	return ""
}

func needBwrap(t *testing.T) string {
	p, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bwrap not installed: skipping the seccomp/bwrap test")
	}
	// bwrap may be unable to create namespaces (nested container).
	if out, err := exec.Command(p, "--dev-bind", "/", "/", "--", "/bin/true").CombinedOutput(); err != nil {
		t.Skipf("bwrap does not work here: %v: %s", err, out)
	}
	return p
}

// seccompFile returns a file holding the filter program for names.
func seccompFile(t *testing.T, names []string) *os.File {
	prog, err := SeccompFilter(names)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "filter")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(prog); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestTraceHelper(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("input"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := closedPort(t)
	cmd := helperCmd(t, nil, "basic", dir, strconv.Itoa(port))
	res, evs, text := trace(t, cmd, Options{})

	if res.ExitCode != 3 || res.Signal != 0 {
		t.Errorf("result = %+v, want exit 3", res)
	}
	leader := evs[0].Pid
	if evs[0].Kind != KindExec || evs[0].Path == "" {
		t.Errorf("first event = %+v, want the exec of the helper", evs[0])
	}

	open := func(p string) *Event {
		return find(evs, func(e *Event) bool {
			return e.Kind == KindSyscall && (e.Syscall == "openat" || e.Syscall == "open") && strings.HasSuffix(pathArg(e, 0), p)
		})
	}
	if e := open("in.txt"); e == nil {
		t.Error("no openat of in.txt")
	} else {
		if e.Args[0].Str != "AT_FDCWD" || e.Args[1].Str != "in.txt" || e.Args[1].Abs != filepath.Join(dir, "in.txt") {
			t.Errorf("in.txt args = %+v", e.Args)
		}
		if fl := e.Args[2].Str; fl != "O_RDONLY|O_CLOEXEC" {
			t.Errorf("in.txt flags = %q", fl)
		}
		if e.Ret < 0 || e.Errno != "" || e.Created {
			t.Errorf("in.txt result = %d %s created=%v", e.Ret, e.Errno, e.Created)
		}
	}
	if e := open("out.txt"); e == nil {
		t.Error("no openat of out.txt")
	} else {
		if fl := e.Args[2].Str; fl != "O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC" {
			t.Errorf("out.txt flags = %q", fl)
		}
		if len(e.Args) != 4 || e.Args[3].Str != "0640" {
			t.Errorf("out.txt mode = %+v", e.Args)
		}
		if e.Ret < 0 || !e.Created {
			t.Errorf("out.txt: ret %d created %v", e.Ret, e.Created)
		}
	}
	if e := open("missing"); e == nil || e.Errno != "ENOENT" || e.Ret != -1 {
		t.Errorf("open of missing file = %+v, want -1 ENOENT", e)
	}
	if !strings.Contains(text, `openat(AT_FDCWD, "in.txt", O_RDONLY|O_CLOEXEC) = `) {
		t.Error("text log lacks the strace-like openat line")
	}
	if !strings.Contains(text, `/missing", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)`) {
		t.Error("text log lacks the ENOENT line")
	}
	if e := find(evs, func(e *Event) bool { return strings.HasPrefix(e.Syscall, "rename") }); e == nil {
		t.Error("no rename")
	} else if !strings.HasSuffix(pathArg(e, 0), "out.txt") || !strings.HasSuffix(pathArg(e, 1), "renamed.txt") || e.Ret != 0 {
		t.Errorf("rename = %s", e)
	}
	if e := find(evs, func(e *Event) bool { return strings.HasPrefix(e.Syscall, "unlink") }); e == nil {
		t.Error("no unlink")
	} else if !strings.HasSuffix(pathArg(e, 0), "renamed.txt") || e.Ret != 0 {
		t.Errorf("unlink = %s", e)
	}
	if e := find(evs, func(e *Event) bool { return strings.HasPrefix(e.Syscall, "mkdir") }); e == nil {
		t.Error("no mkdir")
	} else if pathArg(e, 0) != "sub" || e.arg(ArgMode, 0).Str != "0750" || !e.Created {
		t.Errorf("mkdir = %s", e)
	}
	if e := find(evs, func(e *Event) bool { return e.Kind == KindExec && e.Pid != leader }); e == nil {
		t.Error("no exec of /bin/true")
	} else if !strings.HasSuffix(e.Path, "/true") || !slices.Equal(e.Argv, []string{"/bin/true"}) {
		t.Errorf("exec = %+v", e)
	}
	if e := find(evs, func(e *Event) bool { return e.Syscall == "execve" && e.Pid != leader && e.Ret == 0 }); e == nil {
		t.Error("no execve syscall")
	} else if pathArg(e, 0) != "/bin/true" || !slices.Equal(e.arg(ArgArgv, 0).List, []string{"/bin/true"}) {
		t.Errorf("execve = %s", e)
	}
	if e := find(evs, func(e *Event) bool { return e.Syscall == "connect" }); e == nil {
		t.Error("no connect")
	} else {
		a := e.arg(ArgSockaddr, 0)
		if a == nil || a.Addr == nil || a.Addr.Family != "AF_INET" || a.Addr.Addr != "127.0.0.1" || a.Addr.Port != port || e.Errno != "ECONNREFUSED" {
			t.Errorf("connect = %s", e)
		}
		want := `{sa_family=AF_INET, sin_port=htons(` + strconv.Itoa(port) + `), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 ECONNREFUSED (Connection refused)`
		if !strings.Contains(text, want) {
			t.Errorf("text log lacks %s", want)
		}
	}
	// Threads: the thread-N files are opened by several distinct tids,
	// which were reported as new threads of the helper.
	tids := map[int]bool{}
	for i := range evs {
		if e := &evs[i]; e.Kind == KindSyscall && strings.Contains(pathArg(e, 0), "/thread-") {
			tids[e.Pid] = true
		}
	}
	if len(tids) < 2 {
		t.Errorf("thread-N files opened by tids %v, want several threads", tids)
	}
	threads := 0
	for i := range evs {
		if evs[i].Kind == KindThread && evs[i].Pid != 0 {
			threads++
		}
	}
	if threads < 2 {
		t.Errorf("%d thread events", threads)
	}
	if e := find(evs, func(e *Event) bool { return e.Kind == KindExit && e.Pid == leader }); e == nil || e.Status != 3 {
		t.Errorf("leader exit event = %+v", e)
	}
	if !strings.Contains(text, "+++ exited with 3 +++") {
		t.Error("text log lacks the exit line")
	}

	s := Summarize(evs)
	check := func(what string, list []string, want string) {
		if !slices.Contains(list, want) {
			t.Errorf("summary %s lacks %s: %q", what, want, list)
		}
	}
	check("read", s.Read, filepath.Join(dir, "in.txt"))
	check("written", s.Written, filepath.Join(dir, "out.txt"))
	check("created", s.Created, filepath.Join(dir, "out.txt"))
	check("created", s.Created, filepath.Join(dir, "sub"))
	check("deleted", s.Deleted, filepath.Join(dir, "renamed.txt"))
	if slices.Contains(s.Read, filepath.Join(dir, "out.txt")) {
		t.Error("out.txt listed as read")
	}
	if !slices.Contains(s.Renamed, Rename{filepath.Join(dir, "out.txt"), filepath.Join(dir, "renamed.txt")}) {
		t.Errorf("summary renamed = %v", s.Renamed)
	}
	if !slices.ContainsFunc(s.Execs, func(x Exec) bool { return slices.Equal(x.Argv, []string{"/bin/true"}) }) {
		t.Errorf("summary execs = %v", s.Execs)
	}
	if !slices.Contains(s.Connects, Connect{Pid: s.Connects[0].Pid, Family: "AF_INET", Address: "127.0.0.1:" + strconv.Itoa(port), Result: "ECONNREFUSED"}) {
		t.Errorf("summary connects = %v", s.Connects)
	}
	if s.Exit == nil || s.Exit.Status != 3 || s.Exit.Pid != leader {
		t.Errorf("summary exit = %+v", s.Exit)
	}
	i := slices.IndexFunc(s.Syscalls, func(c SyscallCount) bool { return c.Name == "openat" })
	if i < 0 || s.Syscalls[i].Errors < 1 || s.Syscalls[i].Errnos["ENOENT"] < 1 {
		t.Errorf("summary openat counts = %+v", s.Syscalls)
	}
	if !slices.IsSortedFunc(s.Syscalls, func(a, b SyscallCount) int { return strings.Compare(a.Name, b.Name) }) || !slices.IsSorted(s.Read) {
		t.Error("summary not sorted")
	}
	// Deterministic and JSON-serializable.
	a, _ := json.Marshal(s)
	b, _ := json.Marshal(Summarize(evs))
	if !bytes.Equal(a, b) {
		t.Error("Summarize is not deterministic")
	}
}

func TestExitStatus(t *testing.T) {
	cases := []struct {
		name   string
		script string
		code   int
		sig    syscall.Signal
		text   string
	}{
		{"exit0", "exit 0", 0, 0, "+++ exited with 0 +++"},
		{"exit7", "exit 7", 7, 0, "+++ exited with 7 +++"},
		{"sigkill", "kill -9 $$", -1, syscall.SIGKILL, "+++ killed by SIGKILL +++"},
		{"sigterm", "kill -TERM $$", -1, syscall.SIGTERM, "+++ killed by SIGTERM +++"},
		{"child-status", "sh -c 'exit 9'; exit $?", 9, 0, "+++ exited with 9 +++"},
		{"orphan", "(sleep 0.2; echo late >/dev/null) & exit 4", 4, 0, "+++ exited with 4 +++"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res, evs, text := trace(t, exec.Command("/bin/sh", "-c", c.script), Options{})
			if res.ExitCode != c.code || res.Signal != c.sig {
				t.Errorf("result = %+v, want code %d signal %v", res, c.code, c.sig)
			}
			if !strings.Contains(text, c.text) {
				t.Errorf("text log lacks %q", c.text)
			}
			if c.sig != 0 {
				e := find(evs, func(e *Event) bool { return e.Kind == KindExit && e.Pid == evs[0].Pid })
				if e == nil || e.Signal != signalName(int(c.sig)) {
					t.Errorf("exit event = %+v", e)
				}
			}
			if c.name == "orphan" {
				// The background job outlives the shell: Run waits for it.
				leaderExit := slices.IndexFunc(evs, func(e Event) bool { return e.Kind == KindExit && e.Pid == evs[0].Pid })
				if leaderExit < 0 || !slices.ContainsFunc(evs[leaderExit+1:], func(e Event) bool { return e.Kind == KindExit }) {
					t.Error("the orphaned background job was not traced to its end")
				}
			}
		})
	}
}

// TestKilledFromOutside: the caller kills the traced command on a timeout;
// Run returns promptly with SIGKILL, also when the command's children
// would outlive it.
func TestKilledFromOutside(t *testing.T) {
	for _, script := range []string{"exec sleep 30", "sleep 30 & sleep 30 & wait"} {
		t.Run(strings.Fields(script)[0], func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			res, _, _ := trace(t, exec.CommandContext(ctx, "/bin/sh", "-c", script), Options{})
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("Run took %v after the kill", d)
			}
			if res.Signal != syscall.SIGKILL || res.ExitCode != -1 {
				t.Errorf("result = %+v, want SIGKILL", res)
			}
		})
	}
}

// TestSignals: signals are delivered to the tracee, handlers run, and
// group-stops keep the tracee stopped until SIGCONT.
func TestSignals(t *testing.T) {
	t.Run("handler", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		cmd := exec.Command("/bin/sh", "-c", `trap 'echo got-usr1' USR1; kill -USR1 $$; echo after`)
		cmd.Stdout = &out
		res, evs, _ := trace(t, cmd, Options{})
		if out.String() != "got-usr1\nafter\n" || res.ExitCode != 0 {
			t.Errorf("output %q, result %+v", out.String(), res)
		}
		if find(evs, func(e *Event) bool { return e.Kind == KindSignal && e.Signal == "SIGUSR1" }) == nil {
			t.Error("no SIGUSR1 event")
		}
	})
	t.Run("group-stop", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		// The stopped child must stay stopped (state T or t) until CONT.
		cmd := exec.Command("/bin/sh", "-c", `sleep 1 & p=$!; kill -STOP $p; sleep 0.3; read -r s < /proc/$p/stat; set -- $s; echo state=$3; kill -CONT $p; wait $p; echo rc=$?`)
		cmd.Stdout = &out
		res, evs, _ := trace(t, cmd, Options{})
		got := out.String()
		if !strings.Contains(got, "state=T") && !strings.Contains(got, "state=t") || !strings.Contains(got, "rc=0") {
			t.Errorf("output %q: the stopped child did not stay stopped", got)
		}
		if res.ExitCode != 0 {
			t.Errorf("result %+v", res)
		}
		for _, sig := range []string{"SIGSTOP", "SIGCONT"} {
			if find(evs, func(e *Event) bool { return e.Kind == KindSignal && e.Signal == sig }) == nil {
				t.Errorf("no %s event", sig)
			}
		}
	})
}

// TestThreadExec: a non-leader thread execs; the kernel moves it to the
// leader's tid.
func TestThreadExec(t *testing.T) {
	res, evs, _ := trace(t, helperCmd(t, nil, "thread-exec"), Options{})
	if res.ExitCode != 5 {
		t.Errorf("result = %+v, want exit 5", res)
	}
	leader := evs[0].Pid
	e := find(evs, func(e *Event) bool { return e.Kind == KindExec && e.Path != evs[0].Path })
	if e == nil || e.Pid != leader || !slices.Equal(e.Argv, []string{"sh", "-c", "exit 5"}) {
		t.Errorf("exec event = %+v, want sh in pid %d", e, leader)
	}
	if x := find(evs, func(e *Event) bool { return e.Syscall == "execve" && e.Ret == 0 }); x == nil || x.Pid != leader {
		t.Errorf("execve event = %+v, want it reported for the leader %d", x, leader)
	}
}

// TestTraceeDies: tracees killed while the tracer reads their memory or
// sits in their syscalls never crash the tracer.
func TestTraceeDies(t *testing.T) {
	for _, peek := range []bool{false, true} {
		t.Run("peek="+strconv.FormatBool(peek), func(t *testing.T) {
			testForcePeek = peek
			defer func() { testForcePeek = false }()
			ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
			defer cancel()
			start := time.Now()
			res, evs, _ := trace(t, helperCmd(t, ctx, "churn"), Options{})
			t.Logf("%d events, %v", len(evs), time.Since(start))
			if res.Signal != syscall.SIGKILL {
				t.Errorf("result = %+v, want SIGKILL", res)
			}
			long := find(evs, func(e *Event) bool { return strings.Contains(e.Syscall, "access") && len(pathArg(e, 0)) == 3001 })
			if long == nil {
				t.Error("no access() of the 3001-byte path decoded")
			}
			unfinished := find(evs, func(e *Event) bool { return e.Unfinished })
			if unfinished == nil {
				t.Error("no unfinished syscall after SIGKILL")
			}
		})
	}
}

func TestMemReader(t *testing.T) {
	var m memReader
	self := os.Getpid()
	s := []byte("hello\x00world")
	got, trunc, err := m.readString(self, uint64(addrOf(s)), 100)
	if err != nil || got != "hello" || trunc {
		t.Errorf("readString = %q %v %v", got, trunc, err)
	}
	got, trunc, err = m.readString(self, uint64(addrOf(s)), 3)
	if err != nil || got != "hel" || !trunc {
		t.Errorf("bounded readString = %q %v %v", got, trunc, err)
	}
	if _, _, err := m.readString(self, 8, 100); err != syscall.EFAULT {
		t.Errorf("unmapped address: err = %v, want EFAULT", err)
	}
	// A process that is gone.
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.readString(cmd.Process.Pid, uint64(addrOf(s)), 100); err != syscall.ESRCH {
		t.Errorf("dead process: err = %v, want ESRCH", err)
	}
	if _, err := m.read(cmd.Process.Pid, uint64(addrOf(s)), 16); err == nil {
		t.Error("read of a dead process succeeded")
	}
	if list, _, err := m.readArgv(cmd.Process.Pid, uint64(addrOf(s)), 8); err == nil || len(list) != 0 {
		t.Errorf("readArgv of a dead process = %q, %v", list, err)
	}
}

// TestPeekFallback: with process_vm_readv unavailable, decoding is the
// same through PTRACE_PEEKDATA.
func TestPeekFallback(t *testing.T) {
	testForcePeek = true
	defer func() { testForcePeek = false }()
	_, evs, _ := trace(t, exec.Command("/bin/sh", "-c", "cat /etc/hostname /nonexistent-for-tracer-test; true"), Options{})
	if e := find(evs, func(e *Event) bool { return pathArg(e, 0) == "/nonexistent-for-tracer-test" }); e == nil || e.Errno != "ENOENT" {
		t.Errorf("open of the missing file = %+v", e)
	}
	if e := find(evs, func(e *Event) bool { return e.Syscall == "execve" && e.Ret == 0 }); e == nil ||
		!slices.Equal(e.arg(ArgArgv, 0).List, []string{"cat", "/etc/hostname", "/nonexistent-for-tracer-test"}) {
		t.Errorf("execve = %+v", e)
	}
}

// TestSeccompBwrap runs the helper as art does: bwrap with the filter for
// openat and execve on fd 3. Only those syscalls appear, process events
// still do, and the exit status survives bwrap.
func TestSeccompBwrap(t *testing.T) {
	bwrap := needBwrap(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "in.txt"), []byte("input"), 0o644)
	names := []string{"openat", "execve"}
	exe, _ := os.Executable()
	cmd := exec.Command(bwrap, "--dev-bind", "/", "/", "--seccomp", "3", "--", exe, dir, strconv.Itoa(closedPort(t)))
	cmd.Env = append(os.Environ(), "TRACER_TEST_HELPER=basic")
	cmd.ExtraFiles = []*os.File{seccompFile(t, names)}
	res, evs, _ := trace(t, cmd, Options{Syscalls: names})
	if res.ExitCode != 3 {
		t.Errorf("result = %+v, want exit 3", res)
	}
	seen := map[string]int{}
	for i := range evs {
		if evs[i].Kind == KindSyscall {
			seen[evs[i].Syscall]++
		}
	}
	for name := range seen {
		if name != "openat" && name != "execve" {
			t.Errorf("syscall %s traced with the openat,execve filter", name)
		}
	}
	if seen["openat"] == 0 || seen["execve"] == 0 {
		t.Errorf("syscalls seen: %v", seen)
	}
	e := find(evs, func(e *Event) bool { return e.Syscall == "openat" && pathArg(e, 0) == "in.txt" })
	if e == nil || e.Ret < 0 || e.arg(ArgPath, 0).Abs != filepath.Join(dir, "in.txt") {
		t.Errorf("openat of in.txt = %+v", e)
	}
	if e := find(evs, func(e *Event) bool { return e.Syscall == "openat" && strings.HasSuffix(pathArg(e, 0), "/missing") }); e == nil || e.Errno != "ENOENT" {
		t.Errorf("openat of missing = %+v", e)
	}
	if e := find(evs, func(e *Event) bool { return e.Syscall == "execve" && pathArg(e, 0) == "/bin/true" }); e == nil || e.Ret != 0 {
		t.Errorf("execve of /bin/true = %+v", e)
	}
	if find(evs, func(e *Event) bool { return e.Kind == KindExec && strings.HasSuffix(e.Path, "/true") }) == nil {
		t.Error("no exec event for /bin/true")
	}
	s := Summarize(evs)
	if len(s.Connects) != 0 || len(s.Renamed) != 0 {
		t.Errorf("summary has untraced syscalls: %+v", s)
	}
}

// TestUntracedCloneRefused: a tracee's clone(CLONE_UNTRACED) would make a
// child the tracer never sees (what it ran and wrote, missing from the
// log); under the filter of a traced run, full or with syscalls named, it
// fails with EPERM, and clone3 with ENOSYS.
func TestUntracedCloneRefused(t *testing.T) {
	bwrap := needBwrap(t)
	exe, _ := os.Executable()
	for _, names := range [][]string{nil, {"openat"}} {
		cmd := exec.Command(bwrap, "--dev-bind", "/", "/", "--seccomp", "3", "--", exe)
		cmd.Env = append(os.Environ(), "TRACER_TEST_HELPER=untraced-clone")
		cmd.ExtraFiles = []*os.File{seccompFile(t, names)}
		var out bytes.Buffer
		cmd.Stdout = &out
		res, _, _ := trace(t, cmd, Options{Syscalls: names})
		want := fmt.Sprintf("clone: %d\nclone3: %d\n", syscall.EPERM, syscall.ENOSYS)
		if res.ExitCode != 0 || out.String() != want {
			t.Errorf("%q: %+v, output %q; want %q", names, res, out.String(), want)
		}
	}
}

// TestBwrapNamespacePid: inside bwrap --unshare-pid, events carry both the
// host pid and the sandbox pid.
func TestBwrapNamespacePid(t *testing.T) {
	bwrap := needBwrap(t)
	cmd := exec.Command(bwrap, "--unshare-pid", "--dev-bind", "/", "/", "--", "/bin/sh", "-c", "cat /etc/hostname >/dev/null; exit 6")
	res, evs, text := trace(t, cmd, Options{Syscalls: []string{"openat"}})
	// Without a filter installed nothing is traced but process events.
	if res.ExitCode != 6 {
		t.Errorf("result %+v, want 6", res)
	}
	e := find(evs, func(e *Event) bool { return e.Kind == KindExec && strings.HasSuffix(e.Path, "/cat") })
	if e == nil || e.NSPid == 0 || e.NSPid == e.Pid || e.NSPid > 10 {
		t.Fatalf("exec of cat = %+v, want a small namespace pid", e)
	}
	want := "[pid " + strconv.Itoa(e.Pid) + "/" + strconv.Itoa(e.NSPid) + "] +++ exec"
	if !strings.Contains(text, want) {
		t.Errorf("text log lacks %q", want)
	}
}

// TestFullTraceBwrap: full tracing (no filter) through bwrap, which forks
// into new namespaces.
func TestFullTraceBwrap(t *testing.T) {
	bwrap := needBwrap(t)
	cmd := exec.Command(bwrap, "--unshare-pid", "--dev-bind", "/", "/", "--", "/bin/sh", "-c", "exec cat /etc/hostname /nonexistent-x")
	res, evs, _ := trace(t, cmd, Options{})
	if res.ExitCode != 1 {
		t.Errorf("result %+v, want 1 (cat of a missing file)", res)
	}
	e := find(evs, func(e *Event) bool { return e.Syscall == "openat" && pathArg(e, 0) == "/nonexistent-x" })
	if e == nil || e.Errno != "ENOENT" || e.NSPid == 0 {
		t.Errorf("openat = %+v", e)
	}
}

func TestRunErrors(t *testing.T) {
	if _, err := Run(exec.Command("/nonexistent/program"), Options{}); err == nil {
		t.Error("Run of a missing program succeeded")
	}
	_, err := Run(exec.Command("/bin/true"), Options{Syscalls: []string{"openatt"}})
	if err == nil || !strings.Contains(err.Error(), "openat") {
		t.Errorf("bad syscall list: err = %v", err)
	}
	// SysProcAttr is kept.
	cmd := exec.Command("/bin/sh", "-c", `[ "$(cut -d' ' -f6 /proc/$$/stat)" = "$$" ]`) // session id == pid
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	res, err := Run(cmd, Options{})
	if err != nil || res.ExitCode != 0 {
		t.Errorf("Setsid lost: %+v %v", res, err)
	}
	// No sinks: events are still counted.
	res, err = Run(exec.Command("/bin/true"), Options{})
	if err != nil || res.Events == 0 {
		t.Errorf("no sinks: %+v %v", res, err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

func TestWriterError(t *testing.T) {
	res, err := Run(exec.Command("/bin/sh", "-c", "exit 2"), Options{Text: failWriter{}})
	if err == nil || res.ExitCode != 2 {
		t.Errorf("res %+v err %v: want exit 2 and a write error", res, err)
	}
}

// TestArgvBounds: argv arrays are read up to maxArgs entries and maxArgLen
// bytes per entry, and say when they were cut.
func TestArgvBounds(t *testing.T) {
	long := strings.Repeat("y", maxArgLen+100)
	script := `i=0; set --; while [ $i -lt 300 ]; do set -- "$@" "a$i"; i=$((i+1)); done; /bin/true "$@"; exec /bin/true "$LONG" short`
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = append(os.Environ(), "LONG="+long)
	_, evs, text := trace(t, cmd, Options{})
	many := find(evs, func(e *Event) bool { return e.Syscall == "execve" && e.Ret == 0 && len(e.arg(ArgArgv, 0).List) > 100 })
	if many == nil {
		t.Fatal("no execve with many arguments")
	}
	if a := many.arg(ArgArgv, 0); len(a.List) != maxArgs || !a.Trunc || a.List[1] != "a0" || a.List[maxArgs-1] != "a"+strconv.Itoa(maxArgs-2) {
		t.Errorf("argv: %d entries, trunc %v, %q...", len(a.List), a.Trunc, a.List[:3])
	}
	e := find(evs, func(e *Event) bool {
		return e.Syscall == "execve" && e.Ret == 0 && len(e.arg(ArgArgv, 0).List) == 3
	})
	if e == nil {
		t.Fatal("no execve of the long argument")
	}
	if a := e.arg(ArgArgv, 0); a.List[1] != long[:maxArgLen] || a.List[2] != "short" || !a.Trunc {
		t.Errorf("long argv: lens %d %q trunc %v", len(a.List[1]), a.List[2], a.Trunc)
	}
	if !strings.Contains(text, `, ...], `) {
		t.Error("text log does not mark the cut argv")
	}
}

// BeforeStart runs on the thread that starts the command, so what it sets
// there passes to the command; its error starts nothing.
func TestBeforeStart(t *testing.T) {
	var out bytes.Buffer
	cmd := exec.Command("/bin/grep", "^NoNewPrivs:", "/proc/self/status")
	cmd.Stdout = &out
	res, err := Run(cmd, Options{BeforeStart: func() error {
		return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) // this thread only
	}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if got := strings.Fields(out.String()); len(got) != 2 || got[1] != "1" {
		t.Errorf("the command did not inherit what BeforeStart set: %q", out.String())
	}
	ran := filepath.Join(t.TempDir(), "ran")
	_, err = Run(exec.Command("/bin/touch", ran), Options{BeforeStart: func() error { return errors.New("refused") }})
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("BeforeStart's error: %v", err)
	}
	if _, serr := os.Stat(ran); serr == nil {
		t.Error("the command ran although BeforeStart failed")
	}
}

// TestSeccompSkippedCallNotDone: a call a seccomp filter of the program's
// own refuses with SECCOMP_RET_KILL (or _TRAP) is skipped, its registers
// put back, and its "result" read as its own number: a mkdirat that never
// ran was logged as returning 258 and summarized as created. It is logged
// as never returning.
func TestSeccompSkippedCallNotDone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never")
	res, evs, _ := trace(t, helperCmd(t, nil, "seccomp-kill", dir), Options{})
	if res.Signal != syscall.SIGSYS {
		t.Fatalf("result %+v, want killed by SIGSYS", res)
	}
	e := find(evs, func(e *Event) bool { return e.Kind == KindSyscall && e.Syscall == "mkdirat" })
	if e == nil || !e.Unfinished || e.Created || e.Ret != 0 {
		t.Errorf("mkdirat event %+v, want unfinished", e)
	}
	for _, p := range Summarize(evs).Created {
		if p == dir {
			t.Errorf("the summary lists %s as created", dir)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("%s was made", dir)
	}
}
