//go:build linux

package tracer

//go:generate go run ./internal/gensysnum

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// personality is one system call ABI a tracee may use: the native one, and
// on x86_64 also x32 (same audit arch, numbers with __X32_SYSCALL_BIT) and
// i386; on arm64 also 32-bit ARM.
type personality struct {
	name      string   // "" for native, else "x32", "i386", "arm"
	auditArch uint32   // AUDIT_ARCH_*
	nrBase    uint32   // added to table indexes to get the syscall number
	names     []string // generated table, indexed by number - nrBase
	byName    map[string]int
	specs     []*spec // decoding specs, indexed like names
}

func (p *personality) init() {
	p.byName = make(map[string]int, len(p.names))
	p.specs = make([]*spec, len(p.names))
	for i, n := range p.names {
		if n == "" {
			continue
		}
		p.byName[n] = i + int(p.nrBase)
		p.specs[i] = specFor(n)
	}
}

// lookupNr returns the name and decoding spec of syscall nr.
func (p *personality) lookupNr(nr uint64) (string, *spec) {
	i := nr - uint64(p.nrBase)
	if nr >= uint64(p.nrBase) && i < uint64(len(p.names)) && p.names[i] != "" {
		return p.names[i], p.specs[i]
	}
	return "", nil
}

// tables returns the personalities with their lookup tables built. They
// are built on first use, not at package initialization: every art
// command links the tracer, few trace, and the tables cost a millisecond
// and thousands of allocations at each start.
var tables = sync.OnceValue(func() []*personality {
	for _, p := range personalities {
		p.init()
	}
	return personalities
})

// native is the personality of the architecture the tracer was built for.
func native() *personality { return tables()[0] }

// personalityOf picks the personality of a syscall stop from the audit arch
// and number reported by PTRACE_GET_SYSCALL_INFO.
func personalityOf(arch uint32, nr uint64) *personality {
	for _, p := range tables() {
		if p.auditArch == arch && (p.nrBase == 0 || nr&uint64(p.nrBase) != 0) {
			if p.nrBase == 0 && x32Bit != 0 && nr&x32Bit != 0 {
				continue
			}
			return p
		}
	}
	return nil
}

// SyscallName returns the name of native system call nr, or "" if nr is not
// a system call of this architecture.
func SyscallName(nr int) string {
	if nr < 0 {
		return ""
	}
	n, _ := native().lookupNr(uint64(nr))
	return n
}

// SyscallNames returns every native system call name, sorted.
func SyscallNames() []string {
	var out []string
	for _, n := range native().names {
		if n != "" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Lookup returns the native system call numbers of names, in order. Names
// are case-insensitive and may be separated by commas within one element
// ("openat,execve"). Unknown names give one error naming each of them with
// the closest known names.
func Lookup(names []string) ([]int, error) {
	p := native()
	var nrs []int
	var bad []string
	for _, n := range splitNames(names) {
		nr, ok := p.byName[n]
		if !ok {
			msg := fmt.Sprintf("%q", n)
			if s := suggest(n, p.byName); len(s) > 0 {
				msg += " (did you mean " + strings.Join(s, ", ") + "?)"
			}
			bad = append(bad, msg)
			continue
		}
		nrs = append(nrs, nr)
	}
	if len(bad) > 0 {
		what := "syscall"
		if len(bad) > 1 {
			what = "syscalls"
		}
		return nil, fmt.Errorf("tracer: unknown %s on %s: %s", what, goarch, strings.Join(bad, "; "))
	}
	return nrs, nil
}

func splitNames(names []string) []string {
	var out []string
	for _, n := range names {
		for _, f := range strings.Split(n, ",") {
			if f = strings.ToLower(strings.TrimSpace(f)); f != "" {
				out = append(out, f)
			}
		}
	}
	return out
}

// suggest returns up to 5 known names close to n: by edit distance, or
// containing n (or contained in it).
func suggest(n string, known map[string]int) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	limit := 2
	if len(n) >= 8 {
		limit = 3
	}
	for k := range known {
		d := editDistance(n, k)
		switch {
		case d <= limit:
		case len(n) >= 3 && (strings.Contains(k, n) || strings.Contains(n, k) && len(k) >= 4):
			d = limit + 1 + abs(len(k)-len(n))
		default:
			continue
		}
		cs = append(cs, cand{k, d})
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].d != cs[j].d {
			return cs[i].d < cs[j].d
		}
		return cs[i].name < cs[j].name
	})
	var out []string
	for i := 0; i < len(cs) && i < 5; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
