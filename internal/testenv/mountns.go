package testenv

import (
	"io"
	"os/exec"
	"syscall"
	"testing"
)

// HoldMountNamespace starts a process in a mount namespace of its own,
// made now (with unshare(1); as the user cred names, in a user namespace
// of its own, when cred is set), and returns it once the namespace
// exists; it is killed when the test ends. The namespace holds a copy of
// every mount there is, as the sandbox of an art run started meanwhile
// does. The test is skipped where unshare is missing.
func HoldMountNamespace(t testing.TB, cred *syscall.Credential) *exec.Cmd {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("skipping: unshare (util-linux) is missing")
	}
	args := []string{"--mount", "--propagation", "private", "sh", "-c", "echo ready; exec sleep 300"}
	if cred != nil {
		args = append([]string{"--user"}, args...)
	}
	holder := exec.Command(unshare, args...)
	if cred != nil {
		holder.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	if _, err := io.ReadFull(out, make([]byte, 6)); err != nil {
		t.Fatalf("the namespace's process: %v", err)
	}
	return holder
}
