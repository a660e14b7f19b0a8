package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// art init -m DIR as root in a directory another user controls: a .art
// they planted, a link to any directory of the host or a directory of
// their own, is refused and nothing is created (it made art.db and
// .gitignore where the link led, or in their directory, where they could
// replace the repository or plant its -wal).
func TestInitRefusesPlantedArt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root, to give files to another user")
	}
	for _, tc := range []struct {
		name  string
		plant func(ws, victim string) error
		want  string
	}{
		{"link to a victim directory", func(ws, victim string) error {
			return os.Symlink(victim, filepath.Join(ws, ".art"))
		}, "symbolic link"},
		{"another user's .art", func(ws, victim string) error {
			if err := os.Mkdir(filepath.Join(ws, ".art"), 0o777); err != nil {
				return err
			}
			return os.Chown(filepath.Join(ws, ".art"), 4242, 4242)
		}, "belongs to uid 4242"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			ws, victim := filepath.Join(tmp, "ws"), filepath.Join(tmp, "victim")
			for _, d := range []string{ws, victim} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := tc.plant(ws, victim); err != nil {
				t.Fatal(err)
			}
			res := runArt(t, tmp, []string{"SUDO_UID=", "ART_DB="}, nil, "init", "-m", ws)
			if res.code != 1 || !strings.Contains(res.stderr, tc.want) {
				t.Errorf("art init: %v; want exit 1 and %q", res, tc.want)
			}
			for _, d := range []string{victim, filepath.Join(ws, ".art")} {
				if names, _ := os.ReadDir(d); len(names) > 0 {
					t.Errorf("art init created %s in %s", names[0].Name(), d)
				}
			}
		})
	}
}
