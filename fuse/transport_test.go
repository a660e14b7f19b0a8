package fuse

import (
	"bytes"
	"encoding/binary"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	if want == "io_uring" && m.srv.ring.served() == 0 {
		t.Fatal("no request came through the ring")
	}
}

// TestMountCycles: regression. Mount handed each ring thread the go-ahead
// to register on the same buffered channel the thread answered on, so
// when the thread had not reached its receive yet, Mount read its own
// go-ahead back as the answer: the thread never registered, the kernel
// never saw every queue served, and every request on the mount waited
// for good (a CI run's art mount hung before it said it was mounted).
// The child process mounts and stats the root a hundred times.
func TestMountCycles(t *testing.T) {
	if os.Getenv("ART_TEST_CHILD") == "cycles" {
		for i := 0; i < 100; i++ {
			m := newTestMount(t, nil)
			if _, err := os.Stat(m.Dir); err != nil {
				t.Fatal(err)
			}
			m.unmount()
		}
		return
	}
	runChildTest(t, "TestMountCycles", "cycles")
}

// runChildTest runs the named test in a child process (this test binary
// again, with ART_TEST_CHILD=mode), so that a mount hanging in the kernel
// fails the test instead of hanging the test binary: after a minute the
// parent aborts the child's mounts.
func runChildTest(t *testing.T, name, mode string) {
	t.Helper()
	requireFUSE(t)
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "ART_TEST_CHILD="+mode, "TMPDIR="+tmp)
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
			t.Fatalf("child: %v\n%s", err, out)
		}
	case <-time.After(4 * time.Minute): // a hang, not a slow machine: 100 mount cycles took 23–41 s under -race and load
		mps, _ := MountPoints()
		for _, mp := range mps {
			if strings.HasPrefix(mp, tmp+"/") {
				abortMount(mp)
			}
		}
		cmd.Process.Kill()
		<-done
		t.Fatalf("the child hung on its mount:\n%s", out)
	}
}

// TestConcurrentOpensRightAfterMount: regression. Go's runtime registers
// every file it opens with epoll while holding one of its scheduler slots;
// for a file of a FUSE mount the kernel then asks the server to POLL. With
// the mount served by the same process, two such opens took both slots of
// a two-CPU machine and the ring threads, which need a slot to answer,
// never ran: the process hung in the kernel for good. The kernel must
// learn that the mount does not poll before anyone opens a file. The
// opens run in a child process (runChildTest).
func TestConcurrentOpensRightAfterMount(t *testing.T) {
	if os.Getenv("ART_TEST_CHILD") == "opens" {
		openStorm(t)
		return
	}
	runChildTest(t, "TestConcurrentOpensRightAfterMount", "opens")
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

// TestRingMalformedRequest: a request whose lengths do not add up (the
// kernel's header claims less than its payload) is answered EIO without
// reaching the filesystem.
func TestRingMalformedRequest(t *testing.T) {
	hdr := make([]byte, ringHdrSize)
	e := &ringEnt{hdr: hdr, payload: make([]byte, 64)}
	binary.LittleEndian.PutUint32(hdr[0:4], inHeaderSize+8) // length
	binary.LittleEndian.PutUint32(hdr[4:8], 1)              // LOOKUP
	binary.LittleEndian.PutUint64(hdr[8:16], 42)            // unique
	binary.LittleEndian.PutUint32(hdr[ringHdrPayloadSz:], 16)
	var logged bytes.Buffer
	th := &ringThread{s: &ringServer{log: log.New(&logged, "", 0)}} // no protocol server: must not be reached
	th.handle(e)
	if got := int32(binary.LittleEndian.Uint32(hdr[4:8])); got != -int32(syscall.EIO) {
		t.Fatalf("reply error %d, want -EIO", got)
	}
	if u := binary.LittleEndian.Uint64(hdr[8:16]); u != 42 {
		t.Fatalf("reply unique %d, want 42", u)
	}
	if n := binary.LittleEndian.Uint32(hdr[ringHdrPayloadSz:]); n != 0 {
		t.Fatalf("reply payload %d bytes, want 0", n)
	}
	if !strings.Contains(logged.String(), "malformed request") {
		t.Fatalf("not logged: %q", logged.String())
	}
}

// TestRingUsable: when art uses io_uring, and what it says when not.
func TestRingUsable(t *testing.T) {
	dir := t.TempDir()
	on := filepath.Join(dir, "on")
	os.WriteFile(on, []byte("Y\n"), 0o644)
	off := filepath.Join(dir, "off")
	os.WriteFile(off, []byte("N\n"), 0o644)
	stuck := "/proc/version" // readable, not "Y", and not writable even by root
	for _, c := range []struct {
		name, transport string
		euid            int
		param           string
		want            bool
		why             string
	}{
		{"enabled", "", 0, on, true, ""},
		{"disabled: art enables it", "", 0, off, true, ""},
		{"forced classic", "classic", 0, on, false, "ART_FUSE_TRANSPORT=classic"},
		{"not root", "", 1000, on, false, "not root"},
		{"old kernel", "", 0, filepath.Join(dir, "missing"), false, "Linux 6.14+"},
		{"cannot enable", "", 0, stuck, false, "cannot enable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ok, why := ringUsableAt(c.transport, c.euid, c.param)
			if ok != c.want || !strings.Contains(why, c.why) {
				t.Fatalf("ringUsableAt = %v %q, want %v %q", ok, why, c.want, c.why)
			}
		})
	}
	if b, _ := os.ReadFile(off); strings.TrimSpace(string(b)) != "1" {
		t.Errorf("the disabled parameter was not turned on: %q", b)
	}
	// Forced io_uring where it cannot be used is an error naming why;
	// otherwise the fallback is silent.
	if err := forcedRing("io_uring", "not root"); err == nil || !strings.Contains(err.Error(), "not root") {
		t.Errorf("forced io_uring: %v", err)
	}
	if err := forcedRing("", "not root"); err != nil {
		t.Errorf("automatic transport: %v", err)
	}
}

// TestCountCPUList: the kernel makes one queue per possible CPU, however
// sparse their ids.
func TestCountCPUList(t *testing.T) {
	for _, c := range []struct {
		list string
		want int
		bad  bool
	}{
		{"0", 1, false}, {"0-1", 2, false}, {"0-3,8-11", 8, false}, {"0,2,4", 3, false},
		{"", 0, true}, {"3-1", 0, true}, {"x", 0, true},
	} {
		n, err := countCPUList(c.list)
		if (err != nil) != c.bad || n != c.want {
			t.Errorf("countCPUList(%q) = %d, %v; want %d (error %v)", c.list, n, err, c.want, c.bad)
		}
	}
}

// waitServer waits for srv to end, failing the test after a while.
func waitServer(t *testing.T, srv *Server) {
	t.Helper()
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Server.Wait still blocked 20 s after the mount was gone")
	}
}

// TestRingAddsProcs: regression. Each ring thread waits for requests in
// io_uring_enter and keeps its P meanwhile; with GOMAXPROCS at the CPU
// count the goroutine that mounts waited up to 16 ms for a P before the
// last ring thread could register (art run -- true took 24 ms instead of
// 20). The ring adds one P per thread while it serves, and gives them
// back when it ends, also when its registration fails.
func TestRingAddsProcs(t *testing.T) {
	requireRing(t)
	before := runtime.GOMAXPROCS(0)
	m := newTestMount(t, nil)
	if m.srv.ring == nil {
		t.Fatal("the mount has no ring")
	}
	if got, want := runtime.GOMAXPROCS(0), before+len(m.srv.ring.threads); got != want {
		t.Errorf("GOMAXPROCS while the ring serves: %d, want %d", got, want)
	}
	srv := m.srv
	m.srv = nil
	if err := srv.Unmount(); err != nil {
		t.Fatal(err)
	}
	waitServer(t, srv)
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS after the ring ended: %d, want %d", got, before)
	}
	srv, err := Mount(m.Dir, m.OFS, Options{Log: log.New(io.Discard, "", 0), faults: &ringFaults{failDup: true}})
	if err == nil {
		srv.Unmount()
		srv.Wait()
		t.Fatal("Mount with a failing registration succeeded")
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS after a failed registration: %d, want %d", got, before)
	}
}

// requireRing skips where the mount cannot be served over io_uring.
func requireRing(t *testing.T) {
	t.Helper()
	if ok, why := ringUsable(); !ok {
		t.Skipf("needs FUSE over io_uring: %s", why)
	}
}

// TestRingEntriesRefused: regression. When the kernel refused ring
// entries, the thread counted them as live for ever, so Wait never
// returned after the unmount (and the thread and a descriptor leaked).
// Refused entirely the mount is served through /dev/fuse; refused in part
// it is still served over the entries the kernel took.
func TestRingEntriesRefused(t *testing.T) {
	requireRing(t)
	for _, c := range []struct {
		name   string
		refuse func(cpu, entry int) bool
		want   string
	}{
		{"all", func(int, int) bool { return true }, "/dev/fuse"},
		{"one", func(cpu, entry int) bool { return cpu == 0 && entry == 3 }, "io_uring"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newTestMountWith(t, nil, false, &ringFaults{refuse: c.refuse})
			if err := os.WriteFile(filepath.Join(m.Dir, "f"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(m.Dir, "f")); err != nil || string(b) != "x" {
				t.Fatalf("read back %q, %v", b, err)
			}
			if got := m.srv.Transport(); got != c.want {
				t.Errorf("transport %s, want %s", got, c.want)
			}
			if !strings.Contains(m.fuseLog.String(), "refused") {
				t.Errorf("the refusal was not logged: %q", m.fuseLog.String())
			}
			srv := m.srv
			m.srv = nil
			if err := srv.Unmount(); err != nil {
				t.Fatal(err)
			}
			waitServer(t, srv)
		})
	}
}

// TestRingRegisterFails: regression. A failure of art's own before its
// entries reached the kernel (here: the dup of /dev/fuse) left the kernel
// holding every request until a ring that would never come, and Mount
// hung in its own first request. Mount now fails, and the mount is gone.
func TestRingRegisterFails(t *testing.T) {
	requireRing(t)
	m := newTestMount(t, nil)
	m.unmount()
	done := make(chan error, 1)
	go func() {
		srv, err := Mount(m.Dir, m.OFS, Options{Log: log.New(io.Discard, "", 0), faults: &ringFaults{failDup: true}})
		if srv != nil {
			srv.Unmount()
			srv.Wait()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "ART_FUSE_TRANSPORT=classic") {
			t.Fatalf("Mount with a failing registration: %v", err)
		}
	case <-time.After(30 * time.Second):
		abortMount(m.Dir)
		t.Fatal("Mount hung on a registration that failed")
	}
	if mounted, _ := IsMountpoint(m.Dir); mounted {
		abortMount(m.Dir)
		t.Fatal("the failed mount was left in place")
	}
}

// TestLateEventfdWrite: regression. An off-thread handler (fsync) queued
// its reply and only then woke its ring thread through the eventfd; when
// the thread had meanwhile committed that reply (woken by another) and
// ended with the connection, the eventfd was closed first, and the late
// write went to whatever file reused its number.
func TestLateEventfdWrite(t *testing.T) {
	requireRing(t)
	var first atomic.Bool
	faults := &ringFaults{
		beforeHandle: func() { time.Sleep(300 * time.Millisecond) }, // a slow fsync
		beforeWake: func() { // the first handler is preempted before its wake-up
			if first.CompareAndSwap(false, true) {
				time.Sleep(300 * time.Millisecond)
			}
		},
	}
	m := newTestMountWith(t, nil, false, faults)
	var files []*os.File
	for _, n := range []string{"f1", "f2"} {
		f, err := os.Create(filepath.Join(m.Dir, n))
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("data")
		files = append(files, f)
	}
	var wg sync.WaitGroup
	for _, f := range files {
		wg.Add(1)
		go func() { // both fsyncs from CPU 0: one ring thread
			defer wg.Done()
			runtime.LockOSThread()
			var set unix.CPUSet
			set.Set(0)
			unix.SchedSetaffinity(0, &set)
			f.Sync()
		}()
	}
	time.Sleep(100 * time.Millisecond)
	abortMount(m.Dir)
	wg.Wait()
	for _, f := range files {
		f.Close()
	}
	srv := m.srv
	m.srv = nil
	waitServer(t, srv)
	// Files opened now take the lowest free numbers, the eventfd's among them.
	var opened []*os.File
	for i := 0; i < 8; i++ {
		f, err := os.CreateTemp(t.TempDir(), "x")
		if err != nil {
			t.Fatal(err)
		}
		opened = append(opened, f)
	}
	time.Sleep(700 * time.Millisecond) // past every injected delay
	for _, f := range opened {
		if b, _ := os.ReadFile(f.Name()); len(b) > 0 {
			t.Errorf("%s, opened after Wait, received %x", f.Name(), b)
		}
		f.Close()
	}
}

// A write the filesystem would make wait (its applier behind: see
// overlay.FS.Throttling) is answered off the ring thread, so the other
// requests of that CPU's queue go on meanwhile.
func TestThrottledWriteOffThread(t *testing.T) {
	requireRing(t)
	gate := make(chan struct{})
	faults := &ringFaults{
		writesWait:   func() bool { return true },
		beforeHandle: func() { <-gate },
	}
	m := newTestMountWith(t, nil, false, faults)
	answered := 0
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()
	onCPU0 := func(f func()) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var set unix.CPUSet
			set.Set(0)
			unix.SchedSetaffinity(0, &set)
			f()
		}()
		return done
	}
	f, err := os.Create(filepath.Join(m.Dir, "slow"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var werr error
	wrote := onCPU0(func() { _, werr = f.Write([]byte("held up")) })
	time.Sleep(100 * time.Millisecond)
	select {
	case <-wrote:
		t.Fatalf("the write was answered on the ring thread (%v), not off it", werr)
	default:
	}
	// statfs always reaches the server (no kernel cache answers it).
	statted := onCPU0(func() {
		var st unix.Statfs_t
		if err := unix.Statfs(m.Dir, &st); err == nil {
			answered++
		}
	})
	select {
	case <-statted:
	case <-time.After(10 * time.Second):
		t.Fatal("a statfs on the same CPU waited for the held-up write")
	}
	if answered != 1 {
		t.Error("statfs failed while a write was held up")
	}
	close(gate)
	select {
	case <-wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("the write was not answered once let go")
	}
	if werr != nil {
		t.Fatalf("write: %v", werr)
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, "slow")); err != nil || string(b) != "held up" {
		t.Errorf("read back %q (%v)", b, err)
	}
}
