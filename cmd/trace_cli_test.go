package cmd

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artproject/art/tracer"
)

// agentScript does known syscalls: open for read and for write, rename,
// unlink, exec of a child, a connect to a closed port, a multi-threaded
// program (python3's threads), then exits 3.
const agentScript = `
cat input.txt > /dev/null
echo out > written.txt
mv written.txt renamed.txt
rm gone.txt
/bin/true
python3 - <<'EOF'
import socket, threading
def opener():
    open("input.txt").read()
ts = [threading.Thread(target=opener) for _ in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
s = socket.socket()
try:
    s.connect(("127.0.0.1", PORT))
except OSError:
    pass
EOF
exit 3
`

// closedPort returns a local TCP port nobody listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func traceEvents(t *testing.T, r *testRepo, args ...string) []tracer.Event {
	t.Helper()
	res := r.mustArt(append([]string{"trace", "--json"}, args...)...)
	events, err := tracer.ReadJSON(strings.NewReader(res.stdout))
	if err != nil {
		t.Fatalf("art trace --json: %v", err)
	}
	return events
}

func TestRunTraceRecordsSyscalls(t *testing.T) {
	r := newRepo(t, map[string]string{"input.txt": "in\n", "gone.txt": "bye\n"})
	port := closedPort(t)
	script := strings.ReplaceAll(agentScript, "PORT", strconv.Itoa(port))
	log := filepath.Join(t.TempDir(), "trace.log")
	res := r.run("--trace", "--trace-log", log, "--", "sh", "-c", script)
	if res.code != 3 {
		t.Fatalf("traced exit status: %s", res)
	}
	// The text log went to --trace-log, never into the command's output.
	text := readFile(t, log)
	checkContains(t, "text log", text, `openat(AT_FDCWD, "input.txt", O_RDONLY`, `"written.txt", O_WRONLY|O_CREAT|O_TRUNC`, "rename", "unlink", "/bin/true", "ECONNREFUSED", "+++ exited with 3 +++")
	checkLacks(t, "stdout", res.stdout, "openat", "execve")

	events := traceEvents(t, r)
	sum := tracer.Summarize(events)
	has := func(list []string, suffix string) bool {
		for _, p := range list {
			if strings.HasSuffix(p, suffix) {
				return true
			}
		}
		return false
	}
	if !has(sum.Read, "/ws/input.txt") && !has(sum.Read, "input.txt") {
		t.Errorf("input.txt not among files read: %v", sum.Read)
	}
	if !has(sum.Written, "written.txt") {
		t.Errorf("written.txt not among files written: %v", sum.Written)
	}
	if !has(sum.Deleted, "gone.txt") {
		t.Errorf("gone.txt not among deletions: %v", sum.Deleted)
	}
	renamed := false
	for _, rn := range sum.Renamed {
		renamed = renamed || strings.HasSuffix(rn.From, "written.txt") && strings.HasSuffix(rn.To, "renamed.txt")
	}
	if !renamed {
		t.Errorf("rename not summarised: %v", sum.Renamed)
	}
	execTrue, execPython := false, false
	for _, e := range sum.Execs {
		execTrue = execTrue || strings.HasSuffix(e.Path, "/true")
		execPython = execPython || strings.Contains(e.Path, "python3")
	}
	if !execTrue || !execPython {
		t.Errorf("execs: %+v", sum.Execs)
	}
	refused := false
	for _, c := range sum.Connects {
		refused = refused || c.Address == "127.0.0.1:"+strconv.Itoa(port) && c.Result == "ECONNREFUSED"
	}
	if !refused {
		t.Errorf("connect to the closed port not summarised: %+v", sum.Connects)
	}
	// Threads: the python opener threads appear as their own tasks.
	threads := 0
	for _, e := range events {
		if e.Kind == tracer.KindThread {
			threads++
		}
	}
	if threads < 4 {
		t.Errorf("%d thread events, want >= 4", threads)
	}
	// The same summary through the CLI, as JSON.
	var cli tracer.Summary
	if err := json.Unmarshal([]byte(r.mustArt("show", "--trace-summary", "--json").stdout), &cli); err != nil {
		t.Fatal(err)
	}
	if len(cli.Execs) != len(sum.Execs) || len(cli.Deleted) != len(sum.Deleted) {
		t.Errorf("show --trace-summary differs from the log's summary")
	}
	checkContains(t, "show --trace-summary", r.mustArt("show", "--trace-summary").stdout, "files read", "executed", "network connects", "ECONNREFUSED")
	// --syscalls and --pid filter the printed log.
	for _, e := range traceEvents(t, r, "--syscalls", "execve") {
		if e.Kind == tracer.KindSyscall && e.Syscall != "execve" {
			t.Fatalf("--syscalls execve printed %s", e.Syscall)
		}
	}
}

func TestRunTraceFilter(t *testing.T) {
	r := newRepo(t, map[string]string{"input.txt": "in\n"})
	res := r.run("--trace-syscalls", "openat,execve", "--trace-log", filepath.Join(t.TempDir(), "t.log"),
		"--", "sh", "-c", "cat input.txt >/dev/null; mkdir d; echo x > d/f; exit 0")
	if res.code != 0 {
		t.Fatalf("%s", res)
	}
	seen := map[string]bool{}
	for _, e := range traceEvents(t, r) {
		if e.Kind == tracer.KindSyscall {
			seen[e.Syscall] = true
		}
	}
	if !seen["openat"] || !seen["execve"] {
		t.Errorf("filtered trace misses listed syscalls: %v", seen)
	}
	for name := range seen {
		if name != "openat" && name != "execve" {
			t.Errorf("the filter let %s through", name)
		}
	}
}

func TestRunTraceExitStatus(t *testing.T) {
	r := newRepo(t, map[string]string{"f": "x"})
	logDir := t.TempDir()
	for _, c := range []struct {
		name string
		cmd  string
		code int
	}{
		{"exit 3", "exit 3", 3},
		{"SIGKILL", "kill -9 $$", 137},
		{"ok", "true", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			plain := r.run("--", "sh", "-c", c.cmd)
			traced := r.run("--trace", "--trace-log", filepath.Join(logDir, c.name+".log"), "--", "sh", "-c", c.cmd)
			if plain.code != c.code || traced.code != c.code {
				t.Fatalf("exit status untraced %d, traced %d, want %d", plain.code, traced.code, c.code)
			}
		})
	}
}

// Traced and untraced sessions behave the same to the agent: same output,
// same files.
func TestRunTraceSameBehaviour(t *testing.T) {
	r := newRepo(t, map[string]string{"f": "x"})
	script := "ls -la /home/agent/WS | wc -l; echo made > new.txt; cat f; id -u"
	plain := r.run("-b", "plain", "--", "sh", "-c", script)
	traced := r.run("-b", "traced", "--trace", "--trace-log", filepath.Join(t.TempDir(), "t.log"), "--", "sh", "-c", script)
	if plain.stdout != traced.stdout || plain.code != traced.code {
		t.Fatalf("different behaviour:\nplain: %s\ntraced: %s", plain, traced)
	}
	if d := r.nameStatus("plain", "traced"); len(d) != 0 {
		t.Errorf("the traced session changed different files: %v", d)
	}
}

func TestRunTraceBadInput(t *testing.T) {
	r := newRepo(t, map[string]string{"f": "x"})
	before := r.commitCount()
	res := r.run("--trace-syscalls", "openat,notasyscall", "--", "true")
	if res.code != 125 || !strings.Contains(res.stderr, "notasyscall") {
		t.Errorf("unknown syscall: %s", res)
	}
	res = r.run("--trace-syscalls", "opnat", "--", "true")
	if res.code != 125 || !strings.Contains(res.stderr, "openat") {
		t.Errorf("no close name suggested: %s", res)
	}
	res = r.run("--trace-log", "/nonexistent-dir/x.log", "--", "true")
	if res.code != 125 || !strings.Contains(res.stderr, "does not exist") {
		t.Errorf("trace log in a missing directory: %s", res)
	}
	r.checkNothingRecorded(before)
	res = r.art("trace", "HEAD")
	if res.code != 1 || !strings.Contains(res.stderr, "not traced") {
		t.Errorf("art trace of an untraced commit: %s", res)
	}
	if _, err := os.Stat("/nonexistent-dir"); err == nil {
		t.Error("a directory was created for the trace log")
	}
	// --pid matching nothing printed nothing, exit 0, as a process that
	// made no syscalls would: -1 is a usage error, an absent pid lists
	// the log's.
	if res := r.run("--trace-syscalls", "execve", "--", "true"); res.code != 0 {
		t.Fatalf("traced run: %s", res)
	}
	res = r.art("trace", "--pid", "-1")
	if res.code != 2 || !strings.Contains(res.stderr, "--pid -1: not a process id") || res.stdout != "" {
		t.Errorf("art trace --pid -1: %s", res)
	}
	res = r.art("trace", "--pid", "999999999")
	if res.code != 1 || !strings.Contains(res.stderr, "pid 999999999 is not in the syscall log of HEAD; its processes: ") || !strings.Contains(res.stderr, "(host ") || res.stdout != "" {
		t.Errorf("art trace --pid ABSENT: %s", res)
	}
	if res := r.art("trace", "--pid", "1"); res.code != 0 || res.stdout == "" {
		t.Errorf("art trace --pid 1 (the sandbox's first process): %s", res)
	}
}

// A traced session whose recording failed (here: its branch moved under
// it, as an older art's push could move it) keeps its syscall log only in
// the art process that ran it; recorded later by art commit, the commit
// says the session was traced and the log lost, not "not traced".
func TestTracedSessionRecordedLater(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n"})
	r.mustArt("push", "-m", r.ws, "-q", "-b", "other")
	_, wait := r.start("run", "--trace", "-i=false", "--", "sh", "-c", "echo agent > agent.txt; sleep 2")
	r.waitLiveFile("agent.txt", "agent\n", 30*time.Second)
	db, err := sql.Open("sqlite", r.db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE refs SET commit_id=(SELECT commit_id FROM refs WHERE name='other') WHERE name='main'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	res := wait()
	if res.code != 125 || !strings.Contains(res.stderr, "moved") {
		t.Fatalf("a session whose branch moved under it: %v", res)
	}
	r.mustArt("commit", "-b", "rescued")
	tr := r.art("trace", "rescued")
	if tr.code == 0 || !strings.Contains(tr.stderr, "was traced, but its syscall log could not be stored (the session's recording failed: ") {
		t.Fatalf("art trace of a traced session recorded later: %v", tr)
	}
}

// A text log that cannot be written in full is reported, not cut short
// without a word, and a fifo whose reader stopped reading no longer holds
// art for ever once the session is ended (--timeout, a signal to art): the
// tracer waited in its write, past --timeout and Ctrl-C.
func TestRunTraceLogIncomplete(t *testing.T) {
	r := newRepo(t, map[string]string{"f": "x"})
	const busy = `for i in $(seq 300); do cat /etc/services > /dev/null; done`
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// stall holds the fifo open for reading, reading nothing.
	stall := func(t *testing.T) {
		held := make(chan *os.File, 1)
		go func() {
			f, _ := os.OpenFile(fifo, os.O_RDONLY, 0) // blocks until art opens it
			held <- f
		}()
		t.Cleanup(func() {
			// Unblock the opener if art never opened the fifo.
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
			if f := <-held; f != nil {
				f.Close()
			}
		})
	}
	incomplete := func(log string) string { return "art: warning: --trace-log " + log + " is incomplete: " }

	t.Run("/dev/full", func(t *testing.T) {
		res := r.run("--trace-log", "/dev/full", "--", "sh", "-c", busy)
		if res.code != 0 || !strings.Contains(res.stderr, incomplete("/dev/full")+"write /dev/full: no space left on device") {
			t.Errorf("%s", res)
		}
	})
	t.Run("a fifo nobody reads, --timeout", func(t *testing.T) {
		// The agent waits for the log, as under strace, until --timeout.
		stall(t)
		start := time.Now()
		res := r.run("--trace-log", fifo, "--timeout", "2s", "--", "sh", "-c", busy+"; sleep 100")
		if took := time.Since(start); res.code != 124 || took > logGrace+20*time.Second || !strings.Contains(res.stderr, incomplete(fifo)+"its reader did not read it") {
			t.Errorf("art took %v: %s", took, res)
		}
	})
	t.Run("a fifo nobody reads, the agent done, then Ctrl-C", func(t *testing.T) {
		// A log that fits in art's buffers, written once the agent is
		// done: art waits for the reader, as any writer to a pipe does,
		// until a signal gives the log up.
		stall(t)
		c, wait := r.start("run", "-i=false", "--trace-log", fifo, "--", "sh", "-c", "for i in 1 2 3 4 5 6 7 8; do cat /etc/services > /dev/null; done")
		ended := make(chan artResult, 1)
		go func() { ended <- wait() }()
		select {
		case res := <-ended:
			t.Fatalf("art did not wait for the log's reader: %s", res)
		case <-time.After(3 * time.Second):
		}
		start := time.Now()
		c.Process.Signal(syscall.SIGINT)
		res := <-ended
		if took := time.Since(start); res.code != 0 || took > 10*time.Second || !strings.Contains(res.stderr, incomplete(fifo)+"its reader did not read it") {
			t.Errorf("art took %v after SIGINT: %s", took, res)
		}
	})
	// A log written in full says nothing.
	res := r.run("--trace-log", filepath.Join(t.TempDir(), "t.log"), "--", "true")
	if res.code != 0 || strings.Contains(res.stderr, "incomplete") {
		t.Errorf("complete log: %s", res)
	}
}

// --trace-syscalls naming no syscall is an error: "" ran the agent
// untraced and "," traced no syscall at all, both without a word.
func TestRunTraceSyscallsEmpty(t *testing.T) {
	r := newRepo(t, map[string]string{"f": "x"})
	before := r.commitCount()
	for _, arg := range []string{"--trace-syscalls=", "--trace-syscalls=,", "--trace-syscalls= , ,"} {
		res := r.run(arg, "--", "true")
		if res.code != 125 || !strings.Contains(res.stderr, "names no syscall") {
			t.Errorf("%s: %s", arg, res)
		}
	}
	r.checkNothingRecorded(before)
	if res := r.run("--trace-syscalls", "openat,,execve", "--trace-log", "/dev/null", "--", "true"); res.code != 0 {
		t.Errorf("an empty name among others: %s", res)
	}
}

// An art run refused for bad input leaves the --trace-log file as it
// was: a bind whose guest path cannot be made emptied the log of the
// session before, and a new log file was left behind empty. The run that
// starts the sandbox replaces the old log.
func TestRunTraceLogKeptOnBadInput(t *testing.T) {
	r := newRepo(t, map[string]string{"f": "x"})
	dir := t.TempDir()
	old, fresh := filepath.Join(dir, "old.log"), filepath.Join(dir, "new.log")
	if err := os.WriteFile(old, []byte("the log of the session before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgDir := filepath.Join(r.ws, ".art", "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	binds := filepath.Join(cfgDir, "binds.json")
	bad := `[{"host": "` + dir + `", "guest": "/nonexistent-art-guest/x", "readonly": true}]`
	if err := os.WriteFile(binds, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, log := range []string{old, fresh} {
		res := r.run("--trace-log", log, "--", "true")
		if res.code != 125 || !strings.Contains(res.stderr, "guest path") {
			t.Fatalf("bad bind: %s", res)
		}
	}
	if b, _ := os.ReadFile(old); string(b) != "the log of the session before\n" {
		t.Errorf("the old log after a refused run: %q", b)
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Error("a refused run left its new log file behind")
	}
	os.Remove(binds)
	if res := r.run("--trace-log", old, "--", "true"); res.code != 0 {
		t.Fatalf("traced run: %s", res)
	}
	if b := readFile(t, old); strings.Contains(b, "session before") || !strings.Contains(b, "+++ exited with 0 +++") {
		t.Errorf("the old log was not replaced:\n%s", b)
	}
}

// A traced session whose art was killed (kill -9) is recorded by the next
// command as traced with its log lost: 'art trace' said it was not traced.
func TestRunTraceKilledArtSaysLogLost(t *testing.T) {
	r := newRepo(t, map[string]string{"f": "x"})
	sleepArg := fmt.Sprintf("60.%06d", time.Now().UnixNano()%1000000)
	c, wait := r.start("run", "-i=false", "--trace-log", filepath.Join(t.TempDir(), "t.log"), "--", "sh", "-c", "echo data > g; sleep "+sleepArg)
	waitFor(t, "the agent's sleep", 30*time.Second, func() bool { return processWith("sleep\x00" + sleepArg) })
	if err := c.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait()
	waitFor(t, "the sandbox to die with art", 10*time.Second, func() bool { return !processWith("sleep\x00" + sleepArg) })
	r.mustArt("log")
	res := r.art("trace", "HEAD")
	if res.code != 1 || !strings.Contains(res.stderr, "was traced, but its syscall log could not be stored (art ended before it stored the log") {
		t.Errorf("art trace of the interrupted traced session: %s", res)
	}
	if out := r.mustArt("show", "HEAD").stdout; !strings.Contains(out, "trace:     not stored (art ended") {
		t.Errorf("art show of the interrupted traced session:\n%s", out)
	}
	// An untraced one still says it was not traced.
	if res := r.run("--", "true"); res.code != 0 {
		t.Fatal(res)
	}
	if res := r.art("trace", "HEAD"); res.code != 1 || !strings.Contains(res.stderr, "was not traced") {
		t.Errorf("art trace of an untraced session: %s", res)
	}
}

// A session that ends on its own well before its --timeout waits for the
// text log's reader past that timeout, as it does without one: the
// timeout's timer went on after the session ended and, with the log still
// being written to a reader that had not read it yet, gave the log up
// logGrace later ("its reader did not read it when the session was
// ended") although nothing was ended.
func TestRunTraceLogOwnEndOutlivesTimeout(t *testing.T) {
	// Long enough for the agent below on a busy machine.
	const timeout = 5 * time.Second
	r := newRepo(t, map[string]string{"f": "x"})
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_RDONLY, 0) // blocks until art opens it
		if err != nil {
			got <- nil
			return
		}
		defer f.Close()
		// Not read until well past --timeout and logGrace.
		time.Sleep(timeout + logGrace + 2*time.Second)
		b, _ := io.ReadAll(f)
		got <- b
	}()
	t.Cleanup(func() {
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
	// A log larger than the fifo holds, smaller than art's buffer: it
	// is written once the agent is done, well within its timeout.
	res := r.run("--trace-log", fifo, "--timeout", timeout.String(), "--", "sh", "-c", "for i in 1 2 3 4 5 6 7 8; do cat /etc/services > /dev/null; done")
	log := <-got
	if res.code != 0 || strings.Contains(res.stderr, "incomplete") {
		t.Errorf("a session done before its --timeout: %s", res)
	}
	if !strings.Contains(string(log), "+++ exited with 0 +++") {
		t.Errorf("the log lost its end (%d bytes): ...%s", len(log), log[max(0, len(log)-300):])
	}
}
