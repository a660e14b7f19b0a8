package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/artproject/art/objects"
)

// newTestRepo creates a real repository file in a fresh temporary
// directory and closes it when the test ends.
func newTestRepo(t testing.TB) *Repo {
	t.Helper()
	r, err := Init(filepath.Join(t.TempDir(), "repo", "art.db"))
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// reopen closes r and opens its file again, with empty caches.
func reopen(t testing.TB, r *Repo) *Repo {
	t.Helper()
	r.Close()
	r2, err := Open(r.Path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { r2.Close() })
	return r2
}

// newWorkspace returns an empty directory named name.
func newWorkspace(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeFiles creates files (path → content) below dir, making parents.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		abs := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(abs, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func push(t testing.TB, r *Repo, dir string, msg string) *PushResult {
	t.Helper()
	res, err := r.Push(context.Background(), PushOptions{Dir: dir, Message: msg})
	if err != nil {
		t.Fatalf("push %s: %v", dir, err)
	}
	return res
}

// pushTo pushes dir onto branch (created if missing).
func pushTo(t testing.TB, r *Repo, dir string, branch string) *PushResult {
	t.Helper()
	res, err := r.Push(context.Background(), PushOptions{Dir: dir, Branch: branch, Message: branch})
	if err != nil {
		t.Fatalf("push %s onto %s: %v", dir, branch, err)
	}
	return res
}

func pull(t testing.TB, r *Repo, dir string, id objects.ID) *PullResult {
	t.Helper()
	res, err := r.Pull(PullOptions{Dir: dir, Commit: id})
	if err != nil {
		t.Fatalf("pull %s: %v", dir, err)
	}
	return res
}

// wsEntries lists the paths of /<name>/ in a commit, with a short
// description of each entry (type, mode, size or target).
func wsEntries(t testing.TB, r *Repo, commit objects.ID, name string) map[string]string {
	t.Helper()
	c, err := r.LoadCommit(commit)
	if err != nil {
		t.Fatal(err)
	}
	ws, ok, err := r.Lookup(c.Tree, []string{name})
	if err != nil || !ok {
		t.Fatalf("workspace %s not in commit: %v", name, err)
	}
	out := map[string]string{}
	var walk func(prefix string, id objects.ID)
	walk = func(prefix string, id objects.ID) {
		tr, err := r.LoadTree(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range tr.Entries {
			p := prefix + e.Name
			out[p] = fmt.Sprintf("%s %o %d %s", e.Type, e.Mode, e.Size, e.Target)
			if e.Type == objects.TypeDir {
				walk(p+"/", e.ID)
			}
		}
	}
	walk("", ws.ID)
	return out
}

// snapshot describes everything below dir (type, mode, content hash or
// link target), to check that an operation changed nothing.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := st.Mode().String()
		switch {
		case st.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + hashHex(b)
		case st.Mode()&fs.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			desc += " -> " + tgt
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func hashHex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func fileHash(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return hashHex(b)
}

func diffMaps(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, fmt.Sprintf("- %q: %s", k, v))
		} else if w != v {
			out = append(out, fmt.Sprintf("~ %q: %s => %s", k, v, w))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("+ %q: %s", k, v))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// compareDirs checks that want and got hold the same entries below them:
// types, permission bits (with setuid/setgid/sticky), file contents and
// symlink targets, and (if mtimes) modification times (not of the root).
// File contents are compared only if content is set.
// Names in skip (at any depth) are ignored on both sides.
func compareDirs(t testing.TB, want, got string, mtimes, content bool, skip ...string) {
	t.Helper()
	skipped := func(d fs.DirEntry) bool {
		for _, s := range skip {
			if d.Name() == s {
				return true
			}
		}
		return false
	}
	list := func(root string) map[string]bool {
		m := map[string]bool{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p != root && skipped(d) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			m[rel] = true
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	wm, gm := list(want), list(got)
	problems := 0
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
		if problems++; problems > 20 {
			t.FailNow()
		}
	}
	for rel := range wm {
		if !gm[rel] {
			fail("missing after round trip: %q", rel)
		}
	}
	for rel := range gm {
		if !wm[rel] {
			fail("unexpected after round trip: %q", rel)
		}
	}
	const bits = fs.ModeType | fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky
	for rel := range wm {
		if !gm[rel] || rel == "." {
			continue
		}
		a, b := filepath.Join(want, rel), filepath.Join(got, rel)
		var sa, sb syscall.Stat_t
		if err := syscall.Lstat(a, &sa); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Lstat(b, &sb); err != nil {
			t.Fatal(err)
		}
		ia, _ := os.Lstat(a)
		ib, _ := os.Lstat(b)
		// A pull never sets setuid, setgid or other-write bits (links
		// have no mode of their own).
		wantMode := ia.Mode() & bits
		if wantMode.Type() != fs.ModeSymlink {
			wantMode &^= fs.ModeSetuid | fs.ModeSetgid | 0o002
		}
		if wantMode != ib.Mode()&bits {
			fail("%q: mode %v, want %v", rel, ib.Mode()&bits, wantMode)
			continue
		}
		if mtimes && sa.Mtim != sb.Mtim {
			fail("%q (%v): mtime %v, want %v", rel, ia.Mode().Type(), sb.Mtim, sa.Mtim)
		}
		switch {
		case ia.Mode().IsRegular():
			if ia.Size() != ib.Size() {
				fail("%q: size %d, want %d", rel, ib.Size(), ia.Size())
			} else if content {
				ca, _ := os.ReadFile(a)
				cb, _ := os.ReadFile(b)
				if !bytes.Equal(ca, cb) {
					fail("%q: content differs", rel)
				}
			}
		case ia.Mode()&fs.ModeSymlink != 0:
			ta, _ := os.Readlink(a)
			tb, _ := os.Readlink(b)
			if ta != tb {
				fail("%q: link to %q, want %q", rel, tb, ta)
			}
		}
	}
}

// mustFail checks that err wraps want.
func mustFail(t testing.TB, err error, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("succeeded, want %v", want)
	}
	if want != nil && !errors.Is(err, want) {
		t.Fatalf("error %q, want %v", err, want)
	}
}

// commitIDs lists every commit row.
func commitIDs(t testing.TB, r *Repo) []string {
	t.Helper()
	rows, err := r.DB.Query(`SELECT hex(id) FROM commits ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		rows.Scan(&s)
		out = append(out, s)
	}
	return out
}
