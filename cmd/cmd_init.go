package cmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/artproject/art/repo"
)

func newInitCmd(g *globals) *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "init [-m DIR]",
		Short: "create a repository in DIR/.art/art.db",
		Example: `  art init              # .art/art.db in the current directory
  art init -m ~/src/app # ~/src/app/.art/art.db
  art init -d /var/art/app.db`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			abs, err := repo.CheckWorkspaceDir(dir)
			if err != nil {
				return err
			}
			// A workspace push and run refuse (/, whose base name names
			// nothing in the home) is refused before anything is made:
			// init -m / made /.art/art.db, which no command could then
			// use. With -d alone the repository is not in a workspace.
			if g.db == "" || c.Flags().Changed("mount") {
				if _, err := repo.WorkspaceName(abs); err != nil {
					return err
				}
			}
			path := g.db
			if path == "" {
				if err := repo.CheckNewArtDir(abs); err != nil {
					return err
				}
				path = filepath.Join(abs, repo.DirName, repo.FileName)
			}
			r, err := repo.Init(path)
			if err != nil {
				return err
			}
			defer r.Close()
			fmt.Fprintf(g.stdout, "Initialized empty art repository in %s\n", r.Path)
			if g.db == "" {
				if err := ignoreForGit(filepath.Dir(r.Path)); err != nil {
					fmt.Fprintf(g.stderr, "art: warning: %v\n", err)
				}
			}
			return nil
		},
	}
	c.Flags().StringVarP(&dir, "mount", "m", ".", "workspace directory")
	return c
}

// ignoreForGit writes a .gitignore of "*" into the workspace's .art
// directory, as virtualenv and pytest do in theirs: a workspace is often
// a git repository, where .art showed as untracked and the user's git
// add -A committed the repository file (every session's content) into
// git, which the next push then stored again inside .git. An existing
// file is left alone.
func ignoreForGit(artDir string) error {
	f, err := os.OpenFile(filepath.Join(artDir, ".gitignore"), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("keep %s out of git: %w", artDir, err)
	}
	_, err = f.WriteString("# art's repository, kept out of git (art init wrote this)\n*\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("keep %s out of git: %w", artDir, err)
	}
	return nil
}
