package repo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/artproject/art/objects"
)

// Some files in a workspace are code the host runs: git runs a repository's
// hooks, and commands its config names (core.fsmonitor on every git
// status, core.sshCommand, filter drivers, aliases starting with '!',
// include.path pulling in any other file, and many more). An agent can
// write them like any file, and a pull would install them where the user
// then runs git, outside the sandbox, unseen (git diff does not show
// .git). So pull treats writing them as a conflict, which --force accepts
// once the user has reviewed them (art diff shows them):
//
//   - in a git directory (one named .git, or holding HEAD and objects or
//     commondir: a bare repository, a submodule's or a worktree's), a
//     config or config.worktree that gains a setting outside
//     safeGitConfig, and an executable file or symbolic link created or
//     made executable in hooks/ (or a link in place of hooks/), under a
//     name git may run (no dot: git init's *.sample files are executable);
//   - in a git directory, a file written into the state of an interrupted
//     rebase, am, cherry-pick or revert (rebase-merge/, rebase-apply/,
//     sequencer/): git rebase --continue runs the to-do list's exec lines;
//   - a .git file or link (it sends git to another directory), unless a
//     file that leads to a git directory inside the workspace, which is
//     checked itself (git submodule add writes one); core.worktree, in
//     the same way, may name a directory inside the workspace.
//
// What the host itself had is no news: an entry as the workspace's last
// art push stored it (in the pulled commit's nearest ancestor made by a
// push; an agent cannot make one) is written without review, and a config
// counts only the settings it gains over that and over the host's file.
// Settings are read by git itself (git config --file - --list), so that
// what is checked is exactly what git would run; where git is missing,
// any change to such a config counts.

// looksLikeGitDir reports whether a stored directory is a git directory:
// named .git, or holding HEAD and objects, refs or commondir, of any type
// (git accepts links, and checks only that it may search them). Names
// match in any case: on a case-insensitive target, .GIT/CONFIG is
// .git/config.
func looksLikeGitDir(name string, t *objects.Tree) bool {
	if strings.EqualFold(name, ".git") {
		return true
	}
	var head, store bool
	for _, e := range t.Entries {
		switch {
		case strings.EqualFold(e.Name, "HEAD"):
			head = true
		case strings.EqualFold(e.Name, "objects"), strings.EqualFold(e.Name, "refs"), strings.EqualFold(e.Name, "commondir"):
			store = true
		}
	}
	return head && store
}

// isName reports whether name is one of names, in any case.
func isName(name string, names ...string) bool {
	for _, n := range names {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}

// safeGitConfig lists the settings git never turns into a command nor a
// place outside the workspace to write (core.worktree is one such place:
// an agent's core.worktree=$HOME had the user's next git reset --hard
// write the agent's .bashrc there): keys
// as git config --list prints them (lower case section and key, the
// subsection, if any, as "*"). How git packs (pack.threads, the window
// and depth of gc --aggressive) is inert; how long gc keeps unreachable
// objects and reflogs (gc.pruneexpire, gc.reflogexpire) is not listed:
// an agent's "now" would have the user's next git gc drop what they
// could otherwise recover.
var safeGitConfig = wordSet(`
core.repositoryformatversion core.filemode core.bare core.logallrefupdates
core.ignorecase core.precomposeunicode core.symlinks core.autocrlf core.eol
core.safecrlf core.quotepath core.compression core.bigfilethreshold
core.checkstat core.trustctime core.untrackedcache core.splitindex
core.commitgraph core.multipackindex core.sparsecheckout
core.sparsecheckoutcone core.abbrev core.whitespace
user.name user.email user.signingkey author.name author.email
committer.name committer.email
remote.*.url remote.*.pushurl remote.*.fetch remote.*.push remote.*.mirror
remote.*.prune remote.*.tagopt remote.*.skipfetchall
branch.*.remote branch.*.merge branch.*.rebase branch.*.pushremote
branch.*.description
submodule.*.url submodule.*.active submodule.*.branch
init.defaultbranch pull.rebase pull.ff push.default push.autosetupremote
fetch.prune fetch.prunetags merge.ff merge.conflictstyle rebase.autosquash
rebase.autostash rerere.enabled gc.auto commit.gpgsign tag.gpgsign
extensions.objectformat extensions.worktreeconfig extensions.refstorage
extensions.preciousobjects
color.ui diff.renames diff.algorithm diff.colormoved diff.mnemonicprefix
diff.noprefix diff.renamelimit diff.indentheuristic status.showuntrackedfiles
log.date advice.detachedhead index.version feature.manyfiles
maintenance.auto maintenance.strategy index.sparse
pack.threads pack.window pack.depth pack.windowmemory pack.compression
pack.deltacachesize pack.deltacachelimit pack.packsizelimit pack.usebitmaps
pack.writebitmaphashcache pack.writereverseindex repack.writebitmaps
repack.usedeltabaseoffset gc.aggressivewindow gc.aggressivedepth
gc.autopacklimit gc.autodetach core.packedgitwindowsize core.packedgitlimit
core.deltabasecachesize core.loosecompression`)

// safeGitSections are sections all of whose settings are inert.
var safeGitSections = wordSet(`advice color user author committer`)

// wordSet is the set of the words of s.
func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// configKey turns a key as git config --list prints it
// ("remote.origin.url") into its safeGitConfig form ("remote.*.url").
func configKey(k string) string {
	first := strings.IndexByte(k, '.')
	last := strings.LastIndexByte(k, '.')
	if first < 0 || first == last {
		return k
	}
	return k[:first] + ".*" + k[last:]
}

// gitConfigEntries lists the settings of a git config file as git reads
// it, one "key=value" each; ok is false when git is missing, or refuses
// the file (git then refuses to run with it too, but it is not what the
// user had).
func gitConfigEntries(data []byte) (entries []string, ok bool) {
	if len(data) == 0 {
		return nil, true
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// --file - reads the config from stdin; includes are not followed
	// (and are themselves settings outside safeGitConfig).
	c := exec.CommandContext(ctx, git, "config", "--file", "-", "--no-includes", "--list", "--null")
	c.Stdin = bytes.NewReader(data)
	c.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent", "PATH=/usr/bin:/bin"}
	c.Dir = "/"
	out, err := c.Output()
	if err != nil {
		return nil, false
	}
	for _, kv := range strings.Split(string(out), "\x00") {
		if kv == "" {
			continue
		}
		// --null prints "key\nvalue" (or "key" alone for a bare boolean).
		k, v, _ := strings.Cut(kv, "\n")
		entries = append(entries, strings.ToLower(k)+"="+v)
	}
	return entries, true
}

// unsafeGitSettings returns the keys that a config gains outside
// safeGitConfig when its content goes from any of olds to new (sorted,
// each once), or, when git cannot read them, a word saying so. allow, if
// not nil, may accept a setting by its value.
func unsafeGitSettings(new []byte, allow func(key, value string) bool, olds ...[]byte) []string {
	newEntries, ok := gitConfigEntries(new)
	if !ok {
		return []string{"settings git could not read here"}
	}
	had := map[string]bool{}
	for _, old := range olds {
		oldEntries, ok := gitConfigEntries(old)
		if !ok {
			return []string{"settings git could not read here"}
		}
		for _, e := range oldEntries {
			had[e] = true
		}
	}
	seen := map[string]bool{}
	var keys []string
	for _, e := range newEntries {
		k, v, _ := strings.Cut(e, "=")
		section, _, _ := strings.Cut(k, ".")
		if had[e] || safeGitConfig[configKey(k)] || safeGitSections[section] || seen[k] || allow != nil && allow(k, v) {
			continue
		}
		seen[k] = true
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// maxGitConfig bounds the config read for the check; a larger one counts
// as unreadable.
const maxGitConfig = 1 << 20

// gitConfigRisk returns why writing stored entry e over the host's config
// at rel (absent: h nil) needs the user's review, or "" when it does not.
func (p *puller) gitConfigRisk(rel string, e *objects.Entry, h *hostEntry) (string, error) {
	if e.Type != objects.TypeFile {
		if p.asPushed(rel, e) {
			return "", nil
		}
		return "a git config that is not a regular file", nil
	}
	if e.Size > maxGitConfig {
		return "a git config too large to check", nil
	}
	data, err := p.r.ReadFile(e.ID, int64(e.Size))
	if err != nil {
		return "", fmt.Errorf("pull: read %s from the commit: %w", rel, err)
	}
	var old []byte
	if h != nil && h.typ == objects.TypeFile && h.size <= maxGitConfig {
		root, err := openHostRoot(p.dir)
		if err == nil {
			if f, err := root.open(rel, h.ino); err == nil {
				old, _ = io.ReadAll(io.LimitReader(f, maxGitConfig))
				f.Close()
			}
			root.close()
		}
	}
	olds := [][]byte{old}
	if e, ok, err := p.pushedEntry(rel); err != nil {
		return "", err
	} else if ok && e.Type == objects.TypeFile && e.Size <= maxGitConfig {
		pushed, err := p.r.ReadFile(e.ID, int64(e.Size))
		if err != nil {
			return "", fmt.Errorf("pull: read %s as last pushed: %w", rel, err)
		}
		olds = append(olds, pushed)
	}
	// core.worktree as git submodule add sets it (../../../sub, from
	// .git/modules/sub) points at a directory of the workspace: allowed
	// when the commit holds it as a real directory at every step.
	gitDir := path.Dir(rel)
	var inside error
	allow := func(key, value string) bool {
		if key != "core.worktree" {
			return false
		}
		ok, err := p.submoduleWorktree(gitDir, value)
		if err != nil {
			inside = err
		}
		return ok
	}
	keys := unsafeGitSettings(data, allow, olds...)
	if inside != nil {
		return "", inside
	}
	if len(keys) == 0 {
		return "", nil
	}
	if len(keys) > 5 {
		keys = append(keys[:5], "…")
	}
	return "a git config that sets " + strings.Join(keys, ", ") + ", with which git may run commands, or write outside the workspace, on this host", nil
}

// checkGitRisk records a conflict when writing kid, an entry of n (a git
// directory when gitDir), would install code git runs on the host.
func (p *puller) checkGitRisk(gitDir bool, n, kid *pullNode) error {
	e, h := kid.stored, kid.host
	why := ""
	switch {
	case isName(e.Name, ".git") && e.Type != objects.TypeDir:
		if kid.op == opWrite && !p.asPushed(kid.rel, e) {
			inside, err := p.gitFileInside(kid.rel, e)
			if err != nil {
				return err
			}
			if !inside {
				why = "a .git file or link, which sends git to another directory"
			}
		}
	case gitDir && isName(e.Name, "commondir", "gitdir"):
		if kid.op == opWrite && !p.asPushed(kid.rel, e) {
			why = "a git " + e.Name + " file, which sends git to another directory for its config and hooks"
		}
	case gitDir && e.Type != objects.TypeDir && isName(e.Name, "config", "config.worktree"):
		if kid.op == opWrite {
			var err error
			if why, err = p.gitConfigRisk(kid.rel, e, h); err != nil {
				return err
			}
		}
	case gitDir && isName(e.Name, gitStateDirs...):
		// An interrupted rebase's to-do list may hold exec lines, which
		// git rebase --continue runs (an agent's one ran as the user who
		// continued it); it is never the host's own unless pushed.
		if e.Type == objects.TypeDir {
			kid.gitState = true
		} else if kid.op == opWrite && !p.asPushed(kid.rel, e) {
			why = "a link in place of git's state of an interrupted rebase or cherry-pick"
		}
	case n.gitState:
		if e.Type == objects.TypeDir {
			kid.gitState = true
		}
		if kid.op == opWrite && !p.asPushed(kid.rel, e) {
			why = "the state of an interrupted git rebase or cherry-pick, whose to-do list git runs when it is continued (exec lines are commands on this host)"
		}
	case e.Type == objects.TypeDir && (gitDir && isName(e.Name, "hooks") || p.hooksDirs[kid.rel]):
		kid.hooks = true
	case n.hooks && e.Type != objects.TypeDir && !strings.Contains(e.Name, "."), gitDir && isName(e.Name, "hooks"), p.hooksDirs[kid.rel]:
		// git runs hooks/NAME for a fixed list of names, none with a
		// dot (git init's own *.sample files are executable and never
		// run); below a link named hooks, anything may be.
		runs := e.Type == objects.TypeSymlink || e.Type == objects.TypeFile && e.Mode&0o111 != 0
		madeRunnable := kid.op == opKeep && h != nil && h.typ == objects.TypeFile && h.mode&0o111 == 0
		if runs && (kid.op == opWrite || madeRunnable) {
			if !p.asPushed(kid.rel, e) {
				why = "a git hook, which git runs as a command on this host"
			}
		}
	}
	if why != "" {
		p.conflict(kid.rel, why+"; review it (art diff), then pull with --force")
		p.gitRisks = append(p.gitRisks, QuotePath(kid.rel)+" ("+why+")")
		if p.riskConflicts == nil {
			p.riskConflicts = map[string]bool{}
		}
		p.riskConflicts[p.conflicts[len(p.conflicts)-1]] = true
	}
	return nil
}

// GitRisks lists what pull would hold back in workspace ws of commit as
// something git runs on the host (hooks, config settings, .git files
// leading elsewhere), as if pulled into an empty directory: art mount
// serves a commit's tree, an agent's git config and hooks included, where
// the user may run git. Paths are workspace-relative and quoted.
func (r *Repo) GitRisks(commit objects.ID, ws string) ([]string, error) {
	c, err := r.LoadCommit(commit)
	if err != nil {
		return nil, err
	}
	e, ok, err := r.Lookup(c.Tree, []string{ws})
	if err != nil || !ok || e.Type != objects.TypeDir {
		return nil, err
	}
	p := &puller{r: r, ws: ws, commit: commit, wsTree: e.ID, sc: &scanner{}, host: map[string]*hostEntry{}, touched: map[uint64]int{}, risksOnly: true}
	if a, ok, err := p.pushedEntry(""); err != nil || ok && a.ID == e.ID {
		return nil, err // as the last push stored it: the user's own
	}
	if err := p.findHooksPaths(e.ID); err != nil {
		return nil, err
	}
	if err := p.plan(&pullNode{stored: &e, op: opKeep}); err != nil {
		return nil, fmt.Errorf("check %s for what git runs: %w", ws, err)
	}
	return p.gitRisks, nil
}

// gitStateDirs are where git keeps an interrupted rebase, am, cherry-pick
// or revert, which a later git command continues from its to-do list.
var gitStateDirs = []string{"rebase-merge", "rebase-apply", "sequencer"}

// maxGitFile bounds the .git file read to find where it points.
const maxGitFile = 4096

// gitFileInside reports whether a stored .git entry at rel is a file that
// sends git to a git directory the pulled commit holds inside the
// workspace, as git submodule add writes it ("gitdir: ../.git/modules/
// sub"): that directory's config and hooks are then checked like any git
// directory's, so the file sends git nowhere unchecked.
func (p *puller) gitFileInside(rel string, e *objects.Entry) (bool, error) {
	dir, _, ok, err := p.gitFileTarget(rel, e)
	if err != nil || !ok {
		return false, err
	}
	t, err := p.r.LoadTree(dir.ID)
	if err != nil {
		return false, fmt.Errorf("pull: read the directory %s leads to from the commit: %w", rel, err)
	}
	return looksLikeGitDir(dir.Name, t), nil
}

// gitFileTarget reads the stored .git file e at rel ("gitdir: PATH", its
// line ending trimmed, as git reads it) and resolves PATH as resolveDir
// does; ok is false for anything else (a link, a large file, another
// content, a path leaving the workspace or crossing a link).
func (p *puller) gitFileTarget(rel string, e *objects.Entry) (dir objects.Entry, at []string, ok bool, err error) {
	if e.Type != objects.TypeFile || e.Size > maxGitFile {
		return dir, nil, false, nil
	}
	data, err := p.r.ReadFile(e.ID, int64(e.Size))
	if err != nil {
		return dir, nil, false, fmt.Errorf("pull: read %s from the commit: %w", rel, err)
	}
	target, ok := strings.CutPrefix(strings.TrimRight(string(data), "\r\n"), "gitdir: ")
	if !ok || strings.ContainsAny(target, "\r\n") {
		return dir, nil, false, nil
	}
	return p.resolveDir(path.Dir(rel), target)
}

// submoduleWorktree reports whether core.worktree value, in the config of
// git directory gitDir, names what git submodule add makes it name: a
// directory of the workspace whose .git file leads back to gitDir, and
// which is neither a git directory nor inside one. Any other directory of
// the commit would do for git (.git/hooks, say, with the hooks then in
// the agent's commit, written there by the user's next git reset --hard).
func (p *puller) submoduleWorktree(gitDir, value string) (bool, error) {
	_, at, ok, err := p.resolveDir(gitDir, value)
	if err != nil || !ok || len(at) == 0 {
		return false, err
	}
	for i := range at {
		e, _, err := p.r.Lookup(p.wsTree, at[:i+1])
		if err != nil {
			return false, fmt.Errorf("pull: look up %s in the commit: %w", strings.Join(at[:i+1], "/"), err)
		}
		t, err := p.r.LoadTree(e.ID)
		if err != nil {
			return false, fmt.Errorf("pull: read %s from the commit: %w", strings.Join(at[:i+1], "/"), err)
		}
		if looksLikeGitDir(at[i], t) {
			return false, nil
		}
	}
	gf, found, err := p.r.Lookup(p.wsTree, append(at[:len(at):len(at)], ".git"))
	if err != nil || !found {
		return false, err
	}
	_, back, ok, err := p.gitFileTarget(strings.Join(at, "/")+"/.git", &gf)
	if err != nil || !ok {
		return false, err
	}
	return strings.Join(back, "/") == gitDir, nil
}

// resolveDir resolves target, a path git reads in a file of directory
// from (both workspace-relative), to the directory of the pulled commit it
// names, and its path (nil: the workspace itself): ok only for a relative
// path that stays inside the workspace and crosses a real directory of
// the commit at every step (never a link, which could lead anywhere on
// the host).
func (p *puller) resolveDir(from, target string) (dir objects.Entry, at []string, ok bool, err error) {
	if target == "" || path.IsAbs(target) || strings.ContainsRune(target, '\\') {
		return dir, nil, false, nil
	}
	// Step by step, as the kernel resolves it: every name entered must be
	// a real directory of the commit, even one a later ".." leaves (a
	// link then "..", l/.., is the link's target's parent, anywhere).
	if from != "." && from != "" {
		at = strings.Split(from, "/")
	}
	dir = objects.Entry{Type: objects.TypeDir, ID: p.wsTree}
	for _, name := range strings.Split(target, "/") {
		switch name {
		case "", ".":
			continue
		case "..":
			if len(at) == 0 {
				return dir, nil, false, nil // above the workspace
			}
			at = at[:len(at)-1]
		default:
			at = append(at, name)
		}
		if len(at) == 0 {
			dir = objects.Entry{Type: objects.TypeDir, ID: p.wsTree}
			continue
		}
		e, found, err := p.r.Lookup(p.wsTree, at)
		if err != nil {
			return dir, nil, false, fmt.Errorf("pull: look up %s in the commit: %w", strings.Join(at, "/"), err)
		}
		if !found || e.Type != objects.TypeDir {
			return dir, nil, false, nil
		}
		dir = e
	}
	return dir, at, true, nil
}

// asPushed reports whether the stored entry at rel is as the workspace's
// last push stored it: the same type, content or target, and executable
// bits. An error reading the history counts as no.
func (p *puller) asPushed(rel string, e *objects.Entry) bool {
	a, ok, err := p.pushedEntry(rel)
	return err == nil && ok && a.Type == e.Type && a.ID == e.ID && a.Target == e.Target && a.Mode&0o111 == e.Mode&0o111
}

// findHooksPaths records the directories inside the workspace that the
// workspace's git config, as the host has it or as the commit does,
// names in core.hooksPath (relative paths are relative to the workspace):
// git runs hooks from there instead (husky, lefthook, a .githooks
// directory), so checkGitRisk treats them as hooks directories.
func (p *puller) findHooksPaths(ws objects.ID) error {
	p.hooksDirs = map[string]bool{}
	var configs [][]byte
	if e, ok, err := p.r.Lookup(ws, []string{".git", "config"}); err != nil {
		return err
	} else if ok && e.Type == objects.TypeFile && e.Size <= maxGitConfig {
		data, err := p.r.ReadFile(e.ID, int64(e.Size))
		if err != nil {
			return fmt.Errorf("pull: read .git/config from the commit: %w", err)
		}
		configs = append(configs, data)
	}
	if h := p.host[".git/config"]; h != nil && h.typ == objects.TypeFile {
		if root, err := openHostRoot(p.dir); err == nil {
			if f, err := root.open(".git/config", h.ino); err == nil {
				data, _ := io.ReadAll(io.LimitReader(f, maxGitConfig))
				f.Close()
				configs = append(configs, data)
			}
			root.close()
		}
	}
	for _, data := range configs {
		entries, _ := gitConfigEntries(data)
		for _, kv := range entries {
			k, v, _ := strings.Cut(kv, "=")
			if k != "core.hookspath" || v == "" {
				continue
			}
			if filepath.IsAbs(v) {
				rel, err := filepath.Rel(p.dir, v)
				if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
					continue // outside the workspace: not pull's to write
				}
				v = rel
			}
			p.hooksDirs[path.Clean(filepath.ToSlash(v))] = true
		}
	}
	return nil
}

// maxPushSearch bounds the walk back to the last push.
const maxPushSearch = 10000

// pushedEntry returns the entry at rel (workspace-relative) as the
// workspace's last art push stored it: in the pulled commit or its
// nearest first-parent ancestor made by a push of this workspace.
func (p *puller) pushedEntry(rel string) (objects.Entry, bool, error) {
	if !p.pushedDone {
		p.pushedDone = true
		id := p.commit
		for i := 0; i < maxPushSearch && !id.IsZero(); i++ {
			c, err := p.r.LoadCommit(id)
			if err != nil {
				return objects.Entry{}, false, fmt.Errorf("pull: find the last push: %w", err)
			}
			if s := c.Session; s != nil && s.Mode == "push" && s.Status != PushMerged && s.Workspace == p.ws {
				ws, ok, err := p.r.Lookup(c.Tree, []string{p.ws})
				if err != nil {
					return objects.Entry{}, false, fmt.Errorf("pull: find the last push: %w", err)
				}
				if ok && ws.Type == objects.TypeDir {
					p.pushed = ws.ID
				}
				break
			}
			if len(c.Parents) == 0 {
				break
			}
			id = c.Parents[0]
		}
	}
	if p.pushed.IsZero() {
		return objects.Entry{}, false, nil
	}
	if rel == "" {
		return objects.Entry{Name: p.ws, Type: objects.TypeDir, ID: p.pushed}, true, nil
	}
	e, ok, err := p.r.Lookup(p.pushed, strings.Split(rel, "/"))
	if err != nil {
		return objects.Entry{}, false, fmt.Errorf("pull: read %s as last pushed: %w", rel, err)
	}
	return e, ok, nil
}
