package cmd

import (
	"testing"

	"github.com/artproject/art/repo"
)

// TestInterruptedSession: what a recovery records for a worktree's session
// record. A session that ended, and only failed to be recorded (a full
// disk), keeps how it ended; it was recorded as "interrupted", an agent's
// exit 0 lost.
func TestInterruptedSession(t *testing.T) {
	for _, tc := range []struct {
		name, kind, session string
		wantStatus, wantMsg string
		wantExit            int
	}{
		{"killed during the run", "run", `{"mode":"run","argv":["sh","-c","make"],"start":5}`, "interrupted", "run (interrupted): sh -c make", 0},
		{"ended, not recorded", "run", `{"mode":"run","argv":["agent"],"start":5,"end":9,"status":"exited","exit_code":3}`, "exited", "run: agent", 3},
		{"ended, not recorded, with -M", "run", `{"mode":"run","argv":["agent"],"start":5,"end":9,"status":"exited","exit_code":0,"art_message":"attempt 2"}`, "exited", "attempt 2", 0},
		// A mount resumed it since, and died: the mount's work is not
		// the run's, ended as it was.
		{"ended run, resumed by a mount", "mount", `{"mode":"run","argv":["agent"],"start":5,"end":9,"status":"exited","exit_code":3}`, "interrupted", "run (interrupted): agent", 3},
		{"a mount", "mount", ``, "interrupted", "mount session (interrupted)", 0},
		{"a damaged record", "run", `{not json`, "interrupted", "run session (interrupted)", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, msg := interruptedSession(&repo.Worktree{Kind: tc.kind, Session: tc.session, Created: 1})
			if s.Status != tc.wantStatus || msg != tc.wantMsg || s.ExitCode != tc.wantExit {
				t.Errorf("got %+v %q", s, msg)
			}
		})
	}
}
