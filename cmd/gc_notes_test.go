package cmd

import (
	"bytes"
	"context"
	"database/sql"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artproject/art/internal/testenv"
	"github.com/artproject/art/repo"
)

// What art gc says when it freed objects but could not compact the file:
// beside a reader, that nothing was compacted and to run it again once
// the reader ends (it said the file would shrink by itself, which it
// does not: the rewrite never ran); when the checkpoint fails outright,
// what failed and what to do, without sending the user to free space
// that is there. The gc itself succeeds either way.
func TestGCCompactionNotes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hinder  func(t *testing.T, db string) (release func())
		want    []string
		notWant []string
	}{
		{"a reader holds the log", func(t *testing.T, db string) func() {
			reader, err := sql.Open("sqlite", db)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			conn, err := reader.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
				t.Fatal(err)
			}
			if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM chunks`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return func() { conn.ExecContext(ctx, `ROLLBACK`); conn.Close(); reader.Close() }
		}, []string{"not compacted", "another command is reading the repository", "run art gc again once it ends"}, []string{"shrinks once it ends"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := garbageRepo(t)
			release := tc.hinder(t, db)
			var stdout, stderr bytes.Buffer
			code := Main([]string{"gc", "-d", db}, strings.NewReader(""), &stdout, &stderr)
			release()
			if code != 0 || !strings.Contains(stdout.String(), "removed 0 commits, 0 trees, 1 files") {
				t.Fatalf("art gc: exit %d\n%s%s", code, &stdout, &stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), strings.ReplaceAll(w, "DB", db)) {
					t.Errorf("art gc does not say %q:\n%s", w, &stderr)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(stderr.String(), w) {
					t.Errorf("art gc says %q:\n%s", w, &stderr)
				}
			}
			// What it says holds: the file is as big as before, and the
			// next gc compacts it.
			if st, err := os.Stat(db); err != nil || st.Size() < 4<<20 {
				t.Errorf("the file after the reader ended: %d bytes, %v; want it uncompacted (as art gc said)", st.Size(), err)
			}
			stdout.Reset()
			stderr.Reset()
			if code := Main([]string{"gc", "-d", db}, strings.NewReader(""), &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "compacted the repository file") {
				t.Errorf("the next art gc: exit %d\n%s%s", code, &stdout, &stderr)
			}
			if code := Main([]string{"fsck", "-d", db}, strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Errorf("art fsck: exit %d\n%s%s", code, &stdout, &stderr)
			}
		})
	}
}

// garbageRepo makes a repository holding 4 MiB no commit references, its
// write-ahead log empty, and returns its path.
func garbageRepo(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "art.db")
	r, err := repo.Init(db)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 4<<20)
	rand.New(rand.NewSource(1)).Read(big)
	if _, _, err := tx.PutFile(bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := r.ShrinkWAL(); err != nil {
		t.Fatal(err)
	}
	return db
}

// The checkpoint failing outright (the log made append-only while gc ran):
// art gc says what failed, that the objects are freed all the same and
// what to do, without sending the user to free space that is there.
func TestGCCompactionFailureNote(t *testing.T) {
	db := garbageRepo(t)
	r, err := repo.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	testenv.Chattr(t, "+a", db+"-wal")
	res, err := r.GC(nil)
	if err != nil || res.CompactErr == nil {
		t.Fatalf("gc beside an append-only log: %+v, %v; want the objects freed and a compaction error", res, err)
	}
	var stdout, stderr bytes.Buffer
	printGCResult(&stdout, &stderr, res)
	if !strings.Contains(stdout.String(), "removed 0 commits, 0 trees, 1 files") {
		t.Errorf("art gc's result:\n%s", &stdout)
	}
	for _, w := range []string{"warning: the repository file was not compacted: checkpoint " + db, "freed all the same", "'art gc' compacts the file"} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("art gc does not say %q:\n%s", w, &stderr)
		}
	}
	if strings.Contains(stderr.String(), "needs free space") {
		t.Errorf("art gc sends the user to free space:\n%s", &stderr)
	}
}
