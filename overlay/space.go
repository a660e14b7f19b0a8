package overlay

import (
	"os"
	"syscall"
)

// The agent's writes land on the host filesystem that holds the
// repository, written by art, which usually runs as root. Left to root's
// rules, an agent filled that filesystem to its last megabyte, ext4's
// reserved blocks included, and the host's own services (logs, package
// managers, databases) then failed as on any full disk. The agent instead
// gets the space an unprivileged user would (f_bavail) and, where the
// filesystem reserves less for root than the host floor (1 %, at most
// 1 GiB; tmpfs, XFS and btrfs reserve nothing), never the floor either.
// The reserve is what a commit, art's other commands and the host itself
// still have once the agent sees ENOSPC.

// spaceRule says whose space a journal record may take.
type spaceRule int

const (
	// agentRoom: the agent's writes (flush, fsync, the periodic
	// append, a throttled writer) get agentSpace.
	agentRoom spaceRule = iota
	// artRoom: art's own, at the session's end (commit, close), may use
	// what art's user may, the reserve included, so that what the agent
	// wrote and was not refused is kept.
	artRoom
)

// space is how many bytes a record may find free under rule r.
func (r spaceRule) space(st *syscall.Statfs_t) int64 {
	if r == artRoom {
		if os.Geteuid() == 0 {
			return int64(st.Bfree) * blockSize(st)
		}
		return int64(st.Bavail) * blockSize(st)
	}
	return agentSpace(st)
}

// hostFloorFraction and hostFloorMax make hostFloor: 1 % of the
// filesystem, at most 1 GiB.
const (
	hostFloorFraction = 100
	hostFloorMax      = 1 << 30
)

// hostReserve is the part of the filesystem st describes that the agent's
// writes leave alone: its root reserve, or hostFloor where that is larger.
func hostReserve(st *syscall.Statfs_t) int64 {
	bs := blockSize(st)
	reserved := int64(st.Bfree-min(st.Bavail, st.Bfree)) * bs
	floor := min(int64(st.Blocks)*bs/hostFloorFraction, hostFloorMax)
	return max(reserved, floor)
}

// agentSpace is how many bytes the agent's writes may still take on the
// filesystem st describes (never negative).
func agentSpace(st *syscall.Statfs_t) int64 {
	return max(int64(st.Bfree)*blockSize(st)-hostReserve(st), 0)
}

// blockSize is the unit of st's block counts (f_frsize; f_bsize where a
// filesystem leaves that unset).
func blockSize(st *syscall.Statfs_t) int64 {
	if st.Frsize > 0 {
		return st.Frsize
	}
	return st.Bsize
}

// Statfs reports the filesystem holding the repository as the agent sees
// it: its size and free blocks as they are, and as available only what
// the agent's writes may still take (agentSpace), so that df inside the
// sandbox says how much room is left before ENOSPC.
func (fs *FS) Statfs() (syscall.Statfs_t, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(fs.r.Path, &st); err != nil {
		return st, err
	}
	if st.Blocks > 0 {
		st.Bavail = uint64(agentSpace(&st) / blockSize(&st))
	}
	return st, nil
}
