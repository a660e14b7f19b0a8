package sandbox

import (
	"encoding/binary"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/artproject/art/tracer"
)

// runSeccomp runs a raw program on a call in x/net/bpf's interpreter, which
// loads words big-endian (the kernel loads seccomp_data natively), so the
// fields are laid out big-endian here.
func runSeccomp(t *testing.T, prog []byte, arch, nr uint32, arg1 uint64) uint32 {
	t.Helper()
	raw := make([]bpf.RawInstruction, 0, len(prog)/8)
	for i := 0; i+8 <= len(prog); i += 8 {
		raw = append(raw, bpf.RawInstruction{
			Op: binary.NativeEndian.Uint16(prog[i:]),
			Jt: prog[i+2], Jf: prog[i+3],
			K: binary.NativeEndian.Uint32(prog[i+4:]),
		})
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatalf("the program holds instructions that are not classic BPF: %v", insns)
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("the program does not load: %v", err)
	}
	data := make([]byte, 64) // struct seccomp_data
	binary.BigEndian.PutUint32(data[0:], nr)
	binary.BigEndian.PutUint32(data[4:], arch)
	// args[1], its low word where the program reads it on a
	// little-endian machine.
	binary.BigEndian.PutUint32(data[24:], uint32(arg1))
	binary.BigEndian.PutUint32(data[28:], uint32(arg1>>32))
	ret, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(ret)
}

func TestSeccompProgramDecides(t *testing.T) {
	const (
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
		allow  = unix.SECCOMP_RET_ALLOW
		trace  = unix.SECCOMP_RET_TRACE
	)
	own, err := seccompProgram(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		arch, nr uint32
		arg1     uint64
		want     uint32
	}{
		{"x86_64 add_key", unix.AUDIT_ARCH_X86_64, 248, 0, eperm},
		{"x86_64 request_key", unix.AUDIT_ARCH_X86_64, 249, 0, eperm},
		{"x86_64 keyctl", unix.AUDIT_ARCH_X86_64, 250, 0, eperm},
		{"x32 keyctl", unix.AUDIT_ARCH_X86_64, x32Bit | 250, 0, eperm},
		{"i386 keyctl", unix.AUDIT_ARCH_I386, 288, 0, eperm},
		{"i386 add_key", unix.AUDIT_ARCH_I386, 286, 0, eperm},
		{"aarch64 request_key", unix.AUDIT_ARCH_AARCH64, 218, 0, eperm},
		{"arm keyctl", unix.AUDIT_ARCH_ARM, 311, 0, eperm},
		{"x86_64 read", unix.AUDIT_ARCH_X86_64, 0, 0, allow},
		{"x86_64 ioprio_set (251)", unix.AUDIT_ARCH_X86_64, 251, 0, allow},
		{"i386 keyctl's x86_64 number", unix.AUDIT_ARCH_I386, 250, 0, allow},
		{"another arch", 0x12345678, 250, 0, allow},
		{"x86_64 ioctl TIOCSTI", unix.AUDIT_ARCH_X86_64, 16, unix.TIOCSTI, allow},
		{"x86_64 ioctl TIOCSETD", unix.AUDIT_ARCH_X86_64, 16, unix.TIOCSETD, eperm},
		{"x86_64 ioctl TIOCSETD, high bits set", unix.AUDIT_ARCH_X86_64, 16, 1<<32 | unix.TIOCSETD, eperm},
		{"x86_64 ioctl TIOCLINUX", unix.AUDIT_ARCH_X86_64, 16, unix.TIOCLINUX, eperm},
		{"x86_64 ioctl TIOCGWINSZ", unix.AUDIT_ARCH_X86_64, 16, unix.TIOCGWINSZ, allow},
		{"x86_64 ioctl TIOCGETD", unix.AUDIT_ARCH_X86_64, 16, unix.TIOCGETD, allow},
		{"x32 ioctl TIOCSETD", unix.AUDIT_ARCH_X86_64, x32Bit | 514, unix.TIOCSETD, eperm},
		{"i386 ioctl TIOCSETD", unix.AUDIT_ARCH_I386, 54, unix.TIOCSETD, eperm},
		{"aarch64 ioctl TIOCSETD", unix.AUDIT_ARCH_AARCH64, 29, unix.TIOCSETD, eperm},
		{"arm ioctl TIOCLINUX", unix.AUDIT_ARCH_ARM, 54, unix.TIOCLINUX, eperm},
		{"x86_64 write, TIOCSETD's number as its second argument", unix.AUDIT_ARCH_X86_64, 1, unix.TIOCSETD, allow},
		{"x86_64 io_uring_setup", unix.AUDIT_ARCH_X86_64, 425, 0, enosys},
		{"x32 io_uring_setup", unix.AUDIT_ARCH_X86_64, x32Bit | 425, 0, enosys},
		{"i386 io_uring_setup", unix.AUDIT_ARCH_I386, 425, 0, enosys},
		{"aarch64 io_uring_setup", unix.AUDIT_ARCH_AARCH64, 425, 0, enosys},
		{"arm io_uring_setup", unix.AUDIT_ARCH_ARM, 425, 0, enosys},
		{"x86_64 io_uring_enter", unix.AUDIT_ARCH_X86_64, 426, 0, allow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := runSeccomp(t, own, tc.arch, tc.nr, tc.arg1); got != tc.want {
				t.Errorf("got %#x, want %#x", got, tc.want)
			}
		})
	}

	// Followed by the tracer's program: what the rules let through, it
	// decides.
	native, ok := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[goarch()]
	if !ok {
		t.Skipf("skipping the tracer's half: no syscall tables for %s", goarch())
	}
	traceProg, err := tracer.SeccompFilter([]string{"openat"})
	if err != nil {
		t.Fatal(err)
	}
	both, err := seccompProgram(traceProg)
	if err != nil {
		t.Fatal(err)
	}
	nrs, err := tracer.Lookup([]string{"openat", "read", "add_key", "request_key", "keyctl", "ioctl", "io_uring_setup"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint32{trace, allow, eperm, eperm, eperm, allow} {
		if got := runSeccomp(t, both, native, uint32(nrs[i]), 0); got != want {
			t.Errorf("with the tracer's program, call %d: got %#x, want %#x", nrs[i], got, want)
		}
	}
	if got := runSeccomp(t, both, native, uint32(nrs[5]), unix.TIOCSETD); got != eperm {
		t.Errorf("with the tracer's program, TIOCSETD: got %#x", got)
	}
	// The table's native numbers are the kernel's, as the tracer has them.
	for _, a := range seccompArches {
		if a.arch != native {
			continue
		}
		for i, name := range []string{"add_key", "request_key", "keyctl"} {
			if a.keyring[i] != uint32(nrs[2+i]) {
				t.Errorf("seccompArches for %#x: %s is %d, the tracer's table has %d", native, name, a.keyring[i], nrs[2+i])
			}
		}
		if a.ioctl[0] != uint32(nrs[5]) {
			t.Errorf("seccompArches for %#x: ioctl is %d, the tracer's table has %d", native, a.ioctl[0], nrs[5])
		}
		if a.nosys[0] != uint32(nrs[6]) {
			t.Errorf("seccompArches for %#x: io_uring_setup is %d, the tracer's table has %d", native, a.nosys[0], nrs[6])
		}
	}

	if _, err := seccompProgram(make([]byte, 12)); err == nil {
		t.Error("a torn program was taken")
	}
	if _, err := seccompProgram(make([]byte, 8*maxBPFInsns)); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("an over-long program: %v", err)
	}
}

// goarch is the architecture this test binary runs on.
func goarch() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	switch m := unix.ByteSliceToString(u.Machine[:]); m {
	case "x86_64":
		return "amd64"
	case "aarch64":
		return "arm64"
	default:
		return m
	}
}

// TestKeyringRefused calls add_key, request_key and keyctl inside the
// sandbox: with the session keyring art's caller had, the agent read its
// keys, and request_key ran host helpers as root (key.dns_resolver
// resolved the agent's names from the host's network).
func TestKeyringRefused(t *testing.T) {
	requireBwrap(t)
	requireTool(t, "/usr/bin/python3")
	nrs := map[string]int{"amd64": 248, "arm64": 217}
	base, ok := nrs[goarch()]
	if !ok {
		t.Skipf("skipping: no keyring syscall numbers for %s", goarch())
	}
	// add_key("user", "art-test", "x", 1, KEY_SPEC_SESSION_KEYRING),
	// request_key("user", "debug:art", NULL, 0),
	// keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0).
	script := func(calls string) string {
		return `import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
for name, nr, args in [` + calls + `]:
    r = libc.syscall(nr, *args)
    print(name, "refused" if r == -1 and ctypes.get_errno() == 1 else "ran: %d errno %d" % (r, ctypes.get_errno()))
`
	}
	keyctl := fmt.Sprintf(`("keyctl", %d, (0, -3, 0))`, base+2)
	all := fmt.Sprintf(`("add_key", %d, (b"user", b"art-test", b"x", 1, -3)), ("request_key", %d, (b"user", b"debug:art", None, 0)), `, base, base+1) + keyctl
	o := run(t, baseConfig(t, "python3", "-c", script(all)), "")
	if o.Err != nil {
		t.Fatalf("Run: %v (%q)", o.Err, o.Stderr)
	}
	if o.Stdout != "add_key refused\nrequest_key refused\nkeyctl refused\n" {
		t.Errorf("keyring calls inside the sandbox: %q %q", o.Stdout, o.Stderr)
	}
	// The control: on the host, keyctl reaches the session keyring.
	out, err := exec.Command("python3", "-c", script(keyctl)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "keyctl ran") {
		t.Errorf("control: %q %v", out, err)
	}
}

// TestTerminalIoctlsRefused sets a line discipline on a pty of the
// sandbox's own: on the caller's terminal, which a non-interactive run
// passes through, it lasted past the session until art restored it, and on
// any pty it loads the discipline's kernel module. TIOCSTI on a terminal
// that is not the caller's controlling one fails as before (EPERM, from
// the kernel).
func TestTerminalIoctlsRefused(t *testing.T) {
	requireBwrap(t)
	requireTool(t, "/usr/bin/python3")
	script := fmt.Sprintf(`import os, fcntl, struct, errno
m, s = os.openpty()
for name, req, arg in [("TIOCGETD", %d, struct.pack("i", 0)), ("TIOCSETD", %d, struct.pack("i", 0)), ("TIOCLINUX", %d, b"\x06")]:
    try:
        fcntl.ioctl(s, req, arg)
        print(name, "ran")
    except OSError as e:
        print(name, "refused" if e.errno == errno.EPERM else "failed: " + e.strerror)
`, unix.TIOCGETD, unix.TIOCSETD, unix.TIOCLINUX)
	o := run(t, baseConfig(t, "python3", "-c", script), "")
	if o.Err != nil {
		t.Fatalf("Run: %v (%q)", o.Err, o.Stderr)
	}
	if o.Stdout != "TIOCGETD ran\nTIOCSETD refused\nTIOCLINUX refused\n" {
		t.Errorf("terminal ioctls inside the sandbox: %q %q", o.Stdout, o.Stderr)
	}
}

// TestIOURingRefused sets up an io_uring inside the sandbox: refused as
// by a kernel without io_uring (ENOSYS), so programs fall back to plain
// system calls.
func TestIOURingRefused(t *testing.T) {
	requireBwrap(t)
	requireTool(t, "/usr/bin/python3")
	if goarch() != "amd64" && goarch() != "arm64" {
		t.Skipf("skipping: no io_uring_setup number for %s here", goarch())
	}
	script := `import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
params = ctypes.create_string_buffer(120)
r = libc.syscall(425, 4, params)
print("fd" if r >= 0 else "errno %d" % ctypes.get_errno())`
	o := run(t, baseConfig(t, "python3", "-c", script), "")
	if o.Err != nil {
		t.Fatalf("Run: %v (%q)", o.Err, o.Stderr)
	}
	if o.Stdout != fmt.Sprintf("errno %d\n", unix.ENOSYS) {
		t.Errorf("io_uring_setup inside the sandbox: %q %q", o.Stdout, o.Stderr)
	}
}

// TestSeccompFileWithoutDescriptors: with no descriptor left for the
// program's memfd, the error says what failed (art then exits 125).
func TestSeccompFileWithoutDescriptors(t *testing.T) {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// The lowest free descriptor becomes the limit: the next one made fails.
	lowest, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(lowest)
	lim := old
	lim.Cur = uint64(lowest)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	f, err := seccompFile([]byte{1, 2, 3, 4, 5, 6, 7, 8})
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if err == nil {
		f.Close()
		t.Fatal("seccompFile made its memfd beyond the descriptor limit")
	}
	if want := "seccomp program: memfd_create: too many open files"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}
