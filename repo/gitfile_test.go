package repo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A workspace whose .git is a file leading outside it (a git worktree's,
// a submodule's checkout) has no git directory in the sandbox: art run
// warns of it (OutsideGitDir), and of nothing else.
func TestOutsideGitDir(t *testing.T) {
	for _, tc := range []struct {
		name   string
		git    string // content of ws/.git as a file; "" for a .git directory, "link" for a link
		want   string
		wantOK bool
	}{
		{name: "worktree", git: "gitdir: /src/main/.git/worktrees/ws\n", want: "/src/main/.git/worktrees/ws", wantOK: true},
		{name: "submodule", git: "gitdir: ../.git/modules/ws\n", want: "../.git/modules/ws", wantOK: true},
		{name: "crlf", git: "gitdir: ../x\r\n", want: "../x", wantOK: true},
		{name: "climbs out after going in", git: "gitdir: sub/../../x\n", want: "sub/../../x", wantOK: true},
		{name: "inside", git: "gitdir: sub/.git/modules/x\n"},
		{name: "inside through dots", git: "gitdir: ./a/../b\n"},
		{name: "other content", git: "hello\n"},
		{name: "empty target", git: "gitdir: \n"},
		{name: "directory"},
		{name: "link", git: "link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a.txt": "a"})
			switch tc.git {
			case "":
				writeFiles(t, ws, map[string]string{".git/HEAD": "ref: refs/heads/main\n"})
			case "link":
				if err := os.Symlink("/elsewhere/.git", filepath.Join(ws, ".git")); err != nil {
					t.Fatal(err)
				}
			default:
				writeFiles(t, ws, map[string]string{".git": tc.git})
			}
			res := push(t, r, ws, "ws")
			got, ok, err := r.OutsideGitDir(res.Commit, "ws")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("OutsideGitDir = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
	// A workspace the commit lacks.
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{".git": "gitdir: /x\n"})
	res := push(t, r, ws, "ws")
	if _, ok, err := r.OutsideGitDir(res.Commit, "other"); err != nil || ok {
		t.Errorf("OutsideGitDir of a missing workspace = %v, %v; want false, nil", ok, err)
	}
}

// A refused push or pull whose conflicts lie in a .git directory advises
// merging with git (GitMergeAdvice); other conflicts get no such advice.
func TestGitMergeAdvice(t *testing.T) {
	for _, tc := range []struct {
		conflicts []string
		want      bool
	}{
		{[]string{".git/index (changed on the host)"}, true},
		{[]string{"Makefile (changed on the host)", ".git/refs/heads/main (changed here and on the branch)"}, true},
		{[]string{"sub/.GIT/packed-refs (changed on the host)"}, true},
		{[]string{"Makefile (changed on the host)"}, false},
		{[]string{".gitignore (changed on the host)", "a.git/x (changed on the host)", "x/.github/y (changed on the host)"}, false},
		{[]string{". (its mode, changed here and on the branch)"}, false},
		{nil, false},
	} {
		got := GitMergeAdvice(tc.conflicts, "/w/ws/.art/art.db", "/w/ws", "ws", "attempt1")
		if (got != "") != tc.want {
			t.Errorf("GitMergeAdvice(%q) = %q, want advice: %v", tc.conflicts, got, tc.want)
		}
		if tc.want {
			s := `d=$(mktemp -d) && art pull -q -d /w/ws/.art/art.db -m "$d"/ws --commit attempt1 && git -C /w/ws fetch "$d"/ws HEAD:from-art`
			if !strings.HasSuffix(got, "\n  "+s) {
				t.Errorf("GitMergeAdvice(%q) = %q, does not end in %q", tc.conflicts, got, s)
			}
		}
	}
	// The command runs as printed: the paths are quoted for the shell,
	// and it never names a fixed directory in /tmp.
	for _, tc := range []struct{ db, dir, ws, rev, want string }{
		{"/w/my ws/.art/art.db", "/w/my ws", "my ws", "main",
			`art pull -q -d '/w/my ws/.art/art.db' -m "$d"/'my ws' --commit main && git -C '/w/my ws' fetch "$d"/'my ws' HEAD:from-art`},
		{"/w/it's/db", "/w/it's/a$b", "a$b", "1a2b3c4d",
			`art pull -q -d '/w/it'\''s/db' -m "$d"/'a$b' --commit 1a2b3c4d && git -C '/w/it'\''s/a$b' fetch "$d"/'a$b' HEAD:from-art`},
		{"/w/x/db", "/w/x/-ws", "-ws", "feature/x",
			`art pull -q -d /w/x/db -m "$d"/-ws --commit feature/x && git -C /w/x/-ws fetch "$d"/-ws HEAD:from-art`},
	} {
		got := GitMergeAdvice([]string{".git/index (changed on the host)"}, tc.db, tc.dir, tc.ws, tc.rev)
		if !strings.HasSuffix(got, tc.want) || strings.Contains(got, "/tmp/") {
			t.Errorf("GitMergeAdvice(%q, %q, %q, %q) = %q, want it to end in %q", tc.db, tc.dir, tc.ws, tc.rev, got, tc.want)
		}
	}
}

// A pull refused only for what the commit would have git run (nothing
// changed on the host) advises review and --force: it advised pushing
// host changes first (there are none) and, for .git/config, merging two
// histories with git.
func TestPullAdviceForGitRisksOnly(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	const cfg = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/objects/info/packs": "", ".git/config": cfg})
	base := push(t, r, ws, "base").Commit
	other := filepath.Join(t.TempDir(), "ws")
	pull(t, r, other, base)
	writeFiles(t, other, map[string]string{".git/config": cfg + "[alias]\n\tx = !sh -c true\n"})
	agent := sessionCommit(t, r, pushTo(t, r, other, "tmp").Commit, base)

	_, err := r.Pull(PullOptions{Dir: ws, Commit: agent})
	mustFail(t, err, ErrConflict)
	msg := err.Error()
	for _, want := range []string{".git/config (a git config that sets alias.x", "(nothing listed changed on the host: review it, then pull with --force, which writes what the commit holds over all of them)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("pull refused with %q; want it to hold %q", msg, want)
		}
	}
	for _, not := range []string{"art push", "merge the two histories"} {
		if strings.Contains(msg, not) {
			t.Errorf("pull refused with %q; it advises %q for no host change", msg, not)
		}
	}

	// With a change on the host in .git too, the git advice is back
	// (not a push, which would conflict on the same files).
	writeFiles(t, ws, map[string]string{".git/refs/heads/main": "1111111111111111111111111111111111111111\n"})
	writeFiles(t, other, map[string]string{".git/refs/heads/main": "2222222222222222222222222222222222222222\n"})
	agent = sessionCommit(t, r, pushTo(t, r, other, "tmp").Commit, base)
	_, err = r.Pull(PullOptions{Dir: ws, Commit: agent})
	mustFail(t, err, ErrConflict)
	for _, want := range []string{"(--force writes what the commit holds over all of them)", "merge the two histories with git"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("pull refused with %q; want it to hold %q", err, want)
		}
	}
}
