package repo

import (
	"sort"

	"github.com/artproject/art/objects"
)

// Drift is how a host workspace differs from what was last pushed or pulled.
type Drift struct {
	Synced                   bool // the workspace was ever pushed or pulled
	Commit                   objects.ID
	Added, Modified, Deleted []string
	// UnfinishedPull is the commit of a pull into the workspace that
	// began writing it and did not finish (zero: none): the drift is then
	// partly that pull's.
	UnfinishedPull objects.ID
}

// Clean reports whether nothing changed.
func (d *Drift) Clean() bool { return len(d.Added)+len(d.Modified)+len(d.Deleted) == 0 }

// KnownWorkspace reports whether a push or pull has synced the host
// directory abs.
func (r *Repo) KnownWorkspace(abs string) bool {
	// A record an older build kept under a link's path that could not be
	// moved (relinkWorkspace failed) is still the workspace's: looked up
	// under the real path alone, it was taken for never synced.
	key, _ := r.linkKey(abs)
	var n int
	err := r.DB.QueryRow(`SELECT count(*) FROM workspaces WHERE path IN (?, ?)`, key, abs).Scan(&n)
	if err == nil && n == 0 {
		// A workspace that moved is known: its first push or status
		// takes its record along. Only asked here, not done: the
		// directory asked about may be a subdirectory.
		old, _ := r.movedRecord(key)
		return old != ""
	}
	return err == nil && n > 0
}

// HostDrift compares a host workspace with its sync state. Files whose
// stat changed are re-hashed, so a touch without a change is not drift.
func (r *Repo) HostDrift(dir string) (*Drift, error) {
	abs, err := CheckWorkspaceDir(dir)
	if err != nil {
		return nil, err
	}
	name, nameErr := WorkspaceName(abs)
	if abs, err = r.workspaceKey(abs); err != nil {
		return nil, err
	}
	d := &Drift{}
	var cid []byte
	if err := r.DB.QueryRow(`SELECT commit_id FROM workspaces WHERE path=?`, abs).Scan(&cid); err == nil {
		d.Synced = true
		if len(cid) == objects.IDSize {
			copy(d.Commit[:], cid)
		}
	}
	if id, ok, err := r.UnfinishedPull(abs); err != nil {
		return nil, err
	} else if ok {
		d.UnfinishedPull = id
	}
	sc, err := newScanner(r, abs, nil)
	if err != nil {
		return nil, err
	}
	if sc.synced, err = r.loadSyncRows(abs); err != nil {
		return nil, err
	}
	if _, err := sc.scan(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, h := range sc.all[1:] {
		seen[h.rel] = true
		s := h.old
		if s == nil {
			d.Added = append(d.Added, h.rel)
			continue
		}
		if s.typ != h.typ {
			d.Modified = append(d.Modified, h.rel)
			continue
		}
		switch h.typ {
		case objects.TypeFile:
			if h.known || s.mode != h.mode {
				if s.mode != h.mode {
					d.Modified = append(d.Modified, h.rel)
				}
				continue
			}
			id, _, err := hashHostFile(abs, h.rel, 0)
			if err != nil {
				return nil, err
			}
			if id == s.id {
				continue
			}
			// A git index that git only refreshed (stat data, caches)
			// is no change, as pull and push take it.
			if isGitIndexPath(h.rel) {
				if same, err := hostIndexRefreshedOnly(r, abs, h); err != nil {
					return nil, err
				} else if same {
					continue
				}
			}
			d.Modified = append(d.Modified, h.rel)
		case objects.TypeSymlink:
			if h.target != s.target {
				d.Modified = append(d.Modified, h.rel)
			}
		default:
			if h.mode != s.mode {
				d.Modified = append(d.Modified, h.rel)
			}
		}
	}
	for _, p := range syncedPaths(sc.synced) {
		// A path .artignore leaves out now is no deletion: push keeps
		// what the branch holds there (status said "deleted", and that
		// push would record it).
		if !seen[p.rel] && !sc.leftOut(p.rel, p.dir) {
			d.Deleted = append(d.Deleted, p.rel)
		}
	}
	// The workspace root's own mode, which no sync row lists.
	if root := sc.all[0]; d.Synced {
		if nameErr == nil {
			if base, ok := r.syncedRootMode(abs, name); ok && !modeKept(root.mode, base) {
				d.Modified = append([]string{"."}, d.Modified...)
			}
		}
	}
	sort.Strings(d.Deleted)
	return d, nil
}

// HoldsWorkspace reports whether commit holds a workspace named name (a
// directory at the top of its tree).
func (r *Repo) HoldsWorkspace(commit objects.ID, name string) (bool, error) {
	if commit.IsZero() {
		return false, nil
	}
	c, err := r.LoadCommit(commit)
	if err != nil {
		return false, err
	}
	t, err := r.LoadTree(c.Tree)
	if err != nil {
		return false, err
	}
	e, ok := t.Find(name)
	return ok && e.Type == objects.TypeDir, nil
}
