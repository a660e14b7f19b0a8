package repo

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/artproject/art/internal/testenv"
	"github.com/artproject/art/objects"
)

func TestGCKeepsReachableAndFreesUnreachable(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	big := make([]byte, 600<<10) // several chunks
	rand.New(rand.NewSource(3)).Read(big)
	writeFiles(t, ws, map[string]string{"shared": "in every commit\n", "big": string(big)})
	c1 := push(t, r, ws, "c1").Commit
	writeFiles(t, ws, map[string]string{"main-only": "m\n"})
	c2 := push(t, r, ws, "c2").Commit

	// Branch "doomed" gets its own content, including a multi-chunk file.
	other := make([]byte, 700<<10)
	rand.New(rand.NewSource(4)).Read(other)
	writeFiles(t, ws, map[string]string{"doomed-only": "d\n", "doomed-big": string(other)})
	d1, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: "doomed"})
	if err != nil {
		t.Fatal(err)
	}
	// "kept" grows from main, in another copy of the workspace: one that
	// grew from doomed's files would record doomed as its history (the
	// host's own commit, a second parent), and keep it.
	ws2 := newWorkspace(t, "ws")
	pull(t, r, ws2, c2)
	writeFiles(t, ws2, map[string]string{"kept-only": "k\n"})
	k1, err := r.Push(context.Background(), PushOptions{Dir: ws2, Branch: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	// A detached HEAD on an otherwise unreferenced commit keeps it alive.
	tx, _ := r.Begin()
	detachedID := putCommitTx(t, tx, "detached", c1)
	tx.SetHead(Head{Commit: detachedID})
	tx.Commit()

	if _, err := r.DeleteBranch("doomed"); err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	for _, tb := range []string{"commits", "trees", "files", "chunks"} {
		before[tb] = countRows(t, r, tb)
	}
	res, err := r.GC(r.WorktreeRoots)
	if err != nil {
		t.Fatal(err)
	}
	// d1 (the doomed commit), its trees, the 700 KiB file and its chunks go.
	if res.Commits != 1 || res.Files != 1 || res.Chunks < 3 || res.Trees < 2 || res.BytesFreed < 600<<10 {
		t.Errorf("gc result %+v", res)
	}
	for tb, n := range map[string]int{"commits": res.Commits, "trees": res.Trees, "files": res.Files, "chunks": res.Chunks} {
		if got := countRows(t, r, tb); got != before[tb]-n {
			t.Errorf("%s: %d rows, want %d - %d", tb, got, before[tb], n)
		}
	}
	if _, err := r.LoadCommit(d1.Commit); !errors.Is(err, objects.ErrNotFound) {
		t.Errorf("unreachable commit survived: %v", err)
	}
	r = reopen(t, r)
	if p := fsckProblems(t, r); p != "" {
		t.Fatalf("fsck after gc:\n%s", p)
	}
	// Everything still reachable can be pulled and matches its tree.
	for _, id := range []objects.ID{c1, c2, k1.Commit, detachedID} {
		dst := filepath.Join(t.TempDir(), "ws")
		pull(t, r, dst, id)
		got := snapshot(t, dst)
		for p := range wsEntries(t, r, id, "ws") {
			if _, ok := got[p]; !ok {
				t.Errorf("commit %s: %s missing after pull", id.Short(), p)
			}
		}
	}
	// A second gc finds nothing.
	res, err = r.GC(r.WorktreeRoots)
	if err != nil || res.Commits+res.Trees+res.Files+res.Chunks != 0 {
		t.Fatalf("second gc %+v %v", res, err)
	}
}

func putCommitTx(t *testing.T, tx *Tx, msg string, parent objects.ID) objects.ID {
	t.Helper()
	c, err := tx.LoadCommit(parent)
	if err != nil {
		t.Fatal(err)
	}
	id, err := tx.PutCommit(&objects.Commit{Tree: c.Tree, Parents: []objects.ID{parent}, Time: 99, Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestGCKeepsWorktreeContent(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n"})
	push(t, r, ws, "")
	w, _, err := r.CreateWorktree("main", "mount", "", "")
	if err != nil {
		t.Fatal(err)
	}
	// The upper layer references a chunk no commit holds.
	tx, _ := r.Begin()
	chunk, _, err := tx.PutFile(strings.NewReader("upper data"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO upper_blocks(wt, ino, idx, chunk) VALUES(?, 5, 0, ?)`, w.ID, chunk[:]); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	if _, err := r.GC(r.WorktreeRoots); err != nil {
		t.Fatal(err)
	}
	if _, err := r.LoadChunk(chunk); err != nil {
		t.Fatalf("gc deleted a chunk a worktree uses: %v", err)
	}
}

// A block of an upper layer that holds a whole small file has the id of
// that content, which is also the file's id wherever a push or commit cut
// the same content into several chunks (files of 16-64 KiB often are).
// gc read the block's chunk as that file and kept the file's chunks, not
// the block's: it deleted the chunk under a live session (whose file then
// read EIO and could not be committed).
func TestGCKeepsWorktreeBlockNamedLikeAMultiChunkFile(t *testing.T) {
	// Content under one block (64 KiB) that the chunker cuts in two.
	var content []byte
	for seed := int64(1); ; seed++ {
		b := make([]byte, 60<<10)
		rand.New(rand.NewSource(seed)).Read(b)
		if objects.Boundary(b) < len(b) {
			content = b
			break
		}
	}
	id := objects.Hash(content)
	for _, tc := range []struct {
		name string
		// pushed: the multi-chunk file is in a commit a branch holds;
		// otherwise only its (unreachable) chunk list is stored.
		pushed bool
	}{
		{"file in a branch", true},
		{"file unreachable", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "a\n"})
			if tc.pushed {
				writeFiles(t, ws, map[string]string{"f": string(content)})
			}
			push(t, r, ws, "")
			tx, _ := r.Begin()
			if !tc.pushed {
				if got, _, err := tx.PutFile(bytes.NewReader(content)); err != nil || got != id {
					t.Fatalf("store the file: %v (id %s, want %s)", err, got.Short(), id.Short())
				}
			}
			tx.Commit()
			refs, err := r.LoadFileChunks(id)
			if err != nil || len(refs) < 2 {
				t.Fatalf("the file is not stored in several chunks: %v %v", refs, err)
			}
			w, _, err := r.CreateWorktree("main", "mount", "", "")
			if err != nil {
				t.Fatal(err)
			}
			// The overlay stores the block whole, as one chunk.
			tx, _ = r.Begin()
			if err := tx.PutChunkEncoded(id, len(content), objects.EncRaw, content); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(`INSERT INTO upper_blocks(wt, ino, idx, chunk) VALUES(?, 5, 0, ?)`, w.ID, id[:]); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.GC(r.WorktreeRoots); err != nil {
				t.Fatal(err)
			}
			r = reopen(t, r)
			if _, err := r.LoadChunk(id); err != nil {
				t.Fatalf("gc deleted the chunk of a worktree's block: %v", err)
			}
			if res, err := r.Fsck(nil); err != nil || len(res.Problems) > 0 {
				t.Fatalf("fsck after gc: %v %v", err, res.Problems)
			}
		})
	}
}

func TestGCRefusesWhenReachableObjectIsDamaged(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n", "d/b": "b\n"})
	res := push(t, r, ws, "")
	sub := mustTree(t, r, wsTreeID(t, r, res.Commit, "ws")).Entries[1].ID
	r.DB.Exec(`DELETE FROM trees WHERE id=?`, sub[:])
	r = reopen(t, r)
	n := countRows(t, r, "chunks")
	_, err := r.GC(r.WorktreeRoots)
	if err == nil || !strings.Contains(err.Error(), "nothing was deleted") {
		t.Fatalf("gc with a missing tree: %v", err)
	}
	if countRows(t, r, "chunks") != n {
		t.Fatal("gc deleted objects anyway")
	}
}

func TestFsckDetectsDamage(t *testing.T) {
	ws := newWorkspace(t, "ws")
	text := strings.Repeat("compressible line of text\n", 2000)
	big := make([]byte, 400<<10)
	rand.New(rand.NewSource(5)).Read(big)
	writeFiles(t, ws, map[string]string{"text": text, "raw": "short raw chunk\n", "big": string(big), "d/x": "x\n"})
	type target struct {
		kind, table, column string
		id                  func(r *Repo, c objects.ID) objects.ID
	}
	chunkOf := func(content string) func(*Repo, objects.ID) objects.ID {
		return func(*Repo, objects.ID) objects.ID { return objects.Hash([]byte(content)) }
	}
	tests := []struct {
		name string
		target
		op string // "flip" or "delete"
	}{
		{"zstd chunk flipped", target{"chunk", "chunks", "data", chunkOf(text)}, "flip"},
		{"raw chunk flipped", target{"chunk", "chunks", "data", chunkOf("short raw chunk\n")}, "flip"},
		{"chunk list flipped", target{"file", "files", "chunks", func(*Repo, objects.ID) objects.ID { return objects.Hash(big) }}, "flip"},
		{"tree flipped", target{"tree", "trees", "data", func(r *Repo, c objects.ID) objects.ID { return wsTreeIDr(r, c) }}, "flip"},
		{"commit flipped", target{"commit", "commits", "data", func(r *Repo, c objects.ID) objects.ID { return c }}, "flip"},
		{"chunk missing", target{"tree", "chunks", "", chunkOf("x\n")}, "delete"},
		{"tree missing", target{"commit", "trees", "", func(r *Repo, c objects.ID) objects.ID { cm, _ := r.LoadCommit(c); return cm.Tree }}, "delete"},
		// Valid chunks of the right sizes in another order: only the
		// whole content's hash tells.
		{"chunk list reordered", target{"file", "files", "chunks", func(*Repo, objects.ID) objects.ID { return objects.Hash(big) }}, "swap"},
		{"tree size field wrong", target{"tree", "trees", "size", func(r *Repo, c objects.ID) objects.ID { return wsTreeIDr(r, c) }}, "size"},
		// Raw data is not decompressed: only the size check tells.
		{"raw chunk size field wrong", target{"chunk", "chunks", "size", chunkOf("short raw chunk\n")}, "size"},
		{"file size field wrong", target{"file", "files", "size", func(*Repo, objects.ID) objects.ID { return objects.Hash(big) }}, "size"},
		{"subtree missing", target{"tree", "trees", "", func(r *Repo, c objects.ID) objects.ID {
			cm, _ := r.LoadCommit(c)
			e, _, _ := r.Lookup(cm.Tree, []string{"ws", "d"})
			return e.ID
		}}, "delete"},
		// The branch moves to a child of the pushed commit, which is
		// then missing.
		{"parent missing", target{"commit", "commits", "", func(r *Repo, c objects.ID) objects.ID {
			child := commitOnMain(r, c, nil)
			r.DB.Exec(`UPDATE workspaces SET commit_id=?`, child[:]) // off c (a foreign key)
			return c
		}}, "delete"},
		// A session's trace log, named only by its commit.
		{"trace log missing", target{"commit", "chunks", "", func(r *Repo, c objects.ID) objects.ID {
			trace := objects.Hash([]byte("a syscall log\n"))
			commitOnMain(r, c, []byte("a syscall log\n"))
			return trace
		}}, "delete"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			res := push(t, r, ws, "")
			if p := fsckProblems(t, r); p != "" {
				t.Fatalf("fsck of a sound repository:\n%s", p)
			}
			id := tc.id(r, res.Commit)
			switch tc.op {
			case "flip":
				// Flip one byte in the middle of the stored column.
				var data []byte
				if err := r.DB.QueryRow(`SELECT `+tc.column+` FROM `+tc.table+` WHERE id=?`, id[:]).Scan(&data); err != nil {
					t.Fatal(err)
				}
				data[len(data)/2] ^= 0x5a
				if _, err := r.DB.Exec(`UPDATE `+tc.table+` SET `+tc.column+`=? WHERE id=?`, data, id[:]); err != nil {
					t.Fatal(err)
				}
			case "delete":
				if _, err := r.DB.Exec(`DELETE FROM `+tc.table+` WHERE id=?`, id[:]); err != nil {
					t.Fatal(err)
				}
			case "swap":
				var list []byte
				r.DB.QueryRow(`SELECT chunks FROM files WHERE id=?`, id[:]).Scan(&list)
				refs, err := objects.DecodeChunkList(list)
				if err != nil || len(refs) < 2 {
					t.Fatalf("chunk list of %d: %v", len(refs), err)
				}
				refs[0], refs[1] = refs[1], refs[0]
				if _, err := r.DB.Exec(`UPDATE files SET chunks=? WHERE id=?`, objects.EncodeChunkList(refs), id[:]); err != nil {
					t.Fatal(err)
				}
			case "size":
				if _, err := r.DB.Exec(`UPDATE `+tc.table+` SET size=size+1 WHERE id=?`, id[:]); err != nil {
					t.Fatal(err)
				}
			}
			r = reopen(t, r)
			fres, err := r.Fsck(nil)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range fres.Problems {
				if p.Kind == tc.kind && (p.ID == id.String() || tc.op == "delete" && strings.Contains(p.Msg, id.String())) {
					found = true
				}
			}
			if !found {
				t.Fatalf("fsck did not name %s %s; problems: %v", tc.kind, id.Short(), fres.Problems)
			}
			// Reading the damaged object is an error, never wrong data.
			if tc.op != "delete" {
				var err error
				switch tc.table {
				case "chunks":
					_, err = r.LoadChunk(id)
				case "files":
					_, err = r.ReadFile(id, int64(len(big)))
				case "trees":
					_, err = r.LoadTree(id)
				case "commits":
					_, err = r.LoadCommit(id)
				}
				// A flipped id in a chunk list names a chunk that is not there.
				if !errors.Is(err, objects.ErrCorrupt) && !errors.Is(err, objects.ErrNotCanonical) && !(tc.table == "files" && errors.Is(err, objects.ErrNotFound)) {
					t.Fatalf("reading the damaged %s: %v", tc.kind, err)
				}
			}
		})
	}
}

// commitOnMain moves main to a new commit on parent with its tree and,
// when trace is not nil, that content stored as the session's trace log.
func commitOnMain(r *Repo, parent objects.ID, trace []byte) objects.ID {
	tx, err := r.Begin()
	if err != nil {
		panic(err)
	}
	defer tx.Rollback()
	p, err := tx.LoadCommit(parent)
	if err != nil {
		panic(err)
	}
	c := &objects.Commit{Tree: p.Tree, Parents: []objects.ID{parent}, Time: 99, Message: "child"}
	if trace != nil {
		id, _, err := tx.PutFile(bytes.NewReader(trace))
		if err != nil {
			panic(err)
		}
		c.Session = &objects.Session{Mode: "run", TraceID: &id}
	}
	id, err := tx.PutCommit(c)
	if err != nil {
		panic(err)
	}
	if err := tx.SetBranch("main", id); err != nil {
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}
	return id
}

func wsTreeIDr(r *Repo, commit objects.ID) objects.ID {
	c, _ := r.LoadCommit(commit)
	e, _, _ := r.Lookup(c.Tree, []string{"ws"})
	return e.ID
}

// Regression: fsck served trees from the repository's cache, so a
// long-lived process did not notice a tree damaged after it was read.
// fsck reads one snapshot: what a session or a push writes while it runs
// is not half seen. It read each table on its own, and rows written after
// it read the chunks named chunks it had not seen: a live session's
// blocks, a push's trees, each reported "missing or damaged".
func TestFsckBesideAWriter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		phase string // the progress message after which the writer writes
		write func(t *testing.T, r *Repo, ws string, wt int64)
	}{
		{"session block", "checking worktrees", func(t *testing.T, r *Repo, ws string, wt int64) {
			tx, _ := r.Begin()
			chunk, _, err := tx.PutFile(strings.NewReader("written while fsck ran"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(`INSERT INTO upper_blocks(wt, ino, idx, chunk) VALUES(?, 7, 0, ?)`, wt, chunk[:]); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}},
		{"push", "checking trees", func(t *testing.T, r *Repo, ws string, wt int64) {
			writeFiles(t, ws, map[string]string{"new": "pushed while fsck ran\n", "d/e": "e\n"})
			push(t, r, ws, "during fsck")
		}},
		{"push before commits", "checking commits", func(t *testing.T, r *Repo, ws string, wt int64) {
			writeFiles(t, ws, map[string]string{"new2": "pushed while fsck ran\n"})
			push(t, r, ws, "during fsck")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "a\n"})
			push(t, r, ws, "")
			var wt int64
			if tc.phase == "checking worktrees" {
				w, _, err := r.CreateWorktree("main", "mount", "", "")
				if err != nil {
					t.Fatal(err)
				}
				wt = w.ID
			}
			wrote := false
			res, err := r.Fsck(func(s string) {
				if s == tc.phase && !wrote {
					wrote = true
					tc.write(t, r, ws, wt)
				}
			})
			if err != nil || !wrote {
				t.Fatalf("fsck: %v (wrote %v)", err, wrote)
			}
			if len(res.Problems) > 0 {
				t.Fatalf("fsck beside a writer found problems: %v", res.Problems)
			}
			fsckClean(t, r, "after the write")
		})
	}
}

func TestFsckIgnoresCache(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n"})
	res := push(t, r, ws, "")
	id := wsTreeIDr(r, res.Commit)
	mustTree(t, r, id) // now cached
	if _, err := r.DB.Exec(`UPDATE trees SET data = data || x'00' WHERE id=?`, id[:]); err != nil {
		t.Fatal(err)
	}
	if p := fsckProblems(t, r); !strings.Contains(p, "tree "+id.String()) {
		t.Fatalf("fsck missed the damaged tree; problems: %q", p)
	}
}

// Regression: gc failed with "FOREIGN KEY constraint failed" when the last
// push of a workspace was on a branch that had since been deleted, since
// the workspace row still referenced the commit being freed.
func TestGCFreesCommitAWorkspaceLastSynced(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n"})
	onMain := push(t, r, ws, "main").Commit
	writeFiles(t, ws, map[string]string{"b": "only on the doomed branch\n"})
	doomed, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: "doomed"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.DeleteBranch("doomed"); err != nil {
		t.Fatal(err)
	}
	res, err := r.GC(r.WorktreeRoots)
	if err != nil {
		t.Fatalf("gc: %v", err)
	}
	if res.Commits != 1 {
		t.Fatalf("gc result %+v", res)
	}
	if _, err := r.LoadCommit(doomed.Commit); !errors.Is(err, objects.ErrNotFound) {
		t.Fatalf("doomed commit: %v", err)
	}
	// The workspace still works: status, push and pull. It is synced with
	// the nearest ancestor gc kept, the base of its next push's merge.
	d, err := r.HostDrift(ws)
	if err != nil || !d.Synced || d.Commit != onMain {
		t.Fatalf("drift after gc %+v %v (want synced with %s)", d, err, onMain.Short())
	}
	next := push(t, r, ws, "again")
	pull(t, r, ws, next.Commit)
	if p := fsckProblems(t, reopen(t, r)); p != "" {
		t.Fatal(p)
	}
}

// A tree entry whose size disagrees with its content (what a pull that
// recorded a raced edit once led a push to store) is a problem fsck names.
func TestFsckChecksEntrySizes(t *testing.T) {
	r := newTestRepo(t)
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := tx.PutFile(strings.NewReader("abc"))
	if err != nil {
		t.Fatal(err)
	}
	tid, err := tx.PutTree(&objects.Tree{Entries: []objects.Entry{{Name: "f", Type: objects.TypeFile, Mode: 0o644, ID: id, Size: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	p := fsckProblems(t, r)
	if !strings.Contains(p, tid.String()) || !strings.Contains(p, `entry "f": size 10, its content `+id.Short()+` holds 3 bytes`) {
		t.Fatalf("fsck problems:\n%s", p)
	}
}

// TestFsckChecksUpperLayer: what a worktree's upper layer names must be
// stored; fsck said "no problems" while 'art commit' of the pending work
// could only fail.
func TestFsckChecksUpperLayer(t *testing.T) {
	const (
		fileIno = 5
		dirIno  = 6
		rootIno = 1
	)
	for _, tc := range []struct {
		name   string
		damage string // SQL run on the valid upper layer; ? is the worktree id
		want   string
	}{
		{"valid", ``, ``},
		{"block chunk deleted", `DELETE FROM chunks WHERE id=(SELECT chunk FROM upper_blocks WHERE wt=?)`, "inode 5 block 0: chunk"},
		{"block names no chunk", `UPDATE upper_blocks SET chunk=zeroblob(32) WHERE wt=?`, "inode 5 block 0: chunk 0000"},
		{"file base missing", `UPDATE upper_inodes SET base=zeroblob(32) WHERE wt=? AND ino=5`, "inode 5: base content 0000"},
		{"base size too large", `UPDATE upper_inodes SET base_size=1000 WHERE wt=? AND ino=5`, "inode 5: base size 1000, its content"},
		{"dir base missing", `UPDATE upper_inodes SET base=zeroblob(32) WHERE wt=? AND ino=6`, "inode 6: base tree 0000"},
		{"entry without inode", `DELETE FROM upper_inodes WHERE wt=? AND ino=5`, "directory inode 1: entry f names inode 5, which has no row"},
		{"rows of no worktree", `PRAGMA foreign_keys=OFF; DELETE FROM worktrees WHERE id=?; PRAGMA foreign_keys=ON`, "a row names a missing worktrees row"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "lower content\n", "d/x": "x\n"})
			c := push(t, r, ws, "").Commit
			w, _, err := r.CreateWorktree("main", "mount", "", "")
			if err != nil {
				t.Fatal(err)
			}
			cm, _ := r.LoadCommit(c)
			wsEnt, _, _ := r.Lookup(cm.Tree, []string{"ws"})
			a, _, _ := r.Lookup(cm.Tree, []string{"ws", "a"})
			tx, _ := r.Begin()
			chunk, _, err := tx.PutFile(strings.NewReader("upper data"))
			if err != nil {
				t.Fatal(err)
			}
			// A copied-up file over lower content with one written block,
			// a directory over a lower tree, and the root naming both.
			for _, q := range []struct {
				sql  string
				args []any
			}{
				{`INSERT INTO upper_inodes(wt, ino, type, mode, nlink, size, mtime, ctime, atime, base, base_size) VALUES(?,?,?,?,?,?,0,0,0,?,?)`,
					[]any{w.ID, rootIno, objects.TypeDir, 0o755, 3, 0, cm.Tree[:], 0}},
				{`INSERT INTO upper_inodes(wt, ino, type, mode, nlink, size, mtime, ctime, atime, base, base_size) VALUES(?,?,?,?,?,?,0,0,0,?,?)`,
					[]any{w.ID, fileIno, objects.TypeFile, 0o644, 1, 70000, a.ID[:], int64(a.Size)}},
				{`INSERT INTO upper_inodes(wt, ino, type, mode, nlink, size, mtime, ctime, atime, base, base_size) VALUES(?,?,?,?,?,?,0,0,0,?,?)`,
					[]any{w.ID, dirIno, objects.TypeDir, 0o755, 2, 0, wsEnt.ID[:], 0}},
				{`INSERT INTO upper_blocks(wt, ino, idx, chunk) VALUES(?, ?, 0, ?)`, []any{w.ID, fileIno, chunk[:]}},
				{`INSERT INTO upper_dirents(wt, dir, name, ino) VALUES(?, ?, 'f', ?)`, []any{w.ID, rootIno, fileIno}},
				{`INSERT INTO upper_dirents(wt, dir, name, ino) VALUES(?, ?, 'g', ?)`, []any{w.ID, rootIno, dirIno}},
				{`INSERT INTO upper_dirents(wt, dir, name, ino) VALUES(?, ?, 'gone', 0)`, []any{w.ID, rootIno}},
			} {
				if _, err := tx.Exec(q.sql, q.args...); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if tc.damage != "" {
				conn, err := r.DB.Conn(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				for _, stmt := range strings.Split(tc.damage, "; ") {
					var args []any
					if strings.Contains(stmt, "?") {
						args = []any{w.ID}
					}
					if _, err := conn.ExecContext(context.Background(), stmt, args...); err != nil {
						t.Fatal(err)
					}
				}
				conn.Close()
			}
			p := fsckProblems(t, r)
			if tc.want == "" && p != "" || tc.want != "" && !strings.Contains(p, tc.want) {
				t.Fatalf("fsck problems:\n%s\nwant %q", p, tc.want)
			}
		})
	}
}

// TestFsckChecksRefNames: a ref no art command could have made (one edited
// in, or damaged) is a problem.
func TestFsckChecksRefNames(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n"})
	c := push(t, r, ws, "").Commit
	if p := fsckProblems(t, r); p != "" {
		t.Fatalf("fsck of a sound repository:\n%s", p)
	}
	if _, err := r.DB.Exec(`INSERT INTO refs(name, commit_id) VALUES('../evil', ?)`, c[:]); err != nil {
		t.Fatal(err)
	}
	if p := fsckProblems(t, r); !strings.Contains(p, "ref ../evil: ") {
		t.Fatalf("fsck problems:\n%s", p)
	}
}

// gc compacts the repository file once a fifth of its pages is free, and
// only then (a compaction rewrites the whole file: it ran after every gc,
// and built its copy in memory, twice the repository's size in RAM even
// when nothing was freed). The connections keep their in-memory temp store.
func TestGCCompacts(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	rng := rand.New(rand.NewSource(1))
	big := make([]byte, 4<<20)
	rng.Read(big)
	writeFiles(t, ws, map[string]string{"small": "s\n"})
	push(t, r, ws, "small")
	if err := r.CreateBranch("keep", mustResolve(t, r, "main")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ws, map[string]string{"big": string(big)})
	push(t, r, ws, "big")

	res, err := r.GC(nil)
	if err != nil || res.CompactErr != nil || res.FileBefore != 0 {
		t.Fatalf("gc with nothing to free: %+v, %v; want no compaction", res, err)
	}
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.SetHead(Head{Branch: "keep"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DeleteBranch("main"); err != nil {
		t.Fatal(err)
	}
	// A reader's snapshot keeps the old pages: gc frees, says so, and
	// leaves the compaction (it waited 30 s twice, then reported one
	// that had not happened).
	ctx := context.Background()
	reader, err := r.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, `SELECT count(*) FROM commits`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	res, err = r.GC(nil)
	if err != nil || !errors.Is(res.CompactErr, ErrReaderHolds) || res.FileBefore != 0 || res.Commits == 0 {
		t.Fatalf("gc beside a reader: %+v, %v; want the objects freed and ErrReaderHolds", res, err)
	}
	if d := time.Since(begin); d > 15*time.Second {
		t.Errorf("gc beside a reader took %v", d)
	}
	reader.ExecContext(ctx, `ROLLBACK`)
	reader.Close()
	// The next gc compacts what is free.
	res, err = r.GC(nil)
	if err != nil || res.CompactErr != nil {
		t.Fatalf("gc: %+v, %v", res, err)
	}
	if res.FileBefore < 4<<20 || res.FileAfter >= 1<<20 {
		t.Errorf("compaction: %d → %d bytes; want 4 MiB and more → under 1 MiB", res.FileBefore, res.FileAfter)
	}
	for i := 0; i < 4; i++ { // every pooled connection
		var store int
		if err := r.DB.QueryRow(`PRAGMA temp_store`).Scan(&store); err != nil || store != 2 {
			t.Fatalf("temp_store %d after gc, %v; want 2 (memory)", store, err)
		}
	}
	if fr, err := r.Fsck(nil); err != nil || len(fr.Problems) > 0 {
		t.Fatalf("fsck after the compaction: %+v, %v", fr, err)
	}
}

// garbage stores 4 MiB no commit references and returns the repository's
// write-ahead log to empty.
func garbage(t *testing.T, r *Repo) {
	t.Helper()
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 4<<20)
	rand.New(rand.NewSource(3)).Read(big)
	if _, _, err := tx.PutFile(bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := r.ShrinkWAL(); err != nil {
		t.Fatal(err)
	}
}

// The checkpoint of compact failing outright (not a reader: the log or
// the file cannot be truncated, as after chattr +a): gc's deletions
// stand, the error says what failed and where, the repository stays
// sound, and the next gc compacts once the cause is gone.
func TestGCCompactionFails(t *testing.T) {
	for _, tc := range []struct{ name, suffix string }{
		{"the log cannot be truncated", "-wal"},
		{"the file cannot be truncated", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			garbage(t, r)
			testenv.Chattr(t, "+a", r.Path+tc.suffix)
			res, err := r.GC(nil)
			if err != nil {
				t.Fatalf("gc failed with its deletions done: %v", err)
			}
			if res.Files != 1 || res.Chunks == 0 {
				t.Errorf("gc freed %+v; want the garbage file and its chunks", res)
			}
			if res.CompactErr == nil || errors.Is(res.CompactErr, ErrReaderHolds) || res.FileBefore != 0 {
				t.Fatalf("compaction beside a file that cannot be truncated: %+v", res)
			}
			if msg := res.CompactErr.Error(); !strings.Contains(msg, "checkpoint "+r.Path) {
				t.Errorf("the error does not say what failed on which file: %v", res.CompactErr)
			}
			var n int
			if err := r.DB.QueryRow(`SELECT count(*) FROM chunks`).Scan(&n); err != nil || n != 0 {
				t.Errorf("the repository after the failed compaction: %d chunks, %v", n, err)
			}
			testenv.Unchattr(t, "+a", r.Path+tc.suffix)
			r = reopen(t, r)
			if fr, err := r.Fsck(nil); err != nil || len(fr.Problems) > 0 {
				t.Fatalf("fsck after the failed compaction: %+v, %v", fr, err)
			}
			res, err = r.GC(nil)
			if err != nil || res.CompactErr != nil {
				t.Fatalf("the next gc: %+v, %v", res, err)
			}
			if st, err := os.Stat(r.Path); err != nil || st.Size() > 1<<20 {
				t.Errorf("the file after the next gc: %v, %v; want it compacted", st.Size(), err)
			}
		})
	}
}

// gc's deletions are one transaction: a statement that fails in it (here
// a trigger aborts it) leaves every object, and the error says what
// failed, that nothing was deleted and what to do.
func TestGCFailureDeletesNothing(t *testing.T) {
	for _, tc := range []struct{ name, trigger, want string }{
		{"deleting a chunk", `CREATE TRIGGER inj BEFORE DELETE ON chunks BEGIN SELECT RAISE(ABORT, 'injected failure'); END`, "gc chunks"},
		{"deleting a commit", `CREATE TRIGGER inj BEFORE DELETE ON commits BEGIN SELECT RAISE(ABORT, 'injected failure'); END`, "gc commits"},
		{"clearing a workspace's commit", `CREATE TRIGGER inj BEFORE UPDATE ON workspaces BEGIN SELECT RAISE(ABORT, 'injected failure'); END`, "gc workspaces"},
		{"counting the gc", `CREATE TRIGGER inj BEFORE INSERT ON meta WHEN NEW.key='gc_generation' BEGIN SELECT RAISE(ABORT, 'injected failure'); END`, "gc: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "a1\n"})
			v1 := push(t, r, ws, "v1").Commit
			// Garbage of each kind: a commit no branch reaches, which
			// the workspace last synced with, and content no tree names.
			tx, err := r.Begin()
			if err != nil {
				t.Fatal(err)
			}
			dead := putCommitTx(t, tx, "dead", v1)
			if _, _, err := tx.PutFile(strings.NewReader(strings.Repeat("garbage\n", 1000))); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.DB.Exec(`UPDATE workspaces SET commit_id=?`, dead[:]); err != nil {
				t.Fatal(err)
			}
			if _, err := r.DB.Exec(tc.trigger); err != nil {
				t.Fatal(err)
			}
			before := dbDump(t, r.Path)
			_, err = r.GC(nil)
			if err == nil {
				t.Fatalf("gc did not fail")
			}
			for _, w := range []string{tc.want, "injected failure", "nothing was deleted", "run art gc again"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			if after := dbDump(t, r.Path); after != before {
				t.Errorf("the failed gc changed the repository")
			}
		})
	}
}

// A read-only view (art mount --ro) keeps its branch's commit after the
// branch is deleted (DeleteBranch allows that for views): gc must keep the
// view's base, its trees and content, not fail on it nor free it.
func TestGCKeepsTheBaseOfAViewOnADeletedBranch(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "on main\n"})
	push(t, r, ws, "main")
	writeFiles(t, ws, map[string]string{"b": "only on the viewed branch\n"})
	viewed, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: "viewed"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateView("viewed", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DeleteBranch("viewed"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GC(r.WorktreeRoots); err != nil {
		t.Fatalf("gc with a view on a deleted branch: %v", err)
	}
	files := wsEntries(t, r, viewed.Commit, "ws")
	if _, ok := files["b"]; !ok {
		t.Fatalf("the view's commit lost b: %v", files)
	}
	if p := fsckProblems(t, r); p != "" {
		t.Fatalf("fsck after gc:\n%s", p)
	}
}

// A session's syscall log (art run --trace) is named only by its commit
// (Session.TraceID): gc must keep it, with its chunks, while the commit is
// reachable, also when the log is cut into several chunks.
func TestGCKeepsASessionsTraceLog(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{
		{"one chunk", 100},
		{"several chunks", 700 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "a\n"})
			base := push(t, r, ws, "base").Commit
			trace := make([]byte, tc.size)
			rand.New(rand.NewSource(int64(tc.size))).Read(trace)
			tx, err := r.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			id, _, err := tx.PutFile(bytes.NewReader(trace))
			if err != nil {
				t.Fatal(err)
			}
			c, err := tx.LoadCommit(base)
			if err != nil {
				t.Fatal(err)
			}
			traced, err := tx.PutCommit(&objects.Commit{Tree: c.Tree, Parents: []objects.ID{base}, Time: 99, Message: "traced",
				Session: &objects.Session{Mode: "run", TraceID: &id}})
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.SetBranch("main", traced); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.GC(r.WorktreeRoots); err != nil {
				t.Fatal(err)
			}
			got, err := r.ReadFile(id, int64(len(trace)))
			if err != nil || !bytes.Equal(got, trace) {
				t.Fatalf("trace log after gc: %d bytes, %v", len(got), err)
			}
			if p := fsckProblems(t, r); p != "" {
				t.Fatalf("fsck after gc:\n%s", p)
			}
		})
	}
}

// Every parent of a reachable commit is reachable, not only the first: a
// push that merges records the host's own commit as the second parent,
// and gc freeing it left a history fsck reports as damaged.
func TestGCKeepsEveryParent(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n"})
	first := push(t, r, ws, "first").Commit
	writeFiles(t, ws, map[string]string{"b": "only on the side branch\n"})
	side, err := r.Push(context.Background(), PushOptions{Dir: ws, Branch: "side"})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	c, err := tx.LoadCommit(side.Commit)
	if err != nil {
		t.Fatal(err)
	}
	merge, err := tx.PutCommit(&objects.Commit{Tree: c.Tree, Parents: []objects.ID{first, side.Commit}, Time: 99, Message: "merge"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.SetBranch("main", merge); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DeleteBranch("side"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GC(r.WorktreeRoots); err != nil {
		t.Fatal(err)
	}
	if _, err := r.LoadCommit(side.Commit); err != nil {
		t.Fatalf("gc freed a merge's second parent: %v", err)
	}
	if p := fsckProblems(t, reopen(t, r)); p != "" {
		t.Fatalf("fsck after gc:\n%s", p)
	}
}

// What ExtraRoots names is kept with everything below it: a tree with its
// subtrees and files, a file with its chunks, a chunk as itself, even
// when no commit reaches them.
func TestGCKeepsExtraRoots(t *testing.T) {
	big := make([]byte, 700<<10) // several chunks
	rand.New(rand.NewSource(7)).Read(big)
	for _, tc := range []struct {
		name string
		// extra names what the upper layer references, from the ids
		// of a stored tree (holding sub/big), of big's file and of a
		// lone chunk.
		extra func(tree, file, chunk objects.ID) (trees, files, chunks []objects.ID)
		// kept: whether the tree, the file and the chunk must survive.
		tree, file, chunk bool
	}{
		{"a tree", func(tr, f, c objects.ID) ([]objects.ID, []objects.ID, []objects.ID) {
			return []objects.ID{tr}, nil, nil
		}, true, true, false},
		{"a file", func(tr, f, c objects.ID) ([]objects.ID, []objects.ID, []objects.ID) {
			return nil, []objects.ID{f}, nil
		}, false, true, false},
		{"a chunk", func(tr, f, c objects.ID) ([]objects.ID, []objects.ID, []objects.ID) {
			return nil, nil, []objects.ID{c}
		}, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "a\n"})
			push(t, r, ws, "")
			tx, err := r.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			file, size, err := tx.PutFile(bytes.NewReader(big))
			if err != nil {
				t.Fatal(err)
			}
			sub, err := tx.PutTree(&objects.Tree{Entries: []objects.Entry{{Name: "big", Type: objects.TypeFile, Mode: 0o644, ID: file, Size: uint64(size)}}})
			if err != nil {
				t.Fatal(err)
			}
			tree, err := tx.PutTree(&objects.Tree{Entries: []objects.Entry{{Name: "sub", Type: objects.TypeDir, Mode: 0o755, ID: sub}}})
			if err != nil {
				t.Fatal(err)
			}
			lone := []byte("a block of an upper layer\n")
			chunk := objects.Hash(lone)
			if err := tx.PutChunkEncoded(chunk, len(lone), objects.EncRaw, lone); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			trees, files, chunks := tc.extra(tree, file, chunk)
			if _, err := r.GC(func() ([]objects.ID, []objects.ID, []objects.ID, error) { return trees, files, chunks, nil }); err != nil {
				t.Fatal(err)
			}
			r = reopen(t, r)
			if _, err := r.LoadTree(sub); (err == nil) != tc.tree {
				t.Errorf("subtree after gc: %v, want kept %v", err, tc.tree)
			}
			if got, err := r.ReadFile(file, size); (err == nil && bytes.Equal(got, big)) != tc.file {
				t.Errorf("file after gc: %v, want kept %v", err, tc.file)
			}
			if _, err := r.LoadChunk(chunk); (err == nil) != tc.chunk {
				t.Errorf("chunk after gc: %v, want kept %v", err, tc.chunk)
			}
			if p := fsckProblems(t, r); p != "" {
				t.Fatalf("fsck after gc:\n%s", p)
			}
		})
	}
}

// keptAncestor follows first parents only: a workspace synced with a
// merge gc frees moves to the branch's side of it, as its doc says, not
// to the commit merged in.
func TestGCKeptAncestorFollowsFirstParents(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n"})
	root := push(t, r, ws, "root").Commit
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	first := putCommitTx(t, tx, "first", root)
	second := putCommitTx(t, tx, "second", root)
	mid := putCommitTx(t, tx, "mid", first)
	c, err := tx.LoadCommit(root)
	if err != nil {
		t.Fatal(err)
	}
	merge, err := tx.PutCommit(&objects.Commit{Tree: c.Tree, Parents: []objects.ID{mid, second}, Time: 99, Message: "merge"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		keep []objects.ID
		want objects.ID // zero: none
	}{
		{"first parent kept", []objects.ID{mid, second}, mid},
		{"only the merged-in parent kept", []objects.ID{second}, objects.Zero},
		{"first parents further back", []objects.ID{first, second}, first},
		{"the root", []objects.ID{root}, root},
		{"nothing kept", nil, objects.Zero},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keep := map[objects.ID]bool{}
			for _, id := range tc.keep {
				keep[id] = true
			}
			got, ok := r.keptAncestor(tx, merge, keep)
			if ok != !tc.want.IsZero() || got != tc.want {
				t.Errorf("keptAncestor = %s, %v; want %s", got.Short(), ok, tc.want.Short())
			}
		})
	}
}

// An upper layer names the lower trees of the directories it copied up
// and the lower content of its files (WorktreeRoots): gc reads each as
// what it is, a tree or a file.
func TestGCWithCopiedUpNodes(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"d/f": "lower content\n"})
	base := push(t, r, ws, "").Commit
	files := wsEntries(t, r, base, "ws")
	if files["d"] == "" || files["d/f"] == "" {
		t.Fatalf("tree %v", files)
	}
	c, err := r.LoadCommit(base)
	if err != nil {
		t.Fatal(err)
	}
	wsEntry, _, err := r.Lookup(c.Tree, []string{"ws"})
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := r.Lookup(c.Tree, []string{"ws", "d"})
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := r.Lookup(c.Tree, []string{"ws", "d", "f"})
	if err != nil {
		t.Fatal(err)
	}
	w, _, err := r.CreateWorktree("main", "mount", "", "")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	const ins = `INSERT INTO upper_inodes(wt, ino, type, mode, nlink, size, mtime, ctime, atime, base, base_size) VALUES(?, ?, ?, ?, 1, ?, 0, 0, 0, ?, ?)`
	for i, e := range []objects.Entry{wsEntry, d, f} {
		if _, err := tx.Exec(ins, w.ID, 10+i, int(e.Type), e.Mode, int64(e.Size), e.ID[:], int64(e.Size)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GC(r.WorktreeRoots); err != nil {
		t.Fatalf("gc with copied-up nodes: %v", err)
	}
	if p := fsckProblems(t, reopen(t, r)); p != "" {
		t.Fatalf("fsck after gc:\n%s", p)
	}
}

// A worktree's base commit, damaged, is a problem fsck names on the
// worktree: its pending work can be committed on no base.
func TestFsckChecksWorktreeBase(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n"})
	base := push(t, r, ws, "").Commit
	w, _, err := r.CreateWorktree("main", "mount", "", "")
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	if err := r.DB.QueryRow(`SELECT data FROM commits WHERE id=?`, base[:]).Scan(&data); err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x5a
	if _, err := r.DB.Exec(`UPDATE commits SET data=? WHERE id=?`, data, base[:]); err != nil {
		t.Fatal(err)
	}
	res, err := reopen(t, r).Fsck(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Problems {
		if p.Kind == "worktree" && p.ID == strconv.FormatInt(w.ID, 10) && strings.Contains(p.Msg, "base commit") {
			return
		}
	}
	t.Fatalf("fsck did not name worktree #%d's base; problems: %v", w.ID, res.Problems)
}
