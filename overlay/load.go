package overlay

import (
	"database/sql"
	"encoding/binary"
	"fmt"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/policy"
)

// load reads the worktree's upper layer into memory.
func (fs *FS) load() error {
	db := fs.r.DB
	wt := fs.wt.ID
	var next int64
	if err := db.QueryRow(`SELECT next_ino FROM worktrees WHERE id=?`, wt).Scan(&next); err != nil {
		return fmt.Errorf("load worktree: %w", err)
	}
	fs.nextIno = uint64(next)
	rows, err := db.Query(`SELECT ino, type, mode, nlink, size, mtime, ctime, atime, base, base_size, target, xattrs, uid, gid FROM upper_inodes WHERE wt=?`, wt)
	if err != nil {
		return fmt.Errorf("load upper inodes: %w", err)
	}
	for rows.Next() {
		var ino int64
		var base, xattrs []byte
		var uid, gid sql.NullInt64
		n := &inode{upper: true, uid: fs.opts.Owner.UID, gid: fs.opts.Owner.GID}
		if err := rows.Scan(&ino, &n.typ, &n.mode, &n.nlink, &n.size, &n.mtime, &n.ctime, &n.atime, &base, &n.baseSize, &n.target, &xattrs, &uid, &gid); err != nil {
			rows.Close()
			return fmt.Errorf("load upper inodes: %w", err)
		}
		if uid.Valid && gid.Valid {
			n.uid, n.gid = uint32(uid.Int64), uint32(gid.Int64)
		}
		n.ino = uint64(ino)
		var id objects.ID
		if len(base) == objects.IDSize {
			copy(id[:], base)
		}
		switch n.typ {
		case objects.TypeFile:
			n.base = id
		case objects.TypeDir:
			n.lowerTree = id
			n.dirents = map[string]uint64{}
		}
		if len(xattrs) > 0 {
			if n.xattrs, err = decodeXattrs(xattrs); err != nil {
				rows.Close()
				return fmt.Errorf("load inode %d: %w", ino, err)
			}
			fs.xattrMem.Add(xattrBytes(n.xattrs))
		}
		if n.ino >= fs.nextIno && n.ino&lowerBit == 0 {
			fs.nextIno = n.ino + 1
		}
		fs.inodes[n.ino] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = db.Query(`SELECT dir, name, ino FROM upper_dirents WHERE wt=?`, wt)
	if err != nil {
		return fmt.Errorf("load upper entries: %w", err)
	}
	for rows.Next() {
		var dir, ino int64
		var name []byte
		if err := rows.Scan(&dir, &name, &ino); err != nil {
			rows.Close()
			return err
		}
		d := fs.inodes[uint64(dir)]
		if d == nil || d.typ != objects.TypeDir {
			continue // entries of a removed directory
		}
		d.dirents[string(name)] = uint64(ino)
		if c := fs.inodes[uint64(ino)]; c != nil && c.typ == objects.TypeDir {
			c.parent, c.name = d.ino, string(name)
		}
	}
	rows.Close()
	rows, err = db.Query(`SELECT ino, idx, chunk FROM upper_blocks WHERE wt=?`, wt)
	if err != nil {
		return fmt.Errorf("load upper blocks: %w", err)
	}
	for rows.Next() {
		var ino, idx int64
		var chunk []byte
		if err := rows.Scan(&ino, &idx, &chunk); err != nil {
			rows.Close()
			return err
		}
		n := fs.inodes[uint64(ino)]
		if n == nil {
			continue
		}
		id, err := objects.FromBytes(chunk)
		if err != nil {
			rows.Close()
			return err
		}
		n.blocks.set(idx, id)
	}
	rows.Close()
	// Files that were unlinked while open when art died are garbage now
	// (their rows go with the upper layer at the next commit); their
	// xattrs are not held.
	for ino, n := range fs.inodes {
		if n.nlink == 0 && n.typ != objects.TypeDir {
			n.deleted = true
			fs.xattrMem.Add(-xattrBytes(n.xattrs))
			n.xattrs = nil
			fs.inodes[ino] = n
		}
	}
	if r := fs.inodes[RootIno]; r != nil {
		r.perm = policy.Write // the home itself is never below view
	}
	// Directory link counts are recomputed, not trusted: art before
	// schema 3 stored 2 for every directory.
	for _, n := range fs.inodes {
		if n.typ == objects.TypeDir && n.nlink > 0 && !n.deleted {
			n.nlink = 2 + fs.subdirs(n)
		}
	}
	// The root may have been copied up; keep its lower tree otherwise.
	if r := fs.inodes[RootIno]; r != nil && !r.upper {
		r.lowerTree = fs.root
	}
	return nil
}

// encodeXattrs stores xattrs as (uvarint len, name, uvarint len, value)*.
func encodeXattrs(xs []objects.Xattr) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.AppendUvarint(b, uint64(len(x.Name)))
		b = append(b, x.Name...)
		b = binary.AppendUvarint(b, uint64(len(x.Value)))
		b = append(b, x.Value...)
	}
	return b
}

func decodeXattrs(b []byte) ([]objects.Xattr, error) {
	var xs []objects.Xattr
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, fmt.Errorf("xattrs: %w", objects.ErrCorrupt)
		}
		name := string(b[k : k+int(n)])
		b = b[k+int(n):]
		n, k = binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, fmt.Errorf("xattrs: %w", objects.ErrCorrupt)
		}
		xs = append(xs, objects.Xattr{Name: name, Value: append([]byte(nil), b[k:k+int(n)]...)})
		b = b[k+int(n):]
	}
	return xs, nil
}
