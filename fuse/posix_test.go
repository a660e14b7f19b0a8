package fuse

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// posixNotApplicable lists the posixtest cases that cannot apply to the
// mount, each with the reason. Everything else must pass.
var posixNotApplicable = map[string]string{
	// The case takes an F_SETLK write lock through one descriptor and
	// expects an F_SETLK read lock through a second descriptor of the SAME
	// process to fail with EAGAIN. Classic POSIX record locks belong to
	// the process, so the second lock succeeds on every filesystem (ext4
	// and tmpfs included); go-fuse's own TestAll skips it ("TODO - fix
	// this test"). TestOverlayCases/ofd_locks checks the intended
	// behaviour with open-file-description locks instead.
	"FcntlFlockLocksFile": "expects per-descriptor semantics from per-process POSIX locks; fails on ext4 too",
}

func posixCases(t *testing.T) []string {
	var names []string
	for name := range posixtest.All {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// TestPosix runs every go-fuse posixtest case against a fresh mount whose
// lower layer is empty.
func TestPosix(t *testing.T) {
	requireFUSE(t)
	for _, name := range posixCases(t) {
		fn := posixtest.All[name]
		t.Run(name, func(t *testing.T) {
			if why, ok := posixNotApplicable[name]; ok {
				t.Skip("not applicable: " + why)
			}
			m := newTestMount(t, nil)
			fn(t, m.Dir)
		})
	}
}

// lowerPosixNames are the names the posixtest cases create; the lower
// layer of TestPosixLower holds them so the cases run over whiteouts,
// re-created files and opaque directories.
var lowerPosixNames = []string{
	"file", "file.txt", "file.bin", "link", "target", "src", "dst", "tmpfile", "test",
	"file0", "file1", "0", "5", "9", "OpenSymlinkRace", "OpenSymlinkRace.tmp",
}

// setupPosixLower prepares a lower layer: a workspace with unrelated
// content and a directory t/ holding entries named like the ones the
// posixtest cases create (files, and directories with children).
func setupPosixLower(dir string) {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "README"), []byte("lower readme\n"), 0o644))
	must(os.MkdirAll(filepath.Join(dir, "src", "pkg"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "src", "pkg", "a.go"), []byte("package pkg\n"), 0o644))
	td := filepath.Join(dir, "t")
	must(os.MkdirAll(td, 0o755))
	for i, n := range lowerPosixNames {
		must(os.WriteFile(filepath.Join(td, n), []byte("lower content of "+n+"\n"+string(make([]byte, i*1000))), 0o640))
	}
	for _, d := range []string{"dir", "dir1", "dir2", "ttt"} {
		must(os.MkdirAll(filepath.Join(td, d, "sub"), 0o750))
		for _, c := range []string{"renamed", "file1", "1", "2", "x"} {
			must(os.WriteFile(filepath.Join(td, d, c), []byte("lower child "+c), 0o644))
		}
	}
	must(os.Symlink("../README", filepath.Join(td, "lnk")))
}

// TestPosixLower runs every posixtest case in a lower directory whose
// entries (named like what the cases create) were deleted first, next to
// unrelated lower content that must stay intact.
func TestPosixLower(t *testing.T) {
	requireFUSE(t)
	for _, name := range posixCases(t) {
		fn := posixtest.All[name]
		t.Run(name, func(t *testing.T) {
			if why, ok := posixNotApplicable[name]; ok {
				t.Skip("not applicable: " + why)
			}
			m := newTestMount(t, setupPosixLower)
			dir := m.WS("t")
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) == 0 {
				t.Fatal("lower directory t/ is empty")
			}
			for _, e := range ents {
				if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
			fn(t, dir)
			// The rest of the lower layer is untouched.
			if b, err := os.ReadFile(m.WS("src", "pkg", "a.go")); err != nil || string(b) != "package pkg\n" {
				t.Errorf("lower file after the case: %q, %v", b, err)
			}
		})
	}
}
