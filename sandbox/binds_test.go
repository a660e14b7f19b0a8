package sandbox

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func TestLoadBindsMissingFile(t *testing.T) {
	b, err := LoadBinds(filepath.Join(t.TempDir(), "binds.json"), "/")
	if err != nil || b != nil {
		t.Errorf("missing file: %v, %v", b, err)
	}
}

func TestLoadBinds(t *testing.T) {
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, "data"), 0o755)
	abs := t.TempDir()
	file := filepath.Join(t.TempDir(), "binds.json")
	os.WriteFile(file, []byte(`[
		{"host": "data", "guest": "/data"},
		{"host": "`+abs+`", "guest": "/mnt/rw/", "readonly": false},
		{"host": "./data/", "guest": "/ro", "readonly": true}
	]`), 0o644)
	got, err := LoadBinds(file, ws)
	if err != nil {
		t.Fatal(err)
	}
	want := []Bind{
		{Host: filepath.Join(ws, "data"), Guest: "/data", ReadOnly: true},
		{Host: abs, Guest: "/mnt/rw", ReadOnly: false},
		{Host: filepath.Join(ws, "data"), Guest: "/ro", ReadOnly: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	for _, empty := range []string{"[]", " [ ]\n"} {
		if b, err := ParseBinds([]byte(empty), ws); err != nil || len(b) != 0 {
			t.Errorf("%q: %v %v", empty, b, err)
		}
	}
}

func TestLoadBindsErrors(t *testing.T) {
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, "data"), 0o755)
	tests := []struct {
		name, json string
		want       []string // all must appear in the error
	}{
		{"bad JSON", `[{"host": "data", "guest": "/data",}]`, []string{"not a valid binds file", "line 1", "JSON array"}},
		{"bad JSON line", "[\n  {\"host\": \"data\"\n  \"guest\": \"/x\"}\n]", []string{"line 3"}},
		{"empty file", ``, []string{"empty"}},
		{"not an array", `{"host": "data", "guest": "/data"}`, []string{"JSON array"}},
		{"trailing data", `[] []`, []string{"after the JSON value"}},
		{"entry not an object", `["data"]`, []string{"entry 0", `"data"`}},
		{"unknown field", `[{"host": "data", "guest": "/data", "mode": "rw"}]`, []string{"entry 0", `unknown field "mode"`}},
		{"readonly not bool", `[{"host": "data", "guest": "/data", "readonly": "no"}]`, []string{"entry 0"}},
		{"missing host path", `[{"host": "data", "guest": "/data"}, {"host": "nope", "guest": "/nope"}]`, []string{"entry 1", `"host":"nope"`, "does not exist", filepath.Join(ws, "nope"), "create it"}},
		{"no host", `[{"guest": "/data"}]`, []string{"entry 0", `"host" is missing`}},
		{"no guest", `[{"host": "data"}]`, []string{"entry 0", `"guest" is missing`}},
		{"relative guest", `[{"host": "data", "guest": "data"}]`, []string{"entry 0", "relative", `"/data"`}},
		{"guest is home", `[{"host": "data", "guest": "/home/agent"}]`, []string{"entry 0", "cover the agent home"}},
		{"guest is home, unclean", `[{"host": "data", "guest": "/home/x/../agent/"}]`, []string{"cover the agent home"}},
		{"guest is root", `[{"host": "data", "guest": "/"}]`, []string{"entry 0", "cover the agent home"}},
		{"guest is /home", `[{"host": "data", "guest": "/home"}]`, []string{"cover the agent home"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "binds.json")
			os.WriteFile(file, []byte(tc.json), 0o644)
			_, err := LoadBinds(file, ws)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, w := range append(tc.want, file) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestBindsInSandbox(t *testing.T) {
	requireBwrap(t)
	ws := t.TempDir()
	chownAgent(t, filepath.Dir(ws))
	ro := filepath.Join(ws, "ro")
	rw := filepath.Join(ws, "rw")
	os.Mkdir(ro, 0o755)
	os.Mkdir(rw, 0o755)
	os.WriteFile(filepath.Join(ro, "in.txt"), []byte("readable"), 0o644)
	chownAgent(t, ws)
	file := filepath.Join(t.TempDir(), "binds.json")
	os.WriteFile(file, []byte(`[{"host": "ro", "guest": "/tmp/ro"}, {"host": "rw", "guest": "/tmp/rw", "readonly": false}]`), 0o644)
	binds, err := LoadBinds(file, ws)
	if err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(t, "sh", "-c", "cat /tmp/ro/in.txt; echo; touch /tmp/ro/x && echo RO-WRITABLE; echo written > /tmp/rw/out.txt")
	cfg.Binds = binds
	o := run(t, cfg, "")
	if o.Err != nil || o.ExitCode != 0 {
		t.Fatalf("%+v %q %v", o.Result, o.Stderr, o.Err)
	}
	if o.Stdout != "readable\n" || !strings.Contains(o.Stderr, "Read-only file system") {
		t.Errorf("stdout %q stderr %q", o.Stdout, o.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "out.txt")); err != nil || string(b) != "written\n" {
		t.Errorf("rw bind: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ro, "x")); err == nil {
		t.Error("wrote through a read-only bind")
	}

	// An existing directory of the host root works as a mount point; a
	// missing one is refused with advice.
	cfg.Binds = []Bind{{Host: ro, Guest: "/usr/share", ReadOnly: true}}
	cfg.Argv = []string{"cat", "/usr/share/in.txt"}
	if o := run(t, cfg, ""); o.Err != nil || o.Stdout != "readable" {
		t.Errorf("bind over /usr/share: %q %q %v", o.Stdout, o.Stderr, o.Err)
	}
	cfg.Binds = []Bind{{Host: ro, Guest: "/art-no-such-dir/x", ReadOnly: true}}
	if o := run(t, cfg, ""); o.Err == nil || !strings.Contains(o.Err.Error(), "mkdir -p /art-no-such-dir/x") {
		t.Errorf("missing mount point: %v", o.Err)
	}
	cfg.Binds = []Bind{{Host: ro, Guest: "/root/x", ReadOnly: true}}
	if o := run(t, cfg, ""); o.Err == nil || !strings.Contains(o.Err.Error(), "replaces") {
		t.Errorf("bind into /root: %v", o.Err)
	}
}

// No bind goes through a symbolic link inside the workspace (an agent's
// pulled work can put one there), however its path is written, nor shows
// the workspace's .art; links outside the workspace are the user's own.
func TestBindPathsTheAgentCannotSteer(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	os.Mkdir(filepath.Join(ws, "real"), 0o755)
	os.MkdirAll(filepath.Join(ws, ".art", "config"), 0o755)
	os.Symlink(outside, filepath.Join(ws, "escape"))
	os.Symlink("real", filepath.Join(ws, "inside"))
	userLink := filepath.Join(t.TempDir(), "mine")
	os.Symlink(outside, userLink)
	// The user's link into the workspace, through the agent's link there.
	into := filepath.Join(t.TempDir(), "into")
	os.Symlink(filepath.Join(ws, "escape"), into)
	realDir, _ := filepath.EvalSymlinks(filepath.Join(ws, "real"))
	realOutside, _ := filepath.EvalSymlinks(outside)
	cases := []struct {
		host string
		want string // error text, or "=" + the bound path
	}{
		{"escape", "symbolic link inside the workspace"},
		{"inside", "symbolic link inside the workspace"},
		{filepath.Join(ws, "escape"), "symbolic link inside the workspace"},
		{"../" + filepath.Base(ws) + "/escape", "symbolic link inside the workspace"},
		{".art/config", "art's own"},
		{".art", "art's own"},
		{"real", "=" + realDir},
		{userLink, "=" + realOutside},
		{into, "symbolic link inside the workspace"},
	}
	for _, c := range cases {
		file := filepath.Join(t.TempDir(), "binds.json")
		os.WriteFile(file, []byte(`[{"host": "`+c.host+`", "guest": "/tmp/x", "readonly": false}]`), 0o644)
		binds, err := LoadBinds(file, ws)
		if strings.HasPrefix(c.want, "=") {
			if err != nil || len(binds) != 1 || binds[0].Host != c.want[1:] {
				t.Errorf("%s: %+v %v, want host %s", c.host, binds, err, c.want[1:])
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.host, err, c.want)
		}
	}
}

// Config comes only from a real .art/config directory and a regular file:
// never through a link an agent's work left, never from a fifo or device.
func TestHostConfigRefusesLinksAndSpecialFiles(t *testing.T) {
	cases := []struct {
		name  string
		setup func(ws string)
		want  string // "" means: path ok, file read
	}{
		{"real directories", func(ws string) {
			os.MkdirAll(filepath.Join(ws, ".art", "config"), 0o755)
			os.WriteFile(filepath.Join(ws, ".art", "config", "binds.json"), []byte("[]"), 0o644)
		}, ""},
		{"no .art", func(ws string) {}, ""},
		{".art is a link", func(ws string) {
			evil := filepath.Join(ws, "evil")
			os.MkdirAll(filepath.Join(evil, "config"), 0o755)
			os.Symlink("evil", filepath.Join(ws, ".art"))
		}, "is not a directory"},
		{"config is a link", func(ws string) {
			os.MkdirAll(filepath.Join(ws, ".art"), 0o755)
			os.Symlink("/tmp", filepath.Join(ws, ".art", "config"))
		}, "is not a directory"},
		{"file is a link", func(ws string) {
			os.MkdirAll(filepath.Join(ws, ".art", "config"), 0o755)
			os.Symlink("/etc/hostname", filepath.Join(ws, ".art", "config", "binds.json"))
		}, "symbolic link"},
		{"file is a fifo", func(ws string) {
			os.MkdirAll(filepath.Join(ws, ".art", "config"), 0o755)
			syscall.Mkfifo(filepath.Join(ws, ".art", "config", "binds.json"), 0o644)
		}, "not a regular file"},
		{"file too large", func(ws string) {
			os.MkdirAll(filepath.Join(ws, ".art", "config"), 0o755)
			os.WriteFile(filepath.Join(ws, ".art", "config", "binds.json"), make([]byte, maxConfigSize+1), 0o644)
		}, "larger than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			tc.setup(ws)
			p, err := ConfigPath(ws, "binds.json")
			if err == nil {
				_, err = ReadConfigFile(p)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
