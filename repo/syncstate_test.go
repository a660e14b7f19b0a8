package repo

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

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
		b = appendSyncEntry(b, e)
	}
	return b
}

// TestSyncStateWritesChangedRows: a push after one edit rewrites the row of
// the edited file's directory only; a deleted directory's row goes away.
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

func TestSyncStateWritesChangedRows(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a.txt": "a", "d/b.txt": "b", "d/e/c.txt": "c", "f/g.txt": "g"})
	push(t, r, ws, "one")
	before := syncRowsOf(t, r, ws)
	if got := sortedKeys(before); !reflect.DeepEqual(got, []string{"", "d", "d/e", "f"}) {
		t.Fatalf("rows %q", got)
	}
	writeFiles(t, ws, map[string]string{"d/e/c.txt": "changed"})
	if err := os.RemoveAll(filepath.Join(ws, "f")); err != nil {
		t.Fatal(err)
	}
	push(t, r, ws, "two")
	after := syncRowsOf(t, r, ws)
	if got := sortedKeys(after); !reflect.DeepEqual(got, []string{"", "d", "d/e"}) {
		t.Fatalf("rows after deleting f: %q", got)
	}
	// "" changed (f is gone) and d/e (c.txt); d did not: rewriting a file
	// in place leaves its directory's times alone.
	for dir, changed := range map[string]bool{"": true, "d": false, "d/e": true} {
		if (string(before[dir]) != string(after[dir])) != changed {
			t.Errorf("row %q: changed %v, want %v", dir, !changed, changed)
		}
	}
	m, err := r.loadSynced(ws)
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedKeys(m); !reflect.DeepEqual(got, []string{"a.txt", "d", "d/b.txt", "d/e", "d/e/c.txt"}) {
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
				`UPDATE meta SET value='1' WHERE key='schema_version'`,
			} {
				if _, err := r.DB.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
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

// TestSyncStateDamagedRow: a row that does not decode makes the whole state
// count as never synced (the next push reads every file), and that push
// replaces it, so the push after it reads only what changed.
func TestSyncStateDamagedRow(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a.txt": "a", "d/b.txt": "b", "gone/c.txt": "c"})
	push(t, r, ws, "one")
	if err := os.RemoveAll(filepath.Join(ws, "gone")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DB.Exec(`UPDATE synced_dirs SET data=x'00' WHERE workspace=? AND dir='gone'`, ws); err != nil {
		t.Fatal(err)
	}
	if m, err := r.loadSynced(ws); err != nil || len(m) != 0 {
		t.Fatalf("damaged state loaded as %d entries, %v", len(m), err)
	}
	if res := push(t, r, ws, "two"); res.Hashed != 2 {
		t.Fatalf("the push after the damage read %d files, want 2", res.Hashed)
	}
	if got := sortedKeys(syncRowsOf(t, r, ws)); !reflect.DeepEqual(got, []string{"", "d"}) {
		t.Fatalf("rows after the push: %q (the damaged row of a deleted directory must go)", got)
	}
	writeFiles(t, ws, map[string]string{"a.txt": "a2"})
	if res := push(t, r, ws, "three"); res.Hashed != 1 {
		t.Fatalf("the next push read %d files, want 1", res.Hashed)
	}
}
