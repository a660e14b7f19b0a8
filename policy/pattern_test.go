package policy

import (
	"strings"
	"testing"
)

func matches(t *testing.T, pat string, icase bool, path string, isDir bool) bool {
	t.Helper()
	m, err := compilePattern(pat, icase)
	if err != nil {
		t.Fatalf("compile %q: %v", pat, err)
	}
	pi, ok := split(path, nil)
	if !ok {
		t.Fatalf("bad path %q", path)
	}
	return m.match(pi.comps, isDir) >= 0
}

func TestMatch(t *testing.T) {
	const F, D = false, true // isDir
	tests := []struct {
		pat   string
		path  string
		isDir bool
		want  bool
	}{
		// Plain names match at any depth, and cover everything below.
		{"secrets", "secrets", F, true},
		{"secrets", "secrets/db.txt", F, true},
		{"secrets", "a/b/secrets/x", F, true},
		{"secrets", "ws/secrets", D, true},
		{"secrets", "mysecrets/x", F, false},
		{"secrets", "secrets.txt", F, false},
		// Directory patterns: directories only, and everything below them.
		{"secrets/", "secrets/db.txt", F, true}, // AgentFense miss: top-level
		{"secrets/", "a/b/secrets/x", F, true},  // AgentFense miss: nested
		{"secrets/", "secrets", D, true},
		{"secrets/", "secrets", F, false}, // a file named secrets
		{"secrets/", "a/secrets", F, false},
		{"secrets/", "a/secrets/b/c/d", F, true},
		{".ssh/", ".ssh/id_rsa", F, true},
		{".ssh/", "ws/.ssh/config", F, true},
		// Multi-component patterns also match at any depth.
		{".git/config", ".git/config", F, true},
		{".git/config", "ws/.git/config", F, true},
		{".git/config", "ws/.git/config.bak", F, false},
		{".git/config", "ws/git/config", F, false},
		{"a/b", "x/a/b/c", F, true},
		{"a/b", "a/x/b", F, false},
		// Anchored.
		{"/secrets", "secrets/x", F, true},
		{"/secrets", "ws/secrets/x", F, false},
		{"/ws/src/", "ws/src/main.go", F, true},
		{"/ws/src/", "ws/ws/src/main.go", F, false},
		{"/ws/src/", "ws/src", D, true},
		{"/ws/src/", "ws/src", F, false},
		{"/.env", ".env", F, true},
		{"/.env", "ws/.env", F, false},
		// ** at the start.
		{"**/foo", "foo", F, true},
		{"**/foo", "a/b/foo", F, true},
		{"/**/foo", "a/foo", F, true},
		{"**/foo/bar", "x/foo/bar", F, true},
		{"**/foo/bar", "foo/x/bar", F, false},
		// ** in the middle.
		{"a/**/b", "a/b", F, true},
		{"a/**/b", "a/x/b", F, true},
		{"a/**/b", "a/x/y/z/b", F, true},
		{"a/**/b", "a/x/y/z/c", F, false},
		{"a/**/b", "z/a/x/b/w", F, true},
		{"/a/**/b", "z/a/x/b", F, false},
		{"a/**/**/b", "a/b", F, true},
		// ** at the end: strictly inside.
		{".git/**", ".git/config", F, true}, // AgentFense miss
		{".git/**", "ws/.git/hooks/pre-commit", F, true},
		{".git/**", ".git", D, false},
		{".git/**", ".git", F, false},
		{"/a/**", "a/x", F, true},
		{"/a/**", "a", D, false},
		{"a/**/", "a/x", D, true},
		{"a/**/", "a/x", F, false},
		{"a/**/", "a/x/y", F, true},
		// ** alone: everything.
		{"**", "x", F, true},
		{"**", "a/b/c", D, true},
		{"/**", "x", F, true},
		{"**/", "x", F, false},
		{"**/", "x", D, true},
		{"**/", "x/y", F, true},
		// * within a component.
		{"*.pem", "key.pem", F, true},
		{"*.pem", "ws/certs/key.pem", F, true},
		{"*.pem", ".pem", F, true},
		{"*.pem", "key.pem.bak", F, false},
		{"*.pem", "keypem", F, false},
		{"*", ".env", F, true}, // '*' matches a leading dot
		{"*", "a", F, true},
		{"/*", "a/b", F, true},
		{"/*/", "a", F, false},
		{"/*/", "a/b", F, true},
		{"id_rsa*", "id_rsa", F, true},
		{"id_rsa*", ".ssh/id_rsa.pub", F, true},
		{"id_rsa*", "my_id_rsa", F, false},
		{".env.*", ".env.local", F, true},
		{".env.*", ".env", F, false},
		{".env.*", ".env.", F, true},
		{"a*b*c", "abc", F, true},
		{"a*b*c", "axxbyyc", F, true},
		{"a*b*c", "axxbyyca", F, false},
		{"a*b*c", "acb", F, false},
		{"*a*", "bab", F, true},
		{"/src/*.go", "src/a.go", F, true},
		{"/src/*.go", "src/x/a.go", F, false},
		{"*/x", "a/x", F, true},
		{"*/x", "x", F, false},
		// ?.
		{"?.txt", "a.txt", F, true},
		{"?.txt", "ab.txt", F, false},
		{"?.txt", ".txt", F, false},
		{"?.txt", "é.txt", F, true}, // one character, not one byte
		{"a?c", "a/c", F, false},
		// Classes.
		{"[a-z].txt", "q.txt", F, true},
		{"[a-z].txt", "Q.txt", F, false},
		{"[a-z].txt", "1.txt", F, false},
		{"[!a-z].txt", "1.txt", F, true},
		{"[^a-z].txt", "q.txt", F, false},
		{"[]].txt", "].txt", F, true},
		{"[!]].txt", "].txt", F, false},
		{"[a-].txt", "-.txt", F, true},
		{"[\\]a].txt", "].txt", F, true},
		{"file[0-9][0-9]", "file42", F, true},
		{"file[0-9][0-9]", "file4", F, false},
		{"[é-ë]", "ê", F, true},
		// Escapes.
		{"\\*", "*", F, true},
		{"\\*", "a", F, false},
		{"a\\?", "a?", F, true},
		{"a\\?", "ab", F, false},
		{"\\[x]", "[x]", F, true},
		{"\\!important", "!important", F, true},
		{"trail\\ ", "trail ", F, true},
		{"back\\\\slash", "back\\slash", F, true},
		// Case-sensitive by default.
		{".env", ".ENV", F, false},
		{"Makefile", "makefile", F, false},
		// Path normalization of the subject.
		{"a/b", "/a//b/", F, true},
		{"a/b", "./a/./b", F, true},
	}
	for _, tt := range tests {
		if got := matches(t, tt.pat, false, tt.path, tt.isDir); got != tt.want {
			t.Errorf("%q matches %q (dir=%v) = %v, want %v", tt.pat, tt.path, tt.isDir, got, tt.want)
		}
	}
}

func TestMatchIgnoreCase(t *testing.T) {
	tests := []struct {
		pat, path string
		want      bool
	}{
		{".env", ".ENV", true},
		{".env", "ws/.Env", true},
		{"secrets/", "ws/Secrets/x", true},
		{"secrets/", "SECRETS/x", true},
		{".ssh/", ".SSH/id_rsa", true},
		{".ssh/", ".ſſh/id_rsa", true}, // U+017F folds to s
		{"*.pem", "KEY.PEM", true},
		{"*.pem", "key.pEm", true},
		{"id_rsa*", "ID_RSA.pub", true},
		{".env.*", ".ENV.Local", true},
		{"[a-c]x", "BX", true},
		{"[!a-c]x", "BX", false},
		{"?.KEY", "a.key", true},
		{"a*b", "AxxB", true},
		{"k", "\u212a", true}, // Kelvin sign folds to k
		{"*k", "x\u212a", true},
		{"k*", "\u212ax", true},
		{".env", ".envx", false},
		{"*.pem", "pem", false},
	}
	for _, tt := range tests {
		if got := matches(t, tt.pat, true, tt.path, false); got != tt.want {
			t.Errorf("ignore case: %q matches %q = %v, want %v", tt.pat, tt.path, got, tt.want)
		}
	}
}

func TestPatternErrors(t *testing.T) {
	tests := []struct{ pat, want string }{
		{"", "empty pattern"},
		{"/", "names the home itself"},
		{"a\x00b", "NUL"},
		{"a\xffb", "UTF-8"},
		{" secrets", "starts with white space"},
		{"secrets ", "ends with white space"},
		{"secrets\t", "ends with white space"},
		{"!secrets", "negation"},
		{"a//b", "empty path component"},
		{"//a", "empty path component"},
		{"a/../b", `".." components`},
		{"../a", `".." components`},
		{"./a", `"." components`},
		{"a/.", `"." components`},
		{"\\.\\.", `".." components`},
		{"[abc", "unclosed '['"},
		{"a[", "unclosed '['"},
		{"[a/b]", "unclosed '['"},
		{"[!]", "unclosed '['"},
		{"[]", "unclosed '['"},
		{"[z-a]", "reversed"},
		{"[[:alpha:]]", "named character classes"},
		{"***", "'***'"},
		{"a/***/b", "'***'"},
		{"a**", "whole path component"},
		{"**a", "whole path component"},
		{"a/**b/c", "whole path component"},
		{"a\\", "unfinished escape"},
		{"a\\/b", "cannot be escaped"},
		{strings.Repeat("a/", 61) + "a", "more than 60"},
		{strings.Repeat("a", 5000), "longer than"},
	}
	for _, tt := range tests {
		_, err := compilePattern(tt.pat, false)
		if err == nil {
			t.Errorf("%q: no error, want %q", tt.pat, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %q, want it to contain %q", tt.pat, err, tt.want)
		}
		if !strings.Contains(err.Error(), "invalid pattern") {
			t.Errorf("%q: error %q does not say the pattern is invalid", tt.pat, err)
		}
	}
	// Accepted edge cases.
	for _, pat := range []string{"trail\\ ", "\\ lead", "\\!x", "a/**/**/b", "**/", "**", "[]]", "x]", "é"} {
		if _, err := compilePattern(pat, false); err != nil {
			t.Errorf("%q: %v", pat, err)
		}
	}
}

func TestSpecificity(t *testing.T) {
	tests := []struct {
		pat     string
		hasStar bool
		wild    int
		prefix  int
	}{
		{"secrets", false, 0, 7},
		{"secrets/", false, 0, 8},
		{"/secrets/", false, 0, 9},
		{"secrets/README", false, 0, 14},
		{".git/**", true, 1, 5},
		{"**/foo", true, 1, 0},
		{"*.pem", true, 1, 0},
		{"id_rsa*", true, 1, 6},
		{"file?.[ch]", false, 2, 4},
		{"a/**/b/*.go", true, 2, 2},
		{"\\*x", false, 0, 2},
		{"é*", true, 1, 1},
	}
	for _, tt := range tests {
		m, err := compilePattern(tt.pat, false)
		if err != nil {
			t.Fatalf("%q: %v", tt.pat, err)
		}
		if m.hasStar != tt.hasStar || m.wild != tt.wild || m.prefix != tt.prefix {
			t.Errorf("%q: hasStar=%v wild=%d prefix=%d, want %v %d %d", tt.pat, m.hasStar, m.wild, m.prefix, tt.hasStar, tt.wild, tt.prefix)
		}
	}
}
