//go:build linux

package tracer

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

type flagName struct {
	bits uint64
	name string
}

// formatFlags renders v as NAME|NAME|0x.. using names, in order; entries
// covering several bits come first so that they win over their parts.
func formatFlags(v uint64, names []flagName, zero string) string {
	if v == 0 {
		if zero != "" {
			return zero
		}
		return "0"
	}
	var b strings.Builder
	for _, f := range names {
		if f.bits != 0 && v&f.bits == f.bits {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(f.name)
			v &^= f.bits
		}
	}
	if v != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString("0x")
		b.WriteString(strconv.FormatUint(v, 16))
	}
	return b.String()
}

var openFlagNames = []flagName{
	{unix.O_TMPFILE, "O_TMPFILE"},
	{unix.O_SYNC, "O_SYNC"},
	{unix.O_CREAT, "O_CREAT"},
	{unix.O_EXCL, "O_EXCL"},
	{unix.O_NOCTTY, "O_NOCTTY"},
	{unix.O_TRUNC, "O_TRUNC"},
	{unix.O_APPEND, "O_APPEND"},
	{unix.O_NONBLOCK, "O_NONBLOCK"},
	{unix.O_DSYNC, "O_DSYNC"},
	{unix.O_ASYNC, "O_ASYNC"},
	{unix.O_DIRECT, "O_DIRECT"},
	{oLargefile, "O_LARGEFILE"},
	{unix.O_DIRECTORY, "O_DIRECTORY"},
	{unix.O_NOFOLLOW, "O_NOFOLLOW"},
	{unix.O_NOATIME, "O_NOATIME"},
	{unix.O_CLOEXEC, "O_CLOEXEC"},
	{unix.O_PATH, "O_PATH"},
}

// formatOpenFlags renders open(2) flags the way strace does:
// O_WRONLY|O_CREAT|O_TRUNC.
func formatOpenFlags(v uint64) string {
	acc := [...]string{"O_RDONLY", "O_WRONLY", "O_RDWR", "O_ACCMODE"}[v&unix.O_ACCMODE]
	rest := v &^ unix.O_ACCMODE
	if rest == 0 {
		return acc
	}
	return acc + "|" + formatFlags(rest, openFlagNames, "")
}

// isWriteOpen reports whether open flags request write access or may
// modify the file (O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND, O_TMPFILE).
func isWriteOpen(flags uint64) bool {
	return flags&unix.O_ACCMODE != unix.O_RDONLY ||
		flags&(unix.O_CREAT|unix.O_TRUNC|unix.O_APPEND) != 0 ||
		flags&unix.O_TMPFILE == unix.O_TMPFILE
}

var atFlagNames = []flagName{
	{unix.AT_SYMLINK_NOFOLLOW, "AT_SYMLINK_NOFOLLOW"},
	{unix.AT_REMOVEDIR, "AT_REMOVEDIR"},
	{unix.AT_SYMLINK_FOLLOW, "AT_SYMLINK_FOLLOW"},
	{unix.AT_NO_AUTOMOUNT, "AT_NO_AUTOMOUNT"},
	{unix.AT_EMPTY_PATH, "AT_EMPTY_PATH"},
	{unix.AT_STATX_FORCE_SYNC, "AT_STATX_FORCE_SYNC"},
	{unix.AT_STATX_DONT_SYNC, "AT_STATX_DONT_SYNC"},
	{unix.AT_RECURSIVE, "AT_RECURSIVE"},
}

var accessAtFlagNames = []flagName{
	{unix.AT_SYMLINK_NOFOLLOW, "AT_SYMLINK_NOFOLLOW"},
	{unix.AT_EACCESS, "AT_EACCESS"},
	{unix.AT_EMPTY_PATH, "AT_EMPTY_PATH"},
}

var accessModeNames = []flagName{
	{unix.R_OK, "R_OK"},
	{unix.W_OK, "W_OK"},
	{unix.X_OK, "X_OK"},
}

var renameFlagNames = []flagName{
	{unix.RENAME_NOREPLACE, "RENAME_NOREPLACE"},
	{unix.RENAME_EXCHANGE, "RENAME_EXCHANGE"},
	{unix.RENAME_WHITEOUT, "RENAME_WHITEOUT"},
}

var resolveFlagNames = []flagName{
	{unix.RESOLVE_NO_XDEV, "RESOLVE_NO_XDEV"},
	{unix.RESOLVE_NO_MAGICLINKS, "RESOLVE_NO_MAGICLINKS"},
	{unix.RESOLVE_NO_SYMLINKS, "RESOLVE_NO_SYMLINKS"},
	{unix.RESOLVE_BENEATH, "RESOLVE_BENEATH"},
	{unix.RESOLVE_IN_ROOT, "RESOLVE_IN_ROOT"},
	{0x20, "RESOLVE_CACHED"},
}

// formatMode renders a file mode: file type name (for mknod) and octal
// permission bits.
func formatMode(v uint64) string {
	var typ string
	switch v & unix.S_IFMT {
	case unix.S_IFREG:
		typ = "S_IFREG|"
	case unix.S_IFCHR:
		typ = "S_IFCHR|"
	case unix.S_IFBLK:
		typ = "S_IFBLK|"
	case unix.S_IFIFO:
		typ = "S_IFIFO|"
	case unix.S_IFSOCK:
		typ = "S_IFSOCK|"
	case unix.S_IFDIR:
		typ = "S_IFDIR|"
	case unix.S_IFLNK:
		typ = "S_IFLNK|"
	}
	return typ + "0" + strconv.FormatUint(v&^unix.S_IFMT, 8)
}

var familyNames = map[uint64]string{
	unix.AF_UNSPEC:    "AF_UNSPEC",
	unix.AF_UNIX:      "AF_UNIX",
	unix.AF_INET:      "AF_INET",
	unix.AF_INET6:     "AF_INET6",
	unix.AF_NETLINK:   "AF_NETLINK",
	unix.AF_PACKET:    "AF_PACKET",
	unix.AF_VSOCK:     "AF_VSOCK",
	unix.AF_ALG:       "AF_ALG",
	unix.AF_BLUETOOTH: "AF_BLUETOOTH",
}

func familyName(f uint64) string {
	if n, ok := familyNames[f]; ok {
		return n
	}
	return strconv.FormatUint(f, 10)
}

var sockTypeNames = map[uint64]string{
	unix.SOCK_STREAM:    "SOCK_STREAM",
	unix.SOCK_DGRAM:     "SOCK_DGRAM",
	unix.SOCK_RAW:       "SOCK_RAW",
	unix.SOCK_SEQPACKET: "SOCK_SEQPACKET",
	unix.SOCK_RDM:       "SOCK_RDM",
	unix.SOCK_PACKET:    "SOCK_PACKET",
}

func formatSockType(v uint64) string {
	t, ok := sockTypeNames[v&0xf]
	if !ok {
		t = strconv.FormatUint(v&0xf, 10)
	}
	if rest := v &^ 0xf; rest != 0 {
		t += "|" + formatFlags(rest, []flagName{
			{unix.SOCK_NONBLOCK, "SOCK_NONBLOCK"}, {unix.SOCK_CLOEXEC, "SOCK_CLOEXEC"},
		}, "")
	}
	return t
}

// errnoName returns the symbolic name of errno e ("ENOENT"), including the
// kernel-internal restart codes a tracer can observe (ERESTARTSYS...).
func errnoName(e int) string {
	switch e {
	case 512:
		return "ERESTARTSYS"
	case 513:
		return "ERESTARTNOINTR"
	case 514:
		return "ERESTARTNOHAND"
	case 515:
		return "ENOIOCTLCMD"
	case 516:
		return "ERESTART_RESTARTBLOCK"
	}
	if n := unix.ErrnoName(unix.Errno(e)); n != "" {
		return n
	}
	return "E" + strconv.Itoa(e)
}

// errnoText is the strerror text of errno e for the strace-like log.
func errnoText(e int) string {
	switch e {
	case 512, 513, 514, 516:
		return "To be restarted"
	case 515:
		return "Unknown ioctl command"
	}
	t := unix.Errno(e).Error()
	if t != "" && t[0] >= 'a' && t[0] <= 'z' {
		t = string(t[0]-'a'+'A') + t[1:]
	}
	return t
}

// signalName returns "SIGKILL" for 9, or "SIG<n>" for unnamed signals.
func signalName(sig int) string {
	if n := unix.SignalName(unix.Signal(sig)); n != "" {
		return n
	}
	if sig >= 34 && sig <= 64 {
		return "SIGRT_" + strconv.Itoa(sig-34)
	}
	return "SIG" + strconv.Itoa(sig)
}
