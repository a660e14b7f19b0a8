package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The sandbox's own seccomp rules. The kernel keyring is not namespaced:
// the agent inherited the session keyring of whoever started art, and read
// its keys (a root session's secrets, as nobody), and a request_key call
// has the kernel run a host helper as root, outside every namespace
// (/sbin/request-key: key.dns_resolver resolved any name the agent chose
// from the host's network, a way out without --net). Docker's default
// profile and Flatpak refuse these calls in the same way.

// keyringCalls are add_key, request_key and keyctl for each audit arch a
// process on amd64 or arm64 can call with (the kernel's syscall tables;
// TestKeyringCallNumbers checks them against the tracer's). On x86_64 the
// x32 numbers are the same with x32Bit set.
var keyringCalls = []struct {
	arch uint32
	nrs  [3]uint32
}{
	{unix.AUDIT_ARCH_X86_64, [3]uint32{248, 249, 250}},
	{unix.AUDIT_ARCH_I386, [3]uint32{286, 287, 288}},
	{unix.AUDIT_ARCH_AARCH64, [3]uint32{217, 218, 219}},
	{unix.AUDIT_ARCH_ARM, [3]uint32{309, 310, 311}},
}

// x32Bit marks an x32 call on x86_64 (__X32_SYSCALL_BIT).
const x32Bit = 0x40000000

// Classic BPF opcodes and seccomp_data offsets.
const (
	bpfLdAbsW   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK     = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJa       = unix.BPF_JMP | unix.BPF_JA
	bpfRetK     = unix.BPF_RET | unix.BPF_K
	seccompNr   = 0
	seccompArch = 4
	maxBPFInsns = 4096 // BPF_MAXINSNS
)

// seccompProgram returns the sandbox's rules followed by then, a further
// program in the raw struct sock_filter form bwrap reads (the tracer's),
// which decides every call the rules let through; with no further program
// they let it through. A call the rules refuse fails with EPERM.
func seccompProgram(then []byte) ([]byte, error) {
	if len(then)%8 != 0 {
		return nil, fmt.Errorf("seccomp program of %d bytes is not a whole number of instructions", len(then))
	}
	var prog []unix.SockFilter
	stmt := func(code uint16, k uint32) { prog = append(prog, unix.SockFilter{Code: code, K: k}) }
	jeq := func(k uint32, jt, jf uint8) {
		prog = append(prog, unix.SockFilter{Code: bpfJeqK, Jt: jt, Jf: jf, K: k})
	}
	// Each arch's block: load the number, compare it with the three (and
	// their x32 forms on x86_64), refuse on a match, else go on past the
	// rules. Jump targets are patched once the end is known.
	var toEnd, toDeny []int
	stmt(bpfLdAbsW, seccompArch)
	archJumps := make([]int, len(keyringCalls))
	for i, kc := range keyringCalls {
		jeq(kc.arch, 0, 1)
		archJumps[i] = len(prog)
		stmt(bpfJa, 0)
	}
	toEnd = append(toEnd, len(prog))
	stmt(bpfJa, 0) // another arch: past the rules
	for i, kc := range keyringCalls {
		prog[archJumps[i]].K = uint32(len(prog) - archJumps[i] - 1)
		stmt(bpfLdAbsW, seccompNr)
		nrs := kc.nrs[:]
		if kc.arch == unix.AUDIT_ARCH_X86_64 {
			nrs = append(nrs, kc.nrs[0]|x32Bit, kc.nrs[1]|x32Bit, kc.nrs[2]|x32Bit)
		}
		for _, nr := range nrs {
			jeq(nr, 0, 1)
			toDeny = append(toDeny, len(prog))
			stmt(bpfJa, 0)
		}
		toEnd = append(toEnd, len(prog))
		stmt(bpfJa, 0)
	}
	deny := len(prog)
	stmt(bpfRetK, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	end := len(prog)
	for _, at := range toDeny {
		prog[at].K = uint32(deny - at - 1)
	}
	for _, at := range toEnd {
		prog[at].K = uint32(end - at - 1)
	}
	if len(then) == 0 {
		stmt(bpfRetK, unix.SECCOMP_RET_ALLOW)
	}
	if n := len(prog) + len(then)/8; n > maxBPFInsns {
		return nil, fmt.Errorf("seccomp program too long: %d instructions, at most %d", n, maxBPFInsns)
	}
	out := make([]byte, 0, 8*len(prog)+len(then))
	for _, f := range prog {
		out = binary.NativeEndian.AppendUint16(out, f.Code)
		out = append(out, f.Jt, f.Jf)
		out = binary.NativeEndian.AppendUint32(out, f.K)
	}
	return append(out, then...), nil
}

// seccompFile holds the program for bwrap --seccomp: an unnamed file in
// memory, read from the start.
func seccompFile(prog []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("art-seccomp", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("seccomp program: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "art-seccomp")
	if _, err := f.Write(prog); err != nil {
		f.Close()
		return nil, fmt.Errorf("seccomp program: %w", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("seccomp program: %w", err)
	}
	return f, nil
}
