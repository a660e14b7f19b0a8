package faults

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// agentScript is testdata/agent.py: the scripted agent of the art run
// crash tests. It runs inside the sandbox as the agent's user.
//
//go:embed testdata/agent.py
var agentScript []byte

// installAgent writes the agent where the sandbox can read it (the host
// root is visible read-only inside; /tmp is not).
func installAgent(t testing.TB, e *env) string {
	t.Helper()
	p := filepath.Join(e.base, "agent.py")
	if err := os.WriteFile(p, agentScript, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// agentLog is what the agent printed: acknowledged states and the one
// operation in flight when it died (it works sequentially).
type agentLog struct {
	files    map[string]string // path (workspace-relative) -> sha256 of acknowledged content, "" = deleted
	logPath  string
	logLen   int
	logSum   string
	inflight []string // BEGIN fields of the operation without ACK
	acks     int
	ended    bool
}

func parseAgent(t testing.TB, out string) *agentLog {
	t.Helper()
	a := &agentLog{files: map[string]string{}}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "BEGIN":
			a.inflight = f[1:]
		case "ACK":
			a.inflight = nil
			a.acks++
			switch {
			case f[1] == "file" && len(f) == 4:
				a.files[f[2]] = f[3]
			case f[1] == "gone" && len(f) == 3:
				a.files[f[2]] = ""
			case f[1] == "log" && len(f) == 5:
				n, err := strconv.Atoi(f[3])
				if err != nil {
					t.Fatalf("bad agent line %q", l)
				}
				a.logPath, a.logLen, a.logSum = f[2], n, f[4]
			default:
				t.Fatalf("bad agent line %q", l)
			}
		case "END":
			a.ended = true
		default:
			// A torn last line (the pipe closed mid-write) is not an ACK.
		}
	}
	return a
}

// check compares a pulled workspace with what the agent acknowledged.
// Paths the in-flight operation touched may hold either state; everything
// else must be exact, and nothing unacknowledged may appear.
func (a *agentLog) check(t testing.TB, pulled, dir string) []string {
	t.Helper()
	loose := map[string]bool{}
	if len(a.inflight) > 1 {
		for _, p := range a.inflight[1:] {
			loose[p] = true
		}
	}
	var bad []string
	var files int
	var n int64
	for p, want := range a.files {
		if loose[p] {
			continue
		}
		sum, size, err := hashFile(filepath.Join(pulled, p))
		switch {
		case want == "" && errors.Is(err, os.ErrNotExist):
		case want == "":
			bad = append(bad, fmt.Sprintf("%s: deleted (acknowledged) but present", p))
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s: %v", p, err))
		case sum != want:
			bad = append(bad, fmt.Sprintf("%s: content differs from the acknowledged one", p))
		default:
			files++
			n += size
		}
	}
	if a.logLen > 0 {
		b, err := os.ReadFile(filepath.Join(pulled, a.logPath))
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s: %v", a.logPath, err))
		case len(b) < a.logLen || sumBytes(b[:a.logLen]) != a.logSum:
			bad = append(bad, fmt.Sprintf("%s: lost its acknowledged %d bytes (has %d)", a.logPath, a.logLen, len(b)))
		case len(b) > a.logLen && !loose[a.logPath]:
			bad = append(bad, fmt.Sprintf("%s: %d bytes beyond the acknowledged %d", a.logPath, len(b)-a.logLen, a.logLen))
		default:
			files++
			n += int64(a.logLen)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(pulled, dir))
	for _, de := range entries {
		p := dir + "/" + de.Name()
		if _, ok := a.files[p]; ok || p == a.logPath || loose[p] {
			continue
		}
		bad = append(bad, "unexpected "+p)
	}
	sort.Strings(bad)
	stats.verified(files, n)
	return bad
}
