package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The sandbox's own seccomp rules.
//
// The kernel keyring is not namespaced: the agent inherited the session
// keyring of whoever started art, and read its keys (a root session's
// secrets, as nobody), and a request_key call has the kernel run a host
// helper as root, outside every namespace (/sbin/request-key:
// key.dns_resolver resolved any name the agent chose through the host's
// network, a way out without --net). Docker's default profile and Flatpak
// refuse add_key, request_key and keyctl in the same way.
//
// Two terminal ioctls are refused too, as Flatpak does: TIOCSETD (a line
// discipline: on the caller's terminal, which a non-interactive run passes
// through, it lasted until art restored it, and on any pty it loads the
// discipline's kernel module, the way in of several kernel exploits,
// n_hdlc's and n_gsm's) and TIOCLINUX (a Linux console's selection and
// paste). TIOCSTI, which Flatpak refuses as well, is left: the kernel
// takes it only on the caller's controlling terminal, and the sandbox's is
// its own pty or none (its own session), so typing stays inside.

// io_uring_setup fails with ENOSYS, as on a kernel without io_uring, so
// that programs fall back to plain system calls: Docker's default profile
// refuses io_uring too, for its long record of kernel exploits (the same
// reason as TIOCSETD's), and its requests are invisible to seccomp and
// ptrace alike (a traced agent's file written through a ring showed in
// the log only as io_uring_enter). Without a ring, io_uring_enter and
// io_uring_register have nothing to act on.

// seccompArches are, for each audit arch a process on amd64 or arm64 can
// call with, the numbers of add_key, request_key and keyctl, of ioctl and
// of io_uring_setup (the kernel's syscall tables; TestSeccompProgramDecides
// checks the native ones against the tracer's). On x86_64 the x32 calls
// are the same numbers with x32Bit set; x32's ioctl has a number of its
// own.
var seccompArches = []struct {
	arch    uint32
	keyring []uint32
	ioctl   []uint32
	nosys   []uint32
}{
	{unix.AUDIT_ARCH_X86_64, []uint32{248, 249, 250, x32Bit | 248, x32Bit | 249, x32Bit | 250}, []uint32{16, x32Bit | 514}, []uint32{425, x32Bit | 425}},
	{unix.AUDIT_ARCH_I386, []uint32{286, 287, 288}, []uint32{54}, []uint32{425}},
	{unix.AUDIT_ARCH_AARCH64, []uint32{217, 218, 219}, []uint32{29}, []uint32{425}},
	{unix.AUDIT_ARCH_ARM, []uint32{309, 310, 311}, []uint32{54}, []uint32{425}},
}

// refusedIoctls are the ioctl requests refused. The kernel takes the
// request as an unsigned int, so comparing the argument's low 32 bits is
// exact.
var refusedIoctls = []uint32{unix.TIOCLINUX, unix.TIOCSETD}

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
	// seccompArg1Lo is the low 32 bits of seccomp_data.args[1] on the
	// little-endian arches above.
	seccompArg1Lo = 24
	maxBPFInsns   = 4096 // BPF_MAXINSNS
)

// seccompProgram returns the sandbox's rules followed by then, a further
// program in the raw struct sock_filter form bwrap reads (the tracer's),
// which decides every call the rules let through; with no further program
// they let it through. A call the rules refuse fails with EPERM (ENOSYS
// for io_uring_setup).
func seccompProgram(then []byte) ([]byte, error) {
	if len(then)%8 != 0 {
		return nil, fmt.Errorf("seccomp program of %d bytes is not a whole number of instructions", len(then))
	}
	var prog []unix.SockFilter
	stmt := func(code uint16, k uint32) { prog = append(prog, unix.SockFilter{Code: code, K: k}) }
	// Forward jumps to the labels below, patched once they are placed.
	const (
		toDeny = iota
		toEnd
		toIoctl
		toNosys
	)
	var jumps [4][]int
	jumpTo := func(label int) {
		jumps[label] = append(jumps[label], len(prog))
		stmt(bpfJa, 0)
	}
	// "if A == k: goto label", as a compare that skips the jump if not.
	ifEq := func(k uint32, label int) {
		prog = append(prog, unix.SockFilter{Code: bpfJeqK, Jt: 0, Jf: 1, K: k})
		jumpTo(label)
	}
	stmt(bpfLdAbsW, seccompArch)
	archAt := make([]int, len(seccompArches))
	for i, a := range seccompArches {
		prog = append(prog, unix.SockFilter{Code: bpfJeqK, Jt: 0, Jf: 1, K: a.arch})
		archAt[i] = len(prog)
		stmt(bpfJa, 0)
	}
	jumpTo(toEnd) // another arch: past the rules
	for i, a := range seccompArches {
		prog[archAt[i]].K = uint32(len(prog) - archAt[i] - 1)
		stmt(bpfLdAbsW, seccompNr)
		for _, nr := range a.keyring {
			ifEq(nr, toDeny)
		}
		for _, nr := range a.ioctl {
			ifEq(nr, toIoctl)
		}
		for _, nr := range a.nosys {
			ifEq(nr, toNosys)
		}
		jumpTo(toEnd)
	}
	var at [4]int
	at[toIoctl] = len(prog)
	stmt(bpfLdAbsW, seccompArg1Lo)
	for _, req := range refusedIoctls {
		ifEq(req, toDeny)
	}
	jumpTo(toEnd)
	at[toNosys] = len(prog)
	stmt(bpfRetK, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	at[toDeny] = len(prog)
	stmt(bpfRetK, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	at[toEnd] = len(prog)
	for label, froms := range jumps {
		for _, from := range froms {
			prog[from].K = uint32(at[label] - from - 1)
		}
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
