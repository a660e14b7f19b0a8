package cmd

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	tests := []struct {
		live uint64
		want int
	}{
		{0, 300},
		{80 << 20, 300},
		{256 << 20 / 3, 300},
		{111 << 20, 230},
		{200 << 20, 120},
		{256 << 20, 100},
		{8 << 30, 100},
	}
	for _, tc := range tests {
		if got := gcPercentFor(tc.live); got != tc.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}

// TestWatchHeap checks that the percentage follows the live heap after
// collections, each change set once.
func TestWatchHeap(t *testing.T) {
	var live atomic.Uint64
	sets := make(chan int, 16)
	watchHeap(live.Load, func(p int) { sets <- p })
	waitFor := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			runtime.GC()
			select {
			case got := <-sets:
				if got != want {
					t.Fatalf("set %d, want %d", got, want)
				}
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		t.Fatalf("no collection set %d", want)
	}
	live.Store(2 << 30)
	waitFor(100)
	live.Store(200 << 20)
	waitFor(120)
	// The same bracket again sets nothing.
	for i := 0; i < 3; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case p := <-sets:
		t.Errorf("set %d with nothing changed", p)
	default:
	}
	live.Store(1 << 20)
	waitFor(300)
}
