package repo

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	"modernc.org/sqlite"
)

// SchemaVersion is the newest schema this build knows. Open migrates older
// repositories forward and refuses newer ones.
const SchemaVersion = 4

// Errors callers test for.
var (
	ErrNotRepo      = errors.New("not an art repository")
	ErrDamaged      = errors.New("repository is damaged")
	ErrNewerSchema  = errors.New("repository was written by a newer art")
	ErrNoRepo       = errors.New("no art repository found")
	ErrExists       = errors.New("repository already exists")
	ErrUnknownRev   = errors.New("unknown revision")
	ErrAmbiguousRev = errors.New("ambiguous revision")
)

// Repo is an open repository.
type Repo struct {
	DB   *sql.DB
	Path string // absolute path of the database file
	objCache

	stmtMu sync.Mutex
	stmts  map[string]*sql.Stmt

	// StageAbove and StageBatch: a push or commit with more than
	// StageAbove bytes to store stages them in transactions of about
	// StageBatch bytes (see StageFiles). Open sets DefaultStageAbove and
	// DefaultStageBatch; tests lower them.
	StageAbove, StageBatch int64
}

// migrations[i] brings a schema of version i to version i+1.
var migrations = []string{
	// 0 → 1: the initial schema.
	`
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- Content chunks; a single-chunk file's id is its chunk's id.
CREATE TABLE chunks(id BLOB PRIMARY KEY, size INTEGER NOT NULL, enc INTEGER NOT NULL, data BLOB NOT NULL);
-- Files of more than one chunk: id is the hash of the whole content.
CREATE TABLE files(id BLOB PRIMARY KEY, size INTEGER NOT NULL, chunks BLOB NOT NULL);
CREATE TABLE trees(id BLOB PRIMARY KEY, size INTEGER NOT NULL, enc INTEGER NOT NULL, data BLOB NOT NULL);
CREATE TABLE commits(id BLOB PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE refs(name TEXT PRIMARY KEY, commit_id BLOB NOT NULL REFERENCES commits(id));
-- What the last push or pull saw of each host path, per host workspace:
-- one zstd-compressed blob (see syncstate.go), read and written whole.
CREATE TABLE synced(workspace TEXT PRIMARY KEY, enc INTEGER NOT NULL, data BLOB NOT NULL);
CREATE TABLE workspaces(path TEXT PRIMARY KEY, name TEXT NOT NULL, commit_id BLOB REFERENCES commits(id), branch TEXT NOT NULL DEFAULT '', synced_at INTEGER NOT NULL);
-- Live and interrupted sessions (art run / art mount), each with its own upper layer.
CREATE TABLE worktrees(
	id INTEGER PRIMARY KEY,
	branch TEXT NOT NULL,
	base BLOB NOT NULL REFERENCES commits(id),
	pid INTEGER NOT NULL DEFAULT 0,
	pid_start INTEGER NOT NULL DEFAULT 0,
	mountpoint TEXT NOT NULL DEFAULT '',
	state TEXT NOT NULL,
	kind TEXT NOT NULL DEFAULT 'mount',
	session TEXT NOT NULL DEFAULT '',
	next_ino INTEGER NOT NULL DEFAULT 2,
	created INTEGER NOT NULL,
	updated INTEGER NOT NULL);
CREATE INDEX worktrees_branch ON worktrees(branch);
-- The upper layer of each worktree (see overlay/): inodes it changed or
-- created, directory entries it changed (ino 0 is a whiteout), and the
-- 64 KiB blocks of file data it wrote (stored as chunks).
CREATE TABLE upper_inodes(
	wt INTEGER NOT NULL REFERENCES worktrees(id) ON DELETE CASCADE,
	ino INTEGER NOT NULL,
	type INTEGER NOT NULL, mode INTEGER NOT NULL, nlink INTEGER NOT NULL,
	size INTEGER NOT NULL, mtime INTEGER NOT NULL, ctime INTEGER NOT NULL, atime INTEGER NOT NULL,
	base BLOB, base_size INTEGER NOT NULL DEFAULT 0,
	target TEXT NOT NULL DEFAULT '', xattrs BLOB,
	PRIMARY KEY(wt, ino)) WITHOUT ROWID;
CREATE TABLE upper_dirents(
	wt INTEGER NOT NULL REFERENCES worktrees(id) ON DELETE CASCADE,
	dir INTEGER NOT NULL, name BLOB NOT NULL, ino INTEGER NOT NULL,
	PRIMARY KEY(wt, dir, name)) WITHOUT ROWID;
CREATE TABLE upper_blocks(
	wt INTEGER NOT NULL REFERENCES worktrees(id) ON DELETE CASCADE,
	ino INTEGER NOT NULL, idx INTEGER NOT NULL, chunk BLOB NOT NULL,
	PRIMARY KEY(wt, ino, idx)) WITHOUT ROWID;
`,
	// 1 → 2: the sync state as one row per host directory (syncstate.go);
	// migrateSyncedBlobs converts the blobs and drops synced.
	`
CREATE TABLE synced_dirs(workspace TEXT NOT NULL, dir TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY(workspace, dir));
`,
	// 2 → 3: the owner of an upper-layer node, for the session (trees
	// record none); NULL is the mount's owner.
	`
ALTER TABLE upper_inodes ADD COLUMN uid INTEGER;
ALTER TABLE upper_inodes ADD COLUMN gid INTEGER;
`,
	// 3 → 4: workspaces.branch "" now means a pull of a commit that was
	// no branch's tip (going back: the next push records the host as it
	// is); builds before wrote "" for every pull and for a detached push,
	// after which a push merges. migrateWorkspaces also re-keys rows of
	// workspaces pushed through a link (now kept under the real path) and
	// makes the repository private, as art init now makes it. Older
	// schema-3 builds refuse the result ("upgrade art") instead of
	// resuming read-only views as sessions.
	//
	// The indexes serve the foreign-key checks of gc's deletions: without
	// them each deleted commit scanned refs, workspaces and worktrees
	// (3,000 dead commits took 0.39 s beside 1,000 branches, 0.16 s
	// beside 10).
	`
UPDATE workspaces SET branch='HEAD' WHERE branch='';
CREATE INDEX IF NOT EXISTS refs_commit ON refs(commit_id);
CREATE INDEX IF NOT EXISTS workspaces_commit ON workspaces(commit_id);
CREATE INDEX IF NOT EXISTS worktrees_base ON worktrees(base);
`,
}

// afterMigration[i], when set, runs after the statements of migrations[i],
// in the same transaction; path is the repository file's.
var afterMigration = map[int]func(tx *sql.Tx, path string) error{
	1: func(tx *sql.Tx, _ string) error { return migrateSyncedBlobs(tx) },
	3: func(tx *sql.Tx, path string) error {
		if err := migrateSyncRowsWithoutTreeID(tx); err != nil {
			return err
		}
		return migrateWorkspaces(tx, path)
	},
}

func dsn(path string, readOnly bool) string {
	q := url.Values{}
	// journal_mode is not set here: WAL is persistent, so setting it on
	// every connection would rewrite a foreign SQLite file before open
	// finds out it is not a repository. open sets it once, after that.
	for _, p := range []string{"busy_timeout(30000)", "foreign_keys(1)", "synchronous(NORMAL)", "cache_size(-65536)", "temp_store(MEMORY)", "journal_size_limit(67108864)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	if readOnly {
		q.Set("mode", "ro")
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// IsReadOnly reports whether err comes from SQLite refusing to write a
// repository the process may not write (SQLITE_READONLY).
func IsReadOnly(err error) bool {
	return isSQLite(err, sqliteReadOnly, "attempt to write a readonly database")
}

// ReadOnlyAdvice says why the repository at path (may be "": unknown)
// cannot be written, for an error IsReadOnly accepts, and what to do.
func ReadOnlyAdvice(path string) string {
	if path != "" {
		dir := filepath.Dir(path)
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil && st.Flags&unix.ST_RDONLY != 0 {
			return fmt.Sprintf("the filesystem holding the repository (%s) is mounted read-only: remount it read-write, or name another repository with -d", dir)
		}
		// The -wal and -shm files too: SQLite opens the repository
		// read-only when it cannot write them.
		for _, p := range []string{path, path + "-wal", path + "-shm", dir} {
			var stx unix.Statx_t
			const locked = unix.STATX_ATTR_IMMUTABLE | unix.STATX_ATTR_APPEND
			if unix.Statx(unix.AT_FDCWD, p, 0, 0, &stx) == nil && stx.Attributes&stx.Attributes_mask&locked != 0 {
				return fmt.Sprintf("%s is immutable or append-only (lsattr -d %s): clear that with chattr -i -a, or name another repository with -d", p, p)
			}
		}
	}
	return "the repository cannot be written by this user: check the permissions of the repository file and of its directory (which holds its -wal and -shm files)"
}

// ShrinkWAL checkpoints the write-ahead log and truncates it. A
// transaction that failed on a full disk leaves its pages in the log
// (SQLite keeps the file's size for reuse) until the last connection
// closes: a recovery that failed for lack of room then kept the room
// (90 MB for a 240 MB session) from the session the same command went on
// to run, whose writes all failed.
func (r *Repo) ShrinkWAL() error {
	if _, err := r.DB.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("checkpoint %s: %w", r.Path, err)
	}
	return nil
}

// IsFull reports whether err comes from SQLite finding the repository's
// filesystem full (SQLITE_FULL).
func IsFull(err error) bool { return isSQLite(err, sqliteFull, "database or disk is full") }

// isSQLite reports whether err carries SQLite's primary result code, or,
// since some callers wrap with %v, SQLite's message for it.
func isSQLite(err error, code int, msg string) bool {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == code {
		return true
	}
	return err != nil && strings.Contains(err.Error(), msg)
}

// SQLite's primary result codes: SQLITE_READONLY, a write refused on a
// read-only database, and SQLITE_FULL.
const (
	sqliteReadOnly = 8
	sqliteFull     = 13
)

// Init creates a new repository at path (its directory is created too).
func Init(path string) (*Repo, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if st, err := os.Lstat(abs); err == nil {
		if st.IsDir() {
			return nil, fmt.Errorf("init %s: is a directory; -d names the repository file (e.g. -d %s)", abs, filepath.Join(abs, FileName))
		}
		// Say what the file is: "already exists" about a text file sent
		// the user to use it with -d, which then said it was no
		// repository.
		if what := notRepoKind(abs, st); what != "" {
			return nil, fmt.Errorf("init %s: %w (%s); art init does not overwrite it: move it away, or name a new file with -d", abs, ErrNotRepo, what)
		}
		return nil, fmt.Errorf("init %s: %w (use it with -d %s, or remove it first)", abs, ErrExists, abs)
	}
	// The repository holds everything every session wrote: only its owner
	// may read it (agents run as another user).
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("init %s: %w", abs, err)
	}
	f, err := os.OpenFile(abs, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("init %s: %w", abs, err)
	}
	f.Close()
	r, err := open(abs, true)
	if err != nil {
		os.Remove(abs)
		return nil, err
	}
	return r, nil
}

// Open opens an existing repository, migrating it forward if needed.
func Open(path string) (*Repo, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open repository %s: %w (check the path, or create one there with 'art init -d %s')", abs, err, ShellArg(abs))
	}
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", abs, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("open repository %s: %w: a directory; give -d the repository file, e.g. -d %s", abs, ErrNotRepo, repoFileBelow(abs))
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("open repository %s: %w: not a regular file (%s); give -d the repository file, e.g. -d DIR/.art/art.db", abs, ErrNotRepo, st.Mode().Type())
	}
	return open(abs, false)
}

// notRepoAdvice is the next step after a file that is no repository: the
// path given was wrong.
const notRepoAdvice = "give -d (or $ART_DB) the repository file, e.g. -d DIR/.art/art.db ('art init -m DIR' creates one)"

// repoFileBelow is the repository file a user who named directory dir
// most likely meant: its .art/art.db or art.db when it holds one, else
// dir/art.db as an example.
func repoFileBelow(dir string) string {
	for _, p := range []string{filepath.Join(dir, DirName, FileName), filepath.Join(dir, FileName)} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return filepath.Join(dir, FileName)
}

// sqliteHeader starts every SQLite database file.
const sqliteHeader = "SQLite format 3\x00"

// artTables are tables every art repository has (schema 1 on); a
// database with a meta table but not these is another program's.
const artTables = `SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN ('commits', 'refs', 'worktrees')`

// notRepoKind says what the existing file at abs (stat st) is when it is
// plainly no art repository ("an empty file", "not a SQLite
// database", ...), or "" when it looks like one, damaged or not. It only
// reads the file: SQLite opens it read-only and immutable, so that no
// -wal or -shm file is made next to it and nothing in it changes.
func notRepoKind(abs string, st os.FileInfo) string {
	if !st.Mode().IsRegular() {
		return fmt.Sprintf("not a regular file (%s)", st.Mode().Type())
	}
	if st.Size() == 0 {
		return "an empty file"
	}
	f, err := os.Open(abs)
	if err != nil {
		return "" // unreadable: let the caller's own open say why
	}
	hdr := make([]byte, len(sqliteHeader))
	n, _ := f.Read(hdr)
	f.Close()
	if n < len(hdr) || string(hdr) != sqliteHeader {
		return "not a SQLite database"
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("immutable", "1")
	db := sql.OpenDB(connector{dsn: "file:" + (&url.URL{Path: abs}).EscapedPath() + "?" + q.Encode(), drv: &sqlite.Driver{}})
	defer db.Close()
	var meta, tables int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'`).Scan(&meta); err != nil {
		return "a file SQLite cannot read"
	}
	if err := db.QueryRow(artTables).Scan(&tables); err != nil || meta == 0 || tables < 3 {
		return "a SQLite database without art's tables"
	}
	return ""
}

func open(abs string, create bool) (*Repo, error) {
	if !create {
		// Refuse anything that is not an SQLite file before the driver
		// gets a chance to treat it as an empty database.
		f, err := os.Open(abs)
		if err != nil {
			return nil, fmt.Errorf("open repository %s: %w", abs, err)
		}
		hdr := make([]byte, 16)
		n, _ := f.Read(hdr)
		f.Close()
		switch {
		case n == 0:
			return nil, fmt.Errorf("open repository %s: %w: an empty file; %s", abs, ErrNotRepo, notRepoAdvice)
		case n < 16 || string(hdr) != sqliteHeader:
			return nil, fmt.Errorf("open repository %s: %w: not a SQLite database; %s", abs, ErrNotRepo, notRepoAdvice)
		}
	}
	_, walErr := os.Lstat(abs + "-wal")
	db := sql.OpenDB(connector{dsn: dsn(abs, false), drv: newDriver()})
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	r := &Repo{DB: db, Path: abs, StageAbove: DefaultStageAbove, StageBatch: DefaultStageBatch}
	r.objCache.init()
	if err := r.migrate(create); err != nil {
		if walErr != nil {
			unpersistWAL(db) // a refused file keeps no -wal of ours
		}
		db.Close()
		return nil, fmt.Errorf("open repository %s: %w", abs, err)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode=WAL`).Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		db.Close()
		return nil, fmt.Errorf("open repository %s: cannot enable WAL (journal mode %q): %v", abs, mode, err)
	}
	return r, nil
}

func (r *Repo) migrate(create bool) error {
	ctx := context.Background()
	var version int
	var hasMeta int
	if err := r.DB.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'`).Scan(&hasMeta); err != nil {
		// No art command can open it, art fsck included: only a backup
		// helps, if it was a repository at all.
		return fmt.Errorf("%w: a file with an SQLite header that SQLite cannot read (%v); if it was a repository, it is damaged: restore it from a backup", ErrNotRepo, err)
	}
	var artTablesFound int
	if err := r.DB.QueryRowContext(ctx, artTables).Scan(&artTablesFound); err != nil {
		return fmt.Errorf("read the schema: %w", err)
	}
	if hasMeta == 0 || artTablesFound < 3 {
		var tables int
		r.DB.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&tables)
		if !create || tables > 0 {
			return fmt.Errorf("%w: a SQLite database without art's tables; %s", ErrNotRepo, notRepoAdvice)
		}
	} else {
		// art's tables with a meta table that does not say their
		// version: a damaged repository, which no art command can
		// open (migrating "version 0" failed on "table meta already
		// exists"), so art fsck cannot check it either.
		var v string
		err := r.DB.QueryRowContext(ctx, `SELECT value FROM meta WHERE key='schema_version'`).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: its meta table has no schema_version row (restore the repository from a backup)", ErrDamaged)
		}
		if err != nil {
			return fmt.Errorf("read the schema version: %w", err)
		}
		version, err := strconv.Atoi(v)
		if err != nil || version < 1 {
			return fmt.Errorf("%w: its schema_version is %q, which no art writes (restore the repository from a backup)", ErrDamaged, v)
		}
		if version > SchemaVersion {
			return fmt.Errorf("%w: schema version %d, this art knows up to %d (upgrade art)", ErrNewerSchema, version, SchemaVersion)
		}
		if version == SchemaVersion {
			return nil
		}
		return r.applyMigrations(version)
	}
	return r.applyMigrations(version)
}

// PageSize is the SQLite page size of a new repository. Chunks larger than
// a page spill into overflow pages whose last one is half empty on
// average: 2 KiB pages store an 11k-file source tree in 2.5 % less space
// than SQLite's default 4 KiB (bench/profile -sizes), at no measurable
// cost to push or pull. An existing repository keeps the size it has.
const PageSize = 2048

func (r *Repo) applyMigrations(from int) error {
	ctx := context.Background()
	conn, err := r.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if from == 0 {
		// Set on the connection that creates the first table, or it
		// has no effect.
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA page_size=%d", PageSize)); err != nil {
			return fmt.Errorf("set page size: %w", err)
		}
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if from > 0 {
		// Read again under the write lock: another command may have
		// migrated the repository since (two at once both migrated, and
		// the second failed on "duplicate column").
		var v string
		if err := tx.QueryRow(`SELECT value FROM meta WHERE key='schema_version'`).Scan(&v); err != nil {
			return fmt.Errorf("read the schema version: %w", err)
		}
		if now, err := strconv.Atoi(v); err == nil && now > from {
			if now >= SchemaVersion {
				return nil
			}
			from = now
		}
	}
	// A failure rolls the whole migration back: the message says so, and
	// what to do (the caller adds why a read-only or full repository
	// failed).
	fail := func(v int, err error) error {
		if from == 0 {
			return fmt.Errorf("create the schema: %w", err)
		}
		return fmt.Errorf("migrate schema %d→%d: %w; the repository is unchanged (schema %d): fix the cause and run the command again (the art build that wrote it still opens it, and its 'art fsck' checks it)", v, v+1, err, from)
	}
	for v := from; v < SchemaVersion; v++ {
		for _, stmt := range splitSQL(migrations[v]) {
			if _, err := tx.Exec(stmt); err != nil {
				return fail(v, err)
			}
		}
		if v == 0 {
			if _, err := tx.Exec(`INSERT INTO meta(key, value) VALUES('head', 'ref:main')`); err != nil {
				return fail(v, fmt.Errorf("record HEAD: %w", err))
			}
		}
		if f := afterMigration[v]; f != nil {
			if err := f(tx, r.Path); err != nil {
				return fail(v, err)
			}
		}
	}
	if _, err := tx.Exec(`INSERT INTO meta(key, value) VALUES('schema_version', ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value`, strconv.Itoa(SchemaVersion)); err != nil {
		return fail(SchemaVersion-1, fmt.Errorf("record schema version %d: %w", SchemaVersion, err))
	}
	if err := tx.Commit(); err != nil {
		return fail(SchemaVersion-1, fmt.Errorf("commit: %w", err))
	}
	if from > 0 && from <= 3 {
		// After the commit: a migration that fails leaves the host's
		// files as they were too.
		makePrivate(r.Path)
	}
	return nil
}

func splitSQL(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ";\n") {
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return out
}

// Close closes the database.
func (r *Repo) Close() error {
	r.stmtMu.Lock()
	for _, s := range r.stmts {
		s.Close()
	}
	r.stmts = nil
	r.stmtMu.Unlock()
	return r.DB.Close()
}

// newDriver returns an SQLite driver whose connections keep the -wal file
// when they close (SQLITE_FCNTL_PERSIST_WAL): every art command would
// otherwise create and delete it again, which costs more than a short
// command's own work.
func newDriver() *sqlite.Driver {
	d := &sqlite.Driver{}
	d.RegisterConnectionHook(func(c sqlite.ExecQuerierContext, _ string) error {
		if fc, ok := c.(sqlite.FileControl); ok {
			fc.FileControlPersistWAL("main", 1)
		}
		return nil
	})
	return d
}

// connector opens connections of one DSN with one driver instance (no
// process-wide driver registration).
type connector struct {
	dsn string
	drv *sqlite.Driver
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c connector) Driver() driver.Driver                        { return c.drv }

// unpersistWAL lets the connection that checked a refused file delete the
// -wal file it created when it closes (a foreign WAL-mode database must be
// left as it was). The check runs its queries on one connection.
func unpersistWAL(db *sql.DB) {
	conn, err := db.Conn(context.Background())
	if err != nil {
		return
	}
	defer conn.Close()
	conn.Raw(func(c any) error {
		if fc, ok := c.(sqlite.FileControl); ok {
			fc.FileControlPersistWAL("main", 0)
		}
		return nil
	})
}
