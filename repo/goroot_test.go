package repo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestRoundTripGoroot pushes the Go toolchain's own src/ (about 11.5k
// files), pulls it into an empty directory and compares: contents with
// diff -r, types, modes and symlink targets with a walk. It runs in the
// normal test suite; -short skips it.
func TestRoundTripGoroot(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: pushes all of $(go env GOROOT)/src; runs without -short")
	}
	goroot := runtime.GOROOT()
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		goroot = strings.TrimSpace(string(out))
	}
	src := filepath.Join(goroot, "src")
	if _, err := os.Stat(filepath.Join(src, "go.mod")); err != nil {
		t.Skipf("SKIP: no Go source tree at %s: %v", src, err)
	}
	diffPath, err := exec.LookPath("diff")
	if err != nil {
		t.Skip("SKIP: diff is not installed")
	}
	r := newTestRepo(t)
	start := time.Now()
	res := push(t, r, src, "goroot")
	t.Logf("push: %d files, %d dirs, %d links, %d objects, %d bytes stored, %v", res.Files, res.Dirs, res.Links, res.NewObjects, res.NewBytes, time.Since(start))
	if res.Files < 5000 {
		t.Fatalf("only %d files pushed from %s", res.Files, src)
	}
	// A second push reads nothing again.
	if again := push(t, r, src, "again"); again.Hashed != 0 {
		t.Errorf("second push re-read %d files", again.Hashed)
	}

	r = reopen(t, r)
	dst := filepath.Join(t.TempDir(), "src")
	start = time.Now()
	pres := pull(t, r, dst, res.Commit)
	t.Logf("pull: %d created, %v", pres.Created, time.Since(start))

	out, err := exec.Command(diffPath, "-r", "--no-dereference", src, dst).CombinedOutput()
	if err != nil {
		lines := strings.SplitN(string(out), "\n", 20)
		t.Fatalf("diff -r %s %s: %v\n%s", src, dst, err, strings.Join(lines, "\n"))
	}
	compareDirs(t, src, dst, false, false)
}
