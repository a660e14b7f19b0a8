package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// Why art moves itself into a cpu cgroup while a sandbox runs.
//
// bwrap starts the sandbox in a session of its own (--new-session, so
// that the agent cannot push keystrokes into the caller's terminal). With
// the scheduler's autogroup feature on, a new session is also a new
// scheduling group, but only for processes in the root of the cpu
// controller's hierarchy: on a host without a service manager putting
// every process into a cgroup (this project's VMs, minimal containers),
// art's FUSE threads and the agent then sit in two groups, and the
// scheduler, which weighs whole groups when it places a woken thread, kept
// moving the agent's processes between CPUs in the middle of their FUSE
// round trips. Reading every file of the Go tree inside art run took
// 1.25-1.45 times as long as on art mount; with autogroup off, or with art
// and the sandbox in one cpu cgroup, the same as on art mount. So when art
// is in the hierarchy's root and autogroup is on, the process moves into
// a cgroup of its own for the sandbox's life (the sandbox, started from
// it, follows), and back afterwards. Anywhere else (a systemd session or
// service, a container's cgroup) nothing changes, and nothing fails if
// the move cannot be made: it only costs speed.

// SchedGroup is a pending or done move of this process into a scheduling
// group it shares with the sandboxes it starts (see above).
//
// Moving a process between cgroups waits for an RCU grace period in the
// kernel (5-13 ms on this project's VM, twice per session: in and out),
// so both moves run in the background, overlapping the session's setup
// (repository, worktree, mount) and its end (unmount, commit).
type SchedGroup struct {
	joined    chan struct{} // closed once the join is over
	in        bool          // set before joined closes: the process is in the group
	leaveOnce sync.Once
	left      chan struct{} // closed once the way back is over
}

// JoinSchedGroup starts moving this process into a scheduling group for
// the sandbox cfg describes, where one is needed (see above), and returns
// at once. Pass the result in cfg.SchedGroup: Run waits for the move
// before it starts the sandbox, which then follows the process into the
// group. Call Leave when the sandbox has ended and Settle before exiting.
func JoinSchedGroup(cfg Config) *SchedGroup {
	// A sandbox limited through a cgroup v2 of its own is cloned into
	// that cgroup, outside any group of this process's in the same
	// hierarchy.
	limitsV2 := limitMechanism(cfg) == LimitsCgroup2
	g := &SchedGroup{joined: make(chan struct{}), left: make(chan struct{})}
	go func() {
		g.in = joinSchedGroup(limitsV2)
		close(g.joined)
	}()
	return g
}

// wait waits for the join to be over.
func (g *SchedGroup) wait() {
	if g != nil {
		<-g.joined
	}
}

// Leave starts taking the process back out of the group, once every
// sandbox started in it has ended. It may be called more than once.
func (g *SchedGroup) Leave() {
	if g == nil {
		return
	}
	g.leaveOnce.Do(func() {
		go func() {
			<-g.joined
			if g.in {
				leaveSchedGroup()
			}
			close(g.left)
		}()
	})
}

// Settle leaves the group (if Leave was not called) and waits until the
// process is out and the group removed.
func (g *SchedGroup) Settle() {
	if g == nil {
		return
	}
	g.Leave()
	<-g.left
}

// schedCgroupPrefix names the cgroups joinSchedGroup makes:
// art-sched-<pid>-<n>.
const schedCgroupPrefix = "art-sched-"

// Paths read by joinSchedGroup (variables for tests).
var (
	autogroupFile  = "/proc/sys/kernel/sched_autogroup_enabled"
	selfCgroupFile = "/proc/self/cgroup"
	mountinfoFile  = "/proc/self/mountinfo"
)

// schedGroup is the process's membership of a cgroup made by
// joinSchedGroup. The cgroup is the process's, not one sandbox's: Runs in
// one process (tests, parallel sessions) share it, the last to end takes
// the process out and removes it.
var schedGroup struct {
	sync.Mutex
	users int
	dir   string // the cgroup joined
	root  string // the hierarchy's root, where the process goes back
	seq   int
}

// joinSchedGroup moves this process into a cgroup of its own in the cpu
// controller's hierarchy when it sits in that hierarchy's root with
// autogroup on (see above), unless that hierarchy is cgroup v2 and the
// sandbox goes into a cgroup v2 of its own for its limits (limitsV2). It
// reports whether it did; every true must be matched by a
// leaveSchedGroup.
func joinSchedGroup(limitsV2 bool) bool {
	schedGroup.Lock()
	defer schedGroup.Unlock()
	if schedGroup.users > 0 {
		schedGroup.users++
		return true
	}
	root, v2, ok := schedGroupRoot()
	if !ok || v2 && limitsV2 {
		return false
	}
	removeStaleSchedGroups(root, 0)
	schedGroup.seq++
	dir := filepath.Join(root, fmt.Sprintf("%s%d-%d", schedCgroupPrefix, os.Getpid(), schedGroup.seq))
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, os.ErrExist) {
		// Left by a killed art process that had this pid (the stale
		// removal passes over this pid's groups): empty, so it goes.
		os.Remove(dir)
		err = os.Mkdir(dir, 0o755)
	}
	if err != nil {
		return false
	}
	if err := moveInto(dir); err != nil {
		os.Remove(dir)
		return false
	}
	schedGroup.users, schedGroup.dir, schedGroup.root = 1, dir, root
	return true
}

// moveInto moves this process into the cgroup dir. cgroup.procs is opened
// for writing only: it exists in every cgroup, and a file created under
// that name would mean dir is no cgroup.
func moveInto(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.Itoa(os.Getpid()))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// leaveSchedGroup undoes one joinSchedGroup that returned true: the last
// one moves the process back to the hierarchy's root and removes the
// cgroup (which the next art command does if the sandbox's last
// processes are still leaving it).
func leaveSchedGroup() {
	schedGroup.Lock()
	defer schedGroup.Unlock()
	if schedGroup.users == 0 {
		return
	}
	schedGroup.users--
	if schedGroup.users > 0 {
		return
	}
	moveInto(schedGroup.root)
	removeGroup(schedGroup.dir, 500*time.Millisecond)
	schedGroup.dir, schedGroup.root = "", ""
}

// removeGroup removes the cgroup dir, waiting up to patience for the
// sandbox's last processes to finish exiting (EBUSY until then). A group
// still busy after that is left for the next art command.
func removeGroup(dir string, patience time.Duration) {
	for deadline := time.Now().Add(patience); ; {
		err := os.Remove(dir)
		if err == nil || !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// schedGroupRoot returns the mount point of the cpu controller's
// hierarchy (and whether it is cgroup v2) when autogroup is on, this
// process can write there, and it sits in the hierarchy's root; ok is
// false otherwise.
func schedGroupRoot() (root string, v2, ok bool) {
	if b, err := os.ReadFile(autogroupFile); err != nil || strings.TrimSpace(string(b)) != "1" {
		return "", false, false
	}
	cg, err := os.ReadFile(selfCgroupFile)
	if err != nil {
		return "", false, false
	}
	path, v2, found := cpuCgroupPath(string(cg))
	if !found || path != "/" {
		return "", false, false // in a cgroup already: autogroup does not apply
	}
	mi, err := os.Open(mountinfoFile)
	if err != nil {
		return "", false, false
	}
	defer mi.Close()
	root = cpuHierarchyMount(mi, v2)
	if root == "" || !isCgroupFS(root, v2) {
		return "", false, false
	}
	if v2 {
		// Child cgroups form their own scheduling groups only where the
		// cpu controller is enabled for them; art does not enable it.
		sub, err := os.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
		if err != nil || !contains(strings.Fields(string(sub)), "cpu") {
			return "", false, false
		}
	}
	if syscall.Access(root, 2 /* W_OK */) != nil {
		return "", false, false
	}
	return root, v2, true
}

// isCgroupFS reports whether path is a cgroup v1 (or, with v2, a cgroup
// v2) filesystem: art, as root, makes directories and writes pids there
// only (a variable for tests).
var isCgroupFS = func(path string, v2 bool) bool {
	var st syscall.Statfs_t
	if syscall.Statfs(path, &st) != nil {
		return false
	}
	if v2 {
		return st.Type == unix.CGROUP2_SUPER_MAGIC
	}
	return st.Type == unix.CGROUP_SUPER_MAGIC
}

// cpuCgroupPath finds, in /proc/self/cgroup's text, the cgroup of the cpu
// controller: a cgroup v1 line naming cpu among its controllers
// ("1:cpu,cpuacct:/path"), else the cgroup v2 line ("0::/path"), for
// which v2 is true.
func cpuCgroupPath(text string) (path string, v2, found bool) {
	var unified string
	haveUnified := false
	for _, line := range strings.Split(text, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			unified, haveUnified = f[2], true
			continue
		}
		if contains(strings.Split(f[1], ","), "cpu") {
			return f[2], false, true
		}
	}
	return unified, true, haveUnified
}

// cpuHierarchyMount returns the mount point, from /proc/self/mountinfo's
// lines, of the cgroup v1 hierarchy holding the cpu controller (v2 false)
// or of the cgroup v2 hierarchy (v2 true); "" when there is none. Only a
// mount of a hierarchy's root counts.
func cpuHierarchyMount(mi io.Reader, v2 bool) string {
	mounts, err := mountinfo.GetMountsFromReader(mi, func(m *mountinfo.Info) (skip, stop bool) {
		if m.Root != "/" {
			return true, false
		}
		if v2 {
			return m.FSType != "cgroup2", false
		}
		return m.FSType != "cgroup" || !contains(strings.Split(m.VFSOptions, ","), "cpu"), false
	})
	if err != nil || len(mounts) == 0 {
		return ""
	}
	return mounts[0].Mountpoint
}

// RemoveStaleSchedGroups removes the scheduling groups of art processes
// that were killed before they could remove them (a sandbox's processes
// die with art, so such a group is empty). The next art run does it too;
// art commands call it when they find a session whose art died.
func RemoveStaleSchedGroups() {
	cg, err := os.ReadFile(selfCgroupFile)
	if err != nil {
		return
	}
	_, v2, found := cpuCgroupPath(string(cg))
	if !found {
		return
	}
	mi, err := os.Open(mountinfoFile)
	if err != nil {
		return
	}
	defer mi.Close()
	if root := cpuHierarchyMount(mi, v2); root != "" {
		removeStaleSchedGroups(root, time.Second)
	}
}

// removeStaleSchedGroups removes empty cgroups joinSchedGroup made in
// processes that are gone (killed before they could remove them), waiting
// up to patience for each to empty: only where a dead session was just
// found, or a group that never empties would cost every art run.
func removeStaleSchedGroups(root string, patience time.Duration) {
	dirs, _ := filepath.Glob(filepath.Join(root, schedCgroupPrefix+"*-*"))
	for _, d := range dirs {
		f := strings.Split(strings.TrimPrefix(filepath.Base(d), schedCgroupPrefix), "-")
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		// The dead art's sandbox dies with it (--die-with-parent), but
		// its processes may still be leaving: a kill -9 of art during
		// a FUSE request finds them unblocked only by the removal of
		// the stale mount, just before this.
		removeGroup(d, patience)
	}
}
