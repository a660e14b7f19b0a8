package faults

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	artBin   string // the art binary under test
	goBin    string // the go command (for GOROOT and builds inside sandboxes)
	seed     uint64 // ART_FAULTS_SEED, else random; printed by every run
	fullMode bool   // ART_FAULTS=full: the whole matrix
)

func TestMain(m *testing.M) {
	fullMode = os.Getenv("ART_FAULTS") == "full"
	if s := os.Getenv("ART_FAULTS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "faults: ART_FAULTS_SEED=%q: %v\n", s, err)
			os.Exit(2)
		}
		seed = v
	} else {
		seed = uint64(time.Now().UnixNano()) % 1_000_000_000
	}
	mode := "subset (ART_FAULTS=full for the whole matrix)"
	if fullMode {
		mode = "full matrix"
	}
	fmt.Printf("faults: seed %d (replay with ART_FAULTS_SEED=%d), %s\n", seed, seed, mode)

	goBin = "go"
	if _, err := exec.LookPath("go"); err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	dir, err := os.MkdirTemp("/var/tmp", "art-faults-bin-")
	if err != nil {
		dir, err = os.MkdirTemp("", "art-faults-bin-")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755)
	artBin = filepath.Join(dir, "art")
	build := exec.Command(goBin, "build", "-o", artBin, "github.com/artproject/art")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the Makefile builds it
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "faults: go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	stats.report()
	os.RemoveAll(dir)
	os.Exit(code)
}

// rngFor returns the test's random source: the run's seed mixed with the
// test name, so one test's draws do not depend on which others ran.
func rngFor(t testing.TB) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	t.Logf("seed %d (replay with ART_FAULTS_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// pick returns the full-matrix value or the subset's.
func pick[T any](full, subset T) T {
	if fullMode {
		return full
	}
	return subset
}

// campaign counts what the suite injected and verified, for the README
// table. It is printed at the end of every run and written as JSON to
// $ART_FAULTS_REPORT when set.
type campaign struct {
	mu              sync.Mutex
	KillPoints      map[string]int `json:"kill_points"`      // kill -9 delivered while art ran, by phase
	KillAttempts    map[string]int `json:"kill_attempts"`    // including those that came after art finished
	FullDisk        []string       `json:"full_disk_cases"`  // ENOSPC scenarios run
	Corruption      []string       `json:"corruption_cases"` // damaged objects
	Concurrent      int            `json:"concurrent_sessions"`
	Recovered       int            `json:"recovered_sessions"` // worktrees/sessions recorded after a kill
	CommitsVerified int            `json:"commits_verified"`   // reported commits checked intact
	FilesVerified   int64          `json:"files_verified"`
	BytesVerified   int64          `json:"bytes_verified"` // bytes compared against what was written
	BadInputs       map[string]int `json:"bad_inputs"`     // error-path cases by kind
	Polls           int            `json:"polls"`          // log/diff/status runs during concurrency
	Lost            []string       `json:"lost"`           // acknowledged data not found (must stay empty)
}

var stats = &campaign{KillPoints: map[string]int{}, KillAttempts: map[string]int{}, BadInputs: map[string]int{}}

func (c *campaign) kill(phase string, landed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.KillAttempts[phase]++
	if landed {
		c.KillPoints[phase]++
	}
}

func (c *campaign) verified(files int, bytes int64) {
	c.mu.Lock()
	c.FilesVerified += int64(files)
	c.BytesVerified += bytes
	c.mu.Unlock()
}

func (c *campaign) add(f func(c *campaign)) {
	c.mu.Lock()
	f(c)
	c.mu.Unlock()
}

func (c *campaign) badInput(kind string, n int) {
	c.mu.Lock()
	c.BadInputs[kind] += n
	c.mu.Unlock()
}

func (c *campaign) report() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "faults: campaign summary (seed %d)\n", seed)
	total := 0
	phases := make([]string, 0, len(c.KillAttempts))
	for p := range c.KillAttempts {
		phases = append(phases, p)
	}
	sort.Strings(phases)
	for _, p := range phases {
		fmt.Fprintf(&b, "  kill -9 during %-12s %3d landed (%d attempts)\n", p, c.KillPoints[p], c.KillAttempts[p])
		total += c.KillPoints[p]
	}
	fmt.Fprintf(&b, "  kill points total        %3d\n", total)
	fmt.Fprintf(&b, "  full-disk cases          %3d %v\n", len(c.FullDisk), c.FullDisk)
	fmt.Fprintf(&b, "  corruption cases         %3d %v\n", len(c.Corruption), c.Corruption)
	fmt.Fprintf(&b, "  concurrent sessions      %3d (%d polls alongside)\n", c.Concurrent, c.Polls)
	fmt.Fprintf(&b, "  crash-recovered sessions %3d\n", c.Recovered)
	fmt.Fprintf(&b, "  reported commits checked %3d\n", c.CommitsVerified)
	fmt.Fprintf(&b, "  files verified           %d (%d bytes)\n", c.FilesVerified, c.BytesVerified)
	bad := 0
	for _, n := range c.BadInputs {
		bad += n
	}
	fmt.Fprintf(&b, "  bad inputs tried         %d %v\n", bad, c.BadInputs)
	if len(c.Lost) == 0 {
		fmt.Fprintf(&b, "  acknowledged data lost   none\n")
	} else {
		fmt.Fprintf(&b, "  acknowledged data LOST   %d: %v\n", len(c.Lost), c.Lost)
	}
	fmt.Print(b.String())
	if p := os.Getenv("ART_FAULTS_REPORT"); p != "" {
		js, _ := json.MarshalIndent(c, "", "  ")
		os.WriteFile(p, js, 0o644)
	}
}
