package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/artproject/art/objects"
)

// Regression: an empty file used to abort the push ("NOT NULL constraint
// failed: chunks.data"), since the empty chunk was bound as NULL.
func TestPushPullEmptyFile(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"empty": "", "sub/also-empty": ""})
	res := push(t, r, ws, "")
	got := wsEntries(t, r, res.Commit, "ws")
	if got["empty"] != "file 644 0 " {
		t.Fatalf("tree %v", got)
	}
	tx, _ := r.Begin()
	if _, _, err := tx.PutFile(strings.NewReader("")); err != nil {
		t.Fatalf("PutFile of nothing (the empty chunk): %v", err)
	}
	tx.Rollback()
	dst := filepath.Join(t.TempDir(), "ws")
	pull(t, r, dst, res.Commit)
	compareDirs(t, ws, dst, true, true)
}

func TestPullConflicts(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a1\n", "b": "b1\n", "d/c": "c1\n"})
	v1 := push(t, r, ws, "v1").Commit
	writeFiles(t, ws, map[string]string{"a": "a2\n", "b": "b2\n", "d/c": "c2\n"})
	v2 := push(t, r, ws, "v2").Commit

	// The host edits a and deletes d/c; pulling v1 would overwrite them.
	writeFiles(t, ws, map[string]string{"a": "host edit\n"})
	os.Remove(filepath.Join(ws, "d/c"))
	before := snapshot(t, ws)
	res, err := r.Pull(PullOptions{Dir: ws, Commit: v1})
	mustFail(t, err, ErrConflict)
	if !strings.Contains(err.Error(), "a (changed on the host)") || !strings.Contains(err.Error(), "d/c (deleted on the host)") || !strings.Contains(err.Error(), "--force") {
		t.Errorf("conflict message: %v", err)
	}
	if res == nil || len(res.Conflicts) != 2 {
		t.Fatalf("conflicts %+v", res)
	}
	if d := diffMaps(before, snapshot(t, ws)); d != "" {
		t.Fatalf("a refused pull changed the host:\n%s", d)
	}
	// A file the host added where the commit has one is a conflict too.
	writeFiles(t, ws, map[string]string{"d/c": "host's own\n"})
	_, err = r.Pull(PullOptions{Dir: ws, Commit: v1})
	mustFail(t, err, ErrConflict)
	if !strings.Contains(err.Error(), "d/c") {
		t.Errorf("conflict message lacks d/c: %v", err)
	}
	// --force overrides.
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: v1, Force: true}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"a": "a1\n", "b": "b1\n", "d/c": "c1\n"} {
		if b, _ := os.ReadFile(filepath.Join(ws, p)); string(b) != want {
			t.Errorf("%s = %q after forced pull, want %q", p, b, want)
		}
	}
	// Now in sync with v1: pulling v2 needs no force.
	pull(t, r, ws, v2)
	if b, _ := os.ReadFile(filepath.Join(ws, "a")); string(b) != "a2\n" {
		t.Fatalf("a = %q", b)
	}
	// A file deleted on the host that the commit also deletes is fine; a
	// file edited on the host that the commit deletes is a conflict.
	os.Remove(filepath.Join(ws, "b"))
	writeFiles(t, ws, map[string]string{"x": "x\n", "y": "y\n"})
	v3 := push(t, r, ws, "v3").Commit
	writeFiles(t, ws, map[string]string{"x": "edited\n"})
	_, err = r.Pull(PullOptions{Dir: ws, Commit: v2})
	mustFail(t, err, ErrConflict)
	if !strings.Contains(err.Error(), "x (changed on the host, deleted in the commit)") {
		t.Errorf("message: %v", err)
	}
	_ = v3
}

func TestPullLeavesHostOnlyFilesAndDeletesHeldOnes(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"keep": "k\n", "gone": "g\n", "dir/gone2": "g\n", "dir/keep2": "k\n", "olddir/f": "f\n"})
	v1 := push(t, r, ws, "v1").Commit
	os.Remove(filepath.Join(ws, "gone"))
	os.Remove(filepath.Join(ws, "dir/gone2"))
	os.RemoveAll(filepath.Join(ws, "olddir"))
	v2 := push(t, r, ws, "v2").Commit

	pres := pull(t, r, ws, v1) // brings them back
	if pres.Created != 4 {     // gone, dir/gone2, olddir, olddir/f
		t.Errorf("pull v1 %+v", pres)
	}
	// Host-only content, never held by the repository.
	writeFiles(t, ws, map[string]string{"untracked": "mine\n", "olddir/mine": "mine too\n", "newdir/x": "x\n"})
	pres = pull(t, r, ws, v2)
	if pres.Deleted != 3 { // gone, dir/gone2, olddir/f (olddir keeps mine)
		t.Errorf("pull v2 %+v", pres)
	}
	for _, p := range []string{"gone", "dir/gone2", "olddir/f"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not deleted", p)
		}
	}
	for _, p := range []string{"keep", "dir/keep2", "untracked", "olddir/mine", "newdir/x"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}

func TestPullTypeChanges(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"x": "file\n", "d/f": "in dir\n"})
	os.Symlink("x", filepath.Join(ws, "l"))
	v1 := push(t, r, ws, "v1").Commit
	// x becomes a dir, d a file, l a regular file.
	os.Remove(filepath.Join(ws, "x"))
	os.RemoveAll(filepath.Join(ws, "d"))
	os.Remove(filepath.Join(ws, "l"))
	writeFiles(t, ws, map[string]string{"x/inner": "inner\n", "d": "now a file\n", "l": "now a file\n"})
	v2 := push(t, r, ws, "v2").Commit
	want2 := snapshot(t, ws)
	pull(t, r, ws, v1)
	if b, _ := os.ReadFile(filepath.Join(ws, "d/f")); string(b) != "in dir\n" {
		t.Fatal("d/f not restored")
	}
	if tgt, _ := os.Readlink(filepath.Join(ws, "l")); tgt != "x" {
		t.Fatal("l not restored as a link")
	}
	pull(t, r, ws, v2)
	if d := diffMaps(want2, snapshot(t, ws)); d != "" {
		t.Fatalf("after pulling v2 again:\n%s", d)
	}
}

func TestPullTargetSymlinkRefused(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n"})
	id := push(t, r, ws, "").Commit
	base := t.TempDir()
	real := filepath.Join(base, "real")
	os.MkdirAll(filepath.Join(real, "ws"), 0o755)
	os.Symlink(real, filepath.Join(base, "link"))
	os.Symlink(filepath.Join(real, "ws"), filepath.Join(base, "ws"))
	before := snapshot(t, base)
	for _, target := range []string{
		filepath.Join(base, "ws"),                // the target is a link
		filepath.Join(base, "link", "ws"),        // it lies inside one
		filepath.Join(base, "link", "new", "ws"), // below a link, not yet existing
	} {
		_, err := r.Pull(PullOptions{Dir: target, Commit: id})
		if err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("pull into %s: %v", target, err)
		}
	}
	if d := diffMaps(before, snapshot(t, base)); d != "" {
		t.Fatalf("refused pulls changed the host:\n%s", d)
	}
	// A target whose base name is not a workspace of the commit.
	_, err := r.Pull(PullOptions{Dir: filepath.Join(base, "other"), Commit: id})
	if err == nil || !strings.Contains(err.Error(), "it holds: ws") {
		t.Fatalf("wrong workspace: %v", err)
	}
}

// craftTree stores tree bytes that bypass Encode's checks: it encodes a
// valid tree whose names are placeholders of the same length, then
// rewrites those names in the bytes.
func craftTree(t *testing.T, r *Repo, tr *objects.Tree, rename map[string]string) objects.ID {
	t.Helper()
	b, err := tr.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for from, to := range rename {
		if len(from) != len(to) || bytes.Count(b, []byte(from)) != 1 {
			t.Fatalf("bad placeholder %q", from)
		}
		b = bytes.Replace(b, []byte(from), []byte(to), 1)
	}
	id := objects.Hash(b)
	if _, err := r.DB.Exec(`INSERT INTO trees(id, size, enc, data) VALUES(?, ?, 0, ?)`, id[:], len(b), b); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestPullRefusesHostileTrees(t *testing.T) {
	r := newTestRepo(t)
	// A harmless file the hostile trees point at.
	ws := newWorkspace(t, "seed")
	writeFiles(t, ws, map[string]string{"evil": "pwned\n"})
	seed := push(t, r, ws, "")
	seedTree := wsTreeID(t, r, seed.Commit, "seed")
	evil := mustTree(t, r, seedTree).Entries[0]

	tests := []struct {
		name   string
		tree   *objects.Tree
		rename map[string]string
	}{
		{"dotdot dir", &objects.Tree{Entries: []objects.Entry{{Name: "QQ", Type: objects.TypeDir, Mode: 0o755, ID: seedTree}}}, map[string]string{"QQ": ".."}},
		{"dot dir", &objects.Tree{Entries: []objects.Entry{{Name: "Q", Type: objects.TypeDir, Mode: 0o755, ID: seedTree}}}, map[string]string{"\x01Q": "\x01."}},
		{"slash file", &objects.Tree{Entries: []objects.Entry{{Name: "QQQQQQQQ", Type: objects.TypeFile, Mode: 0o644, ID: evil.ID, Size: evil.Size}}}, map[string]string{"QQQQQQQQ": "../evil1"}},
		{"escaping path", &objects.Tree{Entries: []objects.Entry{{Name: "QQQQQQQQQQQQQQ", Type: objects.TypeFile, Mode: 0o644, ID: evil.ID, Size: evil.Size}}}, map[string]string{"QQQQQQQQQQQQQQ": "../../../evil1"}},
		{"absolute path", &objects.Tree{Entries: []objects.Entry{{Name: "QQQQQQQQQ", Type: objects.TypeFile, Mode: 0o644, ID: evil.ID, Size: evil.Size}}}, map[string]string{"QQQQQQQQQ": "/tmp/evil"}},
		{"a/b", &objects.Tree{Entries: []objects.Entry{{Name: "aQb", Type: objects.TypeFile, Mode: 0o644, ID: evil.ID, Size: evil.Size}}}, map[string]string{"aQb": "a/b"}},
		{"NUL", &objects.Tree{Entries: []objects.Entry{{Name: "aQ", Type: objects.TypeFile, Mode: 0o644, ID: evil.ID, Size: evil.Size}}}, map[string]string{"aQ": "a\x00"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.tree.Encode(); err != nil {
				t.Fatal(err)
			}
			bad := craftTree(t, r, tc.tree, tc.rename)
			if _, err := r.LoadTree(bad); !errors.Is(err, objects.ErrNotCanonical) && !errors.Is(err, objects.ErrCorrupt) {
				t.Fatalf("LoadTree of a hostile tree: %v", err)
			}
			// Put it at /ws/sub in a commit.
			tx, err := r.Begin()
			if err != nil {
				t.Fatal(err)
			}
			root, err := tx.EmptyTree()
			if err == nil {
				root, err = tx.ReplaceAt(root, []string{"ws", "sub"}, &objects.Entry{Type: objects.TypeDir, Mode: 0o755, ID: bad})
			}
			if err != nil {
				t.Fatal(err)
			}
			cid, err := tx.PutCommit(&objects.Commit{Tree: root, Message: tc.name})
			if err != nil {
				t.Fatal(err)
			}
			tx.Commit()
			base := t.TempDir()
			target := filepath.Join(base, "deep", "er", "ws")
			os.MkdirAll(target, 0o755)
			before := snapshot(t, base)
			_, err = r.Pull(PullOptions{Dir: target, Commit: cid, Force: true})
			if err == nil {
				t.Fatal("pull of a hostile tree succeeded")
			}
			if !errors.Is(err, objects.ErrNotCanonical) && !errors.Is(err, objects.ErrCorrupt) {
				t.Fatalf("pull failed for another reason: %v", err)
			}
			if d := diffMaps(before, snapshot(t, base)); d != "" {
				t.Fatalf("the refused pull wrote:\n%s", d)
			}
			if _, err := os.Lstat("/tmp/evil"); err == nil {
				t.Fatal("/tmp/evil was written")
			}
			if res, err := r.Fsck(nil); err != nil || len(res.Problems) == 0 {
				t.Fatalf("fsck does not report the hostile tree: %v", err)
			}
		})
	}
}

func wsTreeID(t *testing.T, r *Repo, commit objects.ID, name string) objects.ID {
	t.Helper()
	c, err := r.LoadCommit(commit)
	if err != nil {
		t.Fatal(err)
	}
	e, ok, err := r.Lookup(c.Tree, []string{name})
	if err != nil || !ok {
		t.Fatal("no workspace", err)
	}
	return e.ID
}

func mustTree(t *testing.T, r *Repo, id objects.ID) *objects.Tree {
	t.Helper()
	tr, err := r.LoadTree(id)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// A host symlink where the tree has a directory is never written through.
func TestPullDoesNotWriteThroughHostSymlinks(t *testing.T) {
	r := newTestRepo(t)
	outside := t.TempDir()
	ws := newWorkspace(t, "ws")
	// Commit A: sub is a symlink to the outside directory.
	os.Symlink(outside, filepath.Join(ws, "sub"))
	a := push(t, r, ws, "link").Commit
	// Commit B: sub is a directory with files.
	os.Remove(filepath.Join(ws, "sub"))
	writeFiles(t, ws, map[string]string{"sub/file": "payload\n", "sub/deeper/f": "payload\n"})
	b := push(t, r, ws, "dir").Commit

	for _, tc := range []struct {
		name  string
		setup func(dst string)
		force bool
	}{
		// The host holds the link the repository synced: no conflict.
		{"synced link", func(dst string) { pull(t, r, dst, a) }, false},
		// The host made the link itself: a conflict, overridden by force.
		{"host-made link", func(dst string) {
			os.MkdirAll(dst, 0o755)
			os.Symlink(outside, filepath.Join(dst, "sub"))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "ws")
			tc.setup(dst)
			if st, err := os.Lstat(filepath.Join(dst, "sub")); err != nil || st.Mode()&os.ModeSymlink == 0 {
				t.Fatal("setup did not make sub a link")
			}
			before := snapshot(t, outside)
			if tc.force {
				_, err := r.Pull(PullOptions{Dir: dst, Commit: b})
				mustFail(t, err, ErrConflict)
			}
			if _, err := r.Pull(PullOptions{Dir: dst, Commit: b, Force: tc.force}); err != nil {
				t.Fatal(err)
			}
			if d := diffMaps(before, snapshot(t, outside)); d != "" {
				t.Fatalf("pull wrote through the link:\n%s", d)
			}
			st, err := os.Lstat(filepath.Join(dst, "sub"))
			if err != nil || !st.IsDir() {
				t.Fatalf("sub is not a real directory now: %v", err)
			}
			if b, _ := os.ReadFile(filepath.Join(dst, "sub/deeper/f")); string(b) != "payload\n" {
				t.Fatal("content missing")
			}
		})
	}
}

func TestHostDrift(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	d, err := r.HostDrift(ws)
	if err != nil || d.Synced {
		t.Fatalf("unsynced drift %+v %v", d, err)
	}
	writeFiles(t, ws, map[string]string{"a": "a\n", "b": "b\n", "c": "c\n"})
	res := push(t, r, ws, "")
	d, err = r.HostDrift(ws)
	if err != nil || !d.Synced || !d.Clean() || d.Commit != res.Commit {
		t.Fatalf("drift after push %+v %v", d, err)
	}
	// Rewriting the same content is not drift; edits, additions and
	// deletions are.
	writeFiles(t, ws, map[string]string{"a": "a\n", "b": "B\n", "new": "n\n"})
	os.Remove(filepath.Join(ws, "c"))
	os.Chmod(filepath.Join(ws, "a"), 0o644)
	d, err = r.HostDrift(ws)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(d.Added, ",") != "new" || strings.Join(d.Modified, ",") != "b" || strings.Join(d.Deleted, ",") != "c" {
		t.Fatalf("drift %+v", d)
	}
}

// A deletion at a path .artignore now leaves out is none that push
// records (it keeps what the branch holds there): status listed it as
// deleted and said to record it with art push, which then kept it.
func TestHostDriftLeavesOutIgnoredDeletions(t *testing.T) {
	cases := []struct {
		name   string
		ignore string
		remove []string
		want   string // Deleted, comma-separated
	}{
		{"file pattern", "/c\n", []string{"c"}, ""},
		{"directory pattern", "build/\n", []string{"build"}, ""},
		{"glob below a directory", "*.log\n", []string{"build/x.log"}, ""},
		{"not left out", "*.log\n", []string{"c"}, "c"},
		{"directory pattern, a file of that name", "c/\n", []string{"c"}, "c"},
		{"one left out, one not", "/c\n", []string{"c", "build"}, "build,build/out,build/x.log"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "a\n", "c": "c\n", "build/out": "o\n", "build/x.log": "l\n"})
			push(t, r, ws, "")
			for _, p := range c.remove {
				if err := os.RemoveAll(filepath.Join(ws, p)); err != nil {
					t.Fatal(err)
				}
			}
			writeFiles(t, ws, map[string]string{".artignore": c.ignore})
			d, err := r.HostDrift(ws)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(d.Deleted, ","); got != c.want {
				t.Errorf("deleted %q, want %q", got, c.want)
			}
			// What push then records agrees.
			res := push(t, r, ws, "")
			got := wsEntries(t, r, res.Commit, "ws")
			for _, p := range c.remove {
				if _, kept := got[p]; kept == strings.Contains(","+c.want+",", ","+p+",") {
					t.Errorf("status and push disagree on %s: status deleted %q, commit %v", p, c.want, got)
				}
			}
		})
	}
}

func TestPushFailsOnFullDisk(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("SKIP: mounting a small tmpfs needs root")
	}
	mnt := t.TempDir()
	if err := mountTmpfs(mnt, "size=2m"); err != nil {
		t.Skipf("SKIP: cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unmount(mnt) })
	r, err := Init(filepath.Join(mnt, "art.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"small": "s\n"})
	first := push(t, r, ws, "fits")
	big := make([]byte, 6<<20)
	rand.New(rand.NewSource(1)).Read(big)
	os.WriteFile(filepath.Join(ws, "big"), big, 0o644)
	_, err = r.Push(context.Background(), PushOptions{Dir: ws})
	if err == nil {
		t.Fatal("push onto a full disk succeeded")
	}
	if !strings.Contains(err.Error(), "full") {
		t.Errorf("the error does not say the disk is full: %v", err)
	}
	r.Close()
	os.Remove(filepath.Join(ws, "big"))
	r2, err := Open(r.Path)
	if err != nil {
		t.Fatalf("repository unusable after a failed push: %v", err)
	}
	defer r2.Close()
	if tip, _ := r2.BranchTip("main"); tip != first.Commit {
		t.Fatal("the branch moved")
	}
	if ids := commitIDs(t, r2); len(ids) != 1 {
		t.Fatalf("%d commits", len(ids))
	}
	if p := fsckProblems(t, r2); p != "" {
		t.Fatal(p)
	}
}

func mountTmpfs(dir, opts string) error { return syscall.Mount("tmpfs", dir, "tmpfs", 0, opts) }
func unmount(dir string)                { syscall.Unmount(dir, syscall.MNT_DETACH) }

// Regression: pull wrote every file through the fixed temporary name
// ".art-pull-tmp", unlinking whatever had that name first: a stored file
// so named was destroyed by the next write in its directory (and the pull
// then failed), and a host file so named was deleted.
func TestPullTemporaryNamesNeverClobber(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{".art-pull-tmp": "stored\n", "a": "a\n", "b": "b\n", "d/.art-pull-tmp": "deep\n", "d/z": "z\n"})
	os.Symlink("a", filepath.Join(ws, "link"))
	id := push(t, r, ws, "").Commit
	dst := filepath.Join(t.TempDir(), "ws")
	pull(t, r, dst, id)
	compareDirs(t, ws, dst, true, true)

	host := filepath.Join(t.TempDir(), "ws")
	writeFiles(t, host, map[string]string{".art-pull-tmp": "the host's own\n"})
	os.Remove(filepath.Join(ws, ".art-pull-tmp"))
	id2 := push(t, r, ws, "").Commit
	pull(t, r, host, id2)
	if b, _ := os.ReadFile(filepath.Join(host, ".art-pull-tmp")); string(b) != "the host's own\n" {
		t.Fatalf("host file = %q", b)
	}
	ents, _ := os.ReadDir(host)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".art-pull-tmp-") {
			t.Errorf("temporary %s left behind", e.Name())
		}
	}
}

// A pull checks the host has room for what it writes: hard links and
// repeated content are stored once in the repository and written out in
// full (an agent's 100 links to a 20 MB file made a pull write 1.9 GB).
func TestPullRefusesWhatTheHostHasNoRoomFor(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("SKIP: mounting a small tmpfs needs root")
	}
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	big := make([]byte, 1<<20)
	rand.New(rand.NewSource(2)).Read(big)
	if err := os.WriteFile(filepath.Join(ws, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		if err := os.Link(filepath.Join(ws, "big"), filepath.Join(ws, fmt.Sprintf("link%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	c := push(t, r, ws, "41 names, one content").Commit
	mnt := t.TempDir()
	if err := mountTmpfs(mnt, "size=16m"); err != nil {
		t.Skipf("SKIP: cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unmount(mnt) })
	dir := filepath.Join(mnt, "ws")
	_, err := r.Pull(PullOptions{Dir: dir, Commit: c})
	mustFail(t, err, ErrConflict)
	if !strings.Contains(err.Error(), "41 MiB more") || !strings.Contains(err.Error(), "--force") {
		t.Errorf("the message does not say what is needed and what to do: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a refused pull wrote %d entries", len(ents))
	}
	// What fits goes through.
	for i := 0; i < 30; i++ {
		os.Remove(filepath.Join(ws, fmt.Sprintf("link%02d", i)))
	}
	c = push(t, r, ws, "11 names").Commit
	if _, err := r.Pull(PullOptions{Dir: dir, Commit: c}); err != nil {
		t.Fatalf("a pull that fits: %v", err)
	}
}

// A commit that shuts the user out of a directory, or opens one to
// others' writes, is held back for review: art diff does not show
// directory modes (an agent's chmod 0 src left the user's src unreadable).
func TestPullHoldsBackDirectoryModes(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"src/main.c": "int main;\n", "docs/a": "a\n", "own/x": "x\n", "fine/y": "y\n"})
	os.Chmod(filepath.Join(ws, "own"), 0o700) // the user's own choice
	base := push(t, r, ws, "base").Commit
	os.Chmod(filepath.Join(ws, "src"), 0)
	os.Chmod(filepath.Join(ws, "docs"), 0o775)
	os.Chmod(filepath.Join(ws, "fine"), 0o750)
	writeFiles(t, ws, map[string]string{"new/z": "z\n", "ro/w": "w\n"})
	os.Chmod(filepath.Join(ws, "new"), 0o300)
	os.Chmod(filepath.Join(ws, "ro"), 0o555) // read-only, as Go's module cache
	agent := sessionCommit(t, r, push(t, r, ws, "as the agent left it").Commit, base)
	os.Chmod(filepath.Join(ws, "src"), 0o755)
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: base, Force: true}); err != nil {
		t.Fatal(err)
	}
	_, err := r.Pull(PullOptions{Dir: ws, Commit: agent})
	mustFail(t, err, ErrConflict)
	for _, want := range []string{"src (a directory mode 0000 that shuts its owner out", "docs (a directory mode 0775 that lets others write where 0755", "new (a directory mode 0300 that shuts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the conflicts lack %q:\n%v", want, err)
		}
	}
	for _, no := range []string{"own", "fine", "ro"} {
		if strings.Contains(err.Error(), "\n  "+no+" ") {
			t.Errorf("%s conflicts: %v", no, err)
		}
	}
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: agent, Force: true}); err != nil {
		t.Fatalf("forced: %v", err)
	}
	os.Chmod(filepath.Join(ws, "src"), 0o755)
	os.Chmod(filepath.Join(ws, "new"), 0o755)
	os.Chmod(filepath.Join(ws, "ro"), 0o755)
}

// Pull lists each path of the commit that .artignore leaves out and the
// host does not have (SKIP), also inside a directory the pull makes: there
// it said nothing, the directory arrived looking empty, and a user who
// deleted it dropped the agent's file from the branch at the next push.
func TestPullSaysWhatItLeavesOut(t *testing.T) {
	cases := []struct {
		name  string
		host  map[string]string // host files besides a and .artignore, after the push
		agent map[string]string // the session's files
		want  []string          // SKIP lines, in order
	}{
		{"in a new directory", nil, map[string]string{"new/x.log": "l\n", "new/k": "k\n"},
			[]string{"SKIP /ws/new/x.log"}},
		{"nested new directories", nil, map[string]string{"n/m/x.log": "l\n", "n/y.log": "l\n"},
			[]string{"SKIP /ws/n/m/x.log", "SKIP /ws/n/y.log"}},
		{"in a directory the host has", map[string]string{"d/k": "k\n"}, map[string]string{"d/x.log": "l\n"},
			[]string{"SKIP /ws/d/x.log"}},
		{"the host has its own", map[string]string{"d/x.log": "mine\n"}, map[string]string{"d/x.log": "agent\n"},
			nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "a\n"})
			if c.host != nil {
				writeFiles(t, ws, c.host)
			}
			push(t, r, ws, "v1")
			session := agentSession(t, r, func(dir string) { writeFiles(t, dir, c.agent) })
			writeFiles(t, ws, map[string]string{".artignore": "*.log\n"})
			var skips []string
			res, err := r.Pull(PullOptions{Dir: ws, Commit: session, Branch: "main", Force: true, Report: func(l string) {
				if strings.HasPrefix(l, "SKIP") {
					skips = append(skips, strings.SplitN(l, " (", 2)[0])
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(skips, "\n") != strings.Join(c.want, "\n") || res.Ignored != len(c.want) {
				t.Errorf("SKIP lines %q (%d counted), want %q", skips, res.Ignored, c.want)
			}
		})
	}
}

// Each conflicting path is listed once, saying which sides changed it:
// an .artignore changed on the host and in the commit was listed twice
// (two paths counted), with advice for each that did not resolve the
// other; a file the host made where the commit has another was said to
// be changed on the host.
func TestPullConflictLines(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n", ".artignore": "*.log\n"})
	push(t, r, ws, "v1")
	tip := agentSession(t, r, func(dir string) {
		writeFiles(t, dir, map[string]string{".artignore": "*.tmp\n", "n": "agent\n"})
	})
	writeFiles(t, ws, map[string]string{".artignore": "*.o\n", "n": "host\n"})
	before := snapshot(t, ws)
	res, err := r.Pull(PullOptions{Dir: ws, Commit: tip, Branch: "main"})
	mustFail(t, err, ErrConflict)
	for _, want := range []string{
		".artignore (changed on the host and in the commit; it decides what push leaves out",
		"n (made on the host, where the commit has another)",
		"2 path(s)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("conflict message lacks %q:\n%v", want, err)
		}
	}
	if res == nil || len(res.Conflicts) != 2 {
		t.Errorf("conflicts %+v, want 2", res)
	}
	if d := diffMaps(before, snapshot(t, ws)); d != "" {
		t.Fatalf("a refused pull changed the host:\n%s", d)
	}
}

// TestPullForceRestoresDeletedDirectories: a directory the host deleted is
// one conflict, and --force writes what the commit holds there, its whole
// subtree. The forced pull wrote the directory empty and recorded the
// workspace as synced, so art status said it matched and the next push
// recorded every file below as deleted.
func TestPullForceRestoresDeletedDirectories(t *testing.T) {
	files := map[string]string{"top": "t\n", "d/a": "a\n", "d/sub/b": "b\n", "d/sub/deep/c": "c\n", "e/f": "f\n"}
	for _, tc := range []struct {
		name     string
		remove   []string
		conflict string
	}{
		{"directory", []string{"d"}, "d (deleted on the host)"},
		{"subdirectory", []string{"d/sub"}, "d/sub (deleted on the host)"},
		{"directory and file", []string{"d/sub/deep", "e/f"}, "d/sub/deep (deleted on the host)"},
		{"file", []string{"d/a"}, "d/a (deleted on the host)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, files)
			v1 := push(t, r, ws, "v1").Commit
			want := snapshot(t, ws)
			for _, p := range tc.remove {
				if err := os.RemoveAll(filepath.Join(ws, p)); err != nil {
					t.Fatal(err)
				}
			}
			res, err := r.Pull(PullOptions{Dir: ws, Commit: v1})
			mustFail(t, err, ErrConflict)
			if !strings.Contains(err.Error(), tc.conflict) {
				t.Fatalf("conflict message lacks %q: %v", tc.conflict, err)
			}
			// One conflict per path removed, none per entry below.
			if res == nil || len(res.Conflicts) != len(tc.remove) {
				t.Fatalf("conflicts %+v, want %d", res, len(tc.remove))
			}
			if _, err := r.Pull(PullOptions{Dir: ws, Commit: v1, Force: true}); err != nil {
				t.Fatal(err)
			}
			if d := diffMaps(want, snapshot(t, ws)); d != "" {
				t.Fatalf("host after the forced pull differs from the commit:\n%s", d)
			}
			// The next push records nothing deleted.
			v2 := push(t, r, ws, "v2").Commit
			if d := diffMaps(wsEntries(t, r, v1, "ws"), wsEntries(t, r, v2, "ws")); d != "" {
				t.Fatalf("the push after the forced pull changed the branch:\n%s", d)
			}
		})
	}
}

// A session's change at a path .artignore leaves out, which the host has
// too, is listed (SKIP): the pull said "0 updated" and nothing else.
// Unchanged since the last push, it is not.
func TestPullSaysIgnoredChangesItKeeps(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n", "build/out": "v1\n", "cache/x": "x\n"})
	push(t, r, ws, "v1")
	writeFiles(t, ws, map[string]string{".artignore": "build/\ncache/\n"})
	push(t, r, ws, "v2")
	// The session (art run) changes build/out, which push never reads.
	tip := sessionCommit(t, r, withFile(t, r, mustTip(t, r, "main"), []string{"ws", "build", "out"}, "session\n"), mustTip(t, r, "main"))
	setBranch(t, r, "main", tip)
	var skips []string
	res, err := r.Pull(PullOptions{Dir: ws, Commit: tip, Branch: "main", Report: func(l string) {
		if strings.HasPrefix(l, "SKIP") {
			skips = append(skips, l)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(skips) != 1 || !strings.Contains(skips[0], "/ws/build") || !strings.Contains(skips[0], "changed it since the last push") || res.Ignored != 1 {
		t.Errorf("SKIP lines %q (%d counted), want one for build", skips, res.Ignored)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "build/out")); string(b) != "v1\n" {
		t.Errorf("the host's build/out: %q", b)
	}
}

// withFile returns a commit (parent: of) whose tree is of's with the file
// at path (workspace first) holding content.
func withFile(t *testing.T, r *Repo, of objects.ID, path []string, content string) objects.ID {
	t.Helper()
	c, err := r.LoadCommit(of)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	fid, size, err := tx.PutFile(strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	var put func(tree objects.ID, path []string) objects.ID
	put = func(tree objects.ID, path []string) objects.ID {
		tr, err := tx.LoadTree(tree)
		if err != nil {
			t.Fatal(err)
		}
		out := &objects.Tree{Entries: append([]objects.Entry(nil), tr.Entries...)}
		e, ok := out.Find(path[0])
		if !ok {
			t.Fatalf("no %s in the tree", path[0])
		}
		if len(path) == 1 {
			e.ID, e.Size = fid, uint64(size)
		} else {
			e.ID = put(e.ID, path[1:])
		}
		id, err := tx.PutTree(out)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	root := put(c.Tree, path)
	id, err := tx.PutCommit(&objects.Commit{Tree: root, Parents: []objects.ID{of}, Time: c.Time + 1, Author: "t", Message: "with file"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return id
}

// A symbolic link the host retargeted since the last sync is the host's
// change, as a file's edit is: a pull of a commit that changes or deletes
// the link conflicts and leaves the host's link alone.
func TestPullSymlinkChangedOnTheHostConflicts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		commit func(t *testing.T, link string) // what the pulled commit does to the link
		why    string
	}{
		{"retargeted in the commit", func(t *testing.T, link string) {
			os.Remove(link)
			if err := os.Symlink("t2", link); err != nil {
				t.Fatal(err)
			}
		}, "l (changed on the host)"},
		{"deleted in the commit", func(t *testing.T, link string) {
			os.Remove(link)
		}, "l (changed on the host, deleted in the commit)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			link := filepath.Join(ws, "l")
			writeFiles(t, ws, map[string]string{"a": "a\n"})
			if err := os.Symlink("t1", link); err != nil {
				t.Fatal(err)
			}
			synced := push(t, r, ws, "synced").Commit
			tc.commit(t, link)
			pulled := push(t, r, ws, "pulled").Commit
			pull(t, r, ws, synced) // the host has l -> t1, as synced
			os.Remove(link)
			if err := os.Symlink("host", link); err != nil {
				t.Fatal(err)
			}
			_, err := r.Pull(PullOptions{Dir: ws, Commit: pulled})
			mustFail(t, err, ErrConflict)
			if !strings.Contains(err.Error(), tc.why) {
				t.Errorf("conflict message: %v", err)
			}
			if got, err := os.Readlink(link); err != nil || got != "host" {
				t.Errorf("the host's link is now %q (%v)", got, err)
			}
		})
	}
}

// An empty directory made on the host, which the repository never held,
// is the host's own as a file is: a pull leaves it, wherever it is.
func TestPullLeavesHostOnlyEmptyDirectories(t *testing.T) {
	for _, dir := range []string{"mine", "held/mine", "mine/deeper"} {
		t.Run(dir, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "a1\n", "held/b": "b\n"})
			v1 := push(t, r, ws, "v1").Commit
			writeFiles(t, ws, map[string]string{"a": "a2\n"})
			push(t, r, ws, "v2")
			if err := os.MkdirAll(filepath.Join(ws, dir), 0o755); err != nil {
				t.Fatal(err)
			}
			res := pull(t, r, ws, v1)
			if st, err := os.Lstat(filepath.Join(ws, dir)); err != nil || !st.IsDir() {
				t.Fatalf("the host's empty directory %s after the pull: %v", dir, err)
			}
			if res.Deleted != 0 {
				t.Errorf("pull %+v, want nothing deleted", res)
			}
		})
	}
}
