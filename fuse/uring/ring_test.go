package uring

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newRing makes a ring on a locked thread (the ring belongs to the thread
// that made it), or skips when the kernel has none.
func newRing(t *testing.T, entries uint32) *Ring {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	r, err := New(entries)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("this kernel has no io_uring with 128-byte entries: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// newEventfd makes an eventfd closed at the end of the test.
func newEventfd(t *testing.T) int {
	t.Helper()
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(efd) })
	return efd
}

// TestReadEventfd submits reads of an eventfd, completes them by writing
// it, and checks each completion carries its user data and result.
func TestReadEventfd(t *testing.T) {
	r := newRing(t, 4)
	efd := newEventfd(t)
	buf := make([]byte, 8)
	for round := uint64(1); round <= 3; round++ {
		sqe := r.Next()
		if sqe == nil {
			t.Fatal("no free entry on an idle ring")
		}
		sqe.SetOp(OpRead, int32(efd))
		sqe.SetAddr(unsafe.Pointer(&buf[0]), 8)
		sqe.SetUserData(100 + round)
		if err := r.Submit(0); err != nil {
			t.Fatal(err)
		}
		if n := r.Ready(); n != 0 {
			t.Fatalf("round %d: %d completions before the eventfd was written", round, n)
		}
		var v [8]byte
		binary.LittleEndian.PutUint64(v[:], round)
		if _, err := unix.Write(efd, v[:]); err != nil {
			t.Fatal(err)
		}
		if err := r.Submit(1); err != nil {
			t.Fatal(err)
		}
		c, ok := r.Pop()
		if !ok || c.UserData != 100+round || c.Res != 8 {
			t.Fatalf("round %d: completion %+v %v, want user data %d, result 8", round, c, ok, 100+round)
		}
		if got := binary.LittleEndian.Uint64(buf); got != round {
			t.Fatalf("round %d: read %d", round, got)
		}
		if _, ok := r.Pop(); ok {
			t.Fatalf("round %d: a second completion", round)
		}
	}
}

// TestFullSubmissionQueue: Next hands out each entry once until Submit.
func TestFullSubmissionQueue(t *testing.T) {
	r := newRing(t, 4)
	for i := 0; i < 4; i++ {
		if r.Next() == nil {
			t.Fatalf("entry %d of 4 refused", i)
		}
	}
	if r.Next() != nil {
		t.Fatal("a fifth entry on a ring of four")
	}
}

// TestFailedCommandCompletes: a command the kernel refuses (here a URING_CMD
// to an eventfd, which has none) completes at once with the error, as art's
// FUSE transport relies on to detect a refused registration.
func TestFailedCommandCompletes(t *testing.T) {
	r := newRing(t, 4)
	efd := newEventfd(t)
	sqe := r.Next()
	sqe.SetOp(OpURingCmd, int32(efd))
	sqe.SetCmdOp(1)
	sqe.SetUserData(7)
	if err := r.Submit(0); err != nil {
		t.Fatal(err)
	}
	c, ok := r.Pop()
	if !ok || c.UserData != 7 || c.Res >= 0 {
		t.Fatalf("completion %+v %v, want user data 7 and an error", c, ok)
	}
}
