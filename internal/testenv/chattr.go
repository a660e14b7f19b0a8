// Package testenv holds helpers that tests of several packages share.
package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// Chattr sets a file attribute on path (flag "+a": append-only, "+i":
// immutable) and clears it when the test ends. The test is skipped only
// where the machine cannot set it, saying why: not root (the attributes
// need CAP_LINUX_IMMUTABLE), chattr not installed (e2fsprogs), or a
// filesystem without attributes. Any other failure fails the test.
func Chattr(t testing.TB, flag, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("skipping: chattr %s needs root (CAP_LINUX_IMMUTABLE)", flag)
	}
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skipf("skipping: chattr is not installed (e2fsprogs): %v", err)
	}
	out, err := exec.Command("chattr", flag, path).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("Operation not supported")) || bytes.Contains(out, []byte("Inappropriate ioctl")) {
			t.Skipf("skipping: the filesystem of %s has no %s attribute: %s", path, flag, bytes.TrimSpace(out))
		}
		t.Fatalf("chattr %s %s: %v %s", flag, path, err, out)
	}
	clear := "-" + flag[1:]
	t.Cleanup(func() { exec.Command("chattr", clear, path).Run() })
}

// Unchattr clears a flag Chattr set before the test ends.
func Unchattr(t testing.TB, flag, path string) {
	t.Helper()
	if out, err := exec.Command("chattr", "-"+flag[1:], path).CombinedOutput(); err != nil {
		t.Fatalf("chattr -%s %s: %v %s", flag[1:], path, err, out)
	}
}
