package cmd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
	"github.com/artproject/art/sandbox"
	"github.com/artproject/art/tracer"
)

// sessionTrace is the tracing of one art run: the strace-like text log
// (--trace-log, default stderr) and, in overlay mode, the JSON-lines log
// kept in a temporary file until it is stored in the repository.
type sessionTrace struct {
	opts     tracer.Options
	textFile *os.File // nil when the text log goes to stderr
	text     *bufio.Writer
	jsonFile *os.File
	json     *bufio.Writer
	filter   []byte // the seccomp program handed to the sandbox
	result   tracer.Result
	textErr  error  // why the text log is incomplete, once flushed
	logPath  string // --trace-log, "" for stderr
	// logCreated is the --trace-log file art created, removed again if
	// the sandbox never starts; started says it did.
	logCreated string
	started    bool
	logDone    chan struct{} // closed once the text log is flushed (watchLog)
	// ownEnd tells watchLog the session ended on its own (neither
	// --timeout nor a signal): its timeout no longer gives the log up.
	ownEnd    chan struct{}
	watchGone chan struct{} // closed when watchLog's goroutine returns
}

// logGrace is how long the text log may still take to be written once
// bwrap, the traced sandbox's first process, has ended after a stop
// (--timeout, a signal to art): see watchLog.
var logGrace = 5 * time.Second

// syscallNamesHint ends an unknown-syscall error with where the names
// are listed.
const syscallNamesHint = "; give Linux syscall names as strace -e takes them (man 2 syscalls lists them), comma-separated"

// newSessionTrace validates the trace flags; it creates nothing on error.
//
// writable are the host directories the sandbox may write (read-write
// binds): the log is never opened through a link there.
func newSessionTrace(o *runOptions, stderr io.Writer, keepJSON bool, writable []string) (*sessionTrace, error) {
	if !o.trace && (o.traceLog != "" || o.traceCalls != "" || o.callsGiven) {
		o.trace = true // --trace-log or --trace-syscalls imply --trace, as in ART
	}
	if !o.trace {
		return nil, nil
	}
	st := &sessionTrace{}
	var names []string
	if o.traceCalls != "" || o.callsGiven {
		names = strings.Split(o.traceCalls, ",")
		for i := range names {
			names[i] = strings.TrimSpace(names[i])
		}
		nrs, err := tracer.Lookup(names)
		if err != nil {
			return nil, fmt.Errorf("--trace-syscalls: %w%s", err, syscallNamesHint)
		}
		if len(nrs) == 0 {
			// "" ran untraced and "," traced no syscall at all, without
			// a word.
			return nil, fmt.Errorf("--trace-syscalls %q names no syscall%s (--trace alone traces every one)", o.traceCalls, syscallNamesHint)
		}
		st.opts.Syscalls = names
	}
	// A filter in every traced run: it stops only the named syscalls (if
	// any), and refuses the clones that would leave the trace.
	prog, err := tracer.SeccompFilter(names)
	if err != nil {
		return nil, fmt.Errorf("--trace-syscalls: %w", err)
	}
	st.filter = prog
	if o.traceLog != "" {
		dir := filepath.Dir(o.traceLog)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			st.close()
			return nil, fmt.Errorf("--trace-log %s: directory %s does not exist (create it first)", o.traceLog, dir)
		}
		f, created, err := openLog(o.traceLog, o.dir, writable...)
		if err != nil {
			st.close()
			return nil, fmt.Errorf("--trace-log: %w", err)
		}
		st.textFile = f
		if created {
			st.logCreated = f.Name()
		}
		st.logPath = o.traceLog
		st.text = bufio.NewWriterSize(f, 256<<10)
	} else if f := reopenStderr(stderr); f != nil {
		st.textFile = f
		st.text = bufio.NewWriterSize(f, 64<<10)
	} else {
		st.text = bufio.NewWriterSize(stderr, 64<<10)
	}
	st.opts.Text = st.text
	if keepJSON {
		f, err := os.CreateTemp("", "art-trace-")
		if err != nil {
			st.close()
			return nil, err
		}
		os.Remove(f.Name()) // anonymous: gone with the process, whatever happens
		st.jsonFile = f
		st.json = bufio.NewWriterSize(f, 256<<10)
		st.opts.JSON = st.json
	}
	return st, nil
}

// apply makes the sandbox start bwrap under the tracer.
func (st *sessionTrace) apply(cfg *sandbox.Config) {
	cfg.Seccomp = st.filter
	timeout := cfg.Timeout
	cfg.Starter = func(cmd *exec.Cmd) (func() (syscall.WaitStatus, error), error) {
		// The sandbox starts: the log of a session before gives way.
		st.started = true
		if st.textFile != nil && st.logPath != "" {
			if err := truncateLog(st.textFile, st.logPath); err != nil {
				return nil, fmt.Errorf("--trace-log: %w", err)
			}
		}
		started := make(chan struct{})
		done := make(chan error, 1)
		opts := st.opts
		opts.OnStart = func(p *os.Process) {
			st.watchLog(p.Pid, timeout)
			close(started)
		}
		opts.BeforeStart = func() error { // as sandbox.Run's own starter
			if _, err := sandbox.ScopeThread(cmd.Path); err != nil {
				return fmt.Errorf("scope the sandbox: %w", err)
			}
			return nil
		}
		go func() {
			res, err := tracer.Run(cmd, opts)
			st.result = res
			done <- err
		}()
		select {
		case <-started:
		case err := <-done:
			if err == nil {
				err = errors.New("tracer ended before the sandbox started")
			}
			return nil, err
		}
		return func() (syscall.WaitStatus, error) {
			err := <-done
			r := st.result
			if r.Signal != 0 {
				ws := syscall.WaitStatus(r.Signal)
				if r.Core {
					ws |= 0x80
				}
				return ws, err
			}
			return syscall.WaitStatus(uint32(r.ExitCode&0xff) << 8), err
		}, nil
	}
}

// watchLog bounds how long a text log going to a fifo, pipe or terminal
// (a file art could open non-blocking) may hold art up once the sandbox
// is ending: a reader that stopped reading held the tracer in its write,
// and so art, for ever, past --timeout and Ctrl-C. Once bwrap (pid) has
// ended after a stop (--timeout, or a signal to art), what is not written
// within logGrace is given up; a signal to art once bwrap has ended gives
// it up at once. A session that ends on its own waits for its reader, as
// any writer to a pipe does (art run --trace 2>&1 | less).
func (st *sessionTrace) watchLog(pid int, timeout time.Duration) {
	if st.textFile == nil {
		return
	}
	// Not Fd(): it would make the file blocking, and deadlines moot.
	if fi, err := st.textFile.Stat(); err != nil || fi.Mode().IsRegular() {
		return
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	exited := make(chan struct{})
	go func() {
		defer unix.Close(pidfd)
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != unix.EINTR {
				break
			}
		}
		close(exited)
	}()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, endSignals...)
	st.logDone = make(chan struct{})
	done := st.logDone
	st.ownEnd, st.watchGone = make(chan struct{}), make(chan struct{})
	ownEnd, gone := st.ownEnd, st.watchGone
	go func() {
		defer close(gone)
		defer signal.Stop(sigs)
		var timer <-chan time.Time
		if timeout > 0 {
			timer = time.After(timeout)
		}
		stopping, ended, graced := false, false, false
		for {
			select {
			case <-done:
				return
			case <-ownEnd:
				// sandbox.Run returned (bwrap is gone) without a
				// timeout or signal: a timer that fired since, as the
				// log was still being written, gives nothing up.
				ownEnd, timer, stopping, ended = nil, nil, false, true
				if graced {
					st.textFile.SetWriteDeadline(time.Time{})
					graced = false
				}
			case <-timer:
				timer, stopping = nil, true
			case <-sigs:
				if ended {
					st.textFile.SetWriteDeadline(time.Now())
					return
				}
				stopping = true
			case <-exited:
				exited, ended = nil, true
			}
			if ended && stopping {
				st.textFile.SetWriteDeadline(time.Now().Add(logGrace))
				stopping, graced = false, true // once; a signal still cuts it short
			}
		}
	}()
}

// reopenStderr opens art's stderr anew, non-blocking, when it is a pipe or
// fifo, so that a write to it can be given up (boundLogAfter): its reader
// may stop reading. The open file description is art's own: the user's
// stays blocking. nil when stderr is not such a file.
func reopenStderr(stderr io.Writer) *os.File {
	if stderr != io.Writer(os.Stderr) {
		return nil
	}
	var s unix.Stat_t
	if unix.Fstat(2, &s) != nil || s.Mode&unix.S_IFMT != unix.S_IFIFO {
		return nil
	}
	fd, err := unix.Open("/proc/self/fd/2", unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "/dev/stderr")
}

// flushText flushes the text log; one that could not be written in full
// is in st.textErr.
func (st *sessionTrace) flushText() {
	if st.text == nil {
		return
	}
	if err := st.text.Flush(); err != nil && st.textErr == nil {
		st.textErr = err
		if errors.Is(err, os.ErrDeadlineExceeded) {
			st.textErr = errors.New("its reader did not read it when the session was ended")
		}
	}
}

// finish flushes the logs; the JSON log is returned for storage.
func (st *sessionTrace) finish() (io.Reader, error) {
	st.flushText()
	if st.json == nil {
		return nil, nil
	}
	if err := st.json.Flush(); err != nil {
		return nil, fmt.Errorf("trace log: %w", err)
	}
	if _, err := st.jsonFile.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return st.jsonFile, nil
}

// endWatch ends watchLog's watch.
func (st *sessionTrace) endWatch() {
	if st.logDone != nil {
		close(st.logDone)
		st.logDone = nil
	}
}

func (st *sessionTrace) close() {
	if st == nil {
		return
	}
	st.endWatch()
	if !st.started && st.logCreated != "" && st.textFile != nil {
		removeCreatedLog(st.textFile) // refused before the sandbox started
	}
	for _, f := range []*os.File{st.textFile, st.jsonFile} {
		if f != nil {
			f.Close()
		}
	}
}

// attachTrace stores the session's log in tx, the transaction of the
// commit that names it, inside a savepoint: a log that cannot be stored
// is given up alone (lost says why), unless storing it ended the whole
// transaction (SQLite rolls back by itself on a full disk), which err
// reports: the caller must then not go on with tx, whose later statements
// would each commit on their own (a branch at a commit whose trees were
// rolled back, the worktree deleted).
func attachTrace(tx *repo.Tx, store func(*repo.Tx) (*objects.ID, error)) (id *objects.ID, lost, err error) {
	if _, err := tx.Exec(`SAVEPOINT trace`); err != nil {
		return nil, nil, fmt.Errorf("store the syscall log: %w", err)
	}
	id, lost = store(tx)
	if lost != nil {
		if _, err := tx.Exec(`ROLLBACK TO trace`); err != nil {
			return nil, lost, fmt.Errorf("store the syscall log: %w (the transaction ended: %v)", lost, err)
		}
		id = nil
	}
	if _, err := tx.Exec(`RELEASE trace`); err != nil {
		return nil, lost, fmt.Errorf("store the syscall log: %w", err)
	}
	return id, lost, nil
}

// storeTrace stores the session's JSON-lines log in tx, the transaction
// of the commit that names it.
func storeTrace(tx *repo.Tx, st *sessionTrace) (*objects.ID, error) {
	rd, err := st.finish()
	if err != nil || rd == nil {
		return nil, err
	}
	id, _, err := tx.PutFile(rd)
	if err != nil {
		return nil, err
	}
	return &id, nil
}

// createLog creates (or truncates) the file art writes a log to, never
// through a symbolic link inside the workspace, where the agent's pulled
// work can put links (one named like the log, pointing at /etc/shadow,
// had root truncate that); links elsewhere are the user's (/dev/stderr).
// Only a regular file is truncated; a fifo without a reader is refused.
//
// So too inside writable, the host directories of read-write binds.
func createLog(path, workspace string, writable ...string) (*os.File, error) {
	f, _, err := openLog(path, workspace, writable...)
	if err != nil {
		return nil, err
	}
	if err := truncateLog(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// truncateLog empties the log f opened by openLog, if a regular file.
func truncateLog(f *os.File, path string) error {
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// openLog is createLog without the truncation, which art does once the
// sandbox starts (an art run refused for bad input, a bind's guest path,
// emptied the log of the session before); created says the file is new.
func openLog(path, workspace string, writable ...string) (f *os.File, created bool, err error) {
	real, err := sandbox.ResolveAvoidingAgentLinks(path, workspace, writable, true)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	return openResolvedLog(path, real)
}

// openResolvedLog opens real, what openLog resolved path to.
func openResolvedLog(path, real string) (f *os.File, created bool, err error) {
	flags := unix.O_WRONLY | unix.O_NONBLOCK | unix.O_CLOEXEC
	open := unix.Open
	if !strings.HasPrefix(real, "/proc/") { // /dev/stderr and the like are magic links
		flags |= unix.O_NOFOLLOW
		// real has no link left in it: opened following none, so that
		// an agent running meanwhile (a session before, in the same
		// read-write bind or direct-mode workspace) cannot swap one of
		// its directories for a link between the check and the open.
		open = openNoLinks
	}
	fd, err := open(real, flags|unix.O_CREAT|unix.O_EXCL, 0o644)
	created = err == nil
	if errors.Is(err, unix.EEXIST) {
		fd, err = open(real, flags, 0)
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, false, fmt.Errorf("%s: a directory on its path became a symbolic link while art opened it; use the real path", path)
	}
	if errors.Is(err, unix.ENXIO) { // a fifo without a reader
		return nil, false, fmt.Errorf("%s is a fifo nobody reads; write the log elsewhere", path)
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	f = os.NewFile(uintptr(fd), real)
	fi, err := f.Stat()
	if err != nil || fi.IsDir() {
		f.Close()
		return nil, false, fmt.Errorf("%s is a directory; name a file", path)
	}
	if fi.Mode().IsRegular() {
		if err := unix.SetNonblock(fd, false); err != nil {
			f.Close()
			return nil, false, err
		}
		return f, created, nil
	}
	// A fifo, pipe or terminal stays non-blocking, in art's own open file
	// description, and is written through Go's poller (os.NewFile of a
	// non-blocking descriptor), so that a write its reader holds up can
	// be given up (boundLogAfter).
	return f, created, nil
}

// removeCreatedLog removes the log file f art created, through its
// directory opened following no link, and only while its name there
// still leads to f: a directory on its path that an agent running
// meanwhile swapped for a link had art remove a file of that name
// elsewhere.
func removeCreatedLog(f *os.File) {
	dir, name := filepath.Split(f.Name())
	dfd, err := openNoLinks(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(dfd)
	var named, opened unix.Stat_t
	if unix.Fstatat(dfd, name, &named, unix.AT_SYMLINK_NOFOLLOW) != nil || unix.Fstat(int(f.Fd()), &opened) != nil ||
		named.Dev != opened.Dev || named.Ino != opened.Ino {
		return
	}
	unix.Unlinkat(dfd, name, 0)
}

// openNoLinks is open(2) that follows no symbolic link anywhere in path
// (openat2 RESOLVE_NO_SYMLINKS); a kernel without openat2 (before 5.6)
// opens as open(2) does.
func openNoLinks(path string, flags int, mode uint32) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: uint64(flags), Mode: uint64(mode), Resolve: unix.RESOLVE_NO_SYMLINKS})
	if errors.Is(err, unix.ENOSYS) {
		return unix.Open(path, flags, mode)
	}
	return fd, err
}

// warnTextLog says when the text log (--trace-log, or stderr) is
// incomplete: a full disk, /dev/full, a reader that stopped reading. It
// used to end short without a word. res is the session's sandbox.Run
// result: one that ended on its own (neither timed out nor interrupted)
// waits for the log's reader even once its --timeout has passed, which
// gave up the log of a session done long before it.
func (st *sessionTrace) warnTextLog(stderr io.Writer, res sandbox.Result) {
	if st == nil {
		return
	}
	if !res.TimedOut && res.Interrupted == 0 && st.ownEnd != nil {
		select {
		case st.ownEnd <- struct{}{}:
		case <-st.watchGone:
		}
	}
	st.flushText()
	st.endWatch()
	if st.textErr == nil {
		return
	}
	where, nl := "the syscall log on stderr", "\n" // its last line may be cut
	if st.logPath != "" {
		where, nl = "--trace-log "+st.logPath, ""
	}
	fmt.Fprintf(stderr, "%sart: warning: %s is incomplete: %s\n", nl, repo.EscapeControls(where), repo.EscapeControls(st.textErr.Error()))
}
