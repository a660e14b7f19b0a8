package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Stdio is the caller's side of the command's standard streams. Nil means
// /dev/null (Stdin) or discard (Stdout, Stderr). In non-interactive mode
// *os.File values are handed to the sandbox as they are. In interactive
// mode Stdin is copied to the pty (put in raw mode when it is a terminal),
// pty output goes to Stdout, and Stderr is unused.
type Stdio struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Starter starts cmd (the bwrap process) and returns a function that blocks
// until that process has exited and returns its wait status. cmd.Process
// must be set when Starter returns without error. Run still handles I/O,
// limits, timeouts, signals and killing; the Starter must keep
// cmd.SysProcAttr's fields (it may add Ptrace) and must not change cmd's
// arguments, files or environment. The default is cmd.Start and cmd.Wait.
//
// A ptrace tracer uses it to start the process on its own locked OS thread
// and to own all wait calls (a concurrent cmd.Wait would steal ptrace stops).
// Run only ever hands it *os.File stdio, so exec.Cmd starts no copying
// goroutines and the Starter need not call cmd.Wait.
type Starter func(cmd *exec.Cmd) (wait func() (syscall.WaitStatus, error), err error)

// Result describes how the sandboxed command ended.
type Result struct {
	// ExitCode is what art should exit with: the command's own status,
	// 128+n when it was ended by signal n, 124 on timeout, 126/127 when the
	// command could not be executed / was not found.
	ExitCode int
	// Signal is the signal that ended the command (on timeout SIGTERM, or
	// SIGKILL when it outlived StopGrace; the received signal when
	// Interrupted), 0 if it exited by itself. bwrap
	// reports a signal death as status 128+n, so a command that itself
	// exits with 129..192 is reported as killed by signal status-128, as a
	// shell would.
	Signal syscall.Signal
	// TimedOut is set when Config.Timeout (or the context deadline) ended it.
	TimedOut bool
	// Interrupted is the signal (SIGINT, SIGTERM, SIGHUP or SIGQUIT) art received
	// while running, which made Run kill the sandbox; 0 otherwise.
	Interrupted syscall.Signal
	// Limits is the mechanism used for Memory/Pids: LimitsCgroup2,
	// LimitsRlimit or LimitsNone.
	Limits string
	// Start and End bracket the sandbox's run.
	Start, End time.Time
}

// Run runs cfg.Argv in the sandbox and waits for it to end, however it ends.
// When Run returns, every process of the sandbox is gone (bwrap, its pid
// namespace and, with cgroups, the cgroup).
//
// While it runs, SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to this process
// (or delivered on Config.Signals) kill the
// whole sandbox and Run returns (Result.Interrupted); in interactive mode
// the terminal is in raw mode, so Ctrl-C is just a byte for the agent's pty.
// SIGWINCH resizes the pty. Cancelling ctx kills the sandbox too; Run then
// returns ctx.Err() unless that was a deadline (reported as TimedOut).
//
// An error means the sandbox itself could not be built or started (art maps
// it to exit status 125; Result.ExitCode is 125 then); the command's own
// failure is not an error.
//
// Side effect: descriptors this process inherited without close-on-exec
// are marked close-on-exec, so they never leak into the sandbox.
func Run(ctx context.Context, cfg Config, stdio Stdio) (res Result, err error) {
	bwrap, err := bwrapPath()
	if err != nil {
		return Result{ExitCode: 125}, err
	}
	mech := limitMechanism(cfg)
	var cg *cgroup
	if mech == LimitsCgroup2 {
		cg, err = newCgroup(cfg)
		if err != nil {
			mech = LimitsRlimit
			cg = nil
		}
	}
	if cg != nil {
		defer cg.remove()
	}
	p, err := makePlan(cfg, mech)
	if err != nil {
		return Result{ExitCode: 125}, err
	}
	res.Limits = mech
	prog, err := seccompProgram(cfg.Seccomp)
	if err != nil {
		return Result{ExitCode: 125}, err
	}
	seccomp, err := seccompFile(prog)
	if err != nil {
		return Result{ExitCode: 125}, err
	}
	defer seccomp.Close()

	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}

	startedR, startedW, err := os.Pipe()
	if err != nil {
		return Result{ExitCode: 125}, err
	}
	defer startedR.Close()
	infoR, infoW, err := os.Pipe()
	if err != nil {
		startedW.Close()
		return Result{ExitCode: 125}, err
	}
	defer infoR.Close()
	// tmpfsR is the shim's end of the line saying the tmpfs mounts are
	// sized (sizesTmpfs); nil when Run does not size them.
	var tmpfsR, tmpfsW *os.File
	if sizesTmpfs(cfg) {
		if tmpfsR, tmpfsW, err = os.Pipe(); err != nil {
			startedW.Close()
			infoW.Close()
			return Result{ExitCode: 125}, err
		}
		defer tmpfsW.Close()
	}
	closeChildEnds := func() {
		startedW.Close()
		infoW.Close()
		if tmpfsR != nil {
			tmpfsR.Close()
		}
	}

	cmd := exec.Command(bwrap, p.args...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{startedW, infoW}
	cmd.ExtraFiles = append(cmd.ExtraFiles, seccomp)
	if tmpfsR != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, tmpfsR)
	}
	cmd.SysProcAttr = p.sysProcAttr(cfg.Interactive)
	if cg != nil {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(cg.fd.Fd())
	}
	cmd.WaitDelay = 2 * time.Second

	// Signals: registered before starting so none is lost.
	sigCh := cfg.Signals
	if sigCh == nil {
		sigCh = make(chan os.Signal, 4)
		signal.Notify(sigCh, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
		defer signal.Stop(sigCh)
	}

	var tio *ptyIO
	var pio *pipeIO
	if cfg.Interactive {
		tio, err = newPtyIO(stdio)
		if err != nil {
			closeChildEnds()
			return Result{ExitCode: 125}, err
		}
		defer tio.close() // restores the caller's terminal on every path
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tio.tty, tio.tty, tio.tty
	} else {
		pio, err = newPipeIO(stdio)
		if err != nil {
			closeChildEnds()
			return Result{ExitCode: 125}, err
		}
		defer pio.close()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = pio.childStdin, pio.childStdout, pio.childStderr
		if len(pio.ttys) > 0 {
			defer keepRunningOnStop(stdio.Stderr)()
		}
	}

	closeInheritedFDs()
	// The sandbox follows this process into its scheduling group.
	cfg.SchedGroup.wait()
	start := cfg.Starter
	if start == nil {
		start = defaultStarter
	}
	res.Start = time.Now()
	wait, err := start(cmd)
	closeChildEnds()
	if err != nil {
		res.End = time.Now()
		res.ExitCode = 125
		return res, fmt.Errorf("start bwrap: %w", err)
	}
	if tio != nil {
		tio.tty.Close()
		tio.start()
	}
	if pio != nil {
		pio.start()
	}

	nsCh := make(chan *nsWatch, 1)
	pidCh := make(chan *nsWatch, 1) // the same, for the tmpfs sizing
	go func() {
		w := watchNamespace(infoR)
		pidCh <- w
		nsCh <- w
	}()
	startedCh := make(chan bool, 1)
	tmpfsErr := make(chan error, 1)
	go func() {
		var b [1]byte
		n, _ := startedR.Read(b[:])
		if n == 1 && tmpfsW != nil {
			// The shim waits: no agent code has run yet.
			var err error
			if w := <-pidCh; w == nil {
				err = errors.New("size the sandbox's tmpfs mounts: bwrap reported no sandbox process")
			} else {
				size := sizeTmpfs
				if cfg.sizer != nil {
					size = cfg.sizer
				}
				err = size(w.pid, cfg.TmpSize, w.alive)
			}
			if err == nil {
				_, err = tmpfsW.WriteString("sized\n")
			}
			tmpfsW.Close() // the shim runs nothing unless told
			tmpfsErr <- err
		}
		startedCh <- n == 1
	}()

	type waitResult struct {
		ws  syscall.WaitStatus
		err error
	}
	doneCh := make(chan waitResult, 1)
	go func() {
		ws, err := wait()
		doneCh <- waitResult{ws, err}
	}()

	// Killing bwrap is enough: its pid 1 has PR_SET_PDEATHSIG (SIGKILL) via
	// --die-with-parent, and when a pid namespace's pid 1 dies the kernel
	// kills every other process in it. Killing pid 1 directly and the cgroup
	// covers a tracer holding bwrap stopped.
	var ns *nsWatch
	killAll := func() {
		_ = cmd.Process.Kill()
		if ns != nil {
			ns.kill()
		}
		if cg != nil {
			cg.kill()
		}
	}

	var (
		wr          waitResult
		killed      bool
		timedOut    bool
		interrupted syscall.Signal
		ctxErr      error
		graceC      <-chan time.Time // the end of the stop's grace period
		forced      bool             // SIGKILL ended it
	)
	// stop ends the sandbox: its processes get sig first and StopGrace to
	// end on their own (git removes its index.lock, a database closes),
	// then SIGKILL; a second stop, or no sandbox yet, kills at once.
	// SIGKILL at once left an agent's git lock files in the commit.
	stop := func(sig syscall.Signal) {
		if ns == nil && nsCh != nil {
			// bwrap has not yet said which process is the sandbox's
			// pid 1: killing bwrap now could orphan that child before
			// it set its parent-death signal, and it lived on, holding
			// the home's mount (art then waited for ever). It is killed
			// with bwrap once known (below), or after killGrace.
			killed, forced = true, true
			graceC = time.After(killGrace)
			return
		}
		if killed || ns == nil || sig == syscall.SIGKILL {
			killed, forced = true, true
			killAll()
			return
		}
		killed = true
		signalSandbox(ns, sig)
		graceC = time.After(StopGrace)
	}
	ctxDone := ctx.Done()
loop:
	for {
		select {
		case wr = <-doneCh:
			break loop
		case n := <-nsCh:
			ns = n
			nsCh = nil
			if killed && forced {
				killAll() // a stop that waited for the sandbox's pid 1
			} else if killed && ns != nil {
				ns.kill()
			}
		case <-ctxDone:
			ctxDone = nil
			ctxErr = ctx.Err()
			timedOut = errors.Is(ctxErr, context.DeadlineExceeded)
			if timedOut {
				stop(syscall.SIGTERM) // as timeout(1)
			} else {
				stop(syscall.SIGKILL)
			}
		case s := <-sigCh:
			sig := s.(syscall.Signal)
			if interrupted == 0 {
				interrupted = sig
			}
			if sig == syscall.SIGQUIT {
				sig = syscall.SIGTERM // no core dumps in the home
			}
			stop(sig)
		case <-graceC:
			graceC = nil
			forced = true
			killAll()
		case <-tio.winchChan():
			tio.onSignal()
		}
	}
	// bwrap is gone. Make sure nothing of the sandbox survives it: its pid 1
	// dies with bwrap (--die-with-parent), and the kernel kills the rest of
	// the pid namespace before pid 1 is gone.
	if nsCh != nil {
		select {
		case ns = <-nsCh:
		case <-time.After(5 * time.Second):
		}
	}
	if ns != nil {
		ns.kill() // no-op if already dead; covers a bwrap killed from outside
		ns.waitGone(5 * time.Second)
		ns.close()
	}
	if cg != nil {
		cg.kill()
	}
	res.End = time.Now()
	if tio != nil {
		tio.finish()
	}
	if pio != nil {
		pio.finish()
	}
	started := false
	select {
	case started = <-startedCh:
	case <-time.After(2 * time.Second):
	}

	switch {
	case timedOut:
		res.TimedOut = true
		res.ExitCode = 124
		res.Signal = syscall.SIGTERM
		if forced {
			res.Signal = syscall.SIGKILL
		}
		return res, nil
	case interrupted != 0:
		res.Interrupted = interrupted
		res.Signal = interrupted
		res.ExitCode = 128 + int(interrupted)
		return res, nil
	case ctxErr != nil:
		res.Signal = syscall.SIGKILL
		res.ExitCode = 128 + int(syscall.SIGKILL)
		return res, ctxErr
	}
	if wr.err != nil && !wr.ws.Exited() && !wr.ws.Signaled() {
		res.ExitCode = 125
		return res, fmt.Errorf("wait for bwrap: %w", wr.err)
	}
	if !started {
		res.ExitCode = 125
		if gone := p.vanished(); gone != "" {
			return res, fmt.Errorf("%w: %s (another art mount or a daemon ended meanwhile)", ErrCoveredPathGone, gone)
		}
		return res, setupError(p, cfg, wr.ws)
	}
	select {
	case err := <-tmpfsErr:
		if err != nil {
			// The shim ran nothing.
			res.ExitCode = 125
			return res, fmt.Errorf("%w (--tmp-size 0 leaves them the kernel's default size, half of the host's memory each)", err)
		}
	default:
	}
	switch {
	case wr.ws.Exited():
		res.ExitCode = wr.ws.ExitStatus()
		if n := res.ExitCode - 128; n > 0 && n < 65 {
			res.Signal = syscall.Signal(n)
		}
	case wr.ws.Signaled():
		res.Signal = wr.ws.Signal()
		res.ExitCode = 128 + int(res.Signal)
	}
	return res, nil
}

// defaultStarter starts bwrap from a thread of its own in a Landlock
// domain (ScopeThread), and waits for it there: the thread must live as
// long as bwrap, whose parent-death signal (Pdeathsig) fires when the
// thread that started it ends.
func defaultStarter(cmd *exec.Cmd) (func() (syscall.WaitStatus, error), error) {
	started := make(chan error, 1)
	type ended struct {
		ws  syscall.WaitStatus
		err error
	}
	done := make(chan ended, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if _, err := ScopeThread(cmd.Path); err != nil {
			started <- fmt.Errorf("scope the sandbox: %w", err)
			return
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		err := cmd.Wait()
		if cmd.ProcessState == nil {
			done <- ended{0, err}
			return
		}
		// I/O copy errors and ErrWaitDelay do not change how it ended.
		done <- ended{cmd.ProcessState.Sys().(syscall.WaitStatus), nil}
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return func() (syscall.WaitStatus, error) {
		e := <-done
		return e.ws, e.err
	}, nil
}

// ErrCoveredPathGone is a setup that failed because a host path the
// sandbox covers (another art mount, a host daemon's socket) went away
// between art's look at the host and bwrap's mounts, milliseconds apart:
// bwrap cannot make the mount point again on the read-only root. Running
// again covers what is there then.
var ErrCoveredPathGone = errors.New("a path the sandbox covers went away while bwrap set it up")

// setupError explains a sandbox that bwrap could not set up.
func setupError(p *plan, cfg Config, ws syscall.WaitStatus) error {
	how := fmt.Sprintf("exit status %d", ws.ExitStatus())
	if ws.Signaled() {
		how = "signal " + ws.Signal().String()
	}
	msg := fmt.Sprintf("bwrap could not set up the sandbox (%s; its own message is printed above)", how)
	if p.id.switchTo {
		paths := []string{p.home}
		for _, b := range p.binds {
			paths = append(paths, b.Host)
		}
		for _, path := range paths {
			if why := unreachable(path, p.id); why != "" {
				return fmt.Errorf("%s: %s; the agent runs as host user %s (uid %d), so make the path reachable for it (e.g. chmod o+x on the parent directories) or choose another user", msg, why, p.id.name, p.id.uid)
			}
		}
	}
	return fmt.Errorf("%s; check that bwrap works here: bwrap --ro-bind / / true", msg)
}

// unreachable gives a reason when, going by mode bits, uid/gid cannot reach
// path (search permission on every directory on the way). ACLs are ignored,
// so it is only used to explain a failure, never to predict one.
func unreachable(path string, id identity) string {
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(path), "/"), "/")
	cur := "/"
	for i := 0; i <= len(parts); i++ {
		var st syscall.Stat_t
		if err := syscall.Stat(cur, &st); err != nil {
			return ""
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			if st.Mode&id.searchBit(st) == 0 {
				return fmt.Sprintf("%s (mode %04o, owner %d:%d) cannot be searched by uid %d", cur, st.Mode&0o7777, st.Uid, st.Gid, id.uid)
			}
		}
		if i < len(parts) && parts[i] != "" {
			cur = filepath.Join(cur, parts[i])
		}
	}
	return ""
}

// nsWatch follows the sandbox's pid 1 (bwrap's child in the new pid
// namespace). When it is gone, every process of the sandbox is gone.
type nsWatch struct {
	pid   int
	pidfd int
}

// watchNamespace reads bwrap's --info-fd JSON and opens a pidfd on the
// sandbox's pid 1. It returns nil if bwrap wrote nothing (setup failed
// before the namespace existed).
func watchNamespace(r io.Reader) *nsWatch {
	dec := json.NewDecoder(r)
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := dec.Decode(&info); err != nil || info.ChildPid <= 0 {
		return nil
	}
	fd, err := unix.PidfdOpen(info.ChildPid, 0)
	if err != nil {
		return nil // already gone
	}
	return &nsWatch{pid: info.ChildPid, pidfd: fd}
}

// killGrace bounds how long a stop waits for bwrap to name the sandbox's
// pid 1 before it kills bwrap anyway.
const killGrace = 5 * time.Second

// StopGrace is how long the sandbox's processes have to end on their own
// once art stops the sandbox (a signal to art, --timeout), before SIGKILL.
const StopGrace = 2 * time.Second

// signalSandbox sends sig to every process of the sandbox's pid namespace
// but its pid 1 (bwrap's, whose death would SIGKILL the rest at once):
// the processes of the namespace are found by their /proc/PID/ns/pid.
func signalSandbox(n *nsWatch, sig syscall.Signal) {
	var nsSt unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(n.pid)+"/ns/pid", &nsSt) != nil {
		return
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == n.pid {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+e.Name()+"/ns/pid", &st) == nil && st.Dev == nsSt.Dev && st.Ino == nsSt.Ino {
			_ = unix.Kill(pid, sig)
		}
	}
}

// alive reports whether the sandbox's pid 1 has not exited.
func (n *nsWatch) alive() bool {
	return unix.PidfdSendSignal(n.pidfd, 0, nil, 0) == nil
}

func (n *nsWatch) kill() {
	_ = unix.PidfdSendSignal(n.pidfd, unix.SIGKILL, nil, 0)
}

// waitGone waits until pid 1 of the sandbox has exited.
func (n *nsWatch) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(n.pidfd), Events: unix.POLLIN}}
		k, err := unix.Poll(fds, int(left/time.Millisecond)+1)
		if err == unix.EINTR {
			continue
		}
		return err == nil && k > 0
	}
}

func (n *nsWatch) close() { unix.Close(n.pidfd) }

// closeInheritedFDs marks descriptors this process inherited without
// close-on-exec (Go opens everything with it) as close-on-exec, so that
// neither bwrap nor the agent inherits them. Run passes its own descriptors
// explicitly (stdio and ExtraFiles are duplicated for the child).
func closeInheritedFDs() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC)
		}
	}
}

// keepRunningOnStop keeps art running on SIGTSTP (Ctrl-Z on the terminal a
// non-interactive run passes through) and says why, until the returned
// function is called. The sandbox has a session of its own, out of job
// control's reach: stopping art alone left the agent running, reading
// what the user typed at the shell and writing to the terminal, past
// --timeout (art's timer stopped with it) until fg.
func keepRunningOnStop(w io.Writer) func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTSTP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				if w != nil {
					fmt.Fprintln(w, "art: the sandbox cannot be stopped (Ctrl-Z): it runs in a session of its own, which job control does not reach; Ctrl-C ends it")
				}
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}
