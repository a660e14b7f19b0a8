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
	r, fs, logs := overlayOn(t, e.db)
	return small, r, fs, logs
}

// overlayOn opens a worktree of a fresh repository at db, through the
// overlay API (no FUSE), with the overlay's log captured.
func overlayOn(t *testing.T, db string) (*repo.Repo, *overlay.FS, *syncBuf) {
	t.Helper()
	r, err := repo.Init(db)
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
	return r, fs, logs
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

// art runs as root, and the agent's writes took what root may take: an
// agent filled the repository's filesystem to its last megabyte, ext4's
// root reserve included, and the host's own services then failed as on a
// full disk. The agent now stops where an unprivileged user would; the
// commit, art's own write, still fits in the reserve.
func TestAgentWritesLeaveTheHostItsReserve(t *testing.T) {
	e := newEnv(t)
	// A reserve large enough for the commit, which stores a big file's
	// data once more (as content-defined chunks; the session's blocks go
	// at art gc).
	dir := smallExt4(t, e, 160<<20, 50)
	r, fs, logs := overlayOn(t, filepath.Join(dir, "art.db"))
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	reserve := int64(st.Bfree-st.Bavail) * st.Bsize
	t.Logf("ext4 of %d MiB, %d MiB reserved for root", int64(st.Blocks)*st.Bsize>>20, reserve>>20)
	// The agent writes 256 KiB and closes, again and again, and retries
	// after ENOSPC until the applier has caught up: the disk really fills.
	a, err := fs.Create(overlay.RootIno, "big", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256<<10)
	rng := rand.New(rand.NewPCG(seed, 9))
	fillRand(rng, buf)
	var written []byte // what write(2) took: the commit must keep it all
	for off, refused := 0, 0; refused < 20; {
		if off > 160<<20 {
			t.Fatalf("wrote %d bytes on a filesystem of %d without ENOSPC", off, int64(st.Blocks)*st.Bsize)
		}
		_, err := fs.Write(a.Ino, buf, int64(off))
		if err == nil {
			written = append(written[:off], buf...)
			err = fs.Flush(a.Ino)
		}
		switch {
		case errors.Is(err, syscall.ENOSPC):
			refused++
			time.Sleep(50 * time.Millisecond)
		case err != nil:
			t.Fatalf("write at %d: %v\n%s", off, err, logs)
		default:
			refused = 0
			off += len(buf)
			fillRand(rng, buf)
		}
	}
	fs.Released(a.Ino)
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bfree) * st.Bsize
	t.Logf("the agent saw ENOSPC with %.1f MiB free", float64(free)/(1<<20))
	// SQLite's use of the space is estimated when a record is journaled
	// (journal.go), and may overshoot by a little.
	if free < reserve-2<<20 {
		t.Fatalf("the agent's writes left %d bytes free, well below root's reserve of %d", free, reserve)
	}
	seen, err := fs.Statfs()
	if err != nil {
		t.Fatal(err)
	}
	if avail := int64(seen.Bavail) * seen.Bsize; avail > int64(st.Bavail)*st.Bsize {
		t.Errorf("statfs in the mount says %d bytes available, more than the %d an unprivileged user has", avail, int64(st.Bavail)*st.Bsize)
	}
	// The agent's last write, refused at its flush, is still in memory:
	// the commit, art's own write, keeps it, in the reserve (how much a
	// commit may take of it is left to the filesystem, as for any root
	// process: on a smaller reserve it fails cleanly, see TestFullDisk).
	id, err := fs.Commit(overlay.CommitOptions{Message: "after the agent's full disk"})
	if err != nil {
		t.Fatalf("commit on the agent's full disk: %v\n%s", err, logs)
	}
	fsckClean(t, r)
	c, err := r.LoadCommit(id)
	if err != nil {
		t.Fatal(err)
	}
	ent, ok, err := r.Lookup(c.Tree, []string{"big"})
	if err != nil || !ok {
		t.Fatalf("big is not in the commit (%v)", err)
	}
	got, err := r.ReadFile(ent.ID, int64(ent.Size))
	if err != nil {
		t.Fatal(err)
	}
	if sumBytes(got) != sumBytes(written) {
		t.Fatalf("the commit holds %d bytes of big, not the %d write(2) took", len(got), len(written))
	}
	stats.verified(1, int64(len(got)))
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
