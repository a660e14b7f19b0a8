// Package cmd holds the cobra command tree: flag parsing, output and exit
// codes. It holds no storage or filesystem logic; that lives in repo/,
// overlay/, fuse/, sandbox/ and tracer/.
package cmd

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/artproject/art/repo"
)

// Exit codes of commands other than run (run exits with the agent's status).
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	// exitArt is what `art run` returns when art itself fails.
	exitArt = 125
)

// exitError carries a specific exit status through cobra.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e *codeError) Unwrap() error { return e.err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &codeError{code: code, err: err}
}

func usageErr(format string, args ...any) error {
	return withCode(exitUsage, fmt.Errorf(format, args...))
}

// globals are the options every command shares.
type globals struct {
	db       string
	repoPath string // the repository opened, for the advice after an error
	stdout   io.Writer
	stderr   io.Writer
	stdin    io.Reader
}

// Execute runs the command tree and exits with its status.
func Execute() {
	tuneGC()
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// tuneGC lets the heap grow to four times what is live between
// collections instead of Go's default two, unless GOGC is set: a mount's
// model of the tree and the data on its way to SQLite are live for the
// whole session, and re-marking them took a tenth of the CPU of an untar
// (the Go tree into art mount: median 1.93 s -> 1.74 s; peak RSS 150 ->
// 187 MB). That growth is scaled back as the live heap grows (gctune.go).
// A soft limit of a quarter of RAM, unless GOMEMLIMIT is set, makes the
// collector work harder again before that growth matters.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercentFor(0))
		watchHeap(liveHeap, func(p int) { debug.SetGCPercent(p) })
	}
	var si syscall.Sysinfo_t
	if os.Getenv("GOMEMLIMIT") == "" && syscall.Sysinfo(&si) == nil {
		if total := uint64(si.Totalram) * uint64(si.Unit); total > 0 {
			debug.SetMemoryLimit(int64(min(total/4, math.MaxInt64)))
		}
	}
}

// Main runs art with the given arguments and returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// ART_CPUPROFILE=FILE profiles one art process (a debugging aid for
	// the benchmarks in bench/).
	if p := os.Getenv("ART_CPUPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	g := &globals{stdout: stdout, stderr: stderr, stdin: stdin}
	root := newRootCmd(g)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(stdin)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ce *codeError
	if errors.As(err, &ce) {
		if ce.err != nil && ce.err.Error() != "" {
			fmt.Fprintln(stderr, "art:", repo.EscapeControls(ce.err.Error()))
			adviseOnRepoError(stderr, ce.err, g.repoPath)
		}
		return ce.code
	}
	fmt.Fprintln(stderr, "art:", repo.EscapeControls(err.Error()))
	adviseOnRepoError(stderr, err, g.repoPath)
	// cobra reports an unknown subcommand with a plain error.
	if isFlagError(err) || strings.HasPrefix(err.Error(), "unknown command ") {
		return exitUsage
	}
	return exitError
}

func isFlagError(err error) bool {
	var fe *flagError
	return errors.As(err, &fe)
}

type flagError struct{ err error }

func (e *flagError) Error() string { return e.err.Error() + " (see 'art --help')" }
func (e *flagError) Unwrap() error { return e.err }

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "art",
		Short: "a sandbox for AI agents with a versioned home",
		Long: `art runs an AI agent inside a bubblewrap sandbox whose home, /home/agent, is
a copy-on-write filesystem backed by one SQLite repository. Every session is
recorded as a commit: read what the agent did (art log, art diff), fork
attempts (art branch, art run -b) and export the state you choose
(art pull --commit).

Repository: -d FILE, else $ART_DB, else .art/art.db found from the workspace
directory upward (art init creates it).

Exit status: 0 ok, 1 error, 2 usage error. art run exits with the command's
own status (128+signal when killed, 124 on --timeout, 125 when art fails,
126/127 when the command cannot run or is not found).`,
		Example: `  art init && art push -M "before the agent"   # in the workspace
  art -- ./agent.sh                              # as 'art run -- ./agent.sh'
  art log && art diff                            # what the session did
  art pull --commit HEAD                         # export it to the host`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       repo.Version,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		err = plainFlagValueError(err)
		if c == root || c.Name() == "run" {
			// A bad flag of art run (or bare art) is art failing before
			// the command started: 125, so that it cannot be mistaken for
			// the command's own status 2.
			return withCode(exitArt, &flagError{err})
		}
		return &flagError{err}
	})
	// Bare 'art [flags] [command...]' is 'art run', as in ART.
	ro := &runOptions{}
	addRunFlags(root, ro)
	root.Flags().StringVarP(&g.db, "db", "d", "", "repository file (default $ART_DB, else .art/art.db above the workspace)")
	root.Args = cobra.ArbitraryArgs
	root.RunE = func(c *cobra.Command, args []string) error {
		// After --, the words are the command whatever they look like.
		if len(args) > 0 && c.ArgsLenAtDash() != 0 {
			if err := refuseMistypedCommand(c, args[0]); err != nil {
				return err
			}
		}
		ro.dir = g.defaultWorkspace(c, ro.dir)
		return runMain(c.Context(), g, ro, args)
	}
	for _, c := range []*cobra.Command{
		newInitCmd(g), newPushCmd(g), newPullCmd(g), newLogCmd(g), newShowCmd(g),
		newDiffCmd(g), newBranchCmd(g), newCheckoutCmd(g), newStatusCmd(g),
		newGCCmd(g), newFsckCmd(g), newMountCmd(g), newCommitCmd(g), newRunCmd(g), newTraceCmd(g),
	} {
		// -d is --db everywhere except 'art branch', where it deletes (as in git).
		short := "d"
		if c.Flags().ShorthandLookup("d") != nil {
			short = ""
		}
		c.Flags().StringVarP(&g.db, "db", short, "", "repository file (default $ART_DB, else .art/art.db above the workspace)")
		// A wrong number of arguments is a usage error (exit 2), like a bad flag.
		if check := c.Args; check != nil {
			c.Args = func(c *cobra.Command, args []string) error {
				if err := check(c, args); err != nil {
					// cobra.NoArgs says `unknown command "x" for "art
					// init"`: it is an argument the command does not take.
					if strings.HasPrefix(err.Error(), "unknown command ") && len(args) > 0 {
						err = fmt.Errorf("%s takes no arguments, got %q", c.CommandPath(), args[0])
					}
					return &flagError{err}
				}
				return nil
			}
		}
		root.AddCommand(c)
	}
	root.SetHelpCommand(newHelpCmd(root))
	// The usage line of art itself says what bare words do: cobra's
	// "art [flags]" and "art [command]" read as if only art's commands
	// were taken.
	tmpl := root.UsageTemplate()
	const stock = "Usage:{{if .Runnable}}\n  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}\n  {{.CommandPath}} [command]{{end}}"
	if !strings.HasPrefix(tmpl, stock) {
		panic("cobra's usage template changed; update newRootCmd")
	}
	root.SetUsageTemplate(`Usage:{{if not .HasParent}}
  art [flags] [command...]  run command (default: bash) in the sandbox, as 'art run' does
  art COMMAND [flags]       run one of art's commands, below{{else}}` + strings.TrimPrefix(stock, "Usage:") + "{{end}}" + strings.TrimPrefix(tmpl, stock))
	return root
}

// refuseMistypedCommand refuses bare 'art NAME' when NAME is no program
// on PATH but close to one of art's commands: 'art stauts' ran stauts in
// the sandbox, failed with 127 and recorded a session. Bare words still
// run (art make test), and 'art run -- NAME' or 'art -- NAME' runs
// anything.
func refuseMistypedCommand(root *cobra.Command, name string) error {
	if strings.Contains(name, "/") {
		return nil
	}
	if _, err := exec.LookPath(name); err == nil {
		return nil
	}
	if root.SuggestionsMinimumDistance <= 0 {
		root.SuggestionsMinimumDistance = 2 // cobra's default, set only where it suggests itself
	}
	sugg := root.SuggestionsFor(name)
	if len(sugg) == 0 {
		return nil
	}
	// Commands the word begins first: "pul" is more likely pull than push.
	sort.SliceStable(sugg, func(i, j int) bool {
		return strings.HasPrefix(sugg[i], name) && !strings.HasPrefix(sugg[j], name)
	})
	quoted := make([]string, len(sugg))
	for i, s := range sugg {
		quoted[i] = strconv.Quote(s)
	}
	return usageErr("unknown command %q for \"art\"; did you mean %s? (to run a program of that name in the sandbox: art run -- %s)", name, strings.Join(quoted, " or "), name)
}

// newHelpCmd is 'art help [COMMAND]'. cobra's own printed art's help and
// exited 0 for any topic: bare art takes any word as a command to run,
// so every word "found" art itself.
func newHelpCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || target == nil || len(rest) > 0 {
				return usageErr("unknown help topic %q (art's commands are listed by 'art --help')", strings.Join(args, " "))
			}
			return target.Help()
		},
	}
}

// plainFlagValueError says what a flag's value should have been instead
// of Go's parse error ("strconv.ParseInt: parsing "abc": invalid syntax").
func plainFlagValueError(err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return err
	}
	f := ive.GetFlag()
	name := "--" + f.Name
	if f.Shorthand != "" {
		name = "-" + f.Shorthand + "/--" + f.Name
	}
	var ne *strconv.NumError
	switch t := f.Value.Type(); {
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return fmt.Errorf("%s %q: out of range", name, ive.GetValue())
		}
		return fmt.Errorf("%s %q: not a whole number", name, ive.GetValue())
	case t == "duration":
		return fmt.Errorf("%s %q: not a duration (a number with a unit: 30s, 10m, 2h)", name, ive.GetValue())
	case t == "bool":
		return fmt.Errorf("%s %q: not true or false", name, ive.GetValue())
	}
	return err
}

// defaultWorkspace is the workspace a command uses: dir (-m) when given;
// otherwise the current directory, unless the repository found by
// searching upward lives in an ancestor's .art, that ancestor is a
// workspace the repository already synced and the current directory is
// not: then the ancestor, as git works from a subdirectory of its work
// tree (a push from ws/src must not record a workspace "src"). A
// repository in a parent directory holding several workspaces (each
// synced under its own name, the parent never) keeps the current
// directory. With -d or $ART_DB nothing is searched.
func (g *globals) defaultWorkspace(c *cobra.Command, dir string) string {
	if c.Flags().Changed("mount") || g.db != "" || os.Getenv("ART_DB") != "" {
		return dir
	}
	p, err := repo.Discover("", dir)
	if err != nil {
		return dir
	}
	owner := filepath.Dir(filepath.Dir(p))
	cwd, err := filepath.Abs(dir)
	if err != nil || owner == cwd {
		return dir
	}
	r, err := repo.Open(p)
	if err != nil {
		return dir
	}
	defer r.Close()
	if r.KnownWorkspace(owner) && !r.KnownWorkspace(cwd) {
		return owner
	}
	return dir
}

// openRepo discovers and opens the repository for a workspace directory.
func (g *globals) openRepo(workspace string) (*repo.Repo, error) {
	if workspace == "" {
		workspace = "."
	}
	path, err := repo.Discover(g.db, workspace)
	if err != nil {
		return nil, err
	}
	g.repoPath = path
	r, err := repo.Open(path)
	if err != nil {
		return nil, err
	}
	g.cleanupStale(r)
	return r, nil
}

// adviseOnRepoError adds the next step after an error SQLite gave for the
// repository at path ("" if unknown): why it cannot be written, or that
// its filesystem is full.
func adviseOnRepoError(stderr io.Writer, err error, path string) {
	if repo.IsReadOnly(err) {
		fmt.Fprintln(stderr, "art:", repo.EscapeControls(repo.ReadOnlyAdvice(path)))
	}
	if repo.IsFull(err) {
		// art gc, which the user reaches for to make room, needs some
		// itself: it writes what it deletes to the repository's
		// write-ahead log first.
		fmt.Fprintln(stderr, "art: the filesystem holding the repository is full; what failed was not recorded. Free some space there (df -h on the repository's directory), then run the command again; art gc too needs a little room to run")
	}
}

// pullCommand is the 'art pull' that advice prints for workspace abs
// (and revision rev, if not ""), runnable as printed: its words quoted
// for the shell, and the repository named with -d when the command was
// given one (from abs, discovery finds another repository or none).
func (g *globals) pullCommand(abs, rev string) string {
	if rev == "" {
		return g.workspaceCommand("pull", abs)
	}
	return g.workspaceCommand("pull", abs, "--commit", rev)
}

// workspaceCommand is 'art VERB -m abs ARGS...' as advice prints it, with
// the same quoting and -d as pullCommand.
func (g *globals) workspaceCommand(verb, abs string, args ...string) string {
	s := "art " + verb
	if g.db != "" && g.repoPath != "" {
		s += " -d " + repo.ShellArg(g.repoPath)
	}
	s += " -m " + repo.ShellArg(abs)
	for _, a := range args {
		s += " " + repo.ShellArg(a)
	}
	return s
}
