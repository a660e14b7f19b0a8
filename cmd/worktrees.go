package cmd

import (
	"fmt"

	"github.com/artproject/art/repo"
)

type worktreeJSON struct {
	ID         int64  `json:"id"`
	Branch     string `json:"branch"`
	Base       string `json:"base"`
	State      string `json:"state"`
	Kind       string `json:"kind"`
	Mountpoint string `json:"mountpoint,omitempty"`
	Pid        int    `json:"pid,omitempty"`
	Pending    int    `json:"pending"`
}

func listWorktrees(r *repo.Repo) ([]worktreeJSON, error) {
	wts, err := r.Worktrees()
	if err != nil {
		return nil, err
	}
	out := []worktreeJSON{}
	for _, w := range wts {
		// Changed paths, not w.Pending's upper-layer rows (one new file
		// showed as 3 pending changes).
		pending := 0
		if w.Kind != repo.KindView {
			if pending, err = r.PendingChanges(w); err != nil {
				return nil, err
			}
		}
		out = append(out, worktreeJSON{ID: w.ID, Branch: w.Branch, Base: w.Base.String(), State: w.State, Kind: w.Kind, Mountpoint: w.Mountpoint, Pid: w.Pid, Pending: pending})
	}
	return out, nil
}

func printWorktrees(g *globals, wts []worktreeJSON) {
	if len(wts) == 0 {
		return
	}
	fmt.Fprintln(g.stdout, "Worktrees:")
	for _, w := range wts {
		if w.Kind == repo.KindView {
			fmt.Fprintf(g.stdout, "  #%d %-12s %-11s read-only view of %s", w.ID, w.Branch, w.State, w.Base[:12])
		} else {
			fmt.Fprintf(g.stdout, "  #%d %-12s %-11s %s on %s, %d pending change(s)", w.ID, w.Branch, w.State, w.Kind, w.Base[:12], w.Pending)
		}
		if w.Mountpoint != "" {
			fmt.Fprintf(g.stdout, ", at %s", w.Mountpoint)
		}
		fmt.Fprintln(g.stdout)
	}
}

// extraRoots returns what live worktrees reference beyond their base
// commits, so gc keeps it.
func extraRoots(r *repo.Repo) repo.ExtraRoots { return r.WorktreeRoots }
