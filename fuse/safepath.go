package fuse

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/artproject/art/internal/owner"
)

// fdPath names the file descriptor fd refers to, for the system calls
// that take a path only (mount(2), umount2(2)): they follow the magic
// link to exactly that file.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// unmountTrusted is umount2(dir, flags) on the mount point owner.OpenDir
// finds at dir: never through another user's link, which could have led
// root's unmount to any mount point of the host.
func unmountTrusted(dir string, flags int) error {
	fd, err := owner.OpenDir(dir)
	if err != nil {
		return err
	}
	real, err := fdRealPath(fd)
	unix.Close(fd) // held, it would keep the mount busy
	if err != nil {
		return err
	}
	return unmountReal(real, flags)
}

// fdRealPath is the path, with no link in it, of what fd refers to.
func fdRealPath(fd int) (string, error) {
	real, err := os.Readlink(fdPath(fd))
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(real, "/") {
		return "", &os.PathError{Op: "unmount", Path: real, Err: unix.EINVAL}
	}
	return real, nil
}

// unmountReal unmounts real, a path owner.OpenDir resolved, through the
// directory around it (opened again the same way, and held) and its last
// name, not followed if a link: a name on which something is mounted
// cannot be renamed, so the unmount reaches that mount or none.
func unmountReal(real string, flags int) error {
	name := filepath.Base(real)
	if name == "/" || name == "." || name == ".." {
		return &os.PathError{Op: "unmount", Path: real, Err: unix.EINVAL}
	}
	parent, err := owner.OpenDir(filepath.Dir(real))
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	return unix.Unmount(fdPath(parent)+"/"+name, flags|unix.UMOUNT_NOFOLLOW)
}
