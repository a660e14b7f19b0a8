package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
)

// syncedCommit names the commit of the last push or pull; gc may have
// removed it since (with the branch that held it).
func syncedCommit(id objects.ID) string {
	if id.IsZero() {
		return "a commit gc has since removed"
	}
	return id.Short()
}

func newStatusCmd(g *globals) *cobra.Command {
	var dir string
	var asJSON bool
	c := &cobra.Command{
		Use:   "status [-m DIR] [--json]",
		Short: "current branch and commit, host drift, worktrees",
		Long: `status prints the current branch and commit, how the host workspace DIR
changed since the last push or pull (added, modified, deleted paths), and
the worktrees of live or interrupted sessions.`,
		Example: `  art status
  art status -m ~/src/app --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			abs, err := repo.CheckWorkspaceDir(g.defaultWorkspace(c, dir))
			if err != nil {
				return err
			}
			r, err := g.openRepo(abs)
			if err != nil {
				return err
			}
			defer r.Close()
			h, err := r.Head()
			if err != nil {
				return err
			}
			drift, err := r.HostDrift(abs)
			if err != nil {
				return err
			}
			wts, err := listWorktrees(r)
			if err != nil {
				return err
			}
			if asJSON {
				type out struct {
					Branch    string         `json:"branch"`
					Commit    string         `json:"commit,omitempty"`
					Workspace string         `json:"workspace"`
					Synced    bool           `json:"synced"`
					Added     []string       `json:"added"`
					Modified  []string       `json:"modified"`
					Deleted   []string       `json:"deleted"`
					Worktrees []worktreeJSON `json:"worktrees"`
					// UnfinishedPull: the commit of a pull that
					// did not finish writing the workspace.
					UnfinishedPull string `json:"unfinished_pull,omitempty"`
				}
				o := out{Branch: h.Branch, Workspace: abs, Synced: drift.Synced, Added: jsonNames(drift.Added), Modified: jsonNames(drift.Modified), Deleted: jsonNames(drift.Deleted), Worktrees: wts}
				if !h.Commit.IsZero() {
					o.Commit = h.Commit.String()
				}
				if !drift.UnfinishedPull.IsZero() {
					o.UnfinishedPull = drift.UnfinishedPull.String()
				}
				return writeJSON(g.stdout, o)
			}
			switch {
			case h.Detached():
				fmt.Fprintf(g.stdout, "HEAD detached at %s\n", h.Commit.Short())
			case h.Commit.IsZero():
				fmt.Fprintf(g.stdout, "On branch %s (no commits yet)\n", h.Branch)
			default:
				fmt.Fprintf(g.stdout, "On branch %s at %s\n", h.Branch, h.Commit.Short())
			}
			unfinished := !drift.UnfinishedPull.IsZero()
			if unfinished {
				fmt.Fprintf(g.stdout, "A pull of %s into %s did not finish: some files are the commit's, some as they were; finish it with '%s' (an 'art push' now would record the half-pulled state).\n",
					drift.UnfinishedPull.Short(), abs, g.pullCommand(abs, drift.UnfinishedPull.Short()))
			}
			switch {
			case unfinished && !drift.Synced:
				fmt.Fprintf(g.stdout, "Workspace %s was never fully pushed or pulled.\n", abs)
			case !drift.Synced:
				// HEAD may hold the workspace from another directory of
				// its name (a copy): a push of this one is refused unless
				// it holds the same.
				name, _ := repo.WorkspaceName(abs)
				if held, err := r.HoldsWorkspace(h.Commit, name); err != nil {
					return err
				} else if held {
					fmt.Fprintf(g.stdout, "Workspace %s was never pushed or pulled, and HEAD holds /%s/ from another directory of that name: '%s' makes a copy to work in ('art push' of this one is refused unless it holds the same).\n", abs, name, g.pullCommand("NEWDIR/"+name, ""))
				} else {
					fmt.Fprintf(g.stdout, "Workspace %s was never pushed or pulled (record it with '%s').\n", abs, g.workspaceCommand("push", abs))
				}
			case drift.Clean():
				fmt.Fprintf(g.stdout, "Workspace %s matches the last push/pull (%s).\n", abs, syncedCommit(drift.Commit))
			case unfinished:
				fmt.Fprintf(g.stdout, "Workspace %s differs from the last push/pull (%s), partly by the unfinished pull:\n", abs, syncedCommit(drift.Commit))
			default:
				fmt.Fprintf(g.stdout, "Workspace %s changed since the last push/pull (%s); record it with 'art push':\n", abs, syncedCommit(drift.Commit))
			}
			if drift.Synced && !drift.Clean() {
				pal := palette{colorOn(g.stdout)}
				for _, p := range drift.Added {
					fmt.Fprintln(g.stdout, pal.green("  added:    "+repo.QuotePath(p)))
				}
				for _, p := range drift.Modified {
					fmt.Fprintln(g.stdout, pal.yellow("  modified: "+repo.QuotePath(p)))
				}
				for _, p := range drift.Deleted {
					fmt.Fprintln(g.stdout, pal.red("  deleted:  "+repo.QuotePath(p)))
				}
			}
			moved := drift.Synced && !drift.Commit.IsZero() && !h.Commit.IsZero() && drift.Commit != h.Commit
			if moved && !unfinished {
				// Sessions on the branch since the last pull: the workspace
				// "matches" what it last synced, not HEAD.
				where := "HEAD (" + h.Commit.Short() + ")"
				if !h.Detached() {
					where = h.Branch + " (" + h.Commit.Short() + ")"
				}
				if ahead, err := r.IsAncestor(drift.Commit, h.Commit, 256); err != nil {
					return err
				} else if ahead {
					fmt.Fprintf(g.stdout, "%s has moved on since: 'art diff %s %s' shows what changed, and '%s' brings it%s.\n",
						where, drift.Commit.Short(), h.Commit.Short(), g.pullCommand(abs, ""), pushFirst(drift))
				} else {
					fmt.Fprintf(g.stdout, "%s is not what the workspace holds: 'art diff %s %s' shows the difference, and '%s' makes it match%s.\n",
						where, drift.Commit.Short(), h.Commit.Short(), g.pullCommand(abs, ""), pushFirst(drift))
				}
			}
			printWorktrees(g, wts)
			return nil
		},
	}
	c.Flags().StringVarP(&dir, "mount", "m", ".", "host workspace directory")
	c.Flags().BoolVar(&asJSON, "json", false, "machine-readable output")
	return c
}

// pushFirst is the advice that goes before a pull when the host has
// changes of its own, which the pull would refuse to overwrite.
func pushFirst(d *repo.Drift) string {
	if d.Clean() {
		return ""
	}
	return " (after 'art push' records the host's changes above)"
}
