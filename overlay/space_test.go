package overlay

import (
	"syscall"
	"testing"
)

func TestAgentSpace(t *testing.T) {
	const gib = 1 << 30
	blocks := func(bytes int64) uint64 { return uint64(bytes / 4096) }
	cases := []struct {
		name                 string
		total, free, avail   int64 // bytes
		frsize               int64
		wantReserve, wantUse int64
	}{
		// ext4's 5 % root reserve is more than the floor: the agent
		// gets what an unprivileged user gets.
		{"ext4 with 5% reserved", 100 * gib, 50 * gib, 45 * gib, 4096, 5 * gib, 45 * gib},
		// No root reserve: the floor, 1 % of a small filesystem...
		{"tmpfs of 1 GiB", gib, gib / 2, gib / 2, 4096, gib / 100, gib/2 - gib/100},
		// ...and at most 1 GiB of a large one.
		{"XFS of 1 TiB", 1024 * gib, 10 * gib, 10 * gib, 4096, gib, 9 * gib},
		// A reserve smaller than the floor is topped up to it.
		{"ext4 -m 0.1 of 1 TiB", 1024 * gib, 100 * gib, 100*gib - gib/2, 4096, gib, 99 * gib},
		// Root has eaten into its reserve: the agent gets nothing (all
		// that statfs shows of the reserve is what is left of it).
		{"into root's reserve", 100 * gib, 3 * gib, 0, 4096, 3 * gib, 0},
		// Less free than the floor: nothing, never negative.
		{"below the floor", 1024 * gib, gib / 2, gib / 2, 4096, gib, 0},
		// f_frsize unset: f_bsize counts.
		{"no frsize", 100 * gib, 50 * gib, 45 * gib, 0, 5 * gib, 45 * gib},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := syscall.Statfs_t{Bsize: 4096, Frsize: c.frsize, Blocks: blocks(c.total), Bfree: blocks(c.free), Bavail: blocks(c.avail)}
			if got := hostReserve(&st); got != c.wantReserve {
				t.Errorf("hostReserve = %d, want %d", got, c.wantReserve)
			}
			if got := agentSpace(&st); got != c.wantUse {
				t.Errorf("agentSpace = %d, want %d", got, c.wantUse)
			}
		})
	}
}
