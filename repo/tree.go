package repo

import (
	"fmt"
	"strings"

	"github.com/artproject/art/objects"
)

// SplitPath splits a slash-separated tree path into components, rejecting
// components that cannot be tree names.
func SplitPath(p string) ([]string, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil, nil
	}
	parts := strings.Split(p, "/")
	for _, c := range parts {
		if !objects.ValidName(c) {
			return nil, fmt.Errorf("invalid path component %q in %q", c, p)
		}
	}
	return parts, nil
}

// Lookup finds the entry at path below the tree root. ok is false when a
// component is missing or not a directory.
func (r *Repo) Lookup(root objects.ID, parts []string) (objects.Entry, bool, error) {
	e := objects.Entry{Type: objects.TypeDir, ID: root, Mode: 0o755}
	for _, name := range parts {
		if e.Type != objects.TypeDir {
			return objects.Entry{}, false, nil
		}
		t, err := r.LoadTree(e.ID)
		if err != nil {
			return objects.Entry{}, false, err
		}
		found, ok := t.Find(name)
		if !ok {
			return objects.Entry{}, false, nil
		}
		e = *found
	}
	return e, true, nil
}

// ReplaceAt returns the id of a copy of root in which the entry at path is
// replaced by e (or removed when e is nil). Missing parent directories are
// created. Only the trees along the path are rewritten.
func (tx *Tx) ReplaceAt(root objects.ID, parts []string, e *objects.Entry) (objects.ID, error) {
	if len(parts) == 0 {
		if e == nil || e.Type != objects.TypeDir {
			return objects.Zero, fmt.Errorf("replace root: the root must be a directory")
		}
		return e.ID, nil
	}
	var t objects.Tree
	if !root.IsZero() {
		old, err := tx.LoadTree(root)
		if err != nil {
			return objects.Zero, err
		}
		t.Entries = append(t.Entries, old.Entries...)
	}
	name := parts[0]
	idx := -1
	for i := range t.Entries {
		if t.Entries[i].Name == name {
			idx = i
			break
		}
	}
	if len(parts) == 1 {
		switch {
		case e == nil && idx >= 0:
			t.Entries = append(t.Entries[:idx], t.Entries[idx+1:]...)
		case e != nil && idx >= 0:
			ne := *e
			ne.Name = name
			t.Entries[idx] = ne
		case e != nil:
			ne := *e
			ne.Name = name
			t.Entries = append(t.Entries, ne)
			t.Sort()
		}
		return tx.PutTree(&t)
	}
	var sub objects.ID
	child := objects.Entry{Name: name, Type: objects.TypeDir, Mode: 0o755}
	if idx >= 0 && t.Entries[idx].Type == objects.TypeDir {
		child = t.Entries[idx]
		sub = child.ID
	}
	newSub, err := tx.ReplaceAt(sub, parts[1:], e)
	if err != nil {
		return objects.Zero, err
	}
	child.ID = newSub
	if idx >= 0 {
		t.Entries[idx] = child
	} else {
		t.Entries = append(t.Entries, child)
		t.Sort()
	}
	return tx.PutTree(&t)
}
