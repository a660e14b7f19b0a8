package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Concurrency: 8 art run sessions on 8 branches of one repository at once,
// each untarring a real tree, editing a file and committing with git
// inside, while art log, art diff and art status poll in a loop. All 8
// commits must be recorded, fsck clean, and no SQLITE_BUSY ("database is
// locked") or EIO may surface anywhere.

var eioRE = regexp.MustCompile(`(?i)input/output error|\bEIO\b`)

// makeTarball tars $GOROOT/src/<sub> into dir/<name>.tgz, readable by the
// agent's user.
func makeTarball(t testing.TB, dir, sub string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, filepath.Base(sub)+".tgz")
	src := filepath.Join(goroot(t), "src", filepath.Dir(sub))
	if b, err := exec.Command("tar", "czf", out, "-C", src, filepath.Base(sub)).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, b)
	}
	os.Chmod(out, 0o644)
	return out
}

var gitEnv = []string{
	"--env", "GIT_AUTHOR_NAME=agent", "--env", "GIT_AUTHOR_EMAIL=agent@example.com",
	"--env", "GIT_COMMITTER_NAME=agent", "--env", "GIT_COMMITTER_EMAIL=agent@example.com",
}

func TestConcurrentSessions(t *testing.T) {
	requireSandbox(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("skipping: git is missing (%v)", err)
	}
	e := newEnv(t)
	seedWorkspace(t, e)
	tarball := makeTarball(t, filepath.Join(e.base, "data"), "net/http")
	// Rounds of 8 sessions on 8 fresh branches (three in the full matrix).
	for round := 0; round < pick(3, 1); round++ {
		concurrentRound(t, e, tarball, round)
		stats.add(func(c *campaign) { c.Concurrent += sessions })
	}
}

const sessions = 8

func concurrentRound(t *testing.T, e *env, tarball string, round int) {
	for i := 0; i < sessions; i++ {
		e.artOK("branch", fmt.Sprintf("r%d-c%d", round, i), "main")
	}

	// Pollers: read commands in a loop until the sessions are done.
	stop := make(chan struct{})
	var polls atomic.Int64
	var pollWG sync.WaitGroup
	var mu sync.Mutex
	var pollFailures []string
	pollers := [][]string{
		{"log", "--all", "-n", "20"},
		{"diff", "--stat", fmt.Sprintf("r%d-c0", round), fmt.Sprintf("r%d-c1", round)},
		{"status", "-m", e.ws},
		{"log", "--oneline", fmt.Sprintf("r%d-c7", round)},
	}
	for _, args := range pollers {
		pollWG.Add(1)
		go func() {
			defer pollWG.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := e.art(args...)
				polls.Add(1)
				if r.code != 0 || eioRE.MatchString(r.stdout+r.stderr) {
					mu.Lock()
					pollFailures = append(pollFailures, r.String())
					mu.Unlock()
				}
			}
		}()
	}

	start := time.Now()
	results := make([]result, sessions)
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			script := fmt.Sprintf(`set -e
mkdir -p work && cd work
tar xzf %s
echo "// edited by session %d" >> http/client.go
git init -q
git add -A
git commit -q -m "session %d"
git log --oneline | wc -l
echo SESSION-DONE %d`, tarball, i, i, i)
			args := append([]string{"run", "-b", fmt.Sprintf("r%d-c%d", round, i), "-m", e.ws, "-i=false"}, gitEnv...)
			args = append(args, "--", "sh", "-c", script)
			results[i] = e.art(args...)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	pollWG.Wait()
	t.Logf("%d sessions in %v, %d polls alongside", sessions, elapsed.Round(time.Millisecond), polls.Load())
	stats.add(func(c *campaign) { c.Polls += int(polls.Load()) })

	for i, r := range results {
		if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("SESSION-DONE %d", i)) {
			t.Errorf("session %d failed:\n%s", i, r)
		}
		if eioRE.MatchString(r.stdout + r.stderr) {
			t.Errorf("session %d saw EIO:\n%s", i, r)
		}
		if !strings.Contains(r.stderr, "session recorded as") {
			t.Errorf("session %d was not recorded:\n%s", i, r)
		}
	}
	for _, f := range first(pollFailures, 5) {
		t.Errorf("a poll failed while the sessions ran:\n%s", f)
	}
	if t.Failed() {
		t.FailNow()
	}
	e.fsck(fmt.Sprintf("round %d of 8 concurrent sessions", round))

	// Every session's commit holds its work: the tree, the edit and a git
	// repository that git itself finds sound.
	orig := snapshot(t, filepath.Join(goroot(t), "src", "net", "http"))
	for i := 0; i < sessions; i++ {
		branch := fmt.Sprintf("r%d-c%d", round, i)
		c := e.show(branch)
		if c.Session.Status != "exited" || c.Session.ExitCode != 0 {
			t.Fatalf("%s: session recorded as %q exit %d", branch, c.Session.Status, c.Session.ExitCode)
		}
		dir := filepath.Join(e.base, "check-"+branch, filepath.Base(e.ws))
		if r := e.art("pull", "-q", "-m", dir, "--commit", branch); r.code != 0 {
			t.Fatalf("pull %s:\n%s", branch, r)
		}
		got := snapshot(t, filepath.Join(dir, "work", "http"))
		want := manifest{}
		for p, v := range orig {
			want[p] = v
		}
		edited, _ := os.ReadFile(filepath.Join(goroot(t), "src", "net", "http", "client.go"))
		edited = append(edited, []byte(fmt.Sprintf("// edited by session %d\n", i))...)
		want["client.go"] = entry{Type: 'f', Mode: orig["client.go"].Mode, Size: int64(len(edited)), Sum: sumBytes(edited)}
		if d := compare(want, got); len(d) > 0 {
			noteLost(t, d)
			t.Fatalf("%s: the untarred tree differs:\n  %s", branch, strings.Join(first(d, 20), "\n  "))
		}
		g := exec.Command("git", "-C", filepath.Join(dir, "work"), "fsck", "--strict")
		if out, err := g.CombinedOutput(); err != nil {
			t.Fatalf("%s: git fsck of the session's repository: %v\n%s", branch, err, out)
		}
		g = exec.Command("git", "-C", filepath.Join(dir, "work"), "log", "--format=%s")
		g.Env = append(os.Environ(), "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*")
		out, err := g.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != fmt.Sprintf("session %d", i) {
			t.Fatalf("%s: git log: %v\n%s", branch, err, out)
		}
		os.RemoveAll(filepath.Dir(dir))
	}
}
