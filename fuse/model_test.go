package fuse

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The randomized model test applies the same random operations to the
// mount and to a plain reference directory and compares the results
// (errno, data read) after every step and the whole trees periodically,
// then again after a remount of the same worktree and after a commit and
// a mount of the new commit.
//
//	ART_MODEL_SEED=N  replay a seed (printed by every run)
//	ART_MODEL_OPS=N   number of operations (default 3000, 20000 with ART_LONG=1)
//	ART_MODEL_CHECK_EVERY=N  compare the whole trees every N steps (default 100)

// modelTime is the base of explicitly set times: far before any "now",
// so an mtime below testStart was set explicitly and not touched since.
var modelTime = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC).UnixNano()

// setupModelLower writes the initial workspace; both the lower layer of
// the mount and the reference start from it. Times are set explicitly so
// both copies carry the same ones.
func setupModelLower(dir string) {
	rng := rand.New(rand.NewSource(42))
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	var paths []string
	file := func(rel string, size int) {
		p := filepath.Join(dir, rel)
		must(os.MkdirAll(filepath.Dir(p), 0o755))
		data := make([]byte, size)
		rng.Read(data)
		must(os.WriteFile(p, data, 0o644))
		paths = append(paths, rel)
	}
	file("a", 10)
	file("b", 70<<10) // two blocks
	file("c/a", 1000)
	file("c/b", 300<<10)
	file("c/d/e", 5)
	file("c/d/a", 0)
	file("d/a", 64<<10)
	file("d/b/c", 100)
	file("d/b/d", 200)
	file("e/f/a", 123)
	file("e/f/b/c", 7)
	must(os.Mkdir(filepath.Join(dir, "f"), 0o700))
	must(os.Symlink("a", filepath.Join(dir, "l")))
	must(os.Symlink("d/b", filepath.Join(dir, "c", "l")))
	paths = append(paths, "l", "c/l", "f")
	// Directories last, deepest first, so their times stay as set.
	must(filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			paths = append(paths, rel)
		}
		return err
	}))
	sort.SliceStable(paths, func(i, j int) bool { return strings.Count(paths[i], "/") > strings.Count(paths[j], "/") })
	for i, rel := range paths {
		ts := []unix.Timespec{unix.NsecToTimespec(modelTime + int64(i)*1_000_000_007), unix.NsecToTimespec(modelTime + int64(i)*999_999_937 + 123)}
		must(unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(dir, rel), ts, unix.AT_SYMLINK_NOFOLLOW))
	}
}

// modelSide is one of the two trees with its open descriptors.
type modelSide struct {
	name string
	root string
	fds  map[int]int // handle number → fd
}

func (s *modelSide) p(rel string) string { return filepath.Join(s.root, rel) }

type opResult struct {
	errno syscall.Errno
	out   string
}

func res(err error) opResult { return opResult{errno: errnoOf(err)} }

type modelTest struct {
	t         *testing.T
	base      string // the subtree this model works in (relative to both roots)
	rng       *rand.Rand
	ref, mnt  *modelSide
	m         *testMount
	testStart int64
	nextFD    int
	// checkpoints: every 1000 operations, remount the same worktree or
	// commit and continue on the new commit (only when the model owns the
	// whole mount).
	checkpoints bool
	log         []string
}

var modelNames = []string{"a", "b", "c", "d", "e", "f", "g"}

// entries lists the reference subtree (paths relative to the roots);
// dirs[0] is the subtree itself.
func (mt *modelTest) entries() (dirs, others []string) {
	root := mt.ref.p(mt.base)
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(mt.ref.root, p)
		if info.IsDir() {
			dirs = append(dirs, rel)
		} else {
			others = append(others, rel)
		}
		return nil
	})
	return dirs, others
}

// path picks an existing path (any type) or a new name in an existing
// directory.
func (mt *modelTest) path() string {
	dirs, others := mt.entries()
	switch r := mt.rng.Intn(10); {
	case r < 4 && len(others) > 0:
		return others[mt.rng.Intn(len(others))]
	case r < 6 && len(dirs) > 1:
		return dirs[1+mt.rng.Intn(len(dirs)-1)]
	default:
		return filepath.Join(dirs[mt.rng.Intn(len(dirs))], modelNames[mt.rng.Intn(len(modelNames))])
	}
}

func (mt *modelTest) data(n int) []byte {
	b := make([]byte, n)
	mt.rng.Read(b)
	return b
}

// size picks a length: mostly small, sometimes several blocks.
func (mt *modelTest) size() int {
	switch r := mt.rng.Intn(20); {
	case r < 12:
		return mt.rng.Intn(5000)
	case r < 18:
		return mt.rng.Intn(200 << 10)
	default:
		return mt.rng.Intn(1 << 20)
	}
}

func (mt *modelTest) offset(cur int64) int64 {
	switch r := mt.rng.Intn(10); {
	case r < 6:
		return mt.rng.Int63n(cur + 1)
	case r < 9:
		return cur + mt.rng.Int63n(300<<10) // beyond EOF: a hole
	default:
		return mt.rng.Int63n(8 << 20)
	}
}

func (mt *modelTest) refSize(rel string) int64 {
	var st unix.Stat_t
	if unix.Lstat(mt.ref.p(rel), &st) != nil {
		return 0
	}
	return st.Size
}

// op is one random operation, run on both sides.
type op struct {
	desc  string
	paths []string // paths to stat on both sides afterwards
	do    func(s *modelSide) opResult
}

const openFlags = unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

func (mt *modelTest) randomOp() op {
	rng := mt.rng
	switch k := rng.Intn(100); {
	case k < 12: // create or overwrite a file, write at an offset
		p := mt.path()
		flags := unix.O_CREAT | unix.O_WRONLY
		if rng.Intn(4) == 0 {
			flags |= unix.O_TRUNC
		}
		if rng.Intn(6) == 0 {
			flags |= unix.O_EXCL
		}
		if rng.Intn(8) == 0 {
			flags |= unix.O_APPEND
		}
		mode := uint32(0o600 | rng.Intn(0o200))
		off := mt.offset(mt.refSize(p))
		data := mt.data(mt.size())
		return op{fmt.Sprintf("open(%s, %#x, %o) pwrite(%d bytes at %d) close", p, flags, mode, len(data), off), []string{p}, func(s *modelSide) opResult {
			fd, err := unix.Open(s.p(p), flags|openFlags, mode)
			if err != nil {
				return res(err)
			}
			// Data written into a fifo goes through the kernel's pipe code:
			// a local filesystem then updates the fifo's mtime, FUSE never
			// hears of it (the kernel marks FUSE inodes S_NOCMTIME), so
			// the model does not write into fifos.
			var st unix.Stat_t
			if unix.Fstat(fd, &st); st.Mode&unix.S_IFMT == unix.S_IFIFO {
				unix.Close(fd)
				return opResult{out: "fifo"}
			}
			if flags&unix.O_APPEND != 0 {
				_, err = unix.Write(fd, data)
			} else {
				_, err = unix.Pwrite(fd, data, off)
			}
			if cerr := unix.Close(fd); err == nil {
				err = cerr
			}
			return res(err)
		}}
	case k < 20: // read a range
		p := mt.path()
		off := mt.offset(mt.refSize(p))
		n := mt.size()
		return op{fmt.Sprintf("pread(%s, %d at %d)", p, n, off), nil, func(s *modelSide) opResult {
			fd, err := unix.Open(s.p(p), unix.O_RDONLY|openFlags, 0)
			if err != nil {
				return res(err)
			}
			defer unix.Close(fd)
			buf := make([]byte, n)
			k, err := unix.Pread(fd, buf, off)
			if err != nil {
				return res(err)
			}
			return opResult{out: fmt.Sprintf("%d:%x", k, sha(buf[:k]))}
		}}
	case k < 27: // truncate up or down
		p := mt.path()
		cur := mt.refSize(p)
		var size int64
		if rng.Intn(2) == 0 {
			size = rng.Int63n(cur + 1)
		} else {
			size = cur + rng.Int63n(400<<10)
		}
		return op{fmt.Sprintf("truncate(%s, %d)", p, size), []string{p}, func(s *modelSide) opResult {
			return res(unix.Truncate(s.p(p), size))
		}}
	case k < 38: // rename, with flags
		src, dst := mt.path(), mt.path()
		var flags uint
		switch rng.Intn(5) {
		case 0:
			flags = unix.RENAME_NOREPLACE
		case 1:
			flags = unix.RENAME_EXCHANGE
		}
		return op{fmt.Sprintf("renameat2(%s, %s, %d)", src, dst, flags), []string{src, dst}, func(s *modelSide) opResult {
			return res(unix.Renameat2(unix.AT_FDCWD, s.p(src), unix.AT_FDCWD, s.p(dst), flags))
		}}
	case k < 45: // unlink
		p := mt.path()
		return op{fmt.Sprintf("unlink(%s)", p), []string{p}, func(s *modelSide) opResult {
			return res(unix.Unlink(s.p(p)))
		}}
	case k < 50: // link
		src, dst := mt.path(), mt.path()
		return op{fmt.Sprintf("link(%s, %s)", src, dst), []string{src, dst}, func(s *modelSide) opResult {
			return res(unix.Link(s.p(src), s.p(dst)))
		}}
	case k < 54: // symlink (targets stay inside the tree)
		p := mt.path()
		target := modelNames[rng.Intn(len(modelNames))]
		if rng.Intn(3) == 0 {
			target += "/" + modelNames[rng.Intn(len(modelNames))]
		}
		return op{fmt.Sprintf("symlink(%s, %s)", target, p), []string{p}, func(s *modelSide) opResult {
			return res(unix.Symlink(target, s.p(p)))
		}}
	case k < 61: // mkdir
		p := mt.path()
		mode := uint32(0o700 | rng.Intn(0o100))
		return op{fmt.Sprintf("mkdir(%s, %o)", p, mode), []string{p}, func(s *modelSide) opResult {
			return res(unix.Mkdir(s.p(p), mode))
		}}
	case k < 66: // rmdir (non-empty ones fail with ENOTEMPTY)
		p := mt.path()
		return op{fmt.Sprintf("rmdir(%s)", p), []string{p}, func(s *modelSide) opResult {
			return res(unix.Rmdir(s.p(p)))
		}}
	case k < 70: // chmod
		p := mt.path()
		mode := uint32(0o400 | rng.Intn(0o7777))
		return op{fmt.Sprintf("chmod(%s, %o)", p, mode), []string{p}, func(s *modelSide) opResult {
			return res(unix.Fchmodat(unix.AT_FDCWD, s.p(p), mode, 0))
		}}
	case k < 75: // utimens with ns precision, not following symlinks
		p := mt.path()
		ts := []unix.Timespec{unix.NsecToTimespec(modelTime + rng.Int63n(1e18)), unix.NsecToTimespec(modelTime + rng.Int63n(1e17))}
		switch rng.Intn(6) {
		case 0:
			ts[0] = unix.Timespec{Nsec: unix.UTIME_OMIT}
		case 1:
			ts[1] = unix.Timespec{Nsec: unix.UTIME_NOW}
		}
		return op{fmt.Sprintf("utimensat(%s, %v)", p, ts), []string{p}, func(s *modelSide) opResult {
			return res(unix.UtimesNanoAt(unix.AT_FDCWD, s.p(p), ts, unix.AT_SYMLINK_NOFOLLOW))
		}}
	case k < 77: // mkfifo
		p := mt.path()
		return op{fmt.Sprintf("mkfifo(%s)", p), []string{p}, func(s *modelSide) opResult {
			return res(unix.Mkfifo(s.p(p), 0o644))
		}}
	case k < 80: // xattrs
		p := mt.path()
		name := "user." + modelNames[rng.Intn(3)]
		val := fmt.Sprintf("v%d", rng.Intn(1000))
		switch rng.Intn(3) {
		case 0:
			return op{fmt.Sprintf("lremovexattr(%s, %s)", p, name), []string{p}, func(s *modelSide) opResult {
				return res(unix.Lremovexattr(s.p(p), name))
			}}
		default:
			return op{fmt.Sprintf("lsetxattr(%s, %s=%s)", p, name, val), []string{p}, func(s *modelSide) opResult {
				return res(unix.Lsetxattr(s.p(p), name, []byte(val), 0))
			}}
		}
	case k < 86: // open a descriptor and keep it
		if len(mt.ref.fds) >= 8 {
			return mt.fdOp()
		}
		p := mt.path()
		flags := unix.O_RDWR
		if rng.Intn(3) == 0 {
			flags |= unix.O_CREAT
		}
		h := mt.nextFD
		mt.nextFD++
		return op{fmt.Sprintf("fd%d = open(%s, %#x)", h, p, flags), []string{p}, func(s *modelSide) opResult {
			fd, err := unix.Open(s.p(p), flags|openFlags, 0o644)
			if err != nil {
				return res(err)
			}
			s.fds[h] = fd
			return opResult{}
		}}
	default:
		return mt.fdOp()
	}
}

// fdOp works through a kept descriptor: the file may have been renamed,
// unlinked or replaced since it was opened.
func (mt *modelTest) fdOp() op {
	rng := mt.rng
	if len(mt.ref.fds) == 0 {
		return op{"nop", nil, func(s *modelSide) opResult { return opResult{} }}
	}
	var hs []int
	for h := range mt.ref.fds {
		hs = append(hs, h)
	}
	sort.Ints(hs)
	h := hs[rng.Intn(len(hs))]
	var st unix.Stat_t
	unix.Fstat(mt.ref.fds[h], &st)
	switch rng.Intn(6) {
	case 0:
		return op{fmt.Sprintf("close(fd%d)", h), nil, func(s *modelSide) opResult {
			err := unix.Close(s.fds[h])
			delete(s.fds, h)
			return res(err)
		}}
	case 1, 2:
		off := mt.offset(st.Size)
		data := mt.data(mt.size())
		return op{fmt.Sprintf("pwrite(fd%d, %d bytes at %d)", h, len(data), off), nil, func(s *modelSide) opResult {
			_, err := unix.Pwrite(s.fds[h], data, off)
			return res(err)
		}}
	case 3:
		size := rng.Int63n(st.Size + 100<<10 + 1)
		return op{fmt.Sprintf("ftruncate(fd%d, %d)", h, size), nil, func(s *modelSide) opResult {
			return res(unix.Ftruncate(s.fds[h], size))
		}}
	case 4:
		return op{fmt.Sprintf("fsync(fd%d)", h), nil, func(s *modelSide) opResult {
			return res(unix.Fsync(s.fds[h]))
		}}
	default:
		off := mt.offset(st.Size)
		n := mt.size()
		return op{fmt.Sprintf("pread(fd%d, %d at %d) + fstat", h, n, off), nil, func(s *modelSide) opResult {
			buf := make([]byte, n)
			k, err := unix.Pread(s.fds[h], buf, off)
			if err != nil {
				return res(err)
			}
			var st unix.Stat_t
			if err := unix.Fstat(s.fds[h], &st); err != nil {
				return res(err)
			}
			return opResult{out: fmt.Sprintf("%d:%x size=%d nlink=%d mode=%o", k, sha(buf[:k]), st.Size, st.Nlink, st.Mode)}
		}}
	}
}

// statLine describes a path for the per-step comparison.
func (mt *modelTest) statLine(s *modelSide, rel string) string {
	var st unix.Stat_t
	if err := unix.Lstat(s.p(rel), &st); err != nil {
		return "err " + errnoOf(err).Error()
	}
	line := fmt.Sprintf("%s mode=%o nlink=%d", typeName(st.Mode), st.Mode&0o7777, st.Nlink)
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		line += fmt.Sprintf(" size=%d", st.Size)
	}
	return line
}

func (mt *modelTest) closeAll() {
	for _, s := range []*modelSide{mt.ref, mt.mnt} {
		for h, fd := range s.fds {
			if err := unix.Close(fd); err != nil {
				mt.t.Errorf("%s: close fd%d: %v", s.name, h, err)
			}
			delete(s.fds, h)
		}
	}
}

// compareFull compares both trees; with identity set it also checks that
// hard links share an inode number exactly where the reference's do.
func (mt *modelTest) compareFull(when string, identity bool) map[string]fileInfo {
	mt.t.Helper()
	want := snapshot(mt.t, mt.ref.p(mt.base))
	got := snapshot(mt.t, mt.mnt.p(mt.base))
	// Times set explicitly are compared exactly. The reference's times
	// come from the kernel's coarse clock, which lags time.Now by up to a
	// tick: a file made in the first milliseconds of the run can carry a
	// time just before testStart, so only times a second before it count
	// as explicit (an operation at the run's start was taken for one, its
	// creation times differing by milliseconds between the two sides).
	diffs := compareTrees(want, got, cmpOpts{dirModes: true, mtime: func(rel string) bool {
		return want[rel].Mtime < mt.testStart-1e9
	}})
	// A time that changed during the run (set to "now" by a change or by
	// UTIME_NOW) must be a plausible "now" on the mount too.
	now := time.Now().UnixNano()
	for rel, w := range want {
		if g, ok := got[rel]; ok && w.Mtime >= mt.testStart && (g.Mtime < mt.testStart-1e9 || g.Mtime > now+1e9) {
			diffs = append(diffs, fmt.Sprintf("%s: mtime %d, want a time of the run (reference %d)", rel, g.Mtime, w.Mtime))
		}
	}
	if identity {
		groups := map[uint64]uint64{} // ref ino → mount ino
		used := map[uint64]uint64{}   // mount ino → ref ino
		for rel, w := range want {
			g, ok := got[rel]
			if !ok {
				continue
			}
			// A directory's count is 2 + its subdirectories, as on ext4.
			if w.Nlink != g.Nlink {
				diffs = append(diffs, fmt.Sprintf("%s: nlink %d, want %d", rel, g.Nlink, w.Nlink))
			}
			if mi, ok := groups[w.Ino]; ok && mi != g.Ino {
				diffs = append(diffs, fmt.Sprintf("%s: inode %d, but its hard links have %d", rel, g.Ino, mi))
			}
			if ri, ok := used[g.Ino]; ok && ri != w.Ino {
				diffs = append(diffs, fmt.Sprintf("%s: inode %d shared with an unrelated file", rel, g.Ino))
			}
			groups[w.Ino], used[g.Ino] = g.Ino, w.Ino
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		if len(diffs) > 30 {
			diffs = append(diffs[:30], fmt.Sprintf("... and %d more", len(diffs)-30))
		}
		mt.t.Fatalf("%s: trees differ:\n  %s\nlast operations:\n  %s", when, strings.Join(diffs, "\n  "), strings.Join(mt.tail(), "\n  "))
	}
	return got
}

func (mt *modelTest) tail() []string {
	if len(mt.log) > 25 {
		return mt.log[len(mt.log)-25:]
	}
	return mt.log
}

func sha(b []byte) []byte {
	h := fnv64(b)
	return []byte(strconv.FormatUint(h, 16))
}

func fnv64(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

func envInt(name string, def int64) int64 {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil {
			return n
		}
	}
	return def
}

func longTests() bool { return os.Getenv("ART_LONG") != "" && !testing.Short() }

// modelOps is the number of operations of a model run.
func modelOps() int {
	def := int64(3000)
	if longTests() {
		def = 20000
	} else if testing.Short() {
		def = 500
	}
	return int(envInt("ART_MODEL_OPS", def))
}

func modelSeed(t *testing.T) int64 {
	seed := envInt("ART_MODEL_SEED", time.Now().UnixNano())
	t.Logf("seed %d (replay: ART_MODEL_SEED=%d)", seed, seed)
	fmt.Fprintf(os.Stderr, "%s: seed %d (replay with ART_MODEL_SEED=%d)\n", t.Name(), seed, seed)
	return seed
}

// newModel sets up the reference copy of base (the lower layer holds the
// same content at the same place) and the two sides.
func newModel(t *testing.T, m *testMount, refRoot, base string, seed int64) *modelTest {
	if err := os.MkdirAll(filepath.Join(refRoot, base), 0o755); err != nil {
		t.Fatal(err)
	}
	setupModelLower(filepath.Join(refRoot, base))
	return &modelTest{
		t: t, base: base, rng: rand.New(rand.NewSource(seed)), m: m,
		ref:       &modelSide{name: "reference", root: refRoot, fds: map[int]int{}},
		mnt:       &modelSide{name: "mount", root: m.Dir, fds: map[int]int{}},
		testStart: time.Now().UnixNano(),
	}
}

// run applies nops random operations to both sides, comparing every
// result, and closes the kept descriptors at the end.
func (mt *modelTest) run(nops int, seed int64) map[string][2]int {
	t := mt.t
	defer mt.closeAll()
	mt.compareFull("initial lower layer", true)
	stats := map[string][2]int{} // op kind → [succeeded, failed]
	for i := 0; i < nops; i++ {
		o := mt.randomOp()
		mt.log = append(mt.log, fmt.Sprintf("#%d %s", i, o.desc))
		want := o.do(mt.ref)
		got := o.do(mt.mnt)
		kind, _, _ := strings.Cut(o.desc, "(")
		if _, k, ok := strings.Cut(kind, " = "); ok {
			kind = k
		}
		c := stats[kind]
		if want.errno == 0 {
			c[0]++
		} else {
			c[1]++
		}
		stats[kind] = c
		if want != got {
			t.Fatalf("step #%d %s:\n  reference: %v %q\n  mount:     %v %q\nlast operations:\n  %s\n(seed %d)", i, o.desc, want.errno, want.out, got.errno, got.out, strings.Join(mt.tail(), "\n  "), seed)
		}
		for _, p := range o.paths {
			if w, g := mt.statLine(mt.ref, p), mt.statLine(mt.mnt, p); w != g {
				t.Fatalf("step #%d %s: lstat(%s):\n  reference: %s\n  mount:     %s\nlast operations:\n  %s\n(seed %d)", i, o.desc, p, w, g, strings.Join(mt.tail(), "\n  "), seed)
			}
		}
		if every := int(envInt("ART_MODEL_CHECK_EVERY", 100)); i%every == every-1 {
			mt.compareFull(fmt.Sprintf("after step #%d (seed %d)", i, seed), true)
		}
		if mt.checkpoints && i%1000 == 999 && i+1 < nops {
			mt.checkpoint(fmt.Sprintf("step #%d (seed %d)", i, seed))
		}
	}
	return stats
}

// checkpoint closes the kept descriptors and either remounts the same
// worktree or commits and continues on a worktree of the new commit.
func (mt *modelTest) checkpoint(when string) {
	mt.closeAll()
	before := mt.compareFull("before the checkpoint at "+when, true)
	if mt.rng.Intn(2) == 0 {
		mt.log = append(mt.log, "--- remount")
		mt.m.Remount()
		after := mt.compareFull("after a remount at "+when, true)
		for rel, b := range before {
			if a := after[rel]; a.Ino != b.Ino {
				mt.t.Fatalf("%s: inode %d before the remount at %s, %d after", rel, b.Ino, when, a.Ino)
			}
		}
		return
	}
	mt.log = append(mt.log, "--- commit")
	mt.m.Commit("checkpoint")
	// A tree has no hard links: the commit stores each name as its own
	// file. Split the reference's links the same way, keeping every
	// attribute, so both sides go on alike.
	mt.splitLinks(before)
	mt.compareFull("after a commit at "+when, true)
}

// splitLinks replaces every hard-linked name in the reference by its own
// copy with the same attributes, as a commit stores them.
func (mt *modelTest) splitLinks(before map[string]fileInfo) {
	for rel, fi := range before {
		if fi.Type == "dir" || fi.Nlink < 2 {
			continue
		}
		p := mt.ref.p(filepath.Join(mt.base, rel))
		tmp := p + ".split"
		var st, dst unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			mt.t.Fatal(err)
		}
		unix.Lstat(filepath.Dir(p), &dst)
		// The directory's times stay as they are on the mount.
		defer unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Dir(p), []unix.Timespec{dst.Atim, dst.Mtim}, 0)
		var err error
		switch fi.Type {
		case "file":
			var data []byte
			if data, err = os.ReadFile(p); err == nil {
				err = os.WriteFile(tmp, data, 0o600)
			}
		case "symlink":
			err = os.Symlink(fi.Target, tmp)
		case "fifo":
			err = unix.Mkfifo(tmp, 0o600)
		}
		if err != nil {
			mt.t.Fatal(err)
		}
		if fi.Type != "symlink" {
			unix.Chmod(tmp, st.Mode&0o7777)
			for _, kv := range strings.Split(fi.Xattrs, ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					unix.Lsetxattr(tmp, k, []byte(v), 0)
				}
			}
		}
		unix.UtimesNanoAt(unix.AT_FDCWD, tmp, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
		if err := os.Rename(tmp, p); err != nil {
			mt.t.Fatal(err)
		}
	}
}

// TestModel: random operations on the mount and on a reference directory
// over a pushed lower layer, compared step by step, then after a remount
// of the same worktree and after a commit and a mount of the new commit.
func TestModel(t *testing.T) {
	requireFUSE(t)
	seed := modelSeed(t)
	nops := modelOps()
	m := newTestMount(t, setupModelLower)
	mt := newModel(t, m, filepath.Join(t.TempDir(), "ref"), wsName, seed)
	mt.checkpoints = true
	// setupModelLower put the lower layer at ws/ itself, with its times.
	stats := mt.run(nops, seed)
	before := mt.compareFull("end of the run", true)
	t.Logf("%d operations, final tree: %d entries; operations (ok/failed): %v", nops, len(before), stats)

	// The same worktree, remounted: the persisted upper layer, with the
	// same inode numbers.
	m.Remount()
	after := mt.compareFull("after a remount of the same worktree", true)
	for rel, b := range before {
		if a := after[rel]; a.Ino != b.Ino {
			t.Errorf("%s: inode %d before the remount, %d after", rel, b.Ino, a.Ino)
		}
	}

	// Commit and mount the new commit. Hard links become separate files
	// in a tree, so identity is not compared.
	m.Commit("model")
	mt.compareFull("after commit and a mount of the new commit", false)
	if longTests() {
		m.Remount()
		mt.compareFull("after a remount of the committed worktree", false)
	}
}

// TestModelParallel runs independent models in separate subtrees of one
// mount at the same time: the FUSE server serves them concurrently, so
// the overlay's locking is exercised (run it with -race).
func TestModelParallel(t *testing.T) {
	requireFUSE(t)
	seed := modelSeed(t)
	const workers = 4
	nops := modelOps() / workers
	m := newTestMount(t, func(dir string) {
		for i := 0; i < workers; i++ {
			os.Mkdir(filepath.Join(dir, fmt.Sprintf("p%d", i)), 0o755)
			setupModelLower(filepath.Join(dir, fmt.Sprintf("p%d", i)))
		}
	})
	refRoot := filepath.Join(t.TempDir(), "ref")
	models := make([]*modelTest, workers)
	for i := range models {
		models[i] = newModel(t, m, refRoot, filepath.Join(wsName, fmt.Sprintf("p%d", i)), seed+int64(i))
	}
	t.Run("workers", func(t *testing.T) {
		for i, mt := range models {
			t.Run(fmt.Sprintf("p%d", i), func(t *testing.T) {
				t.Parallel()
				mt.t = t
				mt.run(nops, seed+int64(i))
			})
		}
	})
	if t.Failed() {
		return
	}
	for _, mt := range models {
		mt.t = t
		mt.compareFull("end of the run", true)
	}
	m.Remount()
	for _, mt := range models {
		mt.compareFull("after a remount of the same worktree", true)
	}
	m.Commit("parallel model")
	for _, mt := range models {
		mt.compareFull("after commit and a mount of the new commit", false)
	}
}
