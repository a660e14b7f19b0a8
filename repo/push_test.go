package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/artproject/art/objects"
)

// fillWorkspace creates every kind of entry push and pull must keep.
func fillWorkspace(t *testing.T, dir string) {
	t.Helper()
	rnd := rand.New(rand.NewSource(1))
	big := make([]byte, 5<<20)
	rnd.Read(big)
	files := map[string][]byte{
		"empty":                 nil,
		"one":                   {'x'},
		"exactly-64k":           bytes.Repeat([]byte("0123456789abcdef"), 4096),
		"random-5m":             big,
		"with space.txt":        []byte("spaces\n"),
		"new\nline":             []byte("newline in the name\n"),
		"bad-\xff\xfe-utf8":     []byte("invalid utf-8 name\n"),
		"sub/deeper/file.go":    []byte("package deeper\n"),
		"sub/run.sh":            []byte("#!/bin/sh\necho hi\n"),
		"sub/readonly":          []byte("ro\n"),
		".hidden/config":        []byte("k=v\n"),
		"private/secret":        []byte("s\n"),
		"setuid-tool":           []byte("suid\n"),
		"text-with-no-newline":  []byte("last line"),
		"unicode-ñame-✓.md":     []byte("# hi\n"),
		"sub/deeper/zz-last.md": []byte("z\n"),
	}
	for p, data := range files {
		abs := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(abs, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	chmod := map[string]os.FileMode{
		"sub/run.sh": 0o755, "sub/readonly": 0o444, "private": 0o700, "private/secret": 0o600,
		"setuid-tool": 0o4755 | os.ModeSetuid,
	}
	for p, m := range chmod {
		if err := os.Chmod(filepath.Join(dir, p), m); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"empty-dir", "sub/empty-too", "sticky"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(dir, "sticky"), 0o777|os.ModeSticky)
	links := map[string]string{
		"abs-link":      "/etc/hostname",
		"rel-link":      "sub/run.sh",
		"dangling":      "does/not/exist",
		"sub/up-link":   "../one",
		"dir-link":      "sub",
		"outside-link":  "../../../../etc",
		"link to space": "with space.txt",
	}
	for p, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o640); err != nil {
		t.Fatal(err)
	}
	// Distinct, old, sub-second mtimes, to check they come back exactly.
	i := 0
	for _, p := range append(sortedKeys(files), "fifo") {
		ts := time.Unix(1_600_000_000+int64(i)*1000, int64(123456789+i))
		os.Chtimes(filepath.Join(dir, filepath.FromSlash(p)), ts, ts)
		i++
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestPushPullRoundTrip(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	fillWorkspace(t, ws)
	var lines []string
	res, err := r.Push(context.Background(), PushOptions{Dir: ws, Report: func(l string) { lines = append(lines, l) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 16 || res.Links != 7 || res.Hashed != 16 || res.Branch != "main" || !res.Parent.IsZero() {
		t.Errorf("push result %+v", res)
	}
	out := strings.Join(lines, "\n")
	for _, want := range []string{
		"FILE /ws/one (1 bytes, " + objects.Hash([]byte("x")).Short() + ")",
		"FILE /ws/empty (0 bytes, " + objects.Hash(nil).Short() + ")",
		"DIR /ws/empty-dir",
		"LINK /ws/abs-link -> /etc/hostname",
		"FIFO /ws/fifo",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("push output lacks %q:\n%s", want, out)
		}
	}
	// Pull into an empty directory with the same base name elsewhere.
	dst := filepath.Join(t.TempDir(), "ws")
	pres := pull(t, r, dst, res.Commit)
	if pres.Created == 0 || pres.Deleted != 0 || len(pres.Conflicts) != 0 {
		t.Errorf("pull result %+v", pres)
	}
	compareDirs(t, ws, dst, true, true)
	// Pulling again changes nothing and reports nothing.
	pres = pull(t, r, dst, res.Commit)
	if pres.Created+pres.Updated+pres.Deleted != 0 {
		t.Errorf("second pull did something: %+v", pres)
	}
	// Content read back through the object store is the original.
	r2 := reopen(t, r)
	if errs := fsckProblems(t, r2); errs != "" {
		t.Fatal(errs)
	}
}

func fsckProblems(t *testing.T, r *Repo) string {
	t.Helper()
	res, err := r.Fsck(nil)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, p := range res.Problems {
		s = append(s, p.String())
	}
	return strings.Join(s, "\n")
}

func TestPushIncremental(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n", "b": "b\n", "d/c": "c\n", "d/e": "e\n"})
	first := push(t, r, ws, "first")
	if first.Hashed != 4 {
		t.Fatalf("first push read %d files, want 4", first.Hashed)
	}
	steps := []struct {
		name       string
		change     func()
		wantHashed int
		wantNew    bool // a new tree, hence new objects
	}{
		{"nothing changed", func() {}, 0, false},
		{"one file edited", func() { writeFiles(t, ws, map[string]string{"d/c": "c2\n"}) }, 1, true},
		{"touched only", func() {
			ts := time.Now().Add(time.Hour)
			os.Chtimes(filepath.Join(ws, "a"), ts, ts)
		}, 1, true}, // the mtime is part of the tree
		// Only the inode's change time tells (a tool that restores
		// mtimes, rsync -t): the stat cache must not vouch for it.
		{"same-size edit with its mtime put back", func() {
			p := filepath.Join(ws, "d/c")
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			writeFiles(t, ws, map[string]string{"d/c": "C2\n"})
			if err := os.Chtimes(p, st.ModTime(), st.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, 1, true},
		{"chmod", func() { os.Chmod(filepath.Join(ws, "b"), 0o600) }, 1, true},
		{"new file", func() { writeFiles(t, ws, map[string]string{"new": "n\n"}) }, 1, true},
		{"file deleted", func() { os.Remove(filepath.Join(ws, "d/e")) }, 0, true},
	}
	prev := first.Commit
	for _, s := range steps {
		s.change()
		res := push(t, r, ws, s.name)
		if res.Hashed != s.wantHashed {
			t.Errorf("%s: push read %d files, want %d", s.name, res.Hashed, s.wantHashed)
		}
		if res.Parent != prev {
			t.Errorf("%s: parent %s, want %s", s.name, res.Parent.Short(), prev.Short())
		}
		prev = res.Commit
	}
	got := wsEntries(t, r, prev, "ws")
	if _, ok := got["d/e"]; ok || got["new"] == "" || !strings.HasPrefix(got["b"], "file 600") {
		t.Fatalf("final tree %v", got)
	}
}

func TestPushExclusions(t *testing.T) {
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{
		".artignore":       "*.log\nbuild/\n!keep.log\n/rootonly\n",
		"a.go":             "package a\n",
		"debug.log":        "noise\n",
		"keep.log":         "kept\n",
		"sub/x.log":        "noise\n",
		"build/out":        "binary\n",
		"sub/build/out":    "binary\n",
		"rootonly":         "ignored\n",
		"sub/rootonly":     "kept\n",
		".art/art.db":      "not even a database\n",
		".art/config/x":    "cfg\n",
		"sub/.art/thing":   "nested .art\n",
		"sub/.Art/thing":   "a .art in another case: skipped, with a warning\n",
		"data/.keep":       "",
		"not-.art/file":    "kept\n",
		"sub/.artfile":     "kept: only directories named .art are excluded\n",
		"data/my.db.notes": "kept\n",
	})
	// The repository lives inside the workspace under another name; a
	// hard link to it must not be stored either.
	dbPath := filepath.Join(ws, "data", "my.db")
	r, err := Init(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.Link(dbPath, filepath.Join(ws, "data", "hardlink-to-db")); err != nil {
		t.Fatal(err)
	}
	// A socket is skipped with a warning.
	ln, err := net.Listen("unix", filepath.Join(ws, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var warnings []string
	for i := 0; i < 2; i++ { // twice: the -wal/-shm exist once the db was written
		warnings = nil
		res, err := r.Push(context.Background(), PushOptions{Dir: ws, Warn: func(s string) { warnings = append(warnings, s) }})
		if err != nil {
			t.Fatal(err)
		}
		for _, suf := range []string{"-wal", "-shm"} {
			if _, err := os.Stat(dbPath + suf); err != nil {
				t.Fatalf("expected %s to exist during the test: %v", suf, err)
			}
		}
		got := wsEntries(t, r, res.Commit, "ws")
		var names []string
		for p := range got {
			names = append(names, p)
		}
		sort.Strings(names)
		want := []string{".artignore", "a.go", "data", "data/.keep", "data/my.db.notes", "keep.log", "not-.art", "not-.art/file",
			"sub", "sub/.artfile", "sub/rootonly"}
		if strings.Join(names, "|") != strings.Join(want, "|") {
			t.Fatalf("push %d stored\n%q\nwant\n%q", i, names, want)
		}
	}
	// Directory by directory: the workspace's socket, then sub's .Art;
	// the exact .art (the repository's) and sub/.art say nothing.
	if len(warnings) != 2 || !strings.Contains(warnings[0], filepath.Join(ws, "sock")) || !strings.Contains(warnings[0], "socket") ||
		!strings.Contains(warnings[1], filepath.Join(ws, "sub", ".Art")) || !strings.Contains(warnings[1], "rename it") {
		t.Fatalf("warnings %q", warnings)
	}
}

func TestPushKeepsRestOfHome(t *testing.T) {
	r := newTestRepo(t)
	a := newWorkspace(t, "alpha")
	b := newWorkspace(t, "beta")
	writeFiles(t, a, map[string]string{"f": "a\n"})
	writeFiles(t, b, map[string]string{"g": "b\n"})
	first := push(t, r, a, "")
	res := push(t, r, b, "")
	c, _ := r.LoadCommit(res.Commit)
	tr, _ := r.LoadTree(c.Tree)
	if len(tr.Entries) != 2 || tr.Entries[0].Name != "alpha" || tr.Entries[1].Name != "beta" {
		t.Fatalf("home holds %+v", tr.Entries)
	}
	if c.Message != "push beta" || c.Session == nil || c.Session.Mode != "push" || c.Session.Workspace != "beta" {
		t.Fatalf("commit %+v", c)
	}
	// -b: a new branch starts where the workspace's content grew from,
	// the commit it last synced with (alpha's push, before beta's); main
	// does not move.
	writeFiles(t, a, map[string]string{"f": "changed\n"})
	br, err := r.Push(context.Background(), PushOptions{Dir: a, Branch: "attempt"})
	if err != nil {
		t.Fatal(err)
	}
	if br.Parent != first.Commit || br.Branch != "attempt" {
		t.Fatalf("branch push %+v, want it on alpha's push %s", br, first.Commit.Short())
	}
	if tip, _ := r.BranchTip("main"); tip != res.Commit {
		t.Fatal("main moved")
	}
	_, err = r.Push(context.Background(), PushOptions{Dir: a, Branch: "bad name"})
	mustFail(t, err, ErrBadBranchName)
}

func TestPushBadWorkspace(t *testing.T) {
	r := newTestRepo(t)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, dir := range []string{"", file, filepath.Join(t.TempDir(), "missing"), "/"} {
		if _, err := r.Push(context.Background(), PushOptions{Dir: dir}); err == nil {
			t.Errorf("push of %q succeeded", dir)
		}
	}
	if ids := commitIDs(t, r); len(ids) != 0 {
		t.Fatal("a failed push left a commit")
	}
}

// TestMain lets a test re-run this binary as a push helper, e.g. with
// fewer privileges.
func TestMain(m *testing.M) {
	if os.Getenv("ART_REPO_TEST_HELPER") == "push" {
		r, err := Open(os.Getenv("ART_REPO_TEST_DB"))
		if err == nil {
			_, err = r.Push(context.Background(), PushOptions{Dir: os.Getenv("ART_REPO_TEST_DIR")})
			r.Close()
		}
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// An unreadable file aborts the push and nothing is committed. Root reads
// everything, so the push runs with every capability dropped (setpriv),
// which makes a mode-000 file unreadable even for uid 0.
func TestPushUnreadableFileAborts(t *testing.T) {
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"ok": "fine\n", "secret": "no\n"})
	r := newTestRepo(t)
	push(t, r, ws, "first")
	before := commitIDs(t, r)
	writeFiles(t, ws, map[string]string{"ok": "changed\n"})
	secret := filepath.Join(ws, "secret")
	os.WriteFile(secret, []byte("changed too\n"), 0o644)
	if err := os.Chmod(secret, 0); err != nil {
		t.Fatal(err)
	}
	if f, err := os.Open(secret); err == nil {
		f.Close()
		// Running as root: drop capabilities for the push.
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("SKIP: running as root and setpriv is not installed, so no file is unreadable")
		}
		self, _ := os.Executable()
		cmd := exec.Command(setpriv, "--bounding-set=-all", "--inh-caps=-all", self, "-test.run=^$")
		cmd.Env = append(os.Environ(), "ART_REPO_TEST_HELPER=push", "ART_REPO_TEST_DB="+r.Path, "ART_REPO_TEST_DIR="+ws)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("helper push: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), secret) || !strings.Contains(string(out), "permission denied") || !strings.Contains(string(out), "nothing was committed") {
			t.Errorf("error does not name the file and the outcome:\n%s", out)
		}
	} else {
		_, err := r.Push(context.Background(), PushOptions{Dir: ws})
		if err == nil || !strings.Contains(err.Error(), secret) {
			t.Fatalf("push = %v", err)
		}
	}
	r = reopen(t, r)
	if after := commitIDs(t, r); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatal("a failed push changed the commits")
	}
	// Nothing of the aborted push was left behind.
	changed := objects.Hash([]byte("changed\n"))
	var has int
	r.DB.QueryRow(`SELECT count(*) FROM chunks WHERE id=?`, changed[:]).Scan(&has)
	if has != 0 {
		t.Fatal("the aborted push left a chunk behind")
	}
}

func countRows(t testing.TB, r *Repo, table string) int {
	t.Helper()
	var n int
	if err := r.DB.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The advice after a failed read names the next step for the cause (a
// file deleted during a push used to get "fix its permissions").
func TestReadAdvice(t *testing.T) {
	dir := t.TempDir()
	_, enoent := os.Open(filepath.Join(dir, "gone"))
	tests := []struct {
		err  error
		want string
	}{
		{enoent, "removed or replaced while art read the workspace; run the command again"},
		{fmt.Errorf("open x: %w", errChanged), "removed or replaced while art read the workspace"},
		{&os.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, "fix its permissions or add it to .artignore"},
		{&os.PathError{Op: "read", Path: "x", Err: syscall.EIO}, "check the path, or add it to .artignore"},
	}
	for _, tc := range tests {
		if got := readAdvice(tc.err); !strings.Contains(got, tc.want) {
			t.Errorf("readAdvice(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// .artignore follows git's rules (sabhiram/go-gitignore, used before,
// dropped out/keep below and matched b/c at any depth).
func TestArtignoreSemantics(t *testing.T) {
	tests := []struct {
		patterns string
		path     string
		dir      bool
		want     bool
	}{
		{"out/*\n!out/keep", "out", true, false},
		{"out/*\n!out/keep", "out/keep", false, false},
		{"out/*\n!out/keep", "out/x", false, true},
		{"b/c", "b/c", false, true},
		{"b/c", "x/b/c", false, false},
		{"/build/", "build", true, true},
		{"/build/", "src/build", true, false},
		{"build/", "src/build", true, true},
		{"build/", "build", false, false},
		{"*.o\n!keep.o", "a/keep.o", false, false},
		{"*.o\n!keep.o", "a/x.o", false, true},
		{"**/tmp", "a/b/tmp", false, true},
		{"a/**/z", "a/b/c/z", false, true},
		{"tr\\ ", "tr ", false, true},
		{"crlf.txt\r\n", "crlf.txt", false, true},
		{"# comment\n\n   \nx", "x", false, true},
		{"\\#hash", "#hash", false, true},
	}
	for _, tc := range tests {
		sc := &scanner{ignore: compileIgnore(tc.patterns)}
		if got := sc.excluded(tc.path, tc.dir); got != tc.want {
			t.Errorf("patterns %q: excluded(%q, dir=%v) = %v, want %v", tc.patterns, tc.path, tc.dir, got, tc.want)
		}
	}
}

// A file the scan saw is read never through a link, never from a fifo
// (which would block), and, where the caller says so, only as the inode
// the scan saw: an agent swapping a link to /etc/shadow in had push store
// it.
func TestHostRootOpen(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(secret, []byte("root:x\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "file"), []byte("ok\n"), 0o644)
	os.Symlink(secret, filepath.Join(dir, "link"))
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644)
	var st syscall.Stat_t
	syscall.Stat(filepath.Join(dir, "file"), &st)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "shadow"), []byte("public\n"), 0o644)
	os.Symlink(filepath.Dir(secret), filepath.Join(dir, "swapped")) // a directory swapped for a link
	root, err := openHostRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.close()
	for name, want := range map[string]error{"link": errChanged, "fifo": errChanged, "swapped/shadow": errChanged} {
		if _, err := root.open(name, 0); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	if f, err := root.open("file", st.Ino); err != nil {
		t.Errorf("the scanned file: %v", err)
	} else {
		f.Close()
	}
	if f, err := root.open("sub/shadow", 0); err != nil {
		t.Errorf("a file in a real subdirectory: %v", err)
	} else {
		f.Close()
	}
	if _, err := root.open("file", st.Ino+1); !errors.Is(err, errChanged) {
		t.Errorf("another inode: %v", err)
	}
}

// The host does not show a commit's xattrs (pull does not write them), so
// a push keeps those of entries the host has as the parent commit had
// them: a pull and a push with nothing changed recorded an agent's xattrs
// as removed. An entry the host changed has the host's (none).
func TestPushKeepsXattrsTheHostCannotShow(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n", "d/b": "b\n"})
	v1 := push(t, r, ws, "v1").Commit
	// The agent's session: the same tree with xattrs on a, d and d/b.
	c1, _ := r.LoadCommit(v1)
	wsE, _, _ := r.Lookup(c1.Tree, []string{"ws"})
	wsT, _ := r.LoadTree(wsE.ID)
	dE, _, _ := r.Lookup(c1.Tree, []string{"ws", "d"})
	dT, _ := r.LoadTree(dE.ID)
	x := func(n string) []objects.Xattr { return []objects.Xattr{{Name: "user." + n, Value: []byte(n)}} }
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	newD := *dT
	newD.Entries = append([]objects.Entry(nil), dT.Entries...)
	newD.Entries[0].Xattrs = x("b")
	dID, _ := tx.PutTree(&newD)
	newWS := *wsT
	newWS.Entries = append([]objects.Entry(nil), wsT.Entries...)
	for i := range newWS.Entries {
		switch newWS.Entries[i].Name {
		case "a":
			newWS.Entries[i].Xattrs = x("a")
		case "d":
			newWS.Entries[i].ID, newWS.Entries[i].Xattrs = dID, x("d")
		}
	}
	wsID, _ := tx.PutTree(&newWS)
	root, _ := tx.ReplaceAt(c1.Tree, []string{"ws"}, &objects.Entry{Type: objects.TypeDir, Mode: wsE.Mode, ID: wsID})
	agent, err := tx.PutCommit(&objects.Commit{Tree: root, Parents: []objects.ID{v1}, Time: c1.Time + 1, Message: "agent", Session: &objects.Session{Mode: "run"}})
	if err != nil {
		t.Fatal(err)
	}
	tx.SetBranch("main", agent)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	pull(t, r, ws, agent)
	v2 := push(t, r, ws, "nothing changed").Commit
	c2, _ := r.LoadCommit(v2)
	ca, _ := r.LoadCommit(agent)
	if changes, err := r.DiffTrees(ca.Tree, c2.Tree, nil); err != nil || len(changes) != 0 {
		t.Errorf("a push with nothing changed changed %s (%v)", changeList(changes), err)
	}
	writeFiles(t, ws, map[string]string{"a": "edited\n"})
	v3 := push(t, r, ws, "a edited").Commit
	c3, _ := r.LoadCommit(v3)
	changes, err := r.DiffTrees(c2.Tree, c3.Tree, nil)
	if err != nil || changeList(changes) != "M ws/a" {
		t.Fatalf("changes %q, %v", changeList(changes), err)
	}
	if len(changes[0].New.Xattrs) != 0 {
		t.Errorf("an edited file kept the xattrs of its old content: %v", changes[0].New.Xattrs)
	}
	if b, _, _ := r.Lookup(c3.Tree, []string{"ws", "d", "b"}); len(b.Xattrs) != 1 {
		t.Errorf("d/b lost its xattrs: %+v", b)
	}
}

// A host file dated after 2262 (ext4 keeps times to 2446) is stored with
// the last time a tree holds, not wrapped round to 1815.
func TestPushFarFutureTime(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"future": "x"})
	ts := unix.Timespec{Sec: 13569465600} // 2400-01-01
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(ws, "future"), []unix.Timespec{ts, ts}, 0); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(ws, "future"), &st); err != nil || st.Mtim.Sec != ts.Sec {
		t.Skipf("skipping: this filesystem does not keep a time in 2400 (%v)", err)
	}
	c := push(t, r, ws, "").Commit
	cm, _ := r.LoadCommit(c)
	e, _, err := r.Lookup(cm.Tree, []string{"ws", "future"})
	if err != nil || e.MTime != math.MaxInt64 {
		t.Fatalf("stored mtime %d, %v; want %d", e.MTime, err, int64(math.MaxInt64))
	}
	// Unchanged since: the next push stores no tree, only its commit.
	if res := push(t, r, ws, ""); res.NewObjects > 1 {
		t.Fatalf("a second push stored %d objects", res.NewObjects)
	}
}

// The first push of a directory that never synced, named like a
// workspace the branch holds with other content (a copy of the
// workspace, or another directory of its name), recorded the directory as
// it was: every session since the original last synced vanished from the
// branch, with no word. It is refused, changing nothing, and so is its
// push to a new branch, which started on HEAD's commit and so claimed its
// history (a later push onto main took every session file the directory
// lacked for a deletion). A directory holding what the branch holds
// (times aside), another name, and a directory that synced go through;
// a workspace that moved takes its record along
// (TestMovedWorkspaceKeepsItsRecord).
func TestFirstPushOverAWorkspaceOfItsName(t *testing.T) {
	copied := func(t *testing.T, old string) string {
		dir := newWorkspace(t, "ws")
		writeFiles(t, dir, map[string]string{"a": "host edit\n"})
		return dir
	}
	cases := []struct {
		name    string
		prepare func(t *testing.T, r *Repo, old string) (dir string, opts PushOptions)
		refused bool
	}{
		{"moved, the repository elsewhere", func(t *testing.T, r *Repo, old string) (string, PushOptions) {
			// Only a workspace that moved with its repository takes its
			// record along: a directory of the name that vanished says
			// less when the repository is shared (-d).
			dir := filepath.Join(t.TempDir(), "ws")
			if err := os.Rename(old, dir); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, dir, map[string]string{"a": "host edit\n"})
			return dir, PushOptions{Dir: dir}
		}, true},
		{"copied", func(t *testing.T, r *Repo, old string) (string, PushOptions) {
			dir := copied(t, old)
			return dir, PushOptions{Dir: dir}
		}, true},
		{"copied, to a new branch", func(t *testing.T, r *Repo, old string) (string, PushOptions) {
			dir := copied(t, old)
			return dir, PushOptions{Dir: dir, Branch: "elsewhere"}
		}, true},
		{"copied, unchanged", func(t *testing.T, r *Repo, old string) (string, PushOptions) {
			dir := newWorkspace(t, "ws")
			writeFiles(t, dir, map[string]string{"a": "a1\n", "agent": "agent\n"})
			return dir, PushOptions{Dir: dir}
		}, false},
		{"another name", func(t *testing.T, r *Repo, old string) (string, PushOptions) {
			dir := newWorkspace(t, "other")
			writeFiles(t, dir, map[string]string{"x": "x\n"})
			return dir, PushOptions{Dir: dir}
		}, false},
		{"pulled first", func(t *testing.T, r *Repo, old string) (string, PushOptions) {
			dir := filepath.Join(t.TempDir(), "ws")
			tip, _ := r.BranchTip("main")
			if _, err := r.Pull(PullOptions{Dir: dir, Commit: tip, Branch: "main"}); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, dir, map[string]string{"a": "host edit\n"})
			return dir, PushOptions{Dir: dir}
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRepo(t)
			old := newWorkspace(t, "ws")
			writeFiles(t, old, map[string]string{"a": "a1\n"})
			push(t, r, old, "v1")
			session := agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"agent": "agent\n"}) })
			dir, opts := c.prepare(t, r, old)
			before := commitIDs(t, r)
			res, err := r.Push(context.Background(), opts)
			if c.refused {
				if !errors.Is(err, ErrPushConflict) || !strings.Contains(err.Error(), "never pushed or pulled") {
					t.Fatalf("push of %s: want a refusal, got %v", dir, err)
				}
				if tip, _ := r.BranchTip("main"); tip != session || len(commitIDs(t, r)) != len(before) {
					t.Fatal("a refused push changed the repository")
				}
				return
			}
			if err != nil {
				t.Fatalf("push of %s: %v", dir, err)
			}
			if opts.Branch != "" {
				// Then onto main: the session's file stays.
				opts.Branch = ""
				if res, err = r.Push(context.Background(), opts); err != nil {
					t.Fatalf("push of %s onto main after: %v", dir, err)
				}
			}
			if filepath.Base(dir) == "ws" {
				got := contentOf(t, r, res.Commit, "ws")
				if got["agent"] != "agent\n" {
					t.Errorf("the session's file is gone from the branch: %v", got)
				}
				if want, _ := os.ReadFile(filepath.Join(dir, "a")); got["a"] != string(want) {
					t.Errorf("a is %q on the branch, %q on the host", got["a"], want)
				}
			}
		})
	}
}

// movedRepo makes a workspace "ws" holding its repository, pushes a1,
// records a session that adds "agent", then moves the workspace and
// returns the repository opened at its new place, and both paths.
func movedRepo(t *testing.T, between func(r *Repo)) (r *Repo, old, dir string) {
	t.Helper()
	base := t.TempDir()
	old = filepath.Join(base, "a", "ws")
	r, err := Init(filepath.Join(old, DirName, FileName))
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, old, map[string]string{"a": "a1\n"})
	push(t, r, old, "v1")
	agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"agent": "agent\n"}) })
	if between != nil {
		between(r)
	}
	r.Close()
	dir = filepath.Join(base, "b", "ws")
	os.MkdirAll(filepath.Dir(dir), 0o755)
	if err := os.Rename(old, dir); err != nil {
		t.Fatal(err)
	}
	if r, err = Open(filepath.Join(dir, DirName, FileName)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	writeFiles(t, dir, map[string]string{"a": "host edit\n"})
	return r, old, dir
}

// A workspace that moved with its repository takes its record along: it
// is known at its new path, and its push merges (the session's file
// stays, the host's edit is recorded), also onto a new branch and then
// main. Before, it looked never synced, and its push replaced the
// branch's copy. With two records of its name gone, which one moved is
// not known: the push is refused as a copy's.
func TestMovedWorkspaceKeepsItsRecord(t *testing.T) {
	for _, tc := range []struct {
		name    string
		branch  string
		another bool
	}{
		{"moved", "", false},
		{"moved, to a new branch", "elsewhere", false},
		{"moved, with another gone", "", true},
		{"moved, then pulled", "pull", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, dir := movedRepo(t, func(r *Repo) {
				if tc.another {
					other := filepath.Join(t.TempDir(), "ws")
					pull(t, r, other, mustTip(t, r, "main"))
					os.RemoveAll(other)
				}
			})
			if got := r.KnownWorkspace(dir); got == tc.another {
				t.Errorf("KnownWorkspace = %v", got)
			}
			if tc.branch == "pull" {
				// The pull takes the record along too: a file the host
				// did not change since the sync takes the session's
				// change (unknown, it was a conflict).
				os.WriteFile(filepath.Join(dir, "a"), []byte("a1\n"), 0o644)
				tip := agentSession(t, r, func(d string) { writeFiles(t, d, map[string]string{"a": "session\n"}) })
				if _, err := r.Pull(PullOptions{Dir: dir, Commit: tip, Branch: "main"}); err != nil {
					t.Fatalf("pull into the moved workspace: %v", err)
				}
				for f, want := range map[string]string{"a": "session\n", "agent": "agent\n"} {
					if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(b) != want {
						t.Errorf("%s after the pull: %q %v", f, b, err)
					}
				}
				return
			}
			res, err := r.Push(context.Background(), PushOptions{Dir: dir, Branch: tc.branch})
			if tc.another {
				if !errors.Is(err, ErrPushConflict) {
					t.Fatalf("push: %v, want a refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.branch != "" {
				if res, err = r.Push(context.Background(), PushOptions{Dir: dir}); err != nil {
					t.Fatalf("push onto main after: %v", err)
				}
			}
			if got := contentOf(t, r, res.Commit, "ws"); got["agent"] != "agent\n" || got["a"] != "host edit\n" {
				t.Errorf("main after the push: %v", got)
			}
		})
	}
}

// Moving a moved workspace's record that fails leaves the record where it
// was and says so; once the cause is gone the next push moves it.
func TestAdoptMovedFails(t *testing.T) {
	r, old, dir := movedRepo(t, nil)
	if _, err := r.DB.Exec(`CREATE TRIGGER stop BEFORE UPDATE ON workspaces BEGIN SELECT RAISE(ABORT, 'injected'); END`); err != nil {
		t.Fatal(err)
	}
	_, err := r.Push(context.Background(), PushOptions{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "injected") || !strings.Contains(err.Error(), "the repository is unchanged") {
		t.Fatalf("push with the move failing: %v", err)
	}
	var n int
	if err := r.DB.QueryRow(`SELECT count(*) FROM workspaces WHERE path=?`, old).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the record under the old path: %d (%v), want it kept", n, err)
	}
	if _, err := r.DB.Exec(`DROP TRIGGER stop`); err != nil {
		t.Fatal(err)
	}
	res := push(t, r, dir, "v2")
	if got := contentOf(t, r, res.Commit, "ws"); got["a"] != "host edit\n" || got["agent"] != "agent\n" {
		t.Errorf("after the move: %v", got)
	}
	if err := r.DB.QueryRow(`SELECT count(*) FROM workspaces WHERE path=?`, dir).Scan(&n); err != nil || n != 1 {
		t.Errorf("the record under the new path: %d (%v)", n, err)
	}
}

// A push of a workspace whose only change is times (touch, a tool that
// rewrote a file with the same bytes, a directory's mtime) records no
// commit, as art status and art diff see no change; with a real change
// the new times go in with it.
func TestPushTimesOnlyRecordsNothing(t *testing.T) {
	ts := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name   string
		change func(t *testing.T, ws string)
	}{
		{"a file touched", func(t *testing.T, ws string) { os.Chtimes(filepath.Join(ws, "d/e/f.txt"), ts, ts) }},
		{"a directory touched", func(t *testing.T, ws string) { os.Chtimes(filepath.Join(ws, "d/e"), ts, ts) }},
		{"rewritten with the same bytes", func(t *testing.T, ws string) {
			writeFiles(t, ws, map[string]string{"a.txt": "a"})
			os.Chtimes(filepath.Join(ws, "a.txt"), ts, ts)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a.txt": "a", "d/e/f.txt": "f"})
			first := push(t, r, ws, "first")
			tc.change(t, ws)
			res := push(t, r, ws, "times")
			if !res.Unchanged || res.Commit != first.Commit {
				t.Fatalf("a push of times alone recorded %s (unchanged %v)", res.Commit.Short(), res.Unchanged)
			}
			// The stat cache took the new times: the next push reads nothing.
			if again := push(t, r, ws, "again"); !again.Unchanged || again.Hashed != 0 {
				t.Errorf("the next push: unchanged %v, %d files read", again.Unchanged, again.Hashed)
			}
			writeFiles(t, ws, map[string]string{"b.txt": "b"})
			res = push(t, r, ws, "with a change")
			if res.Unchanged || res.Commit == first.Commit {
				t.Fatal("a push with a new file recorded nothing")
			}
			pushMatchesFull(t, tc.name, r, ws, res)
		})
	}
}
