package repo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/artproject/art/objects"
)

// reach is the set of objects reachable from some roots.
type reach struct {
	commits, trees, files map[objects.ID]bool
	// chunks are chunks extra roots name directly (see ExtraRoots).
	chunks map[objects.ID]bool
}

// Roots returns the commits gc must keep: branch tips, HEAD, and the base
// commits of worktrees (live or interrupted) and their upper layers.
func (r *Repo) Roots() ([]objects.ID, error) {
	var roots []objects.ID
	bs, err := r.Branches()
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		roots = append(roots, b.Commit)
	}
	h, err := r.Head()
	if err != nil {
		return nil, err
	}
	if !h.Commit.IsZero() {
		roots = append(roots, h.Commit)
	}
	rows, err := r.DB.Query(`SELECT base FROM worktrees`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		id, err := objects.FromBytes(b)
		if err != nil {
			return nil, err
		}
		roots = append(roots, id)
	}
	return roots, rows.Err()
}

// Unreferenced counts the commits reached from id (it included) that no
// root (Roots) reaches: what the next gc removes once the branch that
// pointed at id is deleted. It walks commits only, never trees.
func (r *Repo) Unreferenced(id objects.ID) (int, error) {
	roots, err := r.Roots()
	if err != nil {
		return 0, err
	}
	kept := map[objects.ID]bool{}
	walk := func(from []objects.ID, visit func(*objects.Commit)) error {
		seen := map[objects.ID]bool{}
		stack := append([]objects.ID(nil), from...)
		for len(stack) > 0 {
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[c] || (visit != nil && kept[c]) {
				continue
			}
			seen[c] = true
			cm, err := r.LoadCommit(c)
			if err != nil {
				return err
			}
			if visit == nil {
				kept[c] = true
			} else {
				visit(cm)
			}
			stack = append(stack, cm.Parents...)
		}
		return nil
	}
	if err := walk(roots, nil); err != nil {
		return 0, err
	}
	n := 0
	err = walk([]objects.ID{id}, func(*objects.Commit) { n++ })
	return n, err
}

// ExtraRoots lets layers above the repository (the overlay's upper layers)
// name content they reference; gc keeps it. chunks are chunks named as
// such (an upper layer's blocks), not files: a block holding a whole
// small file has the id of that content, which is also the id of the
// file when a commit or push cut it into several chunks, and read as a
// file it named those chunks and not itself (gc deleted the block's
// chunk under a live session).
type ExtraRoots func() (trees, files, chunks []objects.ID, err error)

func (r *Repo) reachable(roots []objects.ID, extra ExtraRoots, strict bool) (*reach, []error) {
	rc := &reach{commits: map[objects.ID]bool{}, trees: map[objects.ID]bool{}, files: map[objects.ID]bool{}, chunks: map[objects.ID]bool{}}
	var errs []error
	var walkTree func(id objects.ID)
	walkTree = func(id objects.ID) {
		if rc.trees[id] {
			return
		}
		rc.trees[id] = true
		t, err := r.loadTreeOnce(id)
		if err != nil {
			errs = append(errs, err)
			return
		}
		for _, e := range t.Entries {
			switch e.Type {
			case objects.TypeDir:
				walkTree(e.ID)
			case objects.TypeFile:
				rc.files[e.ID] = true
			}
		}
	}
	stack := append([]objects.ID(nil), roots...)
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if rc.commits[id] {
			continue
		}
		rc.commits[id] = true
		c, err := r.LoadCommit(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		walkTree(c.Tree)
		if c.Session != nil && c.Session.TraceID != nil {
			rc.files[*c.Session.TraceID] = true
		}
		stack = append(stack, c.Parents...)
	}
	if extra != nil {
		trees, files, chunks, err := extra()
		if err != nil {
			errs = append(errs, err)
		}
		for _, t := range trees {
			walkTree(t)
		}
		for _, f := range files {
			rc.files[f] = true
		}
		for _, c := range chunks {
			rc.chunks[c] = true
		}
	}
	return rc, errs
}

// liveSet is what gc keeps: the objects the roots reach, and the chunks
// of their files.
type liveSet struct {
	rc     *reach
	chunks map[objects.ID]bool
}

// liveObjects finds what gc must keep. It fails when any reachable object
// cannot be read, since it could not tell what that object references.
// The caller holds the write lock, so that nothing commits meanwhile.
func (r *Repo) liveObjects(extra ExtraRoots) (*liveSet, error) {
	roots, err := r.Roots()
	if err != nil {
		return nil, err
	}
	rc, errs := r.reachable(roots, extra, true)
	if len(errs) > 0 {
		return nil, fmt.Errorf("gc: %d reachable object(s) unreadable, first: %w (run 'art fsck'; nothing was deleted)", len(errs), errs[0])
	}
	chunks := map[objects.ID]bool{}
	for f := range rc.files {
		refs, err := r.LoadFileChunks(f)
		if err != nil {
			return nil, fmt.Errorf("gc: file %s: %w (run 'art fsck'; nothing was deleted)", f.Short(), err)
		}
		for _, c := range refs {
			chunks[c.ID] = true
		}
	}
	for c := range rc.chunks {
		if chunks[c] {
			continue
		}
		// Unreadable, it is lost already: say so rather than go on.
		var one int
		if err := r.cached().QueryRow(`SELECT 1 FROM chunks WHERE id=?`, c[:]).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("gc: chunk %s of a worktree: %w (run 'art fsck'; nothing was deleted)", c.Short(), objects.ErrNotFound)
		} else if err != nil {
			return nil, fmt.Errorf("gc: chunk %s of a worktree: %w (run 'art fsck'; nothing was deleted)", c.Short(), err)
		}
		chunks[c] = true
	}
	return &liveSet{rc: rc, chunks: chunks}, nil
}

// bumpGCGeneration records, in the transaction that deletes objects, that
// objects were deleted: a push that read its stat cache before, or staged
// objects (StageFiles), must not trust them after (see Push).
func bumpGCGeneration(tx *Tx) error {
	if _, err := tx.Exec(`INSERT INTO meta(key, value) VALUES('gc_generation', '1')
		ON CONFLICT(key) DO UPDATE SET value=CAST(CAST(value AS INTEGER)+1 AS TEXT)`); err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	return nil
}

// GCResult reports what gc removed.
type GCResult struct {
	Commits, Trees, Files, Chunks int
	BytesFreed                    int64
	// FileBefore and FileAfter are the repository file's sizes around
	// its compaction (both 0: not compacted, see compact); CompactErr
	// says why a compaction failed (the gc itself stands).
	FileBefore, FileAfter int64
	CompactErr            error
}

// GC deletes every object no root reaches. It refuses to run when any
// reachable object cannot be read, since it could not tell what that
// object references.
func (r *Repo) GC(extra ExtraRoots) (*GCResult, error) {
	tx, err := r.Begin() // holds the write lock: no commit can race us
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	live, err := r.liveObjects(extra)
	if err != nil {
		return nil, err
	}
	rc, chunksKept := live.rc, live.chunks
	res := &GCResult{}
	sweep := func(table string, keep map[objects.ID]bool, sizeExpr string, count *int) error {
		rows, err := tx.Query(`SELECT id, ` + sizeExpr + ` FROM ` + table)
		if err != nil {
			return fmt.Errorf("gc %s: %w", table, err)
		}
		var dead [][]byte
		var bytes int64
		for rows.Next() {
			var b []byte
			var n int64
			if err := rows.Scan(&b, &n); err != nil {
				rows.Close()
				return fmt.Errorf("gc %s: %w", table, err)
			}
			id, err := objects.FromBytes(b)
			if err != nil || !keep[id] {
				dead = append(dead, b)
				bytes += n
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("gc %s: %w", table, err)
		}
		if table == "commits" && len(dead) > 0 {
			// A workspace may last have synced with a commit gc frees;
			// its reference must go first (foreign keys are enforced).
			if err := r.moveWorkspacesOff(tx, keep); err != nil {
				return err
			}
		}
		for _, b := range dead {
			if _, err := tx.Exec(`DELETE FROM `+table+` WHERE id=?`, b); err != nil {
				return fmt.Errorf("gc %s: %w", table, err)
			}
		}
		*count = len(dead)
		res.BytesFreed += bytes
		return nil
	}
	// The deletions are one transaction: a failure rolls them all back,
	// and says so (the user otherwise could not tell what gc left).
	fail := func(err error) (*GCResult, error) {
		return nil, fmt.Errorf("%w; nothing was deleted (run art gc again once the cause is fixed)", err)
	}
	if err := sweep("commits", rc.commits, "length(data)", &res.Commits); err != nil {
		return fail(err)
	}
	if err := sweep("trees", rc.trees, "length(data)", &res.Trees); err != nil {
		return fail(err)
	}
	if err := sweep("files", rc.files, "length(chunks)", &res.Files); err != nil {
		return fail(err)
	}
	if err := sweep("chunks", chunksKept, "length(data)", &res.Chunks); err != nil {
		return fail(err)
	}
	// The stat cache must not name content that is gone.
	if err := tx.pruneSynced(func(id objects.ID) bool { return rc.files[id] }); err != nil {
		return fail(fmt.Errorf("gc: %w", err))
	}
	if _, err := tx.Exec(`UPDATE workspaces SET commit_id=NULL WHERE commit_id NOT IN (SELECT id FROM commits)`); err != nil {
		return fail(fmt.Errorf("gc workspaces: %w", err))
	}
	// A push that read its stat cache before this transaction must not
	// trust it after: it may name content just deleted (see Push).
	if err := bumpGCGeneration(tx); err != nil {
		return fail(err)
	}
	if err := tx.Commit(); err != nil {
		return fail(fmt.Errorf("gc: %w", err))
	}
	r.mu.Lock()
	r.objCache.init()
	r.mu.Unlock()
	res.FileBefore, res.FileAfter, res.CompactErr = r.compact()
	return res, nil
}

// ErrReaderHolds is compact's error when another connection reads the
// repository: its snapshot keeps the write-ahead log. compact says what
// follows: before the rewrite, nothing was compacted (the next gc does
// it); after it, the file shrinks once the reader ends.
var ErrReaderHolds = errors.New("another command is reading the repository (art log in a pager, say)")

// truncateWAL checkpoints the write-ahead log into the file and truncates
// it, waiting at most wait for readers (busy_timeout would wait 30 s);
// ErrReaderHolds when one still holds it. SQLite reports that as a result
// row, not an error.
func (r *Repo) truncateWAL(conn *sql.Conn, wait time.Duration) error {
	ctx := context.Background()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout=%d`, wait.Milliseconds())); err != nil {
		return fmt.Errorf("checkpoint %s: %w", r.Path, err)
	}
	defer conn.ExecContext(ctx, `PRAGMA busy_timeout=30000`)
	var busy, logged, done int
	if err := conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &done); err != nil {
		return fmt.Errorf("checkpoint %s: %w", r.Path, err)
	}
	if busy != 0 {
		return ErrReaderHolds
	}
	return nil
}

// compactShare: the file is compacted once this share of its pages is
// free. SQLite reuses free pages for new data anyway; rewriting the file
// costs time in proportion to all of it (200 s for 8 GB here).
const compactShare = 5

// compact rewrites the repository file without its free pages (VACUUM),
// when at least 1/compactShare of them are free, and returns its size
// before and after (0, 0: not worth it). The copy VACUUM builds goes to a
// temporary file, not memory (the connections keep temp_store=MEMORY for
// sorts): in memory it took twice the repository's size in RAM, 4.3 GB
// for a 2 GB repository that had nothing to free. The write-ahead log,
// which the rewrite fills with every page, is truncated after it.
func (r *Repo) compact() (before, after int64, err error) {
	var free, total int64
	if err := r.DB.QueryRow(`PRAGMA freelist_count`).Scan(&free); err != nil {
		return 0, 0, fmt.Errorf("count free pages: %w", err)
	}
	if err := r.DB.QueryRow(`PRAGMA page_count`).Scan(&total); err != nil {
		return 0, 0, fmt.Errorf("count pages: %w", err)
	}
	if free == 0 || free*compactShare < total {
		return 0, 0, nil
	}
	if st, err := os.Stat(r.Path); err == nil {
		before = st.Size()
	}
	ctx := context.Background()
	conn, err := r.DB.Conn(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("compact %s: %w", r.Path, err)
	}
	defer conn.Close()
	// A reader's snapshot would keep the old pages in the log, and the
	// file its size: then there is nothing to gain now.
	if err := r.truncateWAL(conn, 2*time.Second); errors.Is(err, ErrReaderHolds) {
		// Nothing was rewritten: the file keeps its size after the
		// reader too ("shrinks once it ends" sent the user waiting).
		return 0, 0, fmt.Errorf("%w; run art gc again once it ends to compact the file", err)
	} else if err != nil {
		return 0, 0, err
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA temp_store=FILE`); err != nil {
		return 0, 0, fmt.Errorf("compact %s: %w", r.Path, err)
	}
	_, err = conn.ExecContext(ctx, `VACUUM`)
	conn.ExecContext(ctx, `PRAGMA temp_store=MEMORY`)
	if terr := r.truncateWAL(conn, 2*time.Second); err == nil {
		err = terr
	}
	if errors.Is(err, ErrReaderHolds) {
		// Rewritten: the log holds the compacted file, which the first
		// checkpoint after the reader writes back.
		return 0, 0, fmt.Errorf("%w; the file shrinks once it ends", err)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("compact %s: %w", r.Path, err)
	}
	if st, err := os.Stat(r.Path); err == nil {
		after = st.Size()
	}
	return before, after, nil
}

// gcGeneration counts the gc runs of a repository (0 before the first).
func gcGeneration(q querier) (int64, error) {
	var v int64
	err := q.QueryRow(`SELECT CAST(value AS INTEGER) FROM meta WHERE key='gc_generation'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read gc generation: %w", err)
	}
	return v, nil
}

// moveWorkspacesOff moves each workspace whose synced commit gc frees to
// the nearest ancestor gc keeps: an older base for its next push's merge,
// which then still merges (with none, the push recorded the host as it
// was and undid the sessions since), or to none. Done before any commit
// is deleted: the walk reads the freed ones.
func (r *Repo) moveWorkspacesOff(tx *Tx, keep map[objects.ID]bool) error {
	rows, err := tx.Query(`SELECT path, commit_id FROM workspaces WHERE commit_id IS NOT NULL`)
	if err != nil {
		return fmt.Errorf("gc workspaces: %w", err)
	}
	type move struct {
		path string
		to   any
	}
	var moves []move
	for rows.Next() {
		var path string
		var b []byte
		if err := rows.Scan(&path, &b); err != nil {
			rows.Close()
			return fmt.Errorf("gc workspaces: %w", err)
		}
		id, err := objects.FromBytes(b)
		if err == nil && keep[id] {
			continue
		}
		m := move{path: path} // NULL: no ancestor kept
		if err == nil {
			if anc, ok := r.keptAncestor(tx, id, keep); ok {
				m.to = anc[:]
			}
		}
		moves = append(moves, m)
	}
	rows.Close()
	for _, m := range moves {
		if _, err := tx.Exec(`UPDATE workspaces SET commit_id=? WHERE path=?`, m.to, m.path); err != nil {
			return fmt.Errorf("gc workspaces: %w", err)
		}
	}
	return nil
}

// keptAncestor returns the nearest commit reached from id by first
// parents that gc keeps (at most 10,000 back).
func (r *Repo) keptAncestor(tx *Tx, id objects.ID, keep map[objects.ID]bool) (objects.ID, bool) {
	for i := 0; i < 10000; i++ {
		c, err := tx.LoadCommit(id)
		if err != nil || len(c.Parents) == 0 {
			return objects.Zero, false
		}
		id = c.Parents[0]
		if keep[id] {
			return id, true
		}
	}
	return objects.Zero, false
}
