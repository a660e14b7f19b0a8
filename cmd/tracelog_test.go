package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/artproject/art/sandbox"
	"github.com/artproject/art/tracer"
)

// The trace log is never written through a link (an agent's pulled link
// named like the log made root truncate the file it pointed at), nor into
// a fifo or device.
func TestCreateLogRefusesLinksAndSpecialFiles(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, ws, victim string) string // returns the log path
		want  string                                       // error text; "" = created
	}{
		{"new file", func(t *testing.T, ws, _ string) string { return filepath.Join(ws, "t.log") }, ""},
		{"existing file is truncated", func(t *testing.T, ws, _ string) string {
			p := filepath.Join(ws, "t.log")
			os.WriteFile(p, []byte("old"), 0o644)
			return p
		}, ""},
		{"link to a victim", func(t *testing.T, ws, victim string) string {
			p := filepath.Join(ws, "t.log")
			os.Symlink(victim, p)
			return p
		}, "symbolic link inside the workspace"},
		{"a pipe through /proc/self/fd (as /dev/stderr is)", func(t *testing.T, ws, _ string) string {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close(); w.Close() })
			return fmt.Sprintf("/proc/self/fd/%d", w.Fd())
		}, ""},
		{"the user's link outside the workspace to a file", func(t *testing.T, ws, _ string) string {
			p := filepath.Join(t.TempDir(), "mine.log")
			real := filepath.Join(t.TempDir(), "real.log")
			os.Symlink(real, p)
			return p
		}, ""},
		{"linked directory inside the workspace", func(t *testing.T, ws, victim string) string {
			os.Symlink(filepath.Dir(victim), filepath.Join(ws, "logs"))
			return filepath.Join(ws, "logs", filepath.Base(victim))
		}, "inside the workspace"},
		{"fifo", func(t *testing.T, ws, _ string) string {
			p := filepath.Join(ws, "t.log")
			syscall.Mkfifo(p, 0o644)
			return p
		}, "fifo nobody reads"},
		{"the workspace given through the user's link", func(t *testing.T, ws, victim string) string {
			os.Symlink(filepath.Dir(victim), filepath.Join(ws, "out"))
			alias := filepath.Join(t.TempDir(), "alias")
			os.Symlink(ws, alias)
			return filepath.Join(alias, "out", filepath.Base(victim))
		}, "symbolic link inside the workspace"},
	}
	// Each case twice: with the workspace's absolute path, and as "."
	// from inside it, as art run without -m gives it (then no link in
	// it was checked: the log went through an agent's link).
	for _, c := range cases {
		for _, asDot := range []bool{false, true} {
			name := c.name
			if asDot {
				name += ", the workspace given as ."
			}
			t.Run(name, func(t *testing.T) {
				ws := t.TempDir()
				victim := filepath.Join(t.TempDir(), "victim.conf")
				os.WriteFile(victim, []byte("precious\n"), 0o600)
				p := c.setup(t, ws, victim)
				wsArg := ws
				if asDot {
					t.Chdir(ws)
					wsArg = "."
				}
				f, err := createLog(p, wsArg)
				if c.want == "" {
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					if st, _ := f.Stat(); st.Size() != 0 {
						t.Errorf("log not truncated: %d bytes", st.Size())
					}
				} else if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v, want %q", err, c.want)
				}
				if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
					t.Fatalf("the victim was changed: %q", b)
				}
			})
		}
	}
}

// The trace summary quotes the agent's names: no line forged, no escape
// sequence reaching the terminal.
func TestTraceSummaryQuotesNames(t *testing.T) {
	evil := "x\nFILE fake\x1b]0;T\x07"
	var out strings.Builder
	g := &globals{stdout: &out}
	printTraceSummary(g, tracer.Summary{
		Read: []string{evil}, Written: []string{evil}, Created: []string{evil}, Deleted: []string{evil},
		Renamed: []tracer.Rename{{From: evil, To: evil}},
		Execs:   []tracer.Exec{{Path: evil, Argv: []string{evil}}},
	})
	s := out.String()
	if strings.ContainsAny(s, "\x1b\x07") || strings.Contains(s, "\nFILE fake") {
		t.Fatalf("raw control characters in the summary:\n%q", s)
	}
	if !strings.Contains(s, `"x\nFILE fake\033]0;T\007"`) {
		t.Errorf("names not quoted:\n%s", s)
	}
}

// The host workspace is hidden unless the user's binds show it whole or
// put something at its path.
func TestHideWorkspace(t *testing.T) {
	ws := t.TempDir()
	parent := filepath.Dir(ws)
	for _, c := range []struct {
		name  string
		binds []sandbox.Bind
		want  bool
	}{
		{"no binds", nil, true},
		{"a part of it", []sandbox.Bind{{Host: filepath.Join(ws, "data"), Guest: "/data"}}, true},
		{"itself", []sandbox.Bind{{Host: ws, Guest: "/tmp/ws"}}, false},
		{"a parent", []sandbox.Bind{{Host: parent, Guest: "/tmp/p"}}, false},
		{"at its path", []sandbox.Bind{{Host: "/usr", Guest: filepath.Join(ws, "build")}}, false},
	} {
		if got := hideWorkspace(ws, "/tmp/art-home-x", c.binds); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if hideWorkspace(parent, filepath.Join(parent, "art-home-x"), nil) {
		t.Error("a workspace holding the home's mount point is hidden")
	}
}

// TMPDIR, where every session's home is mounted, is hidden unless it is
// the root or the user's binds show it whole or put something at its path.
func TestHideTempDir(t *testing.T) {
	tmp := t.TempDir()
	for _, c := range []struct {
		name  string
		dir   string
		binds []sandbox.Bind
		want  bool
	}{
		{"no binds", tmp, nil, true},
		{"the root", "/", nil, false},
		{"missing", filepath.Join(tmp, "nothing"), nil, false},
		{"a bind from inside it", tmp, []sandbox.Bind{{Host: filepath.Join(tmp, "data"), Guest: "/data"}}, true},
		{"itself bound", tmp, []sandbox.Bind{{Host: tmp, Guest: "/mnt/t"}}, false},
		{"a parent bound", tmp, []sandbox.Bind{{Host: filepath.Dir(tmp), Guest: "/mnt/p"}}, false},
		{"a bind at its path", tmp, []sandbox.Bind{{Host: "/usr", Guest: filepath.Join(tmp, "usr")}}, false},
	} {
		if got := hideTempDir(c.dir, c.binds); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// Nor through a link inside a read-write bind's host directory, which the
// agent writes as it does the workspace: its link there, named like the
// user's --trace-log, had the next art run as root truncate and overwrite
// the root-only file it pointed at.
func TestCreateLogRefusesLinksInWritableBinds(t *testing.T) {
	for _, c := range []struct {
		name     string
		setup    func(t *testing.T, shared, victim string) string // returns the log path
		readOnly bool                                             // the bind is read-only
		want     string
	}{
		{"link to a victim in the bind", func(t *testing.T, shared, victim string) string {
			p := filepath.Join(shared, "t.log")
			os.Symlink(victim, p)
			return p
		}, false, "which the sandbox may write"},
		{"linked directory in the bind", func(t *testing.T, shared, victim string) string {
			os.Symlink(filepath.Dir(victim), filepath.Join(shared, "logs"))
			return filepath.Join(shared, "logs", filepath.Base(victim))
		}, false, "which the sandbox may write"},
		{"the bind given through the user's link", func(t *testing.T, shared, victim string) string {
			os.Symlink(victim, filepath.Join(shared, "t.log"))
			alias := filepath.Join(t.TempDir(), "alias")
			os.Symlink(shared, alias)
			return filepath.Join(alias, "t.log")
		}, false, "which the sandbox may write"},
		{"a plain file in the bind", func(t *testing.T, shared, _ string) string {
			return filepath.Join(shared, "t.log")
		}, false, ""},
		{"a link in a read-only bind is the user's", func(t *testing.T, shared, _ string) string {
			p := filepath.Join(shared, "t.log")
			os.Symlink(filepath.Join(t.TempDir(), "real.log"), p)
			return p
		}, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, shared := t.TempDir(), t.TempDir()
			victim := filepath.Join(t.TempDir(), "victim.conf")
			os.WriteFile(victim, []byte("precious\n"), 0o600)
			p := c.setup(t, shared, victim)
			var writable []string
			if !c.readOnly {
				writable = []string{shared}
			}
			f, err := createLog(p, ws, writable...)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
			} else if err == nil || !strings.Contains(err.Error(), c.want) {
				if f != nil {
					f.Close()
				}
				t.Fatalf("error %v, want %q", err, c.want)
			}
			if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
				t.Fatalf("the victim was changed: %q", b)
			}
		})
	}
}

// A directory on the log's path that an agent running meanwhile (a
// session before, in the same read-write bind) swaps for a link between
// art's check of the path and its open is not followed: root truncated
// the file the link led to.
func TestCreateLogRefusesLinkSwappedIn(t *testing.T) {
	for _, swap := range []bool{false, true} {
		ws, shared := t.TempDir(), t.TempDir()
		victim := filepath.Join(t.TempDir(), "victim.conf")
		os.WriteFile(victim, []byte("precious\n"), 0o600)
		logs := filepath.Join(shared, "logs")
		if err := os.Mkdir(logs, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(logs, filepath.Base(victim))
		os.WriteFile(p, []byte("the log before\n"), 0o644)
		real, err := sandbox.ResolveAvoidingAgentLinks(p, ws, []string{shared}, true)
		if err != nil {
			t.Fatal(err)
		}
		if swap { // between the check and the open
			os.Rename(logs, logs+".old")
			os.Symlink(filepath.Dir(victim), logs)
		}
		f, _, err := openResolvedLog(p, real)
		if f != nil {
			truncateLog(f, p) // as createLog does
			f.Close()
		}
		if swap && (err == nil || !strings.Contains(err.Error(), "became a symbolic link")) {
			t.Errorf("swapped: error %v", err)
		}
		if !swap && err != nil {
			t.Errorf("not swapped: %v", err)
		}
		if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
			t.Errorf("swap %v: the victim was changed: %q", swap, b)
		}
	}
}

// A log art created for a run refused before its sandbox started is
// removed, but not through a directory swapped for a link meanwhile: art
// removed the file of that name wherever the link led.
func TestRemoveCreatedLog(t *testing.T) {
	for _, swap := range []bool{false, true} {
		shared, elsewhere := t.TempDir(), t.TempDir()
		logs := filepath.Join(shared, "logs")
		os.Mkdir(logs, 0o755)
		p := filepath.Join(logs, "trace.log")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		victim := filepath.Join(elsewhere, "trace.log")
		os.WriteFile(victim, []byte("precious\n"), 0o600)
		if swap {
			os.Rename(logs, logs+".old")
			os.Symlink(elsewhere, logs)
		}
		removeCreatedLog(f)
		f.Close()
		if b, err := os.ReadFile(victim); err != nil || string(b) != "precious\n" {
			t.Errorf("swap %v: the file elsewhere: %q, %v", swap, b, err)
		}
		if _, err := os.Lstat(p); !swap && err == nil {
			t.Error("the created log is still there")
		}
	}
}
