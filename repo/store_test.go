package repo

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/artproject/art/objects"
)

// encodedTrees returns n distinct one-entry trees, named from base.
func encodedTrees(t *testing.T, base string, n int) []EncodedTree {
	t.Helper()
	out := make([]EncodedTree, n)
	for i := range out {
		tr := &objects.Tree{Entries: []objects.Entry{{Name: fmt.Sprintf("%s-%d", base, i), Type: objects.TypeFile, Mode: 0o644, ID: objects.Hash([]byte(base))}}}
		raw, id, err := objects.EncodeTree(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = EncodedTree{ID: id, Raw: raw}
	}
	return out
}

func TestPutTrees(t *testing.T) {
	r := newTestRepo(t)
	stored := encodedTrees(t, "stored", 300) // more than one query's worth
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.PutTrees(stored); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	fresh := encodedTrees(t, "fresh", 2*treeBatch+3)
	for _, tc := range []struct {
		name  string
		trees []EncodedTree
		want  int // new objects
	}{
		{"none", nil, 0},
		{"all stored already", stored, 0},
		{"new, in three queries", fresh, len(fresh)},
		{"new twice in one call", append(encodedTrees(t, "twice", 2), encodedTrees(t, "twice", 2)...), 2},
		{"stored and new mixed", append(append([]EncodedTree{}, stored[:10]...), encodedTrees(t, "mixed", 5)...), 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := r.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := tx.PutTrees(tc.trees); err != nil {
				t.Fatal(err)
			}
			if tx.NewObjects != tc.want {
				t.Errorf("new objects = %d, want %d", tx.NewObjects, tc.want)
			}
			for _, et := range tc.trees {
				got, err := tx.LoadTree(et.ID)
				if err != nil {
					t.Fatalf("load %s: %v", et.ID.Short(), err)
				}
				raw, id, _ := objects.EncodeTree(got)
				if id != et.ID || string(raw) != string(et.Raw) {
					t.Fatalf("tree %s came back as %s", et.ID.Short(), id.Short())
				}
			}
		})
	}
}

// A file with a long run of zeros (a hole) stores the zero chunk once and
// reads back whole; its id is the hash of its content, shortcut or not.
func TestPutFileZeroRun(t *testing.T) {
	r := newTestRepo(t)
	head := bytes.Repeat([]byte("header "), 5000)
	tail := bytes.Repeat([]byte("trailer"), 5000)
	content := append(append(append([]byte(nil), head...), make([]byte, 40*objects.MaxChunk+123)...), tail...)
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	id, size, err := tx.PutFile(bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(len(content)) || id != objects.Hash(content) {
		t.Fatalf("PutFile: size %d id %s, want %d %s", size, id.Short(), len(content), objects.Hash(content).Short())
	}
	// head, the zero run's chunks (one distinct), what ends it, tail, the
	// chunk list: a handful of new objects, not forty.
	if tx.NewObjects > 8 {
		t.Errorf("%d new objects for one zero run", tx.NewObjects)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadFile(id, size)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("read back %d bytes (err %v), want the %d stored", len(got), err, len(content))
	}
}

// The decoded-tree cache is bounded in memory, not only in trees: many
// versions of a wide directory (art log computing each session's changes
// in a 100k-file directory) filled it with gigabytes. The least recently
// used go first: emptied whole when full, it made a mount that went
// between two large directories decode each again on every lookup.
func TestTreeCacheBoundedInBytes(t *testing.T) {
	r := newTestRepo(t)
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	const width = 20000
	entries := make([]objects.Entry, width)
	for i := range entries {
		entries[i] = objects.Entry{Name: fmt.Sprintf("file-%06d.go", i), Type: objects.TypeFile, Mode: 0o644, ID: objects.Hash([]byte{byte(i)}), Size: 1}
	}
	one := treeCost(&objects.Tree{Entries: entries}, 0)
	versions := 2*maxCachedTreeBytes/one + 1
	var ids []objects.ID
	for v := 0; v < versions; v++ {
		entries[0].MTime = int64(v) // one changed file per version
		id, err := tx.PutTree(&objects.Tree{Entries: entries})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r = reopen(t, r)
	cached := func(id objects.ID) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.trees.m[id]
		return ok
	}
	for i, id := range ids {
		if tr, err := r.LoadTree(id); err != nil || len(tr.Entries) != width {
			t.Fatalf("LoadTree: %v", err)
		}
		// The first tree, used again and again, stays.
		if _, err := r.LoadTree(ids[0]); err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		used, n := r.trees.used, r.trees.len()
		r.mu.Unlock()
		if used > maxCachedTreeBytes || n > i+1 {
			t.Fatalf("tree cache holds %d trees, %d bytes (bound %d)", n, used, maxCachedTreeBytes)
		}
	}
	if !cached(ids[0]) || !cached(ids[len(ids)-1]) || cached(ids[1]) {
		t.Errorf("cached: first (used throughout) %v, last %v, second %v; want true, true, false", cached(ids[0]), cached(ids[len(ids)-1]), cached(ids[1]))
	}
	// A tree larger than the whole bound (a directory of a million
	// entries) stays, alone, rather than being read for every lookup.
	huge := objects.Hash([]byte("huge"))
	r.mu.Lock()
	r.trees.add(huge, &objects.Tree{}, maxCachedTreeBytes+1)
	n, used := r.trees.len(), r.trees.used
	r.mu.Unlock()
	if !cached(huge) || n != 1 || used != maxCachedTreeBytes+1 {
		t.Errorf("a tree over the bound: cached %v, %d trees, %d bytes; want it alone", cached(huge), n, used)
	}
}
