package repo

import (
	"fmt"

	"github.com/artproject/art/objects"
)

// PendingChanges counts the paths worktree wt has changed so far, as a
// user counts them (and as 'art diff --name-status' of its commit would
// list them): a name removed, a node made, a file copied up to be
// written, a directory whose permissions changed. Worktree.Pending counts
// the upper layer's rows instead, and a new file there is three: its own
// node and entry, and the entry of the directory it was made in, copied up
// to hold it. Such copied-up directories are bookkeeping and count only
// when their mode changed.
//
// It counts what is in SQLite: what a live mount has not applied yet, or
// what a killed one left in its journal (replayed when the worktree is
// next opened), is not counted.
func (r *Repo) PendingChanges(wt *Worktree) (int, error) {
	// Entries that remove a name (ino 0), point at a node of the lower
	// tree the upper layer has no row for (a rename's new name), or at a
	// node that is new (no base) or is not a directory (a copied-up file
	// is copied up to be changed).
	var n int
	err := r.DB.QueryRow(`SELECT count(*) FROM upper_dirents d
		LEFT JOIN upper_inodes i ON i.wt=d.wt AND i.ino=d.ino
		WHERE d.wt=? AND (d.ino=0 OR i.ino IS NULL OR i.base IS NULL OR i.type!=?)`,
		wt.ID, int(objects.TypeDir)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the pending changes of worktree #%d: %w", wt.ID, err)
	}
	// Copied-up directories: changed when their mode differs from the
	// entry their parent's lower tree has for them.
	rows, err := r.DB.Query(`SELECT i.mode, p.base, d.name FROM upper_inodes i
		JOIN upper_dirents d ON d.wt=i.wt AND d.ino=i.ino
		JOIN upper_inodes p ON p.wt=d.wt AND p.ino=d.dir
		WHERE i.wt=? AND i.type=? AND i.base IS NOT NULL AND p.base IS NOT NULL`,
		wt.ID, int(objects.TypeDir))
	if err != nil {
		return 0, fmt.Errorf("count the pending changes of worktree #%d: %w", wt.ID, err)
	}
	defer rows.Close()
	type dirRow struct {
		mode   uint32
		parent []byte
		name   []byte
	}
	var dirs []dirRow
	for rows.Next() {
		var d dirRow
		if err := rows.Scan(&d.mode, &d.parent, &d.name); err != nil {
			return 0, fmt.Errorf("count the pending changes of worktree #%d: %w", wt.ID, err)
		}
		dirs = append(dirs, d)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("count the pending changes of worktree #%d: %w", wt.ID, err)
	}
	rows.Close()
	for _, d := range dirs {
		parent, err := objects.FromBytes(d.parent)
		if err != nil {
			continue // not a tree id: nothing to compare with
		}
		t, err := r.LoadTree(parent)
		if err != nil {
			return 0, fmt.Errorf("count the pending changes of worktree #%d: %w", wt.ID, err)
		}
		if e, ok := t.Find(string(d.name)); !ok || e.Mode != d.mode&objects.PermMask {
			n++
		}
	}
	return n, nil
}
