package policy

import "testing"

// benchPolicy is a realistic 20-rule policy: the development preset's secrets
// plus a few project rules.
func benchPolicy(tb testing.TB) *Policy {
	tb.Helper()
	_, dev, err := Preset("development")
	if err != nil {
		tb.Fatal(err)
	}
	extra := rules(tb, "policy.json",
		"/ws/vendor/=read", "*.lock=read", "/ws/build/**=write", "node_modules/=write",
		".git/**=read", ".git/config=read")
	p := mustNew(tb, Write, dev, extra)
	if n := len(p.Rules()); n != 20 {
		tb.Fatalf("%d rules, want 20", n)
	}
	return p
}

var benchPaths = []struct {
	path  string
	isDir bool
}{
	{"ws/src/internal/server/handler.go", false},
	{"ws/README.md", false},
	{"ws/.env", false},
	{"ws/src", true},
	{".ssh/id_rsa", false},
	{"ws/node_modules/left-pad/index.js", false},
	{"ws/.git/objects/ab/cdef0123", false},
	{".cache/go-build/00/0011223344-d", false},
}

var sink Perm

func BenchmarkDecide20Rules(b *testing.B) {
	p := benchPolicy(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bp := &benchPaths[i%len(benchPaths)]
		sink = p.Decide(bp.path, bp.isDir)
	}
}

func BenchmarkDecideAgentSafe(b *testing.B) {
	_, rs, _ := Preset("agent-safe")
	p := mustNew(b, Write, rs)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bp := &benchPaths[i%len(benchPaths)]
		sink = p.Decide(bp.path, bp.isDir)
	}
}

func BenchmarkDecideFullAccess(b *testing.B) {
	p := mustNew(b, Write)
	for i := 0; i < b.N; i++ {
		sink = p.Decide(benchPaths[i%len(benchPaths)].path, false)
	}
}

func BenchmarkMayRestrictBelow(b *testing.B) {
	p := benchPolicy(b)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p.MayRestrictBelow("ws/src/internal")
	}
}
