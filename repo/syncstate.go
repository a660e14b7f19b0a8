package repo

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/artproject/art/objects"
)

// The sync state of a host workspace (what the last push or pull saw of
// each path: the stat cache, and the base pull compares against) is stored
// as one row per host directory in synced_dirs, holding the entries
// directly inside that directory. A push or pull rewrites only the rows
// whose entries changed, so after a one-line edit it writes a few small
// rows instead of the state of eleven thousand files.
//
// Row encoding (data): "artsdir2", the 32-byte id of the tree a push built
// from exactly this row's entries (zero when none did), then per entry,
// sorted by name: uvarint len, name, type byte, uvarint mode, 32-byte id
// (files, and directories: the tree id the push used), varint size,
// mtime, ctime, uvarint inode, uvarint len, link target. The workspace
// root is the row with dir "". Rows written before tree ids were kept
// start with "artsdir1", have no tree id and ids for files only; they
// still decode (with zero ids).
//
// A row is stored zstd-compressed when that makes it smaller (its data
// then starts with zstd's frame magic instead of "artsdir"): the names and
// numbers shrink by a quarter, which is 0.7 % of a repository of the Go
// source tree.
//
// The tree id makes a row self-certifying: a later push whose scan finds
// the same entries, subdirectory ids included, reuses that tree instead of
// encoding it — whatever wrote the other rows meanwhile (a concurrent push
// or pull, gc), since the id depends only on this row. Only a push, which
// builds the tree from these very entries, records it; pull and gc write
// zero, and gc zeroes it in any row whose entries it prunes.

const (
	syncDirMagic   = "artsdir2"
	syncDirMagicV1 = "artsdir1"
)

// syncRows groups a sync state by directory and encodes each group, with
// no tree ids (see above: pull and gc cannot vouch for them).
func syncRows(m map[string]*syncedEntry) map[string][]byte {
	byDir := map[string][]string{}
	for p := range m {
		dir := path.Dir(p)
		if dir == "." {
			dir = ""
		}
		byDir[dir] = append(byDir[dir], p)
	}
	rows := make(map[string][]byte, len(byDir))
	for dir, paths := range byDir {
		sort.Strings(paths)
		b := appendSyncRowHeader(make([]byte, 0, 80*len(paths)+64), objects.Zero)
		for _, p := range paths {
			b = appendSyncRowEntry(b, path.Base(p), m[p])
		}
		rows[dir] = packSyncRow(b)
	}
	return rows
}

// appendSyncRowHeader starts a row: magic and tree id.
func appendSyncRowHeader(b []byte, tree objects.ID) []byte {
	b = append(b, syncDirMagic...)
	return append(b, tree[:]...)
}

// zstdMagic starts every zstd frame; no row magic does.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// packSyncRow returns the stored form of an encoded row.
func packSyncRow(raw []byte) []byte {
	c, how := objects.Compress(raw)
	if how == objects.EncZstd {
		return c
	}
	return raw
}

// unpackSyncRow reverses packSyncRow (the decoder refuses to grow past
// 64 MiB, whatever a damaged row claims).
func unpackSyncRow(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, zstdMagic) {
		return b, nil
	}
	return objects.Decompress(b, objects.EncZstd, 4*len(b))
}

// appendSyncRowEntry appends one named entry of a row.
func appendSyncRowEntry(b []byte, name string, e *syncedEntry) []byte {
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = append(b, name...)
	return appendSyncEntry(b, e, true)
}

// appendSyncEntry appends the encoding of one entry, after its name:
// type byte, uvarint mode, 32-byte id (files; directories too when
// dirIDs), varint size, mtime, ctime, uvarint inode, uvarint len, link
// target.
func appendSyncEntry(b []byte, e *syncedEntry, dirIDs bool) []byte {
	b = append(b, byte(e.typ))
	b = binary.AppendUvarint(b, uint64(e.mode))
	if e.typ == objects.TypeFile || dirIDs && e.typ == objects.TypeDir {
		b = append(b, e.id[:]...)
	}
	b = binary.AppendVarint(b, e.size)
	b = binary.AppendVarint(b, e.mtime)
	b = binary.AppendVarint(b, e.ctime)
	b = binary.AppendUvarint(b, e.ino)
	b = binary.AppendUvarint(b, uint64(len(e.target)))
	return append(b, e.target...)
}

// decodeSyncEntry reverses appendSyncEntry (errors land in d.Err).
func decodeSyncEntry(d *objects.Decoder, dirIDs bool) syncedEntry {
	e := syncedEntry{typ: objects.Type(d.Byte())}
	e.mode = uint32(d.Uvarint(objects.PermMask))
	if e.typ == objects.TypeFile || dirIDs && e.typ == objects.TypeDir {
		e.id = d.ID()
	}
	e.size, e.mtime, e.ctime = d.Varint(), d.Varint(), d.Varint()
	e.ino = d.Uvarint(1<<64 - 1)
	e.target = string(d.Bytes(d.Uvarint(objects.MaxTargetLen)))
	return e
}

// decodeSyncRow returns the tree id of one directory's row and calls fn
// with each of its entries, in order; e is only valid during the call.
func decodeSyncRow(dir string, b []byte, fn func(name string, e *syncedEntry)) (objects.ID, error) {
	b, err := unpackSyncRow(b)
	if err != nil {
		return objects.Zero, fmt.Errorf("sync state of %q: %w", dir, err)
	}
	var tree objects.ID
	var entries []byte
	v2 := true
	switch {
	case bytes.HasPrefix(b, []byte(syncDirMagic)):
		rest := b[len(syncDirMagic):]
		if len(rest) < objects.IDSize {
			return objects.Zero, fmt.Errorf("sync state of %q: %w: cut short", dir, objects.ErrCorrupt)
		}
		copy(tree[:], rest)
		entries = rest[objects.IDSize:]
	case bytes.HasPrefix(b, []byte(syncDirMagicV1)):
		entries = b[len(syncDirMagicV1):]
		v2 = false
	default:
		return objects.Zero, fmt.Errorf("sync state of %q: %w: bad magic", dir, objects.ErrCorrupt)
	}
	if err := eachSyncEntry(entries, v2, fn); err != nil {
		return objects.Zero, fmt.Errorf("sync state of %q: %w", dir, err)
	}
	return tree, nil
}

// eachSyncEntry decodes a row's entries, calling fn (if not nil) with
// each; an error means the row does not decode, and fn may have seen part
// of it.
func eachSyncEntry(b []byte, dirIDs bool, fn func(name string, e *syncedEntry)) error {
	d := &objects.Decoder{B: b}
	for len(d.B) > 0 && d.Err == nil {
		name := string(d.Bytes(d.Uvarint(objects.MaxNameLen)))
		e := decodeSyncEntry(d, dirIDs)
		if d.Err != nil {
			break
		}
		if !objects.ValidName(name) {
			return fmt.Errorf("%w: bad name %q", objects.ErrCorrupt, name)
		}
		if fn != nil {
			fn(name, &e)
		}
	}
	return d.Err
}

// rowsQuerier is what loading the sync state needs: the database or a
// transaction.
type rowsQuerier interface {
	Query(query string, args ...any) (*sql.Rows, error)
}

// eachSyncRow calls fn with each stored row of a workspace. data is only
// valid during the call (it is SQLite's buffer, not a copy).
func eachSyncRow(q rowsQuerier, workspace string, fn func(dir string, data []byte) error) error {
	rows, err := q.Query(`SELECT dir, data FROM synced_dirs WHERE workspace=?`, workspace)
	if err != nil {
		return fmt.Errorf("load sync state: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var dir string
		var data sql.RawBytes
		if err := rows.Scan(&dir, &data); err != nil {
			return fmt.Errorf("load sync state: %w", err)
		}
		if err := fn(dir, data); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load sync state: %w", err)
	}
	return nil
}

// loadSyncRows returns the stored rows of a workspace by directory,
// undecoded: a scan decodes each directory's row where it reads that
// directory, in parallel.
func (r *Repo) loadSyncRows(workspace string) (map[string][]byte, error) {
	rows := map[string][]byte{}
	err := eachSyncRow(r.DB, workspace, func(dir string, data []byte) error {
		rows[dir] = bytes.Clone(data)
		return nil
	})
	return rows, err
}

// syncedPaths lists every path the rows of a workspace name (a row that
// does not decode names none).
func syncedPaths(rows map[string][]byte) []syncedPath {
	var out []syncedPath
	for dir, data := range rows {
		var names []syncedPath
		_, err := decodeSyncRow(dir, data, func(name string, e *syncedEntry) {
			if dir != "" {
				name = dir + "/" + name
			}
			names = append(names, syncedPath{name, e.typ == objects.TypeDir})
		})
		if err == nil {
			out = append(out, names...)
		}
	}
	return out
}

// syncedPath is one path the sync state lists, and whether it was a
// directory.
type syncedPath struct {
	rel string
	dir bool
}

// syncedOf is the sync state recorded for scanned or written host entries.
func syncedOf(now []*hostEntry) map[string]*syncedEntry {
	m := make(map[string]*syncedEntry, len(now))
	for _, e := range now {
		if e.rel == "" {
			continue
		}
		m[e.rel] = &syncedEntry{typ: e.typ, mode: e.mode, id: e.id, size: e.size, mtime: e.mtime, ctime: e.ctime, ino: e.ino, target: e.target}
	}
	return m
}

// saveSynced makes the given entries the sync state of a workspace (a
// pull's record), comparing with the rows stored now, read in this
// transaction: it writes the rows that differ and deletes those of
// directories no longer synced.
func (tx *Tx) saveSynced(workspace string, now []*hostEntry) error {
	stored := map[string][]byte{}
	err := eachSyncRow(tx, workspace, func(dir string, data []byte) error {
		stored[dir] = bytes.Clone(data)
		return nil
	})
	if err != nil {
		return err
	}
	rows := syncRows(syncedOf(now))
	for dir, data := range rows {
		if old, ok := stored[dir]; ok && bytes.Equal(old, data) {
			continue
		}
		if _, err := tx.Exec(`INSERT INTO synced_dirs(workspace, dir, data) VALUES(?, ?, ?) ON CONFLICT(workspace, dir) DO UPDATE SET data=excluded.data`, workspace, dir, data); err != nil {
			return fmt.Errorf("save sync state: %w", err)
		}
	}
	for dir := range stored {
		if _, ok := rows[dir]; ok {
			continue
		}
		if _, err := tx.Exec(`DELETE FROM synced_dirs WHERE workspace=? AND dir=?`, workspace, dir); err != nil {
			return fmt.Errorf("save sync state: %w", err)
		}
	}
	return nil
}

// pruneSynced drops the entries naming content that no longer exists
// (gc), row by row: a pruned row loses its tree id, and a row that does
// not decode is deleted (it is a cache; its directory then counts as never
// synced).
func (tx *Tx) pruneSynced(exists func(objects.ID) bool) error {
	type row struct {
		ws, dir string
		data    []byte
	}
	rows, err := tx.Query(`SELECT workspace, dir, data FROM synced_dirs`)
	if err != nil {
		return err
	}
	var all []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.ws, &r.dir, &r.data); err != nil {
			rows.Close()
			return err
		}
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range all {
		var names []string
		var kept []syncedEntry
		pruned := false
		_, err := decodeSyncRow(r.dir, r.data, func(name string, e *syncedEntry) {
			if e.typ == objects.TypeFile && !exists(e.id) {
				pruned = true
				return
			}
			names = append(names, name)
			kept = append(kept, *e)
		})
		switch {
		case err != nil:
			_, err = tx.Exec(`DELETE FROM synced_dirs WHERE workspace=? AND dir=?`, r.ws, r.dir)
		case pruned:
			b := appendSyncRowHeader(nil, objects.Zero)
			for i := range kept {
				b = appendSyncRowEntry(b, names[i], &kept[i])
			}
			_, err = tx.Exec(`UPDATE synced_dirs SET data=? WHERE workspace=? AND dir=?`, packSyncRow(b), r.ws, r.dir)
		}
		if err != nil {
			return fmt.Errorf("prune sync state of %s/%s: %w", r.ws, r.dir, err)
		}
	}
	return nil
}

// Schema 1 kept a workspace's sync state as one zstd-compressed blob in
// the table synced: "artsync1", then per path, sorted: uvarint len, path,
// and the entry as in a row. migrateSyncedBlobs (schema 1 → 2) converts
// those blobs into rows and drops the table.

const syncBlobMagic = "artsync1"

func decodeSyncBlob(b []byte) (map[string]*syncedEntry, error) {
	if !bytes.HasPrefix(b, []byte(syncBlobMagic)) {
		return nil, fmt.Errorf("sync state: %w: bad magic", objects.ErrCorrupt)
	}
	d := &objects.Decoder{B: b[len(syncBlobMagic):]}
	m := map[string]*syncedEntry{}
	for len(d.B) > 0 && d.Err == nil {
		p := string(d.Bytes(d.Uvarint(1 << 20)))
		e := decodeSyncEntry(d, false)
		if d.Err == nil {
			if !cleanSyncPath(p) {
				return nil, fmt.Errorf("sync state: %w: bad path %q", objects.ErrCorrupt, p)
			}
		}
		m[p] = &e
	}
	if d.Err != nil {
		return nil, fmt.Errorf("sync state: %w", d.Err)
	}
	return m, nil
}

// migrateSyncedBlobs converts schema 1's sync-state blobs into rows. A blob
// that does not decode is dropped: it is a cache, and pull treats a
// workspace without one as never synced, which refuses rather than deletes.
func migrateSyncedBlobs(tx *sql.Tx) error {
	if perRow, err := hasColumn(tx, "synced", "path"); err != nil {
		return err
	} else if perRow {
		return migrateSyncedRows(tx)
	}
	rows, err := tx.Query(`SELECT workspace, enc, data FROM synced`)
	if err != nil {
		return fmt.Errorf("read the sync state: %w", err)
	}
	type blob struct {
		ws   string
		enc  int
		data []byte
	}
	var blobs []blob
	for rows.Next() {
		var b blob
		if err := rows.Scan(&b.ws, &b.enc, &b.data); err != nil {
			rows.Close()
			return fmt.Errorf("read the sync state: %w", err)
		}
		blobs = append(blobs, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the sync state: %w", err)
	}
	for _, b := range blobs {
		raw, err := objects.Decompress(b.data, b.enc, 0)
		if err != nil {
			continue
		}
		m, err := decodeSyncBlob(raw)
		if err != nil {
			continue
		}
		if err := insertSyncRows(tx, b.ws, m); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(`DROP TABLE synced`); err != nil {
		return fmt.Errorf("drop the converted sync state: %w", err)
	}
	return nil
}

// cleanSyncPath reports whether p is a workspace-relative path as a sync
// state of schema 1 keys it: clean, not empty, not leaving the workspace.
func cleanSyncPath(p string) bool {
	parts, err := SplitPath(p)
	return err == nil && len(parts) > 0 && strings.Join(parts, "/") == p
}

// insertSyncRows stores a schema-1 sync state of workspace ws (by path)
// as rows.
func insertSyncRows(tx *sql.Tx, ws string, m map[string]*syncedEntry) error {
	for dir, data := range syncRows(m) {
		if _, err := tx.Exec(`INSERT INTO synced_dirs(workspace, dir, data) VALUES(?, ?, ?)`, ws, dir, data); err != nil {
			return fmt.Errorf("convert the sync state of %s: %w", ws, err)
		}
	}
	return nil
}

// hasColumn reports whether table has a column of that name.
func hasColumn(tx *sql.Tx, table, column string) (bool, error) {
	var n int
	err := tx.QueryRow(`SELECT count(*) FROM pragma_table_info(?) WHERE name=?`, table, column).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read the columns of %s: %w", table, err)
	}
	return n > 0, nil
}

// migrateSyncedRows converts the sync state of the first builds, which
// kept schema 1's synced table as one row per host path (workspace, path,
// type, mode, id, size, mtime, ctime, ino, target) before it became one
// blob per workspace without a new schema version: such a repository
// failed to open ("no such column: enc"). Rows that do not make sense are
// dropped, as a blob that does not decode is.
func migrateSyncedRows(tx *sql.Tx) error {
	rows, err := tx.Query(`SELECT workspace, path, type, mode, id, size, mtime, ctime, ino, target FROM synced`)
	if err != nil {
		return fmt.Errorf("read the sync state: %w", err)
	}
	state := map[string]map[string]*syncedEntry{}
	for rows.Next() {
		var ws, p string
		var typ, mode, size, mtime, ctime, ino int64
		var id []byte
		var target sql.NullString
		if err := rows.Scan(&ws, &p, &typ, &mode, &id, &size, &mtime, &ctime, &ino, &target); err != nil {
			rows.Close()
			return fmt.Errorf("read the sync state: %w", err)
		}
		e := &syncedEntry{typ: objects.Type(typ), mode: uint32(mode) & objects.PermMask, size: size, mtime: mtime, ctime: ctime, ino: uint64(ino), target: target.String}
		if len(id) == objects.IDSize {
			copy(e.id[:], id)
		}
		if !cleanSyncPath(p) || e.typ == objects.TypeFile && e.id.IsZero() {
			continue
		}
		if state[ws] == nil {
			state[ws] = map[string]*syncedEntry{}
		}
		state[ws][p] = e
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the sync state: %w", err)
	}
	for ws, m := range state {
		if err := insertSyncRows(tx, ws, m); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(`DROP TABLE synced`); err != nil {
		return fmt.Errorf("drop the converted sync state: %w", err)
	}
	return nil
}

// migrateSyncRowsWithoutTreeID rewrites the "artsdir2" rows of builds
// d2916fe to 9f2c146, which lacked the row's tree id that later builds put
// after the same magic (the current build dropped them as damaged, and a
// pull then brought back a file the user had deleted on the host). They
// get a zero tree id (no tree vouched for), so that a row decodes one way
// only. A row that decodes neither way is left: it counts as never synced.
func migrateSyncRowsWithoutTreeID(tx *sql.Tx) error {
	rows, err := tx.Query(`SELECT workspace, dir, data FROM synced_dirs`)
	if err != nil {
		return fmt.Errorf("read the sync state: %w", err)
	}
	type fix struct {
		ws, dir string
		data    []byte
	}
	var fixes []fix
	for rows.Next() {
		var ws, dir string
		var data []byte
		if err := rows.Scan(&ws, &dir, &data); err != nil {
			rows.Close()
			return fmt.Errorf("read the sync state: %w", err)
		}
		raw, err := unpackSyncRow(data)
		if err != nil || !bytes.HasPrefix(raw, []byte(syncDirMagic)) {
			continue
		}
		rest := raw[len(syncDirMagic):]
		if len(rest) >= objects.IDSize && eachSyncEntry(rest[objects.IDSize:], true, nil) == nil {
			continue // the current layout
		}
		if eachSyncEntry(rest, true, nil) != nil {
			continue // damaged either way
		}
		fixed := append(appendSyncRowHeader(make([]byte, 0, len(raw)+objects.IDSize), objects.Zero), rest...)
		fixes = append(fixes, fix{ws, dir, packSyncRow(fixed)})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the sync state: %w", err)
	}
	for _, f := range fixes {
		if _, err := tx.Exec(`UPDATE synced_dirs SET data=? WHERE workspace=? AND dir=?`, f.data, f.ws, f.dir); err != nil {
			return fmt.Errorf("rewrite the sync state of %s: %w", f.ws, err)
		}
	}
	return nil
}
