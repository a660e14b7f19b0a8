package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/artproject/art/objects"
)

// deadPid returns the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

// orphan makes wt look as a killed art left it: owned by a dead process.
func orphan(t *testing.T, r *Repo, wt *Worktree) {
	t.Helper()
	wt.Pid, wt.PidStart = deadPid(t), 12345
	if _, err := r.DB.Exec(`UPDATE worktrees SET pid=?, pid_start=? WHERE id=?`, wt.Pid, wt.PidStart, wt.ID); err != nil {
		t.Fatal(err)
	}
}

// Recovering a worktree (art commit, any command's stale cleanup) and
// resuming it (a new session on its branch) are claims: exactly one of
// several at once goes on. Before, art commit folded and deleted a
// worktree a resumed mount was writing to, and a command that had read
// the worktree as dead marked it interrupted after a session resumed it,
// so the next command recorded the live session: writes acknowledged
// afterwards were lost.
func TestWorktreeClaims(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a.txt": "a"})
	push(t, r, ws, "one")
	me, meStart := os.Getpid(), ProcessStart(os.Getpid())
	fresh := func() *Worktree {
		t.Helper()
		tx, _ := r.Begin()
		tx.Exec(`DELETE FROM worktrees`)
		tx.Commit()
		wt, _, err := r.CreateWorktree("main", "mount", "", "")
		if err != nil {
			t.Fatal(err)
		}
		orphan(t, r, wt)
		return wt
	}

	t.Run("a dead owner's worktree is claimed once", func(t *testing.T) {
		wt := fresh()
		seen := *wt
		if err := r.ClaimWorktree(wt); err != nil {
			t.Fatal(err)
		}
		if wt.Pid != me || wt.PidStart != meStart || wt.State != StateLive {
			t.Errorf("claimed: %+v", wt)
		}
		again := seen // a second command that read the same dead owner
		if err := r.ClaimWorktree(&again); !errors.Is(err, ErrWorktreeTaken) {
			t.Errorf("second claim: %v, want ErrWorktreeTaken", err)
		}
		if got, _ := r.Worktree(wt.ID); got.State != StateLive {
			t.Errorf("state %s, want live", got.State)
		}
	})
	t.Run("a resumed worktree cannot be claimed by what read it dead", func(t *testing.T) {
		wt := fresh()
		seen := *wt
		resumed, ok, err := r.CreateWorktree("main", "run", "/mnt", "")
		if err != nil || !ok || resumed.ID != wt.ID {
			t.Fatalf("resume: %+v %v %v", resumed, ok, err)
		}
		if err := r.ClaimWorktree(&seen); !errors.Is(err, ErrWorktreeTaken) {
			t.Errorf("claim after a resume: %v, want ErrWorktreeTaken", err)
		}
		// The stale mark of the command that read it dead does not
		// stick to the resumed session.
		if err := r.SetWorktreeState(&seen, StateInterrupted); err != nil {
			t.Fatal(err)
		}
		var stored string
		r.DB.QueryRow(`SELECT state FROM worktrees WHERE id=?`, wt.ID).Scan(&stored)
		if stored != StateLive {
			t.Errorf("stored state %s after a stale mark, want live", stored)
		}
		tx, _ := r.Begin()
		err = tx.DeleteWorktree(&seen)
		tx.Rollback()
		if !errors.Is(err, ErrWorktreeTaken) {
			t.Errorf("delete by a non-owner: %v, want ErrWorktreeTaken", err)
		}
	})
	t.Run("a recorded worktree cannot be claimed", func(t *testing.T) {
		wt := fresh()
		seen := *wt
		tx, _ := r.Begin()
		tx.Exec(`DELETE FROM worktrees WHERE id=?`, wt.ID)
		tx.Commit()
		if err := r.ClaimWorktree(&seen); !errors.Is(err, ErrWorktreeTaken) {
			t.Errorf("claim of a recorded worktree: %v, want ErrWorktreeTaken", err)
		}
	})
	t.Run("a worktree claimed and released since it was read cannot be claimed", func(t *testing.T) {
		wt := fresh()
		seen := *wt // read with its dead owner
		if err := r.ClaimWorktree(wt); err != nil {
			t.Fatal(err)
		}
		if err := r.ReleaseWorktree(wt); err != nil {
			t.Fatal(err)
		}
		// No owner now, and none alive: still not the row seen.
		if err := r.ClaimWorktree(&seen); !errors.Is(err, ErrWorktreeTaken) {
			t.Errorf("claim from a stale read: %v, want ErrWorktreeTaken", err)
		}
	})
	t.Run("a worktree whose owner lives cannot be claimed", func(t *testing.T) {
		wt := fresh()
		// Another art process owns it (as read): a recovery must not
		// fold the upper layer a live session is writing.
		owner := exec.Command("sleep", "60")
		if err := owner.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { owner.Process.Kill(); owner.Wait() }()
		start := ProcessStart(owner.Process.Pid)
		r.DB.Exec(`UPDATE worktrees SET pid=?, pid_start=? WHERE id=?`, owner.Process.Pid, start, wt.ID)
		seen := *wt
		seen.Pid, seen.PidStart = owner.Process.Pid, start
		if err := r.ClaimWorktree(&seen); !errors.Is(err, ErrWorktreeTaken) {
			t.Errorf("claim of a live owner's worktree: %v, want ErrWorktreeTaken", err)
		}
	})
	t.Run("a live owner is live whatever the row says", func(t *testing.T) {
		wt := fresh()
		if err := r.ClaimWorktree(wt); err != nil {
			t.Fatal(err)
		}
		// As an older art's stale mark could leave it.
		r.DB.Exec(`UPDATE worktrees SET state=? WHERE id=?`, StateInterrupted, wt.ID)
		if got, _ := r.Worktree(wt.ID); got.State != StateLive {
			t.Errorf("Worktree: state %s, want live", got.State)
		}
		if _, _, err := r.CreateWorktree("main", "mount", "", ""); !errors.Is(err, ErrBranchInUse) {
			t.Errorf("a session on the branch of a live worktree: %v, want ErrBranchInUse", err)
		}
	})
}

// A recovery that fails (a full disk) releases its claim: the worktree is
// interrupted with no owner, and the same process (the command the stale
// cleanup ran in) can resume it. Before, the row kept the process's pid:
// art run found its branch in use by itself, art status showed it live.
// A session that never began gives its worktree back: a new one deleted,
// a resumed one as it was, its pending work kept.
func TestReleaseAndAbandonWorktree(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a.txt": "a"})
	push(t, r, ws, "one")
	pending := func(w *Worktree) {
		t.Helper()
		if _, err := r.DB.Exec(`INSERT INTO upper_dirents(wt, dir, name, ino) VALUES(?, 1, 'gone', 0)`, w.ID); err != nil {
			t.Fatal(err)
		}
	}
	get := func(id int64) *Worktree {
		t.Helper()
		wts, err := r.Worktrees()
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wts {
			if w.ID == id {
				return w
			}
		}
		return nil
	}

	// An interrupted run, claimed by a recovery that then fails.
	w, _, err := r.CreateWorktree("main", "run", "", `{"mode":"run","argv":["agent"]}`)
	if err != nil {
		t.Fatal(err)
	}
	pending(w)
	orphan(t, r, w)
	if err := r.ClaimWorktree(w); err != nil {
		t.Fatal(err)
	}
	if err := r.ReleaseWorktree(w); err != nil {
		t.Fatal(err)
	}
	if got := get(w.ID); got == nil || got.State != StateInterrupted || got.Pid != 0 || got.Pending == 0 {
		t.Fatalf("after the release: %+v", got)
	}
	// The same process resumes it, as a mount: then abandons it.
	m, resumed, err := r.CreateWorktree("main", "mount", "/mnt", "")
	if err != nil || !resumed || m.ID != w.ID {
		t.Fatalf("resume after the release: %+v %v %v", m, resumed, err)
	}
	if err := r.AbandonWorktree(m); err != nil {
		t.Fatal(err)
	}
	if got := get(w.ID); got == nil || got.State != StateInterrupted || got.Kind != "run" || got.Session != `{"mode":"run","argv":["agent"]}` || got.Pending == 0 {
		t.Fatalf("after abandoning the resumed worktree: %+v", got)
	}
	// A releasing process that no longer owns it changes nothing.
	stale := *get(w.ID)
	stale.Pid, stale.PidStart = os.Getpid(), 1
	if err := r.ReleaseWorktree(&stale); !errors.Is(err, ErrWorktreeTaken) {
		t.Fatalf("release of a worktree not ours: %v", err)
	}

	// A new worktree abandoned is gone.
	n, resumed, err := r.CreateWorktree("other", "run", "", "")
	if err == nil || resumed {
		t.Fatalf("worktree on a missing branch: %+v %v %v", n, resumed, err)
	}
	if err := r.CreateBranch("other", mustTip(t, r, "main")); err != nil {
		t.Fatal(err)
	}
	if n, _, err = r.CreateWorktree("other", "run", "", ""); err != nil {
		t.Fatal(err)
	}
	if err := r.AbandonWorktree(n); err != nil {
		t.Fatal(err)
	}
	if get(n.ID) != nil {
		t.Fatal("a new worktree abandoned is still there")
	}
}

func mustTip(t *testing.T, r *Repo, branch string) objects.ID {
	t.Helper()
	tip, err := r.BranchTip(branch)
	if err != nil {
		t.Fatal(err)
	}
	return tip
}

// A read-only view claims nothing: another worktree on its branch is made
// and resumed beside it, and the view can be neither claimed for a
// commit nor removed as anything else.
func TestViewWorktree(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n"})
	push(t, r, ws, "v1")
	v, err := r.CreateView("main", "/nowhere/view")
	if err != nil {
		t.Fatal(err)
	}
	if v.Kind != KindView {
		t.Fatalf("kind %q", v.Kind)
	}
	w, resumed, err := r.CreateWorktree("main", "mount", "/nowhere/mnt", "")
	if err != nil || resumed {
		t.Fatalf("a worktree beside a live view: resumed %v, %v", resumed, err)
	}
	if err := r.ClaimWorktree(v); err == nil || !strings.Contains(err.Error(), "read-only view") {
		t.Errorf("claiming a view: %v", err)
	}
	if err := r.RemoveView(w); err == nil || !strings.Contains(err.Error(), "not a read-only view") {
		t.Errorf("RemoveView of a mount worktree: %v", err)
	}
	if err := r.RemoveView(v); err != nil {
		t.Fatal(err)
	}
	wts, _ := r.Worktrees()
	if len(wts) != 1 || wts[0].ID != w.ID {
		t.Errorf("worktrees after removing the view: %+v", wts)
	}
}

// A push onto the branch of a worktree refuses while the worktree can
// still be recorded there: live (its commit at its end would find the
// branch moved) or interrupted (a killed art mount: moved under it, its
// work could only go on another branch). A view holds nothing.
func TestPushRefusedByTheBranchsWorktree(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kind    string
		release bool // the owner died: interrupted
		killed  bool // the owner died and nothing marked the row since
		want    string
	}{
		{"live mount", "mount", false, false, "is in use by worktree #"},
		{"interrupted mount", "mount", true, false, "holds interrupted worktree #1 (an art mount that ended without recording its changes), which a push would leave behind; record it first with 'art commit --worktree 1' (should that fail, 'art run' or 'art mount' on main continues the worktree, to remove what is in the way), or push to another branch with -b NAME"},
		// A killed art leaves its row "live": the stale cleanup that
		// marks it may not have run (or the kill came after it).
		{"mount killed, row not yet marked", "mount", false, true, "holds interrupted worktree #1 (an art mount that ended without recording its changes)"},
		{"read-only view", KindView, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "a\n"})
			v1 := push(t, r, ws, "v1").Commit
			var w *Worktree
			var err error
			if tc.kind == KindView {
				w, err = r.CreateView("main", "")
			} else {
				w, _, err = r.CreateWorktree("main", tc.kind, "", "")
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.release {
				if err := r.ReleaseWorktree(w); err != nil {
					t.Fatal(err)
				}
			}
			if tc.killed {
				orphan(t, r, w)
			}
			writeFiles(t, ws, map[string]string{"a": "host\n"})
			var reported []string
			_, err = r.Push(context.Background(), PushOptions{Dir: ws, Report: func(l string) { reported = append(reported, l) }})
			if tc.want == "" {
				if err != nil || len(reported) != 1 {
					t.Fatalf("push beside a %s: %v, reported %q", tc.name, err, reported)
				}
				return
			}
			if len(reported) != 0 {
				t.Errorf("a refused push listed entries as stored: %q", reported)
			}
			if !errors.Is(err, ErrBranchInUse) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("push onto the branch of a %s: %v; want ErrBranchInUse saying %q", tc.name, err, tc.want)
			}
			if tip, _ := r.BranchTip("main"); tip != v1 {
				t.Fatalf("a refused push moved main")
			}
			if _, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: "mine"}); err != nil {
				t.Fatalf("push to another branch: %v", err)
			}
		})
	}
}

// ProcessAlive decides whether a worktree's owner still runs: a pid
// reused by a later process (another start time) or a zombie (killed, not
// yet reaped) is no owner, or its interrupted session stayed "live" and
// was never recorded.
func TestProcessAlive(t *testing.T) {
	me := os.Getpid()
	meStart := ProcessStart(me)
	if meStart == 0 {
		t.Fatal("no start time for this process")
	}
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait()
	zpid := zombie.Process.Pid
	zstart := ProcessStart(zpid)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", zpid))
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child did not become a zombie")
		}
	}
	for _, tc := range []struct {
		name  string
		pid   int
		start int64
		want  bool
	}{
		{"this process", me, meStart, true},
		{"this process, start unknown", me, 0, true},
		{"a pid reused by another process", me, meStart + 1, false},
		{"no pid", 0, 0, false},
		{"a zombie", zpid, zstart, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ProcessAlive(tc.pid, tc.start); got != tc.want {
				t.Errorf("ProcessAlive(%d, %d) = %v, want %v", tc.pid, tc.start, got, tc.want)
			}
		})
	}
}
