//go:build linux

package tracer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Options configures Run.
type Options struct {
	// Syscalls, when not empty, are the only syscalls traced: the caller
	// installs SeccompFilter(Syscalls) in the traced program (bwrap
	// --seccomp FD), and Run stops only at its SECCOMP_RET_TRACE results
	// (PTRACE_CONT otherwise). Empty: every syscall is traced
	// (PTRACE_SYSCALL). Process events (fork, exec, exit, signals) are
	// recorded in both modes.
	Syscalls []string
	// Text receives the strace-like log (Event.AppendText), may be nil.
	Text io.Writer
	// JSON receives one JSON Event per line (Event.AppendJSON), may be nil.
	JSON io.Writer
	// OnStart, when set, is called once the command has started (from the
	// tracer's goroutine, before tracing begins), so a caller that must
	// return once the process exists (sandbox.Starter) can.
	OnStart func(p *os.Process)
	// BeforeStart, when set, is called on the thread that starts the
	// command, right before: what it sets on the thread (a Landlock
	// domain, no_new_privs) passes to the command. An error is returned
	// by Run and nothing is started.
	BeforeStart func() error
}

// Result is how the traced command ended.
type Result struct {
	ExitCode int            // exit status; -1 when killed by a signal
	Signal   syscall.Signal // terminating signal; 0 when it exited
	Core     bool           // a core was dumped
	Events   int64          // events recorded
}

// Run starts cmd under the tracer and waits until every process of its tree
// has ended. cmd must not be started; its SysProcAttr is kept (Setsid,
// Setctty, Ctty, Pdeathsig...) with Ptrace added. Do not call cmd.Wait:
// Run does, to release cmd's I/O; cmd.ProcessState stays nil, the exit
// status is in Result.
//
// The caller may kill the tree at any time (e.g. on timeout); when the
// first process is killed by SIGKILL, Run kills the rest of the tree too and
// returns promptly with Signal set to SIGKILL.
//
// If the log writers fail, tracing goes on without them and Run returns
// the Result together with the write error.
func Run(cmd *exec.Cmd, opts Options) (Result, error) {
	if len(native().names) == 0 {
		return Result{}, fmt.Errorf("tracer: unsupported architecture %s", goarch)
	}
	if cmd.Process != nil {
		return Result{}, errors.New("tracer: command already started")
	}
	seccomp := false
	if len(opts.Syscalls) > 0 {
		if _, err := Lookup(opts.Syscalls); err != nil {
			return Result{}, err
		}
		seccomp = true
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Ptrace = true

	tr := &tracer{
		seccomp: seccomp,
		tasks:   make(map[int]*task),
		text:    opts.Text,
		json:    opts.JSON,
		decode:  opts.Text != nil || opts.JSON != nil,
		mem:     memReader{noVM: testForcePeek},
	}
	type outcome struct {
		res     Result
		err     error
		started bool
	}
	defer quietStopSignals()()
	done := make(chan outcome, 1)
	go func() {
		// Every ptrace request must come from the thread that attached.
		// The thread is never unlocked: it exits with this goroutine, so no
		// other goroutine runs on it, and any tracee left behind after a
		// failure is killed by PTRACE_O_EXITKILL.
		runtime.LockOSThread()
		var o outcome
		defer func() {
			if p := recover(); p != nil {
				tr.killAll()
				o.err = fmt.Errorf("tracer: internal error: %v", p)
			}
			done <- o
		}()
		if opts.BeforeStart != nil {
			if err := opts.BeforeStart(); err != nil {
				o.err = err
				return
			}
		}
		if err := cmd.Start(); err != nil {
			o.err = err
			return
		}
		o.started = true
		if opts.OnStart != nil {
			opts.OnStart(cmd.Process)
		}
		o.res, o.err = tr.run(cmd.Process.Pid)
	}()
	o := <-done
	if !o.started {
		return Result{}, o.err
	}
	// Release cmd's I/O goroutines and pipes. Its wait fails: the process
	// was reaped by the tracer.
	_ = cmd.Wait()
	if o.err == nil {
		o.err = tr.werr
	}
	o.res.Events = tr.events
	return o.res, o.err
}

// testForcePeek makes tests use the PTRACE_PEEKDATA fallback.
var testForcePeek bool

// task is one traced thread.
type task struct {
	pid   int // host tid
	tgid  int // host pid of its process
	nspid int // tid in its innermost pid namespace, 0 if that is the tracer's

	inSys      bool   // syscall entered, exit not seen yet
	ev         Event  // the pending syscall, decoded at entry
	sp         *spec  // its spec
	willCreate bool   // an O_CREAT open of a path that did not exist
	args       [6]Arg // storage for ev.Args
	arg0       uint64 // the pending syscall's first argument, raw
	quietCont  bool   // the SIGCONT Run itself sent: inject without an event
}

type tracer struct {
	seccomp bool
	decode  bool
	tasks   map[int]*task
	leader  int
	res     Result
	done    bool // leader has ended

	text, json io.Writer
	tb, jb     []byte
	werr       error
	lastFlush  time.Time
	events     int64

	mem     memReader
	pathBuf []byte
	linkBuf [4096]byte
	procBuf []byte
}

const ptraceOptions = unix.PTRACE_O_TRACESYSGOOD | unix.PTRACE_O_TRACEFORK |
	unix.PTRACE_O_TRACEVFORK | unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEEXEC |
	unix.PTRACE_O_TRACESECCOMP | unix.PTRACE_O_EXITKILL

func ptrace(req int, pid int, addr, data uintptr) error {
	_, _, e := syscall.RawSyscall6(unix.SYS_PTRACE, uintptr(req), uintptr(pid), addr, data, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

func wait4(pid int, ws *unix.WaitStatus, options int) (int, error) {
	for {
		r, _, e := syscall.Syscall6(unix.SYS_WAIT4, uintptr(pid), uintptr(unsafe.Pointer(ws)), uintptr(options), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(r), nil
	}
}

// sysInfo is struct ptrace_syscall_info (PTRACE_GET_SYSCALL_INFO, Linux 5.3).
type sysInfo struct {
	Op    uint8
	_     uint8
	Flags uint16
	Arch  uint32
	IP    uint64
	SP    uint64
	Nr    uint64    // entry, seccomp: number; exit: return value
	Args  [6]uint64 // entry, seccomp: arguments; exit: Args[0]&0xff is is_error
	Data  uint32    // seccomp: SECCOMP_RET_DATA
	_     uint32
}

func getSyscallInfo(pid int, info *sysInfo) error {
	return ptrace(unix.PTRACE_GET_SYSCALL_INFO, pid, unsafe.Sizeof(*info), uintptr(unsafe.Pointer(info)))
}

// run attaches to the freshly started pid and traces until the tree is gone.
//
// The child stops with SIGTRAP after its execve (SysProcAttr.Ptrace is
// PTRACE_TRACEME). PTRACE_TRACEME does not allow PTRACE_LISTEN, needed to
// leave group-stopped tracees stopped, so the tracer re-attaches with
// PTRACE_SEIZE: detach into a SIGSTOP group-stop, seize, and continue it
// with SIGCONT. The program has not run a single instruction by then.
func (tr *tracer) run(pid int) (Result, error) {
	tr.leader = pid
	tr.lastFlush = time.Now()
	defer tr.flush()
	var ws unix.WaitStatus
	if _, err := wait4(pid, &ws, unix.WALL); err != nil {
		return tr.res, fmt.Errorf("tracer: waiting for %d: %w", pid, err)
	}
	if !ws.Stopped() {
		return tr.ended(pid, ws)
	}
	if err := ptrace(unix.PTRACE_DETACH, pid, 0, uintptr(unix.SIGSTOP)); err != nil {
		return tr.res, fmt.Errorf("tracer: detaching %d: %w", pid, err)
	}
	if _, err := wait4(pid, &ws, unix.WALL|unix.WUNTRACED); err != nil {
		return tr.res, fmt.Errorf("tracer: waiting for %d: %w", pid, err)
	}
	if !ws.Stopped() {
		return tr.ended(pid, ws)
	}
	if err := ptrace(unix.PTRACE_SEIZE, pid, 0, ptraceOptions); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		return tr.res, fmt.Errorf("tracer: PTRACE_SEIZE %d: %w", pid, err)
	}
	if _, err := wait4(pid, &ws, unix.WALL); err != nil {
		return tr.res, fmt.Errorf("tracer: waiting for %d: %w", pid, err)
	}
	if !ws.Stopped() {
		return tr.ended(pid, ws)
	}
	t := tr.newTask(pid)
	t.quietCont = true
	// The first exec happened before the tracer could see it.
	tr.emitExec(t)
	unix.Kill(pid, unix.SIGCONT)
	if err := tr.checkSyscallInfo(pid); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		tr.loop()
		return tr.res, err
	}
	tr.resume(t, 0)
	tr.loop()
	return tr.res, nil
}

// checkSyscallInfo makes sure PTRACE_GET_SYSCALL_INFO works (Linux 5.3).
func (tr *tracer) checkSyscallInfo(pid int) error {
	var info sysInfo
	if err := getSyscallInfo(pid, &info); err != nil {
		return fmt.Errorf("tracer: PTRACE_GET_SYSCALL_INFO: %w (Linux 5.3 or later is required)", err)
	}
	return nil
}

// ended records how the leader ended before it could be traced.
func (tr *tracer) ended(pid int, ws unix.WaitStatus) (Result, error) {
	tr.setResult(ws)
	return tr.res, nil
}

func (tr *tracer) setResult(ws unix.WaitStatus) {
	if ws.Signaled() {
		tr.res.ExitCode, tr.res.Signal, tr.res.Core = -1, ws.Signal(), ws.CoreDump()
	} else {
		tr.res.ExitCode = ws.ExitStatus()
	}
	tr.done = true
}

// loop handles stops until no tracee is left.
func (tr *tracer) loop() {
	for {
		var ws unix.WaitStatus
		pid, err := wait4(-1, &ws, unix.WALL|unix.WNOTHREAD)
		if err != nil {
			// ECHILD: no tracee or child left.
			return
		}
		t := tr.tasks[pid]
		if t == nil {
			// A new task can report its first stop before its parent
			// reports the fork event.
			t = tr.newTask(pid)
		}
		switch {
		case ws.Exited() || ws.Signaled():
			tr.exited(t, ws)
			continue
		case !ws.Stopped():
			continue
		}
		sig := ws.StopSignal()
		event := int(uint32(ws) >> 16)
		switch {
		case sig == unix.SIGTRAP|0x80:
			tr.syscallStop(t)
		case event != 0:
			tr.eventStop(t, event, sig)
		default:
			tr.signalStop(t, sig)
		}
	}
}

// resume restarts t, injecting sig. Between a seccomp stop and the
// syscall's exit the tracee runs with PTRACE_SYSCALL, otherwise with
// PTRACE_CONT in seccomp mode.
func (tr *tracer) resume(t *task, sig syscall.Signal) {
	req := unix.PTRACE_SYSCALL
	if tr.seccomp && !t.inSys {
		req = unix.PTRACE_CONT
	}
	// ESRCH: the tracee was killed meanwhile; its exit will be reported.
	_ = ptrace(req, t.pid, 0, uintptr(sig))
}

func (tr *tracer) syscallStop(t *task) {
	var info sysInfo
	if err := getSyscallInfo(t.pid, &info); err != nil {
		tr.resume(t, 0) // killed meanwhile
		return
	}
	switch info.Op {
	case unix.PTRACE_SYSCALL_INFO_ENTRY:
		if !t.inSys {
			tr.enter(t, &info)
		}
	case unix.PTRACE_SYSCALL_INFO_EXIT:
		if !t.inSys {
			break // attached inside a syscall
		}
		// Everything the event needs from the tracee was read at entry:
		// let it run on (in seccomp mode until its next traced syscall,
		// since it is no longer inSys) while the event is logged.
		t.inSys = false
		// Whether the program's own filter skipped the call is read
		// while the tracee is still stopped: resumed, it takes its
		// SIGSYS at once, and the check found it gone one time in three.
		skipped := rolledBack(info.Arch, uint64(t.ev.Nr), t.arg0, int64(info.Nr)) && tr.sigsysPending(t.pid)
		tr.resume(t, 0)
		tr.leave(t, &info, skipped)
		return
	}
	tr.resume(t, 0)
}

func (tr *tracer) eventStop(t *task, event int, sig syscall.Signal) {
	switch event {
	case unix.PTRACE_EVENT_FORK, unix.PTRACE_EVENT_VFORK, unix.PTRACE_EVENT_CLONE:
		msg, err := unix.PtraceGetEventMsg(t.pid)
		if err == nil {
			child := int(msg)
			c := tr.tasks[child]
			if c == nil {
				c = tr.newTask(child)
			}
			kind := KindFork
			if c.tgid == t.tgid {
				kind = KindThread
			}
			tr.emit(&Event{Time: time.Now(), Kind: kind, Pid: t.pid, NSPid: t.nspid, Child: child, ChildNSPid: c.nspid})
		}
	case unix.PTRACE_EVENT_EXEC:
		t = tr.execed(t)
	case unix.PTRACE_EVENT_SECCOMP:
		var info sysInfo
		if err := getSyscallInfo(t.pid, &info); err == nil && !t.inSys {
			tr.enter(t, &info)
		}
	case unix.PTRACE_EVENT_STOP:
		switch sig {
		case unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
			// Group-stop: stay stopped until SIGCONT, while still
			// reporting events.
			if ptrace(unix.PTRACE_LISTEN, t.pid, 0, 0) == nil {
				return
			}
		}
		// Otherwise: the initial stop of a new task, or the end of a
		// group-stop. Fall through to resume.
	}
	tr.resume(t, 0)
}

// execed handles PTRACE_EVENT_EXEC. When a non-leader thread execs, the
// kernel gives it the leader's tid and the other threads vanish; the
// former tid is in the event message.
func (tr *tracer) execed(t *task) *task {
	if msg, err := unix.PtraceGetEventMsg(t.pid); err == nil && int(msg) != t.pid {
		former := int(msg)
		if t.inSys {
			tr.unfinished(t) // the old leader's syscall never returns
		}
		if old := tr.tasks[former]; old != nil {
			delete(tr.tasks, former)
			old.pid, old.tgid, old.nspid = t.pid, t.tgid, t.nspid
			old.ev.Pid, old.ev.NSPid = t.pid, t.nspid
			tr.tasks[t.pid] = old
			t = old
		}
	}
	tr.emitExec(t)
	return t
}

// emitExec records the program t now runs, from /proc (so that it is known
// even when execve itself is not traced).
func (tr *tracer) emitExec(t *task) {
	ev := Event{Time: time.Now(), Kind: KindExec, Pid: t.pid, NSPid: t.nspid}
	if tr.decode {
		ev.Path = tr.readLink(t.pid, "exe")
		ev.Argv, ev.ArgvTrunc = tr.readCmdline(t.pid)
	}
	tr.emit(&ev)
}

func (tr *tracer) signalStop(t *task, sig syscall.Signal) {
	if t.quietCont && sig == unix.SIGCONT {
		t.quietCont = false
	} else {
		tr.emit(&Event{Time: time.Now(), Kind: KindSignal, Pid: t.pid, NSPid: t.nspid, Signal: signalName(int(sig))})
	}
	tr.resume(t, sig)
}

func (tr *tracer) exited(t *task, ws unix.WaitStatus) {
	if t.inSys {
		tr.unfinished(t)
	}
	delete(tr.tasks, t.pid)
	if t.pid == t.tgid {
		ev := Event{Time: time.Now(), Kind: KindExit, Pid: t.pid, NSPid: t.nspid}
		if ws.Signaled() {
			ev.Signal, ev.Core = signalName(int(ws.Signal())), ws.CoreDump()
		} else {
			ev.Status = ws.ExitStatus()
		}
		tr.emit(&ev)
	}
	if t.pid == tr.leader && !tr.done {
		tr.setResult(ws)
		if ws.Signaled() && ws.Signal() == unix.SIGKILL {
			tr.killAll()
		}
	}
}

// killAll kills every remaining tracee.
func (tr *tracer) killAll() {
	for pid := range tr.tasks {
		unix.Kill(pid, unix.SIGKILL)
	}
}

// enter records a syscall entry (from a syscall-entry or seccomp stop).
func (tr *tracer) enter(t *task, info *sysInfo) {
	t.inSys = true
	t.willCreate = false
	p := personalityOf(info.Arch, info.Nr)
	var name string
	var sp *spec
	if p != nil {
		name, sp = p.lookupNr(info.Nr)
	} else {
		p = &personality{name: "arch_0x" + strconv.FormatUint(uint64(info.Arch), 16)}
	}
	if name == "" {
		name = "syscall_" + strconv.FormatUint(info.Nr, 10)
	}
	t.sp = sp
	t.arg0 = info.Args[0]
	t.ev = Event{Time: time.Now(), Kind: KindSyscall, Pid: t.pid, NSPid: t.nspid, Arch: p.name,
		Syscall: name, Nr: int(info.Nr), retHex: sp != nil && sp.retHex}
	if !tr.decode {
		return
	}
	tr.decodeArgs(t, p, sp, &info.Args, &t.ev)
	if sp != nil && (sp.class == cOpen || sp.class == cCreat) {
		tr.checkCreate(t)
	}
}

// checkCreate sets t.willCreate when an open may create its path.
func (tr *tracer) checkCreate(t *task) {
	args := t.ev.Args
	var flags uint64 = unix.O_CREAT
	dirfd := int64(unix.AT_FDCWD)
	pi := 0
	switch t.sp.class {
	case cCreat:
	default:
		if len(args) > 0 && args[0].Type == ArgDirfd {
			dirfd, pi = args[0].Raw, 1
		}
		if len(args) <= pi+1 {
			return
		}
		fa := args[pi+1]
		if fa.Type == ArgOpenHow {
			if len(fa.Sub) == 0 {
				return
			}
			fa = fa.Sub[0]
		}
		flags = uint64(fa.Raw)
	}
	if flags&unix.O_CREAT == 0 || len(args) <= pi || args[pi].Err != "" || args[pi].Raw == 0 {
		return
	}
	if flags&unix.O_EXCL != 0 {
		t.willCreate = true
		return
	}
	t.willCreate = !tr.existsInTracee(t.pid, dirfd, args[pi].Str)
}

// leave completes t's pending syscall with its result and emits it; the
// caller has cleared t.inSys. skipped says a seccomp filter of the
// program's own skipped the call (rolledBack, with its SIGSYS pending).
func (tr *tracer) leave(t *task, info *sysInfo, skipped bool) {
	ev := &t.ev
	ev.Ret = int64(info.Nr)
	if skipped {
		// A seccomp filter of the program's own refused the call with
		// SECCOMP_RET_TRAP or SECCOMP_RET_KILL_*: the kernel skipped it
		// and put the registers back as they were at entry, so the
		// "result" is what the return register held at entry (see
		// rolledBack), and a mkdir that never ran was logged, and
		// summarized, as done. It never returned.
		ev.Ret = 0
		tr.unfinished(t)
		return
	}
	if info.Args[0]&0xff != 0 {
		ev.Errno = errnoName(int(-ev.Ret))
		ev.Ret = -1
	} else if t.sp != nil {
		switch t.sp.class {
		case cOpen, cCreat:
			ev.Created = t.willCreate
		case cMkdir, cLink:
			ev.Created = true
		}
	}
	tr.emit(ev)
}

// rolledBack says whether ret, a syscall's result read at its exit stop,
// is what the kernel leaves when seccomp skips the call and puts the
// registers back as they were at entry (syscall_rollback): on x86 the
// return register is the number's (rax = orig_rax, so the "result" is the
// syscall's number), on arm64 and arm the first argument's (x0 = orig_x0:
// an openat(AT_FDCWD) read as -1 ENETDOWN, one of dirfd 5 as opening fd
// 5, and an O_CREAT one as creating its file). Arm's result is its 32-bit
// register, sign-extended.
func rolledBack(arch uint32, nr, arg0 uint64, ret int64) bool {
	switch arch {
	case unix.AUDIT_ARCH_AARCH64:
		return ret == int64(arg0)
	case unix.AUDIT_ARCH_ARM:
		return ret == int64(int32(uint32(arg0)))
	}
	return ret == int64(nr)
}

// sigsysPending says whether a SIGSYS is pending for the thread tid (the
// one seccomp forces on a refused call); read from /proc only when a
// syscall's result equals its number.
func (tr *tracer) sigsysPending(tid int) bool {
	data := tr.readProc(tid, "status", 8192)
	const key = "\nSigPnd:"
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return false
	}
	line := data[i+len(key):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	mask, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 16, 64)
	return err == nil && mask&(1<<(unix.SIGSYS-1)) != 0
}

// unfinished emits t's pending syscall as never returning.
func (tr *tracer) unfinished(t *task) {
	t.inSys = false
	t.ev.Unfinished = true
	tr.emit(&t.ev)
}

// newTask registers a tracee, reading its tgid and namespace pid.
func (tr *tracer) newTask(pid int) *task {
	t := &task{pid: pid, tgid: pid}
	tr.readStatus(t)
	tr.tasks[pid] = t
	return t
}

// readStatus reads Tgid and the last NSpid field of /proc/<pid>/status.
func (tr *tracer) readStatus(t *task) {
	data := tr.readProc(t.pid, "status", 8192)
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		switch {
		case bytes.HasPrefix(line, []byte("Tgid:")):
			if n, err := strconv.Atoi(string(bytes.TrimSpace(line[5:]))); err == nil {
				t.tgid = n
			}
		case bytes.HasPrefix(line, []byte("NSpid:")):
			// One field per pid namespace, from the tracer's /proc down
			// to the task's own: only a nested task has an ns pid.
			f := bytes.Fields(line[6:])
			if len(f) > 1 {
				if n, err := strconv.Atoi(string(f[len(f)-1])); err == nil {
					t.nspid = n
				}
			}
			return
		}
	}
}

// readProc reads up to max bytes of /proc/<pid>/<name>; nil on error.
func (tr *tracer) readProc(pid int, name string, max int) []byte {
	b := tr.pathBuf[:0]
	b = append(b, "/proc/"...)
	b = strconv.AppendInt(b, int64(pid), 10)
	b = append(b, '/')
	b = append(b, name...)
	tr.pathBuf = b
	fd, err := unix.Open(string(b), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	if cap(tr.procBuf) < max {
		tr.procBuf = make([]byte, max)
	}
	buf := tr.procBuf[:max]
	n := 0
	for n < max {
		k, err := unix.Read(fd, buf[n:])
		if k <= 0 || err != nil {
			break
		}
		n += k
	}
	return buf[:n]
}

func (tr *tracer) readLink(pid int, name string) string {
	p := "/proc/" + strconv.Itoa(pid) + "/" + name
	n, err := unix.Readlink(p, tr.linkBuf[:])
	if err != nil {
		return ""
	}
	return string(tr.linkBuf[:n])
}

// readCmdline returns the argv of pid from /proc/<pid>/cmdline, bounded
// like decoded argv arrays; trunc says it was cut (more arguments, or more
// bytes, than the bounds): the exec event of an agent's 1,000 arguments
// listed 256 as if they were all.
func (tr *tracer) readCmdline(pid int) (argv []string, trunc bool) {
	data := tr.readProc(pid, "cmdline", maxArgvLen+1)
	if len(data) > maxArgvLen {
		data, trunc = data[:maxArgvLen], true
	}
	for len(data) > 0 {
		if len(argv) == maxArgs {
			return argv, true
		}
		i := bytes.IndexByte(data, 0)
		if i < 0 {
			i = len(data)
		}
		argv = append(argv, string(data[:i]))
		if i == len(data) {
			break
		}
		data = data[i+1:]
	}
	return argv, trunc
}

// emit counts an event and writes it to the sinks.
func (tr *tracer) emit(ev *Event) {
	tr.events++
	if tr.text != nil {
		tr.tb = ev.AppendText(tr.tb)
		tr.tb = append(tr.tb, '\n')
	}
	if tr.json != nil {
		tr.jb = ev.AppendJSON(tr.jb)
		tr.jb = append(tr.jb, '\n')
	}
	if len(tr.tb) >= 64<<10 || len(tr.jb) >= 64<<10 || ev.Kind == KindExit ||
		(len(tr.tb)+len(tr.jb) > 0 && ev.Time.Sub(tr.lastFlush) >= 200*time.Millisecond) {
		tr.flush()
	}
}

// flush writes the buffered log lines.
func (tr *tracer) flush() {
	tr.lastFlush = time.Now()
	write := func(w *io.Writer, b []byte) {
		if *w == nil || len(b) == 0 {
			return
		}
		if _, err := (*w).Write(b); err != nil {
			if tr.werr == nil {
				tr.werr = fmt.Errorf("tracer: writing log: %w", err)
			}
			*w = nil
		}
	}
	write(&tr.text, tr.tb)
	write(&tr.json, tr.jb)
	tr.tb, tr.jb = tr.tb[:0], tr.jb[:0]
}
