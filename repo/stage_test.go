package repo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artproject/art/objects"
)

// stagingRepo is a repository that stages anything over 1 MiB in batches
// of 256 KiB, so that tests stage with a few MiB.
func stagingRepo(t *testing.T) *Repo {
	t.Helper()
	r := newTestRepo(t)
	r.StageAbove, r.StageBatch = 1<<20, 256<<10
	return r
}

// randomBytes returns n bytes that do not compress, the same for a seed.
func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func fsckClean(t *testing.T, r *Repo, when string) {
	t.Helper()
	res, err := r.Fsck(nil)
	if err != nil || len(res.Problems) > 0 {
		t.Fatalf("fsck %s: %v %v", when, err, res.Problems)
	}
}

// StageFiles returns what PutFiles would, every object committed.
func TestStageFiles(t *testing.T) {
	r := stagingRepo(t)
	contents := [][]byte{randomBytes(1, 3<<20), []byte("small\n"), nil, randomBytes(2, 1<<20)}
	st, err := r.StageFiles(context.Background(), len(contents), func(i int) (io.Reader, error) {
		return bytes.NewReader(contents[i]), nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r = reopen(t, r) // what reads back was committed
	for i, c := range contents {
		if st.Files[i].ID != objects.Hash(c) && len(c) <= objects.MaxChunk {
			t.Errorf("file %d: id %s, want %s", i, st.Files[i].ID.Short(), objects.Hash(c).Short())
		}
		got, err := r.ReadFile(st.Files[i].ID, st.Files[i].Size)
		if err != nil || !bytes.Equal(got, c) {
			t.Errorf("file %d reads back wrong (%d bytes, err %v)", i, len(got), err)
		}
	}
	if st.NewObjects == 0 || st.NewBytes < 4<<20 {
		t.Errorf("staged %d objects of %d bytes", st.NewObjects, st.NewBytes)
	}
}

// The stager commits a batch once it holds StageBatch bytes: other
// connections see its chunks before the staging ends.
func TestStagerCommitsEachBatch(t *testing.T) {
	r := stagingRepo(t)
	st := &Staged{r: r}
	s := &stager{st: st}
	defer s.rollback()
	data := randomBytes(8, 64<<10)
	for i := range 12 { // 768 KiB: three batches of 256 KiB
		id := objects.Hash(append([]byte{byte(i)}, data...))
		if err := s.put(writeJob{id: id, raw: len(data), enc: objects.EncRaw, data: data}); err != nil {
			t.Fatal(err)
		}
		if want := (i + 1) / 4 * 4; countRows(t, r, "chunks") != want {
			t.Fatalf("after %d chunks, %d are committed, want %d", i+1, countRows(t, r, "chunks"), want)
		}
	}
	if len(st.chunks) != 12 || st.NewObjects != 12 {
		t.Errorf("staged %d chunks, %d objects, want 12", len(st.chunks), st.NewObjects)
	}
}

// A push with much to store stages it; the commit is the same as a push
// in one transaction makes, and reads back whole.
func TestStagedPush(t *testing.T) {
	files := map[string]string{
		"big":       string(randomBytes(3, 2<<20)),
		"d/big2":    string(randomBytes(4, 1<<20+17)),
		"d/small":   "small\n",
		"same/big":  string(randomBytes(3, 2<<20)),
		"empty":     "",
		"zeros.bin": string(make([]byte, 1<<20)),
	}
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, files)
	var ids [2]objects.ID
	for i, above := range []int64{1 << 20, 1 << 40} {
		r := stagingRepo(t)
		r.StageAbove = above
		res := push(t, r, ws, "v1")
		c, err := r.LoadCommit(res.Commit)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = c.Tree
		if res.NewObjects == 0 || res.NewBytes < 3<<20 {
			t.Errorf("push reports %d new objects, %d bytes", res.NewObjects, res.NewBytes)
		}
		got := contentOf(t, r, res.Commit, "ws")
		for p, want := range files {
			if got[p] != want {
				t.Errorf("%s: %d bytes back, want %d", p, len(got[p]), len(want))
			}
		}
		fsckClean(t, r, "after a staged push")
	}
	if ids[0] != ids[1] {
		t.Errorf("the staged push made tree %s, one transaction %s", ids[0].Short(), ids[1].Short())
	}
}

// A gc between the staging and the push's transaction deletes what was
// staged (nothing reached it yet): the push sees the gc and starts over,
// and the commit it makes is whole.
func TestStagedPushRacesGC(t *testing.T) {
	r := stagingRepo(t)
	ws := newWorkspace(t, "ws")
	big := string(randomBytes(5, 3<<20))
	writeFiles(t, ws, map[string]string{"big": big, "small": "s\n"})
	gcs := 0
	res, err := r.Push(context.Background(), PushOptions{Dir: ws, Message: "m", beforeBegin: func() {
		if gcs == 0 {
			gcs++
			g, err := r.GC(nil)
			if err != nil {
				t.Fatal(err)
			}
			if g.Chunks == 0 {
				t.Errorf("gc found nothing staged to delete")
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := contentOf(t, r, res.Commit, "ws"); got["big"] != big {
		t.Errorf("big: %d bytes back", len(got["big"]))
	}
	fsckClean(t, r, "after a staged push that raced a gc")
}

// A push that fails after staging (a conflict, a cancel, a file it cannot
// read) removes what it staged: the repository holds what it held.
func TestFailedStagedPushDropsWhatItStored(t *testing.T) {
	for _, tc := range []struct {
		name string
		push func(t *testing.T, r *Repo, ws string) error
	}{
		{"canceled", func(t *testing.T, r *Repo, ws string) error {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := r.Push(ctx, PushOptions{Dir: ws, Progress: func(done, total int64) {
				if done > 1<<20 {
					cancel()
				}
			}})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("push: %v, want canceled", err)
			}
			return err
		}},
		{"conflict", func(t *testing.T, r *Repo, ws string) error {
			agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"a": "agent\n"}) })
			writeFiles(t, ws, map[string]string{"a": "host\n"})
			_, err := r.Push(context.Background(), PushOptions{Dir: ws})
			if err == nil || !strings.Contains(err.Error(), "a") {
				t.Errorf("push: %v, want a conflict on a", err)
			}
			return err
		}},
		{"a file replaced by a directory while read", func(t *testing.T, r *Repo, ws string) error {
			_, err := r.Push(context.Background(), PushOptions{Dir: ws, Progress: func(done, total int64) {
				p := filepath.Join(ws, "last")
				if os.Remove(p) == nil {
					os.Mkdir(p, 0o755)
				}
			}})
			if err == nil || !strings.Contains(err.Error(), "nothing was committed") {
				t.Errorf("push: %v, want a file error", err)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := stagingRepo(t)
			ws := newWorkspace(t, "ws")
			writeFiles(t, ws, map[string]string{"a": "a\n"})
			push(t, r, ws, "v1")
			for i := range 4 {
				writeFiles(t, ws, map[string]string{string(rune('b'+i)) + "/big": string(randomBytes(uint64(10+i), 1<<20))})
			}
			writeFiles(t, ws, map[string]string{"last": string(randomBytes(20, 1<<20))})
			tipBefore, _ := r.BranchTip("main")
			chunks, files := countRows(t, r, "chunks"), countRows(t, r, "files")
			if tc.push(t, r, ws) == nil {
				return
			}
			if tip, _ := r.BranchTip("main"); tip != tipBefore && tc.name != "conflict" {
				t.Errorf("main moved to %s", tip.Short())
			}
			if tc.name != "conflict" { // the session added its own objects
				if c, f := countRows(t, r, "chunks"), countRows(t, r, "files"); c != chunks || f != files {
					t.Errorf("after the failed push: %d chunks and %d files, before %d and %d", c, f, chunks, files)
				}
			}
			g, err := r.GC(nil)
			if err != nil {
				t.Fatal(err)
			}
			if g.Chunks != 0 || g.Files != 0 {
				t.Errorf("gc after the failed push still freed %d chunks and %d files", g.Chunks, g.Files)
			}
			fsckClean(t, r, "after a failed staged push")
		})
	}
}

// Drop leaves what something reachable names, though it staged it: a
// push that found the chunk stored named it in its commit meanwhile.
func TestDropKeepsWhatIsReachable(t *testing.T) {
	r := stagingRepo(t)
	shared := randomBytes(6, 2<<20)
	alone := randomBytes(7, 2<<20)
	st, err := r.StageFiles(context.Background(), 2, func(i int) (io.Reader, error) {
		return bytes.NewReader([][]byte{shared, alone}[i]), nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.StageAbove = 1 << 40 // this push in one transaction, finding shared's chunks stored
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"shared": string(shared)})
	c := push(t, r, ws, "names shared").Commit
	if err := st.Drop(); err != nil {
		t.Fatal(err)
	}
	if got := contentOf(t, r, c, "ws"); got["shared"] != string(shared) {
		t.Fatalf("shared: %d bytes back after the drop", len(got["shared"]))
	}
	if _, err := r.ReadFile(st.Files[1].ID, st.Files[1].Size); err == nil {
		t.Errorf("the file nothing named is still there after the drop")
	}
	fsckClean(t, r, "after a drop")
	if err := st.Drop(); err != nil {
		t.Errorf("a second drop: %v", err)
	}
}

// A Drop leaves no chunk list naming a chunk it deletes: another staging
// (another process) that found a staged chunk stored and committed its
// own chunk list naming it, then was killed before naming either, left
// that list behind, and fsck took the repository for damaged ("chunk
// missing") until a gc ran.
func TestDropKeepsChunksAnotherStagingNames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other [][]byte // what the other staging stores
	}{
		{"same file", [][]byte{randomBytes(11, 2<<20)}},
		{"file sharing a chunk", [][]byte{append(randomBytes(11, 2<<20), randomBytes(12, 1<<20)...)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := stagingRepo(t)
			mine := randomBytes(11, 2<<20)
			a, err := r.StageFiles(context.Background(), 1, func(int) (io.Reader, error) {
				return bytes.NewReader(mine), nil
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			// The other process: its own connections, finding a's chunks.
			r2, err := Open(r.Path)
			if err != nil {
				t.Fatal(err)
			}
			defer r2.Close()
			r2.StageAbove, r2.StageBatch = r.StageAbove, r.StageBatch
			b, err := r2.StageFiles(context.Background(), len(tc.other), func(i int) (io.Reader, error) {
				return bytes.NewReader(tc.other[i]), nil
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Drop(); err != nil {
				t.Fatal(err)
			}
			// b's process is killed here: it neither names nor drops.
			fsckClean(t, r, "after a drop beside another staging")
			for i, f := range b.Files {
				if got, err := r.ReadFile(f.ID, f.Size); err == nil && !bytes.Equal(got, tc.other[i]) {
					t.Errorf("file %d reads back wrong", i)
				}
			}
		})
	}
}

// A staged chunk list is committed no earlier than its chunks: two files
// sharing a chunk, the worker of the second found it queued by the first
// and sent its list while the first still compressed it. In batches of
// their own, the list could commit before the chunk, and a kill in
// between left a list naming a missing chunk (fsck: "chunk missing").
func TestStagedListAfterItsChunks(t *testing.T) {
	r := stagingRepo(t)
	r.StageBatch = 1 // every insert its own committed batch
	content := randomBytes(21, 3*objects.MaxChunk)
	release := make(chan struct{})
	var once sync.Once
	blocked := make(chan objects.ID, 1)
	var comp compressor
	compress := func(c []byte) ([]byte, int) {
		// The first chunk compressed waits until a list is put (or a
		// moment passes, when lists wait for their chunks).
		id := objects.Hash(c)
		stall := false
		once.Do(func() { stall = true })
		if stall {
			blocked <- id
			select {
			case <-release:
			case <-time.After(time.Second):
			}
		}
		return comp.compress(c)
	}
	st := &Staged{r: r}
	s := &stager{st: st}
	defer s.rollback()
	var mu sync.Mutex
	var bad []string
	put := func(j writeJob) error {
		if j.refs != nil {
			for _, c := range j.refs {
				var one int
				if err := r.DB.QueryRow(`SELECT 1 FROM chunks WHERE id=?`, c.ID[:]).Scan(&one); err != nil {
					mu.Lock()
					bad = append(bad, c.ID.Short())
					mu.Unlock()
				}
			}
			select {
			case <-release:
			default:
				close(release)
			}
		}
		return s.put(j)
	}
	w := newChunkWriter(r, compress, put)
	_, err := w.putFiles(context.Background(), 2, func(int) (io.Reader, error) {
		return bytes.NewReader(content), nil
	}, nil)
	if werr := w.close(); err == nil {
		err = werr
	}
	if err == nil {
		err = s.commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	<-blocked
	if len(bad) > 0 {
		t.Errorf("a chunk list was put before its chunks %v were committed", bad)
	}
}

// A drop that deletes nothing (everything it staged is named by now)
// does not count as a gc run: every concurrent push would start over.
func TestDropOfNothingIsNoGCRun(t *testing.T) {
	r := stagingRepo(t)
	content := randomBytes(9, 2<<20)
	st, err := r.StageFiles(context.Background(), 1, func(int) (io.Reader, error) { return bytes.NewReader(content), nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.StageAbove = 1 << 40
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"f": string(content)})
	push(t, r, ws, "names it all")
	gen, err := gcGeneration(r.DB)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Drop(); err != nil {
		t.Fatal(err)
	}
	if after, _ := gcGeneration(r.DB); after != gen {
		t.Errorf("a drop that deleted nothing moved the gc generation %d -> %d", gen, after)
	}
}

// A push whose drop of what it staged fails says so and that art gc
// removes it; the repository stays whole, and gc then frees it.
func TestFailedDropAfterAStagedPush(t *testing.T) {
	r := stagingRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a": "a\n"})
	push(t, r, ws, "v1")
	agentSession(t, r, func(dir string) { writeFiles(t, dir, map[string]string{"a": "agent\n"}) })
	writeFiles(t, ws, map[string]string{"a": "host\n", "big": string(randomBytes(11, 2<<20))})
	if _, err := r.DB.Exec(`CREATE TRIGGER stop BEFORE DELETE ON chunks BEGIN SELECT RAISE(ABORT, 'injected'); END`); err != nil {
		t.Fatal(err)
	}
	_, err := r.Push(context.Background(), PushOptions{Dir: ws})
	if !errors.Is(err, ErrPushConflict) || !strings.Contains(err.Error(), "injected") || !strings.Contains(err.Error(), "art gc removes it") {
		t.Fatalf("push: %v, want the conflict and the failed removal", err)
	}
	fsckClean(t, r, "after a drop that failed")
	if _, err := r.DB.Exec(`DROP TRIGGER stop`); err != nil {
		t.Fatal(err)
	}
	if g, err := r.GC(nil); err != nil || g.Chunks == 0 {
		t.Errorf("gc after the failed drop: %+v %v, want the staged chunks freed", g, err)
	}
	fsckClean(t, r, "after gc")
}
