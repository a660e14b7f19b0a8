package cmd

import (
	"runtime"
	"runtime/metrics"
)

// gcPercentFor is the GOGC for a live heap of live bytes. A small heap
// gets room to grow four times between collections (see tuneGC); that
// extra room is capped at 256 MiB, or the live heap itself when larger
// (Go's default), rounded down to a multiple of ten: the room a large
// model of the tree would get is memory the session never uses (a
// million files' model, about a gigabyte, had three more). 100k small
// files made in a mount (111 MB live at the end) peaked at 441 MB of RSS
// with 300 throughout, 401 MB so, in about the same time; the Go tree's
// untar (about 45 MB live) keeps its 300.
func gcPercentFor(live uint64) int {
	const room = 256 << 20
	if live == 0 || 3*live <= room {
		return 300
	}
	return max(100, int(100*room/live)/10*10)
}

// liveHeap reads the heap the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// gcSentinel is an object whose finalizer runs once a collection found it
// unreachable: after every collection, as watchHeap re-arms it. It holds a
// pointer and 16 bytes so that it is never a tiny allocation, whose
// finalizer may never run.
type gcSentinel struct {
	_ *int
	_ [16]byte
}

// watchHeap calls set with gcPercentFor of the live heap after each
// collection that changes it, for the life of the process.
func watchHeap(live func() uint64, set func(int)) {
	current := gcPercentFor(0)
	var arm func()
	arm = func() {
		runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
			// The finalizer goroutine runs these one at a time.
			if p := gcPercentFor(live()); p != current {
				current = p
				set(p)
			}
			arm()
		})
	}
	arm()
}
