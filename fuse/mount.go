package fuse

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/artproject/art/internal/owner"
)

// CheckMountpoint refuses mount points that are missing, not directories,
// not empty, or already mounted.
func CheckMountpoint(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	// As root, no other user's symbolic link on the way (see
	// owner.OpenDir; the mount itself goes by descriptor). The mount table
	// names the directory a link leads to: looked up as given, a link's
	// path was never "already a mount point", and an empty mount there
	// (a tmpfs) was mounted over.
	real := abs
	if fd, err := owner.OpenDir(abs); errors.Is(err, owner.ErrForeignLink) {
		return "", err
	} else if err == nil {
		if p, err := fdRealPath(fd); err == nil {
			real = p
		}
		unix.Close(fd)
	}
	dead := func(err error) error {
		return fmt.Errorf("mount point %s: the mount of a process that died (%w); any art command on its repository removes it, or unmount it: fusermount3 -uz %s", abs, err, abs)
	}
	st, err := os.Stat(abs)
	if deadServer(err) {
		return "", dead(err)
	}
	if err != nil {
		return "", fmt.Errorf("mount point %s: %w (create an empty directory first)", abs, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("mount point %s: not a directory", abs)
	}
	if mounted, _ := IsMountpoint(real); mounted {
		var sfs syscall.Statfs_t
		if err := syscall.Statfs(abs, &sfs); deadServer(err) {
			return "", dead(err)
		}
		return "", fmt.Errorf("mount point %s: %s", abs, mountedAdvice(real))
	}
	f, err := os.Open(abs)
	if err != nil {
		return "", fmt.Errorf("mount point %s: %w", abs, err)
	}
	names, _ := f.Readdirnames(1)
	f.Close()
	if len(names) > 0 {
		return "", fmt.Errorf("mount point %s: not empty (mount on an empty directory)", abs)
	}
	return abs, nil
}

// fsName names art's mounts: their type is "fuse.art".
const fsName = "art"

// ArtMounts lists the mount points of art's own FUSE mounts (art mount,
// the homes of art run) in this process's mount namespace.
func ArtMounts() []string {
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("fuse." + fsName))
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(mounts))
	for _, m := range mounts {
		out = append(out, m.Mountpoint)
	}
	return out
}

// mountedAdvice says what is mounted at mount point abs and what to do.
// fusermount3 -u is advised for a FUSE mount only: "unmount it first:
// fusermount3 -u /" was the advice for / and /proc.
func mountedAdvice(abs string) string {
	fstype := ""
	if mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(abs)); err == nil && len(mounts) > 0 {
		fstype = mounts[len(mounts)-1].FSType // the topmost one
	}
	switch {
	case fstype == "fuse.art":
		return fmt.Sprintf("already a mount point of art (another art mount or session serves it; end that, or unmount it: fusermount3 -u %s)", abs)
	case strings.HasPrefix(fstype, "fuse.") || fstype == "fuse" || fstype == "fuseblk":
		return fmt.Sprintf("already a mount point (%s; unmount it first: fusermount3 -u %s, or choose an empty directory that is not a mount point)", fstype, abs)
	case fstype != "":
		return fmt.Sprintf("already a mount point (%s); choose an empty directory that is not a mount point", fstype)
	}
	return "already a mount point; choose an empty directory that is not a mount point"
}

// IsMountpoint reports whether dir is a mount point of this mount namespace.
func IsMountpoint(dir string) (bool, error) {
	mps, err := MountPoints()
	if err != nil {
		return false, err
	}
	for _, mp := range mps {
		if mp == dir {
			return true, nil
		}
	}
	return false, nil
}

// MountPoints lists the mount points of this mount namespace
// (/proc/self/mountinfo, octal escapes decoded).
func MountPoints() ([]string, error) {
	mounts, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(mounts))
	for i, m := range mounts {
		out[i] = m.Mountpoint
	}
	return out, nil
}

const fuseDevice = "/dev/fuse"

// fuseDeviceError says why /dev/fuse could not be opened and what to do:
// a device whose mode shuts the caller out needs another fix than a
// missing one.
func fuseDeviceError(err error, mode os.FileMode, uid int) error {
	switch {
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("cannot use %s: %w: its mode %04o does not let uid %d open it for reading and writing; run art as root, or have an administrator give it Debian's default mode (chmod 0666 %s)",
			fuseDevice, err, mode.Perm(), uid, fuseDevice)
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("cannot use %s: %w: install fuse3 and load its module (apt-get install -y fuse3; modprobe fuse); in a container, pass --device /dev/fuse", fuseDevice, err)
	}
	return fmt.Errorf("cannot use %s: %w (install fuse3: apt-get install -y fuse3; in a container, pass --device /dev/fuse)", fuseDevice, err)
}

// CheckFUSE reports what is missing to mount: /dev/fuse, and
// fusermount3 for unprivileged users.
func CheckFUSE() error {
	f, err := os.OpenFile(fuseDevice, os.O_RDWR, 0)
	if err != nil {
		var mode os.FileMode
		if st, serr := os.Stat(fuseDevice); serr == nil {
			mode = st.Mode()
		}
		return fuseDeviceError(err, mode, os.Geteuid())
	}
	f.Close()
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			return errors.New("fusermount3 not found (install it: apt-get install -y fuse3)")
		}
	}
	return nil
}

// deadServer reports whether err is the kernel's answer for a FUSE mount
// whose server is gone: ENOTCONN once the connection is torn down, and,
// for the few milliseconds an io_uring connection takes to be torn down
// after its server died, ECONNABORTED (a request the teardown ended) or
// ECANCELED (a request handed to a ring whose task is dead:
// fuse_uring_send_in_task with IO_URING_F_TASK_DEAD). Art's server never
// answers either errno itself.
func deadServer(err error) bool {
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ECANCELED)
}

// CleanupStale lazily unmounts a mount point whose server died: the kernel
// then answers ENOTCONN (or, while an io_uring connection is torn down,
// ECONNABORTED or ECANCELED) for it. A live mount is left alone.
func CleanupStale(dir string) (bool, error) {
	if dir == "" {
		return false, nil
	}
	// statfs always asks the server (stat may be answered from the
	// kernel's attribute cache for a while after the server died), so
	// ENOTCONN reliably means nobody serves the mount any more.
	//
	// The mount point is found without another user's link on the way
	// (owner.OpenDir), checked on its descriptor, and unmounted by the
	// path that resolved to (unmountReal): by the path given, a local
	// user who may rename a directory on the way had root detach
	// whatever their link then led to (the dead mount's statfs passed,
	// and the unmount went to another mount of the host).
	fd, err := owner.OpenDir(dir)
	if errors.Is(err, owner.ErrForeignLink) {
		return false, fmt.Errorf("stale mount %s not removed: %w", dir, err)
	}
	if err != nil {
		return false, nil // gone, or no directory: nothing of art's is mounted there
	}
	// The mount table names the directory the path resolved to, not
	// the path as given: an art mount through root's (or the caller's)
	// own link records the link, and compared as given, its dead mount
	// was never found, so it outlived every later command.
	real, err := fdRealPath(fd)
	if err != nil {
		unix.Close(fd)
		return false, nil
	}
	mounted, err := IsMountpoint(real)
	if err != nil || !mounted {
		unix.Close(fd)
		return false, err
	}
	var st unix.Statfs_t
	err = unix.Fstatfs(fd, &st)
	unix.Close(fd)
	if !deadServer(err) {
		return false, nil
	}
	if err := unmountReal(real, unix.MNT_DETACH); err != nil {
		if os.Geteuid() == 0 {
			// fusermount3 would unmount by path again.
			return false, fmt.Errorf("unmount stale %s: %w", dir, err)
		}
		if out, ferr := exec.Command("fusermount3", "-uz", real).CombinedOutput(); ferr != nil {
			return false, fmt.Errorf("unmount stale %s: %v (%s)", dir, err, strings.TrimSpace(string(out)))
		}
	}
	return true, nil
}
