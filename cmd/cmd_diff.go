package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
)

func newDiffCmd(g *globals) *cobra.Command {
	var stat, nameStatus, asJSON bool
	var dir string
	c := &cobra.Command{
		Use:   "diff [REV [REV2]] [--stat|--name-status] [-- PATH...]",
		Short: "show changes between commits",
		Long: `diff shows what changed: with no revision, what HEAD changed against its
parent; with one, from REV to HEAD; with two, from REV to REV2. Paths are
relative to the home root (/home/agent), e.g. ws/main.go. Unchanged
subtrees are skipped by id without being read.`,
		Example: `  art diff                      # what the last session changed
  art diff main attempt-1
  art diff HEAD~3 HEAD --stat
  art diff a b --name-status -- ws/src
  art diff a b --stat --json`,
		RunE: func(c *cobra.Command, args []string) error {
			revs, paths := args, []string(nil)
			if dash := c.ArgsLenAtDash(); dash >= 0 {
				revs, paths = args[:dash], args[dash:]
			}
			if len(revs) > 2 {
				return usageErr("diff takes at most two revisions, got %d (put paths after --)", len(revs))
			}
			for _, p := range paths {
				if err := checkDiffPath(p); err != nil {
					return err
				}
			}
			r, err := g.openRepo(dir)
			if err != nil {
				return err
			}
			defer r.Close()
			var from, to objects.ID
			switch len(revs) {
			case 0:
				if to, err = r.Resolve("HEAD"); err != nil {
					return err
				}
				cm, err := r.LoadCommit(to)
				if err != nil {
					return err
				}
				if len(cm.Parents) > 0 {
					from = cm.Parents[0]
				}
			case 1:
				if from, err = r.Resolve(revs[0]); err != nil {
					return err
				}
				if to, err = r.Resolve("HEAD"); err != nil {
					return err
				}
			case 2:
				if from, err = r.Resolve(revs[0]); err != nil {
					return err
				}
				if to, err = r.Resolve(revs[1]); err != nil {
					return err
				}
			}
			var fromTree, toTree objects.ID
			if !from.IsZero() {
				fc, err := r.LoadCommit(from)
				if err != nil {
					return err
				}
				fromTree = fc.Tree
			}
			tc, err := r.LoadCommit(to)
			if err != nil {
				return err
			}
			toTree = tc.Tree
			changes, err := r.DiffTrees(fromTree, toTree, paths)
			if err != nil {
				return err
			}
			// A path in neither commit matches nothing: said, as git
			// does, since silence reads as "no change".
			var prefix string
			if len(paths) > 0 { // a lookup in the repository: not for every diff
				prefix = workspacePrefix(r, g.defaultWorkspace(c, dir))
			}
			for _, p := range paths {
				if err := warnPathNowhere(g, r, p, prefix, fromTree, toTree); err != nil {
					return err
				}
			}
			pal := palette{colorOn(g.stdout)}
			switch {
			case asJSON && !stat && !nameStatus:
				return usageErr("--json goes with --stat or --name-status")
			case asJSON:
				return printStatJSON(g, r, changes)
			case nameStatus:
				for _, ch := range changes {
					fmt.Fprintf(g.stdout, "%s\t%s\n", ch.Status(), repo.QuotePath(ch.Path))
				}
				return nil
			case stat:
				return printStat(g, r, changes, pal)
			}
			return printPatches(g, r, changes, pal)
		},
	}
	c.Flags().BoolVar(&stat, "stat", false, "changed paths with line counts")
	c.Flags().BoolVar(&nameStatus, "name-status", false, "changed paths with A/M/D/T")
	c.Flags().BoolVar(&asJSON, "json", false, "machine-readable output (with --stat or --name-status)")
	c.Flags().StringVarP(&dir, "mount", "m", ".", "workspace directory (for repository discovery)")
	return c
}

// checkDiffPath refuses a path that can never match: trees hold no "."
// or ".." entries and no empty names, and paths are home-relative ("../etc",
// "./ws/f" and "ws/../ws/f" printed nothing, exit 0, like no change).
// Leading and trailing slashes are dropped, as before.
func checkDiffPath(p string) error {
	t := strings.Trim(p, "/")
	if t == "" {
		return nil // the whole home
	}
	for _, c := range strings.Split(t, "/") {
		if c == "" || c == "." || c == ".." {
			return usageErr("path %q: paths are relative to the home, like ws/file (as 'art diff --name-status' prints them), with no '.', '..' or empty components", p)
		}
	}
	return nil
}

// workspacePrefix is the home-relative path of the current directory in
// the workspace ws ("ws/" at its root, "ws/sub/" below), or of ws's root
// when the current directory is elsewhere; "" when ws is no workspace of
// r's.
func workspacePrefix(r *repo.Repo, ws string) string {
	abs, err := filepath.Abs(ws)
	if err != nil || !r.KnownWorkspace(abs) {
		return ""
	}
	name, err := repo.WorkspaceName(abs)
	if err != nil {
		return ""
	}
	prefix := name + "/"
	if cwd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(abs, cwd); err == nil && rel != "." && filepath.IsLocal(rel) {
			prefix += filepath.ToSlash(rel) + "/"
		}
	}
	return prefix
}

// warnPathNowhere warns when p names nothing in either tree. A path given
// relative to the workspace (as git takes it), which prefix would make one
// that exists, is named: 'art diff -- main.go' in the workspace warned
// only that main.go names nothing.
func warnPathNowhere(g *globals, r *repo.Repo, p, prefix string, trees ...objects.ID) error {
	t := strings.Trim(p, "/")
	if t == "" {
		return nil
	}
	in := func(t string) (bool, error) {
		for _, tree := range trees {
			if tree.IsZero() {
				continue
			}
			_, ok, err := r.Lookup(tree, strings.Split(t, "/"))
			if err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	}
	if ok, err := in(t); err != nil || ok {
		return err
	}
	if prefix != "" && !strings.HasPrefix(t+"/", prefix) {
		if ok, err := in(prefix + t); err != nil {
			return err
		} else if ok {
			fmt.Fprintf(g.stderr, "art: warning: %s names nothing in either commit; paths are relative to the home (/home/agent): did you mean %s?\n", repo.QuotePath(t), repo.QuotePath(prefix+t))
			return nil
		}
	}
	if ws, _, ok := strings.Cut(prefix, "/"); ok && !strings.HasPrefix(t+"/", ws+"/") {
		fmt.Fprintf(g.stderr, "art: warning: %s names nothing in either commit (paths are relative to the home, like %s, as 'art diff --name-status' prints them)\n", repo.QuotePath(t), repo.QuotePath(ws+"/file"))
		return nil
	}
	fmt.Fprintf(g.stderr, "art: warning: %s names nothing in either commit\n", repo.QuotePath(t))
	return nil
}

func printPatches(g *globals, r *repo.Repo, changes []repo.Change, pal palette) error {
	d := r.NewDiffer()
	// Content lines are the agent's bytes: on a terminal their control
	// characters are shown, not obeyed (git's pager, less, does the same).
	// Piped, they stay as they are, so that the patch applies.
	show := termText(g.stdout)
	for _, change := range changes {
		for _, ch := range change.Sides() {
			p, err := d.MakePatch(ch)
			if err != nil {
				return fmt.Errorf("diff %s: %w", ch.Path, err)
			}
			for _, h := range p.Header {
				fmt.Fprintln(g.stdout, pal.bold(h))
			}
			for _, h := range p.Hunks {
				for _, l := range strings.SplitAfter(h, "\n") {
					if l == "" {
						continue
					}
					text := show(strings.TrimSuffix(l, "\n"))
					switch l[0] {
					case '@':
						fmt.Fprint(g.stdout, pal.cyan(text)+"\n")
					case '+':
						fmt.Fprint(g.stdout, pal.green(text)+"\n")
					case '-':
						fmt.Fprint(g.stdout, pal.red(text)+"\n")
					default:
						fmt.Fprint(g.stdout, text+"\n")
					}
				}
			}
		}
	}
	return nil
}

type statJSON struct {
	Path      string `json:"path"`
	Status    string `json:"status"`
	Added     int    `json:"added"`
	Deleted   int    `json:"deleted"`
	Binary    bool   `json:"binary"`
	Directory bool   `json:"directory,omitempty"` // a directory's own change (mode, xattrs, made or removed empty)
}

func statsOf(r *repo.Repo, changes []repo.Change) ([]statJSON, error) {
	out := []statJSON{}
	d := r.NewDiffer()
	for _, ch := range changes {
		st := statJSON{Path: ch.Path, Status: ch.Status(), Directory: (ch.New == nil || ch.New.Type == objects.TypeDir) && (ch.Old == nil || ch.Old.Type == objects.TypeDir)}
		for _, side := range ch.Sides() {
			p, err := d.MakePatch(side)
			if err != nil {
				return nil, fmt.Errorf("diff %s: %w", ch.Path, err)
			}
			st.Added += p.Stat.Added
			st.Deleted += p.Stat.Deleted
			st.Binary = st.Binary || p.Binary
		}
		out = append(out, st)
	}
	return out, nil
}

func printStatJSON(g *globals, r *repo.Repo, changes []repo.Change) error {
	st, err := statsOf(r, changes)
	if err != nil {
		return err
	}
	for i := range st {
		st[i].Path = jsonName(st[i].Path)
	}
	return writeJSON(g.stdout, st)
}

func printStat(g *globals, r *repo.Repo, changes []repo.Change, pal palette) error {
	st, err := statsOf(r, changes)
	if err != nil {
		return err
	}
	width := 0
	for i := range st {
		st[i].Path = repo.QuotePath(st[i].Path) // text output only
		width = max(width, len(st[i].Path))
	}
	width = min(width, 60)
	add, del, dirs := 0, 0, 0
	for _, s := range st {
		add += s.Added
		del += s.Deleted
		if s.Directory {
			dirs++
		}
		if s.Binary {
			fmt.Fprintf(g.stdout, " %-*s | Bin\n", width, s.Path)
			continue
		}
		bar := pal.green(strings.Repeat("+", min(s.Added, 40))) + pal.red(strings.Repeat("-", min(s.Deleted, 40)))
		fmt.Fprintf(g.stdout, " %-*s | %5d %s\n", width, s.Path, s.Added+s.Deleted, bar)
	}
	what := plural(len(st)-dirs, "file", "files")
	switch {
	case dirs > 0 && len(st) == dirs:
		what = plural(dirs, "directory", "directories")
	case dirs > 0:
		what += " and " + plural(dirs, "directory", "directories")
	}
	fmt.Fprintf(g.stdout, " %s changed, %s, %s\n", what, plural(add, "insertion(+)", "insertions(+)"), plural(del, "deletion(-)", "deletions(-)"))
	return nil
}

// plural is "1 file" or "n files".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// visibleControls shows the control characters of s as less shows them,
// so that a terminal displays them instead of obeying them: C0 controls
// but tab as ^X (ESC as ^[), DEL as ^?, C1 controls as <U+009B>, and bytes
// that are not UTF-8 as <9B>. An agent's file or link target holding
// "\x1b]0;...\x07" or an OSC 52 clipboard write reached the terminal
// through art diff. Bidirectional overrides and isolates (U+202E) are
// shown as <U+202E> too: they make a line display in another order than
// it reads ("Trojan Source").
func visibleControls(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, "<%02X>", s[i])
		case r == '\t':
			b.WriteRune(r)
		case r < 0x20:
			b.WriteByte('^')
			b.WriteByte(byte(r) + 0x40)
		case r == 0x7f:
			b.WriteString("^?")
		case r >= 0x80 && r <= 0x9f, isBidiControl(r):
			fmt.Fprintf(&b, "<U+%04X>", r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isBidiControl reports whether r reorders the text around it: the
// embeddings and overrides U+202A–U+202E, the isolates U+2066–U+2069,
// and the marks U+200E, U+200F and U+061C.
func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}
