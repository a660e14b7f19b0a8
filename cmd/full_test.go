package cmd

import (
	"bytes"
	"crypto/rand"
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
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to mount a small tmpfs")
	}
	base := t.TempDir()
	small := filepath.Join(base, "small")
	ws := filepath.Join(base, "ws")
	os.Mkdir(small, 0o755)
	os.Mkdir(ws, 0o755)
	if err := syscall.Mount("tmpfs", small, "tmpfs", 0, "size=2m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(small, syscall.MNT_DETACH) })
	db := filepath.Join(small, "art.db")
	run := func(args ...string) (int, string) {
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
	if code, out := run("init", "-d", db); code != 0 {
		t.Fatalf("init: %s", out)
	}
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
