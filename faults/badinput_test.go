package faults

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/artproject/art/internal/testenv"
	"github.com/artproject/art/overlay"
	"github.com/artproject/art/repo"
)

// Bad input: every failure mode gets a clear message and a non-zero exit,
// never a panic, a hang or a partial write.

const journalHeaderLen = 8 + 8 + 8 // "artjrnl1", worktree id, creation time

// goldenJournal makes an interrupted worktree whose journal holds frames
// that never reached SQLite: the overlay runs in this process while the
// test holds SQLite's write lock, so its applier cannot run; the files are
// copied as a crash would leave them. It returns the directory holding the
// copy (art.db, art.db-wal, art.db-wt<ID>.journal), the worktree id, and
// the files written, in journal order (file i is in frame i).
func goldenJournal(t *testing.T, e *env, n int) (string, int64, []string, [][]byte) {
	t.Helper()
	e.artOK("branch", "torn", "main")
	r, err := repo.Open(e.db)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	wt, _, err := r.CreateWorktree("torn", "mount", "", "")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := overlay.Open(r, wt, overlay.Options{Log: nil})
	if err != nil {
		t.Fatal(err)
	}
	// Hold the write lock: journaled records pile up unapplied.
	lock, err := sql.Open("sqlite", "file:"+e.db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	conn, err := lock.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	ws, err := fs.Lookup(overlay.RootIno, filepath.Base(e.ws))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	var names []string
	var contents [][]byte
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("torn-%02d.bin", i)
		b := make([]byte, 1+rng.IntN(100<<10))
		fillRand(rng, b)
		a, err := fs.Create(ws.Ino, name, 0o644, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Write(a.Ino, b, 0); err != nil {
			t.Fatal(err)
		}
		if err := fs.Flush(a.Ino); err != nil { // one journal frame
			t.Fatal(err)
		}
		fs.Released(a.Ino)
		names = append(names, name)
		contents = append(contents, b)
	}
	// "Crash": copy the files as they are now.
	golden := filepath.Join(e.base, "golden")
	os.MkdirAll(golden, 0o755)
	jpath := overlay.JournalPath(r, wt)
	for _, p := range []string{e.db, e.db + "-wal", jpath} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(golden, filepath.Base(p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	conn.ExecContext(context.Background(), "ROLLBACK")
	conn.Close()
	fs.Close()
	// The copy's worktree belongs to a process that is gone.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(golden, filepath.Base(e.db)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE worktrees SET pid=? WHERE id=?`, deadPid(t), wt.ID); err != nil {
		t.Fatal(err)
	}
	db.Close()
	return golden, wt.ID, names, contents
}

// frames returns the end offsets of the journal's frames.
func frames(t *testing.T, j []byte) []int {
	t.Helper()
	var ends []int
	for off := journalHeaderLen; off+12 <= len(j); {
		n := int(binary.LittleEndian.Uint32(j[off+4:]))
		off += 12 + n
		if off > len(j) {
			break
		}
		ends = append(ends, off)
	}
	return ends
}

func TestTornAndGarbageJournals(t *testing.T) {
	requireFUSE(t)
	e := newEnv(t)
	seedWorkspace(t, e)
	const files = 8
	golden, wt, names, contents := goldenJournal(t, e, files)
	jname := fmt.Sprintf("art.db-wt%d.journal", wt)
	j, err := os.ReadFile(filepath.Join(golden, jname))
	if err != nil {
		t.Fatal(err)
	}
	ends := frames(t, j)
	if len(ends) < files {
		t.Fatalf("the journal holds %d frames, want at least %d", len(ends), files)
	}
	rng := rngFor(t)
	crc := crc32.MakeTable(crc32.Castagnoli)
	type variant struct {
		name    string
		journal []byte
		intact  int  // files whose frames are whole: they must be committed
		refuse  bool // art commit must refuse with a message (unreadable record)
	}
	var vs []variant
	// Torn at every frame boundary, and inside every frame (kill -9 in
	// the middle of write(2)).
	vs = append(vs, variant{"no frame", j[:journalHeaderLen], 0, false})
	for k, end := range ends[:files] {
		vs = append(vs, variant{fmt.Sprintf("cut after frame %d", k), j[:end], k + 1, false})
		start := journalHeaderLen
		if k > 0 {
			start = ends[k-1]
		}
		cut := start + 1 + rng.IntN(end-start-1)
		vs = append(vs, variant{fmt.Sprintf("torn inside frame %d at %d", k, cut), j[:cut], k, false})
	}
	// A flipped byte: the checksum stops the replay there.
	for _, k := range []int{0, files / 2, files - 1} {
		b := append([]byte(nil), j...)
		start := journalHeaderLen
		if k > 0 {
			start = ends[k-1]
		}
		b[start+12+rng.IntN(ends[k]-start-12)] ^= 0x40
		vs = append(vs, variant{fmt.Sprintf("flipped byte in frame %d", k), b, k, false})
	}
	// Garbage after the last frame, and a frame of garbage with a valid
	// checksum (art's own bug or a malicious file): refused, clearly.
	garbage := make([]byte, 4096)
	fillRand(rng, garbage)
	vs = append(vs, variant{"random bytes after the frames", append(append([]byte(nil), j[:ends[files-1]]...), garbage...), files, false})
	frame := binary.LittleEndian.AppendUint32(nil, 0x61726a31)
	frame = binary.LittleEndian.AppendUint32(frame, uint32(len(garbage)))
	frame = binary.LittleEndian.AppendUint32(frame, crc32.Checksum(garbage, crc))
	frame = append(frame, garbage...)
	vs = append(vs, variant{"checksummed garbage frame", append(append([]byte(nil), j[:ends[1]]...), frame...), 2, true})
	huge := binary.LittleEndian.AppendUint32(nil, 0x61726a31)
	huge = binary.LittleEndian.AppendUint32(huge, 0xffffffff)
	huge = binary.LittleEndian.AppendUint32(huge, 0)
	vs = append(vs, variant{"frame length beyond the file", append(append([]byte(nil), j[:ends[2]]...), huge...), 3, false})
	// Not this worktree's journal at all: ignored.
	other := append([]byte(nil), j...)
	binary.LittleEndian.PutUint64(other[8:], uint64(wt+1))
	vs = append(vs, variant{"another worktree's journal", other, 0, false})
	vs = append(vs, variant{"empty file", nil, 0, false})
	vs = append(vs, variant{"half a header", j[:11], 0, false})

	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			c := newEnv(t)
			c.db = filepath.Join(c.base, "art.db")
			for _, f := range []string{"art.db", "art.db-wal"} {
				b, err := os.ReadFile(filepath.Join(golden, f))
				if os.IsNotExist(err) && f != "art.db" {
					continue // checkpointed into art.db when the test edited it
				}
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(c.base, f), b, 0o644)
			}
			if err := os.WriteFile(filepath.Join(c.base, jname), v.journal, 0o644); err != nil {
				t.Fatal(err)
			}
			stats.badInput("journal", 1)
			r := c.art("commit", "--worktree", strconv.FormatInt(wt, 10), "-M", "recovered")
			if v.refuse {
				if r.code != 1 || !strings.Contains(r.stderr, "journal") {
					t.Fatalf("a journal record that does not decode must be refused with a message:\n%s", r)
				}
				c.fsck(v.name)
				return
			}
			if r.code != 0 && !(v.intact == 0 && strings.Contains(r.stderr, "nothing to commit")) {
				t.Fatalf("art commit of the interrupted worktree:\n%s", r)
			}
			c.fsck(v.name)
			if r.code != 0 {
				return
			}
			dir := filepath.Join(c.base, "check", filepath.Base(e.ws))
			if pr := c.art("pull", "-q", "-m", dir, "--commit", "torn"); pr.code != 0 {
				t.Fatalf("pull:\n%s", pr)
			}
			for i, name := range names {
				b, err := os.ReadFile(filepath.Join(dir, name))
				switch {
				case i < v.intact && (err != nil || string(b) != string(contents[i])):
					noteLost(t, []string{"missing " + name})
					t.Errorf("%s: its frame is whole but the commit lacks it (%v)", name, err)
				case err == nil && string(b) != string(contents[i]):
					t.Errorf("%s: committed with wrong content", name)
				}
			}
			stats.verified(v.intact, 0)
		})
	}
}

// damagedRepo describes a repository file replaced by something else.
func TestDamagedRepositoryFiles(t *testing.T) {
	e := newEnv(t)
	seedWorkspace(t, e)
	good, err := os.ReadFile(e.db)
	if err != nil {
		t.Fatal(err)
	}
	rng := rngFor(t)
	noise := make([]byte, 64<<10)
	fillRand(rng, noise)
	kinds := []struct {
		name  string
		setup func(path string)
	}{
		{"zero bytes", func(p string) { os.WriteFile(p, nil, 0o644) }},
		{"random bytes", func(p string) { os.WriteFile(p, noise, 0o644) }},
		{"truncated to half", func(p string) { os.WriteFile(p, good[:len(good)/2], 0o644) }},
		{"SQLite header then noise", func(p string) { os.WriteFile(p, append(append([]byte(nil), good[:100]...), noise...), 0o644) }},
		{"a directory", func(p string) { os.Mkdir(p, 0o755) }},
		{"newer schema", func(p string) {
			os.WriteFile(p, good, 0o644)
			db, _ := sql.Open("sqlite", "file:"+p)
			db.Exec(`UPDATE meta SET value='99' WHERE key='schema_version'`)
			db.Close()
		}},
		{"another program's database", func(p string) {
			db, _ := sql.Open("sqlite", "file:"+p)
			db.Exec(`CREATE TABLE notes(x)`)
			db.Close()
		}},
	}
	commands := [][]string{
		{"status", "-m", e.ws}, {"log"}, {"show", "HEAD"}, {"diff"}, {"branch"}, {"fsck"}, {"gc"},
		{"push", "-q", "-m", e.ws}, {"pull", "-q", "-m", filepath.Join(e.base, "out", "ws")}, {"commit"},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			c := newEnv(t)
			c.db = filepath.Join(c.base, "art.db")
			k.setup(c.db)
			before := fileDigest(c.db)
			for _, args := range commands {
				r := c.art(args...)
				stats.badInput("damaged repository file", 1)
				if r.code != 1 || !strings.HasPrefix(strings.TrimSpace(r.stderr), "art: ") {
					t.Errorf("want exit 1 with a message:\n%s", r)
				}
				if r.code == 1 && strings.Contains(strings.ToLower(r.stderr), "repository") == false && strings.Contains(r.stderr, c.db) == false {
					t.Errorf("the message does not name the repository:\n%s", r)
				}
			}
			if k.name != "newer schema" && k.name != "another program's database" {
				if after := fileDigest(c.db); after != before {
					t.Errorf("the damaged file was modified by art")
				}
			}
		})
	}
}

func fileDigest(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	return sumBytes(b)
}

// TestBadRunInput: art run refuses bad flags before anything runs (exit
// 125, a message) and records nothing.
func TestBadRunInput(t *testing.T) {
	requireSandbox(t)
	e := newEnv(t)
	seedWorkspace(t, e)
	before := e.tip("main")
	cases := []struct {
		name string
		args []string
		want string // in the message
	}{
		{"env without =", []string{"--env", "NOEQUALS"}, "KEY=VALUE"},
		{"env empty key", []string{"--env", "=x"}, "KEY=VALUE"},
		{"env key with digit first", []string{"--env", "1A=b"}, "KEY=VALUE"},
		{"env key with space", []string{"--env", "A B=c"}, "KEY=VALUE"},
		{"env key with dash", []string{"--env", "A-B=c"}, "KEY=VALUE"},
		{"memory unit", []string{"--memory", "12Q"}, "--memory"},
		{"memory negative", []string{"--memory", "-5M"}, "--memory"},
		{"memory overflow", []string{"--memory", "99999999999999999999G"}, "--memory"},
		{"timeout negative", []string{"--timeout", "-1s"}, "timeout"},
		{"timeout garbage", []string{"--timeout", "soon"}, "timeout"},
		{"pids negative", []string{"--pids", "-3"}, "pids"},
		{"allow without =", []string{"--allow", "secrets"}, "allow"},
		{"allow bad permission", []string{"--allow", "x=bogus"}, "bogus"},
		{"allow bad pattern", []string{"--allow", "[a=read"}, "["},
		{"preset unknown", []string{"--preset", "nope"}, "nope"},
		{"branch invalid", []string{"-b", "bad..name"}, "bad..name"},
		{"branch like a commit id", []string{"-b", "deadbeef"}, "looks like a commit"},
		{"workspace missing", []string{"-m", "/nonexistent/ws"}, "/nonexistent/ws"},
		{"user root", []string{"--user", "root"}, "root"},
		{"user unknown", []string{"--user", "no-such-user-xyz"}, "no-such-user-xyz"},
		{"unknown flag", []string{"--no-such-flag"}, "no-such-flag"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"run", "-m", e.ws, "-i=false"}, c.args...)
			if !containsDashDash(c.args) {
				args = append(args, "--", "true")
			}
			r := e.art(args...)
			stats.badInput("art run flags", 1)
			if r.code != 125 {
				t.Fatalf("want exit 125:\n%s", r)
			}
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("the message does not mention %q:\n%s", c.want, r)
			}
		})
	}
	if after := e.tip("main"); after != before {
		t.Fatalf("a refused run recorded a commit: %s -> %s", before, after)
	}
	if wts := e.worktrees(); len(wts) != 0 {
		t.Fatalf("a refused run left worktrees: %+v", wts)
	}
	e.fsck("bad run input")
}

func containsDashDash(a []string) bool {
	for _, s := range a {
		if s == "--" {
			return true
		}
	}
	return false
}

// TestBadRevisions: every read command refuses revisions that name nothing.
func TestBadRevisions(t *testing.T) {
	e := newEnv(t)
	seedWorkspace(t, e)
	revs := []string{"HEAD~99", "main^^", "zzzz", "0000", "nope", strings.Repeat("a", 64), "HEAD~-1", "HEAD~99999999999999999999", "main~", "@{1}", "../main", "-x"}
	for _, rev := range revs {
		for _, cmd := range [][]string{{"show", rev}, {"log", rev}, {"diff", rev}, {"pull", "-q", "-m", filepath.Join(e.base, "out", "ws"), "--commit", rev}, {"checkout", rev}, {"branch", "x-" + strconv.Itoa(len(rev)), rev}} {
			r := e.art(cmd...)
			stats.badInput("revisions", 1)
			if r.code == 0 {
				t.Errorf("art %s succeeded:\n%s", strings.Join(cmd, " "), r)
				continue
			}
			if r.code != 1 && r.code != 2 {
				t.Errorf("art %s: exit %d, want 1 (or 2 for usage):\n%s", strings.Join(cmd, " "), r.code, r)
			}
			if !strings.HasPrefix(strings.TrimSpace(r.stderr), "art: ") {
				t.Errorf("art %s: no message:\n%s", strings.Join(cmd, " "), r)
			}
		}
	}
	e.fsck("bad revisions")
}

// TestUnwritableRepository: a repository that cannot be written gets an
// error that says why (a read-only mount, an immutable file), not a
// permissions hint that sends the user the wrong way; reads still work
// and nothing changes.
func TestUnwritableRepository(t *testing.T) {
	requireRoot(t)
	requireSandbox(t)
	for _, tc := range []struct {
		name, want string
		lock       func(t *testing.T, e *env)
	}{
		{"read-only mount", "is mounted read-only", func(t *testing.T, e *env) {
			dir := filepath.Dir(e.db)
			if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
			if err := syscall.Mount("", dir, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
				t.Fatal(err)
			}
		}},
		{"immutable file", "is immutable or append-only", func(t *testing.T, e *env) {
			testenv.Chattr(t, "+i", e.db)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			seedWorkspace(t, e)
			os.WriteFile(filepath.Join(e.ws, "new"), []byte("x\n"), 0o644)
			tc.lock(t, e)
			before := fileDigest(e.db)
			for _, c := range []struct {
				code int
				args []string
			}{
				{1, []string{"push", "-q", "-m", e.ws}},
				{1, []string{"branch", "other"}},
				{125, []string{"run", "-m", e.ws, "-i=false", "--", "true"}},
			} {
				r := e.art(c.args...)
				stats.badInput("unwritable repository", 1)
				if r.code != c.code || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "permissions") {
					t.Errorf("want exit %d saying %q:\n%s", c.code, tc.want, r)
				}
			}
			e.artOK("log", "--oneline")
			if after := fileDigest(e.db); after != before {
				t.Error("the repository changed")
			}
		})
	}
}
