package repo

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/artproject/art/objects"
)

// A pull must not install, unreviewed, what git runs on the host: hooks,
// config settings that name commands, .git files pointing elsewhere. Each
// case pushes a base, then a change (what an agent's session commits),
// pulls the base back and pulls the change: the paths in flagged conflict
// and nothing is written; --force writes them. Changes git never runs go
// through.
func TestPullHoldsBackWhatGitRuns(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipping: git is not installed; the config cases need git to read configs as git does")
	}
	const cfg = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
	cases := []struct {
		name    string
		base    map[string]string
		change  map[string]string
		modes   map[string]os.FileMode // applied after writing the change
		bmodes  map[string]os.FileMode // applied before pushing the base
		links   map[string]string      // symlinks made with the change (path -> target)
		remove  []string               // removed before the change is made
		fresh   bool                   // pull into a new directory, not the synced workspace
		flagged []string               // substrings each expected in the conflicts, by path
		passed  []string               // substrings never in the conflicts
		// hostDir: what is flagged depends on where the workspace is on
		// the host (an absolute path to it), which GitRisks, reading
		// the commit alone, does not know: git run in a mount reads the
		// host's files there, not the commit's.
		hostDir bool
	}{
		{name: "executable hook added",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/hooks/post-checkout": "#!/bin/sh\necho pwned\n"},
			modes:   map[string]os.FileMode{".git/hooks/post-checkout": 0o755},
			flagged: []string{".git/hooks/post-checkout (a git hook"}},
		{name: "sample hooks added, executable as git init makes them (git never runs them)",
			base:   map[string]string{".git/config": cfg},
			change: map[string]string{".git/hooks/pre-commit.sample": "#!/bin/sh\n", ".git/hooks/lib/helper": "#!/bin/sh\n"},
			modes:  map[string]os.FileMode{".git/hooks/pre-commit.sample": 0o755, ".git/hooks/lib/helper": 0o755}},
		{name: "hooks directory replaced by a link",
			base:    map[string]string{".git/config": cfg, "tools/pre-commit": "#!/bin/sh\n"},
			links:   map[string]string{".git/hooks": "../tools"},
			flagged: []string{".git/hooks (a git hook"}},
		{name: "hook made executable",
			base:    map[string]string{".git/hooks/post-merge": "#!/bin/sh\necho hi\n"},
			modes:   map[string]os.FileMode{".git/hooks/post-merge": 0o755},
			flagged: []string{".git/hooks/post-merge (a git hook"}},
		{name: "hook as a link",
			base:    map[string]string{".git/config": cfg, "tools/run.sh": "#!/bin/sh\n"},
			links:   map[string]string{".git/hooks/pre-push": "../../tools/run.sh"},
			flagged: []string{".git/hooks/pre-push (a git hook"}},
		{name: "interrupted rebase with an exec line",
			base: map[string]string{".git/config": cfg},
			change: map[string]string{".git/rebase-merge/git-rebase-todo": "exec id > /tmp/pwned\n", ".git/rebase-merge/interactive": "",
				".git/rebase-merge/head-name": "refs/heads/main\n"},
			flagged: []string{".git/rebase-merge/git-rebase-todo (the state of an interrupted git rebase", ".git/rebase-merge/interactive (the state"}},
		{name: "cherry-pick sequence, and a rebase state as a link",
			base:    map[string]string{".git/config": cfg, "tools/todo": "exec id\n"},
			change:  map[string]string{".git/sequencer/todo": "exec id\n"},
			links:   map[string]string{".git/rebase-apply": "../tools"},
			flagged: []string{".git/sequencer/todo (the state of an interrupted", ".git/rebase-apply (a link in place of git's state"}},
		{name: "the user's own interrupted rebase, exported",
			base:   map[string]string{".git/config": cfg, ".git/rebase-merge/git-rebase-todo": "pick 123 x\n"},
			change: map[string]string{"new.txt": "the agent's work\n"},
			fresh:  true},
		{name: "a directory named like git's state outside a git directory",
			base:   map[string]string{"a": "a\n"},
			change: map[string]string{"docs/sequencer/todo": "plan\n"}},
		{name: "fsmonitor set",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/config": cfg + "\tfsmonitor = \"touch /tmp/x; false\"\n"},
			flagged: []string{".git/config (a git config that sets core.fsmonitor"}},
		{name: "alias and include set",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/config": cfg + "[alias]\n\tst = !sh -c id\n[include]\n\tpath = ../evil.cfg\n"},
			flagged: []string{"alias.st, include.path"}},
		{name: "the same setting spelled in another case",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/config": cfg + "[CORE]\n\tSshCommand = id\n"},
			flagged: []string{"core.sshcommand"}},
		{name: "identity and remote set (safe)",
			base:   map[string]string{".git/config": cfg},
			change: map[string]string{".git/config": cfg + "[user]\n\temail = agent@example.com\n[remote \"origin\"]\n\turl = https://example.com/x.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n"}},
		{name: "the user's own setting kept, a safe one added",
			base:   map[string]string{".git/config": cfg + "\thooksPath = /home/me/hooks\n"},
			change: map[string]string{".git/config": cfg + "\thooksPath = /home/me/hooks\n[user]\n\tname = agent\n"}},
		{name: "bare repository inside the workspace",
			base:    map[string]string{"vendor/x/HEAD": "ref: refs/heads/main\n", "vendor/x/objects/info/packs": "", "vendor/x/config": cfg},
			change:  map[string]string{"vendor/x/config": cfg + "\tfsmonitor = id\n", "vendor/x/hooks/post-update": "#!/bin/sh\n"},
			modes:   map[string]os.FileMode{"vendor/x/hooks/post-update": 0o755},
			flagged: []string{"vendor/x/config (a git config that sets core.fsmonitor", "vendor/x/hooks/post-update (a git hook"}},
		{name: "submodule's git directory",
			base:    map[string]string{".git/modules/lib/HEAD": "ref: refs/heads/main\n", ".git/modules/lib/objects/x": "", ".git/modules/lib/config": cfg},
			change:  map[string]string{".git/modules/lib/config": cfg + "\tpager = id\n"},
			flagged: []string{".git/modules/lib/config (a git config that sets core.pager"}},
		{name: ".git file pointing elsewhere",
			base:    map[string]string{"sub/a": "a\n"},
			change:  map[string]string{"sub/.git": "gitdir: ../evil\n"},
			flagged: []string{"sub/.git (a .git file or link"}},
		{name: "the user's own hook and config, exported",
			base:   map[string]string{".git/hooks/pre-commit": "#!/bin/sh\nmake lint\n", ".git/config": cfg + "\tfsmonitor = true\n"},
			bmodes: map[string]os.FileMode{".git/hooks/pre-commit": 0o755},
			change: map[string]string{"new.txt": "the agent's work\n"},
			fresh:  true},
		{name: "the user's own hook changed by the agent, exported",
			base:    map[string]string{".git/hooks/pre-commit": "#!/bin/sh\nmake lint\n"},
			change:  map[string]string{".git/hooks/pre-commit": "#!/bin/sh\nid\n"},
			modes:   map[string]os.FileMode{".git/hooks/pre-commit": 0o755},
			fresh:   true,
			flagged: []string{".git/hooks/pre-commit (a git hook"}},
		{name: "commondir sends git elsewhere",
			base:    map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/objects/x": "", ".git/config": cfg},
			change:  map[string]string{".git/commondir": "../evil\n", "evil/config": cfg + "\tfsmonitor = id\n"},
			links:   map[string]string{"evil/objects": "../.git/objects"},
			flagged: []string{".git/commondir (a git commondir file"}},
		{name: "git directory made of links",
			base:    map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/objects/x": "", ".git/refs/heads/main": "0\n"},
			change:  map[string]string{"x/HEAD": "ref: refs/heads/main\n", "x/config": cfg + "\tpager = id\n"},
			links:   map[string]string{"x/objects": "../.git/objects", "x/refs": "../.git/refs"},
			flagged: []string{"x/config (a git config that sets core.pager"}},
		{name: "names in another case (a case-insensitive target)",
			base:    map[string]string{"a": "a\n"},
			change:  map[string]string{".GIT/CONFIG": cfg + "\tfsmonitor = id\n", ".GIT/Hooks/post-checkout": "#!/bin/sh\n"},
			modes:   map[string]os.FileMode{".GIT/Hooks/post-checkout": 0o755},
			flagged: []string{".GIT/CONFIG (a git config", ".GIT/Hooks/post-checkout (a git hook"}},
		{name: "advice settings (inert)",
			base:   map[string]string{".git/modules/sm/HEAD": "ref: refs/heads/main\n", ".git/modules/sm/objects/x": "", ".git/modules/sm/config": cfg},
			change: map[string]string{".git/modules/sm/config": cfg + "[advice]\n\tdetachedHead = false\n"}},
		{name: "worktree elsewhere (git reset --hard then writes there)",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/config": cfg + "\tworktree = /root\n"},
			flagged: []string{".git/config (a git config that sets core.worktree"}},
		{name: "submodule added by the agent (git submodule add)",
			base: map[string]string{".git/config": cfg},
			change: map[string]string{".git/modules/sub/HEAD": "ref: refs/heads/main\n", ".git/modules/sub/objects/info/packs": "", "sub/x": "x\n",
				".git/modules/sub/config": cfg + "\tworktree = ../../../sub\n", "sub/.git": "gitdir: ../.git/modules/sub\n"}},
		{name: "submodule added with a hook in its git directory",
			base: map[string]string{".git/config": cfg},
			change: map[string]string{".git/modules/sub/HEAD": "ref: refs/heads/main\n", ".git/modules/sub/objects/info/packs": "", "sub/x": "x\n",
				".git/modules/sub/config": cfg + "\tworktree = ../../../sub\n", "sub/.git": "gitdir: ../.git/modules/sub\n",
				".git/modules/sub/hooks/post-checkout": "#!/bin/sh\nid\n"},
			modes:   map[string]os.FileMode{".git/modules/sub/hooks/post-checkout": 0o755},
			flagged: []string{".git/modules/sub/hooks/post-checkout (a git hook"},
			passed:  []string{"sub/.git (", "sub/config ("}},
		{name: ".git file pointing inside at no git directory",
			base:    map[string]string{"docs/a": "a\n"},
			change:  map[string]string{"sub/.git": "gitdir: ../docs\n"},
			flagged: []string{"sub/.git (a .git file or link"}},
		{name: ".git file pointing through a link",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/modules/sub/HEAD": "ref: refs/heads/main\n", ".git/modules/sub/objects/info/packs": "", "sub/x": "x\n"},
			links:   map[string]string{"via": ".git/modules", "sub/.git": "../via/sub"},
			flagged: []string{"sub/.git (a .git file or link"}},
		{name: ".git file whose path crosses a link",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/modules/sub/HEAD": "ref: refs/heads/main\n", ".git/modules/sub/objects/info/packs": "", "sub/x": "x\n", "sub/.git": "gitdir: ../via/sub\n"},
			links:   map[string]string{"via": ".git/modules"},
			flagged: []string{"sub/.git (a .git file or link"}},
		{name: ".git file leaving the workspace",
			base:    map[string]string{"sub/a": "a\n"},
			change:  map[string]string{"sub/.git": "gitdir: ../../ws/.git\n"},
			flagged: []string{"sub/.git (a .git file or link"}},
		{name: "worktree through a link that .. cancels on paper",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/config": cfg + "\tworktree = ../wl/..\n"},
			links:   map[string]string{"wl": "/root/.cache"},
			flagged: []string{".git/config (a git config that sets core.worktree"}},
		{name: ".git file through a link that .. cancels on paper",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/modules/sub/HEAD": "ref: refs/heads/main\n", ".git/modules/sub/objects/info/packs": "", "sub/x": "x\n", "sub/.git": "gitdir: ../l/../.git/modules/sub\n"},
			links:   map[string]string{"l": "/tmp"},
			flagged: []string{"sub/.git (a .git file or link"}},
		{name: "worktree leaving the workspace by a relative path",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/config": cfg + "\tworktree = ../..\n"},
			flagged: []string{".git/config (a git config that sets core.worktree"}},
		{name: "worktree through a link",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/config": cfg + "\tworktree = ../out\n"},
			links:   map[string]string{"out": "/root"},
			flagged: []string{".git/config (a git config that sets core.worktree"}},
		{name: "submodule's worktree, with another setting",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/modules/sub/HEAD": "ref: refs/heads/main\n", ".git/modules/sub/objects/info/packs": "", "sub/x": "x\n", "sub/.git": "gitdir: ../.git/modules/sub\n", ".git/modules/sub/config": cfg + "\tworktree = ../../../sub\n\tpager = id\n"},
			flagged: []string{".git/modules/sub/config (a git config that sets core.pager,"},
			passed:  []string{"core.worktree"}},
		{name: "worktree in a plain directory (no .git file leading back)",
			base:    map[string]string{".git/config": cfg, "src/a": "a\n"},
			change:  map[string]string{".git/config": cfg + "\tworktree = ../src\n"},
			flagged: []string{".git/config (a git config that sets core.worktree"}},
		{name: "worktree in the git directory's hooks (git reset --hard writes them)",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/config": cfg + "\tworktree = hooks\n", ".git/hooks/.git": "gitdir: ..\n"},
			flagged: []string{".git/config (a git config that sets core.worktree"}},
		{name: "worktree is the git directory itself",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/config": cfg + "\tworktree = .\n"},
			flagged: []string{".git/config (a git config that sets core.worktree"}},
		{name: "submodule worktree whose .git file leads to another git directory",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/modules/sub/HEAD": "ref: refs/heads/main\n", ".git/modules/sub/objects/info/packs": "", "sub/x": "x\n", "sub/.git": "gitdir: ../.git\n", ".git/modules/sub/config": cfg + "\tworktree = ../../../sub\n"},
			flagged: []string{".git/modules/sub/config (a git config that sets core.worktree"}},
		{name: "hook in the core.hooksPath directory",
			base:    map[string]string{".git/config": cfg + "\thooksPath = .githooks\n", ".githooks/README": "hooks\n"},
			change:  map[string]string{".githooks/pre-commit": "#!/bin/sh\nid\n"},
			modes:   map[string]os.FileMode{".githooks/pre-commit": 0o755},
			flagged: []string{".githooks/pre-commit (a git hook"}},
		{name: "hook in a core.hooksPath directory named by its absolute path",
			base:    map[string]string{".git/config": cfg + "\thooksPath = $WS/tools/hooks\n", "tools/hooks/README": "hooks\n"},
			change:  map[string]string{"tools/hooks/post-merge": "#!/bin/sh\nid\n"},
			modes:   map[string]os.FileMode{"tools/hooks/post-merge": 0o755},
			flagged: []string{"tools/hooks/post-merge (a git hook"},
			hostDir: true},
		{name: "config too large to check",
			base:    map[string]string{".git/config": cfg},
			change:  map[string]string{".git/config": cfg + "# " + strings.Repeat("x", maxGitConfig) + "\n"},
			flagged: []string{".git/config (a git config too large to check"}},
		{name: "the user's own hook in the core.hooksPath directory",
			base:   map[string]string{".git/config": cfg + "\thooksPath = .githooks\n", ".githooks/pre-commit": "#!/bin/sh\nmake lint\n"},
			bmodes: map[string]os.FileMode{".githooks/pre-commit": 0o755},
			change: map[string]string{"work.txt": "done\n"}},
		{name: "config replaced by a link",
			base:    map[string]string{".git/config": cfg, "evil.cfg": cfg + "\tfsmonitor = id\n"},
			remove:  []string{".git/config"},
			links:   map[string]string{".git/config": "../evil.cfg"},
			flagged: []string{".git/config (a git config that is not a regular file"}},
		{name: "branch named config (refs are no config)",
			base:   map[string]string{".git/config": cfg},
			change: map[string]string{".git/refs/heads/config": "0123456789012345678901234567890123456789\n"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, withWS(c.base, ws))
			for p, m := range c.bmodes {
				if err := os.Chmod(filepath.Join(ws, p), m); err != nil {
					t.Fatal(err)
				}
			}
			base := push(t, r, ws, "base").Commit
			for _, p := range c.remove {
				if err := os.Remove(filepath.Join(ws, p)); err != nil {
					t.Fatal(err)
				}
			}
			writeFiles(t, ws, withWS(c.change, ws))
			for p, m := range c.modes {
				if err := os.Chmod(filepath.Join(ws, p), m); err != nil {
					t.Fatal(err)
				}
			}
			for p, target := range c.links {
				os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755)
				if err := os.Symlink(target, filepath.Join(ws, p)); err != nil {
					t.Fatal(err)
				}
			}
			// The change as an agent's session records it: its tree, on
			// top of the base, made by no push.
			change := sessionCommit(t, r, push(t, r, ws, "as the agent left it").Commit, base)
			if c.fresh {
				ws = filepath.Join(t.TempDir(), "ws") // an export
				if err := os.Mkdir(ws, 0o755); err != nil {
					t.Fatal(err)
				}
			} else if _, err := r.Pull(PullOptions{Dir: ws, Commit: base, Force: true}); err != nil {
				t.Fatal(err)
			}
			// art mount warns of the same, reading the commit alone.
			risks, err := r.GitRisks(change, "ws")
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(risks, "\n"); len(c.flagged) == 0 && got != "" {
				t.Errorf("GitRisks of a change git never runs: %s", got)
			}
			for _, f := range c.flagged {
				if !c.hostDir && !strings.Contains(strings.Join(risks, "\n"), f) {
					t.Errorf("GitRisks %q does not hold %q", risks, f)
				}
			}
			if risks, err := r.GitRisks(base, "ws"); err != nil || len(risks) != 0 {
				t.Errorf("GitRisks of what the user pushed: %q, %v", risks, err)
			}
			before := snapshot(t, ws)
			res, err := r.Pull(PullOptions{Dir: ws, Commit: change})
			if len(c.flagged) == 0 {
				if err != nil {
					t.Fatalf("a change git never runs was held back: %v", err)
				}
				return
			}
			mustFail(t, err, ErrConflict)
			for _, f := range c.flagged {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("the conflicts do not hold %q:\n%v", f, err)
				}
			}
			for _, f := range c.passed {
				if strings.Contains(err.Error(), f) {
					t.Errorf("the conflicts hold %q:\n%v", f, err)
				}
			}
			if !strings.Contains(err.Error(), "--force") {
				t.Errorf("the message does not say how to accept them: %v", err)
			}
			if res == nil || len(res.Conflicts) == 0 {
				t.Errorf("no conflicts reported: %+v", res)
			}
			if d := diffMaps(before, snapshot(t, ws)); d != "" {
				t.Fatalf("a refused pull changed the host:\n%s", d)
			}
			// Reviewed: --force writes them.
			if _, err := r.Pull(PullOptions{Dir: ws, Commit: change, Force: true}); err != nil {
				t.Fatalf("forced pull: %v", err)
			}
		})
	}
}

func TestConfigKey(t *testing.T) {
	for in, want := range map[string]string{
		"core.fsmonitor":            "core.fsmonitor",
		"remote.origin.url":         "remote.*.url",
		"remote.a.b.c.url":          "remote.*.url",
		"includeif.gitdir:/x/.path": "includeif.*.path",
		"nodot":                     "nodot",
	} {
		if got := configKey(in); got != want {
			t.Errorf("configKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// Where git cannot read a config (git missing, or the file broken), any
// change to it is held back: it cannot be checked.
func TestUnsafeGitSettingsUnreadable(t *testing.T) {
	const good = "[user]\n\tname = a\n"
	if _, err := exec.LookPath("git"); err == nil {
		if got := unsafeGitSettings([]byte(good), nil, nil); len(got) != 0 {
			t.Errorf("a safe config: %v", got)
		}
		if got := unsafeGitSettings([]byte("[user\n\tname = a\n"), nil, nil); len(got) != 1 || !strings.Contains(got[0], "could not read") {
			t.Errorf("a config git refuses: %v", got)
		}
	}
	t.Setenv("PATH", t.TempDir())
	if got := unsafeGitSettings([]byte(good), nil, nil); len(got) != 1 || !strings.Contains(got[0], "could not read") {
		t.Errorf("without git: %v", got)
	}
	if got := unsafeGitSettings(nil, nil, nil); len(got) != 0 {
		t.Errorf("an empty config without git: %v", got)
	}
}

// sessionCommit records tree's commit's tree as a session commit (not a
// push) on top of parent, as art run does.
func sessionCommit(t *testing.T, r *Repo, of, parent objects.ID) objects.ID {
	t.Helper()
	c, err := r.LoadCommit(of)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	id, err := tx.PutCommit(&objects.Commit{Tree: c.Tree, Parents: []objects.ID{parent}, Time: c.Time + 1, Author: "agent", Message: "run: agent", Session: &objects.Session{Mode: "run", Argv: []string{"agent"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return id
}

// withWS returns files with "$WS" in their contents replaced by ws.
func withWS(files map[string]string, ws string) map[string]string {
	out := make(map[string]string, len(files))
	for p, c := range files {
		out[p] = strings.ReplaceAll(c, "$WS", ws)
	}
	return out
}

// How git packs is inert and pulls without review; how long gc keeps
// what the user could still recover is not.
func TestPackSettingsInert(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipping: git not installed")
	}
	tests := []struct {
		cfg  string
		want []string
	}{
		{"[pack]\n\tthreads = 1\n\twindow = 250\n\tdepth = 50\n\twindowMemory = 1g\n[gc]\n\taggressiveWindow = 250\n\tautoPackLimit = 0\n[core]\n\tpackedGitLimit = 1g\n\tdeltaBaseCacheSize = 96m\n", nil},
		{"[gc]\n\tpruneExpire = now\n\treflogExpire = now\n", []string{"gc.pruneexpire", "gc.reflogexpire"}},
	}
	for _, tc := range tests {
		if got := unsafeGitSettings([]byte(tc.cfg), nil, nil); !slices.Equal(got, tc.want) {
			t.Errorf("%q: held back %q, want %q", tc.cfg, got, tc.want)
		}
	}
}
