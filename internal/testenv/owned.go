package testenv

import (
	"os"
	"testing"
)

// SymlinkOwned makes link -> target owned by uid (and gid uid): the link
// "another local user" made, in the tests of what root's art must not
// follow. No account needs to exist for uid.
func SymlinkOwned(t testing.TB, target, link string, uid int) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, uid, uid); err != nil {
		t.Fatal(err)
	}
}
