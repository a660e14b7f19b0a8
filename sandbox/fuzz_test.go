package sandbox

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseBinds: binds.json is read from the host, but a user may copy it
// from anywhere; parsing must never panic, and every accepted bind must
// keep the rules: an absolute, clean guest path that is not the home or
// one of its ancestors, and an absolute host path.
func FuzzParseBinds(f *testing.F) {
	for _, s := range []string{
		`[{"host": ".", "guest": "/data"}]`,
		`[{"host": "/tmp", "guest": "/mnt/x", "readonly": false}]`,
		`[{"host": "/tmp", "guest": "/home/agent"}]`,
		`[{"host": "/tmp", "guest": "relative"}]`,
		`[{"host": "/nonexistent", "guest": "/x"}]`,
		`{}`, `[`, `null`, `[{"host": "/tmp", "guest": "/a/../home"}]`,
	} {
		f.Add([]byte(s))
	}
	ws := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		binds, err := ParseBinds(data, ws)
		if err != nil {
			return
		}
		for _, b := range binds {
			if !filepath.IsAbs(b.Host) || !filepath.IsAbs(b.Guest) || filepath.Clean(b.Guest) != b.Guest {
				t.Fatalf("accepted a bind that is not absolute and clean: %+v", b)
			}
			if b.Guest == "/" || b.Guest == "/home" || b.Guest == GuestHome || strings.HasPrefix(GuestHome, b.Guest+"/") {
				t.Fatalf("accepted a bind over the home or an ancestor: %+v", b)
			}
		}
	})
}
