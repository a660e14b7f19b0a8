package repo

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/artproject/art/objects"
)

// encodeSyncBlob is schema 1's encoding of a whole sync state.
func encodeSyncBlob(m map[string]*syncedEntry) []byte {
	paths := make([]string, 0, len(m))
	for p := range m {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	b := []byte(syncBlobMagic)
	for _, p := range paths {
		e := m[p]
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = appendSyncEntry(b, e, false)
	}
	return b
}

// syncRowsOf returns the stored rows of a workspace, by directory.
func syncRowsOf(t *testing.T, r *Repo, workspace string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	if err := eachSyncRow(r.DB, workspace, func(dir string, data []byte) error {
		out[dir] = bytes.Clone(data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSyncStateWritesChangedRows: a push after one edit rewrites the rows
// along the edited file's path only (the edited directory's, and its
// ancestors', whose entries record the new tree ids); a deleted
// directory's row goes away; every recorded directory id is the tree the
// commit holds there.
func TestSyncStateWritesChangedRows(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a.txt": "a", "d/b.txt": "b", "d/e/c.txt": "c", "d/x/y.txt": "y", "f/g.txt": "g"})
	res := push(t, r, ws, "one")
	checkDirIDs(t, r, ws, res.Commit)
	before := syncRowsOf(t, r, ws)
	if got := sortedKeys(before); !reflect.DeepEqual(got, []string{"", "d", "d/e", "d/x", "f"}) {
		t.Fatalf("rows %q", got)
	}
	writeFiles(t, ws, map[string]string{"d/e/c.txt": "changed"})
	if err := os.RemoveAll(filepath.Join(ws, "f")); err != nil {
		t.Fatal(err)
	}
	res = push(t, r, ws, "two")
	checkDirIDs(t, r, ws, res.Commit)
	after := syncRowsOf(t, r, ws)
	if got := sortedKeys(after); !reflect.DeepEqual(got, []string{"", "d", "d/e", "d/x"}) {
		t.Fatalf("rows after deleting f: %q", got)
	}
	// "" changed (f is gone, d's tree id), d (e's tree id) and d/e
	// (c.txt); d/x did not.
	for dir, changed := range map[string]bool{"": true, "d": true, "d/e": true, "d/x": false} {
		if (string(before[dir]) != string(after[dir])) != changed {
			t.Errorf("row %q: changed %v, want %v", dir, !changed, changed)
		}
	}
	m, err := r.loadSynced(ws)
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedKeys(m); !reflect.DeepEqual(got, []string{"a.txt", "d", "d/b.txt", "d/e", "d/e/c.txt", "d/x", "d/x/y.txt"}) {
		t.Fatalf("entries %q", got)
	}
	if m["d/e/c.txt"].id != objects.Hash([]byte("changed")) {
		t.Fatal("the stat cache holds the old content id")
	}
}

// TestMigrateSyncState: a schema-1 repository's sync-state blobs become
// rows on open; a blob that does not decode is dropped, not fatal.
func TestMigrateSyncState(t *testing.T) {
	for _, tc := range []struct {
		name       string
		damage     bool
		wantLen    int
		wantHashed int // by the next push after one edit
	}{
		{"blob converted", false, 5, 1},
		{"damaged blob dropped", true, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a.txt": "a", "d/b.txt": "b", "d/e/c.txt": "c"})
			push(t, r, ws, "one")
			want, err := r.loadSynced(ws)
			if err != nil || len(want) != 5 {
				t.Fatalf("sync state %d entries, %v", len(want), err)
			}
			// Turn the repository back into schema 1.
			blob, enc := objects.Compress(encodeSyncBlob(want))
			if tc.damage {
				blob, enc = []byte("artsync1\xff"), 0
			}
			for _, q := range []string{
				`CREATE TABLE synced(workspace TEXT PRIMARY KEY, enc INTEGER NOT NULL, data BLOB NOT NULL)`,
				fmt.Sprintf(`INSERT INTO synced VALUES('%s', %d, x'%x')`, ws, enc, blob),
				`DROP TABLE synced_dirs`,
				`ALTER TABLE upper_inodes DROP COLUMN uid`,
				`ALTER TABLE upper_inodes DROP COLUMN gid`,
				`UPDATE meta SET value='1' WHERE key='schema_version'`,
			} {
				if _, err := r.DB.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			for _, e := range want {
				if e.typ == objects.TypeDir {
					e.id = objects.Zero // schema 1 had no directory ids
				}
			}
			r = reopen(t, r)
			got, err := r.loadSynced(ws)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.wantLen || (!tc.damage && !reflect.DeepEqual(got, want)) {
				t.Fatalf("after migration: %d entries, want %d", len(got), tc.wantLen)
			}
			var n int
			if err := r.DB.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name='synced'`).Scan(&n); err != nil || n != 0 {
				t.Fatalf("schema 1's table is still there (%d, %v)", n, err)
			}
			// Pushing again works on the converted state.
			writeFiles(t, ws, map[string]string{"a.txt": "a2"})
			if res := push(t, r, ws, "two"); res.Hashed != tc.wantHashed {
				t.Errorf("the next push read %d files, want %d", res.Hashed, tc.wantHashed)
			}
		})
	}
}

// TestSyncStateDamagedRow: a row that does not decode makes its directory
// count as never synced: the next push reads that directory's files (and
// only those) and replaces the row, and a damaged row of a deleted
// directory goes away. Loading the whole state (gc) still treats any
// damage as no state at all.
func TestSyncStateDamagedRow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage string // SQL blob literal
	}{
		{"bad magic", `x'00'`},
		{"bad zstd frame", `x'28b52ffd00ffffffffffff'`},
		{"cut short", `x'6172747364697232016103'`}, // "artsdir2", one entry cut after its type
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a.txt": "a", "d/b.txt": "b", "d/b2.txt": "b2", "gone/c.txt": "c"})
			push(t, r, ws, "one")
			if err := os.RemoveAll(filepath.Join(ws, "gone")); err != nil {
				t.Fatal(err)
			}
			if _, err := r.DB.Exec(`UPDATE synced_dirs SET data=`+tc.damage+` WHERE workspace=? AND dir IN ('gone', 'd')`, ws); err != nil {
				t.Fatal(err)
			}
			res := push(t, r, ws, "two")
			if res.Hashed != 2 {
				t.Fatalf("the push after the damage read %d files, want 2 (d/b.txt, d/b2.txt)", res.Hashed)
			}
			checkDirIDs(t, r, ws, res.Commit)
			if got := sortedKeys(syncRowsOf(t, r, ws)); !reflect.DeepEqual(got, []string{"", "d"}) {
				t.Fatalf("rows after the push: %q (the damaged row of a deleted directory must go)", got)
			}
			writeFiles(t, ws, map[string]string{"a.txt": "a2"})
			if res := push(t, r, ws, "three"); res.Hashed != 1 {
				t.Fatalf("the next push read %d files, want 1", res.Hashed)
			}
		})
	}
}

// TestSyncRowPacked: a row that compresses is stored as a zstd frame, a
// short one as it is; both decode to what was encoded.
func TestSyncRowPacked(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	files := map[string]string{"small/x": "x"}
	for i := 0; i < 50; i++ {
		files[fmt.Sprintf("big/file-%03d.go", i)] = fmt.Sprint(i)
	}
	writeFiles(t, ws, files)
	push(t, r, ws, "one")
	rows := syncRowsOf(t, r, ws)
	if !bytes.HasPrefix(rows["big"], zstdMagic) {
		t.Errorf("the row of 50 entries is not compressed: %q", rows["big"][:8])
	}
	if !bytes.HasPrefix(rows["small"], []byte(syncDirMagic)) {
		t.Errorf("the row of one entry is stored as %q, want it as encoded", rows["small"][:8])
	}
	m, err := r.loadSynced(ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 53 || m["big/file-049.go"] == nil || m["big/file-049.go"].id != objects.Hash([]byte("49")) {
		t.Fatalf("decoded %d entries; big/file-049.go: %+v", len(m), m["big/file-049.go"])
	}
}

// checkDirIDs: every non-zero directory id in the sync state of ws is the
// tree that commit holds at that path.
func checkDirIDs(t *testing.T, r *Repo, ws string, commit objects.ID) {
	t.Helper()
	c, err := r.LoadCommit(commit)
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.loadSynced(ws)
	if err != nil {
		t.Fatal(err)
	}
	for p, e := range m {
		if e.typ != objects.TypeDir || e.id.IsZero() {
			continue
		}
		got, ok, err := r.Lookup(c.Tree, append([]string{filepath.Base(ws)}, strings.Split(p, "/")...))
		if err != nil || !ok || got.ID != e.id {
			t.Errorf("sync state of %s records tree %s; the commit holds %s (%v, %v)", p, e.id.Short(), got.ID.Short(), ok, err)
		}
	}
}

// TestPushReusedTreesMatchFullBuild: a push that reuses the tree ids its
// sync state records builds exactly the tree a fresh repository's full
// push of the same directory builds, whatever changed in between —
// including pulls and gc, which record no directory ids, and a reused tree
// the repository no longer holds.
func TestPushReusedTreesMatchFullBuild(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a.txt": "a", "d/b.txt": "b", "d/e/c.txt": "c", "d/x/y.txt": "y",
		"d/x/deep/z.txt": "z", "f/g.txt": "g", "h/i/j/k.txt": "k"})
	first := push(t, r, ws, "first")
	treeOf := func(rel string) objects.ID {
		t.Helper()
		m, err := r.loadSynced(ws)
		if err != nil || m[rel] == nil || m[rel].id.IsZero() {
			t.Fatalf("no tree id recorded for %s (%v)", rel, err)
		}
		return m[rel].id
	}
	at := func(p string) string { return filepath.Join(ws, filepath.FromSlash(p)) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// 11 directories: ws, d, d/e, d/x, d/x/deep, f, h, h/i, h/i/j, and
	// after the steps that add them n, n/m, a.txt, empty.
	// Where only times change, a push records a commit with AllowEmpty.
	timesOnly := map[string]bool{"directory touched": true}
	steps := []struct {
		name   string
		change func()
		built  int // trees encoded
	}{
		{"nothing", func() {}, 0},
		{"deep edit", func() { writeFiles(t, ws, map[string]string{"d/e/c.txt": "c2"}) }, 3},
		{"new directories", func() { writeFiles(t, ws, map[string]string{"n/m/k.txt": "k"}) }, 3},
		{"directory deleted", func() { must(os.RemoveAll(at("f"))) }, 1},
		{"directory chmod", func() { must(os.Chmod(at("d/x"), 0o700)) }, 2},
		{"directory touched", func() {
			ts := time.Unix(1_700_000_000, 5)
			must(os.Chtimes(at("d"), ts, ts))
		}, 1},
		{"directory renamed", func() { must(os.Rename(at("d/x"), at("d/z"))) }, 4},
		{"file became a directory", func() {
			must(os.Remove(at("a.txt")))
			writeFiles(t, ws, map[string]string{"a.txt/inner": "i"})
		}, 2},
		{"empty directory", func() { must(os.Mkdir(at("empty"), 0o755)) }, 2},
		{"symlink", func() { must(os.Symlink("d/b.txt", at("d/e/link"))) }, 3},
		{"pulled an old commit", func() { pull(t, r, ws, first.Commit) }, 9},
		{"edit after the pull", func() { writeFiles(t, ws, map[string]string{"h/i/j/k.txt": "k2"}) }, 4},
		{"reused trees freed", func() {
			// What gc does to a subtree no commit reaches any more: d's
			// tree and all below it go, while the sync state names them.
			var free func(id objects.ID)
			free = func(id objects.ID) {
				tr, err := r.LoadTree(id)
				must(err)
				for _, e := range tr.Entries {
					if e.Type == objects.TypeDir {
						free(e.ID)
					}
				}
				_, err = r.DB.Exec(`DELETE FROM trees WHERE id=?`, id[:])
				must(err)
			}
			free(treeOf("d"))
			r = reopen(t, r) // no tree cache
			writeFiles(t, ws, map[string]string{"h/i/j/k.txt": "k3"})
		}, 9},
		{"gc", func() {
			_, err := r.GC(nil)
			must(err)
			writeFiles(t, ws, map[string]string{"d/e/c.txt": "c4"})
		}, 3},
	}
	for _, s := range steps {
		s.change()
		res, err := r.Push(context.Background(), PushOptions{Dir: ws, Message: s.name, AllowEmpty: timesOnly[s.name]})
		must(err)
		if res.TreesBuilt != s.built {
			t.Errorf("%s: %d trees built, want %d", s.name, res.TreesBuilt, s.built)
		}
		pushMatchesFull(t, s.name, r, ws, res)
		checkDirIDs(t, r, ws, res.Commit)
		// The full push must not have left its sync state in r.
		if _, err := os.Stat(filepath.Join(ws, ".art")); err == nil {
			t.Fatalf("%s: .art appeared in the workspace", s.name)
		}
	}
}

// pushUnreachable pushes ws on a branch it then deletes: the sync state
// names content no commit reaches, which the next gc frees.
func pushUnreachable(t *testing.T, r *Repo, ws string) {
	t.Helper()
	if _, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: "tmp", Message: "tmp"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DeleteBranch("tmp"); err != nil {
		t.Fatal(err)
	}
}

// TestPushRacingGC: a gc that commits between a push's reading of its
// stat cache and its transaction may delete content the cache names; the
// push starts over (reading that file again) instead of committing a tree
// that names missing content, and gives up after three tries.
func TestPushRacingGC(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gcRuns  int // gc runs before the push's transaction, one per try
		wantErr bool
	}{
		{"one gc: pushed on the second try", 1, false},
		{"gc every time: gives up", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"f.txt": "only on tmp", "d/g.txt": "g"})
			pushUnreachable(t, r, ws)
			runs := 0
			o := PushOptions{Dir: ws, Branch: "main", Message: "main", beforeBegin: func() {
				if runs < tc.gcRuns {
					runs++
					if _, err := r.GC(nil); err != nil {
						t.Fatal(err)
					}
				}
			}}
			res, err := r.Push(context.Background(), o)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "gc ran during the push three times") {
					t.Fatalf("err %v, want the three-tries error", err)
				}
				if p := fsckProblems(t, r); p != "" {
					t.Fatalf("fsck after the failed push: %s", p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Hashed != 2 {
				t.Errorf("the retried push read %d files, want 2 (gc freed both)", res.Hashed)
			}
			if p := fsckProblems(t, r); p != "" {
				t.Fatalf("fsck: %s", p)
			}
			if got := wsEntries(t, r, res.Commit, "ws"); len(got) != 3 {
				t.Fatalf("pushed tree %v", got)
			}
		})
	}
}

// TestPullRacingGC: a gc that frees the pulled commit while the pull
// writes the host leaves a sync state naming nothing gone (a push would
// trust it) and no reference to the freed commit; the next push reads
// those files again and commits them whole.
func TestPullRacingGC(t *testing.T) {
	r := newTestRepo(t)
	src := newWorkspace(t, "ws")
	writeFiles(t, src, map[string]string{"a.txt": "only in tmp", "d/b.txt": "also only in tmp"})
	tmp, err := r.Push(context.Background(), PushOptions{Dir: src, Branch: "tmp", Message: "tmp"})
	if err != nil {
		t.Fatal(err)
	}
	dst := newWorkspace(t, "ws")
	res, err := r.Pull(PullOptions{Dir: dst, Commit: tmp.Commit, beforeRecord: func() {
		if _, err := r.DeleteBranch("tmp"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.DB.Exec(`DELETE FROM workspaces WHERE path=?`, src); err != nil {
			t.Fatal(err) // src's sync state would keep nothing alive anyway
		}
		if _, err := r.GC(nil); err != nil {
			t.Fatal(err)
		}
	}})
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	if res.Created != 3 {
		t.Errorf("pull created %d entries, want 3", res.Created)
	}
	m, err := r.loadSynced(dst)
	if err != nil {
		t.Fatal(err)
	}
	for p, e := range m {
		if e.typ == objects.TypeFile {
			t.Errorf("sync state names %s (%s), which gc freed", p, e.id.Short())
		}
	}
	var cid []byte
	if err := r.DB.QueryRow(`SELECT commit_id FROM workspaces WHERE path=?`, dst).Scan(&cid); err != nil || cid != nil {
		t.Errorf("workspace commit %x (%v), want NULL", cid, err)
	}
	if p := fsckProblems(t, r); p != "" {
		t.Fatalf("fsck: %s", p)
	}
	again := push(t, r, dst, "again")
	if again.Hashed != 2 {
		t.Errorf("the push after read %d files, want 2", again.Hashed)
	}
	if p := fsckProblems(t, r); p != "" {
		t.Fatalf("fsck after the push: %s", p)
	}
}

// errDamagedSync stops reading a sync state that does not decode.
var errDamagedSync = errors.New("damaged sync state")

// loadSyncedFrom returns the sync state of a workspace (empty if never
// synced).
func loadSyncedFrom(q rowsQuerier, workspace string) (map[string]*syncedEntry, error) {
	m := map[string]*syncedEntry{}
	err := eachSyncRow(q, workspace, func(dir string, data []byte) error {
		_, err := decodeSyncRow(dir, data, func(name string, e *syncedEntry) {
			if dir != "" {
				name = dir + "/" + name
			}
			c := *e
			m[name] = &c
		})
		if err != nil {
			return errDamagedSync
		}
		return nil
	})
	if errors.Is(err, errDamagedSync) {
		// A damaged cache only costs re-reading files; pull then treats
		// host files as never synced, which refuses rather than deletes.
		// The next save rewrites or deletes every stored row.
		return map[string]*syncedEntry{}, nil
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// loadSynced returns the sync state of a workspace as one map by path
// (empty if never synced, or if any row is damaged), for tests.
func (r *Repo) loadSynced(workspace string) (map[string]*syncedEntry, error) {
	return loadSyncedFrom(r.DB, workspace)
}

// pushMatchesFull fails (saying what) unless the workspace tree of res is
// the one a fresh repository's full push of ws builds, and r passes fsck.
func pushMatchesFull(t *testing.T, what string, r *Repo, ws string, res *PushResult) {
	t.Helper()
	tree := func(r *Repo, commit objects.ID) objects.ID {
		t.Helper()
		c, err := r.LoadCommit(commit)
		if err != nil {
			t.Fatal(err)
		}
		e, ok, err := r.Lookup(c.Tree, []string{filepath.Base(ws)})
		if err != nil || !ok {
			t.Fatalf("no workspace in %s: %v", commit.Short(), err)
		}
		return e.ID
	}
	fresh := newTestRepo(t)
	full := push(t, fresh, ws, "full")
	if got, want := tree(r, res.Commit), tree(fresh, full.Commit); got != want {
		t.Fatalf("%s: incremental push built %s, a full push %s", what, got.Short(), want.Short())
	}
	if p := fsckProblems(t, r); p != "" {
		t.Fatalf("%s: fsck: %s", what, p)
	}
}

// TestPushReuseRaces: rows written by a push or pull that ran between
// another push's scan and its transaction mix with that push's rows; each
// row's tree id certifies only its own entries, so no later push reuses a
// tree that does not match the host. (Found in review: tree ids kept in
// the parent's row were trusted for the child's row of another push.)
func TestPushReuseRaces(t *testing.T) {
	for _, tc := range []struct {
		name    string
		between func(t *testing.T, r *Repo, ws string, zero objects.ID)
	}{
		{"push between", func(t *testing.T, r *Repo, ws string, _ objects.ID) {
			writeFiles(t, ws, map[string]string{"d/f": "2"})
			push(t, r, ws, "B")
		}},
		{"pull between", func(t *testing.T, r *Repo, ws string, zero objects.ID) {
			if _, err := r.Pull(PullOptions{Dir: ws, Commit: zero, Force: true}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"d/f": "1", "e/g": "1"})
			zero := push(t, r, ws, "zero").Commit
			writeFiles(t, ws, map[string]string{"d/f": "2"})
			push(t, r, ws, "one")
			if tc.name == "push between" {
				writeFiles(t, ws, map[string]string{"d/f": "1"})
				push(t, r, ws, "two")
			}
			writeFiles(t, ws, map[string]string{"e/g": "2"})
			_, err := r.Push(context.Background(), PushOptions{Dir: ws, Message: "A", beforeBegin: func() { tc.between(t, r, ws, zero) }})
			if err != nil {
				t.Fatal(err)
			}
			pushMatchesFull(t, "push C", r, ws, push(t, r, ws, "C: nothing changed"))
		})
	}
}

// TestSyncStateDamagedParentRow: the root's row does not decode while its
// subdirectories' rows do; the push builds the right tree (it used to
// dereference the parent's missing entry).
func TestSyncStateDamagedParentRow(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a.txt": "a", "d/b.txt": "b", "d/e/c.txt": "c"})
	push(t, r, ws, "one")
	for _, dir := range []string{"", "d"} {
		if _, err := r.DB.Exec(`UPDATE synced_dirs SET data=x'00' WHERE workspace=? AND dir=?`, ws, dir); err != nil {
			t.Fatal(err)
		}
		pushMatchesFull(t, "after damaging "+dir, r, ws, push(t, r, ws, "after damaging "+dir))
	}
}

// TestGCPrunesAroundDamagedRows: a row that does not decode neither stops
// gc from pruning the others (a push would trust them and name freed
// content) nor survives it.
func TestGCPrunesAroundDamagedRows(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"d/f": "only on tmp", "x/y": "y"})
	pushUnreachable(t, r, ws)
	if _, err := r.DB.Exec(`UPDATE synced_dirs SET data=x'00' WHERE workspace=? AND dir='x'`, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GC(nil); err != nil {
		t.Fatal(err)
	}
	if got := sortedKeys(syncRowsOf(t, r, ws)); !reflect.DeepEqual(got, []string{"", "d"}) {
		t.Errorf("rows after gc: %q, want the damaged row gone", got)
	}
	res, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: "main", Message: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Hashed != 2 {
		t.Errorf("the push after gc read %d files, want 2", res.Hashed)
	}
	pushMatchesFull(t, "push after gc", r, ws, res)
}
