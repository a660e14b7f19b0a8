package repo

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestQuotePath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain/name.go", "plain/name.go"},
		{"café/ünïcode", "café/ünïcode"},
		{"with space", "with space"},
		{"x\nD\tREADME.md", `"x\nD\tREADME.md"`},
		{"title\x1b]0;T\x07", `"title\033]0;T\007"`},
		{"clear\x1b[2J", `"clear\033[2J"`},
		{`back\slash`, `"back\\slash"`},
		{`quo"te`, `"quo\"te"`},
		{"bad\xffutf8", `"bad\377utf8"`},
		{"del\x7f", `"del\177"`},
		{"csi\u009b2J", `"csi\302\2332J"`},
		{"invoice\u202efdp.exe", `"invoice\342\200\256fdp.exe"`}, // right-to-left override
		{"zero\u200bwidth", `"zero\342\200\213width"`},
	}
	for _, tc := range tests {
		if got := QuotePath(tc.in); got != tc.want {
			t.Errorf("QuotePath(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// Error messages name paths an agent chose: their control characters
// (but newlines and tabs, which messages use) are escaped.
func TestEscapeControls(t *testing.T) {
	for in, want := range map[string]string{
		"plain\nlist\tok":          "plain\nlist\tok",
		"x\x1b]0;T\x07y":           `x\033]0;T\007y`,
		"csi\u009b2J":              `csi\302\2332J`,
		"del\x7f and ünïcode café": `del\177 and ünïcode café`,
		"raw\x9b2J":                `raw\2332J`,
		"rlo\u202etxt.exe":         `rlo\342\200\256txt.exe`,
	} {
		if got := EscapeControls(in); got != want {
			t.Errorf("EscapeControls(%q) = %q, want %q", in, got, want)
		}
	}
}

// ShellArg's words, run by a shell, give back the bytes they quote and
// expand nothing: a path with '"' and "$(...)" in QuotePath's double
// quotes ran the command when the advice was pasted.
func TestShellArg(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain/path-1.db", "plain/path-1.db"},
		{"", "''"},
		{"my ws", "'my ws'"},
		{"it's", `'it'\''s'`},
		{`a"$(touch pwned)`, `'a"$(touch pwned)'`},
		{`back\slash`, `'back\slash'`},
		{"é", "'é'"},
		{"line\nbreak$(x)'", `$'line\012break$(x)\''`},
		{"bad\xff", `$'bad\377'`},
	}
	for _, tc := range tests {
		if got := ShellArg(tc.in); got != tc.want {
			t.Errorf("ShellArg(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("skipping the round trip: bash not installed")
	}
	dir := t.TempDir()
	for _, tc := range tests {
		out, err := exec.Command(bash, "-c", "cd "+ShellArg(dir)+" && printf %s "+ShellArg(tc.in)).Output()
		if err != nil || string(out) != tc.in {
			t.Errorf("bash read %s as %q (%v), want %q", ShellArg(tc.in), out, err, tc.in)
		}
		if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
			t.Fatalf("bash ran the command in %s", ShellArg(tc.in))
		}
	}
}
