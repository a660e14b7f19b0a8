package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artproject/art/internal/testenv"
)

// As root, a link another user owns (their /tmp/art.log -> /etc/shadow,
// a link in a shared directory) is not followed to a --trace-log or a
// bind's host path: art resolves links itself, so the kernel's
// fs.protected_symlinks never sees it, and root truncated and overwrote
// the file the link named. Root's own links, and those of the user who
// called sudo, still lead where they lead.
func TestResolveRefusesAnotherUsersLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root, to give a link to another user")
	}
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	victim := filepath.Join(tmp, "victim")
	os.Mkdir(ws, 0o755)
	os.WriteFile(victim, []byte("precious\n"), 0o600)
	for _, tc := range []struct {
		name    string
		owner   int
		sudoUID string
		refused bool
	}{
		{"another user's link", 4242, "", true},
		{"root's own link", 0, "", false},
		{"the sudo caller's link", 4242, "4242", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SUDO_UID", tc.sudoUID)
			link := filepath.Join(t.TempDir(), "art.log")
			testenv.SymlinkOwned(t, victim, link, tc.owner)
			for _, p := range []string{link, filepath.Join(filepath.Dir(link), ".", "art.log")} {
				got, err := ResolveAvoidingAgentLinks(p, ws, nil, true)
				if tc.refused {
					if err == nil || !strings.Contains(err.Error(), "uid 4242") {
						t.Errorf("Resolve(%s) = %q, %v; want a refusal naming the owner", p, got, err)
					}
					continue
				}
				if err != nil || got != victim {
					t.Errorf("Resolve(%s) = %q, %v; want %s", p, got, err, victim)
				}
			}
		})
	}
}
