package sandbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestBoundSocketPaths(t *testing.T) {
	const header = "Num       RefCount Protocol Flags    Type St Inode Path\n"
	tests := []struct {
		name, listing string
		want          []string
	}{
		{"pathname", "0000000000000000: 00000002 00000000 00010000 0001 01 23456 /var/lib/lxd/unix.socket\n", []string{"/var/lib/lxd/unix.socket"}},
		{"padded inode", "ffff8a0c: 00000003 00000000 00000000 0001 03     7 /run/a\n", []string{"/run/a"}},
		{"unnamed", "0000000000000000: 00000003 00000000 00000000 0001 03 33222\n", nil},
		{"abstract", "0000000000000000: 00000002 00000000 00010000 0001 01 23456 @/tmp/.X11-unix/X0\n", nil},
		{"relative", "0000000000000000: 00000002 00000000 00010000 0001 01 23456 sock\n", nil},
		{"spaces kept", "0000000000000000: 00000002 00000000 00010000 0001 01 23456 /srv/my dir/s s\n", []string{"/srv/my dir/s s"}},
		{"each once", "0000000000000000: 00000002 00000000 00010000 0001 01 1 /x\n0000000000000000: 00000003 00000000 00000000 0001 03 2 /x\n", []string{"/x"}},
		{"not a listing line", "/etc/passwd\n0000: garbage /etc/shadow\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := boundSocketPaths(strings.NewReader(header + tc.listing))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// A name with a newline goes on over the next lines of the listing, which
// may read as lines of their own: such a socket was never covered.
func TestBoundSocketPathsJoined(t *testing.T) {
	const line = "0000000000000000: 00000002 00000000 00010000 0001 01 23456 "
	long := "/" + strings.Repeat("d", 60)
	tests := []struct {
		name, listing string
		paths, joined []string
	}{
		{"one line each", line + "/a\n" + line + "/b\n", []string{"/a", "/b"}, []string{"/a\n" + line + "/b"}},
		{"a name over two lines", line + "/srv/a b\nc\n", []string{"/srv/a b"}, []string{"/srv/a b\nc"}},
		{"the rest reads as a line", line + "/srv/a\n0: 0 0 0 0 0 1 /x\n", []string{"/srv/a", "/x"}, []string{"/srv/a\n0: 0 0 0 0 0 1 /x"}},
		{"over three lines", line + "/s\nx\ny\n", []string{"/s"}, []string{"/s\nx", "/s\nx\ny"}},
		{"longer than sun_path", line + long + "\n" + line + long + "\n", []string{long}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			paths, joined := boundSocketPaths(strings.NewReader(tc.listing))
			if !slices.Equal(paths, tc.paths) || !slices.Equal(joined, tc.joined) {
				t.Errorf("got %q and %q, want %q and %q", paths, joined, tc.paths, tc.joined)
			}
		})
	}
}

// listenUnix binds a unix socket at p, closed when the test ends.
func listenUnix(t *testing.T, p string) net.Listener {
	t.Helper()
	ln, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func TestHostSocketUnreachable(t *testing.T) {
	requireBwrap(t)
	requireTool(t, "/usr/bin/python3")
	dir := hostTempDir(t, "art-hostsock-")
	os.Chmod(dir, 0o755)
	sock := filepath.Join(dir, "daemon.sock")
	ln := listenUnix(t, sock)
	os.Chmod(sock, 0o777)
	accepted := make(chan bool, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- true
		}
	}()
	connect := `import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("refused:", e.strerror)
    sys.exit(1)
print("CONNECTED")`
	for _, net := range []bool{false, true} {
		cfg := baseConfig(t, "python3", "-c", connect, sock)
		cfg.Net = net
		o := run(t, cfg, "")
		if o.Err != nil {
			t.Fatalf("Run: %v (%q)", o.Err, o.Stderr)
		}
		if o.ExitCode == 0 || strings.Contains(o.Stdout, "CONNECTED") || !strings.Contains(o.Stdout, "refused") {
			t.Errorf("net=%v: the agent reached the host socket: %+v %q %q", net, o.Result, o.Stdout, o.Stderr)
		}
	}
	select {
	case <-accepted:
		t.Error("the host daemon got a connection from the sandbox")
	default:
	}
	// The control: a bind of the socket's directory is the user's choice.
	cfg := baseConfig(t, "python3", "-c", connect, "/mnt/daemon.sock")
	cfg.Binds = []Bind{{Host: dir, Guest: "/mnt", ReadOnly: true}}
	if o := run(t, cfg, ""); o.ExitCode != 0 || !strings.Contains(o.Stdout, "CONNECTED") {
		t.Errorf("control failed: the socket bound in on purpose is unreachable: %+v %q %q", o.Result, o.Stdout, o.Stderr)
	}
}

// TestHostSocketMasksListing: the listing read from a file; none is none
// to cover, one that cannot be read refuses the sandbox rather than
// leaving every host socket reachable.
func TestHostSocketMasksListing(t *testing.T) {
	dir := hostTempDir(t, "art-sockets-")
	sock := filepath.Join(dir, "daemon.sock")
	listenUnix(t, sock)
	listing := filepath.Join(dir, "unix")
	os.WriteFile(listing, []byte("Num       RefCount Protocol Flags    Type St Inode Path\n"+
		"0000000000000000: 00000002 00000000 00010000 0001 01 23456 "+sock+"\n"), 0o644)
	me := identity{uid: uint32(os.Getuid()), gid: uint32(os.Getgid())}
	tests := []struct {
		name, listing string
		want          []string
		err           string
	}{
		{"a listing", listing, []string{sock}, ""},
		{"no listing", filepath.Join(dir, "missing"), nil, ""},
		{"unreadable", dir, nil, "list the host's unix sockets, to cover them in the sandbox: read " + dir + ": is a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hostSocketMasks(tc.listing, me)
			if msg := fmt.Sprint(err); (tc.err == "" && err != nil) || (tc.err != "" && msg != tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
