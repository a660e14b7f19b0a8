package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

// rules builds rules from "PATTERN=PERM" strings, with the given source.
func rules(t testing.TB, source string, specs ...string) []Rule {
	t.Helper()
	var out []Rule
	for _, s := range specs {
		r, err := ParseAllow(s)
		if err != nil {
			t.Fatal(err)
		}
		r.Source = source
		out = append(out, r)
	}
	return out
}

func mustNew(t testing.TB, def Perm, sources ...[]Rule) *Policy {
	t.Helper()
	p, err := New(def, sources...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type check struct {
	path  string
	isDir bool
	want  Perm
}

func runChecks(t *testing.T, p *Policy, checks []check) {
	t.Helper()
	for _, c := range checks {
		if got := p.Decide(c.path, c.isDir); got != c.want {
			t.Errorf("Decide(%q, dir=%v) = %s, want %s\n  %s", c.path, c.isDir, got, c.want, p.Explain(c.path, c.isDir))
		}
	}
}

func TestPrecedence(t *testing.T) {
	tests := []struct {
		name   string
		def    Perm
		rules  []string
		checks []check
	}{
		{
			name:  "longer literal prefix overrides a directory rule",
			def:   Write,
			rules: []string{"secrets/=none", "secrets/README=read"},
			checks: []check{
				{"secrets/README", false, Read},
				{"ws/secrets/README", false, Read},
				{"secrets/db.txt", false, None},
				{"secrets", true, View}, // raised: README inside is visible
				{"secrets/sub", true, None},
				{"ws/x", false, Write},
			},
		},
		{
			name:  "no star beats star",
			def:   Write,
			rules: []string{".git/config=read", ".git/**=none"},
			checks: []check{
				{".git/config", false, Read},
				{"ws/.git/config", false, Read},
				{"ws/.git/HEAD", false, None},
				{"ws/.git", true, Write}, // ".git/**" is strictly inside
			},
		},
		{
			name:  "fewer wildcards",
			def:   Write,
			rules: []string{"*.txt=read", "*.t?t=none"},
			checks: []check{
				{"a.txt", false, Read},
				{"a.tyt", false, None},
			},
		},
		{
			name:  "? without * beats *",
			def:   Write,
			rules: []string{"*.pem=none", "key?.pem=read"},
			checks: []check{
				{"key1.pem", false, Read},
				{"other.pem", false, None},
			},
		},
		{
			name:  "equal specificity: later rule wins",
			def:   Write,
			rules: []string{"*.log=none", "*.txt=read", "*.log=view"},
			checks: []check{
				{"a.log", false, View},
				{"a.txt", false, Read},
			},
		},
		{
			name:  "equal specificity the other way round",
			def:   Write,
			rules: []string{"*.log=view", "*.log=none"},
			checks: []check{
				{"a.log", false, None},
			},
		},
		{
			name:  "later rule wins among different patterns of equal specificity",
			def:   Write,
			rules: []string{"[ab]x=none", "[a]x=read"},
			checks: []check{
				{"ax", false, Read},
				{"bx", false, None},
			},
		},
		{
			name:  "anchored counts its slash",
			def:   Write,
			rules: []string{"/secrets=read", "secrets=none"},
			checks: []check{
				{"secrets/x", false, Read},
				{"ws/secrets/x", false, None},
			},
		},
		{
			name:  "a deeper rule overrides a shallower one",
			def:   None,
			rules: []string{"/ws/=read", "/ws/src/=write", "/ws/src/gen/=view"},
			checks: []check{
				{"", true, View},
				{"ws", true, Read},
				{"ws/README", false, Read},
				{"ws/src/a.go", false, Write},
				{"ws/src/gen/x.go", false, View},
				{".bashrc", false, None},
				{"tmp", true, None},
			},
		},
		{
			name:  "default applies when nothing matches",
			def:   View,
			rules: []string{"*.go=write"},
			checks: []check{
				{"a.go", false, Write},
				{"a.c", false, View},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runChecks(t, mustNew(t, tt.def, rules(t, "test", tt.rules...)), tt.checks)
		})
	}
}

func TestPrecedenceCatchAllPrefix(t *testing.T) {
	// "ws/**" has a longer literal prefix than "**": it wins whatever the order.
	p := mustNew(t, None, rules(t, "t", "**=read", "/ws/**=write"))
	runChecks(t, p, []check{{"ws/a", false, Write}, {"x", false, Read}})
	p = mustNew(t, None, rules(t, "t", "/ws/**=write", "**=read"))
	runChecks(t, p, []check{{"ws/a", false, Write}, {"x", false, Read}})
}

func TestSourcesOrder(t *testing.T) {
	file := rules(t, "policy.json", "*.log=none", "/ws/build/=read", "cache/=none")
	preset := rules(t, "preset x", "*.log=read")
	allow := rules(t, "--allow", "/ws/build/=write", "*.tmp=none")
	p := mustNew(t, Write, file, preset, allow)
	runChecks(t, p, []check{
		{"a.log", false, Read},            // preset beats file on equal specificity
		{"ws/build/out", false, Write},    // --allow beats file
		{"ws/build/x.log", false, Write},  // "/ws/build/" has no '*': beats "*.log"
		{"ws/cache/x", false, None},       // untouched file rule
		{"ws/a.tmp", false, None},         // --allow restricting is fine too
		{"ws/cache/x.log", false, None},   // "cache/" no star beats "*.log"
		{"ws/build/a.tmp", false, Write},  // no star beats star, whatever the source
		{"ws/other/main.c", false, Write}, // default
	})
	// The same rules in the opposite source order.
	p = mustNew(t, Write, allow, preset, file)
	runChecks(t, p, []check{
		{"a.log", false, None},
		{"ws/build/out", false, Read},
	})
	// Sources are plain concatenation: one list gives the same result.
	one := append(append(append([]Rule{}, file...), preset...), allow...)
	if a, b := mustNew(t, Write, one).String(), mustNew(t, Write, file, preset, allow).String(); a != b {
		t.Errorf("concatenated sources differ:\n%s\n%s", a, b)
	}
}

func TestHiddenDirectories(t *testing.T) {
	t.Run("rule-hidden dir raised only by rules naming a path inside", func(t *testing.T) {
		p := mustNew(t, Write, rules(t, "t",
			"secrets/=none", "secrets/README=read", "secrets/sub/a.md=view",
			".ssh/=none", "node_modules/=write"))
		runChecks(t, p, []check{
			{"ws/secrets", true, View},
			{"ws/secrets/README", false, Read},
			{"ws/secrets/key", false, None},
			{"ws/secrets/sub", true, View}, // "secrets/sub/a.md" names a path inside it
			{"ws/secrets/sub/a.md", false, View},
			{"ws/secrets/sub/a.txt", false, None},
			{"ws/secrets/other", true, None},
			{"ws/secrets/sub/deeper", true, None},
			{".ssh", true, None}, // "node_modules/" only matches inside through its any-depth prefix
			{".ssh/node_modules", true, Write},
			{"ws/.ssh", true, None},
			{"ws/secrets", false, Write}, // a file named secrets: "secrets/" does not match it
		})
		if e := p.Explain(".ssh/node_modules", true); !strings.Contains(e, `unreachable: directory ".ssh" is none`) {
			t.Errorf("Explain does not report unreachability: %s", e)
		}
	})
	t.Run("explicit ** reaches into nested directories", func(t *testing.T) {
		p := mustNew(t, Write, rules(t, "t", "*secret*/=none", "secrets/**/README=read"))
		runChecks(t, p, []check{
			{"ws/secrets", true, View},
			{"ws/secrets/a/b", true, View},
			{"ws/secrets/a/b/README", false, Read},
			{"ws/secrets/a/b/key", false, None},
			{"ws/mysecret", true, None},
			{"ws/mysecret/other", true, None},
			{"ws/mysecret/secrets", true, View}, // names a path inside, but ws/mysecret is none
		})
	})
	t.Run("default-hidden dir raised by any rule below", func(t *testing.T) {
		p := mustNew(t, None, rules(t, "t", "/ws/src/=write", "*.md=read"))
		runChecks(t, p, []check{
			{"", true, View},
			{"ws", true, View},
			{"ws/src", true, Write},
			{"ws/src/x/y.go", false, Write},
			{"ws/other", true, View}, // may contain *.md
			{"ws/other/a.md", false, Read},
			{"ws/other/a.go", false, None},
			{"ws/file", false, None},
		})
		p = mustNew(t, None, rules(t, "t", "/ws/src/=write"))
		runChecks(t, p, []check{
			{"ws", true, View},
			{"other", true, None},
			{"ws/other", true, None},
			{"ws/src", true, Write},
		})
	})
	t.Run("nothing visible below", func(t *testing.T) {
		p := mustNew(t, Write, rules(t, "t", "secrets/=none", "*.md=read"))
		runChecks(t, p, []check{
			{"secrets", true, None}, // "*.md" does not beat "secrets/"
			{"secrets/a.md", false, None},
		})
		p = mustNew(t, None)
		runChecks(t, p, []check{{"", true, View}, {"a", true, None}, {"a/b", false, None}})
	})
}

func TestPresets(t *testing.T) {
	paths := []check{
		{"ws/main.go", false, 0},                    // 0
		{"ws/.env", false, 0},                       // 1
		{".env", false, 0},                          // 2
		{"ws/.ENV", false, 0},                       // 3
		{"ws/.env.local", false, 0},                 // 4
		{"ws/certs/server.pem", false, 0},           // 5
		{"ws/tls/server.KEY", false, 0},             // 6
		{".ssh", true, 0},                           // 7
		{".ssh/id_rsa", false, 0},                   // 8
		{".ssh/known_hosts", false, 0},              // 9
		{"ws/deploy/id_ed25519.pub", false, 0},      // 10
		{".aws/credentials", false, 0},              // 11
		{".netrc", false, 0},                        // 12
		{"ws/credentials.json", false, 0},           // 13
		{"secrets/db.txt", false, 0},                // 14
		{"ws/a/b/Secrets/x", false, 0},              // 15
		{"ws/.git/hooks/pre-commit", false, 0},      // 16
		{"ws/.git/config", false, 0},                // 17
		{"ws/.git/HEAD", false, 0},                  // 18
		{"ws/.gitmodules", false, 0},                // 19
		{"ws/.envrc", false, 0},                     // 20
		{"ws/.vscode/tasks.json", false, 0},         // 21
		{"ws/.idea/workspace.xml", false, 0},        // 22
		{".bashrc", false, 0},                       // 23
		{".zshrc", false, 0},                        // 24
		{".bash_aliases", false, 0},                 // 25
		{"ws/.mcp.json", false, 0},                  // 26
		{"ws/.GIT/HOOKS/post-checkout", false, 0},   // 27
		{"ws/.git/modules/lib/hooks/x", false, 0},   // 28
		{"ws/src/environment.go", false, 0},         // 29
		{"ws/.git", true, 0},                        // 30
		{"ws/.git/hooks", true, 0},                  // 31
		{".config/fish/config.fish", false, 0},      // 32
		{"ws/keys.txt", false, 0},                   // 33
		{"ws/.git/commondir", false, 0},             // 34
		{"ws/.git/config.worktree", false, 0},       // 35
		{"ws/.git/modules/a/b/commondir", false, 0}, // 36
	}
	N, V, R, W := None, View, Read, Write
	_ = V
	want := map[string][]Perm{
		//               0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36
		"full-access": {W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W},
		"development": {W, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W, W},
		"agent-safe":  {W, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, R, R, W, R, R, R, R, R, R, R, R, R, R, W, W, R, R, W, R, R, R},
		"read-only":   {R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R, R},
	}
	for _, name := range PresetNames() {
		t.Run(name, func(t *testing.T) {
			def, rs, err := Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			d := Write
			if def != nil {
				d = *def
			}
			p := mustNew(t, d, rs)
			checks := make([]check, len(paths))
			for i, c := range paths {
				checks[i] = check{c.path, c.isDir, want[name][i]}
			}
			runChecks(t, p, checks)
			for _, r := range rs {
				if !r.IgnoreCase || r.Source != "preset "+name {
					t.Errorf("rule %+v: want IgnoreCase and source %q", r, "preset "+name)
				}
			}
			if got := p.IsFullAccess(); got != (name == "full-access") {
				t.Errorf("IsFullAccess = %v", got)
			}
		})
	}
}

func TestPresetOverride(t *testing.T) {
	_, rs, err := Preset("agent-safe")
	if err != nil {
		t.Fatal(err)
	}
	p := mustNew(t, Write, rs, rules(t, "--allow", ".env=read", "/ws/**=write", ".git/hooks/=write"))
	runChecks(t, p, []check{
		{"ws/.env", false, Read},                 // equally specific, later source
		{"ws/.ENV", false, None},                 // the --allow rule is case-sensitive
		{"ws/.git/hooks/pre-push", false, Write}, // equally specific, later source
		{"ws/.git/config", false, Read},          // no '*' beats "/ws/**"
		{"ws/.bashrc", false, Read},
		{"ws/id_rsa", false, None}, // "id_rsa*": longer literal prefix than "/ws/**"
		// "/ws/**" and "*.pem" both have one '*': the longer literal prefix wins.
		{"ws/key.pem", false, Write},
		{"key.pem", false, None},
	})
	// The documented idiom for a grant that yields to every preset rule.
	p = mustNew(t, Read, rs, rules(t, "--allow", "/ws/**/*=write"))
	runChecks(t, p, []check{
		{"ws/key.pem", false, None},
		{"ws/.env", false, None},
		{"ws/.git/config", false, Read},
		{"ws/src/main.go", false, Write},
		{"ws/src", true, Write},
		{"ws", true, Read},
	})
}

func TestCaseRule(t *testing.T) {
	user := mustNew(t, Write, rules(t, "t", ".env=none", "Secrets/=none"))
	runChecks(t, user, []check{
		{".env", false, None},
		{".ENV", false, Write},
		{"Secrets/x", false, None},
		{"secrets/x", false, Write},
	})
	icase := mustNew(t, Write, []Rule{{Pattern: ".env", Perm: None, IgnoreCase: true}, {Pattern: "Secrets/", Perm: None, IgnoreCase: true}})
	runChecks(t, icase, []check{
		{".ENV", false, None},
		{".Env", false, None},
		{"SECRETS/x", false, None},
		{"ws/secrets/x", false, None},
		{"ws/secretsx", false, Write},
	})
	_, dev, _ := Preset("development")
	runChecks(t, mustNew(t, Write, dev), []check{
		{".ENV", false, None},
		{"ws/.Env.Production", false, None},
		{"ws/Secrets/a", false, None},
		{"ws/SECRETS", true, None},
		{".SSH/config", false, None},
		{"ID_RSA", false, None},
		{"Credentials.JSON", false, None},
		{"ws/.NetRC", false, None},
		{"ws/Cert.PEM", false, None},
	})
}

func TestMayRestrictBelow(t *testing.T) {
	_, dev, _ := Preset("development")
	tests := []struct {
		name string
		p    *Policy
		dir  string
		want bool
	}{
		{"full access", mustNew(t, Write), "ws", false},
		{"full access with write rules", mustNew(t, Write, rules(t, "t", "*.go=write")), "", false},
		{"default read", mustNew(t, Read), "ws", true},
		{"unanchored secret may be anywhere", mustNew(t, Write, dev), "ws/build", true},
		{"anchored elsewhere", mustNew(t, Write, rules(t, "t", "/ws/secrets/=none")), "ws/build", false},
		{"anchored below", mustNew(t, Write, rules(t, "t", "/ws/secrets/=none")), "ws", true},
		{"anchored below root", mustNew(t, Write, rules(t, "t", "/ws/secrets/=none")), "", true},
		{"the dir itself restricted", mustNew(t, Write, rules(t, "t", "/ws/secrets/=none")), "ws/secrets", true},
		{"inside a restricted dir", mustNew(t, Write, rules(t, "t", "/ws/secrets/=none")), "ws/secrets/a", true},
		{"trailing ** below", mustNew(t, Write, rules(t, "t", "/ws/gen/**=read")), "ws/gen", true},
		{"sibling", mustNew(t, Write, rules(t, "t", "/ws/gen/**=read")), "ws/src", false},
		{"write dir overrides default", mustNew(t, Read, rules(t, "t", "/ws/tmp/=write")), "ws/tmp", false},
		{"write dir with a restriction inside", mustNew(t, Read, rules(t, "t", "/ws/tmp/=write", "/ws/tmp/keep=read")), "ws/tmp", true},
		{"restriction less specific than the write dir", mustNew(t, Read, rules(t, "t", "/ws/tmp/=write", "*.lock=read")), "ws/tmp", false},
		{"middle **", mustNew(t, Write, rules(t, "t", "/a/**/b=none")), "a/x/y", true},
		{"middle ** elsewhere", mustNew(t, Write, rules(t, "t", "/a/**/b=none")), "c/x", false},
		{"file pattern at the dir itself", mustNew(t, Write, rules(t, "t", "/ws/a=none")), "ws", true},
		{"dotdot", mustNew(t, Write, rules(t, "t", "/x=none")), "ws/..", true},
	}
	for _, tt := range tests {
		if got := tt.p.MayRestrictBelow(tt.dir); got != tt.want {
			t.Errorf("%s: MayRestrictBelow(%q) = %v, want %v", tt.name, tt.dir, got, tt.want)
		}
	}
}

func TestExplain(t *testing.T) {
	p := mustNew(t, Write,
		rules(t, "policy.json", "secrets/=none", "secrets/README=read"),
		rules(t, "--allow", "/ws/**=write", "*.log=view", "*.log=read"))
	tests := []struct {
		path  string
		isDir bool
		want  []string
	}{
		{"ws/main.go", false, []string{`ws/main.go: write: rule "/ws/**"=write (--allow) matches "ws/main.go"`}},
		{"etc/x", false, []string{"etc/x: write: no rule matches, so the default (write) applies"}},
		{"ws/secrets/db/x", false, []string{
			`ws/secrets/db/x: none: rule "secrets/"=none (policy.json) matches directory "ws/secrets" and everything below it`,
			`it overrides "/ws/**"=write (--allow) (it has no '*')`}},
		{"ws/secrets/README", false, []string{
			`read: rule "secrets/README"=read (policy.json)`,
			`"secrets/"=none (policy.json) (it has a longer literal prefix (14 > 8 characters))`}},
		{"ws/secrets", true, []string{`ws/secrets: view: rule "secrets/"=none`, `raised from none to view`, `rule "secrets/README"=read (policy.json) may match below it`}},
		{"a.log", false, []string{`a.log: read: rule "*.log"=read (--allow)`, `overrides "*.log"=view (--allow) (equally specific, listed later)`}},
		{"ws/a.log", false, []string{`it overrides "*.log"=read (--allow) (it has a longer literal prefix (4 > 0 characters)); "*.log"=view`}},
		{"ws/a/b/x.go", false, []string{`"/ws/**"=write (--allow) matches directory "ws/a" and everything below it`}},
		{"ws/../x", false, []string{`"ws/../x": none: the path has a ".." component`}},
		{"", true, []string{"(home): write"}},
	}
	for _, tt := range tests {
		got := p.Explain(tt.path, tt.isDir)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("Explain(%q):\n  %s\nwant it to contain\n  %s", tt.path, got, w)
			}
		}
	}
	// Equal specificity from different sources.
	q := mustNew(t, Write, rules(t, "preset development", ".env=none"), rules(t, "--allow", ".env=read"))
	if got := q.Explain("ws/.env", false); !strings.Contains(got, "equally specific, from a later source") {
		t.Errorf("Explain: %s", got)
	}
	r := mustNew(t, None)
	if got := r.Explain("", true); !strings.Contains(got, "the home itself is never hidden") {
		t.Errorf("Explain root: %s", got)
	}
	ic := mustNew(t, Write, []Rule{{Pattern: ".env", Perm: None, IgnoreCase: true, Source: "preset development"}})
	if got := ic.Explain("ws/.ENV", false); !strings.Contains(got, `".env"=none (preset development, ignoring case)`) {
		t.Errorf("Explain ignore case: %s", got)
	}
}

func TestIsFullAccess(t *testing.T) {
	tests := []struct {
		p    *Policy
		want bool
	}{
		{mustNew(t, Write), true},
		{mustNew(t, Write, rules(t, "t", "a=write")), true},
		{mustNew(t, Read), false},
		{mustNew(t, Write, rules(t, "t", "a=view")), false},
		{mustNew(t, Write, nil, rules(t, "t", "a=write", "b=none")), false},
	}
	for i, tt := range tests {
		if got := tt.p.IsFullAccess(); got != tt.want {
			t.Errorf("%d: IsFullAccess = %v, want %v", i, got, tt.want)
		}
	}
	if got := mustNew(t, Write).Decide("ws/../x", false); got != Write {
		t.Errorf("full access: %s", got)
	}
}

func TestDecidePaths(t *testing.T) {
	p := mustNew(t, Write, rules(t, "t", "/secrets/=none"))
	runChecks(t, p, []check{
		{"secrets/x", false, None},
		{"/secrets/x", false, None},
		{"./secrets//x/", false, None},
		{"ws/../secrets/x", false, None}, // ".." is never resolved: none
		{"..", true, None},
		{"", true, Write},
		{"ws/x", false, Write},
		{strings.Repeat("d/", 40) + "secrets/x", false, Write}, // deeper than the stack buffer
		{"secrets/" + strings.Repeat("d/", 40) + "x", false, None},
	})
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		def   Perm
		rules []Rule
		want  string
	}{
		{Perm(9), nil, "invalid default permission 9; valid permissions: none, view, read, write"},
		{Write, []Rule{{Pattern: "a", Perm: Perm(4), Source: "policy.json"}}, `policy.json: rule "a": invalid permission 4`},
		{Write, []Rule{{Pattern: "[a", Perm: None, Source: "--allow"}}, `--allow: invalid pattern "[a": unclosed '['`},
		{Write, []Rule{{Pattern: "", Perm: None}}, `invalid pattern "": empty pattern`},
	}
	for _, tt := range tests {
		_, err := New(tt.def, tt.rules)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New: error %v, want %q", err, tt.want)
		}
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	_, safe, _ := Preset("agent-safe")
	p := mustNew(t, Read, rules(t, "policy.json", "a<b>&=write"), safe, rules(t, "--allow", "/ws/**=write"))
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != p.String() {
		t.Errorf("json.Marshal and String differ:\n%s\n%s", b, p)
	}
	if !strings.HasPrefix(p.String(), `{"default":"read","rules":[{"pattern":"a\u003cb\u003e\u0026","permission":"write","source":"policy.json"},{"pattern":".env","permission":"none","ignore_case":true,"source":"preset agent-safe"}`) {
		t.Errorf("unexpected canonical form: %s", p)
	}
	def, rs, err := ParseFile(b, "recorded")
	if err != nil {
		t.Fatal(err)
	}
	q := mustNew(t, *def, rs)
	if q.String() != p.String() {
		t.Errorf("round trip differs:\n%s\n%s", p, q)
	}
	if got := mustNew(t, Write).String(); got != `{"default":"write","rules":[]}` {
		t.Errorf("empty policy: %s", got)
	}
	if d, r := q.Default(), q.Rules(); d != Read || len(r) != len(p.rules) {
		t.Errorf("Default/Rules: %s %d", d, len(r))
	}
}

func TestPerm(t *testing.T) {
	for _, p := range []Perm{None, View, Read, Write} {
		q, err := ParsePerm(p.String())
		if err != nil || q != p {
			t.Errorf("ParsePerm(%q) = %v, %v", p, q, err)
		}
	}
	if q, err := ParsePerm(" Write "); err != nil || q != Write {
		t.Errorf("ParsePerm(\" Write \") = %v, %v", q, err)
	}
	if !(None < View && View < Read && Read < Write) {
		t.Error("levels are not ordered")
	}
	if s := Perm(7).String(); s != "Perm(7)" {
		t.Errorf("String = %q", s)
	}
	for _, in := range []string{"rw", "hidden", "", "writ"} {
		_, err := ParsePerm(in)
		if err == nil || !strings.Contains(err.Error(), "valid permissions: none, view, read, write") {
			t.Errorf("ParsePerm(%q): %v", in, err)
		}
	}
	if _, err := Perm(5).MarshalText(); err == nil {
		t.Error("MarshalText of an invalid Perm succeeded")
	}
	var p Perm
	if err := p.UnmarshalText([]byte("view")); err != nil || p != View {
		t.Errorf("UnmarshalText: %v %v", p, err)
	}
	if err := p.UnmarshalText([]byte("x")); err == nil {
		t.Error("UnmarshalText(x) succeeded")
	}
}

func TestDecideAllocs(t *testing.T) {
	p := benchPolicy(t)
	n := testing.AllocsPerRun(100, func() {
		p.Decide("ws/src/internal/server/handler.go", false)
		p.Decide("ws/secrets", true)
		p.Decide(".ssh/id_rsa", false)
	})
	if n != 0 {
		t.Errorf("Decide allocates %v times", n)
	}
}
