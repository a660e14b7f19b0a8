package repo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

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
