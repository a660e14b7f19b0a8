package faults

import (
	"errors"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/overlay"
	"github.com/artproject/art/repo"
)

// Regression tests for bugs the fault suite found; each name says what
// broke.

// deadPid returns the pid of a process that has exited (and been reaped).
func deadPid(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

// A pull killed between creating its temporary file and renaming it left
// ".art-pull-tmp-PID-HEX" behind: the next pull kept it as host-only
// content and the next push stored it in the repository.
func TestKilledPullTemporariesAreRemovedAndNeverPushed(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.artOK("init", "-d", e.db)
	e.artOK("push", "-q", "-m", e.ws)
	want := snapshot(t, e.ws)
	dir := filepath.Join(e.base, "export", "ws")
	e.pullVerify("main", want)

	pid := deadPid(t)
	tmp := ".art-pull-tmp-" + strconv.Itoa(pid) + "-1f2e3d4c5b6a7980"
	for _, d := range []string{e.ws, dir} {
		if err := os.WriteFile(filepath.Join(d, tmp), []byte("half a file"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A push never stores a pull's temporary.
	r := e.artOK("push", "-m", e.ws)
	if strings.Contains(r.stdout, tmp) {
		t.Fatalf("push stored %s:\n%s", tmp, r)
	}
	// The next pull removes the dead pull's temporary and leaves exactly
	// the commit.
	e.pullVerify("main", want)
	if _, err := os.Lstat(filepath.Join(dir, tmp)); !os.IsNotExist(err) {
		t.Fatalf("%s still in the pulled directory (%v)", tmp, err)
	}
}

// overlayOnSmallDisk opens a worktree of a fresh repository that lives on a
// size-limited tmpfs, through the overlay API (no FUSE), with the overlay's
// log captured.
func overlayOnSmallDisk(t *testing.T, size int) (string, *repo.Repo, *overlay.FS, *syncBuf) {
	t.Helper()
	e := newEnv(t)
	small := smallRepo(t, e, size)
	r, err := repo.Init(e.db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	tree, _ := tx.EmptyTree()
	id, err := tx.PutCommit(&objects.Commit{Tree: tree, Time: 1, Author: "faults", Message: "empty"})
	if err != nil {
		t.Fatal(err)
	}
	tx.SetBranch("main", id)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wt, _, err := r.CreateWorktree("main", "mount", "", "")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuf{}
	fs, err := overlay.Open(r, wt, overlay.Options{Log: log.New(logs, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	return small, r, fs, logs
}

// writeBig writes n random bytes into a new file through the overlay and
// returns its inode and the error of the final Flush (close), or of the
// write that found the disk full (a writer the overlay throttles, once it
// holds 64 MiB for SQLite, journals then, and gets ENOSPC there).
func writeBig(t *testing.T, fs *overlay.FS, name string, n int) (uint64, error) {
	t.Helper()
	a, err := fs.Create(overlay.RootIno, name, 0o644, nil) // created open
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(seed, 7))
	for off := 0; off < n; off += len(buf) {
		fillRand(rng, buf)
		if _, err := fs.Write(a.Ino, buf, int64(off)); errors.Is(err, syscall.ENOSPC) {
			return a.Ino, err
		} else if err != nil {
			t.Fatalf("write at %d: %v", off, err)
		}
	}
	return a.Ino, fs.Flush(a.Ino)
}

func writeSmallFile(t *testing.T, fs *overlay.FS, name, content string) {
	t.Helper()
	a, err := fs.Create(overlay.RootIno, name, 0o644, nil)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if _, err := fs.Write(a.Ino, []byte(content), 0); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	if err := fs.Fsync(a.Ino); err != nil {
		t.Fatalf("fsync %s: %v", name, err)
	}
	fs.Released(a.Ino)
}

func fsckClean(t *testing.T, r *repo.Repo) {
	t.Helper()
	res, err := r.Fsck(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) > 0 {
		t.Fatalf("fsck: %v", res.Problems)
	}
}

// The journal took the last free bytes of the disk with a large file's
// data that SQLite then had no room to absorb: nothing could be applied,
// and the deletion of the file could not be journaled either, so deleting
// it inside the mount freed nothing and every later close failed.
func TestJournalLeavesRoomToApplySoDeletingABigFileFreesAFullDisk(t *testing.T) {
	requireRoot(t)
	_, r, fs, logs := overlayOnSmallDisk(t, smallDisk)
	ino, err := writeBig(t, fs, "big", 2*smallDisk)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("close of a file larger than the disk: %v, want ENOSPC\n%s", err, logs)
	}
	fs.Released(ino)
	if err := fs.Unlink(overlay.RootIno, "big"); err != nil {
		t.Fatal(err)
	}
	writeSmallFile(t, fs, "after", "the session goes on\n")
	if _, err := fs.Commit(overlay.CommitOptions{Message: "after a full disk"}); err != nil {
		t.Fatalf("commit after freeing space: %v\n%s", err, logs)
	}
	fsckClean(t, r)
}

// A journal append that failed on a full disk (the periodic one, for data
// nobody had flushed yet) left a sticky error that made the next commit
// fail, even after space had been freed and everything was journaled.
func TestCommitIsNotFailedByAnEarlierFailedJournalAppend(t *testing.T) {
	requireRoot(t)
	small, r, fs, logs := overlayOnSmallDisk(t, smallDisk)
	a, err := fs.Create(overlay.RootIno, "big", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(seed, 8))
	for off := 0; off < 2*smallDisk; off += len(buf) {
		fillRand(rng, buf)
		// Past 64 MiB held the writer is throttled and journals itself:
		// that append fails as the periodic one does.
		if _, err := fs.Write(a.Ino, buf, int64(off)); errors.Is(err, syscall.ENOSPC) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	// Wait for the periodic journal append to fail (nobody flushed).
	waitFor(t, time.Minute, "a failed periodic journal append", func() bool {
		return strings.Contains(logs.String(), "journal upper layer")
	})
	resizeTmpfs(t, small, 16*smallDisk)
	if err := fs.Flush(a.Ino); err != nil {
		t.Fatalf("flush after the resize: %v\n%s", err, logs)
	}
	fs.Released(a.Ino)
	if _, err := fs.Commit(overlay.CommitOptions{Message: "after the resize"}); err != nil {
		t.Fatalf("commit after the resize failed: %v\n%s", err, logs)
	}
	fsckClean(t, r)
}
