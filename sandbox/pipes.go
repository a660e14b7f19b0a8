package sandbox

import (
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pipeIO gives the sandbox real file descriptors for non-interactive stdio.
// *os.File values are passed through as they are; other readers and writers
// are connected through pipes that Run copies itself, so that a Starter
// never has to wait for exec.Cmd's copying goroutines.
type pipeIO struct {
	childStdin, childStdout, childStderr *os.File

	childEnds  []*os.File // closed in the parent once the child started
	parentEnds []*os.File // closed when Run is done
	copies     []func()
	outWG      sync.WaitGroup
	closeOnce  sync.Once
	// Terminals passed through as they are: their settings, restored
	// when Run is done (the agent may turn echo off, say, and die).
	ttys []savedTTY
	// Files passed through as they are: their status flags (O_NONBLOCK,
	// O_APPEND, O_ASYNC), which belong to the open file description the
	// caller shares, restored when Run is done. An agent's O_NONBLOCK on
	// the user's terminal made the shell's next read fail with EAGAIN.
	flags []savedFlags
}

type savedFlags struct{ fd, flags int }

// saveFlags records the status flags of f, once per descriptor.
func (p *pipeIO) saveFlags(f *os.File) {
	fd := int(f.Fd())
	for _, s := range p.flags {
		if s.fd == fd {
			return
		}
	}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		p.flags = append(p.flags, savedFlags{fd, fl})
	}
}

type savedTTY struct {
	fd      int
	termios *unix.Termios
	winsize *unix.Winsize // nil if unknown
	excl    int           // TIOCGEXCL: exclusive mode was on
	ldisc   int           // TIOCGETD: the line discipline (-1 if unknown)
}

// saveTTY records the settings of f if it is a terminal not yet saved.
func (p *pipeIO) saveTTY(f *os.File) {
	fd := int(f.Fd())
	for _, t := range p.ttys {
		if t.fd == fd {
			return
		}
	}
	if t, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
		s := savedTTY{fd: fd, termios: t}
		if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
			s.winsize = ws
		}
		s.excl, _ = unix.IoctlGetInt(fd, unix.TIOCGEXCL)
		if s.ldisc, err = unix.IoctlGetInt(fd, unix.TIOCGETD); err != nil {
			s.ldisc = -1
		}
		p.ttys = append(p.ttys, s)
	}
}

func newPipeIO(stdio Stdio) (*pipeIO, error) {
	p := &pipeIO{}
	switch in := stdio.Stdin.(type) {
	case nil:
	case *os.File:
		if inBackground(in) {
			// art runs in the background of its terminal (art run -i=false
			// ... &): a program of the job reading the terminal would be
			// stopped (SIGTTIN), but the agent has a session of its own,
			// out of job control's reach, and read what the user typed
			// at the shell meanwhile, passwords included. It reads
			// /dev/null instead, as nohup's and ssh -n's commands do.
			null, err := os.Open(os.DevNull)
			if err != nil {
				return nil, err
			}
			p.childStdin = null
			p.childEnds = append(p.childEnds, null)
			break
		}
		if passThrough(in) || regular(in) && readOnly(in) {
			p.childStdin = in
			p.saveTTY(in)
			p.saveFlags(in)
			break
		}
		// A file opened for writing too (art run <> file), or a
		// directory (art run < / gave the agent the host's root through
		// /proc/self/fd/0, hidden paths and all, to write as its user):
		// the agent reads it through a pipe.
		if err := p.pipeIn(in); err != nil {
			return nil, err
		}
	default:
		if err := p.pipeIn(in); err != nil {
			return nil, err
		}
	}
	var outFile *os.File // an output file given to the child, and its pipe
	var outPipe *os.File
	out := func(dst io.Writer) (*os.File, error) {
		switch d := dst.(type) {
		case nil:
			return nil, nil
		case *os.File:
			if passThrough(d) {
				p.saveTTY(d)
				p.saveFlags(d)
				return d, nil
			}
			// A file (art run > log): the agent writes through a pipe,
			// one for stdout and stderr when they are the same file
			// (> log 2>&1), so that their order holds.
			if outFile != nil && sameFile(outFile, d) {
				return outPipe, nil
			}
			defer func() { outFile = d }()
		}
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		p.childEnds = append(p.childEnds, w)
		p.parentEnds = append(p.parentEnds, r)
		p.outWG.Add(1)
		p.copies = append(p.copies, func() {
			defer p.outWG.Done()
			if _, err := io.Copy(dst, r); err != nil {
				// The output cannot be written (a full disk, a closed
				// pipe): the agent gets EPIPE, as it would writing there
				// itself, instead of blocking on a full pipe for ever.
				r.Close()
			}
		})
		outPipe = w
		return w, nil
	}
	var err error
	if p.childStdout, err = out(stdio.Stdout); err != nil {
		p.close()
		return nil, err
	}
	if p.childStderr, err = out(stdio.Stderr); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// pipeIn gives the child a pipe as stdin, fed from in.
func (p *pipeIO) pipeIn(in io.Reader) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	p.childStdin = r
	p.childEnds = append(p.childEnds, r)
	p.parentEnds = append(p.parentEnds, w)
	p.copies = append(p.copies, func() {
		_, _ = io.Copy(w, in)
		w.Close()
	})
	return nil
}

// passThrough reports whether f may be handed to the agent as it is: a
// terminal or another character device (/dev/null), a pipe or a socket.
// An open file description is shared with whoever holds it, and one of a
// file lets the agent do more than write its output: ftruncate(1, 0) of
// art run >> host.log emptied the caller's file, pwrite wrote anywhere in
// it, and fallocate could punch holes. Such output goes through a pipe.
func passThrough(f *os.File) bool {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return false
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR, unix.S_IFIFO, unix.S_IFSOCK:
		return true
	}
	return false
}

// inBackground reports whether f is this process's controlling terminal
// and another process group than this process's is in its foreground.
func inBackground(f *os.File) bool {
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp != unix.Getpgrp()
}

// regular reports whether f is a regular file.
func regular(f *os.File) bool {
	var st unix.Stat_t
	return unix.Fstat(int(f.Fd()), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

// readOnly reports whether f was opened for reading only.
func readOnly(f *os.File) bool {
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	return err == nil && fl&unix.O_ACCMODE == unix.O_RDONLY
}

// sameFile reports whether a and b are the same open file description
// (> log 2>&1, not > log 2> log), as kcmp(2) tells.
func sameFile(a, b *os.File) bool {
	const kcmpFile = 0 // KCMP_FILE
	pid := uintptr(os.Getpid())
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, pid, pid, kcmpFile, a.Fd(), b.Fd(), 0)
	return errno == 0 && r == 0
}

// start runs the copies once the child holds its ends.
func (p *pipeIO) start() {
	for _, f := range p.childEnds {
		f.Close()
	}
	p.childEnds = nil
	for _, c := range p.copies {
		go c()
	}
}

// finish waits (bounded) for the output copies; the sandbox is gone, so
// they end as soon as the pipes are drained.
func (p *pipeIO) finish() {
	done := make(chan struct{})
	go func() { p.outWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
}

func (p *pipeIO) close() {
	p.closeOnce.Do(func() {
		if len(p.ttys) > 0 {
			// Changing a terminal from a background process group (art
			// run with '&') raises SIGTTOU, which would stop art: it is
			// ignored meanwhile, as shells do, so the terminal is put
			// back in the background too.
			signal.Ignore(syscall.SIGTTOU)
			defer signal.Reset(syscall.SIGTTOU)
		}
		for _, t := range p.ttys {
			// Only what changed.
			if cur, err := unix.IoctlGetTermios(t.fd, unix.TCGETS); err == nil && *cur != *t.termios {
				_ = unix.IoctlSetTermios(t.fd, unix.TCSETS, t.termios)
			}
			if t.winsize != nil {
				if cur, err := unix.IoctlGetWinsize(t.fd, unix.TIOCGWINSZ); err == nil && *cur != *t.winsize {
					_ = unix.IoctlSetWinsize(t.fd, unix.TIOCSWINSZ, t.winsize)
				}
			}
			if excl, err := unix.IoctlGetInt(t.fd, unix.TIOCGEXCL); err == nil && excl != 0 && t.excl == 0 {
				_ = unix.IoctlSetInt(t.fd, unix.TIOCNXCL, 0)
			}
			// TIOCSETD needs no privilege: an agent switching the
			// terminal to N_NULL would leave it discarding everything.
			if ld, err := unix.IoctlGetInt(t.fd, unix.TIOCGETD); err == nil && t.ldisc >= 0 && ld != t.ldisc {
				_ = unix.IoctlSetPointerInt(t.fd, unix.TIOCSETD, t.ldisc)
			}
			// Output the agent stopped (tcflow TCOOFF) would hang the
			// user's terminal and art's own last message: resume it.
			_ = unix.IoctlSetInt(t.fd, unix.TCXONC, unix.TCOON)
		}
		for _, s := range p.flags {
			if cur, err := unix.FcntlInt(uintptr(s.fd), unix.F_GETFL, 0); err == nil && cur != s.flags {
				_, _ = unix.FcntlInt(uintptr(s.fd), unix.F_SETFL, s.flags)
			}
		}
		for _, f := range p.childEnds {
			f.Close()
		}
		for _, f := range p.parentEnds {
			f.Close()
		}
	})
}
