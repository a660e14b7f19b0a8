package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"1": 1, "1024": 1024, "1K": 1 << 10, "1k": 1 << 10, "512M": 512 << 20, "512MB": 512 << 20,
		"512MiB": 512 << 20, "2G": 2 << 30, "1.5G": 3 << 29, "1T": 1 << 40, " 64m ": 64 << 20, "100B": 100,
	}
	for in, want := range good {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "abc", "-1", "-5M", "0", "0M", "12Q", "1e3", "0x10", "NaN", "Inf", "99999999999T", "1..5G", "5 M M"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		} else if !strings.Contains(err.Error(), "512M") {
			t.Errorf("ParseSize(%q) error does not show an example: %v", in, err)
		}
	}
}

func TestPidsLimit(t *testing.T) {
	requireBwrap(t)
	m := marked(987080)
	cfg := baseConfig(t, "sh", "-c", `i=0; while [ $i -lt 200 ]; do sleep `+m+` & i=$((i+1)); echo $i; done`)
	cfg.Pids = 30
	begin := time.Now()
	o := run(t, cfg, "")
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	mech, why := LimitMechanism(cfg)
	t.Logf("limits enforced with %q (cgroup v2 not used because: %v)", o.Limits, why)
	if o.Limits != mech || o.Limits == LimitsNone {
		t.Errorf("Result.Limits %q, LimitMechanism %q", o.Limits, mech)
	}
	lines := strings.Fields(o.Stdout)
	started := 0
	if len(lines) > 0 {
		started, _ = strconv.Atoi(lines[len(lines)-1])
	}
	t.Logf("started %d background processes under Pids=30", started)
	if o.ExitCode == 0 || started >= 200 || started < 5 {
		t.Errorf("fork bomb not capped: exit %d, started %d, stderr %q", o.ExitCode, started, o.Stderr)
	}
	if d := time.Since(begin); d > 20*time.Second {
		t.Errorf("Run took %v to return", d)
	}
	if pids := processesWith("sleep " + m); len(pids) > 0 {
		// The background sleeps must die with the sandbox, long before they end.
		t.Errorf("background children survived: %v", pids)
	}
	// Without the limit, the same loop runs to the end.
	cfg.Pids = 0
	cfg.Argv = []string{"sh", "-c", `i=0; while [ $i -lt 60 ]; do sleep 0.2 & i=$((i+1)); done; echo $i`}
	if o := run(t, cfg, ""); o.ExitCode != 0 || strings.TrimSpace(o.Stdout) != "60" {
		t.Errorf("unlimited: exit %d stdout %q stderr %q", o.ExitCode, o.Stdout, o.Stderr)
	}
}

// TaskCap caps the agent's processes when no Pids limit is set; an
// explicit Pids replaces it.
func TestTaskCap(t *testing.T) {
	requireBwrap(t)
	m := marked(987081)
	script := `grep '^Max processes' /proc/self/limits; i=0; while [ $i -lt 100 ]; do sleep ` + m + ` & i=$((i+1)); echo $i; done`
	cases := []struct {
		name      string
		cap, pids int
		wantMax   string // the soft RLIMIT_NPROC the agent sees
		capped    bool
	}{
		{"cap alone", 40, 0, "40", true},
		{"explicit pids wins", 40, 200, "", false},
		{"no cap", 0, 0, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := baseConfig(t, "sh", "-c", script)
			cfg.TaskCap, cfg.Pids = c.cap, c.pids
			o := run(t, cfg, "")
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			lines := strings.Split(strings.TrimSpace(o.Stdout), "\n")
			limit := strings.Fields(lines[0])
			if c.wantMax != "" && (len(limit) < 3 || limit[2] != c.wantMax) {
				t.Errorf("RLIMIT_NPROC %q, want %s", lines[0], c.wantMax)
			}
			started, _ := strconv.Atoi(lines[len(lines)-1])
			if capped := started < 100; capped != c.capped {
				t.Errorf("started %d of 100 background processes: capped %v, want %v (stderr %q)", started, capped, c.capped, o.Stderr)
			}
			if pids := processesWith("sleep " + m); len(pids) > 0 {
				t.Errorf("background children survived: %v", pids)
			}
		})
	}
	if n := DefaultTaskCap(); n < 64 || n > 16384 {
		t.Errorf("DefaultTaskCap() = %d, want 64..16384", n)
	}
}

// The cap only ever lowers the limits art runs under: a host's stricter
// hard limit made every run fail (the shell may not raise it), and a
// lower soft one was raised to the cap.
func TestTaskCapUnderHostLimits(t *testing.T) {
	requireBwrap(t)
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skipf("skipping: prlimit (util-linux) is missing: %v", err)
	}
	cases := []struct {
		host       string // prlimit --nproc=SOFT:HARD for art
		soft, hard string
	}{
		{"100:200", "100", "200"},     // stricter than the cap: kept
		{"20000:40000", "500", "500"}, // looser: capped
		{"300:90000", "300", "500"},   // a lower soft limit stays
	}
	for _, c := range cases {
		t.Run(c.host, func(t *testing.T) {
			cfg := baseConfig(t, "grep", "^Max processes", "/proc/self/limits")
			cfg.TaskCap = 500
			cmd, resFile := helperCmd(t, cfg)
			cmd.Args = append([]string{prlimit, "--nproc=" + c.host, "--"}, cmd.Args...)
			cmd.Path = prlimit
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			r := readHelperResult(t, resFile)
			if r.Err != "" || r.ExitCode != 0 {
				t.Fatalf("under nproc %s: exit %d, %s\n%s", c.host, r.ExitCode, r.Err, out)
			}
			f := strings.Fields(string(out))
			if len(f) < 4 || f[2] != c.soft || f[3] != c.hard {
				t.Errorf("under nproc %s the agent has %q, want soft %s hard %s", c.host, out, c.soft, c.hard)
			}
		})
	}
}

func TestMemoryLimit(t *testing.T) {
	requireBwrap(t)
	requireTool(t, "/usr/bin/python3")
	cfg := baseConfig(t, "python3", "-c", "b = bytearray(16 << 20); print('SMALL-OK')")
	cfg.Memory = 128 << 20
	o := run(t, cfg, "")
	if o.Err != nil || o.ExitCode != 0 || !strings.Contains(o.Stdout, "SMALL-OK") {
		t.Fatalf("small allocation failed under the limit: %+v %q %v", o.Result, o.Stderr, o.Err)
	}
	cfg.Argv = []string{"python3", "-c", "b = bytearray(512 << 20); b[-1] = 1; print('BIG-OK')"}
	o = run(t, cfg, "")
	if o.Err != nil || o.ExitCode == 0 || strings.Contains(o.Stdout, "BIG-OK") {
		t.Errorf("512M allocation not stopped by a 128M limit: %+v stdout %q", o.Result, o.Stdout)
	}
	t.Logf("memory limited with %q: exit %d stderr %q", o.Limits, o.ExitCode, lastLine(o.Stderr))
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

// TestCgroupSetup checks the cgroup v2 files written, on a fake hierarchy.
func TestCgroupSetup(t *testing.T) {
	root := t.TempDir()
	oldRoot, oldIs := cgroupRoot, isCgroup2
	defer func() { cgroupRoot, isCgroup2 = oldRoot, oldIs }()
	cgroupRoot = root
	cfg := Config{Memory: 256 << 20, Pids: 64}

	isCgroup2 = func(string) bool { return false }
	if mech, why := LimitMechanism(cfg); mech != LimitsRlimit || why == nil {
		t.Errorf("not cgroup2: %q %v", mech, why)
	}
	if mech, _ := LimitMechanism(Config{}); mech != LimitsNone {
		t.Errorf("no limits: %q", mech)
	}

	isCgroup2 = func(string) bool { return true }
	os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpu io memory\n"), 0o644)
	os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("memory\n"), 0o644)
	if mech, why := LimitMechanism(cfg); mech != LimitsRlimit || why == nil || !strings.Contains(why.Error(), "pids") {
		t.Errorf("missing pids controller: %q %v", mech, why)
	}
	os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpu io memory pids\n"), 0o644)
	if mech, why := LimitMechanism(cfg); mech != LimitsCgroup2 {
		t.Fatalf("cgroup2 expected: %q %v", mech, why)
	}
	// A stale cgroup of a dead art process is removed; a live one is kept.
	stale := filepath.Join(root, "art-sandbox-999999999-1")
	live := filepath.Join(root, "art-sandbox-1-1")
	os.Mkdir(stale, 0o755)
	os.Mkdir(live, 0o755)
	cg, err := newCgroup(cfg)
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(cg.dir, name))
		return string(b)
	}
	if read("memory.max") != strconv.Itoa(256<<20) || read("pids.max") != "64" || read("memory.swap.max") != "0" {
		t.Errorf("limits written: %q %q %q", read("memory.max"), read("pids.max"), read("memory.swap.max"))
	}
	if b, _ := os.ReadFile(filepath.Join(root, "cgroup.subtree_control")); string(b) != "+pids" {
		t.Errorf("pids controller not enabled: %q", b)
	}
	if !strings.HasPrefix(filepath.Base(cg.dir), "art-sandbox-") || cg.fd == nil {
		t.Errorf("cgroup %+v", cg)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale cgroup not removed")
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("cgroup of a live process removed")
	}
	// A real cgroupfs removes its interface files with the directory.
	ents, _ := os.ReadDir(cg.dir)
	for _, e := range ents {
		os.Remove(filepath.Join(cg.dir, e.Name()))
	}
	if err := cg.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cg.dir); !os.IsNotExist(err) {
		t.Errorf("cgroup dir left behind")
	}
}
