package policy

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseFile(t *testing.T) {
	perm := func(p Perm) *Perm { return &p }
	tests := []struct {
		name  string
		in    string
		def   *Perm
		rules []Rule
	}{
		{"object", `{"default": "read", "rules": [{"pattern": "secrets/", "permission": "none"}, {"pattern": "/ws/**", "permission": "WRITE"}]}`,
			perm(Read), []Rule{{"secrets/", None, false, "policy.json"}, {"/ws/**", Write, false, "policy.json"}}},
		{"bare array", `[{"pattern": ".env", "permission": "none", "ignore_case": true}]`,
			nil, []Rule{{".env", None, true, "policy.json"}}},
		{"default only", `{"default": "view"}`, perm(View), nil},
		{"empty object", `{}`, nil, nil},
		{"empty array", ` [ ] `, nil, []Rule{}},
		{"null default and rules", `{"default": null, "rules": null}`, nil, nil},
		{"explicit source", `[{"pattern": "a", "permission": "read", "source": "preset agent-safe"}]`,
			nil, []Rule{{"a", Read, false, "preset agent-safe"}}},
		{"key order", `{"rules": [], "default": "none"}`, perm(None), []Rule{}},
		{"byte order mark", "\xef\xbb\xbf{\"default\": \"read\"}", perm(Read), nil},
	}
	for _, tt := range tests {
		def, rules, err := ParseFile([]byte(tt.in), "policy.json")
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(def, tt.def) {
			t.Errorf("%s: default %v, want %v", tt.name, def, tt.def)
		}
		if !reflect.DeepEqual(rules, tt.rules) {
			t.Errorf("%s: rules %+v, want %+v", tt.name, rules, tt.rules)
		}
	}
}

func TestParseFileErrors(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{``, []string{"policy.json: the file is empty"}},
		{" \n ", []string{"the file is empty"}},
		{`{"default": "write",}`, []string{"policy.json: line 1, column 21: invalid JSON"}},
		{"{\n  \"rules\": [\n    {\"pattern\": \"a\" \"permission\": \"read\"}\n  ]\n}", []string{"line 3, column", "invalid JSON"}},
		{`{"rules": [`, []string{"unexpected end of file"}},
		{`{"default": "rw"}`, []string{`line 1, column 13: "default": unknown permission "rw"; valid permissions: none, view, read, write`}},
		{`{"default": 3}`, []string{`line 1, column 13: "default" must be a string, one of none, view, read, write`}},
		{`{"defualt": "read"}`, []string{`line 1, column 2: unknown field "defualt"`, `"default" and "rules"`}},
		{`{"rules": {}}`, []string{`"rules" must be an array`}},
		{`{"rules": [], "rules": []}`, []string{`"rules" appears twice`}},
		{`"write"`, []string{"line 1, column 1: expected {"}},
		{`null`, []string{"expected {"}},
		{`[] []`, []string{"line 1, column 4: unexpected data after the policy"}},
		{`[1]`, []string{"rule 1: expected an object"}},
		{"[\n {\"pattern\": \"a\", \"permission\": \"read\"},\n {\"pattern\": \"b\"}\n]", []string{`line 3, column 2: rule 2 ("b"): missing "permission"`}},
		{`[{"permission": "read"}]`, []string{`rule 1: missing "pattern"`}},
		{`[{"pattern": "a", "permission": "rwx"}]`, []string{`rule 1 ("a"): unknown permission "rwx"; valid permissions: none, view, read, write`}},
		{`[{"pattern": "a", "permission": "read", "perm": "x"}]`, []string{`rule 1: unknown field "perm"`}},
		{`[{"pattern": 5, "permission": "read"}]`, []string{`rule 1: "pattern" must be a JSON string`}},
		{`[{"pattern": "a", "permission": "read", "ignore_case": "yes"}]`, []string{`"ignore_case" must be a JSON bool`}},
		{`[{"pattern": "[a", "permission": "read"}]`, []string{`rule 1: invalid pattern "[a": unclosed '['`}},
		{`[{"pattern": "", "permission": "read"}]`, []string{`rule 1: invalid pattern "": empty pattern`}},
		{`[{"pattern": "a/../b", "permission": "read"}]`, []string{`".." components are not allowed`}},
		{`[{"pattern": "a\u0000b", "permission": "read"}]`, []string{`NUL`}},
		{`[{"pattern": "***", "permission": "read"}]`, []string{`'***'`}},
		{"\xff", []string{"invalid JSON"}},
		{"\xef\xbb\xbf{\n\"default\": 1}", []string{"line 2, column 12"}},
	}
	for _, tt := range tests {
		_, _, err := ParseFile([]byte(tt.in), "policy.json")
		if err == nil {
			t.Errorf("%q: no error", tt.in)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error\n  %v\nwant it to contain\n  %s", tt.in, err, w)
			}
		}
		if !strings.HasPrefix(err.Error(), "policy.json: ") {
			t.Errorf("%q: error %q does not name the file", tt.in, err)
		}
	}
}

func TestParseAllow(t *testing.T) {
	tests := []struct {
		in   string
		want Rule
	}{
		{"secrets/=none", Rule{"secrets/", None, false, "--allow"}},
		{"/ws/build/**=write", Rule{"/ws/build/**", Write, false, "--allow"}},
		{"a=b=read", Rule{"a=b", Read, false, "--allow"}},
		{"*.log=View", Rule{"*.log", View, false, "--allow"}},
	}
	for _, tt := range tests {
		got, err := ParseAllow(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseAllow(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	errs := []struct{ in, want string }{
		{"secrets", `--allow "secrets": missing "=PERMISSION"; write --allow 'PATTERN=PERMISSION'`},
		{"", `missing "=PERMISSION"`},
		{"secrets=", `--allow "secrets=": empty permission; valid permissions: none, view, read, write`},
		{"secrets=hidden", `unknown permission "hidden"; valid permissions: none, view, read, write`},
		{"=none", `--allow "=none": invalid pattern "": empty pattern`},
		{"[x=read", `unclosed '['`},
	}
	for _, tt := range errs {
		_, err := ParseAllow(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseAllow(%q): error %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestPresetNames(t *testing.T) {
	want := []string{"full-access", "development", "agent-safe", "read-only"}
	if got := PresetNames(); !reflect.DeepEqual(got, want) {
		t.Errorf("PresetNames = %v", got)
	}
	for _, name := range want {
		if _, _, err := Preset(name); err != nil {
			t.Errorf("Preset(%q): %v", name, err)
		}
	}
	for _, bad := range []string{"", "Development", "safe", "full"} {
		_, _, err := Preset(bad)
		if err == nil || !strings.Contains(err.Error(), "valid presets: full-access, development, agent-safe, read-only") {
			t.Errorf("Preset(%q): %v", bad, err)
		}
	}
	// Every preset rule compiles (New would panic otherwise) and the lists are fresh copies.
	_, a, _ := Preset("development")
	a[0].Pattern = "changed"
	_, b, _ := Preset("development")
	if b[0].Pattern == "changed" {
		t.Error("Preset returns shared slices")
	}
}

func TestBuild(t *testing.T) {
	file := []byte(`{"default": "read", "rules": [{"pattern": "/ws/", "permission": "write"}, {"pattern": "*.log", "permission": "none"}]}`)
	tests := []struct {
		name   string
		file   []byte
		preset string
		allows []string
		checks []check
	}{
		{"nothing", nil, "", nil, []check{{"ws/.env", false, Write}, {"x", false, Write}}},
		{"file only", file, "", nil, []check{{"ws/a", false, Write}, {"x", false, Read}, {"ws/a.log", false, Write}, {"a.log", false, None}}},
		{"file and development", file, "development", nil, []check{{"ws/a", false, Write}, {"ws/.env", false, None}, {"x", false, Read}, {"ws/secrets/a", false, None}}},
		{"read-only overrides the file default", []byte(`{"default": "none"}`), "read-only", nil, []check{{"x", false, Read}}},
		{"allow overrides the preset", nil, "development", []string{".env=read", "/ws/secrets/=view"}, []check{{"ws/.env", false, Read}, {"ws/secrets/x", false, View}, {"secrets/x", false, None}}},
		{"allow after file", file, "", []string{"/ws/=read"}, []check{{"ws/a", false, Read}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Build(tt.file, "policy.json", tt.preset, tt.allows)
			if err != nil {
				t.Fatal(err)
			}
			runChecks(t, p, tt.checks)
		})
	}
	errs := []struct {
		file   []byte
		preset string
		allows []string
		want   string
	}{
		{[]byte(`{`), "", nil, "policy.json: line 1"},
		{[]byte{}, "", nil, "policy.json: the file is empty"},
		{nil, "paranoid", nil, `unknown preset "paranoid"; valid presets: full-access, development, agent-safe, read-only`},
		{nil, "", []string{"x"}, `--allow "x": missing "=PERMISSION"`},
	}
	for _, tt := range errs {
		_, err := Build(tt.file, "policy.json", tt.preset, tt.allows)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Build: error %v, want %q", err, tt.want)
		}
	}
}
