package fuse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/overlay"
	"github.com/artproject/art/repo"
)

// setupCasesLower is the lower layer of the overlay cases.
func setupCasesLower(dir string) {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		must(os.MkdirAll(filepath.Dir(p), 0o755))
		must(os.WriteFile(p, []byte(content), 0o644))
	}
	write("file", "lower file\n")
	write("other", "other lower file\n")
	write("dir/a", "lower a\n")
	write("dir/b", "lower b\n")
	write("dir/sub/c", "lower c\n")
	write("dir/sub/deep/d", "lower d\n")
	write("keep/x", "untouched\n")
	must(os.Symlink("file", filepath.Join(dir, "link")))
	big := make([]byte, 300<<10)
	rand.New(rand.NewSource(1)).Read(big)
	must(os.WriteFile(filepath.Join(dir, "big"), big, 0o644))
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

func wantContent(t *testing.T, p, want string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Errorf("read %s: %v", p, err)
	} else if string(b) != want {
		t.Errorf("%s: got %q, want %q", p, b, want)
	}
}

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if got := errnoOf(err); got != want {
		t.Errorf("%s: got %v, want %v", what, err, want)
	}
}

func wantMissing(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: want ENOENT, got %v", p, err)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("readdir %s: %v", dir, err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func wantNames(t *testing.T, dir string, want ...string) {
	t.Helper()
	got := names(t, dir)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: entries %q, want %q", dir, got, want)
	}
}

func ino(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatalf("lstat %s: %v", p, err)
	}
	return st.Ino
}

// each runs check now, after a remount of the same worktree, and after a
// commit and a mount of the new commit.
func each(t *testing.T, m *testMount, check func(stage string)) {
	t.Helper()
	check("live")
	m.Remount()
	check("remounted")
	m.Commit("case")
	check("committed")
}

// TestOverlayCases covers the copy-on-write semantics over a lower layer,
// each case on a fresh mount, checked live, after a remount of the same
// worktree and after a commit.
func TestOverlayCases(t *testing.T) {
	requireFUSE(t)
	cases := []struct {
		name string
		run  func(t *testing.T, m *testMount)
	}{
		{"recreate_lower_file", func(t *testing.T, m *testMount) {
			if err := os.Remove(m.WS("file")); err != nil {
				t.Fatal(err)
			}
			wantMissing(t, m.WS("file"))
			if err := os.WriteFile(m.WS("file"), []byte("new"), 0o600); err != nil {
				t.Fatal(err)
			}
			each(t, m, func(stage string) {
				wantContent(t, m.WS("file"), "new")
				if fi, err := os.Stat(m.WS("file")); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: stat %v %v", stage, fi, err)
				}
			})
		}},
		{"recreate_lower_dir_is_opaque", func(t *testing.T, m *testMount) {
			if err := os.RemoveAll(m.WS("dir")); err != nil {
				t.Fatal(err)
			}
			wantMissing(t, m.WS("dir"))
			if err := os.Mkdir(m.WS("dir"), 0o700); err != nil {
				t.Fatal(err)
			}
			wantNames(t, m.WS("dir"))
			// Lower names stay hidden even when looked up directly.
			wantMissing(t, m.WS("dir", "a"))
			wantMissing(t, m.WS("dir", "sub", "c"))
			if err := os.WriteFile(m.WS("dir", "a"), []byte("upper a"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(m.WS("dir", "new"), 0o755); err != nil {
				t.Fatal(err)
			}
			each(t, m, func(stage string) {
				wantNames(t, m.WS("dir"), "a", "new")
				wantContent(t, m.WS("dir", "a"), "upper a")
				wantMissing(t, m.WS("dir", "b"))
				wantMissing(t, m.WS("dir", "sub"))
				wantNames(t, m.WS("dir", "new"))
			})
		}},
		{"rename_lower_dir_with_children", func(t *testing.T, m *testMount) {
			if err := os.Mkdir(m.WS("to"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(m.WS("dir"), m.WS("to", "moved")); err != nil {
				t.Fatal(err)
			}
			each(t, m, func(stage string) {
				wantMissing(t, m.WS("dir"))
				wantMissing(t, m.WS("dir", "a"))
				wantNames(t, m.WS("to", "moved"), "a", "b", "sub")
				wantContent(t, m.WS("to", "moved", "a"), "lower a\n")
				wantContent(t, m.WS("to", "moved", "sub", "deep", "d"), "lower d\n")
				wantNames(t, m.WS(), "big", "file", "keep", "link", "other", "to")
			})
			// A new directory at the old name is empty.
			if err := os.Mkdir(m.WS("dir"), 0o755); err != nil {
				t.Fatal(err)
			}
			wantNames(t, m.WS("dir"))
		}},
		{"rename_lower_dir_then_change_children", func(t *testing.T, m *testMount) {
			if err := os.Rename(m.WS("dir"), m.WS("keep", "dir2")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(m.WS("keep", "dir2", "sub", "c"), []byte("changed c"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(m.WS("keep", "dir2", "a")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(m.WS("keep", "dir2", "sub", "deep"), m.WS("deep")); err != nil {
				t.Fatal(err)
			}
			each(t, m, func(stage string) {
				wantNames(t, m.WS("keep", "dir2"), "b", "sub")
				wantNames(t, m.WS("keep", "dir2", "sub"), "c")
				wantContent(t, m.WS("keep", "dir2", "sub", "c"), "changed c")
				wantContent(t, m.WS("deep", "d"), "lower d\n")
			})
		}},
		{"rmdir_nonempty_lower_dir", func(t *testing.T, m *testMount) {
			wantErrno(t, "rmdir dir", unix.Rmdir(m.WS("dir")), unix.ENOTEMPTY)
			wantErrno(t, "rmdir dir/sub/deep", unix.Rmdir(m.WS("dir", "sub", "deep")), unix.ENOTEMPTY)
			os.Remove(m.WS("dir", "sub", "deep", "d"))
			if err := unix.Rmdir(m.WS("dir", "sub", "deep")); err != nil {
				t.Errorf("rmdir of an emptied lower dir: %v", err)
			}
			os.Remove(m.WS("dir", "sub", "c"))
			wantErrno(t, "rmdir dir (still has a, b, sub)", unix.Rmdir(m.WS("dir")), unix.ENOTEMPTY)
			// Renaming a directory over a non-empty lower one fails too.
			os.Mkdir(m.WS("empty"), 0o755)
			wantErrno(t, "rename over a non-empty lower dir", unix.Rename(m.WS("empty"), m.WS("dir")), unix.ENOTEMPTY)
			each(t, m, func(stage string) {
				wantNames(t, m.WS("dir"), "a", "b", "sub")
				wantNames(t, m.WS("dir", "sub"))
				wantErrno(t, stage+": rmdir dir", unix.Rmdir(m.WS("dir")), unix.ENOTEMPTY)
			})
			// Renaming over an emptied lower directory works.
			if err := unix.Rename(m.WS("empty"), m.WS("dir", "sub")); err != nil {
				t.Errorf("rename over an emptied directory: %v", err)
			}
		}},
		{"hardlink_to_lower_file", func(t *testing.T, m *testMount) {
			if err := os.Link(m.WS("file"), m.WS("keep", "alias")); err != nil {
				t.Fatal(err)
			}
			if ino(t, m.WS("file")) != ino(t, m.WS("keep", "alias")) {
				t.Error("hard links have different inode numbers")
			}
			f, err := os.OpenFile(m.WS("keep", "alias"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("through the alias\n")
			f.Close()
			wantContent(t, m.WS("file"), "lower file\nthrough the alias\n")
			if err := os.WriteFile(m.WS("file"), []byte("through file"), 0o644); err != nil {
				t.Fatal(err)
			}
			wantContent(t, m.WS("keep", "alias"), "through file")
			check := func(stage string) {
				wantContent(t, m.WS("file"), "through file")
				wantContent(t, m.WS("keep", "alias"), "through file")
			}
			check("live")
			m.Remount()
			check("remounted")
			var st unix.Stat_t
			unix.Stat(m.WS("file"), &st)
			if st.Nlink != 2 || st.Ino != ino(t, m.WS("keep", "alias")) {
				t.Errorf("after remount: nlink %d, same inode %v", st.Nlink, st.Ino == ino(t, m.WS("keep", "alias")))
			}
			os.WriteFile(m.WS("keep", "alias"), []byte("after remount"), 0o644)
			wantContent(t, m.WS("file"), "after remount")
			// Removing one name leaves the other.
			os.Remove(m.WS("file"))
			wantContent(t, m.WS("keep", "alias"), "after remount")
			unix.Stat(m.WS("keep", "alias"), &st)
			if st.Nlink != 1 {
				t.Errorf("nlink after unlinking one name: %d", st.Nlink)
			}
			m.Commit("links")
			wantMissing(t, m.WS("file"))
			wantContent(t, m.WS("keep", "alias"), "after remount")
		}},
		// A descriptor that holds a node without an open (O_PATH, a
		// directory, a working directory) still stats it once it is
		// removed, as on ext4; and files made and removed leave art's
		// memory once the kernel forgets them.
		{"removed_node_stat_and_memory", func(t *testing.T, m *testMount) {
			os.WriteFile(m.WS("made"), []byte("made in the session"), 0o644)
			os.Mkdir(m.WS("madedir"), 0o755)
			for _, name := range []string{"made", "madedir", "file"} {
				fd, err := unix.Open(m.WS(name), unix.O_PATH, 0)
				if err != nil {
					t.Fatal(err)
				}
				os.Remove(m.WS(name))
				var st unix.Stat_t
				if err := unix.Fstat(fd, &st); err != nil {
					t.Errorf("%s: fstat after removal: %v", name, err)
				}
				unix.Close(fd)
			}
			nodes, _ := m.OFS.NodeCounts()
			for i := 0; i < 2000; i++ {
				p := m.WS(fmt.Sprintf("churn%d", i))
				if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
			// The kernel sends its forgets on its own time.
			deadline := time.Now().Add(10 * time.Second)
			for {
				after, freed := m.OFS.NodeCounts()
				if after <= nodes+10 && freed <= 10 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after 2,000 files made and removed: %d nodes (%d before), %d freed ones not forgotten", after, nodes, freed)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}},
		{"unlinked_open_file", func(t *testing.T, m *testMount) {
			for _, name := range []string{"file", "big", "upper"} {
				p := m.WS(name)
				if name == "upper" {
					os.WriteFile(p, []byte("upper content"), 0o644)
				}
				want, _ := os.ReadFile(p)
				f, err := os.OpenFile(p, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				wantMissing(t, p)
				got := make([]byte, len(want)+10)
				n, _ := f.ReadAt(got, 0)
				if !bytes.Equal(got[:n], want) {
					t.Errorf("%s: read after unlink: %d bytes, want %d", name, n, len(want))
				}
				if _, err := f.WriteAt([]byte("XYZ"), 5); err != nil {
					t.Errorf("%s: write after unlink: %v", name, err)
				}
				if _, err := f.WriteAt([]byte("tail"), int64(len(want))+100); err != nil {
					t.Errorf("%s: write after unlink: %v", name, err)
				}
				copy(want[5:], "XYZ")
				want = append(want, make([]byte, 100)...)
				want = append(want, "tail"...)
				got = make([]byte, len(want)+10)
				n, _ = f.ReadAt(got, 0)
				if !bytes.Equal(got[:n], want) {
					t.Errorf("%s: read back after unlink: %d bytes, want %d", name, n, len(want))
				}
				var st unix.Stat_t
				if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Nlink != 0 || st.Size != int64(len(want)) {
					t.Errorf("%s: fstat after unlink: %v nlink=%d size=%d", name, err, st.Nlink, st.Size)
				}
				if err := f.Sync(); err != nil {
					t.Errorf("%s: fsync after unlink: %v", name, err)
				}
				if err := f.Close(); err != nil {
					t.Errorf("%s: close: %v", name, err)
				}
			}
			each(t, m, func(stage string) {
				wantNames(t, m.WS(), "dir", "keep", "link", "other")
			})
		}},
		{"rename_over_lower_targets", func(t *testing.T, m *testMount) {
			os.WriteFile(m.WS("new"), []byte("new"), 0o644)
			if err := os.Rename(m.WS("new"), m.WS("file")); err != nil {
				t.Fatal(err)
			}
			if err := unix.Renameat2(unix.AT_FDCWD, m.WS("other"), unix.AT_FDCWD, m.WS("dir", "a"), unix.RENAME_NOREPLACE); errnoOf(err) != unix.EEXIST {
				t.Errorf("RENAME_NOREPLACE over a lower file: %v", err)
			}
			if err := unix.Renameat2(unix.AT_FDCWD, m.WS("other"), unix.AT_FDCWD, m.WS("dir", "a"), unix.RENAME_EXCHANGE); err != nil {
				t.Fatal(err)
			}
			if err := unix.Renameat2(unix.AT_FDCWD, m.WS("keep"), unix.AT_FDCWD, m.WS("dir", "sub"), unix.RENAME_EXCHANGE); err != nil {
				t.Fatal(err)
			}
			each(t, m, func(stage string) {
				wantContent(t, m.WS("file"), "new")
				wantContent(t, m.WS("other"), "lower a\n")
				wantContent(t, m.WS("dir", "a"), "other lower file\n")
				wantContent(t, m.WS("dir", "sub", "x"), "untouched\n")
				wantContent(t, m.WS("keep", "c"), "lower c\n")
				wantContent(t, m.WS("keep", "deep", "d"), "lower d\n")
				wantMissing(t, m.WS("new"))
			})
		}},
		{"inode_numbers_stable_and_unique", func(t *testing.T, m *testMount) {
			os.WriteFile(m.WS("dir", "a"), []byte("copied up"), 0o644)
			os.WriteFile(m.WS("created"), nil, 0o644)
			os.Mkdir(m.WS("newdir"), 0o755)
			os.Rename(m.WS("dir", "sub"), m.WS("newdir", "sub"))
			before := snapshot(t, m.WS())
			seen := map[uint64]string{}
			for rel, fi := range before {
				if other, ok := seen[fi.Ino]; ok {
					t.Errorf("%s and %s share inode %d", rel, other, fi.Ino)
				}
				seen[fi.Ino] = rel
			}
			m.Remount()
			after := snapshot(t, m.WS())
			for rel, fi := range before {
				if after[rel].Ino != fi.Ino {
					t.Errorf("%s: inode %d before the remount, %d after", rel, fi.Ino, after[rel].Ino)
				}
			}
			// A new file after the remount gets a fresh number.
			os.WriteFile(m.WS("created2"), nil, 0o644)
			if other, ok := seen[ino(t, m.WS("created2"))]; ok {
				t.Errorf("new file reuses the inode of %s", other)
			}
		}},
		{"statfs_reports_repository_fs", func(t *testing.T, m *testMount) {
			var got, want unix.Statfs_t
			if err := unix.Statfs(m.Dir, &got); err != nil {
				t.Fatal(err)
			}
			if err := unix.Statfs(filepath.Dir(m.DBPath), &want); err != nil {
				t.Fatal(err)
			}
			if got.Blocks*uint64(got.Bsize) != want.Blocks*uint64(want.Bsize) {
				t.Errorf("total %d bytes, repository filesystem has %d", got.Blocks*uint64(got.Bsize), want.Blocks*uint64(want.Bsize))
			}
			free, wfree := float64(got.Bavail)*float64(got.Bsize), float64(want.Bavail)*float64(want.Bsize)
			if d := free - wfree; d > 0.01*wfree+64<<20 || -d > 0.01*wfree+64<<20 {
				t.Errorf("free %.0f bytes, repository filesystem has %.0f", free, wfree)
			}
			// The two calls are moments apart, and other writers on the
			// host's filesystem change its free space in between.
			if avail, host := got.Bavail*uint64(got.Bsize), want.Bavail*uint64(want.Bsize); avail > host+16<<20 {
				t.Errorf("%d bytes available in the mount, more than an unprivileged user has on the repository's filesystem (%d)", avail, host)
			}
			if got.Namelen < 255 {
				t.Errorf("name length %d", got.Namelen)
			}
		}},
		{"xattrs", func(t *testing.T, m *testMount) {
			for _, rel := range []string{"file", "dir", "dir/sub/c"} {
				p := m.WS(rel)
				if err := unix.Setxattr(p, "user.one", []byte("1"), 0); err != nil {
					t.Fatalf("setxattr %s: %v", rel, err)
				}
				if err := unix.Setxattr(p, "user.two", bytes.Repeat([]byte("2"), 5000), unix.XATTR_CREATE); err != nil {
					t.Fatalf("setxattr %s: %v", rel, err)
				}
				if err := unix.Setxattr(p, "user.one", []byte("x"), unix.XATTR_CREATE); errnoOf(err) != unix.EEXIST {
					t.Errorf("XATTR_CREATE of an existing attribute: %v", err)
				}
				if err := unix.Setxattr(p, "user.none", []byte("x"), unix.XATTR_REPLACE); errnoOf(err) != unix.ENODATA {
					t.Errorf("XATTR_REPLACE of a missing attribute: %v", err)
				}
				unix.Setxattr(p, "user.gone", []byte("g"), 0)
				if err := unix.Removexattr(p, "user.gone"); err != nil {
					t.Errorf("removexattr: %v", err)
				}
				if err := unix.Removexattr(p, "user.gone"); errnoOf(err) != unix.ENODATA {
					t.Errorf("removexattr of a missing attribute: %v", err)
				}
				buf := make([]byte, 2)
				if _, err := unix.Getxattr(p, "user.two", buf); errnoOf(err) != unix.ERANGE {
					t.Errorf("getxattr into a small buffer: %v", err)
				}
			}
			each(t, m, func(stage string) {
				for _, rel := range []string{"file", "dir", "dir/sub/c"} {
					want := "user.one=1,user.two=" + string(bytes.Repeat([]byte("2"), 5000))
					if got := xattrString(m.WS(rel)); got != want {
						t.Errorf("%s %s: xattrs %.40q, want %.40q", stage, rel, got, want)
					}
				}
				if got := xattrString(m.WS("other")); got != "" {
					t.Errorf("%s: untouched file has xattrs %q", stage, got)
				}
			})
		}},
		// fallocate's PUNCH_HOLE and ZERO_RANGE zero a range, in lower
		// content and in what the session wrote, as ext4 and tmpfs do
		// (they failed with EOPNOTSUPP); the modes Linux itself refuses
		// without KEEP_SIZE, and those the overlay has not, fail so.
		{"fallocate_modes", func(t *testing.T, m *testMount) {
			p := m.WS("big")
			want, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fd := int(f.Fd())
			zero := func(from, to int) { clear(want[from:to]) }
			const keep = unix.FALLOC_FL_KEEP_SIZE
			// A hole across lower blocks and the end of the file.
			if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|keep, 70_000, 100_000); err != nil {
				t.Fatalf("punch a hole: %v", err)
			}
			zero(70_000, 170_000)
			if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|keep, int64(len(want))-10, 100); err != nil {
				t.Fatalf("punch a hole past the end: %v", err)
			}
			zero(len(want)-10, len(want))
			// Written in the session, then zeroed.
			if _, err := f.WriteAt([]byte("session data"), 5); err != nil {
				t.Fatal(err)
			}
			if err := unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE|keep, 8, 3); err != nil {
				t.Fatalf("zero a range: %v", err)
			}
			copy(want[5:], "ses\x00\x00\x00n data")
			// ZERO_RANGE without KEEP_SIZE grows the file.
			if err := unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE, int64(len(want))-4, 1000); err != nil {
				t.Fatalf("zero a range past the end: %v", err)
			}
			zero(len(want)-4, len(want))
			want = append(want, make([]byte, 996)...)
			for _, mode := range []uint32{unix.FALLOC_FL_PUNCH_HOLE, unix.FALLOC_FL_COLLAPSE_RANGE, unix.FALLOC_FL_INSERT_RANGE} {
				if err := unix.Fallocate(fd, mode, 0, 65536); errnoOf(err) != unix.EOPNOTSUPP {
					t.Errorf("fallocate mode %#x: %v, want EOPNOTSUPP", mode, err)
				}
			}
			f.Close()
			for _, stage := range []string{"live", "remounted", "committed"} {
				switch stage {
				case "remounted":
					m.Remount()
				case "committed":
					m.Commit("fallocate")
				}
				if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
					i := 0
					for i < min(len(got), len(want)) && got[i] == want[i] {
						i++
					}
					t.Errorf("%s: content differs from byte %d (%d bytes, want %d): %v", stage, i, len(got), len(want), err)
				}
			}
		}},
		{"sparse_file", func(t *testing.T, m *testMount) {
			p := m.WS("sparse")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			const off = 100 << 20
			if _, err := f.WriteAt([]byte("x"), off); err != nil {
				t.Fatal(err)
			}
			check := func(stage string, exact bool) {
				var st unix.Stat_t
				if err := unix.Stat(p, &st); err != nil {
					t.Fatal(err)
				}
				if st.Size != off+1 {
					t.Errorf("%s: size %d", stage, st.Size)
				}
				if exact && st.Blocks*512 > 1<<20 {
					t.Errorf("%s: %d blocks allocated (%d bytes) for one written byte", stage, st.Blocks, st.Blocks*512)
				}
				fd, err := unix.Open(p, unix.O_RDONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer unix.Close(fd)
				if exact {
					if d, err := unix.Seek(fd, 0, unix.SEEK_DATA); err != nil || d > off || d < off-(1<<20) {
						t.Errorf("%s: SEEK_DATA from 0: %d, %v", stage, d, err)
					}
					if h, err := unix.Seek(fd, 0, unix.SEEK_HOLE); err != nil || h != 0 {
						t.Errorf("%s: SEEK_HOLE from 0: %d, %v", stage, h, err)
					}
				}
				if h, err := unix.Seek(fd, off, unix.SEEK_HOLE); err != nil || h != off+1 {
					t.Errorf("%s: SEEK_HOLE from the data: %d, %v", stage, h, err)
				}
				if _, err := unix.Seek(fd, off+1, unix.SEEK_DATA); errnoOf(err) != unix.ENXIO {
					t.Errorf("%s: SEEK_DATA at EOF: %v", stage, err)
				}
				buf := make([]byte, 4096)
				if n, err := unix.Pread(fd, buf, off-4095); err != nil || n != 4096 || buf[4095] != 'x' || !bytes.Equal(buf[:4095], make([]byte, 4095)) {
					t.Errorf("%s: read around the byte: %d %v", stage, n, err)
				}
				if n, err := unix.Pread(fd, buf, 50<<20); err != nil || n != 4096 || !bytes.Equal(buf, make([]byte, 4096)) {
					t.Errorf("%s: read in the hole: %d %v", stage, n, err)
				}
			}
			check("open", true)
			f.Close()
			check("closed", true)
			m.Remount()
			check("remounted", true)
			// Committed, the holes are zero chunks, which the mount
			// reports as holes again (it reported all data).
			m.Commit("sparse")
			check("committed", true)
			m.Remount()
			check("committed, remounted", true)
			// Written to, the committed file is an upper node over the
			// commit's content: loaded so after a remount, it counts
			// the holes as well.
			fw, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fw.WriteAt([]byte("y"), off)
			fw.Close()
			m.Remount()
			var st unix.Stat_t
			if err := unix.Stat(p, &st); err != nil || st.Blocks*512 > 1<<20 {
				t.Errorf("written to, remounted: %d blocks allocated, %v", st.Blocks, err)
			}
		}},
		{"fifo", func(t *testing.T, m *testMount) {
			p := m.WS("fifo")
			if err := unix.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			done := make(chan string)
			go func() {
				b, err := os.ReadFile(p)
				if err != nil {
					done <- err.Error()
					return
				}
				done <- string(b)
			}()
			if err := os.WriteFile(p, []byte("through the pipe"), 0); err != nil {
				t.Fatal(err)
			}
			if got := <-done; got != "through the pipe" {
				t.Errorf("fifo read %q", got)
			}
			each(t, m, func(stage string) {
				fi, err := os.Lstat(p)
				if err != nil || fi.Mode()&os.ModeNamedPipe == 0 || fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: fifo: %v %v", stage, fi, err)
				}
			})
		}},
		{"socket and device nodes", func(t *testing.T, m *testMount) {
			// A program binding a unix socket in its home, and root's
			// mknod, work as on a local disk; the nodes last for the
			// session only (overlay.TypeSocket).
			sock := m.WS("agent.sock")
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatalf("bind a unix socket in the mount: %v", err)
			}
			defer l.Close()
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			go func() {
				if c, err := l.Accept(); err == nil {
					c.Write([]byte("over the socket"))
					c.Close()
				}
			}()
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatalf("connect to the socket: %v", err)
			}
			if b, err := io.ReadAll(c); err != nil || string(b) != "over the socket" {
				t.Errorf("read from the socket: %q %v", b, err)
			}
			c.Close()
			l.Close() // the socket's inode stays, as on a local disk
			dev := m.WS("null")
			if err := unix.Mknod(dev, unix.S_IFCHR|0o640, int(unix.Mkdev(1, 3))); err != nil {
				t.Fatalf("mknod c 1 3: %v", err)
			}
			if err := unix.Mknod(m.WS("loop"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 1))); err != nil {
				t.Fatalf("mknod b 7 1: %v", err)
			}
			if err := os.Link(dev, m.WS("null2")); err != nil {
				t.Fatal(err)
			}
			check := func(stage string) {
				for _, c := range []struct {
					name  string
					ifmt  uint32
					rdev  uint64
					nlink uint64
				}{
					{"agent.sock", unix.S_IFSOCK, 0, 1},
					{"null", unix.S_IFCHR, unix.Mkdev(1, 3), 2},
					{"null2", unix.S_IFCHR, unix.Mkdev(1, 3), 2},
					{"loop", unix.S_IFBLK, unix.Mkdev(7, 1), 1},
				} {
					var st unix.Stat_t
					if err := unix.Lstat(m.WS(c.name), &st); err != nil {
						t.Errorf("%s: %s: %v", stage, c.name, err)
						continue
					}
					if st.Mode&unix.S_IFMT != c.ifmt || st.Rdev != c.rdev || uint64(st.Nlink) != c.nlink {
						t.Errorf("%s: %s: mode %o rdev %x nlink %d, want type %o rdev %x nlink %d", stage, c.name, st.Mode, st.Rdev, st.Nlink, c.ifmt, c.rdev, c.nlink)
					}
				}
			}
			check("made")
			// The mount is nodev: a device node there opens nothing.
			if f, err := os.Open(dev); err == nil {
				f.Close()
				t.Error("a device node in the mount opened")
			}
			m.Remount()
			check("remounted")
			m.Commit("nodes")
			for _, name := range []string{"agent.sock", "null", "null2", "loop"} {
				if _, err := os.Lstat(m.WS(name)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s after the commit: %v (sockets and devices are for the session only)", name, err)
				}
			}
		}},
		{"path of PATH_MAX below the workspace", func(t *testing.T, m *testMount) {
			// As pjdfstest's */03.t build: a 4095-byte relative path.
			name := strings.Repeat("p", 254)
			deep := func(mk bool) (int, int) {
				fd, err := unix.Open(m.WS(), unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for ; n+len(name)+1 < 4095; n += len(name) + 1 {
					if mk {
						if err := unix.Mkdirat(fd, name, 0o755); err != nil {
							t.Fatalf("mkdir at %d bytes: %v", n, err)
						}
					}
					sub, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
					unix.Close(fd)
					if err != nil {
						t.Fatalf("open at %d bytes: %v", n, err)
					}
					fd = sub
				}
				return fd, n
			}
			fd, n := deep(true)
			leaf := strings.Repeat("f", 4095-n-1)
			if err := unix.Mknodat(fd, leaf, unix.S_IFREG|0o644, 0); err != nil {
				t.Fatalf("create the leaf of a %d-byte path: %v", n+len(leaf), err)
			}
			unix.Close(fd)
			m.Commit("deep")
			fd, _ = deep(false)
			defer unix.Close(fd)
			var st unix.Stat_t
			if err := unix.Fstatat(fd, leaf, &st, 0); err != nil {
				t.Errorf("the leaf after the commit: %v", err)
			}
		}},
		{"mmap", func(t *testing.T, m *testMount) {
			p := m.WS("big")
			want, _ := os.ReadFile(p)
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			mem, err := unix.Mmap(int(f.Fd()), 0, len(want), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(mem, want) {
				t.Error("mmap reads different content")
			}
			copy(mem[70000:], "written through mmap")
			copy(want[70000:], "written through mmap")
			if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
				t.Errorf("msync: %v", err)
			}
			unix.Munmap(mem)
			f.Close()
			each(t, m, func(stage string) {
				if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
					t.Errorf("%s: content after mmap write differs", stage)
				}
			})
		}},
		{"tmpfile_linked_into_place", func(t *testing.T, m *testMount) {
			// Regression: O_TMPFILE used to fail with EOPNOTSUPP.
			fd, err := unix.Open(m.WS("dir"), unix.O_TMPFILE|unix.O_RDWR, 0o640)
			if err != nil {
				t.Fatalf("O_TMPFILE: %v", err)
			}
			unix.Pwrite(fd, []byte("anonymous"), 0)
			wantNames(t, m.WS("dir"), "a", "b", "sub")
			if err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, m.WS("dir", "named"), unix.AT_SYMLINK_FOLLOW); err != nil {
				t.Fatalf("linkat: %v", err)
			}
			unix.Pwrite(fd, []byte("!"), 9)
			unix.Close(fd)
			// An unlinked O_TMPFILE file just goes away.
			fd, err = unix.Open(m.WS(), unix.O_TMPFILE|unix.O_WRONLY, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			unix.Write(fd, []byte("dropped"))
			unix.Close(fd)
			each(t, m, func(stage string) {
				wantContent(t, m.WS("dir", "named"), "anonymous!")
				wantNames(t, m.WS("dir"), "a", "b", "named", "sub")
				wantNames(t, m.WS(), "big", "dir", "file", "keep", "link", "other")
			})
		}},
		{"setgid_dir_inherited", func(t *testing.T, m *testMount) {
			// Regression: mkdir in a set-group-ID directory lost the bit.
			os.Mkdir(m.WS("g"), 0o755)
			if err := unix.Chmod(m.WS("g"), 0o2775); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mkdir(m.WS("g", "child"), 0o755); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(m.WS("g", "file"), nil, 0o644)
			each(t, m, func(stage string) {
				var st unix.Stat_t
				unix.Stat(m.WS("g", "child"), &st)
				if st.Mode&unix.S_ISGID == 0 {
					t.Errorf("%s: directory in a setgid directory has mode %o", stage, st.Mode)
				}
				unix.Stat(m.WS("g", "file"), &st)
				if st.Mode&unix.S_ISGID != 0 {
					t.Errorf("%s: file in a setgid directory has mode %o", stage, st.Mode)
				}
			})
		}},
		{"ofd_locks", func(t *testing.T, m *testMount) {
			// What posixtest's FcntlFlockLocksFile means to check: locks
			// taken through one open file description conflict with
			// another's.
			f1, err := os.OpenFile(m.WS("file"), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f1.Close()
			f2, err := os.OpenFile(m.WS("file"), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f2.Close()
			wl := unix.Flock_t{Type: unix.F_WRLCK}
			if err := unix.FcntlFlock(f1.Fd(), unix.F_OFD_SETLK, &wl); err != nil {
				t.Fatal(err)
			}
			rl := unix.Flock_t{Type: unix.F_RDLCK}
			if err := unix.FcntlFlock(f2.Fd(), unix.F_OFD_SETLK, &rl); errnoOf(err) != unix.EAGAIN {
				t.Errorf("conflicting OFD lock: %v, want EAGAIN", err)
			}
			if err := unix.Flock(int(f2.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
				t.Errorf("flock: %v", err)
			}
			if err := unix.Flock(int(f1.Fd()), unix.LOCK_EX|unix.LOCK_NB); errnoOf(err) != unix.EWOULDBLOCK {
				t.Errorf("conflicting flock: %v, want EWOULDBLOCK", err)
			}
		}},
		{"symlink_and_times", func(t *testing.T, m *testMount) {
			if got, err := os.Readlink(m.WS("link")); err != nil || got != "file" {
				t.Errorf("lower symlink: %q %v", got, err)
			}
			wantContent(t, m.WS("link"), "lower file\n")
			ts := []unix.Timespec{{Sec: 1234567890, Nsec: 123456789}, {Sec: 1111111111, Nsec: 987654321}}
			for _, rel := range []string{"link", "dir", "file"} {
				if err := unix.UtimesNanoAt(unix.AT_FDCWD, m.WS(rel), ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					t.Fatalf("utimensat %s: %v", rel, err)
				}
			}
			each(t, m, func(stage string) {
				for _, rel := range []string{"link", "dir", "file"} {
					var st unix.Stat_t
					unix.Lstat(m.WS(rel), &st)
					if st.Mtim != ts[1] {
						t.Errorf("%s %s: mtime %v, want %v", stage, rel, st.Mtim, ts[1])
					}
					if stage == "live" && st.Atim != ts[0] {
						t.Errorf("%s %s: atime %v, want %v", stage, rel, st.Atim, ts[0])
					}
				}
			})
		}},
		{"odd_names", func(t *testing.T, m *testMount) {
			odd := []string{"\xff\xfe not utf-8", "new\nline", " lead and trail ", "ünïcødé", "-", strings.Repeat("n", 255), "..."}
			for i, n := range odd {
				if err := os.WriteFile(m.WS("dir", n), []byte(fmt.Sprint(i)), 0o644); err != nil {
					t.Fatalf("create %q: %v", n, err)
				}
			}
			if err := os.WriteFile(m.WS("dir", strings.Repeat("n", 256)), nil, 0o644); errnoOf(err) != unix.ENAMETOOLONG {
				t.Errorf("256-byte name: %v", err)
			}
			long := strings.Repeat("t/", 2047) + "x" // 4095 bytes
			if err := os.Symlink(long, m.WS("longlink")); err != nil {
				t.Errorf("symlink with a %d-byte target: %v", len(long), err)
			}
			each(t, m, func(stage string) {
				for i, n := range odd {
					wantContent(t, m.WS("dir", n), fmt.Sprint(i))
				}
				if got := len(names(t, m.WS("dir"))); got != 3+len(odd) {
					t.Errorf("%s: %d entries", stage, got)
				}
				if got, err := os.Readlink(m.WS("longlink")); err != nil || got != long {
					t.Errorf("%s: long symlink: %d bytes, %v", stage, len(got), err)
				}
			})
		}},
		{"empty_and_truncated", func(t *testing.T, m *testMount) {
			os.WriteFile(m.WS("empty"), nil, 0o644)
			unix.Setxattr(m.WS("empty"), "user.e", []byte("on an empty file"), 0)
			if err := os.Truncate(m.WS("big"), 100); err != nil { // lower file cut short
				t.Fatal(err)
			}
			if err := os.Truncate(m.WS("big"), 200<<10); err != nil { // and extended: a hole
				t.Fatal(err)
			}
			if err := os.Truncate(m.WS("file"), 0); err != nil {
				t.Fatal(err)
			}
			lowerBig := make([]byte, 300<<10)
			rand.New(rand.NewSource(1)).Read(lowerBig)
			want := append(append([]byte(nil), lowerBig[:100]...), make([]byte, 200<<10-100)...)
			each(t, m, func(stage string) {
				wantContent(t, m.WS("empty"), "")
				wantContent(t, m.WS("file"), "")
				if got, _ := os.ReadFile(m.WS("big")); !bytes.Equal(got, want) {
					t.Errorf("%s: truncated and extended lower file differs (%d bytes)", stage, len(got))
				}
				if x := xattrString(m.WS("empty")); x != "user.e=on an empty file" {
					t.Errorf("%s: xattrs of the empty file: %q", stage, x)
				}
			})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newTestMount(t, setupCasesLower)
			c.run(t, m)
		})
	}
}

// TestBranchInUse: a second worktree on a branch with a live one is
// refused with a hint to branch.
func TestBranchInUse(t *testing.T) {
	m := newTestMount(t, setupCasesLower)
	_, _, err := m.Repo.CreateWorktree(m.Branch, "mount", "", "")
	if !errors.Is(err, repo.ErrBranchInUse) {
		t.Fatalf("second worktree on a live branch: %v, want ErrBranchInUse", err)
	}
	if !bytes.Contains([]byte(err.Error()), []byte("new branch")) {
		t.Errorf("error gives no hint to branch: %v", err)
	}
}

// chunkBytes is the stored size of all chunks in the repository.
func chunkBytes(t *testing.T, r *repo.Repo) int64 {
	t.Helper()
	var n int64
	if err := r.DB.QueryRow(`SELECT coalesce(sum(length(data)), 0) FROM chunks`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSmallWriteIntoLargeLowerFile: writing one byte in the middle of a
// 64 MiB lower file stores about one block, and neither the write nor the
// commit reads the whole file into memory.
func TestSmallWriteIntoLargeLowerFile(t *testing.T) {
	const size = 64 << 20
	m := newTestMount(t, func(dir string) {
		data := make([]byte, size)
		rand.New(rand.NewSource(7)).Read(data)
		if err := os.WriteFile(filepath.Join(dir, "large"), data, 0o644); err != nil {
			panic(err)
		}
	})
	p := m.WS("large")
	before := chunkBytes(t, m.Repo)
	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xAB}, size/2+12345); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms1)
	grew := chunkBytes(t, m.Repo) - before
	t.Logf("1-byte write: repository chunks grew by %d bytes, %d bytes allocated", grew, ms1.TotalAlloc-ms0.TotalAlloc)
	if grew > 256<<10 {
		t.Errorf("1-byte write into a 64 MiB file stored %d bytes", grew)
	}
	if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > 16<<20 {
		t.Errorf("1-byte write allocated %d bytes: the file was read into memory", alloc)
	}
	// The byte reads back, and the neighbourhood is the lower content.
	buf := make([]byte, 3)
	g, _ := os.Open(p)
	g.ReadAt(buf, size/2+12344)
	g.Close()
	if buf[1] != 0xAB {
		t.Errorf("read back %x", buf)
	}

	before = chunkBytes(t, m.Repo)
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	m.Commit("one byte")
	runtime.ReadMemStats(&ms1)
	grew = chunkBytes(t, m.Repo) - before
	t.Logf("commit: repository chunks grew by %d bytes, heap in use %d → %d", grew, ms0.HeapInuse, ms1.HeapInuse)
	if grew > 1<<20 {
		t.Errorf("commit of a 1-byte change to a 64 MiB file stored %d bytes", grew)
	}
	g, _ = os.Open(p)
	g.ReadAt(buf, size/2+12344)
	g.Close()
	if buf[1] != 0xAB {
		t.Errorf("after commit read back %x", buf)
	}
}

// TestLargeFile writes a large file sequentially (beyond what a file may
// keep unflushed in memory) and reads it back live, after a remount and
// after a commit.
func TestLargeFile(t *testing.T) {
	size := int64(96 << 20)
	if longTests() {
		size = 1 << 30
	} else if testing.Short() {
		size = 24 << 20
	}
	m := newTestMount(t, setupCasesLower)
	p := m.WS("large")
	pattern := func(off int64, b []byte) {
		for i := range b {
			x := uint64(off + int64(i))
			b[i] = byte(x ^ x>>8 ^ x>>17)
		}
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20+123) // not block aligned
	for off := int64(0); off < size; off += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), size-off)]
		pattern(off, b)
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	check := func(stage string) {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		want := make([]byte, len(buf))
		for off := int64(0); off < size; off += int64(len(buf)) {
			n, err := f.ReadAt(buf, off)
			if int64(n) != min(int64(len(buf)), size-off) {
				t.Fatalf("%s: read at %d: %d bytes, %v", stage, off, n, err)
			}
			pattern(off, want[:n])
			if !bytes.Equal(buf[:n], want[:n]) {
				t.Fatalf("%s: content differs at %d", stage, off)
			}
		}
	}
	check("live")
	m.Remount()
	check("remounted")
	m.Commit("large")
	check("committed")
}

// TestReadAheadRaised: as root, a mount's read-ahead is 1 MiB, not the
// kernel's 128 KiB cap for FUSE, so sequential reads come in 1 MiB requests.
func TestReadAheadRaised(t *testing.T) {
	m := newTestMount(t, nil)
	if os.Geteuid() != 0 {
		t.Skip("skipping: only root may set a mount's read-ahead (not root here)")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(m.Dir, &st); err != nil {
		t.Fatal(err)
	}
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "1024" {
		t.Fatalf("%s = %s, want 1024", p, got)
	}
}

// TestLargeReadsQuiet: reading a file in 1 MiB requests (the raised
// read-ahead) logs nothing; go-fuse's splice path used to log a failure
// for every such request, which art run printed on the user's terminal.
func TestLargeReadsQuiet(t *testing.T) {
	m := newTestMount(t, nil)
	p := filepath.Join(m.Dir, "big.bin")
	data := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Out of the page cache, so the read goes to the server.
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(data))
	}
	if log := m.fuseLog.String(); log != "" {
		t.Fatalf("reading logged:\n%s", log)
	}
}

// Times before 1970 with a nanosecond part read back as set (the second
// was rounded toward zero and the nanoseconds went negative, which the
// kernel clamped: -1.5 s read as -1 ns), live and after a remount; times
// after 2262 as the last time the overlay holds.
func TestTimesBefore1970(t *testing.T) {
	m := newTestMount(t, setupCasesLower)
	p := m.WS("old")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Past 2262 an int64 of nanoseconds ends: such a time reads back as
	// the last one it holds, not wrapped round to before 1900.
	const y2300, last = 10413792000, math.MaxInt64
	for _, c := range []struct{ set, ns int64 }{
		{-1_500_000_000, -1_500_000_000}, {-1, -1}, {-3_000_000_000, -3_000_000_000}, {1_500_000_000, 1_500_000_000},
		{y2300, last}, {1 << 34, last},
	} {
		ts := unix.NsecToTimespec(c.set)
		if c.set >= y2300 {
			ts = unix.Timespec{Sec: c.set}
		}
		ns := c.ns
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, 0); err != nil {
			t.Fatal(err)
		}
		for _, when := range []string{"live", "after remount"} {
			if when != "live" {
				m.Remount()
			}
			var st unix.Stat_t
			if err := unix.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			if got := objects.TimeNs(st.Mtim.Sec, st.Mtim.Nsec); got != ns {
				t.Errorf("%s: mtime %d read back as %d", when, ns, got)
			}
		}
	}
}

// rewinddir shows the directory as it is then: names created since
// opendir appear, removed ones are gone (the listing taken at opendir
// used to be replayed).
func TestRewinddirRelists(t *testing.T) {
	m := newTestMount(t, setupCasesLower)
	dir := m.WS("rewind")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"f1", "f2"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := func() []string {
		t.Helper()
		ns, err := f.Readdirnames(-1)
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(ns)
		return ns
	}
	if got := names(); strings.Join(got, ",") != "f1,f2" {
		t.Fatalf("first listing %v", got)
	}
	os.WriteFile(filepath.Join(dir, "f3"), nil, 0o644)
	os.Remove(filepath.Join(dir, "f1"))
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if got := names(); strings.Join(got, ",") != "f2,f3" {
		t.Errorf("after rewinddir: %v, want [f2 f3]", got)
	}
}

// An access ACL changes the mode bits; with attributes cached for an hour
// the kernel must still stop granting what the ACL revoked (another user
// could read the file until something refreshed its attributes).
func TestACLRevokesAtOnce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: not root; this test reads the file as another user, which takes root")
	}
	m := newTestMountAs(t, setupCasesLower, true)
	p := m.WS("acl-file")
	if err := os.WriteFile(p, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The parents must be searchable by nobody.
	for d := p; d != "/"; d = filepath.Dir(d) {
		if d != p {
			if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
				os.Chmod(d, st.Mode().Perm()|0o005)
			}
		}
	}
	readAsNobody := func() error {
		cmd := exec.Command("cat", p)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := readAsNobody(); err != nil {
		t.Fatalf("nobody cannot read a 0644 file: %v", err)
	}
	// u::rw- g::r-- o::--- (POSIX ACL xattr, version 2).
	acl := []byte{2, 0, 0, 0,
		1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
		4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
		0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}
	if err := unix.Setxattr(p, "system.posix_acl_access", acl, 0); err != nil {
		t.Fatalf("set ACL: %v", err)
	}
	if err := readAsNobody(); err == nil {
		t.Fatal("nobody still reads the file after an ACL revoked other's read permission")
	}
}

// TestSetIDBitsDropped checks that writing, truncating or allocating by a
// caller without CAP_FSETID, and chown by anyone, clear set-user-ID (and
// set-group-ID when group-execute is set), as on a local disk, while root's
// own writes keep them. The filesystem does this itself
// (FUSE_HANDLE_KILLPRIV_V2), so it is checked at the mount, not trusted to
// the kernel.
func TestSetIDBitsDropped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: not root; the unprivileged cases run a command as another user, which takes root")
	}
	m := newTestMountAs(t, setupCasesLower, true)
	for d := m.WS(); d != "/"; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
			os.Chmod(d, st.Mode().Perm()|0o005)
		}
	}
	asNobody := func(name string, arg ...string) func(p string) error {
		return func(p string) error {
			cmd := exec.Command(name, append(arg, p)...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%s as nobody: %v: %s", name, err, out)
			}
			return nil
		}
	}
	// Root without CAP_FSETID loses the bits too (ext4 does the same).
	asRootWithoutFsetid := func(name string, arg ...string) func(p string) error {
		return func(p string) error {
			args := append([]string{"--bounding-set=-fsetid", "--inh-caps=-fsetid", name}, append(arg, p)...)
			if out, err := exec.Command("setpriv", args...).CombinedOutput(); err != nil {
				return fmt.Errorf("%s without CAP_FSETID: %v: %s", name, err, out)
			}
			return nil
		}
	}
	rootAppend := func(p string) error {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		if _, err := f.WriteString("root\n"); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	cases := []struct {
		name string
		mode uint32
		act  func(p string) error
		want uint32
	}{
		{"write by nobody", 0o6757, asNobody("sh", "-c", `printf x >> "$0"`), 0o757},
		{"write by nobody, setgid without group-exec kept", 0o2747, asNobody("sh", "-c", `printf x >> "$0"`), 0o2747},
		{"truncate by nobody", 0o6757, asNobody("truncate", "-s", "1"), 0o757},
		{"fallocate by nobody", 0o6757, asNobody("fallocate", "-l", "65536"), 0o757},
		{"write by root", 0o6757, rootAppend, 0o6757},
		{"truncate by root", 0o6757, func(p string) error { return os.Truncate(p, 1) }, 0o6757},
		{"chown by root", 0o6757, func(p string) error { return os.Chown(p, os.Getuid(), os.Getgid()) }, 0o757},
		{"chown -1 -1 by root", 0o6757, func(p string) error { return os.Chown(p, -1, -1) }, 0o757},
		{"chown -1 -1 by root, setgid without group-exec kept", 0o6747, func(p string) error { return os.Chown(p, -1, -1) }, 0o2747},
		{"fallocate by root without CAP_FSETID", 0o6757, asRootWithoutFsetid("fallocate", "-l", "65536"), 0o757},
		{"write by root without CAP_FSETID", 0o6757, asRootWithoutFsetid("sh", "-c", `printf x >> "$0"`), 0o757},
		{"fallocate by root", 0o6757, func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			return unix.Fallocate(int(f.Fd()), 0, 0, 65536)
		}, 0o6757},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := m.WS(fmt.Sprintf("setid-%d", i))
			if err := os.WriteFile(p, []byte("data\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// A first write before the mode change, as a build does, so the
			// kernel has already checked the file for privileges once.
			if err := rootAppend(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, os.FileMode(c.mode&0o777)|modeBits(c.mode)); err != nil {
				t.Fatal(err)
			}
			if err := c.act(p); err != nil {
				t.Fatal(err)
			}
			// statx for the mode alone is answered from the kernel's cache
			// when it holds the mode: the cache must not keep the old bits.
			var stx unix.Statx_t
			if err := unix.Statx(unix.AT_FDCWD, p, 0, unix.STATX_MODE, &stx); err != nil {
				t.Fatal(err)
			}
			if got := uint32(stx.Mode) & 0o7777; got != c.want {
				t.Fatalf("mode (statx) after %s: %#o, want %#o", c.name, got, c.want)
			}
			var st unix.Stat_t
			if err := unix.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			if got := st.Mode & 0o7777; got != c.want {
				t.Fatalf("mode after %s: %#o, want %#o", c.name, got, c.want)
			}
			m.Remount()
			if err := unix.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			if got := st.Mode & 0o7777; got != c.want {
				t.Fatalf("mode after %s and a remount: %#o, want %#o", c.name, got, c.want)
			}
		})
	}
}

// modeBits converts the set-ID and sticky bits of mode to os.FileMode's.
func modeBits(mode uint32) os.FileMode {
	var m os.FileMode
	if mode&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

// TestConcurrentWritersThrottled: writers much faster than the applier
// (the overlay holds at most 1 MiB for it here, so nearly every write
// waits, and over io_uring is answered off its ring thread), some
// fsyncing as they go, while another process lists and reads: nothing
// deadlocks, and every file reads back whole live and after the commit.
func TestConcurrentWritersThrottled(t *testing.T) {
	m := newTestMount(t, nil)
	m.maxHeld = 1 << 20
	m.Remount()
	const writers, size, step = 4, 20 << 20, 256 << 10
	content := func(w int) []byte {
		b := make([]byte, size)
		rand.New(rand.NewSource(int64(w))).Read(b)
		return b
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "small"), []byte("small\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, writers+1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := content(w)
			f, err := os.Create(filepath.Join(m.Dir, fmt.Sprintf("f%d", w)))
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for off := 0; off < size; off += step {
				if _, err := f.Write(data[off : off+step]); err != nil {
					errs <- fmt.Errorf("writer %d at %d: %w", w, off, err)
					return
				}
				if w%2 == 0 && off%(4<<20) == 0 {
					if err := f.Sync(); err != nil {
						errs <- fmt.Errorf("writer %d fsync at %d: %w", w, off, err)
						return
					}
				}
			}
			if err := f.Close(); err != nil {
				errs <- fmt.Errorf("writer %d close: %w", w, err)
			}
		}()
	}
	readerDone := make(chan struct{})
	go func() { // a reader alongside
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := os.ReadDir(m.Dir); err != nil {
				errs <- fmt.Errorf("readdir: %w", err)
				return
			}
			if b, err := os.ReadFile(filepath.Join(m.Dir, "small")); err != nil || string(b) != "small\n" {
				errs <- fmt.Errorf("read small: %q %v", b, err)
				return
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("throttled writers did not finish (deadlock?)")
	}
	close(stop)
	<-readerDone
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(stage string) {
		t.Helper()
		for w := range writers {
			got, err := os.ReadFile(filepath.Join(m.Dir, fmt.Sprintf("f%d", w)))
			if err != nil || !bytes.Equal(got, content(w)) {
				t.Fatalf("%s: f%d read back %d bytes (%v), differing", stage, w, len(got), err)
			}
		}
	}
	check("live")
	m.Commit("throttled writers")
	check("committed")
}

// Ownership works as on a local disk for the session: a node belongs to
// whoever made it, root may give it away, anyone else may not, and the
// kernel checks access against those owners (default_permissions). A
// remount keeps the owners; a commit records none (trees hold no owner),
// so the next mount shows the mount's owner everywhere.
func TestOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: not root; chown to another user and running commands as one take root")
	}
	m := newTestMountAs(t, setupCasesLower, true)
	for d := m.WS(); d != "/"; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
			os.Chmod(d, st.Mode().Perm()|0o005)
		}
	}
	asNobody := func(script string) error {
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = m.WS()
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%q as nobody: %v: %s", script, err, out)
		}
		return nil
	}
	owner := func(name string) (uint32, uint32) {
		var st unix.Stat_t
		if err := unix.Lstat(m.WS(name), &st); err != nil {
			t.Fatalf("stat %s: %v", name, err)
		}
		return st.Uid, st.Gid
	}
	me, myGroup := uint32(os.Getuid()), uint32(os.Getgid())
	if err := os.Mkdir(m.WS("pub"), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(m.WS("pub"), 0o777)
	if err := asNobody("echo mine > pub/n && mkdir pub/d && ln -s n pub/l"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.WS("root-only"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(m.WS("root-only"), 1234, 5678); err != nil {
		t.Fatalf("chown by root: %v", err)
	}
	if err := os.Lchown(m.WS("pub/l"), 4321, -1); err != nil {
		t.Fatalf("lchown of a symlink by root: %v", err)
	}
	// The kernel refuses these against the owners the mount reports.
	for _, script := range []string{
		"chown 0 pub/n",       // giving a file away takes CAP_CHOWN
		"chgrp 0 pub/n",       // nobody is not in group 0
		"echo x >> root-only", // 0644, owned by 1234
		"chmod 777 root-only", // not the owner
		"touch -d @0 file",    // someone else's file (a lower file is the mount's owner's)
	} {
		if err := asNobody(script); err == nil {
			t.Errorf("%q as nobody succeeded", script)
		}
	}
	if err := asNobody("chmod 600 pub/n && echo more >> pub/n"); err != nil {
		t.Errorf("the owner changing its own file: %v", err)
	}
	check := func(stage string, want map[string][2]uint32) {
		for name, o := range want {
			if uid, gid := owner(name); uid != o[0] || gid != o[1] {
				t.Errorf("%s: %s owned by %d:%d, want %d:%d", stage, name, uid, gid, o[0], o[1])
			}
		}
	}
	want := map[string][2]uint32{
		"pub/n": {65534, 65534}, "pub/d": {65534, 65534}, "pub/l": {4321, 65534},
		"root-only": {1234, 5678}, "pub": {me, myGroup}, "file": {me, myGroup},
	}
	check("made", want)
	// A mount owned by someone else (as art run's is): root's own files
	// and mode 0000 show as they are, not as the mount's owner's or 0644.
	m.owner = &overlay.Owner{UID: 65534, GID: 65534}
	m.Remount()
	if err := os.Chown(m.WS("root-only"), 0, 0); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(m.WS("mode0"), os.O_CREATE|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, err := os.Lstat(m.WS("mode0")); err != nil || fi.Mode().Perm() != 0 {
		t.Errorf("open(O_CREAT, 0000) made %v, %v", fi.Mode(), err)
	}
	want["root-only"] = [2]uint32{0, 0}
	want["mode0"] = [2]uint32{me, myGroup}
	want["file"] = [2]uint32{65534, 65534} // the lower file follows the mount's owner
	want["pub"] = [2]uint32{65534, 65534}  // made by root as the mount's owner
	check("remounted for another owner", want)
	m.owner = nil
	m.Remount()
	want["file"], want["pub"] = [2]uint32{me, myGroup}, [2]uint32{me, myGroup}
	check("remounted", want)
	m.Commit("owners")
	for name := range want {
		want[name] = [2]uint32{me, myGroup}
	}
	check("committed", want)
}

// A name another process keeps replacing by rename (an atomic config
// write, a build replacing a tool) always opens, to the old file or the
// new: about one open in thirty failed with ENOENT, the kernel having
// looked up the file the rename then freed; a freed file now opens for
// reading until the kernel forgets it. (Writer and readers are
// other processes, as in a build: within this one the race hardly shows.
// perl-base is part of every Debian system.)
func TestOpenWhileRenamedOver(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skipf("skipping: no perl to run the writer and readers (%v)", err)
	}
	m := newTestMount(t, setupCasesLower)
	dir := m.WS("replaced")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "target"), []byte("version 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writer := exec.Command("perl", "-e", `for ($i = 1; ; $i++) { open(F, ">", "tmp") or die; print F "version $i\n"; close(F); rename("tmp", "target") or die }`)
	writer.Dir = dir
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	defer writer.Wait()
	defer writer.Process.Kill()
	const opens = 5000
	reader := fmt.Sprintf(`for (1..%d) { if (open(F, "<", "target")) { $l = <F>; print "TORN\n" unless $l =~ /^version \d+$/; close(F) } else { print "FAIL $!\n" } }`, opens)
	var outs [2]bytes.Buffer
	var readers sync.WaitGroup
	for k := range outs {
		readers.Add(1)
		go func() {
			defer readers.Done()
			c := exec.Command("perl", "-e", reader)
			c.Dir, c.Stdout = dir, &outs[k]
			if err := c.Run(); err != nil {
				t.Error(err)
			}
		}()
	}
	readers.Wait()
	out := outs[0].String() + outs[1].String()
	if n := strings.Count(out, "FAIL"); n > 0 {
		t.Errorf("%d of %d opens of a name always there failed: %.200s", n, 2*opens, out)
	}
	if n := strings.Count(out, "TORN"); n > 0 {
		t.Errorf("%d reads saw a partial file", n)
	}
}
