package overlay

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
)

// persister makes the upper layer durable in two steps.
//
//  1. Operations mark the keys they touch dirty. A snapshot reads the
//     current values of all dirty keys under the namespace lock (so it
//     never sees half of a rename) and appends them as one record to the
//     worktree's journal with a single write(2). Flush (close) and Fsync
//     take a snapshot before they return: from then on the data survives a
//     crash of art, because it is in the kernel, not in art's memory.
//  2. One applier goroutine writes journaled records, in order, to the
//     SQLite upper tables in batched transactions, then truncates the
//     journal once everything in it is applied.
//
// Records hold current values (upserts and deletes), so applying a record
// twice is harmless: Open replays the whole journal in order after a crash,
// whatever part of it had already reached SQLite.
type persister struct {
	fs *FS
	j  *journal

	jmu sync.Mutex // orders snapshots and journal appends

	mu      sync.Mutex
	cond    *sync.Cond
	inodes  map[uint64]*inode
	dirents map[direntKey]struct{}
	blocks  map[blockKey]objects.ID      // value: the chunk the block was set to (Zero: removed)
	chunks  map[objects.ID]*pendingChunk // block data by id until applied
	orphans []objects.ID                 // chunks dirty blocks stopped naming (see setBlockLocked)
	held    atomic.Int64                 // bytes the chunks hold in memory (raw and encoded)
	mark    uint64                       // bumped by every change marked dirty
	covered uint64                       // the mark the last journaled snapshot covered
	queue   []*record                    // journaled, not yet applied
	applied uint64                       // records applied so far
	durable uint64                       // records applied whose SQLite commit is fsynced
	queued  uint64                       // records journaled so far
	err     error                        // the last failure (sticky until a retry succeeds)
	tries   uint64                       // batches tried, applied or failed
	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}

	heldLimit int64 // see throttle

	afterSwap   func()       // tests: runs in snapshot after the dirty keys are taken
	beforeApply func() error // tests (set under mu): runs before each batch; an error fails it
}

type direntKey struct {
	dir  uint64
	name string
}

type blockKey struct {
	ino uint64
	idx int64
}

// pendingChunk is block data not yet in the chunks table, as the journal
// holds it: compressed or not (storeDirtyLocked), and as an earlier
// version of art wrote it when a journal is replayed.
type pendingChunk struct {
	raw   []byte
	enc   int
	data  []byte
	tried bool // compression was tried (data may still be raw)
	refs  int  // records naming it that are not applied yet
	pins  int  // putChunk calls whose storedBlock has not come yet
}

// applyInterval bounds how long journaled changes wait for SQLite, and
// how long unflushed changes stay only in memory.
const applyInterval = 200 * time.Millisecond

func newPersister(fs *FS, j *journal) *persister {
	p := &persister{
		fs: fs, j: j, inodes: map[uint64]*inode{}, dirents: map[direntKey]struct{}{},
		blocks: map[blockKey]objects.ID{}, chunks: map[objects.ID]*pendingChunk{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	p.cond = sync.NewCond(&p.mu)
	p.heldLimit = heldLimit
	if fs.opts.MaxHeld > 0 {
		p.heldLimit = fs.opts.MaxHeld
	}
	go p.loop()
	return p
}

func (p *persister) dirtyInode(n *inode) {
	p.mu.Lock()
	p.inodes[n.ino] = n
	p.mark++
	n.mark = p.mark
	p.mu.Unlock()
}

// dirtyInodeLocked is dirtyInode for callers holding n.mu (the persister
// lock is independent of inode locks).
func (p *persister) dirtyInodeLocked(n *inode) { p.dirtyInode(n) }

func (p *persister) dirtyDirent(dir uint64, name string) {
	p.mu.Lock()
	p.dirents[direntKey{dir, name}] = struct{}{}
	p.mark++
	p.mu.Unlock()
}

// dirtyBlock marks block idx of ino as set to chunk id (objects.Zero:
// removed).
func (p *persister) dirtyBlock(ino uint64, idx int64, id objects.ID) {
	p.mu.Lock()
	p.setBlockLocked(ino, idx, id)
	p.mu.Unlock()
}

// storedBlock is dirtyBlock for a chunk putChunk returned, which it
// unpins.
func (p *persister) storedBlock(ino uint64, idx int64, id objects.ID) {
	p.mu.Lock()
	p.setBlockLocked(ino, idx, id)
	if c := p.chunks[id]; c != nil && c.pins > 0 {
		c.pins--
	}
	p.mu.Unlock()
}

// setBlockLocked records the block's new chunk. A chunk the block named
// before that no record holds yet (the block stored again, or cut off,
// before it was journaled) may be named by nothing any more: the next
// snapshot drops it unless something still does (dropUnnamedLocked), or
// it would stay in memory, counted against heldLimit, for good.
func (p *persister) setBlockLocked(ino uint64, idx int64, id objects.ID) {
	k := blockKey{ino, idx}
	if old, ok := p.blocks[k]; ok && old != id {
		p.orphans = append(p.orphans, old)
	}
	p.blocks[k] = id
	p.mark++
}

// dropUnnamedLocked forgets the pending chunks among ids that no block
// names any more: not attached to a record not yet applied (refs), not
// named by a dirty block, and not between putChunk and storedBlock
// (pins). Every other way to name a chunk goes through these. p.mu must
// be held, and no snapshot may be between taking its keys and attaching
// its chunks (snapshot calls this at its end).
func (p *persister) dropUnnamedLocked(ids []objects.ID) {
	if len(ids) == 0 {
		return
	}
	dirty := make(map[objects.ID]bool, len(p.blocks))
	for _, id := range p.blocks {
		dirty[id] = true
	}
	for _, id := range ids {
		if c, ok := p.chunks[id]; ok && c.refs <= 0 && c.pins <= 0 && !dirty[id] {
			delete(p.chunks, id)
			p.held.Add(-c.memSize())
		}
	}
}

// persisted reports whether every change marked on n is journaled; n.mu
// must be held.
func (p *persister) persisted(n *inode) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return n.mark <= p.covered
}

// putChunk keeps block data until it is applied and returns its id;
// compress compresses it now, else the applier does (compressChunks).
func (p *persister) putChunk(data []byte, compress bool) objects.ID {
	id := objects.Hash(data)
	p.mu.Lock()
	if c, ok := p.chunks[id]; ok {
		c.pins++
		p.mu.Unlock()
		return id
	}
	p.mu.Unlock()
	raw := append([]byte(nil), data...)
	c := &pendingChunk{raw: raw, enc: objects.EncRaw, data: raw, tried: compress, pins: 1}
	if compress {
		c.data, c.enc = objects.Compress(raw)
	}
	p.mu.Lock()
	if cur, ok := p.chunks[id]; !ok {
		p.chunks[id] = c
		p.held.Add(c.memSize())
	} else {
		cur.pins++
	}
	p.mu.Unlock()
	return id
}

// memSize is the memory a pending chunk holds.
func (c *pendingChunk) memSize() int64 {
	n := int64(len(c.raw))
	if c.enc != objects.EncRaw {
		n += int64(len(c.data))
	}
	return n
}

// heldLimit bounds the block data waiting in memory for the applier
// (throttle): a writer faster than SQLite (a 2 GB file of random bytes
// written with cat) had all of it held, 2.3-3.2 GB of RSS; with this
// bound, 0.5-0.8 GB whatever the file's size, at the same speed.
const heldLimit = 64 << 20

// Throttling reports whether a write would now wait in throttle (the
// FUSE server answers such writes off the thread that serves the other
// requests of its CPU).
func (fs *FS) Throttling() bool { return fs.p.held.Load() > fs.p.heldLimit }

// throttle makes a writer wait while more than heldLimit of block data
// waits for the applier, until half of it is stored, after journaling
// what is dirty so that the applier has it. It reports why the applier
// cannot go on (a full disk as ENOSPC) rather than waiting for ever. The
// caller must hold no inode lock and not fs.ns: the snapshot takes them.
func (p *persister) throttle() error {
	if p.held.Load() <= p.heldLimit {
		return nil
	}
	if err := p.sync(false, agentRoom); err != nil {
		return err
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	tries := p.tries
	for p.held.Load() > p.heldLimit/2 {
		// Only a batch tried after this call decides (as in drain).
		if p.err != nil && p.tries > tries {
			if errors.Is(p.err, syscall.ENOSPC) || errors.Is(p.err, syscall.EDQUOT) {
				return syscall.ENOSPC
			}
			return p.fs.ioErr("store upper layer", p.err)
		}
		if len(p.queue) == 0 {
			// All that was journaled is stored; what is still held
			// was written since (the next write throttles again).
			return nil
		}
		p.cond.Wait()
	}
	return nil
}

// pendingChunk returns block data not yet in the repository.
func (p *persister) pendingChunk(id objects.ID) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.chunks[id]; ok {
		return c.raw, true
	}
	return nil, false
}

// sync journals every change made before the call. With hard set, the
// journal is also fsynced (fsync(2) promises survival of a power loss).
// room says whose space the record may take (space.go).
func (p *persister) sync(hard bool, room spaceRule) error {
	p.jmu.Lock()
	defer p.jmu.Unlock()
	rec := p.snapshot()
	if !rec.empty() {
		if err := p.j.append(rec, p.pendingBytes(), room); err != nil {
			p.restore(rec)
			if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
				p.fs.logf("journal upper layer: %v", err)
				return syscall.ENOSPC // the agent sees a full disk as such
			}
			return p.fs.ioErr("journal upper layer", err)
		}
		p.mu.Lock()
		p.queue = append(p.queue, rec)
		p.queued++
		p.covered = rec.mark
		p.mu.Unlock()
		select {
		case p.kick <- struct{}{}:
		default:
		}
	} else {
		p.mu.Lock()
		p.covered = max(p.covered, rec.mark)
		p.mu.Unlock()
	}
	if hard {
		if err := p.j.sync(); err != nil {
			return p.fs.ioErr("sync journal", err)
		}
		// Records applied earlier may be gone from the journal already;
		// they are in SQLite, whose WAL is not fsynced at each commit
		// (synchronous=NORMAL).
		if err := p.syncApplied(); err != nil {
			return p.fs.ioErr("sync repository", err)
		}
	}
	return nil
}

// syncApplied makes every applied record as durable as an fsynced journal:
// it fsyncs the repository's WAL, where their commits are, unless that was
// done since the last apply.
func (p *persister) syncApplied() error {
	p.mu.Lock()
	target := p.applied
	done := p.durable >= target
	p.mu.Unlock()
	if done {
		return nil
	}
	if err := syncFile(p.fs.r.Path + "-wal"); err != nil {
		return err
	}
	p.mu.Lock()
	p.durable = max(p.durable, target)
	p.mu.Unlock()
	return nil
}

// syncFile fsyncs a file; a missing one has nothing to sync (a WAL
// checkpointed away is in the database file, which the checkpoint synced).
func syncFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// drain waits until every journaled record is in SQLite.
func (p *persister) drain() error {
	p.mu.Lock()
	target, tries := p.queued, p.tries
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.applied < target {
		// Only a batch tried after this call decides: the failure of
		// an earlier one may be gone (space freed since, say).
		if p.err != nil && p.tries > tries {
			return p.err
		}
		p.cond.Wait()
	}
	return nil
}

func (p *persister) loop() {
	defer close(p.stopped)
	t := time.NewTicker(applyInterval)
	defer t.Stop()
	for {
		select {
		case <-p.kick:
		case <-t.C:
			// Changes nobody flushed yet reach the journal at this pace.
			// A failure is logged by sync and leaves them dirty for the
			// next try; it is no failure to apply what is journaled, so
			// it must not fail drain.
			p.sync(false, agentRoom)
		case <-p.stop:
			p.apply()
			return
		}
		p.apply()
	}
}

// close applies what is journaled and stops the applier.
func (p *persister) close() error {
	close(p.stop)
	<-p.stopped
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) > 0 {
		if p.err != nil {
			return p.err
		}
		return errors.New("upper layer not fully applied")
	}
	return nil
}

// snapshot takes the current values of every dirty key; p.jmu must be held.
func (p *persister) snapshot() *record {
	fs := p.fs
	fs.ns.RLock()
	defer fs.ns.RUnlock()
	p.mu.Lock()
	rec := &record{mark: p.mark, chunks: map[objects.ID]*pendingChunk{}}
	inodes, dirents, blocks := p.inodes, p.dirents, p.blocks
	p.inodes, p.dirents, p.blocks = map[uint64]*inode{}, map[direntKey]struct{}{}, map[blockKey]objects.ID{}
	p.mu.Unlock()
	if p.afterSwap != nil {
		p.afterSwap()
	}
	// prior[i] is the size rec.inodes[i] had before writes not yet stored:
	// what its stored blocks stand for.
	prior := make([]int64, 0, len(inodes))
	for _, n := range inodes {
		n.mu.Lock()
		row := inodeRow{ino: n.ino, deleted: n.deleted || !n.upper}
		prior = append(prior, min(n.size, n.storedSize))
		if !row.deleted {
			row.typ, row.mode, row.nlink = n.typ, n.mode, n.nlink
			row.size, row.mtime, row.ctime, row.atime = n.size, n.mtime, n.ctime, n.atime
			if len(n.dirty) > 0 {
				// Data still in memory is not in this record: its size
				// would read back as zeros after a crash.
				row.size = prior[len(prior)-1]
			}
			row.target = n.target
			if o := fs.opts.Owner; n.uid != o.UID || n.gid != o.GID {
				row.owned, row.uid, row.gid = true, n.uid, n.gid
			}
			switch n.typ {
			case objects.TypeFile:
				if !n.base.IsZero() {
					row.base = append([]byte(nil), n.base[:]...)
				}
				row.baseSize = n.baseSize
			case objects.TypeDir:
				if !n.lowerTree.IsZero() {
					row.base = append([]byte(nil), n.lowerTree[:]...)
				}
			}
			if len(n.xattrs) > 0 {
				row.xattrs = encodeXattrs(n.xattrs)
			}
		}
		n.mu.Unlock()
		rec.inodes = append(rec.inodes, row)
	}
	for k := range dirents {
		d := fs.inodes[k.dir]
		r := direntRow{key: k}
		if d != nil && !d.deleted {
			r.ino, r.present = d.dirents[k.name]
		}
		rec.dirents = append(rec.dirents, r)
	}
	// Chunks the taken keys named when marked that their blocks no
	// longer name: stored again since, cut off, or the inode freed (no
	// links, no open handles: nothing reads it again; an unlinked file
	// still open is not deleted and keeps its blocks).
	var renamed []objects.ID
	for k, marked := range blocks {
		n := fs.inodes[k.ino]
		r := blockRow{key: k}
		if n != nil && !n.deleted {
			n.mu.Lock()
			r.id, r.present = n.blocks.get(k.idx)
			n.mu.Unlock()
		}
		if !r.present || r.id != marked {
			renamed = append(renamed, marked)
		}
		rec.blocks = append(rec.blocks, r)
	}
	// Lock order is ns, inode, persister: attach chunk data last.
	p.mu.Lock()
	defer p.mu.Unlock()
	// A file whose dirty data was stored after the keys were taken (a
	// Flush in between) would be journaled at its new size without those
	// blocks, and a crash before the next record would show zeros: its row
	// keeps the prior size (the row must stay: a new file's entry names
	// it), and it stays dirty for the next record, which holds both.
	if len(p.blocks) > 0 {
		stored := map[uint64]bool{}
		for k := range p.blocks {
			stored[k.ino] = true
		}
		for i := range rec.inodes {
			r := &rec.inodes[i]
			if n := fs.inodes[r.ino]; n != nil && stored[r.ino] && !r.deleted && r.typ == objects.TypeFile {
				r.size = min(r.size, prior[i])
				p.inodes[r.ino] = n
			}
		}
	}
	for _, r := range rec.blocks {
		if r.present {
			if c, ok := p.chunks[r.id]; ok && rec.chunks[r.id] == nil {
				c.refs++
				rec.chunks[r.id] = c
			}
		}
	}
	// Of those, and of the chunks blocks stopped naming before being
	// journaled, the ones nothing names now are dropped.
	unnamed := append(p.orphans, renamed...)
	p.orphans = nil
	p.dropUnnamedLocked(unnamed)
	return rec
}

// restore puts a record's keys back as dirty after a failed append.
func (p *persister) restore(rec *record) {
	p.fs.ns.RLock()
	defer p.fs.ns.RUnlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range rec.inodes {
		if n := p.fs.inodes[r.ino]; n != nil {
			p.inodes[r.ino] = n
		} else if _, newer := p.inodes[r.ino]; !newer && r.deleted {
			// Freed and gone from the map (maybeFree): its deletion
			// must still reach the journal.
			p.inodes[r.ino] = &inode{ino: r.ino, deleted: true}
		}
	}
	for _, d := range rec.dirents {
		p.dirents[d.key] = struct{}{}
	}
	for _, b := range rec.blocks {
		if _, newer := p.blocks[b.key]; !newer {
			p.blocks[b.key] = b.id
		}
	}
	for _, c := range rec.chunks {
		c.refs--
	}
}

// apply writes queued records to SQLite in one transaction.
func (p *persister) apply() {
	p.mu.Lock()
	recs, hook := p.queue, p.beforeApply
	p.mu.Unlock()
	if len(recs) == 0 {
		return
	}
	t0 := time.Now()
	var err error
	if hook != nil {
		err = hook()
	}
	if err == nil {
		err = applyRecords(p.fs.r, p.fs.wt.ID, recs)
	}
	if os.Getenv("ART_DEBUG_BATCH") != "" {
		fmt.Fprintf(os.Stderr, "art: applied %d record(s) in %v (err %v)\n", len(recs), time.Since(t0), err)
	}
	p.mu.Lock()
	p.tries++
	if err != nil {
		p.err = err
		p.cond.Broadcast()
		p.mu.Unlock()
		p.fs.logf("apply upper layer: %v (retrying)", err)
		return
	}
	p.err = nil
	p.queue = p.queue[len(recs):]
	p.applied += uint64(len(recs))
	for _, rec := range recs {
		for id, c := range rec.chunks {
			c.refs--
			if c.refs <= 0 {
				// Stored now; drop it unless a block still names it
				// without a journaled record (it would be re-added), or
				// a putChunk of the same content is on its way to one
				// (pins): its record must carry the data again, as gc
				// may free the stored copy before it is applied.
				if cur, ok := p.chunks[id]; ok && cur == c && c.pins <= 0 && !p.chunkStillDirty(id) {
					delete(p.chunks, id)
					p.held.Add(-c.memSize())
				}
			}
		}
	}
	empty := len(p.queue) == 0
	p.cond.Broadcast()
	p.mu.Unlock()
	if empty {
		p.jmu.Lock()
		if p.j.hard {
			// The journal holds fsynced data: SQLite must hold it as
			// durably before the journal lets it go.
			if err := p.syncApplied(); err != nil {
				p.jmu.Unlock()
				p.fs.logf("sync repository: %v (the journal is kept)", err)
				return
			}
		}
		p.mu.Lock()
		if len(p.queue) == 0 {
			if err := p.j.reset(); err != nil {
				p.fs.logf("truncate journal: %v", err)
			}
		}
		p.mu.Unlock()
		p.jmu.Unlock()
	}
}

// chunkStillDirty reports whether a dirty (not yet journaled) block names
// the chunk; p.mu must be held.
func (p *persister) chunkStillDirty(id objects.ID) bool {
	for _, v := range p.blocks {
		if v == id {
			return true
		}
	}
	return false
}

// applyRecords writes records, in order, to the upper tables in one
// transaction.
func applyRecords(r *repo.Repo, wt int64, recs []*record) error {
	enc := compressChunks(recs)
	tx, err := r.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, rec := range recs {
		if err := applyRecord(tx, wt, rec, enc); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// encodedChunk is a chunk as the chunks table stores it.
type encodedChunk struct {
	enc  int
	data []byte
}

// compressChunks compresses the uncompressed chunks of recs, on all cores
// and before the transaction (which other writers of the repository wait
// for), and returns them by id.
func compressChunks(recs []*record) map[objects.ID]encodedChunk {
	var todo []*pendingChunk
	var ids []objects.ID
	seen := map[objects.ID]bool{}
	for _, rec := range recs {
		for id, c := range rec.chunks {
			if c.enc == objects.EncRaw && !c.tried && !seen[id] {
				seen[id] = true
				todo = append(todo, c)
				ids = append(ids, id)
			}
		}
	}
	out := make([]encodedChunk, len(todo))
	onEveryCPU(len(todo), func(i int) {
		data, enc := objects.Compress(todo[i].raw)
		out[i] = encodedChunk{enc, data}
	})
	m := make(map[objects.ID]encodedChunk, len(ids))
	for i, id := range ids {
		m[id] = out[i]
	}
	return m
}

func applyRecord(tx *repo.Tx, wt int64, rec *record, compressed map[objects.ID]encodedChunk) error {
	for id, c := range rec.chunks {
		e, ok := compressed[id]
		if !ok {
			e = encodedChunk{c.enc, c.data}
		}
		if err := tx.PutChunkEncoded(id, len(c.raw), e.enc, e.data); err != nil {
			return err
		}
	}
	const upIno = `INSERT INTO upper_inodes(wt, ino, type, mode, nlink, size, mtime, ctime, atime, base, base_size, target, xattrs, uid, gid)
		VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(wt, ino) DO UPDATE SET type=excluded.type, mode=excluded.mode,
		nlink=excluded.nlink, size=excluded.size, mtime=excluded.mtime, ctime=excluded.ctime, atime=excluded.atime,
		base=excluded.base, base_size=excluded.base_size, target=excluded.target, xattrs=excluded.xattrs,
		uid=excluded.uid, gid=excluded.gid`
	for _, r := range rec.inodes {
		if r.deleted {
			for _, q := range []string{
				`DELETE FROM upper_inodes WHERE wt=? AND ino=?`,
				`DELETE FROM upper_blocks WHERE wt=? AND ino=?`,
				`DELETE FROM upper_dirents WHERE wt=? AND dir=?`,
			} {
				if _, err := tx.Exec(q, wt, int64(r.ino)); err != nil {
					return err
				}
			}
			continue
		}
		var uid, gid any // NULL: the mount's owner
		if r.owned {
			uid, gid = int64(r.uid), int64(r.gid)
		}
		if _, err := tx.Exec(upIno, wt, int64(r.ino), r.typ, r.mode, r.nlink, r.size, r.mtime, r.ctime, r.atime, r.base, r.baseSize, r.target, r.xattrs, uid, gid); err != nil {
			return fmt.Errorf("store inode %d: %w", r.ino, err)
		}
	}
	for _, d := range rec.dirents {
		var err error
		if d.present {
			_, err = tx.Exec(`INSERT INTO upper_dirents(wt, dir, name, ino) VALUES(?,?,?,?) ON CONFLICT(wt, dir, name) DO UPDATE SET ino=excluded.ino`,
				wt, int64(d.key.dir), []byte(d.key.name), int64(d.ino))
		} else {
			_, err = tx.Exec(`DELETE FROM upper_dirents WHERE wt=? AND dir=? AND name=?`, wt, int64(d.key.dir), []byte(d.key.name))
		}
		if err != nil {
			return fmt.Errorf("store entry %q: %w", d.key.name, err)
		}
	}
	for _, b := range rec.blocks {
		var err error
		if b.present {
			_, err = tx.Exec(`INSERT INTO upper_blocks(wt, ino, idx, chunk) VALUES(?,?,?,?) ON CONFLICT(wt, ino, idx) DO UPDATE SET chunk=excluded.chunk`,
				wt, int64(b.key.ino), b.key.idx, b.id[:])
		} else {
			_, err = tx.Exec(`DELETE FROM upper_blocks WHERE wt=? AND ino=? AND idx=?`, wt, int64(b.key.ino), b.key.idx)
		}
		if err != nil {
			return fmt.Errorf("store block: %w", err)
		}
	}
	return nil
}

// pendingBytes is the journal space of records SQLite has not absorbed.
func (p *persister) pendingBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, r := range p.queue {
		n += r.size
	}
	return n
}

// onEveryCPU calls f(0) to f(n-1), on up to one goroutine per CPU, and
// returns when all are done.
func onEveryCPU(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.NumCPU(), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		}()
	}
	wg.Wait()
}
