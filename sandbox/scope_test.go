package sandbox

import (
	"fmt"
	"net"
	"strings"
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
