//go:build linux

package tracer

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Summary condenses a trace into what a reviewer of an agent session wants
// to know. Path lists are sorted and hold each path once; renames, execs and
// connects are in trace order. Paths are absolute where the tracer could
// resolve them (Arg.Abs), else as the program passed them. Only successful
// calls count as reads, writes, creations, renames and deletions.
type Summary struct {
	Read     []string       `json:"read"`           // opened read-only (not O_PATH, not O_DIRECTORY)
	Written  []string       `json:"written"`        // opened with write flags (O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND), creat, truncate
	Created  []string       `json:"created"`        // new directory entries: files, dirs, links, nodes
	Renamed  []Rename       `json:"renamed"`        // rename, renameat, renameat2
	Deleted  []string       `json:"deleted"`        // unlink, unlinkat, rmdir
	Execs    []Exec         `json:"execs"`          // programs executed
	Connects []Connect      `json:"connects"`       // connect attempts, failed ones too
	Syscalls []SyscallCount `json:"syscalls"`       // per syscall, sorted by name
	Exit     *ExitStatus    `json:"exit,omitempty"` // of the first process of the trace
}

// Rename is one successful rename.
type Rename struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Exec is one program execution.
type Exec struct {
	Pid   int      `json:"pid"`
	NSPid int      `json:"nspid,omitempty"`
	Path  string   `json:"path"`
	Argv  []string `json:"argv"`
}

// Connect is one connect(2) attempt.
type Connect struct {
	Pid     int    `json:"pid"`
	Family  string `json:"family"`
	Address string `json:"address"` // "127.0.0.1:80", "[::1]:80", "/run/socket", "@abstract"
	Result  string `json:"result"`  // "ok", "in progress" (EINPROGRESS) or the errno name
}

// SyscallCount counts calls of one syscall.
type SyscallCount struct {
	Name   string         `json:"name"`
	Calls  int            `json:"calls"`
	Errors int            `json:"errors"`
	Errnos map[string]int `json:"errnos,omitempty"` // errno name -> count
}

// ExitStatus is how the first process of the trace ended.
type ExitStatus struct {
	Pid    int    `json:"pid"`
	Status int    `json:"status"`
	Signal string `json:"signal,omitempty"`
}

// Summarize condenses events (as recorded by Run or read by ReadJSON).
func Summarize(events []Event) Summary {
	z := NewSummarizer()
	for i := range events {
		z.Add(&events[i])
	}
	return z.Summary()
}

// Summarizer condenses events one at a time (EachJSON), holding only the
// summary: Summarize of a whole log held the log (3.5 GB for an agent's
// 8,000 traced execs of 63 KB of arguments each).
type Summarizer struct {
	s                               Summary
	read, written, created, deleted set
	counts                          map[string]*SyscallCount
	root                            int
	started                         bool
}

// NewSummarizer returns an empty Summarizer.
func NewSummarizer() *Summarizer {
	return &Summarizer{
		s: Summary{
			Read: []string{}, Written: []string{}, Created: []string{}, Renamed: []Rename{},
			Deleted: []string{}, Execs: []Exec{}, Connects: []Connect{}, Syscalls: []SyscallCount{},
		},
		read: set{}, written: set{}, created: set{}, deleted: set{},
		counts: map[string]*SyscallCount{},
	}
}

// maxExecArgv bounds the argument bytes a summary keeps of one exec; the
// rest is cut, marked with how much was left out.
const maxExecArgv = 4 << 10

// summaryArgv is argv cut to maxExecArgv bytes.
func summaryArgv(argv []string) []string {
	total := 0
	for i, a := range argv {
		if total+len(a) > maxExecArgv {
			rest := 0
			for _, b := range argv[i:] {
				rest += len(b)
			}
			cut := append([]string(nil), argv[:i]...)
			if room := maxExecArgv - total; room > 0 {
				// A copy: a[:room] alone kept all of a (up to 64 KiB
				// per exec) alive.
				cut = append(cut, strings.Clone(a[:room]))
			}
			return append(cut, fmt.Sprintf("…(%d more bytes)", rest-max(maxExecArgv-total, 0)))
		}
		total += len(a)
	}
	return argv
}

// Add takes one event into the summary.
func (z *Summarizer) Add(e *Event) {
	s := &z.s
	read, written, created, deleted, counts := z.read, z.written, z.created, z.deleted, z.counts
	if !z.started {
		z.started = true
		z.root = e.Pid
	}
	root := z.root
	switch e.Kind {
	case KindExec:
		argv := summaryArgv(e.Argv)
		if e.ArgvTrunc && len(argv) == len(e.Argv) {
			argv = append(argv[:len(argv):len(argv)], "…(more arguments not recorded)")
		}
		s.Execs = append(s.Execs, Exec{Pid: e.Pid, NSPid: e.NSPid, Path: e.Path, Argv: argv})
		return
	case KindExit:
		if e.Pid == root && s.Exit == nil {
			s.Exit = &ExitStatus{Pid: e.Pid, Status: e.Status, Signal: e.Signal}
		}
		return
	case KindSyscall:
	default:
		return
	}
	c := counts[e.Syscall]
	if c == nil {
		c = &SyscallCount{Name: e.Syscall}
		counts[e.Syscall] = c
	}
	c.Calls++
	if e.Errno != "" {
		c.Errors++
		if c.Errnos == nil {
			c.Errnos = map[string]int{}
		}
		c.Errnos[e.Errno]++
	}
	sp := specFor(e.Syscall)
	if sp == nil {
		return
	}
	if sp.class == cConnect {
		if a := e.arg(ArgSockaddr, 0); a != nil && a.Addr != nil {
			res := "ok"
			switch {
			case e.Unfinished:
				res = "unfinished"
			case e.Errno == "EINPROGRESS":
				res = "in progress"
			case e.Errno != "":
				res = e.Errno
			}
			s.Connects = append(s.Connects, Connect{Pid: e.Pid, Family: a.Addr.Family, Address: a.Addr.String(), Result: res})
		}
		return
	}
	if e.Errno != "" || e.Unfinished {
		return
	}
	p0, p1 := e.arg(ArgPath, 0), e.arg(ArgPath, 1)
	switch sp.class {
	case cOpen:
		fl, ok := e.openFlags()
		if p0 == nil || !ok {
			break
		}
		switch {
		case isWriteOpen(fl):
			written.add(p0.path())
		case fl&unix.O_PATH != 0 || fl&unix.O_DIRECTORY != 0:
		default:
			read.add(p0.path())
		}
	case cCreat, cTruncate:
		if p0 != nil {
			written.add(p0.path())
		}
	case cRename:
		if p0 != nil && p1 != nil {
			s.Renamed = append(s.Renamed, Rename{From: p0.path(), To: p1.path()})
		}
	case cUnlink:
		if p0 != nil {
			deleted.add(p0.path())
		}
	}
	if e.Created {
		// The created entry is the last path argument (link targets,
		// symlink contents are not paths of this call).
		last := p1
		if last == nil {
			last = p0
		}
		if last != nil {
			created.add(last.path())
		}
	}
}

// Summary returns the summary of the events added so far.
func (z *Summarizer) Summary() Summary {
	s := z.s
	s.Read, s.Written, s.Created, s.Deleted = z.read.sorted(), z.written.sorted(), z.created.sorted(), z.deleted.sorted()
	s.Syscalls = []SyscallCount{}
	for _, c := range z.counts {
		s.Syscalls = append(s.Syscalls, *c)
	}
	sort.Slice(s.Syscalls, func(i, j int) bool { return s.Syscalls[i].Name < s.Syscalls[j].Name })
	return s
}

// arg returns the n-th (0-based) argument of type t, or nil.
func (e *Event) arg(t ArgType, n int) *Arg {
	for i := range e.Args {
		if e.Args[i].Type == t {
			if n == 0 {
				return &e.Args[i]
			}
			n--
		}
	}
	return nil
}

// openFlags returns the open flags of an open, openat or openat2 event.
func (e *Event) openFlags() (uint64, bool) {
	if a := e.arg(ArgOpenFlag, 0); a != nil {
		return uint64(a.Raw), true
	}
	if a := e.arg(ArgOpenHow, 0); a != nil {
		for _, s := range a.Sub {
			if s.Type == ArgOpenFlag {
				return uint64(s.Raw), true
			}
		}
	}
	return 0, false
}

// path is the absolute path when known, else the path as passed.
func (a *Arg) path() string {
	if a.Abs != "" {
		return a.Abs
	}
	if a.Err != "" {
		return "<" + a.Err + " 0x" + strconv.FormatUint(uint64(a.Raw), 16) + ">"
	}
	return a.Str
}

type set map[string]bool

func (s set) add(p string) { s[p] = true }

func (s set) sorted() []string {
	out := make([]string, 0, len(s))
	for p := range s {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
