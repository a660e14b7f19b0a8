package repo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/artproject/art/objects"
)

// Regression: a stored entry named like the repository file (another
// host's workspace of the same name pushed it) was renamed over the live
// database, which every later command then refused.
func TestPullNeverWritesRepository(t *testing.T) {
	ws := newWorkspace(t, "ws")
	r, err := Init(filepath.Join(ws, "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	writeFiles(t, ws, map[string]string{"f": "mine\n"})
	push(t, r, ws, "a")
	// Another copy of the workspace: synced (a directory that never
	// synced may not replace main's workspace of its name, see
	// TestFirstPushOverAWorkspaceOfItsName), then changed.
	twin := filepath.Join(t.TempDir(), "ws")
	pull(t, r, twin, mustTip(t, r, "main"))
	writeFiles(t, twin, map[string]string{"f": "twin\n", "r.db": "JUNK", "r.db-wal": "JUNK", "r.db-wt7.journal": "JUNK"})
	v2 := pushTo(t, r, twin, "twin").Commit

	var lines []string
	res, err := r.Pull(PullOptions{Dir: ws, Commit: v2, Force: true, Report: func(l string) { lines = append(lines, l) }})
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	if res.Updated != 1 {
		t.Errorf("pull %+v, want f updated", res)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f")); string(b) != "twin\n" {
		t.Errorf("f = %q", b)
	}
	for _, name := range []string{"r.db", "r.db-wal"} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "SKIP /ws/"+name+" ") }) {
			t.Errorf("no SKIP line for %s in %q", name, lines)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "r.db-wt7.journal")); err == nil {
		t.Error("a worktree journal name was written")
	}
	r2 := reopen(t, r)
	if _, err := r2.Resolve("HEAD"); err != nil {
		t.Fatalf("the repository is damaged after the pull: %v", err)
	}
	if res, err := r2.Fsck(nil); err != nil || len(res.Problems) > 0 {
		t.Fatalf("fsck: %v %v", res, err)
	}
}

// The host changing entries while a pull runs (after its plan): the pull
// never overwrites, chmods or records what it did not check, and says so.
func TestPullRacingHostChanges(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, ws, outside string)
		path   string // reported as raced
		check  func(t *testing.T, ws, outside string)
	}{
		{
			name:   "edit of a file the pull replaces",
			change: func(t *testing.T, ws, _ string) { writeFiles(t, ws, map[string]string{"b": "user edit\n"}) },
			path:   "b",
			check: func(t *testing.T, ws, _ string) {
				if got := readString(t, filepath.Join(ws, "b")); got != "user edit\n" {
					t.Errorf("b = %q, the user's edit was overwritten", got)
				}
			},
		},
		{
			// Only the inode's change time tells: size and mtime are as
			// the scan saw them (a tool that restores mtimes, rsync -t).
			name: "same-size edit with its mtime put back",
			change: func(t *testing.T, ws, _ string) {
				p := filepath.Join(ws, "b")
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				writeFiles(t, ws, map[string]string{"b": "B1\n"})
				if err := os.Chtimes(p, st.ModTime(), st.ModTime()); err != nil {
					t.Fatal(err)
				}
			},
			path: "b",
			check: func(t *testing.T, ws, _ string) {
				if got := readString(t, filepath.Join(ws, "b")); got != "B1\n" {
					t.Errorf("b = %q, the user's edit was overwritten", got)
				}
			},
		},
		{
			name:   "file created where the pull creates one",
			change: func(t *testing.T, ws, _ string) { writeFiles(t, ws, map[string]string{"new": "user's own\n"}) },
			path:   "new",
			check: func(t *testing.T, ws, _ string) {
				if got := readString(t, filepath.Join(ws, "new")); got != "user's own\n" {
					t.Errorf("new = %q, the user's file was overwritten", got)
				}
			},
		},
		{
			name: "link to an outside file swapped in for one whose mode the pull restores",
			change: func(t *testing.T, ws, outside string) {
				os.Remove(filepath.Join(ws, "z"))
				if err := os.Symlink(outside, filepath.Join(ws, "z")); err != nil {
					t.Fatal(err)
				}
			},
			path: "z",
			check: func(t *testing.T, ws, outside string) {
				st, err := os.Stat(outside)
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode().Perm() != 0o600 {
					t.Errorf("the pull changed the mode of a file outside the workspace to %o", st.Mode().Perm())
				}
			},
		},
		{
			name:   "edit of a file the pull keeps",
			change: func(t *testing.T, ws, _ string) { writeFiles(t, ws, map[string]string{"a": "user edit\n"}) },
			path:   "a", // left alone, and never recorded as synced
			check: func(t *testing.T, ws, _ string) {
				if got := readString(t, filepath.Join(ws, "a")); got != "user edit\n" {
					t.Errorf("a = %q", got)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			outside := filepath.Join(t.TempDir(), "outside")
			if err := os.WriteFile(outside, []byte("precious\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, ws, map[string]string{"a": "a\n", "b": "b1\n", "z": "z\n"})
			v1 := push(t, r, ws, "v1").Commit
			writeFiles(t, ws, map[string]string{"b": "b2\n", "new": "new\n"})
			os.Chmod(filepath.Join(ws, "z"), 0o755)
			v2 := push(t, r, ws, "v2").Commit
			pull(t, r, ws, v1)

			res, err := r.Pull(PullOptions{Dir: ws, Commit: v2, afterPlan: func() { c.change(t, ws, outside) }})
			mustFail(t, err, ErrConflict)
			if !strings.Contains(err.Error(), "while the pull ran") || !strings.Contains(err.Error(), "\n  "+c.path+"\n") {
				t.Errorf("error does not name %s: %v", c.path, err)
			}
			if res == nil {
				t.Fatal("no result for a partly done pull")
			}
			c.check(t, ws, outside)
			// Whatever raced is not vouched for by the sync state: the
			// host's version shows as changed, and a push reads it.
			d, err := r.HostDrift(ws)
			if err != nil {
				t.Fatal(err)
			}
			want := c.path
			if !slices.Contains(d.Modified, want) && !slices.Contains(d.Added, want) {
				t.Errorf("drift %+v does not show %s", d, want)
			}
			res2 := push(t, r, ws, "after")
			pushMatchesFull(t, c.name, r, ws, res2)
		})
	}
}

// Regression: a pull recorded each path's stat as found after the whole
// pull, with the stored content id: an edit made after the pull wrote a
// file was recorded as synced, the next push stored the old content under
// the new size, and the next pull overwrote the edit without a conflict.
func TestPullRecordsOnlyWhatItWrote(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "v1\n"})
	v1 := push(t, r, ws, "v1").Commit
	writeFiles(t, ws, map[string]string{"a": "version 2\n"})
	v2 := push(t, r, ws, "v2").Commit
	pull(t, r, ws, v1)
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: v2, beforeRecord: func() {
		writeFiles(t, ws, map[string]string{"a": "USER EDIT\n"})
	}}); err == nil || !strings.Contains(err.Error(), "while the pull ran") {
		t.Fatalf("pull: %v, want the edit reported", err)
	}
	res := push(t, r, ws, "edit")
	pushMatchesFull(t, "after the raced pull", r, ws, res)
	if got := wsEntries(t, r, res.Commit, "ws")["a"]; got != "file 644 10 " {
		t.Errorf("pushed a = %q", got)
	}
	_, err := r.Pull(PullOptions{Dir: ws, Commit: v1})
	if err != nil {
		t.Fatalf("pull v1 after pushing the edit: %v", err)
	}
}

// A mode changed on the host since the last sync is a change like any
// other: a pull that would undo it conflicts.
func TestPullModeChangeConflicts(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"m": "same\n", "n": "n1\n"})
	v1 := push(t, r, ws, "v1").Commit
	writeFiles(t, ws, map[string]string{"n": "n2\n"})
	push(t, r, ws, "v2")
	for _, p := range []string{"m", "n"} {
		os.Chmod(filepath.Join(ws, p), 0o755)
	}
	before := snapshot(t, ws)
	_, err := r.Pull(PullOptions{Dir: ws, Commit: v1})
	mustFail(t, err, ErrConflict)
	for _, want := range []string{"m (mode changed on the host)", "n (changed on the host)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("conflict message lacks %q: %v", want, err)
		}
	}
	if d := diffMaps(before, snapshot(t, ws)); d != "" {
		t.Fatalf("a refused pull changed the host:\n%s", d)
	}
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: v1, Force: true}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(ws, "m")); st.Mode().Perm() != 0o644 {
		t.Errorf("forced pull left m at %o", st.Mode().Perm())
	}
}

// Regression: --force could not replace a directory holding files the
// repository never had, and failed after deleting other files. Such a
// directory now stops the pull before anything changes, forced or not.
func TestPullRefusesToReplaceDirectoryWithHostFiles(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"x": "1\n"})
	v1 := push(t, r, ws, "v1").Commit
	os.Remove(filepath.Join(ws, "x"))
	writeFiles(t, ws, map[string]string{"x/inner": "2\n", "y": "keep\n"})
	push(t, r, ws, "v2")
	writeFiles(t, ws, map[string]string{"x/hostonly": "mine\n", "y": "edited on the host\n"})
	before := snapshot(t, ws)
	for _, force := range []bool{false, true} {
		_, err := r.Pull(PullOptions{Dir: ws, Commit: v1, Force: force})
		mustFail(t, err, ErrConflict)
		if !strings.Contains(err.Error(), "x (a directory holding files the repository never had") || !strings.Contains(err.Error(), "move them out") {
			t.Errorf("force=%v: message %v", force, err)
		}
		// The ordinary conflicts come in the same report, not in a
		// second round once the way is clear; --force would settle them.
		if hasY := strings.Contains(err.Error(), "\n  y ("); hasY == force || strings.Contains(err.Error(), "need a decision") == force {
			t.Errorf("force=%v: the host's edit of y listed %v: %v", force, hasY, err)
		}
		if d := diffMaps(before, snapshot(t, ws)); d != "" {
			t.Fatalf("force=%v: a refused pull changed the host:\n%s", force, d)
		}
	}
	os.Rename(filepath.Join(ws, "x/hostonly"), filepath.Join(t.TempDir(), "saved"))
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: v1, Force: true}); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, filepath.Join(ws, "x")); got != "1\n" {
		t.Errorf("x = %q", got)
	}
}

// A repository that cannot record the pull (here: on a read-only mount)
// fails it before the host is touched.
func TestPullOnReadOnlyRepositoryChangesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: not root, and making the read-only bind mount this test needs takes root")
	}
	dir := t.TempDir()
	r, err := Init(filepath.Join(dir, "art.db"))
	if err != nil {
		t.Fatal(err)
	}
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"f": "1\n", "g": "g\n"})
	v1 := push(t, r, ws, "v1").Commit
	writeFiles(t, ws, map[string]string{"f": "2\n"})
	os.Remove(filepath.Join(ws, "g"))
	push(t, r, ws, "v2")
	r.Close()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("skipping: cannot bind-mount %s (%v); this test needs a read-only bind mount", dir, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
	ro, err := Open(filepath.Join(dir, "art.db"))
	if err != nil {
		t.Fatalf("open on a read-only mount: %v", err)
	}
	defer ro.Close()
	before := snapshot(t, ws)
	_, err = ro.Pull(PullOptions{Dir: ws, Commit: v1})
	if err == nil || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("pull into a read-only repository: %v", err)
	}
	if !IsReadOnly(err) {
		t.Errorf("IsReadOnly(%v) = false; art would not explain it", err)
	}
	if d := diffMaps(before, snapshot(t, ws)); d != "" {
		t.Fatalf("the failed pull changed the host:\n%s", d)
	}
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A pull never gives a host entry set-user-ID, set-group-ID or
// other-writable bits, whatever the commit (an agent's work) says: pulled
// by root, an agent's setuid shell became a root one on the host.
func TestPullDropsUnsafeModeBits(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"suid": "#!/bin/sh\n", "open": "x\n", "d/f": "f\n"})
	for p, mode := range map[string]os.FileMode{"suid": 0o755 | os.ModeSetuid | os.ModeSetgid, "open": 0o666, "d": 0o777 | os.ModeSetgid | os.ModeSticky} {
		if err := os.Chmod(filepath.Join(ws, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	v := push(t, r, ws, "hostile modes").Commit
	if got := wsEntries(t, r, v, "ws")["suid"]; !strings.HasPrefix(got, "file 6755 ") {
		t.Fatalf("the commit should keep what was written: %q", got)
	}
	dst := filepath.Join(t.TempDir(), "ws")
	pull(t, r, dst, v)
	for p, want := range map[string]uint32{"suid": 0o755, "open": 0o664, "d": 0o775 | unix.S_ISVTX} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dst, p), &st); err != nil {
			t.Fatal(err)
		}
		if got := st.Mode & 0o7777; got != want {
			t.Errorf("%s: mode %o after the pull, want %o", p, got, want)
		}
	}
	// The pulled tree counts as synced: a second pull has nothing to do.
	res := pull(t, r, dst, v)
	if res.Created+res.Updated+res.Deleted != 0 {
		t.Errorf("second pull %+v", res)
	}
}

// .art of any type is never stored nor written: a stored .art link (an
// agent's, from a repository made before the overlay refused it) is
// skipped by pull, and a host .art link is not pushed.
func TestDotArtLinkNeverStoredOrWritten(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"f": "f\n", "evil/config/binds.json": "[]"})
	if err := os.Symlink("evil", filepath.Join(ws, ".art")); err != nil {
		t.Fatal(err)
	}
	v := push(t, r, ws, "link").Commit
	if _, ok := wsEntries(t, r, v, "ws")[".art"]; ok {
		t.Fatal("push stored the .art link")
	}
	// A tree holding one anyway (written directly, as an old art could).
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	c, _ := r.LoadCommit(v)
	wsEntry, _, _ := r.Lookup(c.Tree, []string{"ws"})
	wsTree, _ := r.LoadTree(wsEntry.ID)
	entries := append([]objects.Entry{{Name: ".art", Type: objects.TypeSymlink, Mode: 0o777, Size: 4, Target: "evil"}}, wsTree.Entries...)
	wsID, err := tx.PutTree(&objects.Tree{Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	root, err := tx.PutTree(&objects.Tree{Entries: []objects.Entry{{Name: "ws", Type: objects.TypeDir, Mode: 0o755, ID: wsID}}})
	if err != nil {
		t.Fatal(err)
	}
	hostile, err := tx.PutCommit(&objects.Commit{Tree: root, Parents: []objects.ID{v}, Message: "hostile"})
	if err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	dst := filepath.Join(t.TempDir(), "ws")
	pull(t, r, dst, hostile)
	if _, err := os.Lstat(filepath.Join(dst, ".art")); err == nil {
		t.Fatal("pull wrote a .art link")
	}
}

// On a case-insensitive host .ART is .art and .ARTIGNORE is .artignore:
// a commit holding them (an agent's, made on a case-sensitive mount) had
// pull write the host's binds.json, unchecked, and a new ignore file.
func TestPullCaseVariantsOfReservedNames(t *testing.T) {
	// exFAT drops trailing dots, Windows shares dots and spaces: there
	// .art. is .art too.
	for _, names := range [][2]string{{".ART", ".ARTIGNORE"}, {".art.", ".artignore. "}} {
		t.Run(names[0], func(t *testing.T) { testPullVariantsOfReservedNames(t, names[0], names[1]) })
	}
}

func testPullVariantsOfReservedNames(t *testing.T, dirName, ignoreName string) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"f": "f\n", ".artignore": "*.log\n"})
	v := push(t, r, ws, "base").Commit
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	const bindsJSON = `[{"host": "/", "guest": "/tmp/h", "readonly": false}]`
	binds, _, err := tx.PutFile(strings.NewReader(bindsJSON))
	if err != nil {
		t.Fatal(err)
	}
	ignore, _, err := tx.PutFile(strings.NewReader("\n"))
	if err != nil {
		t.Fatal(err)
	}
	tree := func(entries ...objects.Entry) objects.ID {
		id, err := tx.PutTree(&objects.Tree{Entries: entries})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	c, _ := r.LoadCommit(v)
	wsEntry, _, _ := r.Lookup(c.Tree, []string{"ws"})
	wsTree, _ := r.LoadTree(wsEntry.ID)
	config := tree(objects.Entry{Name: "binds.json", Type: objects.TypeFile, Mode: 0o644, ID: binds, Size: uint64(len(bindsJSON))})
	entries := append([]objects.Entry{
		{Name: dirName, Type: objects.TypeDir, Mode: 0o755, ID: tree(objects.Entry{Name: "config", Type: objects.TypeDir, Mode: 0o755, ID: config})},
		{Name: ignoreName, Type: objects.TypeFile, Mode: 0o644, ID: ignore, Size: 1},
	}, wsTree.Entries...)
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	root := tree(objects.Entry{Name: "ws", Type: objects.TypeDir, Mode: 0o755, ID: tree(entries...)})
	hostile, err := tx.PutCommit(&objects.Commit{Tree: root, Parents: []objects.ID{v}, Message: "hostile"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ws)
	_, err = r.Pull(PullOptions{Dir: ws, Commit: hostile})
	mustFail(t, err, ErrConflict)
	if !strings.Contains(err.Error(), QuotePath(ignoreName)+" (added in the commit; it decides what push leaves out") {
		t.Errorf("conflicts: %v", err)
	}
	if d := diffMaps(before, snapshot(t, ws)); d != "" {
		t.Fatalf("a refused pull changed the host:\n%s", d)
	}
	var lines []string
	res, err := r.Pull(PullOptions{Dir: ws, Commit: hostile, Force: true, Report: func(l string) { lines = append(lines, l) }})
	if err != nil {
		t.Fatal(err)
	}
	// Said, not silent: the commit holds it (an old build stored such
	// names, an agent can).
	if want := "SKIP " + QuotePath("/ws/"+dirName) + " (named like art's own .art directory"; res.Ignored != 1 || !strings.Contains(strings.Join(lines, "\n"), want) {
		t.Errorf("pull reported %q, %d ignored; want a line starting %q", lines, res.Ignored, want)
	}
	if _, err := os.Lstat(filepath.Join(ws, dirName)); err == nil {
		t.Fatalf("pull wrote %s", dirName)
	}
}

// An .artignore that is a fifo, a device or a symbolic link fails the
// command with a clear message instead of blocking, reading forever or
// reading what the link names.
func TestArtignoreMustBeRegular(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"f": "f\n"})
	if err := syscall.Mkfifo(filepath.Join(ws, ".artignore"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := r.Push(context.Background(), PushOptions{Dir: ws})
	if err == nil || !strings.Contains(err.Error(), ".artignore") || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("push with a fifo .artignore: %v", err)
	}
	// Never through a link: not to a device, nor to a file the agent
	// cannot read (a push as root would have read it for the agent).
	secret := filepath.Join(t.TempDir(), "root-only")
	writeFiles(t, filepath.Dir(secret), map[string]string{"root-only": "f\n"})
	for _, target := range []string{"/dev/zero", secret} {
		os.Remove(filepath.Join(ws, ".artignore"))
		os.Symlink(target, filepath.Join(ws, ".artignore"))
		if _, err := r.HostDrift(ws); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Fatalf("status with .artignore -> %s: %v", target, err)
		}
		if _, err := r.Push(context.Background(), PushOptions{Dir: ws}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Fatalf("push with .artignore -> %s: %v", target, err)
		}
	}
}

// A pull leaves runs of zeros as holes: an agent's sparse file (a few
// bytes stored) used to become gigabytes on the host's disk.
func TestPullKeepsSparseFilesSparse(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	const size = 64 << 20
	f, err := os.Create(filepath.Join(ws, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(size)
	f.WriteAt([]byte("data in the middle"), 32<<20+5)
	f.Close()
	writeFiles(t, ws, map[string]string{"dense": strings.Repeat("z", 100000)})
	v := push(t, r, ws, "sparse").Commit
	dst := filepath.Join(t.TempDir(), "ws")
	pull(t, r, dst, v)
	compareDirs(t, ws, dst, true, true)
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dst, "sparse"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != size {
		t.Fatalf("size %d, want %d", st.Size, size)
	}
	if used := st.Blocks * 512; used > 1<<20 {
		t.Errorf("the pulled sparse file takes %d bytes of disk for 18 bytes of data", used)
	}
}

// Hard-linked host names share an inode: what the pull does through one
// name (replace, unlink, chmod, new times) changes the other's ctime, and
// must not pass for a change by the host (it made the pull fail, for good
// after a retry).
func TestPullOverHardLinks(t *testing.T) {
	cases := []struct {
		name   string
		target func(t *testing.T, ws string) // the commit to pull, from a and b with content "one\n"
	}{
		{"replace one name", func(t *testing.T, ws string) { writeFiles(t, ws, map[string]string{"a": "two\n"}) }},
		{"delete one name", func(t *testing.T, ws string) { os.Remove(filepath.Join(ws, "a")) }},
		{"mode of both", func(t *testing.T, ws string) {
			os.Chmod(filepath.Join(ws, "a"), 0o755)
			os.Chmod(filepath.Join(ws, "b"), 0o755)
		}},
		{"times of both", func(t *testing.T, ws string) {
			old := time.Unix(1_000_000_000, 0)
			os.Chtimes(filepath.Join(ws, "a"), old, old)
			os.Chtimes(filepath.Join(ws, "b"), old, old)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRepo(t)
			src := newWorkspace(t, "ws")
			writeFiles(t, src, map[string]string{"a": "one\n", "b": "one\n"})
			v1 := push(t, r, src, "v1").Commit
			c.target(t, src)
			v2 := push(t, r, src, "v2").Commit
			ws := filepath.Join(t.TempDir(), "ws")
			pull(t, r, ws, v1)
			// The host makes a and b one inode.
			os.Remove(filepath.Join(ws, "b"))
			if err := os.Link(filepath.Join(ws, "a"), filepath.Join(ws, "b")); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Pull(PullOptions{Dir: ws, Commit: v2, Force: true}); err != nil {
				t.Fatalf("pull over hard links: %v", err)
			}
			if _, err := r.Pull(PullOptions{Dir: ws, Commit: v2}); err != nil {
				t.Fatalf("second pull: %v", err)
			}
		})
	}
}

// A pull never adds setuid, setgid or other-write bits, but keeps those
// the user's own host entries have (it stripped them from a setgid shared
// directory on every pull).
func TestPullKeepsHostsOwnUnsafeBits(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"shared/f": "x\n", "tool": "#!/bin/sh\n"})
	os.Chmod(filepath.Join(ws, "shared"), 0o2775|os.ModeSetgid)
	os.Chmod(filepath.Join(ws, "tool"), 0o755|os.ModeSetuid)
	v := push(t, r, ws, "mine").Commit
	res := pull(t, r, ws, v)
	if res.Created+res.Updated+res.Deleted != 0 {
		t.Errorf("pull of the unchanged commit: %+v", res)
	}
	for p, want := range map[string]uint32{"shared": 0o2775, "tool": 0o4755} {
		var st unix.Stat_t
		unix.Lstat(filepath.Join(ws, p), &st)
		if st.Mode&0o7777 != want {
			t.Errorf("%s: mode %o after the pull, want %o", p, st.Mode&0o7777, want)
		}
	}
}

// Entries the scan does not track stop a pull before anything changes: a
// directory the commit replaces that holds ignored files, and a socket
// where the commit has a file (each used to be half done, then reported
// as a race, for good).
func TestPullBlockedByUntrackedEntries(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, ws string) (target objects.ID, r *Repo)
		want  string
	}{
		{"ignored files in a replaced directory", func(t *testing.T, ws string) (objects.ID, *Repo) {
			r := newTestRepo(t)
			writeFiles(t, ws, map[string]string{".artignore": "*.o\n", "d": "file\n"})
			v1 := push(t, r, ws, "v1").Commit
			os.Remove(filepath.Join(ws, "d"))
			writeFiles(t, ws, map[string]string{"d/a.c": "src\n"})
			push(t, r, ws, "v2")
			writeFiles(t, ws, map[string]string{"d/a.o": "obj\n"})
			return v1, r
		}, "d (a directory holding files the repository never had"},
		{"ignored files deeper in a replaced directory", func(t *testing.T, ws string) (objects.ID, *Repo) {
			r := newTestRepo(t)
			writeFiles(t, ws, map[string]string{".artignore": "*.o\n", "d": "file\n"})
			v1 := push(t, r, ws, "v1").Commit
			os.Remove(filepath.Join(ws, "d"))
			writeFiles(t, ws, map[string]string{"d/sub/a.c": "src\n"})
			push(t, r, ws, "v2")
			writeFiles(t, ws, map[string]string{"d/sub/a.o": "obj\n"})
			return v1, r
		}, "d (a directory holding files the repository never had"},
		{"socket at a file's name", func(t *testing.T, ws string) (objects.ID, *Repo) {
			r := newTestRepo(t)
			writeFiles(t, ws, map[string]string{"sock": "data\n", "other": "1\n"})
			v1 := push(t, r, ws, "v1").Commit
			os.Remove(filepath.Join(ws, "sock"))
			writeFiles(t, ws, map[string]string{"other": "2\n"})
			push(t, r, ws, "v2")
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if err := unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(ws, "sock")}); err != nil {
				t.Fatal(err)
			}
			return v1, r
		}, "sock (a socket or device file is in the way"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := newWorkspace(t, "ws")
			target, r := c.setup(t, ws)
			before := snapshot(t, ws)
			for _, force := range []bool{false, true} {
				_, err := r.Pull(PullOptions{Dir: ws, Commit: target, Force: force})
				mustFail(t, err, ErrConflict)
				if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was changed") {
					t.Errorf("force=%v: %v", force, err)
				}
				if d := diffMaps(before, snapshot(t, ws)); d != "" {
					t.Fatalf("force=%v: the refused pull changed the host:\n%s", force, d)
				}
			}
		})
	}
}

// A commit changing the host's .artignore (an agent emptying it would have
// the next push store what it kept out, secrets included) conflicts: the
// user takes it with --force.
func TestPullChangingArtignoreConflicts(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{".artignore": ".env\n", "a": "a\n"})
	push(t, r, ws, "v1")
	writeFiles(t, ws, map[string]string{".artignore": ""})
	v2 := push(t, r, ws, "emptied").Commit
	writeFiles(t, ws, map[string]string{".artignore": ".env\n"})
	push(t, r, ws, "v3")
	before := snapshot(t, ws)
	_, err := r.Pull(PullOptions{Dir: ws, Commit: v2})
	mustFail(t, err, ErrConflict)
	if !strings.Contains(err.Error(), ".artignore (changed in the commit; it decides what push leaves out") {
		t.Errorf("message: %v", err)
	}
	if d := diffMaps(before, snapshot(t, ws)); d != "" {
		t.Fatalf("the refused pull changed the host:\n%s", d)
	}
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: v2, Force: true}); err != nil {
		t.Fatal(err)
	}
}

// New content never inherits the host file's setuid bit: an agent
// changing the bytes of the user's setuid-root tool (mode kept) must not
// get a root setuid binary of its own making.
func TestPullNewContentDropsSetuid(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"tool": "#!/bin/sh\necho agent\n"})
	os.Chmod(filepath.Join(ws, "tool"), 0o755|os.ModeSetuid)
	agent := push(t, r, ws, "agent's bytes, setuid").Commit
	writeFiles(t, ws, map[string]string{"tool": "#!/bin/sh\necho mine\n"})
	os.Chmod(filepath.Join(ws, "tool"), 0o755|os.ModeSetuid)
	push(t, r, ws, "the user's setuid tool")
	var st unix.Stat_t
	pull(t, r, ws, agent)
	unix.Lstat(filepath.Join(ws, "tool"), &st)
	if st.Mode&unix.S_ISUID != 0 {
		t.Fatalf("new content kept the setuid bit: %o", st.Mode&0o7777)
	}
	if b := readString(t, filepath.Join(ws, "tool")); b != "#!/bin/sh\necho agent\n" {
		t.Fatalf("tool = %q", b)
	}
}

// A commit deleting the host's .artignore conflicts too (an agent removing
// it had the next push store what it kept out).
func TestPullDeletingArtignoreConflicts(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{".artignore": "secret.txt\n", "a": "a\n"})
	v1 := push(t, r, ws, "v1").Commit
	os.Remove(filepath.Join(ws, ".artignore"))
	gone := push(t, r, ws, "deleted").Commit
	// Bringing it back is adding it (TestPullAddingArtignoreConflicts).
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: v1, Force: true}); err != nil {
		t.Fatal(err)
	}
	_, err := r.Pull(PullOptions{Dir: ws, Commit: gone})
	mustFail(t, err, ErrConflict)
	if !strings.Contains(err.Error(), ".artignore (deleted in the commit") {
		t.Errorf("message: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".artignore")); err != nil {
		t.Fatal("the refused pull deleted .artignore")
	}
}

// A commit adding an .artignore to a workspace synced before conflicts, as
// changing one does: it decides what the next push leaves out. A first
// pull into a new directory takes it.
func TestPullAddingArtignoreConflicts(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n", "src/main.go": "package main\n"})
	push(t, r, ws, "v1")
	writeFiles(t, ws, map[string]string{".artignore": "src/\n"})
	agent := push(t, r, ws, "an agent's .artignore").Commit
	os.Remove(filepath.Join(ws, ".artignore"))
	push(t, r, ws, "v3")
	before := snapshot(t, ws)
	_, err := r.Pull(PullOptions{Dir: ws, Commit: agent})
	mustFail(t, err, ErrConflict)
	if !strings.Contains(err.Error(), ".artignore (added in the commit") {
		t.Errorf("message: %v", err)
	}
	if d := diffMaps(before, snapshot(t, ws)); d != "" {
		t.Fatalf("the refused pull changed the host:\n%s", d)
	}
	if _, err := r.Pull(PullOptions{Dir: ws, Commit: agent, Force: true}); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "ws")
	pull(t, r, fresh, agent)
	if _, err := os.Stat(filepath.Join(fresh, ".artignore")); err != nil {
		t.Errorf("a first pull left out the .artignore: %v", err)
	}
}

// A file named like a pull's temporary in a commit (an agent's) is never
// written, and does not block the next pull.
func TestPullSkipsPullTempNames(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n"})
	c := push(t, r, ws, "v1").Commit
	cm := mustCommit(t, r, c)
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	a := mustTree(t, r, wsTreeID(t, r, c, "ws")).Entries[0]
	a.Name = ".art-pull-tmp-1-ab"
	root, err := tx.ReplaceAt(cm.Tree, []string{"ws", a.Name}, &a)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := tx.PutCommit(&objects.Commit{Tree: root, Parents: []objects.ID{c}, Message: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	out := filepath.Join(t.TempDir(), "ws")
	for i := range 2 {
		if _, err := r.Pull(PullOptions{Dir: out, Commit: bad}); err != nil {
			t.Fatalf("pull %d: %v", i+1, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(out, a.Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pull wrote %s: %v", a.Name, err)
	}
}

// A pull that stops half way (here: the host filesystem fills) leaves the
// workspace part pulled. It is marked unfinished until a pull finishes or
// a push records the workspace: status says to finish it, and a push warns
// that it records the half (before, status offered 'art push' for the
// half-pulled files as if they were the user's changes).
func TestUnfinishedPull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to mount a small tmpfs")
	}
	r := newTestRepo(t)
	small := filepath.Join(t.TempDir(), "small")
	os.Mkdir(small, 0o755)
	if err := syscall.Mount("tmpfs", small, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(small, syscall.MNT_DETACH) })
	ws := filepath.Join(small, "ws")
	os.Mkdir(ws, 0o755)
	writeFiles(t, ws, map[string]string{"a.txt": "a\n"})
	push(t, r, ws, "small")
	big := filepath.Join(t.TempDir(), "ws") // another copy, synced as above
	pull(t, r, big, mustTip(t, r, "main"))
	files := map[string]string{"a.txt": "a\n"}
	for i := range 6 {
		files[fmt.Sprintf("big%d", i)] = strings.Repeat(fmt.Sprint(i), 400<<10)
	}
	writeFiles(t, big, files)
	v2 := pushTo(t, r, big, "big").Commit

	if _, err := r.Pull(PullOptions{Dir: ws, Commit: v2, Force: true}); err == nil || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("pull into a full filesystem: %v, want ENOSPC", err)
	}
	if id, ok, err := r.UnfinishedPull(ws); err != nil || !ok || id != v2 {
		t.Fatalf("UnfinishedPull = %s, %v, %v; want %s", id.Short(), ok, err, v2.Short())
	}
	if d, err := r.HostDrift(ws); err != nil || d.UnfinishedPull != v2 {
		t.Fatalf("HostDrift: %+v, %v", d, err)
	}
	// Room again: pulling again finishes it.
	if err := syscall.Mount("tmpfs", small, "tmpfs", syscall.MS_REMOUNT, "size=16m"); err != nil {
		t.Fatal(err)
	}
	pull(t, r, ws, v2)
	if _, ok, _ := r.UnfinishedPull(ws); ok {
		t.Error("still unfinished after a pull finished")
	}
	compareDirs(t, big, ws, false, true)

	// A push records the workspace as it is, half or not, and says so.
	r.DB.Exec(`INSERT INTO meta(key, value) VALUES(?, ?)`, pullingKey(ws), v2.String())
	var warned []string
	if _, err := r.Push(context.Background(), PushOptions{Dir: ws, Warn: func(s string) { warned = append(warned, s) }}); err != nil {
		t.Fatal(err)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "did not finish") || !strings.Contains(warned[0], "art pull -m "+ws+" --commit "+v2.Short()) {
		t.Errorf("push warnings %q", warned)
	}
	if _, ok, _ := r.UnfinishedPull(ws); ok {
		t.Error("still unfinished after a push")
	}

	// A damaged marker: status names it and the way out; push warns and
	// replaces it, as does pull.
	for _, finish := range []string{"push", "pull"} {
		r.DB.Exec(`INSERT INTO meta(key, value) VALUES(?, 'not an id')`, pullingKey(ws))
		if _, err := r.HostDrift(ws); !errors.Is(err, ErrPullMarkDamaged) || !strings.Contains(err.Error(), "art push -m "+ws) {
			t.Fatalf("HostDrift with a damaged marker: %v", err)
		}
		warned = nil
		if finish == "push" {
			if _, err := r.Push(context.Background(), PushOptions{Dir: ws, Warn: func(s string) { warned = append(warned, s) }}); err != nil {
				t.Fatalf("push over a damaged marker: %v", err)
			}
			if len(warned) != 1 || !strings.Contains(warned[0], "damaged") {
				t.Errorf("push warnings %q", warned)
			}
		} else if _, err := r.Pull(PullOptions{Dir: ws, Commit: v2, Force: true}); err != nil {
			t.Fatalf("pull over a damaged marker: %v", err)
		}
		if _, ok, err := r.UnfinishedPull(ws); ok || err != nil {
			t.Errorf("after %s: marker %v, %v", finish, ok, err)
		}
	}
}
