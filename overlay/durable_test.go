package overlay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/artproject/art/repo"
)

// fsync(2) promises survival of a power loss. Data applied to SQLite
// (synchronous=NORMAL: its WAL is not fsynced at commit) and then dropped
// from the journal was promised by nothing; an fsync must then fsync the
// WAL, and a journal that was fsynced is only reset once SQLite holds its
// records as durably.
func TestFsyncCoversAppliedRecords(t *testing.T) {
	_, _, fs := newWorktreeFS(t)
	defer fs.Close()
	a, err := fs.Create(RootIno, "f", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	state := func() (applied, durable uint64, hard bool) {
		fs.p.jmu.Lock()
		defer fs.p.jmu.Unlock()
		fs.p.mu.Lock()
		defer fs.p.mu.Unlock()
		return fs.p.applied, fs.p.durable, fs.p.j.hard
	}
	// A close: journaled, applied, journal reset, nothing fsynced.
	if _, err := fs.Write(a.Ino, []byte("closed, not fsynced\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := fs.Flush(a.Ino); err != nil {
		t.Fatal(err)
	}
	if err := fs.p.drain(); err != nil {
		t.Fatal(err)
	}
	applied, durable, _ := state()
	if applied == 0 {
		t.Fatal("nothing applied after drain")
	}
	// fsync with nothing new to journal: the applied records must be
	// made durable in SQLite.
	if err := fs.Fsync(a.Ino); err != nil {
		t.Fatal(err)
	}
	if applied, durable, _ = state(); durable < applied {
		t.Fatalf("after fsync: %d records applied, only %d durable", applied, durable)
	}
	// A journal fsynced (here: by hand, so that no fsync call makes
	// SQLite durable on its own) then given a record: once that is applied
	// and the journal reset, SQLite must hold it durably.
	fs.p.jmu.Lock()
	err = fs.p.j.sync()
	fs.p.jmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Write(a.Ino, []byte("journaled after the fsync\n"), 20); err != nil {
		t.Fatal(err)
	}
	if err := fs.Flush(a.Ino); err != nil {
		t.Fatal(err)
	}
	// The applier resets the journal right after the batch drain waited
	// for.
	applied, durable, hard := state()
	for deadline := time.Now().Add(5 * time.Second); hard && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		applied, durable, hard = state()
	}
	if hard {
		t.Fatal("the journal was not reset once everything in it was applied")
	}
	if durable < applied {
		t.Fatalf("journal reset with %d records applied but only %d durable", applied, durable)
	}
}

// Regression: the 200 ms tick journaled a file's size with data still only
// in memory, so after a crash of art the file read back as that many zero
// bytes (and 'art commit' recorded them). A crash now leaves the file as
// its stored blocks have it: the old content, never bytes nobody wrote.
func TestCrashNeverShowsUnwrittenZeros(t *testing.T) {
	r, wt, fs := newWorktreeFS(t)
	a, err := fs.Create(RootIno, "log", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Write(a.Ino, []byte("stored line\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := fs.Flush(a.Ino); err != nil { // closed once: stored
		t.Fatal(err)
	}
	// Appended and truncated-then-extended, never closed or fsynced; the
	// tick journals the inode.
	if _, err := fs.Write(a.Ino, []byte("in memory only\n"), 12); err != nil {
		t.Fatal(err)
	}
	if err := fs.p.sync(false, agentRoom); err != nil {
		t.Fatal(err)
	}
	if got := readAfterCrash(t, r, wt, fs, "log"); got != "stored line\n" {
		t.Fatalf("after the crash the file reads %q, want the stored content", got)
	}
}

// readAfterCrash stops fs as a crash of art would (the persister stops,
// memory and unjournaled changes are lost), opens the worktree again and
// returns the content of the root's file name.
func readAfterCrash(t *testing.T, r *repo.Repo, wt *repo.Worktree, fs *FS, name string) string {
	t.Helper()
	if err := fs.p.close(); err != nil {
		t.Fatal(err)
	}
	fs.p.j.close()
	fs2, err := Open(r, wt, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs2.Close()
	attr, err := fs2.Lookup(RootIno, name)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := fs2.Read(attr.Ino, buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

// newWorktreeFS opens the overlay of a fresh mount worktree on main (an
// empty first commit) of a new repository.
func newWorktreeFS(t *testing.T) (*repo.Repo, *repo.Worktree, *FS) {
	t.Helper()
	return newWorktreeFSWith(t, Options{})
}

// newWorktreeFSWith is newWorktreeFS with the overlay's options.
func newWorktreeFSWith(t *testing.T, opts Options) (*repo.Repo, *repo.Worktree, *FS) {
	t.Helper()
	r, wt := newWorktree(t)
	fs, err := Open(r, wt, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r, wt, fs
}

// newWorktree makes a new repository with an empty first commit on main
// and a mount worktree on it, not opened.
func newWorktree(t *testing.T) (*repo.Repo, *repo.Worktree) {
	t.Helper()
	r, err := repo.Init(filepath.Join(t.TempDir(), "art.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if _, err := r.Push(context.Background(), repo.PushOptions{Dir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	wt, _, err := r.CreateWorktree("main", "mount", "", "")
	if err != nil {
		t.Fatal(err)
	}
	return r, wt
}

// A file may not grow past the size of the repository's filesystem (a
// commit hashes every byte, holes included: an agent's 1 PiB sparse file
// kept the commit, and every command after it, busy for days).
func TestFileSizeLimitedToRepositoryDisk(t *testing.T) {
	_, _, fs := newWorktreeFS(t)
	defer fs.Close()
	if fs.maxSize <= 0 || fs.maxSize >= MaxFileSize {
		t.Fatalf("limit %d: not the repository disk's size", fs.maxSize)
	}
	a, err := fs.Create(RootIno, "sparse", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := fs.maxSize + 1
	if _, err := fs.Setattr(a.Ino, SetAttr{Size: &big}); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("truncate past the limit: %v, want EFBIG", err)
	}
	if _, err := fs.Write(a.Ino, []byte("x"), fs.maxSize); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("write past the limit: %v, want EFBIG", err)
	}
	if err := fs.Allocate(a.Ino, 0, big, false); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("fallocate past the limit: %v, want EFBIG", err)
	}
	ok := int64(1 << 20)
	if _, err := fs.Setattr(a.Ino, SetAttr{Size: &ok}); err != nil {
		t.Errorf("truncate to 1 MiB: %v", err)
	}
}

// One file's xattrs take at most MaxXattrBytes together (ENOSPC beyond, as
// on a local filesystem); replacing a value counts it once.
func TestXattrTotalBounded(t *testing.T) {
	_, _, fs := newWorktreeFS(t)
	defer fs.Close()
	a, err := fs.Create(RootIno, "x", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	half := make([]byte, MaxXattrBytes/2-8) // with its name, 6 bytes short of half
	if err := fs.SetXattr(a.Ino, "user.a", half, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := fs.SetXattr(a.Ino, "user.b", half, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := fs.SetXattr(a.Ino, "user.c", []byte("one more"), 0, false); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("xattr past the bound: %v, want ENOSPC", err)
	}
	if err := fs.SetXattr(a.Ino, "user.a", half, 0, false); err != nil {
		t.Fatalf("replacing a value of the same size: %v", err)
	}
	if err := fs.SetXattr(a.Ino, "user.b", nil, 0, true); err != nil {
		t.Fatal(err)
	}
	if err := fs.SetXattr(a.Ino, "user.c", []byte("fits now"), 0, false); err != nil {
		t.Fatalf("after a removal: %v", err)
	}
}

// A Flush storing a file's data between a snapshot taking the dirty keys
// and reading the file's row: the record must not carry the new size
// without the blocks (a crash then showed zeros).
func TestSnapshotRacingFlushNeverShowsZeros(t *testing.T) {
	r, wt, fs := newWorktreeFS(t)
	a, err := fs.Create(RootIno, "f", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Flush(a.Ino); err != nil { // the empty file is journaled
		t.Fatal(err)
	}
	if _, err := fs.Write(a.Ino, []byte("written, then stored by a racing flush\n"), 0); err != nil {
		t.Fatal(err)
	}
	n := fs.inodes[a.Ino]
	fs.p.afterSwap = func() {
		fs.p.afterSwap = nil
		n.mu.Lock()
		fs.storeDirtyLocked(n)
		n.mu.Unlock()
	}
	if err := fs.p.sync(false, agentRoom); err != nil {
		t.Fatal(err)
	}
	// The crash comes before the flush's own record.
	if got := readAfterCrash(t, r, wt, fs, "f"); got != "" && got != "written, then stored by a racing flush\n" {
		t.Fatalf("after the crash the file reads %q", got)
	}
}

// No path in the home grows past MaxPathLen (push and pull reach host
// files by full paths; an agent nesting 2,100 directories made them fail).
func TestPathLengthBounded(t *testing.T) {
	_, _, fs := newWorktreeFS(t)
	defer fs.Close()
	dir := uint64(RootIno)
	name := strings.Repeat("d", 250)
	depth := 0
	for {
		a, err := fs.Mkdir(dir, name, 0o755, nil)
		if errors.Is(err, syscall.ENAMETOOLONG) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		dir, depth = a.Ino, depth+1
		if depth > 100 {
			t.Fatal("no bound on the path length")
		}
	}
	if got := depth * 251; got > MaxPathLen+251 || got < MaxPathLen-251 {
		t.Errorf("stopped at depth %d (%d bytes), bound %d", depth, got, MaxPathLen)
	}
	if _, err := fs.Create(dir, name, 0o644, nil); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("create past the bound: %v", err)
	}
	if _, err := fs.Create(dir, "x", 0o644, nil); err != nil {
		t.Errorf("a short name still fits: %v", err)
	}
}

// All files' xattrs together take at most MaxXattrTotal of art's memory
// (ENOSPC beyond); removing a value, deleting a file or shrinking a value
// gives the room back, and a remount counts what it loads.
func TestXattrMemoryBounded(t *testing.T) {
	r, wt, fs := newWorktreeFS(t)
	value := make([]byte, MaxXattrBytes-16)
	per := int64(len("user.v") + len(value))
	files := int(MaxXattrTotal / per)
	var inos []uint64
	for i := 0; i <= files; i++ {
		a, err := fs.Create(RootIno, fmt.Sprintf("f%d", i), 0o644, nil)
		if err != nil {
			t.Fatal(err)
		}
		inos = append(inos, a.Ino)
		err = fs.SetXattr(a.Ino, "user.v", value, 0, false)
		if i < files && err != nil {
			t.Fatalf("file %d of %d: %v", i, files, err)
		}
		if i == files && !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("xattr past the total bound: %v, want ENOSPC", err)
		}
	}
	last := inos[files]
	// Each way of giving room back lets one more file take a value, and
	// no more.
	for i, free := range []struct {
		name string
		do   func() error
	}{
		{"remove a value", func() error { return fs.SetXattr(inos[0], "user.v", nil, 0, true) }},
		{"shrink a value", func() error { return fs.SetXattr(inos[1], "user.v", []byte("short"), 0, false) }},
		{"unlink a file", func() error { fs.Released(inos[2]); return fs.Unlink(RootIno, "f2") }},
		{"unlink an open file, then close it", func() error {
			if err := fs.Unlink(RootIno, "f3"); err != nil {
				return err
			}
			fs.Released(inos[3])
			return nil
		}},
	} {
		if err := free.do(); err != nil {
			t.Fatalf("%s: %v", free.name, err)
		}
		a, err := fs.Create(RootIno, fmt.Sprintf("extra%d", i), 0o644, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.SetXattr(a.Ino, "user.v", value, 0, false); err != nil {
			t.Fatalf("after %s: %v", free.name, err)
		}
		if err := fs.SetXattr(last, "user.v", value, 0, false); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("after %s, a second value: %v, want ENOSPC", free.name, err)
		}
	}
	// Remount: the loaded upper layer counts.
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	fs2, err := Open(r, wt, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs2.Close()
	a, err := fs2.Lookup(RootIno, fmt.Sprintf("f%d", files))
	if err != nil {
		t.Fatal(err)
	}
	if err := fs2.SetXattr(a.Ino, "user.v", value, 0, false); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("after a remount, an xattr past the total bound: %v, want ENOSPC", err)
	}
}

// A file unlinked while open when art died is garbage at the next mount:
// its xattrs are not counted against MaxXattrTotal, at that mount or any
// later one.
func TestXattrMemoryOfGarbageAfterCrash(t *testing.T) {
	r, wt, fs := newWorktreeFS(t)
	a, err := fs.Create(RootIno, "f", 0o644, nil) // left open
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.SetXattr(a.Ino, "user.v", make([]byte, MaxXattrBytes-16), 0, false); err != nil {
		t.Fatal(err)
	}
	if err := fs.Unlink(RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	if err := fs.p.sync(false, agentRoom); err != nil {
		t.Fatal(err)
	}
	if err := fs.p.close(); err != nil { // art dies with the file open
		t.Fatal(err)
	}
	fs.p.j.close()
	for i := range 2 {
		fs2, err := Open(r, wt, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := fs2.xattrMem.Load()
		if err := fs2.Close(); err != nil {
			t.Fatal(err)
		}
		if got != 0 {
			t.Errorf("mount %d after the crash: %d xattr bytes counted, want 0", i+1, got)
		}
	}
}

// A writer faster than the applier waits once more than heldLimit of
// block data is held for it, instead of piling the data up in memory (a
// 2 GB file of random bytes took 2-3 GB of RSS), and goes on once the
// applier catches up; everything written reads back.
func TestWriterThrottledByHeldData(t *testing.T) {
	_, _, fs := newWorktreeFS(t)
	defer fs.Close()
	release := make(chan struct{})
	fs.p.mu.Lock()
	fs.p.heldLimit = 1 << 20
	fs.p.beforeApply = func() error { <-release; return nil }
	fs.p.mu.Unlock()
	a, err := fs.Create(RootIno, "big", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := randomBytes(3 * dirtyLimit)
	const step = 1 << 20
	wrote := make(chan error, 1)
	var written atomic.Int64
	go func() {
		for off := 0; off < len(data); off += step {
			if _, err := fs.Write(a.Ino, data[off:off+step], int64(off)); err != nil {
				wrote <- err
				return
			}
			written.Store(int64(off + step))
		}
		wrote <- nil
	}()
	// The first dirtyLimit bytes are stored (held) at once; the write
	// after that must wait for the blocked applier.
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-wrote:
		close(release)
		t.Fatalf("all %d bytes written (%v) with the applier blocked and %d bytes held", len(data), err, fs.p.held.Load())
	default:
	}
	if held, max := fs.p.held.Load(), int64(dirtyLimit+2*step); held > max {
		t.Errorf("%d bytes held with the writer throttled, want at most %d", held, max)
	}
	if w := written.Load(); w > dirtyLimit+step {
		t.Errorf("%d bytes written with the applier blocked, want at most %d", w, dirtyLimit+step)
	}
	close(release)
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the writer did not go on once the applier did")
	}
	if err := fs.Flush(a.Ino); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if n, err := fs.Read(a.Ino, got, 0); err != nil || n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("read back %d of %d bytes (%v), equal: %v", n, len(data), err, bytes.Equal(got[:n], data[:n]))
	}
	fs.Released(a.Ino)
}

// A throttled writer whose data the applier cannot store, the disk
// being full, gets ENOSPC rather than waiting for ever; once the applier
// succeeds again, writes go on and nothing acknowledged is lost.
func TestThrottledWriterSeesFullDisk(t *testing.T) {
	_, _, fs := newWorktreeFS(t)
	defer fs.Close()
	var full atomic.Bool
	full.Store(true)
	fs.p.mu.Lock()
	fs.p.heldLimit = 1 << 20
	fs.p.beforeApply = func() error {
		if full.Load() {
			return fmt.Errorf("insert chunk: %w", syscall.ENOSPC)
		}
		return nil
	}
	fs.p.mu.Unlock()
	a, err := fs.Create(RootIno, "big", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := randomBytes(2 * dirtyLimit)
	const step = 1 << 20
	off := 0
	for ; off < len(data); off += step {
		_, err = fs.Write(a.Ino, data[off:off+step], int64(off))
		if err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write at %d with the applier failing on a full disk: %v, want ENOSPC", off, err)
	}
	full.Store(false)
	for ; off < len(data); off += step {
		if _, err := fs.Write(a.Ino, data[off:off+step], int64(off)); err != nil {
			t.Fatalf("write at %d once the disk has room again: %v", off, err)
		}
	}
	if err := fs.Flush(a.Ino); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if n, err := fs.Read(a.Ino, got, 0); err != nil || n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("read back %d of %d bytes (%v)", n, len(data), err)
	}
	fs.Released(a.Ino)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{1}).Read(b)
	return b
}

// Chunks a block stopped naming before they were journaled (the block
// stored again, as a linker patching a header does, or cut off by a
// truncation) are dropped from memory once nothing names them: they were
// kept for good, and counted against the writer throttle. A file
// unlinked while open, rewritten and freed on release leaves nothing
// held either, and reads back whole until then.
func TestUnnamedPendingChunksDropped(t *testing.T) {
	_, _, fs := newWorktreeFS(t)
	defer fs.Close()
	write := func(ino uint64, data []byte, off int) {
		t.Helper()
		for i := 0; i < len(data); i += 1 << 20 {
			end := min(i+1<<20, len(data))
			if _, err := fs.Write(ino, data[i:end], int64(off+i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	settle := func() { t.Helper(); settle(t, fs) }
	readBack := func(ino uint64, want []byte, what string) {
		t.Helper()
		got := make([]byte, len(want))
		if n, err := fs.Read(ino, got, 0); err != nil || n != len(want) || !bytes.Equal(got, want) {
			t.Fatalf("%s: read %d of %d bytes (%v), equal: %v", what, n, len(want), err, bytes.Equal(got, want))
		}
	}
	// A file past the dirty limit (its blocks stored, not journaled),
	// whose first blocks are then written again, and which is truncated.
	a, err := fs.Create(RootIno, "patched", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := randomBytes(dirtyLimit + 4*BlockSize)
	write(a.Ino, data, 0)
	for round := range 3 {
		patch := bytes.Repeat([]byte{byte(round + 1)}, 2*BlockSize)
		write(a.Ino, patch, 0)
		copy(data, patch)
		if err := fs.Flush(a.Ino); err != nil { // stores the patch: the old chunks lose their name
			t.Fatal(err)
		}
	}
	size := int64(len(data) - 3*BlockSize)
	if _, err := fs.Setattr(a.Ino, SetAttr{Size: &size}); err != nil {
		t.Fatal(err)
	}
	data = data[:size]
	settle()
	settle() // the chunks the last snapshot dropped are applied by now
	if held := fs.p.held.Load(); held != 0 {
		t.Errorf("%d bytes of block data still held with everything journaled and applied", held)
	}
	readBack(a.Ino, data, "patched file")
	fs.Released(a.Ino)

	// An unlinked file still open: its data stays readable.
	b, err := fs.Create(RootIno, "unlinked", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := randomBytes(dirtyLimit + 2*BlockSize)
	other[0] ^= 0xff // not the content above
	write(b.Ino, other, 0)
	if err := fs.Unlink(RootIno, "unlinked"); err != nil {
		t.Fatal(err)
	}
	patch := bytes.Repeat([]byte{9}, BlockSize)
	write(b.Ino, patch, BlockSize)
	copy(other[BlockSize:], patch)
	if err := fs.Flush(b.Ino); err != nil {
		t.Fatal(err)
	}
	settle()
	settle()
	readBack(b.Ino, other, "unlinked open file")
	fs.Released(b.Ino)
	settle()
	settle()
	if held := fs.p.held.Load(); held != 0 {
		t.Errorf("%d bytes of block data still held once the unlinked file was released", held)
	}
}

// A node belongs to whoever created it (the directory's group when the
// directory is set-group-ID) or was given with chown, for the session:
// through a crash (the journal) and a reopen (SQLite), not into a commit,
// which records no owner. A node no one gave another owner follows the
// mount's owner.
func TestOwnersKeptForTheSession(t *testing.T) {
	r, wt, fs := newWorktreeFS(t)
	fs.Close()
	mountOwner := Owner{UID: 1000, GID: 1000}
	// Quiet: the crash below makes the applier fail on purpose.
	fs, err := Open(r, wt, Options{Owner: mountOwner, Log: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	other := &Owner{UID: 2000, GID: 2001}
	must := func(a Attr, err error) Attr {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	shared := must(fs.Mkdir(RootIno, "shared", 0o775, nil))
	gid := uint32(50)
	mode := uint32(0o2775)
	must(fs.Setattr(shared.Ino, SetAttr{GID: &gid, Mode: &mode}))
	a := must(fs.Create(RootIno, "a", 0o644, other))
	must(fs.Create(shared.Ino, "b", 0o644, other))
	must(fs.Mkdir(shared.Ino, "sub", 0o755, other))
	must(fs.Symlink(RootIno, "l", "a", other))
	must(fs.Create(RootIno, "c", 0o644, nil))
	uid := uint32(3000)
	must(fs.Setattr(a.Ino, SetAttr{UID: &uid}))
	want := map[string]Owner{
		"a": {3000, 2001}, "shared": {1000, 50}, "shared/b": {2000, 50}, "shared/sub": {2000, 50},
		"l": {2000, 2001}, "c": mountOwner,
	}
	check := func(stage string, fs *FS, want map[string]Owner) {
		t.Helper()
		for p, o := range want {
			ino := uint64(RootIno)
			var attr Attr
			for _, name := range strings.Split(p, "/") {
				attr = must(fs.Lookup(ino, name))
				ino = attr.Ino
			}
			if attr.UID != o.UID || attr.GID != o.GID {
				t.Errorf("%s: %s owned by %d:%d, want %d:%d", stage, p, attr.UID, attr.GID, o.UID, o.GID)
			}
		}
		if p := "shared/sub"; want[p] != mountOwner {
			if attr := must(fs.Lookup(must(fs.Lookup(RootIno, "shared")).Ino, "sub")); attr.Mode&syscall.S_ISGID == 0 {
				t.Errorf("%s: a directory made in a set-group-ID one lost the bit: %o", stage, attr.Mode)
			}
		}
	}
	check("made", fs, want)
	// A crash with the changes only in the journal: SQLite refuses them
	// (as on a full disk), so they stay there for the replay.
	fs.p.mu.Lock()
	fs.p.beforeApply = func() error { return fmt.Errorf("insert: %w", syscall.ENOSPC) }
	fs.p.mu.Unlock()
	if err := fs.p.sync(false, agentRoom); err != nil {
		t.Fatal(err)
	}
	fs.p.close()
	fs.p.j.close()
	if st, err := os.Stat(JournalPath(r, wt)); err != nil || st.Size() <= int64(len(journalHeader(wt))) {
		t.Fatalf("the journal holds no record to replay: %v %v", st, err)
	}
	var rows int
	if err := r.DB.QueryRow(`SELECT count(*) FROM upper_inodes WHERE wt=? AND uid IS NOT NULL`, wt.ID).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d owned rows already in SQLite (%v): the crash would not test the replay", rows, err)
	}
	fs, err = Open(r, wt, Options{Owner: mountOwner})
	if err != nil {
		t.Fatal(err)
	}
	check("after a crash", fs, want)
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened by another user: what no one gave an owner follows it.
	newOwner := Owner{UID: 1500, GID: 1501}
	fs, err = Open(r, wt, Options{Owner: newOwner})
	if err != nil {
		t.Fatal(err)
	}
	want["c"] = newOwner
	check("reopened by another user", fs, want)
	if _, err := fs.Commit(CommitOptions{Message: "owners"}); err != nil {
		t.Fatal(err)
	}
	wt2, _, err := r.CreateWorktree("main", "mount", "", "")
	if err != nil {
		t.Fatal(err)
	}
	fs, err = Open(r, wt2, Options{Owner: mountOwner})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	for p := range want {
		want[p] = mountOwner
	}
	check("committed", fs, want)
}

// A session's temporary files (created, written, closed, deleted) leave
// nothing in memory: 200,000 of them held 284 MB of art's memory.
func TestDeletedFilesLeaveMemory(t *testing.T) {
	_, _, fs := newWorktreeFS(t)
	defer fs.Close()
	before := len(fs.inodes)
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("tmp%d", i)
		a, err := fs.Create(RootIno, name, 0o644, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Write(a.Ino, []byte("temporary\n"), 0); err != nil {
			t.Fatal(err)
		}
		if err := fs.Flush(a.Ino); err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 0: // closed, then deleted
			fs.Released(a.Ino)
			err = fs.Unlink(RootIno, name)
		case 1: // deleted while open, then closed
			err = fs.Unlink(RootIno, name)
			fs.Released(a.Ino)
		case 2: // replaced by a rename over it
			var b Attr
			if b, err = fs.Create(RootIno, name+".new", 0o644, nil); err == nil {
				fs.Released(b.Ino)
				fs.Released(a.Ino)
				err = fs.Rename(RootIno, name+".new", RootIno, name, 0)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// The files renamed over the others are alive: one per three.
	if got, want := len(fs.inodes)-before, 1000/3; got > want+1 {
		t.Errorf("%d nodes in memory after the deletions, want at most %d", got, want+1)
	}
	// Until the kernel forgets them, the freed ones' attributes remain,
	// for fstat of a descriptor that holds one without an open.
	_, freed := fs.NodeCounts()
	if freed < 600 {
		t.Fatalf("%d freed nodes keep their attributes, want the 666 deleted", freed)
	}
	for ino := range fs.dead {
		a, err := fs.Getattr(ino)
		if err != nil || a.Nlink != 0 || a.Ino != ino {
			t.Fatalf("Getattr of a freed node: %+v, %v; want its attributes with no link", a, err)
		}
	}
	for ino := range fs.dead {
		fs.Forget(ino)
	}
	if _, freed := fs.NodeCounts(); freed != 0 {
		t.Errorf("%d freed nodes left after the kernel forgot them all", freed)
	}
}

// A deletion whose journal append failed is journaled by the next one,
// although the freed node is no longer in memory.
func TestFailedAppendKeepsDeletionOfFreedNode(t *testing.T) {
	r, wt, fs := newWorktreeFS(t)
	a, err := fs.Create(RootIno, "gone", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	fs.Released(a.Ino)
	if err := fs.Flush(a.Ino); err != nil {
		t.Fatal(err)
	}
	if err := fs.p.drain(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Unlink(RootIno, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, ok := fs.inodes[a.Ino]; ok {
		t.Fatal("the freed node is still in memory")
	}
	// The append fails: the record's keys go back.
	fs.p.jmu.Lock()
	rec := fs.p.snapshot()
	fs.p.restore(rec)
	fs.p.jmu.Unlock()
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := r.DB.QueryRow(`SELECT count(*) FROM upper_inodes WHERE wt=? AND ino=?`, wt.ID, a.Ino).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("the deleted file's row is still in the upper layer")
	}
}

// All files' unflushed data together stays near MaxDirty: many open files
// each below the per-file bound kept it all in art's memory, for the
// session's end to journal past the disk's reserve for the host. The
// count of dirty blocks stays exact through writes, truncations, flushes
// and deletions.
func TestUnflushedDataBoundedAcrossFiles(t *testing.T) {
	const maxDirty = 4 << 20
	_, _, fs := newWorktreeFSWith(t, Options{MaxDirty: maxDirty})
	defer fs.Close()
	count := func() int64 {
		var n int64
		for _, node := range fs.inodes {
			node.mu.Lock()
			n += int64(len(node.dirty))
			node.mu.Unlock()
		}
		return n
	}
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 1<<20)
	var inos []uint64
	for i := 0; i < 20; i++ {
		a, err := fs.Create(RootIno, fmt.Sprintf("f%d", i), 0o644, nil)
		if err != nil {
			t.Fatal(err)
		}
		inos = append(inos, a.Ino)
		for off := 0; off < 2<<20; off += len(buf) { // 2 MiB each, never flushed
			for j := range buf {
				buf[j] = byte(rng.Uint32())
			}
			if _, err := fs.Write(a.Ino, buf, int64(off)); err != nil {
				t.Fatal(err)
			}
		}
		if got := fs.dirtyBlocks.Load() * BlockSize; got > maxDirty+2<<20 {
			t.Fatalf("after %d files of 2 MiB: %d bytes unflushed, want at most %d", i+1, got, maxDirty+2<<20)
		}
	}
	// Truncations, flushes and deletions keep the count exact.
	var err error
	for i, ino := range inos {
		switch i % 4 {
		case 0:
			size := int64(100_000)
			_, err = fs.Setattr(ino, SetAttr{Size: &size})
		case 1:
			err = fs.Flush(ino)
		case 2:
			fs.Released(ino)
			err = fs.Unlink(RootIno, fmt.Sprintf("f%d", i))
		case 3:
			_, err = fs.Write(ino, buf[:10], 5<<20)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fs.dirtyBlocks.Load(), count(); got != want {
			t.Fatalf("after step %d: %d dirty blocks counted, %d held", i, got, want)
		}
	}
}

// A chunk the applier has just stored stays in memory while a putChunk of
// the same content is on its way to a block (pinned): that block's record
// must carry the data again, since a gc may free the stored copy before
// the record is applied. The applier dropped it, pins or not.
func TestApplyKeepsAPinnedChunk(t *testing.T) {
	_, _, fs := newWorktreeFS(t)
	defer fs.Close()
	entered, release := make(chan struct{}, 100), make(chan struct{})
	fs.p.mu.Lock()
	fs.p.beforeApply = func() error { entered <- struct{}{}; <-release; return nil }
	fs.p.mu.Unlock()
	a, err := fs.Create(RootIno, "a", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := randomBytes(BlockSize)
	if _, err := fs.Write(a.Ino, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := fs.Flush(a.Ino); err != nil { // a record carries the chunk
		t.Fatal(err)
	}
	fs.Released(a.Ino)
	<-entered // the applier holds that record
	id := fs.p.putChunk(data, false)
	close(release)
	if err := fs.p.drain(); err != nil {
		t.Fatal(err)
	}
	fs.p.mu.Lock()
	c := fs.p.chunks[id]
	if c != nil {
		c.pins-- // as storedBlock would
	}
	fs.p.mu.Unlock()
	if c == nil {
		t.Fatal("the applier dropped a chunk a block is about to name")
	}
}

// A file freed by a rename over it, which the kernel then opens (it looked
// the name up first), reads as the old file, also after art gc (which
// keeps what the upper layer's rows name), and takes writes until its
// release, as a file unlinked while open does.
func TestFreedFileReopened(t *testing.T) {
	r, _, fs := newWorktreeFS(t)
	defer fs.Close()
	settle := func() { t.Helper(); settle(t, fs) }
	old := randomBytes(3 * BlockSize)
	a, err := fs.Create(RootIno, "tool", 0o755, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Write(a.Ino, old, 0); err != nil {
		t.Fatal(err)
	}
	if err := fs.Flush(a.Ino); err != nil {
		t.Fatal(err)
	}
	fs.Released(a.Ino)
	b, err := fs.Create(RootIno, "tool.new", 0o755, nil)
	if err != nil {
		t.Fatal(err)
	}
	fs.Write(b.Ino, []byte("new tool"), 0)
	fs.Flush(b.Ino)
	fs.Released(b.Ino)
	if err := fs.Rename(RootIno, "tool.new", RootIno, "tool", 0); err != nil {
		t.Fatal(err)
	}
	settle() // the old tool's deletion is applied
	if _, freed := fs.NodeCounts(); freed != 1 {
		t.Fatalf("%d freed nodes, want the old tool", freed)
	}
	if err := fs.Open(a.Ino, true); err != nil {
		t.Fatalf("open of the freed file as the kernel looked it up: %v", err)
	}
	settle() // its rows are back
	if _, err := r.GC(r.WorktreeRoots); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(old))
	if n, err := fs.Read(a.Ino, got, 0); err != nil || n != len(old) || !bytes.Equal(got, old) {
		t.Fatalf("read of the reopened file after gc: %d bytes, %v", n, err)
	}
	if _, err := fs.Write(a.Ino, []byte("patched"), 0); err != nil {
		t.Fatalf("write to the reopened file: %v", err)
	}
	settle()
	if n, err := fs.Read(a.Ino, got[:7], 0); err != nil || n != 7 || string(got[:7]) != "patched" {
		t.Fatalf("read back: %q, %v", got[:n], err)
	}
	fs.Released(a.Ino)
	if _, freed := fs.NodeCounts(); freed != 1 {
		t.Fatalf("%d freed nodes after the release, want it freed again", freed)
	}
	fs.Forget(a.Ino)
	if _, freed := fs.NodeCounts(); freed != 0 {
		t.Fatalf("%d freed nodes after the kernel forgot it", freed)
	}
	if err := fs.Open(a.Ino, false); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("open of a forgotten node: %v, want ESTALE", err)
	}
	settle()
	if res, err := r.Fsck(nil); err != nil || len(res.Problems) > 0 {
		t.Fatalf("fsck: %v %v", err, res.Problems)
	}
}

// settle journals and applies everything the overlay holds.
func settle(t *testing.T, fs *FS) {
	t.Helper()
	if err := fs.p.sync(false, agentRoom); err != nil {
		t.Fatal(err)
	}
	if err := fs.p.drain(); err != nil {
		t.Fatal(err)
	}
}

// An fsync journals what was written and fsyncs the journal (what the
// agent's fsync(2) promises, before SQLite holds it): with the applier
// held, the record stays in the journal, which must then be marked hard.
func TestFsyncSyncsTheJournal(t *testing.T) {
	_, _, fs := newWorktreeFS(t)
	release := make(chan struct{})
	defer func() { close(release); fs.Close() }()
	fs.p.mu.Lock()
	fs.p.beforeApply = func() error { <-release; return nil }
	fs.p.mu.Unlock()
	a, err := fs.Create(RootIno, "f", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Write(a.Ino, []byte("fsynced\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := fs.Fsync(a.Ino); err != nil {
		t.Fatal(err)
	}
	fs.p.jmu.Lock()
	hard := fs.p.j.hard
	fs.p.jmu.Unlock()
	if !hard {
		t.Fatal("fsync returned with the journal not fsynced")
	}
}

// The applier resets the journal once everything queued is applied, but
// only if nothing was journaled meanwhile: a record appended between its
// batch and the reset is in no other place until it is applied, and a
// reset then dropped it (lost at a crash, fsynced or not).
func TestJournalResetKeepsARecordJournaledMeanwhile(t *testing.T) {
	_, _, fs := newWorktreeFS(t)
	defer fs.Close()
	release := make(chan struct{})
	fs.p.mu.Lock()
	fs.p.beforeApply = func() error { <-release; return nil }
	fs.p.mu.Unlock()
	applied := func() uint64 {
		fs.p.mu.Lock()
		defer fs.p.mu.Unlock()
		return fs.p.applied
	}
	if _, err := fs.Create(RootIno, "first", 0o644, nil); err != nil {
		t.Fatal(err)
	}
	if err := fs.p.sync(false, agentRoom); err != nil {
		t.Fatal(err)
	}
	// Hold the journal while the applier applies the first record: it
	// then waits here to reset the journal.
	fs.p.jmu.Lock()
	close(release)
	for deadline := time.Now().Add(5 * time.Second); applied() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			fs.p.jmu.Unlock()
			t.Fatal("the first record was not applied")
		}
	}
	time.Sleep(20 * time.Millisecond)
	// Journal a second record meanwhile, as sync does.
	if _, err := fs.Create(RootIno, "second", 0o644, nil); err != nil {
		fs.p.jmu.Unlock()
		t.Fatal(err)
	}
	rec := fs.p.snapshot()
	if err := fs.p.j.append(rec, fs.p.pendingBytes(), agentRoom); err != nil {
		fs.p.jmu.Unlock()
		t.Fatal(err)
	}
	fs.p.mu.Lock()
	fs.p.queue = append(fs.p.queue, rec)
	fs.p.queued++
	fs.p.covered = rec.mark
	fs.p.mu.Unlock()
	fs.p.jmu.Unlock()
	time.Sleep(50 * time.Millisecond) // the applier's reset step
	fs.p.jmu.Lock()
	defer fs.p.jmu.Unlock()
	st, err := fs.p.j.f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if applied() < 2 && st.Size() <= int64(len(journalMagic)+16) {
		t.Fatal("the journal was reset with a record in it not yet applied")
	}
}

// A deleted file leaves the upper layer whole, its blocks too: left
// behind, they keep their chunks from gc for good (WorktreeRoots names
// every block), under an inode number a later file may take.
func TestDeletedFileLeavesNoBlocks(t *testing.T) {
	r, wt, fs := newWorktreeFS(t)
	defer fs.Close()
	a, err := fs.Create(RootIno, "f", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Write(a.Ino, randomBytes(3*BlockSize), 0); err != nil {
		t.Fatal(err)
	}
	if err := fs.Flush(a.Ino); err != nil {
		t.Fatal(err)
	}
	if err := fs.p.drain(); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var n int
		if err := r.DB.QueryRow(`SELECT count(*) FROM upper_blocks WHERE wt=? AND ino=?`, wt.ID, int64(a.Ino)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count() == 0 {
		t.Fatal("the file's blocks were not stored")
	}
	fs.Released(a.Ino)
	if err := fs.Unlink(RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	fs.Forget(a.Ino)
	if err := fs.p.sync(false, agentRoom); err != nil {
		t.Fatal(err)
	}
	if err := fs.p.drain(); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d blocks of the deleted file left in the upper layer", n)
	}
}
