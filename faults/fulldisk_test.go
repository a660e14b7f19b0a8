package faults

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Full disk: the repository lives on a size-limited tmpfs mounted by the
// test. The agent must see ENOSPC (not EIO), the repository must stay
// valid, a commit either completes or leaves the previous state, and once
// space is freed the session goes on and commits.

const smallDisk = 48 << 20

// smallRepo mounts a tmpfs of size bytes and moves the env's repository
// onto it (before art init). The tmpfs is unmounted at cleanup, after
// every art process of the test ended.
func smallRepo(t *testing.T, e *env, size int) string {
	t.Helper()
	requireRoot(t)
	dir := filepath.Join(e.base, "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Skipf("skipping: cannot mount a size-limited tmpfs (%v)", err)
	}
	e.trackMount(dir)
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	e.db = filepath.Join(dir, "art.db")
	return dir
}

// smallExt4 mounts a fresh ext4 filesystem of size bytes, reserving
// reservedPct percent of it for root as mkfs.ext4 -m does, from an image
// file through a loop device, and returns its directory. It is unmounted
// at cleanup.
func smallExt4(t *testing.T, e *env, size, reservedPct int) string {
	t.Helper()
	requireRoot(t)
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Skipf("skipping: mkfs.ext4 is missing (%v); apt-get install -y e2fsprogs", err)
	}
	img := filepath.Join(e.base, "ext4.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, int64(size)); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-F", "-m", strconv.Itoa(reservedPct), img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	dir := filepath.Join(e.base, "ext4")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("skipping: cannot loop-mount an ext4 image here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	e.trackMount(dir)
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

func resizeTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("remount %s with size %d: %v", dir, size, err)
	}
}

// fillFile writes n random bytes to path in 1 MiB writes, then fsyncs and
// closes; it returns the data accepted by write(2) and the first error of
// each step.
func fillFile(rng *rand.Rand, path string, n int) (data []byte, werr, serr, cerr error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err, nil, nil
	}
	buf := make([]byte, 1<<20)
	for len(data) < n {
		fillRand(rng, buf)
		k, err := f.Write(buf)
		data = append(data, buf[:k]...)
		if err != nil {
			werr = err
			break
		}
	}
	serr = f.Sync()
	cerr = f.Close()
	return data, werr, serr, cerr
}

// wantENOSPC checks that the first error the writer saw is ENOSPC.
func wantENOSPC(t *testing.T, werr, serr, cerr error) {
	t.Helper()
	var first error
	for _, err := range []error{werr, serr, cerr} {
		if err != nil {
			first = err
			break
		}
	}
	t.Logf("writer saw: write %v, fsync %v, close %v", werr, serr, cerr)
	if first == nil {
		t.Fatal("writing more than the disk holds succeeded: no ENOSPC")
	}
	if !errors.Is(first, syscall.ENOSPC) {
		t.Fatalf("the writer saw %v, want ENOSPC (no space left on device)", first)
	}
}

func writeSmall(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("after freeing space: %v", err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatalf("after freeing space: write: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("after freeing space: fsync: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("after freeing space: close: %v", err)
	}
}

func TestFullDisk(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, e *env, small string, rng *rand.Rand, base manifest)
	}{
		{"mount/free-by-delete", fullDiskMountDelete},
		{"mount/free-by-resize", fullDiskMountResize},
		{"mount/commit-while-full", fullDiskCommitWhileFull},
		{"run/agent-sees-enospc", fullDiskRun},
		{"run/trace-log-does-not-fit", fullDiskTraceLog},
		{"run/continue-after-failed-recording", fullDiskContinue},
		{"push/larger-than-free-space", fullDiskPush},
		{"gc/compaction-does-not-fit", fullDiskGC},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requireRoot(t)
			if !strings.HasPrefix(c.name, "push") {
				requireFUSE(t)
			}
			if strings.HasPrefix(c.name, "run") {
				requireSandbox(t)
			}
			e := newEnv(t)
			rng := rngFor(t)
			small := smallRepo(t, e, smallDisk)
			base := seedWorkspace(t, e)
			c.run(t, e, small, rng, base)
			e.fsck(c.name)
			stats.add(func(s *campaign) { s.FullDisk = append(s.FullDisk, c.name) })
		})
	}
}

// fullDiskMountDelete: ENOSPC inside art mount, then the agent deletes the
// big file and goes on.
func fullDiskMountDelete(t *testing.T, e *env, small string, rng *rand.Rand, base manifest) {
	before := e.tip("main")
	p, mp, _ := e.mount("main")
	ws := filepath.Join(mp, filepath.Base(e.ws))
	writeSmall(t, filepath.Join(ws, "before.txt"), "written before the disk filled\n")
	_, werr, serr, cerr := fillFile(rng, filepath.Join(ws, "big"), 2*smallDisk)
	wantENOSPC(t, werr, serr, cerr)
	logUsage(t, small)
	e.fsck("ENOSPC inside the mount")
	if got := e.tip("main"); got != before {
		t.Fatalf("the branch moved while the disk was full: %s -> %s", before, got)
	}
	// Free the space from inside and go on.
	if err := os.Remove(filepath.Join(ws, "big")); err != nil {
		t.Fatalf("delete the big file: %v", err)
	}
	writeSmall(t, filepath.Join(ws, "after.txt"), "written after freeing space\n")
	id, r := e.stopMount(p, mp)
	if r.code != 0 || id == "" {
		t.Fatalf("the session did not commit after space was freed:\n%s", r)
	}
	checkTip(t, e, "main", base, map[string]string{"before.txt": "written before the disk filled\n", "after.txt": "written after freeing space\n"}, "big")
}

// fullDiskMountResize: ENOSPC, then the filesystem grows; the data that
// write(2) accepted is either committed whole or absent, never other bytes.
func fullDiskMountResize(t *testing.T, e *env, small string, rng *rand.Rand, base manifest) {
	p, mp, _ := e.mount("main")
	ws := filepath.Join(mp, filepath.Base(e.ws))
	big, werr, serr, cerr := fillFile(rng, filepath.Join(ws, "big"), 2*smallDisk)
	wantENOSPC(t, werr, serr, cerr)
	e.fsck("ENOSPC inside the mount")
	resizeTmpfs(t, small, 8*smallDisk)
	writeSmall(t, filepath.Join(ws, "after.txt"), "written after the resize\n")
	id, r := e.stopMount(p, mp)
	if r.code != 0 || id == "" {
		t.Fatalf("the session did not commit after the resize:\n%s", r)
	}
	dir := checkTip(t, e, "main", base, map[string]string{"after.txt": "written after the resize\n"})
	got, err := os.ReadFile(filepath.Join(dir, "big"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		t.Logf("the big file whose close failed is not in the commit")
	case err != nil:
		t.Fatal(err)
	case sumBytes(got) != sumBytes(big):
		t.Fatalf("the big file holds %d bytes that are not what was written (%d bytes)", len(got), len(big))
	default:
		t.Logf("the big file (close failed with ENOSPC, retried after the resize) is committed whole: %d bytes", len(got))
		stats.verified(1, int64(len(got)))
	}
	os.RemoveAll(filepath.Dir(dir))
}

// fullDiskCommitWhileFull: the session ends while the disk is full; the
// commit fails cleanly (the branch stays, the worktree is kept), and after
// the resize art commit records what was acknowledged.
func fullDiskCommitWhileFull(t *testing.T, e *env, small string, rng *rand.Rand, base manifest) {
	before := e.tip("main")
	p, mp, wt := e.mount("main")
	ws := filepath.Join(mp, filepath.Base(e.ws))
	writeSmall(t, filepath.Join(ws, "before.txt"), "acknowledged before the disk filled\n")
	_, werr, serr, cerr := fillFile(rng, filepath.Join(ws, "big"), 2*smallDisk)
	wantENOSPC(t, werr, serr, cerr)
	id, r := e.stopMount(p, mp)
	after := e.tip("main")
	switch {
	case r.code == 0 && id != "":
		// It fit after all: the commit completed.
		if !strings.HasPrefix(after, id) {
			t.Fatalf("art mount reported %s but the branch is at %s", id, after)
		}
		t.Logf("the commit completed on the full disk")
	case r.code != 0:
		t.Logf("commit on the full disk failed cleanly: %s", lastLine(r.stderr))
		if after != before {
			t.Fatalf("a failed commit moved the branch: %s -> %s", before, after)
		}
		if !strings.Contains(r.stderr, "worktree #"+wt) {
			t.Errorf("the error does not say where the changes are:\n%s", r)
		}
		e.fsck("a commit that failed on a full disk")
		resizeTmpfs(t, small, 8*smallDisk)
		cr := e.art("commit", "--worktree", wt)
		if cr.code != 0 {
			t.Fatalf("art commit after the resize failed:\n%s", cr)
		}
	default:
		t.Fatalf("art mount: exit 0 without a commit:\n%s", r)
	}
	dir := checkTip(t, e, "main", base, map[string]string{"before.txt": "acknowledged before the disk filled\n"})
	os.RemoveAll(filepath.Dir(dir))
}

// fullDiskRun: the agent inside art run fills the disk, sees ENOSPC,
// deletes its big file, writes a small one and exits 0; the session is
// recorded.
func fullDiskRun(t *testing.T, e *env, small string, rng *rand.Rand, base manifest) {
	script := `
import errno, os, sys
try:
    with open("big", "wb") as f:
        for i in range(96):
            f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())
    print("NOERROR")
except OSError as e:
    print("ERRNO", errno.errorcode.get(e.errno, e.errno), flush=True)
os.unlink("big")
with open("after.txt", "w") as f:
    f.write("the agent went on\n")
    f.flush()
    os.fsync(f.fileno())
print("DONE")
`
	r := e.art("run", "-m", e.ws, "-i=false", "--", "python3", "-c", script)
	if r.code != 0 {
		t.Fatalf("the session failed:\n%s", r)
	}
	if !strings.Contains(r.stdout, "ERRNO ENOSPC") || !strings.Contains(r.stdout, "DONE") {
		t.Fatalf("the agent did not see ENOSPC and go on:\n%s", r)
	}
	if !strings.Contains(r.stderr, "session recorded") {
		t.Fatalf("the session was not recorded:\n%s", r)
	}
	dir := checkTip(t, e, "main", base, map[string]string{"after.txt": "the agent went on\n"}, "big")
	os.RemoveAll(filepath.Dir(dir))
}

// fullDiskTraceLog: a traced session whose work fits on the disk but
// whose syscall log does not. SQLite writes a transaction's pages at its
// COMMIT, so the log fails the whole commit there; the session is then
// recorded again without the log, with the agent's exit status, and art
// says the log was lost.
func fullDiskTraceLog(t *testing.T, e *env, small string, rng *rand.Rand, base manifest) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(small, &st); err != nil {
		t.Fatal(err)
	}
	used := int(st.Blocks-st.Bfree) * int(st.Bsize)
	resizeTmpfs(t, small, used+1536<<10) // room for the session, not for its log (about 5 MB)
	script := `
import os
for i in range(40000):  # a syscall each, with a path that does not compress
    try: os.stat("/x/" + os.urandom(100).hex())
    except OSError: pass
with open("after.txt", "w") as f:
    f.write("the session fits\n")
`
	logFile := filepath.Join(e.base, "trace.txt")
	r := e.art("run", "-m", e.ws, "-i=false", "--trace-log", logFile, "--", "python3", "-c", script)
	logUsage(t, small)
	if r.code != 0 {
		t.Fatalf("a session whose log did not fit was not recorded (want the agent's exit 0):\n%s", r)
	}
	if !strings.Contains(r.stderr, "the syscall log was not stored") || !strings.Contains(r.stderr, "session recorded") {
		t.Fatalf("art did not say the log was lost and the session recorded:\n%s", r)
	}
	// art trace says the session was traced and its log lost (it said
	// "not traced"), and so does art show.
	if tr := e.art("trace", "main"); tr.code == 0 || !strings.Contains(tr.stderr, "was traced, but its syscall log could not be stored") {
		t.Fatalf("art trace of a session whose log was lost:\n%s", tr)
	}
	if sh := e.art("show", "main"); !strings.Contains(sh.stdout, "trace:     not stored (") {
		t.Fatalf("art show of a session whose log was lost:\n%s", sh)
	}
	if info, err := os.Stat(logFile); err != nil || info.Size() < 1<<20 {
		t.Fatalf("the --trace-log file on the host is missing or short (%v): the test's premise", err)
	}
	dir := checkTip(t, e, "main", base, map[string]string{"after.txt": "the session fits\n"})
	os.RemoveAll(filepath.Dir(dir))
}

// fullDiskContinue: an agent fills the disk with fsynced data and ends;
// the commit, which needs room of its own, fails, and the worktree keeps
// the work. The next command's recovery fails the same way and gives
// the room its attempt took back (the write-ahead log would otherwise
// hold it until the process ends); with room enough it records the
// session instead, and there is nothing to continue. The next art run
// continues the worktree, where the agent deletes its big file and
// writes again; that session is recorded.
func fullDiskContinue(t *testing.T, e *env, small string, rng *rand.Rand, base manifest) {
	fill := `
import errno, os
n = 0
try:
    with open("big", "wb") as f:
        while True:
            f.write(os.urandom(1 << 20)); n += 1
            if n % 4 == 0: os.fsync(f.fileno())
except OSError as e:
    print("ERRNO", errno.errorcode.get(e.errno, e.errno), n, flush=True)
`
	before := e.tip("main")
	r := e.art("run", "-m", e.ws, "-i=false", "--", "python3", "-c", fill)
	logUsage(t, small)
	if !strings.Contains(r.stdout, "ERRNO ENOSPC") {
		t.Fatalf("the agent did not see ENOSPC:\n%s", r)
	}
	if r.code == 0 {
		t.Skipf("the filled session was recorded after all (%s): nothing to continue", lastLine(r.stderr))
	}
	if r.code != 125 || !strings.Contains(r.stderr, "the changes stay in worktree") {
		t.Fatalf("a recording that failed on a full disk: want exit 125 and where the changes are:\n%s", r)
	}
	// Read from the database, not with an art command: every command
	// first records a session whose recording failed (cleanupStale).
	if got := e.branchTipRO("main"); got != before {
		t.Fatalf("a failed recording moved the branch: %s -> %s", before, got)
	}
	// The next command's recovery: whether it fits depends on how far
	// the applier was behind when the agent met ENOSPC (less written,
	// more room left). It fit in about 1 of 8 runs, in the art show that
	// read the tip here, and the test blamed its commit on the failed
	// recording.
	f := e.art("fsck")
	if f.code != 0 {
		t.Fatalf("art fsck after a recording that failed on a full disk is not clean:\n%s", f)
	}
	if strings.Contains(f.stderr, "recorded the interrupted session of worktree") {
		// Recorded as the session ended, on the tip it started from.
		c := e.show("main")
		if c.Session.Mode != "run" || c.Session.Status != "exited" || !strings.Contains(c.Message, "python3") {
			t.Fatalf("the recovered session %+v (%q), want the agent's run as it ended", c.Session, c.Message)
		}
		if p := e.show("main~1").ID; p != before {
			t.Fatalf("the recovered session's parent is %s, want %s", p, before)
		}
		if wts := e.worktrees(); len(wts) != 0 {
			t.Fatalf("worktrees left after the recovery: %+v", wts)
		}
		resizeTmpfs(t, small, 2*smallDisk) // room for the pull that checks it
		dir := checkTip(t, e, "main", base, nil)
		if info, err := os.Stat(filepath.Join(dir, "big")); err != nil || info.Size() == 0 {
			t.Fatalf("the recovered session lost big: %v", err)
		}
		os.RemoveAll(filepath.Dir(dir))
		t.Skipf("the next command recorded the session once the disk had room (%s): nothing to continue", lastLine(f.stderr))
	}
	if !strings.Contains(f.stderr, "could not record interrupted session") {
		t.Fatalf("the next command neither recorded the failed session nor said why:\n%s", f)
	}
	r = e.art("run", "-m", e.ws, "-i=false", "--", "sh", "-c",
		`test -s big && rm big && echo "written after the disk was full" > after.txt && sync after.txt && echo WROTE`)
	logUsage(t, small)
	if r.code != 0 || !strings.Contains(r.stdout, "WROTE") {
		t.Fatalf("the continued session could not free room and write:\n%s", r)
	}
	if !strings.Contains(r.stderr, "continuing interrupted worktree") || !strings.Contains(r.stderr, "session recorded") {
		t.Fatalf("the second run did not continue the worktree and record it:\n%s", r)
	}
	// The first session was never recorded: the commit holding its
	// work names it.
	if c := e.show("main"); !strings.Contains(c.Message, "Continues worktree #") || !strings.Contains(c.Message, "python3") {
		t.Errorf("the commit does not name the unrecorded session it continues:\n%s", c.Message)
	}
	dir := checkTip(t, e, "main", base, map[string]string{"after.txt": "written after the disk was full\n"}, "big")
	os.RemoveAll(filepath.Dir(dir))
	if g := e.art("gc"); g.code != 0 {
		t.Fatalf("art gc after the continued session:\n%s", g)
	}
}

// fullDiskPush: pushing a tree larger than the free space fails with a
// message, records nothing, and the repository keeps working.
func fullDiskPush(t *testing.T, e *env, small string, rng *rand.Rand, base manifest) {
	before := e.tip("main")
	buf := make([]byte, 4<<20)
	for i := 0; i < 2*smallDisk/len(buf); i++ {
		fillRand(rng, buf)
		if err := os.WriteFile(filepath.Join(e.ws, fmt.Sprintf("blob%02d", i)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := e.art("push", "-q", "-m", e.ws)
	if r.code != 1 {
		t.Fatalf("push larger than the disk: want exit 1, got:\n%s", r)
	}
	msg := strings.ToLower(r.stderr)
	if !strings.Contains(msg, "full") && !strings.Contains(msg, "space") {
		t.Errorf("the error does not say the disk is full:\n%s", r)
	}
	t.Logf("push failed cleanly: %s", lastLine(r.stderr))
	if got := e.tip("main"); got != before {
		t.Fatalf("a failed push moved the branch: %s -> %s", before, got)
	}
	e.fsck("a push that hit a full disk")
	// The repository still works: a branch, and a small push once the
	// big files are gone.
	e.artOK("branch", "after-full", "main")
	for i := 0; i < 2*smallDisk/len(buf); i++ {
		os.Remove(filepath.Join(e.ws, fmt.Sprintf("blob%02d", i)))
	}
	if err := os.WriteFile(filepath.Join(e.ws, "small.txt"), []byte("small\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.artOK("push", "-q", "-m", e.ws)
	checkTip(t, e, "main", base, map[string]string{"small.txt": "small\n"})
}

// fullDiskGC: gc frees a branch's objects, and the compaction that
// follows (VACUUM, which writes every live page again) does not fit on
// the disk: gc says so and succeeds (its warning was dropped), and the
// repository stays whole and usable.
func fullDiskGC(t *testing.T, e *env, small string, rng *rand.Rand, base manifest) {
	buf := make([]byte, 4<<20)
	write := func(prefix string) {
		for i := 0; i < 3; i++ {
			fillRand(rng, buf)
			if err := os.WriteFile(filepath.Join(e.ws, fmt.Sprintf("%s%d", prefix, i)), buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("live")
	e.artOK("push", "-q", "-m", e.ws)
	write("garbage")
	e.artOK("push", "-q", "-m", e.ws, "-b", "garbage")
	e.artOK("branch", "-d", "garbage")
	var st syscall.Statfs_t
	if err := syscall.Statfs(small, &st); err != nil {
		t.Fatal(err)
	}
	used := int(st.Blocks-st.Bfree) * int(st.Bsize)
	resizeTmpfs(t, small, used+3<<20) // room for the deletion, not to write 12 MB of live pages again
	logUsage(t, small)
	r := e.art("gc")
	logUsage(t, small)
	if r.code != 0 || !strings.Contains(r.stdout, "freed") || !strings.Contains(r.stderr, "the repository file was not compacted") {
		t.Fatalf("gc whose compaction does not fit: want exit 0, the objects freed and a warning:\n%s", r)
	}
	e.fsck("a gc whose compaction did not fit")
	for i := 0; i < 3; i++ {
		os.Remove(filepath.Join(e.ws, fmt.Sprintf("garbage%d", i)))
	}
	if err := os.WriteFile(filepath.Join(e.ws, "small.txt"), []byte("small\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.artOK("push", "-q", "-m", e.ws)
	checkTip(t, e, "main", base, map[string]string{"small.txt": "small\n"})
}

// checkTip pulls a branch into a scratch directory and checks the
// workspace's original files, the given extra files and that the absent
// ones are absent. It returns the directory.
func checkTip(t *testing.T, e *env, branch string, base manifest, files map[string]string, absent ...string) string {
	t.Helper()
	dir := filepath.Join(e.base, fmt.Sprintf("tip-%s-%d", branch, rng64()), filepath.Base(e.ws))
	r := e.art("pull", "-q", "-m", dir, "--commit", branch)
	if r.code != 0 {
		t.Fatalf("pull of %s failed:\n%s", branch, r)
	}
	got := snapshot(t, dir)
	for p, w := range base {
		if got[p] != w {
			t.Fatalf("%s: %s changed or missing", branch, p)
		}
	}
	for p, content := range files {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || string(b) != content {
			noteLost(t, []string{"missing " + p})
			t.Fatalf("%s: %s lost (err %v, %q)", branch, p, err, b)
		}
	}
	for _, p := range absent {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			t.Fatalf("%s: %s should not be in the commit", branch, p)
		}
	}
	stats.verified(len(base)+len(files), 0)
	stats.add(func(c *campaign) { c.CommitsVerified++ })
	return dir
}

func rng64() uint64 { return rand.Uint64() }

func lastLine(s string) string {
	l := lines(s)
	if len(l) == 0 {
		return ""
	}
	return l[len(l)-1]
}

// logUsage lists the repository's files on the small disk.
func logUsage(t *testing.T, dir string) {
	t.Helper()
	var b strings.Builder
	ents, _ := os.ReadDir(dir)
	for _, de := range ents {
		if info, err := de.Info(); err == nil {
			fmt.Fprintf(&b, " %s=%dK", de.Name(), info.Size()>>10)
		}
	}
	var st syscall.Statfs_t
	syscall.Statfs(dir, &st)
	t.Logf("small disk:%s; free %dK", b.String(), int64(st.Bavail)*st.Bsize>>10)
}
