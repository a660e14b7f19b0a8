package repo

import (
	"bytes"
	"context"
	"crypto/sha1"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artproject/art/objects"
)

// FuzzResolve feeds arbitrary revision strings to Resolve on a repository
// with a small history: it must never panic, and whatever it resolves must
// be a stored commit.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"HEAD", "main", "HEAD~1", "HEAD^", "HEAD^2", "main~0", "abcd", "0000", "HEAD~99999999999999999999",
		"~", "^", "@", "@{1}", "a~1^1~", "HEAD~~~", "HEAD^0", "\x00", "refs/heads/main", "ＨＥＡＤ"} {
		f.Add(s)
	}
	r := newTestRepo(f)
	ws := filepath.Join(f.TempDir(), "ws")
	os.Mkdir(ws, 0o755)
	for i := 0; i < 3; i++ {
		os.WriteFile(filepath.Join(ws, "f"), []byte(strings.Repeat("x", i)), 0o644)
		if _, err := r.Push(context.Background(), PushOptions{Dir: ws}); err != nil {
			f.Fatal(err)
		}
	}
	if err := r.CreateBranch("side", mustResolve(f, r, "HEAD~1")); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, rev string) {
		id, err := r.Resolve(rev)
		if err != nil {
			return
		}
		if _, err := r.LoadCommit(id); err != nil {
			t.Fatalf("Resolve(%q) = %s, which is not a readable commit: %v", rev, id.Short(), err)
		}
	})
}

func mustResolve(t testing.TB, r *Repo, rev string) objects.ID {
	t.Helper()
	id, err := r.Resolve(rev)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// FuzzSyncState: the decoders of the stat cache (a directory's row, and
// schema 1's whole-workspace blob that migration converts) never panic,
// and a decoded row round-trips.
func FuzzSyncState(f *testing.F) {
	rows := syncRows(map[string]*syncedEntry{
		"a":      {typ: objects.TypeFile, mode: 0o644, size: 3, mtime: 1, ctime: 2, ino: 3},
		"l":      {typ: objects.TypeSymlink, mode: 0o777, size: 1, target: "a"},
		"d":      {typ: objects.TypeDir, mode: 0o755},
		"fifo\n": {typ: objects.TypeFifo, mode: 0o600},
	})
	f.Add(rows[""])
	f.Add(packSyncRow(bytes.Repeat(rows[""], 8)))
	f.Add([]byte(syncDirMagic))
	f.Add([]byte(syncDirMagicV1 + "\x01a\x03\xa4\x03" + strings.Repeat("\x00", 32) + "\x06\x02\x04\x06\x00"))
	f.Add([]byte(syncBlobMagic + "\x01a\x03\xa4\x03\x00\x00\x00\x00\x00"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeSyncBlob(b)
		m := decodeSyncDir("", b)
		if len(m) == 0 {
			return
		}
		if again := decodeSyncDir("", syncRows(m)[""]); len(again) != len(m) {
			t.Fatalf("round trip: %d vs %d entries", len(again), len(m))
		}
	})
}

// FuzzArtignore: .artignore content comes from the workspace, which the
// agent writes; compiling and matching it must never panic.
func FuzzArtignore(f *testing.F) {
	for _, s := range []string{"*.log\nbuild/\n!keep.log", "**/x/**", "[", "\\", "a/**/b", "#c\n\n  ", "[z-a]", "(", "+*?{", "\x00"} {
		f.Add(s, "a/b.log")
	}
	f.Fuzz(func(t *testing.T, patterns, path string) {
		sc := &scanner{ignore: compileIgnore(patterns)}
		sc.excluded(path, false)
		sc.excluded(path, true)
	})
}

// FuzzNameRoundTrip pushes a file whose name the agent chose (newlines,
// invalid UTF-8, long names, dots) and pulls it into an empty directory:
// the name and content come back exactly, and nothing lands outside the
// target.
func FuzzNameRoundTrip(f *testing.F) {
	for _, s := range []string{"a\nb", "\xff\xfe", strings.Repeat("n", 255), "..a", ".x", "-rf", " sp ace ", "tab\t", "a\\b", "€"} {
		f.Add(s, []byte("content"))
	}
	f.Fuzz(func(t *testing.T, name string, content []byte) {
		if !objects.ValidName(name) {
			return // the OS or the tree format refuses it; nothing to round-trip
		}
		root := t.TempDir()
		ws := filepath.Join(root, "ws")
		os.Mkdir(ws, 0o755)
		if err := os.WriteFile(filepath.Join(ws, name), content, 0o644); err != nil {
			return
		}
		r, err := Init(filepath.Join(root, "repo.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		res, err := r.Push(context.Background(), PushOptions{Dir: ws})
		if err != nil {
			t.Fatalf("push %q: %v", name, err)
		}
		out := filepath.Join(root, "out", "ws")
		if _, err := r.Pull(PullOptions{Dir: out, Commit: res.Commit}); err != nil {
			t.Fatalf("pull %q: %v", name, err)
		}
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || string(got) != string(content) {
			t.Fatalf("%q came back as %q (%v)", name, got, err)
		}
		ents, _ := os.ReadDir(filepath.Join(root, "out"))
		if len(ents) != 1 {
			t.Fatalf("pull wrote outside its target: %v", ents)
		}
	})
}

// decodeSyncDir decodes one directory's row into its entries by name; nil
// when the row does not decode (the directory then counts as never
// synced).
func decodeSyncDir(dir string, b []byte) map[string]*syncedEntry {
	m := map[string]*syncedEntry{}
	if _, err := decodeSyncRow(dir, b, func(name string, e *syncedEntry) { c := *e; m[name] = &c }); err != nil {
		return nil
	}
	return m
}

// FuzzGitIndex: pull parses git index files the agent wrote; any bytes
// give an answer, never a panic, and an index is the same as itself.
func FuzzGitIndex(f *testing.F) {
	f.Add([]byte("DIRC"))
	entry := func(version byte, name string) []byte {
		e := make([]byte, 62)
		copy(e[24:], []byte{0, 0, 0x81, 0xa4})
		e[61] = byte(len(name))
		e = append(e, name...)
		if version == 4 {
			return append(append(e[:62:62], 0), append([]byte(name), 0)...)
		}
		return append(e, make([]byte, 8-(62+len(name))%8)...)
	}
	for _, version := range []byte{2, 3, 4} {
		body := append([]byte("DIRC\x00\x00\x00"), version, 0, 0, 0, 2)
		body = append(body, entry(version, "a")...)
		body = append(body, entry(version, "b/c")...)
		body = append(body, "TREE\x00\x00\x00\x00"...)
		sum := sha1.Sum(body)
		f.Add(append(body, sum[:]...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, ok := gitIndexContent(data); ok && !sameGitIndex(data, data) {
			t.Fatalf("an index is not the same as itself: %q", data)
		}
	})
}
