package cmd

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
	"github.com/artproject/art/tracer"
)

func fmtRFC(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

func newShowCmd(g *globals) *cobra.Command {
	var stat, asJSON, traceSummary bool
	var dir string
	c := &cobra.Command{
		Use:   "show [REV] [--stat] [--json]",
		Short: "show a commit: its metadata, session and changes",
		Example: `  art show
  art show HEAD~1 --stat
  art show attempt-1 --json
  art show --trace-summary`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			r, err := g.openRepo(dir)
			if err != nil {
				return err
			}
			defer r.Close()
			rev := "HEAD"
			if len(args) == 1 {
				rev = args[0]
			}
			if traceSummary {
				z := tracer.NewSummarizer()
				if err := eachTraceEvent(r, rev, func(e *tracer.Event) error { z.Add(e); return nil }); err != nil {
					return err
				}
				sum := z.Summary()
				if asJSON {
					return writeJSON(g.stdout, sum)
				}
				printTraceSummary(g, sum)
				return nil
			}
			id, err := r.Resolve(rev)
			if err != nil {
				return err
			}
			cm, err := r.LoadCommit(id)
			if err != nil {
				return err
			}
			deco, err := r.Decorations()
			if err != nil {
				return err
			}
			if asJSON {
				j, err := toJSON(r.NewChangeCounter(), id, cm, deco[id])
				if err != nil {
					return err
				}
				if stat {
					changes, err := showChanges(r, cm)
					if err != nil {
						return err
					}
					if j.Stat, err = statsOf(r, changes); err != nil {
						return err
					}
				}
				return writeJSON(g.stdout, j)
			}
			pal := palette{colorOn(g.stdout)}
			refs := ""
			if d := deco[id]; len(d) > 0 {
				refs = " " + pal.yellow("("+strings.Join(d, ", ")+")")
			}
			fmt.Fprintf(g.stdout, "%s%s\n", pal.yellow("commit "+id.String()), refs)
			printCommitHeader(g, r.NewChangeCounter(), cm)
			if s := cm.Session; s != nil {
				if len(s.Argv) > 0 {
					fmt.Fprintf(g.stdout, "\n    argv:      %q\n", s.Argv)
				}
				if s.Start > 0 {
					fmt.Fprintf(g.stdout, "    started:   %s\n", fmtTime(s.Start))
				}
				switch {
				case s.End > 0:
					fmt.Fprintf(g.stdout, "    ended:     %s\n", fmtTime(s.End))
				case s.Status == "interrupted":
					// Recorded after art died: when the session ended is unknown.
					fmt.Fprintf(g.stdout, "    ended:     unknown (interrupted)\n")
				}
				if s.Version != "" {
					fmt.Fprintf(g.stdout, "    art:       %s\n", s.Version)
				}
				if len(s.Policy) > 0 {
					fmt.Fprintf(g.stdout, "    policy:    %s (the rules: art show --json)\n", policySummary(s.Policy))
				}
				if s.TraceID != nil {
					fmt.Fprintf(g.stdout, "    trace:     %s\n", s.TraceID.Short())
				} else if s.TraceLost != "" {
					fmt.Fprintf(g.stdout, "    trace:     not stored (%s)\n", repo.EscapeControls(s.TraceLost))
				}
			}
			fmt.Fprintln(g.stdout)
			changes, err := showChanges(r, cm)
			if err != nil {
				return err
			}
			if stat {
				return printStat(g, r, changes, pal)
			}
			return printPatches(g, r, changes, pal)
		},
	}
	c.Flags().BoolVar(&stat, "stat", false, "changed paths with line counts instead of the patch")
	c.Flags().BoolVar(&asJSON, "json", false, "machine-readable output")
	c.Flags().BoolVar(&traceSummary, "trace-summary", false, "summarise the session's syscall log: files read and written, programs run, connects")
	c.Flags().StringVarP(&dir, "mount", "m", ".", "workspace directory (for repository discovery)")
	return c
}

// policySummary describes a recorded path policy in one line.
func policySummary(raw []byte) string {
	var p struct {
		Default string `json:"default"`
		Rules   []struct {
			Permission string `json:"permission"`
			Source     string `json:"source"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return "unreadable"
	}
	count := map[string]int{}
	sources := map[string]bool{}
	var order []string
	for _, r := range p.Rules {
		count[r.Permission]++
		if !sources[r.Source] {
			sources[r.Source] = true
			order = append(order, r.Source)
		}
	}
	var parts []string
	for _, perm := range []string{"none", "view", "read", "write"} {
		if count[perm] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[perm], perm))
		}
	}
	if len(p.Rules) == 0 {
		// The read-only preset: it printed "rules: ; from ".
		return fmt.Sprintf("default %s; no rules", p.Default)
	}
	return fmt.Sprintf("default %s; rules: %s; from %s", p.Default, strings.Join(parts, ", "), strings.Join(order, ", "))
}

// showChanges is what commit cm changed against its first parent.
func showChanges(r *repo.Repo, cm *objects.Commit) ([]repo.Change, error) {
	var parentTree objects.ID
	if len(cm.Parents) > 0 {
		pc, err := r.LoadCommit(cm.Parents[0])
		if err != nil {
			return nil, err
		}
		parentTree = pc.Tree
	}
	return r.DiffTrees(parentTree, cm.Tree, nil)
}
