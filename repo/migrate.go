package repo

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// migrateWorkspaces is the Go part of schema 3 → 4 (the SQL part re-marks
// old rows' branches).
//
// Builds before kept a workspace pushed through a symbolic link under the
// link's path; push, pull and status now look it up under its real path
// (when the link leads to a directory of the same name, as they do). Such
// a row is moved to the real path, with its sync state and unfinished-pull
// marker, or dropped when a row of the real path synced later: left
// behind, the workspace looked never synced, and its next push recorded
// the host as it was, undoing the sessions since.
//
// It also makes the repository private, as art init makes it.
func migrateWorkspaces(tx *sql.Tx, path string) error {
	rows, err := tx.Query(`SELECT path, synced_at FROM workspaces`)
	if err != nil {
		return fmt.Errorf("read the workspaces: %w", err)
	}
	syncedAt := map[string]int64{}
	var paths []string
	for rows.Next() {
		var p string
		var at int64
		if err := rows.Scan(&p, &at); err != nil {
			rows.Close()
			return fmt.Errorf("read the workspaces: %w", err)
		}
		syncedAt[p] = at
		paths = append(paths, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the workspaces: %w", err)
	}
	sort.Strings(paths)
	exec := func(q string, args ...any) error {
		_, err := tx.Exec(q, args...)
		return err
	}
	drop := func(p string) error {
		if err := exec(`DELETE FROM synced_dirs WHERE workspace=?`, p); err != nil {
			return err
		}
		if err := exec(`DELETE FROM meta WHERE key=?`, pullingKey(p)); err != nil {
			return err
		}
		return exec(`DELETE FROM workspaces WHERE path=?`, p)
	}
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || real == p || filepath.Base(real) != filepath.Base(p) {
			continue // gone, not through a link, or another workspace (push keys it so too)
		}
		if at, ok := syncedAt[real]; ok {
			if at >= syncedAt[p] {
				if err := drop(p); err != nil {
					return fmt.Errorf("drop the record of %s (now %s): %w", p, real, err)
				}
				delete(syncedAt, p)
				continue
			}
			if err := drop(real); err != nil {
				return fmt.Errorf("drop the older record of %s: %w", real, err)
			}
		}
		for _, m := range []struct{ q, to, from string }{
			{`UPDATE workspaces SET path=? WHERE path=?`, real, p},
			{`UPDATE synced_dirs SET workspace=? WHERE workspace=?`, real, p},
			{`UPDATE OR REPLACE meta SET key=? WHERE key=?`, pullingKey(real), pullingKey(p)},
		} {
			if err := exec(m.q, m.to, m.from); err != nil {
				return fmt.Errorf("move the record of %s to %s: %w", p, real, err)
			}
		}
		syncedAt[real] = syncedAt[p]
		delete(syncedAt, p)
	}
	makePrivate(path)
	return nil
}

// makePrivate takes group and other access away from the repository file,
// its -wal and -shm files and its .art directory: the repository holds
// everything every session wrote, and agents run as another user. art
// init creates them so; builds before left them as the umask made them
// (0644, readable by the agent's user). A failure changes nothing else:
// the repository works as before.
func makePrivate(path string) {
	paths := []string{path, path + "-wal", path + "-shm"}
	if dir := filepath.Dir(path); filepath.Base(dir) == DirName {
		paths = append(paths, dir) // a directory of the user's own (-d) is theirs to set
	}
	for _, p := range paths {
		st, err := os.Lstat(p)
		if err != nil || !st.Mode().IsRegular() && !st.IsDir() || st.Mode().Perm()&0o077 == 0 {
			continue
		}
		_ = os.Chmod(p, st.Mode().Perm()&^0o077)
	}
}
