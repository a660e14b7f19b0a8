package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/artproject/art/repo"
)

func newPushCmd(g *globals) *cobra.Command {
	var dir, branch, msg string
	var quiet, allowEmpty bool
	c := &cobra.Command{
		Use:   "push [-m DIR] [-b BRANCH] [-M MSG]",
		Short: "record the host workspace DIR as a new commit",
		Long: `push snapshots the host directory DIR into /<basename of DIR>/ of a new
commit on the branch (default: the current one); the rest of the home tree
is kept from the parent commit. Files whose size, times, inode and mode match
the last push are not read again. Symlinks are stored as links, .art/ and
paths matched by DIR/.artignore (gitignore syntax) are left out, and so are
the repository file and its -wal/-shm companions. Sockets and devices are
skipped with a warning; an unreadable file aborts the push (nothing is
committed).

When the branch moved since DIR last synced (a session recorded on it),
push records DIR's changes since then on top of the branch's: what the
session changed and DIR did not is kept (a snapshot would undo it), and a
path both changed differently is a conflict that stops the push. A push
to a new branch (-b NAME) records DIR as it is, on the commit DIR last
synced with (what its content grew from). Paths .artignore leaves out
keep what the branch holds, and so do paths the .artignore of the commit
DIR last synced with left out, where DIR has nothing (pull did not write
them: no deletion). A branch a live session works on, or that holds an
interrupted worktree ('art status'), is refused: its commit would find
the branch moved.
So is the first push of a DIR that never synced (a copy) onto a branch
that holds a workspace of its name with other content, or to a new
branch starting there: it would replace what the branch holds. A DIR
that moved takes its record along.

Each entry added or changed since the last push or pull is listed as
FILE /ws/path (SIZE bytes, ID), DIR /ws/path, LINK /ws/path -> TARGET or
FIFO /ws/path; deletions are not listed ('art diff --name-status' shows
them). A push that would change nothing on the branch but times records
no commit (--allow-empty records one); new times go in with the next
change.`,
		Example: `  art push -m ~/src/app
  art push -m . -b experiment -M "before refactor"
  art push -q`,
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
			bar := newProgress(g.stderr)
			opts := repo.PushOptions{
				Dir: abs, Branch: branch, Message: msg, AllowEmpty: allowEmpty,
				Warn:     func(s string) { fmt.Fprintln(g.stderr, "art: warning:", repo.EscapeControls(s)) },
				Progress: func(done, total int64) { bar.update("hashing", done, total) },
			}
			if !quiet {
				opts.Report = func(line string) { fmt.Fprintln(g.stdout, line) }
			}
			res, err := r.Push(c.Context(), opts)
			bar.done()
			if err != nil {
				return err
			}
			where := res.Branch
			if where == "" {
				where = "detached HEAD"
			}
			// 'art pull' alone pulls HEAD: after a push onto another
			// branch it replaced the host's changes with HEAD's commit.
			pullRev := ""
			if h, err := r.Head(); res.Branch != "" && (err != nil || h.Branch != res.Branch) {
				pullRev = res.Branch
			}
			pull := g.pullCommand(abs, pullRev)
			if res.Unchanged {
				if res.MergedSince.IsZero() {
					fmt.Fprintf(g.stdout, "nothing to push: %s holds what %s (%s) has; no commit recorded (--allow-empty records one)\n", abs, where, res.Commit.Short())
					return nil
				}
				// The host lacks the branch's changes: it does not hold
				// what the branch has, the branch holds all it has.
				fmt.Fprintf(g.stdout, "nothing to push: %s (%s) holds all of %s; no commit recorded (--allow-empty records one)\n", where, res.Commit.Short(), abs)
				fmt.Fprintf(g.stdout, "%s has changes made since %s last synced (%s); '%s' brings them here\n", where, abs, res.MergedSince.Short(), pull)
				return nil
			}
			if res.Merged > 0 {
				fmt.Fprintf(g.stdout, "merged with %d change(s) made on %s since %s last synced (%s); '%s' brings them here\n",
					res.Merged, where, abs, res.MergedSince.Short(), pull)
			}
			if res.KeptUnsynced > 0 {
				fmt.Fprintf(g.stdout, "kept %d path(s) of the branch that %s never had (.artignore left them out when it last synced); '%s' brings them here\n",
					res.KeptUnsynced, abs, pull)
			}
			fmt.Fprintf(g.stdout, "[%s %s] %d files, %d dirs, %d links; %d read, %d new objects, %s stored in %s\n",
				where, res.Commit.Short(), res.Files, res.Dirs, res.Links, res.Hashed, res.NewObjects,
				humanBytes(res.NewBytes), res.Duration.Round(1e6))
			return nil
		},
	}
	c.Flags().StringVarP(&dir, "mount", "m", ".", "host workspace directory")
	c.Flags().StringVarP(&branch, "branch", "b", "", "branch to commit on (if missing, created on the commit DIR last synced with, else HEAD's)")
	c.Flags().StringVarP(&msg, "message", "M", "", "commit message (default \"push <workspace>\")")
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the summary")
	c.Flags().BoolVar(&allowEmpty, "allow-empty", false, "record a commit even when nothing changed")
	return c
}
