package repo

import (
	"os"
	"path/filepath"
	"strings"
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
		victimHas bool   // the victim already holds a directory of the workspace's name
		want      string // the refusal says why
	}{
		{"victim holds ws", true, "replaced by a symbolic link since the pull began"},
		{"victim lacks ws", false, "replaced by a symbolic link since the pull began"},
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
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("pull through a swapped ancestor: %v; want a refusal saying %q", err, tc.want)
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

// mkdirAllNoSymlinks makes what is missing and goes through no link: the
// race it closes (a parent swapped after CheckPullTarget) has no hook, so
// it is tested on its own.
func TestMkdirAllNoSymlinks(t *testing.T) {
	tmp := t.TempDir()
	if err := os.Mkdir(filepath.Join(tmp, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(tmp, "real"), filepath.Join(tmp, "link")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(tmp, "file"), nil, 0o644)
	for _, tc := range []struct {
		rel     string
		refused bool
	}{
		{"new/a/b", false},
		{"real", false},
		{"link/ws", true},
		{"link", true},
		{"file/ws", true},
	} {
		err := mkdirAllNoSymlinks(filepath.Join(tmp, tc.rel))
		if tc.refused {
			if err == nil || !strings.Contains(err.Error(), "symbolic link or not a directory") {
				t.Errorf("%s: %v; want a refusal", tc.rel, err)
			}
			continue
		}
		if st, serr := os.Lstat(filepath.Join(tmp, tc.rel)); err != nil || serr != nil || !st.IsDir() {
			t.Errorf("%s: %v (%v); want the directory made", tc.rel, err, serr)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "real", "ws")); err == nil {
		t.Errorf("made real/ws through the link")
	}
}
