package overlay

import (
	"fmt"
	"sync"
	"time"

	"github.com/artproject/art/objects"
)

// persister writes the upper layer's dirty state to SQLite in batches.
// Operations mark keys dirty; a batch reads their current values under the
// namespace lock (so it never sees half of a rename) and writes them in one
// transaction. Writing current values makes batches idempotent.
type persister struct {
	fs *FS

	mu      sync.Mutex
	cond    *sync.Cond
	inodes  map[uint64]*inode
	dirents map[direntKey]struct{}
	blocks  map[blockKey]struct{}
	chunks  map[objects.ID][]byte // data of blocks not yet stored
	flying  map[objects.ID][]byte // chunks of the batch being written
	nextIno bool
	reqGen  uint64 // bumped by every sync request
	doneGen uint64 // the request generation the last batch covered
	err     error  // sticky: the last failed batch
	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

type direntKey struct {
	dir  uint64
	name string
}

type blockKey struct {
	ino uint64
	idx int64
}

// batchInterval bounds how long changes stay only in memory when nobody
// asks for a sync.
const batchInterval = 200 * time.Millisecond

func newPersister(fs *FS) *persister {
	p := &persister{
		fs: fs, inodes: map[uint64]*inode{}, dirents: map[direntKey]struct{}{},
		blocks: map[blockKey]struct{}{}, chunks: map[objects.ID][]byte{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	p.cond = sync.NewCond(&p.mu)
	go p.loop()
	return p
}

func (p *persister) dirtyInode(n *inode) {
	p.mu.Lock()
	p.inodes[n.ino] = n
	p.mu.Unlock()
}

// dirtyInodeLocked is dirtyInode for callers holding n.mu (same thing:
// the persister lock is independent of inode locks).
func (p *persister) dirtyInodeLocked(n *inode) { p.dirtyInode(n) }

func (p *persister) dirtyDirent(dir uint64, name string) {
	p.mu.Lock()
	p.dirents[direntKey{dir, name}] = struct{}{}
	p.mu.Unlock()
}

func (p *persister) dirtyBlock(ino uint64, idx int64) {
	p.mu.Lock()
	p.blocks[blockKey{ino, idx}] = struct{}{}
	p.mu.Unlock()
}

func (p *persister) dirtyNextIno() {
	p.mu.Lock()
	p.nextIno = true
	p.mu.Unlock()
}

// putChunk queues block data for storage and returns its id.
func (p *persister) putChunk(data []byte) objects.ID {
	id := objects.Hash(data)
	p.mu.Lock()
	if _, ok := p.chunks[id]; !ok {
		p.chunks[id] = append([]byte(nil), data...)
	}
	p.mu.Unlock()
	return id
}

// pendingChunk returns block data not yet committed to the repository.
func (p *persister) pendingChunk(id objects.ID) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d, ok := p.chunks[id]; ok {
		return d, true
	}
	d, ok := p.flying[id]
	return d, ok
}

// sync waits until everything changed before the call is committed.
func (p *persister) sync() error {
	p.mu.Lock()
	p.reqGen++
	gen := p.reqGen
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.doneGen < gen && p.err == nil {
		p.cond.Wait()
	}
	if p.err != nil {
		return p.fs.ioErr("persist upper layer", p.err)
	}
	return nil
}

func (p *persister) loop() {
	defer close(p.stopped)
	t := time.NewTicker(batchInterval)
	defer t.Stop()
	for {
		select {
		case <-p.kick:
		case <-t.C:
		case <-p.stop:
			p.batch()
			return
		}
		p.batch()
	}
}

// close writes what is left and stops the writer.
func (p *persister) close() error {
	close(p.stop)
	<-p.stopped
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

type inodeRow struct {
	ino                       uint64
	deleted                   bool
	typ                       objects.Type
	mode, nlink               uint32
	size, mtime, ctime, atime int64
	base                      []byte
	baseSize                  int64
	target                    string
	xattrs                    []byte
}

type direntRow struct {
	key     direntKey
	ino     uint64
	present bool
}

type blockRow struct {
	key     blockKey
	id      objects.ID
	present bool
}

// batch snapshots the dirty state and writes it in one transaction.
func (p *persister) batch() {
	fs := p.fs
	fs.ns.RLock()
	p.mu.Lock()
	gen := p.reqGen
	inodes, dirents, blocks, chunks, nextIno := p.inodes, p.dirents, p.blocks, p.chunks, p.nextIno
	p.inodes, p.dirents, p.blocks, p.chunks, p.nextIno = map[uint64]*inode{}, map[direntKey]struct{}{}, map[blockKey]struct{}{}, map[objects.ID][]byte{}, false
	p.flying = chunks
	p.mu.Unlock()
	var irows []inodeRow
	for _, n := range inodes {
		n.mu.Lock()
		row := inodeRow{ino: n.ino, deleted: n.deleted || !n.upper}
		if !row.deleted {
			row.typ, row.mode, row.nlink = n.typ, n.mode, n.nlink
			row.size, row.mtime, row.ctime, row.atime = n.size, n.mtime, n.ctime, n.atime
			row.target = n.target
			switch n.typ {
			case objects.TypeFile:
				if !n.base.IsZero() {
					row.base = n.base[:]
				}
				row.baseSize = n.baseSize
			case objects.TypeDir:
				if !n.lowerTree.IsZero() {
					row.base = n.lowerTree[:]
				}
			}
			if len(n.xattrs) > 0 {
				row.xattrs = encodeXattrs(n.xattrs)
			}
		}
		if n.deleted && !n.upper {
			row.deleted = true
		}
		n.mu.Unlock()
		irows = append(irows, row)
	}
	var drows []direntRow
	for k := range dirents {
		d := fs.inodes[k.dir]
		r := direntRow{key: k}
		if d != nil && !d.deleted {
			r.ino, r.present = d.dirents[k.name]
		}
		drows = append(drows, r)
	}
	var brows []blockRow
	for k := range blocks {
		n := fs.inodes[k.ino]
		r := blockRow{key: k}
		if n != nil && !n.deleted {
			n.mu.Lock()
			r.id, r.present = n.blocks[k.idx]
			n.mu.Unlock()
		}
		brows = append(brows, r)
	}
	next := fs.nextIno
	fs.ns.RUnlock()

	empty := len(irows) == 0 && len(drows) == 0 && len(brows) == 0 && !nextIno
	var err error
	if !empty {
		err = p.write(irows, drows, brows, chunks, nextIno, next)
	}
	p.mu.Lock()
	p.flying = nil
	if err != nil {
		p.err = err
		// Keep the state dirty so a later batch can retry.
		for _, n := range inodes {
			p.inodes[n.ino] = n
		}
		for k := range dirents {
			p.dirents[k] = struct{}{}
		}
		for k := range blocks {
			p.blocks[k] = struct{}{}
		}
		for id, c := range chunks {
			p.chunks[id] = c
		}
		p.nextIno = p.nextIno || nextIno
	} else {
		p.err = nil
		p.doneGen = gen
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *persister) write(irows []inodeRow, drows []direntRow, brows []blockRow, chunks map[objects.ID][]byte, nextIno bool, next uint64) error {
	wt := p.fs.wt.ID
	tx, err := p.fs.r.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, b := range brows {
		if !b.present {
			continue
		}
		if data, ok := chunks[b.id]; ok {
			if _, err := tx.PutChunk(data); err != nil {
				return err
			}
		}
	}
	upIno, err := tx.Prepare(`INSERT INTO upper_inodes(wt, ino, type, mode, nlink, size, mtime, ctime, atime, base, base_size, target, xattrs)
		VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(wt, ino) DO UPDATE SET type=excluded.type, mode=excluded.mode,
		nlink=excluded.nlink, size=excluded.size, mtime=excluded.mtime, ctime=excluded.ctime, atime=excluded.atime,
		base=excluded.base, base_size=excluded.base_size, target=excluded.target, xattrs=excluded.xattrs`)
	if err != nil {
		return err
	}
	defer upIno.Close()
	for _, r := range irows {
		if r.deleted {
			if _, err := tx.Exec(`DELETE FROM upper_inodes WHERE wt=? AND ino=?`, wt, int64(r.ino)); err != nil {
				return err
			}
			if _, err := tx.Exec(`DELETE FROM upper_blocks WHERE wt=? AND ino=?`, wt, int64(r.ino)); err != nil {
				return err
			}
			if _, err := tx.Exec(`DELETE FROM upper_dirents WHERE wt=? AND dir=?`, wt, int64(r.ino)); err != nil {
				return err
			}
			continue
		}
		if _, err := upIno.Exec(wt, int64(r.ino), r.typ, r.mode, r.nlink, r.size, r.mtime, r.ctime, r.atime, r.base, r.baseSize, r.target, r.xattrs); err != nil {
			return fmt.Errorf("store inode %d: %w", r.ino, err)
		}
	}
	for _, d := range drows {
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
	for _, b := range brows {
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
	if nextIno {
		if _, err := tx.Exec(`UPDATE worktrees SET next_ino=?, updated=? WHERE id=?`, int64(next), time.Now().UnixNano(), wt); err != nil {
			return err
		}
	}
	return tx.Commit()
}
