package repo

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// migrateWorkspaces is the Go part of schema 3 → 4 (the SQL part re-marks
// old rows' branches): it moves the record of each workspace an older
// build kept under a link's path to its real path (relinkWorkspace), and
// the repository is made private, as art init now makes it, once the
// migration committed (applyMigrations). A link that
// does not resolve now (a disk not mounted) is moved later, by the first
// push or status that names the workspace through it.
func migrateWorkspaces(tx *sql.Tx, path string) error {
	rows, err := tx.Query(`SELECT path FROM workspaces`)
	if err != nil {
		return fmt.Errorf("read the workspaces: %w", err)
	}
	var paths []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return fmt.Errorf("read the workspaces: %w", err)
		}
		paths = append(paths, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the workspaces: %w", err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || real == p || filepath.Base(real) != filepath.Base(p) {
			continue // gone, not through a link, or another workspace (push keys it so too)
		}
		if err := relinkWorkspace(tx, p, real); err != nil {
			return err
		}
	}
	return nil // applyMigrations makes the repository private once this committed
}

// execQuerier is what relinkWorkspace needs: a transaction.
type execQuerier interface {
	querier
	Exec(query string, args ...any) (sql.Result, error)
}

// relinkWorkspace moves the record of a workspace kept under link (the
// path it was pushed through, by builds before schema 4) to real, its
// real path, where push, pull and status look it up; left behind, the
// workspace looked never synced, and its next push recorded the host as
// it was, undoing the sessions since. When real has a record of its own,
// the one synced later stays. The sync state goes with the record, and
// so does the link's unfinished-pull marker unless the real path has one
// (a marker is about the directory: the real path's stays). Nothing is
// done when link has no record.
func relinkWorkspace(tx execQuerier, link, real string) error {
	syncedAt := func(p string) (int64, bool, error) {
		var at int64
		err := tx.QueryRow(`SELECT synced_at FROM workspaces WHERE path=?`, p).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		return at, err == nil, err
	}
	linkAt, ok, err := syncedAt(link)
	if err != nil || !ok {
		return err
	}
	realAt, realOK, err := syncedAt(real)
	if err != nil {
		return err
	}
	var err2 error
	exec := func(q string, args ...any) {
		if err2 == nil {
			_, err2 = tx.Exec(q, args...)
		}
	}
	if realOK && realAt >= linkAt {
		exec(`DELETE FROM synced_dirs WHERE workspace=?`, link)
		exec(`DELETE FROM workspaces WHERE path=?`, link)
	} else {
		exec(`DELETE FROM synced_dirs WHERE workspace=?`, real) // rows of no record, or of the older one
		exec(`DELETE FROM workspaces WHERE path=?`, real)
		exec(`UPDATE workspaces SET path=? WHERE path=?`, real, link)
		exec(`UPDATE synced_dirs SET workspace=? WHERE workspace=?`, real, link)
		exec(`UPDATE OR IGNORE meta SET key=? WHERE key=?`, pullingKey(real), pullingKey(link))
	}
	exec(`DELETE FROM meta WHERE key=?`, pullingKey(link))
	if err2 != nil {
		return fmt.Errorf("move the record of workspace %s to %s: %w", link, real, err2)
	}
	return nil
}

// workspaceKey is the path a host workspace's records are kept under:
// abs's real path when a link leads to a directory of the same name (a
// link to a directory of another name is another workspace), and abs
// otherwise. Pushed through a link, a workspace had two records, and a
// push merged from a base the pulls (which refuse links) never updated.
// A record an older build kept under abs moves there (relinkWorkspace).
// On an error, the key is abs when its link could not be read, and the
// real path when the record could not be moved.
//
// A workspace directory that moved with its repository (.art) takes its
// record along: when the key has none, and exactly one workspace of its
// name is recorded under a path that no longer exists, that record moves
// to the key (adoptMoved). Without it the moved directory looked never synced,
// and its push replaced the branch's copy, undoing the sessions since.
func (r *Repo) workspaceKey(abs string) (string, error) {
	key, err := r.linkKey(abs)
	if err != nil {
		return key, err
	}
	return key, r.adoptMoved(key)
}

// linkKey is workspaceKey without the adoption of a moved workspace's
// record.
func (r *Repo) linkKey(abs string) (string, error) {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return abs, err
	}
	if filepath.Base(real) != filepath.Base(abs) {
		return abs, nil
	}
	return real, r.relinkWorkspace(abs, real)
}

// movedRecord returns the path of the one workspace of dir's name kept
// under a path that no longer exists, when dir has no record and holds
// the repository (dir/.art/art.db: the workspace moved with it). It is
// "" when there is none, or more than one (which one moved is not known),
// or the repository lives elsewhere (-d): then a directory of the name
// that vanished says less.
func (r *Repo) movedRecord(dir string) (string, error) {
	if r.Path != filepath.Join(dir, DirName, FileName) {
		return "", nil
	}
	var n int
	if err := r.DB.QueryRow(`SELECT count(*) FROM workspaces WHERE path=?`, dir).Scan(&n); err != nil {
		return "", fmt.Errorf("look up the record of workspace %s: %w", dir, err)
	}
	if n > 0 {
		return "", nil
	}
	rows, err := r.DB.Query(`SELECT path FROM workspaces WHERE name=?`, filepath.Base(dir))
	if err != nil {
		return "", fmt.Errorf("look up the records of workspaces named %s: %w", filepath.Base(dir), err)
	}
	var gone []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return "", err
		}
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			gone = append(gone, p)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(gone) != 1 {
		return "", err
	}
	return gone[0], nil
}

// moveRecord moves the record of workspace from to to (relinkWorkspace)
// in a transaction of its own; fail words a failure, after which nothing
// changed.
func (r *Repo) moveRecord(from, to string, fail func(error) error) error {
	tx, err := r.Begin()
	if err != nil {
		return fail(fmt.Errorf("move the record of workspace %s to %s: %w", from, to, err))
	}
	defer tx.Rollback()
	if err := relinkWorkspace(tx, from, to); err != nil {
		return fail(err)
	}
	if err := tx.Commit(); err != nil {
		return fail(fmt.Errorf("move the record of workspace %s to %s: %w", from, to, err))
	}
	return nil
}

// adoptMoved moves to dir the record movedRecord finds (see workspaceKey).
func (r *Repo) adoptMoved(dir string) error {
	old, err := r.movedRecord(dir)
	if err != nil || old == "" {
		return err
	}
	return r.moveRecord(old, dir, func(err error) error {
		return fmt.Errorf("%w; the repository is unchanged: fix the cause and run the command again", err)
	})
}

// relinkWorkspace is the transaction for relinkWorkspace at run time, when
// a command names a workspace through a link (abs, before resolving) whose
// record an older build kept there. Cheap when there is none.
func (r *Repo) relinkWorkspace(abs, real string) error {
	if abs == real {
		return nil
	}
	// Failed, the move changed nothing: the record stays under the
	// link, where the next command through it finds it again (under the
	// real path alone, the workspace would look never synced).
	fail := func(err error) error {
		return fmt.Errorf("%w; the repository is unchanged (the record stays under %s): fix the cause and run the command again through the link", err, abs)
	}
	var n int
	if err := r.DB.QueryRow(`SELECT count(*) FROM workspaces WHERE path=?`, abs).Scan(&n); err != nil {
		return fail(fmt.Errorf("look up the record of workspace %s: %w", abs, err))
	}
	if n == 0 {
		return nil
	}
	return r.moveRecord(abs, real, fail)
}

// makePrivate takes group and other access away from the repository file,
// its -wal and -shm files and its .art directory: the repository holds
// everything every session wrote, and agents run as another user. art
// init creates them so; builds before left them as the umask made them
// (0644, readable by the agent's user). A failure changes nothing else:
// the repository works as before.
func makePrivate(path string) {
	paths := []string{path, path + "-wal", path + "-shm"}
	if dir := filepath.Dir(path); filepath.Base(dir) == DirName && filepath.Base(path) == FileName {
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
