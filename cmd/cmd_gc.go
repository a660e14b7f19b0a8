package cmd

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/artproject/art/repo"
)

func newGCCmd(g *globals) *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:     "gc",
		Short:   "delete objects no branch, HEAD or worktree reaches",
		Example: `  art branch -d old-attempt && art gc`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			r, err := g.openRepo(dir)
			if err != nil {
				return err
			}
			defer r.Close()
			res, err := r.GC(extraRoots(r))
			if err != nil {
				return err
			}
			printGCResult(g.stdout, g.stderr, res)
			return nil
		},
	}
	c.Flags().StringVarP(&dir, "mount", "m", ".", "workspace directory (for repository discovery)")
	return c
}

// printGCResult says what gc freed and, when it could not compact the
// file, why and what to do.
func printGCResult(stdout, stderr io.Writer, res *repo.GCResult) {
	fmt.Fprintf(stdout, "removed %d commits, %d trees, %d files, %d chunks; %s freed\n",
		res.Commits, res.Trees, res.Files, res.Chunks, humanBytes(res.BytesFreed))
	if errors.Is(res.CompactErr, repo.ErrReaderHolds) {
		fmt.Fprintf(stderr, "art: the repository file was not compacted: %s\n", res.CompactErr)
	} else if res.CompactErr != nil && repo.IsFull(res.CompactErr) {
		// The objects are gone all the same; SQLite reuses their
		// pages for what comes next.
		fmt.Fprintf(stderr, "art: warning: the repository file was not compacted: %s (it needs free space, and room in the temporary directory, about its own size; the freed room is reused for new data meanwhile)\n", repo.EscapeControls(res.CompactErr.Error()))
	} else if res.CompactErr != nil {
		// Not a matter of room (an I/O error, a file made
		// append-only): "needs free space" sent the user
		// freeing space that was there.
		fmt.Fprintf(stderr, "art: warning: the repository file was not compacted: %s (the objects were freed all the same, and their room is reused for new data; once the cause is fixed, 'art gc' compacts the file, and 'art fsck' checks the repository)\n", repo.EscapeControls(res.CompactErr.Error()))
	} else if res.FileBefore > 0 {
		fmt.Fprintf(stdout, "compacted the repository file: %s → %s\n", humanBytes(res.FileBefore), humanBytes(res.FileAfter))
	} else if res.BytesFreed > 0 {
		fmt.Fprintln(stdout, "(the freed room is reused for new data; the file is compacted once a fifth of it is free)")
	}
}

func newFsckCmd(g *globals) *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "fsck",
		Short: "re-hash every object and check every reference",
		Long: `fsck reads the whole repository: SQLite's own structure, every chunk, file,
tree and commit (re-hashed against its id), and every reference between
them, from branches, HEAD and worktrees. It changes nothing. Exit status 1
when anything is wrong; each problem names the damaged object.`,
		Example: `  art fsck`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			r, err := g.openRepo(dir)
			if err != nil {
				return err
			}
			defer r.Close()
			res, err := r.Fsck(nil)
			if err != nil {
				return err
			}
			for _, p := range res.Problems {
				fmt.Fprintln(g.stdout, p)
			}
			fmt.Fprintf(g.stdout, "checked %d chunks, %d files, %d trees, %d commits, %d branches; %s re-hashed\n",
				res.Chunks, res.Files, res.Trees, res.Commits, res.Refs, humanBytes(res.Bytes))
			if len(res.Problems) > 0 {
				return withCode(exitError, fmt.Errorf("%d problem(s) found", len(res.Problems)))
			}
			fmt.Fprintln(g.stdout, "no problems found")
			return nil
		},
	}
	c.Flags().StringVarP(&dir, "mount", "m", ".", "workspace directory (for repository discovery)")
	return c
}
