package repo

import (
	"os"
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
		got := GitMergeAdvice(tc.conflicts, "/w/ws/.art/art.db", "ws", "attempt1")
		if (got != "") != tc.want {
			t.Errorf("GitMergeAdvice(%q) = %q, want advice: %v", tc.conflicts, got, tc.want)
		}
		if tc.want {
			for _, s := range []string{"'art pull -d /w/ws/.art/art.db -m /tmp/art-ws/ws --commit attempt1'", "'git fetch /tmp/art-ws/ws HEAD:from-art'"} {
				if !strings.Contains(got, s) {
					t.Errorf("GitMergeAdvice(%q) = %q, lacks %q", tc.conflicts, got, s)
				}
			}
		}
	}
}
