package policy

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// refRegexp translates a pattern into a regular expression over a slash-joined
// path, independently of the NFA matcher, for differential testing. It returns
// the expression and whether the pattern is directory-only.
func refRegexp(pat string, icase bool) (*regexp.Regexp, bool, error) {
	anchored := strings.HasPrefix(pat, "/")
	body := strings.TrimPrefix(pat, "/")
	dirOnly := strings.HasSuffix(body, "/") && !escapedAt(body, len(body)-1)
	if dirOnly {
		body = body[:len(body)-1]
	}
	// Split at unescaped slashes.
	var segs []string
	cur := ""
	for i := 0; i < len(body); i++ {
		if body[i] == '\\' && i+1 < len(body) {
			cur += body[i : i+2]
			i++
			continue
		}
		if body[i] == '/' {
			segs = append(segs, cur)
			cur = ""
			continue
		}
		cur += body[i : i+1]
	}
	segs = append(segs, cur)

	var re strings.Builder
	re.WriteString("(?s)")
	if icase {
		re.WriteString("(?i)")
	}
	re.WriteString("^")
	if !anchored {
		re.WriteString("(?:.*/)?")
	}
	for i, s := range segs {
		last := i == len(segs)-1
		if s == "**" {
			switch {
			case last && i == 0:
				re.WriteString(".+")
			case last:
				re.WriteString(".+") // the previous component wrote its '/'
			default:
				re.WriteString("(?:.*/)?")
			}
			continue
		}
		re.WriteString(globRegexp(s))
		if !last {
			re.WriteString("/")
		}
	}
	re.WriteString("$")
	r, err := regexp.Compile(re.String())
	return r, dirOnly, err
}

func globRegexp(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '\\':
			i++
			fmt.Fprintf(&b, `\x{%x}`, rs[i])
		case '*':
			b.WriteString("[^/]*")
		case '?':
			b.WriteString("[^/]")
		case '[':
			j := i + 1
			b.WriteString("[")
			if rs[j] == '!' || rs[j] == '^' {
				b.WriteString("^/")
				j++
			}
			for first := true; first || rs[j] != ']'; first = false {
				if rs[j] == '\\' {
					j++
				}
				fmt.Fprintf(&b, `\x{%x}`, rs[j])
				j++
				if rs[j] == '-' && rs[j+1] != ']' {
					j++
					if rs[j] == '\\' {
						j++
					}
					fmt.Fprintf(&b, `-\x{%x}`, rs[j])
					j++
				}
			}
			b.WriteString("]")
			i = j
		default:
			fmt.Fprintf(&b, `\x{%x}`, c)
		}
	}
	return b.String()
}

func refMatch(re *regexp.Regexp, dirOnly bool, comps []string, isDir bool) bool {
	for k := 1; k <= len(comps); k++ {
		if re.MatchString(strings.Join(comps[:k], "/")) && (k < len(comps) || isDir || !dirOnly) {
			return true
		}
	}
	return false
}

func FuzzDecide(f *testing.F) {
	f.Add("secrets/", "ws/a/secrets/x", false, false, uint8(0))
	f.Add(".git/**", "ws/.git/config", false, true, uint8(1))
	f.Add("/a/**/b/*.go", "a/x/y/b/m.go", false, false, uint8(3))
	f.Add("[!a-c]?x*", "dbxyz", true, true, uint8(2))
	f.Add("*.PEM", "k/key.pem", false, true, uint8(0))
	f.Add("k*", "\u212ax", false, true, uint8(0))
	f.Add("**/", "a", true, false, uint8(0))
	f.Fuzz(func(t *testing.T, pat, path string, isDir, icase bool, perm uint8) {
		rule := Rule{Pattern: pat, Perm: Perm(perm % 4), IgnoreCase: icase, Source: "fuzz"}
		for _, def := range []Perm{None, Write} {
			p, err := New(def, []Rule{rule}, []Rule{{Pattern: "secrets/", Perm: None}})
			if err != nil {
				return
			}
			got := p.Decide(path, isDir)
			_ = p.Explain(path, isDir)
			_ = p.MayRestrictBelow(path)
			_ = p.String()
			if !got.valid() {
				t.Fatalf("invalid permission %d", got)
			}
			// MayRestrictBelow(dir) false guarantees Write below dir.
			pi, ok := split(path, nil)
			if !ok {
				continue
			}
			for k := 0; k < len(pi.comps); k++ {
				dir := strings.Join(pi.comps[:k], "/")
				if !p.MayRestrictBelow(dir) && got != Write {
					t.Fatalf("MayRestrictBelow(%q) = false but Decide(%q) = %s\n%s", dir, path, got, p.Explain(path, isDir))
				}
			}
		}
		m, err := compilePattern(pat, icase)
		if err != nil {
			return
		}
		pi, ok := split(path, nil)
		if !ok {
			return
		}
		k := m.match(pi.comps, isDir)
		// A match covers the path, so every proper ancestor may have it below.
		if k >= 0 {
			for d := 0; d < len(pi.comps); d++ {
				if !m.below(pi.comps[:d], false) {
					t.Fatalf("%q matches %q but below(%q) = false", pat, path, strings.Join(pi.comps[:d], "/"))
				}
			}
		}
		if !utf8.ValidString(path) {
			return
		}
		re, dirOnly, err := refRegexp(pat, icase)
		if err != nil {
			t.Fatalf("reference for %q: %v", pat, err)
		}
		if want := refMatch(re, dirOnly, pi.comps, isDir); (k >= 0) != want {
			t.Fatalf("%q (icase=%v) matches %q (dir=%v): got %v, reference %v (%s)", pat, icase, path, isDir, k >= 0, want, re)
		}
	})
}

func FuzzParseFile(f *testing.F) {
	f.Add([]byte(`{"default": "write", "rules": [{"pattern": "secrets/", "permission": "none"}]}`))
	f.Add([]byte(`[{"pattern": ".env", "permission": "none", "ignore_case": true, "source": "x"}]`))
	f.Add([]byte(`{"rules": [{"pattern": "[a", "permission": "read"}]}`))
	f.Add([]byte("{\"default\": \"rw\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		def, rules, err := ParseFile(data, "policy.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "policy.json: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		d := Write
		if def != nil {
			d = *def
		}
		p, err := New(d, rules)
		if err != nil {
			t.Fatalf("ParseFile accepted what New rejects: %v", err)
		}
		s := p.String()
		def2, rules2, err := ParseFile([]byte(s), "recorded")
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\n%s", err, s)
		}
		p2, err := New(*def2, rules2)
		if err != nil || p2.String() != s {
			t.Fatalf("round trip: %v\n%s\n%v", err, s, p2)
		}
	})
}

// TestMatchDifferential compares the matcher with the regexp reference on
// random patterns and paths built from a small alphabet.
func TestMatchDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	patPieces := []string{"a", "b", "A", "ab", ".", "*", "?", "[a-b]", "[!a]", "[^B]", "\\*", "/", "/", "**/", "/**", "/**/", "k", "\u212a"}
	pathPieces := []string{"a", "b", "A", "B", "ab", "ba", "aab", "*", "/", "/", "/", ".a", "k", "K", "\u212a"}
	n, compared := 20000, 0
	if testing.Short() {
		n = 2000
	}
	for i := 0; i < n; i++ {
		var pb, qb strings.Builder
		for j := rng.IntN(6) + 1; j > 0; j-- {
			pb.WriteString(patPieces[rng.IntN(len(patPieces))])
		}
		for j := rng.IntN(8) + 1; j > 0; j-- {
			qb.WriteString(pathPieces[rng.IntN(len(pathPieces))])
		}
		pat, path := pb.String(), qb.String()
		icase, isDir := rng.IntN(2) == 0, rng.IntN(2) == 0
		m, err := compilePattern(pat, icase)
		if err != nil {
			continue
		}
		pi, _ := split(path, nil)
		re, dirOnly, err := refRegexp(pat, icase)
		if err != nil {
			t.Fatalf("reference for %q: %v", pat, err)
		}
		compared++
		if got, want := m.match(pi.comps, isDir) >= 0, refMatch(re, dirOnly, pi.comps, isDir); got != want {
			t.Errorf("%q (icase=%v) matches %q (dir=%v): got %v, reference %v (%s)", pat, icase, path, isDir, got, want, re)
		}
	}
	if compared < n/4 {
		t.Errorf("only %d of %d random patterns were valid", compared, n)
	}
}
