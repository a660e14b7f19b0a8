package repo

import (
	"os"
	"path/filepath"
	"testing"
)

// A directory on the way to the pull's workspace (a shared directory, the
// parent another user owns) swapped for a link after CheckPullTarget
// found none: the pull must not write where that link leads (it opened
// the workspace by path, and wrote the commit into the victim's
// directory of the same name, as root).
func TestPullNotThroughSwappedAncestor(t *testing.T) {
	for _, tc := range []struct {
		name      string
		victimHas bool // the victim already holds a directory of the workspace's name
	}{
		{"victim holds ws", true},
		{"victim lacks ws", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			tmp := t.TempDir()
			share := filepath.Join(tmp, "share")
			ws := filepath.Join(share, "ws")
			victim := filepath.Join(tmp, "victim")
			for _, d := range []string{ws, victim} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.victimHas {
				os.Mkdir(filepath.Join(victim, "ws"), 0o700)
			}
			writeFiles(t, ws, map[string]string{"a": "a\n"})
			v1 := push(t, r, ws, "v1").Commit
			writeFiles(t, ws, map[string]string{"planted": "agent's\n"})
			v2 := push(t, r, ws, "v2").Commit
			pull(t, r, ws, v1)
			_, err := r.Pull(PullOptions{Dir: ws, Commit: v2, afterPlan: func() {
				if err := os.Rename(share, share+".real"); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(victim, share); err != nil {
					t.Fatal(err)
				}
			}})
			if err == nil {
				t.Errorf("pull through a swapped ancestor succeeded")
			}
			filepath.Walk(victim, func(p string, info os.FileInfo, err error) error {
				if err == nil && !info.IsDir() {
					t.Errorf("pull wrote %s, where another user's link led", p)
				}
				return nil
			})
		})
	}
}
