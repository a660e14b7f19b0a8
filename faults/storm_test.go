package faults

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// A storm is a set of writer goroutines working in a mounted workspace the
// way build tools and editors do: new files written in pieces and closed
// (some fsynced first), write-to-temp + fsync + rename + fsync(dir),
// appends to a log with fsync, deletes with fsync(dir). It records what the
// kernel acknowledged: once close or fsync returned 0, that state must
// survive a kill -9 of art.
type storm struct {
	root    string // the mounted workspace (MP/ws)
	prefix  string // workspace-relative directory the storm writes in
	mu      sync.Mutex
	paths   map[string]*pathModel
	killed  atomic.Bool // set just before art is killed: later errors are expected
	errs    []string    // unexpected errors before the kill
	ops     atomic.Int64
	acks    atomic.Int64
	written atomic.Int64
}

// state is one possible content of a path; absent means no entry.
type state struct {
	absent bool
	data   []byte
}

type pathModel struct {
	ack        *state  // the last acknowledged state (nil: none yet, which means absent)
	cands      []state // states written since, not acknowledged
	appendOnly bool    // a log: candidates keep the acknowledged prefix
}

func newStorm(root, prefix string) *storm {
	return &storm{root: root, prefix: prefix, paths: map[string]*pathModel{}}
}

func (s *storm) model(rel string) *pathModel {
	m := s.paths[rel]
	if m == nil {
		m = &pathModel{}
		s.paths[rel] = m
	}
	return m
}

// begin records that rel may now hold st.
func (s *storm) begin(rel string, st state) {
	s.mu.Lock()
	m := s.model(rel)
	m.cands = append(m.cands, st)
	s.mu.Unlock()
}

// ack records that rel holds st for sure.
func (s *storm) ack(rel string, st state) {
	s.mu.Lock()
	m := s.model(rel)
	m.ack = &st
	m.cands = nil
	s.mu.Unlock()
	s.acks.Add(1)
}

// fail records an error; before the kill it is a bug.
func (s *storm) fail(op string, err error) bool {
	if err == nil {
		return false
	}
	if !s.killed.Load() {
		s.mu.Lock()
		s.errs = append(s.errs, fmt.Sprintf("%s: %v", op, err))
		s.mu.Unlock()
	}
	return true
}

// run starts n writers that work until stop is closed or the mount dies,
// each with at most maxOps operations (0: unbounded).
func (s *storm) run(rng *rand.Rand, n, maxOps int, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wr := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
		dir := filepath.Join(s.prefix, fmt.Sprintf("w%d", w))
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.writer(wr, dir, maxOps, stop)
		}()
	}
	return &wg
}

func (s *storm) abs(rel string) string { return filepath.Join(s.root, rel) }

func (s *storm) writer(rng *rand.Rand, dir string, maxOps int, stop <-chan struct{}) {
	if s.fail("mkdir", os.MkdirAll(s.abs(dir), 0o755)) {
		return
	}
	var live []string // files this writer acknowledged and may replace or delete
	logRel := filepath.Join(dir, "log")
	var logData []byte
	for i := 0; maxOps == 0 || i < maxOps; i++ {
		select {
		case <-stop:
			return
		default:
		}
		s.ops.Add(1)
		var ok bool
		switch r := rng.IntN(100); {
		case r < 55:
			var rel string
			rel, ok = s.newFile(rng, dir, i)
			if ok {
				live = append(live, rel)
			}
		case r < 70 && len(live) > 0:
			ok = s.replace(rng, dir, live[rng.IntN(len(live))], i)
		case r < 85:
			logData, ok = s.appendLog(rng, logRel, logData)
		case len(live) > 0:
			k := rng.IntN(len(live))
			ok = s.remove(dir, live[k])
			live = append(live[:k], live[k+1:]...)
		default:
			continue
		}
		if !ok {
			return // the mount is gone
		}
	}
}

func randData(rng *rand.Rand) []byte {
	sizes := []int{0, 1, 511, 4096, 65535, 65536, 65537, 200_000, 1 << 20}
	n := sizes[rng.IntN(len(sizes))] + rng.IntN(3000)
	b := make([]byte, n)
	if rng.IntN(3) == 0 {
		// Compressible text, like source code.
		for i := range b {
			b[i] = "abcdefgh \n"[rng.IntN(10)]
		}
	} else {
		fillRand(rng, b)
	}
	return b
}

// writeFile writes data in pieces, fsyncs when asked, and closes.
func (s *storm) writeFile(rng *rand.Rand, rel string, data []byte, fsync bool) bool {
	f, err := os.OpenFile(s.abs(rel), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if s.fail("create "+rel, err) {
		return false
	}
	for off := 0; off < len(data); {
		n := min(len(data)-off, 1+rng.IntN(300<<10))
		if _, err := f.Write(data[off : off+n]); s.fail("write "+rel, err) {
			f.Close()
			return false
		}
		off += n
		s.written.Add(int64(n))
	}
	if fsync {
		if s.fail("fsync "+rel, f.Sync()) {
			f.Close()
			return false
		}
	}
	return !s.fail("close "+rel, f.Close())
}

func (s *storm) newFile(rng *rand.Rand, dir string, i int) (string, bool) {
	sub := dir
	if rng.IntN(4) == 0 {
		sub = filepath.Join(dir, fmt.Sprintf("d%d", rng.IntN(4)))
		if err := os.Mkdir(s.abs(sub), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			s.fail("mkdir "+sub, err)
			return "", false
		}
	}
	rel := filepath.Join(sub, fmt.Sprintf("f%05d", i))
	data := randData(rng)
	s.begin(rel, state{data: data})
	if !s.writeFile(rng, rel, data, rng.IntN(2) == 0) {
		return "", false
	}
	s.ack(rel, state{data: data})
	return rel, true
}

// replace is the editor/git pattern: temp file, fsync, close, rename over
// the target, fsync the directory.
func (s *storm) replace(rng *rand.Rand, dir, target string, i int) bool {
	tmp := filepath.Join(filepath.Dir(target), fmt.Sprintf(".tmp%05d", i))
	data := randData(rng)
	s.begin(tmp, state{data: data})
	if !s.writeFile(rng, tmp, data, true) {
		return false
	}
	s.ack(tmp, state{data: data})
	s.begin(target, state{data: data})
	s.begin(tmp, state{absent: true})
	if s.fail("rename "+tmp, os.Rename(s.abs(tmp), s.abs(target))) {
		return false
	}
	if !s.syncDir(filepath.Dir(target)) {
		return false
	}
	s.ack(target, state{data: data})
	s.ack(tmp, state{absent: true})
	return true
}

func (s *storm) syncDir(rel string) bool {
	d, err := os.Open(s.abs(rel))
	if s.fail("open dir "+rel, err) {
		return false
	}
	defer d.Close()
	return !s.fail("fsync dir "+rel, d.Sync())
}

func (s *storm) appendLog(rng *rand.Rand, rel string, cur []byte) ([]byte, bool) {
	rec := []byte(fmt.Sprintf("record %d %x\n", len(cur), rng.Uint64()))
	next := append(append([]byte(nil), cur...), rec...)
	s.mu.Lock()
	s.model(rel).appendOnly = true
	s.mu.Unlock()
	s.begin(rel, state{data: next})
	f, err := os.OpenFile(s.abs(rel), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if s.fail("open log", err) {
		return cur, false
	}
	if _, err := f.Write(rec); s.fail("append log", err) {
		f.Close()
		return cur, false
	}
	if s.fail("fsync log", f.Sync()) {
		f.Close()
		return cur, false
	}
	s.ack(rel, state{data: next})
	if s.fail("close log", f.Close()) {
		return next, false
	}
	return next, true
}

func (s *storm) remove(dir, rel string) bool {
	s.begin(rel, state{absent: true})
	if s.fail("unlink "+rel, os.Remove(s.abs(rel))) {
		return false
	}
	if !s.syncDir(filepath.Dir(rel)) {
		return false
	}
	s.ack(rel, state{absent: true})
	return true
}

// check compares what a commit holds (a pulled copy of the workspace) with
// the model: every path must hold its acknowledged state or one written
// after it; nothing else may appear. Unacknowledged data may be partial
// (zeros where blocks were not stored yet) but never other bytes.
func (s *storm) check(t testing.TB, pulled string) []string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var bad []string
	var files int
	var bytes int64
	for rel, m := range s.paths {
		data, err := os.ReadFile(filepath.Join(pulled, rel))
		got := state{data: data}
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			got = state{absent: true}
		} else if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", rel, err))
			continue
		}
		if m.matches(got) {
			if m.ack != nil && !m.ack.absent && !got.absent {
				files++
				bytes += int64(len(m.ack.data))
			}
			continue
		}
		want := "absent"
		if m.ack != nil && !m.ack.absent {
			want = fmt.Sprintf("%d acknowledged bytes (%s...)", len(m.ack.data), sumBytes(m.ack.data)[:12])
		}
		have := "absent"
		if !got.absent {
			have = fmt.Sprintf("%d bytes (%s...)", len(got.data), sumBytes(got.data)[:12])
		}
		bad = append(bad, fmt.Sprintf("%s: want %s (or one of %d later states), have %s", rel, want, len(m.cands), have))
	}
	// Nothing the storm never wrote may appear.
	filepath.WalkDir(filepath.Join(pulled, s.prefix), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(pulled, p)
		if _, ok := s.paths[rel]; !ok {
			bad = append(bad, "unexpected "+rel)
		}
		return nil
	})
	sort.Strings(bad)
	stats.verified(files, bytes)
	return bad
}

func (m *pathModel) matches(got state) bool {
	ack := state{absent: true}
	if m.ack != nil {
		ack = *m.ack
	}
	if got.absent == ack.absent && bytes.Equal(got.data, ack.data) {
		return true
	}
	for _, c := range m.cands {
		if c.absent {
			if got.absent {
				return true
			}
			continue
		}
		if got.absent || len(got.data) > len(c.data) {
			continue
		}
		if m.appendOnly && !ack.absent && (len(got.data) < len(ack.data) || !bytes.Equal(got.data[:len(ack.data)], ack.data)) {
			continue // a log never loses its acknowledged prefix
		}
		ok := true
		for i, b := range got.data {
			if b != c.data[i] && b != 0 {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func (s *storm) errors() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(first(s.errs, 20), "\n")
}
