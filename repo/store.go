package repo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/artproject/art/objects"
)

// objCache keeps decoded trees and recently read chunks, bounded in bytes,
// so the overlay's lower layer does not hit SQLite for every lookup.
type objCache struct {
	mu     sync.Mutex
	trees  *lru[*objects.Tree]
	chunks *lru[[]byte]
}

func (c *objCache) init() {
	// A tree larger than the bound (a directory of a million entries)
	// is kept alone rather than read again for every lookup in it.
	c.trees = newLRU[*objects.Tree](maxCachedTreeBytes, 8*maxCachedTreeBytes)
	c.chunks = newLRU[[]byte](64<<20, 64<<20/8)
}

// maxCachedTreeBytes bounds the decoded trees kept, least recently used
// first out. Bounded by count (200,000 trees) it held that many versions
// of a 100k-entry directory: art log of 100 sessions in one took 3 GB,
// computing each commit's changes. Emptied whole when full, it made a
// mount that went between two 200k-entry directories decode each again
// on every lookup.
const maxCachedTreeBytes = 128 << 20

// treeCost estimates the memory a decoded tree takes: an Entry struct per
// entry plus its encoding's bytes (names, targets, xattrs).
func treeCost(t *objects.Tree, encoded int) int {
	return 64 + encoded + len(t.Entries)*int(unsafe.Sizeof(objects.Entry{}))
}

// LoadChunk returns a chunk's verified content.
func (r *Repo) LoadChunk(id objects.ID) ([]byte, error) { return r.loadChunk(r.cached(), id, true) }

// LoadChunk reads a chunk inside the transaction, seeing its own writes;
// not cached, as the transaction may still roll back.
func (tx *Tx) LoadChunk(id objects.ID) ([]byte, error) { return tx.r.loadChunk(tx, id, false) }

func (r *Repo) loadChunk(q querier, id objects.ID, cache bool) ([]byte, error) {
	r.mu.Lock()
	if v, ok := r.chunks.get(id); ok {
		r.mu.Unlock()
		return v, nil
	}
	r.mu.Unlock()
	raw, err := loadChunk(q, id)
	if err != nil {
		return nil, err
	}
	if cache {
		r.mu.Lock()
		r.chunks.add(id, raw, len(raw))
		r.mu.Unlock()
	}
	return raw, nil
}

// loadChunk reads and verifies a chunk through q, bypassing the cache.
func loadChunk(q querier, id objects.ID) ([]byte, error) {
	var size, enc int
	var data []byte
	err := q.QueryRow(`SELECT size, enc, data FROM chunks WHERE id=?`, id[:]).Scan(&size, &enc, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("chunk %s: %w", id, objects.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", id, err)
	}
	raw, err := objects.Decompress(data, enc, size)
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", id, err)
	}
	if len(raw) != size || objects.Hash(raw) != id {
		return nil, fmt.Errorf("chunk %s: %w: content does not match its id", id, objects.ErrCorrupt)
	}
	return raw, nil
}

// LoadFileChunks returns the chunk list of a file.
func (r *Repo) LoadFileChunks(id objects.ID) ([]objects.ChunkRef, error) {
	return loadFileChunks(r.cached(), id)
}

// LoadFileChunks reads a file's chunk list inside the transaction.
func (tx *Tx) LoadFileChunks(id objects.ID) ([]objects.ChunkRef, error) {
	return loadFileChunks(tx, id)
}

func loadFileChunks(q querier, id objects.ID) ([]objects.ChunkRef, error) {
	var list []byte
	var size int64
	err := q.QueryRow(`SELECT size, chunks FROM files WHERE id=?`, id[:]).Scan(&size, &list)
	if errors.Is(err, sql.ErrNoRows) {
		var csize int64
		err = q.QueryRow(`SELECT size FROM chunks WHERE id=?`, id[:]).Scan(&csize)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("file %s: %w", id, objects.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("file %s: %w", id, err)
		}
		return []objects.ChunkRef{{ID: id, Size: uint32(csize)}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", id, err)
	}
	refs, err := objects.DecodeChunkList(list)
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", id, err)
	}
	var total int64
	for _, ref := range refs {
		total += int64(ref.Size)
	}
	if total != size {
		return nil, fmt.Errorf("file %s: %w: chunk sizes add up to %d, not %d", id, objects.ErrCorrupt, total, size)
	}
	return refs, nil
}

// LoadTree returns a verified, decoded tree. Callers must not modify it.
func (r *Repo) LoadTree(id objects.ID) (*objects.Tree, error) {
	return r.loadTree(r.cached(), id, true)
}

// loadTreeOnce reads a tree that the caller reads once (a walk of every
// version, as art log's counts and gc's do) without caching it: kept,
// every version of a wide directory took the cache's room from the trees
// a mount looks up again and again (art log and gc took 461 MB for 100
// sessions in a 20k-file directory).
func (r *Repo) loadTreeOnce(id objects.ID) (*objects.Tree, error) {
	return r.loadTree(r.cached(), id, false)
}

// LoadTree reads a tree inside the transaction, seeing its own writes.
// Trees read here are not cached: the transaction may still roll back.
func (tx *Tx) LoadTree(id objects.ID) (*objects.Tree, error) { return tx.r.loadTree(tx, id, false) }

func (r *Repo) loadTree(q querier, id objects.ID, cache bool) (*objects.Tree, error) {
	r.mu.Lock()
	if t, ok := r.trees.get(id); ok {
		r.mu.Unlock()
		return t, nil
	}
	r.mu.Unlock()
	var size, enc int
	var data []byte
	err := q.QueryRow(`SELECT size, enc, data FROM trees WHERE id=?`, id[:]).Scan(&size, &enc, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("tree %s: %w", id, objects.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", id, err)
	}
	raw, err := objects.Decompress(data, enc, size)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", id, err)
	}
	if len(raw) != size {
		return nil, fmt.Errorf("tree %s: %w: %d bytes, the size field says %d", id, objects.ErrCorrupt, len(raw), size)
	}
	if objects.Hash(raw) != id {
		return nil, fmt.Errorf("tree %s: %w: content does not match its id", id, objects.ErrCorrupt)
	}
	t, err := objects.DecodeTree(raw)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", id, err)
	}
	if cache {
		r.mu.Lock()
		r.trees.add(id, t, treeCost(t, size))
		r.mu.Unlock()
	}
	return t, nil
}

// LoadCommit returns a verified, decoded commit.
func (r *Repo) LoadCommit(id objects.ID) (*objects.Commit, error) { return loadCommit(r.cached(), id) }

// LoadCommit reads a commit inside the transaction.
func (tx *Tx) LoadCommit(id objects.ID) (*objects.Commit, error) { return loadCommit(tx, id) }

func loadCommit(q querier, id objects.ID) (*objects.Commit, error) {
	var data []byte
	err := q.QueryRow(`SELECT data FROM commits WHERE id=?`, id[:]).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("commit %s: %w", id, objects.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", id, err)
	}
	if objects.Hash(data) != id {
		return nil, fmt.Errorf("commit %s: %w: content does not match its id", id, objects.ErrCorrupt)
	}
	c, err := objects.DecodeCommit(data)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", id, err)
	}
	return c, nil
}

// ReadFile returns the whole content of a small stored file.
func (r *Repo) ReadFile(id objects.ID, size int64) ([]byte, error) {
	fr, err := objects.NewFileReader(r, id, size)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(fr, buf); err != nil && size > 0 {
		return nil, fmt.Errorf("read file %s: %w", id.Short(), err)
	}
	return buf, nil
}

var (
	_ objects.Loader = (*Repo)(nil)
	_ objects.Loader = (*Tx)(nil)
)

// Tx is a write transaction on the object store and refs.
type Tx struct {
	*sql.Tx
	r          *Repo
	NewObjects int   // objects written by this transaction
	NewBytes   int64 // stored (compressed) bytes written
	comp       compressor
}

// strongAfter is how many raw bytes a transaction compresses at the
// fastest zstd level before it switches to the stronger one. The stronger
// level's 4 MiB match table costs about 15 ms of page faults the first
// time a process touches it: more than it saves on a small push or a
// session commit, and nothing next to a push of megabytes, which it
// shrinks by a tenth.
const strongAfter = 2 << 20

// compressor compresses object data for storage, switching level after
// strongAfter bytes. Safe for concurrent use.
type compressor struct{ raw atomic.Int64 }

func (c *compressor) compress(data []byte) ([]byte, int) {
	if c.raw.Add(int64(len(data))) <= strongAfter {
		return objects.Compress(data)
	}
	return objects.CompressSmall(data)
}

// compress compresses object data for storage (see strongAfter). Safe for
// concurrent use.
func (tx *Tx) compress(data []byte) ([]byte, int) { return tx.comp.compress(data) }

// Begin starts a write transaction (BEGIN IMMEDIATE).
func (r *Repo) Begin() (*Tx, error) {
	sqlTx, err := r.DB.Begin()
	if err != nil {
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	return &Tx{Tx: sqlTx, r: r}, nil
}

// stmt returns a statement prepared once for the whole pool: SQLite
// parses each query text once per connection instead of once per call.
func (r *Repo) stmt(query string) (*sql.Stmt, error) {
	r.stmtMu.Lock()
	defer r.stmtMu.Unlock()
	if s, ok := r.stmts[query]; ok {
		return s, nil
	}
	s, err := r.DB.Prepare(query)
	if err != nil {
		return nil, err
	}
	if r.stmts == nil {
		r.stmts = map[string]*sql.Stmt{}
	}
	r.stmts[query] = s
	return s, nil
}

// cachedQuerier runs one-row queries on the repository's pool through
// the statement cache. Hot reads (chunks, chunk lists, trees, commits) go
// through it: modernc's sqlite parses a query's text anew each time it is
// run unprepared, which was a sixth of art's CPU while a mount read the
// Go tree.
type cachedQuerier struct{ r *Repo }

func (r *Repo) cached() cachedQuerier { return cachedQuerier{r} }

// QueryRow runs query through its cached statement; if the statement
// cannot be prepared, the query runs unprepared so that Scan reports why.
func (c cachedQuerier) QueryRow(query string, args ...any) *sql.Row {
	s, err := c.r.stmt(query)
	if err != nil {
		return c.r.DB.QueryRow(query, args...)
	}
	return s.QueryRow(args...)
}

// Exec runs a statement in the transaction, through the statement cache.
func (tx *Tx) Exec(query string, args ...any) (sql.Result, error) {
	s, err := tx.r.stmt(query)
	if err != nil {
		return nil, err
	}
	return tx.Stmt(s).Exec(args...)
}

// QueryRow runs a query in the transaction, through the statement cache.
func (tx *Tx) QueryRow(query string, args ...any) *sql.Row {
	s, err := tx.r.stmt(query)
	if err != nil {
		return tx.Tx.QueryRow(query, args...)
	}
	return tx.Stmt(s).QueryRow(args...)
}

// exists reports whether a query returns a row.
func (tx *Tx) exists(query string, args ...any) (bool, error) {
	var one int
	err := tx.QueryRow(query, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// PutChunkEncoded stores a chunk already compressed by the caller.
func (tx *Tx) PutChunkEncoded(id objects.ID, rawSize int, enc int, data []byte) error {
	if data == nil {
		data = []byte{} // the empty chunk: a nil slice would bind as NULL
	}
	res, err := tx.Exec(`INSERT INTO chunks(id, size, enc, data) VALUES(?, ?, ?, ?) ON CONFLICT DO NOTHING`, id[:], rawSize, enc, data)
	if err != nil {
		return fmt.Errorf("store chunk %s: %w", id.Short(), err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		tx.NewObjects++
		tx.NewBytes += int64(len(data))
	}
	return nil
}

// PutFileList records the chunk list of a multi-chunk file.
func (tx *Tx) PutFileList(id objects.ID, size int64, refs []objects.ChunkRef) error {
	if len(refs) <= 1 {
		return nil
	}
	res, err := tx.Exec(`INSERT INTO files(id, size, chunks) VALUES(?, ?, ?) ON CONFLICT DO NOTHING`, id[:], size, objects.EncodeChunkList(refs))
	if err != nil {
		return fmt.Errorf("store file %s: %w", id.Short(), err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		tx.NewObjects++
	}
	return nil
}

// PutFile chunks, hashes and stores a stream, returning its file id and
// size (PutFiles with one file).
func (tx *Tx) PutFile(rd io.Reader) (objects.ID, int64, error) {
	stored, err := tx.PutFiles(context.Background(), 1, func(int) (io.Reader, error) { return rd, nil }, nil)
	if err != nil {
		return objects.Zero, 0, err
	}
	return stored[0].ID, stored[0].Size, nil
}

// PutTree stores a tree and returns its id.
func (tx *Tx) PutTree(t *objects.Tree) (objects.ID, error) {
	raw, id, err := objects.EncodeTree(t)
	if err != nil {
		return objects.Zero, err
	}
	// Most trees of a push or commit are unchanged: look before
	// compressing and inserting.
	var one int
	if err := tx.QueryRow(`SELECT 1 FROM trees WHERE id=?`, id[:]).Scan(&one); err == nil {
		return id, nil
	}
	enc, how := tx.compress(raw)
	res, err := tx.Exec(`INSERT INTO trees(id, size, enc, data) VALUES(?, ?, ?, ?) ON CONFLICT DO NOTHING`, id[:], len(raw), how, enc)
	if err != nil {
		return objects.Zero, fmt.Errorf("store tree %s: %w", id.Short(), err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		tx.NewObjects++
		tx.NewBytes += int64(len(enc))
	}
	return id, nil
}

// EncodedTree is a tree in its canonical encoding, with its id.
type EncodedTree struct {
	ID  objects.ID
	Raw []byte
}

// treeBatch is how many ids storedTrees asks about in one query.
const treeBatch = 256

// storedTrees reports which of ids the repository holds. It asks many ids
// per query: most trees of an incremental push are unchanged, and one
// query per directory cost a sixth of a push of an 11k-file tree.
func (tx *Tx) storedTrees(ids []objects.ID) (map[objects.ID]bool, error) {
	have := make(map[objects.ID]bool, len(ids))
	batch := make([]any, 0, treeBatch)
	ask := func() error {
		if len(batch) == 0 {
			return nil
		}
		q := `SELECT id FROM trees WHERE id IN (?` + strings.Repeat(`,?`, len(batch)-1) + `)`
		rows, err := tx.Tx.Query(q, batch...)
		if err != nil {
			return fmt.Errorf("look up trees: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				return fmt.Errorf("look up trees: %w", err)
			}
			if len(b) == objects.IDSize {
				have[objects.ID(b)] = true
			}
		}
		batch = batch[:0]
		return rows.Err()
	}
	for _, id := range ids {
		if _, seen := have[id]; seen {
			continue
		}
		have[id] = false
		batch = append(batch, id[:])
		if len(batch) == treeBatch {
			if err := ask(); err != nil {
				return nil, err
			}
		}
	}
	if err := ask(); err != nil {
		return nil, err
	}
	return have, nil
}

// missingTrees returns those of ids the repository does not hold.
func (tx *Tx) missingTrees(ids []objects.ID) ([]objects.ID, error) {
	have, err := tx.storedTrees(ids)
	if err != nil {
		return nil, err
	}
	var missing []objects.ID
	for id, ok := range have {
		if !ok {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

// PutTrees stores the trees the repository lacks.
func (tx *Tx) PutTrees(trees []EncodedTree) error {
	ids := make([]objects.ID, len(trees))
	for i, t := range trees {
		ids[i] = t.ID
	}
	have, err := tx.storedTrees(ids)
	if err != nil {
		return err
	}
	for _, t := range trees {
		if have[t.ID] {
			continue
		}
		have[t.ID] = true
		enc, how := tx.compress(t.Raw)
		res, err := tx.Exec(`INSERT INTO trees(id, size, enc, data) VALUES(?, ?, ?, ?) ON CONFLICT DO NOTHING`, t.ID[:], len(t.Raw), how, enc)
		if err != nil {
			return fmt.Errorf("store tree %s: %w", t.ID.Short(), err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			tx.NewObjects++
			tx.NewBytes += int64(len(enc))
		}
	}
	return nil
}

// PutCommit stores a commit and returns its id.
func (tx *Tx) PutCommit(c *objects.Commit) (objects.ID, error) {
	raw, id, err := objects.EncodeCommit(c)
	if err != nil {
		return objects.Zero, err
	}
	if _, err := tx.Exec(`INSERT INTO commits(id, data) VALUES(?, ?) ON CONFLICT DO NOTHING`, id[:], raw); err != nil {
		return objects.Zero, fmt.Errorf("store commit %s: %w", id.Short(), err)
	}
	tx.NewObjects++
	tx.NewBytes += int64(len(raw))
	return id, nil
}

// EmptyTree stores and returns the id of the empty directory.
func (tx *Tx) EmptyTree() (objects.ID, error) { return tx.PutTree(&objects.Tree{}) }

// lru is a least-recently-used cache bounded in bytes: chunk contents,
// and decoded trees (by their estimated memory, treeCost).
type lru[V any] struct {
	max, used int
	maxItem   int // larger items are not cached
	m         map[objects.ID]*lruItem[V]
	head      lruItem[V] // sentinel: head.next is the most recent
}

type lruItem[V any] struct {
	id         objects.ID
	v          V
	cost       int
	prev, next *lruItem[V]
}

func newLRU[V any](max, maxItem int) *lru[V] {
	l := &lru[V]{max: max, maxItem: maxItem, m: make(map[objects.ID]*lruItem[V])}
	l.head.next, l.head.prev = &l.head, &l.head
	return l
}

func (l *lru[V]) unlink(it *lruItem[V]) { it.prev.next, it.next.prev = it.next, it.prev }
func (l *lru[V]) front(it *lruItem[V]) {
	it.next, it.prev = l.head.next, &l.head
	l.head.next.prev = it
	l.head.next = it
}

func (l *lru[V]) get(id objects.ID) (V, bool) {
	it, ok := l.m[id]
	if !ok {
		var zero V
		return zero, false
	}
	l.unlink(it)
	l.front(it)
	return it.v, true
}

func (l *lru[V]) add(id objects.ID, v V, cost int) {
	if cost > l.maxItem {
		return
	}
	if _, ok := l.m[id]; ok {
		return
	}
	it := &lruItem[V]{id: id, v: v, cost: cost}
	l.m[id] = it
	l.front(it)
	l.used += cost
	for l.used > l.max && l.head.prev != it { // the newest stays, even alone
		last := l.head.prev
		l.unlink(last)
		delete(l.m, last.id)
		l.used -= last.cost
	}
}

func (l *lru[V]) len() int { return len(l.m) }
