package overlay_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/overlay"
	"github.com/artproject/art/policy"
	"github.com/artproject/art/repo"
)

// polFS opens a worktree over a workspace "ws" holding protected content,
// with the given policy (preset + --allow rules).
func polFS(t *testing.T, preset string, allow ...string) (*overlay.FS, *repo.Repo) {
	t.Helper()
	tmp := t.TempDir()
	r, err := repo.Init(filepath.Join(tmp, "art.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	host := filepath.Join(tmp, "ws")
	for p, c := range map[string]string{
		".env":                    "SECRET=1\n",
		"secrets/db.txt":          "password\n",
		"a/b/secrets/x":           "deep\n",
		".git/hooks/pre-commit":   "#!/bin/sh\n",
		".git/config":             "[core]\n",
		".git/HEAD":               "ref: refs/heads/main\n",
		"src/main.go":             "package main\n",
		"src/.ssh/id_rsa":         "KEY\n",
		"view/readme.txt":         "look, don't touch\n",
		"holder/inner/.env.local": "X=1\n",
	} {
		abs := filepath.Join(host, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(abs), 0o755)
		if err := os.WriteFile(abs, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Push(context.Background(), repo.PushOptions{Dir: host, Branch: "main"}); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Build(nil, "", preset, allow)
	if err != nil {
		t.Fatal(err)
	}
	wt, _, err := r.CreateWorktree("main", "run", "", "")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := overlay.Open(r, wt, overlay.Options{Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	return fs, r
}

// walk resolves a home-relative path to an inode.
func walk(fs *overlay.FS, p string) (uint64, error) {
	ino := overlay.RootIno
	for _, c := range strings.Split(p, "/") {
		a, err := fs.Lookup(ino, c)
		if err != nil {
			return 0, err
		}
		ino = a.Ino
	}
	return ino, nil
}

func mustWalk(t *testing.T, fs *overlay.FS, p string) uint64 {
	t.Helper()
	ino, err := walk(fs, p)
	if err != nil {
		t.Fatalf("walk %s: %v", p, err)
	}
	return ino
}

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want %v", what, err, want)
	}
}

func names(t *testing.T, fs *overlay.FS, p string) string {
	t.Helper()
	ents, err := fs.Readdir(mustWalk(t, fs, p))
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name)
	}
	return strings.Join(n, " ")
}

func TestPolicyNoneHidesEverywhere(t *testing.T) {
	fs, _ := polFS(t, "agent-safe")
	defer fs.Close()
	for _, p := range []string{"ws/.env", "ws/secrets", "ws/secrets/db.txt", "ws/a/b/secrets", "ws/a/b/secrets/x", "ws/src/.ssh", "ws/src/.ssh/id_rsa", "ws/holder/inner/.env.local"} {
		_, err := walk(fs, p)
		wantErrno(t, "lookup "+p, err, syscall.ENOENT)
	}
	if got := names(t, fs, "ws"); strings.Contains(got, ".env") || strings.Contains(got, "secrets") {
		t.Errorf("hidden names listed: %s", got)
	}
	if got := names(t, fs, "ws/a/b"); got != "" {
		t.Errorf("ws/a/b lists %q, want nothing", got)
	}
	// Nor do link counts tell how many hidden directories there are.
	for _, p := range []string{"ws", "ws/a/b"} {
		subdirs := 0
		ino := mustWalk(t, fs, p)
		ents, err := fs.Readdir(ino)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Type == objects.TypeDir && e.Name != "." && e.Name != ".." {
				subdirs++
			}
		}
		if a, err := fs.Getattr(ino); err != nil || a.Nlink != uint32(2+subdirs) {
			t.Errorf("%s: %d links for %d listed subdirectories: %v", p, a.Nlink, subdirs, err)
		}
	}
	ws := mustWalk(t, fs, "ws")
	// Hidden names cannot be created, linked to or renamed onto.
	_, err := fs.Create(ws, ".env", 0o644, nil)
	wantErrno(t, "create .env", err, syscall.EACCES)
	_, err = fs.Mkdir(ws, "secrets", 0o755, nil)
	wantErrno(t, "mkdir secrets", err, syscall.EACCES)
	_, err = fs.Symlink(ws, ".ENV", "x", nil)
	wantErrno(t, "symlink .ENV (case variant)", err, syscall.EACCES)
	src := mustWalk(t, fs, "ws/src")
	main := mustWalk(t, fs, "ws/src/main.go")
	_, err = fs.Link(main, ws, "id_rsa")
	wantErrno(t, "link onto id_rsa", err, syscall.EACCES)
	wantErrno(t, "rename onto .env", fs.Rename(src, "main.go", ws, ".env", 0), syscall.EACCES)
	wantErrno(t, "unlink hidden", fs.Unlink(ws, ".env"), syscall.ENOENT)
}

func TestPolicyReadAndView(t *testing.T) {
	fs, _ := polFS(t, "agent-safe", "/ws/view/**=view")
	defer fs.Close()
	hook := mustWalk(t, fs, "ws/.git/hooks/pre-commit")
	hooks := mustWalk(t, fs, "ws/.git/hooks")
	git := mustWalk(t, fs, "ws/.git")
	// read: content readable, every change refused.
	if err := fs.CheckOpen(hook, false); err != nil {
		t.Errorf("open read-only content for reading: %v", err)
	}
	wantErrno(t, "open for writing", fs.CheckOpen(hook, true), syscall.EACCES)
	_, err := fs.Write(hook, []byte("evil"), 0)
	wantErrno(t, "write", err, syscall.EACCES)
	size := int64(0)
	_, err = fs.Setattr(hook, overlay.SetAttr{Size: &size})
	wantErrno(t, "truncate", err, syscall.EACCES)
	mode := uint32(0o777)
	_, err = fs.Setattr(hook, overlay.SetAttr{Mode: &mode})
	wantErrno(t, "chmod", err, syscall.EACCES)
	mt := int64(1)
	_, err = fs.Setattr(hook, overlay.SetAttr{Mtime: &mt})
	wantErrno(t, "utimens", err, syscall.EACCES)
	wantErrno(t, "setxattr", fs.SetXattr(hook, "user.x", []byte("1"), 0, false), syscall.EACCES)
	wantErrno(t, "unlink", fs.Unlink(hooks, "pre-commit"), syscall.EACCES)
	wantErrno(t, "rename from", fs.Rename(hooks, "pre-commit", git, "moved", 0), syscall.EACCES)
	_, err = fs.Link(hook, git, "second-name")
	wantErrno(t, "link", err, syscall.EACCES)
	_, err = fs.Create(hooks, "post-commit", 0o755, nil)
	wantErrno(t, "create in a read-only directory", err, syscall.EACCES)
	cfg := mustWalk(t, fs, "ws/.git/config")
	_, err = fs.Write(cfg, []byte("x"), 0)
	wantErrno(t, "write .git/config", err, syscall.EACCES)
	// .git/HEAD is not protected.
	head := mustWalk(t, fs, "ws/.git/HEAD")
	if _, err := fs.Write(head, []byte("x"), 0); err != nil {
		t.Errorf("write .git/HEAD: %v", err)
	}
	// view: stat and list work, opening fails.
	rd := mustWalk(t, fs, "ws/view/readme.txt")
	if _, err := fs.Getattr(rd); err != nil {
		t.Errorf("stat view-only: %v", err)
	}
	if got := names(t, fs, "ws/view"); got != "readme.txt" {
		t.Errorf("list view-only dir: %q", got)
	}
	wantErrno(t, "open view-only", fs.CheckOpen(rd, false), syscall.EACCES)
	// Each refused change is counted (a program sees EACCES alone, art
	// reports them), with the first path known; a refused read is not a
	// change.
	n, first := fs.PolicyRefusals()
	if n != 11 || !strings.HasPrefix(first, "ws/.git/hooks") {
		t.Errorf("PolicyRefusals = %d, %q; want 11 from ws/.git/hooks", n, first)
	}
}

// Renaming or removing a parent directory can never move, expose or
// delete protected content.
func TestPolicyParentEscapes(t *testing.T) {
	fs, r := polFS(t, "agent-safe")
	ws := mustWalk(t, fs, "ws")
	home := overlay.RootIno
	a := mustWalk(t, fs, "ws/a")
	holder := mustWalk(t, fs, "ws/holder")
	wantErrno(t, "rename a dir holding hidden content", fs.Rename(ws, "a", ws, "a2", 0), syscall.EACCES)
	wantErrno(t, "rename the workspace", fs.Rename(home, "ws", home, "ws2", 0), syscall.EACCES)
	wantErrno(t, "rename .git (read-only inside)", fs.Rename(ws, ".git", ws, "git2", 0), syscall.EACCES)
	wantErrno(t, "rmdir a dir whose only entry is hidden", fs.Rmdir(mustWalk(t, fs, "ws/holder"), "inner"), syscall.ENOTEMPTY)
	_ = holder
	wantErrno(t, "rmdir a parent of hidden content", fs.Rmdir(a, "b"), syscall.ENOTEMPTY)
	// Exchange with a directory holding protected content is refused too.
	if _, err := fs.Mkdir(ws, "empty", 0o755, nil); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "exchange with a protected dir", fs.Rename(ws, "empty", ws, "a", overlay.RenameExchange), syscall.EACCES)
	// Replacing a directory that holds hidden content (rename over it) fails.
	wantErrno(t, "rename over a parent of hidden content", fs.Rename(ws, "empty", a, "b", 0), syscall.EACCES)

	// What the agent may do, it can: a plain file in src.
	src := mustWalk(t, fs, "ws/src")
	if _, err := fs.Write(mustWalk(t, fs, "ws/src/main.go"), []byte("package x\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := fs.Rename(src, "main.go", src, "app.go", 0); err != nil {
		t.Fatalf("rename a writable file: %v", err)
	}
	// Commit: protected content is kept exactly as it was.
	before := treeOf(t, r, "HEAD")
	id, err := fs.Commit(overlay.CommitOptions{Message: "session", AllowEmpty: true})
	if err != nil {
		t.Fatal(err)
	}
	after := treeOf(t, r, id.String())
	for _, p := range []string{"ws/.env", "ws/secrets/db.txt", "ws/a/b/secrets/x", "ws/.git/hooks/pre-commit", "ws/.git/config", "ws/src/.ssh/id_rsa", "ws/holder/inner/.env.local"} {
		if before[p] != after[p] || before[p] == "" {
			t.Errorf("%s changed or vanished in the commit: %q → %q", p, before[p], after[p])
		}
	}
	changes, err := r.DiffTrees(mustTree(t, r, "HEAD~1"), mustTree(t, r, "HEAD"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		// ws/empty is the agent's own directory, made above.
		if !strings.HasPrefix(c.Path, "ws/src/") && c.Path != "ws/empty" {
			t.Errorf("the diff shows a change outside what the agent may touch: %s %s", c.Status(), c.Path)
		}
	}
}

func mustTree(t *testing.T, r *repo.Repo, rev string) objects.ID {
	t.Helper()
	id, err := r.Resolve(rev)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.LoadCommit(id)
	if err != nil {
		t.Fatal(err)
	}
	return c.Tree
}

// treeOf maps every file path of a commit to its content id.
func treeOf(t *testing.T, r *repo.Repo, rev string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walkTree func(prefix string, id objects.ID)
	walkTree = func(prefix string, id objects.ID) {
		tr, err := r.LoadTree(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range tr.Entries {
			p := prefix + e.Name
			if e.Type == objects.TypeDir {
				walkTree(p+"/", e.ID)
				continue
			}
			out[p] = e.ID.String()
		}
	}
	walkTree("", mustTree(t, r, rev))
	return out
}

func TestPolicyPresets(t *testing.T) {
	cases := []struct {
		preset string
		path   string
		write  bool // writable
		hidden bool
	}{
		{"full-access", "ws/.env", true, false},
		{"full-access", "ws/.git/hooks/pre-commit", true, false},
		{"development", "ws/.env", false, true},
		{"development", "ws/.git/hooks/pre-commit", true, false},
		{"development", "ws/src/main.go", true, false},
		{"agent-safe", "ws/.git/hooks/pre-commit", false, false},
		{"agent-safe", "ws/src/main.go", true, false},
		{"read-only", "ws/src/main.go", false, false},
		{"read-only", "ws/.env", false, false},
	}
	for _, c := range cases {
		t.Run(c.preset+"/"+c.path, func(t *testing.T) {
			fs, _ := polFS(t, c.preset)
			defer fs.Close()
			ino, err := walk(fs, c.path)
			if c.hidden {
				wantErrno(t, "lookup", err, syscall.ENOENT)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = fs.Write(ino, []byte("x"), 0)
			if c.write && err != nil {
				t.Errorf("write refused: %v", err)
			}
			if !c.write {
				wantErrno(t, "write", err, syscall.EACCES)
			}
		})
	}
}

// Reserved names cannot be made in the overlay. No entry named .art, of
// any type: push and pull skip the name, and a .art link pulled into a
// workspace without its own .art once made art read the agent's
// binds.json. No file named like a pull's temporaries: push would skip it
// and every later pull would find it in its way (a directory may be).
func TestReservedNamesRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dirsToo  bool
		lookSafe []string // names that only look alike
	}{
		{".art", true, []string{".art2", "art"}},
		{".ART", true, nil}, // .art on a case-insensitive host
		{".aRt", true, nil},
		// exFAT drops trailing dots, Windows shares dots and spaces.
		{".art.", true, []string{".art.x", "art.", ". art"}},
		{".Art .", true, nil},
		{".art-pull-tmp-1-ab", false, []string{".art-pull-tmp", ".art-pull-tmp-x-ab", ".art-pull-tmp-1-"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, _ := polFS(t, "")
			ws, err := fs.Lookup(overlay.RootIno, "ws")
			if err != nil {
				t.Fatal(err)
			}
			f, err := fs.Create(ws.Ino, "file", 0o644, nil)
			if err != nil {
				t.Fatal(err)
			}
			tries := map[string]func() error{
				"symlink": func() error { _, err := fs.Symlink(ws.Ino, tc.name, "evil", nil); return err },
				"create":  func() error { _, err := fs.Create(ws.Ino, tc.name, 0o644, nil); return err },
				"fifo":    func() error { _, err := fs.Mkfifo(ws.Ino, tc.name, 0o644, nil); return err },
				"link":    func() error { _, err := fs.Link(f.Ino, ws.Ino, tc.name); return err },
				"rename":  func() error { return fs.Rename(ws.Ino, "file", ws.Ino, tc.name, 0) },
			}
			if tc.dirsToo {
				tries["mkdir"] = func() error { _, err := fs.Mkdir(ws.Ino, tc.name, 0o755, nil); return err }
			}
			for op, try := range tries {
				if err := try(); overlay.Errno(err) != syscall.EACCES {
					t.Errorf("%s %s: %v, want EACCES", op, tc.name, err)
				}
			}
			for _, ok := range tc.lookSafe {
				if _, err := fs.Create(ws.Ino, ok, 0o644, nil); err != nil {
					t.Errorf("create %s: %v", ok, err)
				}
			}
		})
	}
}
