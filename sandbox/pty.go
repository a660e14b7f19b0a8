package sandbox

import (
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// ptyIO connects the caller's stdio with a fresh pty for an interactive run.
type ptyIO struct {
	ptmx, tty *os.File
	ttyName   string // the pty's slave, opened again to see it drained (sendEOF)
	stdin     io.Reader
	stdout    io.Writer

	termFile *os.File    // the caller's terminal (stdin or stdout), if any
	rawFd    int         // fd put in raw mode, -1 if none
	rawState *term.State // to restore
	winch    chan os.Signal
	modes    *termModes // what the output switched on in the caller's terminal, if it is one

	stopR, stopW *os.File      // wakes the stdin pump from its poll(2)
	stop         chan struct{} // closed when input stops: ends the EOF retries
	stopOnce     sync.Once
	inDone       chan struct{} // stdin pump finished
	outDone      chan struct{} // pty output copy finished
	closeOnce    sync.Once
}

func newPtyIO(stdio Stdio) (*ptyIO, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	t := &ptyIO{ptmx: ptmx, tty: tty, ttyName: tty.Name(), stdin: stdio.Stdin, stdout: stdio.Stdout, rawFd: -1, stop: make(chan struct{})}
	if t.stdout == nil {
		t.stdout = io.Discard
	}
	if f, ok := stdio.Stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		t.termFile = f
	} else if f, ok := stdio.Stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		t.termFile = f
	}
	if f, ok := stdio.Stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		t.modes = &termModes{}
	}
	if t.termFile != nil {
		// Notified first, then sized: a resize in between is not lost.
		t.winch = make(chan os.Signal, 1)
		signal.Notify(t.winch, syscall.SIGWINCH)
		_ = pty.InheritSize(t.termFile, ptmx)
	}
	if f, ok := stdio.Stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		st, err := term.MakeRaw(int(f.Fd()))
		if err != nil {
			t.close()
			return nil, err
		}
		t.rawFd, t.rawState = int(f.Fd()), st
		// Stopped (kill -STOP, or -TSTP: Ctrl-Z is the agent's in raw
		// mode), art finds its terminal as the shell left it when fg
		// continues it: cooked, echoing every key a second time, and
		// Ctrl-C ended the session instead of reaching the agent.
		signal.Notify(t.winch, syscall.SIGCONT)
	}
	return t, nil
}

// winchChan is nil (blocks forever) when there is nothing to resize from.
// It also carries SIGCONT when art put the terminal in raw mode: pass what
// it receives to onSignal.
func (t *ptyIO) winchChan() <-chan os.Signal {
	if t == nil {
		return nil
	}
	return t.winch
}

func (t *ptyIO) resize() {
	if t.termFile != nil {
		_ = pty.InheritSize(t.termFile, t.ptmx)
	}
}

// onSignal handles what winchChan delivers: the window's size, and, on
// SIGCONT, raw mode again (the shell restored its own modes when art was
// stopped; in the background, tcsetattr stops art again with SIGTTOU,
// as it does vim, until fg) and the size the window took meanwhile.
//
// Any signal checks the modes, not only SIGCONT: the two share a channel
// of one, so a SIGCONT that came while a SIGWINCH waited there was
// dropped, and that SIGWINCH now finds the terminal cooked. Reading the
// modes (tcgetattr) never stops a background process; only setting them
// does, so raw mode is set only when the modes are not raw.
func (t *ptyIO) onSignal() {
	if t.rawState != nil && !isRaw(t.rawFd) {
		_, _ = term.MakeRaw(t.rawFd)
	}
	t.resize()
}

// isRaw reports whether terminal fd neither echoes nor edits lines (as
// term.MakeRaw leaves it); true when it cannot be read.
func isRaw(fd int) bool {
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err != nil || tio.Lflag&(unix.ICANON|unix.ECHO) == 0
}

// start begins copying once the child holds the pty.
func (t *ptyIO) start() {
	t.outDone = make(chan struct{})
	go func() {
		defer close(t.outDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := t.ptmx.Read(buf)
			if n > 0 {
				if t.modes != nil {
					t.modes.Write(buf[:n])
				}
				if _, werr := t.stdout.Write(buf[:n]); werr != nil {
					// Nobody reads art's output any more (art run | head):
					// hang the terminal up, as a closed terminal does, so
					// that the agent gets SIGHUP and EIO instead of
					// writing, unread, forever.
					t.ptmx.Close()
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	t.inDone = make(chan struct{})
	if t.stdin == nil {
		close(t.inDone)
		return
	}
	if f, ok := t.stdin.(*os.File); ok {
		r, w, err := os.Pipe()
		if err == nil {
			t.stopR, t.stopW = r, w
			go t.pumpFile(f)
			return
		}
	}
	go func() {
		defer close(t.inDone)
		if _, err := io.Copy(t.ptmx, t.stdin); err == nil {
			t.sendEOF()
		}
	}()
}

// pumpFile copies stdin to the pty with poll(2), so that it can be stopped
// without leaving a reader behind that would swallow the caller's next
// keystrokes, and without changing the file's blocking mode.
func (t *ptyIO) pumpFile(f *os.File) {
	defer close(t.inDone)
	fd := int(f.Fd())
	buf := make([]byte, 32*1024)
	for {
		fds := []unix.PollFd{
			{Fd: int32(fd), Events: unix.POLLIN},
			{Fd: int32(t.stopR.Fd()), Events: unix.POLLIN},
		}
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) == 0 {
			continue
		}
		n, err := unix.Read(fd, buf)
		if n > 0 {
			if _, werr := t.ptmx.Write(buf[:n]); werr != nil {
				return
			}
			continue
		}
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err == nil { // end of input
			t.sendEOFs()
		}
		return
	}
}

// sendEOFs passes the end of the caller's input on, again every second
// until the session ends, as a user would press Ctrl-D again: an EOF that
// ends a partial line only sends it, and one that reaches a shell while it
// runs a command, in canonical mode, arrives after its line editor left
// that mode, as a NUL (script(1) hangs on both).
func (t *ptyIO) sendEOFs() {
	for {
		t.sendEOF()
		select {
		case <-t.stop:
			return
		case <-time.After(time.Second):
		}
	}
}

// sendEOF passes the end of the caller's input on as the pty's EOF
// character, once the command has read what came before it, as script(1)
// does: written at once, it reached a shell before its line editor took
// the terminal out of canonical mode, which made it a NUL, and a shell fed
// from a pipe with -i never ended. Waiting is bounded (2 s).
func (t *ptyIO) sendEOF() {
	if t.ttyName != "" {
		if fd, err := unix.Open(t.ttyName, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
		wait:
			for tries := 0; tries < 20; tries++ {
				fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
				if n, _ := unix.Poll(fds, 10); n != 1 {
					break // nothing left for the command to read
				}
				select {
				case <-t.stop:
					break wait
				case <-time.After(100 * time.Millisecond):
				}
			}
			unix.Close(fd)
		}
	}
	select {
	case <-t.stop:
		return // the session ended while the command still had input
	default:
	}
	// Through the raw connection, not Fd(): the pty may be closed by now
	// (close does not wait for a reader that is not a file), and Control
	// holds the descriptor open while it runs, or fails once it is closed.
	rc, err := t.ptmx.SyscallConn()
	if err != nil {
		return
	}
	// A full input queue refuses the byte (EAGAIN), which is tried again
	// while the command reads (bounded, 2 s), not inside Control, which
	// would hold close up. The pty is in blocking mode (creack/pty's
	// ioctls call Fd(), which sets it so): a write to a full queue waited
	// there, past the session's end, for a command that no longer read.
	// poll(2) without a timeout says whether the byte goes in now.
	for tries := 0; tries < 200; tries++ {
		var werr error
		if rc.Control(func(fd uintptr) {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			if n, err := unix.Poll(pfd, 0); err != nil || n != 1 {
				werr = unix.EAGAIN // full (or interrupted): again
				return
			} else if pfd[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
				werr = unix.EIO // the command's side is closed
				return
			} else if pfd[0].Revents&unix.POLLOUT == 0 {
				werr = unix.EAGAIN
				return
			}
			c := byte(4)
			if tio, err := unix.IoctlGetTermios(int(fd), unix.TCGETS); err == nil && tio.Lflag&unix.ICANON != 0 && tio.Cc[unix.VEOF] != 0 {
				c = tio.Cc[unix.VEOF]
			}
			_, werr = unix.Write(int(fd), []byte{c})
		}) != nil || werr != unix.EAGAIN {
			return
		}
		select {
		case <-t.stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// finish drains the pty output after the sandbox is gone, switches off
// the terminal modes it left on (termModes) and stops input.
func (t *ptyIO) finish() {
	if t.outDone != nil {
		select {
		case <-t.outDone:
			if t.modes != nil {
				if r := t.modes.reset(); len(r) > 0 {
					_, _ = t.stdout.Write(r)
				}
			}
		case <-time.After(2 * time.Second):
		}
	}
	t.stopInput()
}

func (t *ptyIO) stopInput() {
	t.stopOnce.Do(func() { close(t.stop) })
	if t.stopW != nil {
		_, _ = t.stopW.Write([]byte{0})
		if t.inDone != nil {
			deadline := time.After(time.Second)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-t.inDone:
					return
				case <-deadline:
					return
				case <-tick.C:
					t.flushInput()
				}
			}
		}
	}
}

// flushInput discards what the command left unread in the pty's input
// queue; called once the sandbox is gone. A pump whose write waits for
// room in that queue (the user typed ahead of an agent that never read
// it) was not woken by the command's side closing (the kernel wakes it
// before it counts the close), and stopInput waited its second out on
// each of its two calls: the session's end came 2 s late. Freed, the
// write returns and the pump sees the stop.
func (t *ptyIO) flushInput() {
	if t.ttyName == "" {
		return
	}
	fd, err := unix.Open(t.ttyName, unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	_ = unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH)
	unix.Close(fd)
}

// close releases everything and restores the caller's terminal. Safe to
// call more than once and on every exit path.
func (t *ptyIO) close() {
	t.closeOnce.Do(func() {
		t.stopInput()
		if t.rawState != nil {
			_ = term.Restore(t.rawFd, t.rawState)
		}
		if t.winch != nil {
			signal.Stop(t.winch)
		}
		_ = t.tty.Close()
		_ = t.ptmx.Close()
		if t.stopR != nil {
			// The pump polls stopR until it returns: close the pipe only
			// then, or its poll would race with the close.
			stopR, stopW, inDone := t.stopR, t.stopW, t.inDone
			release := func() { stopR.Close(); stopW.Close() }
			if inDone == nil {
				release()
			} else {
				go func() { <-inDone; release() }()
			}
		}
	})
}
