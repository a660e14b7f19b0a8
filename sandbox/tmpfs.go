package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The sandbox's /tmp, /dev/shm and /run are tmpfs mounts that bwrap makes,
// and a tmpfs lives in the host's memory: by the kernel's default each may
// take half of it, and the agent can write two of them (/tmp and
// /dev/shm are 1777). An agent filling both used all of the host's RAM,
// which the memory limit does not cover when it is an rlimit, and which
// the OOM killer cannot take back (it kills processes; tmpfs pages belong
// to none). bwrap 0.8 has no --size, so Run sizes them itself, after bwrap
// made them and before the command starts: the shim waits on fdTmpfsDone
// until Run has reconfigured each through /proc/PID/root (fspick(2) and
// fsconfig(2), which need root in the host's mount namespace).

// tmpfsMounts are the sandbox's writable in-memory filesystems.
var tmpfsMounts = []string{"/tmp", "/dev/shm", "/run"}

// tmpfsInodeBytes is the tmpfs size per inode allowed: each inode costs
// the kernel about 1 KB that the size does not count.
const tmpfsInodeBytes = 16 << 10

// DefaultTmpSize is the size each of the sandbox's in-memory filesystems
// gets unless the caller chooses: a quarter of the host's memory, so that
// the two the agent can write take together at most what the kernel lets
// one tmpfs take by default. 0 when the memory size is unknown.
func DefaultTmpSize() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit) / 4
}

// sizesTmpfs reports whether Run sizes the sandbox's tmpfs mounts for cfg:
// a size is set and this process is root with CAP_SYS_ADMIN (fspick) and
// CAP_SYS_PTRACE (/proc/PID/root of the agent's user's process). A user
// without that privilege could mount such a tmpfs in a namespace of their
// own anyway, and root without it (in a container) is bounded by the
// container's memory.
func sizesTmpfs(cfg Config) bool {
	return cfg.TmpSize > 0 && os.Geteuid() == 0 && hasCap(unix.CAP_SYS_ADMIN) && hasCap(unix.CAP_SYS_PTRACE)
}

// hasCap reports whether capability c is in this process's effective set.
func hasCap(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[c/32].Effective&(1<<(c%32)) != 0
}

// sizeTmpfs gives each of the sandbox's tmpfs mounts size bytes, seen
// through the root of its process pid. alive tells whether pid is still
// the sandbox's (the pid was not reused since): checked once /proc/PID is
// open, which then stays the sandbox's process whatever happens to the
// number.
func sizeTmpfs(pid int, size int64, alive func() bool) error {
	host, err := hostDevices()
	if err != nil {
		return fmt.Errorf("size the sandbox's tmpfs mounts: %w", err)
	}
	proc, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("size the sandbox's tmpfs mounts: %w", err)
	}
	defer unix.Close(proc)
	if !alive() {
		return errors.New("size the sandbox's tmpfs mounts: the sandbox ended")
	}
	for _, dir := range tmpfsMounts {
		if err := resizeTmpfs(proc, "root"+dir, size, host); err != nil {
			return fmt.Errorf("size the sandbox's %s: %w", dir, err)
		}
	}
	return nil
}

// hostDevices is the set of device numbers of the filesystems mounted in
// this process's mount namespace: the host's.
func hostDevices() (map[uint64]bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	devs := map[uint64]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		var major, minor uint32
		if _, err := fmt.Sscanf(f[2], "%d:%d", &major, &minor); err == nil {
			devs[unix.Mkdev(major, minor)] = true
		}
	}
	return devs, nil
}

// resizeTmpfs sets the size and inode count of the tmpfs mounted at path
// (relative to the directory at),
// unless a filesystem of the host (one in host) is there: a bind the
// caller asked for over the sandbox's own, which is not art's to resize
// (a bind of the host's /dev/shm would have resized the host's).
func resizeTmpfs(at int, path string, size int64, host map[uint64]bool) error {
	dir, err := unix.Openat(at, path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	var fst unix.Stat_t
	if err := unix.Fstat(dir, &fst); err != nil {
		return err
	}
	if host[fst.Dev] {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(dir, &st); err != nil {
		return err
	}
	if st.Type != unix.TMPFS_MAGIC {
		return fmt.Errorf("not a tmpfs (filesystem type %#x)", st.Type)
	}
	fd, err := unix.Fspick(dir, "", unix.FSPICK_CLOEXEC|unix.FSPICK_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("fspick: %w", err)
	}
	defer unix.Close(fd)
	inodes := max(size/tmpfsInodeBytes, 1024)
	if err := unix.FsconfigSetString(fd, "size", strconv.FormatInt(size, 10)); err != nil {
		return fmt.Errorf("size=%d: %w", size, err)
	}
	if err := unix.FsconfigSetString(fd, "nr_inodes", strconv.FormatInt(inodes, 10)); err != nil {
		return fmt.Errorf("nr_inodes=%d: %w", inodes, err)
	}
	if err := unix.FsconfigReconfigure(fd); err != nil {
		return fmt.Errorf("reconfigure: %w", err)
	}
	return nil
}
