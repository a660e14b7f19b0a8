package cmd

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
)

// pulledBranch: which pulls record a branch's tip (the base of the next
// push's merge) and which go back to another commit.
func TestPulledBranch(t *testing.T) {
	r, err := repo.Init(filepath.Join(t.TempDir(), "art.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ws := filepath.Join(t.TempDir(), "ws")
	os.MkdirAll(ws, 0o755)
	push := func(content string) objects.ID {
		os.WriteFile(filepath.Join(ws, "f"), []byte(content), 0o644)
		res, err := r.Push(context.Background(), repo.PushOptions{Dir: ws})
		if err != nil {
			t.Fatal(err)
		}
		return res.Commit
	}
	old := push("1")
	tip := push("2")
	tx, _ := r.Begin()
	tx.SetBranch("bookmark", old)
	tx.Commit()
	cases := []struct {
		rev  string
		id   objects.ID
		want string
	}{
		{"main", tip, "main"},
		{"HEAD", tip, "main"},
		{tip.String()[:12], tip, "main"}, // the current branch's tip by id
		{"main~1", old, ""},              // going back, though a bookmark is there
		{old.String()[:12], old, ""},     // likewise by id
		{"bookmark", old, "bookmark"},    // the bookmark by name
	}
	for _, c := range cases {
		if got := pulledBranch(r, c.rev, c.id); got != c.want {
			t.Errorf("pull of %s: recorded %q, want %q", c.rev, got, c.want)
		}
	}
	// A detached HEAD's own commit is a tip too.
	tx, _ = r.Begin()
	tx.SetHead(repo.Head{Commit: old})
	tx.Commit()
	if got := pulledBranch(r, "HEAD", old); got != repo.DetachedHead {
		t.Errorf("pull of a detached HEAD: recorded %q, want %q", got, repo.DetachedHead)
	}
	if got := pulledBranch(r, tip.String()[:12], tip); got != "" {
		t.Errorf("pull of main's tip by id with HEAD detached elsewhere: recorded %q", got)
	}
}
