package repo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/artproject/art/internal/owner"
	"github.com/artproject/art/internal/testenv"
	"github.com/artproject/art/objects"
)

// A directory of the workspace that another user (the workspace's owner,
// when root runs art on it) swaps for a link after the scan of its
// parent saw a directory there: the scan of what lies below must not go
// through the link (it listed, stat'ed and read the link targets of the
// directory the link led to, which push then recorded and status listed).
func TestScanDirNotThroughSwappedLink(t *testing.T) {
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	victim := filepath.Join(tmp, "private")
	for _, d := range []string{filepath.Join(ws, "a", "b"), filepath.Join(victim, "b")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(ws, "a", "b", "mine"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(victim, "b", "secret-name"), nil, 0o600)
	os.Symlink("/etc/shadow", filepath.Join(victim, "b", "secret-link"))
	for _, tc := range []struct {
		name, rel string
		swap      func() error
	}{
		{"ancestor swapped", "a/b", func() error {
			if err := os.Rename(filepath.Join(ws, "a"), filepath.Join(ws, "a.real")); err != nil {
				return err
			}
			return os.Symlink(victim, filepath.Join(ws, "a"))
		}},
		{"directory itself swapped", "a.real/b", func() error {
			if err := os.Rename(filepath.Join(ws, "a.real", "b"), filepath.Join(ws, "a.real", "b.real")); err != nil {
				return err
			}
			return os.Symlink(filepath.Join(victim, "b"), filepath.Join(ws, "a.real", "b"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := newScanner(nil, ws, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.swap(); err != nil {
				t.Fatal(err)
			}
			d := &hostEntry{rel: tc.rel, typ: objects.TypeDir}
			err = s.scanDir(d)
			for _, k := range d.kids {
				t.Errorf("scanned %s (target %q) through the link", k.rel, k.target)
			}
			if err == nil || !errors.Is(err, errChanged) {
				t.Errorf("scanDir(%s) = %v; want it to say the workspace changed", tc.rel, err)
			}
		})
	}
}

// The workspace reached, after CheckWorkspaceDir's look, through a
// directory above it that another user swapped for their link: as root,
// the scan and the reads of file contents must not follow it (push then
// recorded whatever directory of the workspace's name the link led to).
func TestWorkspaceNotOpenedThroughForeignLinkAfterCheck(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root: another user's links are what root must not follow")
	}
	tmp := t.TempDir()
	private := filepath.Join(tmp, "private", "ws")
	if err := os.MkdirAll(private, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(private, "secret"), []byte("root only"), 0o600)
	shared := filepath.Join(tmp, "shared")
	testenv.SymlinkOwned(t, filepath.Join(tmp, "private"), shared, 4242)
	ws := filepath.Join(shared, "ws")
	s, err := newScanner(nil, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	if root, err := s.scan(); err == nil || !errors.Is(err, owner.ErrForeignLink) {
		t.Errorf("scan through another user's link = %v, %v; want a refusal", root, err)
	}
	if hr, err := openHostRoot(ws); err == nil || !errors.Is(err, owner.ErrForeignLink) {
		if err == nil {
			hr.close()
		}
		t.Errorf("openHostRoot through another user's link = %v; want a refusal", err)
	}
	// Root's own link is followed, as before.
	own := filepath.Join(tmp, "own")
	if err := os.Symlink(filepath.Join(tmp, "private"), own); err != nil {
		t.Fatal(err)
	}
	if s, err = newScanner(nil, filepath.Join(own, "ws"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.scan(); err != nil {
		t.Errorf("scan through root's own link: %v", err)
	}
}
