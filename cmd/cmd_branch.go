package cmd

import (
	"fmt"

	"github.com/artproject/art/repo"

	"github.com/spf13/cobra"
)

func newBranchCmd(g *globals) *cobra.Command {
	var del, asJSON bool
	var dir string
	c := &cobra.Command{
		Use:   "branch [NAME [START]] [-d NAME] [--json]",
		Short: "list, create or delete branches",
		Long: `With no arguments, branch lists branches, '*' marking the current one.
With NAME it creates a branch at START (default HEAD) without switching to
it; -d deletes a branch (not the current one) and prints the commit it
pointed at, and on stderr how many of its commits no other branch or
worktree holds: 'art gc' removes those (sessions kept only there
included), and 'art branch NAME ID' brings the branch back until then.
Names follow git's check-ref-format rules.`,
		Example: `  art branch
  art branch attempt-1
  art branch attempt-2 HEAD~1
  art branch -d attempt-1`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			r, err := g.openRepo(dir)
			if err != nil {
				return err
			}
			defer r.Close()
			if del {
				if len(args) != 1 {
					return usageErr("branch -d takes exactly one branch name")
				}
				id, err := r.DeleteBranch(args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "Deleted branch %s (was %s).\n", args[0], id.Short())
				// Said as git's -d refusal of an unmerged branch would,
				// without refusing: what only this branch held goes at
				// the next gc, session records (argv, status, trace) included.
				if n, err := r.Unreferenced(id); err == nil && n > 0 {
					verb, them := "are", "them"
					if n == 1 {
						verb, them = "is", "it"
					}
					fmt.Fprintf(g.stderr, "art: note: %s of %s %s on no other branch or worktree: 'art gc' removes %s; 'art branch %s %s' brings the branch back until then\n",
						plural(n, "commit", "commits"), args[0], verb, them, repo.ShellArg(args[0]), id.Short())
				}
				return nil
			}
			if len(args) > 0 {
				start := "HEAD"
				if len(args) == 2 {
					start = args[1]
				}
				id, err := r.Resolve(start)
				if err != nil {
					return err
				}
				if err := r.CreateBranch(args[0], id); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "Created branch %s at %s.\n", args[0], id.Short())
				return nil
			}
			bs, err := r.Branches()
			if err != nil {
				return err
			}
			h, err := r.Head()
			if err != nil {
				return err
			}
			if asJSON {
				type bj struct {
					Name    string `json:"name"`
					Commit  string `json:"commit"`
					Current bool   `json:"current"`
				}
				out := []bj{}
				if !h.Detached() && h.Commit.IsZero() {
					// As the text says "* main (no commits yet)".
					out = append(out, bj{h.Branch, "", true})
				}
				for _, b := range bs {
					out = append(out, bj{b.Name, b.Commit.String(), b.Name == h.Branch})
				}
				return writeJSON(g.stdout, out)
			}
			pal := palette{colorOn(g.stdout)}
			if h.Detached() {
				fmt.Fprintf(g.stdout, "* %s\n", pal.green("(HEAD detached at "+h.Commit.Short()+")"))
			} else if h.Commit.IsZero() {
				fmt.Fprintf(g.stdout, "* %s (no commits yet)\n", pal.green(h.Branch))
			}
			for _, b := range bs {
				mark, name := "  ", b.Name
				if b.Name == h.Branch {
					mark, name = "* ", pal.green(b.Name)
				}
				cm, err := r.LoadCommit(b.Commit)
				msg := ""
				if err == nil {
					msg = termText(g.stdout)(firstLine(cm.Message))
				}
				fmt.Fprintf(g.stdout, "%s%s %s %s\n", mark, name, pal.yellow(b.Commit.Short()), msg)
			}
			return nil
		},
	}
	c.Flags().BoolVarP(&del, "delete", "d", false, "delete the named branch")
	c.Flags().BoolVar(&asJSON, "json", false, "machine-readable output")
	c.Flags().StringVarP(&dir, "mount", "m", ".", "workspace directory (for repository discovery)")
	return c
}
