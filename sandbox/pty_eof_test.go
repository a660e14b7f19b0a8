package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// The end of the caller's input reaches the command even when the pty's
// input queue is full at that moment (the pty refuses the EOF byte with
// EAGAIN, and it is tried again while the command reads), after every
// byte that came before it: raw mode (the EOF a ^D byte) and canonical
// mode, from a pipe (pumpFile) and from a reader that is no file
// (io.Copy). The queue is filled until the pty refuses more (some 64 KiB
// to 640 KiB by kernel), and the command reads it slowly. ttyName is left
// empty: the wait for the command to read what came before (up to 2 s)
// is skipped, so that the queue is full when the EOF is written.
func TestPtyEOFAfterAFullInputQueue(t *testing.T) {
	for _, raw := range []bool{true, false} {
		for _, pipe := range []bool{true, false} {
			t.Run(fmt.Sprintf("raw=%v pipe=%v", raw, pipe), func(t *testing.T) {
				var data []byte
				if raw {
					data = make([]byte, 2<<20)
					for i := range data {
						data[i] = byte('a' + i%23) // no ^D
					}
				} else {
					// Long lines: a canonical read returns one line.
					pad := bytes.Repeat([]byte{'.'}, 2000)
					for i := 0; len(data) < 2<<20; i++ {
						data = fmt.Appendf(data, "line %d %s\n", i, pad)
					}
				}
				ptmx, tty, err := pty.Open()
				if err != nil {
					t.Skipf("no pty: %v", err)
				}
				setTermMode(t, tty, raw)
				// Fill the pty's input queue up to its refusal (EAGAIN),
				// as a caller's input larger than it does, before the end
				// of the input is passed on.
				rc, err := ptmx.SyscallConn()
				if err != nil {
					t.Fatal(err)
				}
				queued := fillPty(t, rc, data)
				if queued == len(data) {
					t.Fatalf("the pty took all %d bytes: its queue never filled", len(data))
				}
				data = data[:queued]
				p := &ptyIO{ptmx: ptmx, tty: tty, stdout: io.Discard, rawFd: -1, stop: make(chan struct{})}
				if pipe {
					r, w, err := os.Pipe()
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					w.Close()
					p.stdin = r
				} else {
					p.stdin = bytes.NewReader(nil)
				}
				p.start()
				defer p.close()
				time.Sleep(50 * time.Millisecond) // the EOF is refused meanwhile

				// The command: reads 4 KiB at a time, with a pause, until
				// the EOF.
				got := make(chan []byte, 1)
				fd := int(tty.Fd())
				go func() {
					var in []byte
					buf := make([]byte, 4096)
					defer func() { p.stopInput() }() // as the session's end does
					for {
						time.Sleep(200 * time.Microsecond)
						n, err := unix.Read(fd, buf)
						if err == unix.EINTR || err == unix.EAGAIN {
							continue
						}
						if err != nil {
							got <- append(in, fmt.Sprintf("<read error %v>", err)...)
							return
						}
						// Canonical: read returns 0 on the empty line an EOF
						// ends, or a last line without its newline that the
						// EOF sent.
						if !raw && (n == 0 || buf[n-1] != '\n') {
							got <- append(in, buf[:n]...)
							return
						}
						if i := bytes.IndexByte(buf[:n], 4); raw && i >= 0 {
							got <- append(in, buf[:i]...)
							return
						}
						in = append(in, buf[:n]...)
					}
				}()
				select {
				case in := <-got:
					if !bytes.Equal(in, data) {
						i := 0
						for i < len(in) && i < len(data) && in[i] == data[i] {
							i++
						}
						t.Fatalf("the command read %d bytes before the EOF, want %d (they differ from byte %d on)", len(in), len(data), i)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("no EOF reached the command")
				}
			})
		}
	}
}

// setTermMode turns echo off on a pty's command side (nobody reads the
// echo here) and, with raw, canonical mode and signals too.
func setTermMode(t *testing.T, tty *os.File, raw bool) {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag &^= unix.ECHO | unix.ECHONL
	if raw {
		tio.Lflag &^= unix.ICANON | unix.ISIG | unix.IEXTEN
		tio.Iflag &^= unix.ICRNL | unix.IXON
		tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 1, 0
	}
	if err := unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
}

// fillPty writes data to the pty master until its input queue refuses
// more, and returns how much went in. The master is left in blocking
// mode, as creack/pty leaves it (its ioctls call Fd()).
func fillPty(t *testing.T, rc syscall.RawConn, data []byte) int {
	t.Helper()
	queued := 0
	var ferr error
	// The line discipline takes what it can from the pty's buffer a
	// moment later: filled again until it takes nothing more.
	for before := -1; queued != before && queued < len(data) && ferr == nil; {
		before = queued
		time.Sleep(20 * time.Millisecond)
		rc.Control(func(fd uintptr) {
			if ferr = unix.SetNonblock(int(fd), true); ferr != nil {
				return
			}
			defer unix.SetNonblock(int(fd), false)
			for queued < len(data) {
				n, err := unix.Write(int(fd), data[queued:min(queued+4096, len(data))])
				if err != nil {
					if err != unix.EAGAIN {
						ferr = err
					}
					return
				}
				queued += n
			}
		})
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	return queued
}

// A command that does not read its input: the EOF, refused by the full
// queue, is given up when the session ends (stop), and within its bound
// meanwhile. The EOF's write blocked on the full queue (the pty is in
// blocking mode), past the session's end: art waited for the input pump a
// second more at the end of every such session, and its goroutine stayed
// blocked until the pty closed.
func TestPtyEOFGivenUpWhenTheCommandDoesNotRead(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer tty.Close()
	defer ptmx.Close()
	setTermMode(t, tty, true) // in canonical mode a line without its end takes input without end
	rc, err := ptmx.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if n := fillPty(t, rc, make([]byte, 4<<20)); n == 4<<20 {
		t.Fatalf("the pty took all of it: its queue never filled")
	}
	p := &ptyIO{ptmx: ptmx, tty: tty, stdout: io.Discard, rawFd: -1, stop: make(chan struct{})}
	done := make(chan struct{})
	go func() { p.sendEOF(); close(done) }()
	time.Sleep(200 * time.Millisecond)
	p.stopOnce.Do(func() { close(p.stop) })
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatalf("the EOF's write still waits for a command that does not read, after the session's end")
	}
}
