package overlay_test

import (
	"testing"

	"github.com/artproject/art/overlay"
)

// TestPendingChanges: art status counts the paths a worktree changed, as
// a user counts them, not its upper-layer rows: one new file showed as 3
// pending changes (its node and entry, and the entry of the directory
// copied up to hold it).
func TestPendingChanges(t *testing.T) {
	mode := func(m uint32) *uint32 { return &m }
	tests := []struct {
		name string
		do   func(e *env)
		want int
	}{
		{"nothing", func(e *env) {}, 0},
		{"one new file", func(e *env) { e.write("ws", "new.txt", "new") }, 1},
		{"a new file deep down", func(e *env) { e.write("ws/b/deep/er", "new", "new") }, 1},
		{"one file rewritten", func(e *env) {
			ino := e.ino("ws/a/x")
			if err := e.fs.Open(ino, true); err != nil {
				e.t.Fatal(err)
			}
			if _, err := e.fs.Write(ino, []byte("upper"), 0); err != nil {
				e.t.Fatal(err)
			}
			e.fs.Flush(ino)
			e.fs.Released(ino)
		}, 1},
		{"one file removed", func(e *env) {
			if err := e.fs.Unlink(e.ino("ws/a"), "x"); err != nil {
				e.t.Fatal(err)
			}
		}, 1},
		{"a directory's mode", func(e *env) {
			if _, err := e.fs.Setattr(e.ino("ws/a/sub"), overlay.SetAttr{Mode: mode(0o700)}); err != nil {
				e.t.Fatal(err)
			}
		}, 1},
		{"a file renamed: removed and added", func(e *env) {
			if err := e.fs.Rename(e.ino("ws"), "top", e.ino("ws/a"), "top2", 0); err != nil {
				e.t.Fatal(err)
			}
		}, 2},
		{"new, rewritten, removed, chmod", func(e *env) {
			e.write("ws", "new.txt", "new")
			// Replaced: removed, and made again under its name.
			if err := e.fs.Unlink(e.ino("ws/a"), "x"); err != nil {
				e.t.Fatal(err)
			}
			e.write("ws/a", "x", "replaced")
			if err := e.fs.Unlink(e.ino("ws/a/sub"), "y"); err != nil {
				e.t.Fatal(err)
			}
			if _, err := e.fs.Setattr(e.ino("ws/b"), overlay.SetAttr{Mode: mode(0o711)}); err != nil {
				e.t.Fatal(err)
			}
		}, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, lower)
			tc.do(e)
			// What a session wrote is in SQLite once the overlay
			// closes (or its journal is applied).
			if err := e.fs.Close(); err != nil {
				t.Fatal(err)
			}
			e.fs = nil
			got, err := e.r.PendingChanges(e.wt)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("PendingChanges = %d, want %d", got, tc.want)
			}
		})
	}
}
