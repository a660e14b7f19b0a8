package cmd

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A repository whose filesystem fills says so and what to do, and records
// nothing: SQLite's "database or disk is full (13)" alone left the user
// reaching for art gc, which needs room itself.
func TestRepositoryFilesystemFull(t *testing.T) {
	ws, _, db := repoOnSmallTmpfs(t, "size=2m")
	run := func(args ...string) (int, string) { return artCombined(t, args...) }
	big := make([]byte, 4<<20) // incompressible: more than the filesystem holds
	rand.Read(big)
	os.WriteFile(filepath.Join(ws, "big"), big, 0o644)
	code, out := run("push", "-d", db, "-m", ws, "-q")
	if code != 1 || !strings.Contains(out, "nothing was recorded") || !strings.Contains(out, "the filesystem holding the repository is full") || !strings.Contains(out, "Free some space") {
		t.Errorf("push into a full filesystem: exit %d\n%s", code, out)
	}
	if code, out := run("log", "-d", db, "--all", "--oneline"); code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("a commit after a failed push: exit %d %q", code, out)
	}
	if code, out := run("fsck", "-d", db); code != 0 {
		t.Errorf("fsck after a failed push: %s", out)
	}
}

// A pull stopped half way (the workspace's filesystem filled) is reported
// by art status with the way to finish it, not as changes to push.
func TestStatusAfterUnfinishedPull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to mount a small tmpfs")
	}
	base := t.TempDir()
	small := filepath.Join(base, "small")
	mountTmpfs(t, small, "size=1m")
	ws := filepath.Join(small, "ws")
	big := filepath.Join(base, "other", "ws") // the same workspace, elsewhere
	os.MkdirAll(ws, 0o755)
	db := filepath.Join(base, "repo", "art.db")
	run := func(args ...string) (int, string) { return artCombined(t, args...) }
	must := func(args ...string) string { return mustArtCombined(t, args...) }
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644)
	must("init", "-d", db)
	must("push", "-d", db, "-m", ws, "-q")
	// Another copy of the workspace, synced first: a directory that
	// never synced may not replace main's workspace of its name, nor
	// start a branch on it.
	must("pull", "-d", db, "-m", big, "-q")
	for i := range 4 {
		os.WriteFile(filepath.Join(big, fmt.Sprintf("big%d", i)), bytes.Repeat([]byte{byte('0' + i)}, 400<<10), 0o644)
	}
	must("push", "-d", db, "-m", big, "-b", "big", "-q")
	if code, out := run("pull", "-d", db, "-m", ws, "--commit", "big", "--force", "-q"); code == 0 {
		t.Fatalf("pull into a full filesystem succeeded:\n%s", out)
	}
	out := must("status", "-d", db, "-m", ws)
	if !strings.Contains(out, "did not finish") || !strings.Contains(out, "finish it with 'art pull -d "+db+" -m "+ws+" --commit ") || strings.Contains(out, "record it with 'art push'") {
		t.Errorf("status after an unfinished pull:\n%s", out)
	}
	code, out := run("push", "-d", db, "-m", ws, "-q")
	if code != 0 || !strings.Contains(out, "did not finish: this push records the workspace half pulled") {
		t.Errorf("push of a half-pulled workspace: exit %d\n%s", code, out)
	}
	if out := must("status", "-d", db, "-m", ws); strings.Contains(out, "did not finish") {
		t.Errorf("still unfinished after a push:\n%s", out)
	}
}

// artCombined runs art ARGS and returns its exit status and its stdout
// and stderr together.
func artCombined(t *testing.T, args ...string) (int, string) {
	t.Helper()
	c := exec.Command(artBinary(t), args...)
	c.Env = artEnv()
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

// mustArtCombined is artCombined of a command that must succeed.
func mustArtCombined(t *testing.T, args ...string) string {
	t.Helper()
	code, out := artCombined(t, args...)
	if code != 0 {
		t.Fatalf("art %q: exit %d\n%s", args, code, out)
	}
	return out
}

// repoOnSmallTmpfs makes an empty workspace ws and a repository db, made
// by art init, on a tmpfs mounted with opts at small (root only).
func repoOnSmallTmpfs(t *testing.T, opts string) (ws, small, db string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to mount a small tmpfs")
	}
	base := t.TempDir()
	small = filepath.Join(base, "small")
	ws = filepath.Join(base, "ws")
	os.Mkdir(ws, 0o755)
	mountTmpfs(t, small, opts)
	db = filepath.Join(small, "art.db")
	mustArtCombined(t, "init", "-d", db)
	return ws, small, db
}

// mountTmpfs makes dir and mounts a tmpfs there with opts (sizes, inodes)
// for the rest of the test.
func mountTmpfs(t *testing.T, dir, opts string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Fatalf("mount a tmpfs at %s: %v", dir, err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// art status of a directory that never synced, named like a workspace
// HEAD holds (a copy), says so and gives the step that works, not the
// push that is refused; a directory of a new name is told to push.
func TestStatusOfACopy(t *testing.T) {
	base := t.TempDir()
	db := filepath.Join(base, "repo", "art.db")
	ws := filepath.Join(base, "a", "ws")
	twin := filepath.Join(base, "b", "ws")
	fresh := filepath.Join(base, "c", "new")
	for _, d := range []string{ws, twin, fresh} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(ws, "f"), []byte("f\n"), 0o644)
	os.WriteFile(filepath.Join(twin, "f"), []byte("other\n"), 0o644)
	for _, args := range [][]string{{"init", "-d", db}, {"push", "-d", db, "-m", ws, "-q"}} {
		if code, out := artCombined(t, args...); code != 0 {
			t.Fatalf("art %q: %s", args, out)
		}
	}
	for _, tc := range []struct{ dir, want string }{
		{twin, "HEAD holds /ws/ from another directory of that name: 'art pull -d " + db + " -m NEWDIR/ws'"},
		{fresh, "was never pushed or pulled (record it with 'art push -d " + db + " -m " + fresh + "')"},
	} {
		code, out := artCombined(t, "status", "-d", db, "-m", tc.dir)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("status of %s: exit %d, want %q in:\n%s", tc.dir, code, tc.want, out)
		}
	}
	if code, out := artCombined(t, "push", "-d", db, "-m", twin, "-q"); code == 0 {
		t.Errorf("push of the copy went through:\n%s", out)
	}
}

// A push that finds nothing to record still writes the stat cache and the
// sync state; when the repository's filesystem is full by then, it fails
// as a recording push does, says so, and leaves the repository as it was.
func TestUnchangedPushFilesystemFull(t *testing.T) {
	ws, small, db := repoOnSmallTmpfs(t, "size=4m")
	run := func(args ...string) (int, string) { return artCombined(t, args...) }
	must := func(args ...string) string { return mustArtCombined(t, args...) }
	for i := range 2000 {
		os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%04d", i)), []byte("same\n"), 0o644)
	}
	must("push", "-d", db, "-m", ws, "-q")
	before := must("log", "-d", db, "--all", "--oneline")
	// New inodes, the same content and times: nothing to record, every
	// stat-cache row to rewrite.
	for i := range 2000 {
		p := filepath.Join(ws, fmt.Sprintf("f%04d", i))
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(p+".new", []byte("same\n"), 0o644)
		os.Chtimes(p+".new", st.ModTime(), st.ModTime())
		if err := os.Rename(p+".new", p); err != nil {
			t.Fatal(err)
		}
	}
	fillFilesystem(t, filepath.Join(small, "filler"))
	code, out := run("push", "-d", db, "-m", ws, "-q")
	if code != 1 || !strings.Contains(out, "nothing was recorded") || !strings.Contains(out, "the filesystem holding the repository is full") {
		t.Errorf("unchanged push into a full filesystem: exit %d\n%s", code, out)
	}
	os.Remove(filepath.Join(small, "filler"))
	if out := must("log", "-d", db, "--all", "--oneline"); out != before {
		t.Errorf("the log changed:\n%s\nwas:\n%s", out, before)
	}
	must("fsck", "-d", db)
	// With room again, the push records nothing and succeeds.
	must("push", "-d", db, "-m", ws, "-q")
	if out := must("log", "-d", db, "--all", "--oneline"); out != before {
		t.Errorf("an unchanged push recorded a commit:\n%s\nwas:\n%s", out, before)
	}
}

// fillFilesystem writes path until its filesystem has no room left.
func fillFilesystem(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			// The last partial page: tmpfs may take a few bytes more.
			for _, err = f.Write(buf[:1]); err == nil; _, err = f.Write(buf[:1]) {
			}
			return
		}
	}
}
