package faults

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The soak (make soak; not part of the normal test run): mixed agent-like
// sessions for ART_SOAK_DURATION (default 30m) on rotating branches —
// untar a real tree, build a Go program with the go command inside the
// sandbox, git add/commit, delete — with art gc every few sessions, while a
// long-lived art mount takes a steady trickle of fsynced writes. Memory
// (RSS) and open file descriptors of art are sampled over time and must
// stay flat; session throughput must not degrade (first vs last quarter).

const soakProgram = `package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

func main() {
	words := strings.Fields("the agent builds this program inside the art sandbox on every session")
	sort.Strings(words)
	b, _ := json.Marshal(words)
	fmt.Fprintln(os.Stdout, string(b))
}
`

// procSample is one reading of an art process.
type procSample struct {
	at  time.Duration
	rss int64 // bytes
	fds int
}

func sampleProc(pid int) (procSample, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procSample{}, false
	}
	var s procSample
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			s.rss = kb << 10
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return procSample{}, false
	}
	s.fds = len(ents)
	return s, true
}

// soakSession is one art run of the soak.
type soakSession struct {
	n       int
	branch  string
	start   time.Duration // since the soak started
	dur     time.Duration
	peakRSS int64
	peakFDs int
	ok      bool
}

func soakDuration(t *testing.T) time.Duration {
	s := os.Getenv("ART_SOAK_DURATION")
	if s == "" {
		if os.Getenv("ART_SOAK") == "" {
			t.Skip("skipping: the soak runs with make soak (ART_SOAK=1, ART_SOAK_DURATION=30m)")
		}
		return 30 * time.Minute
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("ART_SOAK_DURATION=%q: %v", s, err)
	}
	return d
}

func TestSoak(t *testing.T) {
	d := soakDuration(t)
	requireSandbox(t)
	e := newEnv(t)
	rng := rngFor(t)
	prog := filepath.Join(e.ws, "prog")
	os.MkdirAll(prog, 0o755)
	os.WriteFile(filepath.Join(prog, "go.mod"), []byte("module soak\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(prog, "main.go"), []byte(soakProgram), 0o644)
	seedWorkspace(t, e)
	tarball := makeTarball(t, filepath.Join(e.base, "data"), "net/http")
	gobin := filepath.Join(goroot(t), "bin")
	branches := []string{"soak-a", "soak-b", "soak-c", "soak-d"}
	for _, b := range branches {
		e.artOK("branch", b, "main")
	}

	// The long-lived mount and its writer.
	e.artOK("branch", "soak-mount", "main")
	// The mount lives through the whole soak (startArt's limit would kill
	// it after a few minutes).
	mp, mnt, _ := e.mountFor(d+5*time.Minute, "soak-mount")
	mwork := filepath.Join(mnt, filepath.Base(e.ws), "trickle")
	os.MkdirAll(mwork, 0o755)
	acked := map[string]string{} // name -> sha256 of the acknowledged content, "" deleted
	var ackMu sync.Mutex
	stopWriter := make(chan struct{})
	writerDone := make(chan error, 1)
	var writes atomic.Int64
	go func() {
		wr := rand.New(rand.NewPCG(rng.Uint64(), 1))
		for i := 0; ; i++ {
			select {
			case <-stopWriter:
				writerDone <- nil
				return
			case <-time.After(50 * time.Millisecond): // a steady trickle, not synchronisation
			}
			name := fmt.Sprintf("f%03d", i%200)
			if i%7 == 3 {
				if err := os.Remove(filepath.Join(mwork, name)); err == nil {
					d, err := os.Open(mwork)
					if err == nil {
						err = d.Sync()
						d.Close()
					}
					if err != nil {
						writerDone <- err
						return
					}
					ackMu.Lock()
					acked[name] = ""
					ackMu.Unlock()
				}
				continue
			}
			b := make([]byte, 1+wr.IntN(64<<10))
			fillRand(wr, b)
			f, err := os.Create(filepath.Join(mwork, name))
			if err == nil {
				_, err = f.Write(b)
				if err == nil {
					err = f.Sync()
				}
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				writerDone <- fmt.Errorf("write %s in the mount: %w", name, err)
				return
			}
			ackMu.Lock()
			acked[name] = sumBytes(b)
			ackMu.Unlock()
			writes.Add(1)
		}
	}()

	// Sample the mount every few seconds.
	began := time.Now()
	var sampMu sync.Mutex
	var mountSamples []procSample
	stopSampler := make(chan struct{})
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			if s, ok := sampleProc(mp.pid()); ok {
				s.at = time.Since(began)
				sampMu.Lock()
				mountSamples = append(mountSamples, s)
				sampMu.Unlock()
			}
			select {
			case <-stopSampler:
				return
			case <-tick.C:
			}
		}
	}()

	env := append([]string{
		"--env", "PATH=" + gobin + ":/usr/local/bin:/usr/bin:/bin",
		"--env", "GOCACHE=/home/agent/.cache/go-build", "--env", "GOPATH=/home/agent/go",
		"--env", "GOTOOLCHAIN=local", "--env", "GOFLAGS=-mod=mod", "--env", "CGO_ENABLED=0",
	}, gitEnv...)
	var sessions []soakSession
	gcs := 0
	deadline := began.Add(d)
	for n := 0; time.Now().Before(deadline); n++ {
		select {
		case err := <-writerDone: // only an error ends it early
			t.Fatalf("after %v, %d sessions: the writer in the long-lived mount: %v", time.Since(began).Round(time.Second), n, err)
		default:
		}
		branch := branches[n%len(branches)]
		script := fmt.Sprintf(`set -e
rm -rf http
tar xzf %s
echo "// soak session %d" >> http/server.go
(cd prog && go build -o /tmp/prog . && /tmp/prog > out.txt)
[ -d .git ] || git init -q
git add -A
git commit -q -m "soak %d" || true
rm -rf http/httptest http/pprof http/cgi
git add -A
git commit -q -m "soak %d: deletes" || true
echo SOAK-DONE %d`, tarball, n, n, n, n)
		args := append([]string{"run", "-b", branch, "-m", e.ws, "-i=false"}, env...)
		args = append(args, "--", "sh", "-c", script)
		s := soakSession{n: n, branch: branch, start: time.Since(began)}
		p := e.startArt(args...)
		for !p.exited() {
			if smp, ok := sampleProc(p.pid()); ok {
				s.peakRSS = max(s.peakRSS, smp.rss)
				s.peakFDs = max(s.peakFDs, smp.fds)
			}
			select {
			case <-p.done:
			case <-time.After(250 * time.Millisecond):
			}
		}
		r := p.wait(cmdTimeout)
		s.dur = r.dur
		s.ok = r.code == 0 && strings.Contains(r.stdout, fmt.Sprintf("SOAK-DONE %d", n))
		if !s.ok {
			t.Fatalf("soak session %d on %s failed:\n%s", n, branch, r)
		}
		sessions = append(sessions, s)
		if n%5 == 4 {
			e.artOK("gc")
			gcs++
		}
	}
	close(stopWriter)
	if err := <-writerDone; err != nil {
		t.Fatalf("the writer in the long-lived mount: %v", err)
	}
	close(stopSampler)
	<-samplerDone
	id, r := e.stopMount(mp, mnt)
	if r.code != 0 || id == "" {
		t.Fatalf("the long-lived mount did not commit:\n%s", r)
	}
	e.fsck("the soak")

	// What the mount acknowledged is in its commit.
	dir := filepath.Join(e.base, "check-mount", filepath.Base(e.ws))
	if r := e.art("pull", "-q", "-m", dir, "--commit", "soak-mount"); r.code != 0 {
		t.Fatalf("pull soak-mount:\n%s", r)
	}
	var lost []string
	for name, sum := range acked {
		got, _, err := hashFile(filepath.Join(dir, "trickle", name))
		if sum == "" && err == nil || sum != "" && got != sum {
			lost = append(lost, name)
		}
	}
	if len(lost) > 0 {
		noteLost(t, lost)
		t.Fatalf("the long-lived mount lost acknowledged writes: %v", lost)
	}
	stats.verified(len(acked), 0)
	// Every branch's last session holds its build output and its edit.
	for _, b := range branches {
		dir := filepath.Join(e.base, "check-"+b, filepath.Base(e.ws))
		if r := e.art("pull", "-q", "-m", dir, "--commit", b); r.code != 0 {
			t.Fatalf("pull %s:\n%s", b, r)
		}
		out, err := os.ReadFile(filepath.Join(dir, "prog", "out.txt"))
		if err != nil || !strings.Contains(string(out), `"agent"`) {
			t.Fatalf("%s: the program's output is missing (%v): %q", b, err, out)
		}
	}
	stats.add(func(c *campaign) { c.CommitsVerified += len(branches) + 1 })

	// Figures: first and last quarter.
	q := func(i int, total time.Duration) int { return min(3, int(4*float64(i)/float64(total))) }
	total := time.Since(began)
	type quarter struct {
		sessions int
		durs     []time.Duration
		runRSS   int64
		runFDs   int
		mountRSS []int64
		mountFDs []int
	}
	qs := make([]quarter, 4)
	for _, s := range sessions {
		k := q(int(s.start), total)
		qs[k].sessions++
		if s.n >= len(branches) {
			// Throughput compares warm sessions: a branch's first one
			// builds with an empty Go cache.
			qs[k].durs = append(qs[k].durs, s.dur)
		}
		qs[k].runRSS = max(qs[k].runRSS, s.peakRSS)
		qs[k].runFDs = max(qs[k].runFDs, s.peakFDs)
	}
	for _, s := range mountSamples {
		k := q(int(s.at), total)
		qs[k].mountRSS = append(qs[k].mountRSS, s.rss)
		qs[k].mountFDs = append(qs[k].mountFDs, s.fds)
	}
	median := func(ds []time.Duration) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	maxOf := func(v []int64) int64 {
		var m int64
		for _, x := range v {
			m = max(m, x)
		}
		return m
	}
	maxInt := func(v []int) int {
		m := 0
		for _, x := range v {
			m = max(m, x)
		}
		return m
	}
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %v, %d sessions on %d branches, %d gc runs, %d fsynced writes into the long-lived mount\n", total.Round(time.Second), len(sessions), len(branches), gcs, writes.Load())
	fmt.Fprintf(&b, "  quarter  sessions  median-warm-session  art-run-peak-RSS  art-run-peak-fds  mount-RSS(max)  mount-fds(max)\n")
	for i, x := range qs {
		fmt.Fprintf(&b, "  Q%d       %8d  %19v  %13.1f MiB  %16d  %10.1f MiB  %14d\n", i+1, x.sessions, median(x.durs).Round(time.Millisecond),
			float64(x.runRSS)/(1<<20), x.runFDs, float64(maxOf(x.mountRSS))/(1<<20), maxInt(x.mountFDs))
	}
	t.Log("\n" + b.String())
	fmt.Print(b.String())
	if p := os.Getenv("ART_SOAK_REPORT"); p != "" {
		os.WriteFile(p, []byte(b.String()), 0o644)
	}
	first, last := qs[0], qs[3]
	warm := first
	for _, x := range qs[:3] {
		if len(x.durs) > 0 {
			warm = x // the first quarter with warm sessions
			break
		}
	}
	if len(warm.durs) == 0 || len(last.durs) == 0 {
		t.Fatalf("too short to compare quarters (%d and %d warm sessions)", len(warm.durs), len(last.durs))
	}
	if m1, m4 := median(warm.durs), median(last.durs); m4 > m1*3/2+2*time.Second {
		t.Errorf("throughput degraded: median warm session %v early on, %v in the last quarter", m1, m4)
	}
	const slack = 48 << 20
	if r1, r4 := maxOf(first.mountRSS), maxOf(last.mountRSS); r4 > r1*3/2+slack {
		t.Errorf("the long-lived mount's memory grew: %d MiB -> %d MiB", r1>>20, r4>>20)
	}
	if f1, f4 := maxInt(first.mountFDs), maxInt(last.mountFDs); f4 > f1+8 {
		t.Errorf("the long-lived mount's open files grew: %d -> %d", f1, f4)
	}
	if r1, r4 := first.runRSS, last.runRSS; r4 > r1*3/2+slack {
		t.Errorf("art run's peak memory grew: %d MiB -> %d MiB", r1>>20, r4>>20)
	}
	if f1, f4 := first.runFDs, last.runFDs; f4 > f1+8 {
		t.Errorf("art run's open files grew: %d -> %d", f1, f4)
	}
}
