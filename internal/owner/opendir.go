package owner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxLinks bounds the symbolic links OpenDir follows, as the kernel's
// own path walk does (ELOOP past 40).
const maxLinks = 40

// ErrForeignLink is OpenDir's error for a link it does not follow.
var ErrForeignLink = errors.New("symbolic link of another user")

// OpenDir opens directory path with O_PATH, component by component,
// following only the symbolic links LinkTrusted allows: the descriptor
// then names the directory art checked, whatever is renamed afterwards,
// and what art does through it (mount(2) and umount2(2) through
// /proc/self/fd/N, a scan of the workspace) acts on that directory and
// nothing else. By path, a local user's link in a shared directory,
// swapped for the directory art checked, had root mount the agent's
// files over /etc, unmount another mount, or push a root-only directory.
// The last component is not asked anything (no stat), so a mount point
// whose server died opens too.
func OpenDir(path string) (int, error) {
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
		if !LinkTrusted(st.Uid) {
			unix.Close(lfd)
			unix.Close(cur)
			return -1, fmt.Errorf("%s: %w (uid %d), which art does not follow as root: its owner can have it lead elsewhere, /etc included, between art's check and its use; name the directory it leads to", filepath.Join(walked, c), ErrForeignLink, st.Uid)
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
