package cmd

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
	"github.com/artproject/art/tracer"
)

// errNoTrace is returned for commits of sessions that were not traced.
var errNoTrace = errors.New("no syscall log")

// eachTraceEvent reads the stored syscall log of a commit event by event
// (a log can be far larger than memory: tracer.EachJSON).
func eachTraceEvent(r *repo.Repo, rev string, f func(e *tracer.Event) error) error {
	id, err := r.Resolve(rev)
	if err != nil {
		return err
	}
	c, err := r.LoadCommit(id)
	if err != nil {
		return err
	}
	if c.Session != nil && c.Session.TraceLost != "" {
		return fmt.Errorf("%w: commit %s was traced, but its syscall log could not be stored (%s)", errNoTrace, id.Short(), repo.EscapeControls(c.Session.TraceLost))
	}
	if c.Session == nil || c.Session.TraceID == nil {
		return fmt.Errorf("%w: commit %s was not traced (record one with 'art run --trace')", errNoTrace, id.Short())
	}
	fr, err := objects.OpenFile(r, *c.Session.TraceID)
	if err != nil {
		return fmt.Errorf("syscall log of %s: %w", id.Short(), err)
	}
	if err := tracer.EachJSON(bufio.NewReaderSize(fr, 1<<20), f); err != nil {
		return fmt.Errorf("syscall log of %s: %w", id.Short(), err)
	}
	return nil
}

// maxPidsListed bounds the pids an absent --pid lists.
const maxPidsListed = 10

func newTraceCmd(g *globals) *cobra.Command {
	var asJSON bool
	var calls string
	var pid int
	var dir string
	c := &cobra.Command{
		Use:   "trace [REV] [--json] [--syscalls LIST] [--pid N]",
		Short: "print the syscall log of a traced session",
		Long: `trace prints the syscall log stored with a session run with --trace
(default: HEAD), strace-like, or as JSON lines with --json. --syscalls keeps
only the named syscalls (process events stay); --pid keeps one process (host
or sandbox pid). 'art show REV --trace-summary' condenses the log.`,
		Example: `  art run --trace --trace-syscalls openat,execve -- make
  art trace
  art trace HEAD~1 --syscalls execve
  art trace --json --pid 2 | jq .`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			rev := "HEAD"
			if len(args) == 1 {
				rev = args[0]
			}
			var keep map[string]bool
			if calls != "" {
				names := strings.Split(calls, ",")
				for i := range names {
					names[i] = strings.TrimSpace(names[i])
				}
				if _, err := tracer.Lookup(names); err != nil {
					return usageErr("--syscalls: %v%s", err, syscallNamesHint)
				}
				keep = map[string]bool{}
				for _, n := range names {
					keep[n] = true
				}
			}
			if pid < 0 {
				return usageErr("--pid %d: not a process id (give one the log shows, e.g. --pid 2; 0: every process)", pid)
			}
			r, err := g.openRepo(dir)
			if err != nil {
				return err
			}
			defer r.Close()
			w := bufio.NewWriterSize(g.stdout, 1<<16)
			defer w.Flush()
			var buf []byte
			// The processes of the log, for when --pid matches none:
			// empty output, exit 0, read as "it made no syscalls".
			var seen []string
			seenPid := map[int]bool{}
			matched := false
			err = eachTraceEvent(r, rev, func(e *tracer.Event) error {
				if pid != 0 && e.Pid != pid && e.NSPid != pid {
					if !seenPid[e.Pid] && len(seen) <= maxPidsListed {
						seenPid[e.Pid] = true
						if e.NSPid != 0 && e.NSPid != e.Pid {
							seen = append(seen, fmt.Sprintf("%d (host %d)", e.NSPid, e.Pid))
						} else {
							seen = append(seen, strconv.Itoa(e.Pid))
						}
					}
					return nil
				}
				matched = true
				if keep != nil && e.Kind == tracer.KindSyscall && !keep[e.Syscall] {
					return nil
				}
				buf = buf[:0]
				if asJSON {
					buf = e.AppendJSON(buf)
				} else {
					buf = e.AppendText(buf)
				}
				if !bytes.HasSuffix(buf, []byte("\n")) {
					buf = append(buf, '\n')
				}
				w.Write(buf) // as any filter's output: a closed pipe ends art by SIGPIPE
				return nil
			})
			if err != nil || pid == 0 || matched {
				return err
			}
			list := strings.Join(seen[:min(len(seen), maxPidsListed)], ", ")
			if len(seen) > maxPidsListed {
				list += ", ..."
			}
			if list == "" {
				return fmt.Errorf("pid %d is not in the syscall log of %s, which has no events", pid, rev)
			}
			return fmt.Errorf("pid %d is not in the syscall log of %s; its processes: %s", pid, rev, list)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "JSON lines, one event each")
	c.Flags().StringVar(&calls, "syscalls", "", "only these syscalls (comma-separated)")
	c.Flags().IntVar(&pid, "pid", 0, "only this process (host or sandbox pid)")
	c.Flags().StringVarP(&dir, "mount", "m", ".", "workspace directory (for repository discovery)")
	return c
}

// printTraceSummary prints what a traced session did, condensed. Paths and
// addresses are the agent's: they are quoted when they hold control
// characters (repo.QuotePath), so they cannot forge lines or reach the
// terminal as escape sequences.
func printTraceSummary(g *globals, s tracer.Summary) {
	q := repo.QuotePath
	quoted := func(items []string) []string {
		out := make([]string, len(items))
		for i, it := range items {
			out[i] = q(it)
		}
		return out
	}
	list := func(title string, items []string) {
		fmt.Fprintf(g.stdout, "%s (%d):\n", title, len(items))
		for _, it := range items {
			fmt.Fprintf(g.stdout, "  %s\n", it)
		}
	}
	list("files read", quoted(s.Read))
	list("files written", quoted(s.Written))
	list("created", quoted(s.Created))
	var ren []string
	for _, r := range s.Renamed {
		ren = append(ren, q(r.From)+" -> "+q(r.To))
	}
	list("renamed", ren)
	list("deleted", quoted(s.Deleted))
	var ex []string
	for _, e := range s.Execs {
		ex = append(ex, fmt.Sprintf("%s %q", q(e.Path), e.Argv))
	}
	list("executed", ex)
	var con []string
	for _, c := range s.Connects {
		con = append(con, fmt.Sprintf("%s %s: %s", c.Family, q(c.Address), q(c.Result)))
	}
	list("network connects", con)
	fmt.Fprintf(g.stdout, "syscalls (%d kinds):\n", len(s.Syscalls))
	for _, c := range s.Syscalls {
		fmt.Fprintf(g.stdout, "  %-20s %7d calls", c.Name, c.Calls)
		if c.Errors > 0 {
			var errs []string
			for name, n := range c.Errnos {
				errs = append(errs, fmt.Sprintf("%s %d", name, n))
			}
			fmt.Fprintf(g.stdout, ", %d errors (%s)", c.Errors, strings.Join(sortedStrings(errs), ", "))
		}
		fmt.Fprintln(g.stdout)
	}
}

func sortedStrings(s []string) []string {
	sort.Strings(s)
	return s
}
