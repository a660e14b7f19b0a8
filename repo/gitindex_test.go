package repo

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artproject/art/objects"
)

// gitRun runs git in dir, failing the test on error.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.fsmonitor=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// A git index that git refreshed (new stat data for files a pull
// rewrote) says what it said: sameGitIndex. One with a staged change, a
// path added or removed, or a flag changed does not, in every index
// version; anything not an index is never the same.
func TestSameGitIndex(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	for _, version := range []string{"2", "3", "4"} {
		for _, tc := range []struct {
			name   string
			change func(t *testing.T, dir string)
			same   bool
		}{
			{"refreshed", func(t *testing.T, dir string) {
				// New inodes and times for every file, as a pull gives them.
				old := time.Now().Add(-time.Hour)
				for _, f := range []string{"a.txt", "dir/b.txt", "dir/sub/c.txt"} {
					p := filepath.Join(dir, f)
					data, err := os.ReadFile(p)
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p+".new", data, 0o644); err != nil {
						t.Fatal(err)
					}
					if err := os.Chtimes(p+".new", old, old); err != nil {
						t.Fatal(err)
					}
					if err := os.Rename(p+".new", p); err != nil {
						t.Fatal(err)
					}
				}
				gitRun(t, dir, "status", "--short")
				gitRun(t, dir, "update-index", "--really-refresh")
			}, true},
			{"untracked cache added", func(t *testing.T, dir string) {
				gitRun(t, dir, "update-index", "--untracked-cache")
				gitRun(t, dir, "status", "--short")
			}, true},
			{"staged change", func(t *testing.T, dir string) {
				os.WriteFile(filepath.Join(dir, "a.txt"), []byte("changed\n"), 0o644)
				gitRun(t, dir, "add", "a.txt")
			}, false},
			{"path added", func(t *testing.T, dir string) {
				os.WriteFile(filepath.Join(dir, "dir/sub/d.txt"), []byte("d\n"), 0o644)
				gitRun(t, dir, "add", "dir/sub/d.txt")
			}, false},
			{"path removed", func(t *testing.T, dir string) {
				gitRun(t, dir, "rm", "-q", "--cached", "dir/b.txt")
			}, false},
			{"mode staged", func(t *testing.T, dir string) {
				gitRun(t, dir, "update-index", "--chmod=+x", "a.txt")
			}, false},
			{"assume unchanged", func(t *testing.T, dir string) {
				gitRun(t, dir, "update-index", "--assume-unchanged", "dir/b.txt")
			}, false},
			{"skip worktree", func(t *testing.T, dir string) {
				gitRun(t, dir, "update-index", "--skip-worktree", "dir/b.txt")
			}, version == "2"}, // an extended flag: git writes version 3 for it
		} {
			t.Run("v"+version+"/"+tc.name, func(t *testing.T) {
				dir := t.TempDir()
				gitRun(t, dir, "init", "-q")
				gitRun(t, dir, "config", "index.version", version)
				writeFiles(t, dir, map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n", "dir/sub/c.txt": "c\n", "dir/sub/long-name-for-prefix-compression.txt": "x\n"})
				gitRun(t, dir, "add", ".")
				gitRun(t, dir, "commit", "-q", "-m", "one")
				gitRun(t, dir, "update-index", "--index-version", version)
				before, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := gitIndexContent(before); !ok {
					t.Fatalf("index version %s not read", version)
				}
				tc.change(t, dir)
				after, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
				if err != nil {
					t.Fatal(err)
				}
				if tc.same && string(before) == string(after) {
					t.Fatalf("the index did not change; the case tests nothing")
				}
				want := tc.same
				if tc.name == "skip worktree" && version == "2" {
					// git upgrades a version-2 index to 3 for the flag:
					// the version differs.
					want = false
				}
				if got := sameGitIndex(before, after); got != want {
					t.Errorf("sameGitIndex = %v, want %v", got, want)
				}
			})
		}
	}
	// Not indexes, or damaged ones.
	dir := t.TempDir()
	gitRun(t, dir, "init", "-q")
	writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
	gitRun(t, dir, "add", ".")
	idx, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), idx...)
	flipped[len(flipped)/2] ^= 1
	for name, b := range map[string][]byte{"empty": nil, "text": []byte("hello\n"), "bad checksum": flipped, "truncated": idx[:len(idx)-1]} {
		if sameGitIndex(b, b) {
			t.Errorf("%s: taken for a git index", name)
		}
	}
	if !sameGitIndex(idx, idx) {
		t.Errorf("an index is not the same as itself")
	}
}

// gitWorkspaceRepo makes a repository whose workspace ws is a git
// repository of one commit (a.txt, b.txt), pushed.
func gitWorkspaceRepo(t *testing.T) (*Repo, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipping: git not installed")
	}
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	gitRun(t, ws, "init", "-q")
	writeFiles(t, ws, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	gitRun(t, ws, "add", ".")
	gitRun(t, ws, "commit", "-q", "-m", "host")
	push(t, r, ws, "base")
	return r, ws
}

// gitSession records what a session that writes a.txt and commits it in
// git records on main (another copy of the workspace stands in for it).
func gitSession(t *testing.T, r *Repo, content string) objects.ID {
	t.Helper()
	other := filepath.Join(t.TempDir(), "ws")
	head, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	pull(t, r, other, head.Commit)
	writeFiles(t, other, map[string]string{"a.txt": content})
	gitRun(t, other, "commit", "-q", "-am", "agent: "+content)
	return pushTo(t, r, other, "main").Commit
}

// The user's git status after a pull refreshes .git/index (the pulled
// files have new inodes and times): the next pull of a session that
// committed took that for a change on the host and refused, on every
// round of pull, git status, session. The refreshed index now pulls
// over; an index with a change staged on the host still conflicts.
func TestPullOverRefreshedGitIndex(t *testing.T) {
	r, ws := gitWorkspaceRepo(t)
	// A session (another copy stands in for it) commits.
	session := func(content string) objects.ID { return gitSession(t, r, content) }
	head := session("agent 1\n")
	pull(t, r, ws, head)
	// The user looks: git refreshes the index.
	gitRun(t, ws, "update-index", "--really-refresh")
	gitRun(t, ws, "status", "--short")
	head = session("agent 2\n")
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: head, Branch: "main"}); err != nil {
		t.Fatalf("pull after git status on the host: %v", err)
	}
	if got := gitRun(t, ws, "status", "--porcelain"); got != "" {
		t.Errorf("git status after the pull: %q, want clean", got)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "agent 2\n" {
		t.Errorf("a.txt = %q, want the session's", got)
	}

	// A change the user staged is theirs: a conflict.
	writeFiles(t, ws, map[string]string{"b.txt": "host\n"})
	gitRun(t, ws, "add", "b.txt")
	head = session("agent 3\n")
	_, err := r.Pull(PullOptions{Dir: ws, Commit: head, Branch: "main"})
	mustFail(t, err, ErrConflict)
	if !strings.Contains(err.Error(), ".git/index (changed on the host)") {
		t.Errorf("conflict %v, want one on .git/index", err)
	}
}

// The same for a push that merges the host's changes with a session's:
// the host's refreshed index is no change, the session's is taken, and
// the host's own edit is kept.
func TestPushMergesOverRefreshedGitIndex(t *testing.T) {
	r, ws := gitWorkspaceRepo(t)
	session := func(content string) objects.ID { return gitSession(t, r, content) }
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: session("agent 1\n"), Branch: "main"}); err != nil {
		t.Fatal(err)
	}
	gitRun(t, ws, "update-index", "--really-refresh")
	gitRun(t, ws, "status", "--short")
	session("agent 2\n")
	writeFiles(t, ws, map[string]string{"b.txt": "host edit\n"})
	res, err := r.Push(context.Background(), PushOptions{Dir: ws, Message: "host"})
	if err != nil {
		t.Fatalf("push merging with the session after git status on the host: %v", err)
	}
	if res.Merged == 0 {
		t.Errorf("the push merged nothing of the session's")
	}
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: res.Commit, Branch: "main"}); err != nil {
		t.Fatalf("pull of the merge: %v", err)
	}
	if got := gitRun(t, ws, "status", "--porcelain"); got != " M b.txt\n" {
		t.Errorf("git status after the pull: %q, want the host's edit of b.txt only", got)
	}
	if got := gitRun(t, ws, "log", "-1", "--format=%s"); got != "agent: agent 2\n" {
		t.Errorf("git log: %q, want the session's commit", got)
	}
}
