package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a helper process that calls Run, so tests can
// give Run a controlling terminal of its own and send it signals.
const helperEnv = "ART_SANDBOX_TEST_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(helperMain(spec))
	}
	if program := os.Getenv(scopeHelperEnv); program != "" {
		os.Exit(scopeHelper(program))
	}
	os.Exit(m.Run())
}

type helperSpec struct {
	Home, Workspace string
	Argv            []string
	Interactive     bool
	TmpSize         int64
	TaskCap         int
	Result          string // file to write the Result JSON to
}

func helperMain(spec string) int {
	var hs helperSpec
	if err := json.Unmarshal([]byte(spec), &hs); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	cfg := Config{Home: hs.Home, Workspace: hs.Workspace, Argv: hs.Argv, Interactive: hs.Interactive, TmpSize: hs.TmpSize, TaskCap: hs.TaskCap}
	res, err := Run(context.Background(), cfg, Stdio{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	out := struct {
		Result
		Err string
	}{Result: res}
	if err != nil {
		out.Err = err.Error()
	}
	data, _ := json.Marshal(out)
	if err := os.WriteFile(hs.Result, data, 0o644); err != nil {
		return 2
	}
	return 0
}

type helperResult struct {
	Result
	Err string
}

// helperCmd prepares the test binary as a helper running cfg.
func helperCmd(t *testing.T, cfg Config) (*exec.Cmd, string) {
	t.Helper()
	return helperCmdAt(t, cfg, filepath.Join(t.TempDir(), "result.json"))
}

func helperCmdAt(t *testing.T, cfg Config, resFile string) (*exec.Cmd, string) {
	t.Helper()
	spec, err := json.Marshal(helperSpec{Home: cfg.Home, Workspace: cfg.Workspace, Argv: cfg.Argv, Interactive: cfg.Interactive, TmpSize: cfg.TmpSize, TaskCap: cfg.TaskCap, Result: resFile})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(spec))
	return cmd, resFile
}

func readHelperResult(t *testing.T, file string) helperResult {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("helper wrote no result: %v", err)
	}
	var r helperResult
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func requireBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed (apt-get install -y bubblewrap); skipping sandbox test")
	}
}

func requireTool(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s is not installed on this host; skipping", path)
	}
}

// newHome makes a plain directory usable as the sandbox home, with a
// workspace directory "ws", owned by the user the agent runs as.
func newHome(t *testing.T) string {
	t.Helper()
	home, err := os.MkdirTemp("", "art-sandbox-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Mkdir(filepath.Join(home, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	chownAgent(t, home)
	return home
}

// chownAgent makes path (recursively) owned by the agent user and reachable.
func chownAgent(t *testing.T, path string) {
	t.Helper()
	uid, gid, err := AgentUser("")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
	err = filepath.Walk(path, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func baseConfig(t *testing.T, argv ...string) Config {
	return Config{Home: newHome(t), Workspace: "ws", Argv: argv}
}

type runOut struct {
	Result
	Stdout, Stderr string
	Err            error
}

func run(t *testing.T, cfg Config, stdin string) runOut {
	t.Helper()
	var so, se bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, cfg, Stdio{Stdin: strings.NewReader(stdin), Stdout: &so, Stderr: &se})
	return runOut{Result: res, Stdout: so.String(), Stderr: se.String(), Err: err}
}

// sh runs a shell snippet in a fresh sandbox and fails the test on a Run error.
func sh(t *testing.T, script string) runOut {
	t.Helper()
	o := run(t, baseConfig(t, "/bin/sh", "-c", script), "")
	if o.Err != nil {
		t.Fatalf("Run(%q): %v\nstderr: %s", script, o.Err, o.Stderr)
	}
	return o
}

// hostTempDir makes a directory outside what the sandbox replaces (/tmp),
// so that it shows in the sandbox's view of the host's root, removed when
// the test ends; its path has no link in it.
func hostTempDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dir, _ = filepath.EvalSymlinks(dir)
	return dir
}

// marked is a sleep duration (N.PIDs: about N seconds) that marks the
// sandbox processes of this test process: a fixed one matched those of the
// same test run by another clone's tests on the same machine, which
// processesWith then reported as survivors.
func marked(n int) string { return fmt.Sprintf("%d.%ds", n, os.Getpid()) }

// processesWith lists host pids whose command line contains marker.
func processesWith(marker string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(data), marker) {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(st), ") Z") {
				continue // zombie
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitStatusCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
