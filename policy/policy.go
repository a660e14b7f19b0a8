package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Rule gives the permission Perm to the paths matched by Pattern.
type Rule struct {
	Pattern string `json:"pattern"`
	Perm    Perm   `json:"permission"`
	// IgnoreCase makes the pattern match regardless of case (Unicode simple
	// folding). Preset rules set it; user rules may, in policy.json.
	IgnoreCase bool `json:"ignore_case,omitempty"`
	// Source says where the rule comes from, for Explain and the recorded
	// description: "policy.json", "preset agent-safe", "--allow".
	Source string `json:"source,omitempty"`
}

func (r Rule) describe() string {
	s := fmt.Sprintf("%q=%s", r.Pattern, r.Perm)
	var notes []string
	if r.Source != "" {
		notes = append(notes, r.Source)
	}
	if r.IgnoreCase {
		notes = append(notes, "ignoring case")
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	return s
}

type compiled struct {
	m     *matcher
	perm  Perm
	index int // position in the combined rule list; later wins ties
	rule  Rule
}

// cmpPrecedence orders rules most specific first: no '*' at all, then fewer
// wildcards, then a longer literal prefix, then the later rule.
func cmpPrecedence(a, b *compiled) int {
	switch {
	case a.m.hasStar != b.m.hasStar:
		if !a.m.hasStar {
			return -1
		}
		return 1
	case a.m.wild != b.m.wild:
		return a.m.wild - b.m.wild
	case a.m.prefix != b.m.prefix:
		return b.m.prefix - a.m.prefix
	}
	return b.index - a.index
}

// why says why a beats b.
func why(a, b *compiled) string {
	switch {
	case a.m.hasStar != b.m.hasStar:
		return "it has no '*'"
	case a.m.wild != b.m.wild:
		return fmt.Sprintf("it has fewer wildcards (%d < %d)", a.m.wild, b.m.wild)
	case a.m.prefix != b.m.prefix:
		return fmt.Sprintf("it has a longer literal prefix (%d > %d characters)", a.m.prefix, b.m.prefix)
	case a.rule.Source != b.rule.Source:
		return "equally specific, from a later source"
	}
	return "equally specific, listed later"
}

// Policy is an immutable set of rules plus a default; safe for concurrent use.
type Policy struct {
	def    Perm
	rules  []Rule     // combined, in source order
	sorted []compiled // most specific first
	full   bool       // nothing below Write anywhere
	grants bool       // some rule gives more than None
}

// New compiles a policy. sources are rule lists in increasing priority
// (policy.json, then the preset, then --allow): rules are concatenated in that
// order, so on equal specificity a rule of a later source wins. Every pattern
// is validated; the error names the source and the pattern.
func New(def Perm, sources ...[]Rule) (*Policy, error) {
	if !def.valid() {
		return nil, fmt.Errorf("invalid default permission %d; valid permissions: %s", uint8(def), validPerms)
	}
	p := &Policy{def: def, full: def == Write}
	for _, src := range sources {
		for _, r := range src {
			if !r.Perm.valid() {
				return nil, fmt.Errorf("%srule %q: invalid permission %d; valid permissions: %s", sourcePrefix(r.Source), r.Pattern, uint8(r.Perm), validPerms)
			}
			m, err := compilePattern(r.Pattern, r.IgnoreCase)
			if err != nil {
				return nil, fmt.Errorf("%s%w", sourcePrefix(r.Source), err)
			}
			p.sorted = append(p.sorted, compiled{m: m, perm: r.Perm, index: len(p.rules), rule: r})
			p.rules = append(p.rules, r)
			if r.Perm < Write {
				p.full = false
			}
			if r.Perm > None {
				p.grants = true
			}
		}
	}
	slices.SortFunc(p.sorted, func(a, b compiled) int { return cmpPrecedence(&a, &b) })
	return p, nil
}

func sourcePrefix(s string) string {
	if s == "" {
		return ""
	}
	return s + ": "
}

// Default returns the permission of paths no rule matches.
func (p *Policy) Default() Perm { return p.def }

// Rules returns a copy of the rules in source order.
func (p *Policy) Rules() []Rule { return slices.Clone(p.rules) }

// IsFullAccess reports whether every path is Write: the default is Write and
// no rule gives less. Callers may then skip all checks.
func (p *Policy) IsFullAccess() bool { return p.full }

// pathInfo is a path split into components, plus a bloom filter of them.
type pathInfo struct {
	comps []string
	bloom uint64 // compBit of every component
	ends  uint64 // endBit of the first and last two characters of every component
}

// split splits a home-relative path. Empty and "." components are skipped.
// It returns false if a ".." component is present.
func split(path string, buf []string) (pathInfo, bool) {
	pi := pathInfo{comps: buf[:0]}
	for len(path) > 0 {
		c := path
		if i := strings.IndexByte(path, '/'); i >= 0 {
			c, path = path[:i], path[i+1:]
		} else {
			path = ""
		}
		switch c {
		case "", ".":
			continue
		case "..":
			return pi, false
		}
		pi.comps = append(pi.comps, c)
		if isASCII(c) {
			pi.bloom |= compBit(c)
			if len(c) >= 2 {
				pi.ends |= endBit('<', c[0], c[1]) | endBit('>', c[len(c)-2], c[len(c)-1])
			}
		} else {
			// Case folding may map non-ASCII characters to ASCII ones.
			pi.bloom, pi.ends = ^uint64(0), ^uint64(0)
		}
	}
	return pi, true
}

// winner returns the index in p.sorted of the rule deciding the path and the
// number of components of the part it matched, or -1.
func (p *Policy) winner(pi *pathInfo, isDir bool) (int, int) {
	for i := range p.sorted {
		c := &p.sorted[i]
		if c.m.need&^pi.bloom != 0 || c.m.needEnds&^pi.ends != 0 {
			continue
		}
		if k := c.m.match(pi.comps, isDir); k >= 0 {
			return i, k
		}
	}
	return -1, 0
}

// Decide returns the permission of path, a home-relative slash-separated path
// such as "ws/src/main.go" ("" is the home itself). isDir tells whether the
// path is a directory (directory patterns "x/" match only directories).
//
// Decide answers for the path alone; enforcement also needs every ancestor to
// be at least View for the path to be reachable (see the package
// documentation about hidden directories). A path with a ".." component is
// None: it is never resolved.
func (p *Policy) Decide(path string, isDir bool) Perm {
	if p.full {
		return Write
	}
	var buf [24]string
	pi, ok := split(path, buf[:])
	if !ok {
		return None
	}
	perm, _, _ := p.decide(&pi, isDir)
	return perm
}

// decide returns the permission, the deciding rule (or -1 for the default),
// and the rule that raised a hidden directory to View (or -1).
func (p *Policy) decide(pi *pathInfo, isDir bool) (Perm, int, int) {
	w, _ := p.winner(pi, isDir)
	perm := p.def
	if w >= 0 {
		perm = p.sorted[w].perm
	}
	if perm == None && isDir && p.grants {
		if len(pi.comps) == 0 {
			return View, w, -1 // the home itself is never hidden
		}
		if g := p.raiser(pi, w); g >= 0 {
			return View, w, g
		}
	}
	if perm == None && len(pi.comps) == 0 {
		return View, w, -1
	}
	return perm, w, -1
}

// raiser returns a rule that gives more than None to some path below the
// hidden directory pi and so makes it View, or -1.
//
// A directory hidden by default is raised by any rule that may match below it.
// A directory hidden by a rule is raised only by a more specific rule whose
// pattern names something inside it (through the any-depth prefix of an
// unanchored pattern is not enough), so that a secret directory stays hidden
// when an unrelated rule such as "node_modules/" could in theory match inside.
func (p *Policy) raiser(pi *pathInfo, w int) int {
	if w < 0 {
		for i := range p.sorted {
			if c := &p.sorted[i]; c.perm > None && c.m.below(pi.comps, false) {
				return i
			}
		}
		return -1
	}
	for i := range p.sorted[:w] {
		if c := &p.sorted[i]; c.perm > None && c.m.below(pi.comps, true) {
			return i
		}
	}
	return -1
}

// MayRestrictBelow reports whether some path strictly below the directory dir
// could get a permission lower than Write. False is a guarantee (everything
// below is Write: dir may be renamed or removed without looking inside); true
// means the caller must check what actually lies below. Unanchored patterns
// such as ".env" may match below every directory.
func (p *Policy) MayRestrictBelow(dir string) bool {
	if p.full {
		return false
	}
	var buf [24]string
	pi, ok := split(dir, buf[:])
	if !ok {
		return true
	}
	w, _ := p.winner(&pi, true)
	base := p.def
	if w >= 0 {
		base = p.sorted[w].perm
	}
	if base < Write {
		return true
	}
	limit := len(p.sorted)
	if w >= 0 {
		limit = w
	}
	for i := range p.sorted[:limit] {
		if c := &p.sorted[i]; c.perm < Write && c.m.below(pi.comps, false) {
			return true
		}
	}
	return false
}

// Explain says which rule decides the permission of path and why.
func (p *Policy) Explain(path string, isDir bool) string {
	pi, ok := split(path, nil)
	name := strings.Join(pi.comps, "/")
	if name == "" {
		name = "(home)"
	}
	if !ok {
		return fmt.Sprintf("%q: none: the path has a \"..\" component, which is never resolved", path)
	}
	var b strings.Builder
	perm, w, g := p.decide(&pi, isDir)
	fmt.Fprintf(&b, "%s: %s", name, perm)
	if w < 0 {
		fmt.Fprintf(&b, ": no rule matches, so the default (%s) applies", p.def)
	} else {
		c := &p.sorted[w]
		_, k := p.winner(&pi, isDir)
		k += c.m.minExtra // "x/**" matched x plus one component
		fmt.Fprintf(&b, ": rule %s matches ", c.rule.describe())
		matched := strings.Join(pi.comps[:k], "/")
		if k < len(pi.comps) {
			fmt.Fprintf(&b, "directory %q and everything below it", matched)
		} else {
			fmt.Fprintf(&b, "%q", matched)
		}
		var others []string
		for i := w + 1; i < len(p.sorted) && len(others) < 5; i++ {
			o := &p.sorted[i]
			if o.m.match(pi.comps, isDir) >= 0 {
				others = append(others, fmt.Sprintf("%s (%s)", o.rule.describe(), why(c, o)))
			}
		}
		if len(others) > 0 {
			fmt.Fprintf(&b, "; it overrides %s", strings.Join(others, "; "))
		}
	}
	switch {
	case g >= 0:
		fmt.Fprintf(&b, "; raised from none to view so that paths inside stay reachable: rule %s may match below it", p.sorted[g].rule.describe())
	case perm == View && len(pi.comps) == 0 && (w < 0 && p.def == None || w >= 0 && p.sorted[w].perm == None):
		b.WriteString("; raised from none to view: the home itself is never hidden")
	}
	if perm > None {
		for k := 1; k < len(pi.comps); k++ {
			anc := pathInfo{comps: pi.comps[:k], bloom: ^uint64(0), ends: ^uint64(0)}
			if ap, _, _ := p.decide(&anc, true); ap == None && !p.full {
				fmt.Fprintf(&b, "; but it is unreachable: directory %q is none", strings.Join(pi.comps[:k], "/"))
				break
			}
		}
	}
	return b.String()
}

// policyJSON is the canonical description; ParseFile reads it back.
type policyJSON struct {
	Default Perm   `json:"default"`
	Rules   []Rule `json:"rules"`
}

// MarshalJSON returns the canonical description of the policy, recorded in
// commits: {"default":"write","rules":[{"pattern":..., "permission":...,
// "ignore_case":true, "source":...}, ...]} with the rules in source order.
// ParseFile reads it back into an equal policy.
func (p *Policy) MarshalJSON() ([]byte, error) {
	rules := p.rules
	if rules == nil {
		rules = []Rule{}
	}
	return json.Marshal(policyJSON{Default: p.def, Rules: rules})
}

// String returns the canonical description (see MarshalJSON).
func (p *Policy) String() string {
	b, err := p.MarshalJSON()
	if err != nil {
		return "policy: " + err.Error()
	}
	return string(b)
}
