package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
)

// commitJSON is the --json form of a commit in log and show.
type commitJSON struct {
	ID       string           `json:"id"`
	Parents  []string         `json:"parents"`
	Refs     []string         `json:"refs,omitempty"`
	Time     string           `json:"time"`
	Author   string           `json:"author"`
	Message  string           `json:"message"`
	Tree     string           `json:"tree"`
	Session  *objects.Session `json:"session,omitempty"`
	Added    int              `json:"added"`
	Modified int              `json:"modified"`
	Deleted  int              `json:"deleted"`
	// Stat is art show --stat --json's per-path counts (as art diff
	// --stat --json gives them); --stat was dropped with --json.
	Stat []statJSON `json:"stat,omitempty"`
}

func toJSON(cc *repo.ChangeCounter, id objects.ID, c *objects.Commit, refs []string) (commitJSON, error) {
	j := commitJSON{ID: id.String(), Refs: refs, Time: fmtRFC(c.Time), Author: c.Author, Message: c.Message, Tree: c.Tree.String(), Session: c.Session, Parents: []string{}}
	for _, p := range c.Parents {
		j.Parents = append(j.Parents, p.String())
	}
	var err error
	j.Added, j.Modified, j.Deleted, err = cc.Counts(c)
	return j, err
}

func newLogCmd(g *globals) *cobra.Command {
	var n int
	var oneline, all, asJSON bool
	var dir string
	c := &cobra.Command{
		Use:   "log [REV] [-n N] [--oneline] [--all] [--json]",
		Short: "list commits, newest first",
		Long: `log lists the history of REV (default HEAD): id, branches pointing at it,
date, message, how the commit was made (push, run with argv and exit status,
mount) and how many paths it added, modified and deleted.`,
		Example: `  art log
  art log --oneline -n 10
  art log --all --json
  art log attempt-1~2`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			r, err := g.openRepo(dir)
			if err != nil {
				return err
			}
			defer r.Close()
			var starts []objects.ID
			switch {
			case all:
				bs, err := r.Branches()
				if err != nil {
					return err
				}
				for _, b := range bs {
					starts = append(starts, b.Commit)
				}
				if h, err := r.Head(); err == nil && !h.Commit.IsZero() {
					starts = append(starts, h.Commit)
				}
			default:
				rev := "HEAD"
				if len(args) == 1 {
					rev = args[0]
				}
				id, err := r.Resolve(rev)
				if err != nil {
					return err
				}
				starts = []objects.ID{id}
			}
			var entries []repo.LogEntry
			if n != 0 { // -n 0 shows nothing, as in git; the default (-1) everything
				if entries, err = r.Log(starts, max(n, 0)); err != nil {
					return err
				}
			}
			deco, err := r.Decorations()
			if err != nil {
				return err
			}
			if asJSON {
				out := []commitJSON{}
				cc := r.NewChangeCounter()
				for _, e := range entries {
					j, err := toJSON(cc, e.ID, e.Commit, deco[e.ID])
					if err != nil {
						return err
					}
					out = append(out, j)
				}
				return writeJSON(g.stdout, out)
			}
			pal := palette{colorOn(g.stdout)}
			text := termText(g.stdout)
			cc := r.NewChangeCounter()
			for i, e := range entries {
				refs := ""
				if d := deco[e.ID]; len(d) > 0 {
					refs = " " + pal.yellow("("+strings.Join(d, ", ")+")")
				}
				if oneline {
					fmt.Fprintf(g.stdout, "%s%s %s\n", pal.yellow(e.ID.Short()), refs, text(firstLine(e.Commit.Message)))
					continue
				}
				if i > 0 {
					fmt.Fprintln(g.stdout)
				}
				fmt.Fprintf(g.stdout, "%s%s\n", pal.yellow("commit "+e.ID.String()), refs)
				printCommitHeader(g, cc, e.Commit)
			}
			return nil
		},
	}
	c.Flags().IntVarP(&n, "max-count", "n", -1, "show at most N commits (negative: all)")
	c.Flags().BoolVar(&oneline, "oneline", false, "one line per commit")
	c.Flags().BoolVar(&all, "all", false, "all branches")
	c.Flags().BoolVar(&asJSON, "json", false, "machine-readable output")
	c.Flags().StringVarP(&dir, "mount", "m", ".", "workspace directory (for repository discovery)")
	return c
}

func printCommitHeader(g *globals, cc *repo.ChangeCounter, c *objects.Commit) {
	if len(c.Parents) > 1 {
		var ps []string
		for _, p := range c.Parents {
			ps = append(ps, p.Short())
		}
		fmt.Fprintf(g.stdout, "Merge:   %s\n", strings.Join(ps, " "))
	}
	// The message may be an agent's (-M from an orchestrator, or the
	// session's argv): on a terminal its controls are shown, not obeyed.
	text := termText(g.stdout)
	fmt.Fprintf(g.stdout, "Author:  %s\n", text(c.Author))
	fmt.Fprintf(g.stdout, "Date:    %s\n", fmtTime(c.Time))
	if s := sessionSummary(c.Session); s != "" {
		fmt.Fprintf(g.stdout, "Session: %s\n", s)
	}
	if a, m, d, err := cc.Counts(c); err == nil {
		fmt.Fprintf(g.stdout, "Changes: %d added, %d modified, %d deleted\n", a, m, d)
	} else {
		fmt.Fprintf(g.stdout, "Changes: unavailable (%v)\n", err)
	}
	fmt.Fprintln(g.stdout)
	for _, l := range strings.Split(strings.TrimRight(c.Message, "\n"), "\n") {
		fmt.Fprintf(g.stdout, "    %s\n", text(l))
	}
}
