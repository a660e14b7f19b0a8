package repo

import (
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/artproject/art/objects"
)

// The sync state of a host workspace (what the last push or pull saw of
// each path: the stat cache, and the base pull compares against) is stored
// as one compressed blob per workspace. Push reads and writes all of it
// anyway, and one row costs a fraction of eleven thousand.
//
// Encoding: "artsync1", then per path, sorted: uvarint len, path, type
// byte, uvarint mode, 32-byte id (files only), varint size, mtime, ctime,
// uvarint inode, uvarint len, link target.

const syncMagic = "artsync1"

func encodeSynced(m map[string]*syncedEntry) []byte {
	paths := make([]string, 0, len(m))
	for p := range m {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	b := make([]byte, 0, 64*len(paths)+len(syncMagic))
	b = append(b, syncMagic...)
	for _, p := range paths {
		e := m[p]
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = append(b, byte(e.typ))
		b = binary.AppendUvarint(b, uint64(e.mode))
		if e.typ == objects.TypeFile {
			b = append(b, e.id[:]...)
		}
		b = binary.AppendVarint(b, e.size)
		b = binary.AppendVarint(b, e.mtime)
		b = binary.AppendVarint(b, e.ctime)
		b = binary.AppendUvarint(b, e.ino)
		b = binary.AppendUvarint(b, uint64(len(e.target)))
		b = append(b, e.target...)
	}
	return b
}

func decodeSynced(b []byte) (map[string]*syncedEntry, error) {
	if len(b) < len(syncMagic) || string(b[:len(syncMagic)]) != syncMagic {
		return nil, fmt.Errorf("sync state: %w: bad magic", objects.ErrCorrupt)
	}
	d := &objects.Decoder{B: b[len(syncMagic):]}
	m := map[string]*syncedEntry{}
	for len(d.B) > 0 && d.Err == nil {
		p := string(d.Bytes(d.Uvarint(1 << 20)))
		e := &syncedEntry{typ: objects.Type(d.Byte())}
		e.mode = uint32(d.Uvarint(objects.PermMask))
		if e.typ == objects.TypeFile {
			e.id = d.ID()
		}
		e.size, e.mtime, e.ctime = d.Varint(), d.Varint(), d.Varint()
		e.ino = d.Uvarint(1<<64 - 1)
		e.target = string(d.Bytes(d.Uvarint(objects.MaxTargetLen)))
		m[p] = e
	}
	if d.Err != nil {
		return nil, fmt.Errorf("sync state: %w", d.Err)
	}
	return m, nil
}

// loadSynced returns the sync state of a workspace (empty if never synced).
func (r *Repo) loadSynced(workspace string) (map[string]*syncedEntry, error) {
	var data []byte
	var enc int
	err := r.DB.QueryRow(`SELECT enc, data FROM synced WHERE workspace=?`, workspace).Scan(&enc, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return map[string]*syncedEntry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load sync state: %w", err)
	}
	raw, err := objects.Decompress(data, enc, 0)
	if err != nil {
		return nil, fmt.Errorf("load sync state of %s: %w", workspace, err)
	}
	m, err := decodeSynced(raw)
	if err != nil {
		// A damaged cache only costs re-reading files; pull then treats
		// host files as never synced, which refuses rather than deletes.
		return map[string]*syncedEntry{}, nil
	}
	return m, nil
}

// saveSynced replaces the sync state of a workspace with the given entries.
func (tx *Tx) saveSynced(workspace string, _ map[string]*syncedEntry, now []*hostEntry) error {
	m := make(map[string]*syncedEntry, len(now))
	for _, e := range now {
		if e.rel == "" {
			continue
		}
		m[e.rel] = &syncedEntry{typ: e.typ, mode: e.mode, id: e.id, size: e.size, mtime: e.mtime, ctime: e.ctime, ino: e.ino, target: e.target}
	}
	return tx.putSynced(workspace, m)
}

func (tx *Tx) putSynced(workspace string, m map[string]*syncedEntry) error {
	// The sync state is a cache rewritten whole by every push and pull
	// (about 100 bytes per file): the fastest level, since a stronger one
	// cost a quarter of an incremental push of an 11k-file tree.
	data, enc := objects.Compress(encodeSynced(m))
	if _, err := tx.Exec(`INSERT INTO synced(workspace, enc, data) VALUES(?, ?, ?) ON CONFLICT(workspace) DO UPDATE SET enc=excluded.enc, data=excluded.data`, workspace, enc, data); err != nil {
		return fmt.Errorf("save sync state: %w", err)
	}
	return nil
}

// pruneSynced drops entries naming content that no longer exists (gc).
func (tx *Tx) pruneSynced(exists func(objects.ID) bool) error {
	rows, err := tx.Query(`SELECT workspace FROM synced`)
	if err != nil {
		return err
	}
	var wss []string
	for rows.Next() {
		var w string
		rows.Scan(&w)
		wss = append(wss, w)
	}
	rows.Close()
	for _, w := range wss {
		m, err := tx.r.loadSyncedTx(tx, w)
		if err != nil {
			return err
		}
		changed := false
		for p, e := range m {
			if e.typ == objects.TypeFile && !exists(e.id) {
				delete(m, p)
				changed = true
			}
		}
		if changed {
			if err := tx.putSynced(w, m); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Repo) loadSyncedTx(tx *Tx, workspace string) (map[string]*syncedEntry, error) {
	var data []byte
	var enc int
	if err := tx.QueryRow(`SELECT enc, data FROM synced WHERE workspace=?`, workspace).Scan(&enc, &data); err != nil {
		return nil, err
	}
	raw, err := objects.Decompress(data, enc, 0)
	if err != nil {
		return map[string]*syncedEntry{}, nil
	}
	m, err := decodeSynced(raw)
	if err != nil {
		return map[string]*syncedEntry{}, nil
	}
	return m, nil
}
