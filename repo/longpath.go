package repo

import (
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A path handed to one system call must fit in PATH_MAX (4096 bytes with
// its NUL), but a directory tree may go deeper: ext4 takes any depth, and
// so does the overlay up to its own bound (overlay.MaxPathLen). Push, pull
// and status reach host files by absolute paths; for one too long, atPath
// opens a directory on the way by pieces that each fit, and the call is
// made relative to it (the *at system calls).

// pathPiece bounds what one call is given: PATH_MAX less room for the NUL
// and slack.
const pathPiece = 4000

// atPath returns a directory descriptor and a name for the *at system
// calls that reach abs the way a call given abs itself would if the
// kernel took paths of any length: AT_FDCWD and abs itself when it fits;
// otherwise a descriptor of a directory far enough down (opened piece by
// piece with O_PATH, following symbolic links on the way as a path
// lookup does) and the rest of the path. done releases the descriptor.
func atPath(abs string) (dfd int, name string, done func(), err error) {
	if len(abs) < pathPiece {
		return unix.AT_FDCWD, abs, func() {}, nil
	}
	dfd = unix.AT_FDCWD
	rest := abs
	done = func() {
		if dfd != unix.AT_FDCWD {
			unix.Close(dfd)
		}
	}
	for len(rest) >= pathPiece {
		// The longest prefix of rest ending at a slash that fits.
		cut := strings.LastIndexByte(rest[:pathPiece], '/')
		if cut <= 0 {
			done()
			return -1, "", func() {}, unix.ENAMETOOLONG // one name longer than a piece
		}
		fd, err := unix.Openat(dfd, rest[:cut], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			done()
			return -1, "", func() {}, err
		}
		done()
		dfd, rest = fd, rest[cut+1:]
	}
	return dfd, rest, done, nil
}

// lstatPath is lstat(2) of a path of any length.
func lstatPath(abs string, st *unix.Stat_t) error {
	dfd, name, done, err := atPath(abs)
	if err != nil {
		return err
	}
	defer done()
	return unix.Fstatat(dfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
}

// openPath is open(2) of a path of any length.
func openPath(abs string, flags int, mode uint32) (int, error) {
	dfd, name, done, err := atPath(abs)
	if err != nil {
		return -1, err
	}
	defer done()
	return unix.Openat(dfd, name, flags, mode)
}

// openBeneath opens rel below the directory root with openat2's
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, piece by piece when rel is too long
// for one call; every piece is resolved the same way.
func openBeneath(root int, rel string, how *unix.OpenHow) (int, error) {
	dfd := root
	closeDir := func() {
		if dfd != root {
			unix.Close(dfd)
		}
	}
	defer func() { closeDir() }()
	rel = filepath.Clean(rel)
	for len(rel) >= pathPiece {
		cut := strings.LastIndexByte(rel[:pathPiece], '/')
		if cut <= 0 {
			return -1, unix.ENAMETOOLONG
		}
		fd, err := unix.Openat2(dfd, rel[:cut], &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: how.Resolve,
		})
		if err != nil {
			return -1, err
		}
		closeDir()
		dfd, rel = fd, rel[cut+1:]
	}
	return unix.Openat2(dfd, rel, how)
}
