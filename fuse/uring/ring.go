// Package uring is the part of Linux io_uring that art's FUSE transport
// needs: one ring with 128-byte submission entries (IORING_SETUP_SQE128,
// which IORING_OP_URING_CMD to /dev/fuse requires), owned by the one OS
// thread that creates it, submits to it and waits on it.
//
// It knows nothing about FUSE: entries are filled by the caller (SQE
// setters) and completions come back as (user data, result) pairs. The
// ring memory is shared with the kernel through mmap; heads and tails are
// read and written with atomics, as io_uring's memory model asks.
package uring

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// System call numbers: the same on every architecture (the unified table
// that started at 424).
const (
	sysSetup = 425
	sysEnter = 426
)

// Setup flags, enter flags, features and mmap offsets from
// include/uapi/linux/io_uring.h.
const (
	setupCQSize       = 1 << 3
	setupSQE128       = 1 << 10
	setupSingleIssuer = 1 << 12

	enterGetEvents = 1 << 0

	featSingleMmap = 1 << 0

	offSQRing = 0
	offSQEs   = 0x10000000
)

// Opcodes this package's callers use.
const (
	OpRead     = 22
	OpURingCmd = 46
)

// SQESize is the size of one submission entry on a SQE128 ring.
const SQESize = 128

type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqOffsets
	cqOff                                                                  cqOffsets
}

// SQE is one 128-byte submission entry. Offsets follow struct io_uring_sqe;
// Cmd is the 80-byte command area of IORING_OP_URING_CMD.
type SQE [SQESize]byte

func (s *SQE) u8(off int, v uint8)   { s[off] = v }
func (s *SQE) u32(off int, v uint32) { *(*uint32)(unsafe.Pointer(&s[off])) = v }
func (s *SQE) u64(off int, v uint64) { *(*uint64)(unsafe.Pointer(&s[off])) = v }

// SetOp sets the opcode and the file descriptor the entry acts on.
func (s *SQE) SetOp(op uint8, fd int32) { s.u8(0, op); s.u32(4, uint32(fd)) }

// SetCmdOp sets the sub-command of IORING_OP_URING_CMD.
func (s *SQE) SetCmdOp(op uint32) { s.u32(8, op) }

// SetAddr sets the buffer (or iovec array) address and its length.
func (s *SQE) SetAddr(addr unsafe.Pointer, n uint32) { s.u64(16, uint64(uintptr(addr))); s.u32(24, n) }

// SetUserData sets the value the completion carries back.
func (s *SQE) SetUserData(v uint64) { s.u64(32, v) }

// Cmd is the command area of a URING_CMD entry (80 bytes from offset 48).
func (s *SQE) Cmd() []byte { return s[48:SQESize] }

// CQE is one completion: the submission's user data and its result (a
// negative errno on failure).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// Ring is an io_uring instance. It is not safe for concurrent use: the
// thread that made it (IORING_SETUP_SINGLE_ISSUER) must be the one that
// submits and waits, so its caller locks itself to an OS thread first.
//
// Completion work the kernel queues for that thread runs as ordinary
// task work, not deferred to the thread's next wait
// (IORING_SETUP_DEFER_TASKRUN): a FUSE request handed to a ring whose
// thread could not run then stayed in a state no abort of the connection
// could end, and every process waiting on it hung for good.
type Ring struct {
	fd   int
	mem  []byte // SQ and CQ rings (one mapping: IORING_FEAT_SINGLE_MMAP)
	sqes []byte

	sqHead, sqTail *uint32
	sqMask         uint32
	sqEntries      uint32
	sqArray        unsafe.Pointer
	tail           uint32 // our copy of the SQ tail: entries handed out

	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           unsafe.Pointer
}

// ErrUnsupported says the kernel has no io_uring, or not the features
// this package needs (SQE128 and single issuer: 6.0+).
var ErrUnsupported = errors.New("io_uring with 128-byte entries is not available")

// New makes a ring of sqEntries submission and 2×sqEntries completion
// entries, for use by the calling thread only.
func New(sqEntries uint32) (*Ring, error) {
	p := params{
		flags:     setupSQE128 | setupSingleIssuer | setupCQSize,
		cqEntries: 2 * sqEntries,
	}
	fd, _, errno := syscall.Syscall(sysSetup, uintptr(sqEntries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		if errno == syscall.ENOSYS || errno == syscall.EINVAL || errno == syscall.EPERM {
			return nil, fmt.Errorf("%w (io_uring_setup: %v)", ErrUnsupported, errno)
		}
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &Ring{fd: int(fd)}
	if p.features&featSingleMmap == 0 {
		r.Close()
		return nil, fmt.Errorf("%w (no single mmap)", ErrUnsupported)
	}
	size := max(p.sqOff.array+p.sqEntries*4, p.cqOff.cqes+p.cqEntries*16)
	mem, err := unix.Mmap(r.fd, offSQRing, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("mmap io_uring rings: %w", err)
	}
	r.mem = mem
	sqes, err := unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*SQESize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("mmap io_uring entries: %w", err)
	}
	r.sqes = sqes
	at := func(off uint32) unsafe.Pointer { return unsafe.Pointer(&mem[off]) }
	r.sqHead = (*uint32)(at(p.sqOff.head))
	r.sqTail = (*uint32)(at(p.sqOff.tail))
	r.sqMask = *(*uint32)(at(p.sqOff.ringMask))
	r.sqEntries = p.sqEntries
	r.sqArray = at(p.sqOff.array)
	r.tail = atomic.LoadUint32(r.sqTail)
	r.cqHead = (*uint32)(at(p.cqOff.head))
	r.cqTail = (*uint32)(at(p.cqOff.tail))
	r.cqMask = *(*uint32)(at(p.cqOff.ringMask))
	r.cqes = at(p.cqOff.cqes)
	return r, nil
}

// Close unmaps the ring and closes it; the kernel cancels what is still
// outstanding.
func (r *Ring) Close() error {
	if r.sqes != nil {
		unix.Munmap(r.sqes)
		r.sqes = nil
	}
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
	if r.fd >= 0 {
		err := syscall.Close(r.fd)
		r.fd = -1
		return err
	}
	return nil
}

// Next returns a zeroed submission entry to fill, or nil when every
// entry is waiting for Submit.
func (r *Ring) Next() *SQE {
	head := atomic.LoadUint32(r.sqHead)
	if r.tail-head >= r.sqEntries {
		return nil
	}
	idx := r.tail & r.sqMask
	*(*uint32)(unsafe.Add(r.sqArray, 4*uintptr(idx))) = idx
	r.tail++
	s := (*SQE)(unsafe.Pointer(&r.sqes[int(idx)*SQESize]))
	clear(s[:])
	return s
}

// Submit hands the entries filled since the last call to the kernel and,
// when wait > 0, blocks until at least wait completions are ready. It
// retries after signals (Go's runtime sends them to every thread).
func (r *Ring) Submit(wait uint32) error {
	atomic.StoreUint32(r.sqTail, r.tail)
	for {
		toSubmit := r.tail - atomic.LoadUint32(r.sqHead)
		n, _, errno := syscall.Syscall6(sysEnter, uintptr(r.fd), uintptr(toSubmit), uintptr(wait), enterGetEvents, 0, 0)
		runtime.KeepAlive(r)
		switch errno {
		case 0:
			if uint32(n) < toSubmit || r.Ready() < wait {
				continue // the kernel stopped early, or woke with nothing
			}
			return nil
		case syscall.EINTR, syscall.EAGAIN, syscall.EBUSY:
			if r.tail == atomic.LoadUint32(r.sqHead) && r.Ready() >= wait {
				return nil
			}
			continue
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
}

// Ready is the number of completions waiting to be read.
func (r *Ring) Ready() uint32 {
	return atomic.LoadUint32(r.cqTail) - atomic.LoadUint32(r.cqHead)
}

// Pop returns the oldest waiting completion and releases its slot.
func (r *Ring) Pop() (CQE, bool) {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) {
		return CQE{}, false
	}
	c := *(*CQE)(unsafe.Add(r.cqes, 16*uintptr(head&r.cqMask)))
	atomic.StoreUint32(r.cqHead, head+1)
	return c, true
}
