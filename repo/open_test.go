package repo

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestPragmasOnEveryPooledConnection(t *testing.T) {
	r := newTestRepo(t)
	ctx := context.Background()
	// Hold several connections at once so the pool must open new ones.
	const n = 6
	conns := make([]*sql.Conn, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range conns {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			conns[i], errs[i] = r.DB.Conn(ctx)
		}(i)
	}
	wg.Wait()
	for i, c := range conns {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		var fk, busy, page int
		var mode string
		if err := c.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&page); err != nil {
			t.Fatal(err)
		}
		if page != PageSize {
			t.Errorf("connection %d: page_size=%d, want %d for a new repository", i, page, PageSize)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if fk != 1 || mode != "wal" || busy <= 0 {
			t.Errorf("connection %d: foreign_keys=%d journal_mode=%s busy_timeout=%d", i, fk, mode, busy)
		}
		// Foreign keys are enforced, not just reported.
		if _, err := c.ExecContext(ctx, `INSERT INTO refs(name, commit_id) VALUES('x', x'00')`); err == nil {
			t.Errorf("connection %d: a ref to a missing commit was accepted", i)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	if st := r.DB.Stats(); st.OpenConnections < n {
		t.Fatalf("only %d pooled connections were opened", st.OpenConnections)
	}
}

func setSchemaVersion(t *testing.T, path, v string) {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.DB.Exec(`UPDATE meta SET value=? WHERE key='schema_version'`, v); err != nil {
		t.Fatal(err)
	}
	r.Close()
}

func TestNewerSchemaRefusedUnchanged(t *testing.T) {
	r := newTestRepo(t)
	path := r.Path
	r.Close()
	setSchemaVersion(t, path, "99")
	before := filesState(t, path)
	_, err := Open(path)
	mustFail(t, err, ErrNewerSchema)
	if !strings.Contains(err.Error(), "99") || !strings.Contains(err.Error(), "upgrade art") {
		t.Errorf("message does not name the version and the next step: %v", err)
	}
	if after := filesState(t, path); after != before {
		t.Fatalf("the refused repository was modified:\n%s\n%s", before, after)
	}
}

// filesState describes a database file and its -wal and -shm companions:
// hashes of the file and the -wal, and whether each exists.
func filesState(t *testing.T, path string) string {
	t.Helper()
	s := "db " + fileHash(t, path)
	if _, err := os.Stat(path + "-wal"); err == nil {
		s += " wal " + fileHash(t, path+"-wal")
	}
	return s
}

func TestOpenRefusesNonRepositories(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// An SQLite database of some other program, in rollback-journal mode.
	foreign := filepath.Join(dir, "other.sqlite")
	db, err := sql.Open("sqlite", foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE notes(x TEXT); INSERT INTO notes VALUES('keep me')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// And one in WAL mode. Regression: art used to leave an empty -wal
	// file next to it (its connections keep the -wal when they close).
	foreignWAL := filepath.Join(dir, "other-wal.sqlite")
	db, _ = sql.Open("sqlite", foreignWAL)
	if _, err := db.Exec(`PRAGMA journal_mode=WAL; CREATE TABLE notes(x TEXT); INSERT INTO notes VALUES('keep me')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := os.Stat(foreignWAL + "-wal"); err == nil {
		t.Fatal("setup: -wal left by the test's own close")
	}
	withMeta := filepath.Join(dir, "meta.sqlite")
	db, _ = sql.Open("sqlite", withMeta)
	if _, err := db.Exec(`CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	badVersion := newTestRepo(t).Path
	setSchemaVersion(t, badVersion, "one")
	zeroVersion := newTestRepo(t).Path
	setSchemaVersion(t, zeroVersion, "0")
	noVersion := newTestRepo(t).Path
	execSQL(t, noVersion, `DELETE FROM meta WHERE key='schema_version'`)

	header := []byte("SQLite format 3\x00")
	corrupt := append(append([]byte(nil), header...), []byte(strings.Repeat("garbage!", 1000))...)
	// Each says what the file is and what to do: a file that is no
	// repository gets "give -d the repository file", a damaged
	// repository which row is wrong and to restore it. Before, an empty
	// file was "not an SQLite database (create one with 'art init')",
	// which then refused it as an existing repository, and a damaged
	// repository got "sql: no rows in result set".
	tests := []struct {
		name string
		path string
		want error
		says []string
	}{
		{"text file", mk("notes.txt", []byte("hello, not a database\n")), ErrNotRepo, []string{"not a SQLite database", "give -d"}},
		{"empty file", mk("empty.db", nil), ErrNotRepo, []string{"an empty file", "give -d"}},
		{"header only", mk("header.db", header), ErrNotRepo, []string{"SQLite cannot read"}},
		{"corrupt sqlite", mk("corrupt.db", corrupt), ErrNotRepo, []string{"SQLite cannot read", "backup"}},
		{"sqlite without art tables", foreign, ErrNotRepo, []string{"a SQLite database without art's tables", "give -d"}},
		{"sqlite in WAL mode without art tables", foreignWAL, ErrNotRepo, []string{"without art's tables"}},
		{"sqlite with an empty meta table", withMeta, ErrNotRepo, []string{"without art's tables"}},
		{"non-numeric schema version", badVersion, ErrDamaged, []string{`schema_version is "one"`, "backup"}},
		{"schema version 0", zeroVersion, ErrDamaged, []string{`schema_version is "0"`, "backup"}},
		{"no schema version", noVersion, ErrDamaged, []string{"no schema_version row", "backup"}},
		{"directory", dir, ErrNotRepo, []string{"a directory", "give -d the repository file, e.g. -d " + filepath.Join(dir, "art.db")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before string
			if tc.path != dir {
				before = filesState(t, tc.path)
			}
			r, err := Open(tc.path)
			if err == nil {
				r.Close()
			}
			mustFail(t, err, tc.want)
			if tc.path != dir {
				if after := filesState(t, tc.path); after != before {
					t.Fatalf("the file was modified or got companions:\n%s\n%s", before, after)
				}
			}
			if !strings.Contains(err.Error(), tc.path) {
				t.Errorf("the message does not name the file: %v", err)
			}
			for _, w := range tc.says {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the message lacks %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), "sql:") || strings.Contains(err.Error(), "SQL logic") {
				t.Errorf("the message shows Go's or SQLite's internals: %v", err)
			}
			if tc.path == dir {
				return
			}
			// art init on it: not "repository already exists" (which
			// sent the user back to -d) for what is none; the file
			// is left as it was.
			_, err = Init(tc.path)
			if err == nil {
				t.Fatal("Init over it succeeded")
			}
			if tc.want == ErrNotRepo && (errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "does not overwrite it")) {
				t.Errorf("Init over a file that is no repository: %v", err)
			}
			if tc.want == ErrDamaged && !errors.Is(err, ErrExists) {
				t.Errorf("Init over a damaged repository: %v", err)
			}
			if after := filesState(t, tc.path); after != before {
				t.Fatalf("Init modified the file or gave it companions:\n%s\n%s", before, after)
			}
		})
	}
	// A directory holding a repository: -d is pointed at its file.
	ws := t.TempDir()
	inner, err := Init(filepath.Join(ws, DirName, FileName))
	if err != nil {
		t.Fatal(err)
	}
	inner.Close()
	if _, err := Open(ws); err == nil || !strings.Contains(err.Error(), "-d "+inner.Path) {
		t.Errorf("Open of a workspace directory does not point at its repository: %v", err)
	}
	_, err = Open(filepath.Join(dir, "missing.db"))
	mustFail(t, err, os.ErrNotExist)
}

// execSQL runs statements on a database file without any of art's checks.
func execSQL(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, st := range stmts {
		if _, err := db.Exec(st); err != nil {
			t.Fatal(err)
		}
	}
}

// A repository without its head row is damaged: reading HEAD says so,
// and moving it fails instead of updating nothing (art checkout said it
// had switched, exit 0, with HEAD as unreadable as before).
func TestMissingHeadRow(t *testing.T) {
	r := newTestRepo(t)
	execSQL(t, r.Path, `DELETE FROM meta WHERE key='head'`)
	_, err := r.Head()
	mustFail(t, err, ErrDamaged)
	if !strings.Contains(err.Error(), "no head row") || !strings.Contains(err.Error(), "art fsck") || strings.Contains(err.Error(), "sql:") {
		t.Errorf("Head: %v", err)
	}
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	err = tx.SetHead(Head{Branch: "main"})
	mustFail(t, err, ErrDamaged)
	if !strings.Contains(err.Error(), "update HEAD") || !strings.Contains(err.Error(), "no head row") {
		t.Errorf("SetHead: %v", err)
	}
}

func TestInitAndReopen(t *testing.T) {
	r := newTestRepo(t)
	_, err := Init(r.Path)
	mustFail(t, err, ErrExists)
	h, err := r.Head()
	if err != nil || h.Branch != "main" || !h.Commit.IsZero() {
		t.Fatalf("fresh HEAD = %+v, %v", h, err)
	}
	_, err = r.Resolve("HEAD")
	mustFail(t, err, ErrNoCommits)
	r = reopen(t, r)
	var v string
	if err := r.DB.QueryRow(`SELECT value FROM meta WHERE key='schema_version'`).Scan(&v); err != nil || v != strconv.Itoa(SchemaVersion) {
		t.Fatalf("schema_version %q, %v", v, err)
	}
}

func TestDiscover(t *testing.T) {
	t.Setenv("ART_DB", "")
	root := t.TempDir()
	nested := filepath.Join(root, "a", "b", "c")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Discover("", nested)
	mustFail(t, err, ErrNoRepo)
	if !strings.Contains(err.Error(), "art init") {
		t.Errorf("no next step in %q", err)
	}
	r, err := Init(filepath.Join(root, "a", DirName, FileName))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	for _, tc := range []struct {
		name, explicit, env, start, want string
	}{
		{"from a nested dir", "", "", nested, r.Path},
		{"from the dir itself", "", "", filepath.Join(root, "a"), r.Path},
		{"explicit wins", "/x/y.db", "/env.db", nested, "/x/y.db"},
		{"env next", "", "/env.db", nested, "/env.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ART_DB", tc.env)
			got, err := Discover(tc.explicit, tc.start)
			if err != nil || got != tc.want {
				t.Fatalf("Discover = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	// A .art directory without the file is not a repository.
	os.MkdirAll(filepath.Join(root, "b", DirName), 0o755)
	if _, err := Discover("", filepath.Join(root, "b")); !errors.Is(err, ErrNoRepo) {
		t.Fatalf("empty .art: %v", err)
	}
	// Nor is a link to another's: anyone who may write a directory (an
	// agent in --direct mode) can make one, and art log, push and pull
	// there then worked on that repository.
	os.MkdirAll(filepath.Join(root, "c"), 0o755)
	os.Symlink(filepath.Join(root, "a", DirName), filepath.Join(root, "c", DirName))
	os.MkdirAll(filepath.Join(root, "d", DirName), 0o755)
	os.Symlink(r.Path, filepath.Join(root, "d", DirName, FileName))
	for _, dir := range []string{"c", "d"} {
		got, err := Discover("", filepath.Join(root, dir))
		if err == nil || errors.Is(err, ErrNoRepo) || !strings.Contains(err.Error(), "is a symbolic link") || !strings.Contains(err.Error(), "-d FILE") {
			t.Errorf("%s: Discover through a link = %q, %v; want an error naming the link", dir, got, err)
		}
	}
}

// Regression: opening a foreign SQLite file used to switch it to WAL
// mode (rewriting its header) before finding out it was not a repository.
func TestOpenDoesNotConvertForeignFileToWAL(t *testing.T) {
	p := filepath.Join(t.TempDir(), "foreign.db")
	db, _ := sql.Open("sqlite", p)
	if _, err := db.Exec(`CREATE TABLE t(x)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(p); !errors.Is(err, ErrNotRepo) {
		t.Fatal(err)
	}
	db, _ = sql.Open("sqlite", p)
	defer db.Close()
	var mode string
	db.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
	if mode != "delete" {
		t.Fatalf("journal mode is now %q", mode)
	}
}

// Schema 2 → 3 adds the owner columns of upper-layer nodes; a row written
// before has none (NULL: the mount's owner) and keeps everything else.
func TestMigrateUpperOwners(t *testing.T) {
	r := newTestRepo(t)
	ws := newWorkspace(t, "ws")
	writeFiles(t, ws, map[string]string{"a.txt": "a"})
	push(t, r, ws, "one")
	wt, _, err := r.CreateWorktree("main", "mount", "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`ALTER TABLE upper_inodes DROP COLUMN uid`,
		`ALTER TABLE upper_inodes DROP COLUMN gid`,
		fmt.Sprintf(`INSERT INTO upper_inodes(wt, ino, type, mode, nlink, size, mtime, ctime, atime) VALUES(%d, 7, 1, 420, 1, 3, 1, 2, 3)`, wt.ID),
		`UPDATE meta SET value='2' WHERE key='schema_version'`,
	} {
		if _, err := r.DB.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	r = reopen(t, r)
	var v string
	if err := r.DB.QueryRow(`SELECT value FROM meta WHERE key='schema_version'`).Scan(&v); err != nil || v != strconv.Itoa(SchemaVersion) {
		t.Fatalf("schema_version %q after the migration, %v", v, err)
	}
	var size int64
	var uid, gid sql.NullInt64
	if err := r.DB.QueryRow(`SELECT size, uid, gid FROM upper_inodes WHERE wt=? AND ino=7`, wt.ID).Scan(&size, &uid, &gid); err != nil {
		t.Fatal(err)
	}
	if size != 3 || uid.Valid || gid.Valid {
		t.Errorf("migrated row: size %d, owner %v:%v (want 3, NULL:NULL)", size, uid, gid)
	}
}

// A transaction that fails leaves its pages in the write-ahead log, which
// keeps its size until the last connection closes: ShrinkWAL gives the
// room back (a recovery that failed on a full disk kept 90 MB from the
// session its command then ran).
func TestShrinkWAL(t *testing.T) {
	r := newTestRepo(t)
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	// A page cache smaller than the transaction, as for a session's
	// commit: its pages spill into the log before the end.
	if _, err := tx.Exec(`PRAGMA cache_size = -1024`); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 8<<20)
	rand.New(rand.NewSource(9)).Read(big)
	if _, _, err := tx.PutFile(bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	st, err := os.Stat(r.Path + "-wal")
	if err != nil || st.Size() < 1<<20 {
		t.Fatalf("the log after a rolled-back 8 MiB transaction: %v, %v", st, err)
	}
	if err := r.ShrinkWAL(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(r.Path + "-wal"); err == nil && st.Size() != 0 {
		t.Fatalf("the log after ShrinkWAL: %d bytes", st.Size())
	}
}

// A repository found by searching that another user owns (their .art in
// /tmp, or in a shared directory above the workspace) is refused, as git
// refuses such a .git: root's push stored its files there, where that
// user read them, and pull wrote theirs into root's workspace. Named with
// -d or ART_DB it is the caller's choice.
func TestDiscoverRefusesAnotherUsersRepository(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root, to give files to another user")
	}
	const other = 4242
	for _, tc := range []struct {
		name     string
		chown    []string // relative to the planted repository's directory
		sudoUID  string
		explicit bool
		refused  bool
	}{
		{name: "own repository", refused: false},
		{name: "another user's .art and file", chown: []string{DirName, DirName + "/" + FileName}, refused: true},
		{name: "another user's file in a .art of root's", chown: []string{DirName + "/" + FileName}, refused: true},
		{name: "another user's .art holding root's file", chown: []string{DirName}, refused: true},
		{name: "the sudo caller's own", chown: []string{DirName, DirName + "/" + FileName}, sudoUID: "4242", refused: false},
		{name: "named with -d", chown: []string{DirName, DirName + "/" + FileName}, explicit: true, refused: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ART_DB", "")
			t.Setenv("SUDO_UID", tc.sudoUID)
			shared := t.TempDir() // /tmp, a shared project directory
			ws := filepath.Join(shared, "ws")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			r, err := Init(filepath.Join(shared, DirName, FileName))
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			for _, rel := range tc.chown {
				if err := os.Chown(filepath.Join(shared, rel), other, other); err != nil {
					t.Fatal(err)
				}
			}
			explicit := ""
			if tc.explicit {
				explicit = r.Path
			}
			got, err := Discover(explicit, ws)
			if !tc.refused {
				if err != nil || got != r.Path {
					t.Fatalf("Discover = %q, %v; want %s", got, err, r.Path)
				}
				return
			}
			if err == nil || errors.Is(err, ErrNoRepo) || !strings.Contains(err.Error(), "belongs to uid 4242") || !strings.Contains(err.Error(), "-d FILE") {
				t.Fatalf("Discover = %q, %v; want a refusal naming the owner and -d", got, err)
			}
		})
	}
}

// art init -m DIR in a directory another user can write: a .art they
// made (a link to any directory of the host, or a directory of theirs)
// is refused before anything is created.
func TestCheckNewArtDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root, to give files to another user")
	}
	const other = 4242
	for _, tc := range []struct {
		name    string
		plant   func(t *testing.T, ws, victim string)
		sudoUID string
		refused string // in the error; "" for none
	}{
		{name: "no .art yet", plant: func(t *testing.T, ws, victim string) {}},
		{name: "root's own .art", plant: func(t *testing.T, ws, victim string) {
			os.Mkdir(filepath.Join(ws, DirName), 0o700)
		}},
		{name: "a link to another directory", refused: "symbolic link", plant: func(t *testing.T, ws, victim string) {
			os.Symlink(victim, filepath.Join(ws, DirName))
		}},
		{name: "another user's .art", refused: "belongs to uid 4242", plant: func(t *testing.T, ws, victim string) {
			os.Mkdir(filepath.Join(ws, DirName), 0o777)
			os.Chown(filepath.Join(ws, DirName), other, other)
		}},
		{name: "the sudo caller's .art", sudoUID: "4242", plant: func(t *testing.T, ws, victim string) {
			os.Mkdir(filepath.Join(ws, DirName), 0o755)
			os.Chown(filepath.Join(ws, DirName), other, other)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SUDO_UID", tc.sudoUID)
			tmp := t.TempDir()
			ws, victim := filepath.Join(tmp, "ws"), filepath.Join(tmp, "victim")
			os.Mkdir(ws, 0o755)
			os.Mkdir(victim, 0o700)
			tc.plant(t, ws, victim)
			err := CheckNewArtDir(ws)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("CheckNewArtDir: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "-d") {
				t.Fatalf("CheckNewArtDir = %v; want a refusal (%s) naming -d", err, tc.refused)
			}
		})
	}
}
