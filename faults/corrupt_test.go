package faults

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
)

// Corruption: one byte of a stored object's data is changed in place (the
// length kept, so zstd framing stays and the damage is to content). art
// fsck must exit 1 naming the object; every read of it must fail with an
// error (EIO inside a mount) and never return wrong content; whatever does
// not need the object must stay readable.

// corruptRepo is the pristine repository the cases damage copies of.
type corruptRepo struct {
	e        *env
	c1, c2   string            // commit ids: C1, and C2 on main
	c3       string            // C2 without the damaged files (branch c3)
	files    map[string][]byte // workspace content of C2 (rel path -> bytes)
	c1files  map[string][]byte
	pristine string // a clean copy of the database (VACUUM INTO)
}

func buildCorruptRepo(t *testing.T) *corruptRepo {
	t.Helper()
	e := newEnv(t)
	rng := rngFor(t)
	files := map[string][]byte{}
	add := func(rel string, b []byte) {
		files[rel] = b
		p := filepath.Join(e.ws, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	random := func(n int) []byte { b := make([]byte, n); fillRand(rng, b); return b }
	text := func(n int) []byte {
		var b strings.Builder
		for b.Len() < n {
			fmt.Fprintf(&b, "line %d: the quick brown fox %d\n", b.Len(), rng.IntN(100))
		}
		return []byte(b.String()[:n])
	}
	add("raw.bin", random(12<<10)) // under the 16 KiB minimum chunk: one chunk
	add("text.txt", text(12<<10))
	add("multi.bin", random(900<<10))
	add("sub/deep.txt", text(2000))
	for i := 0; i < 60; i++ {
		add(fmt.Sprintf("many/file-%03d.txt", i), text(100+i))
	}
	add("other.txt", text(3000))
	e.artOK("init", "-d", e.db)
	e.artOK("push", "-q", "-m", e.ws)
	c1files := map[string][]byte{}
	for k, v := range files {
		c1files[k] = v
	}
	c1 := e.tip("main")
	add("c2only.txt", text(5000))
	add("other.txt", text(3100))
	e.artOK("push", "-q", "-m", e.ws)
	c2 := e.tip("main")
	e.artOK("branch", "c1", c1)
	// C3 (branch c3) deletes what the cases damage: diff C2 C3 reads it.
	for _, p := range []string{"raw.bin", "text.txt", "multi.bin", "sub", "many"} {
		os.RemoveAll(filepath.Join(e.ws, p))
	}
	e.artOK("push", "-q", "-b", "c3", "-m", e.ws)
	c3 := e.tip("c3")
	db, err := sql.Open("sqlite", "file:"+e.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pristine := filepath.Join(e.base, "pristine.db")
	if _, err := db.Exec(`VACUUM INTO ?`, pristine); err != nil {
		t.Fatalf("copy the repository: %v", err)
	}
	return &corruptRepo{e: e, c1: c1, c2: c2, c3: c3, files: files, c1files: c1files, pristine: pristine}
}

// damage changes one byte in the middle of a row's column.
func damage(t *testing.T, dbPath, table, col string, id objects.ID) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b []byte
	if err := db.QueryRow(`SELECT `+col+` FROM `+table+` WHERE id=?`, id[:]).Scan(&b); err != nil {
		t.Fatalf("read %s %s: %v", table, id.Short(), err)
	}
	b[len(b)/2] ^= 0x5a
	res, err := db.Exec(`UPDATE `+table+` SET `+col+`=? WHERE id=?`, b, id[:])
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("damage %s %s: %v", table, id.Short(), err)
	}
}

// objectsOf finds the ids the cases damage, in the pristine copy.
type targets struct {
	raw, text, multiChunk, multiFile, subTree, manyTree, c2 objects.ID
	enc                                                     map[objects.ID]int
}

func findTargets(t *testing.T, cr *corruptRepo) targets {
	t.Helper()
	r, err := repo.Open(cr.pristine)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var tg targets
	tg.c2, _ = objects.ParseID(cr.c2)
	c, err := r.LoadCommit(tg.c2)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := r.LoadTree(c.Tree)
	find := func(tr *objects.Tree, name string) objects.Entry {
		for _, e := range tr.Entries {
			if e.Name == name {
				return e
			}
		}
		t.Fatalf("no %s in tree", name)
		return objects.Entry{}
	}
	ws, _ := r.LoadTree(find(root, filepath.Base(cr.e.ws)).ID)
	tg.raw = find(ws, "raw.bin").ID
	tg.text = find(ws, "text.txt").ID
	tg.multiFile = find(ws, "multi.bin").ID
	tg.subTree = find(ws, "sub").ID
	tg.manyTree = find(ws, "many").ID
	refs, err := r.LoadFileChunks(tg.multiFile)
	if err != nil || len(refs) < 3 {
		t.Fatalf("multi.bin: %d chunks (%v); the case needs a file of several", len(refs), err)
	}
	tg.multiChunk = refs[1].ID
	tg.enc = map[objects.ID]int{}
	for _, q := range []struct {
		table string
		id    objects.ID
	}{{"chunks", tg.raw}, {"chunks", tg.text}, {"chunks", tg.multiChunk}, {"trees", tg.subTree}, {"trees", tg.manyTree}} {
		var enc int
		if err := r.DB.QueryRow(`SELECT enc FROM `+q.table+` WHERE id=?`, q.id[:]).Scan(&enc); err != nil {
			t.Fatal(err)
		}
		tg.enc[q.id] = enc
	}
	return tg
}

// readBack is what reading everything through one access path gave.
type readBack struct {
	ok   bool   // the command succeeded
	out  string // its output, or a digest of what it wrote
	msg  string // its error message
	what string
}

// probes run every read path over the (possibly damaged) repository and
// return what each gave, plus per-file results of reading through a mount.
func probes(t *testing.T, e *env, cr *corruptRepo) (map[string]readBack, map[string]error) {
	t.Helper()
	out := map[string]readBack{}
	cmd := func(name string, args ...string) {
		r := e.art(args...)
		out[name] = readBack{ok: r.code == 0, out: r.stdout, msg: strings.TrimSpace(r.stderr), what: r.String()}
		if r.code != 0 && out[name].msg == "" {
			t.Errorf("%s failed without a message:\n%s", name, r)
		}
	}
	cmd("show C1", "show", cr.c1)
	cmd("show C2", "show", cr.c2)
	cmd("diff C1 C2", "diff", cr.c1, cr.c2)
	cmd("diff C2 C3", "diff", cr.c2, cr.c3)
	cmd("log", "log", "main")
	for _, c := range []struct{ name, rev string }{{"pull C1", cr.c1}, {"pull C2", cr.c2}} {
		dir := filepath.Join(e.base, strings.ReplaceAll(c.name, " ", "-"), filepath.Base(e.ws))
		r := e.art("pull", "-q", "-m", dir, "--commit", c.rev)
		want := cr.files
		if c.rev == cr.c1 {
			want = cr.c1files
		}
		// Whatever a pull wrote, even a failed one, is right.
		for rel, b := range readTree(t, dir) {
			if w, ok := want[rel]; !ok || string(w) != string(b) {
				t.Errorf("%s wrote wrong content for %s (%d bytes)", c.name, rel, len(b))
			}
		}
		out[c.name] = readBack{ok: r.code == 0, out: treeDigest(readTree(t, dir)), msg: strings.TrimSpace(r.stderr), what: r.String()}
		os.RemoveAll(filepath.Dir(dir))
	}
	// Through a read-only mount of main (C2), or of c1 when main's commit
	// itself is unreadable.
	reads := map[string]error{}
	for _, branch := range []string{"main", "c1"} {
		mp := filepath.Join(e.base, "mnt-"+branch)
		os.Mkdir(mp, 0o755)
		e.trackMount(mp)
		p := e.startArt("mount", "--ro", "-b", branch, mp)
		if m := mountOrFail(t, p, mp); !m {
			out["mount "+branch] = readBack{ok: false, msg: strings.TrimSpace(p.stderr.String())}
			continue
		}
		out["mount "+branch] = readBack{ok: true}
		want := cr.files
		if branch == "c1" {
			want = cr.c1files
		}
		for rel, w := range want {
			b, err := os.ReadFile(filepath.Join(mp, filepath.Base(e.ws), rel))
			if err == nil && string(b) != string(w) {
				t.Errorf("reading %s through the mount of %s returned wrong content (%d bytes)", rel, branch, len(b))
			}
			reads[branch+":"+rel] = err
		}
		e.stopMount(p, mp)
	}
	return out, reads
}

// mountOrFail waits until art mount serves or exits (a mount of an
// unreadable commit fails with a message).
func mountOrFail(t *testing.T, p *proc, mp string) bool {
	t.Helper()
	for {
		select {
		case l := <-p.stderr.lines:
			if mountedRE.MatchString(l) {
				waitFor(t, cmdTimeout, "the mount", func() bool { return isMounted(mp) })
				return true
			}
		case <-p.done:
			r := p.result()
			if r.code == 0 {
				t.Errorf("art mount exited 0 without mounting:\n%s", r)
			}
			return false
		}
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err == nil {
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)] = b
		}
		return nil
	})
	return out
}

func treeDigest(m map[string][]byte) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s %x\n", k, sha256.Sum256(m[k]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestCorruption(t *testing.T) {
	requireFUSE(t)
	cr := buildCorruptRepo(t)
	tg := findTargets(t, cr)
	wantProbes, wantReads := probes(t, cr.e, cr)
	for name, pb := range wantProbes {
		if !pb.ok {
			t.Fatalf("on the pristine repository, %s failed:\n%s", name, pb.what)
		}
	}
	for k, err := range wantReads {
		if err != nil {
			t.Fatalf("on the pristine repository, reading %s failed: %v", k, err)
		}
	}
	encName := func(id objects.ID) string { return map[int]string{0: "raw", 1: "zstd"}[tg.enc[id]] }
	// Each case: what to damage, and which reads must fail and which must
	// still work (the rest may do either, but never return wrong data).
	cases := []struct {
		name        string
		table, col  string
		id          objects.ID
		mustFail    []string // probe names or "main:path" / "c1:path" mount reads
		mustSucceed []string
	}{
		{"chunk/" + encName(tg.raw) + "/raw.bin", "chunks", "data", tg.raw,
			[]string{"pull C1", "pull C2", "diff C2 C3", "main:raw.bin", "c1:raw.bin"},
			[]string{"diff C1 C2", "show C2", "log", "main:text.txt", "main:multi.bin", "main:sub/deep.txt", "main:c2only.txt"}},
		{"chunk/" + encName(tg.text) + "/text.txt", "chunks", "data", tg.text,
			[]string{"pull C1", "pull C2", "diff C2 C3", "show C1", "main:text.txt"},
			[]string{"diff C1 C2", "show C2", "log", "main:raw.bin", "main:multi.bin", "main:other.txt"}},
		{"chunk/" + encName(tg.multiChunk) + "/multi.bin-chunk-2", "chunks", "data", tg.multiChunk,
			[]string{"pull C1", "pull C2", "diff C2 C3", "main:multi.bin"},
			[]string{"diff C1 C2", "show C2", "log", "main:raw.bin", "main:text.txt"}},
		{"chunk-list/multi.bin", "files", "chunks", tg.multiFile,
			[]string{"pull C1", "pull C2", "diff C2 C3", "main:multi.bin"},
			[]string{"diff C1 C2", "show C2", "log", "main:raw.bin", "main:text.txt"}},
		{"tree/" + encName(tg.subTree) + "/sub", "trees", "data", tg.subTree,
			[]string{"pull C1", "pull C2", "diff C2 C3", "main:sub/deep.txt"},
			[]string{"show C2", "log", "main:raw.bin", "main:many/file-000.txt", "main:c2only.txt"}},
		{"tree/" + encName(tg.manyTree) + "/many", "trees", "data", tg.manyTree,
			[]string{"pull C1", "pull C2", "diff C2 C3", "main:many/file-007.txt"},
			[]string{"show C2", "log", "main:raw.bin", "main:sub/deep.txt", "main:c2only.txt"}},
		{"commit/C2", "commits", "data", tg.c2,
			[]string{"show C2", "pull C2", "diff C1 C2", "mount main"},
			[]string{"show C1", "pull C1", "c1:raw.bin", "c1:text.txt", "c1:sub/deep.txt"}},
	}
	if encs := map[int]bool{tg.enc[tg.raw]: true, tg.enc[tg.text]: true}; !encs[0] || !encs[1] {
		t.Fatalf("the chunk cases need one raw and one compressed chunk, have encodings %v", encs)
	}
	if tg.enc[tg.subTree] == tg.enc[tg.manyTree] {
		t.Logf("note: both damaged trees are %s", encName(tg.subTree))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.ws = filepath.Join(e.base, "host", filepath.Base(cr.e.ws))
			b, err := os.ReadFile(cr.pristine)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(e.db, b, 0o644); err != nil {
				t.Fatal(err)
			}
			damage(t, e.db, c.table, c.col, c.id)
			// fsck exits 1 and names the damaged object.
			r := e.art("fsck")
			if r.code != 1 || !strings.Contains(r.stdout+r.stderr, c.id.String()) {
				t.Fatalf("fsck must exit 1 and name %s:\n%s", c.id, r)
			}
			gotProbes, gotReads := probes(t, e, cr)
			fails := map[string]bool{}
			for name, got := range gotProbes {
				want := wantProbes[name]
				switch {
				case !got.ok:
					fails[name] = true
				case got.out != want.out && !onlyReportsDamage(want.out, got.out):
					t.Errorf("%s succeeded with output different from the undamaged repository's:\n%s", name, got.what)
				}
			}
			for k, err := range gotReads {
				if err != nil {
					fails[k] = true
					if !errors.Is(err, syscall.EIO) {
						t.Errorf("reading %s through the mount: %v, want EIO", k, err)
					}
				}
			}
			for _, k := range c.mustFail {
				if !fails[k] {
					t.Errorf("%s must fail on the damaged object, but it worked", k)
				}
			}
			for _, k := range c.mustSucceed {
				if fails[k] {
					msg := gotProbes[k].what
					if err := gotReads[k]; err != nil {
						msg = err.Error()
					}
					t.Errorf("%s does not need the damaged object but failed:\n%s", k, msg)
				}
			}
			var failed []string
			for k := range fails {
				failed = append(failed, k)
			}
			sort.Strings(failed)
			t.Logf("failed as they must: %s", strings.Join(failed, ", "))
			stats.add(func(s *campaign) { s.Corruption = append(s.Corruption, c.name) })
		})
	}
}

// onlyReportsDamage reports whether got differs from want only in lines
// that say an object is corrupt (art log shows "Changes: unavailable
// (tree ...: object is corrupt ...)" instead of counts it cannot compute).
func onlyReportsDamage(want, got string) bool {
	w := map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		w[l]++
	}
	extra := 0
	for _, l := range strings.Split(got, "\n") {
		if w[l] > 0 {
			w[l]--
			continue
		}
		if !strings.Contains(l, "corrupt") {
			return false
		}
		extra++
	}
	return extra > 0
}
