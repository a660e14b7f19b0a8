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
func runSeccomp(t *testing.T, prog []byte, arch, nr uint32) uint32 {
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
	ret, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(ret)
}

func TestSeccompProgramDecides(t *testing.T) {
	const (
		eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		allow = unix.SECCOMP_RET_ALLOW
		trace = unix.SECCOMP_RET_TRACE
	)
	own, err := seccompProgram(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		arch, nr uint32
		want     uint32
	}{
		{"x86_64 add_key", unix.AUDIT_ARCH_X86_64, 248, eperm},
		{"x86_64 request_key", unix.AUDIT_ARCH_X86_64, 249, eperm},
		{"x86_64 keyctl", unix.AUDIT_ARCH_X86_64, 250, eperm},
		{"x32 keyctl", unix.AUDIT_ARCH_X86_64, x32Bit | 250, eperm},
		{"i386 keyctl", unix.AUDIT_ARCH_I386, 288, eperm},
		{"i386 add_key", unix.AUDIT_ARCH_I386, 286, eperm},
		{"aarch64 request_key", unix.AUDIT_ARCH_AARCH64, 218, eperm},
		{"arm keyctl", unix.AUDIT_ARCH_ARM, 311, eperm},
		{"x86_64 read", unix.AUDIT_ARCH_X86_64, 0, allow},
		{"x86_64 ioprio_set (251)", unix.AUDIT_ARCH_X86_64, 251, allow},
		{"i386 keyctl's x86_64 number", unix.AUDIT_ARCH_I386, 250, allow},
		{"another arch", 0x12345678, 250, allow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := runSeccomp(t, own, tc.arch, tc.nr); got != tc.want {
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
	nrs, err := tracer.Lookup([]string{"openat", "read", "keyctl", "add_key", "request_key"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint32{trace, allow, eperm, eperm, eperm} {
		if got := runSeccomp(t, both, native, uint32(nrs[i])); got != want {
			t.Errorf("with the tracer's program, call %d: got %#x, want %#x", nrs[i], got, want)
		}
	}
	// The table's native numbers are the kernel's, as the tracer has them.
	for _, kc := range keyringCalls {
		if want := [3]uint32{uint32(nrs[3]), uint32(nrs[4]), uint32(nrs[2])}; kc.arch == native && kc.nrs != want {
			t.Errorf("keyringCalls for %#x: %v, the tracer's table has %v", native, kc.nrs, want)
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
