package repo

import (
	"database/sql"
	"fmt"

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

// hostKept reports whether the host's entry h still holds what base
// held, as a pull wrote it: a pull strips set-ID and other-write bits
// (hostMode), which is no change by the host (it made the agent's 0666
// file, changed in the commit since, conflict with the host's 0664).
func hostKept(h, base *objects.Entry) bool {
	if sameOrAbsent(h, base) {
		return true
	}
	if h == nil || base == nil || h.Mode == base.Mode {
		return false
	}
	hh, bb := *h, *base
	hh.Mode, bb.Mode = 0, 0
	return sameEntry(&hh, &bb) && h.Mode&^unsafeModeBits == base.Mode&^unsafeModeBits && h.Mode&unsafeModeBits&^base.Mode == 0
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
		res.fromTip++
		return tip, nil
	case tip == base:
		return host, nil
	}
	load := func(id objects.ID) (map[string]*objects.Entry, []string, error) {
		m := map[string]*objects.Entry{}
		if id.IsZero() {
			return m, nil, nil
		}
		t, err := tx.LoadTree(id)
		if err != nil {
			return nil, nil, fmt.Errorf("merge %s: %w", rel, err)
		}
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
		res.fromTip++
		return et, nil // unchanged on the host: the branch's (nil: deleted there)
	case sameOrAbsent(et, eb):
		return eh, nil // changed on the host only
	case eh != nil && et != nil && eh.Type == objects.TypeDir && et.Type == objects.TypeDir:
		var bid objects.ID // made a directory on both sides: from empty
		mode := eh.Mode
		if eb != nil && eb.Type == objects.TypeDir {
			bid = eb.ID
			hostMoved := !(eh.Mode == eb.Mode || hostKept(&objects.Entry{Type: objects.TypeDir, Mode: eh.Mode}, &objects.Entry{Type: objects.TypeDir, Mode: eb.Mode}))
			switch {
			case !hostMoved:
				mode = et.Mode // the mode changed on the branch only, if at all
				if et.Mode != eb.Mode {
					res.fromTip++
				}
			case et.Mode != eb.Mode && et.Mode != eh.Mode:
				res.conflicts = append(res.conflicts, path+" (its mode)")
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
	// Deleted on one side, a directory on the other whose content
	// differs from the base's only in times: no change there.
	if eb != nil && eb.Type == objects.TypeDir {
		for _, c := range []struct{ gone, other *objects.Entry }{{eh, et}, {et, eh}} {
			if c.gone == nil && c.other != nil && c.other.Type == objects.TypeDir && c.other.Mode == eb.Mode {
				same, err := tx.sameIgnoringTimes(c.other.ID, eb.ID)
				if err != nil {
					return nil, err
				}
				if same {
					if c.gone == et {
						res.fromTip++
					}
					return nil, nil
				}
			}
		}
	}
	res.conflicts = append(res.conflicts, path)
	return nil, nil
}

// sameIgnoringTimes reports whether two trees hold the same names, types,
// modes, contents and links, whatever their times.
func (tx *Tx) sameIgnoringTimes(a, b objects.ID) (bool, error) {
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
		if ea.Type == objects.TypeDir && eb.Type == objects.TypeDir && ea.Mode == eb.Mode {
			if same, err := tx.sameIgnoringTimes(ea.ID, eb.ID); err != nil || !same {
				return false, err
			}
			continue
		}
		if !sameEntry(ea, eb) {
			return false, nil
		}
	}
	return true, nil
}

// isAncestor reports whether commit a is c or reached from c by parents,
// looking at most limit commits back.
func (tx *Tx) isAncestor(a, c objects.ID, limit int) (bool, error) {
	queue := []objects.ID{c}
	seen := map[objects.ID]bool{c: true}
	for len(queue) > 0 && limit > 0 {
		id := queue[0]
		queue = queue[1:]
		limit--
		if id == a {
			return true, nil
		}
		cm, err := tx.LoadCommit(id)
		if err != nil {
			return false, err
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
// or a pull of a branch's tip) and its tree of the workspace, when that
// commit is an older commit of tip's history: the base for merging the
// host's changes with the branch's since. Zero ids when there is none (a
// pull of another commit, an old one to go back to, has the push record
// the host as it is).
func (tx *Tx) syncedBase(dir, name string, tip objects.ID) (commit, tree objects.ID, err error) {
	var cid []byte
	var synced sql.NullString
	if err := tx.QueryRow(`SELECT commit_id, branch FROM workspaces WHERE path=?`, dir).Scan(&cid, &synced); err != nil || len(cid) != objects.IDSize || synced.String == "" {
		return objects.Zero, objects.Zero, nil // never synced, with no commit, or not with a branch's tip
	}
	copy(commit[:], cid)
	if commit == tip {
		return objects.Zero, objects.Zero, nil
	}
	if ok, err := tx.hasCommit(commit); err != nil || !ok {
		return objects.Zero, objects.Zero, err // gc took it
	}
	if ok, err := tx.isAncestor(commit, tip, maxMergeSearch); err != nil || !ok {
		return objects.Zero, objects.Zero, err
	}
	c, err := tx.LoadCommit(commit)
	if err != nil {
		return objects.Zero, objects.Zero, err
	}
	t, err := tx.LoadTree(c.Tree)
	if err != nil {
		return objects.Zero, objects.Zero, err
	}
	e, ok := t.Find(name)
	if !ok || e.Type != objects.TypeDir {
		return commit, objects.Zero, nil // the workspace was not in it: an empty base
	}
	return commit, e.ID, nil
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
	if host == tip || tip.IsZero() || host.IsZero() {
		return host, nil
	}
	ht, err := tx.LoadTree(host)
	if err != nil {
		return objects.Zero, fmt.Errorf("push: %s: %w", rel, err)
	}
	tt, err := tx.LoadTree(tip)
	if err != nil {
		return objects.Zero, fmt.Errorf("push: %s: %w", rel, err)
	}
	out := &objects.Tree{Entries: append([]objects.Entry(nil), ht.Entries...)}
	changed := false
	var keep []objects.Entry // appended once the search of out is done
	for i := range tt.Entries {
		e := &tt.Entries[i]
		r := joinRel(rel, e.Name)
		he, ok := out.Find(e.Name)
		if !ok {
			if sc.excluded(r, e.Type == objects.TypeDir) {
				keep = append(keep, *e)
				*kept++
				changed = true
			}
			continue
		}
		if he.Type == objects.TypeDir && e.Type == objects.TypeDir && he.ID != e.ID {
			id, err := tx.keepExcluded(sc, r, he.ID, e.ID, kept)
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

// syncedRootMode is the mode the workspace's root had in the commit it
// last synced with: the host's, as far as art knows (the sync rows list a
// directory's entries, not the workspace root itself).
func (r *Repo) syncedRootMode(dir, name string) (uint32, bool) {
	var cid []byte
	if err := r.DB.QueryRow(`SELECT commit_id FROM workspaces WHERE path=?`, dir).Scan(&cid); err != nil || len(cid) != objects.IDSize {
		return 0, false
	}
	var id objects.ID
	copy(id[:], cid)
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
