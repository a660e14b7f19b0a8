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

// walkPieces opens, from start, the directories on the way to path by
// pieces that each fit in one call (open opens one piece as an O_PATH
// directory), until what is left fits. It returns the last directory
// opened (start itself when path already fits) and what is left; done
// closes that directory unless it is start.
func walkPieces(start int, path string, open func(dfd int, piece string) (int, error)) (dfd int, rest string, done func(), err error) {
	dfd, rest = start, path
	done = func() {
		if dfd != start {
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
		fd, err := open(dfd, rest[:cut])
		done()
		if err != nil {
			return -1, "", func() {}, err
		}
		dfd, rest = fd, rest[cut+1:]
	}
	return dfd, rest, done, nil
}

// atPath returns a directory descriptor and a name for the *at system
// calls that reach abs the way a call given abs itself would if the
// kernel took paths of any length: AT_FDCWD and abs itself when it fits;
// otherwise a descriptor of a directory far enough down (opened piece by
// piece, following symbolic links on the way as a path lookup does) and
// the rest of the path. done releases the descriptor.
func atPath(abs string) (dfd int, name string, done func(), err error) {
	return walkPieces(unix.AT_FDCWD, abs, func(dfd int, piece string) (int, error) {
		return unix.Openat(dfd, piece, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
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
	dfd, rest, done, err := walkPieces(root, filepath.Clean(rel), func(dfd int, piece string) (int, error) {
		return unix.Openat2(dfd, piece, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: how.Resolve})
	})
	if err != nil {
		return -1, err
	}
	defer done()
	return unix.Openat2(dfd, rest, how)
}
