package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/artproject/art/repo"
)

func newCheckoutCmd(g *globals) *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "checkout BRANCH|REV",
		Short: "move HEAD to a branch, or detach it at a commit",
		Long: `checkout moves HEAD: to a branch (new sessions and pushes then commit
there), or to a commit (detached: a push moves HEAD only; art run and
art mount need a branch, -b NAME). It does not touch the host workspace;
use 'art pull' to write a commit's files there.`,
		Example: `  art checkout attempt-1
  art checkout HEAD~2
  art checkout main`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			r, err := g.openRepo(dir)
			if err != nil {
				return err
			}
			defer r.Close()
			name := args[0]
			var h repo.Head
			if _, err := r.BranchTip(name); err == nil {
				h.Branch = name
			} else if !errors.Is(err, repo.ErrNoBranch) {
				return err
			} else {
				id, err := r.Resolve(name)
				if err != nil {
					return err
				}
				h.Commit = id
			}
			tx, err := r.Begin()
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if h.Branch != "" {
				// Again under the write lock: an art branch -d since.
				if _, err := tx.BranchTip(h.Branch); err != nil {
					return err
				}
			}
			if err := tx.SetHead(h); err != nil {
				return err
			}
			if err := tx.Commit(); err != nil {
				return err
			}
			if h.Branch != "" {
				fmt.Fprintf(g.stdout, "Switched to branch %s\n", h.Branch)
			} else {
				fmt.Fprintf(g.stdout, "HEAD is now detached at %s\n", h.Commit.Short())
			}
			return nil
		},
	}
	c.Flags().StringVarP(&dir, "mount", "m", ".", "workspace directory (for repository discovery)")
	return c
}
