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

// merge3 merges the directory trees host and tip (either changed from
// base) into a new tree: a name changed on one side takes that side's
// entry, changed alike on both either, and a directory changed on both is
// merged name by name; any other change on both sides is a conflict. A
// zero id is an empty directory. rel names the directory in conflicts.
func (tx *Tx) merge3(rel string, base, host, tip objects.ID, res *mergeResult) (objects.ID, error) {
	switch {
	case host == base || host == tip:
		if host != tip {
			res.fromTip++
		}
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
			var keep *objects.Entry
			switch {
			case sameOrAbsent(eh, eb):
				keep = et // unchanged on the host: the branch's (nil: deleted there)
				if !sameOrAbsent(et, eb) {
					res.fromTip++
				}
			case sameOrAbsent(et, eb) || sameOrAbsent(eh, et):
				keep = eh // changed on the host only, or alike on both
			case eh != nil && et != nil && eh.Type == objects.TypeDir && et.Type == objects.TypeDir:
				var bid objects.ID // made a directory on both sides: from empty
				if eb != nil && eb.Type == objects.TypeDir {
					bid = eb.ID
				}
				id, err := tx.merge3(path, bid, eh.ID, et.ID, res)
				if err != nil {
					return objects.Zero, err
				}
				e := *eh
				e.ID = id
				if eb != nil && eb.Type == objects.TypeDir && eh.Mode == eb.Mode {
					e.Mode = et.Mode // the mode changed on the branch only
				}
				keep = &e
			default:
				res.conflicts = append(res.conflicts, path)
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

// syncedBase returns the commit a host workspace last synced with (a push
// onto branch, or a pull of its tip) and its tree of the workspace, when
// that commit is an older commit of tip's history: the base for merging
// the host's changes with the branch's since. Zero ids when there is none
// (a pull of another commit, an old one to go back to, records the host
// as it is).
func (tx *Tx) syncedBase(dir, name, branch string, tip objects.ID) (commit, tree objects.ID, err error) {
	var cid []byte
	var synced sql.NullString
	if err := tx.QueryRow(`SELECT commit_id, branch FROM workspaces WHERE path=?`, dir).Scan(&cid, &synced); err != nil || len(cid) != objects.IDSize || synced.String != branch {
		return objects.Zero, objects.Zero, nil // never synced, with no commit, or not with this branch
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
func (tx *Tx) keepExcluded(sc *scanner, rel string, host, tip objects.ID) (objects.ID, error) {
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
	var kept []objects.Entry // appended once the search of out is done
	for i := range tt.Entries {
		e := &tt.Entries[i]
		r := joinRel(rel, e.Name)
		he, ok := out.Find(e.Name)
		if !ok {
			if sc.excluded(r, e.Type == objects.TypeDir) {
				kept = append(kept, *e)
				changed = true
			}
			continue
		}
		if he.Type == objects.TypeDir && e.Type == objects.TypeDir && he.ID != e.ID {
			id, err := tx.keepExcluded(sc, r, he.ID, e.ID)
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
	out.Entries = append(out.Entries, kept...)
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
