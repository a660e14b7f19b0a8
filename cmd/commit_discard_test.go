package cmd

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artproject/art/repo"
)

// art commit of an interrupted worktree that recorded nothing removes it;
// when the removal fails (here a trigger aborts the DELETE), it says so
// with the cause and what to do, exits non-zero, and leaves the worktree
// as it was: interrupted, with no owner, for the next attempt.
func TestCommitOfAnEmptyWorktreeWhoseRemovalFails(t *testing.T) {
	db := filepath.Join(t.TempDir(), "art.db")
	r, err := repo.Init(db)
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Push(context.Background(), repo.PushOptions{Dir: ws}); err != nil {
		t.Fatal(err)
	}
	wt, _, err := r.CreateWorktree("main", "mount", "/nonexistent/mnt", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReleaseWorktree(wt); err != nil { // as a killed art mount leaves it
		t.Fatal(err)
	}
	if _, err := r.DB.Exec(`CREATE TRIGGER inj BEFORE DELETE ON worktrees BEGIN SELECT RAISE(ABORT, 'injected failure'); END`); err != nil {
		t.Fatal(err)
	}
	r.Close()
	row := func() string {
		t.Helper()
		sdb, err := sql.Open("sqlite", db)
		if err != nil {
			t.Fatal(err)
		}
		defer sdb.Close()
		var id, pid int64
		var state, kind string
		if err := sdb.QueryRow(`SELECT id, pid, state, kind FROM worktrees`).Scan(&id, &pid, &state, &kind); err != nil {
			t.Fatal(err)
		}
		var commits int
		sdb.QueryRow(`SELECT count(*) FROM commits`).Scan(&commits)
		return fmt.Sprint(id, pid, state, kind, commits)
	}
	before := row()
	var stdout, stderr bytes.Buffer
	code := Main([]string{"commit", "-d", db}, strings.NewReader(""), &stdout, &stderr)
	if code == 0 {
		t.Fatalf("art commit succeeded:\n%s%s", &stdout, &stderr)
	}
	for _, want := range []string{"worktree #1", "injected failure", "art commit --worktree 1"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("art commit does not say %q:\n%s", want, &stderr)
		}
	}
	if after := row(); after != before {
		t.Errorf("the worktree after the failed removal: %q, was %q", after, before)
	}
	// Once the cause is gone, the step it names works.
	sdb, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	sdb.Exec(`DROP TRIGGER inj`)
	sdb.Close()
	stderr.Reset()
	if code := Main([]string{"commit", "-d", db, "--worktree", "1"}, strings.NewReader(""), &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "had no changes; removed it") {
		t.Errorf("art commit --worktree 1 after the cause is gone: exit %d\n%s", code, &stderr)
	}
}

// Every session is a commit: an interrupted art run that changed nothing
// is recorded all the same (an empty commit saying how it ended), where
// an interrupted mount with nothing in it is only removed.
func TestRecoveryOfAnEmptyInterruptedWorktree(t *testing.T) {
	for _, tc := range []struct {
		kind        string
		wantCommits int // new commits
	}{
		{"run", 1},
		{"mount", 0},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "art.db")
			r, err := repo.Init(db)
			if err != nil {
				t.Fatal(err)
			}
			ws := filepath.Join(t.TempDir(), "ws")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Push(context.Background(), repo.PushOptions{Dir: ws}); err != nil {
				t.Fatal(err)
			}
			session := ""
			if tc.kind == "run" {
				session = `{"mode":"run","argv":["agent"],"start":5}`
			}
			wt, _, err := r.CreateWorktree("main", tc.kind, "", session)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.ReleaseWorktree(wt); err != nil { // as a killed art leaves it
				t.Fatal(err)
			}
			var before int
			r.DB.QueryRow(`SELECT count(*) FROM commits`).Scan(&before)
			r.Close()
			var stdout, stderr bytes.Buffer
			Main([]string{"commit", "-d", db}, strings.NewReader(""), &stdout, &stderr)
			r, err = repo.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var after, left int
			r.DB.QueryRow(`SELECT count(*) FROM commits`).Scan(&after)
			r.DB.QueryRow(`SELECT count(*) FROM worktrees`).Scan(&left)
			if after-before != tc.wantCommits || left != 0 {
				t.Fatalf("%d new commit(s), %d worktree(s) left; want %d and none\n%s%s", after-before, left, tc.wantCommits, &stdout, &stderr)
			}
			if tc.wantCommits > 0 {
				h, err := r.Head()
				if err != nil {
					t.Fatal(err)
				}
				c, err := r.LoadCommit(h.Commit)
				if err != nil {
					t.Fatal(err)
				}
				if c.Session == nil || c.Session.Status != "interrupted" || c.Session.Mode != "run" {
					t.Errorf("recorded session %+v, want an interrupted run", c.Session)
				}
			}
		})
	}
}
