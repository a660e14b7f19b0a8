package repo

import (
	"os"
	"path/filepath"
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
