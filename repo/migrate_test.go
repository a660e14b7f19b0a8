package repo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/artproject/art/objects"
)

// toSchema3 turns a repository back into schema 3 (the 3 → 4 migration
// only rewrites rows), runs the given statements, and reopens it.
func toSchema3(t *testing.T, r *Repo, stmts ...string) *Repo {
	t.Helper()
	for _, q := range append(stmts, `UPDATE meta SET value='3' WHERE key='schema_version'`) {
		if _, err := r.DB.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return reopen(t, r)
}

// Builds before schema 4 wrote workspaces.branch "" for every pull, where
// "" now means going back (the next push records the host as it is): the
// first push after an upgrade undid every session since the pull. The
// migration makes such rows merge again.
func TestMigrateOldPullMerges(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a1\n", "b": "b1\n"})
	v1 := push(t, r, ws, "v1").Commit
	pull(t, r, ws, v1)
	r = toSchema3(t, r, `UPDATE workspaces SET branch=''`) // as an old pull left it
	var branch string
	if err := r.DB.QueryRow(`SELECT branch FROM workspaces`).Scan(&branch); err != nil || branch != DetachedHead {
		t.Fatalf("migrated branch %q, %v; want %q", branch, err, DetachedHead)
	}
	var indexes int
	if err := r.DB.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type='index' AND name IN ('refs_commit', 'workspaces_commit', 'worktrees_base')`).Scan(&indexes); err != nil || indexes != 3 {
		t.Fatalf("%d of the foreign-key indexes after the migration, %v", indexes, err)
	}
	agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"b": "agent\n"}) })
	writeFiles(t, ws, map[string]string{"a": "host\n"})
	res, err := r.Push(context.Background(), PushOptions{Dir: ws})
	if err != nil || res.Merged == 0 {
		t.Fatalf("push after the upgrade: %+v, %v; want a merge", res, err)
	}
	if got, want := contentOf(t, r, res.Commit, "ws"), map[string]string{"a": "host\n", "b": "agent\n"}; !equalMaps(got, want) {
		t.Errorf("pushed commit holds %v, want %v (the session undone)", got, want)
	}
	// A pull of an old commit made by this build still goes back.
	pull(t, r, ws, v1)
	if _, err := r.DB.Exec(`UPDATE workspaces SET branch=''`); err != nil { // as pull records going back
		t.Fatal(err)
	}
	r = reopen(t, r)
	if err := r.DB.QueryRow(`SELECT branch FROM workspaces`).Scan(&branch); err != nil || branch != "" {
		t.Fatalf("reopening a schema-4 repository changed the branch to %q, %v", branch, err)
	}
}

// linkedWorkspace makes a repository and a workspace ws of two files at
// root/real/ws, which root/link/ws names through a link.
func linkedWorkspace(t *testing.T) (r *Repo, root, real, link string) {
	r = newTestRepo(t)
	root = t.TempDir()
	real = filepath.Join(root, "real", "ws")
	os.MkdirAll(real, 0o755)
	os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "link"))
	link = filepath.Join(root, "link", "ws")
	writeFiles(t, real, map[string]string{"a": "a\n", "b": "b\n"})
	return r, root, real, link
}

// A workspace an old build pushed through a link to a directory of the
// same name was recorded under the link's path; push, pull and status now
// use the real path, so it looked never synced and its push undid the
// sessions since. The migration moves the record, sync state and
// unfinished-pull marker included, unless the real path has a newer one.
func TestMigrateWorkspaceThroughLink(t *testing.T) {
	for _, tc := range []struct {
		name      string
		realRow   int64 // synced_at of a row of the real path; 0: none; -1: sync rows only
		wantFiles int   // sync-state entries left under the real path
		wantMark  bool  // the link's unfinished-pull marker moved
	}{
		{"moved", 0, 2, true},
		{"moved over the real path's sync rows of no record", -1, 2, true},
		{"the real path's newer row wins", 1 << 62, 1, false},
		{"an older row of the real path gives way", 1, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, real, link := linkedWorkspace(t)
			v1 := push(t, r, real, "v1").Commit
			stmts := []string{
				fmt.Sprintf(`UPDATE workspaces SET path='%s', synced_at=100 WHERE path='%s'`, link, real),
				fmt.Sprintf(`UPDATE synced_dirs SET workspace='%s' WHERE workspace='%s'`, link, real),
				fmt.Sprintf(`INSERT INTO meta(key, value) VALUES('%s', '%s')`, pullingKey(link), v1),
			}
			if tc.realRow == -1 { // rows with no workspaces row: the move must not collide with them
				stmts = append(stmts, fmt.Sprintf(`INSERT INTO synced_dirs(workspace, dir, data) VALUES('%s', '', x'%x')`, real, syncRows(map[string]*syncedEntry{"z": {typ: objects.TypeSymlink, target: "x"}})[""]))
			} else if tc.realRow != 0 {
				stmts = append(stmts,
					fmt.Sprintf(`INSERT INTO workspaces(path, name, commit_id, branch, synced_at) VALUES('%s', 'ws', x'%x', 'main', %d)`, real, v1[:], tc.realRow),
					fmt.Sprintf(`INSERT INTO synced_dirs(workspace, dir, data) VALUES('%s', '', x'%x')`, real, syncRows(map[string]*syncedEntry{"z": {typ: objects.TypeSymlink, target: "x"}})[""]))
			}
			r = toSchema3(t, r, stmts...)
			var n int
			r.DB.QueryRow(`SELECT count(*) FROM workspaces WHERE path=?`, link).Scan(&n)
			if n != 0 {
				t.Errorf("the link's row is still there")
			}
			if !r.KnownWorkspace(real) {
				t.Fatalf("the real path has no record after the migration")
			}
			m, err := r.loadSynced(real)
			if err != nil || len(m) != tc.wantFiles {
				t.Errorf("sync state of the real path: %d entries, %v; want %d", len(m), err, tc.wantFiles)
			}
			_, marked, _ := r.UnfinishedPull(real)
			_, linkMarked, _ := r.UnfinishedPull(link)
			if marked != tc.wantMark || linkMarked {
				t.Errorf("unfinished-pull marker: real %v, link %v; want %v, false", marked, linkMarked, tc.wantMark)
			}
		})
	}
}

// Repositories of builds before art init made them private were left as
// the umask made them, readable by the agent's user: the migration takes
// group and other access away (a -d file's own directory is the user's).
func TestMigrateMakesPrivate(t *testing.T) {
	for _, tc := range []struct {
		dir         string
		wantDirMode os.FileMode
	}{
		{DirName, 0o700},
		{"mine", 0o755},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			r, err := Init(filepath.Join(t.TempDir(), tc.dir, FileName))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			dir := filepath.Dir(r.Path)
			files := []string{r.Path}
			for _, p := range []string{r.Path + "-wal", r.Path + "-shm"} {
				if _, err := os.Stat(p); err == nil {
					files = append(files, p)
				}
			}
			for _, p := range files {
				os.Chmod(p, 0o644)
			}
			os.Chmod(dir, 0o755)
			r = toSchema3(t, r)
			for _, p := range files {
				if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v after the migration, %v; want 0600", p, st.Mode().Perm(), err)
				}
			}
			if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != tc.wantDirMode {
				t.Errorf("%s: mode %v after the migration, %v; want %v", dir, st.Mode().Perm(), err, tc.wantDirMode)
			}
		})
	}
}

// The first builds kept the sync state as one row per host path in schema
// 1's synced table; the 1 → 2 migration read blobs only, and such a
// repository failed to open ("no such column: enc").
func TestMigrateSyncedRowsOfTheFirstBuilds(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a.txt": "a", "d/b.txt": "b"})
	push(t, r, ws, "one")
	want, err := r.loadSynced(ws)
	if err != nil || len(want) != 3 {
		t.Fatalf("sync state %d entries, %v", len(want), err)
	}
	stmts := []string{`CREATE TABLE synced(
	workspace TEXT NOT NULL, path TEXT NOT NULL,
	type INTEGER NOT NULL, mode INTEGER NOT NULL, id BLOB, size INTEGER NOT NULL,
	mtime INTEGER NOT NULL, ctime INTEGER NOT NULL, ino INTEGER NOT NULL, target TEXT NOT NULL DEFAULT '',
	PRIMARY KEY(workspace, path)) WITHOUT ROWID`}
	for p, e := range want {
		id := "NULL"
		if e.typ == objects.TypeFile {
			id = fmt.Sprintf("x'%x'", e.id[:])
		} else {
			e.id = objects.Zero // the first builds kept ids of files only
		}
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO synced VALUES('%s', '%s', %d, %d, %s, %d, %d, %d, %d, '')`, ws, p, e.typ, e.mode, id, e.size, e.mtime, e.ctime, e.ino))
	}
	stmts = append(stmts, `INSERT INTO synced VALUES('`+ws+`', '../x', 1, 420, NULL, 0, 0, 0, 0, '')`) // dropped
	stmts = append(stmts, `DROP TABLE synced_dirs`, `ALTER TABLE upper_inodes DROP COLUMN uid`, `ALTER TABLE upper_inodes DROP COLUMN gid`,
		`UPDATE meta SET value='1' WHERE key='schema_version'`)
	for _, q := range stmts {
		if _, err := r.DB.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	r = reopen(t, r)
	got, err := r.loadSynced(ws)
	if err != nil || !equalSynced(got, want) {
		t.Fatalf("after the migration: %v, %v; want %v", got, err, want)
	}
	writeFiles(t, ws, map[string]string{"a.txt": "a2"})
	if res := push(t, r, ws, "two"); res.Hashed != 1 {
		t.Errorf("the next push read %d files, want 1 (the stat cache was lost)", res.Hashed)
	}
}

func equalSynced(a, b map[string]*syncedEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for p, e := range a {
		if o := b[p]; o == nil || *o != *e {
			return false
		}
	}
	return true
}

// Builds between the tree ids of subdirectories and that of the row
// itself wrote "artsdir2" rows with no row tree id: the migration to
// schema 4 gives them a zero one (the current build dropped them as
// damaged, and a pull then brought back a file the user had deleted on
// the host, with no conflict).
func TestSyncRowWithoutItsTreeID(t *testing.T) {
	entries := map[string]*syncedEntry{
		"a.txt": {typ: objects.TypeFile, mode: 0o644, id: objects.Hash([]byte("a")), size: 1, mtime: 5, ctime: 6, ino: 7},
		"sub":   {typ: objects.TypeDir, mode: 0o755, id: objects.Hash([]byte("tree")), mtime: 8, ctime: 9, ino: 10},
		"l":     {typ: objects.TypeSymlink, mode: 0o777, target: "a.txt"},
	}
	old := []byte(syncDirMagic)
	for _, name := range []string{"a.txt", "l", "sub"} {
		old = appendSyncRowEntry(old, name, entries[name])
	}
	tree := objects.Hash([]byte("row tree"))
	cur := appendSyncRowHeader(nil, tree)
	for _, name := range []string{"a.txt", "l", "sub"} {
		cur = appendSyncRowEntry(cur, name, entries[name])
	}
	for _, tc := range []struct {
		name     string
		row      []byte
		wantTree objects.ID
	}{
		{"without the tree id", old, objects.Zero},
		{"an empty directory's, without the tree id", []byte(syncDirMagic), objects.Zero},
		{"with the tree id", cur, tree},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			want := entries
			if len(tc.row) == len(syncDirMagic) {
				want = map[string]*syncedEntry{}
			}
			r = toSchema3(t, r, fmt.Sprintf(`INSERT INTO synced_dirs(workspace, dir, data) VALUES('/ws', 'd', x'%x')`, packSyncRow(tc.row)))
			var data []byte
			if err := r.DB.QueryRow(`SELECT data FROM synced_dirs WHERE workspace='/ws' AND dir='d'`).Scan(&data); err != nil {
				t.Fatal(err)
			}
			got := map[string]*syncedEntry{}
			id, err := decodeSyncRow("d", data, func(n string, e *syncedEntry) { c := *e; got[n] = &c })
			if err != nil || id != tc.wantTree || !equalSynced(got, want) {
				t.Fatalf("after the migration: %v tree %s, %v; want %v tree %s", got, id.Short(), err, want, tc.wantTree.Short())
			}
		})
	}
}

// A link that did not resolve when the repository was migrated (a disk
// not mounted yet) left its workspace's record under the link's path for
// good: the migration runs once. The first push or status that names the
// workspace through the link moves it then.
func TestRelinkWorkspaceAfterTheMigration(t *testing.T) {
	for _, tc := range []struct {
		name string
		use  func(t *testing.T, r *Repo, link, real string) error
	}{
		{"status", func(t *testing.T, r *Repo, link, real string) error { _, err := r.HostDrift(link); return err }},
		{"push", func(t *testing.T, r *Repo, link, real string) error {
			agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"b": "agent\n"}) })
			writeFiles(t, real, map[string]string{"a": "host\n"})
			res, err := r.Push(context.Background(), PushOptions{Dir: link})
			if err == nil && res.Merged == 0 {
				err = fmt.Errorf("push did not merge the session (it took the workspace for never synced): %+v", res)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, root, real, link := linkedWorkspace(t)
			push(t, r, real, "v1")
			// Unreachable at the upgrade.
			os.Rename(filepath.Join(root, "real"), filepath.Join(root, "away"))
			r = toSchema3(t, r,
				fmt.Sprintf(`UPDATE workspaces SET path='%s' WHERE path='%s'`, link, real),
				fmt.Sprintf(`UPDATE synced_dirs SET workspace='%s' WHERE workspace='%s'`, link, real))
			os.Rename(filepath.Join(root, "away"), filepath.Join(root, "real"))
			var n int
			r.DB.QueryRow(`SELECT count(*) FROM workspaces WHERE path=?`, link).Scan(&n)
			if n != 1 {
				t.Fatalf("the migration moved the record of an unreachable link (or lost it): %d rows", n)
			}
			if err := tc.use(t, r, link, real); err != nil {
				t.Fatalf("%s through the link: %v", tc.name, err)
			}
			if !r.KnownWorkspace(real) {
				t.Fatalf("after %s through the link, the real path has no record", tc.name)
			}
			if m, err := r.loadSynced(real); err != nil || len(m) < 2 {
				t.Fatalf("after %s, the real path's sync state has %d entries, %v", tc.name, len(m), err)
			}
		})
	}
}

// Two commands opening an old repository at once: the second migrates
// nothing (it read the version before the first's migration committed,
// and failed on "duplicate column").
func TestMigrateTwiceAtOnce(t *testing.T) {
	r := newTestRepo(t)
	path := r.Path
	r.DB.Exec(`ALTER TABLE upper_inodes DROP COLUMN uid`)
	r.DB.Exec(`ALTER TABLE upper_inodes DROP COLUMN gid`)
	r.DB.Exec(`UPDATE meta SET value='2' WHERE key='schema_version'`)
	r.Close()
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			r, err := Open(path)
			if err == nil {
				r.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("open beside another migrating: %v", err)
		}
	}
}
