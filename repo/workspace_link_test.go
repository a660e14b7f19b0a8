package repo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artproject/art/internal/testenv"
)

// As root, a workspace named through another user's link (their shared
// directory, replaced by a link to a directory of the workspace's name
// elsewhere) is refused: push stored what the link led to. Root's own
// links, and the sudo caller's, still lead where they lead.
func TestCheckWorkspaceDirRefusesAnotherUsersLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root, to give a link to another user")
	}
	for _, tc := range []struct {
		name    string
		owner   int
		sudoUID string
		refused bool
	}{
		{"another user's link above the workspace", 4242, "", true},
		{"root's own link", 0, "", false},
		{"the sudo caller's link", 4242, "4242", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SUDO_UID", tc.sudoUID)
			tmp := t.TempDir()
			victimWS := filepath.Join(tmp, "private", "ws")
			if err := os.MkdirAll(victimWS, 0o700); err != nil {
				t.Fatal(err)
			}
			share := filepath.Join(tmp, "share")
			testenv.SymlinkOwned(t, filepath.Join(tmp, "private"), share, tc.owner)
			got, err := CheckWorkspaceDir(filepath.Join(share, "ws"))
			if tc.refused {
				if err == nil || !strings.Contains(err.Error(), "uid 4242") {
					t.Fatalf("CheckWorkspaceDir = %q, %v; want a refusal naming the owner", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckWorkspaceDir: %v", err)
			}
		})
	}
}
