package overlay_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/overlay"
)

// A commit with much to store stages it (repo.StageFiles) before its
// transaction. A gc in between deletes what was staged, and the commit
// stores it again in its transaction; a commit that fails after the
// staging drops it, and the worktree keeps its work.
func TestStagedCommit(t *testing.T) {
	random := func(seed uint64, n int) string {
		rng := rand.New(rand.NewPCG(seed, 5))
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return string(b)
	}
	big1, big2 := random(1, 3<<20), random(2, 2<<20+3)
	for _, tc := range []struct {
		name    string
		between func(t *testing.T, e *env) // between the staging and the transaction
		fails   string                     // the commit's error, when it fails
	}{
		{"staged", nil, ""},
		{"gc in between", func(t *testing.T, e *env) {
			g, err := e.r.GC(e.r.WorktreeRoots)
			if err != nil {
				t.Fatal(err)
			}
			if g.Chunks == 0 {
				t.Errorf("the gc found nothing staged to delete")
			}
		}, ""},
		{"branch moved", func(t *testing.T, e *env) {
			tip, _ := e.r.BranchTip("main")
			tx, err := e.r.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			c, _ := tx.LoadCommit(tip)
			id, err := tx.PutCommit(&objects.Commit{Tree: c.Tree, Parents: []objects.ID{tip}, Time: 2, Author: "t", Message: "moved"})
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.SetBranch("main", id); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}, "moved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, lower)
			e.r.StageAbove, e.r.StageBatch = 1<<20, 256<<10
			e.write("ws", "big1", big1)
			e.write("ws/a", "big2", big2)
			o := overlay.CommitOptions{Message: "staged"}
			if tc.between != nil {
				o = overlay.WithBeforeBegin(o, func() { tc.between(t, e) })
			}
			id, err := e.fs.Commit(o)
			e.fs = nil
			if tc.fails != "" {
				if err == nil || !strings.Contains(err.Error(), tc.fails) {
					t.Fatalf("commit: %v, want an error saying %q", err, tc.fails)
				}
				// What was staged is gone again; the worktree still has
				// the files.
				if g, err := e.r.GC(e.r.WorktreeRoots); err != nil || g.Chunks != 0 || g.Files != 0 {
					t.Errorf("gc after the failed commit: %+v %v, want nothing left to free", g, err)
				}
				e.open()
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if tip, _ := e.r.BranchTip("main"); tip != id {
					t.Fatalf("main at %s, want %s", tip.Short(), id.Short())
				}
				var err error
				if e.wt, _, err = e.r.CreateWorktree("main", "mount", "", ""); err != nil {
					t.Fatal(err)
				}
				e.open()
			}
			if e.read("ws/big1") != big1 || e.read("ws/a/big2") != big2 {
				t.Errorf("the files read back wrong")
			}
			if res, err := e.r.Fsck(nil); err != nil || len(res.Problems) > 0 {
				t.Fatalf("fsck: %v %v", err, res.Problems)
			}
		})
	}
}
