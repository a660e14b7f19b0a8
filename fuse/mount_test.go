package fuse

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestFUSEDeviceError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		mode os.FileMode
		want []string
	}{
		{"shut out by its mode", &os.PathError{Op: "open", Path: "/dev/fuse", Err: syscall.EACCES}, os.ModeDevice | os.ModeCharDevice | 0o600,
			[]string{"permission denied", "mode 0600", "uid 1001", "run art as root", "chmod 0666 /dev/fuse"}},
		{"missing", &os.PathError{Op: "open", Path: "/dev/fuse", Err: syscall.ENOENT}, 0,
			[]string{"no such file", "apt-get install -y fuse3", "modprobe fuse", "--device /dev/fuse"}},
		{"no driver", &os.PathError{Op: "open", Path: "/dev/fuse", Err: syscall.ENODEV}, 0,
			[]string{"no such device", "apt-get install -y fuse3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := fuseDeviceError(tc.err, tc.mode, 1001).Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
			if !errors.Is(fuseDeviceError(tc.err, tc.mode, 1001), tc.err.(*os.PathError).Err) {
				t.Error("the cause is not wrapped")
			}
		})
	}
}

func TestCheckTransport(t *testing.T) {
	for _, tc := range []struct {
		transport string
		ok        bool
	}{
		{"", true}, {"classic", true}, {"io_uring", true},
		{"uring", false}, {"Classic", false}, {"io-uring", false},
	} {
		err := checkTransport(tc.transport)
		if (err == nil) != tc.ok {
			t.Errorf("checkTransport(%q) = %v", tc.transport, err)
		}
		if err != nil && !strings.Contains(err.Error(), "classic (/dev/fuse) or io_uring, or unset it") {
			t.Errorf("checkTransport(%q): %v names no next step", tc.transport, err)
		}
	}
}
