package sandbox

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// Without root the agent runs as art's caller, with the caller's
// supplementary groups: a workspace writable through one of them was
// reported as not writable (the caller's identity left them out). The
// test runs itself again as a user that is not root, in a group the
// workspace belongs to.
func TestCannotWriteCallersGroups(t *testing.T) {
	const uid, gid, group = 4243, 4243, 4242
	if dir := os.Getenv("ART_TEST_CALLER_GROUPS_DIR"); dir != "" {
		for _, tc := range []struct {
			name     string
			writable bool
		}{
			{"group", true},   // root:4242 0775, through the supplementary group
			{"others", false}, // root:0 0755
		} {
			got := CannotWrite("", filepath.Join(dir, tc.name))
			if (got == "") != tc.writable {
				t.Errorf("%s: CannotWrite = %q, want writable %v", tc.name, got, tc.writable)
			}
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to run the test as another user")
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, g := range map[string]int{"group": group, "others": 0} {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chown(p, 0, g)
		if g != 0 {
			os.Chmod(p, 0o775)
		}
	}
	// The test binary, where the other user can run it.
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	bin := filepath.Join(dir, "sandbox.test")
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, self); err != nil {
		t.Fatal(err)
	}
	out.Close()
	cmd := exec.Command(bin, "-test.run=^TestCannotWriteCallersGroups$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ART_TEST_CALLER_GROUPS_DIR="+dir, "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{group}}}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("as uid %d in group %d: %v\n%s", uid, group, err, b)
	}
}
