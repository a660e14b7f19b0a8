package repo

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// deepName is a directory name of a chain deeper than PATH_MAX: 30 × 201
// bytes is about 6 KiB.
var deepName = strings.Repeat("d", 200)

const deepLevels = 30

// deepRel is the workspace-relative path of the deepest directory.
func deepRel() string {
	parts := make([]string, deepLevels)
	for i := range parts {
		parts[i] = deepName
	}
	return path.Join(parts...)
}

// openDeep opens (making it with mkdir when make is set) the chain of
// directories below dir one level at a time, as no single path reaches it.
func openDeep(t *testing.T, dir string, make bool) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range deepLevels {
		if make {
			if err := unix.Mkdirat(fd, deepName, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				t.Fatal(err)
			}
		}
		sub, err := unix.Openat(fd, deepName, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("open the deep chain below %s: %v", dir, err)
		}
		fd = sub
	}
	return fd
}

func writeAt(t *testing.T, dfd int, name, content string) {
	t.Helper()
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(content)); err != nil {
		t.Fatal(err)
	}
}

func readAt(t *testing.T, dfd int, name string) string {
	t.Helper()
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s in the deep directory: %v", name, err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 100)
	n, _ := unix.Read(fd, buf)
	return string(buf[:n])
}

// Paths longer than PATH_MAX (which ext4, and the overlay, allow) push,
// pull, update and conflict like any other: push and pull open such paths
// by pieces (atPath, openBeneath).
func TestPathsBeyondPathMax(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"top.txt": "top"})
	deep := openDeep(t, ws, true)
	writeAt(t, deep, "leaf", "deep v1")
	if err := unix.Symlinkat("leaf", deep, "ln"); err != nil {
		t.Fatal(err)
	}
	unix.Close(deep)
	leafRel := deepRel() + "/leaf"
	if len(filepath.Join(ws, leafRel)) < 4096 {
		t.Fatalf("the test path is only %d bytes", len(filepath.Join(ws, leafRel)))
	}
	one := push(t, r, ws, "one").Commit
	if got := wsEntries(t, r, one, "ws")[leafRel]; !strings.HasPrefix(got, "file") {
		t.Fatalf("the deep file in the commit: %q", got)
	}

	out := filepath.Join(t.TempDir(), "ws")
	pull(t, r, out, one)
	check := func(stage, want string) {
		t.Helper()
		fd := openDeep(t, out, false)
		defer unix.Close(fd)
		if got := readAt(t, fd, "leaf"); got != want {
			t.Errorf("%s: the deep file reads %q, want %q", stage, got, want)
		}
		buf := make([]byte, 64)
		if n, err := unix.Readlinkat(fd, "ln", buf); err != nil || string(buf[:n]) != "leaf" {
			t.Errorf("%s: the deep link: %q %v", stage, buf[:n], err)
		}
	}
	check("pulled", "deep v1")

	// An edit deep down: the push finds it, the next pull updates it.
	deep = openDeep(t, ws, false)
	writeAt(t, deep, "leaf", "deep v2, longer")
	unix.Close(deep)
	res := push(t, r, ws, "two")
	if res.Hashed != 1 {
		t.Errorf("the second push hashed %d files, want the one changed", res.Hashed)
	}
	pull(t, r, out, res.Commit)
	check("updated", "deep v2, longer")
	if d, err := r.HostDrift(out); err != nil || !d.Clean() {
		t.Errorf("host drift of the pulled copy: %+v %v", d, err)
	}

	// A host edit deep down is a conflict: nothing changes.
	deep = openDeep(t, out, false)
	writeAt(t, deep, "leaf", "edited on the host")
	unix.Close(deep)
	_, err := r.Pull(PullOptions{Dir: out, Commit: one})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), deepName+"/leaf") {
		t.Fatalf("pull over a deep host edit: %v", err)
	}
	check("after the refused pull", "edited on the host")
}

// atPath's refusals: a missing directory on the way, and a piece with no
// slash to cut at (a name longer than any filesystem takes).
func TestAtPathErrors(t *testing.T) {
	base := t.TempDir()
	for _, tc := range []struct {
		name string
		abs  string
		want error
	}{
		{"missing directory on the way", base + "/" + strings.Repeat("missing/", 600) + "f", unix.ENOENT},
		{"no slash to cut at", base + "/" + strings.Repeat("n", 5000), unix.ENAMETOOLONG},
		{"short and missing", base + "/nothing", unix.ENOENT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st unix.Stat_t
			if err := lstatPath(tc.abs, &st); !errors.Is(err, tc.want) {
				t.Errorf("lstatPath: %v, want %v", err, tc.want)
			}
			if fd, err := openPath(tc.abs, unix.O_RDONLY|unix.O_CLOEXEC, 0); !errors.Is(err, tc.want) {
				if err == nil {
					unix.Close(fd)
				}
				t.Errorf("openPath: %v, want %v", err, tc.want)
			}
		})
	}
	root, err := unix.Open(base, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(root)
	how := &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
	if _, err := openBeneath(root, strings.Repeat("missing/", 600)+"f", how); !errors.Is(err, unix.ENOENT) {
		t.Errorf("openBeneath of a missing deep path: %v", err)
	}
	if _, err := openBeneath(root, strings.Repeat("n", 5000), how); !errors.Is(err, unix.ENAMETOOLONG) {
		t.Errorf("openBeneath of a 5000-byte name: %v", err)
	}
	// Beneath stays beneath, piece by piece: ".." out of root is refused.
	if _, err := openBeneath(root, strings.Repeat("../", 1500)+"etc/passwd", how); !errors.Is(err, unix.EXDEV) {
		t.Errorf("openBeneath climbing out of its root: %v", err)
	}
}

// openBeneath refuses a symbolic link in any piece of a long path, not
// only the last (a directory swapped for a link after the scan must not
// lead push anywhere else, at any depth).
func TestOpenBeneathRefusesLinksInEveryPiece(t *testing.T) {
	for _, level := range []int{5, 25} { // in the first piece, in the second
		t.Run(fmt.Sprintf("link at level %d", level), func(t *testing.T) {
			base := t.TempDir()
			fd := openDeep(t, base, true)
			writeAt(t, fd, "leaf", "x")
			unix.Close(fd)
			// Swap the directory at level for a link to it: the path
			// still resolves if links are followed.
			parent, err := unix.Open(base, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			for range level - 1 { // one level at a time: no path reaches it
				sub, err := unix.Openat(parent, deepName, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
				unix.Close(parent)
				if err != nil {
					t.Fatal(err)
				}
				parent = sub
			}
			defer unix.Close(parent)
			if err := unix.Renameat(parent, deepName, parent, "moved"); err != nil {
				t.Fatal(err)
			}
			if err := unix.Symlinkat("moved", parent, deepName); err != nil {
				t.Fatal(err)
			}
			root, err := unix.Open(base, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(root)
			how := &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
			if fd, err := openBeneath(root, deepRel()+"/leaf", how); !errors.Is(err, unix.ELOOP) {
				if err == nil {
					unix.Close(fd)
				}
				t.Errorf("openBeneath through a link at level %d: %v, want ELOOP", level, err)
			}
		})
	}
}
