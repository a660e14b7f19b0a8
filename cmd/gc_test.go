package cmd

import (
	"runtime/debug"
	"testing"
)

// tuneGC raises the collection target and sets a soft memory limit,
// but leaves each alone when the user set GOGC or GOMEMLIMIT.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, tc := range []struct {
		gogc, gomemlimit string
		wantPercent      int
		wantLimit        bool // set below "no limit"
	}{
		{"", "", 300, true},
		{"50", "", 100, true},
		{"", "1GiB", 300, false},
	} {
		t.Setenv("GOGC", tc.gogc)
		t.Setenv("GOMEMLIMIT", tc.gomemlimit)
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(1<<63 - 1)
		tuneGC()
		if got := debug.SetGCPercent(100); got != tc.wantPercent {
			t.Errorf("GOGC=%q: GC percent %d, want %d", tc.gogc, got, tc.wantPercent)
		}
		if got := debug.SetMemoryLimit(-1); (got < 1<<63-1) != tc.wantLimit {
			t.Errorf("GOMEMLIMIT=%q: memory limit %d, want one set: %v", tc.gomemlimit, got, tc.wantLimit)
		}
	}
}
