package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// GuestHome is where Config.Home appears inside the sandbox.
const GuestHome = "/home/agent"

// DefaultPath is PATH inside the sandbox unless Config.Env sets PATH.
const DefaultPath = "/home/agent/.local/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

// GuestUser is $USER inside the sandbox.
const GuestUser = "agent"

// DefaultUser is the host user the agent runs as when the caller is root and
// Config.User is empty.
const DefaultUser = "nobody"

// Bind is one extra bind mount: a host path shown at Guest inside the
// sandbox, read-only unless ReadOnly is false.
type Bind struct {
	Host     string `json:"host"`
	Guest    string `json:"guest"`
	ReadOnly bool   `json:"readonly"`
}

// Config describes one sandboxed command.
type Config struct {
	// Home is the host directory bound read-write at /home/agent (for art,
	// the FUSE mount point). Required; must exist and be reachable and
	// writable by the agent's user (see AgentUser), since bwrap runs as it.
	Home string
	// Workspace is the directory inside Home the command starts in
	// (/home/agent/<Workspace>); "" means /home/agent. It must exist.
	Workspace string
	// Dir is where in Workspace the command starts, relative to it (""
	// its root): the subdirectory of the workspace art was started in,
	// as git keeps one. The caller checks that it exists (IsDirBelow).
	Dir string
	// Argv is the command and its arguments, passed through unchanged. It is
	// looked up in the sandbox's PATH; not found gives 127, not executable 126.
	Argv []string

	// Interactive runs the command on a fresh pty (session leader, pty as
	// controlling terminal), with the caller's terminal in raw mode.
	Interactive bool
	// Net keeps the host network (--share-net). Default: no network at all.
	Net bool
	// Env holds extra KEY=VALUE pairs (art's --env), set last, so they may
	// override the defaults below.
	Env []string
	// Term and Lang become $TERM and $LANG; defaults "dumb" and "C.UTF-8".
	Term string
	Lang string
	// User is the host user the agent runs as when the caller is root: a
	// name, a uid or uid:gid. Default "nobody". Root (uid 0) is refused.
	// When the caller is not root the agent runs as the caller and User
	// must be empty or name the caller.
	User string

	// Hide lists host paths made invisible inside the sandbox: a directory
	// is covered by an empty read-only tmpfs, anything else by /dev/null.
	// Paths that appear through Home or a bind are covered there too.
	// Missing paths, and paths the agent's user cannot reach anyway, are
	// skipped.
	Hide []string
	// Binds are extra bind mounts, applied after the home. Host paths must
	// be absolute and exist. A guest path must exist in the host's
	// read-only root or lie under /tmp, /run, /dev/shm, /home/agent or an
	// earlier read-write bind (where bwrap can create it); it may not cover
	// /home/agent.
	Binds []Bind

	// Timeout, when > 0, kills the whole sandbox after that long; the
	// result is then exit code 124 with TimedOut set.
	Timeout time.Duration
	// Memory (bytes) and Pids (processes) limit the sandbox when > 0; see
	// Result.Limits for the mechanism used.
	Memory int64
	Pids   int
	// TaskCap, when > 0 and Pids is not set, caps the agent's processes
	// and threads as RLIMIT_NPROC, whatever the host offers; 0: no cap.
	// DefaultTaskCap is what art run uses.
	TaskCap int
	// TmpSize, when > 0, is the size of each of the sandbox's in-memory
	// filesystems (/tmp, /dev/shm, /run; tmpfs.go), set when the caller
	// is root; 0 leaves the kernel's default, half of the host's memory
	// each. DefaultTmpSize is what art run uses.
	TmpSize int64
	// sizer replaces sizeTmpfs in tests.
	sizer func(pid int, size int64, alive func() bool) error

	// Seccomp, when set, is a further seccomp-bpf program (the tracer's),
	// as the raw struct sock_filter array, that decides every syscall the
	// sandbox's own rules (seccomp.go) let through.
	Seccomp []byte
	// Signals, when set, delivers the signals that end the session, as
	// the caller catches them (and keeps catching them after Run, while
	// it records the session). Nil: Run catches SIGINT, SIGTERM, SIGHUP
	// and SIGQUIT itself while it runs.
	Signals chan os.Signal
	// Starter, when set, replaces cmd.Start and cmd.Wait (see Starter).
	Starter Starter
	// SchedGroup, when set, is a move of this process into a scheduling
	// group shared with the sandbox (JoinSchedGroup): Run waits for it
	// before it starts the sandbox.
	SchedGroup *SchedGroup
}

// File descriptor numbers in the bwrap process (ExtraFiles start at 3).
const (
	fdStarted = 3 // the shim writes one byte here right before exec
	fdInfo    = 4 // bwrap --info-fd: JSON with the host pid of the sandbox's pid 1
	fdSeccomp = 5 // bwrap --seccomp: the sandbox's rules, then Config.Seccomp
	// fdTmpfsDone: the shim waits to read a line here before the command
	// runs, while Run sizes the sandbox's tmpfs mounts (sizesTmpfs).
	fdTmpfsDone = 6
)

// identity is who bwrap (and so the agent) runs as.
type identity struct {
	uid, gid uint32
	groups   []uint32 // supplementary groups (a named user's, from /etc/group)
	name     string
	switchTo bool // the caller is root: run bwrap with these credentials
}

// credential is the process credential of the agent's user.
func (id identity) credential() *syscall.Credential {
	groups := id.groups
	if groups == nil {
		groups = []uint32{} // none, not art's own (root's)
	}
	return &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: groups}
}

// AgentUser reports the host uid and gid the agent runs as for Config.User =
// spec, given who the current process is. A package that presents files to
// the agent (the FUSE layer) can use it to make the home writable for it.
func AgentUser(spec string) (uid, gid int, err error) {
	id, err := agentIdentity(spec)
	if err != nil {
		return 0, 0, err
	}
	return int(id.uid), int(id.gid), nil
}

func agentIdentity(spec string) (identity, error) {
	if os.Geteuid() != 0 {
		me := callerIdentity()
		if spec == "" {
			return me, nil
		}
		id, err := resolveUser(spec)
		if err != nil {
			return identity{}, err
		}
		if id.uid != me.uid {
			return identity{}, fmt.Errorf("cannot run the agent as user %q (uid %d): only root can switch users; run art as root or drop the user setting", spec, id.uid)
		}
		return me, nil
	}
	if spec == "" {
		spec = DefaultUser
	}
	id, err := resolveUser(spec)
	if err != nil {
		return identity{}, err
	}
	if id.uid == 0 {
		return identity{}, fmt.Errorf("refusing to run the agent as root (user %q): pick an unprivileged user, e.g. %q", spec, DefaultUser)
	}
	id.switchTo = true
	return id, nil
}

// callerIdentity is art's caller, as whom the agent runs without root:
// with the caller's supplementary groups, which the sandbox keeps (a
// directory writable through one of them was reported as not writable).
func callerIdentity() identity {
	me := identity{uid: uint32(os.Getuid()), gid: uint32(os.Getgid())}
	if gs, err := os.Getgroups(); err == nil {
		for _, g := range gs {
			me.groups = append(me.groups, uint32(g))
		}
	}
	return me
}

// resolveUser turns a user spec (name, uid, or uid:gid) into host ids.
func resolveUser(spec string) (identity, error) {
	lookErr := func(err error) error {
		return fmt.Errorf("unknown agent user %q: %v; give an existing user name, a uid or uid:gid", spec, err)
	}
	if spec == "" {
		return identity{}, lookErr(errors.New("empty"))
	}
	if u, g, ok := strings.Cut(spec, ":"); ok {
		uid, err1 := strconv.ParseUint(u, 10, 32)
		gid, err2 := strconv.ParseUint(g, 10, 32)
		if err1 != nil || err2 != nil {
			return identity{}, lookErr(errors.New("uid:gid must both be numbers"))
		}
		return identity{uid: uint32(uid), gid: uint32(gid), name: spec}, nil
	}
	if n, err := strconv.ParseUint(spec, 10, 32); err == nil {
		id := identity{uid: uint32(n), gid: uint32(n), name: spec}
		if u, err := lookupUserID(spec); err == nil {
			id.gid = u.gid
			id.name = u.name
			id.groups = u.groups
		}
		return id, nil
	}
	u, err := lookupUserName(spec)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		// Not os/user's "user: unknown user nosuch" inside our own.
		return identity{}, fmt.Errorf("unknown agent user %q: no such user on this host; give an existing user name, a uid or uid:gid", spec)
	}
	if err != nil {
		return identity{}, lookErr(err)
	}
	return u, nil
}

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// guestEnv is the environment inside the sandbox, in order.
func guestEnv(cfg Config, pwd string) ([][2]string, error) {
	term := cfg.Term
	if term == "" {
		term = "dumb"
	}
	lang := cfg.Lang
	if lang == "" {
		lang = "C.UTF-8"
	}
	env := [][2]string{
		{"HOME", GuestHome},
		{"PATH", DefaultPath},
		{"PWD", pwd},
		{"TERM", term},
		{"LANG", lang},
		{"USER", GuestUser},
	}
	for _, kv := range cfg.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !envKey.MatchString(k) {
			return nil, fmt.Errorf("invalid environment setting %q: use KEY=VALUE with KEY made of letters, digits and _ (not starting with a digit)", kv)
		}
		if strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("invalid environment setting for %s: the value contains a NUL byte", k)
		}
		replaced := false
		for i := range env {
			if env[i][0] == k {
				env[i][1] = v
				replaced = true
			}
		}
		if !replaced {
			env = append(env, [2]string{k, v})
		}
	}
	return env, nil
}

// isAncestorOrSelf reports whether dir is p or one of its ancestors (both clean, absolute).
func isAncestorOrSelf(dir, p string) bool {
	if dir == p || dir == "/" {
		return true
	}
	return strings.HasPrefix(p, dir+"/")
}

// within returns p relative to dir when p is dir or below it.
func within(p, dir string) (string, bool) {
	if p == dir {
		return ".", true
	}
	if dir == "/" {
		return strings.TrimPrefix(p, "/"), true
	}
	if strings.HasPrefix(p, dir+"/") {
		return p[len(dir)+1:], true
	}
	return "", false
}

// checkGuest validates a bind's guest path and returns it cleaned.
func checkGuest(guest string) (string, error) {
	if guest == "" {
		return "", errors.New(`"guest" is missing: give the absolute path where the sandbox should see it, e.g. "/data"`)
	}
	if !filepath.IsAbs(guest) {
		return "", fmt.Errorf("guest path %q is relative: use an absolute path inside the sandbox, e.g. %q", guest, "/"+guest)
	}
	g := filepath.Clean(guest)
	if isAncestorOrSelf(g, GuestHome) {
		return "", fmt.Errorf("guest path %q would cover the agent home %s: choose a path below it or elsewhere, e.g. /mnt/data", guest, GuestHome)
	}
	return g, nil
}

// writableGuest are guest directories where bwrap can create mount points.
var writableGuest = []string{"/tmp", "/run", "/dev/shm", GuestHome}

// checkMountpoint makes sure bwrap can mount on guest: the rest of the guest
// file system is the read-only host root, where a missing mount point
// cannot be created.
func checkMountpoint(guest string, earlier []Bind) error {
	for _, w := range writableGuest {
		if rel, ok := within(guest, w); ok && rel != "." {
			return nil
		}
	}
	for _, b := range earlier {
		if rel, ok := within(guest, b.Guest); ok && rel != "." && !b.ReadOnly {
			return nil
		}
	}
	for _, m := range masked {
		if _, ok := within(guest, m); ok {
			return fmt.Errorf("guest path %s is inside %s, which the sandbox replaces: choose another path, e.g. /mnt/data", guest, m)
		}
	}
	if _, err := os.Lstat(guest); err != nil {
		return fmt.Errorf("guest path %s does not exist in the sandbox's read-only view of the host, so bwrap cannot create it: create it on the host (mkdir -p %s), or use a path that exists or one under /tmp or %s", guest, guest, GuestHome)
	}
	return nil
}

// masked are guest directories that never show host content, so hiding a
// host path below them is unnecessary (and would create stray mount points).
var masked = []string{"/tmp", "/dev", "/proc", "/run", "/home", "/root"}

// plan is everything Run needs besides the argv.
type plan struct {
	args   []string
	id     identity
	limits string // LimitsNone, LimitsCgroup2 or LimitsRlimit
	home   string // absolute host home
	cwd    string // guest working directory
	binds  []Bind // validated
	// covered are the host paths bwrap mounts over in its view of the
	// host's root (host sockets, hidden paths) that existed when the
	// plan was made: one gone by the time bwrap mounts (an art mount or
	// a daemon that ended meanwhile) fails the setup (see vanished).
	covered []string
}

// vanished returns a path the plan covers that no longer exists, "" if
// none.
func (p *plan) vanished() string {
	for _, c := range p.covered {
		if _, err := os.Lstat(c); errors.Is(err, os.ErrNotExist) {
			return c
		}
	}
	return ""
}

// Args returns the bwrap arguments (without the bwrap path itself) that Run
// would use for cfg. They refer to file descriptors 3 (start
// notification), 4 (--info-fd), 5 (--seccomp) and 6 (tmpfs sized) that Run
// provides, so they are meant for display and tests, not for running by
// hand.
func Args(cfg Config) ([]string, error) {
	p, err := makePlan(cfg, limitMechanism(cfg))
	if err != nil {
		return nil, err
	}
	return p.args, nil
}

func makePlan(cfg Config, limits string) (*plan, error) {
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		return nil, errors.New("no command to run: give a command after --")
	}
	for _, a := range cfg.Argv {
		if strings.ContainsRune(a, 0) {
			return nil, fmt.Errorf("command argument %q contains a NUL byte", a)
		}
	}
	if cfg.Home == "" {
		return nil, errors.New("sandbox home directory not set")
	}
	home, err := filepath.Abs(cfg.Home)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(home); err != nil {
		return nil, fmt.Errorf("sandbox home: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("sandbox home %s is not a directory", home)
	}
	cwd := GuestHome
	if cfg.Workspace != "" {
		if !filepath.IsLocal(cfg.Workspace) {
			return nil, fmt.Errorf("workspace %q must be a relative path inside the home, without ..", cfg.Workspace)
		}
		ws := filepath.Clean(cfg.Workspace)
		if st, err := os.Stat(filepath.Join(home, ws)); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("workspace directory %s does not exist in the sandbox home %s: create it first", ws, home)
		}
		cwd = GuestHome + "/" + filepath.ToSlash(ws)
		if cfg.Dir != "" {
			if !filepath.IsLocal(cfg.Dir) {
				return nil, fmt.Errorf("start directory %q must be a relative path inside the workspace, without ..", cfg.Dir)
			}
			// The caller checked it exists (IsDirBelow): in direct mode
			// the workspace is a bind, not yet in the home.
			cwd += "/" + filepath.ToSlash(filepath.Clean(cfg.Dir))
		}
	}
	if cfg.Memory < 0 || cfg.Pids < 0 || cfg.TmpSize < 0 || cfg.TaskCap < 0 {
		return nil, errors.New("memory, process and tmpfs limits must not be negative")
	}
	id, err := agentIdentity(cfg.User)
	if err != nil {
		return nil, err
	}
	env, err := guestEnv(cfg, cwd)
	if err != nil {
		return nil, err
	}
	var binds []Bind
	for i, b := range cfg.Binds {
		g, err := checkGuest(b.Guest)
		if err != nil {
			return nil, fmt.Errorf("bind %d (%s -> %s): %w", i, b.Host, b.Guest, err)
		}
		if !filepath.IsAbs(b.Host) {
			return nil, fmt.Errorf("bind %d (%s -> %s): host path must be absolute", i, b.Host, b.Guest)
		}
		if _, err := os.Stat(b.Host); err != nil {
			return nil, fmt.Errorf("bind %d (%s -> %s): host path does not exist: create it or remove the bind", i, b.Host, b.Guest)
		}
		binds = append(binds, Bind{Host: filepath.Clean(b.Host), Guest: g, ReadOnly: b.ReadOnly})
	}
	for i, b := range binds {
		if err := checkMountpoint(b.Guest, binds[:i]); err != nil {
			return nil, fmt.Errorf("bind %d (%s -> %s): %w", i, b.Host, b.Guest, err)
		}
	}

	a := []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
	}
	if cfg.Net {
		a = append(a, "--share-net")
	}
	// --new-session: the sandbox never shares a session (and so a
	// controlling terminal) with the caller, so TIOCSTI on an inherited
	// terminal fd fails. Interactive runs make the command the leader of a
	// session of its own whose controlling terminal is the fresh pty (see
	// shimScript).
	a = append(a, "--die-with-parent", "--cap-drop", "ALL", "--new-session")
	a = append(a, "--ro-bind", "/", "/")
	// Host unix sockets first (sockets.go): later mounts of the home,
	// binds and hidden paths go over them where they overlap.
	sockets, err := hostSocketMasks(procNetUnix, id)
	if err != nil {
		return nil, err
	}
	var covered []string
	for _, s := range sockets {
		a = append(a, "--ro-bind", "/dev/null", s)
		covered = append(covered, s)
	}
	a = append(a,
		"--dev", "/dev",
		"--proc", "/proc",
		"--perms", "1777", "--tmpfs", "/tmp",
		"--perms", "1777", "--tmpfs", "/dev/shm",
		"--tmpfs", "/run",
	)
	if cfg.Net {
		// Keep DNS working where /etc/resolv.conf points into /run.
		a = append(a, "--ro-bind-try", "/run/systemd/resolve", "/run/systemd/resolve")
	}
	a = append(a,
		"--tmpfs", "/root",
		"--tmpfs", "/home",
		"--bind", home, GuestHome,
	)
	for _, b := range binds {
		if b.ReadOnly {
			a = append(a, "--ro-bind", b.Host, b.Guest)
		} else {
			a = append(a, "--bind", b.Host, b.Guest)
		}
	}
	hides, err := hideTargets(cfg.Hide, home, binds, id)
	if err != nil {
		return nil, err
	}
	for _, h := range hides {
		if h.dir {
			a = append(a, "--tmpfs", h.guest, "--remount-ro", h.guest)
		} else {
			a = append(a, "--ro-bind", "/dev/null", h.guest)
		}
		if h.host {
			covered = append(covered, h.guest)
		}
	}
	a = append(a, "--remount-ro", "/root", "--remount-ro", "/home")
	a = append(a, "--chdir", cwd, "--clearenv")
	for _, kv := range env {
		a = append(a, "--setenv", kv[0], kv[1])
	}
	a = append(a, "--info-fd", strconv.Itoa(fdInfo))
	a = append(a, "--seccomp", strconv.Itoa(fdSeccomp))
	setsid := ""
	if cfg.Interactive {
		if setsid = findSetsid(); setsid == "" {
			return nil, errors.New("setsid (util-linux) not found in /usr/bin or /bin: interactive sandboxes need it to give the command its own terminal session; install util-linux")
		}
	}
	a = append(a, "--", "/bin/sh", "-c", shimScript(cfg, limits, setsid), "art-sandbox")
	a = append(a, cfg.Argv...)
	return &plan{args: a, id: id, limits: limits, home: home, cwd: cwd, binds: binds, covered: covered}, nil
}

type hideTarget struct {
	guest string
	dir   bool
	host  bool // guest is the host path itself, in the view of the host's root
}

// hideTargets maps host paths to hide onto every guest path they appear at.
// Paths the agent's user cannot reach at all are left out: bwrap, running as
// that user, could not mount over them, and the agent cannot see them anyway.
func hideTargets(hide []string, home string, binds []Bind, id identity) ([]hideTarget, error) {
	realHome, err := filepath.EvalSymlinks(home)
	if err != nil {
		return nil, err
	}
	var out []hideTarget
	seen := map[string]bool{}
	add := func(g string, dir bool) *hideTarget {
		g = filepath.Clean(g)
		if !seen[g] {
			seen[g] = true
			out = append(out, hideTarget{guest: g, dir: dir})
			return &out[len(out)-1]
		}
		return nil
	}
	var reals []string
	for _, h := range hide {
		if !filepath.IsAbs(h) {
			return nil, fmt.Errorf("path to hide %q must be absolute", h)
		}
		real, err := filepath.EvalSymlinks(filepath.Clean(h))
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
			continue // nothing there, or out of reach of this user and so of the agent
		}
		if err != nil {
			return nil, fmt.Errorf("path to hide %s: %w", h, err)
		}
		reals = append(reals, real)
	}
	reachable := reachableAs(id, reals)
	// A path inside a hidden directory is hidden with it. Covering it again
	// would need a mount point inside that directory's read-only tmpfs,
	// which bwrap cannot create (e.g. the repository file inside its .art).
	var hiddenDirs []string
	for _, real := range reals {
		if st, err := os.Stat(real); err == nil && st.IsDir() && reachable[real] {
			hiddenDirs = append(hiddenDirs, real)
		}
	}
	covered := func(p string) bool {
		for _, d := range hiddenDirs {
			if rel, ok := within(p, d); ok && rel != "." {
				return true
			}
		}
		return false
	}
	for _, real := range reals {
		if !reachable[real] || covered(real) {
			continue
		}
		h := real
		if real == "/" {
			return nil, errors.New("cannot hide /")
		}
		st, err := os.Stat(real)
		if err != nil {
			return nil, fmt.Errorf("path to hide %s: %w", h, err)
		}
		dir := st.IsDir()
		// Through the home.
		if rel, ok := within(real, realHome); ok {
			if rel == "." {
				return nil, fmt.Errorf("cannot hide %s: it is the sandbox home", h)
			}
			add(GuestHome+"/"+rel, dir)
		}
		// Through the binds.
		for _, b := range binds {
			rb, err := filepath.EvalSymlinks(b.Host)
			if err != nil {
				continue
			}
			if rel, ok := within(real, rb); ok {
				add(filepath.Join(b.Guest, rel), dir)
			}
		}
		// In the read-only view of the host root.
		if !underMasked(real) {
			if h := add(real, dir); h != nil {
				h.host = true
			}
		}
	}
	return out, nil
}

// shimScript is the /bin/sh program between bwrap and the command. It
// applies rlimits, tells Run that setup succeeded (one byte on fd 3), closes
// Run's descriptors and execs "$@" unchanged. When exec fails the shell
// exits 127 (not found) or 126 (not executable), as shells do.
//
// Interactive runs exec the command through setsid -c: it becomes the leader
// of a new session with the pty (which no session owns yet) as controlling
// terminal and its process group in the foreground, like a login shell. So
// job control works, Ctrl-C reaches only the command's foreground job (not
// bwrap), and TIOCSTI can only reach the sandbox's own pty. setsid reports
// a command it cannot run with 127 or 126 too.
func shimScript(cfg Config, limits, setsid string) string {
	var b strings.Builder
	if limits == LimitsRlimit {
		fail := `|| { echo "art-sandbox: cannot set resource limits" >&2; exit 125; }`
		if cfg.Memory > 0 {
			kb := (cfg.Memory + 1023) / 1024
			fmt.Fprintf(&b, "ulimit -v %d %s\n", kb, fail)
		}
		if cfg.Pids > 0 {
			// bash spells RLIMIT_NPROC -u, dash -p.
			fmt.Fprintf(&b, "{ ulimit -u %d 2>/dev/null || ulimit -p %d; } %s\n", cfg.Pids, cfg.Pids, fail)
		}
	}
	if cfg.Pids <= 0 && cfg.TaskCap > 0 {
		if soft, hard, ok := taskCapLimits(cfg.TaskCap); ok {
			// The soft limit first: the hard one may not go below it.
			// bash spells RLIMIT_NPROC -u, dash -p.
			fmt.Fprintf(&b, "{ ulimit -S -u %d 2>/dev/null || ulimit -S -p %d; } && { ulimit -H -u %d 2>/dev/null || ulimit -H -p %d; } || { echo \"art-sandbox: cannot cap the number of processes\" >&2; exit 125; }\n", soft, soft, hard, hard)
		}
	}
	fmt.Fprintf(&b, "printf x >&%d || exit 125\n", fdStarted)
	if sizesTmpfs(cfg) {
		// Run answers once the tmpfs mounts are sized; end of file
		// (art gone, or sizing failed) runs nothing.
		fmt.Fprintf(&b, "read -r ok <&%d && [ \"$ok\" = sized ] || exit 125\n", fdTmpfsDone)
	}
	fmt.Fprintf(&b, "exec %d>&- %d>&- %d<&- %d<&-\n", fdStarted, fdInfo, fdSeccomp, fdTmpfsDone)
	if setsid != "" {
		fmt.Fprintf(&b, "exec %s -w -c -- \"$@\"", shQuote(setsid))
	} else {
		b.WriteString(`exec "$@"`)
	}
	return b.String()
}

// sysProcAttr returns the process attributes for the bwrap process.
func (p *plan) sysProcAttr(interactive bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if interactive {
		// A session of its own but no controlling terminal: the command
		// inside takes the pty as its controlling terminal (shimScript).
		a.Setsid = true
	} else {
		a.Setpgid = true
	}
	if p.id.switchTo {
		a.Credential = p.id.credential()
	}
	return a
}

// bwrapPath finds bwrap.
func bwrapPath() (string, error) {
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", errors.New("bwrap (bubblewrap) not found in PATH: install it: apt-get install -y bubblewrap")
	}
	return p, nil
}

// shQuote quotes s for /bin/sh.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// reachableAs reports which paths the agent's user can stat. When the agent
// runs as the caller that is simply lstat. When root switches to another
// user, every directory on the way must grant that user search permission;
// this is decided from the mode bits, in process (a probe process would
// cost more than the rest of a short run). A directory carrying an ACL
// counts as searchable: wrongly calling a path reachable only makes bwrap
// fail loudly, while wrongly calling it unreachable would leave it visible.
func reachableAs(id identity, paths []string) map[string]bool {
	ok := map[string]bool{}
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if !id.switchTo || searchableAs(id, filepath.Dir(p)) {
			ok[p] = true
		}
	}
	return ok
}

// searchableAs reports whether id may traverse every directory from / to dir.
func searchableAs(id identity, dir string) bool {
	p := "/"
	for _, c := range strings.Split(strings.Trim(filepath.Clean(dir), "/"), "/") {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return false
		}
		if st.Mode&id.searchBit(st) == 0 && !hasACL(p) {
			return false
		}
		if c == "" {
			break
		}
		p = filepath.Join(p, c)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return false
	}
	return st.Mode&id.searchBit(st) != 0 || hasACL(p)
}

// searchBit is the mode bit that lets id search a directory, as the kernel
// picks it: the owner's, else the group's when the directory's group is
// id's primary or one of its supplementary groups (the agent runs with
// them), else the others'.
func (id identity) searchBit(st syscall.Stat_t) uint32 {
	if st.Uid == id.uid {
		return 0o100
	}
	if st.Gid == id.gid || slices.Contains(id.groups, st.Gid) {
		return 0o010
	}
	return 0o001
}

// hasACL reports whether a path carries a POSIX access ACL.
func hasACL(p string) bool {
	n, err := syscall.Getxattr(p, "system.posix_acl_access", nil)
	return err == nil && n > 0
}

// findSetsid looks for setsid where the sandbox sees the host's files.
func findSetsid() string {
	for _, p := range []string{"/usr/bin/setsid", "/bin/setsid", "/usr/sbin/setsid", "/sbin/setsid"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// IsDirBelow reports whether rel names a directory below base reached
// through directories only: no component is a symbolic link (which the
// home, the agent's, could point anywhere on the host).
func IsDirBelow(base, rel string) bool {
	p := base
	for _, part := range strings.Split(filepath.ToSlash(filepath.Clean(rel)), "/") {
		p = filepath.Join(p, part)
		st, err := os.Lstat(p)
		if err != nil || !st.IsDir() {
			return false
		}
	}
	return true
}

// CannotWrite explains, going by mode bits, why the agent's user (spec, as
// for AgentUser) cannot write the directory dir, or returns "" when it can
// (or when an ACL or an error leaves it unknown, so only a sure refusal is
// reported).
func CannotWrite(spec, dir string) string {
	id, err := agentIdentity(spec)
	if err != nil {
		return ""
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil || hasACL(dir) {
		return ""
	}
	bit := id.searchBit(st) << 1 // the write bit of the same class
	if st.Mode&bit != 0 {
		return ""
	}
	who := fmt.Sprintf("uid %d", id.uid)
	if id.name != "" {
		who = fmt.Sprintf("%s (uid %d)", id.name, id.uid)
	}
	return fmt.Sprintf("the agent runs as host user %s, who cannot write %s (owner %d:%d, mode %04o)", who, dir, st.Uid, st.Gid, st.Mode&0o7777)
}
