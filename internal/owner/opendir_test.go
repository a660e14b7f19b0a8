package owner

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/artproject/art/internal/testenv"
)

// foreignUID owns the links "another local user" made in these tests;
// no account needs to exist for it.
const foreignUID = 4242

func TestOpenDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root: the links of another user are what root must not follow")
	}
	tmp := t.TempDir()
	real := filepath.Join(tmp, "real")
	if err := os.MkdirAll(filepath.Join(real, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.SymlinkOwned(t, real, filepath.Join(tmp, "rootabs"), 0)
	testenv.SymlinkOwned(t, "real/sub", filepath.Join(tmp, "rootrel"), 0)
	testenv.SymlinkOwned(t, "rootabs", filepath.Join(tmp, "chain"), 0)
	testenv.SymlinkOwned(t, real, filepath.Join(tmp, "foreign"), foreignUID)
	testenv.SymlinkOwned(t, "../foreign", filepath.Join(real, "up"), 0) // a trusted link leading to a foreign one
	testenv.SymlinkOwned(t, "loop", filepath.Join(tmp, "loop"), 0)
	if err := os.WriteFile(filepath.Join(tmp, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want string // the directory it must open, "" for an error
		err  error
	}{
		{path: real, want: real},
		{path: filepath.Join(real, "sub", ".."), want: real},
		{path: filepath.Join(tmp, "rootabs", "sub"), want: filepath.Join(real, "sub")},
		{path: filepath.Join(tmp, "rootrel"), want: filepath.Join(real, "sub")},
		{path: filepath.Join(tmp, "chain", "sub", ".."), want: real},
		{path: filepath.Join(tmp, "foreign"), err: ErrForeignLink},
		{path: filepath.Join(tmp, "foreign", "sub"), err: ErrForeignLink},
		{path: filepath.Join(real, "up", "sub"), err: ErrForeignLink},
		{path: filepath.Join(tmp, "loop"), err: unix.ELOOP},
		{path: filepath.Join(tmp, "file"), err: unix.ENOTDIR},
		{path: filepath.Join(tmp, "missing"), err: unix.ENOENT},
	} {
		fd, err := OpenDir(tc.path)
		if tc.err != nil {
			if err == nil {
				unix.Close(fd)
				t.Errorf("OpenDir(%s) succeeded, want %v", tc.path, tc.err)
			} else if !errors.Is(err, tc.err) {
				t.Errorf("OpenDir(%s) = %v, want %v", tc.path, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("OpenDir(%s): %v", tc.path, err)
			continue
		}
		got, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		unix.Close(fd)
		if got != tc.want {
			t.Errorf("OpenDir(%s) opened %s, want %s", tc.path, got, tc.want)
		}
	}
}
