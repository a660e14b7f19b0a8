package policy

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on a single pattern.
const (
	maxPatternLen = 4096
	maxSegments   = 60
)

// segment kinds. A pattern is a list of segments, one per path component.
type segKind uint8

const (
	segLit    segKind = iota // the component equals lit
	segPrefix                // lit*
	segSuffix                // *lit
	segAny                   // *
	segGlob                  // anything else made of tokens
	segStar                  // ** (any number of components, including none)
)

type tokKind uint8

const (
	tokLit   tokKind = iota // literal text
	tokStar                 // *
	tokOne                  // ?
	tokClass                // [...]
)

type token struct {
	kind tokKind
	lit  string
	cls  *charClass
}

type runeRange struct{ lo, hi rune }

type charClass struct {
	neg    bool
	ranges []runeRange
}

func (c *charClass) contains(r rune) bool {
	for _, rg := range c.ranges {
		if rg.lo <= r && r <= rg.hi {
			return true
		}
	}
	return false
}

func (c *charClass) match(r rune, icase bool) bool {
	in := c.contains(r)
	if !in && icase {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if c.contains(f) {
				in = true
				break
			}
		}
	}
	return in != c.neg
}

type segment struct {
	kind   segKind
	lit    string // segLit, segPrefix, segSuffix
	ascii  bool   // lit is pure ASCII
	tokens []token
}

// matcher is a compiled pattern: a small NFA over path components whose
// states are positions in segs, held in a uint64 bit set.
type matcher struct {
	segs     []segment // an unanchored pattern starts with an implicit "**"
	starMask uint64    // states whose segment is "**"
	init     uint64    // start states (closure of state 0)
	accept   uint64    // bit len(segs)
	implicit uint64    // states reachable without consuming anything explicitly
	minExtra int       // 1 when the pattern ended in "/**": a match needs one more component
	dirOnly  bool      // pattern ended in "/"
	icase    bool
	single   bool   // unanchored, one component, no "/**": any component may match
	need     uint64 // bloom bits of the literal components a path must contain
	needEnds uint64 // bloom bits of the first and last two characters of components

	// Specificity, measured on the pattern as written.
	hasStar  bool // contains '*' (including "**")
	wild     int  // number of wildcards: '*', '?', '[...]', '**'
	prefix   int  // literal characters before the first wildcard
	anchored bool
}

// PatternError reports an invalid pattern.
type PatternError struct {
	Pattern string
	Msg     string
}

func (e *PatternError) Error() string {
	return fmt.Sprintf("invalid pattern %q: %s", e.Pattern, e.Msg)
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// compilePattern validates and compiles pat (see the package documentation
// for the syntax).
func compilePattern(pat string, icase bool) (*matcher, error) {
	fail := func(format string, a ...any) (*matcher, error) {
		return nil, &PatternError{Pattern: pat, Msg: fmt.Sprintf(format, a...)}
	}
	switch {
	case pat == "":
		return fail("empty pattern; to match everything use \"**\" (or set the default permission instead)")
	case len(pat) > maxPatternLen:
		return fail("longer than %d bytes", maxPatternLen)
	case strings.IndexByte(pat, 0) >= 0:
		return fail("contains a NUL byte, which no file name can contain")
	case !utf8.ValidString(pat):
		return fail("not valid UTF-8; use wildcards such as '?' for such names")
	case isSpace(pat[0]):
		return fail("starts with white space; remove it, or escape it as '\\ ' if the name really starts with a space")
	case isSpace(pat[len(pat)-1]) && !escapedAt(pat, len(pat)-1):
		return fail("ends with white space; remove it, or escape it as '\\ ' if the name really ends with a space")
	case pat[0] == '!':
		return fail("negation ('!') is not supported: add a more specific rule with the permission you want instead; escape a literal '!' as '\\!'")
	}

	m := &matcher{icase: icase}
	body := pat
	if body[0] == '/' {
		m.anchored = true
		body = body[1:]
		m.prefix = 1
	}
	if body == "" {
		return fail("\"/\" alone names the home itself; to match everything use \"**\" (or set the default permission instead)")
	}

	// Split into raw segments at unescaped '/'.
	var raws []string
	start := 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '\\':
			if i+1 >= len(body) {
				return fail("ends with an unfinished escape '\\'; escape a literal backslash as '\\\\'")
			}
			if body[i+1] == '/' {
				return fail("'/' cannot be escaped: it always separates path components")
			}
			i++
		case '/':
			raws = append(raws, body[start:i])
			start = i + 1
		}
	}
	raws = append(raws, body[start:])
	if len(raws) > 1 && raws[len(raws)-1] == "" {
		m.dirOnly = true
		raws = raws[:len(raws)-1]
	}
	if len(raws) > maxSegments {
		return fail("more than %d path components", maxSegments)
	}

	// Parse each segment, measuring specificity on the way.
	inPrefix := true
	var segs []segment
	for i, raw := range raws {
		if raw == "" {
			return fail("empty path component (\"//\"); write a single '/'")
		}
		if i > 0 && inPrefix {
			m.prefix++ // the '/' before this component
		}
		if raw == "**" {
			m.hasStar = true
			m.wild++
			inPrefix = false
			segs = append(segs, segment{kind: segStar})
			continue
		}
		seg, err := parseSegment(raw, m, &inPrefix)
		if err != nil {
			return fail("%s", err)
		}
		segs = append(segs, seg)
	}
	if m.dirOnly && inPrefix {
		m.prefix++ // trailing '/'
	}

	// "**/" at the start means any depth, like no leading slash at all.
	lead := 0
	for lead < len(segs) && segs[lead].kind == segStar {
		lead++
	}
	if lead > 0 && lead < len(segs) {
		m.anchored = false
	}
	segs = segs[lead:]
	// "/**" at the end: everything strictly inside; a match needs one more component.
	if lead > 0 && len(segs) == 0 {
		m.anchored = true // "**" alone: everything
		m.minExtra = 1
	}
	for len(segs) > 0 && segs[len(segs)-1].kind == segStar {
		segs = segs[:len(segs)-1]
		m.minExtra = 1
	}
	// Collapse "**/**".
	out := segs[:0]
	for _, s := range segs {
		if s.kind == segStar && len(out) > 0 && out[len(out)-1].kind == segStar {
			continue
		}
		out = append(out, s)
	}
	segs = out

	if !m.anchored {
		segs = append([]segment{{kind: segStar}}, segs...)
		m.implicit = 0b11
	}
	m.segs = segs
	for i, s := range segs {
		if s.kind == segStar {
			m.starMask |= 1 << i
		}
		if s.kind == segLit && s.ascii {
			m.need |= compBit(s.lit)
		}
		if s.kind == segStar {
			continue
		}
		if t := s.tokens[0]; t.kind == tokLit && len(t.lit) >= 2 && t.lit[0] < utf8.RuneSelf && t.lit[1] < utf8.RuneSelf {
			m.needEnds |= endBit('<', t.lit[0], t.lit[1])
		}
		if t := s.tokens[len(s.tokens)-1]; t.kind == tokLit && len(t.lit) >= 2 {
			if a, b := t.lit[len(t.lit)-2], t.lit[len(t.lit)-1]; a < utf8.RuneSelf && b < utf8.RuneSelf {
				m.needEnds |= endBit('>', a, b)
			}
		}
	}
	m.single = !m.anchored && len(segs) == 2 && m.minExtra == 0
	m.accept = 1 << len(segs)
	m.init = m.closure(1)
	return m, nil
}

// escapedAt reports whether s[i] is preceded by an odd number of backslashes.
func escapedAt(s string, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && s[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// parseSegment parses one path component of a pattern (not "**").
func parseSegment(raw string, m *matcher, inPrefix *bool) (segment, error) {
	var toks []token
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			toks = append(toks, token{kind: tokLit, lit: string(lit)})
			lit = lit[:0]
		}
	}
	wildcard := func() {
		m.wild++
		*inPrefix = false
	}
	literal := func(b ...byte) {
		lit = append(lit, b...)
		if *inPrefix && utf8.RuneStart(b[0]) {
			m.prefix++
		}
	}
	for i := 0; i < len(raw); {
		c := raw[i]
		switch c {
		case '\\':
			literal(raw[i+1]) // compilePattern checked that an escaped character follows
			i += 2
		case '*':
			n := 0
			for i+n < len(raw) && raw[i+n] == '*' {
				n++
			}
			if n > 2 {
				return segment{}, errors.New("'***' is not a wildcard: use '*' within a name, or '**' as a whole component for any number of directories")
			}
			if n == 2 {
				return segment{}, errors.New("'**' must be a whole path component (\"**/x\", \"x/**\", \"a/**/b\"); use '*' within a name")
			}
			flush()
			toks = append(toks, token{kind: tokStar})
			m.hasStar = true
			wildcard()
			i++
		case '?':
			flush()
			toks = append(toks, token{kind: tokOne})
			wildcard()
			i++
		case '[':
			cls, next, err := parseClass(raw, i)
			if err != nil {
				return segment{}, err
			}
			flush()
			toks = append(toks, token{kind: tokClass, cls: cls})
			wildcard()
			i = next
		default:
			literal(c)
			i++
		}
	}
	flush()

	var seg segment
	seg.tokens = toks
	switch {
	case len(toks) == 1 && toks[0].kind == tokLit:
		seg.kind, seg.lit = segLit, toks[0].lit
		if seg.lit == "." || seg.lit == ".." {
			return segment{}, fmt.Errorf("%q components are not allowed: patterns name paths inside the home, which are never resolved through '.' or '..'", seg.lit)
		}
	case len(toks) == 1 && toks[0].kind == tokStar:
		seg.kind = segAny
	case len(toks) == 2 && toks[0].kind == tokLit && toks[1].kind == tokStar:
		seg.kind, seg.lit = segPrefix, toks[0].lit
	case len(toks) == 2 && toks[0].kind == tokStar && toks[1].kind == tokLit:
		seg.kind, seg.lit = segSuffix, toks[1].lit
	default:
		seg.kind = segGlob
	}
	seg.ascii = isASCII(seg.lit)
	return seg, nil
}

// parseClass parses a bracket expression starting at raw[i] == '['.
func parseClass(raw string, i int) (*charClass, int, error) {
	errUnclosed := errors.New("unclosed '[': close the character class with ']' or escape a literal bracket as '\\['")
	j := i + 1
	cls := &charClass{}
	if j < len(raw) && (raw[j] == '!' || raw[j] == '^') {
		cls.neg = true
		j++
	}
	first := true
	for {
		if j >= len(raw) {
			return nil, 0, errUnclosed
		}
		if raw[j] == ']' && !first {
			return cls, j + 1, nil
		}
		first = false
		lo, n, err := classChar(raw, j)
		if err != nil {
			return nil, 0, err
		}
		j += n
		hi := lo
		if j+1 < len(raw) && raw[j] == '-' && raw[j+1] != ']' {
			hi, n, err = classChar(raw, j+1)
			if err != nil {
				return nil, 0, err
			}
			j += 1 + n
			if hi < lo {
				return nil, 0, fmt.Errorf("character range %q-%q is reversed; write it low to high", lo, hi)
			}
		}
		cls.ranges = append(cls.ranges, runeRange{lo, hi})
	}
}

func classChar(raw string, j int) (rune, int, error) {
	switch {
	case raw[j] == '\\':
		r, n := utf8.DecodeRuneInString(raw[j+1:])
		return r, 1 + n, nil
	case raw[j] == '[' && j+1 < len(raw) && raw[j+1] == ':':
		return 0, 0, errors.New("named character classes such as [:alpha:] are not supported; use ranges such as [a-zA-Z], or escape a literal '[' as '\\['")
	}
	r, n := utf8.DecodeRuneInString(raw[j:])
	return r, n, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// closure adds the states reachable through "**" matching no component.
func (m *matcher) closure(st uint64) uint64 {
	return st | (st&m.starMask)<<1 // no two "**" are adjacent
}

// step consumes one path component.
func (m *matcher) step(st uint64, c string) uint64 {
	var next uint64
	for s := st &^ m.accept; s != 0; s &= s - 1 {
		j := bits.TrailingZeros64(s)
		sg := &m.segs[j]
		if sg.kind == segStar {
			next |= 1 << j
		} else if sg.match(c, m.icase) {
			next |= 1 << (j + 1)
		}
	}
	return m.closure(next)
}

// ok reports whether reaching the accept state after k of n components is a
// match: the pattern then matches comps[:k], which covers everything below.
func (m *matcher) ok(k, n int, isDir bool) bool {
	rem := n - k - m.minExtra
	return rem > 0 || rem == 0 && (isDir || !m.dirOnly)
}

// match returns the smallest k such that the rule matches comps[:k] (and so,
// because a rule covers everything below what it matches, comps), or -1.
func (m *matcher) match(comps []string, isDir bool) int {
	n := len(comps)
	if m.single {
		sg := &m.segs[1]
		for i, c := range comps {
			if sg.match(c, m.icase) && (i < n-1 || isDir || !m.dirOnly) {
				return i + 1
			}
		}
		return -1
	}
	st := m.init
	if st&m.accept != 0 && m.ok(0, n, isDir) {
		return 0
	}
	for i, c := range comps {
		st = m.step(st, c)
		if st == 0 {
			return -1
		}
		if st&m.accept != 0 && m.ok(i+1, n, isDir) {
			return i + 1
		}
	}
	return -1
}

// below reports whether the pattern may match some path strictly below the
// directory dir. With explicit, a continuation only through the implicit
// leading "**" of an unanchored pattern does not count: the pattern must name
// something inside dir itself.
func (m *matcher) below(dir []string, explicit bool) bool {
	st := m.init
	if st&m.accept != 0 {
		return true
	}
	for _, c := range dir {
		st = m.step(st, c)
		if st == 0 {
			return false
		}
		if st&m.accept != 0 {
			return true
		}
	}
	if explicit {
		return st&^m.implicit != 0
	}
	return st != 0
}

func (sg *segment) match(c string, icase bool) bool {
	switch sg.kind {
	case segLit:
		if icase {
			return strings.EqualFold(c, sg.lit)
		}
		return c == sg.lit
	case segAny:
		return true
	case segPrefix:
		if icase {
			_, ok := foldPrefix(c, sg.lit)
			return ok
		}
		return strings.HasPrefix(c, sg.lit)
	case segSuffix:
		if !icase {
			return strings.HasSuffix(c, sg.lit)
		}
		if sg.ascii && len(c) >= len(sg.lit) {
			if tail := c[len(c)-len(sg.lit):]; isASCII(tail) {
				return asciiEqualFold(tail, sg.lit)
			}
		}
	}
	return globMatch(sg.tokens, c, icase)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func asciiEqualFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		if a[i] != b[i] && lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

// foldEq reports whether r and q are equal under Unicode simple case folding.
func foldEq(r, q rune) bool {
	if r == q {
		return true
	}
	if r < utf8.RuneSelf && q < utf8.RuneSelf {
		return lower(byte(r)) == lower(byte(q))
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f == q {
			return true
		}
	}
	return false
}

// foldPrefix reports whether s starts with lit under simple case folding, and
// how many bytes of s that prefix takes.
func foldPrefix(s, lit string) (int, bool) {
	i, j := 0, 0
	for j < len(lit) {
		if i >= len(s) {
			return 0, false
		}
		c, d := s[i], lit[j]
		if c < utf8.RuneSelf && d < utf8.RuneSelf {
			if c != d && lower(c) != lower(d) {
				return 0, false
			}
			i++
			j++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		q, k := utf8.DecodeRuneInString(lit[j:])
		if !foldEq(r, q) {
			return 0, false
		}
		i += n
		j += k
	}
	return i, true
}

// globMatch matches one path component against tokens. '*' backtracks only to
// the last star seen, which is enough because every other token consumes a
// fixed number of characters.
func globMatch(toks []token, s string, icase bool) bool {
	ti, si := 0, 0
	starT, starS := -1, 0
	for {
		if ti < len(toks) {
			t := &toks[ti]
			switch t.kind {
			case tokStar:
				starT, starS = ti, si
				ti++
				continue
			case tokLit:
				if icase {
					if n, ok := foldPrefix(s[si:], t.lit); ok {
						si += n
						ti++
						continue
					}
				} else if strings.HasPrefix(s[si:], t.lit) {
					si += len(t.lit)
					ti++
					continue
				}
			case tokOne:
				if si < len(s) {
					_, n := utf8.DecodeRuneInString(s[si:])
					si += n
					ti++
					continue
				}
			case tokClass:
				if si < len(s) {
					r, n := utf8.DecodeRuneInString(s[si:])
					if t.cls.match(r, icase) {
						si += n
						ti++
						continue
					}
				}
			}
		} else if si == len(s) {
			return true
		}
		if starT < 0 || starS >= len(s) {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		si, ti = starS, starT+1
	}
}

// endBit is the bloom-filter bit of two characters at the start ('<') or end
// ('>') of a path component, case-folded (ASCII).
func endBit(tag, a, b byte) uint64 {
	h := (uint64(tag)*1099511628211^uint64(lower(a)))*1099511628211 ^ uint64(lower(b))
	h *= 0x9E3779B97F4A7C15
	return 1 << (h >> 58)
}

// compBit is the bloom-filter bit of a path component, case-folded (ASCII).
func compBit(c string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(c); i++ {
		h ^= uint64(lower(c[i]))
		h *= 1099511628211
	}
	return 1 << (h >> 58)
}
