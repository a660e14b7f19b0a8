package cmd

import "testing"

// The policy line of art show: a policy without rules (the read-only
// preset) printed "default read; rules: ; from ".
func TestPolicySummary(t *testing.T) {
	for _, tc := range []struct {
		name, raw, want string
	}{
		{"no rules", `{"default":"read","rules":[]}`, "default read; no rules"},
		{"rules absent", `{"default":"write"}`, "default write; no rules"},
		{"one source", `{"default":"write","rules":[{"pattern":".env","permission":"none","source":"preset agent-safe"},{"pattern":".git/hooks/","permission":"read","source":"preset agent-safe"}]}`,
			"default write; rules: 1 none, 1 read; from preset agent-safe"},
		{"two sources", `{"default":"read","rules":[{"pattern":"a","permission":"write","source":"--allow"},{"pattern":"b","permission":"none","source":"/ws/.art/config/policy.json"}]}`,
			"default read; rules: 1 none, 1 write; from --allow, /ws/.art/config/policy.json"},
		{"unreadable", `{`, "unreadable"},
	} {
		if got := policySummary([]byte(tc.raw)); got != tc.want {
			t.Errorf("%s: policySummary(%s) = %q, want %q", tc.name, tc.raw, got, tc.want)
		}
	}
}
