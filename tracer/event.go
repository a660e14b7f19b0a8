//go:build linux

package tracer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Kind is the kind of an Event.
type Kind string

// Event kinds.
const (
	KindSyscall Kind = "syscall" // a system call and its result
	KindExec    Kind = "exec"    // a successful execve/execveat: Path, Argv
	KindExit    Kind = "exit"    // a process ended: Status, or Signal if killed
	KindSignal  Kind = "signal"  // a signal was delivered to the task: Signal
	KindFork    Kind = "fork"    // a new process (fork, vfork, clone): Child
	KindThread  Kind = "thread"  // a new thread (clone with CLONE_THREAD): Child
)

// Event is one record of the trace.
//
// JSON encoding (one object per line, field names are stable; fields marked
// "omitted when empty" are absent when zero):
//
//	time        RFC 3339 time with nanoseconds (syscall entry, or the stop)
//	kind        "syscall", "exec", "exit", "signal", "fork", "thread"
//	pid         host thread id of the task
//	nspid       id of the task in its innermost pid namespace, when that is
//	            not the tracer's (omitted when empty)
//	arch        personality when not native: "x32", "i386", "arm" (omitted when empty)
//	syscall     syscall name; "syscall_<nr>" if unknown (kind syscall)
//	nr          syscall number (kind syscall)
//	args        decoded arguments, see Arg (kind syscall)
//	ret         return value (kind syscall)
//	errno       errno name when the syscall failed, e.g. "ENOENT" (omitted when empty)
//	unfinished  true when the syscall never returned: the task exited or was
//	            killed inside it (omitted when false)
//	created     true when the syscall created a new directory entry (omitted when false)
//	child       pid of the new task (kinds fork, thread)
//	child_nspid namespace pid of the new task (omitted when empty)
//	path        executable (kind exec)
//	argv        arguments (kind exec)
//	argv_trunc  true when argv was cut at the size limit (256 arguments,
//	            64 KiB): the program had more (omitted when false)
//	status      exit status (kind exit, without signal)
//	signal      signal name, e.g. "SIGKILL" (kinds exit and signal)
//	core        true when a core was dumped (kind exit, omitted when false)
type Event struct {
	Time       time.Time `json:"time"`
	Kind       Kind      `json:"kind"`
	Pid        int       `json:"pid"`
	NSPid      int       `json:"nspid,omitempty"`
	Arch       string    `json:"arch,omitempty"`
	Syscall    string    `json:"syscall,omitempty"`
	Nr         int       `json:"nr,omitempty"`
	Args       []Arg     `json:"args,omitempty"`
	Ret        int64     `json:"ret,omitempty"`
	Errno      string    `json:"errno,omitempty"`
	Unfinished bool      `json:"unfinished,omitempty"`
	Created    bool      `json:"created,omitempty"`
	Child      int       `json:"child,omitempty"`
	ChildNSPid int       `json:"child_nspid,omitempty"`
	Path       string    `json:"path,omitempty"`
	Argv       []string  `json:"argv,omitempty"`
	ArgvTrunc  bool      `json:"argv_trunc,omitempty"`
	Status     int       `json:"status,omitempty"`
	Signal     string    `json:"signal,omitempty"`
	Core       bool      `json:"core,omitempty"`

	retHex bool // render Ret in hex in the text log (mmap, brk...)
}

// ArgType says how an Arg was decoded.
type ArgType string

// Argument types.
const (
	ArgInt      ArgType = "int"      // signed decimal
	ArgUint     ArgType = "uint"     // unsigned decimal
	ArgHex      ArgType = "hex"      // pointer or undecoded value
	ArgFd       ArgType = "fd"       // file descriptor
	ArgDirfd    ArgType = "dirfd"    // directory fd of *at calls; Str is "AT_FDCWD" for -100
	ArgPath     ArgType = "path"     // path name read from memory: Str, and Abs when resolved
	ArgString   ArgType = "str"      // other string read from memory (symlink target)
	ArgOpenFlag ArgType = "oflags"   // open(2) flags: Str is "O_RDONLY|O_CLOEXEC"
	ArgMode     ArgType = "mode"     // file mode: Str is "0644"
	ArgAtFlags  ArgType = "atflags"  // AT_* flags
	ArgAccess   ArgType = "amode"    // access(2) mode: F_OK, R_OK|W_OK...
	ArgRename   ArgType = "rflags"   // renameat2 flags
	ArgResolve  ArgType = "resolve"  // openat2 RESOLVE_* flags
	ArgArgv     ArgType = "argv"     // string array: List
	ArgSockaddr ArgType = "sockaddr" // socket address: Addr
	ArgOpenHow  ArgType = "open_how" // struct open_how: Sub (flags, mode, resolve)
	ArgSignal   ArgType = "signal"   // signal number: Str is "SIGTERM"
	ArgFamily   ArgType = "family"   // address family: Str is "AF_INET"
	ArgSockType ArgType = "socktype" // socket type: Str is "SOCK_STREAM|SOCK_CLOEXEC"
)

// Arg is one decoded syscall argument.
//
// JSON: type (ArgType), raw (the value: sign-extended from 32 bits for int,
// fd and dirfd; the 64-bit register as a signed number otherwise), and, omitted when empty,
// name (field name, for struct members), str (string, path, or symbolic
// value), abs (path made absolute against the tracee's cwd or dirfd, best
// effort, as seen by the tracer), list (argv), addr (socket address), sub
// (struct members), trunc (string or list cut at the size limit), err (the
// memory could not be read: "EFAULT", "ESRCH"...).
type Arg struct {
	Type  ArgType   `json:"type"`
	Raw   int64     `json:"raw"`
	Name  string    `json:"name,omitempty"`
	Str   string    `json:"str,omitempty"`
	Abs   string    `json:"abs,omitempty"`
	List  []string  `json:"list,omitempty"`
	Addr  *SockAddr `json:"addr,omitempty"`
	Sub   []Arg     `json:"sub,omitempty"`
	Trunc bool      `json:"trunc,omitempty"`
	Err   string    `json:"err,omitempty"`
}

// SockAddr is a decoded socket address.
//
// JSON: family ("AF_INET", "AF_INET6", "AF_UNIX"...), and, omitted when
// empty, addr (IP address), port, path (AF_UNIX; abstract names start with
// "@").
type SockAddr struct {
	Family string `json:"family"`
	Addr   string `json:"addr,omitempty"`
	Port   int    `json:"port,omitempty"`
	Path   string `json:"path,omitempty"`
}

// String renders the address as host:port, [v6]:port or the socket path.
func (a *SockAddr) String() string {
	switch {
	case a.Path != "":
		return a.Path
	case a.Family == "AF_INET6":
		return "[" + a.Addr + "]:" + strconv.Itoa(a.Port)
	case a.Addr != "":
		return a.Addr + ":" + strconv.Itoa(a.Port)
	}
	return a.Family
}

// Failed reports whether a syscall event returned an error.
func (e *Event) Failed() bool { return e.Errno != "" }

// String returns the strace-like text line of e, without newline.
func (e *Event) String() string { return string(e.AppendText(nil)) }

// AppendText appends the strace-like text line of e, without newline:
//
//	[pid 12] openat(AT_FDCWD, "/etc/passwd", O_RDONLY|O_CLOEXEC) = 3
//	[pid 12/1] connect(3, {sa_family=AF_INET, sin_port=htons(1), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 ECONNREFUSED (Connection refused)
//	[pid 12] +++ exited with 3 +++
//
// The pid is the host pid, followed by /nspid when the task lives in
// another pid namespace.
func (e *Event) AppendText(b []byte) []byte {
	b = append(b, "[pid "...)
	b = strconv.AppendInt(b, int64(e.Pid), 10)
	if e.NSPid != 0 && e.NSPid != e.Pid {
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(e.NSPid), 10)
	}
	b = append(b, "] "...)
	if e.Arch != "" {
		b = append(b, '[')
		b = append(b, e.Arch...)
		b = append(b, "] "...)
	}
	switch e.Kind {
	case KindSyscall:
		b = append(b, e.Syscall...)
		b = append(b, '(')
		for i := range e.Args {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = e.Args[i].appendText(b)
		}
		b = append(b, ") = "...)
		switch {
		case e.Unfinished:
			b = append(b, '?')
		case e.Errno != "":
			b = append(b, "-1 "...)
			b = append(b, e.Errno...)
			if n, ok := errnoNumbers()[e.Errno]; ok {
				b = append(b, " ("...)
				b = append(b, errnoText(n)...)
				b = append(b, ')')
			}
		case e.retHex && e.Ret != 0:
			b = append(b, "0x"...)
			b = strconv.AppendUint(b, uint64(e.Ret), 16)
		default:
			b = strconv.AppendInt(b, e.Ret, 10)
		}
	case KindExec:
		b = append(b, "+++ exec "...)
		b = appendQuoted(b, e.Path, false)
		b = append(b, ' ')
		b = appendList(b, e.Argv, e.ArgvTrunc)
		b = append(b, " +++"...)
	case KindExit:
		if e.Signal != "" {
			b = append(b, "+++ killed by "...)
			b = append(b, e.Signal...)
			if e.Core {
				b = append(b, " (core dumped)"...)
			}
			b = append(b, " +++"...)
		} else {
			b = append(b, "+++ exited with "...)
			b = strconv.AppendInt(b, int64(e.Status), 10)
			b = append(b, " +++"...)
		}
	case KindSignal:
		b = append(b, "--- "...)
		b = append(b, e.Signal...)
		b = append(b, " ---"...)
	case KindFork, KindThread:
		b = append(b, "+++ "...)
		b = append(b, e.Kind...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(e.Child), 10)
		if e.ChildNSPid != 0 && e.ChildNSPid != e.Child {
			b = append(b, '/')
			b = strconv.AppendInt(b, int64(e.ChildNSPid), 10)
		}
		b = append(b, " +++"...)
	default:
		b = append(b, "??? "...)
		b = append(b, e.Kind...)
	}
	return b
}

// errnoNumbers maps errno names back to numbers; built on first use.
var errnoNumbers = sync.OnceValue(func() map[string]int {
	m := map[string]int{}
	for i := 1; i < 4096; i++ {
		n := errnoName(i)
		if _, dup := m[n]; !dup && n != "E"+strconv.Itoa(i) {
			m[n] = i
		}
	}
	return m
})

func (a *Arg) appendText(b []byte) []byte {
	if a.Name != "" {
		b = append(b, a.Name...)
		b = append(b, '=')
	}
	if a.Err != "" {
		b = append(b, "0x"...)
		b = strconv.AppendUint(b, uint64(a.Raw), 16)
		b = append(b, " <"...)
		b = append(b, a.Err...)
		return append(b, '>')
	}
	switch a.Type {
	case ArgInt, ArgFd:
		return strconv.AppendInt(b, a.Raw, 10)
	case ArgUint:
		return strconv.AppendUint(b, uint64(a.Raw), 10)
	case ArgDirfd:
		if a.Str != "" {
			return append(b, a.Str...)
		}
		return strconv.AppendInt(b, a.Raw, 10)
	case ArgPath, ArgString:
		if a.Raw == 0 {
			return append(b, "NULL"...)
		}
		return appendQuoted(b, a.Str, a.Trunc)
	case ArgArgv:
		if a.Raw == 0 {
			return append(b, "NULL"...)
		}
		return appendList(b, a.List, a.Trunc)
	case ArgSockaddr:
		if a.Raw == 0 {
			return append(b, "NULL"...)
		}
		if a.Addr == nil {
			break
		}
		return a.Addr.appendText(b)
	case ArgOpenHow:
		if a.Raw == 0 {
			return append(b, "NULL"...)
		}
		if a.Sub == nil {
			break
		}
		b = append(b, '{')
		for i := range a.Sub {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = a.Sub[i].appendText(b)
		}
		return append(b, '}')
	default:
		if a.Str != "" {
			return append(b, a.Str...)
		}
	}
	b = append(b, "0x"...)
	return strconv.AppendUint(b, uint64(a.Raw), 16)
}

func (s *SockAddr) appendText(b []byte) []byte {
	b = append(b, "{sa_family="...)
	b = append(b, s.Family...)
	switch s.Family {
	case "AF_INET":
		b = append(b, ", sin_port=htons("...)
		b = strconv.AppendInt(b, int64(s.Port), 10)
		b = append(b, "), sin_addr=inet_addr("...)
		b = appendQuoted(b, s.Addr, false)
		b = append(b, ')')
	case "AF_INET6":
		b = append(b, ", sin6_port=htons("...)
		b = strconv.AppendInt(b, int64(s.Port), 10)
		b = append(b, "), sin6_addr=inet_pton(AF_INET6, "...)
		b = appendQuoted(b, s.Addr, false)
		b = append(b, ')')
	case "AF_UNIX":
		b = append(b, ", sun_path="...)
		if len(s.Path) > 0 && s.Path[0] == '@' {
			b = append(b, '@')
			b = appendQuoted(b, s.Path[1:], false)
		} else {
			b = appendQuoted(b, s.Path, false)
		}
	}
	return append(b, '}')
}

// appendQuoted appends s as a C-like string literal: printable UTF-8 as is,
// \" \\ \n \t and \xNN for the rest; "..." after it when truncated.
func appendQuoted(b []byte, s string, trunc bool) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			if c == '"' || c == '\\' {
				b = append(b, '\\')
			}
			b = append(b, c)
			i++
			continue
		}
		if c >= 0x80 {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError && strconv.IsPrint(r) {
				b = append(b, s[i:i+n]...)
				i += n
				continue
			}
		}
		switch c {
		case '\n':
			b = append(b, `\n`...)
		case '\t':
			b = append(b, `\t`...)
		case '\r':
			b = append(b, `\r`...)
		default:
			b = append(b, `\x`...)
			b = append(b, hexDigits[c>>4], hexDigits[c&15])
		}
		i++
	}
	b = append(b, '"')
	if trunc {
		b = append(b, "..."...)
	}
	return b
}

const hexDigits = "0123456789abcdef"

func appendList(b []byte, l []string, trunc bool) []byte {
	b = append(b, '[')
	for i, s := range l {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendQuoted(b, s, false)
	}
	if trunc {
		if len(l) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, "..."...)
	}
	return append(b, ']')
}

// AppendJSON appends e as one JSON object (no newline). The output is what
// encoding/json produces for Event, minus the empty fields, but written
// without reflection: this runs for every traced syscall.
func (e *Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","kind":`...)
	b = appendJSONString(b, string(e.Kind))
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(e.Pid), 10)
	b = jsonInt(b, "nspid", int64(e.NSPid))
	b = jsonStr(b, "arch", e.Arch)
	if e.Kind == KindSyscall || e.Syscall != "" {
		b = jsonStr(b, "syscall", e.Syscall)
		b = append(b, `,"nr":`...)
		b = strconv.AppendInt(b, int64(e.Nr), 10)
		if len(e.Args) > 0 {
			b = append(b, `,"args":[`...)
			for i := range e.Args {
				if i > 0 {
					b = append(b, ',')
				}
				b = e.Args[i].appendJSON(b)
			}
			b = append(b, ']')
		}
		b = append(b, `,"ret":`...)
		b = strconv.AppendInt(b, e.Ret, 10)
	} else {
		b = jsonInt(b, "ret", e.Ret)
	}
	b = jsonStr(b, "errno", e.Errno)
	b = jsonBool(b, "unfinished", e.Unfinished)
	b = jsonBool(b, "created", e.Created)
	b = jsonInt(b, "child", int64(e.Child))
	b = jsonInt(b, "child_nspid", int64(e.ChildNSPid))
	b = jsonStr(b, "path", e.Path)
	if len(e.Argv) > 0 {
		b = append(b, `,"argv":`...)
		b = appendJSONList(b, e.Argv)
	}
	b = jsonBool(b, "argv_trunc", e.ArgvTrunc)
	if e.Kind == KindExit && e.Signal == "" {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(e.Status), 10)
	} else {
		b = jsonInt(b, "status", int64(e.Status))
	}
	b = jsonStr(b, "signal", e.Signal)
	b = jsonBool(b, "core", e.Core)
	return append(b, '}')
}

func (a *Arg) appendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = appendJSONString(b, string(a.Type))
	b = append(b, `,"raw":`...)
	b = strconv.AppendInt(b, a.Raw, 10)
	b = jsonStr(b, "name", a.Name)
	b = jsonStr(b, "str", a.Str)
	b = jsonStr(b, "abs", a.Abs)
	if len(a.List) > 0 {
		b = append(b, `,"list":`...)
		b = appendJSONList(b, a.List)
	}
	if a.Addr != nil {
		b = append(b, `,"addr":{"family":`...)
		b = appendJSONString(b, a.Addr.Family)
		b = jsonStr(b, "addr", a.Addr.Addr)
		b = jsonInt(b, "port", int64(a.Addr.Port))
		b = jsonStr(b, "path", a.Addr.Path)
		b = append(b, '}')
	}
	if len(a.Sub) > 0 {
		b = append(b, `,"sub":[`...)
		for i := range a.Sub {
			if i > 0 {
				b = append(b, ',')
			}
			b = a.Sub[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	b = jsonBool(b, "trunc", a.Trunc)
	b = jsonStr(b, "err", a.Err)
	return append(b, '}')
}

func jsonStr(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendJSONString(b, v)
}

func jsonInt(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

func jsonBool(b []byte, key string, v bool) []byte {
	if !v {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	return append(b, `":true`...)
}

func appendJSONList(b []byte, l []string) []byte {
	b = append(b, '[')
	for i, s := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONString appends s as a JSON string the way encoding/json does
// (HTML-safe escapes aside): invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, `\n`...)
			case '\r':
				b = append(b, `\r`...)
			case '\t':
				b = append(b, `\t`...)
			default:
				b = append(b, `\u00`...)
				b = append(b, hexDigits[c>>4], hexDigits[c&15])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&15])
			i += n
			start = i
			continue
		}
		i += n
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// ReadJSON reads events written as JSON lines (Options.JSON) back.
func ReadJSON(r io.Reader) ([]Event, error) {
	var out []Event
	err := EachJSON(r, func(e *Event) error {
		out = append(out, *e)
		return nil
	})
	return out, err
}

// EachJSON reads events written as JSON lines back one at a time, calling
// f with each (valid until f returns) and stopping at f's first error.
// Readers of a log too large to hold (an agent's traced session can write
// gigabytes of arguments) go through it event by event.
func EachJSON(r io.Reader, f func(e *Event) error) error {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	for n := 1; ; n++ {
		var e Event
		err := dec.Decode(&e)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tracer: reading event %d: %w", n, err)
		}
		e.retHex = e.Kind == KindSyscall && retIsHex(e.Syscall)
		if err := f(&e); err != nil {
			return err
		}
	}
}
