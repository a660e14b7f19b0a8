package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// With Net the sandbox shares the host's network namespace, where the
// host's abstract unix sockets live: the agent must not reach them (a
// container runtime's shim API or an X server listen on such names). A
// socket the agent makes itself still works.
func TestAbstractSocketsOfTheHostUnreachable(t *testing.T) {
	requireBwrap(t)
	requireTool(t, "/usr/bin/python3")
	if ok, _ := scopesSupported(); !ok {
		t.Skip("skipping: this kernel has no Landlock scopes (Linux 6.12+ with Landlock enabled)")
	}
	name := fmt.Sprintf("art-test-abstract-%d", time.Now().UnixNano())
	ln, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan bool, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err == nil
	}()
	script := fmt.Sprintf(`
import socket, errno
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0%s"); print("host: connected")
except OSError as e:
    print("host:", errno.errorcode[e.errno])
own = socket.socket(socket.AF_UNIX); own.bind("\0%s-own"); own.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect("\0%s-own"); print("own: connected")
`, name, name, name)
	for _, withNet := range []bool{false, true} {
		cfg := baseConfig(t, "python3", "-c", script)
		cfg.Net = withNet
		o := run(t, cfg, "")
		if o.Err != nil || o.ExitCode != 0 {
			t.Fatalf("net %v: exit %d, %v\n%s%s", withNet, o.ExitCode, o.Err, o.Stdout, o.Stderr)
		}
		if !strings.Contains(o.Stdout, "own: connected") || strings.Contains(o.Stdout, "host: connected") {
			t.Errorf("net %v: the agent reached the host's abstract socket, or not its own:\n%s", withNet, o.Stdout)
		}
		if withNet && !strings.Contains(o.Stdout, "host: EPERM") {
			t.Errorf("net %v: want EPERM from Landlock:\n%s", withNet, o.Stdout)
		}
	}
	select {
	case <-accepted:
		t.Fatal("the host's abstract socket accepted a connection from the sandbox")
	default:
	}
}

// scopeHelperEnv makes the test binary call ScopeThread for the program it
// names and print what it did (TestScopeSkipsSetuidWithoutAdmin).
const scopeHelperEnv = "ART_SANDBOX_TEST_SCOPE"

func scopeHelper(program string) int {
	runtime.LockOSThread()
	ok, err := ScopeThread(program)
	status, _ := os.ReadFile("/proc/thread-self/status")
	nnp := ""
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "NoNewPrivs:") {
			nnp = strings.TrimSpace(strings.TrimPrefix(line, "NoNewPrivs:"))
		}
	}
	fmt.Printf("scoped=%v err=%v nnp=%s\n", ok, err, nnp)
	return 0
}

// Without CAP_SYS_ADMIN, a set-user-ID bwrap is not scoped (Landlock would
// need no_new_privs, which would keep bwrap from its privilege); a plain
// one is, with no_new_privs.
func TestScopeSkipsSetuidWithoutAdmin(t *testing.T) {
	if !ScopesSupported() {
		t.Skip("skipping: this kernel has no Landlock scopes (Linux 6.12+ with Landlock enabled)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("skipping: setpriv (util-linux) is missing: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to make a set-user-ID file and drop CAP_SYS_ADMIN")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	for _, c := range []struct {
		mode os.FileMode
		want string
	}{
		{0o755 | os.ModeSetuid, "scoped=false err=<nil> nnp=0"},
		{0o755, "scoped=true err=<nil> nnp=1"},
	} {
		prog := filepath.Join(dir, fmt.Sprintf("bwrap-%o", c.mode))
		if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(prog, c.mode); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(setpriv, "--inh-caps=-sys_admin", "--bounding-set=-sys_admin", "--", os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), scopeHelperEnv+"="+prog)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%v: %q, %v; want %q", c.mode, out, err, c.want)
		}
	}
	if setUID(filepath.Join(dir, "missing")) {
		t.Error("a missing file is set-user-ID")
	}
}

// TestScopeThreadFailsPastTheNestingLimit: a thread already in as many
// Landlock domains as the kernel nests (16) cannot be scoped again; the
// error names the call, and the run that asked fails (defaultStarter wraps
// it as "scope the sandbox") rather than starting an unscoped sandbox.
func TestScopeThreadFailsPastTheNestingLimit(t *testing.T) {
	if !ScopesSupported() {
		t.Skip("skipping: this kernel has no Landlock scopes (Linux 6.12+ with Landlock enabled)")
	}
	type result struct {
		layers int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the scoped thread ends with the goroutine
		for i := 0; i < 64; i++ {
			ok, err := ScopeThread("/bin/true")
			if err != nil || !ok {
				done <- result{i, err}
				return
			}
		}
		done <- result{64, nil}
	}()
	res := <-done
	if res.err == nil || !errors.Is(res.err, syscall.E2BIG) || !strings.Contains(res.err.Error(), "landlock_restrict_self") {
		t.Fatalf("after %d domains: %v, want landlock_restrict_self's E2BIG", res.layers, res.err)
	}
	if res.layers != 16 {
		t.Errorf("failed after %d domains, want 16", res.layers)
	}
}
