package faults

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/artproject/art/policy"
	"github.com/artproject/art/sandbox"
)

// Fuzzers for what art run takes from its command line and hands on to the
// sandbox or the overlay: --env values, --allow rules (with --explain
// paths) and --memory sizes. The decoders of stored data, revisions,
// binds.json, policy files, .artignore, journal records and path names
// have their fuzzers next to their code; scripts/fuzz.sh runs them all.

// sandboxHome is a home directory with a workspace, as art run prepares.
func sandboxHome(f *testing.F) string {
	dir, err := os.MkdirTemp("", "art-fuzz-home-")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		f.Fatal(err)
	}
	return dir
}

// FuzzRunEnv: a --env value is either refused with an error, or reaches
// bwrap as exactly one --setenv KEY VALUE with the value unchanged; it can
// never add other bwrap arguments or drop the cleared environment.
func FuzzRunEnv(f *testing.F) {
	for _, s := range []string{"A=b", "PATH=/usr/bin", "HOME=/etc", "X=", "=x", "1A=b", "A", "A=b=c", "A=--bind / /", "A=\x00", "A_B9=\n--ro-bind\n", "LD_PRELOAD=/tmp/x.so", "É=1", "A=\xff\xfe"} {
		f.Add(s)
	}
	home := sandboxHome(f)
	f.Fuzz(func(t *testing.T, kv string) {
		cfg := sandbox.Config{Home: home, Workspace: "ws", Argv: []string{"true"}, Env: []string{kv}}
		args, err := sandbox.Args(cfg)
		key, val, hasEq := strings.Cut(kv, "=")
		validKey := hasEq && key != "" && !(key[0] >= '0' && key[0] <= '9')
		for _, c := range key {
			if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				validKey = false
			}
		}
		if err != nil {
			if validKey && !strings.ContainsRune(val, 0) {
				t.Fatalf("--env %q refused: %v", kv, err)
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if !validKey || strings.ContainsRune(val, 0) {
			t.Fatalf("--env %q accepted", kv)
		}
		// Exactly one --setenv for the key, carrying the value verbatim,
		// and the environment is cleared before any of them.
		found, cleared := 0, false
		for i := 0; i < len(args); i++ {
			switch args[i] {
			case "--clearenv":
				cleared = true
			case "--setenv":
				if i+2 >= len(args) {
					t.Fatalf("--setenv at the end of %q", args)
				}
				if !cleared {
					t.Fatalf("--setenv before --clearenv: %q", args)
				}
				if args[i+1] == key {
					found++
					if args[i+2] != val {
						t.Fatalf("--env %q reached bwrap as %q", kv, args[i+2])
					}
				}
				i += 2
			case "--":
				i = len(args)
			}
		}
		if found != 1 {
			t.Fatalf("--env %q: %d --setenv for %s in %q", kv, found, key, args)
		}
	})
}

// FuzzAllow: an --allow rule is refused with a message naming it, or
// builds a policy that answers every question (Decide, Explain,
// MayRestrictBelow) and records itself in a form that parses back to the
// same policy (what a session commit stores).
func FuzzAllow(f *testing.F) {
	for _, s := range [][2]string{
		{"secrets/=none", "ws/secrets/key"}, {"ws/build/**=write", "ws/build/x/y.o"}, {"*.pem=view", "k.pem"},
		{"[!a-c]?=read", "dx"}, {"=none", ""}, {"x=bogus", "x"}, {"[a=read", "a"}, {"**=none", "/"},
		{"a\\=b=write", "a=b"}, {"../**=write", "../etc/passwd"}, {"/abs/=none", "/abs/x"}, {"\xff=none", "\xff"},
	} {
		f.Add(s[0], s[1], false)
	}
	f.Fuzz(func(t *testing.T, allow, path string, isDir bool) {
		if _, err := policy.ParseAllow(allow); err != nil {
			if !strings.Contains(err.Error(), "--allow") {
				t.Fatalf("error does not name --allow: %v", err)
			}
		}
		for _, preset := range []string{"", "agent-safe"} {
			p, err := policy.Build(nil, "", preset, []string{allow})
			if err != nil {
				if _, perr := policy.ParseAllow(allow); perr == nil {
					t.Fatalf("ParseAllow accepted %q but Build refused: %v", allow, err)
				}
				continue
			}
			_ = p.Decide(path, isDir)
			_ = p.Explain(strings.Trim(path, "/"), isDir)
			_ = p.MayRestrictBelow(path)
			js, err := p.MarshalJSON()
			if err != nil {
				t.Fatalf("record %q: %v", allow, err)
			}
			def, rules, err := policy.ParseFile(js, "recorded")
			if err != nil {
				t.Fatalf("the recorded policy does not parse: %v\n%s", err, js)
			}
			d := policy.Write
			if def != nil {
				d = *def
			}
			p2, err := policy.New(d, rules)
			if err != nil {
				t.Fatalf("the recorded policy does not build: %v\n%s", err, js)
			}
			if p2.Decide(path, isDir) != p.Decide(path, isDir) {
				t.Fatalf("recorded policy decides %q differently\n%s", path, js)
			}
		}
	})
}

// FuzzMemorySize: --memory is refused, or gives a positive size that
// round-trips through its decimal form.
func FuzzMemorySize(f *testing.F) {
	for _, s := range []string{"512M", "2G", "1", "0", "-1", "1.5G", "1e9", "0x10", "9999999999T", "NaN", "Inf", " 5 K ", "5KiB", "5kb", "", "M", "1_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := sandbox.ParseSize(s)
		if err != nil {
			if !utf8.ValidString(err.Error()) && utf8.ValidString(s) {
				t.Fatalf("invalid message: %q", err)
			}
			return
		}
		if n <= 0 {
			t.Fatalf("--memory %q accepted as %d", s, n)
		}
		m, err := sandbox.ParseSize(strconv.FormatInt(n, 10))
		if err != nil || m != n {
			t.Fatalf("--memory %q = %d does not round-trip: %d, %v", s, n, m, err)
		}
	})
}
