package repo

import (
	"context"
	"fmt"
	"io"

	"github.com/artproject/art/objects"
)

// DefaultStageAbove is how many bytes a push or a commit stores before
// it stages them (StageFiles) instead of storing them in its own
// transaction (Repo.StageAbove).
//
// One SQLite transaction that writes gigabytes is slower per byte the
// larger it grows: once its pages spill into the write-ahead log, SQLite
// looks up every page it writes among all the log's frames of the
// transaction (walFindFrame), so that storing a 2 GiB file took 25 s
// where 512 MiB took 3.6 s, and a 4 GiB commit 148 s, 60 % of it in that
// look-up. Staged, the log is checkpointed after every batch and stays
// small.
const DefaultStageAbove = 64 << 20

// DefaultStageBatch is how many bytes of objects each of StageFiles'
// transactions holds (Repo.StageBatch).
const DefaultStageBatch = 64 << 20

// Staged is what StageFiles stored, outside the caller's transaction.
//
// Until a commit names them, the staged objects are unreachable, and an
// art gc deletes them. The caller must therefore check, in the
// transaction that names them, that no gc ran since Gen (gcGeneration;
// gc is the only deleter of objects), and store the files again (or start
// over) when one did. A caller that gives up calls Drop.
type Staged struct {
	Files      []StoredFile
	Gen        int64 // the gc generation before the first chunk was looked up
	NewObjects int   // objects the staging inserted
	NewBytes   int64 // their stored bytes

	r      *Repo
	chunks []objects.ID // chunk rows inserted, in committed batches
	files  []objects.ID // file (chunk list) rows inserted, likewise
}

// StageFiles stores the contents of n files as PutFiles does, but in
// transactions of its own of about r.StageBatch bytes each, committed one
// after the other: the write lock is held for one batch at a time.
// On failure what it committed is dropped again (Staged.Drop).
func (r *Repo) StageFiles(ctx context.Context, n int, open func(i int) (io.Reader, error), stored func(i int, size int64)) (*Staged, error) {
	gen, err := gcGeneration(r.DB)
	if err != nil {
		return nil, err
	}
	st := &Staged{Gen: gen, r: r}
	s := &stager{st: st}
	var comp compressor
	w := newChunkWriter(r, comp.compress, s.put)
	out, err := w.putFiles(ctx, n, open, stored)
	werr := w.close()
	if werr == nil && err == nil {
		werr = s.commit()
	}
	s.rollback()
	if werr != nil {
		err = werr // the cause of any errWriterFailed
	}
	if err != nil {
		if derr := st.Drop(); derr != nil {
			return nil, fmt.Errorf("%w (and removing what was stored before failed: %v; art gc removes it)", err, derr)
		}
		return nil, err
	}
	st.Files = out
	return st, nil
}

// stager is StageFiles' writer: it inserts into a transaction of its own
// and commits it once it holds the repository's StageBatch bytes.
type stager struct {
	st      *Staged
	tx      *Tx
	bytes   int64
	chunks  []objects.ID // inserted by tx, not yet committed
	files   []objects.ID
	objects int
	stored  int64
}

func (s *stager) put(j writeJob) error {
	if s.tx == nil {
		tx, err := s.st.r.Begin()
		if err != nil {
			return err
		}
		s.tx = tx
	}
	before := s.tx.NewObjects
	if err := s.tx.putJob(j); err != nil {
		return err
	}
	if s.tx.NewObjects > before { // inserted, not there already
		if j.refs != nil {
			s.files = append(s.files, j.id)
		} else {
			s.chunks = append(s.chunks, j.id)
		}
	}
	s.bytes += int64(len(j.data))
	if s.bytes >= s.st.r.StageBatch {
		return s.commit()
	}
	return nil
}

// commit commits the current batch, if any.
func (s *stager) commit() error {
	if s.tx == nil {
		return nil
	}
	tx := s.tx
	s.tx, s.bytes = nil, 0
	if err := tx.Commit(); err != nil {
		s.chunks, s.files = nil, nil
		return fmt.Errorf("store a batch of objects: %w", err)
	}
	// SQLite checkpoints after a commit by itself, but then the readers
	// (a commit's workers reading the upper layer) still hold snapshots
	// of before it, and the log cannot start over at the next batch: it
	// grew to the whole staging (2 GB), and every write slowed with it.
	// A moment later they have moved on. Like SQLite's own, this
	// checkpoint is an optimization: the batch is committed, and a
	// checkpoint that fails (a full disk) is made again at the next.
	s.st.r.DB.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
	st := s.st
	st.chunks = append(st.chunks, s.chunks...)
	st.files = append(st.files, s.files...)
	st.NewObjects += tx.NewObjects
	st.NewBytes += tx.NewBytes
	s.chunks, s.files = nil, nil
	return nil
}

// rollback ends an uncommitted batch.
func (s *stager) rollback() {
	if s.tx != nil {
		s.tx.Rollback()
		s.tx = nil
	}
}

// Drop deletes the objects the staging inserted that nothing reaches
// now: gc's rule, applied to those rows only, and counted as a gc run
// when it deleted any (another staging may have found one of them
// stored and relied on it).
// A chunk that any stored chunk list names stays (see keepListed).
// Safe to call more than once, and on nil.
func (st *Staged) Drop() error {
	if st == nil || len(st.chunks)+len(st.files) == 0 {
		return nil
	}
	r := st.r
	tx, err := r.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	live, err := r.liveObjects(r.WorktreeRoots)
	if err != nil {
		return err
	}
	deleted := 0
	del := func(table string, id objects.ID) error {
		res, err := tx.Exec(`DELETE FROM `+table+` WHERE id=?`, id[:])
		if err != nil {
			return fmt.Errorf("drop staged %s %s: %w", table, id.Short(), err)
		}
		n, _ := res.RowsAffected()
		deleted += int(n)
		return nil
	}
	for _, id := range st.files {
		if live.rc.files[id] {
			continue
		}
		if err := del("files", id); err != nil {
			return err
		}
	}
	// A chunk list that stays names its chunks too, though nothing
	// reaches it: another staging (another process) may have found a
	// chunk of this one stored and committed a list naming it. Killed
	// before naming or dropping that list, it leaves it for gc, and the
	// chunk must stay with it (fsck checks every list's chunks).
	dead := map[objects.ID]bool{}
	for _, id := range st.chunks {
		if !live.chunks[id] {
			dead[id] = true
		}
	}
	if len(dead) > 0 {
		if err := tx.keepListed(dead); err != nil {
			return fmt.Errorf("drop staged chunks: %w", err)
		}
	}
	for _, id := range st.chunks {
		if !dead[id] {
			continue
		}
		if err := del("chunks", id); err != nil {
			return err
		}
	}
	// Only a deletion counts as a gc run: each one makes every push
	// that staged or read its stat cache meanwhile start over (three
	// times at most).
	if deleted > 0 {
		if err := bumpGCGeneration(tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("drop staged objects: %w", err)
	}
	st.chunks, st.files = nil, nil
	return nil
}

// Usable reports whether tx may name the staged objects: no gc ran since
// they were staged, which could have deleted them. When it may, tx counts
// them among its new objects.
func (st *Staged) Usable(tx *Tx) (bool, error) {
	gen, err := gcGeneration(tx)
	if err != nil || gen != st.Gen {
		return false, err
	}
	st.countIn(tx)
	return true, nil
}

// countIn counts the staged objects among tx's new objects.
func (st *Staged) countIn(tx *Tx) {
	tx.NewObjects += st.NewObjects
	tx.NewBytes += st.NewBytes
}

// keepListed removes from dead every chunk that a stored chunk list
// names (all of them when a list cannot be decoded).
func (tx *Tx) keepListed(dead map[objects.ID]bool) error {
	rows, err := tx.Query(`SELECT chunks FROM files`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var list []byte
		if err := rows.Scan(&list); err != nil {
			return err
		}
		refs, err := objects.DecodeChunkList(list)
		if err != nil {
			// A damaged list (fsck names it): which chunks it needs
			// cannot be told, so none is deleted; gc removes them.
			clear(dead)
			return nil
		}
		for _, c := range refs {
			delete(dead, c.ID)
		}
	}
	return rows.Err()
}
