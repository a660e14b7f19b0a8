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
	"time"
)

func TestCpuCgroupPath(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		path       string
		v2, found  bool
	}{
		{"v1 cpu alone", "9:name=systemd:/\n2:cpuacct:/\n1:cpu:/\n0::/\n", "/", false, true},
		{"v1 cpu with cpuacct, in a cgroup", "4:memory:/x\n3:cpu,cpuacct:/user.slice\n0::/\n", "/user.slice", false, true},
		{"v1 cpuset is not cpu", "3:cpuset:/\n0::/init.scope\n", "/init.scope", true, true},
		{"v2 only", "0::/user.slice/user-1000.slice/session-2.scope\n", "/user.slice/user-1000.slice/session-2.scope", true, true},
		{"v2 root", "0::/\n", "/", true, true},
		{"nothing", "", "", true, false},
		{"garbage", "no colons here\n1:cpu\n", "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, v2, found := cpuCgroupPath(tc.text)
			if path != tc.path || v2 != tc.v2 || found != tc.found {
				t.Errorf("cpuCgroupPath = %q, v2 %v, found %v; want %q, %v, %v", path, v2, found, tc.path, tc.v2, tc.found)
			}
		})
	}
}

func TestCpuHierarchyMount(t *testing.T) {
	const mi = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu\040x rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:31 /sub /elsewhere rw,relatime shared:5 - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
`
	if got := cpuHierarchyMount(strings.NewReader(mi), false); got != "/sys/fs/cgroup/cpu x" {
		t.Errorf("v1: %q", got)
	}
	if got := cpuHierarchyMount(strings.NewReader(mi), true); got != "/sys/fs/cgroup/unified" {
		t.Errorf("v2: %q", got)
	}
	if got := cpuHierarchyMount(strings.NewReader("34 31 0:31 / /c rw - cgroup cgroup rw,cpuset\n"), false); got != "" {
		t.Errorf("cpuset taken for cpu: %q", got)
	}
}

// The paths joinSchedGroup reads, pointed at files of the test's.
func fakeSchedHost(t *testing.T, autogroup, cgroup, mountinfo string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	saved := []string{autogroupFile, selfCgroupFile, mountinfoFile}
	autogroupFile = write("autogroup", autogroup)
	selfCgroupFile = write("cgroup", cgroup)
	mountinfoFile = write("mountinfo", mountinfo)
	t.Cleanup(func() { autogroupFile, selfCgroupFile, mountinfoFile = saved[0], saved[1], saved[2] })
}

// Nothing is moved where autogroup does not apply or cannot be helped.
// The hierarchy (a temporary directory) passes for a cgroup filesystem
// but in the case that is about that check.
func TestSchedGroupNotNeeded(t *testing.T) {
	hier := t.TempDir()
	mi := fmt.Sprintf("32 31 0:29 / %s rw - cgroup cgroup rw,cpu\n", hier)
	for _, tc := range []struct {
		name, autogroup, cgroup, mountinfo string
		notCgroupFS                        bool
	}{
		{"autogroup off", "0\n", "1:cpu:/\n", mi, false},
		{"in a cgroup already", "1\n", "1:cpu:/user.slice\n", mi, false},
		{"no cpu hierarchy mounted", "1\n", "1:cpu:/\n", "", false},
		{"v2 without the cpu controller", "1\n", "0::/\n", fmt.Sprintf("41 31 0:38 / %s rw - cgroup2 cgroup2 rw\n", hier), false},
		// Found by review: art, as root, made directories and created
		// cgroup.procs files in whatever mountinfo named.
		{"the hierarchy is no cgroup filesystem", "1\n", "1:cpu:/\n", mi, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fakeSchedHost(t, tc.autogroup, tc.cgroup, tc.mountinfo)
			saved := isCgroupFS
			isCgroupFS = func(string, bool) bool { return !tc.notCgroupFS }
			t.Cleanup(func() { isCgroupFS = saved })
			if root, _, ok := schedGroupRoot(); ok {
				t.Errorf("schedGroupRoot chose %s", root)
			}
			if joinSchedGroup(false) {
				leaveSchedGroup()
				t.Fatal("joined a scheduling group")
			}
			if ents, _ := os.ReadDir(hier); len(ents) != 0 {
				t.Errorf("left %v in the hierarchy", ents)
			}
		})
	}
	// The check itself: a temporary directory is no cgroup filesystem.
	if isCgroupFS(hier, false) || isCgroupFS(hier, true) {
		t.Errorf("%s taken for a cgroup filesystem", hier)
	}
}

// A sandbox limited through a cgroup v2 of its own is cloned into it,
// outside any group in the same hierarchy: no group is made for it. A
// directory that turns out to hold no cgroup.procs is no cgroup: the
// file is not created, the directory goes.
func TestSchedGroupCgroup2(t *testing.T) {
	hier := t.TempDir()
	if err := os.WriteFile(filepath.Join(hier, "cgroup.subtree_control"), []byte("cpu memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fakeSchedHost(t, "1\n", "0::/\n", fmt.Sprintf("41 31 0:38 / %s rw - cgroup2 cgroup2 rw\n", hier))
	saved := isCgroupFS
	isCgroupFS = func(string, bool) bool { return true }
	t.Cleanup(func() { isCgroupFS = saved })
	if root, v2, ok := schedGroupRoot(); !ok || !v2 || root != hier {
		t.Fatalf("schedGroupRoot = %q, v2 %v, ok %v", root, v2, ok)
	}
	if joinSchedGroup(true) {
		leaveSchedGroup()
		t.Error("joined a group in the hierarchy of the sandbox's limits cgroup")
	}
	if joinSchedGroup(false) {
		leaveSchedGroup()
		t.Error("joined a directory without cgroup.procs")
	}
	if ents, _ := os.ReadDir(hier); len(ents) != 1 {
		t.Errorf("left %v in the hierarchy", ents)
	}
}

// On a host like this project's CI VM (autogroup on, processes in the cpu
// hierarchy's root) the process joins a cgroup of its own, Runs share it,
// and the last to end takes the process back out and removes it.
func TestSchedGroupJoinAndLeave(t *testing.T) {
	root, _, ok := schedGroupRoot()
	if !ok {
		t.Skip("this host needs no scheduling group: autogroup off, the process already in a cpu cgroup, or no writable cpu hierarchy (as non-root)")
	}
	// A cgroup left by a process that is gone is removed on the way.
	stale := filepath.Join(root, schedCgroupPrefix+"2147483646-1")
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(stale)
	// So is one that has this process's pid (a killed art had it) and the
	// name the join is about to use (found by review: the join failed).
	mine := filepath.Join(root, fmt.Sprintf("%s%d-%d", schedCgroupPrefix, os.Getpid(), schedGroup.seq+1))
	if err := os.Mkdir(mine, 0o755); err != nil {
		t.Fatal(err)
	}
	if !joinSchedGroup(false) {
		os.Remove(mine)
		t.Fatal("did not join")
	}
	if !joinSchedGroup(false) { // a second Run in this process
		t.Fatal("the second join failed")
	}
	dir := schedGroup.dir
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale cgroup %s kept: %v", stale, err)
	}
	cg, _ := os.ReadFile(selfCgroupFile)
	if path, _, _ := cpuCgroupPath(string(cg)); path != "/"+filepath.Base(dir) {
		t.Errorf("in cpu cgroup %q, want /%s", path, filepath.Base(dir))
	}
	leaveSchedGroup()
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the first leave removed the cgroup the other Run uses: %v", err)
	}
	leaveSchedGroup()
	cg, _ = os.ReadFile(selfCgroupFile)
	if path, _, _ := cpuCgroupPath(string(cg)); path != "/" {
		t.Errorf("back in cpu cgroup %q, want /", path)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cgroup %s left behind: %v", dir, err)
	}
}

// A sandbox process still leaving the group when art leaves it makes
// the cgroup busy (EBUSY): the removal is retried until it is empty.
func TestSchedGroupLeaveWhileBusy(t *testing.T) {
	if _, _, ok := schedGroupRoot(); !ok {
		t.Skip("this host needs no scheduling group: autogroup off, the process already in a cpu cgroup, or no writable cpu hierarchy (as non-root)")
	}
	if !joinSchedGroup(false) {
		t.Fatal("did not join")
	}
	dir := schedGroup.dir
	child := exec.Command("cat") // started in the group; exits at EOF
	stdin, err := child.StdinPipe()
	if err != nil {
		leaveSchedGroup()
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		leaveSchedGroup()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { child.Wait(); close(done) }()
	if err := os.Remove(dir); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("removing the group with the child in it: %v, want EBUSY", err)
	}
	time.AfterFunc(20*time.Millisecond, func() { stdin.Close() })
	leaveSchedGroup()
	<-done
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cgroup %s left behind once its last process exited: %v", dir, err)
	}
}

// The background API: Run waits for the join; Leave and Settle take the
// process back out; Settle alone does both; a nil group is a no-op.
func TestSchedGroupInBackground(t *testing.T) {
	var none *SchedGroup
	none.wait()
	none.Leave()
	none.Settle()
	if _, _, ok := schedGroupRoot(); !ok {
		t.Skip("this host needs no scheduling group: autogroup off, the process already in a cpu cgroup, or no writable cpu hierarchy (as non-root)")
	}
	for _, leaveFirst := range []bool{true, false} {
		g := JoinSchedGroup(Config{})
		g.wait()
		if !g.in {
			t.Fatal("not in the group after the join")
		}
		cg, _ := os.ReadFile(selfCgroupFile)
		if path, _, _ := cpuCgroupPath(string(cg)); path == "/" {
			t.Fatal("the join did not move the process")
		}
		dir := schedGroup.dir
		if leaveFirst {
			g.Leave()
			g.Leave()
		}
		g.Settle()
		cg, _ = os.ReadFile(selfCgroupFile)
		if path, _, _ := cpuCgroupPath(string(cg)); path != "/" {
			t.Errorf("after Settle (Leave first: %v) in cpu cgroup %q", leaveFirst, path)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left behind: %v", dir, err)
		}
	}
}

// A sandbox started with Config.SchedGroup runs in the group it names,
// with the process that started it; afterwards the group is gone.
func TestRunInSchedGroup(t *testing.T) {
	requireBwrap(t)
	if _, _, ok := schedGroupRoot(); !ok {
		t.Skip("this host needs no scheduling group: autogroup off, the process already in a cpu cgroup, or no writable cpu hierarchy (as non-root)")
	}
	marker := fmt.Sprintf("sched-group-marker-%d-", os.Getpid())
	cfg := baseConfig(t, "/bin/sh", "-c", "sleep 2 # "+marker)
	g := JoinSchedGroup(cfg)
	cfg.SchedGroup = g
	done := make(chan runOut, 1)
	go func() { done <- run(t, cfg, "") }()
	var pids []int
	for deadline := time.Now().Add(20 * time.Second); len(pids) == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		pids = processesWith(marker)
	}
	if len(pids) == 0 {
		t.Fatal("the sandbox's command never showed up")
	}
	self, _ := os.ReadFile(selfCgroupFile)
	selfPath, _, _ := cpuCgroupPath(string(self))
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			continue // gone meanwhile
		}
		if path, _, _ := cpuCgroupPath(string(b)); path != selfPath || path == "/" {
			t.Errorf("sandbox process %d in cpu cgroup %q, this process in %q", pid, path, selfPath)
		}
	}
	if o := <-done; o.Err != nil || o.ExitCode != 0 {
		t.Fatalf("Run: %v, exit %d, stderr %s", o.Err, o.ExitCode, o.Stderr)
	}
	dir := filepath.Join(schedGroup.root, strings.TrimPrefix(selfPath, "/"))
	g.Leave()
	g.Settle()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cgroup %s left after the sandbox: %v", dir, err)
	}
}

// The group of an art killed by kill -9 is removed by the next command,
// once the sandbox processes it still held have exited (they die with art,
// but not at once: the crash campaign found one still leaving).
func TestStaleSchedGroupRemovedOnceEmpty(t *testing.T) {
	root, _, ok := schedGroupRoot()
	if !ok {
		t.Skip("this host needs no scheduling group: autogroup off, the process already in a cpu cgroup, or no writable cpu hierarchy (as non-root)")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, fmt.Sprintf("%s%d-1", schedCgroupPrefix, dead.Process.Pid))
	leaving := exec.Command("cat") // the sandbox's last process, exiting at EOF
	stdin, err := leaving.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := leaving.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { leaving.Wait(); close(done) }()
	defer os.Remove(dir)
	// Until the process is in it, the group is stale and empty: an art
	// command starting meanwhile (the other test packages run alongside)
	// removes it, as it should. It is made again then.
	for try := 0; ; try++ {
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			stdin.Close()
			t.Fatal(err)
		}
		err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(leaving.Process.Pid)), 0o644)
		if err == nil {
			break
		}
		// ENOENT, or ENODEV when it went between the open and the write.
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENODEV) || try == 100 {
			stdin.Close()
			t.Fatalf("move a process into the group: %v", err)
		}
	}
	time.AfterFunc(50*time.Millisecond, func() { stdin.Close() })
	removeStaleSchedGroups(root, time.Second)
	<-done
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the stale group %s is still there once its last process exited: %v", dir, err)
	}
}
