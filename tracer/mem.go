//go:build linux

package tracer

import (
	"encoding/binary"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

const pageSize = 4096 // lower bound of the page size: reads never cross it

// memReader reads a stopped tracee's memory with process_vm_readv, falling
// back to PTRACE_PEEKDATA when that syscall is unavailable (ENOSYS, or
// EPERM under some security policies). A dead tracee (ESRCH) or an
// unmapped address (EFAULT, EIO) is an error, never a crash.
type memReader struct {
	noVM bool // use PTRACE_PEEKDATA only
	buf  []byte
}

// vmread reads up to len(dst) bytes at addr and returns how many were read.
// A short count means the rest is not readable.
func (m *memReader) vmread(pid int, addr uint64, dst []byte) (int, error) {
	if len(dst) == 0 {
		return 0, nil
	}
	if !m.noVM {
		local := unix.Iovec{Base: &dst[0], Len: uint64(len(dst))}
		remote := unix.RemoteIovec{Base: uintptr(addr), Len: len(dst)}
		n, _, e := syscall.RawSyscall6(unix.SYS_PROCESS_VM_READV, uintptr(pid),
			uintptr(unsafe.Pointer(&local)), 1, uintptr(unsafe.Pointer(&remote)), 1, 0)
		switch e {
		case 0:
			return int(n), nil
		case unix.ENOSYS, unix.EPERM:
			m.noVM = true
		default:
			return 0, e
		}
	}
	return m.peek(pid, addr, dst)
}

// peek reads with PTRACE_PEEKDATA one word at a time.
func (m *memReader) peek(pid int, addr uint64, dst []byte) (int, error) {
	const w = 8
	n := 0
	for n < len(dst) {
		a := addr + uint64(n)
		aligned := a &^ (w - 1)
		var word [w]byte
		// PTRACE_PEEKDATA via the raw syscall ABI: the word is stored at data.
		_, _, e := syscall.RawSyscall6(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, uintptr(pid),
			uintptr(aligned), uintptr(unsafe.Pointer(&word[0])), 0, 0)
		if e != 0 {
			if n > 0 {
				return n, nil
			}
			return 0, e
		}
		n += copy(dst[n:], word[a-aligned:])
	}
	return n, nil
}

// read reads exactly n bytes at addr. The result is valid until the next
// call.
func (m *memReader) read(pid int, addr uint64, n int) ([]byte, error) {
	if cap(m.buf) < n {
		m.buf = make([]byte, n, max(n, maxPath))
	}
	dst := m.buf[:n]
	got := 0
	for got < n {
		k, err := m.vmread(pid, addr+uint64(got), dst[got:])
		if err != nil {
			return nil, err
		}
		if k == 0 {
			return nil, unix.EFAULT
		}
		got += k
	}
	return dst, nil
}

// readString reads a NUL-terminated string of at most max bytes at addr,
// never reading across a page it does not need. trunc is set when no NUL
// was found within max bytes.
func (m *memReader) readString(pid int, addr uint64, max int) (s string, trunc bool, err error) {
	if cap(m.buf) < max {
		m.buf = make([]byte, max)
	}
	buf := m.buf[:max]
	got := 0
	for got < max {
		a := addr + uint64(got)
		chunk := pageSize - int(a%pageSize)
		if chunk > max-got {
			chunk = max - got
		}
		n, err := m.vmread(pid, a, buf[got:got+chunk])
		if err != nil || n == 0 {
			if err == nil {
				err = unix.EFAULT
			}
			return string(buf[:got]), false, err
		}
		if i := indexByte(buf[got:got+n], 0); i >= 0 {
			return string(buf[:got+i]), false, nil
		}
		got += n
		if n < chunk {
			return string(buf[:got]), false, unix.EFAULT
		}
	}
	return string(buf[:got]), true, nil
}

// readArgv reads a NULL-terminated array of string pointers (pointers of
// ptrSize bytes), bounded by maxArgs entries, maxArgLen bytes per entry and
// maxArgvLen bytes in all.
func (m *memReader) readArgv(pid int, addr uint64, ptrSize int) (list []string, trunc bool, err error) {
	var ptrs [64]uint64
	var blk argBlock
	total := 0
	for len(list) < maxArgs {
		// Read a batch of pointers, up to the page boundary.
		want := len(ptrs) * ptrSize
		if room := pageSize - int(addr%pageSize); want > room {
			want = room
		}
		want -= want % ptrSize
		if want == 0 {
			want = ptrSize
		}
		raw, err := m.read(pid, addr, want)
		if err != nil {
			return list, true, err
		}
		n := len(raw) / ptrSize
		for i := 0; i < n; i++ {
			if ptrSize == 4 {
				ptrs[i] = uint64(binary.LittleEndian.Uint32(raw[i*4:]))
			} else {
				ptrs[i] = binary.LittleEndian.Uint64(raw[i*8:])
			}
		}
		for i := 0; i < n; i++ {
			if ptrs[i] == 0 {
				return list, trunc, nil
			}
			if len(list) >= maxArgs || total >= maxArgvLen {
				return list, true, nil
			}
			s, t, err := m.argString(pid, &blk, ptrs[i], min(maxArgLen, maxArgvLen-total))
			if err != nil {
				return list, true, err
			}
			list = append(list, s)
			total += len(s)
			trunc = trunc || t
		}
		addr += uint64(n * ptrSize)
	}
	return list, true, nil
}

// argBlock is tracee memory read ahead by argString.
type argBlock struct {
	addr uint64
	data []byte
}

// argString reads one string of an argv. The strings of an argv usually lie
// next to each other, so they are served from 8 KiB blocks rather than one
// read per string (not with PTRACE_PEEKDATA, which reads word by word).
func (m *memReader) argString(pid int, blk *argBlock, p uint64, limit int) (string, bool, error) {
	if s, ok := blk.find(p, limit); ok {
		return s, false, nil
	}
	if !m.noVM {
		if cap(blk.data) < 8192 {
			blk.data = make([]byte, 8192)
		}
		// A short read stops at the first unreadable page.
		k, err := m.vmread(pid, p, blk.data[:8192])
		if err != nil {
			k = 0
		}
		blk.addr, blk.data = p, blk.data[:k]
		if s, ok := blk.find(p, limit); ok {
			return s, false, nil
		}
	}
	return m.readString(pid, p, limit)
}

// find returns the string at p if the block holds all of it.
func (b *argBlock) find(p uint64, limit int) (string, bool) {
	if p < b.addr || p-b.addr >= uint64(len(b.data)) {
		return "", false
	}
	rest := b.data[p-b.addr:]
	if j := indexByte(rest, 0); j >= 0 && j <= limit {
		return string(rest[:j]), true
	}
	return "", false
}
