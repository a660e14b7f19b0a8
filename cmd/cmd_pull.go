package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
)

func newPullCmd(g *globals) *cobra.Command {
	var dir, rev string
	var force, quiet bool
	c := &cobra.Command{
		Use:   "pull [-m DIR] [--commit REV] [--force]",
		Short: "make the host workspace DIR match a commit",
		Long: `pull writes /<basename of DIR>/ of REV (default: HEAD) into DIR: it creates,
updates and deletes files, and restores modes, symlinks and times. Each file
is written atomically (temporary file, then rename). pull never writes
through a symlink or outside DIR. Written entries are listed as FILE, LINK,
FIFO or DIR, removed ones as DELETE, changed modes as MODE.

A host path whose content, type or mode changed since the last push or pull,
or that the host deleted, is a conflict: nothing is changed, the conflicts
are listed, and --force overrides ('art push' first records the host's
changes on top of the branch's, after which the pull has none). A
workspace emptied on the host takes the commit whole. Paths DIR/.artignore
leaves out are not written (listed as SKIP); push keeps the commit's there.
Host files the repository never held are left alone, and a directory
holding such files is never replaced, even with --force. The
repository's own files are never written. A path the host changes while the
pull runs is left as the host has it, and the pull ends with an error naming
it.

What git would run on this host is held back the same way, for review with
'art diff' and --force: an executable file or link in a git directory's
hooks (.git/hooks, a bare repository's, a submodule's, the workspace's
core.hooksPath) under a name git runs, a commondir or gitdir file, a git
config that gains a setting naming a command (core.fsmonitor,
aliases starting with !, include.path and every other one outside a short
list of inert settings such as user.email and remote URLs, read with git
itself), and a .git file or link (a submodule as git submodule add makes
it goes through). An agent can write all of these, and git diff does not
show them. What the workspace's last push stored is the user's own and
goes through.

A pull stopped half way (killed, a full disk) leaves DIR part pulled:
run the same pull again to finish it; art status says so until then.`,
		Example: `  art pull -m ~/src/app                   # the current branch
  art pull -m ~/src/app --commit attempt-2
  art pull -d ~/src/app/.art/art.db -m /tmp/export/app --commit 1a2b3c4d   # a copy elsewhere, named like the workspace`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			abs, err := repo.CheckPullTarget(g.defaultWorkspace(c, dir))
			if err != nil {
				return err
			}
			r, err := g.openRepo(abs)
			if err != nil {
				return err
			}
			defer r.Close()
			id, err := r.Resolve(rev)
			if err != nil {
				return err
			}
			opts := repo.PullOptions{Dir: abs, Commit: id, Force: force, Branch: pulledBranch(r, rev, id)}
			if !quiet {
				opts.Report = func(line string) { fmt.Fprintln(g.stdout, line) }
			}
			res, err := r.Pull(opts)
			if err != nil {
				return err
			}
			ignored := ""
			if res.Ignored > 0 {
				ignored = fmt.Sprintf("; %d path(s) of the commit left out by .artignore", res.Ignored)
			}
			fmt.Fprintf(g.stdout, "pulled %s into %s: %d created, %d updated, %d deleted%s\n", id.Short(), abs, res.Created, res.Updated, res.Deleted, ignored)
			if !res.ReplacedPush.IsZero() {
				// Said even with -q: the host's own changes left it.
				fmt.Fprintf(g.stderr, "art: note: %s does not build on %s's last push (%s): what that push recorded was replaced here; the repository keeps it ('%s' brings it back)\n",
					id.Short(), abs, res.ReplacedPush.Short(), g.pullCommand(abs, res.ReplacedPush.Short()))
			}
			return nil
		},
	}
	c.Flags().StringVarP(&dir, "mount", "m", ".", "host workspace directory")
	c.Flags().StringVar(&rev, "commit", "HEAD", "revision to pull")
	c.Flags().BoolVar(&force, "force", false, "overwrite host changes")
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the summary")
	return c
}

// pulledBranch names the branch whose tip a pull of rev (resolved to id)
// takes: rev itself when it is a branch at id, else HEAD's branch when id
// is its tip (a pull by the tip's id), or repo.DetachedHead for a pull of
// a detached HEAD's commit; "" for any other commit (an old one, to go
// back to; even when another branch, a bookmark, is at it), after which a
// push records the host as it is.
func pulledBranch(r *repo.Repo, rev string, id objects.ID) string {
	if tip, err := r.BranchTip(rev); err == nil && tip == id {
		return rev
	}
	h, err := r.Head()
	switch {
	case err != nil:
		return ""
	case h.Detached():
		if h.Commit == id {
			return repo.DetachedHead
		}
	default:
		if tip, err := r.BranchTip(h.Branch); err == nil && tip == id {
			return h.Branch
		}
	}
	return ""
}
