package fuse

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/artproject/art/internal/owner"
	"golang.org/x/sys/unix"
)

// maxLinks bounds the symbolic links openTrusted follows, as the kernel's
// own path walk does (ELOOP past 40).
const maxLinks = 40

// errForeignLink is openTrusted's error for a link it does not follow.
var errForeignLink = errors.New("symbolic link of another user")

// openTrusted opens directory path with O_PATH, component by component,
// following only symbolic links a trusted owner made (owner.LinkTrusted:
// as root, a local user's link in a shared directory, swapped for the
// empty directory art checked, had root mount the agent's files over
// /etc, or unmount whatever they chose); the
// descriptor then names the directory art checked, whatever is renamed
// afterwards, and mount(2) and umount2(2) through /proc/self/fd/N act on
// it and nothing else. The last component is not asked anything (no
// stat), so a mount point whose server died opens too.
func openTrusted(path string) (int, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return -1, err
	}
	cur, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	rest := strings.Split(abs, "/")
	walked := "/"
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		if c == "" || c == "." {
			continue
		}
		next, err := unix.Openat(cur, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(cur)
			cur = next
			walked = filepath.Join(walked, c)
			continue
		}
		if !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
			unix.Close(cur)
			return -1, &os.PathError{Op: "open", Path: filepath.Join(walked, c), Err: err}
		}
		// Not a directory: a symbolic link, or nothing to go through.
		lfd, lerr := unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if lerr != nil {
			unix.Close(cur)
			return -1, &os.PathError{Op: "open", Path: filepath.Join(walked, c), Err: lerr}
		}
		var st unix.Stat_t
		if err := unix.Fstat(lfd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
			unix.Close(lfd)
			unix.Close(cur)
			if err == nil {
				err = unix.ENOTDIR
			}
			return -1, &os.PathError{Op: "open", Path: filepath.Join(walked, c), Err: err}
		}
		if !owner.LinkTrusted(st.Uid) {
			unix.Close(lfd)
			unix.Close(cur)
			return -1, fmt.Errorf("%s: %w (uid %d), which art does not follow to a mount point: its owner can have it lead elsewhere, /etc included, between art's check and the mount or unmount; name the directory it leads to", filepath.Join(walked, c), errForeignLink, st.Uid)
		}
		if links++; links > maxLinks {
			unix.Close(lfd)
			unix.Close(cur)
			return -1, &os.PathError{Op: "open", Path: path, Err: unix.ELOOP}
		}
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(lfd, "", buf)
		unix.Close(lfd)
		if err != nil {
			unix.Close(cur)
			return -1, &os.PathError{Op: "readlink", Path: filepath.Join(walked, c), Err: err}
		}
		target := string(buf[:n])
		rest = append(strings.Split(target, "/"), rest...)
		if strings.HasPrefix(target, "/") {
			unix.Close(cur)
			if cur, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
				return -1, err
			}
			walked = "/"
		}
	}
	return cur, nil
}

// fdPath names the file descriptor fd refers to, for the system calls
// that take a path only (mount(2), umount2(2)): they follow the magic
// link to exactly that file.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// unmountTrusted is umount2(dir, flags) on the mount point openTrusted
// finds at dir: never through another user's link, which could have led
// root's unmount to any mount point of the host.
func unmountTrusted(dir string, flags int) error {
	fd, err := openTrusted(dir)
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

// unmountReal unmounts real, a path openTrusted resolved, through the
// directory around it (opened again the same way, and held) and its last
// name, not followed if a link: a name on which something is mounted
// cannot be renamed, so the unmount reaches that mount or none.
func unmountReal(real string, flags int) error {
	name := filepath.Base(real)
	if name == "/" || name == "." || name == ".." {
		return &os.PathError{Op: "unmount", Path: real, Err: unix.EINVAL}
	}
	parent, err := openTrusted(filepath.Dir(real))
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	return unix.Unmount(fdPath(parent)+"/"+name, flags|unix.UMOUNT_NOFOLLOW)
}
