package sandbox

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// With --net the sandbox shares the host's network namespace, and with it
// the host's abstract unix sockets (names starting with a NUL byte, which
// no filesystem permission guards): the agent could connect to any host
// service listening on one (containerd's shim API was one, CVE-2020-15257;
// X servers listen on one too). Landlock scopes (Linux 6.12+, ABI 6) close
// them: a process in a scoped domain connects only to abstract sockets
// made inside the domain, and signals only processes inside it. Run puts
// bwrap, and so the whole sandbox, into such a domain.

// landlockScopeABI is the first Landlock ABI with scopes.
const landlockScopeABI = 6

// Landlock scope flags (uapi/linux/landlock.h).
const (
	scopeAbstractUnixSocket = 1 << 0
	scopeSignal             = 1 << 1
)

// landlockRuleset is struct landlock_ruleset_attr up to ABI 6.
type landlockRuleset struct {
	handledAccessFS  uint64
	handledAccessNet uint64
	scoped           uint64
}

// ScopesSupported reports whether this kernel has Landlock scopes (the
// sandbox is then scoped; README, "The sandbox").
func ScopesSupported() bool {
	ok, _ := scopesSupported()
	return ok
}

// scopesSupported reports whether the kernel has Landlock scopes, and its
// Landlock ABI (0: none; ENOSYS, or EOPNOTSUPP when Landlock is off).
func scopesSupported() (bool, int) {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return false, 0
	}
	return int(abi) >= landlockScopeABI, int(abi)
}

// ScopeThread puts the calling OS thread, and every process it starts
// from then on (program: bwrap), into a Landlock domain that reaches no
// abstract unix socket and signals no process made outside it. The caller
// must have locked the goroutine to its thread and never unlock it (the
// thread then ends with the goroutine). On a kernel without Landlock
// scopes it does nothing and reports so with ok false; so too for a
// caller without CAP_SYS_ADMIN whose program is set-user-ID (a setuid
// bwrap, where user namespaces are closed to users): Landlock would need
// no_new_privs, which would keep bwrap from the privilege it runs on.
func ScopeThread(program string) (ok bool, err error) {
	if ok, _ := scopesSupported(); !ok {
		return false, nil
	}
	admin := hasCap(unix.CAP_SYS_ADMIN)
	if !admin && setUID(program) {
		return false, nil
	}
	attr := landlockRuleset{scoped: scopeAbstractUnixSocket | scopeSignal}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return false, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	// Without CAP_SYS_ADMIN the kernel wants no_new_privs first; it holds
	// for this thread and what it starts, which the sandbox sets anyway.
	if !admin {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return false, fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return false, fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return true, nil
}

// setUID reports whether the file at path is set-user-ID.
func setUID(path string) bool {
	var st unix.Stat_t
	return unix.Stat(path, &st) == nil && st.Mode&unix.S_ISUID != 0
}
