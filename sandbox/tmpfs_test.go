package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func requireRootForTmpfs(t *testing.T) {
	t.Helper()
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("skipping: art sizes the sandbox's tmpfs mounts only as root; run as root")
	}
}

// statfsScript prints "DIR BYTES INODES" for each of the sandbox's tmpfs
// mounts, then tries to write 100 MiB into /tmp and /dev/shm.
const statfsScript = `for d in /tmp /dev/shm /run; do set -- $(stat -f -c '%b %S %c' $d); echo "$d $(($1 * $2)) $3"; done
for d in /tmp /dev/shm; do dd if=/dev/zero of=$d/big bs=1M count=100 2>&1 | grep -q 'No space left' && echo "$d full"; done; true`

// parseStatfs reads statfsScript's lines into DIR -> [bytes, inodes].
func parseStatfs(t *testing.T, out string) map[string][2]int64 {
	t.Helper()
	m := map[string][2]int64{}
	for _, line := range strings.Split(out, "\n") {
		var dir string
		var size, inodes int64
		if _, err := fmt.Sscanf(line, "%s %d %d", &dir, &size, &inodes); err == nil {
			m[dir] = [2]int64{size, inodes}
		}
	}
	return m
}

func TestTmpfsSized(t *testing.T) {
	requireRootForTmpfs(t)
	const size = 64 << 20
	def := 2 * DefaultTmpSize() // the kernel's default: half of RAM
	cases := []struct {
		name     string
		tmpSize  int64
		wantSize func(int64) bool
		full     bool
	}{
		{"64 MiB", size, func(n int64) bool { return n == size }, true},
		{"kernel default", 0, func(n int64) bool { return n > def*99/100 && n < def*101/100 }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := baseConfig(t, "/bin/sh", "-c", statfsScript)
			cfg.TmpSize = c.tmpSize
			o := run(t, cfg, "")
			if o.Err != nil || o.ExitCode != 0 {
				t.Fatalf("exit %d, %v\n%s%s", o.ExitCode, o.Err, o.Stdout, o.Stderr)
			}
			got := parseStatfs(t, o.Stdout)
			for _, d := range tmpfsMounts {
				if !c.wantSize(got[d][0]) {
					t.Errorf("%s is %d bytes (%d for the kernel's default)", d, got[d][0], def)
				}
				if c.tmpSize > 0 && got[d][1] != c.tmpSize/tmpfsInodeBytes {
					t.Errorf("%s has %d inodes, want %d", d, got[d][1], c.tmpSize/tmpfsInodeBytes)
				}
			}
			for _, d := range []string{"/tmp", "/dev/shm"} {
				if full := strings.Contains(o.Stdout, d+" full"); full != c.full {
					t.Errorf("writing 100 MiB into %s: full %v, want %v\n%s", d, full, c.full, o.Stdout)
				}
			}
		})
	}
}

// A tmpfs of the host where a sandbox tmpfs was expected (binds cannot
// cover those paths today; this guards the day one does) is the host's:
// sizing it would resize the host's filesystem.
func TestTmpfsOfTheHostNotResized(t *testing.T) {
	requireRootForTmpfs(t)
	host := t.TempDir()
	if err := syscall.Mount("tmpfs", host, "tmpfs", 0, "size=32m,mode=1777"); err != nil {
		t.Skipf("skipping: cannot mount a tmpfs (%v)", err)
	}
	defer syscall.Unmount(host, syscall.MNT_DETACH)
	devs, err := hostDevices()
	if err != nil {
		t.Fatal(err)
	}
	if err := resizeTmpfs(unix.AT_FDCWD, host, 64<<20, devs); err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(host, &st); err != nil {
		t.Fatal(err)
	}
	if n := int64(st.Blocks) * st.Bsize; n != 32<<20 {
		t.Fatalf("the host's tmpfs is now %d bytes, not 32 MiB", n)
	}
}

// When sizing fails, the command never runs and Run says why.
func TestTmpfsSizingFailureRunsNothing(t *testing.T) {
	requireRootForTmpfs(t)
	cfg := baseConfig(t, "/bin/sh", "-c", "touch /home/agent/ws/ran")
	cfg.TmpSize = 64 << 20
	cfg.sizer = func(int, int64, func() bool) error { return errors.New("size the sandbox's /tmp: refused") }
	o := run(t, cfg, "")
	if o.ExitCode != 125 || o.Err == nil {
		t.Fatalf("exit %d, %v; want 125 and an error", o.ExitCode, o.Err)
	}
	if !strings.Contains(o.Err.Error(), "refused") || !strings.Contains(o.Err.Error(), "--tmp-size 0") {
		t.Errorf("the error does not say what failed and what to do: %v", o.Err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Home, "ws", "ran")); err == nil {
		t.Fatal("the command ran although its tmpfs mounts were not sized")
	}
	// The real sizer on a sandbox that is gone: its pid is free, or
	// taken by another process (this one; alive says no).
	c := exec.Command("true")
	c.Run()
	for _, pid := range []int{c.Process.Pid, os.Getpid()} {
		if err := sizeTmpfs(pid, 64<<20, func() bool { return false }); err == nil || !strings.Contains(err.Error(), "tmpfs") {
			t.Errorf("sizing a gone sandbox (pid %d): %v, want an error", pid, err)
		}
	}
}

// Root without CAP_SYS_ADMIN or CAP_SYS_PTRACE (a container) cannot size
// them and does not try: the sandbox runs with the kernel's default.
func TestTmpfsNotSizedWithoutCapabilities(t *testing.T) {
	requireRootForTmpfs(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("skipping: setpriv (util-linux) is missing: %v", err)
	}
	for _, capName := range []string{"sys_admin", "sys_ptrace"} {
		t.Run(capName, func(t *testing.T) {
			cfg := baseConfig(t, "/bin/sh", "-c", statfsScript)
			cfg.TmpSize = 64 << 20
			cmd, resFile := helperCmd(t, cfg)
			cmd.Args = append([]string{setpriv, "--inh-caps=-" + capName, "--bounding-set=-" + capName, "--"}, cmd.Args...)
			cmd.Path = setpriv
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			r := readHelperResult(t, resFile)
			if r.Err != "" || r.ExitCode != 0 {
				t.Fatalf("without CAP_%s: exit %d, %s\n%s", strings.ToUpper(capName), r.ExitCode, r.Err, out)
			}
			if got := parseStatfs(t, string(out)); got["/tmp"][0] == 64<<20 || got["/tmp"][0] == 0 {
				t.Errorf("/tmp is %d bytes: sized without the capability, or not seen\n%s", got["/tmp"][0], out)
			}
		})
	}
}

// With the tmpfs line on fd 6 and no seccomp program (fd 5 left empty),
// the agent gets no descriptor beyond stdio.
func TestTmpfsNoDescriptorLeaks(t *testing.T) {
	requireRootForTmpfs(t)
	cfg := baseConfig(t, "ls", "/proc/self/fd")
	cfg.TmpSize = 64 << 20
	o := run(t, cfg, "")
	if o.Err != nil || o.ExitCode != 0 {
		t.Fatalf("exit %d, %v\n%s", o.ExitCode, o.Err, o.Stderr)
	}
	if fds := strings.Fields(o.Stdout); len(fds) > 4 { // 0, 1, 2 and ls's own
		t.Errorf("descriptors leaked into the sandbox: %v", fds)
	}
}
