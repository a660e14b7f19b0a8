//go:build linux

package tracer

import (
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Every ptrace stop sends SIGCHLD to the tracer. The Go runtime has a
// SIGCHLD handler installed, so each stop also costs a signal delivery and
// an rt_sigreturn (strace, with SIGCHLD at SIG_DFL, pays nothing). While
// any Run is active, the tracer sets SA_NOCLDSTOP on the current SIGCHLD
// action, keeping its handler: the kernel then sends no SIGCHLD for stops
// (ptrace stops included) but still does for exits. The flag is restored
// when the last Run ends.

// kernelSigaction is struct sigaction as rt_sigaction(2) takes it on amd64
// and arm64.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

const saNoCldStop = 0x1 // SA_NOCLDSTOP

var sigchld struct {
	sync.Mutex
	users int
	added bool // SA_NOCLDSTOP was set by us
}

func rtSigaction(sig syscall.Signal, act, old *kernelSigaction) error {
	_, _, e := syscall.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig),
		uintptr(unsafe.Pointer(act)), uintptr(unsafe.Pointer(old)), 8, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// quietStopSignals sets SA_NOCLDSTOP for the duration of a Run; call the
// returned function when it ends.
func quietStopSignals() func() {
	sigchld.Lock()
	defer sigchld.Unlock()
	sigchld.users++
	if sigchld.users == 1 {
		var cur kernelSigaction
		if rtSigaction(unix.SIGCHLD, nil, &cur) == nil && cur.flags&saNoCldStop == 0 {
			cur.flags |= saNoCldStop
			sigchld.added = rtSigaction(unix.SIGCHLD, &cur, nil) == nil
		}
	}
	return func() {
		sigchld.Lock()
		defer sigchld.Unlock()
		sigchld.users--
		if sigchld.users == 0 && sigchld.added {
			var cur kernelSigaction
			if rtSigaction(unix.SIGCHLD, nil, &cur) == nil && cur.flags&saNoCldStop != 0 {
				cur.flags &^= saNoCldStop
				rtSigaction(unix.SIGCHLD, &cur, nil)
			}
			sigchld.added = false
		}
	}
}
