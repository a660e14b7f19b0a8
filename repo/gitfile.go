package repo

import (
	"fmt"
	"path"
	"strings"

	"github.com/artproject/art/objects"
)

// OutsideGitDir reports where the workspace's own .git leads when it is a
// file ("gitdir: PATH", as git worktree add and a submodule's checkout
// write it) whose PATH lies outside the workspace: an absolute path, or a
// relative one that climbs out of it. In the sandbox such a path is not
// the host's git directory: it is the read-only view of the host (or
// hidden, under /home, /root or /tmp), or, relative, the agent's home,
// so every git command the agent runs fails there, with git's own
// message naming a path of the sandbox ("Read-only file system", "not a
// git repository: /home/agent/ws/../.git/modules/ws"). ok is false for
// a .git directory, a link, or a file leading inside the workspace.
func (r *Repo) OutsideGitDir(commit objects.ID, ws string) (target string, ok bool, err error) {
	c, err := r.LoadCommit(commit)
	if err != nil {
		return "", false, err
	}
	e, found, err := r.Lookup(c.Tree, []string{ws, ".git"})
	if err != nil || !found || e.Type != objects.TypeFile || e.Size > maxGitFile {
		return "", false, err
	}
	data, err := r.ReadFile(e.ID, int64(e.Size))
	if err != nil {
		return "", false, err
	}
	target, isGitFile := strings.CutPrefix(strings.TrimRight(string(data), "\r\n"), "gitdir: ")
	if !isGitFile || target == "" || strings.ContainsAny(target, "\r\n") {
		return "", false, nil
	}
	if path.IsAbs(target) {
		return target, true, nil
	}
	if c := path.Clean(target); c == ".." || strings.HasPrefix(c, "../") {
		return target, true, nil
	}
	return "", false, nil
}

// inGitDir reports whether a conflict line ("PATH (why)") names a path
// inside a directory named .git (in any case).
func inGitDir(line string) bool {
	p, _, _ := strings.Cut(line, " (")
	for _, c := range strings.Split(p, "/") {
		if strings.EqualFold(c, ".git") {
			return true
		}
	}
	return false
}

// GitMergeAdvice is what a refused push or pull adds when some of its
// conflicts lie in a .git directory (the index, refs, logs,
// packed-refs): those files are git's record of two histories, which
// no choice of one side's file merges. Taking the branch's (what the
// refusal otherwise advises: "make those paths here as they are on the
// branch", or --force) left the user's own commits unreferenced, their
// reflog replaced. git merges them: the revision is pulled into another
// directory of the workspace's name and fetched from there into the
// workspace dir. That directory is a new private one (mktemp -d): the
// fixed /tmp/art-WS/WS advised before was made readable by every local
// user (the whole workspace and its history), and one another user
// made first was theirs, who could put a repository of their own in
// its place before the fetch. "" when no conflict is in a .git
// directory.
func GitMergeAdvice(conflicts []string, db, dir, ws, rev string) string {
	for _, c := range conflicts {
		if inGitDir(c) {
			return fmt.Sprintf("\n(paths in .git are git's own records: merge the two histories with git, not by taking one side's files; this pulls %s into a new private directory and fetches it into the workspace's git as from-art, to merge from there, with this command; once merged, record the workspace on a new branch, 'art push -d %s -m %s -b NAME': %s changed those files too, so a push onto it stops here again)\n  d=$(mktemp -d) && art pull -q -d %s -m \"$d\"/%s --commit %s && git -C %s fetch \"$d\"/%s HEAD:from-art",
				QuotePath(rev), ShellArg(db), ShellArg(dir), QuotePath(rev), ShellArg(db), ShellArg(ws), ShellArg(rev), ShellArg(dir), ShellArg(ws))
		}
	}
	return ""
}
