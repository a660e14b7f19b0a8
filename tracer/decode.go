//go:build linux

package tracer

import (
	"encoding/binary"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// argKind is how one syscall argument is decoded.
type argKind uint8

const (
	kHex      argKind = iota // raw hex
	kInt                     // int (32-bit, signed)
	kLong                    // long (64-bit, signed)
	kUint                    // size_t, unsigned
	kFd                      // file descriptor
	kDirfd                   // *at directory fd (AT_FDCWD)
	kPath                    // path name
	kPathAbs                 // path name, also resolved to an absolute path
	kStr                     // string (not a path of this process: symlink target)
	kOflags                  // open flags
	kCmode                   // mode, only shown when the preceding flags have O_CREAT or O_TMPFILE
	kMode                    // mode
	kAtflags                 // AT_* flags
	kAccessAt                // faccessat2 flags
	kAmode                   // access mode
	kRename                  // renameat2 flags
	kArgv                    // NULL-terminated string array
	kEnvp                    // environment array: shown as a pointer
	kSockaddr                // struct sockaddr *, length in the next argument
	kOpenHow                 // struct open_how *, size in the next argument
	kSignal                  // signal number
	kFamily                  // address family
	kSockType                // socket type
)

var argKindNames = map[string]argKind{
	"hex": kHex, "int": kInt, "long": kLong, "uint": kUint, "fd": kFd,
	"dirfd": kDirfd, "path": kPath, "path+": kPathAbs, "str": kStr,
	"oflags": kOflags, "cmode": kCmode, "mode": kMode, "atflags": kAtflags,
	"accessat": kAccessAt, "amode": kAmode, "rflags": kRename, "argv": kArgv,
	"envp": kEnvp, "sockaddr": kSockaddr, "openhow": kOpenHow,
	"signal": kSignal, "family": kFamily, "socktype": kSockType,
}

// spec says how to decode one syscall.
type spec struct {
	args   []argKind
	retHex bool      // return value is an address (mmap, brk)
	class  callClass // what the syscall means for Summarize and Created
}

// callClass groups syscalls by effect.
type callClass uint8

const (
	cOther    callClass = iota
	cOpen               // open, openat, openat2: flags decide read or write
	cCreat              // creat
	cMkdir              // mkdir, mkdirat, mknod, mknodat: creates its path
	cLink               // link, linkat, symlink, symlinkat: creates its last path
	cRename             // rename*: from -> to
	cUnlink             // unlink, unlinkat, rmdir
	cTruncate           // truncate
	cExec               // execve, execveat
	cConnect            // connect
)

// specTable lists the decoded syscalls of every personality: argument kinds
// separated by spaces, then optional "=hex" for address results. Syscalls
// not listed are shown with six raw hex arguments.
var specTable = map[string]string{
	"open":              "path+ oflags cmode",
	"openat":            "dirfd path+ oflags cmode",
	"openat2":           "dirfd path+ openhow uint",
	"creat":             "path+ mode",
	"execve":            "path+ argv envp",
	"execveat":          "dirfd path+ argv envp atflags",
	"rename":            "path+ path+",
	"renameat":          "dirfd path+ dirfd path+",
	"renameat2":         "dirfd path+ dirfd path+ rflags",
	"unlink":            "path+",
	"unlinkat":          "dirfd path+ atflags",
	"rmdir":             "path+",
	"mkdir":             "path+ mode",
	"mkdirat":           "dirfd path+ mode",
	"mknod":             "path+ mode hex",
	"mknodat":           "dirfd path+ mode hex",
	"link":              "path+ path+",
	"linkat":            "dirfd path+ dirfd path+ atflags",
	"symlink":           "str path+",
	"symlinkat":         "str dirfd path+",
	"chdir":             "path+",
	"fchdir":            "fd",
	"chroot":            "path+",
	"connect":           "fd sockaddr uint",
	"bind":              "fd sockaddr uint",
	"stat":              "path hex",
	"lstat":             "path hex",
	"stat64":            "path hex",
	"lstat64":           "path hex",
	"fstat":             "fd hex",
	"fstat64":           "fd hex",
	"newfstatat":        "dirfd path hex atflags",
	"fstatat64":         "dirfd path hex atflags",
	"statx":             "dirfd path atflags hex hex",
	"statfs":            "path hex",
	"statfs64":          "path uint hex",
	"fstatfs":           "fd hex",
	"access":            "path amode",
	"faccessat":         "dirfd path amode",
	"faccessat2":        "dirfd path amode accessat",
	"readlink":          "path hex uint",
	"readlinkat":        "dirfd path hex uint",
	"truncate":          "path+ long",
	"truncate64":        "path+ long",
	"ftruncate":         "fd long",
	"chmod":             "path+ mode",
	"fchmod":            "fd mode",
	"fchmodat":          "dirfd path+ mode",
	"fchmodat2":         "dirfd path+ mode atflags",
	"chown":             "path+ int int",
	"lchown":            "path+ int int",
	"fchown":            "fd int int",
	"fchownat":          "dirfd path+ int int atflags",
	"utimensat":         "dirfd path hex atflags",
	"utimes":            "path hex",
	"utime":             "path hex",
	"getcwd":            "hex uint",
	"read":              "fd hex uint",
	"write":             "fd hex uint",
	"pread64":           "fd hex uint long",
	"pwrite64":          "fd hex uint long",
	"readv":             "fd hex int",
	"writev":            "fd hex int",
	"close":             "fd",
	"dup":               "fd",
	"dup2":              "fd fd",
	"dup3":              "fd fd oflags",
	"pipe":              "hex",
	"pipe2":             "hex oflags",
	"lseek":             "fd long int",
	"fcntl":             "fd int hex",
	"ioctl":             "fd hex hex",
	"getdents64":        "fd hex uint",
	"getdents":          "fd hex uint",
	"mmap":              "hex uint hex hex fd hex =hex",
	"mmap2":             "hex uint hex hex fd hex =hex",
	"mremap":            "hex uint uint hex hex =hex",
	"munmap":            "hex uint",
	"mprotect":          "hex uint hex",
	"brk":               "hex =hex",
	"exit":              "int",
	"exit_group":        "int",
	"kill":              "int signal",
	"tkill":             "int signal",
	"tgkill":            "int int signal",
	"wait4":             "int hex hex hex",
	"socket":            "family socktype int",
	"socketpair":        "family socktype int hex",
	"accept":            "fd hex hex",
	"accept4":           "fd hex hex hex",
	"listen":            "fd int",
	"sendto":            "fd hex uint hex sockaddr uint",
	"recvfrom":          "fd hex uint hex hex hex",
	"shutdown":          "fd int",
	"getpid":            "",
	"getppid":           "",
	"gettid":            "",
	"getuid":            "",
	"geteuid":           "",
	"getgid":            "",
	"getegid":           "",
	"getpgrp":           "",
	"setsid":            "",
	"fork":              "",
	"vfork":             "",
	"sched_yield":       "",
	"pause":             "",
	"sync":              "",
	"rt_sigreturn":      "",
	"restart_syscall":   "",
	"umask":             "mode",
	"rt_sigaction":      "signal hex hex uint",
	"rt_sigprocmask":    "int hex hex uint",
	"set_tid_address":   "hex",
	"fsync":             "fd",
	"fdatasync":         "fd",
	"flock":             "fd int",
	"getxattr":          "path str hex uint",
	"lgetxattr":         "path str hex uint",
	"setxattr":          "path+ str hex uint int",
	"lsetxattr":         "path+ str hex uint int",
	"inotify_add_watch": "fd path hex",
	"mount":             "str path+ str hex hex",
	"umount2":           "path+ int",
	"pivot_root":        "path+ path+",
	"swapon":            "path int",
}

var specClasses = map[string]callClass{
	"open": cOpen, "openat": cOpen, "openat2": cOpen, "creat": cCreat,
	"mkdir": cMkdir, "mkdirat": cMkdir, "mknod": cMkdir, "mknodat": cMkdir,
	"link": cLink, "linkat": cLink, "symlink": cLink, "symlinkat": cLink,
	"rename": cRename, "renameat": cRename, "renameat2": cRename,
	"unlink": cUnlink, "unlinkat": cUnlink, "rmdir": cUnlink,
	"truncate": cTruncate, "truncate64": cTruncate,
	"execve": cExec, "execveat": cExec, "connect": cConnect,
}

// specs is specTable parsed on first use; read-only after.
var specs = sync.OnceValue(func() map[string]*spec {
	m := make(map[string]*spec, len(specTable))
	for name, def := range specTable {
		s := &spec{args: []argKind{}, class: specClasses[name]}
		for _, f := range strings.Fields(def) {
			if f == "=hex" {
				s.retHex = true
				continue
			}
			k, ok := argKindNames[f]
			if !ok {
				panic("tracer: bad spec for " + name + ": " + f)
			}
			s.args = append(s.args, k)
		}
		m[name] = s
	}
	return m
})

// specFor returns the decoding spec of syscall name, nil for raw decoding.
func specFor(name string) *spec { return specs()[name] }

func retIsHex(name string) bool {
	s := specFor(name)
	return s != nil && s.retHex
}

// Limits on what is read from a tracee's memory.
const (
	maxPath    = 4096 // PATH_MAX
	maxStr     = 1024
	maxArgs    = 256  // argv entries
	maxArgLen  = 4096 // per argv entry
	maxArgvLen = 64 << 10
)

// decodeArgs fills ev.Args from the raw syscall arguments of task t.
func (tr *tracer) decodeArgs(t *task, p *personality, sp *spec, raw *[6]uint64, ev *Event) {
	if sp == nil {
		ev.Args = t.args[:6]
		for i := range ev.Args {
			ev.Args[i] = Arg{Type: ArgHex, Raw: int64(raw[i])}
		}
		return
	}
	ev.Args = t.args[:len(sp.args)]
	ptrSize := 8
	if p.name != "" {
		ptrSize = 4
	}
	dirfd := int64(unix.AT_FDCWD)
	for i, k := range sp.args {
		r := raw[i]
		a := &ev.Args[i]
		*a = Arg{Type: ArgHex, Raw: int64(r)}
		switch k {
		case kInt:
			a.Type, a.Raw = ArgInt, int64(int32(r))
		case kLong:
			a.Type = ArgInt
			if ptrSize == 4 {
				a.Raw = int64(int32(r))
			}
		case kUint:
			a.Type = ArgUint
		case kFd:
			a.Type, a.Raw = ArgFd, int64(int32(r))
		case kDirfd:
			a.Type, a.Raw = ArgDirfd, int64(int32(r))
			dirfd = a.Raw
			if dirfd == unix.AT_FDCWD {
				a.Str = "AT_FDCWD"
			}
		case kPath, kPathAbs, kStr:
			a.Type = ArgPath
			if k == kStr {
				a.Type = ArgString
			}
			if r == 0 {
				break
			}
			max := maxPath
			if k == kStr {
				max = maxStr
			}
			s, trunc, err := tr.mem.readString(t.pid, r, max)
			a.Str, a.Trunc = s, trunc
			if err != nil {
				a.Err = errName(err)
				break
			}
			if k == kPathAbs && !strings.HasPrefix(s, "/") {
				a.Abs = tr.resolve(t.pid, dirfd, s)
			}
			dirfd = unix.AT_FDCWD
		case kOflags:
			a.Type, a.Str = ArgOpenFlag, formatOpenFlags(r&0xffffffff)
			a.Raw = int64(r & 0xffffffff)
		case kCmode:
			a.Type, a.Str = ArgMode, formatMode(r&0xffffffff)
			a.Raw = int64(r & 0xffffffff)
			if fl := raw[i-1]; i > 0 && fl&unix.O_CREAT == 0 && fl&unix.O_TMPFILE != unix.O_TMPFILE {
				ev.Args = ev.Args[:i] // strace omits the mode without O_CREAT
				return
			}
		case kMode:
			a.Type, a.Str = ArgMode, formatMode(r&0xffffffff)
			a.Raw = int64(r & 0xffffffff)
		case kAtflags:
			a.Type, a.Str = ArgAtFlags, formatFlags(r&0xffffffff, atFlagNames, "0")
			a.Raw = int64(r & 0xffffffff)
		case kAccessAt:
			a.Type, a.Str = ArgAtFlags, formatFlags(r&0xffffffff, accessAtFlagNames, "0")
			a.Raw = int64(r & 0xffffffff)
		case kAmode:
			a.Type, a.Str = ArgAccess, formatFlags(r&0xffffffff, accessModeNames, "F_OK")
			a.Raw = int64(r & 0xffffffff)
		case kRename:
			a.Type, a.Str = ArgRename, formatFlags(r&0xffffffff, renameFlagNames, "0")
			a.Raw = int64(r & 0xffffffff)
		case kArgv:
			a.Type = ArgArgv
			if r == 0 {
				break
			}
			list, trunc, err := tr.mem.readArgv(t.pid, r, ptrSize)
			a.List, a.Trunc = list, trunc
			if err != nil && len(list) == 0 {
				a.Err = errName(err)
			}
		case kEnvp:
		case kSockaddr:
			a.Type = ArgSockaddr
			if r == 0 || i+1 >= len(raw) {
				break
			}
			n := int(uint32(raw[i+1]))
			if n > 128 {
				n = 128
			}
			buf, err := tr.mem.read(t.pid, r, n)
			if err != nil {
				a.Err = errName(err)
				break
			}
			a.Addr = decodeSockaddr(buf)
		case kOpenHow:
			a.Type = ArgOpenHow
			if r == 0 {
				break
			}
			buf, err := tr.mem.read(t.pid, r, 24)
			if err != nil {
				a.Err = errName(err)
				break
			}
			fl := binary.LittleEndian.Uint64(buf[0:])
			mode := binary.LittleEndian.Uint64(buf[8:])
			res := binary.LittleEndian.Uint64(buf[16:])
			a.Sub = []Arg{
				{Name: "flags", Type: ArgOpenFlag, Raw: int64(fl), Str: formatOpenFlags(fl)},
				{Name: "mode", Type: ArgMode, Raw: int64(mode), Str: formatMode(mode)},
				{Name: "resolve", Type: ArgResolve, Raw: int64(res), Str: formatFlags(res, resolveFlagNames, "0")},
			}
		case kSignal:
			a.Type, a.Raw = ArgSignal, int64(r&0xffffffff)
			if a.Raw != 0 {
				a.Str = signalName(int(a.Raw))
			}
		case kFamily:
			a.Type, a.Raw = ArgFamily, int64(r&0xffffffff)
			a.Str = familyName(uint64(a.Raw))
		case kSockType:
			a.Type, a.Raw = ArgSockType, int64(r&0xffffffff)
			a.Str = formatSockType(uint64(a.Raw))
		}
	}
}

// decodeSockaddr decodes a struct sockaddr of any supported family.
func decodeSockaddr(b []byte) *SockAddr {
	if len(b) < 2 {
		return &SockAddr{Family: "AF_UNSPEC"}
	}
	fam := uint64(binary.LittleEndian.Uint16(b))
	sa := &SockAddr{Family: familyName(fam)}
	switch fam {
	case unix.AF_INET:
		if len(b) >= 8 {
			sa.Port = int(binary.BigEndian.Uint16(b[2:]))
			sa.Addr = netip.AddrFrom4([4]byte(b[4:8])).String()
		}
	case unix.AF_INET6:
		if len(b) >= 24 {
			sa.Port = int(binary.BigEndian.Uint16(b[2:]))
			ip := netip.AddrFrom16([16]byte(b[8:24]))
			if len(b) >= 28 {
				if zone := binary.LittleEndian.Uint32(b[24:]); zone != 0 {
					ip = ip.WithZone(strconv.FormatUint(uint64(zone), 10))
				}
			}
			sa.Addr = ip.String()
		}
	case unix.AF_UNIX:
		p := b[2:]
		switch {
		case len(p) == 0:
			sa.Path = "" // unnamed
		case p[0] == 0:
			sa.Path = "@" + string(p[1:]) // abstract: bytes as given
		default:
			if i := indexByte(p, 0); i >= 0 {
				p = p[:i]
			}
			sa.Path = string(p)
		}
	}
	return sa
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// resolve makes the relative path rel absolute against the tracee's cwd
// (dirfd AT_FDCWD) or the directory open as dirfd, as the tracer sees them
// in /proc. It returns "" when that is not possible.
func (tr *tracer) resolve(pid int, dirfd int64, rel string) string {
	b := tr.pathBuf[:0]
	b = append(b, "/proc/"...)
	b = strconv.AppendInt(b, int64(pid), 10)
	if dirfd == unix.AT_FDCWD {
		b = append(b, "/cwd"...)
	} else {
		b = append(b, "/fd/"...)
		b = strconv.AppendInt(b, dirfd, 10)
	}
	tr.pathBuf = b
	n, err := unix.Readlink(string(b), tr.linkBuf[:])
	if err != nil || n == 0 || n == len(tr.linkBuf) || tr.linkBuf[0] != '/' {
		return ""
	}
	base := string(tr.linkBuf[:n])
	if rel == "" {
		return base
	}
	return path.Join(base, rel)
}

// existsInTracee reports whether the path argument (as the tracee would
// resolve it, through /proc/<pid>/{root,cwd,fd/N}) exists.
func (tr *tracer) existsInTracee(pid int, dirfd int64, p string) bool {
	b := tr.pathBuf[:0]
	b = append(b, "/proc/"...)
	b = strconv.AppendInt(b, int64(pid), 10)
	switch {
	case strings.HasPrefix(p, "/"):
		b = append(b, "/root"...)
	case dirfd == unix.AT_FDCWD:
		b = append(b, "/cwd/"...)
	default:
		b = append(b, "/fd/"...)
		b = strconv.AppendInt(b, dirfd, 10)
		b = append(b, '/')
	}
	b = append(b, p...)
	tr.pathBuf = b
	var st unix.Stat_t
	return unix.Stat(string(b), &st) == nil
}

func errName(err error) string {
	if e, ok := err.(unix.Errno); ok {
		return errnoName(int(e))
	}
	return err.Error()
}
