package repo

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/artproject/art/internal/owner"
)

// DirName and FileName locate a repository inside a workspace.
const (
	DirName  = ".art"
	FileName = "art.db"
	// IgnoreName is the workspace's pattern file of what push leaves out.
	IgnoreName = ".artignore"
)

// IsDirName reports whether name is DirName in any case: on a
// case-insensitive workspace (a CIFS share, exFAT, an ext4 casefold
// directory) .ART is .art, and an agent's .ART/config/binds.json, pulled,
// was the host's. Trailing dots and spaces do not count either: exFAT
// drops trailing dots and Windows shares drop both, so there ".art." is
// .art.
func IsDirName(name string) bool { return sameReservedName(name, DirName) }

// isIgnoreFile reports whether rel, workspace-relative, is the workspace's
// IgnoreName, in any case and with any trailing dots or spaces (see
// IsDirName).
func isIgnoreFile(rel string) bool { return sameReservedName(rel, IgnoreName) }

// sameReservedName reports whether name is reserved, a name some
// filesystem the workspace may be on takes as it.
func sameReservedName(name, reserved string) bool {
	return strings.EqualFold(strings.TrimRight(name, ". "), reserved)
}

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
	// A file is no place to search from: "no art repository found in
	// FILE" sent the user to create one there.
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return "", fmt.Errorf("workspace %s: not a directory; -m names the workspace directory, from which the repository is found upward (or name the repository with -d FILE)", dir)
	}
	for {
		if p, ok, err := repoFileIn(dir); err != nil {
			return "", err
		} else if ok {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w in %s or any parent (create one with 'art init -m DIR', or pass -d FILE / set ART_DB)", ErrNoRepo, startDir)
		}
		dir = parent
	}
}

// repoFileIn returns dir's repository file, if dir holds one: .art must be
// a real directory and art.db a regular file, neither a symbolic link. A
// link, which anyone who may write dir can make (an agent in --direct
// mode, in its workspace), would have art log, push and pull in dir work
// on another project's repository: pull then wrote that project's files,
// secrets included, where the agent reads them.
func repoFileIn(dir string) (string, bool, error) {
	artDir := filepath.Join(dir, DirName)
	p := filepath.Join(artDir, FileName)
	for _, q := range []string{artDir, p} {
		st, err := os.Lstat(q)
		if err != nil {
			return "", false, nil
		}
		if st.Mode()&os.ModeSymlink != 0 {
			// Said, not skipped: the search would go on to a parent's
			// repository, or art run to direct mode.
			return "", false, fmt.Errorf("%s is a symbolic link, which art does not follow to find a repository (anyone who may write %s could have made it); name the repository with -d FILE or ART_DB", q, filepath.Dir(q))
		}
		if q == artDir && !st.IsDir() || q == p && !st.Mode().IsRegular() {
			return "", false, nil
		}
		if uid, ok := foreignOwner(st); ok {
			// Said, not skipped, as a link is.
			return "", false, fmt.Errorf("%s belongs to uid %d, not to you: art does not take a repository another user may have planted where it searches (a .art in /tmp or a shared directory had root's push store its files where that user reads them, and pull write theirs); name it with -d FILE or ART_DB if you trust it", q, uid)
		}
	}
	return p, true, nil
}

// CheckNewArtDir refuses to make a workspace's repository in a .art that
// is a symbolic link or belongs to another user (see foreignOwner): art
// init as root created art.db and .gitignore wherever a local user's
// .art link led (any directory of the host), or in their own .art, where
// they could replace the file or plant its -wal for SQLite to replay;
// every later command then refused it as a found repository anyway.
func CheckNewArtDir(workspace string) error {
	artDir := filepath.Join(workspace, DirName)
	st, err := os.Lstat(artDir)
	if err != nil {
		return nil // none yet (other errors: Init says)
	}
	if st.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("init: %s is a symbolic link, which art does not follow to make a repository (anyone who may write %s could have made it); remove it, or name the repository file with -d", artDir, workspace)
	}
	if uid, ok := foreignOwner(st); ok {
		return fmt.Errorf("init: %s belongs to uid %d, not to you: whoever owns it could replace the repository art makes there; remove it, or name the repository file with -d", artDir, uid)
	}
	return nil
}

// foreignOwner reports the owner of a .art directory or repository file
// found by searching, when that is someone the caller does not trust (as
// git's safe.directory; see owner.Trusted).
func foreignOwner(st os.FileInfo) (uint32, bool) {
	uid, ok := owner.Of(st)
	if !ok || owner.Trusted(uid) {
		return 0, false
	}
	return uid, true
}
