package fuse

import (
	"log"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"
)

// latencies collects per-operation request times (ART_DEBUG_LATENCY=1),
// printed on SIGUSR1 or when the mount ends: a tool for bench/, off by
// default.
type latencies struct {
	mu sync.Mutex
	m  map[string]*latency
}

type latency struct {
	n     int
	total time.Duration
	max   time.Duration
}

func (l *latencies) add(op string, d time.Duration) {
	l.mu.Lock()
	x := l.m[op]
	if x == nil {
		x = &latency{}
		l.m[op] = x
	}
	x.n++
	x.total += d
	x.max = max(x.max, d)
	l.mu.Unlock()
}

func (l *latencies) report(lg *log.Logger) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR1)
	for range c {
		l.mu.Lock()
		var ops []string
		for k := range l.m {
			ops = append(ops, k)
		}
		sort.Slice(ops, func(i, j int) bool { return l.m[ops[i]].total > l.m[ops[j]].total })
		for _, k := range ops {
			x := l.m[k]
			lg.Printf("fuse %-10s n=%7d total=%8v avg=%6v max=%v", k, x.n, x.total.Round(time.Millisecond), (x.total / time.Duration(x.n)).Round(time.Microsecond), x.max.Round(time.Microsecond))
		}
		l.m = map[string]*latency{}
		l.mu.Unlock()
	}
}
