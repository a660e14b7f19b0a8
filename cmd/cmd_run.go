package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/artproject/art/fuse"
	"github.com/artproject/art/objects"
	"github.com/artproject/art/overlay"
	"github.com/artproject/art/policy"
	"github.com/artproject/art/repo"
	"github.com/artproject/art/sandbox"
)

// runOptions are the flags of art run (and of bare art).
type runOptions struct {
	dir         string
	branch      string
	message     string
	interactive bool
	net         bool
	direct      bool
	env         []string
	timeout     time.Duration
	memory      string
	pids        int
	tmpSize     string
	user        string
	trace       bool
	traceLog    string
	traceCalls  string
	callsGiven  bool // --trace-syscalls given, even empty
	preset      string
	allow       []string
	explain     []string
}

const runLong = `run starts COMMAND (default: bash) in a bubblewrap sandbox whose home,
/home/agent, is a copy-on-write view of the branch; the workspace DIR is at
/home/agent/<basename of DIR> and is the working directory. When the command
ends (normally, with an error, by a signal or a timeout) the session is
recorded as a commit on the branch: argv, exit status, times. Host files are
never modified; export a state with 'art pull --commit REV'.

The sandbox sees the host root read-only, a private /tmp, no network (unless
--net), no capabilities, a cleared environment (HOME, PATH, PWD, TERM, LANG,
USER, --env values, and GIT_CONFIG_* setting core.checkStat=minimal: inode
numbers change when a session is committed), and nothing of the repository.
Started by root, the agent runs as an unprivileged user (--user, default
nobody) with its supplementary groups. Started in a subdirectory of the
workspace, the command starts there. Extra binds come from the host's
DIR/.art/config/binds.json only.

With no repository (or --direct) the host DIR is bound read-write at
/home/agent/<basename> and nothing is recorded; the agent writes there
as its user (started by root: --user, whom DIR's permissions must allow;
art warns when they do not). The repositories (.art) of workspaces up to
three levels below DIR are hidden; with no repository and no --direct, a
DIR that has one below (art run from a workspace's parent) is refused.

A signal to art (SIGINT, SIGTERM, SIGHUP, SIGQUIT) or --timeout ends the
sandbox: its processes get the signal (SIGTERM for SIGQUIT and timeouts)
and 2s to exit, then SIGKILL; a second signal kills at once. Signals that
come while art records the session are held.

Exit status: the command's own; 128+N when killed by signal N; 124 when
--timeout ended it; 125 when art itself fails; 126 when the command cannot
be executed; 127 when it is not found.`

const runExample = `  art run -m ws -- python3 agent.py
  art run -b attempt-1 -M "first try" -- ./agent.sh
  art -m ws --timeout 10m -- make test
  art run --direct -- ls`

func addRunFlags(c *cobra.Command, o *runOptions) {
	f := c.Flags()
	f.SetInterspersed(false) // flags after the command belong to it
	f.StringVarP(&o.dir, "mount", "m", ".", "host workspace directory")
	f.StringVarP(&o.branch, "branch", "b", "", "branch to run on (created from HEAD if missing)")
	f.StringVarP(&o.message, "message", "M", "", "commit message (default \"run: <argv>\")")
	f.BoolVarP(&o.interactive, "interactive", "i", term.IsTerminal(int(os.Stdin.Fd())), "run on a fresh pty (default: whether stdin is a terminal)")
	f.BoolVar(&o.net, "net", false, "share the host network")
	f.BoolVar(&o.direct, "direct", false, "bind the host workspace read-write; record nothing")
	f.StringArrayVar(&o.env, "env", nil, "set KEY=VALUE inside the sandbox (repeatable)")
	f.DurationVar(&o.timeout, "timeout", 0, "end the sandbox after this long (SIGTERM, then SIGKILL 2s later; exit 124), e.g. 30s, 10m; 0: no limit")
	f.StringVar(&o.memory, "memory", "", "memory limit, e.g. 512M, 2G (a plain number is bytes; at least 1M)")
	f.IntVar(&o.pids, "pids", 0, "process limit; 0: processes and threads capped, as RLIMIT_NPROC, at a quarter of the host's pid_max, at most 16384")
	f.StringVar(&o.tmpSize, "tmp-size", "", "size of each of the sandbox's in-memory /tmp, /dev/shm and /run, e.g. 2G; 0 for the kernel's default (default: a quarter of RAM; art as root only)")
	f.StringVar(&o.user, "user", "", "host user the agent runs as when art runs as root (default nobody)")
	f.BoolVar(&o.trace, "trace", false, "trace the agent's syscalls")
	f.StringVar(&o.traceLog, "trace-log", "", "write the strace-like log here (default stderr)")
	f.Var(&flagString{&o.traceCalls, &o.callsGiven}, "trace-syscalls", "trace only these syscalls (comma-separated)")
	f.StringVar(&o.preset, "preset", "", "path policy preset: full-access (default), development, agent-safe, read-only")
	f.StringArrayVar(&o.allow, "allow", nil, "path rule PATTERN=PERM (none, view, read, write), after the preset (repeatable)")
	f.StringArrayVar(&o.explain, "explain", nil, "print which policy rule decides PATH (home-relative, e.g. ws/.env) and exit")
}

// flagString is a string flag that also says it was given (an empty
// --trace-syscalls is an error, not the flag's absence).
type flagString struct {
	s   *string
	set *bool
}

func (f *flagString) String() string {
	if f.s == nil {
		return ""
	}
	return *f.s
}

func (f *flagString) Set(v string) error {
	*f.s, *f.set = v, true
	return nil
}

func (f *flagString) Type() string { return "string" }

func newRunCmd(g *globals) *cobra.Command {
	o := &runOptions{}
	c := &cobra.Command{
		Use:     "run [flags] [-- command...]",
		Short:   "run a command in the sandbox and record the session as a commit",
		Long:    runLong,
		Example: runExample,
		RunE: func(c *cobra.Command, args []string) error {
			o.dir = g.defaultWorkspace(c, o.dir)
			return runMain(c.Context(), g, o, args)
		},
	}
	addRunFlags(c, o)
	return c
}

// minMemory is the least --memory art accepts: below it no program
// starts (the dynamic loader alone maps more).
const minMemory = 1 << 20

// plainBytes is "512 bytes" or "1 byte".
func plainBytes(n int64) string {
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

// exitWith ends the command with a status and no message.
func exitWith(code int) error {
	if code == 0 {
		return nil
	}
	return &codeError{code: code}
}

// runFail marks an error of art itself: exit status 125.
func runFail(err error) error { return withCode(exitArt, err) }

func runMain(ctx context.Context, g *globals, o *runOptions, argv []string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	outliveClosedOutput()
	if len(argv) == 0 {
		argv = []string{"bash"}
		if _, err := exec.LookPath("bash"); err != nil {
			argv = []string{"sh"}
		}
	}
	// 0, the flags' default, is no limit of one's own (--pids 0: the
	// default cap), as their help says.
	if o.timeout < 0 {
		return runFail(fmt.Errorf("--timeout %s: must be positive (0: no limit)", o.timeout))
	}
	if o.pids < 0 {
		return runFail(fmt.Errorf("--pids %d: must be positive (0: the default cap)", o.pids))
	}
	var memory int64
	if o.memory != "" {
		m, err := sandbox.ParseSize(o.memory)
		if err != nil {
			return runFail(fmt.Errorf("--memory %q: %w", o.memory, err))
		}
		// A plain number is bytes: --memory 512 meant 512M, and the
		// sandbox died of SIGSEGV before the command started, recorded
		// as the command's own crash.
		if m < minMemory {
			return runFail(fmt.Errorf("--memory %s is %s, too little to start a program; give a unit, e.g. --memory %sM", o.memory, plainBytes(m), strings.TrimSpace(o.memory)))
		}
		memory = m
	}
	tmpSize := sandbox.DefaultTmpSize()
	switch o.tmpSize {
	case "":
	case "0":
		tmpSize = 0
	default:
		m, err := sandbox.ParseSize(o.tmpSize)
		if err != nil {
			return runFail(fmt.Errorf("--tmp-size %q: %w (0 for the kernel's default)", o.tmpSize, err))
		}
		tmpSize = m
	}
	dir, err := repo.CheckWorkspaceDir(o.dir)
	if err != nil {
		return runFail(err)
	}
	ws, err := repo.WorkspaceName(dir)
	if err != nil {
		return runFail(err)
	}
	if err := checkNotAgentOwned(o.user, filepath.Join(dir, repo.DirName), filepath.Join(dir, repo.DirName, "config")); err != nil {
		return runFail(err)
	}
	bindsPath, err := sandbox.ConfigPath(dir, "binds.json")
	if err != nil {
		return runFail(err)
	}
	binds, err := sandbox.LoadBinds(bindsPath, dir)
	if err != nil {
		return runFail(err)
	}
	pol, err := loadPolicy(dir, o)
	if err != nil {
		return runFail(err)
	}
	if len(o.explain) > 0 {
		for _, p := range o.explain {
			p = strings.Trim(p, "/")
			fmt.Fprintln(g.stdout, pol.Explain(p, false))
		}
		return nil
	}
	cfg := sandbox.Config{
		Workspace: ws, Dir: subdirOf(dir), Argv: argv, Interactive: o.interactive, Net: o.net, Env: o.env,
		Term: os.Getenv("TERM"), Lang: os.Getenv("LANG"), User: o.user,
		Binds: binds, Timeout: o.timeout, Memory: memory, Pids: o.pids, TaskCap: sandbox.DefaultTaskCap(), TmpSize: tmpSize,
	}
	stdio := sandbox.Stdio{Stdin: g.stdin, Stdout: g.stdout, Stderr: g.stderr}

	dbPath, derr := repo.Discover(g.db, dir)
	if derr == nil {
		g.repoPath = dbPath
		if err := checkNotAgentOwned(o.user, dbPath, filepath.Dir(dbPath)); err != nil {
			return runFail(err)
		}
	}
	direct := o.direct || errors.Is(derr, repo.ErrNoRepo)
	var writable []string // what the agent can write on the host, besides the workspace
	for _, b := range binds {
		if !b.ReadOnly {
			writable = append(writable, b.Host)
		}
	}
	st, err := newSessionTrace(o, g.stderr, !direct, writable)
	if err != nil {
		return runFail(err)
	}
	defer st.close()
	if st != nil {
		st.apply(&cfg)
	}
	if direct {
		nested := nestedRepos(dir)
		if !o.direct && len(nested) > 0 {
			// Run one directory too high (~/src for ~/src/app): direct
			// mode would give the agent that workspace's repository,
			// every session of it, to delete.
			ws := filepath.Dir(nested[0])
			return runFail(fmt.Errorf("no repository found for %s, but %s below it has one: run art there (-m %s), or pass --direct to bind %s read-write with nothing recorded (its repositories hidden)", dir, ws, repo.ShellArg(ws), dir))
		}
		if o.direct {
			fmt.Fprintf(g.stderr, "art: direct mode: %s is bound read-write and nothing is recorded\n", dir)
		} else {
			fmt.Fprintf(g.stderr, "art: no repository found for %s; running in direct mode: the workspace is bound read-write and nothing is recorded (create one with 'art init -m %s')\n", dir, repo.ShellArg(dir))
		}
		if !pol.IsFullAccess() {
			return runFail(errors.New("path policies need the versioned home; direct mode binds the host workspace as it is (create a repository with 'art init', or drop --preset/--allow)"))
		}
		return runDirect(ctx, g, cfg, dir, stdio, st)
	}
	if derr != nil {
		return runFail(derr)
	}
	// Art's FUSE threads and the sandbox in one scheduling group (see
	// sandbox.JoinSchedGroup): the move runs while the session is set up.
	cfg.SchedGroup = sandbox.JoinSchedGroup(cfg)
	defer cfg.SchedGroup.Settle()
	r, err := repo.Open(dbPath)
	if err != nil {
		return runFail(err)
	}
	defer r.Close()
	g.cleanupStale(r)
	return runOverlay(ctx, g, o, r, cfg, dir, stdio, pol, st)
}

// hideWorkspace reports whether the host workspace dir can be hidden in
// the sandbox: not when it holds the home's mount point, and not when a
// user's bind shows it whole (its host is the workspace or a parent) or
// puts something at or around its path (hiding would cover what the user
// asked for). Binds of parts of it are unaffected by the hiding.
func hideWorkspace(dir, mnt string, binds []sandbox.Bind) bool {
	if strings.HasPrefix(mnt, dir+"/") {
		return false
	}
	return hideTempDir(dir, binds)
}

// hideTempDir reports whether the directory dir may be hidden in the
// sandbox: it is not the root, and no bind of the user's shows it whole
// (its host is dir or a parent) or puts something at or around its path.
func hideTempDir(dir string, binds []sandbox.Bind) bool {
	if dir == "/" || dir == "." || dir == "" {
		return false
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	within := func(p, d string) bool { return p == d || strings.HasPrefix(p, d+"/") }
	related := func(a, b string) bool { return within(a, b) || within(b, a) }
	for _, b := range binds {
		if within(real, b.Host) || within(dir, b.Host) || related(b.Guest, real) || related(b.Guest, dir) {
			return false
		}
	}
	return true
}

// checkNotAgentOwned refuses a repository, or a workspace .art, owned by
// the user the agent runs as (when that is not the caller): an agent
// working on the host workspace directly (--direct) could have made it,
// with a binds.json of its choosing. When the agent runs as the user who
// called sudo ('sudo art run --user $USER' in their own workspace), their
// files are theirs, as for a caller who is not root: nothing is refused.
func checkNotAgentOwned(user string, paths ...string) error {
	if os.Geteuid() != 0 {
		return nil // the agent runs as the caller: ownership tells nothing
	}
	uid, _, err := sandbox.AgentUser(user)
	if err != nil {
		return nil // reported where the user is resolved
	}
	if os.Getenv("SUDO_UID") == strconv.Itoa(uid) {
		return nil
	}
	for _, p := range paths {
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) == nil && st.Uid == uint32(uid) {
			return fmt.Errorf("%s belongs to uid %d, the user agents run as: an agent's session may have made it, and art takes no repository or config an agent could have written (remove it, or name your repository with -d)", p, uid)
		}
	}
	return nil
}

// loadPolicy builds the path policy from the host's
// DIR/.art/config/policy.json (never from anything the agent can write),
// --preset and --allow, in that order.
func loadPolicy(dir string, o *runOptions) (*policy.Policy, error) {
	path, err := sandbox.ConfigPath(dir, "policy.json")
	if err != nil {
		return nil, err
	}
	file, err := sandbox.ReadConfigFile(path)
	if err != nil {
		return nil, err
	}
	pol, err := policy.Build(file, path, o.preset, o.allow)
	if err != nil {
		return nil, fmt.Errorf("path policy: %w", err)
	}
	return pol, nil
}

// privateMountpoint makes the directory the agent's home is mounted on:
// "home" in a new temporary directory that only the agent's user (and
// root) may enter. The mount is allow_other and its root shows the home's
// own mode (0755), which hides the mount point's: a 0700 mount point let
// every local user read the agent's home, the user's workspace in it, by
// its path in /tmp. The directory around it keeps them out.
func privateMountpoint(uid, gid int) (string, error) {
	parent, err := os.MkdirTemp("", "art-home-")
	if err != nil {
		return "", fmt.Errorf("make the home's mount point: %w (set TMPDIR to a writable directory)", err)
	}
	mnt := filepath.Join(parent, "home")
	for _, step := range []func() error{
		func() error { return os.Chmod(parent, 0o700) },
		func() error { return os.Mkdir(mnt, 0o700) },
		func() error { return os.Chown(mnt, uid, gid) },
		func() error { return os.Chown(parent, uid, gid) },
	} {
		if err := step(); err != nil {
			removeMountpoint(mnt)
			return "", fmt.Errorf("make the home's mount point in %s: %w (set TMPDIR to a writable directory that allows chown)", parent, err)
		}
	}
	return mnt, nil
}

// removeMountpoint removes a run's mount point and the private directory
// around it, when empty (no longer mounted).
func removeMountpoint(mnt string) {
	if err := os.Remove(mnt); err == nil || errors.Is(err, os.ErrNotExist) {
		if parent := filepath.Dir(mnt); strings.HasPrefix(filepath.Base(parent), "art-home-") {
			os.Remove(parent)
		}
	}
}

// otherArtMounts lists the live art mounts but own, to hide in the
// sandbox: a user's art mount DIR as root (allow_other) showed in the
// read-only view of the host's root, and an agent read another branch's
// live files there. One whose server died is left out (it answers
// nothing, and hiding it would fail).
func otherArtMounts(own string) []string {
	var out []string
	for _, m := range fuse.ArtMounts() {
		if _, err := os.Lstat(m); err == nil && m != own {
			out = append(out, m)
		}
	}
	return out
}

// Bounds of nestedRepos' look below a direct-mode workspace.
const (
	nestedRepoDepth = 3    // dir/a/b/c/.art at the deepest
	nestedRepoDirs  = 4096 // directories read at most
)

// nestedRepos lists the repository directories (.art, as discovery takes
// them) of workspaces below dir, breadth first, down to nestedRepoDepth
// levels and reading at most nestedRepoDirs directories; links are not
// followed, and dir's own .art is not listed.
func nestedRepos(dir string) []string {
	type level struct {
		path  string
		depth int
	}
	var out []string
	queue := []level{{dir, 0}}
	for read := 0; len(queue) > 0 && read < nestedRepoDirs; read++ {
		d := queue[0]
		queue = queue[1:]
		ents, err := os.ReadDir(d.path)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() { // a link is no directory here
				continue
			}
			p := filepath.Join(d.path, e.Name())
			if e.Name() == repo.DirName {
				st, err := os.Lstat(filepath.Join(p, repo.FileName))
				if err == nil && st.Mode().IsRegular() && d.depth > 0 {
					out = append(out, p)
				}
				continue
			}
			if d.depth < nestedRepoDepth {
				queue = append(queue, level{p, d.depth + 1})
			}
		}
	}
	return out
}

// runDirect binds the host workspace read-write into an empty home.
func runDirect(ctx context.Context, g *globals, cfg sandbox.Config, dir string, stdio sandbox.Stdio, st *sessionTrace) error {
	home, err := os.MkdirTemp("", "art-home-")
	if err != nil {
		return runFail(err)
	}
	defer os.RemoveAll(home)
	os.Chmod(home, 0o755)
	if err := os.Mkdir(filepath.Join(home, cfg.Workspace), 0o755); err != nil {
		return runFail(err)
	}
	cfg.Home = home
	cfg.Binds = append([]sandbox.Bind{{Host: dir, Guest: "/home/agent/" + cfg.Workspace, ReadOnly: false}}, cfg.Binds...)
	// The host's .art holds what art trusts (binds.json, policy.json, the
	// repository): it is hidden, and it must exist for that, or the agent,
	// which writes the workspace directly, could create .art/config/binds.json
	// for the next run. One made here is removed again if still empty.
	artDir := filepath.Join(dir, repo.DirName)
	if err := os.Mkdir(artDir, 0o755); err == nil {
		defer os.Remove(artDir)
	}
	cfg.Hide = append([]string{artDir}, otherArtMounts("")...)
	// So are the repositories of workspaces below it (bwrap covers each).
	cfg.Hide = append(cfg.Hide, nestedRepos(dir)...)
	if why := sandbox.CannotWrite(cfg.User, dir); why != "" {
		// Its writes there fail with EACCES, which it may not report.
		fmt.Fprintf(g.stderr, "art: warning: %s: its writes to the workspace will fail; give --user with the directory's owner, or make it writable for that user\n", why)
	}
	cfg.Dir = startIn(g, dir, cfg.Workspace, cfg.Dir)
	res, err := runSandbox(ctx, g.stderr, cfg, stdio, st == nil, sandbox.Run)
	st.warnTextLog(g.stderr, res)
	if err != nil {
		return runFail(err)
	}
	return exitWith(res.ExitCode)
}

// setupAttempts bounds runSandbox's runs.
const setupAttempts = 3

// runSandbox runs the sandbox with run (sandbox.Run), again when bwrap
// could not set it up because a path it covers went away meanwhile
// (sandbox.ErrCoveredPathGone): another art mount that ended, a daemon
// that removed its socket. The command never started, so nothing was
// recorded or consumed. A session started beside one that ended failed
// with bwrap's "Can't mkdir parents", which is printed above the note.
// Not when retry is false (a traced run: its logs hold what the tracer
// saw of the failed setup).
func runSandbox(ctx context.Context, stderr io.Writer, cfg sandbox.Config, stdio sandbox.Stdio, retry bool,
	run func(context.Context, sandbox.Config, sandbox.Stdio) (sandbox.Result, error)) (sandbox.Result, error) {
	for attempt := 1; ; attempt++ {
		res, err := run(ctx, cfg, stdio)
		if retry && attempt < setupAttempts && errors.Is(err, sandbox.ErrCoveredPathGone) && ctx.Err() == nil {
			fmt.Fprintf(stderr, "art: %v; setting the sandbox up again\n", err)
			continue
		}
		return res, err
	}
}

func looksLikeRev(name string) bool {
	if len(name) < 4 {
		return false
	}
	for _, c := range name {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func runOverlay(ctx context.Context, g *globals, o *runOptions, r *repo.Repo, cfg sandbox.Config, dir string, stdio sandbox.Stdio, pol *policy.Policy, st *sessionTrace) error {
	head, err := r.Head()
	if err != nil {
		return runFail(err)
	}
	branch := o.branch
	if branch == "" {
		if head.Detached() {
			return runFail(errors.New("HEAD is detached; name a branch for this session with -b NAME"))
		}
		branch = head.Branch
	}
	if err := repo.CheckBranchName(branch); err != nil {
		return runFail(err)
	}
	if _, err := r.BranchTip(branch); errors.Is(err, repo.ErrNoBranch) {
		switch {
		case looksLikeRev(branch):
			return runFail(fmt.Errorf("branch %q does not exist and looks like a commit id; to start from a commit, create a branch first: art branch NAME %s", branch, branch))
		case head.Commit.IsZero():
			// An empty repository: import the host workspace first.
			fmt.Fprintf(g.stderr, "art: empty repository; importing %s first (as 'art push')\n", dir)
			if _, err := r.Push(ctx, repo.PushOptions{Dir: dir, Branch: branch, Message: "import " + cfg.Workspace}); err != nil {
				return runFail(err)
			}
		default:
			if err := r.CreateBranch(branch, head.Commit); err != nil {
				return runFail(err)
			}
			fmt.Fprintf(g.stderr, "art: created branch %s at %s\n", branch, head.Commit.Short())
		}
	} else if err != nil {
		return runFail(err)
	}
	if tip, err := r.BranchTip(branch); err == nil {
		if target, ok, _ := r.OutsideGitDir(tip, cfg.Workspace); ok {
			fmt.Fprintf(g.stderr, "art: warning: %s/.git is a file that sends git to %s, outside the workspace (a git worktree or submodule); in the sandbox that is at most the host's read-only view (hidden under /home, /root and /tmp; a relative path leads into the agent's home), so the agent's git commands fail; run art on the directory that holds the git repository itself\n",
				repo.QuotePath(cfg.Workspace), repo.QuotePath(target))
		}
	}
	if drift, err := r.HostDrift(dir); err == nil && !drift.UnfinishedPull.IsZero() {
		fmt.Fprintf(g.stderr, "art: warning: a pull of %s into %s did not finish; the sandbox sees the repository's version (finish the pull with '%s')\n",
			drift.UnfinishedPull.Short(), dir, g.pullCommand(dir, drift.UnfinishedPull.Short()))
	} else if err == nil && drift.Synced && !drift.Clean() {
		fmt.Fprintf(g.stderr, "art: warning: %s changed on the host since the last push/pull (%d added, %d modified, %d deleted); the sandbox sees the repository's version (record the host's with '%s')\n",
			dir, len(drift.Added), len(drift.Modified), len(drift.Deleted), g.workspaceCommand("push", dir))
	}
	uid, gid, err := sandbox.AgentUser(o.user)
	if err != nil {
		return runFail(err)
	}
	if err := fuse.CheckFUSE(); err != nil {
		return runFail(err)
	}
	start := time.Now()
	msg := o.message
	if msg == "" {
		msg = "run: " + strings.Join(cfg.Argv, " ")
	}
	sess := &objects.Session{Mode: "run", Argv: cfg.Argv, Workspace: cfg.Workspace, Start: start.UnixNano(), Version: repo.Version}
	var ofsPolicy *policy.Policy
	if !pol.IsFullAccess() {
		js, err := pol.MarshalJSON()
		if err != nil {
			return runFail(err)
		}
		sess.Policy = js
		ofsPolicy = pol
	}
	// What the next command records if art dies with the session (kill
	// -9): a traced one says its log is gone with art ('art trace' said
	// it was not traced).
	pending := *sess
	if st != nil {
		pending.TraceLost = "art ended before it stored the log (the session was interrupted)"
	}
	sessJSON, _ := json.Marshal(&pending)

	// From here a signal must not kill art: it would leave a mount and a
	// worktree behind. One that comes before the sandbox runs ends it as
	// soon as it starts, and the session is recorded as interrupted.
	guard := guardRecording(g)
	mnt, err := privateMountpoint(uid, gid)
	if err != nil {
		return runFail(err)
	}
	defer removeMountpoint(mnt)
	wt, resumed, err := r.CreateWorktree(branch, "run", mnt, string(sessJSON))
	if err != nil {
		return runFail(err)
	}
	if resumed {
		fmt.Fprintf(g.stderr, "art: continuing interrupted worktree #%d on %s with its pending changes\n", wt.ID, branch)
		// The worktree's own session was never recorded (a recording
		// that failed, a kill): this commit holds its work, so it names
		// it, or the history lost all trace of that session.
		if prev, _ := interruptedSession(&repo.Worktree{Kind: wt.PreviousKind(), Session: wt.PreviousSession()}); prev != nil {
			msg += fmt.Sprintf("\n\nContinues worktree #%d, which held the unrecorded work of: %s", wt.ID, sessionSummary(prev))
		}
	}
	// The command may never run: the worktree goes back then, a resumed
	// one with its pending work (deleting it lost an interrupted mount's
	// work when the sandbox failed to start).
	abandon := func() { r.AbandonWorktree(wt) }
	logger := log.New(g.stderr, "art: ", 0)
	ofs, err := overlay.Open(r, wt, overlay.Options{Log: logger, Policy: ofsPolicy, Owner: overlay.Owner{UID: uint32(uid), GID: uint32(gid)}})
	if err != nil {
		abandon()
		return runFail(err)
	}
	if _, err := ofs.Lookup(overlay.RootIno, cfg.Workspace); err != nil {
		if _, err := ofs.Mkdir(overlay.RootIno, cfg.Workspace, 0o755, nil); err != nil {
			ofs.Close()
			abandon()
			return runFail(fmt.Errorf("create /home/agent/%s: %w", cfg.Workspace, err))
		}
		fmt.Fprintf(g.stderr, "art: warning: branch %s has no workspace %q; starting with an empty one (import the host's with '%s')\n", branch, cfg.Workspace, g.workspaceCommand("push", dir, "-b", branch))
	}
	srv, err := fuse.Mount(mnt, ofs, fuse.Options{AllowOther: os.Geteuid() == 0, Log: logger})
	if err != nil {
		ofs.Close()
		abandon()
		return runFail(fmt.Errorf("mount the home: %w", err))
	}
	cfg.Home = mnt
	cfg.Env = append(gitStatEnv(cfg.Env), cfg.Env...)
	repoDir := filepath.Dir(r.Path)
	cfg.Hide = []string{repoDir, r.Path, filepath.Join(dir, repo.DirName)}
	if hideWorkspace(dir, mnt, cfg.Binds) {
		// The host workspace itself: the agent works on its home, and
		// must not read what the host has there beyond it (files
		// .artignore or the path policy keep out) through the read-only
		// view of the host's root.
		cfg.Hide = append(cfg.Hide, dir)
	}
	cfg.Hide = append(cfg.Hide, otherArtMounts(mnt)...)
	if tmp := filepath.Dir(filepath.Dir(mnt)); hideTempDir(tmp, cfg.Binds) {
		// The temporary directory around the home's mount point (TMPDIR
		// outside /tmp, which the sandbox replaces anyway): the homes of
		// the other sessions running now are mounted there too, in
		// directories their agents' user (nobody, for all of them) may
		// enter, and an agent read another branch's live home there.
		cfg.Hide = append(cfg.Hide, tmp)
	}
	cfg.Signals = guard.ch
	cfg.Dir = startIn(g, filepath.Join(mnt, cfg.Workspace), cfg.Workspace, cfg.Dir)
	res, runErr := runSandbox(ctx, g.stderr, cfg, stdio, st == nil, sandbox.Run)
	st.warnTextLog(g.stderr, res)
	guard.record()
	cfg.SchedGroup.Leave() // while the home is unmounted and committed
	if err := srv.Unmount(); err != nil {
		// The sandbox is gone, so something outside it holds files in
		// the home (a shell there, an editor): it would keep the session
		// from being recorded until it let go, writing into the agent's
		// commit meanwhile. Its files stop working instead.
		who := strings.Join(fuse.Holders(mnt, 5), ", ")
		if who == "" {
			who = "unknown"
		}
		fmt.Fprintf(g.stderr, "art: the home is still in use outside the sandbox (%s); cutting it off to record the session\n", repo.EscapeControls(who))
		fuse.Abort(mnt)
	}
	// A copy of the home in another mount namespace keeps the connection
	// after the unmount: the sandbox of another session started while
	// this one ran (bwrap copies every mount), and this session's end
	// waited HeldWait (10 s) for it every time, or, without root, until
	// that session ended. Nothing can use the copy (that sandbox's /tmp
	// covers it) and the sandbox that used the home is gone: the
	// connection is cut off, or, where that takes root, left to end with
	// this process, and the session is recorded now. That is what
	// sessions run side by side do, so art says nothing of it.
	served := make(chan struct{})
	go func() { srv.Wait(); close(served) }()
	switch aborted, holders := srv.AbortWhenHeld(served, fuse.HeldWait); {
	case len(holders) > 0:
	case aborted:
		fmt.Fprintf(g.stderr, "art: the home's connection was still held after the session ended, by a process left over from the sandbox?; it was cut off to record the session\n")
	default:
		<-served // without root: until it is let go
	}
	if runErr != nil {
		// Nothing ran: say why.
		if cerr := sandbox.CheckTools(); cerr != nil {
			runErr = cerr
		}
		ofs.Close()
		abandon()
		return runFail(runErr)
	}
	sess.End = res.End.UnixNano()
	if !res.Start.IsZero() {
		sess.Start = res.Start.UnixNano()
	}
	sess.ExitCode = res.ExitCode
	switch {
	case res.TimedOut:
		sess.Status = "timed out"
		if res.Signal != 0 {
			sess.Signal = signalName(res.Signal) // SIGTERM, or SIGKILL for what outlived it
		}
	case res.Interrupted != 0:
		sess.Status = "interrupted"
		sess.Signal = signalName(res.Interrupted)
	case res.Signal != 0:
		sess.Status = "signaled"
		sess.Signal = signalName(res.Signal)
	default:
		sess.Status = "exited"
	}
	var attach func(tx *repo.Tx) error
	var traceLost error
	if st != nil {
		// The structured log is stored like any file, in the commit's
		// own transaction: the commit names it, so no gc can come
		// between. A log that cannot be stored costs only the log.
		attach = func(tx *repo.Tx) error {
			tid, lost, err := attachTrace(tx, func(tx *repo.Tx) (*objects.ID, error) { return storeTrace(tx, st) })
			traceLost = lost
			sess.TraceID = tid
			if lost != nil {
				sess.TraceLost = lost.Error()
			}
			return err
		}
	}
	id, err := ofs.Commit(overlay.CommitOptions{Message: msg, Session: sess, AllowEmpty: true, Attach: attach})
	if err != nil {
		sess.TraceID = nil // rolled back with the commit
	}
	if err != nil && st != nil && (traceLost != nil || repo.IsFull(err)) {
		// Storing the log ended the commit's transaction, or the commit
		// with the log did not fit (SQLite writes a transaction's pages
		// at its COMMIT, so a log that fits in memory can still fail the
		// whole commit on a full disk): the session is recorded again,
		// from its worktree, without it.
		if traceLost == nil {
			traceLost = err
		}
		sess.TraceLost = traceLost.Error()
		if ofs2, oerr := overlay.Open(r, wt, overlay.Options{Log: logger}); oerr == nil {
			id, err = ofs2.Commit(overlay.CommitOptions{Message: msg, Session: sess, AllowEmpty: true})
		}
	}
	if traceLost != nil {
		fmt.Fprintf(g.stderr, "art: warning: the syscall log was not stored: %s\n", repo.EscapeControls(traceLost.Error()))
	}
	if err != nil {
		// Recorded later (art commit, or the next command): with how
		// the session ended, not as "interrupted", and, traced, saying
		// the log is gone with this process (it is not in the worktree).
		if st != nil && sess.TraceLost == "" {
			sess.TraceLost = "the session's recording failed: " + err.Error()
		}
		if js, jerr := json.Marshal(pendingSession{Session: sess, Message: msg}); jerr == nil {
			r.SetWorktreeSession(wt, string(js))
		}
		r.ReleaseWorktree(wt)
		return runFail(fmt.Errorf("record the session: %w (the changes stay in worktree #%d; 'art commit --worktree %d' records them)", err, wt.ID, wt.ID))
	}
	if n, first := ofs.PolicyRefusals(); n > 0 {
		// The agent saw only EACCES, which names no policy.
		eg := ""
		if first != "" {
			eg = ", the first at " + repo.QuotePath(first)
		}
		fmt.Fprintf(g.stderr, "art: the path policy refused %d change(s) the agent tried%s ('art run --explain PATH' names the rule that decides a path)\n", n, eg)
	}
	fmt.Fprintf(g.stderr, "art: session recorded as %s on %s (%s)\n", id.Short(), branch, sessionSummary(sess))
	return exitWith(res.ExitCode)
}

// signalName is the conventional name of a signal, e.g. "SIGKILL" (not
// Go's "killed", which reads badly in "killed by killed").
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

// subdirOf is the current directory relative to the workspace dir, when
// it lies below it ("" otherwise): art run started in ws/sub starts the
// command in /home/agent/ws/sub, as git keeps a subdirectory (it started
// at the workspace's root, and make ran the top-level Makefile).
func subdirOf(dir string) string {
	cwd, err := os.Getwd()
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(dir, cwd)
	if err != nil || rel == "." || !filepath.IsLocal(rel) {
		return ""
	}
	return filepath.ToSlash(rel)
}

// startIn returns sub when the workspace as the sandbox sees it (wsDir,
// on the host) has that directory, and otherwise says the command starts
// at the workspace's root.
func startIn(g *globals, wsDir, ws, sub string) string {
	if sub == "" {
		return ""
	}
	if sandbox.IsDirBelow(wsDir, sub) {
		return sub
	}
	fmt.Fprintf(g.stderr, "art: warning: %s is not a directory in the sandbox's /home/agent/%s (left out by .artignore, or made since the last push?); starting in /home/agent/%s\n",
		repo.QuotePath(sub), ws, ws)
	return ""
}

// gitStatEnv has git inside the sandbox compare a file's size and whole
// seconds of mtime only (core.checkStat=minimal, core.trustctime=false),
// as git advises where inode numbers are not stable: a file made in a
// session has another number, and a ctime equal to its mtime, once the
// session is committed, so the first git status of the next session
// re-read every such file (3 s for the Go tree) and rewrote .git/index,
// which that session then recorded as changed. Nothing when the caller
// sets git's environment configuration itself (--env GIT_CONFIG_COUNT).
func gitStatEnv(user []string) []string {
	for _, kv := range user {
		if strings.HasPrefix(kv, "GIT_CONFIG_") {
			return nil
		}
	}
	return []string{
		"GIT_CONFIG_COUNT=2",
		"GIT_CONFIG_KEY_0=core.checkStat", "GIT_CONFIG_VALUE_0=minimal",
		"GIT_CONFIG_KEY_1=core.trustctime", "GIT_CONFIG_VALUE_1=false",
	}
}
