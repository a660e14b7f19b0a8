package repo

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/artproject/art/objects"
)

// Problem is one defect fsck found.
type Problem struct {
	Kind string // "chunk", "file", "tree", "commit", "ref", "head", "worktree", "database"
	ID   string // object id or name
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s %s: %s", p.Kind, p.ID, p.Msg) }

// FsckResult summarises a check.
type FsckResult struct {
	Chunks, Files, Trees, Commits, Refs int
	Bytes                               int64 // content bytes re-hashed
	Problems                            []Problem
}

// Fsck re-hashes every stored object and checks every reference. It reads
// only; the repository is not changed.
func (r *Repo) Fsck(progress func(string)) (*FsckResult, error) {
	res := &FsckResult{}
	bad := func(kind, id, format string, args ...any) {
		res.Problems = append(res.Problems, Problem{Kind: kind, ID: id, Msg: fmt.Sprintf(format, args...)})
	}
	say := func(s string) {
		if progress != nil {
			progress(s)
		}
	}
	// Read everything from the file: the caches may hold objects that
	// were damaged on disk after they were read.
	r.mu.Lock()
	r.objCache.init()
	r.mu.Unlock()
	// And all of it from one snapshot (a read transaction, which takes
	// no lock): read one table at a time while a session or a push wrote,
	// rows written after the chunks were read named chunks fsck had not
	// seen, and it reported hundreds of them "missing or damaged".
	sqlTx, err := r.DB.BeginTx(context.Background(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	defer sqlTx.Rollback()
	snap := &Tx{Tx: sqlTx, r: r}
	// SQLite's own structure first: a damaged page makes everything else moot.
	say("checking database structure")
	rows, err := snap.Query(`PRAGMA quick_check`)
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		if s != "ok" {
			bad("database", r.Path, "%s", s)
		}
	}
	rows.Close()

	say("checking chunks")
	chunkSize := map[objects.ID]int64{}
	rows, err = snap.Query(`SELECT id, size, enc, data FROM chunks`)
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	for rows.Next() {
		var b, data []byte
		var size, enc int
		if err := rows.Scan(&b, &size, &enc, &data); err != nil {
			rows.Close()
			return nil, err
		}
		res.Chunks++
		id, err := objects.FromBytes(b)
		if err != nil {
			bad("chunk", fmt.Sprintf("%x", b), "malformed id")
			continue
		}
		raw, err := objects.Decompress(data, enc, size)
		if err != nil {
			bad("chunk", id.String(), "%v", err)
			continue
		}
		res.Bytes += int64(len(raw))
		if len(raw) != size || objects.Hash(raw) != id {
			bad("chunk", id.String(), "content does not match its id")
			continue
		}
		chunkSize[id] = int64(size)
	}
	rows.Close()

	say("checking files")
	rows, err = snap.Query(`SELECT id, size, chunks FROM files`)
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	type fileRow struct {
		id   objects.ID
		size int64
		list []byte
	}
	var files []fileRow
	for rows.Next() {
		var b, list []byte
		var size int64
		if err := rows.Scan(&b, &size, &list); err != nil {
			rows.Close()
			return nil, err
		}
		id, err := objects.FromBytes(b)
		if err != nil {
			bad("file", fmt.Sprintf("%x", b), "malformed id")
			continue
		}
		files = append(files, fileRow{id, size, list})
	}
	rows.Close()
	fileOK := map[objects.ID]bool{}
	for _, f := range files {
		res.Files++
		refs, err := objects.DecodeChunkList(f.list)
		if err != nil {
			bad("file", f.id.String(), "%v", err)
			continue
		}
		ok := true
		var total int64
		for _, c := range refs {
			sz, present := chunkSize[c.ID]
			if !present {
				bad("file", f.id.String(), "chunk %s missing or damaged", c.ID)
				ok = false
				break
			}
			if sz != int64(c.Size) {
				bad("file", f.id.String(), "chunk %s has %d bytes, list says %d", c.ID.Short(), sz, c.Size)
				ok = false
				break
			}
			total += sz
		}
		if !ok {
			continue
		}
		if total != f.size {
			bad("file", f.id.String(), "chunks hold %d bytes, not %d", total, f.size)
			continue
		}
		h := objects.NewHasher()
		for _, c := range refs {
			data, err := loadChunk(snap, c.ID)
			if err != nil {
				bad("file", f.id.String(), "%v", err)
				ok = false
				break
			}
			h.Write(data)
		}
		if ok && h.Sum() != f.id {
			bad("file", f.id.String(), "content does not match its id")
			ok = false
		}
		fileOK[f.id] = ok
	}
	hasFile := func(id objects.ID) bool {
		if ok, present := fileOK[id]; present {
			return ok
		}
		_, present := chunkSize[id]
		return present
	}
	fileSize := map[objects.ID]int64{}
	for _, f := range files {
		fileSize[f.id] = f.size
	}
	// contentSize is the size of stored content (a multi-chunk file or a
	// single chunk).
	contentSize := func(id objects.ID) int64 {
		if sz, ok := fileSize[id]; ok {
			return sz
		}
		return chunkSize[id]
	}

	say("checking trees")
	treeOK := map[objects.ID]bool{}
	var treeIDs []objects.ID
	rows, err = snap.Query(`SELECT id FROM trees`)
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	for rows.Next() {
		var b []byte
		rows.Scan(&b)
		id, err := objects.FromBytes(b)
		if err != nil {
			bad("tree", fmt.Sprintf("%x", b), "malformed id")
			continue
		}
		treeIDs = append(treeIDs, id)
	}
	rows.Close()
	trees := map[objects.ID]*objects.Tree{}
	for _, id := range treeIDs {
		res.Trees++
		t, err := snap.LoadTree(id)
		if err != nil {
			bad("tree", id.String(), "%v", unwrapRepo(err))
			continue
		}
		trees[id] = t
		treeOK[id] = true
	}
	for id, t := range trees {
		for _, e := range t.Entries {
			switch e.Type {
			case objects.TypeDir:
				if !treeOK[e.ID] {
					bad("tree", id.String(), "entry %q: tree %s missing or damaged", e.Name, e.ID)
				}
			case objects.TypeFile:
				if !hasFile(e.ID) {
					bad("tree", id.String(), "entry %q: content %s missing or damaged", e.Name, e.ID)
				} else if sz := contentSize(e.ID); sz != int64(e.Size) {
					bad("tree", id.String(), "entry %q: size %d, its content %s holds %d bytes", e.Name, e.Size, e.ID.Short(), sz)
				}
			}
		}
	}

	say("checking commits")
	commitOK := map[objects.ID]bool{}
	var commitIDs []objects.ID
	rows, err = snap.Query(`SELECT id FROM commits`)
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	for rows.Next() {
		var b []byte
		rows.Scan(&b)
		id, err := objects.FromBytes(b)
		if err != nil {
			bad("commit", fmt.Sprintf("%x", b), "malformed id")
			continue
		}
		commitIDs = append(commitIDs, id)
	}
	rows.Close()
	commits := map[objects.ID]*objects.Commit{}
	for _, id := range commitIDs {
		res.Commits++
		c, err := snap.LoadCommit(id)
		if err != nil {
			bad("commit", id.String(), "%v", unwrapRepo(err))
			continue
		}
		commits[id] = c
		commitOK[id] = true
	}
	for id, c := range commits {
		if !treeOK[c.Tree] {
			bad("commit", id.String(), "root tree %s missing or damaged", c.Tree)
		}
		for _, p := range c.Parents {
			if !commitOK[p] {
				bad("commit", id.String(), "parent %s missing or damaged", p)
			}
		}
		if c.Session != nil && c.Session.TraceID != nil && !hasFile(*c.Session.TraceID) {
			bad("commit", id.String(), "trace log %s missing or damaged", *c.Session.TraceID)
		}
	}

	say("checking refs")
	bs, err := listBranches(snap)
	if err != nil {
		bad("ref", "*", "%v", err)
	}
	for _, b := range bs {
		res.Refs++
		if err := CheckBranchName(b.Name); err != nil {
			bad("ref", QuotePath(b.Name), "%v", err)
		}
		if !commitOK[b.Commit] {
			bad("ref", b.Name, "points at missing or damaged commit %s", b.Commit)
		}
	}
	if h, err := snap.Head(); err != nil {
		bad("head", "HEAD", "%v", err)
	} else if h.Detached() && !commitOK[h.Commit] {
		bad("head", "HEAD", "points at missing or damaged commit %s", h.Commit)
	}
	rows, err = snap.Query(`SELECT id, base FROM worktrees`)
	if err == nil {
		for rows.Next() {
			var wid int64
			var b []byte
			rows.Scan(&wid, &b)
			id, err := objects.FromBytes(b)
			if err != nil || !commitOK[id] {
				bad("worktree", fmt.Sprint(wid), "base commit %x missing or damaged", b)
			}
		}
		rows.Close()
	}
	say("checking worktrees")
	if err := fsckUpper(snap, bad, hasFile, treeOK, chunkSize, contentSize); err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	return res, nil
}

// fsckUpper checks the upper layers of live and interrupted worktrees:
// what they name must be stored, or 'art commit' of the pending work
// fails (and gc refuses to run) with nothing said before.
func fsckUpper(snap *Tx, bad func(kind, id, format string, args ...any), hasFile func(objects.ID) bool,
	treeOK map[objects.ID]bool, chunkSize map[objects.ID]int64, contentSize func(objects.ID) int64) error {
	// Rows of no worktree, and any other broken foreign key.
	rows, err := snap.Query(`PRAGMA foreign_key_check`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var table, parent string
		var rowid sql.NullInt64
		var fk int
		if err := rows.Scan(&table, &rowid, &parent, &fk); err != nil {
			rows.Close()
			return err
		}
		bad("database", table, "a row names a missing %s row", parent)
	}
	rows.Close()
	rows, err = snap.Query(`SELECT wt, ino, type, base, base_size FROM upper_inodes WHERE base IS NOT NULL`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var wt, ino, baseSize int64
		var typ int
		var b []byte
		if err := rows.Scan(&wt, &ino, &typ, &b, &baseSize); err != nil {
			rows.Close()
			return err
		}
		where := fmt.Sprintf("%d", wt)
		id, err := objects.FromBytes(b)
		switch {
		case err != nil:
			bad("worktree", where, "inode %d: malformed base id %x", ino, b)
		case objects.Type(typ) == objects.TypeDir:
			if !treeOK[id] {
				bad("worktree", where, "inode %d: base tree %s missing or damaged", ino, id)
			}
		case !hasFile(id):
			bad("worktree", where, "inode %d: base content %s missing or damaged", ino, id)
		case baseSize < 0 || baseSize > contentSize(id):
			bad("worktree", where, "inode %d: base size %d, its content %s holds %d bytes", ino, baseSize, id.Short(), contentSize(id))
		}
	}
	rows.Close()
	rows, err = snap.Query(`SELECT wt, ino, idx, chunk FROM upper_blocks`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var wt, ino, idx int64
		var b []byte
		if err := rows.Scan(&wt, &ino, &idx, &b); err != nil {
			rows.Close()
			return err
		}
		id, err := objects.FromBytes(b)
		if err != nil {
			bad("worktree", fmt.Sprint(wt), "inode %d block %d: malformed chunk id %x", ino, idx, b)
		} else if _, ok := chunkSize[id]; !ok {
			bad("worktree", fmt.Sprint(wt), "inode %d block %d: chunk %s missing or damaged", ino, idx, id)
		}
	}
	rows.Close()
	// An entry of a live directory naming an upper inode that has no row:
	// the name would vanish from the mount and from the commit. (0 is a
	// whiteout; entries of a directory without a row are garbage the
	// overlay skips.)
	rows, err = snap.Query(`SELECT d.wt, d.dir, d.name, d.ino FROM upper_dirents d
		JOIN upper_inodes p ON p.wt=d.wt AND p.ino=d.dir AND p.nlink > 0
		WHERE d.ino != 0 AND NOT EXISTS (SELECT 1 FROM upper_inodes i WHERE i.wt=d.wt AND i.ino=d.ino)`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var wt, dir, ino int64
		var name []byte
		if err := rows.Scan(&wt, &dir, &name, &ino); err != nil {
			rows.Close()
			return err
		}
		bad("worktree", fmt.Sprint(wt), "directory inode %d: entry %s names inode %d, which has no row", dir, QuotePath(string(name)), ino)
	}
	rows.Close()
	return rows.Err()
}

// unwrapRepo strips the "tree <id>: " prefix our loaders add, since fsck
// prints the id itself.
func unwrapRepo(err error) string {
	s := err.Error()
	if i := strings.Index(s, ": "); i > 0 && i < 80 {
		return s[i+2:]
	}
	return s
}
