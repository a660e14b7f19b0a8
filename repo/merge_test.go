package repo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artproject/art/objects"
)

// contentOf pulls commit's workspace into a fresh directory and returns
// its files' contents by relative path.
func contentOf(t *testing.T, r *Repo, commit objects.ID, name string) map[string]string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	pull(t, r, dst, commit)
	out := map[string]string{}
	filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dst, p)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	return out
}

// agentSession moves main as a session would: a second copy of the
// workspace (same name) pulls main's tip, changes it and pushes.
func agentSession(t *testing.T, r *Repo, change func(dir string)) objects.ID {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ws")
	tip, err := r.BranchTip("main")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Pull(PullOptions{Dir: dir, Commit: tip, Branch: "main"}); err != nil {
		t.Fatal(err)
	}
	change(dir)
	return push(t, r, dir, "session").Commit
}

// A push after the branch moved (an agent's session) records the host's
// changes on top of the branch's. It recorded the host as it was, which
// undid the session in the new commit; art's advice after a pull conflict
// ("push host changes first") led there.
func TestPushMergesTheBranchsChanges(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a1\n", "b": "b1\n", "d/c": "c1\n", "keep": "k\n"})
	v1 := push(t, r, ws, "v1").Commit

	agentSession(t, r, func(dir string) {
		writeFiles(t, dir, map[string]string{"b": "agent\n", "n/new": "agent's\n"})
		os.Remove(filepath.Join(dir, "d/c"))
	})
	writeFiles(t, ws, map[string]string{"a": "host\n", "h": "host's\n"})
	res, err := r.Push(context.Background(), PushOptions{Dir: ws})
	if err != nil {
		t.Fatalf("push after the branch moved: %v", err)
	}
	if res.Merged == 0 || res.MergedSince != v1 {
		t.Errorf("push did not say it merged since %s: %+v", v1.Short(), res)
	}
	want := map[string]string{"a": "host\n", "b": "agent\n", "h": "host's\n", "n/new": "agent's\n", "keep": "k\n"}
	if got := contentOf(t, r, res.Commit, "ws"); !equalMaps(got, want) {
		t.Errorf("merged commit holds %v, want %v", got, want)
	}
	c, _ := r.LoadCommit(res.Commit)
	if c.Session == nil || c.Session.Status != PushMerged {
		t.Errorf("the merged push's session is not marked merged: %+v", c.Session)
	}
	// The host now pulls the session's changes with no conflict.
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: res.Commit, Branch: "main"}); err != nil {
		t.Fatalf("pull after the merged push: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "b")); string(b) != "agent\n" {
		t.Errorf("b after the pull: %q", b)
	}
	// The merge recorded the host's own tree as a commit of its own,
	// the merge's second parent: the next push merges from it.
	mc, _ := r.LoadCommit(res.Commit)
	if len(mc.Parents) != 2 {
		t.Errorf("the merged push has parents %v, want the branch's tip and the host's own commit", mc.Parents)
	}

	// Both changed b, differently: refused, nothing committed.
	agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"b": "agent again\n"}) })
	tip, _ := r.BranchTip("main")
	writeFiles(t, ws, map[string]string{"b": "host again\n"})
	_, err = r.Push(context.Background(), PushOptions{Dir: ws})
	if !errors.Is(err, ErrPushConflict) || !strings.Contains(err.Error(), "\n  b (changed here and on the branch)\n") || !strings.Contains(err.Error(), "-b NAME") {
		t.Fatalf("push of a path both changed: %v", err)
	}
	if now, _ := r.BranchTip("main"); now != tip {
		t.Fatalf("a refused push moved main")
	}
	// A new branch takes the host as it is.
	res, err = r.Push(context.Background(), PushOptions{Dir: ws, Branch: "mine"})
	if err != nil || res.Merged != 0 {
		t.Fatalf("push to a new branch: %+v, %v", res, err)
	}
	if got := contentOf(t, r, res.Commit, "ws")["b"]; got != "host again\n" {
		t.Errorf("b on the new branch: %q", got)
	}
}

// A pull of an older commit, to go back to it, then a push records that
// commit's state: the branch did not move since the sync, the sync went
// back.
func TestPushAfterPullingAnOldCommit(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a1\n"})
	v1 := push(t, r, ws, "v1").Commit
	writeFiles(t, ws, map[string]string{"a": "a2\n", "b": "b2\n"})
	push(t, r, ws, "v2")
	pull(t, r, ws, v1) // Branch "": not a branch's tip
	res := push(t, r, ws, "back to v1")
	if res.Merged != 0 {
		t.Errorf("the push merged: %+v", res)
	}
	want := map[string]string{"a": "a1\n"}
	if got := contentOf(t, r, res.Commit, "ws"); !equalMaps(got, want) {
		t.Errorf("commit holds %v, want %v", got, want)
	}
}

// Paths .artignore leaves out are never written by pull (it says so) and
// keep what the branch holds at a push: an agent's build output there
// vanished from the branch at the next push.
func TestIgnoredPathsKeepTheBranchs(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a1\n"})
	push(t, r, ws, "v1")
	session := agentSession(t, r, func(dir string) {
		writeFiles(t, dir, map[string]string{"dist/app.js": "built\n", "build.log": "log\n", "a": "agent\n"})
	})
	writeFiles(t, ws, map[string]string{".artignore": "*.log\ndist/\n"})
	var lines []string
	pres, err := r.Pull(PullOptions{Dir: ws, Commit: session, Branch: "main", Report: func(l string) { lines = append(lines, l) }})
	if err != nil {
		t.Fatal(err)
	}
	if pres.Ignored != 2 {
		t.Errorf("pull counted %d ignored paths, want 2", pres.Ignored)
	}
	out := strings.Join(lines, "\n")
	for _, p := range []string{"build.log", "dist"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("pull wrote the ignored %s", p)
		}
		if !strings.Contains(out, "SKIP /ws/"+p+" (left out by .artignore") {
			t.Errorf("pull did not say it left %s out:\n%s", p, out)
		}
	}
	writeFiles(t, ws, map[string]string{"a": "host\n"})
	res := push(t, r, ws, "after")
	if c, _ := r.LoadCommit(res.Commit); c.Session == nil || c.Session.Status != PushMerged {
		t.Errorf("a push holding the branch's ignored entries is not marked merged (pull would trust them as the user's): %+v", c.Session)
	}
	want := map[string]string{"a": "host\n", ".artignore": "*.log\ndist/\n", "dist/app.js": "built\n", "build.log": "log\n"}
	// contentOf pulls into a directory with no .artignore of its own
	// until it writes the commit's: every file arrives.
	if got := contentOf(t, r, res.Commit, "ws"); !equalMaps(got, want) {
		t.Errorf("commit holds %v, want %v", got, want)
	}
}

// Host changes a pull would undo are conflicts: a directory's mode, a
// deletion, a directory made where the commit has a file. (An emptied
// workspace takes the commit whole.)
func TestPullConflictsWithHostChanges(t *testing.T) {
	cases := []struct {
		name  string
		host  func(ws string)
		agent func(dir string) // makes the commit pulled
		want  string
	}{
		{"directory chmod", func(ws string) { os.Chmod(filepath.Join(ws, "private"), 0o700) }, nil, "private (mode changed on the host to 0700; the commit has 0755)"},
		{"file deleted", func(ws string) { os.Remove(filepath.Join(ws, "f")) }, nil, "f (deleted on the host)"},
		{"directory deleted", func(ws string) { os.RemoveAll(filepath.Join(ws, "private")) }, nil, "private (deleted on the host)"},
		{"file deleted, changed in the commit", func(ws string) { os.Remove(filepath.Join(ws, "f")) },
			func(dir string) { writeFiles(t, dir, map[string]string{"f": "agent\n"}) }, "f (deleted on the host)"},
		{"empty directory in place of a file", func(ws string) {
			os.Remove(filepath.Join(ws, "f"))
			os.Mkdir(filepath.Join(ws, "f"), 0o700)
		}, nil, "f (a directory made on the host; the commit has a file there)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"f": "f1\n", "g": "g1\n", "private/x": "x\n"})
			os.Chmod(filepath.Join(ws, "private"), 0o755)
			push(t, r, ws, "v1")
			agent := c.agent
			if agent == nil {
				agent = func(dir string) { writeFiles(t, dir, map[string]string{"g": "agent\n"}) }
			}
			session := agentSession(t, r, agent)
			c.host(ws)
			before := snapshot(t, ws)
			_, err := r.Pull(PullOptions{Dir: ws, Commit: session, Branch: "main"})
			if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("pull: want a conflict %q, got %v", c.want, err)
			}
			if d := diffMaps(before, snapshot(t, ws)); d != "" {
				t.Fatalf("a refused pull changed the host:\n%s", d)
			}
			if _, err := r.Pull(PullOptions{Dir: ws, Commit: session, Branch: "main", Force: true}); err != nil {
				t.Fatalf("pull --force: %v", err)
			}
		})
	}
	// A workspace emptied on the host (to pull a fresh copy) takes the
	// commit whole, with no conflict.
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"f": "f1\n", "d/x": "x\n"})
	v1 := push(t, r, ws, "v1").Commit
	os.RemoveAll(ws)
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: v1, Branch: "main"}); err != nil {
		t.Fatalf("pull into an emptied workspace: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "d/x")); string(b) != "x\n" {
		t.Errorf("d/x after the pull: %q", b)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// The workspace root's own mode: a session's chmod of it reaches the host
// at a pull (it did not, while art diff showed it), a host chmod of it is
// drift for status and a conflict for a pull that would undo it.
func TestWorkspaceRootMode(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	os.Chmod(ws, 0o755)
	writeFiles(t, ws, map[string]string{"f": "f\n"})
	push(t, r, ws, "v1")
	session := agentSession(t, r, func(dir string) { os.Chmod(dir, 0o750) })
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: session, Branch: "main"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(ws); st.Mode().Perm() != 0o750 {
		t.Fatalf("root mode after the pull: %v, want 0750", st.Mode().Perm())
	}
	if d, err := r.HostDrift(ws); err != nil || len(d.Modified) != 0 {
		t.Fatalf("drift right after the pull: %+v %v", d, err)
	}
	os.Chmod(ws, 0o700)
	if d, err := r.HostDrift(ws); err != nil || len(d.Modified) != 1 || d.Modified[0] != "." {
		t.Fatalf("drift after a host chmod of the root: %+v %v", d, err)
	}
	session = agentSession(t, r, func(dir string) { os.Chmod(dir, 0o755) })
	_, err := r.Pull(PullOptions{Dir: ws, Commit: session, Branch: "main"})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), ". (mode changed on the host to 0700") {
		t.Fatalf("pull over the host's chmod of the root: %v", err)
	}
	if st, _ := os.Stat(ws); st.Mode().Perm() != 0o700 {
		t.Fatalf("a refused pull changed the root's mode to %v", st.Mode().Perm())
	}
}

// A pull that changes only modes lists them and counts them: it said
// "0 updated".
func TestPullListsModeChanges(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"d/f": "f\n", "g": "g\n"})
	os.Chmod(ws, 0o755)
	os.Chmod(filepath.Join(ws, "d"), 0o755)
	os.Chmod(filepath.Join(ws, "g"), 0o644)
	push(t, r, ws, "v1")
	session := agentSession(t, r, func(dir string) {
		os.Chmod(dir, 0o750) // the workspace root's own mode, listed too
		os.Chmod(filepath.Join(dir, "d"), 0o700)
		os.Chmod(filepath.Join(dir, "g"), 0o755)
	})
	var lines []string
	res, err := r.Pull(PullOptions{Dir: ws, Commit: session, Branch: "main", Report: func(l string) { lines = append(lines, l) }})
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Join(lines, "\n")
	if res.Updated != 3 || !strings.Contains(out, "MODE /ws/d (0755 -> 0700)") || !strings.Contains(out, "MODE /ws/g (0644 -> 0755)") ||
		!strings.Contains(out, "MODE /ws (0755 -> 0750)") {
		t.Errorf("pull of mode changes: %+v\n%s", res, out)
	}
}

// Pushes after a merged push go on merging from what the host holds: the
// second push, with the host unchanged, took the host's stale files for
// changes and undid the session.
func TestPushAfterAMergedPush(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n", "b": "b\n"})
	push(t, r, ws, "v1")
	agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"a": "agent\n"}) })
	writeFiles(t, ws, map[string]string{"b": "host\n"})
	merged := push(t, r, ws, "merged")
	if merged.Merged == 0 {
		t.Fatalf("the first push did not merge: %+v", merged)
	}
	mc, _ := r.LoadCommit(merged.Commit)
	hostOwn := mc.Parents[1] // what the workspace synced with
	// Nothing changed on the host: no commit (each such push recorded
	// two without a change, the host's tree and a merge), the sync stays
	// with the host's own commit, and the result says the branch holds
	// changes the host lacks.
	res := push(t, r, ws, "again")
	if !res.Unchanged || res.Commit != merged.Commit || res.MergedSince != hostOwn {
		t.Errorf("a push with nothing changed: %+v, want no commit on %s, synced with %s", res, merged.Commit.Short(), hostOwn.Short())
	}
	if tip, _ := r.BranchTip("main"); tip != merged.Commit {
		t.Errorf("main moved to %s", tip.Short())
	}
	if got := contentOf(t, r, res.Commit, "ws"); got["a"] != "agent\n" || got["b"] != "host\n" {
		t.Fatalf("a second push undid the session: %v", got)
	}
	if d, err := r.HostDrift(ws); err != nil || !d.Clean() {
		t.Errorf("status after the push: %+v %v", d, err)
	}
	if s, _, ok := syncedWith(r.DB, wsKey(t, r, ws)); !ok || s != hostOwn {
		t.Errorf("the workspace synced with %s, want %s", s.Short(), hostOwn.Short())
	}
	// Asked for, it records one.
	if res, err := r.Push(context.Background(), PushOptions{Dir: ws, Message: "marker", AllowEmpty: true}); err != nil || res.Unchanged || res.Commit == merged.Commit {
		t.Errorf("--allow-empty: %+v %v", res, err)
	}
	agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"c": "agent\n"}) })
	writeFiles(t, ws, map[string]string{"b": "host 2\n"})
	res = push(t, r, ws, "third")
	if got := contentOf(t, r, res.Commit, "ws"); got["a"] != "agent\n" || got["c"] != "agent\n" || got["b"] != "host 2\n" {
		t.Fatalf("a later merged push lost a session's work: %v", got)
	}
}

// A push onto another branch that grew from what the host synced (art
// checkout attempt) merges too.
func TestPushOntoAnotherBranchMerges(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n", "b": "b\n"})
	v1 := push(t, r, ws, "v1").Commit
	tx, _ := r.Begin()
	if err := tx.SetBranch("attempt", v1); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	dir := filepath.Join(t.TempDir(), "ws")
	if _, err := r.Pull(PullOptions{Dir: dir, Commit: v1, Branch: "attempt"}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"a": "agent\n"})
	if _, err := r.Push(context.Background(), PushOptions{Dir: dir, Branch: "attempt"}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ws, map[string]string{"b": "host\n"})
	res, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: "attempt"})
	if err != nil {
		t.Fatal(err)
	}
	if got := contentOf(t, r, res.Commit, "ws"); got["a"] != "agent\n" || got["b"] != "host\n" {
		t.Fatalf("the push onto attempt undid its session: %v", got)
	}
}

// What a merge decides where the host and the branch both touched a path.
func TestMergeCases(t *testing.T) {
	cases := []struct {
		name     string
		host     func(ws string)
		agent    func(dir string)
		conflict string            // "" for none
		want     map[string]string // path: content, or "mode 0700" for a mode
	}{
		{"a mode pull stripped is no host change", func(ws string) { writeFiles(t, ws, map[string]string{"h": "h\n"}) },
			func(dir string) { writeFiles(t, dir, map[string]string{"f": "agent 2\n"}) }, "", map[string]string{"f": "agent 2\n", "h": "h\n"}},
		{"a directory's mode, changed on both", func(ws string) {
			os.Chmod(filepath.Join(ws, "d"), 0o750)
			writeFiles(t, ws, map[string]string{"d/z": "z\n"})
		},
			func(dir string) {
				os.Chmod(filepath.Join(dir, "d"), 0o700)
				writeFiles(t, dir, map[string]string{"d/y": "y\n"})
			}, "d (its mode, changed here and on the branch)", nil},
		{"a directory's mode, changed on the branch", func(ws string) { writeFiles(t, ws, map[string]string{"d/z": "z\n"}) },
			func(dir string) { os.Chmod(filepath.Join(dir, "d"), 0o700) }, "", map[string]string{"d": "mode 0700", "d/z": "z\n"}},
		{"deleted on the branch, only times changed on the host", func(ws string) {
			ts := time.Unix(1_000_000_000, 0)
			os.Chtimes(filepath.Join(ws, "d/x"), ts, ts)
			writeFiles(t, ws, map[string]string{"h": "h\n"})
		}, func(dir string) { os.RemoveAll(filepath.Join(dir, "d")) }, "", map[string]string{"d": "absent", "h": "h\n"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "a\n", "d/x": "x\n"})
			os.Chmod(filepath.Join(ws, "d"), 0o755)
			push(t, r, ws, "v1")
			// The branch holds a 0666 file, which a pull writes 0664.
			agentSession(t, r, func(dir string) {
				writeFiles(t, dir, map[string]string{"f": "agent\n"})
				os.Chmod(filepath.Join(dir, "f"), 0o666)
			})
			tip, _ := r.BranchTip("main")
			if _, err := r.Pull(PullOptions{Dir: ws, Commit: tip, Branch: "main"}); err != nil {
				t.Fatal(err)
			}
			agentSession(t, r, c.agent)
			c.host(ws)
			res, err := r.Push(context.Background(), PushOptions{Dir: ws})
			if c.conflict != "" {
				if !errors.Is(err, ErrPushConflict) || !strings.Contains(err.Error(), c.conflict) {
					t.Fatalf("want a conflict on %s, got %v", c.conflict, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "ws")
			pull(t, r, dst, res.Commit)
			for p, want := range c.want {
				st, err := os.Stat(filepath.Join(dst, p))
				switch {
				case want == "absent":
					if err == nil {
						t.Errorf("%s is in the merged commit", p)
					}
				case strings.HasPrefix(want, "mode "):
					if err != nil || fmt.Sprintf("mode %04o", st.Mode().Perm()) != want {
						t.Errorf("%s: %v %v, want %s", p, st.Mode(), err, want)
					}
				default:
					if b, _ := os.ReadFile(filepath.Join(dst, p)); string(b) != want {
						t.Errorf("%s = %q, want %q", p, b, want)
					}
				}
			}
		})
	}
}

// The cases a second review of the merge found.
func TestMergeAfterReview(t *testing.T) {
	setup := func(t *testing.T) (*Repo, string) {
		r := newTestRepo(t)
		ws := newWorkspace(t, "ws")
		os.Chmod(ws, 0o755)
		writeFiles(t, ws, map[string]string{"a": "a\n", "b": "b\n", "c": "c\n", "d": "d\n", "e": "e\n"})
		push(t, r, ws, "v1")
		return r, ws
	}
	rootMode := func(t *testing.T, r *Repo, commit objects.ID) uint32 {
		c, _ := r.LoadCommit(commit)
		e, ok, err := r.Lookup(c.Tree, []string{"ws"})
		if err != nil || !ok {
			t.Fatal(err)
		}
		return e.Mode
	}
	t.Run("a session's chmod of the root", func(t *testing.T) {
		r, ws := setup(t)
		agentSession(t, r, func(dir string) { os.Chmod(dir, 0o750) })
		res := push(t, r, ws, "host unchanged")
		if m := rootMode(t, r, res.Commit); m != 0o750 {
			t.Errorf("push undid the session's chmod of the root: %04o", m)
		}
		writeFiles(t, ws, map[string]string{"b": "host\n"})
		res = push(t, r, ws, "host changed b")
		if m := rootMode(t, r, res.Commit); m != 0o750 {
			t.Errorf("a merged push undid the session's chmod of the root: %04o", m)
		}
	})
	t.Run("the count of kept changes", func(t *testing.T) {
		r, ws := setup(t)
		agentSession(t, r, func(dir string) {
			writeFiles(t, dir, map[string]string{"a": "1\n", "c": "1\n", "d": "1\n"})
			os.Remove(filepath.Join(dir, "e"))
		})
		writeFiles(t, ws, map[string]string{"b": "host\n"})
		if res := push(t, r, ws, "merged"); res.Merged != 4 {
			t.Errorf("merged counted %d changes, want 4 (3 modified, 1 deleted)", res.Merged)
		}
	})
	t.Run("a detached HEAD", func(t *testing.T) {
		r, ws := setup(t)
		agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"a": "agent\n"}) })
		tip, _ := r.BranchTip("main")
		tx, _ := r.Begin()
		if err := tx.SetHead(Head{Commit: tip}); err != nil {
			t.Fatal(err)
		}
		tx.Commit()
		writeFiles(t, ws, map[string]string{"b": "host\n"})
		push(t, r, ws, "merged")
		writeFiles(t, ws, map[string]string{"c": "host\n"})
		res := push(t, r, ws, "again")
		if got := contentOf(t, r, res.Commit, "ws"); got["a"] != "agent\n" || got["b"] != "host\n" || got["c"] != "host\n" {
			t.Errorf("pushes on a detached HEAD undid the session: %v", got)
		}
	})
	t.Run("xattrs pull does not write", func(t *testing.T) {
		r, ws := setup(t)
		// The branch gives a an xattr (a session's setfattr: push does not
		// read xattrs), the host pulls it, a session changes a.
		tip, _ := r.BranchTip("main")
		c, _ := r.LoadCommit(tip)
		e, _, _ := r.Lookup(c.Tree, []string{"ws", "a"})
		e.Xattrs = []objects.Xattr{{Name: "user.tag", Value: []byte("1")}}
		tx, _ := r.Begin()
		root, err := tx.ReplaceAt(c.Tree, []string{"ws", "a"}, &e)
		if err != nil {
			t.Fatal(err)
		}
		id, err := tx.PutCommit(&objects.Commit{Tree: root, Parents: []objects.ID{tip}, Message: "setfattr", Time: c.Time + 1})
		if err != nil {
			t.Fatal(err)
		}
		tx.Advance("main", id)
		tx.Commit()
		if _, err := r.Pull(PullOptions{Dir: ws, Commit: id, Branch: "main"}); err != nil {
			t.Fatal(err)
		}
		agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"a": "agent\n"}) })
		writeFiles(t, ws, map[string]string{"b": "host\n"})
		res, err := r.Push(context.Background(), PushOptions{Dir: ws})
		if err != nil {
			t.Fatalf("an xattr the host never had made a conflict: %v", err)
		}
		if got := contentOf(t, r, res.Commit, "ws"); got["a"] != "agent\n" || got["b"] != "host\n" {
			t.Errorf("merged %v", got)
		}
	})
	t.Run("back to main after a merge onto another branch", func(t *testing.T) {
		r, ws := setup(t)
		v1, _ := r.BranchTip("main")
		tx, _ := r.Begin()
		tx.SetBranch("attempt", v1)
		tx.Commit()
		other := filepath.Join(t.TempDir(), "ws")
		if _, err := r.Pull(PullOptions{Dir: other, Commit: v1, Branch: "attempt"}); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, other, map[string]string{"c": "attempt\n"})
		if _, err := r.Push(context.Background(), PushOptions{Dir: other, Branch: "attempt"}); err != nil {
			t.Fatal(err)
		}
		agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"a": "agent\n"}) })
		writeFiles(t, ws, map[string]string{"b": "host\n"})
		if _, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: "attempt"}); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, ws, map[string]string{"b": "host 2\n"})
		res, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: "main"})
		if err != nil {
			t.Fatal(err)
		}
		if got := contentOf(t, r, res.Commit, "ws"); got["a"] != "agent\n" || got["b"] != "host 2\n" {
			t.Errorf("the push back onto main undid its session: %v", got)
		}
	})
	t.Run("conflicts sorted, with reasons", func(t *testing.T) {
		r, ws := setup(t)
		agentSession(t, r, func(dir string) {
			writeFiles(t, dir, map[string]string{"e": "agent\n", "a": "agent\n"})
			os.Remove(filepath.Join(dir, "c"))
		})
		writeFiles(t, ws, map[string]string{"e": "host\n", "c": "host\n"})
		os.Remove(filepath.Join(ws, "a"))
		_, err := r.Push(context.Background(), PushOptions{Dir: ws})
		want := "\n  a (deleted here, changed on the branch)\n  c (changed here, deleted on the branch)\n  e (changed here and on the branch)\n"
		if !errors.Is(err, ErrPushConflict) || !strings.Contains(err.Error(), want) {
			t.Errorf("conflicts: %v\nwant the list%s", err, want)
		}
	})
}

// sessionOn is agentSession on any branch.
func sessionOn(t *testing.T, r *Repo, branch string, change func(dir string)) objects.ID {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ws")
	tip, err := r.BranchTip(branch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Pull(PullOptions{Dir: dir, Commit: tip, Branch: branch}); err != nil {
		t.Fatal(err)
	}
	change(dir)
	res, err := r.Push(context.Background(), PushOptions{Dir: dir, Branch: branch})
	if err != nil {
		t.Fatal(err)
	}
	return res.Commit
}

// The cases a third review of the merge found.
func TestMergeAfterThirdReview(t *testing.T) {
	setup := func(t *testing.T) (*Repo, string) {
		r := newTestRepo(t)
		ws := newWorkspace(t, "ws")
		writeFiles(t, ws, map[string]string{"a": "a\n", "b": "b\n", "c": "c\n", "d/1": "1\n", "d/2": "2\n", "d/3": "3\n"})
		push(t, r, ws, "v1")
		return r, ws
	}
	branchAt := func(t *testing.T, r *Repo, name, at string) {
		tip, _ := r.BranchTip(at)
		tx, _ := r.Begin()
		if err := tx.SetBranch(name, tip); err != nil {
			t.Fatal(err)
		}
		tx.Commit()
	}
	t.Run("the newest common base", func(t *testing.T) {
		r, ws := setup(t)
		branchAt(t, r, "B", "main")
		sessionOn(t, r, "B", func(dir string) { writeFiles(t, dir, map[string]string{"c": "B\n"}) })
		writeFiles(t, ws, map[string]string{"g": "host\n"})
		pushOnto(t, r, ws, "main")
		pushOnto(t, r, ws, "B") // merged: B gets g
		sessionOn(t, r, "B", func(dir string) { os.Remove(filepath.Join(dir, "g")) })
		writeFiles(t, ws, map[string]string{"other": "host\n"})
		pushOnto(t, r, ws, "main")
		res := pushOnto(t, r, ws, "B")
		if got := contentOf(t, r, res.Commit, "ws"); got["g"] != "" || got["c"] != "B\n" || got["other"] != "host\n" {
			t.Errorf("B after the pushes: %v (the session's deletion of g undone?)", got)
		}
	})
	t.Run("push -b as a conflict advises, then push", func(t *testing.T) {
		r, ws := setup(t)
		agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"a": "agent\n", "c": "agent\n"}) })
		writeFiles(t, ws, map[string]string{"a": "host\n", "b": "host\n"})
		if _, err := r.Push(context.Background(), PushOptions{Dir: ws}); !errors.Is(err, ErrPushConflict) {
			t.Fatalf("want a conflict on a: %v", err)
		}
		pushOnto(t, r, ws, "mine")
		writeFiles(t, ws, map[string]string{"a": "agent\n"})
		res := pushOnto(t, r, ws, "")
		if got := contentOf(t, r, res.Commit, "ws"); got["c"] != "agent\n" || got["b"] != "host\n" || got["a"] != "agent\n" {
			t.Errorf("main after push -b then push: %v", got)
		}
	})
	t.Run("a workspace pushed through a link", func(t *testing.T) {
		r := newTestRepo(t)
		real := t.TempDir()
		ws := filepath.Join(real, "ws")
		writeFiles(t, ws, map[string]string{"x": "1\n", "b": "b\n"})
		link := filepath.Join(t.TempDir(), "L")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		viaLink := filepath.Join(link, "ws")
		pushOnto(t, r, viaLink, "")
		session := agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"x": "2\n"}) })
		if _, err := r.Pull(PullOptions{Dir: ws, Commit: session, Branch: "main"}); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, ws, map[string]string{"x": "1\n", "b": "host\n"}) // the user takes x back
		res := pushOnto(t, r, viaLink, "")
		if got := contentOf(t, r, res.Commit, "ws"); got["x"] != "1\n" || got["b"] != "host\n" {
			t.Errorf("a push through a link merged from a stale base: %v", got)
		}
	})
	t.Run("a deleted directory counts its paths", func(t *testing.T) {
		r, ws := setup(t)
		agentSession(t, r, func(dir string) { os.RemoveAll(filepath.Join(dir, "d")) })
		ts := time.Unix(1_000_000_000, 0)
		os.Chtimes(filepath.Join(ws, "d/1"), ts, ts)
		writeFiles(t, ws, map[string]string{"b": "host\n"})
		if res := pushOnto(t, r, ws, ""); res.Merged != 3 {
			t.Errorf("merged counted %d, want the 3 deleted files", res.Merged)
		}
	})
	t.Run("a session that deleted the workspace", func(t *testing.T) {
		r, ws := setup(t)
		tip, _ := r.BranchTip("main")
		c, _ := r.LoadCommit(tip)
		tx, _ := r.Begin()
		empty, _ := tx.EmptyTree()
		id, err := tx.PutCommit(&objects.Commit{Tree: empty, Parents: []objects.ID{tip}, Message: "rm -rf ws", Time: c.Time + 1})
		if err != nil {
			t.Fatal(err)
		}
		tx.Advance("main", id)
		tx.Commit()
		writeFiles(t, ws, map[string]string{"b": "host\n"})
		_, err = r.Push(context.Background(), PushOptions{Dir: ws})
		if !errors.Is(err, ErrPushConflict) || !strings.Contains(err.Error(), "b (changed here, deleted on the branch)") {
			t.Errorf("push after the branch deleted the workspace: %v", err)
		}
	})
	t.Run("gc keeps a detached sync's commit", func(t *testing.T) {
		r, ws := setup(t)
		tip, _ := r.BranchTip("main")
		tx, _ := r.Begin()
		tx.SetHead(Head{Commit: tip})
		tx.Commit()
		writeFiles(t, ws, map[string]string{"b": "detached\n"})
		pushOnto(t, r, ws, "") // D, on the detached HEAD only
		tx, _ = r.Begin()
		tx.SetHead(Head{Branch: "main"})
		tx.Commit()
		agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"a": "agent\n"}) })
		if _, err := r.GC(r.WorktreeRoots); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, ws, map[string]string{"c": "host\n"})
		res := pushOnto(t, r, ws, "")
		if got := contentOf(t, r, res.Commit, "ws"); got["a"] != "agent\n" || got["c"] != "host\n" {
			t.Errorf("after gc the push undid the session: %v", got)
		}
	})
	t.Run("a root mode pull stripped", func(t *testing.T) {
		r, ws := setup(t)
		s1 := agentSession(t, r, func(dir string) { os.Chmod(dir, 0o777) })
		if _, err := r.Pull(PullOptions{Dir: ws, Commit: s1, Branch: "main", Force: true}); err != nil {
			t.Fatal(err)
		}
		if d, err := r.HostDrift(ws); err != nil || len(d.Modified) != 0 {
			t.Errorf("drift after the pull stripped o+w of the root: %+v %v", d, err)
		}
		s2 := agentSession(t, r, func(dir string) { os.Chmod(dir, 0o750) })
		if _, err := r.Pull(PullOptions{Dir: ws, Commit: s2, Branch: "main"}); err != nil {
			t.Errorf("the stripped root mode made a conflict: %v", err)
		}
	})
	t.Run("an unborn branch starts on the synced commit", func(t *testing.T) {
		r := newTestRepo(t)
		ws := newWorkspace(t, "ws")
		writeFiles(t, ws, map[string]string{"a": "a\n", "b": "b\n"})
		imp := pushOnto(t, r, ws, "att") // as art run -b att imports an empty repository
		sessionOn(t, r, "att", func(dir string) { writeFiles(t, dir, map[string]string{"a": "agent\n"}) })
		writeFiles(t, ws, map[string]string{"b": "host\n"})
		res := pushOnto(t, r, ws, "") // onto main, unborn
		if res.Parent != imp.Commit {
			t.Errorf("main's first commit has parent %s, want the import %s", res.Parent.Short(), imp.Commit.Short())
		}
		writeFiles(t, ws, map[string]string{"c": "host\n"})
		res = pushOnto(t, r, ws, "att")
		if got := contentOf(t, r, res.Commit, "ws"); got["a"] != "agent\n" || got["c"] != "host\n" {
			t.Errorf("att after the pushes: %v", got)
		}
	})
}

// The cases a fourth review of the merge found.
func TestMergeAfterFourthReview(t *testing.T) {
	setup := func(t *testing.T) (*Repo, string) {
		r := newTestRepo(t)
		ws := newWorkspace(t, "ws")
		os.Chmod(ws, 0o755)
		writeFiles(t, ws, map[string]string{"a": "a\n", "b": "b\n", "c": "c\n", "x": "x\n"})
		push(t, r, ws, "v1")
		return r, ws
	}
	t.Run("push -b NEW, then pushes onto it", func(t *testing.T) {
		r, ws := setup(t)
		agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"a": "agent\n", "c": "agent\n"}) })
		writeFiles(t, ws, map[string]string{"a": "host\n", "b": "host\n"})
		if _, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: "mine"}); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, ws, map[string]string{"a": "host 2\n"})
		if _, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: "mine"}); err != nil {
			t.Fatalf("the host's own earlier push onto mine made a conflict: %v", err)
		}
		writeFiles(t, ws, map[string]string{"b": "b\n"}) // the user takes b back
		res, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: "mine"})
		if err != nil {
			t.Fatal(err)
		}
		if got := contentOf(t, r, res.Commit, "ws"); got["b"] != "b\n" || got["a"] != "host 2\n" {
			t.Errorf("mine: %v (the user's revert of b lost?)", got)
		}
	})
	t.Run("push -b NEW of a chmod'ed root", func(t *testing.T) {
		r, ws := setup(t)
		agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"c": "agent\n"}) })
		os.Chmod(ws, 0o700)
		if _, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: "mine"}); err != nil {
			t.Fatal(err)
		}
		if d, err := r.HostDrift(ws); err != nil || len(d.Modified)+len(d.Added)+len(d.Deleted) != 0 {
			t.Errorf("drift right after the push: %+v %v", d, err)
		}
		tip, _ := r.BranchTip("mine")
		if _, err := r.Pull(PullOptions{Dir: ws, Commit: tip, Branch: "mine"}); err != nil {
			t.Errorf("pull of what was just pushed: %v", err)
		}
	})
	t.Run("pull --force writes the root's mode", func(t *testing.T) {
		r, ws := setup(t)
		session := agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"c": "agent\n"}) })
		os.Chmod(ws, 0o700)
		if _, err := r.Pull(PullOptions{Dir: ws, Commit: session, Branch: "main"}); !errors.Is(err, ErrConflict) {
			t.Fatalf("want a conflict on the root's mode: %v", err)
		}
		if _, err := r.Pull(PullOptions{Dir: ws, Commit: session, Branch: "main", Force: true}); err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(ws); st.Mode().Perm() != 0o755 {
			t.Errorf("root after pull --force: %v, want 0755", st.Mode().Perm())
		}
	})
	t.Run("a branch deleting a directory whose mode a pull stripped", func(t *testing.T) {
		r, ws := setup(t)
		s1 := agentSession(t, r, func(dir string) {
			writeFiles(t, dir, map[string]string{"d/f": "f\n"})
			os.Chmod(filepath.Join(dir, "d/f"), 0o666)
		})
		if _, err := r.Pull(PullOptions{Dir: ws, Commit: s1, Branch: "main"}); err != nil {
			t.Fatal(err)
		}
		agentSession(t, r, func(dir string) { os.RemoveAll(filepath.Join(dir, "d")) })
		writeFiles(t, ws, map[string]string{"x": "host\n"})
		res, err := r.Push(context.Background(), PushOptions{Dir: ws})
		if err != nil {
			t.Fatalf("a mode pull stripped made a conflict with the deletion: %v", err)
		}
		if got := contentOf(t, r, res.Commit, "ws"); got["d/f"] != "" || got["x"] != "host\n" {
			t.Errorf("merged %v", got)
		}
	})
}

// The cases a fifth review of the merge found: a new branch starts where
// the host grew from, and gc moves a workspace off a commit it frees to
// the nearest ancestor it keeps.
func TestMergeAfterFifthReview(t *testing.T) {
	setup := func(t *testing.T) (*Repo, string) {
		r := newTestRepo(t)
		ws := newWorkspace(t, "ws")
		writeFiles(t, ws, map[string]string{"a": "a\n", "b": "b\n", "c": "c\n"})
		push(t, r, ws, "v1")
		return r, ws
	}
	t.Run("push -b, a push onto it, then back onto main", func(t *testing.T) {
		r, ws := setup(t)
		agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"a": "session\n"}) })
		writeFiles(t, ws, map[string]string{"b": "host\n"})
		pushOnto(t, r, ws, "mine")
		writeFiles(t, ws, map[string]string{"c": "host\n"})
		pushOnto(t, r, ws, "mine")
		res := pushOnto(t, r, ws, "main")
		if got := contentOf(t, r, res.Commit, "ws"); got["a"] != "session\n" || got["b"] != "host\n" || got["c"] != "host\n" {
			t.Errorf("main after the detour through mine: %v", got)
		}
	})
	t.Run("push -b as a conflict advises, branch -d, gc, push", func(t *testing.T) {
		r, ws := setup(t)
		agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"a": "session\n", "c": "session\n"}) })
		writeFiles(t, ws, map[string]string{"a": "host\n", "b": "host\n"})
		if _, err := r.Push(context.Background(), PushOptions{Dir: ws}); !errors.Is(err, ErrPushConflict) {
			t.Fatalf("want a conflict: %v", err)
		}
		pushOnto(t, r, ws, "tmp")
		if _, err := r.DeleteBranch("tmp"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.GC(r.WorktreeRoots); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, ws, map[string]string{"a": "session\n"})
		res := pushOnto(t, r, ws, "")
		if got := contentOf(t, r, res.Commit, "ws"); got["c"] != "session\n" || got["b"] != "host\n" {
			t.Errorf("main after branch -d and gc: %v", got)
		}
		if p := fsckProblems(t, r); p != "" {
			t.Fatal(p)
		}
	})
}

// pushOnto pushes ws onto branch ("": HEAD's) and fails the test on error.
func pushOnto(t *testing.T, r *Repo, ws, branch string) *PushResult {
	t.Helper()
	res, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: branch})
	if err != nil {
		t.Fatalf("push onto %q: %v", branch, err)
	}
	return res
}

// A path the workspace's .artignore left out when it last synced holds
// what the branch kept there (an agent's output, which pull did not
// write). Once .artignore no longer leaves it out, the host not having it
// is no deletion: the push took the host's tree as it was, and the
// agent's output vanished from the branch with no conflict and no word.
// A path the host had and deleted is still a deletion.
func TestUnignoredPathsKeepTheBranchs(t *testing.T) {
	const pulled, pushed, moved = 0, 1, 2 // how the host last synced
	cases := []struct {
		name     string
		ignore   string            // the host's .artignore when it pulls the session
		sync     int               // pulled, pushed after that, or the branch moved after the push
		after    string            // .artignore at the push ("" deletes it)
		host     map[string]string // files the host writes before the push
		remove   []string          // paths the host deletes before the push
		want     map[string]string // workspace files of the pushed commit, .artignore aside
		wantKept int
	}{
		{"pattern removed after a pull", "*.log\ndist/\n", pulled, "", nil, nil,
			map[string]string{"a": "agent\n", "keep": "k\n", "dist/app.js": "built\n", "build.log": "log\n"}, 2},
		{"pattern removed after a push", "*.log\ndist/\n", pushed, "", nil, nil,
			map[string]string{"a": "agent\n", "keep": "k\n", "dist/app.js": "built\n", "build.log": "log\n"}, 2},
		{"pattern removed, branch moved", "*.log\ndist/\n", moved, "", nil, nil,
			map[string]string{"a": "agent2\n", "keep": "k\n", "dist/app.js": "built\n", "build.log": "log\n"}, 2},
		{"one pattern of two removed", "*.log\ndist/\n", pushed, "dist/\n", nil, nil,
			map[string]string{"a": "agent\n", "keep": "k\n", "dist/app.js": "built\n", "build.log": "log\n"}, 1},
		{"still left out", "*.log\ndist/\n", pushed, "*.log\ndist/\n", nil, nil,
			map[string]string{"a": "agent\n", "keep": "k\n", "dist/app.js": "built\n", "build.log": "log\n"}, 0},
		{"host deletes paths it had", "*.log\n", pushed, "", nil, []string{"keep", "dist/app.js"},
			map[string]string{"a": "agent\n", "build.log": "log\n"}, 1},
		{"host has its own file there", "*.log\n", pushed, "", map[string]string{"build.log": "mine\n"}, nil,
			map[string]string{"a": "agent\n", "keep": "k\n", "dist/app.js": "built\n", "build.log": "mine\n"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "a1\n", "keep": "k\n"})
			push(t, r, ws, "v1")
			agentSession(t, r, func(dir string) {
				writeFiles(t, dir, map[string]string{"dist/app.js": "built\n", "build.log": "log\n", "a": "agent\n"})
			})
			// The user's .artignore, pushed (the branch keeps the
			// agent's files it leaves out), then the branch pulled:
			// pull leaves them out.
			writeFiles(t, ws, map[string]string{".artignore": c.ignore})
			push(t, r, ws, "ignore")
			tip, err := r.BranchTip("main")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Pull(PullOptions{Dir: ws, Commit: tip, Branch: "main"}); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"dist", "build.log"} {
				if _, err := os.Lstat(filepath.Join(ws, p)); err == nil && excludedBy(compileIgnore(c.ignore), p, p == "dist") {
					t.Fatalf("pull wrote %s, which .artignore leaves out", p)
				}
			}
			if c.sync >= pushed {
				push(t, r, ws, "synced")
			}
			if c.sync == moved {
				agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"a": "agent2\n"}) })
			}
			if c.host != nil {
				writeFiles(t, ws, c.host)
			}
			for _, p := range c.remove {
				if err := os.Remove(filepath.Join(ws, p)); err != nil {
					t.Fatal(err)
				}
			}
			if c.after == "" {
				os.Remove(filepath.Join(ws, ".artignore"))
			} else {
				writeFiles(t, ws, map[string]string{".artignore": c.after})
			}
			res := push(t, r, ws, "after")
			if res.KeptUnsynced != c.wantKept {
				t.Errorf("push kept %d path(s) the host never had, want %d", res.KeptUnsynced, c.wantKept)
			}
			got := contentOf(t, r, res.Commit, "ws")
			delete(got, ".artignore")
			if !equalMaps(got, c.want) {
				t.Errorf("commit holds %v, want %v", got, c.want)
			}
		})
	}
}

// wsKey is the key of the workspaces row of dir.
func wsKey(t *testing.T, r *Repo, dir string) string {
	t.Helper()
	abs, err := CheckWorkspaceDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, err := r.workspaceKey(abs)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// The workspace root's own mtime is no change for a push: pull does not
// set it and its writes there move it, and a session's new or removed
// entry at the root moves the branch's. Each such push recorded a commit
// (a merge and the host's tree, after a session) with no change in it.
func TestPushIgnoresTheRootsOwnMTime(t *testing.T) {
	for _, tc := range []struct {
		name    string
		session func(t *testing.T, dir string)
	}{
		{"a new entry at the root", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"n": "agent\n"})
		}},
		{"an entry removed at the root", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "b")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a change below the root", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"d/f": "agent\n"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "a\n", "b": "b\n", "d/f": "f\n"})
			push(t, r, ws, "v1")
			old := time.Unix(1_600_000_000, 0)
			if err := os.Chtimes(ws, old, old); err != nil {
				t.Fatal(err)
			}
			push(t, r, ws, "old mtime") // the root's mtime alone
			session := agentSession(t, r, func(dir string) {
				tc.session(t, dir)
				now := time.Now()
				os.Chtimes(dir, now, now) // the session's root moved
			})
			res := push(t, r, ws, "host unchanged")
			if !res.Unchanged || res.Commit != session {
				t.Fatalf("a push with the host unchanged after a session: %+v, want no commit on %s", res, session.Short())
			}
			pull(t, r, ws, session)
			if res := push(t, r, ws, "after the pull"); !res.Unchanged || res.Commit != session {
				t.Fatalf("a push right after a pull: %+v, want no commit on %s", res, session.Short())
			}
			if tip, _ := r.BranchTip("main"); tip != session {
				t.Errorf("main moved to %s", tip.Short())
			}
			// A real change is still recorded, on top of the session.
			writeFiles(t, ws, map[string]string{"a": "host\n"})
			res = push(t, r, ws, "host change")
			if res.Unchanged || res.Commit == session {
				t.Fatalf("a host change was not recorded: %+v", res)
			}
			if got := contentOf(t, r, res.Commit, "ws"); got["a"] != "host\n" {
				t.Errorf("after the host change: %v", got)
			}
		})
	}
}
