//go:build linux

package tracer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

func TestSyscallTable(t *testing.T) {
	// Spot checks against x/sys, which is generated from the same kernel
	// headers, including recent syscalls.
	for name, nr := range map[string]int{
		"openat": unix.SYS_OPENAT, "execve": unix.SYS_EXECVE, "execveat": unix.SYS_EXECVEAT,
		"clone3": unix.SYS_CLONE3, "openat2": unix.SYS_OPENAT2, "statx": unix.SYS_STATX,
		"close_range": unix.SYS_CLOSE_RANGE, "futex_waitv": unix.SYS_FUTEX_WAITV,
		"fchmodat2": unix.SYS_FCHMODAT2, "renameat2": unix.SYS_RENAMEAT2, "connect": unix.SYS_CONNECT,
		"newfstatat": unix.SYS_NEWFSTATAT, "faccessat2": unix.SYS_FACCESSAT2, "mseal": unix.SYS_MSEAL,
	} {
		if got := SyscallName(nr); got != name {
			t.Errorf("SyscallName(%d) = %q, want %q", nr, got, name)
		}
	}
	names := SyscallNames()
	if len(names) < 300 {
		t.Errorf("only %d syscalls", len(names))
	}
	for _, p := range personalities {
		seen := map[string]bool{}
		for _, n := range p.names {
			if n != "" && seen[n] {
				t.Errorf("%q: duplicate name %q", p.name, n)
			}
			seen[n] = true
		}
	}
	// Every decoded syscall exists in some personality.
	for name := range specTable {
		found := false
		for _, p := range personalities {
			if _, ok := p.byName[name]; ok {
				found = true
			}
		}
		if !found && goarch == "amd64" {
			t.Errorf("spec for %q, which no personality has", name)
		}
	}
	if SyscallName(-1) != "" || SyscallName(100000) != "" {
		t.Error("names for invalid numbers")
	}
}

func TestLookup(t *testing.T) {
	nrs, err := Lookup([]string{"openat,execve", " Connect "})
	if err != nil || !reflect.DeepEqual(nrs, []int{unix.SYS_OPENAT, unix.SYS_EXECVE, unix.SYS_CONNECT}) {
		t.Errorf("Lookup = %v, %v", nrs, err)
	}
	cases := []struct {
		in   []string
		want []string // substrings of the error
	}{
		{[]string{"opnat"}, []string{`"opnat"`, "openat"}},
		{[]string{"openat", "exceve", "renam"}, []string{`"exceve"`, "execve", `"renam"`, "rename"}},
		{[]string{"fstatat"}, []string{"newfstatat"}},
		{[]string{"zzzzzzzzzzzz"}, []string{`"zzzzzzzzzzzz"`}},
	}
	for _, c := range cases {
		_, err := Lookup(c.in)
		if err == nil {
			t.Errorf("Lookup(%q) succeeded", c.in)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Lookup(%q) error %q lacks %q", c.in, err, w)
			}
		}
		if strings.Contains(err.Error(), `"openat"`) {
			t.Errorf("error names a known syscall: %v", err)
		}
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance = %d", d)
	}
}

// runBPF interprets the classic BPF subset the filter uses.
func runBPF(t *testing.T, prog []byte, arch, nr uint32, args ...uint64) uint32 {
	t.Helper()
	var data [64]byte
	binary.NativeEndian.PutUint32(data[0:], nr)
	binary.NativeEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.NativeEndian.PutUint64(data[offArg0Lo+8*i:], a)
	}
	var a uint32
	n := len(prog) / 8
	for pc := 0; pc < n; pc++ {
		ins := prog[pc*8:]
		code := binary.NativeEndian.Uint16(ins)
		jt, jf := int(ins[2]), int(ins[3])
		k := binary.NativeEndian.Uint32(ins[4:])
		switch code {
		case bpfLdAbsW:
			a = binary.NativeEndian.Uint32(data[k:])
		case bpfJeqK:
			if a == k {
				pc += jt
			} else {
				pc += jf
			}
		case bpfJgeK:
			if a >= k {
				pc += jt
			} else {
				pc += jf
			}
		case bpfJsetK:
			if a&k != 0 {
				pc += jt
			} else {
				pc += jf
			}
		case bpfJa:
			pc += int(k)
		case bpfRetK:
			return k
		default:
			t.Fatalf("unexpected opcode %#x at %d", code, pc)
		}
	}
	t.Fatal("program fell off its end")
	return 0
}

func TestSeccompFilter(t *testing.T) {
	prog, err := SeccompFilter([]string{"openat", "execve", "openat"})
	if err != nil {
		t.Fatal(err)
	}
	if len(prog)%8 != 0 || len(prog) == 0 {
		t.Fatalf("program length %d", len(prog))
	}
	const trace, allow = unix.SECCOMP_RET_TRACE, unix.SECCOMP_RET_ALLOW
	cases := []struct {
		arch, nr uint32
		want     uint32
	}{
		{nativeAuditArch, unix.SYS_OPENAT, trace},
		{nativeAuditArch, unix.SYS_EXECVE, trace},
		{nativeAuditArch, unix.SYS_READ, allow},
		{nativeAuditArch, unix.SYS_EXECVEAT, allow},
		{0x12345678, unix.SYS_READ, trace}, // unknown arch: traced
	}
	if goarch == "amd64" {
		cases = append(cases,
			// x32: openat is 257 as on x86_64, execve has its own 520.
			struct{ arch, nr, want uint32 }{nativeAuditArch, x32Bit | 257, trace},
			struct{ arch, nr, want uint32 }{nativeAuditArch, x32Bit | 520, trace},
			struct{ arch, nr, want uint32 }{nativeAuditArch, x32Bit | 59, allow}, // x86_64 execve number is not x32's
			struct{ arch, nr, want uint32 }{nativeAuditArch, x32Bit | 0, allow},
			// i386: openat 295, execve 11; 257 is something else there.
			struct{ arch, nr, want uint32 }{unix.AUDIT_ARCH_I386, 295, trace},
			struct{ arch, nr, want uint32 }{unix.AUDIT_ARCH_I386, 11, trace},
			struct{ arch, nr, want uint32 }{unix.AUDIT_ARCH_I386, 257, allow},
		)
	}
	for _, c := range cases {
		if got := runBPF(t, prog, c.arch, c.nr); got != c.want {
			t.Errorf("arch %#x nr %#x: %#x, want %#x", c.arch, c.nr, got, c.want)
		}
	}
	// Every syscall at once still fits and traces everything.
	all, err := SeccompFilter(SyscallNames())
	if err != nil {
		t.Fatal(err)
	}
	for _, nr := range []uint32{0, 1, unix.SYS_OPENAT, unix.SYS_EXECVE} {
		if got := runBPF(t, all, nativeAuditArch, nr); got != trace {
			t.Errorf("all: nr %d: %#x", nr, got)
		}
	}
	if _, err := SeccompFilter([]string{"openat", "nosuchcall"}); err == nil || !strings.Contains(err.Error(), "nosuchcall") {
		t.Errorf("bad name: %v", err)
	}
}

// TestSeccompFilterKeepsClonesTraced: every filter, with syscalls named or
// none, refuses clone with CLONE_UNTRACED (its child would run outside the
// trace) and clone3 (its flags are out of a filter's reach; libc falls
// back to clone), in every personality; other clones pass, traced when
// named.
func TestSeccompFilterKeepsClonesTraced(t *testing.T) {
	const trace, allow = unix.SECCOMP_RET_TRACE, unix.SECCOMP_RET_ALLOW
	const eperm, enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM), unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	const fork = uint64(unix.SIGCHLD)
	const untraced = uint64(unix.CLONE_UNTRACED | unix.SIGCHLD)
	type call struct {
		arch, nr uint32
		flags    uint64
	}
	native := []call{{nativeAuditArch, unix.SYS_CLONE, 0}, {nativeAuditArch, unix.SYS_CLONE3, 0}}
	if goarch == "amd64" {
		native = append(native,
			call{nativeAuditArch, x32Bit | 56, 0}, call{nativeAuditArch, x32Bit | 435, 0}, // x32
			call{unix.AUDIT_ARCH_I386, 120, 0}, call{unix.AUDIT_ARCH_I386, 435, 0}) // i386
	}
	for _, tc := range []struct {
		names     []string
		cloneWant uint32 // for a clone without CLONE_UNTRACED
	}{
		{nil, allow},
		{[]string{"openat"}, allow},
		{[]string{"clone", "clone3"}, trace},
	} {
		prog, err := SeccompFilter(tc.names)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(native); i += 2 {
			clone, clone3 := native[i], native[i+1]
			if got := runBPF(t, prog, clone.arch, clone.nr, untraced); got != eperm {
				t.Errorf("%q: clone(CLONE_UNTRACED) arch %#x nr %#x: %#x, want EPERM", tc.names, clone.arch, clone.nr, got)
			}
			if got := runBPF(t, prog, clone.arch, clone.nr, fork|uint64(unix.CLONE_VM)<<32); got != tc.cloneWant {
				t.Errorf("%q: clone arch %#x nr %#x: %#x, want %#x", tc.names, clone.arch, clone.nr, got, tc.cloneWant)
			}
			if got := runBPF(t, prog, clone3.arch, clone3.nr); got != enosys {
				t.Errorf("%q: clone3 arch %#x nr %#x: %#x, want ENOSYS", tc.names, clone3.arch, clone3.nr, got)
			}
		}
		if got := runBPF(t, prog, nativeAuditArch, unix.SYS_READ); got != allow {
			t.Errorf("%q: read: %#x", tc.names, got)
		}
	}
}

// TestSeccompFilterRefusesIoUring: every filter, with syscalls named or
// none, io_uring_setup among them, refuses io_uring_setup with ENOSYS in
// every personality. A ring's operations run without syscalls of their
// own: an agent's openat and write through one were missing from the log.
func TestSeccompFilterRefusesIoUring(t *testing.T) {
	const enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	type call struct{ arch, nr uint32 }
	calls := []call{{nativeAuditArch, unix.SYS_IO_URING_SETUP}}
	if goarch == "amd64" {
		calls = append(calls, call{nativeAuditArch, x32Bit | 425}, call{unix.AUDIT_ARCH_I386, 425})
	}
	for _, names := range [][]string{nil, {"openat"}, {"io_uring_setup", "io_uring_enter"}} {
		prog, err := SeccompFilter(names)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			if got := runBPF(t, prog, c.arch, c.nr); got != enosys {
				t.Errorf("%q: io_uring_setup arch %#x nr %#x: %#x, want ENOSYS", names, c.arch, c.nr, got)
			}
		}
		if got := runBPF(t, prog, nativeAuditArch, unix.SYS_IO_URING_ENTER); got == enosys {
			t.Errorf("%q: io_uring_enter refused too", names)
		}
	}
}

func TestFormatFlags(t *testing.T) {
	cases := map[uint64]string{
		unix.O_RDONLY: "O_RDONLY",
		unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC:                  "O_WRONLY|O_CREAT|O_TRUNC",
		unix.O_RDWR | unix.O_APPEND | unix.O_CLOEXEC:                 "O_RDWR|O_APPEND|O_CLOEXEC",
		unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW:           "O_RDONLY|O_DIRECTORY|O_NOFOLLOW",
		unix.O_WRONLY | unix.O_SYNC:                                  "O_WRONLY|O_SYNC",
		unix.O_RDWR | unix.O_TMPFILE:                                 "O_RDWR|O_TMPFILE",
		unix.O_RDONLY | unix.O_PATH | 0x40000000:                     "O_RDONLY|O_PATH|0x40000000",
		unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NONBLOCK: "O_WRONLY|O_CREAT|O_EXCL|O_NONBLOCK",
	}
	for v, want := range cases {
		if got := formatOpenFlags(v); got != want {
			t.Errorf("FormatOpenFlags(%#x) = %q, want %q", v, got, want)
		}
	}
	if !isWriteOpen(unix.O_RDONLY|unix.O_CREAT) || isWriteOpen(unix.O_RDONLY|unix.O_CLOEXEC) || !isWriteOpen(unix.O_RDWR) {
		t.Error("IsWriteOpen")
	}
	if got := formatMode(0o644); got != "0644" {
		t.Errorf("formatMode = %q", got)
	}
	if got := formatMode(unix.S_IFIFO | 0o600); got != "S_IFIFO|0600" {
		t.Errorf("formatMode = %q", got)
	}
	if got := formatFlags(unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH, atFlagNames, "0"); got != "AT_SYMLINK_NOFOLLOW|AT_EMPTY_PATH" {
		t.Errorf("at flags = %q", got)
	}
	if got := formatFlags(unix.R_OK|unix.W_OK, accessModeNames, "F_OK"); got != "R_OK|W_OK" {
		t.Errorf("amode = %q", got)
	}
	if got := formatSockType(unix.SOCK_STREAM | unix.SOCK_CLOEXEC); got != "SOCK_STREAM|SOCK_CLOEXEC" {
		t.Errorf("socktype = %q", got)
	}
	if errnoName(2) != "ENOENT" || errnoName(512) != "ERESTARTSYS" || signalName(9) != "SIGKILL" {
		t.Error("errno/signal names")
	}
}

func TestDecodeSockaddr(t *testing.T) {
	in4 := []byte{2, 0, 0x1f, 0x90, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	in6 := make([]byte, 28)
	binary.LittleEndian.PutUint16(in6, unix.AF_INET6)
	binary.BigEndian.PutUint16(in6[2:], 443)
	in6[23] = 1 // ::1
	unixPath := append([]byte{1, 0}, "/run/x.sock\x00junk"...)
	abstract := append([]byte{1, 0, 0}, "name"...)
	cases := []struct {
		in   []byte
		want SockAddr
		str  string
	}{
		{in4, SockAddr{Family: "AF_INET", Addr: "127.0.0.1", Port: 8080}, "127.0.0.1:8080"},
		{in6, SockAddr{Family: "AF_INET6", Addr: "::1", Port: 443}, "[::1]:443"},
		{unixPath, SockAddr{Family: "AF_UNIX", Path: "/run/x.sock"}, "/run/x.sock"},
		{abstract, SockAddr{Family: "AF_UNIX", Path: "@name"}, "@name"},
		{[]byte{16, 0, 0, 0}, SockAddr{Family: "AF_NETLINK"}, "AF_NETLINK"},
		{[]byte{2}, SockAddr{Family: "AF_UNSPEC"}, "AF_UNSPEC"},
	}
	for _, c := range cases {
		got := decodeSockaddr(c.in)
		if *got != c.want || got.String() != c.str {
			t.Errorf("decodeSockaddr(%v) = %+v %q, want %+v %q", c.in, *got, got.String(), c.want, c.str)
		}
	}
}

func sampleEvents() []Event {
	tm := time.Date(2025, 1, 2, 3, 4, 5, 6789, time.UTC)
	return []Event{
		{Time: tm, Kind: KindExec, Pid: 10, NSPid: 1, Path: "/bin/sh", Argv: []string{"sh", "-c", "echo \"hi\"\n"}},
		{Time: tm, Kind: KindSyscall, Pid: 10, NSPid: 1, Syscall: "openat", Nr: unix.SYS_OPENAT, Args: []Arg{
			{Type: ArgDirfd, Raw: unix.AT_FDCWD, Str: "AT_FDCWD"},
			{Type: ArgPath, Raw: 0x7fff0000, Str: "a\"b\\c\x01\xff\u2028é", Abs: "/home/agent/a\"b"},
			{Type: ArgOpenFlag, Raw: unix.O_WRONLY | unix.O_CREAT, Str: "O_WRONLY|O_CREAT"},
			{Type: ArgMode, Raw: 0o644, Str: "0644"},
		}, Ret: 3, Created: true},
		{Time: tm, Kind: KindSyscall, Pid: 11, Syscall: "connect", Nr: unix.SYS_CONNECT, Args: []Arg{
			{Type: ArgFd, Raw: 3},
			{Type: ArgSockaddr, Raw: 0x1000, Addr: &SockAddr{Family: "AF_INET6", Addr: "::1", Port: 80}},
			{Type: ArgUint, Raw: 28},
		}, Ret: -1, Errno: "ECONNREFUSED"},
		{Time: tm, Kind: KindSyscall, Pid: 11, Syscall: "openat2", Nr: unix.SYS_OPENAT2, Args: []Arg{
			{Type: ArgDirfd, Raw: 5},
			{Type: ArgPath, Raw: 0x10, Err: "EFAULT"},
			{Type: ArgOpenHow, Raw: 0x20, Sub: []Arg{
				{Name: "flags", Type: ArgOpenFlag, Raw: 0, Str: "O_RDONLY"},
				{Name: "mode", Type: ArgMode, Raw: 0, Str: "00"},
				{Name: "resolve", Type: ArgResolve, Raw: 8, Str: "RESOLVE_BENEATH"},
			}},
			{Type: ArgUint, Raw: 24},
		}, Ret: -1, Errno: "EFAULT"},
		{Time: tm, Kind: KindSyscall, Pid: 12, Syscall: "read", Nr: 0, Args: []Arg{{Type: ArgFd, Raw: 0}}, Ret: 0},
		{Time: tm, Kind: KindSyscall, Pid: 12, Syscall: "exit_group", Nr: unix.SYS_EXIT_GROUP, Args: []Arg{{Type: ArgInt, Raw: 0}}, Unfinished: true},
		{Time: tm, Kind: KindFork, Pid: 10, NSPid: 1, Child: 13, ChildNSPid: 2},
		{Time: tm, Kind: KindSignal, Pid: 10, Signal: "SIGCHLD"},
		{Time: tm, Kind: KindExit, Pid: 12, Status: 0},
		{Time: tm, Kind: KindExit, Pid: 10, Signal: "SIGSEGV", Core: true},
	}
}

func TestJSONRoundTrip(t *testing.T) {
	evs := sampleEvents()
	var buf bytes.Buffer
	for i := range evs {
		line := evs[i].AppendJSON(nil)
		if !json.Valid(line) {
			t.Fatalf("invalid JSON: %s", line)
		}
		// Same as encoding/json would produce for the same value.
		var viaStd, viaOurs map[string]any
		std, _ := json.Marshal(&evs[i])
		json.Unmarshal(std, &viaStd)
		json.Unmarshal(line, &viaOurs)
		for k, v := range viaStd {
			if !reflect.DeepEqual(viaOurs[k], v) {
				t.Errorf("event %d field %s: ours %v, encoding/json %v", i, k, viaOurs[k], v)
			}
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(evs) {
		t.Fatalf("read %d events, wrote %d", len(back), len(evs))
	}
	for i := range evs {
		want := evs[i]
		// Invalid UTF-8 becomes U+FFFD, as with encoding/json.
		for j := range want.Args {
			want.Args[j].Str = strings.ToValidUTF8(want.Args[j].Str, "\uFFFD")
		}
		want.retHex = back[i].retHex
		if !reflect.DeepEqual(back[i], want) {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, back[i], want)
		}
	}
	if _, err := ReadJSON(strings.NewReader(`{"kind":"syscall"}` + "\n{bad")); err == nil {
		t.Error("ReadJSON accepted bad input")
	}
}

func TestText(t *testing.T) {
	evs := sampleEvents()
	want := []string{
		`[pid 10/1] +++ exec "/bin/sh" ["sh", "-c", "echo \"hi\"\n"] +++`,
		`[pid 10/1] openat(AT_FDCWD, "a\"b\\c\x01\xff\xe2\x80\xa8é", O_WRONLY|O_CREAT, 0644) = 3`,
		`[pid 11] connect(3, {sa_family=AF_INET6, sin6_port=htons(80), sin6_addr=inet_pton(AF_INET6, "::1")}, 28) = -1 ECONNREFUSED (Connection refused)`,
		`[pid 11] openat2(5, 0x10 <EFAULT>, {flags=O_RDONLY, mode=00, resolve=RESOLVE_BENEATH}, 24) = -1 EFAULT (Bad address)`,
		`[pid 12] read(0) = 0`,
		`[pid 12] exit_group(0) = ?`,
		`[pid 10/1] +++ fork 13/2 +++`,
		`[pid 10] --- SIGCHLD ---`,
		`[pid 12] +++ exited with 0 +++`,
		`[pid 10] +++ killed by SIGSEGV (core dumped) +++`,
	}
	for i := range evs {
		if got := evs[i].String(); got != want[i] {
			t.Errorf("event %d:\n got %s\nwant %s", i, got, want[i])
		}
	}
	mm := Event{Kind: KindSyscall, Pid: 1, Syscall: "mmap", Ret: 0x7f0000001000, retHex: true}
	if got := mm.String(); !strings.HasSuffix(got, "= 0x7f0000001000") {
		t.Errorf("mmap = %s", got)
	}
}

func TestSummarizeSynthetic(t *testing.T) {
	p := func(s string) Arg { return Arg{Type: ArgPath, Raw: 1, Str: s} }
	fl := func(v uint64) Arg { return Arg{Type: ArgOpenFlag, Raw: int64(v), Str: formatOpenFlags(v)} }
	cwd := Arg{Type: ArgDirfd, Raw: unix.AT_FDCWD, Str: "AT_FDCWD"}
	sc := func(name string, ret int64, errno string, args ...Arg) Event {
		return Event{Kind: KindSyscall, Pid: 1, Syscall: name, Args: args, Ret: ret, Errno: errno}
	}
	rel := p("rel")
	rel.Abs = "/w/rel"
	evs := []Event{
		{Kind: KindExec, Pid: 1, Path: "/bin/x", Argv: []string{"x"}},
		sc("openat", 3, "", cwd, p("/b"), fl(unix.O_RDONLY)),
		sc("openat", 3, "", cwd, p("/a"), fl(unix.O_RDONLY|unix.O_CLOEXEC)),
		sc("openat", 3, "", cwd, rel, fl(unix.O_RDONLY)),
		sc("openat", -1, "ENOENT", cwd, p("/missing"), fl(unix.O_RDONLY)),
		sc("openat", 3, "", cwd, p("/dir"), fl(unix.O_RDONLY|unix.O_DIRECTORY)),
		sc("openat", 4, "", cwd, p("/w"), fl(unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC)),
		sc("open", 4, "", p("/app"), fl(unix.O_WRONLY|unix.O_APPEND)),
		sc("creat", 4, "", p("/c"), Arg{Type: ArgMode}),
		sc("rename", 0, "", p("/w"), p("/w2")),
		sc("renameat2", -1, "EXDEV", cwd, p("/x"), cwd, p("/y")),
		sc("unlinkat", 0, "", cwd, p("/w2"), Arg{Type: ArgAtFlags}),
		sc("rmdir", 0, "", p("/d")),
		sc("connect", -1, "EINPROGRESS", Arg{Type: ArgFd, Raw: 3}, Arg{Type: ArgSockaddr, Raw: 1, Addr: &SockAddr{Family: "AF_INET", Addr: "10.0.0.1", Port: 443}}),
		sc("connect", 0, "", Arg{Type: ArgFd, Raw: 3}, Arg{Type: ArgSockaddr, Raw: 1, Addr: &SockAddr{Family: "AF_UNIX", Path: "/run/s"}}),
		{Kind: KindExit, Pid: 2, Status: 1},
		{Kind: KindExit, Pid: 1, Status: 0},
	}
	evs[6].Created = true
	evs[8].Created = true
	s := Summarize(evs)
	check := func(name string, got, want any) {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("read", s.Read, []string{"/a", "/b", "/w/rel"})
	check("written", s.Written, []string{"/app", "/c", "/w"})
	check("created", s.Created, []string{"/c", "/w"})
	check("renamed", s.Renamed, []Rename{{"/w", "/w2"}})
	check("deleted", s.Deleted, []string{"/d", "/w2"})
	check("execs", s.Execs, []Exec{{Pid: 1, Path: "/bin/x", Argv: []string{"x"}}})
	check("connects", s.Connects, []Connect{{1, "AF_INET", "10.0.0.1:443", "in progress"}, {1, "AF_UNIX", "/run/s", "ok"}})
	check("exit", *s.Exit, ExitStatus{Pid: 1, Status: 0})
	check("openat count", s.Syscalls[slicesIndex(s.Syscalls, "openat")], SyscallCount{Name: "openat", Calls: 6, Errors: 1, Errnos: map[string]int{"ENOENT": 1}})
	empty := Summarize(nil)
	if b, _ := json.Marshal(empty); !strings.Contains(string(b), `"read":[]`) {
		t.Errorf("empty summary JSON = %s", b)
	}
}

func slicesIndex(s []SyscallCount, name string) int {
	for i := range s {
		if s[i].Name == name {
			return i
		}
	}
	return 0
}

func TestSIGCHLDRestored(t *testing.T) {
	var before, after kernelSigaction
	if err := rtSigaction(unix.SIGCHLD, nil, &before); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(exec.Command("/bin/true"), Options{}); err != nil {
		t.Fatal(err)
	}
	if err := rtSigaction(unix.SIGCHLD, nil, &after); err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Errorf("SIGCHLD action changed: %+v -> %+v", before, after)
	}
	// Other children still report their exit.
	if err := exec.Command("/bin/sh", "-c", "exit 0").Run(); err != nil {
		t.Error(err)
	}
}

// The summary keeps at most maxExecArgv bytes of one exec's arguments,
// saying how many more there were: an agent's 8,000 execs of 63 KB each
// made art show --trace-summary take 3.5 GB.
func TestSummaryArgvBounded(t *testing.T) {
	long := strings.Repeat("x", 3000)
	cases := []struct {
		argv []string
		want []string
	}{
		{[]string{"true"}, []string{"true"}},
		{[]string{"sh", long}, []string{"sh", long}},
		{[]string{"sh", long, long}, []string{"sh", long, long[:maxExecArgv-2-3000], fmt.Sprintf("…(%d more bytes)", 2+2*3000-maxExecArgv)}},
	}
	for _, c := range cases {
		got := summaryArgv(c.argv)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("summaryArgv(%d args) = %d args %q…, want %d", len(c.argv), len(got), got[len(got)-1], len(c.want))
		}
	}
	// Streaming gives what a whole log gives.
	events := []Event{
		{Kind: KindExec, Pid: 7, Path: "/bin/sh", Argv: []string{"sh", long, long}},
		{Kind: KindSyscall, Pid: 7, Syscall: "openat", Errno: "ENOENT"},
		{Kind: KindExit, Pid: 7, Status: 3},
	}
	var log strings.Builder
	for i := range events {
		log.Write(events[i].AppendJSON(nil))
		log.WriteString("\n")
	}
	z := NewSummarizer()
	if err := EachJSON(strings.NewReader(log.String()), func(e *Event) error { z.Add(e); return nil }); err != nil {
		t.Fatal(err)
	}
	got, want := z.Summary(), Summarize(events)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("streamed summary %+v, want %+v", got, want)
	}
	if want.Exit == nil || want.Exit.Status != 3 || len(want.Execs) != 1 || len(want.Execs[0].Argv) != 4 || want.Syscalls[0].Errors != 1 {
		t.Errorf("summary %+v", want)
	}
}

// The summary's cut argument is a copy: a slice of it kept the whole
// argument alive, and an agent's 8,000 execs of one 100 KB argument each
// still took 1.4 GB in art show --trace-summary.
func TestSummaryArgvCutKeepsNoLongArgument(t *testing.T) {
	const execs, argLen = 200, 1 << 20
	z := NewSummarizer()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < execs; i++ {
		arg := strings.Repeat(string(rune('a'+i%26)), argLen) // a fresh allocation each time
		z.Add(&Event{Kind: KindExec, Pid: 7, Path: "/bin/true", Argv: []string{"true", arg}})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	s := z.Summary()
	if len(s.Execs) != execs || len(s.Execs[0].Argv) != 3 || len(s.Execs[0].Argv[1]) != maxExecArgv-4 {
		t.Fatalf("summary of %d execs: %d", execs, len(s.Execs))
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 32<<20 {
		t.Errorf("the summary of %d execs of a %d-byte argument holds %d MB", execs, argLen, grew>>20)
	}
	runtime.KeepAlive(z)
}

// TestSeccompFilterRefusesNotifListener: with syscalls named, the filter
// refuses (EINVAL, as a kernel before 5.0) a seccomp filter of the agent's
// that asks for a notification listener, in every personality:
// SECCOMP_RET_USER_NOTIF takes precedence over SECCOMP_RET_TRACE, and an
// agent's own thread answering SECCOMP_USER_NOTIF_FLAG_CONTINUE had its
// openat and write run without reaching a --trace-syscalls openat,write
// log. Other seccomp calls pass (traced when named); with no names every
// call is seen at its entry and nothing is refused.
func TestSeccompFilterRefusesNotifListener(t *testing.T) {
	const trace, allow = unix.SECCOMP_RET_TRACE, unix.SECCOMP_RET_ALLOW
	const einval = unix.SECCOMP_RET_ERRNO | uint32(unix.EINVAL)
	const setFilter, getAction = unix.SECCOMP_SET_MODE_FILTER, 2 // SECCOMP_GET_ACTION_AVAIL
	const listener, tsync = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, unix.SECCOMP_FILTER_FLAG_TSYNC
	type call struct{ arch, nr uint32 }
	calls := []call{{nativeAuditArch, unix.SYS_SECCOMP}}
	if goarch == "amd64" {
		calls = append(calls, call{nativeAuditArch, x32Bit | 317}, call{unix.AUDIT_ARCH_I386, 354})
	}
	for _, tc := range []struct {
		names                []string
		listen, plain, other uint32 // NEW_LISTENER filter, other filter, other op
	}{
		{nil, allow, allow, allow},
		{[]string{"openat", "write"}, einval, allow, allow},
		{[]string{"seccomp"}, einval, trace, trace},
	} {
		prog, err := SeccompFilter(tc.names)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			for _, a := range []struct {
				op, flags uint64
				want      uint32
			}{
				{setFilter, listener, tc.listen},
				{setFilter, listener | tsync, tc.listen},
				{setFilter, 0, tc.plain},
				{setFilter, tsync, tc.plain},
				{getAction, listener, tc.other},
			} {
				if got := runBPF(t, prog, c.arch, c.nr, a.op, a.flags); got != a.want {
					t.Errorf("%q: seccomp(%d, %#x) arch %#x nr %#x: %#x, want %#x", tc.names, a.op, a.flags, c.arch, c.nr, got, a.want)
				}
			}
		}
		if got := runBPF(t, prog, nativeAuditArch, unix.SYS_READ); got != allow {
			t.Errorf("%q: read: %#x", tc.names, got)
		}
	}
}

// An exec event's argv, read from /proc, says when it was cut: the event
// of an agent's 1,000 arguments listed 256 as if they were all, in the log
// and in the summary.
func TestReadCmdlineSaysCut(t *testing.T) {
	for _, c := range []struct {
		n, size   int // extra arguments and their length
		wantArgs  int
		wantTrunc bool
	}{
		{3, 10, 7, false},
		{maxArgs - 4, 10, maxArgs, false},
		{maxArgs - 3, 10, maxArgs, true},
		{1000, 10, maxArgs, true},
		{2, maxArgvLen, 5, true}, // the bytes run out in the first long one
	} {
		args := []string{"-c", "sleep 5", "x"}
		for i := 0; i < c.n; i++ {
			args = append(args, strings.Repeat("a", c.size))
		}
		cmd := exec.Command("/bin/sh", args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tr := &tracer{}
		var argv []string
		var trunc bool
		for i := 0; i < 500; i++ { // until it runs sh
			if argv, trunc = tr.readCmdline(cmd.Process.Pid); len(argv) > 0 && argv[0] == "/bin/sh" {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
		if len(argv) != c.wantArgs || trunc != c.wantTrunc {
			t.Errorf("%d arguments of %d bytes: %d, cut %v; want %d, cut %v", c.n, c.size, len(argv), trunc, c.wantArgs, c.wantTrunc)
		}
		if c.n == 2 && c.size == maxArgvLen && len(argv) == c.wantArgs && len(argv[4]) != maxArgvLen-len("/bin/sh\x00-c\x00sleep 5\x00x\x00") {
			t.Errorf("the cut argument: %d bytes", len(argv[4]))
		}
	}
	ev := Event{Kind: KindExec, Pid: 7, Path: "/bin/sh", Argv: []string{"sh", "-c", "${300}"}, ArgvTrunc: true}
	if text := string(ev.AppendText(nil)); !strings.HasSuffix(text, `["sh", "-c", "${300}", ...] +++`) {
		t.Errorf("text: %s", text)
	}
	var back Event
	if err := json.Unmarshal(ev.AppendJSON(nil), &back); err != nil || !back.ArgvTrunc {
		t.Errorf("JSON: %v %+v", err, back)
	}
	s := Summarize([]Event{ev})
	if got := s.Execs[0].Argv; len(got) != 4 || !strings.Contains(got[3], "more arguments") {
		t.Errorf("summary argv: %q", got)
	}
}

// TestRolledBack: the result a syscall skipped by seccomp (SECCOMP_RET_TRAP,
// _KILL) shows at its exit stop is the return register as it was at
// entry: the syscall's number on x86 (x86_64, x32, i386), the first
// argument on arm64 and arm, where a trapped openat(AT_FDCWD, ...) read as
// failing with ENETDOWN (-100) and one with dirfd 5 as opening fd 5.
func TestRolledBack(t *testing.T) {
	const atFdcwd = uint64(0xffffffffffffff9c) // -100
	for _, c := range []struct {
		arch     uint32
		nr, arg0 uint64
		ret      int64
		want     bool
	}{
		{unix.AUDIT_ARCH_X86_64, 258, atFdcwd, 258, true},                           // mkdirat
		{unix.AUDIT_ARCH_X86_64, 258, atFdcwd, -100, false},                         // its real error
		{unix.AUDIT_ARCH_X86_64, 0x40000000 | 258, atFdcwd, 0x40000000 | 258, true}, // x32
		{unix.AUDIT_ARCH_I386, 296, 0xffffff9c, 296, true},
		{unix.AUDIT_ARCH_AARCH64, 34, atFdcwd, -100, true}, // mkdirat(AT_FDCWD)
		{unix.AUDIT_ARCH_AARCH64, 56, 5, 5, true},          // openat(5, ...)
		{unix.AUDIT_ARCH_AARCH64, 56, 5, 34, false},        // not the number there
		{unix.AUDIT_ARCH_AARCH64, 56, 5, 3, false},         // a real fd
		{unix.AUDIT_ARCH_ARM, 323, 0xffffff9c, -100, true}, // compat: 32-bit, sign-extended
		{unix.AUDIT_ARCH_ARM, 322, 5, 5, true},
		{unix.AUDIT_ARCH_ARM, 322, 5, 322, false},
	} {
		if got := rolledBack(c.arch, c.nr, c.arg0, c.ret); got != c.want {
			t.Errorf("arch %#x nr %d arg0 %#x ret %d: %v, want %v", c.arch, c.nr, c.arg0, c.ret, got, c.want)
		}
	}
}
