package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// Host unix sockets. The sandbox sees the host's files read-only, but
// connecting to a unix socket by its path needs no write to the file
// system, only write permission on the socket, and a network namespace of
// its own does not stop it: the agent could reach a host daemon's socket
// (LXD's, a database's, a rootless container engine's) wherever it lies
// outside the directories the sandbox replaces (/run, /tmp, /home, /root).
// Run covers each socket the host has bound (the kernel lists them in
// /proc/net/unix) with /dev/null, on which connect fails. Sockets bound
// later, or from another network namespace, are not in that list.

// procNetUnix lists the unix sockets of art's network namespace, the host's.
const procNetUnix = "/proc/net/unix"

// maxSocketMasks bounds the mounts spent on sockets: each costs bwrap a
// mount, and an agent of a concurrent session with --net and a writable
// bind could bind sockets by the thousand in a host directory.
const maxSocketMasks = 512

// unixLine matches a line of /proc/net/unix that names a socket:
// "Num: RefCount Protocol Flags Type St Inode Path". The inode is padded
// with spaces; the path is the rest of the line, byte for byte.
var unixLine = regexp.MustCompile(`^[0-9a-fA-F]+: [0-9A-F]+ [0-9A-F]+ [0-9A-F]+ [0-9A-F]+ [0-9A-F]+ +[0-9]+ (.+)$`)

// maxSunPath is the longest name a pathname socket can have (sun_path).
const maxSunPath = 108

// boundSocketPaths returns the absolute paths in a /proc/net/unix listing,
// each once, in listing order. Abstract sockets (@name) and relative paths
// (bound relative to their daemon's directory) are left out.
//
// The kernel prints a name as it is, a newline included, so a name with
// one goes on over the next lines (which may even read as lines of their
// own): joined lists, for each path, the path joined with each run of the
// lines after it that fits in sun_path, for the caller to try as well.
// A socket so named was not covered.
func boundSocketPaths(r io.Reader) (paths, joined []string) {
	seen := map[string]bool{}
	var lines []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	for i, line := range lines {
		if !strings.Contains(line, " /") {
			continue // unnamed or abstract, most of a busy host's list
		}
		m := unixLine.FindStringSubmatch(line)
		if m == nil || !strings.HasPrefix(m[1], "/") {
			continue
		}
		if !seen[m[1]] {
			seen[m[1]] = true
			paths = append(paths, m[1])
		}
		p := m[1]
		for _, next := range lines[i+1:] {
			if len(p)+1+len(next) > maxSunPath {
				break
			}
			p += "\n" + next
			if !seen[p] {
				seen[p] = true
				joined = append(joined, p)
			}
		}
	}
	return paths, joined
}

// socketsToMask picks, from the bound socket paths, the host sockets the
// agent's user could reach by path in the sandbox's view of the host root:
// each resolved to its real path, still a socket, outside the directories
// the sandbox replaces, and on a path bwrap (running as that user) can
// reach to mount over.
func socketsToMask(bound []string, id identity) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range bound {
		real, ok := socketAt(p)
		if !ok && strings.HasSuffix(p, "@") {
			// The kernel prints a NUL in the bound name as '@': some
			// daemons count the terminating NUL in the address.
			real, ok = socketAt(strings.TrimRight(p, "@"))
		}
		if !ok || seen[real] || underMasked(real) {
			continue
		}
		seen[real] = true
		out = append(out, real)
	}
	reachable := reachableAs(id, out)
	kept := out[:0]
	for _, p := range out {
		if reachable[p] && len(kept) < maxSocketMasks {
			kept = append(kept, p)
		}
	}
	return kept
}

// socketAt resolves p and reports whether a socket is there that a host
// daemon keeps (daemonSocket).
func socketAt(p string) (string, bool) {
	real, err := filepath.EvalSymlinks(filepath.Clean(p))
	if err != nil {
		return "", false
	}
	st, err := os.Lstat(real)
	if err != nil || st.Mode()&os.ModeSocket == 0 {
		return "", false
	}
	return real, daemonSocket(real, st)
}

// maxSystemUID is the last uid of system accounts (Debian's SYS_UID_MAX).
const maxSystemUID = 999

// daemonSocket reports whether the socket at real lies where only root or
// a system account can make and remove it: a directory without group or
// other write, owned by root or by the socket's own system owner. Those
// are the host daemons' sockets the agent must not reach. Any other may
// be removed at any moment by a user, and a socket gone between the scan
// and bwrap's mount fails the run (bwrap cannot make the mount point on
// the read-only root): a user flapping a socket of their own made other
// users' runs fail at random. A user's own sockets are theirs to offer.
func daemonSocket(real string, st os.FileInfo) bool {
	sock, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	var dir syscall.Stat_t
	if syscall.Stat(filepath.Dir(real), &dir) != nil || dir.Mode&0o022 != 0 {
		return false
	}
	return dir.Uid == 0 || dir.Uid == sock.Uid && sock.Uid <= maxSystemUID
}

// underMasked reports whether p lies where the sandbox never shows the
// host's files.
func underMasked(p string) bool {
	for _, m := range masked {
		if _, ok := within(p, m); ok {
			return true
		}
	}
	return false
}

// hostSocketMasks lists the host sockets to cover for id, from listing
// (procNetUnix). No listing (a kernel without unix sockets in procfs)
// covers none; a listing that cannot be read is an error, as the sandbox
// would not be what art promises.
func hostSocketMasks(listing string, id identity) ([]string, error) {
	b, err := os.ReadFile(listing)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the host's unix sockets, to cover them in the sandbox: %w", err)
	}
	paths, joined := boundSocketPaths(bytes.NewReader(b))
	return socketsToMask(append(paths, joined...), id), nil
}
