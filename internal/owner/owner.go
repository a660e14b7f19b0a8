// Package owner decides whose files art trusts: the symbolic links it
// follows as root, and the repositories it takes when it finds one by
// searching. Anyone else who owns a link (or a .art) on a path art uses
// can make it lead elsewhere between art's check and its use: a local
// user's link in a shared directory had root mount over /etc, unmount
// another mount, store a root-only directory in a commit, or overwrite a
// root-only file as the trace log.
package owner

import (
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// Trusted reports whether files of uid are the caller's to trust: root's,
// the caller's own, and, when root runs through sudo, the calling user's
// (SUDO_UID), as git's safe.directory takes them.
func Trusted(uid uint32) bool {
	euid := os.Geteuid()
	if uid == 0 || uid == uint32(euid) {
		return true
	}
	if euid == 0 {
		if s := os.Getenv("SUDO_UID"); s != "" {
			if n, err := strconv.ParseUint(s, 10, 32); err == nil && uint32(n) == uid {
				return true
			}
		}
	}
	return false
}

// LinkTrusted reports whether art may follow a symbolic link of uid: any
// link without root (art then has no more right than its caller, whom
// the kernel checks), and a Trusted owner's as root.
func LinkTrusted(uid uint32) bool { return os.Geteuid() != 0 || Trusted(uid) }

// Of is the owner of fi, when the system says it.
func Of(fi fs.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}
