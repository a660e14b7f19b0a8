//go:build linux

package tracer

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// decodeCalls are made by the "decode" helper, in order, in a fresh
// directory that is also its cwd; want is the expected text-log line after
// "[pid N] ", with $RET and $LEN matching any number, $BUF any address and
// $DIR the directory ($DIR and $FD in args: the directory, the last socket).
// Syscalls the architecture lacks (open, creat, rename... on arm64) are
// skipped by both sides.
var decodeCalls = []struct {
	name string
	args []any // string: a C string; []string: an argv; sockaddr; otherwise a number
	want string
}{
	{"openat", []any{unix.AT_FDCWD, "f1", unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL, 0o600}, `openat(AT_FDCWD, "f1", O_WRONLY|O_CREAT|O_EXCL, 0600) = $RET`},
	{"open", []any{"f1", unix.O_RDONLY | unix.O_NOFOLLOW}, `open("f1", O_RDONLY|O_NOFOLLOW) = $RET`},
	{"open", []any{1, unix.O_RDONLY}, `open(0x1 <EFAULT>, O_RDONLY) = -1 EFAULT (Bad address)`},
	{"creat", []any{"f2", 0o644}, `creat("f2", 0644) = $RET`},
	{"openat2", []any{unix.AT_FDCWD, "f1", openHow(unix.O_RDONLY|unix.O_CLOEXEC, 0, unix.RESOLVE_BENEATH), 24}, `openat2(AT_FDCWD, "f1", {flags=O_RDONLY|O_CLOEXEC, mode=00, resolve=RESOLVE_BENEATH}, 24) = $RET`},
	{"openat", []any{unix.AT_FDCWD, "$DIR/f9", unix.O_RDWR | unix.O_CREAT | unix.O_TRUNC | unix.O_APPEND, 0o640}, `openat(AT_FDCWD, "$DIR/f9", O_RDWR|O_CREAT|O_TRUNC|O_APPEND, 0640) = $RET`},
	{"rename", []any{"f2", "f3"}, `rename("f2", "f3") = 0`},
	{"renameat", []any{unix.AT_FDCWD, "f3", unix.AT_FDCWD, "f4"}, `renameat(AT_FDCWD, "f3", AT_FDCWD, "f4") = 0`},
	{"renameat2", []any{unix.AT_FDCWD, "f4", unix.AT_FDCWD, "f1", unix.RENAME_NOREPLACE}, `renameat2(AT_FDCWD, "f4", AT_FDCWD, "f1", RENAME_NOREPLACE) = -1 EEXIST (File exists)`},
	{"link", []any{"f1", "l1"}, `link("f1", "l1") = 0`},
	{"linkat", []any{unix.AT_FDCWD, "f1", unix.AT_FDCWD, "l2", 0}, `linkat(AT_FDCWD, "f1", AT_FDCWD, "l2", 0) = 0`},
	{"symlink", []any{"f1", "s1"}, `symlink("f1", "s1") = 0`},
	{"symlinkat", []any{"/no/such/target", unix.AT_FDCWD, "s2"}, `symlinkat("/no/such/target", AT_FDCWD, "s2") = 0`},
	{"readlink", []any{"s1", buf(), 100}, `readlink("s1", $BUF, 100) = 2`},
	{"readlinkat", []any{unix.AT_FDCWD, "s2", buf(), 100}, `readlinkat(AT_FDCWD, "s2", $BUF, 100) = 15`},
	{"mkdir", []any{"d1", 0o755}, `mkdir("d1", 0755) = 0`},
	{"mkdirat", []any{unix.AT_FDCWD, "d2", 0o700}, `mkdirat(AT_FDCWD, "d2", 0700) = 0`},
	{"rmdir", []any{"d1"}, `rmdir("d1") = 0`},
	{"unlink", []any{"l1"}, `unlink("l1") = 0`},
	{"unlinkat", []any{unix.AT_FDCWD, "d2", unix.AT_REMOVEDIR}, `unlinkat(AT_FDCWD, "d2", AT_REMOVEDIR) = 0`},
	{"unlinkat", []any{unix.AT_FDCWD, "l2", 0}, `unlinkat(AT_FDCWD, "l2", 0) = 0`},
	{"chdir", []any{"nonexistent"}, `chdir("nonexistent") = -1 ENOENT (No such file or directory)`},
	{"stat", []any{"f1", buf()}, `stat("f1", $BUF) = 0`},
	{"lstat", []any{"s1", buf()}, `lstat("s1", $BUF) = 0`},
	{"newfstatat", []any{unix.AT_FDCWD, "s1", buf(), unix.AT_SYMLINK_NOFOLLOW}, `newfstatat(AT_FDCWD, "s1", $BUF, AT_SYMLINK_NOFOLLOW) = 0`},
	{"statx", []any{unix.AT_FDCWD, "f1", unix.AT_STATX_SYNC_AS_STAT, 0x7ff, buf()}, `statx(AT_FDCWD, "f1", 0, 0x7ff, $BUF) = 0`},
	{"access", []any{"f1", unix.R_OK | unix.W_OK}, `access("f1", R_OK|W_OK) = 0`},
	{"faccessat", []any{unix.AT_FDCWD, "missing", unix.F_OK}, `faccessat(AT_FDCWD, "missing", F_OK) = -1 ENOENT (No such file or directory)`},
	{"faccessat2", []any{unix.AT_FDCWD, "f1", unix.R_OK, unix.AT_EACCESS | unix.AT_SYMLINK_NOFOLLOW}, `faccessat2(AT_FDCWD, "f1", R_OK, AT_SYMLINK_NOFOLLOW|AT_EACCESS) = 0`},
	{"truncate", []any{"f1", 10}, `truncate("f1", 10) = 0`},
	{"chmod", []any{"f1", 0o640}, `chmod("f1", 0640) = 0`},
	{"fchmodat", []any{unix.AT_FDCWD, "f1", 0o600}, `fchmodat(AT_FDCWD, "f1", 0600) = 0`},
	{"chown", []any{"f1", -1, -1}, `chown("f1", -1, -1) = 0`},
	{"lchown", []any{"s1", -1, -1}, `lchown("s1", -1, -1) = 0`},
	{"fchownat", []any{unix.AT_FDCWD, "s1", -1, -1, unix.AT_SYMLINK_NOFOLLOW}, `fchownat(AT_FDCWD, "s1", -1, -1, AT_SYMLINK_NOFOLLOW) = 0`},
	{"mknodat", []any{unix.AT_FDCWD, "fifo", unix.S_IFIFO | 0o600, 0}, `mknodat(AT_FDCWD, "fifo", S_IFIFO|0600, 0x0) = 0`},
	{"socket", []any{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0}, `socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0) = $RET`},
	{"bind", []any{"$FD", sockaddrUnix("$DIR/sock"), 0}, `bind($RET, {sa_family=AF_UNIX, sun_path="$DIR/sock"}, $LEN) = 0`},
	{"socket", []any{unix.AF_UNIX, unix.SOCK_STREAM, 0}, `socket(AF_UNIX, SOCK_STREAM, 0) = $RET`},
	{"connect", []any{"$FD", sockaddrUnix("@tracer-test-none"), 0}, `connect($RET, {sa_family=AF_UNIX, sun_path=@"tracer-test-none"}, $LEN) = -1 ECONNREFUSED (Connection refused)`},
	{"socket", []any{unix.AF_INET6, unix.SOCK_STREAM, 0}, `socket(AF_INET6, SOCK_STREAM, 0) = $RET`},
	{"connect", []any{"$FD", sockaddrInet6(1), 0}, `connect($RET, {sa_family=AF_INET6, sin6_port=htons(1), sin6_addr=inet_pton(AF_INET6, "::1")}, 28) = -1 E`},
	{"execveat", []any{unix.AT_FDCWD, "/bin/sh", []string{"sh", "-c", "exit 0"}, 0, 0}, `execveat(AT_FDCWD, "/bin/sh", ["sh", "-c", "exit 0"], 0x0, 0) = 0`},
}

type openHowArg []byte
type sockaddrArg []byte
type bufArg struct{}

func openHow(flags, mode, resolve uint64) openHowArg {
	b := make([]byte, 24)
	*(*uint64)(unsafe.Pointer(&b[0])) = flags
	*(*uint64)(unsafe.Pointer(&b[8])) = mode
	*(*uint64)(unsafe.Pointer(&b[16])) = resolve
	return b
}

func buf() bufArg { return bufArg{} }

func sockaddrUnix(path string) sockaddrArg {
	b := []byte{unix.AF_UNIX, 0}
	if strings.HasPrefix(path, "@") {
		return append(append(b, 0), path[1:]...)
	}
	return append(append(b, path...), 0)
}

func sockaddrInet6(port int) sockaddrArg {
	b := make([]byte, 28)
	b[0] = unix.AF_INET6
	b[2], b[3] = byte(port>>8), byte(port)
	b[23] = 1
	return b
}

// helperDecode makes decodeCalls; the last one execs.
func helperDecode(dir string) int {
	if err := os.Chdir(dir); err != nil {
		return 101
	}
	scratch := make([]byte, 4096)
	fd := uintptr(0)
	var keep []any
	for _, c := range decodeCalls {
		nr, ok := native().byName[c.name]
		if !ok {
			continue
		}
		var a [6]uintptr
		sockIdx, sockLen := -1, uintptr(0)
		for i, v := range c.args {
			switch v := v.(type) {
			case string:
				switch {
				case v == "$FD":
					a[i] = fd
				default:
					p, _ := unix.BytePtrFromString(strings.ReplaceAll(v, "$DIR", dir))
					keep = append(keep, p)
					a[i] = uintptr(unsafe.Pointer(p))
				}
			case []string:
				argv := make([]*byte, len(v)+1)
				for j, s := range v {
					argv[j], _ = unix.BytePtrFromString(s)
				}
				keep = append(keep, argv)
				a[i] = uintptr(unsafe.Pointer(&argv[0]))
			case openHowArg:
				a[i] = uintptr(unsafe.Pointer(&v[0]))
				keep = append(keep, v)
			case sockaddrArg:
				v = []byte(strings.ReplaceAll(string(v), "$DIR", dir))
				a[i] = uintptr(unsafe.Pointer(&v[0]))
				sockLen, sockIdx = uintptr(len(v)), i+1
				keep = append(keep, v)
			case bufArg:
				a[i] = uintptr(unsafe.Pointer(&scratch[0]))
			case int:
				a[i] = uintptr(v)
			}
		}
		if sockIdx >= 0 {
			a[sockIdx] = sockLen
		}
		r, _, _ := syscall.Syscall6(uintptr(nr), a[0], a[1], a[2], a[3], a[4], a[5])
		if c.name == "socket" {
			fd = r
		}
	}
	_ = keep
	return 102 // execveat failed
}

func TestDecodeSyscalls(t *testing.T) {
	dir := t.TempDir()
	cmd := helperCmd(t, nil, "decode", dir)
	res, evs, text := trace(t, cmd, Options{})
	if res.ExitCode != 0 {
		t.Errorf("result %+v, want 0 from the exec'd sh", res)
	}
	lines := strings.Split(text, "\n")
	next := 0
	for _, c := range decodeCalls {
		if _, ok := native().byName[c.name]; !ok {
			continue
		}
		pat := regexp.QuoteMeta(strings.ReplaceAll(c.want, "$DIR", dir))
		pat = strings.ReplaceAll(pat, `\$RET`, `\d+`)
		pat = strings.ReplaceAll(pat, `\$LEN`, `\d+`)
		pat = strings.ReplaceAll(pat, `\$BUF`, `0x[0-9a-f]+`)
		re := regexp.MustCompile(`^\[pid \d+\] ` + pat)
		found := false
		for i := next; i < len(lines); i++ {
			if re.MatchString(lines[i]) {
				found, next = true, i+1
				break
			}
		}
		if !found {
			t.Errorf("no line matching %s", c.want)
		}
	}
	// Decoded structure, not only text.
	e := find(evs, func(e *Event) bool { return e.Syscall == "openat" && pathArg(e, 0) == "f1" })
	if e == nil || !e.Created || e.Args[1].Abs != filepath.Join(dir, "f1") || e.Args[2].Raw != unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL {
		t.Errorf("openat f1 = %+v", e)
	}
	s := Summarize(evs)
	for _, p := range []string{"f1", "f9", "l1", "l2", "s1", "s2", "d1", "d2", "fifo"} {
		want := filepath.Join(dir, p)
		if p == "f1" || p == "f9" {
			if !contains(s.Written, want) {
				t.Errorf("written lacks %s: %v", want, s.Written)
			}
		}
		if !contains(s.Created, want) && native().byName["link"] != 0 {
			t.Errorf("created lacks %s: %v", want, s.Created)
		}
	}
	legacy := native().byName["link"] != 0 // amd64: link, mkdir, rmdir... exist
	for _, p := range []string{"d1", "d2", "l1", "l2"} {
		if legacy && !contains(s.Deleted, filepath.Join(dir, p)) {
			t.Errorf("deleted lacks %s: %v", p, s.Deleted)
		}
	}
	if _, ok := native().byName["rename"]; ok {
		want := []Rename{{filepath.Join(dir, "f2"), filepath.Join(dir, "f3")}, {filepath.Join(dir, "f3"), filepath.Join(dir, "f4")}}
		if fmt.Sprint(s.Renamed) != fmt.Sprint(want) {
			t.Errorf("renamed = %v, want %v (the failed renameat2 is not a rename)", s.Renamed, want)
		}
	}
	if len(s.Connects) != 2 || s.Connects[0].Address != "@tracer-test-none" || s.Connects[0].Result != "ECONNREFUSED" || s.Connects[1].Address != "[::1]:1" {
		t.Errorf("connects = %+v", s.Connects)
	}
	if legacy && !contains(s.Written, filepath.Join(dir, "f2")) {
		t.Errorf("creat f2 not in written: %v", s.Written)
	}
	if x := s.Execs[len(s.Execs)-1]; x.Path != mustEval(t, "/bin/sh") || strings.Join(x.Argv, " ") != "sh -c exit 0" {
		t.Errorf("last exec = %+v", x)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func mustEval(t *testing.T, p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
