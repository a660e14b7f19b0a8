package repo

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artproject/art/objects"
)

// dbDump describes everything a database file holds: its schema and every
// row of every table, read on a connection of its own (no art code).
func dbDump(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b strings.Builder
	var tables []string
	rows, err := db.Query(`SELECT type, name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var typ, name, q string
		if err := rows.Scan(&typ, &name, &q); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s: %s\n", typ, name, q)
		if typ == "table" {
			tables = append(tables, name)
		}
	}
	rows.Close()
	for _, tb := range tables {
		rows, err := db.Query(`SELECT * FROM "` + tb + `" ORDER BY 1, 2`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %x\n", tb, fmt.Sprint(vals...))
		}
		rows.Close()
	}
	return b.String()
}

// modes lists the permission bits of a repository's file, its -wal and
// -shm files and its directory.
func modes(path string) string {
	var s []string
	for _, p := range []string{path, path + "-wal", path + "-shm", filepath.Dir(path)} {
		if st, err := os.Stat(p); err == nil {
			s = append(s, fmt.Sprintf("%s %v", filepath.Base(p), st.Mode().Perm()))
		}
	}
	return strings.Join(s, ", ")
}

// A migration that fails half way leaves the old schema and every row as
// they were (one transaction), and the host's files too (the repository's
// modes: makePrivate ran before the commit), and says what failed, that
// nothing changed and what to do. The failures are real: a trigger that
// aborts the statement, a table an older build left without a column, a
// page limit for SQLITE_FULL.
func TestMigrationFailureLeavesTheOldSchema(t *testing.T) {
	const abort = `SELECT RAISE(ABORT, 'injected failure')`
	for _, tc := range []struct {
		name     string
		schema   int                                                     // the version the repository is turned back to
		setup    func(t *testing.T, r *Repo, real, link string) []string // statements run before the failure is armed
		inject   []string                                                // statements that arm the failure
		maxPage  int                                                     // >0: max_page_count this many pages above the file's
		want     string                                                  // in the error
		wantFull bool
	}{
		{
			name: "relinkWorkspace: moving the record", schema: 3,
			setup:  linkRecord,
			inject: []string{`CREATE TRIGGER inj BEFORE UPDATE ON workspaces BEGIN ` + abort + `; END`},
			want:   "move the record of workspace",
		},
		{
			name: "relinkWorkspace: the link's sync rows, the real path's record newer", schema: 3,
			setup: func(t *testing.T, r *Repo, real, link string) []string {
				v1 := mustResolve(t, r, "main")
				return append(linkRecord(t, r, real, link),
					fmt.Sprintf(`INSERT INTO workspaces(path, name, commit_id, branch, synced_at) VALUES('%s', 'ws', x'%x', 'main', %d)`, real, v1[:], int64(1)<<62))
			},
			inject: []string{`CREATE TRIGGER inj BEFORE DELETE ON synced_dirs BEGIN ` + abort + `; END`},
			want:   "move the record of workspace",
		},
		{
			name: "relinkWorkspace: the link's unfinished-pull marker", schema: 3,
			setup: func(t *testing.T, r *Repo, real, link string) []string {
				return append(linkRecord(t, r, real, link),
					fmt.Sprintf(`INSERT INTO meta(key, value) VALUES('%s', '%s')`, pullingKey(link), mustResolve(t, r, "main")))
			},
			inject: []string{`CREATE TRIGGER inj BEFORE UPDATE ON meta WHEN OLD.key LIKE 'pulling %' BEGIN ` + abort + `; END`},
			want:   "move the record of workspace",
		},
		{
			name: "migrateSyncRowsWithoutTreeID: the rewrite", schema: 3,
			setup: func(t *testing.T, r *Repo, real, link string) []string {
				old := appendSyncRowEntry([]byte(syncDirMagic), "a", &syncedEntry{typ: objects.TypeSymlink, mode: 0o777, target: "b"})
				return []string{fmt.Sprintf(`INSERT INTO synced_dirs(workspace, dir, data) VALUES('/ws', 'd', x'%x')`, packSyncRow(old))}
			},
			inject: []string{`CREATE TRIGGER inj BEFORE UPDATE ON synced_dirs BEGIN ` + abort + `; END`},
			want:   "rewrite the sync state of /ws",
		},
		{
			name: "migrateSyncRowsWithoutTreeID: the table is gone", schema: 3,
			inject: []string{`ALTER TABLE synced_dirs RENAME TO synced_dirs_elsewhere`},
			want:   "read the sync state",
		},
		{
			name: "the new schema version", schema: 3,
			setup:  linkRecord,
			inject: []string{`CREATE TRIGGER inj BEFORE UPDATE ON meta WHEN OLD.key='schema_version' BEGIN ` + abort + `; END`},
			want:   "record schema version",
		},
		{
			name: "migrateSyncedBlobs: the table is gone", schema: 1,
			inject: []string{`DROP TABLE synced`},
			want:   "read the sync state",
		},
		{
			name: "migrateSyncedRows: a table without a column", schema: 1,
			inject: []string{`DROP TABLE synced`, `CREATE TABLE synced(workspace TEXT NOT NULL, path TEXT NOT NULL, type INTEGER NOT NULL, PRIMARY KEY(workspace, path))`},
			want:   "read the sync state",
		},
		{
			name: "insertSyncRows: the disk is full", schema: 1,
			setup: func(t *testing.T, r *Repo, real, link string) []string {
				m := map[string]*syncedEntry{}
				for i := range 3000 {
					m[fmt.Sprintf("dir%d/file%d", i%300, i)] = &syncedEntry{typ: objects.TypeFile, mode: 0o644, id: objects.Hash([]byte{byte(i), byte(i >> 8)}), size: int64(i), mtime: int64(i), ctime: int64(i), ino: uint64(i)}
				}
				blob, enc := objects.Compress(encodeSyncBlob(m))
				return []string{`DELETE FROM synced`, fmt.Sprintf(`INSERT INTO synced VALUES('/ws', %d, x'%x')`, enc, blob)}
			},
			maxPage:  8,
			want:     "convert the sync state of /ws",
			wantFull: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, real, link := linkedWorkspace(t)
			push(t, r, real, "v1")
			path := r.Path
			var stmts []string
			if tc.setup != nil {
				stmts = tc.setup(t, r, real, link)
			}
			switch tc.schema {
			case 3:
				stmts = append(stmts, `UPDATE meta SET value='3' WHERE key='schema_version'`)
			case 1:
				stmts = append([]string{
					`CREATE TABLE synced(workspace TEXT PRIMARY KEY, enc INTEGER NOT NULL, data BLOB NOT NULL)`,
					`DROP TABLE synced_dirs`,
					`ALTER TABLE upper_inodes DROP COLUMN uid`,
					`ALTER TABLE upper_inodes DROP COLUMN gid`,
					`DROP INDEX refs_commit`, `DROP INDEX workspaces_commit`, `DROP INDEX worktrees_base`,
					`UPDATE meta SET value='1' WHERE key='schema_version'`,
				}, stmts...)
			}
			for _, q := range append(stmts, tc.inject...) {
				if _, err := r.DB.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			r.Close()
			for _, p := range []string{path, path + "-wal", path + "-shm", filepath.Dir(path)} {
				os.Chmod(p, 0o755) // as builds before made them: the migration takes group and other access away
			}
			before, beforeModes := dbDump(t, path), modes(path)

			var err error
			if tc.maxPage > 0 {
				pages := vacuumedPages(t, path)
				db := sql.OpenDB(connector{dsn: dsn(path, false) + fmt.Sprintf("&_pragma=max_page_count(%d)", pages+tc.maxPage), drv: newDriver()})
				fr := &Repo{DB: db, Path: path}
				fr.objCache.init()
				err = fr.migrate(false)
				unpersistWAL(db) // as open does for a file that had none
				db.Close()
				if err != nil {
					err = fmt.Errorf("open repository %s: %w", path, err)
				}
			} else {
				var r2 *Repo
				r2, err = Open(path)
				if err == nil {
					r2.Close()
				}
			}
			if err == nil {
				t.Fatalf("the migration did not fail")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, fmt.Sprintf("migrate schema %d→", tc.schema)) {
				t.Errorf("the error does not say what failed (want %q): %v", tc.want, err)
			}
			if !strings.Contains(msg, fmt.Sprintf("the repository is unchanged (schema %d)", tc.schema)) {
				t.Errorf("the error does not say that nothing changed and what to do: %v", err)
			}
			if tc.wantFull && !IsFull(err) {
				t.Errorf("SQLITE_FULL is lost in the wrapping (no advice to free space): %v", err)
			}
			if after := dbDump(t, path); after != before {
				t.Errorf("the failed migration changed the repository:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if after := modes(path); after != beforeModes {
				t.Errorf("the failed migration changed the host's files: %s, were %s", after, beforeModes)
			}
		})
	}
}

// vacuumedPages compacts a database file (no art code), so that the room
// a max_page_count leaves is all there is, and returns its page count.
func vacuumedPages(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pages int
	if _, err := db.Exec(`VACUUM`); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	return pages
}

// linkRecord is the setup of a workspace an old build pushed through a
// link: its record and sync rows under the link's path.
func linkRecord(t *testing.T, r *Repo, real, link string) []string {
	return []string{
		fmt.Sprintf(`UPDATE workspaces SET path='%s', synced_at=100 WHERE path='%s'`, link, real),
		fmt.Sprintf(`UPDATE synced_dirs SET workspace='%s' WHERE workspace='%s'`, link, real),
	}
}

// A record kept under a link's path is moved by the first push or status
// through the link (relinkWorkspace at run time). When the move fails,
// both say what failed and that the repository is unchanged (the record
// stays under the link, where the next attempt finds it), and nothing
// changed.
func TestRelinkWorkspaceFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		use  func(r *Repo, link string) error
	}{
		{"status", func(r *Repo, link string) error { _, err := r.HostDrift(link); return err }},
		{"push", func(r *Repo, link string) error {
			_, err := r.Push(context.Background(), PushOptions{Dir: link})
			return err
		}},
	} {
		for _, inject := range []string{
			`CREATE TRIGGER inj BEFORE UPDATE ON workspaces BEGIN SELECT RAISE(ABORT, 'injected failure'); END`,
			`CREATE TRIGGER inj BEFORE UPDATE ON synced_dirs BEGIN SELECT RAISE(ABORT, 'injected failure'); END`,
		} {
			t.Run(tc.name+" "+strings.Fields(inject)[5], func(t *testing.T) {
				r, _, real, link := linkedWorkspace(t)
				push(t, r, real, "v1")
				for _, q := range append(linkRecord(t, r, real, link), inject) {
					if _, err := r.DB.Exec(q); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				before := dbDump(t, r.Path)
				err := tc.use(r, link)
				if err == nil {
					t.Fatalf("%s through the link did not fail", tc.name)
				}
				msg := err.Error()
				for _, want := range []string{link, "move the record of workspace", "injected failure", "the repository is unchanged"} {
					if !strings.Contains(msg, want) {
						t.Errorf("the error does not say %q: %v", want, err)
					}
				}
				if after := dbDump(t, r.Path); after != before {
					t.Errorf("the failed %s changed the repository:\nbefore:\n%s\nafter:\n%s", tc.name, before, after)
				}
				// The record is still the workspace's (art's search for the
				// workspace from a subdirectory asks so).
				if !r.KnownWorkspace(link) {
					t.Errorf("after the failed move, the workspace looks never synced")
				}
			})
		}
	}
}
