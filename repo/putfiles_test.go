package repo

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/artproject/art/objects"
)

// putFilesContents returns n files: small, empty, multi-chunk, holes, and
// copies of one another, so that workers share chunks.
func putFilesContents(n int) [][]byte {
	rng := rand.New(rand.NewPCG(7, 11))
	random := func(size int) []byte {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	big := random(5 * objects.MaxChunk)
	out := make([][]byte, n)
	for i := range out {
		switch i % 6 {
		case 0:
			out[i] = []byte(fmt.Sprintf("small file %d\n", i))
		case 1:
			out[i] = nil // empty
		case 2:
			out[i] = big // the same multi-chunk content in many files
		case 3:
			out[i] = append(random(1000), make([]byte, 3*objects.MaxChunk)...) // a hole
		case 4:
			out[i] = bytes.Repeat([]byte("compressible "), 20000)
		case 5:
			out[i] = random(70_000 + i)
		}
	}
	return out
}

// PutFiles stores each file whole, with the id of its content, on all
// workers at once; content shared between files, or stored before, is
// stored once.
func TestPutFiles(t *testing.T) {
	r := newTestRepo(t)
	files := putFilesContents(60)
	put := func(files [][]byte) ([]StoredFile, int) {
		t.Helper()
		tx, err := r.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var calls int
		stored, err := tx.PutFiles(context.Background(), len(files), func(i int) (io.Reader, error) {
			return bytes.NewReader(files[i]), nil
		}, func(int, int64) { calls++ })
		if err != nil {
			t.Fatal(err)
		}
		if calls != len(files) {
			t.Errorf("stored was called %d times for %d files", calls, len(files))
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return stored, tx.NewObjects
	}
	stored, n := put(files)
	for i, f := range stored {
		if f.ID != objects.Hash(files[i]) || f.Size != int64(len(files[i])) {
			t.Fatalf("file %d: %s, %d bytes; want %s, %d", i, f.ID.Short(), f.Size, objects.Hash(files[i]).Short(), len(files[i]))
		}
		got, err := r.ReadFile(f.ID, f.Size)
		if err != nil || !bytes.Equal(got, files[i]) {
			t.Fatalf("file %d reads back %d bytes (%v), want %d", i, len(got), err, len(files[i]))
		}
	}
	// Each distinct chunk once, and each distinct multi-chunk file's list.
	want := map[objects.ID]bool{}
	for _, f := range files {
		ch := objects.NewChunker(bytes.NewReader(f), nil)
		chunks := 0
		for {
			c, err := ch.Next()
			if err != nil {
				break
			}
			want[objects.Hash(c)] = true
			chunks++
		}
		if chunks != 1 {
			want[objects.Hash(f)] = true // the list, or the empty chunk
		}
	}
	if n != len(want) {
		t.Errorf("%d new objects, want %d (each distinct chunk and file list once)", n, len(want))
	}
	if _, again := put(files); again != 0 {
		t.Errorf("storing the same files again wrote %d objects", again)
	}
	if res, err := r.Fsck(nil); err != nil || len(res.Problems) > 0 {
		t.Errorf("fsck after PutFiles: %v %v", err, res)
	}
}

// A file that cannot be opened or read fails PutFiles with a FileError
// naming it; the transaction can still be rolled back with nothing stored.
func TestPutFilesErrors(t *testing.T) {
	r := newTestRepo(t)
	files := putFilesContents(30)
	broken := errors.New("disk on fire")
	for _, tc := range []struct {
		name string
		open func(i int) (io.Reader, error)
	}{
		{"open fails", func(i int) (io.Reader, error) {
			if i == 17 {
				return nil, broken
			}
			return bytes.NewReader(files[i]), nil
		}},
		{"read fails midway", func(i int) (io.Reader, error) {
			if i == 17 {
				return io.MultiReader(bytes.NewReader(files[5]), iotestErrReader{broken}), nil
			}
			return bytes.NewReader(files[i]), nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := r.Begin()
			if err != nil {
				t.Fatal(err)
			}
			_, err = tx.PutFiles(context.Background(), len(files), tc.open, nil)
			var fe *FileError
			if !errors.As(err, &fe) || fe.Index != 17 || !errors.Is(err, broken) {
				t.Fatalf("PutFiles: %v, want a FileError for file 17 wrapping %v", err, broken)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			var chunks int
			r.DB.QueryRow(`SELECT count(*) FROM chunks`).Scan(&chunks)
			if chunks != 0 {
				t.Errorf("%d chunks stored after a rolled-back failure", chunks)
			}
		})
	}
	// The writer's own failure (here: the transaction is gone) is what
	// PutFiles reports, not the workers' being stopped.
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	_, err = tx.PutFiles(context.Background(), len(files), func(i int) (io.Reader, error) {
		return bytes.NewReader(files[i]), nil
	}, nil)
	if err == nil || errors.Is(err, errWriterFailed) || !errors.Is(err, sql.ErrTxDone) {
		t.Fatalf("PutFiles on a finished transaction: %v", err)
	}

	// A failed lookup of whether a chunk is stored (here: the cached
	// statement is closed) fails the file, naming the chunk, rather than
	// storing it again or leaving it out.
	const lookup = `SELECT 1 FROM chunks WHERE id=?`
	closed, err := r.DB.Prepare(lookup)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	r.stmtMu.Lock()
	saved := r.stmts[lookup]
	if r.stmts == nil {
		r.stmts = map[string]*sql.Stmt{}
	}
	r.stmts[lookup] = closed
	r.stmtMu.Unlock()
	tx, err = r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.PutFiles(context.Background(), len(files), func(i int) (io.Reader, error) {
		return bytes.NewReader(files[i]), nil
	}, nil)
	tx.Rollback()
	var fe *FileError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "look up chunk") {
		t.Fatalf("PutFiles with a failing chunk lookup: %v, want a FileError saying the lookup failed", err)
	}
	r.stmtMu.Lock()
	if saved != nil {
		r.stmts[lookup] = saved
	} else {
		delete(r.stmts, lookup)
	}
	r.stmtMu.Unlock()
	var chunks int
	r.DB.QueryRow(`SELECT count(*) FROM chunks`).Scan(&chunks)
	if chunks != 0 {
		t.Errorf("%d chunks stored after a failed lookup", chunks)
	}
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

// Regression (found by review): with its context canceled, PutFiles
// returned success with a zero id for every file no worker had taken, and
// a push canceled that way committed a tree naming no content (fsck:
// "content 0000… missing"). It must fail, and push with it.
func TestPutFilesCanceled(t *testing.T) {
	r := newTestRepo(t)
	files := putFilesContents(60)
	for try := range 20 {
		tx, err := r.Begin()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err = tx.PutFiles(ctx, len(files), func(i int) (io.Reader, error) {
			return bytes.NewReader(files[i]), nil
		}, nil)
		tx.Rollback()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("try %d: PutFiles with a canceled context: %v", try, err)
		}
	}
	ws := newWorkspace(t, "ws")
	for i := range 40 {
		writeFiles(t, ws, map[string]string{fmt.Sprintf("f%d", i): strings.Repeat(fmt.Sprint(i), 5000)})
	}
	before := commitIDs(t, r)
	ctx, cancel := context.WithCancel(context.Background())
	if res, err := r.Push(ctx, PushOptions{Dir: ws, beforeBegin: cancel}); !errors.Is(err, context.Canceled) {
		t.Fatalf("push with its context canceled: %v, %+v", err, res)
	}
	if after := commitIDs(t, r); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the canceled push committed: %v", after)
	}
}
