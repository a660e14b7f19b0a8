package repo

import (
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/artproject/art/objects"
)

// A push whose branch moved since the workspace was last synced (an
// agent's sessions) records the host's changes on top of the branch's,
// not the host as it is: that undid every change of those sessions in the
// new commit. It is a three-way merge of the workspace tree, name by name,
// with what the workspace last synced as the base.

// mergeResult is what merge3 found besides the tree.
type mergeResult struct {
	conflicts []string // paths changed both on the host and on the branch, differently
	fromTip   int      // paths whose change on the branch the merge kept
}

// sameOrAbsent is sameEntry (type, mode, content, link target, xattrs;
// times do not count: a pull gives host files the commit's times, an
// editor's save its own) for entries that may be absent (nil).
func sameOrAbsent(a, b *objects.Entry) bool {
	if a == nil || b == nil {
		return a == b
	}
	return sameEntry(a, b)
}

// modeKept reports whether a host mode h is base's as a pull writes it:
// a pull strips set-ID and other-write bits (hostMode), which is no change
// by the host.
func modeKept(h, base uint32) bool {
	return h == base || h&^unsafeModeBits == base&^unsafeModeBits && h&unsafeModeBits&^base == 0
}

// hostKept reports whether the host's entry h still holds what base
// held, as a pull wrote it: the mode a pull stripped (it made the agent's
// 0666 file, changed in the commit since, conflict with the host's 0664)
// and the xattrs pull does not write (push keeps them only where the
// content did not change) are no change by the host.
func hostKept(h, base *objects.Entry) bool {
	if h == nil || base == nil {
		return h == base
	}
	return h.Type == base.Type && h.ID == base.ID && h.Size == base.Size && h.Target == base.Target && modeKept(h.Mode, base.Mode)
}

// merge3 merges the directory trees host and tip (either changed from
// base) into a new tree: a name changed on one side takes that side's
// entry, changed alike on both either, and a directory changed on both is
// merged name by name (its mode too); any other change on both sides is a
// conflict. A zero id is an empty directory. rel names the directory in
// conflicts.
func (tx *Tx) merge3(rel string, base, host, tip objects.ID, res *mergeResult) (objects.ID, error) {
	switch {
	case host == tip:
		return tip, nil
	case host == base:
		n, err := tx.countChanges(base, tip)
		res.fromTip += n
		return tip, err
	case tip == base:
		return host, nil
	}
	load := func(id objects.ID) (map[string]*objects.Entry, []string, error) {
		t, err := tx.treeOrEmpty(id)
		if err != nil {
			return nil, nil, fmt.Errorf("merge %s: %w", rel, err)
		}
		m := make(map[string]*objects.Entry, len(t.Entries))
		names := make([]string, 0, len(t.Entries))
		for i := range t.Entries {
			m[t.Entries[i].Name] = &t.Entries[i]
			names = append(names, t.Entries[i].Name)
		}
		return m, names, nil
	}
	b, bn, err := load(base)
	if err != nil {
		return objects.Zero, err
	}
	h, hn, err := load(host)
	if err != nil {
		return objects.Zero, err
	}
	t, tn, err := load(tip)
	if err != nil {
		return objects.Zero, err
	}
	seen := map[string]bool{}
	var out objects.Tree
	for _, names := range [][]string{hn, tn, bn} {
		for _, name := range names {
			if seen[name] {
				continue
			}
			seen[name] = true
			eb, eh, et := b[name], h[name], t[name]
			path := joinRel(rel, name)
			keep, err := tx.merge3Entry(path, eb, eh, et, res)
			if err != nil {
				return objects.Zero, err
			}
			if keep != nil {
				out.Entries = append(out.Entries, *keep)
			}
		}
	}
	if len(res.conflicts) > 0 {
		return objects.Zero, nil
	}
	out.Sort()
	return tx.PutTree(&out)
}

// merge3Entry merges one name: base eb, host eh, tip et (nil: absent).
func (tx *Tx) merge3Entry(path string, eb, eh, et *objects.Entry, res *mergeResult) (*objects.Entry, error) {
	switch {
	case sameOrAbsent(eh, et):
		return eh, nil // alike on both, or changed on neither
	case hostKept(eh, eb):
		// Unchanged on the host: the branch's (nil: deleted there).
		n, err := tx.countEntryChanges(eb, et)
		res.fromTip += n
		return et, err
	case sameOrAbsent(et, eb):
		return eh, nil // changed on the host only
	case eh != nil && et != nil && eh.Type == objects.TypeDir && et.Type == objects.TypeDir:
		var bid objects.ID // made a directory on both sides: from empty
		mode := eh.Mode
		if eb != nil && eb.Type == objects.TypeDir {
			bid = eb.ID
			switch {
			case modeKept(eh.Mode, eb.Mode): // not changed on the host
				mode = et.Mode // the mode changed on the branch only, if at all
				if et.Mode != eb.Mode {
					res.fromTip++
				}
			case et.Mode != eb.Mode && et.Mode != eh.Mode:
				res.conflicts = append(res.conflicts, path+" (its mode, changed here and on the branch)")
			}
		}
		id, err := tx.merge3(path, bid, eh.ID, et.ID, res)
		if err != nil {
			return nil, err
		}
		e := *eh
		e.ID, e.Mode = id, mode
		return &e, nil
	}
	// A git index the host only refreshed (git status after a pull) is
	// no change there: the branch's (see sameGitIndex).
	if et != nil && eh != nil && eb != nil && isGitIndexPath(path) {
		same, err := tx.refreshedGitIndex(eh, eb)
		if err != nil {
			return nil, err
		}
		if same {
			n, err := tx.countEntryChanges(eb, et)
			res.fromTip += n
			return et, err
		}
	}
	// Deleted on one side, a directory on the other whose content
	// differs from the base's only in times: no change there.
	if eb != nil && eb.Type == objects.TypeDir {
		for _, c := range []struct{ gone, other *objects.Entry }{{eh, et}, {et, eh}} {
			if c.gone == nil && c.other != nil && c.other.Type == objects.TypeDir && (c.other.Mode == eb.Mode || c.other == eh && modeKept(eh.Mode, eb.Mode)) {
				same, err := tx.sameIgnoringTimes(c.other.ID, eb.ID, c.other == eh)
				if err != nil {
					return nil, err
				}
				if same {
					if c.gone == et {
						n, err := tx.countEntryChanges(eb, nil)
						if err != nil {
							return nil, err
						}
						res.fromTip += n
					}
					return nil, nil // the deletion
				}
			}
		}
	}
	why := "changed here and on the branch"
	switch {
	case eh == nil:
		why = "deleted here, changed on the branch"
	case et == nil:
		why = "changed here, deleted on the branch"
	case eb == nil:
		why = "added here and on the branch"
	}
	res.conflicts = append(res.conflicts, path+" ("+why+")")
	return nil, nil
}

// countChanges counts the paths that differ between trees a and b (times
// aside), as art diff lists them.
func (tx *Tx) countChanges(a, b objects.ID) (int, error) {
	changes, err := tx.r.diffTrees(a, b, nil, tx.LoadTree)
	return len(changes), err
}

// treeOrEmpty loads tree id, the empty tree for the zero id.
func (tx *Tx) treeOrEmpty(id objects.ID) (*objects.Tree, error) {
	if id.IsZero() {
		return &objects.Tree{}, nil
	}
	return tx.LoadTree(id)
}

// countEntryChanges counts the paths that differ between two entries of
// one name (nil: absent), as art diff lists them: a directory's own mode
// or xattrs, and what differs below it.
func (tx *Tx) countEntryChanges(a, b *objects.Entry) (int, error) {
	one := func(e *objects.Entry) *objects.Tree {
		if e == nil {
			return &objects.Tree{}
		}
		return &objects.Tree{Entries: []objects.Entry{*e}}
	}
	var changes []Change
	var path []byte
	err := tx.r.diffPairs(&path, one(a), one(b), nil, &changes, tx.LoadTree)
	return len(changes), err
}

// sameIgnoringTimes reports whether two trees hold the same names, types,
// modes, xattrs, contents and links, whatever their times. With host, a is the
// host's and b the base: what a pull does not write (stripped mode bits,
// xattrs) is no difference (hostKept).
func (tx *Tx) sameIgnoringTimes(a, b objects.ID, host bool) (bool, error) {
	if a == b {
		return true, nil
	}
	ta, err := tx.LoadTree(a)
	if err != nil {
		return false, err
	}
	tb, err := tx.LoadTree(b)
	if err != nil {
		return false, err
	}
	if len(ta.Entries) != len(tb.Entries) {
		return false, nil
	}
	for i := range ta.Entries {
		ea, eb := &ta.Entries[i], &tb.Entries[i]
		if ea.Name != eb.Name {
			return false, nil
		}
		if ea.Type == objects.TypeDir && eb.Type == objects.TypeDir && (host && (ea.Mode == eb.Mode || modeKept(ea.Mode, eb.Mode)) || !host && sameMeta(ea, eb)) {
			if same, err := tx.sameIgnoringTimes(ea.ID, eb.ID, host); err != nil || !same {
				return false, err
			}
			continue
		}
		if host && !hostKept(ea, eb) || !host && !sameEntry(ea, eb) {
			return false, nil
		}
	}
	return true, nil
}

// isAncestor reports whether commit a is c or reached from c by parents,
// looking at most limit commits back, and not below commits made a day
// before a (clocks may differ that much): an a on no line of c's would
// otherwise have every push walk the whole history.
func (tx *Tx) isAncestor(a, c objects.ID, limit int) (bool, error) {
	return isAncestor(tx, a, c, limit)
}

// IsAncestor is isAncestor outside a transaction (art status: has the
// branch moved on from what the workspace holds?).
func (r *Repo) IsAncestor(a, c objects.ID, limit int) (bool, error) {
	return isAncestor(r, a, c, limit)
}

func isAncestor(q interface {
	LoadCommit(objects.ID) (*objects.Commit, error)
}, a, c objects.ID, limit int) (bool, error) {
	ac, err := q.LoadCommit(a)
	if err != nil {
		return false, err
	}
	floor := ac.Time - int64(24*time.Hour)
	queue := []objects.ID{c}
	seen := map[objects.ID]bool{c: true}
	for len(queue) > 0 && limit > 0 {
		id := queue[0]
		queue = queue[1:]
		limit--
		if id == a {
			return true, nil
		}
		cm, err := q.LoadCommit(id)
		if err != nil {
			return false, err
		}
		if cm.Time < floor {
			continue
		}
		for _, p := range cm.Parents {
			if !seen[p] {
				seen[p] = true
				queue = append(queue, p)
			}
		}
	}
	return false, nil
}

// maxMergeSearch bounds how far back a push looks for the commit its
// workspace last synced with (a snapshot is recorded beyond it).
const maxMergeSearch = 100000

// syncedBase returns the commit a host workspace last synced with (a push,
// or a pull of a branch's tip), since, and the workspace's entry (nil:
// none) in the base for merging the host's changes with the branch's:
// since itself when it is an older commit of tip's history, else the
// newest commit both histories share (the host pushed onto another
// branch, art checkout main, push). Zero when there is none: never synced,
// synced with tip itself, gc took since, or a pull of some other commit
// (an old one, to go back to), after which the push records the host as
// it is.
func (tx *Tx) syncedBase(dir, name string, tip objects.ID) (since objects.ID, base *objects.Entry, err error) {
	since, branch, ok := syncedWith(tx, dir)
	if !ok || branch == "" || since == tip {
		return objects.Zero, nil, nil // never synced, not with a branch's tip, or with tip itself
	}
	if ok, err := tx.hasCommit(since); err != nil || !ok {
		return objects.Zero, nil, err // gc took it
	}
	baseCommit := since
	if ok, err := tx.isAncestor(since, tip, maxMergeSearch); err != nil {
		return objects.Zero, nil, err
	} else if !ok {
		if baseCommit, err = tx.mergeBase(since, tip); err != nil || baseCommit.IsZero() {
			return objects.Zero, nil, err
		}
	}
	c, err := tx.LoadCommit(baseCommit)
	if err != nil {
		return objects.Zero, nil, err
	}
	t, err := tx.LoadTree(c.Tree)
	if err != nil {
		return objects.Zero, nil, err
	}
	if e, ok := t.Find(name); ok && e.Type == objects.TypeDir {
		return since, e, nil
	}
	return since, nil, nil // the workspace was not in it: an empty base
}

// mergeBase returns the best common ancestor of a and b: a commit both
// reach by parents that no other such commit descends from (the newest
// by time where a criss-cross leaves several). Zero when none is found
// within maxMergeSearch commits. The first one a walk from b met could be
// an old one reached through a short line, and the host's stale files
// then counted as its changes.
func (tx *Tx) mergeBase(a, b objects.ID) (objects.ID, error) {
	ancestors := func(from objects.ID, stop map[objects.ID]bool) (map[objects.ID]bool, []objects.ID, error) {
		seen := map[objects.ID]bool{from: true}
		var met []objects.ID // commits of stop reached, not walked past
		queue := []objects.ID{from}
		for len(queue) > 0 && len(seen) < maxMergeSearch {
			id := queue[0]
			queue = queue[1:]
			if stop != nil && stop[id] {
				met = append(met, id)
				continue
			}
			c, err := tx.LoadCommit(id)
			if err != nil {
				return nil, nil, err
			}
			for _, p := range c.Parents {
				if !seen[p] {
					seen[p] = true
					queue = append(queue, p)
				}
			}
		}
		return seen, met, nil
	}
	ofA, _, err := ancestors(a, nil)
	if err != nil {
		return objects.Zero, err
	}
	_, cands, err := ancestors(b, ofA)
	if err != nil || len(cands) == 0 {
		return objects.Zero, err
	}
	// Drop a candidate another one descends from.
	var best objects.ID
	var bestTime int64
	for _, c := range cands {
		dominated := false
		for _, d := range cands {
			if d == c {
				continue
			}
			if ok, err := tx.isAncestor(c, d, maxMergeSearch); err != nil {
				return objects.Zero, err
			} else if ok {
				dominated = true
				break
			}
		}
		if dominated {
			continue
		}
		cm, err := tx.LoadCommit(c)
		if err != nil {
			return objects.Zero, err
		}
		if best.IsZero() || cm.Time > bestTime {
			best, bestTime = c, cm.Time
		}
	}
	return best, nil
}

// keepExcluded puts back into the host's workspace tree (host) what the
// branch's (tip) holds at paths the scan leaves out (.artignore, .art):
// push never looks at them, so it must not delete them. An agent's build
// output at an ignored path, which pull does not write, vanished from the
// branch at the next push. Only directories that differ are visited.
//
// kept counts the entries put back: they are the branch's, not the
// host's, so a push holding any is no tree of the user's own (pull's check
// of what git runs must not trust an agent's .git kept so).
func (tx *Tx) keepExcluded(sc *scanner, rel string, host, tip objects.ID, kept *int) (objects.ID, error) {
	return tx.putBack(rel, host, tip, kept, func(string) func(string, *objects.Entry) bool {
		return func(r string, e *objects.Entry) bool { return sc.excluded(r, e.Type == objects.TypeDir) }
	})
}

// keepUnsynced puts back into the host's workspace tree (host) what the
// commit the workspace last synced with (from) holds at paths that its
// .artignore (was) left out, that the host's .artignore no longer leaves
// out, that no sync row lists and that the host does not have. Pull did
// not write them, so the host never had them and their absence is no
// deletion: an agent's build output at a path ignored then vanished from
// the branch at the first push after the user removed the pattern, with
// no conflict and no word. A path a row lists is one the host had, and
// its absence a deletion. Only directories that differ are visited; kept
// counts the entries put back.
func (tx *Tx) keepUnsynced(sc *scanner, was gitignore.Matcher, rel string, host, from objects.ID, kept *int) (objects.ID, error) {
	if was == nil {
		return host, nil
	}
	return tx.putBack(rel, host, from, kept, func(dir string) func(string, *objects.Entry) bool {
		listed := map[string]bool{}
		if row, ok := sc.synced[dir]; ok {
			// A row that does not decode lists nothing: only what the
			// old .artignore left out is put back, which deletes
			// nothing the branch holds.
			_, _ = decodeSyncRow(dir, row, func(name string, _ *syncedEntry) { listed[name] = true })
		}
		return func(r string, e *objects.Entry) bool {
			isDir := e.Type == objects.TypeDir
			return !listed[e.Name] && !sc.excluded(r, isDir) && excludedBy(was, r, isDir)
		}
	})
}

// putBack puts into the host's workspace tree (host) each entry of from
// that the host's directory lacks and that the directory's test (keepIn,
// asked once per directory) accepts, in every directory both trees have
// and that differs; kept counts them. It returns the tree's new id.
func (tx *Tx) putBack(rel string, host, from objects.ID, kept *int, keepIn func(dir string) func(r string, e *objects.Entry) bool) (objects.ID, error) {
	if host == from || from.IsZero() || host.IsZero() {
		return host, nil
	}
	ht, err := tx.LoadTree(host)
	if err != nil {
		return objects.Zero, fmt.Errorf("push: %s: %w", rel, err)
	}
	ft, err := tx.LoadTree(from)
	if err != nil {
		return objects.Zero, fmt.Errorf("push: %s: %w", rel, err)
	}
	keepIt := keepIn(rel)
	out := &objects.Tree{Entries: append([]objects.Entry(nil), ht.Entries...)}
	changed := false
	var keep []objects.Entry // appended once the search of out is done
	for i := range ft.Entries {
		e := &ft.Entries[i]
		r := joinRel(rel, e.Name)
		he, ok := out.Find(e.Name)
		if !ok {
			if keepIt(r, e) {
				keep = append(keep, *e)
				*kept++
				changed = true
			}
			continue
		}
		if he.Type == objects.TypeDir && e.Type == objects.TypeDir && he.ID != e.ID {
			id, err := tx.putBack(r, he.ID, e.ID, kept, keepIn)
			if err != nil {
				return objects.Zero, err
			}
			if id != he.ID {
				he.ID = id
				changed = true
			}
		}
	}
	if !changed {
		return host, nil
	}
	out.Entries = append(out.Entries, keep...)
	out.Sort()
	return tx.PutTree(out)
}

// excludedBy reports whether the patterns m leave out rel or a directory
// it is in (as in git, nothing below a directory left out is seen).
func excludedBy(m gitignore.Matcher, rel string, isDir bool) bool {
	parts := strings.Split(rel, "/")
	for i := 1; i <= len(parts); i++ {
		if m.Match(parts[:i], i < len(parts) || isDir) {
			return true
		}
	}
	return false
}

// ignoreOf compiles the .artignore that the workspace tree ws holds: nil
// when it holds none (or one no push would read).
func (tx *Tx) ignoreOf(ws objects.ID) (gitignore.Matcher, error) {
	t, err := tx.LoadTree(ws)
	if err != nil {
		return nil, err
	}
	e, ok := t.Find(IgnoreName)
	if !ok || e.Type != objects.TypeFile || e.Size > maxIgnoreSize {
		return nil, nil
	}
	data, err := tx.r.ReadFile(e.ID, int64(e.Size))
	if err != nil {
		return nil, err
	}
	return compileIgnore(string(data)), nil
}

// checkFirstPush refuses the first push of dir (it has no sync record)
// onto a branch, or to a new branch starting on a commit, that already
// holds a workspace of its name (ws) differing from the host's (host) in
// more than times: the push records the host as it is, which would undo
// what the branch (onto) holds there, at once or at a later push onto it
// (the sessions since another directory of that name last synced).
func (tx *Tx) checkFirstPush(dir, name, onto string, host, ws objects.ID) error {
	var n int
	if err := tx.QueryRow(`SELECT count(*) FROM workspaces WHERE path=?`, dir).Scan(&n); err != nil || n > 0 {
		return err // a record without a commit (gc took it): the host as it is, as documented
	}
	if same, err := tx.sameIgnoringTimes(host, ws, true); err != nil || same {
		return err
	}
	var others []string
	rows, err := tx.Query(`SELECT path FROM workspaces WHERE name=? ORDER BY path`, name)
	if err != nil {
		return err
	}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return err
		}
		others = append(others, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	from := ""
	if len(others) > 0 {
		from = "; last pushed or pulled from " + strings.Join(others, ", ")
	}
	return fmt.Errorf("%w: nothing was committed; %s never pushed or pulled, and %s already holds /%s/ with other content (a copy of that workspace, or another directory of that name%s): a push would replace it with this directory as it is and undo what it holds\n(pull %s into a new directory named %s ('art pull -m %s --commit %s'), bring this directory's changes there and push from it)",
		ErrPushConflict, dir, onto, name, from, onto, name, ShellArg("NEWDIR/"+name), ShellArg(onto))
}

// syncedRootMode is the mode the workspace's root had in the commit it
// last synced with: the host's, as far as art knows (the sync rows list a
// directory's entries, not the workspace root itself).
func (r *Repo) syncedRootMode(dir, name string) (uint32, bool) {
	id, _, ok := syncedWith(r.DB, dir)
	if !ok {
		return 0, false
	}
	c, err := r.LoadCommit(id)
	if err != nil {
		return 0, false
	}
	e, ok, err := r.Lookup(c.Tree, []string{name})
	if err != nil || !ok || e.Type != objects.TypeDir {
		return 0, false
	}
	return e.Mode, true
}

// syncedCommit returns the commit the host workspace dir last synced
// with, when the repository still holds it.
func (tx *Tx) syncedCommit(dir string) (objects.ID, bool, error) {
	id, _, ok := syncedWith(tx, dir)
	if !ok {
		return objects.Zero, false, nil
	}
	ok, err := tx.hasCommit(id)
	return id, ok, err
}

// syncedWith reads the workspaces row of dir: the commit it last synced
// with and the branch whose tip that was ("" none, DetachedHead); ok is
// false when it never synced or its commit is gone.
func syncedWith(q querier, dir string) (commit objects.ID, branch string, ok bool) {
	var cid []byte
	var b sql.NullString
	if err := q.QueryRow(`SELECT commit_id, branch FROM workspaces WHERE path=?`, dir).Scan(&cid, &b); err != nil || len(cid) != objects.IDSize {
		return objects.Zero, "", false
	}
	copy(commit[:], cid)
	return commit, b.String, true
}
