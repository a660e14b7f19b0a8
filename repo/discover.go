package repo

import (
	"fmt"
	"os"
	"path/filepath"
)

// DirName and FileName locate a repository inside a workspace.
const (
	DirName  = ".art"
	FileName = "art.db"
)

// Discover finds the repository file: the explicit path if given, else
// $ART_DB, else .art/art.db in startDir or the nearest parent holding one.
// It returns ErrNoRepo when none exists.
func Discover(explicit, startDir string) (string, error) {
	if explicit != "" {
		return filepath.Abs(explicit)
	}
	if env := os.Getenv("ART_DB"); env != "" {
		return filepath.Abs(env)
	}
	dir, err := filepath.Abs(startDir)
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, DirName, FileName)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w in %s or any parent (create one with 'art init -m DIR', or pass -d FILE / set ART_DB)", ErrNoRepo, startDir)
		}
		dir = parent
	}
}
