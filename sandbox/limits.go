package sandbox

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Limit mechanisms reported in Result.Limits.
const (
	// LimitsNone: no Memory or Pids limit was asked for.
	LimitsNone = ""
	// LimitsCgroup2: a transient cgroup v2 under /sys/fs/cgroup with
	// memory.max (and memory.swap.max = 0) and pids.max, holding the whole
	// sandbox; removed afterwards.
	LimitsCgroup2 = "cgroup2"
	// LimitsRlimit: rlimits set inside the sandbox before the command runs:
	// RLIMIT_AS (virtual memory, not resident memory) and RLIMIT_NPROC
	// (processes of the agent's uid in the sandbox's user namespace).
	LimitsRlimit = "rlimit"
)

// ParseSize parses a byte size: a plain number of bytes or a number with a
// binary suffix K, M, G or T (optionally followed by B or iB, any case),
// e.g. "512M", "1.5G", "64KiB". The result must be positive.
func ParseSize(s string) (int64, error) {
	bad := func(why string) (int64, error) {
		return 0, fmt.Errorf("invalid size %q: %s; use a number of bytes or a number with K, M, G or T, e.g. 512M", s, why)
	}
	t := strings.TrimSpace(s)
	if t == "" {
		return bad("empty")
	}
	u := strings.ToUpper(t)
	u = strings.TrimSuffix(u, "IB")
	u = strings.TrimSuffix(u, "B")
	mult := 1.0
	if n := len(u); n > 0 {
		switch u[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			u = u[:n-1]
		}
	}
	if u == "" || strings.ContainsAny(u, "+-eE_xX") {
		return bad("not a number")
	}
	f, err := strconv.ParseFloat(u, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return bad("not a number")
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return bad("too large")
	}
	n := int64(v)
	if n <= 0 {
		return bad("must be greater than zero")
	}
	return n, nil
}

// cgroupRoot is the cgroup v2 mount point (a variable for tests).
var cgroupRoot = "/sys/fs/cgroup"

var cgroupSeq atomic.Int64

// isCgroup2 reports whether path is a cgroup v2 mount (a variable for tests).
var isCgroup2 = func(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

// limitMechanism picks how cfg's limits will be enforced, without changing
// anything: cgroup v2 when the host offers the needed controllers in a
// writable /sys/fs/cgroup, rlimits otherwise.
func limitMechanism(cfg Config) string {
	if cfg.Memory <= 0 && cfg.Pids <= 0 {
		return LimitsNone
	}
	if cgroupUsable(cfg) == nil {
		return LimitsCgroup2
	}
	return LimitsRlimit
}

// LimitMechanism reports which mechanism Run would use for cfg's Memory and
// Pids limits on this host right now (LimitsCgroup2, LimitsRlimit or
// LimitsNone), and when cgroups are not used, why.
func LimitMechanism(cfg Config) (mechanism string, whyNotCgroup error) {
	if cfg.Memory <= 0 && cfg.Pids <= 0 {
		return LimitsNone, nil
	}
	if err := cgroupUsable(cfg); err != nil {
		return LimitsRlimit, err
	}
	return LimitsCgroup2, nil
}

func neededControllers(cfg Config) []string {
	var c []string
	if cfg.Memory > 0 {
		c = append(c, "memory")
	}
	if cfg.Pids > 0 {
		c = append(c, "pids")
	}
	return c
}

func cgroupUsable(cfg Config) error {
	if !isCgroup2(cgroupRoot) {
		return fmt.Errorf("%s is not a cgroup v2 mount", cgroupRoot)
	}
	data, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers"))
	if err != nil {
		return err
	}
	have := strings.Fields(string(data))
	for _, c := range neededControllers(cfg) {
		if !contains(have, c) {
			return fmt.Errorf("cgroup v2 controller %s not available at %s", c, cgroupRoot)
		}
	}
	if err := unix.Access(cgroupRoot, unix.W_OK); err != nil {
		return fmt.Errorf("%s not writable: %v", cgroupRoot, err)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// cgroup is a transient cgroup v2 for one sandbox.
type cgroup struct {
	dir string
	fd  *os.File // for clone3(CLONE_INTO_CGROUP)
}

// newCgroup creates and configures a cgroup for cfg's limits.
func newCgroup(cfg Config) (*cgroup, error) {
	if err := cgroupUsable(cfg); err != nil {
		return nil, err
	}
	sub, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"))
	if err != nil {
		return nil, err
	}
	enabled := strings.Fields(string(sub))
	for _, c := range neededControllers(cfg) {
		if !contains(enabled, c) {
			if err := os.WriteFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"), []byte("+"+c), 0); err != nil {
				return nil, fmt.Errorf("enable cgroup controller %s: %w", c, err)
			}
		}
	}
	removeStaleCgroups()
	dir := filepath.Join(cgroupRoot, fmt.Sprintf("art-sandbox-%d-%d", os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	cg := &cgroup{dir: dir}
	write := func(name, val string) error {
		return os.WriteFile(filepath.Join(dir, name), []byte(val), 0)
	}
	if cfg.Memory > 0 {
		if err := write("memory.max", strconv.FormatInt(cfg.Memory, 10)); err != nil {
			cg.remove()
			return nil, err
		}
		_ = write("memory.swap.max", "0") // absent without swap accounting
	}
	if cfg.Pids > 0 {
		if err := write("pids.max", strconv.Itoa(cfg.Pids)); err != nil {
			cg.remove()
			return nil, err
		}
	}
	f, err := os.Open(dir)
	if err != nil {
		cg.remove()
		return nil, err
	}
	cg.fd = f
	return cg, nil
}

// kill kills every process in the cgroup.
func (c *cgroup) kill() {
	if os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	for _, pid := range c.procs() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func (c *cgroup) procs() []int {
	data, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// remove kills what is left and deletes the cgroup.
func (c *cgroup) remove() error {
	if c.fd != nil {
		c.fd.Close()
		c.fd = nil
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := os.Remove(c.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", c.dir, err)
		}
		c.kill()
		time.Sleep(10 * time.Millisecond)
	}
}

// removeStaleCgroups deletes empty cgroups left behind by art processes that
// no longer exist (e.g. killed with SIGKILL before they could clean up).
func removeStaleCgroups() {
	dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, "art-sandbox-*-*"))
	for _, d := range dirs {
		f := strings.Split(filepath.Base(d), "-")
		pid, err := strconv.Atoi(f[len(f)-2])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		c := &cgroup{dir: d}
		if len(c.procs()) == 0 {
			_ = os.Remove(d)
		}
	}
}

// DefaultTaskCap is the cap on the agent's processes and threads when no
// --pids is given: a quarter of the host's process ids (and of its
// threads-max), at most 16384. Without one, an agent's runaway fork could
// take every pid of the host (32,768 on this project's VMs, where the
// rlimit art passed on allowed 96,365), and then nothing on the host can
// start a process.
func DefaultTaskCap() int {
	limit := 16384
	for _, f := range []string{"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			limit = min(limit, max(n/4, 64))
		}
	}
	return limit
}

// taskCapLimits returns the RLIMIT_NPROC soft and hard limits that apply
// taskCap under this process's own (which bwrap and the agent inherit):
// never raised, only lowered to the cap. ok is false when the hard limit
// is already at or below the cap (an unprivileged shell could not raise
// it; there is nothing to do).
func taskCapLimits(taskCap int) (soft, hard uint64, ok bool) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &rl); err != nil {
		return uint64(taskCap), uint64(taskCap), true
	}
	if rl.Max <= uint64(taskCap) {
		return 0, 0, false
	}
	return min(rl.Cur, uint64(taskCap)), uint64(taskCap), true
}
