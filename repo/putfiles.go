package repo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/artproject/art/objects"
)

// StoredFile is one file's content as PutFiles stored it.
type StoredFile struct {
	ID   objects.ID
	Size int64
}

// FileError is a failure to store one of PutFiles' files.
type FileError struct {
	Index int // the file's index, as given to open
	Err   error
}

func (e *FileError) Error() string { return e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// PutFiles stores the contents of n files with one worker per CPU and
// returns each one's id and size. open(i) gives file i's content (closed
// after reading when it is an io.Closer); stored, when set, is called as
// each file is done (from the workers, one call at a time).
//
// Workers read, cut into chunks and hash, and compress the chunks the
// repository lacks; one writer inserts them, since SQLite takes one
// writer at a time. The transaction must not be used otherwise until
// PutFiles returns. The first error stops the workers and comes back as a
// *FileError naming the file.
func (tx *Tx) PutFiles(ctx context.Context, n int, open func(i int) (io.Reader, error), stored func(i int, size int64)) ([]StoredFile, error) {
	w := newChunkWriter(tx.r, tx.compress, tx.putJob)
	out, err := w.putFiles(ctx, n, open, stored)
	if werr := w.close(); werr != nil {
		return nil, werr // the cause of any errWriterFailed
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// putJob inserts one of PutFiles' prepared jobs.
func (tx *Tx) putJob(j writeJob) error {
	if j.refs != nil {
		return tx.PutFileList(j.id, j.size, j.refs)
	}
	return tx.PutChunkEncoded(j.id, j.raw, j.enc, j.data)
}

// putFiles hands the n files to one worker per CPU and returns what they
// stored; the caller closes w.
func (w *chunkWriter) putFiles(ctx context.Context, n int, open func(i int) (io.Reader, error), stored func(i int, size int64)) ([]StoredFile, error) {
	out := make([]StoredFile, n)
	if n == 0 {
		return out, nil
	}
	g, gctx := errgroup.WithContext(ctx)
	var storedMu sync.Mutex
	next := make(chan int)
	for range min(runtime.NumCPU(), n) {
		g.Go(func() error {
			buf := make([]byte, 2*objects.MaxChunk)
			for i := range next {
				f, err := w.putStream(gctx, open, i, buf)
				if err != nil {
					return &FileError{Index: i, Err: err}
				}
				out[i] = f
				if stored != nil {
					storedMu.Lock()
					stored(i, f.Size)
					storedMu.Unlock()
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(next)
		for i := range n {
			select {
			case next <- i:
			case <-gctx.Done():
				// Files never handed out keep a zero id: this must be
				// an error, or the caller stores trees naming nothing
				// (a canceled push committed such a tree).
				return gctx.Err()
			}
		}
		return nil
	})
	err := g.Wait()
	if err == nil {
		err = ctx.Err() // canceled after the last file was handed out
	}
	return out, err
}

// chunkWriter is the one goroutine that inserts what PutFiles' workers
// prepared, through put (a transaction's, or a stager's). It remembers
// what it was given, so that a chunk two files share is compressed once.
type chunkWriter struct {
	r        *Repo
	compress func([]byte) ([]byte, int)
	jobs     chan writeJob
	done     chan struct{}
	failed   chan struct{} // closed when an insert failed
	err      error         // that failure; read once done is closed

	mu     sync.Mutex
	queued map[objects.ID]chan struct{} // closed once the chunk was sent to the writer (or given up)
}

// writeJob is a chunk (data set, or nil for the empty chunk) or a file's
// chunk list (refs set) to insert.
type writeJob struct {
	id   objects.ID
	raw  int
	enc  int
	data []byte
	size int64
	refs []objects.ChunkRef
}

func newChunkWriter(r *Repo, compress func([]byte) ([]byte, int), put func(writeJob) error) *chunkWriter {
	w := &chunkWriter{r: r, compress: compress, jobs: make(chan writeJob, 64), done: make(chan struct{}), failed: make(chan struct{}), queued: map[objects.ID]chan struct{}{}}
	go func() {
		defer close(w.done)
		for j := range w.jobs {
			if w.err != nil {
				continue // drain, so that no worker blocks
			}
			if err := put(j); err != nil {
				w.err = err
				close(w.failed)
			}
		}
	}()
	return w
}

// errWriterFailed stops a worker once the writer failed; PutFiles
// reports the writer's own error instead.
var errWriterFailed = errors.New("storing failed")

// close waits for every queued insert and reports the first failure.
func (w *chunkWriter) close() error {
	close(w.jobs)
	<-w.done
	return w.err
}

func (w *chunkWriter) send(ctx context.Context, j writeJob) error {
	select {
	case w.jobs <- j:
		return nil
	case <-w.failed:
		return errWriterFailed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// claim reports whether chunk id still needs storing: neither queued by
// another file of this call nor in the repository.
//
// The workers ask on connections of their own, not the transaction's:
// the transaction's connection is the writer's, and database/sql lets a
// row be read from it while the writer inserts, which SQLite refuses
// (SQLITE_MISUSE). Other connections see what was committed before the
// transaction (no gc can commit during it); a chunk this transaction
// stored before PutFiles would merely be compressed again, its insert
// doing nothing. When staging (StageFiles), they see the batches
// committed so far too, and a gc may delete what they found before the
// caller's transaction names it: the caller checks (Staged.Usable).
//
// sent is closed once the chunk was handed to the writer (at once when
// it is in the repository): a chunk list is sent only after each of its
// chunks was, so that a staging never commits a list before a chunk it
// names (another file's worker may still be compressing it). When need
// is true the caller closes sent.
func (w *chunkWriter) claim(id objects.ID) (need bool, sent chan struct{}, err error) {
	w.mu.Lock()
	if ch, ok := w.queued[id]; ok {
		w.mu.Unlock()
		return false, ch, nil
	}
	ch := make(chan struct{})
	w.queued[id] = ch
	w.mu.Unlock()
	defer func() {
		if !need {
			close(ch)
		}
	}()
	s, err := w.r.stmt(`SELECT 1 FROM chunks WHERE id=?`)
	if err != nil {
		return false, ch, err
	}
	var one int
	err = s.QueryRow(id[:]).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return true, ch, nil
	}
	return false, ch, err
}

// putStream stores file i: chunks the writer is to insert, then its
// chunk list when it has more than one chunk. Runs of zeros (holes) are
// cut into equal chunks of zeros; only the first is hashed and stored.
func (w *chunkWriter) putStream(ctx context.Context, open func(int) (io.Reader, error), i int, buf []byte) (StoredFile, error) {
	rd, err := open(i)
	if err != nil {
		return StoredFile{}, err
	}
	if c, ok := rd.(io.Closer); ok {
		defer c.Close()
	}
	ch := objects.NewChunker(rd, buf)
	h := objects.NewHasher()
	var refs []objects.ChunkRef
	var size int64
	var zero objects.ChunkRef
	var waits []chan struct{} // chunks other files' workers are sending
	for {
		c, err := ch.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return StoredFile{}, err
		}
		h.Write(c)
		var id objects.ID
		if zero.Size != 0 && len(c) == int(zero.Size) && objects.IsZero(c) {
			id = zero.ID
		} else {
			id = objects.Hash(c)
			if objects.IsZero(c) {
				zero = objects.ChunkRef{ID: id, Size: uint32(len(c))}
			}
			sent, err := w.putChunk(ctx, id, c)
			if err != nil {
				return StoredFile{}, err
			}
			if sent != nil {
				waits = append(waits, sent)
			}
		}
		refs = append(refs, objects.ChunkRef{ID: id, Size: uint32(len(c))})
		size += int64(len(c))
	}
	if size == 0 {
		_, err := w.putChunk(ctx, objects.Hash(nil), nil)
		return StoredFile{ID: objects.Hash(nil)}, err
	}
	id := h.Sum()
	if len(refs) > 1 {
		for _, ch := range waits {
			select {
			case <-ch:
			case <-w.failed:
				return StoredFile{}, errWriterFailed
			case <-ctx.Done():
				return StoredFile{}, ctx.Err()
			}
		}
		if err := w.send(ctx, writeJob{id: id, size: size, refs: refs}); err != nil {
			return StoredFile{}, err
		}
	}
	return StoredFile{ID: id, Size: size}, nil
}

// putChunk compresses chunk c (whose id is id) and queues it, unless it
// is stored or queued already. c is only valid until the chunker's next
// call, so what is queued is always a copy.
//
// It returns, when another file's worker is sending the chunk, a channel
// closed once that worker did (see claim).
func (w *chunkWriter) putChunk(ctx context.Context, id objects.ID, c []byte) (chan struct{}, error) {
	need, sent, err := w.claim(id)
	if err != nil {
		return nil, fmt.Errorf("look up chunk %s: %w", id.Short(), err)
	}
	if !need {
		return sent, nil
	}
	defer close(sent) // sent, or given up: the error stops the other workers
	data, enc := w.compress(c)
	if enc == objects.EncRaw {
		data = append([]byte{}, c...)
	}
	return nil, w.send(ctx, writeJob{id: id, raw: len(c), enc: enc, data: data})
}
