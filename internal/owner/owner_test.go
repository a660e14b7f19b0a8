package owner

import (
	"os"
	"strconv"
	"testing"
)

func TestTrusted(t *testing.T) {
	euid := uint32(os.Geteuid())
	other := euid + 4242
	for _, tc := range []struct {
		name    string
		uid     uint32
		sudoUID string
		trusted bool // and LinkTrusted: the same as root, always without
	}{
		{"root", 0, "", true},
		{"the caller", euid, "", true},
		{"another user", other, "", false},
		{"the sudo caller", other, strconv.FormatUint(uint64(other), 10), euid == 0},
		{"a bad SUDO_UID", other, "x", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SUDO_UID", tc.sudoUID)
			if got := Trusted(tc.uid); got != tc.trusted {
				t.Errorf("Trusted(%d) = %v, want %v", tc.uid, got, tc.trusted)
			}
			if got, want := LinkTrusted(tc.uid), tc.trusted || euid != 0; got != want {
				t.Errorf("LinkTrusted(%d) = %v, want %v", tc.uid, got, want)
			}
		})
	}
}

func TestOf(t *testing.T) {
	fi, err := os.Stat(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if uid, ok := Of(fi); !ok || uid != uint32(os.Geteuid()) {
		t.Errorf("Of(a new directory) = %d, %v; want %d", uid, ok, os.Geteuid())
	}
}
