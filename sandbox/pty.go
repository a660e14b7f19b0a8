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
	stdin     io.Reader
	stdout    io.Writer

	termFile *os.File    // the caller's terminal (stdin or stdout), if any
	rawFd    int         // fd put in raw mode, -1 if none
	rawState *term.State // to restore
	winch    chan os.Signal

	stopR, stopW *os.File      // wakes the stdin pump
	inDone       chan struct{} // stdin pump finished
	outDone      chan struct{} // pty output copy finished
	closeOnce    sync.Once
}

func newPtyIO(stdio Stdio) (*ptyIO, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	t := &ptyIO{ptmx: ptmx, tty: tty, stdin: stdio.Stdin, stdout: stdio.Stdout, rawFd: -1}
	if t.stdout == nil {
		t.stdout = io.Discard
	}
	if f, ok := stdio.Stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		t.termFile = f
	} else if f, ok := stdio.Stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		t.termFile = f
	}
	if t.termFile != nil {
		_ = pty.InheritSize(t.termFile, ptmx)
		t.winch = make(chan os.Signal, 1)
		signal.Notify(t.winch, syscall.SIGWINCH)
	}
	if f, ok := stdio.Stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		st, err := term.MakeRaw(int(f.Fd()))
		if err != nil {
			t.close()
			return nil, err
		}
		t.rawFd, t.rawState = int(f.Fd()), st
	}
	return t, nil
}

// winchChan is nil (blocks forever) when there is nothing to resize from.
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

// start begins copying once the child holds the pty.
func (t *ptyIO) start() {
	t.outDone = make(chan struct{})
	go func() {
		defer close(t.outDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := t.ptmx.Read(buf)
			if n > 0 {
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
			t.sendEOF()
		}
		return
	}
}

// sendEOF passes the end of the caller's input on as the pty's EOF character.
func (t *ptyIO) sendEOF() {
	_, _ = t.ptmx.Write([]byte{4})
}

// finish drains the pty output after the sandbox is gone and stops input.
func (t *ptyIO) finish() {
	if t.outDone != nil {
		select {
		case <-t.outDone:
		case <-time.After(2 * time.Second):
		}
	}
	t.stopInput()
}

func (t *ptyIO) stopInput() {
	if t.stopW != nil {
		_, _ = t.stopW.Write([]byte{0})
		if t.inDone != nil {
			select {
			case <-t.inDone:
			case <-time.After(time.Second):
			}
		}
	}
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
			t.stopR.Close()
			t.stopW.Close()
		}
	})
}
