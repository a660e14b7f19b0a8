package repo

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/sergi/go-diff/diffmatchpatch"
	"golang.org/x/sys/unix"

	"github.com/artproject/art/objects"
)

func rootOf(t *testing.T, r *Repo, commit objects.ID) objects.ID {
	t.Helper()
	c, err := r.LoadCommit(commit)
	if err != nil {
		t.Fatal(err)
	}
	return c.Tree
}

func changeList(cs []Change) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Status()+" "+c.Path)
	}
	return strings.Join(out, "\n")
}

func TestDiffTrees(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{
		"a/b/c/deep.txt":   "deep\n",
		"a/b/c/same.txt":   "same\n",
		"untouched/x/y/z":  "z\n",
		"file-becomes-dir": "f\n",
		"mode.sh":          "#!/bin/sh\n",
		"removed":          "r\n",
		"removed-dir/f":    "f\n",
	})
	writeFiles(t, ws, map[string]string{"dir-becomes-file/inner": "i\n"})
	os.Symlink("target-1", filepath.Join(ws, "link"))
	os.Symlink("x", filepath.Join(ws, "link-becomes-file"))
	v1 := push(t, r, ws, "v1").Commit

	writeFiles(t, ws, map[string]string{"a/b/c/deep.txt": "deeper\n", "added/new": "n\n"})
	os.Remove(filepath.Join(ws, "file-becomes-dir"))
	writeFiles(t, ws, map[string]string{"file-becomes-dir/kid": "k\n"})
	os.RemoveAll(filepath.Join(ws, "dir-becomes-file"))
	writeFiles(t, ws, map[string]string{"dir-becomes-file": "now a file\n"})
	os.Chmod(filepath.Join(ws, "mode.sh"), 0o755)
	os.Remove(filepath.Join(ws, "removed"))
	os.RemoveAll(filepath.Join(ws, "removed-dir"))
	os.Remove(filepath.Join(ws, "link"))
	os.Symlink("target-2", filepath.Join(ws, "link"))
	os.Remove(filepath.Join(ws, "link-becomes-file"))
	writeFiles(t, ws, map[string]string{"link-becomes-file": "x"})
	v2 := push(t, r, ws, "v2").Commit

	// Remove the unchanged subtrees from the database: a diff that tried
	// to read them would fail, so success shows they were skipped by id.
	ra, rb := rootOf(t, r, v1), rootOf(t, r, v2)
	wsA := wsTreeID(t, r, v1, "ws")
	for _, name := range []string{"untouched"} {
		e, _ := mustTree(t, r, wsA).Find(name)
		deleteSubtrees(t, r, e.ID)
	}
	r = reopen(t, r)

	got, err := r.DiffTrees(ra, rb, nil)
	if err != nil {
		t.Fatalf("DiffTrees read an unchanged subtree: %v", err)
	}
	want := strings.Join([]string{
		"M ws/a/b/c/deep.txt",
		"A ws/added/new",
		"D ws/dir-becomes-file/inner",
		"A ws/dir-becomes-file",
		"D ws/file-becomes-dir",
		"A ws/file-becomes-dir/kid",
		"M ws/link",
		"T ws/link-becomes-file",
		"M ws/mode.sh",
		"D ws/removed",
		"D ws/removed-dir/f",
	}, "\n")
	if changeList(got) != want {
		t.Fatalf("changes:\n%s\nwant:\n%s", changeList(got), want)
	}
	// The reverse diff mirrors it.
	back, err := r.DiffTrees(rb, ra, nil)
	if err != nil || len(back) != len(got) {
		t.Fatalf("reverse diff: %d changes, %v", len(back), err)
	}
	// Equal trees: nothing, without reading anything.
	if cs, err := r.DiffTrees(ra, ra, nil); err != nil || len(cs) != 0 {
		t.Fatalf("self diff %v %v", cs, err)
	}
	// Path filters.
	for _, tc := range []struct {
		paths []string
		want  string
	}{
		{[]string{"ws/a"}, "M ws/a/b/c/deep.txt"},
		{[]string{"/ws/a/b/c/deep.txt/"}, "M ws/a/b/c/deep.txt"},
		{[]string{"ws/removed"}, "D ws/removed"},
		{[]string{"ws/removed-dir", "ws/added"}, "A ws/added/new\nD ws/removed-dir/f"},
		{[]string{"ws/untouched"}, ""},
		{[]string{"nothing/here"}, ""},
		{[]string{"ws/a/b/c/deep"}, ""}, // a prefix of a name is not a path
	} {
		cs, err := r.DiffTrees(ra, rb, tc.paths)
		if err != nil || changeList(cs) != tc.want {
			t.Errorf("paths %q: %q, %v; want %q", tc.paths, changeList(cs), err, tc.want)
		}
	}
	// From nothing: everything is added.
	all, err := r.DiffTrees(objects.Zero, rb, []string{"ws/a"})
	if err != nil || changeList(all) != "A ws/a/b/c/deep.txt\nA ws/a/b/c/same.txt" {
		t.Fatalf("from empty: %q %v", changeList(all), err)
	}
	a, m, d, err := r.ChangeCounts(mustCommit(t, r, v2))
	if err != nil || a != 3 || m != 4 || d != 4 {
		t.Fatalf("ChangeCounts = %d %d %d %v", a, m, d, err)
	}
}

func mustCommit(t *testing.T, r *Repo, id objects.ID) *objects.Commit {
	t.Helper()
	c, err := r.LoadCommit(id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func deleteSubtrees(t *testing.T, r *Repo, id objects.ID) {
	t.Helper()
	tr := mustTree(t, r, id)
	for _, e := range tr.Entries {
		if e.Type == objects.TypeDir {
			deleteSubtrees(t, r, e.ID)
		}
	}
	if _, err := r.DB.Exec(`DELETE FROM trees WHERE id=?`, id[:]); err != nil {
		t.Fatal(err)
	}
}

func TestUnifiedDiffGolden(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	lines := func(from, to int) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			b.WriteString("line " + string(rune('a'+i-1)) + "\n")
		}
		return b.String()
	}
	writeFiles(t, ws, map[string]string{
		"edit.txt":    "one\ntwo\nthree\n",
		"eof.txt":     "no newline",
		"far.txt":     lines(1, 20),
		"gone.txt":    "bye\n",
		"bin":         "\x00\x01binary",
		"mode.sh":     "echo\n",
		"empty-later": "x\n",
	})
	os.Symlink("old-target", filepath.Join(ws, "link"))
	v1 := push(t, r, ws, "v1").Commit
	far := strings.Replace(strings.Replace(lines(1, 20), "line b\n", "line B\n", 1), "line s\n", "line S\n", 1)
	writeFiles(t, ws, map[string]string{
		"edit.txt":    "one\n2\nthree\nfour",
		"eof.txt":     "no newline\n",
		"far.txt":     far,
		"new.txt":     "hello\nworld\n",
		"bin":         "\x00\x02binary",
		"empty-later": "",
	})
	os.Remove(filepath.Join(ws, "gone.txt"))
	os.Chmod(filepath.Join(ws, "mode.sh"), 0o755)
	os.Remove(filepath.Join(ws, "link"))
	os.Symlink("new-target", filepath.Join(ws, "link"))
	v2 := push(t, r, ws, "v2").Commit

	changes, err := r.DiffTrees(rootOf(t, r, v1), rootOf(t, r, v2), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	stats := map[string]DiffStat{}
	for _, c := range changes {
		p, err := r.MakePatch(c)
		if err != nil {
			t.Fatal(err)
		}
		got[strings.TrimPrefix(c.Path, "ws/")] = strings.Join(p.Header, "\n") + "\n" + strings.Join(p.Hunks, "")
		stats[strings.TrimPrefix(c.Path, "ws/")] = p.Stat
	}
	want := map[string]string{
		"edit.txt": `diff --art a/ws/edit.txt b/ws/edit.txt
--- a/ws/edit.txt
+++ b/ws/edit.txt
@@ -1,3 +1,4 @@
 one
-two
+2
 three
+four
\ No newline at end of file
`,
		"eof.txt": `diff --art a/ws/eof.txt b/ws/eof.txt
--- a/ws/eof.txt
+++ b/ws/eof.txt
@@ -1 +1 @@
-no newline
\ No newline at end of file
+no newline
`,
		"far.txt": `diff --art a/ws/far.txt b/ws/far.txt
--- a/ws/far.txt
+++ b/ws/far.txt
@@ -1,5 +1,5 @@
 line a
-line b
+line B
 line c
 line d
 line e
@@ -16,5 +16,5 @@
 line p
 line q
 line r
-line s
+line S
 line t
`,
		"new.txt": `diff --art a/ws/new.txt b/ws/new.txt
new file mode 100644
--- /dev/null
+++ b/ws/new.txt
@@ -0,0 +1,2 @@
+hello
+world
`,
		"gone.txt": `diff --art a/ws/gone.txt b/ws/gone.txt
deleted file mode 100644
--- a/ws/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
`,
		"bin": `diff --art a/ws/bin b/ws/bin
Binary files a/ws/bin and b/ws/bin differ
`,
		"mode.sh": `diff --art a/ws/mode.sh b/ws/mode.sh
old mode 100644
new mode 100755
`,
		"empty-later": `diff --art a/ws/empty-later b/ws/empty-later
--- a/ws/empty-later
+++ b/ws/empty-later
@@ -1 +0,0 @@
-x
`,
		"link": `diff --art a/ws/link b/ws/link
--- a/ws/link
+++ b/ws/link
@@ -1 +1 @@
-old-target
\ No newline at end of file
+new-target
\ No newline at end of file
`,
	}
	var names []string
	for k := range want {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if got[k] != want[k] {
			t.Errorf("%s:\n--- got\n%s--- want\n%s", k, got[k], want[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d patches, want %d", len(got), len(want))
	}
	if s := stats["edit.txt"]; s.Added != 2 || s.Deleted != 1 || s.Binary {
		t.Errorf("edit.txt stat %+v", s)
	}
	if s := stats["bin"]; !s.Binary {
		t.Errorf("bin stat %+v", s)
	}
}

// lineDiff takes the lines both texts share at either end off before
// go-diff sees them. Its result must turn a into b, and change no more
// lines than go-diff on the whole texts (it may align an ambiguous edit
// differently: go-diff then slides edits through the shared lines).
func TestLineDiff(t *testing.T) {
	whole := func(a, b string) int {
		dmp := diffmatchpatch.New()
		ca, cb, lines := dmp.DiffLinesToChars(a, b)
		n := 0
		for _, d := range dmp.DiffCharsToLines(dmp.DiffMain(ca, cb, false), lines) {
			if d.Type != diffmatchpatch.DiffEqual {
				n += len(splitLines(d.Text))
			}
		}
		return n
	}
	rng := rand.New(rand.NewPCG(1, 2))
	text := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString([]string{"a\n", "b\n", "c\n", "}\n", "\n", "x"}[rng.IntN(6)])
		}
		return b.String()
	}
	for i := range 5000 {
		a := text(rng.IntN(12))
		b := a
		switch i % 3 {
		case 0:
			b = text(rng.IntN(12))
		case 1: // a small edit somewhere in a
			k := rng.IntN(len(a) + 1)
			b = a[:k] + text(rng.IntN(3)) + a[min(len(a), k+rng.IntN(4)):]
		}
		var gotA, gotB strings.Builder
		changed := 0
		for _, l := range lineDiff(a, b) {
			if l.op != '+' {
				gotA.WriteString(l.text)
			}
			if l.op != '-' {
				gotB.WriteString(l.text)
			}
			if l.op != ' ' {
				changed++
			}
		}
		if gotA.String() != a || gotB.String() != b {
			t.Fatalf("lineDiff(%q, %q) turns %q into %q", a, b, gotA.String(), gotB.String())
		}
		if w := whole(a, b); changed > w {
			t.Fatalf("lineDiff(%q, %q) changes %d lines, go-diff on the whole texts %d", a, b, changed, w)
		}
	}
}

// More distinct lines than go-diff can number (an agent's file of 1.1M
// distinct lines made art diff panic) are shown replaced whole.
func TestLineDiffPastGoDiffsLimit(t *testing.T) {
	var a, b strings.Builder
	const n = 600_000 // per side: 1.2M distinct lines in all
	for i := range n {
		fmt.Fprintf(&a, "old %d\n", i)
		fmt.Fprintf(&b, "new %d\n", i)
	}
	lines, st := unified("same\n"+a.String()+"end\n", "same\n"+b.String()+"end\n", 3)
	if st.Added != n || st.Deleted != n {
		t.Fatalf("%d added, %d deleted; want %d each", st.Added, st.Deleted, n)
	}
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "@@ -1,") {
		t.Fatalf("hunks: %q", lines[:min(len(lines), 3)])
	}
	// Many lines but few distinct ones still get go-diff's diff: one
	// changed line among 1.2M is one line added and one deleted.
	var c strings.Builder
	for i := range 2 * n {
		fmt.Fprintf(&c, "line %d\n", i%1000)
	}
	changed := strings.Replace(c.String(), "line 500\n", "line 500 changed\n", 1)
	if _, st := unified(c.String(), changed, 3); st.Added != 1 || st.Deleted != 1 {
		t.Fatalf("one line changed among %d repeating ones: %d added, %d deleted", 2*n, st.Added, st.Deleted)
	}
}

// A Differ diffs each pair of contents once: names sharing content (hard
// links an agent made by the thousand) get the same patch, under their own
// names, for the cost of one.
func TestDifferReusesContentDiffs(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	var v1, v2 strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&v1, "line %d\n", i)
		fmt.Fprintf(&v2, "line %d changed\n", i)
	}
	files := map[string]string{}
	for i := 0; i < 30; i++ {
		files[fmt.Sprintf("d%d/f", i)] = v1.String()
	}
	files["bin"] = "\x00binary"
	writeFiles(t, ws, files)
	a := push(t, r, ws, "v1").Commit
	for p := range files {
		files[p] = v2.String()
	}
	files["bin"] = "\x00binary, changed"
	writeFiles(t, ws, files)
	b := push(t, r, ws, "v2").Commit
	changes, err := r.DiffTrees(wsTreeID(t, r, a, "ws"), wsTreeID(t, r, b, "ws"), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := r.NewDiffer()
	var first *Patch
	for _, c := range changes {
		want, err := r.MakePatch(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.MakePatch(c)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the Differ's patch differs from MakePatch's:\n%+v\n%+v", c.Path, got, want)
		}
		if c.Path != "bin" {
			if first == nil {
				first = got
			} else if &got.Hunks[0] != &first.Hunks[0] {
				t.Errorf("%s: its content was diffed again", c.Path)
			}
		}
	}
}

// TestDiffShowsDirectoriesAndXattrs: what a tree stores beyond files'
// content and mode is a change too. A directory's mode (an agent's chmod
// 0777), an empty directory made or removed, and xattrs showed nowhere.
func TestDiffShowsDirectoriesAndXattrs(t *testing.T) {
	r := newTestRepo(t)
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	fid, _, err := tx.PutFile(strings.NewReader("same\n"))
	if err != nil {
		t.Fatal(err)
	}
	file := func(name string, xattrs ...objects.Xattr) objects.Entry {
		return objects.Entry{Name: name, Type: objects.TypeFile, Mode: 0o644, ID: fid, Size: 5, Xattrs: xattrs}
	}
	tree := func(entries ...objects.Entry) objects.ID {
		id, err := tx.PutTree(&objects.Tree{Entries: entries})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	dir := func(name string, mode uint32, id objects.ID, xattrs ...objects.Xattr) objects.Entry {
		return objects.Entry{Name: name, Type: objects.TypeDir, Mode: mode, ID: id, Xattrs: xattrs}
	}
	x := func(name, value string) objects.Xattr { return objects.Xattr{Name: name, Value: []byte(value)} }
	empty := tree()
	a := tree(
		dir("gone-empty", 0o755, empty),
		dir("opened", 0o755, tree(file("f"))),
		dir("tagged", 0o755, empty),
		file("was-file"),
		file("xattrs", x("user.changed", "1"), x("user.gone", "g")),
	)
	b := tree(
		dir("new-empty", 0o700, empty),
		dir("new-full", 0o755, tree(file("f"))),
		dir("opened", 0o777, tree(file("f"))),
		dir("tagged", 0o755, empty, x("user.t", "")),
		dir("was-file", 0o755, empty),
		file("xattrs", x("security.capability", "\x01\x02"), x("user.\x1b[31mred", "r"), x("user.changed", "22")),
	)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := r.DiffTrees(a, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"D gone-empty",
		"A new-empty",
		"A new-full/f", // a directory with contents shows through them
		"M opened",
		"M tagged",
		"D was-file",
		"A was-file",
		"M xattrs",
	}, "\n")
	if g := changeList(got); g != want {
		t.Errorf("changes:\n%s\nwant:\n%s", g, want)
	}
	headers := map[string][]string{}
	for _, c := range got {
		p, err := r.MakePatch(c)
		if err != nil {
			t.Fatal(err)
		}
		if metaOnly := c.Old != nil && c.New != nil || cmp.Or(c.Old, c.New).Type == objects.TypeDir; metaOnly && len(p.Hunks) != 0 {
			t.Errorf("%s: hunks %q for a change of metadata", c.Path, p.Hunks)
		}
		headers[c.Status()+" "+c.Path] = p.Header[1:]
	}
	wantHeaders := map[string][]string{
		"D gone-empty": {"deleted directory mode 040755"},
		"A new-empty":  {"new directory mode 040700"},
		"A new-full/f": {"new file mode 100644", "--- /dev/null", "+++ b/new-full/f"},
		"M opened":     {"old mode 040755", "new mode 040777"},
		"M tagged":     {"new xattr user.t (0 bytes)"},
		"A was-file":   {"new directory mode 040755"},
		"M xattrs": {
			"new xattr security.capability (2 bytes)",
			`new xattr "user.\033[31mred" (1 byte)`,
			"changed xattr user.changed (2 bytes)",
			"deleted xattr user.gone",
		},
	}
	for k, w := range wantHeaders {
		if !reflect.DeepEqual(headers[k], w) {
			t.Errorf("%s: header %q, want %q", k, headers[k], w)
		}
	}

	// A path filter keeps a directory's own change when it names it or
	// what holds it, and an empty directory still shows.
	for _, tc := range []struct {
		paths []string
		want  string
	}{
		{[]string{"opened"}, "M opened"},
		{[]string{"opened/f"}, ""},
		{[]string{"new-empty"}, "A new-empty"},
		{[]string{"new-full"}, "A new-full/f"},
	} {
		got, err := r.DiffTrees(a, b, tc.paths)
		if err != nil {
			t.Fatal(err)
		}
		if g := changeList(got); g != tc.want {
			t.Errorf("paths %q: %q, want %q", tc.paths, g, tc.want)
		}
	}
}

// deepChain stores a commit whose workspace ws holds a chain of depth
// directories with names of nameLen bytes, a file at the bottom, as an
// agent builds it by moving directories below others.
func deepChain(t *testing.T, r *Repo, depth, nameLen int) (objects.ID, string) {
	t.Helper()
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	fid, _, err := tx.PutFile(strings.NewReader("bottom\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := tx.PutTree(&objects.Tree{Entries: []objects.Entry{{Name: "f", Type: objects.TypeFile, Mode: 0o644, ID: fid, Size: 7}}})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", nameLen)
	for range depth {
		if id, err = tx.PutTree(&objects.Tree{Entries: []objects.Entry{{Name: name, Type: objects.TypeDir, Mode: 0o755, ID: id}}}); err != nil {
			t.Fatal(err)
		}
	}
	root, err := tx.PutTree(&objects.Tree{Entries: []objects.Entry{{Name: "ws", Type: objects.TypeDir, Mode: 0o755, ID: id}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := tx.PutCommit(&objects.Commit{Tree: root, Time: 1, Message: "deep"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return c, "ws/" + strings.Repeat(name+"/", depth) + "f"
}

// TestDeepChain: a chain of 3,000 directories with 200-byte names (a
// 600 KB path). Diffing it (art log counts every commit's changes) took
// memory growing with the square of the depth, 1.1 GB here; pull holds a
// directory open per level and refuses paths beyond MaxPullPath before
// writing anything, where it failed half written; one within it pulls.
func TestDeepChain(t *testing.T) {
	r := newTestRepo(t)
	deep, leaf := deepChain(t, r, 3000, 200)
	c, _ := r.LoadCommit(deep)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	changes, err := r.DiffTrees(objects.Zero, c.Tree, nil)
	runtime.ReadMemStats(&after)
	if err != nil || len(changes) != 1 || changes[0].Path != leaf {
		t.Fatalf("diff of the chain: %d changes, %v", len(changes), err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("diff of a %d-byte path allocated %d MB", len(leaf), n>>20)
	}
	if a, m, d, err := r.ChangeCounts(c); err != nil || a != 1 || m != 0 || d != 0 {
		t.Errorf("ChangeCounts = %d %d %d %v", a, m, d, err)
	}

	out := newWorkspace(t, "ws")
	_, err = r.Pull(PullOptions{Dir: out, Commit: deep})
	if err == nil || !strings.Contains(err.Error(), "a path longer than") || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("pull of the chain: %v", err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Fatalf("a refused pull wrote %d entries", len(ents))
	}
	if _, ok, _ := r.UnfinishedPull(out); ok {
		t.Fatal("a refused pull left its marker")
	}

	// 60 levels: 12 KB, longer than one system call takes.
	within, leaf := deepChain(t, r, 60, 200)
	if _, err := r.Pull(PullOptions{Dir: out, Commit: within}); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(strings.TrimPrefix(leaf, "ws/"), "/")
	dfd, err := unix.Open(out, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range parts[:len(parts)-1] {
		sub, err := unix.Openat(dfd, name, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(dfd)
		if err != nil {
			t.Fatalf("the pulled chain: %v", err)
		}
		dfd = sub
	}
	defer unix.Close(dfd)
	if got := readAt(t, dfd, "f"); got != "bottom\n" {
		t.Fatalf("the chain's file: %q", got)
	}
}

// Long texts are cut at lines unique to both sides before go-diff sees
// them: a long file with every 8th line changed took time growing
// with the square of its lines, and past go-diff's one-second timeout its
// diff changed from run to run (54,677 / 13,223 / 8,750 insertions).
func TestLineDiffLongTexts(t *testing.T) {
	rebuild := func(t *testing.T, a, b string, all []diffLine) {
		t.Helper()
		var gotA, gotB strings.Builder
		for _, l := range all {
			if l.op != '+' {
				gotA.WriteString(l.text)
			}
			if l.op != '-' {
				gotB.WriteString(l.text)
			}
		}
		if gotA.String() != a || gotB.String() != b {
			t.Fatalf("the diff does not turn a into b")
		}
	}
	t.Run("every 8th line changed", func(t *testing.T) {
		const n = 200000
		var a, b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&a, "line %d\n", i)
			if i%8 == 0 {
				fmt.Fprintf(&b, "changed line %d\n", i)
			} else {
				fmt.Fprintf(&b, "line %d\n", i)
			}
		}
		hunks, st := unified(a.String(), b.String(), 3)
		if st.Added != n/8 || st.Deleted != n/8 || len(hunks) != n/8 {
			t.Fatalf("%d added, %d deleted, %d hunks; want %d each", st.Added, st.Deleted, len(hunks), n/8)
		}
		for _, k := range []int{1, n / 16, n/8 - 1} {
			if want := fmt.Sprintf("@@ -%d,7 +%d,7 @@\n", 8*k-3, 8*k-3); !strings.HasPrefix(hunks[k-1], want) {
				t.Fatalf("hunk %d starts %q, want %q", k, hunks[k-1][:min(len(hunks[k-1]), 30)], want)
			}
		}
		rebuild(t, a.String(), b.String(), lineDiff(a.String(), b.String()))
	})
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name  string
		vocab int // distinct lines to draw from (0: every line unique)
	}{
		{"unique lines, blocks moved and edited", 0},
		{"many repeated lines", 50},
		{"no line unique to both sides", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := func(i int) string {
				if tc.vocab == 0 {
					return fmt.Sprintf("l%d\n", i)
				}
				return fmt.Sprintf("v%d\n", rng.IntN(tc.vocab))
			}
			var la []string
			for i := range 6000 {
				la = append(la, line(i))
			}
			lb := append([]string(nil), la...)
			for range 300 { // edits: replace, delete, insert, move a block
				k := rng.IntN(len(lb) - 50)
				switch rng.IntN(4) {
				case 0:
					lb[k] = line(100000 + k)
				case 1:
					lb = append(lb[:k], lb[k+1:]...)
				case 2:
					lb = append(lb[:k], append([]string{line(200000 + k)}, lb[k:]...)...)
				case 3:
					block := append([]string(nil), lb[k:k+20]...)
					lb = append(lb[:k], lb[k+20:]...)
					at := rng.IntN(len(lb))
					lb = append(lb[:at], append(block, lb[at:]...)...)
				}
			}
			a, b := strings.Join(la, ""), strings.Join(lb, "")
			first := lineDiff(a, b)
			rebuild(t, a, b, first)
			if again := lineDiff(a, b); !reflect.DeepEqual(first, again) {
				t.Fatalf("two diffs of the same texts differ")
			}
		})
	}
}

// A ChangeCounter run down a history (as art log does) counts what a
// count of each commit alone does, and decodes each changed tree once:
// a commit's trees are the next count's new side.
func TestChangeCounterDecodesEachTreeOnce(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	files := map[string]string{}
	for i := range 50 {
		files[fmt.Sprintf("big/f%02d", i)] = "v0\n"
	}
	files["other/x"] = "x\n"
	writeFiles(t, ws, files)
	push(t, r, ws, "v0")
	for i := range 6 {
		switch i % 3 {
		case 0:
			writeFiles(t, ws, map[string]string{fmt.Sprintf("big/f%02d", i): fmt.Sprintf("v%d\n", i+1)})
		case 1:
			writeFiles(t, ws, map[string]string{fmt.Sprintf("big/new%d", i): "new\n"})
		case 2:
			os.Remove(filepath.Join(ws, "big", fmt.Sprintf("f%02d", i)))
		}
		push(t, r, ws, fmt.Sprintf("v%d", i+1))
	}
	tip, err := r.BranchTip("main")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := r.Log([]objects.ID{tip}, -1)
	if err != nil {
		t.Fatal(err)
	}
	cc := r.NewChangeCounter()
	for _, e := range entries {
		a, m, d, err := cc.Counts(e.Commit)
		a1, m1, d1, err1 := r.ChangeCounts(e.Commit)
		if err != nil || err1 != nil || a != a1 || m != m1 || d != d1 {
			t.Errorf("%s: counted %d %d %d (%v) down the log, %d %d %d (%v) alone", e.ID.Short(), a, m, d, err, a1, m1, d1, err1)
		}
	}
	// Each push changed the root, the workspace and big: three trees, read
	// once each, plus the first commit's four (root, ws, big, other).
	if want := 3*6 + 4; cc.decoded != want {
		t.Errorf("decoded %d trees for %d commits, want %d", cc.decoded, len(entries), want)
	}
}
