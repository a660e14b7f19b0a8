//go:build linux

package tracer

import (
	"encoding/binary"
	"fmt"
	"sort"

	"golang.org/x/sys/unix"
)

// Classic BPF opcodes used by the filter.
const (
	bpfLdAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJgeK   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfJa     = unix.BPF_JMP | unix.BPF_JA
	bpfJsetK  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfRetK   = unix.BPF_RET | unix.BPF_K

	offNr   = 0 // offsetof(struct seccomp_data, nr)
	offArch = 4 // offsetof(struct seccomp_data, arch)
	// offArg0Lo is the low 32 bits of seccomp_data.args[0] (amd64 and
	// arm64, the architectures with tables, are little-endian).
	offArg0Lo = 16
	offArg1Lo = 24 // low 32 bits of seccomp_data.args[1]

	maxBPF = 4096 // BPF_MAXINSNS
)

// SeccompFilter returns a classic BPF seccomp program, as the raw bytes of
// its struct sock_filter array (what bwrap --seccomp FD reads), that returns
// SECCOMP_RET_TRACE for the named syscalls and SECCOMP_RET_ALLOW for the
// others. Names are checked with Lookup against the native table.
//
// The program checks seccomp_data.arch. On x86_64 it matches the native
// numbers; x32 calls (same arch, numbers with __X32_SYSCALL_BIT) are matched
// against the x32 numbers of the same names, and i386 calls against the
// i386 numbers; on arm64, 32-bit ARM calls against the ARM numbers. A name
// that one personality lacks is simply not traced there. A call from any
// other arch is traced (SECCOMP_RET_TRACE), so no ABI switch escapes the
// log.
//
// Whatever the names (none: nothing stops the tracer), the program also
// refuses what would take a process out of the trace: clone with
// CLONE_UNTRACED, which PTRACE_O_TRACECLONE does not follow (EPERM), and
// clone3, whose flags lie in memory a filter cannot read (ENOSYS: libc
// then falls back to clone). A traced agent's clone(CLONE_UNTRACED) child
// ran, and wrote, missing from the log. It refuses io_uring_setup too
// (ENOSYS, as on a kernel without io_uring, which libraries fall back
// from): a ring's operations (openat, write, connect, ...) run in the
// kernel without a syscall of their own, and an agent's file written
// through one showed in the log as io_uring_enter calls only.
//
// With names, it also refuses, with EINVAL as a kernel older than 5.0
// would, a seccomp filter with SECCOMP_FILTER_FLAG_NEW_LISTENER: the
// kernel lets SECCOMP_RET_USER_NOTIF take precedence over
// SECCOMP_RET_TRACE, so an agent's own filter that sent its openat to a
// thread of its own, which answered SECCOMP_USER_NOTIF_FLAG_CONTINUE,
// opened and wrote a file that a --trace-syscalls openat,write log never
// showed. Without names every syscall stops the tracer at its entry,
// before any filter runs, and such filters are left alone.
//
// SECCOMP_RET_TRACE without a tracer fails the syscall with ENOSYS: only
// install the filter in a process that Run traces.
func SeccompFilter(names []string) ([]byte, error) {
	if len(native().names) == 0 {
		return nil, fmt.Errorf("tracer: unsupported architecture %s", goarch)
	}
	if _, err := Lookup(names); err != nil {
		return nil, err
	}
	wanted := splitNames(names)
	selective := len(wanted) > 0
	nrsOf := func(p *personality) []uint32 {
		seen := map[uint32]bool{}
		var out []uint32
		for _, n := range wanted {
			if nr, ok := p.byName[n]; ok && !seen[uint32(nr)] {
				seen[uint32(nr)] = true
				out = append(out, uint32(nr))
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out
	}

	var prog []unix.SockFilter
	stmt := func(code uint16, k uint32) { prog = append(prog, unix.SockFilter{Code: code, K: k}) }
	jump := func(code uint16, k uint32, jt, jf uint8) {
		prog = append(prog, unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k})
	}
	// Long forward jumps are patched once their target is known.
	type patch struct {
		at     int
		target func() int
	}
	var patches []patch
	// matchNrs emits the untraced-clone guard for personality p, then
	// "if nr == X: trace" for each X, then "allow".
	matchNrs := func(p *personality, nrs []uint32) {
		traced := func(nr uint32) uint32 {
			for _, x := range nrs {
				if x == nr {
					return unix.SECCOMP_RET_TRACE
				}
			}
			return unix.SECCOMP_RET_ALLOW
		}
		if nr, ok := p.byName["clone"]; ok {
			jump(bpfJeqK, uint32(nr), 0, 4)
			stmt(bpfLdAbsW, offArg0Lo)
			jump(bpfJsetK, unix.CLONE_UNTRACED, 0, 1)
			stmt(bpfRetK, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
			stmt(bpfRetK, traced(uint32(nr)))
		}
		if nr, ok := p.byName["seccomp"]; ok && selective {
			jump(bpfJeqK, uint32(nr), 0, 6)
			stmt(bpfLdAbsW, offArg0Lo)
			jump(bpfJeqK, unix.SECCOMP_SET_MODE_FILTER, 0, 3)
			stmt(bpfLdAbsW, offArg1Lo)
			jump(bpfJsetK, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, 0, 1)
			stmt(bpfRetK, unix.SECCOMP_RET_ERRNO|uint32(unix.EINVAL))
			stmt(bpfRetK, traced(uint32(nr)))
		}
		if nr, ok := p.byName["clone3"]; ok {
			jump(bpfJeqK, uint32(nr), 0, 1)
			stmt(bpfRetK, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
		}
		if nr, ok := p.byName["io_uring_setup"]; ok {
			jump(bpfJeqK, uint32(nr), 0, 1)
			stmt(bpfRetK, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
		}
		for _, nr := range nrs {
			jump(bpfJeqK, nr, 0, 1)
			stmt(bpfRetK, unix.SECCOMP_RET_TRACE)
		}
		stmt(bpfRetK, unix.SECCOMP_RET_ALLOW)
	}

	// Group personalities by audit arch: x86_64 has native and x32.
	type archBlock struct {
		arch  uint32
		pers  []*personality
		start int
	}
	var blocks []*archBlock
	for _, p := range tables() {
		var b *archBlock
		for _, x := range blocks {
			if x.arch == p.auditArch {
				b = x
			}
		}
		if b == nil {
			b = &archBlock{arch: p.auditArch}
			blocks = append(blocks, b)
		}
		b.pers = append(b.pers, p)
	}

	stmt(bpfLdAbsW, offArch)
	for _, b := range blocks {
		b := b
		jump(bpfJeqK, b.arch, 0, 1)
		patches = append(patches, patch{len(prog), func() int { return b.start }})
		stmt(bpfJa, 0)
	}
	stmt(bpfRetK, unix.SECCOMP_RET_TRACE) // unknown arch
	for _, b := range blocks {
		b.start = len(prog)
		stmt(bpfLdAbsW, offNr)
		var main *personality
		var sub []*personality // personalities selected by a number bit (x32)
		for _, p := range b.pers {
			if p.nrBase == 0 {
				main = p
			} else {
				sub = append(sub, p)
			}
		}
		subStart := make([]int, len(sub))
		for i, p := range sub {
			i := i
			jump(bpfJgeK, p.nrBase, 0, 1)
			patches = append(patches, patch{len(prog), func() int { return subStart[i] }})
			stmt(bpfJa, 0)
		}
		if main != nil {
			matchNrs(main, nrsOf(main))
		} else {
			stmt(bpfRetK, unix.SECCOMP_RET_ALLOW)
		}
		for i, p := range sub {
			subStart[i] = len(prog)
			matchNrs(p, nrsOf(p)) // byName of a sub personality holds full numbers
		}
	}
	for _, p := range patches {
		prog[p.at].K = uint32(p.target() - p.at - 1)
	}
	if len(prog) > maxBPF {
		return nil, fmt.Errorf("tracer: seccomp filter for %d syscalls is too long (%d > %d instructions)", len(wanted), len(prog), maxBPF)
	}
	out := make([]byte, 0, 8*len(prog))
	for _, f := range prog {
		out = binary.NativeEndian.AppendUint16(out, f.Code)
		out = append(out, f.Jt, f.Jf)
		out = binary.NativeEndian.AppendUint32(out, f.K)
	}
	return out, nil
}
