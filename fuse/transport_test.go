package fuse

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTransport: the mount is served over io_uring wherever this kernel
// and process allow it, requests really arrive through the ring, and
// ART_FUSE_TRANSPORT=classic keeps every request on /dev/fuse. make test
// runs this package once each way.
func TestTransport(t *testing.T) {
	m := newTestMount(t, nil)
	want := "/dev/fuse"
	if ok, why := ringUsable(); ok {
		want = "io_uring"
	} else {
		t.Logf("io_uring not used here: %s", why)
	}
	if got := m.srv.Transport(); got != want {
		t.Fatalf("transport %s, want %s", got, want)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "f"), []byte("through the ring"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, "f")); err != nil || string(b) != "through the ring" {
		t.Fatalf("read back %q, %v", b, err)
	}
	if want == "io_uring" && m.srv.ring.served.Load() == 0 {
		t.Fatal("no request came through the ring")
	}
}

// TestConcurrentOpensRightAfterMount: regression. Go's runtime registers
// every file it opens with epoll while holding one of its scheduler slots;
// for a file of a FUSE mount the kernel then asks the server to POLL. With
// the mount served by the same process, two such opens took both slots of
// a two-CPU machine and the ring threads, which need a slot to answer,
// never ran: the process hung in the kernel for good. The kernel must
// learn that the mount does not poll before anyone opens a file.
//
// The opens run in a child process (this test binary again), so that a
// hang fails the test: the parent aborts the child's mount after a minute.
func TestConcurrentOpensRightAfterMount(t *testing.T) {
	if os.Getenv("ART_TEST_OPEN_STORM") != "" {
		openStorm(t)
		return
	}
	requireFUSE(t)
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrentOpensRightAfterMount$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "ART_TEST_OPEN_STORM=1", "TMPDIR="+tmp)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("opens in the child: %v\n%s", err, out)
		}
	case <-time.After(time.Minute):
		mps, _ := MountPoints()
		for _, mp := range mps {
			if strings.HasPrefix(mp, tmp+"/") {
				abortMount(mp)
			}
		}
		cmd.Process.Kill()
		<-done
		t.Fatalf("opens of the mount's files hung:\n%s", out)
	}
}

// openStorm mounts and opens eight files at once from this process.
func openStorm(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	m := newTestMount(t, func(dir string) {
		for _, n := range names {
			os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644)
		}
	})
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.Open(m.WS(n))
			if err != nil {
				t.Error(err)
				return
			}
			f.Close()
		}()
	}
	wg.Wait()
}
