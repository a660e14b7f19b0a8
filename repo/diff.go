package repo

import (
	"bytes"
	"cmp"
	"fmt"
	"sort"
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"

	"github.com/artproject/art/objects"
)

// Change is one path that differs between two trees. Old is nil for an
// added path, New for a deleted one.
type Change struct {
	Path string // slash-separated, relative to the home root
	Old  *objects.Entry
	New  *objects.Entry
}

// Status letter as git's --name-status prints it.
func (c Change) Status() string {
	switch {
	case c.Old == nil:
		return "A"
	case c.New == nil:
		return "D"
	case c.Old.Type != c.New.Type:
		return "T"
	}
	return "M"
}

// Sides splits a type change (a file that became a link, say) into the
// deletion of the old entry and the addition of the new one, as git shows
// it in patches; other changes are returned as they are.
func (c Change) Sides() []Change {
	if c.Old != nil && c.New != nil && c.Old.Type != c.New.Type {
		return []Change{{Path: c.Path, Old: c.Old}, {Path: c.Path, New: c.New}}
	}
	return []Change{c}
}

func sameEntry(a, b *objects.Entry) bool {
	return a.ID == b.ID && a.Size == b.Size && a.Target == b.Target && sameMeta(a, b)
}

// sameMeta reports whether two entries have the same type, mode and
// xattrs, whatever their content.
func sameMeta(a, b *objects.Entry) bool {
	if a.Type != b.Type || a.Mode != b.Mode || len(a.Xattrs) != len(b.Xattrs) {
		return false
	}
	for i := range a.Xattrs {
		if a.Xattrs[i].Name != b.Xattrs[i].Name || !bytes.Equal(a.Xattrs[i].Value, b.Xattrs[i].Value) {
			return false
		}
	}
	return true
}

// pathFilter limits a diff to some paths; empty means everything.
type pathFilter []string

func (f pathFilter) wants(p string) bool {
	if len(f) == 0 {
		return true
	}
	for _, x := range f {
		if p == x || strings.HasPrefix(p, x+"/") {
			return true
		}
	}
	return false
}

// descend reports whether a directory may contain wanted paths.
func (f pathFilter) descend(dir string) bool {
	if len(f) == 0 || dir == "" {
		return true
	}
	for _, x := range f {
		if x == dir || strings.HasPrefix(x, dir+"/") || strings.HasPrefix(dir, x+"/") {
			return true
		}
	}
	return false
}

// DiffTrees lists the changes from tree a to tree b. Subtrees with equal
// ids are skipped without being read, so the cost follows the change.
// paths, if given, restrict the result to those paths and what is below.
func (r *Repo) DiffTrees(a, b objects.ID, paths []string) ([]Change, error) {
	return r.diffTrees(a, b, paths, r.LoadTree)
}

// diffTrees is DiffTrees reading trees with load.
func (r *Repo) diffTrees(a, b objects.ID, paths []string, load func(objects.ID) (*objects.Tree, error)) ([]Change, error) {
	var f pathFilter
	for _, p := range paths {
		p = strings.Trim(p, "/")
		if p != "" {
			f = append(f, p)
		}
	}
	var out []Change
	var path []byte
	err := r.diffDir(&path, a, b, f, &out, load)
	return out, err
}

// diffDir appends the changes from tree a to tree b, at *path, to out.
// The path is one buffer that each level extends and cuts back, and a
// Change's own path is made only when it is listed: a string per level
// held by every frame made memory grow with the square of the depth (an
// agent's chain of 3,000 directories of 250-byte names took art log 1.1
// GB, a deeper one crashed it).
func (r *Repo) diffDir(path *[]byte, a, b objects.ID, f pathFilter, out *[]Change, load func(objects.ID) (*objects.Tree, error)) error {
	if a == b || len(f) > 0 && !f.descend(string(*path)) {
		return nil
	}
	var ta, tb *objects.Tree
	var err error
	empty := &objects.Tree{}
	ta, tb = empty, empty
	if !a.IsZero() {
		if ta, err = load(a); err != nil {
			return err
		}
	}
	if !b.IsZero() {
		if tb, err = load(b); err != nil {
			return err
		}
	}
	return r.diffPairs(path, ta, tb, f, out, load)
}

// diffPairs is diffDir on trees already read.
func (r *Repo) diffPairs(path *[]byte, ta, tb *objects.Tree, f pathFilter, out *[]Change, load func(objects.ID) (*objects.Tree, error)) error {
	dirLen := len(*path)
	defer func() { *path = (*path)[:dirLen] }()
	return eachPair(ta, tb, func(ea, eb *objects.Entry) error {
		if ea != nil && eb != nil && sameEntry(ea, eb) {
			return nil
		}
		name := ""
		if ea != nil {
			name = ea.Name
		} else {
			name = eb.Name
		}
		*path = (*path)[:dirLen]
		if dirLen > 0 {
			*path = append(*path, '/')
		}
		*path = append(*path, name...)
		wanted := len(f) == 0 || f.wants(string(*path))
		add := func(old, new *objects.Entry) {
			*out = append(*out, Change{Path: string(*path), Old: old, New: new})
		}
		aDir := ea != nil && ea.Type == objects.TypeDir
		bDir := eb != nil && eb.Type == objects.TypeDir
		if aDir || bDir {
			var sa, sb objects.ID
			if aDir {
				sa = ea.ID
			}
			if bDir {
				sb = eb.ID
			}
			// A non-directory on the other side is its own change.
			if ea != nil && !aDir && wanted {
				add(ea, nil)
			}
			// A directory's own mode and xattrs are a change of
			// their own: an agent's chmod 0700 or 0777 of a directory
			// otherwise showed nowhere.
			if aDir && bDir && !sameMeta(ea, eb) && wanted {
				add(ea, eb)
			}
			before := len(*out)
			here := len(*path)
			if err := r.diffDir(path, sa, sb, f, out, load); err != nil {
				return err
			}
			*path = (*path)[:here] // the entry's own path again
			// A directory added or deleted shows through its contents;
			// an empty one has none, so it is listed itself. (A wanted
			// directory has all its contents wanted, so nothing listed
			// below it means it is empty.)
			if aDir != bDir && len(*out) == before && wanted {
				if aDir {
					add(ea, nil)
				} else {
					add(nil, eb)
				}
			}
			if eb != nil && !bDir && wanted {
				add(nil, eb)
			}
			return nil
		}
		if wanted {
			add(ea, eb)
		}
		return nil
	})
}

// eachPair calls fn for every name of trees ta and tb in name order, with
// the entry each tree holds under it (nil: absent): the walk of two
// sorted trees that diffs and counts share.
func eachPair(ta, tb *objects.Tree, fn func(ea, eb *objects.Entry) error) error {
	i, j := 0, 0
	for i < len(ta.Entries) || j < len(tb.Entries) {
		var ea, eb *objects.Entry
		switch {
		case j >= len(tb.Entries) || i < len(ta.Entries) && ta.Entries[i].Name < tb.Entries[j].Name:
			ea = &ta.Entries[i]
			i++
		case i >= len(ta.Entries) || tb.Entries[j].Name < ta.Entries[i].Name:
			eb = &tb.Entries[j]
			j++
		default:
			ea, eb = &ta.Entries[i], &tb.Entries[j]
			i++
			j++
		}
		if err := fn(ea, eb); err != nil {
			return err
		}
	}
	return nil
}

// DiffStat counts lines added and deleted in a change; binary is true
// when either side is not text.
type DiffStat struct {
	Added, Deleted int
	Binary         bool
}

// MaxDiffSize is the largest file content diffed line by line.
const MaxDiffSize = 16 << 20

// IsBinary reports whether content looks binary (a NUL byte early on).
func IsBinary(b []byte) bool {
	if len(b) > 8000 {
		b = b[:8000]
	}
	return bytes.IndexByte(b, 0) >= 0
}

// Content returns the bytes a change side holds for diffing: file content
// or a symlink target; nil for absent entries and directories.
func (r *Repo) Content(e *objects.Entry) ([]byte, error) {
	if e == nil {
		return nil, nil
	}
	switch e.Type {
	case objects.TypeFile:
		if e.Size > MaxDiffSize {
			return nil, nil
		}
		return r.ReadFile(e.ID, int64(e.Size))
	case objects.TypeSymlink:
		return []byte(e.Target), nil
	}
	return nil, nil
}

// Patch is the unified diff of one change.
type Patch struct {
	Change
	Header []string // git-style header lines
	Hunks  []string // "@@ ... @@" followed by lines starting with ' ', '+', '-'
	Binary bool
	Stat   DiffStat
}

// MakePatch computes the unified diff of a change with 3 lines of context.
func (r *Repo) MakePatch(c Change) (*Patch, error) {
	return r.makePatch(c, nil)
}

// Differ makes the patches of one command, diffing each pair of contents
// once: names that share content (hard links, copies) then cost one
// diff. An agent's 21 hard links to a file of 262,000 distinct lines,
// rewritten, made art diff diff it 21 times (1.2–1.5 s each); with
// thousands of links, for hours.
type Differ struct {
	r    *Repo
	seen map[contentPair]*Patch
}

// contentPair names the contents a patch's hunks depend on.
type contentPair struct{ old, new objects.ID }

// maxDiffCache bounds the content diffs a Differ keeps.
const maxDiffCache = 64

// NewDiffer returns a Differ over r.
func (r *Repo) NewDiffer() *Differ { return &Differ{r: r, seen: map[contentPair]*Patch{}} }

// MakePatch is Repo.MakePatch, reusing the diff of contents seen before.
func (d *Differ) MakePatch(c Change) (*Patch, error) { return d.r.makePatch(c, d) }

func (r *Repo) makePatch(c Change, d *Differ) (*Patch, error) {
	p := &Patch{Change: c}
	h := func(format string, args ...any) { p.Header = append(p.Header, fmt.Sprintf(format, args...)) }
	h("diff --art %s %s", QuotePath("a/"+c.Path), QuotePath("b/"+c.Path))
	mode := func(e *objects.Entry) string {
		switch e.Type {
		case objects.TypeSymlink:
			return "120000"
		case objects.TypeDir:
			return fmt.Sprintf("04%04o", e.Mode)
		case objects.TypeFifo:
			return fmt.Sprintf("01%04o", e.Mode)
		}
		return fmt.Sprintf("10%04o", e.Mode)
	}
	kind := "file"
	if e := cmp.Or(c.New, c.Old); e.Type == objects.TypeDir {
		kind = "directory"
	}
	switch {
	case c.Old == nil:
		h("new %s mode %s", kind, mode(c.New))
	case c.New == nil:
		h("deleted %s mode %s", kind, mode(c.Old))
	case mode(c.Old) != mode(c.New):
		h("old mode %s", mode(c.Old))
		h("new mode %s", mode(c.New))
	}
	p.Header = append(p.Header, xattrLines(c.Old, c.New)...)
	if kind == "directory" || c.Old != nil && c.New != nil && c.Old.ID == c.New.ID && c.Old.Target == c.New.Target {
		return p, nil // metadata only
	}
	var key contentPair
	cacheable := d != nil && (c.Old == nil || c.Old.Type == objects.TypeFile) && (c.New == nil || c.New.Type == objects.TypeFile)
	if cacheable {
		if c.Old != nil {
			key.old = c.Old.ID
		}
		if c.New != nil {
			key.new = c.New.ID
		}
		if q, ok := d.seen[key]; ok {
			p.Binary, p.Stat, p.Hunks = q.Binary, q.Stat, q.Hunks
			if p.Binary {
				h("Binary files %s and %s differ", side("a", c.Path, c.Old), side("b", c.Path, c.New))
			} else if len(p.Hunks) > 0 {
				h("--- %s", side("a", c.Path, c.Old))
				h("+++ %s", side("b", c.Path, c.New))
			}
			return p, nil
		}
	}
	// done keeps a finished patch's diff for the names that follow.
	done := func() (*Patch, error) {
		if cacheable {
			if len(d.seen) >= maxDiffCache {
				clear(d.seen)
			}
			d.seen[key] = p
		}
		return p, nil
	}
	oldB, err := r.Content(c.Old)
	if err != nil {
		return nil, err
	}
	newB, err := r.Content(c.New)
	if err != nil {
		return nil, err
	}
	large := c.Old != nil && c.Old.Size > MaxDiffSize || c.New != nil && c.New.Size > MaxDiffSize
	if large || IsBinary(oldB) || IsBinary(newB) {
		p.Binary = true
		p.Stat.Binary = true
		h("Binary files %s and %s differ", side("a", c.Path, c.Old), side("b", c.Path, c.New))
		return done()
	}
	p.Hunks, p.Stat = unified(string(oldB), string(newB), 3)
	if len(p.Hunks) > 0 {
		// Without hunks (an empty file added or deleted) git prints no
		// file lines either.
		h("--- %s", side("a", c.Path, c.Old))
		h("+++ %s", side("b", c.Path, c.New))
	}
	return done()
}

// xattrLines lists the extended attributes one side has and the other
// has not, or holds another value for, one header line each: git has no
// xattrs, and an agent's security.capability or user.* attribute is as
// much a change as a mode bit. Names are the agent's and quoted.
func xattrLines(old, new *objects.Entry) []string {
	var a, b []objects.Xattr
	if old != nil {
		a = old.Xattrs
	}
	if new != nil {
		b = new.Xattrs
	}
	byName := make(map[string][]byte, len(a))
	for _, x := range a {
		byName[x.Name] = x.Value
	}
	var lines []string
	for _, x := range b {
		was, ok := byName[x.Name]
		switch {
		case !ok:
			lines = append(lines, fmt.Sprintf("new xattr %s (%s)", QuotePath(x.Name), plural(len(x.Value), "byte")))
		case !bytes.Equal(was, x.Value):
			lines = append(lines, fmt.Sprintf("changed xattr %s (%s)", QuotePath(x.Name), plural(len(x.Value), "byte")))
		}
		delete(byName, x.Name)
	}
	for _, x := range a {
		if _, gone := byName[x.Name]; gone {
			lines = append(lines, fmt.Sprintf("deleted xattr %s", QuotePath(x.Name)))
		}
	}
	return lines
}

// plural is "1 byte" or "n bytes".
func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

func side(prefix, path string, e *objects.Entry) string {
	if e == nil {
		return "/dev/null"
	}
	return QuotePath(prefix + "/" + path)
}

type diffLine struct {
	op   byte // ' ', '+', '-'
	text string
}

// splitLines cuts text after each newline; a last line without one is
// kept as it is.
func splitLines(text string) []string {
	parts := strings.SplitAfter(text, "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// lineDiff lists b as a's lines kept, deleted and added. The lines both
// share at the start and at the end are taken off before go-diff sees the
// rest, as git's xdiff does: go-diff hashes every line of both texts, and
// a one-line change to a long file otherwise cost a diff its largest part.
// go-diff trims the same lines itself, but may then slide an ambiguous
// edit into them: the result can align such an edit differently, never
// with more lines changed (TestLineDiff).
func lineDiff(a, b string) []diffLine {
	la, lb := splitLines(a), splitLines(b)
	pre := 0
	for pre < len(la) && pre < len(lb) && la[pre] == lb[pre] {
		pre++
	}
	suf := 0
	for suf < len(la)-pre && suf < len(lb)-pre && la[len(la)-1-suf] == lb[len(lb)-1-suf] {
		suf++
	}
	all := make([]diffLine, 0, len(la)+len(lb)-pre-suf)
	for _, l := range la[:pre] {
		all = append(all, diffLine{' ', l})
	}
	midA, midB := strings.Join(la[pre:len(la)-suf], ""), strings.Join(lb[pre:len(lb)-suf], "")
	if distinctLines(la[pre:len(la)-suf], lb[pre:len(lb)-suf]) > maxDiffLines {
		// go-diff numbers the distinct lines as runes and panics past
		// the last one (an agent's file of 1.1M distinct lines crashed
		// art diff): so many are shown replaced whole, a correct diff if
		// not the smallest.
		for _, l := range la[pre : len(la)-suf] {
			all = append(all, diffLine{'-', l})
		}
		for _, l := range lb[pre : len(lb)-suf] {
			all = append(all, diffLine{'+', l})
		}
	} else if midA != "" || midB != "" {
		ma, mb := la[pre:len(la)-suf], lb[pre:len(lb)-suf]
		if len(ma)+len(mb) <= anchorAbove {
			all = goDiff(all, midA, midB)
		} else {
			// A long middle is cut at the lines that occur once on each
			// side, in the longest run that keeps their order (patience
			// diff's anchors), and each piece between them diffed alone:
			// go-diff on the whole took time growing with the square of
			// the lines (2 s for 100k lines, every 8th changed) and, past
			// its one-second timeout, gave a coarser diff that depended
			// on the machine's load.
			i, j := 0, 0
			budget := maxDiffWork
			for _, an := range uniqueAnchors(ma, mb) {
				all = diffPiece(all, ma[i:an[0]], mb[j:an[1]], &budget)
				all = append(all, diffLine{' ', ma[an[0]]})
				i, j = an[0]+1, an[1]+1
			}
			all = diffPiece(all, ma[i:], mb[j:], &budget)
		}
	}
	for _, l := range la[len(la)-suf:] {
		all = append(all, diffLine{' ', l})
	}
	return all
}

// anchorAbove is the number of lines (both sides) above which a diff is
// cut at unique lines first (lineDiff).
const anchorAbove = 4096

// maxPieceProduct bounds a piece between anchors that go-diff gets whole
// (lines of one side times the other's): its time grows with the lines
// times the edits. A larger piece with no line unique to both sides is
// shown replaced whole, a correct diff if not the smallest.
const maxPieceProduct = 1 << 28

// goDiff appends go-diff's line diff of a and b to all. No timeout: with
// one, the result depended on the machine's speed and load.
func goDiff(all []diffLine, a, b string) []diffLine {
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = 0
	ca, cb, lines := dmp.DiffLinesToChars(a, b)
	for _, d := range dmp.DiffCharsToLines(dmp.DiffMain(ca, cb, false), lines) {
		op := byte(' ')
		switch d.Type {
		case diffmatchpatch.DiffInsert:
			op = '+'
		case diffmatchpatch.DiffDelete:
			op = '-'
		}
		for _, l := range splitLines(d.Text) {
			all = append(all, diffLine{op, l})
		}
	}
	return all
}

// maxDiffWork bounds the pieces of one diff together (the sum of their
// products): past it, the remaining pieces are shown replaced whole. Each
// piece's bound alone let a 500k-line file with a unique line every 16k
// take 29 s.
const maxDiffWork = 1 << 30

// diffPiece appends the diff of one piece between anchors, taking its
// work from budget.
func diffPiece(all []diffLine, a, b []string, budget *int) []diffLine {
	work := len(a) * len(b)
	if work > 0 && work <= maxPieceProduct {
		if work > *budget {
			work = maxPieceProduct + 1 // over budget: replaced whole
		} else {
			*budget -= work
		}
	}
	switch {
	case len(a) == 0 && len(b) == 0:
	case work > maxPieceProduct:
		for _, l := range a {
			all = append(all, diffLine{'-', l})
		}
		for _, l := range b {
			all = append(all, diffLine{'+', l})
		}
	case len(a) == 0 || len(b) == 0:
		for _, l := range a {
			all = append(all, diffLine{'-', l})
		}
		for _, l := range b {
			all = append(all, diffLine{'+', l})
		}
	default:
		all = goDiff(all, strings.Join(a, ""), strings.Join(b, ""))
	}
	return all
}

// uniqueAnchors returns index pairs (i, j) with a[i] == b[j], each line
// occurring once in a and once in b, in increasing order on both sides:
// the longest such run (patience sorting over the b positions, in a's
// order).
func uniqueAnchors(a, b []string) [][2]int {
	type seen struct{ na, nb, i, j int }
	m := make(map[string]*seen, len(a))
	for i, l := range a {
		s := m[l]
		if s == nil {
			s = &seen{}
			m[l] = s
		}
		s.na++
		s.i = i
	}
	for j, l := range b {
		if s := m[l]; s != nil {
			s.nb++
			s.j = j
		}
	}
	var cand [][2]int // in a's order
	for i, l := range a {
		if s := m[l]; s.na == 1 && s.nb == 1 && s.i == i {
			cand = append(cand, [2]int{i, s.j})
		}
	}
	// Longest increasing subsequence of the j's.
	tails := []int{}               // tails[k]: index in cand ending a run of length k+1
	prev := make([]int, len(cand)) // the run's previous element
	for c, p := range cand {
		k := sort.Search(len(tails), func(k int) bool { return cand[tails[k]][1] >= p[1] })
		if k > 0 {
			prev[c] = tails[k-1]
		} else {
			prev[c] = -1
		}
		if k == len(tails) {
			tails = append(tails, c)
		} else {
			tails[k] = c
		}
	}
	out := make([][2]int, len(tails))
	for k, c := len(tails)-1, -1; k >= 0; k-- {
		if c == -1 {
			c = tails[len(tails)-1]
		} else {
			c = prev[c]
		}
		out[k] = cand[c]
	}
	return out
}

// maxDiffLines bounds the distinct lines go-diff is given: it maps each
// to a rune, and there are 1,112,064 of those.
const maxDiffLines = 1 << 19

// distinctLines counts the different lines in a and b together, stopping
// once past maxDiffLines.
func distinctLines(a, b []string) int {
	if len(a)+len(b) <= maxDiffLines {
		return len(a) + len(b) // at most that many: no need to count
	}
	seen := make(map[string]struct{}, maxDiffLines)
	for _, side := range [][]string{a, b} {
		for _, l := range side {
			seen[l] = struct{}{}
			if len(seen) > maxDiffLines {
				return len(seen)
			}
		}
	}
	return len(seen)
}

// unified renders line diffs as hunks.
func unified(a, b string, context int) ([]string, DiffStat) {
	all := lineDiff(a, b)
	var st DiffStat
	for _, l := range all {
		switch l.op {
		case '+':
			st.Added++
		case '-':
			st.Deleted++
		}
	}
	var hunks []string
	i := 0
	// Line numbers up to all[:counted], kept as hunks go (counting from
	// the top for each hunk took time growing with their square).
	aLine, bLine, counted := 1, 1, 0
	for i < len(all) {
		for i < len(all) && all[i].op == ' ' {
			i++
		}
		if i >= len(all) {
			break
		}
		start := max(i-context, 0)
		end := i
		// Extend while changes are within 2*context of each other.
		for end < len(all) {
			if all[end].op != ' ' {
				end++
				continue
			}
			k := end
			for k < len(all) && all[k].op == ' ' {
				k++
			}
			if k < len(all) && k-end <= 2*context {
				end = k
				continue
			}
			end = min(end+context, len(all))
			break
		}
		if start < counted { // hunks do not overlap; should one, count again
			aLine, bLine, counted = 1, 1, 0
		}
		for _, l := range all[counted:start] {
			if l.op != '+' {
				aLine++
			}
			if l.op != '-' {
				bLine++
			}
		}
		counted = start
		aStart, bStart := aLine, bLine
		aN, bN := 0, 0
		var sb strings.Builder
		for _, l := range all[start:end] {
			if l.op != '+' {
				aN++
			}
			if l.op != '-' {
				bN++
			}
			sb.WriteByte(l.op)
			sb.WriteString(l.text)
			if !strings.HasSuffix(l.text, "\n") {
				sb.WriteString("\n\\ No newline at end of file\n")
			}
		}
		if aN == 0 {
			aStart--
		}
		if bN == 0 {
			bStart--
		}
		hunks = append(hunks, fmt.Sprintf("@@ -%s +%s @@\n", rng(aStart, aN), rng(bStart, bN))+sb.String())
		i = end
	}
	return hunks, st
}

func rng(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}
