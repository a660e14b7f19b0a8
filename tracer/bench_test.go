//go:build linux

package tracer

import (
	"io"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkSyscalls measures the cost per traced syscall: dd copies
// 20000 one-byte blocks (about 40000 read/write syscalls) under Run with
// full tracing and a text log to io.Discard, and untraced. ns/syscall is
// the extra wall time per syscall. For whole-program comparisons with
// strace, see bench.sh.
func BenchmarkSyscalls(b *testing.B) {
	const n = 20000
	dd := func() *exec.Cmd {
		return exec.Command("dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=20000", "status=none")
	}
	var untraced time.Duration
	for i := 0; i < 3; i++ {
		start := time.Now()
		if err := dd().Run(); err != nil {
			b.Skip("dd:", err)
		}
		if d := time.Since(start); untraced == 0 || d < untraced {
			untraced = d
		}
	}
	for _, mode := range []struct {
		name string
		opts Options
	}{
		{"log", Options{Text: io.Discard}},
		{"nolog", Options{}},
		{"json", Options{JSON: io.Discard}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if _, err := Run(dd(), mode.opts); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
			}
			per := (total/time.Duration(b.N) - untraced).Nanoseconds() / (2 * n)
			b.ReportMetric(float64(per), "ns/syscall")
		})
	}
}
