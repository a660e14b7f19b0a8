package fuse

import (
	"errors"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/artproject/art/internal/owner"
	"github.com/artproject/art/internal/testenv"
	"github.com/artproject/art/overlay"
	"github.com/artproject/art/repo"
)

// foreignUID owns the links "another local user" made in these tests;
// no account needs to exist for it.
const foreignUID = 4242

// requireRoot skips tests of what root's art does with other users'
// paths.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root: the links of another user are what root must not follow")
	}
}

// TestMountNotThroughForeignLink is the end of the race in which another
// user swaps the empty directory root's art checked for a link of theirs
// (RENAME_EXCHANGE in a loop): the mount must not land where the link
// leads (the victim, /etc in real life), in any transport.
func TestMountNotThroughForeignLink(t *testing.T) {
	requireRoot(t)
	requireFUSE(t)
	for _, transport := range []string{"classic", ""} {
		for _, tc := range []struct {
			name   string
			link   func(share, victim string) string // makes the links, returns the mount point to use
			refuse bool
		}{
			{"foreign mount point", func(share, victim string) string {
				testenv.SymlinkOwned(t, victim, filepath.Join(share, "mnt"), foreignUID)
				return filepath.Join(share, "mnt")
			}, true},
			{"foreign ancestor", func(share, victim string) string {
				testenv.SymlinkOwned(t, filepath.Dir(victim), filepath.Join(share, "d"), foreignUID)
				return filepath.Join(share, "d", filepath.Base(victim))
			}, true},
			{"root's own link", func(share, victim string) string {
				testenv.SymlinkOwned(t, victim, filepath.Join(share, "mnt"), 0)
				return filepath.Join(share, "mnt")
			}, false},
		} {
			t.Run(transport+"/"+tc.name, func(t *testing.T) {
				t.Setenv("ART_FUSE_TRANSPORT", transport)
				tmp := t.TempDir()
				share, victim := filepath.Join(tmp, "share"), filepath.Join(tmp, "v", "victim")
				for _, d := range []string{share, victim} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				mp := tc.link(share, victim)
				r, err := repo.Init(filepath.Join(tmp, "repo", "art.db"))
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				emptyCommit(t, r, "main")
				wt, _, err := r.CreateWorktree("main", "mount", mp, "")
				if err != nil {
					t.Fatal(err)
				}
				ofs, err := overlay.Open(r, wt, overlay.Options{Log: log.New(io.Discard, "", 0)})
				if err != nil {
					t.Fatal(err)
				}
				defer ofs.Close()
				srv, err := Mount(mp, ofs, Options{Log: log.New(io.Discard, "", 0)})
				if mounted, _ := IsMountpoint(victim); mounted && tc.refuse {
					abortMount(victim)
					t.Fatalf("root mounted over %s, where another user's link led (Mount error: %v)", victim, err)
				}
				if tc.refuse {
					if err == nil || !errors.Is(err, owner.ErrForeignLink) {
						t.Errorf("Mount(%s) = %v, want a refusal of the link", mp, err)
					}
					if srv != nil {
						srv.Unmount()
						srv.Wait()
					}
					return
				}
				if err != nil {
					t.Fatalf("Mount through root's own link: %v", err)
				}
				if mounted, _ := IsMountpoint(victim); !mounted {
					t.Errorf("root's own link: %s not mounted", victim)
				}
				if err := srv.Unmount(); err != nil {
					t.Errorf("Unmount: %v", err)
				}
				srv.Wait()
			})
		}
	}
}

// TestUnmountNotThroughForeignLink: Abort (and every unmount of art's) at
// a path whose directory another user swapped for a link must not detach
// the mount that link leads to.
func TestUnmountNotThroughForeignLink(t *testing.T) {
	requireRoot(t)
	tmp := t.TempDir()
	victim := filepath.Join(tmp, "v", "mnt")
	share := filepath.Join(tmp, "share")
	for _, d := range []string{victim, share} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("artvictim", victim, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("skipping: cannot mount a tmpfs (%v); the test needs one as the host mount art must not touch", err)
	}
	defer unix.Unmount(victim, unix.MNT_DETACH)
	testenv.SymlinkOwned(t, filepath.Dir(victim), filepath.Join(share, "d"), foreignUID)
	testenv.SymlinkOwned(t, victim, filepath.Join(share, "mnt"), foreignUID)
	for _, mp := range []string{filepath.Join(share, "d", "mnt"), filepath.Join(share, "mnt")} {
		for name, unmount := range map[string]func(){
			"Abort":        func() { Abort(mp) },
			"TryUnmount":   func() { (&Server{mp: mp}).TryUnmount() },
			"CleanupStale": func() { CleanupStale(mp) },
		} {
			unmount()
			if mounted, _ := IsMountpoint(victim); !mounted {
				t.Fatalf("%s(%s) unmounted %s, where another user's link led", name, mp, victim)
			}
		}
	}
}

// TestCheckMountpointThroughOwnLink: regression. CheckMountpoint looked a
// mount point given through the caller's own link up in the mount table
// as given, which names the directory the link leads to: an empty mount
// there passed as a free mount point, and art mounted over it.
func TestCheckMountpointThroughOwnLink(t *testing.T) {
	requireRoot(t)
	tmp := t.TempDir()
	real := filepath.Join(tmp, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("artcheck", real, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("skipping: cannot mount a tmpfs (%v); the test needs one as the host mount art must not touch", err)
	}
	defer unix.Unmount(real, unix.MNT_DETACH)
	if err := os.Mkdir(filepath.Join(tmp, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, link string }{
		{path: real},
		{path: filepath.Join(tmp, "abs"), link: real},
		{path: filepath.Join(tmp, "sub", "rel"), link: "../real"},
	} {
		if tc.link != "" {
			if err := os.Symlink(tc.link, tc.path); err != nil {
				t.Fatal(err)
			}
		}
		_, err := CheckMountpoint(tc.path)
		if err == nil || !strings.Contains(err.Error(), "already a mount point") {
			t.Errorf("CheckMountpoint(%s) of a mounted directory = %v, want 'already a mount point'", tc.path, err)
		}
	}
}
