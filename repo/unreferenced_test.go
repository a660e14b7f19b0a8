package repo

import (
	"testing"

	"github.com/artproject/art/objects"
)

// TestUnreferencedIsWhatGCRemoves: the count art branch -d reports (the
// commits only the deleted branch reached) is what the next gc removes.
func TestUnreferencedIsWhatGCRemoves(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup makes branch "doomed" from main's tip c (a worktree or a
		// detached HEAD may keep some of it) and returns its tip.
		setup func(t *testing.T, r *Repo, c objects.ID) objects.ID
		want  int
	}{
		{"own commits", func(t *testing.T, r *Repo, c objects.ID) objects.ID {
			tx, _ := r.Begin()
			tip := putCommitTx(t, tx, "d2", putCommitTx(t, tx, "d1", c))
			tx.Commit()
			return tip
		}, 2},
		{"on main's history", func(t *testing.T, r *Repo, c objects.ID) objects.ID { return c }, 0},
		{"kept by a detached HEAD below its tip", func(t *testing.T, r *Repo, c objects.ID) objects.ID {
			tx, _ := r.Begin()
			d1 := putCommitTx(t, tx, "d1", c)
			tip := putCommitTx(t, tx, "d2", d1)
			tx.SetHead(Head{Commit: d1})
			tx.Commit()
			return tip
		}, 1},
		{"a worktree's base", func(t *testing.T, r *Repo, c objects.ID) objects.ID {
			tx, _ := r.Begin()
			tip := putCommitTx(t, tx, "d1", c)
			tx.Commit()
			if err := r.CreateBranch("doomed", tip); err != nil {
				t.Fatal(err)
			}
			if _, _, err := r.CreateWorktree("doomed", "mount", "", ""); err != nil {
				t.Fatal(err)
			}
			return tip
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "a\n"})
			c := push(t, r, ws, "c1").Commit
			tip := tc.setup(t, r, c)
			if _, err := r.BranchTip("doomed"); err != nil {
				if err := r.CreateBranch("doomed", tip); err != nil {
					t.Fatal(err)
				}
			}
			tx, _ := r.Begin()
			tx.Exec(`DELETE FROM refs WHERE name='doomed'`) // a worktree keeps DeleteBranch from it
			tx.Commit()
			n, err := r.Unreferenced(tip)
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.GC(r.WorktreeRoots)
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.want || res.Commits != n {
				t.Errorf("Unreferenced = %d, gc removed %d commits; want %d", n, res.Commits, tc.want)
			}
		})
	}
}
