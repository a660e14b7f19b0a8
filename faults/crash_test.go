package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The crash matrix: kill -9 of art at seeded random points. A kill point is
// a delay drawn from the seed; one that comes after art finished is not
// counted as landed (the run reports attempts and landed kills per phase).

var pushedRE = regexp.MustCompile(`(?m)^\[(\S+) ([0-9a-f]{12})\] \d+ files`)

// pushTree is the real tree pushed and pulled: a few thousand files of Go
// source in the full matrix.
func pushTree() []string {
	return pick([]string{"crypto", "go", "net", "encoding", "internal"}, []string{"go", "net", "encoding"})
}

type reported struct {
	id   string
	want manifest
}

// calibrate measures one uncrashed run of an art command on a scratch copy
// so kill points can be spread over its whole duration.
func calibrate(t *testing.T, e *env, args ...string) time.Duration {
	t.Helper()
	r := e.artOK(args...)
	t.Logf("calibration: art %s took %v", strings.Join(args, " "), r.dur)
	return aim(r)
}

// calibratePush times the first push of e's workspace on a scratch
// repository.
func calibratePush(t *testing.T, e *env) time.Duration {
	t.Helper()
	scratch := &env{t: t, base: e.base, db: filepath.Join(e.base, "scratch", "art.db"), ws: e.ws}
	scratch.artOK("init", "-d", scratch.db)
	T := calibrate(t, scratch, "push", "-q", "-m", e.ws)
	os.RemoveAll(filepath.Dir(scratch.db))
	return T
}

// aim is the span kill points are drawn from after a run that took r.dur:
// the tests re-aim after each run that ended before its kill point, so
// that a calibration which overestimated the command does not leave every
// later kill point past its end.
func aim(r result) time.Duration { return max(r.dur, 50*time.Millisecond) }

func TestCrashPush(t *testing.T) {
	e := newEnv(t)
	rng := rngFor(t)
	goTree(t, e.ws, pushTree()...)
	T := calibratePush(t, e)

	e.artOK("init", "-d", e.db)
	kills := pick(24, 4)
	var commits []reported
	landed := 0
	for attempt := 0; landed < kills && attempt < 4*kills; attempt++ {
		if attempt > 0 {
			// Half the pushes re-read everything (all mtimes changed).
			mutate(t, rng, e.ws, 1+rng.IntN(30), rng.IntN(2) == 0)
		}
		want := snapshot(t, e.ws)
		before := e.tryTip("main")
		d := time.Duration(rng.Float64() * 1.1 * float64(T))
		p := e.startArt("push", "-q", "-m", e.ws)
		hit := p.killAfter(d)
		stats.kill("push", hit)
		if hit {
			landed++
			t.Logf("push %d: killed after %v", attempt, d.Round(time.Millisecond))
		} else {
			r := p.result()
			m := pushedRE.FindStringSubmatch(r.stdout)
			if r.code != 0 || m == nil {
				t.Fatalf("push %d failed:\n%s", attempt, r)
			}
			commits = append(commits, reported{id: e.show(m[2]).ID, want: want})
			t.Logf("push %d: completed as %s before the kill point %v", attempt, m[2], d.Round(time.Millisecond))
			// Aim at how long a push takes now: one re-reading files
			// whose content the repository holds hashes them and stores
			// nothing, far faster than the calibrating first push.
			T = aim(r)
		}
		e.fsck(fmt.Sprintf("push %d", attempt))
		// Every reported commit is intact (fsck re-hashed every object;
		// the ids still resolve to the same commits).
		for _, c := range commits {
			if got := e.show(c.id).ID; got != c.id {
				t.Fatalf("commit %s now shows as %s", c.id, got)
			}
		}
		// A push is atomic: the branch either stayed where it was or
		// holds all of the push (killed after its transaction).
		if after := e.tryTip("main"); hit && after != before {
			t.Logf("push %d: killed after its commit %s", attempt, after[:12])
			commits = append(commits, reported{id: after, want: want})
		}
		if len(commits) > 0 {
			last := commits[len(commits)-1]
			e.pullVerify(last.id, last.want)
		}
	}
	if landed < kills {
		t.Errorf("only %d of %d kill points landed while push ran", landed, kills)
	}
	// After all that, a push completes, and every reported commit pulls
	// and matches what was pushed.
	mutate(t, rng, e.ws, 5, true)
	want := snapshot(t, e.ws)
	r := e.artOK("push", "-q", "-m", e.ws)
	m := pushedRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no commit in push output:\n%s", r)
	}
	commits = append(commits, reported{id: e.show(m[2]).ID, want: want})
	for _, c := range commits {
		e.pullVerify(c.id, c.want)
	}
	e.fsck("the last push")
}

// TestCrashStagedPush: kill -9 of a push with more than 64 MiB to store,
// which it stores first in transactions of its own (repo.StageFiles):
// what a killed push staged is garbage nothing names, which fsck accepts
// and gc frees; a push after the kills completes and reads back whole.
func TestCrashStagedPush(t *testing.T) {
	e := newEnv(t)
	rng := rngFor(t)
	buf := make([]byte, 24<<20)
	writeBig := func() { // 96 MiB of new content: every push stages
		for i := range 4 {
			fillRand(rng, buf)
			if err := os.WriteFile(filepath.Join(e.ws, fmt.Sprintf("big%d", i)), buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeBig()
	T := calibratePush(t, e)

	e.artOK("init", "-d", e.db)
	kills := pick(8, 3)
	landed := 0
	for attempt := 0; landed < kills && attempt < 4*kills; attempt++ {
		if attempt > 0 {
			writeBig()
		}
		d := time.Duration(rng.Float64() * 1.1 * float64(T))
		p := e.startArt("push", "-q", "-m", e.ws)
		hit := p.killAfter(d)
		stats.kill("staged push", hit)
		if hit {
			landed++
			t.Logf("staged push %d: killed after %v", attempt, d.Round(time.Millisecond))
		} else if r := p.result(); r.code != 0 || pushedRE.FindStringSubmatch(r.stdout) == nil {
			t.Fatalf("staged push %d failed:\n%s", attempt, r)
		} else {
			T = aim(r)
		}
		e.fsck(fmt.Sprintf("staged push %d", attempt))
	}
	if landed < kills {
		t.Errorf("only %d of %d kill points landed while the staged push ran", landed, kills)
	}
	writeBig()
	want := snapshot(t, e.ws)
	r := e.artOK("push", "-q", "-m", e.ws)
	m := pushedRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no commit in push output:\n%s", r)
	}
	e.pullVerify(m[2], want)
	if g := e.artOK("gc"); !strings.Contains(g.stdout, "freed") {
		t.Logf("gc: %s", g.stdout)
	}
	e.fsck("gc after the killed staged pushes")
	e.pullVerify(m[2], want)
}

func TestCrashPull(t *testing.T) {
	e := newEnv(t)
	rng := rngFor(t)
	goTree(t, e.ws, pick([]string{"crypto", "net"}, []string{"net", "encoding"})...)
	e.artOK("init", "-d", e.db)
	push := func() reported {
		want := snapshot(t, e.ws)
		r := e.artOK("push", "-q", "-m", e.ws)
		m := pushedRE.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("no commit in push output:\n%s", r)
		}
		return reported{id: e.show(m[2]).ID, want: want}
	}
	a := push()
	// B differs from A in a third of its files, plus additions/deletions.
	mutate(t, rng, e.ws, len(a.want)/3, true)
	b := push()
	dir := filepath.Join(e.base, "export", filepath.Base(e.ws))
	e.pullVerify(a.id, a.want)
	T := calibrate(t, e, "pull", "-q", "-m", dir, "--commit", b.id)
	e.pullVerify(a.id, a.want)

	kills := pick(16, 3)
	cur, other := a, b
	landed := 0
	for attempt := 0; landed < kills && attempt < 4*kills; attempt++ {
		d := time.Duration(rng.Float64() * 1.2 * float64(T))
		p := e.startArt("pull", "-q", "-m", dir, "--commit", other.id)
		hit := p.killAfter(d)
		stats.kill("pull", hit)
		if hit {
			landed++
			t.Logf("pull %d: killed after %v", attempt, d.Round(time.Millisecond))
		} else if r := p.result(); r.code != 0 {
			t.Fatalf("pull %d failed:\n%s", attempt, r)
		} else {
			// The pull ended before its kill point: the calibration
			// overestimated it (it once ran under a load that had gone,
			// and 10 of 12 kill points came too late).
			T = aim(r)
		}
		e.fsck(fmt.Sprintf("pull %d", attempt))
		// Recovery: pulling the same commit again completes without
		// --force and leaves exactly that commit's tree, nothing more.
		e.pullVerify(other.id, other.want)
		cur, other = other, cur
	}
	if landed < kills {
		t.Errorf("only %d of %d kill points landed while pull ran", landed, kills)
	}
	// The commits themselves are untouched by any of it.
	e.pullVerify(cur.id, cur.want)
	e.pullVerify(other.id, other.want)
}

// seedWorkspace pushes a small workspace (a few real source files) as the
// first commit on main and returns its manifest.
func seedWorkspace(t *testing.T, e *env) manifest {
	t.Helper()
	goTree(t, e.ws, "container", "unicode/utf16")
	e.artOK("init", "-d", e.db)
	want := snapshot(t, e.ws)
	e.artOK("push", "-q", "-m", e.ws)
	return want
}

// withPrefix returns m with every path below prefix.
func withPrefix(m manifest, prefix string) manifest {
	out := manifest{}
	for p, v := range m {
		out[prefix+"/"+p] = v
	}
	return out
}

// checkRecovered pulls a branch tip into a scratch directory named like the
// workspace, checks that the workspace's original files are intact and that
// the storm's acknowledged writes are all there.
func checkRecovered(t *testing.T, e *env, rev string, base manifest, s *storm) {
	t.Helper()
	dir := filepath.Join(e.base, fmt.Sprintf("check-%d", time.Now().UnixNano()), filepath.Base(e.ws))
	r := e.art("pull", "-q", "-m", dir, "--commit", rev)
	if r.code != 0 {
		t.Fatalf("pull of %s failed:\n%s", rev, r)
	}
	got := snapshot(t, dir)
	sub := manifest{}
	for p, v := range got {
		if _, ok := base[p]; ok {
			sub[p] = v
		}
	}
	if d := compare(base, sub); len(d) > 0 {
		t.Fatalf("the workspace's own files changed in %s:\n  %s", rev, strings.Join(first(d, 20), "\n  "))
	}
	if s != nil {
		if bad := s.check(t, dir); len(bad) > 0 {
			noteLost(t, bad)
			t.Fatalf("%s lost acknowledged writes (%d of %d paths):\n  %s", rev, len(bad), len(s.paths), strings.Join(first(bad, 30), "\n  "))
		}
	}
	stats.add(func(c *campaign) { c.CommitsVerified++ })
	os.RemoveAll(filepath.Dir(dir))
}

var committedRE = regexp.MustCompile(`\[(\S+) ([0-9a-f]{12})\]`)

func TestCrashMountStorm(t *testing.T) {
	requireFUSE(t)
	e := newEnv(t)
	rng := rngFor(t)
	base := seedWorkspace(t, e)
	kills := pick(20, 3)
	landed := 0
	for attempt := 0; landed < kills && attempt < 3*kills; attempt++ {
		branch := fmt.Sprintf("storm%d", attempt)
		e.artOK("branch", branch, "main")
		p, mp, wt := e.mount(branch)
		s := newStorm(filepath.Join(mp, filepath.Base(e.ws)), "storm")
		stop := make(chan struct{})
		wg := s.run(rng, 4, 0, stop)
		d := time.Duration(200+rng.IntN(2300)) * time.Millisecond
		ready := time.Now() // kill points count from the mount being ready
		select {
		case <-time.After(d):
		case <-p.done:
		}
		s.killed.Store(true)
		hit := p.kill9()
		stats.kill("mount", hit)
		if !hit {
			close(stop)
			wg.Wait()
			t.Fatalf("art mount ended by itself:\n%s", p.result())
		}
		landed++
		waitDone(t, wg, time.Minute, "the writers to notice the dead mount")
		close(stop)
		if errs := s.errors(); errs != "" {
			t.Fatalf("writers failed before the kill:\n%s", errs)
		}
		t.Logf("storm %d: killed %v after the mount was ready: %d ops, %d acknowledged, %d bytes written",
			attempt, time.Since(ready).Round(time.Millisecond), s.ops.Load(), s.acks.Load(), s.written.Load())
		// The next command removes the stale mount.
		e.art("status", "-m", e.ws)
		if isMounted(mp) {
			t.Fatalf("stale mount %s still there after the next command", mp)
		}
		e.fsck(fmt.Sprintf("storm %d", attempt))
		e.recheck()
		r := e.art("commit", "--worktree", wt)
		switch {
		case r.code == 0:
			stats.add(func(c *campaign) { c.Recovered++ })
		case s.acks.Load() == 0 && strings.Contains(r.stderr, "nothing to commit"):
			continue
		default:
			t.Fatalf("art commit of the interrupted worktree failed:\n%s", r)
		}
		checkRecovered(t, e, branch, base, s)
		e.remember(branch)
	}
	if landed < kills {
		t.Errorf("only %d of %d kill points landed", landed, kills)
	}
	e.fsck("the storms")
}

func waitDone(t testing.TB, wg interface{ Wait() }, timeout time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

func TestCrashCommit(t *testing.T) {
	requireFUSE(t)
	e := newEnv(t)
	rng := rngFor(t)
	base := seedWorkspace(t, e)
	kills := pick(20, 3)
	landed := 0
	var T time.Duration
	// Round 0 only calibrates, and a round ends at the first commit that
	// completes, so it may land no kill at all: allow rounds to spare.
	for round := 0; landed < kills && round <= 3*kills; round++ {
		// An interrupted worktree with a lot in it: a storm that ran to
		// its end (everything acknowledged), then kill -9 of the mount.
		branch := fmt.Sprintf("commit%d", round)
		e.artOK("branch", branch, "main")
		p, mp, wt := e.mount(branch)
		s := newStorm(filepath.Join(mp, filepath.Base(e.ws)), "work")
		wg := s.run(rng, 4, pick(60, 40), nil)
		waitDone(t, wg, 5*time.Minute, "the writers")
		if errs := s.errors(); errs != "" {
			t.Fatalf("writers failed:\n%s", errs)
		}
		s.killed.Store(true)
		if !p.kill9() {
			t.Fatalf("art mount ended by itself:\n%s", p.result())
		}
		if round == 0 {
			// Calibrate on the first: an uncrashed commit.
			T = calibrate(t, e, "commit", "--worktree", wt)
			checkRecovered(t, e, branch, base, s)
			e.remember(branch)
			continue
		}
		// Kill art commit at random points until one completes.
		done := false
		for try := 0; !done && try < 4; try++ {
			d := time.Duration(rng.Float64() * 1.2 * float64(T))
			c := e.startArt("commit", "--worktree", wt)
			hit := c.killAfter(d)
			stats.kill("commit", hit)
			if hit {
				landed++
				t.Logf("commit round %d try %d: killed after %v", round, try, d.Round(time.Millisecond))
			} else if r := c.result(); r.code != 0 {
				t.Fatalf("commit failed:\n%s", r)
			} else {
				done = true
				T = aim(r)
			}
			e.fsck(fmt.Sprintf("commit round %d try %d", round, try))
			e.recheck()
			// The worktree is either still there (interrupted) or
			// committed: never half of it.
			still := false
			for _, w := range e.worktrees() {
				if fmt.Sprint(w.ID) == wt {
					still = true
				}
			}
			if !still {
				done = true
			}
		}
		if !done {
			r := e.art("commit", "--worktree", wt)
			if r.code != 0 {
				t.Fatalf("commit after the kills failed:\n%s", r)
			}
		}
		stats.add(func(c *campaign) { c.Recovered++ })
		if isMounted(mp) {
			t.Fatalf("stale mount %s still there", mp)
		}
		checkRecovered(t, e, branch, base, s)
		e.remember(branch)
	}
	if landed < kills {
		t.Errorf("only %d of %d kill points landed while commit ran", landed, kills)
	}
	e.fsck("the commits")
}

var recordedRE = regexp.MustCompile(`recorded the interrupted session of worktree #(\d+) on (\S+)`)

func TestCrashRun(t *testing.T) {
	requireSandbox(t)
	e := newEnv(t)
	rng := rngFor(t)
	base := seedWorkspace(t, e)
	agent := installAgent(t, e)
	kills := pick(20, 3)
	landed := 0
	for attempt := 0; landed < kills && attempt < 2*kills; attempt++ {
		branch := fmt.Sprintf("run%d", attempt)
		e.artOK("branch", branch, "main")
		p := e.startArt("run", "-b", branch, "-m", e.ws, "-i=false", "--",
			"python3", agent, strconv.FormatUint(rng.Uint64()>>1, 10), "out")
		d := time.Duration(300+rng.IntN(2700)) * time.Millisecond
		hit := p.killAfter(d)
		stats.kill("run", hit)
		if !hit {
			t.Fatalf("art run ended by itself:\n%s", p.result())
		}
		landed++
		// Where the dead session was mounted (read before the next
		// command records and removes the worktree).
		var mp string
		for _, w := range e.worktrees() {
			if w.Branch == branch {
				mp = w.Mountpoint
				e.trackMount(mp)
			}
		}
		out := p.stdout.String()
		a := parseAgent(t, out)
		t.Logf("run %d: killed after %v; the agent acknowledged %d operations", attempt, d.Round(time.Millisecond), a.acks)
		// The next command records the interrupted session.
		r := e.art("status", "-m", e.ws)
		if mp == "" {
			t.Logf("run %d: killed before its worktree existed", attempt)
			continue
		}
		if isMounted(mp) {
			t.Fatalf("stale mount %s still there after the next command:\n%s", mp, r)
		}
		if _, err := os.Stat(mp); !os.IsNotExist(err) {
			t.Errorf("the dead session's mount point %s was not removed (%v)", mp, err)
		}
		// Nor its scheduling group, where art made one (sandbox
		// package, schedgroup.go).
		// (cgroup v1 hierarchies below /sys/fs/cgroup, or cgroup v2 at it)
		for _, pattern := range []string{"/sys/fs/cgroup/*/art-sched-%d-*", "/sys/fs/cgroup/art-sched-%d-*"} {
			if groups, _ := filepath.Glob(fmt.Sprintf(pattern, p.cmd.Process.Pid)); len(groups) > 0 {
				t.Errorf("the dead session's scheduling group is still there: %v", groups)
			}
		}
		if !recordedRE.MatchString(r.stderr) {
			t.Fatalf("the next command did not record the interrupted session:\n%s", r)
		}
		stats.add(func(c *campaign) { c.Recovered++ })
		e.fsck(fmt.Sprintf("run %d", attempt))
		e.recheck()
		c := e.show(branch)
		if c.Session.Status != "interrupted" {
			t.Fatalf("session on %s recorded with status %q, want interrupted", branch, c.Session.Status)
		}
		dir := filepath.Join(e.base, "check", filepath.Base(e.ws))
		if r := e.art("pull", "-q", "-m", dir, "--commit", branch); r.code != 0 {
			t.Fatalf("pull of %s failed:\n%s", branch, r)
		}
		if bad := a.check(t, dir, "out"); len(bad) > 0 {
			noteLost(t, bad)
			t.Fatalf("run %d lost acknowledged writes:\n  %s", attempt, strings.Join(first(bad, 30), "\n  "))
		}
		checkRecovered(t, e, branch, base, nil)
		os.RemoveAll(filepath.Dir(dir))
		e.remember(branch)
	}
	if landed < kills {
		t.Errorf("only %d of %d kill points landed", landed, kills)
	}
}
