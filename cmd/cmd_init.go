package cmd

import (
	"fmt"
	"path/filepath"

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
				path = filepath.Join(abs, repo.DirName, repo.FileName)
			}
			r, err := repo.Init(path)
			if err != nil {
				return err
			}
			defer r.Close()
			fmt.Fprintf(g.stdout, "Initialized empty art repository in %s\n", r.Path)
			return nil
		},
	}
	c.Flags().StringVarP(&dir, "mount", "m", ".", "workspace directory")
	return c
}
