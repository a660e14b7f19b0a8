package fuse

import (
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/artproject/art/internal/owner"
	"github.com/artproject/art/overlay"
)

// Options configure a mount.
type Options struct {
	AllowOther bool // let other users (the sandbox user) use the mount
	Debug      bool
	Log        *log.Logger

	faults *ringFaults // tests only: failures to inject into the io_uring transport
}

// Server is one mount being served: go-fuse's server on /dev/fuse, and,
// when the kernel and the process allow it, the io_uring transport that
// then carries the requests (see ring.go).
type Server struct {
	classic *gofuse.Server
	ring    *ringServer // nil: every request comes through /dev/fuse
	dir     string      // the mount point, for Unmount when art mounted it itself
	mp      string      // the mount point, however it was mounted
	dev     uint64      // the mount's device: its connection in /sys/fs/fuse/connections
	cutOff  *[]string   // set when Unmount aborted the connection: who held it
}

// TryUnmount unmounts at once if nothing uses the mount, and fails with
// EBUSY otherwise, waiting for nothing (Unmount retries, then aborts a
// connection held elsewhere). Without root the mount is fusermount3's to
// remove: umount2 would fail with EPERM whatever holds it.
func (s *Server) TryUnmount() error {
	if os.Geteuid() == 0 {
		if err := unmountTrusted(s.mp, 0); err != nil && !errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("unmount %s: %w", s.mp, err)
		}
		return nil
	}
	out, err := exec.Command("fusermount3", "-u", s.mp).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if strings.Contains(msg, "busy") {
			return fmt.Errorf("unmount %s: %w (%s)", s.mp, syscall.EBUSY, msg)
		}
		return fmt.Errorf("unmount %s: %v: %s", s.mp, err, msg)
	}
	return nil
}

// Transport names how requests reach the server: "io_uring" or "/dev/fuse".
func (s *Server) Transport() string {
	if s.ring != nil && (s.ring.active || s.ring.served() > 0) {
		return "io_uring"
	}
	return "/dev/fuse"
}

// Unmount removes the mount, which ends the serving; Wait then returns.
func (s *Server) Unmount() error {
	if s.dir == "" {
		// go-fuse's Unmount also waits for its serving to end, which a
		// copy of the mount in another namespace can keep going for
		// ever (see WaitOrAbort): bounded the same way.
		var err error
		ended := make(chan struct{})
		go func() { err = s.classic.Unmount(); close(ended) }()
		aborted, holders := s.AbortWhenHeld(ended, HeldWait)
		if aborted {
			s.cutOff = &holders // for art run's AbortWhenHeld to report
		} else if len(holders) > 0 {
			// Not cut off (without root): once the mount is gone from
			// this namespace, the rest of go-fuse's Unmount waits for
			// the copy's namespace to end, another session's, and
			// nothing is left to wait for here.
			tick := time.NewTicker(heldPoll)
			defer tick.Stop()
			for {
				select {
				case <-ended:
					return err
				case <-tick.C:
					if !s.mountedHere() {
						return nil
					}
				}
			}
		}
		<-ended
		return err
	}
	// Mounted by art itself (go-fuse knows the mount only by its
	// descriptor): unmount as go-fuse does, retrying while the kernel
	// still counts files open on it.
	var err error
	delay := time.Duration(0)
	for try := 0; try < 5; try++ {
		if err = unmountTrusted(s.dir, 0); err == nil || errors.Is(err, syscall.EINVAL) {
			return nil
		}
		delay = 2*delay + 5*time.Millisecond
		time.Sleep(delay)
	}
	return fmt.Errorf("unmount %s: %w", s.dir, err)
}

// mountedHere reports whether the mount point is still a FUSE mount in
// art's own mount namespace.
func (s *Server) mountedHere() bool {
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(s.mp))
	if err != nil {
		return true // unknown: wait, as before
	}
	for _, m := range mounts {
		if strings.HasPrefix(m.FSType, "fuse") {
			return true
		}
	}
	return false
}

// HeldWait is how long Unmount, AbortWhenHeld and WaitOrAbort wait for a
// connection held elsewhere to end before they abort it.
const HeldWait = 10 * time.Second

// WaitOrAbort is Wait, for at most d after an Unmount: a mount of the
// connection elsewhere (a copy in another mount namespace, which an
// orphaned process of the sandbox could keep) holds it open, and Wait
// then never returned. After d the connection is aborted, which ends it
// everywhere; aborted reports that it had to.
func (s *Server) WaitOrAbort(d time.Duration) (aborted bool) {
	done := make(chan struct{})
	go func() { s.Wait(); close(done) }()
	select {
	case <-done:
		return false
	case <-time.After(d):
	}
	if s.dev != 0 {
		if err := abortConnection(s.dev); err != nil {
			log.Printf("art: abort the FUSE connection %d: %v", unix.Minor(s.dev), err)
		}
	}
	<-done
	return true
}

// abortConnection aborts the FUSE connection of device dev through the
// fusectl filesystem: at /sys/fs/fuse/connections, or, where nothing is
// mounted there (no systemd), mounted for the moment in a directory of
// its own (root only).
func abortConnection(dev uint64) error {
	name := strconv.FormatUint(uint64(unix.Minor(dev)), 10)
	if err := os.WriteFile(filepath.Join("/sys/fs/fuse/connections", name, "abort"), []byte("1"), 0); err == nil {
		return nil
	}
	dir, err := os.MkdirTemp("", "art-fusectl-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	if err := unix.Mount("fusectl", dir, "fusectl", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount fusectl: %w", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	return os.WriteFile(filepath.Join(dir, name, "abort"), []byte("1"), 0)
}

// Wait returns once the mount is gone and every request has been answered.
func (s *Server) Wait() {
	s.classic.Wait()
	if s.ring != nil {
		s.ring.wait()
	}
}

// Mount serves ofs at dir until Unmount. It returns once the kernel has
// the mount (no sleeps: go-fuse waits for the INIT exchange).
func Mount(dir string, ofs *overlay.FS, o Options) (*Server, error) {
	if o.Log == nil {
		o.Log = log.Default()
	}
	s := &shared{ofs: ofs, log: o.Log}
	if os.Getenv("ART_DEBUG_LATENCY") != "" {
		s.lat = &latencies{m: map[string]*latency{}}
		defer func() { go s.lat.report(o.Log) }()
	}
	root := &Node{s: s}
	// Every change to this filesystem arrives through this mount (the
	// worktree is private to it and art never changes it behind the
	// kernel's back), and the kernel invalidates what its own requests
	// change: entries and attributes stay valid until then. With a short
	// timeout every stat after it costs a round trip: stat of 11.5k files
	// a second apart took 2.2 s instead of 0.08 s.
	timeout := time.Hour
	opts := &fs.Options{
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
		// Every attribute is the overlay's own: go-fuse must not turn
		// mode 0 into 0644 (open(O_CREAT, 0) makes a 0000 file) or an
		// owner 0 into the mount's (root may chown to root).
		NullPermissions: true,
		Logger:          o.Log,
		RootStableAttr:  &fs.StableAttr{Ino: overlay.RootIno, Mode: syscall.S_IFDIR},
		MountOptions: gofuse.MountOptions{
			AllowOther:    o.AllowOther,
			FsName:        fsName,
			Name:          fsName,
			MaxWrite:      1 << 20,
			MaxReadAhead:  1 << 20,
			Debug:         o.Debug,
			Logger:        o.Log,
			Options:       []string{"default_permissions"},
			MaxBackground: 64,
			// Reads are answered from memory (ReadResultData), never
			// from a file descriptor, so go-fuse's splice path has
			// nothing to splice; with 1 MiB reads it would also fail to
			// grow its pipe past the 1 MiB limit and log each failure.
			DisableSplice: true,
			// As root, mount(2) directly; otherwise go-fuse uses fusermount3.
			DirectMount: os.Geteuid() == 0,
			// We clear set-ID bits ourselves (Node.Setattr), so the
			// kernel may stop asking for security.capability before
			// every write to a file it has once found without it: a
			// round trip per write, a third of all requests of an untar.
			ExtraCapabilities: gofuse.CAP_HANDLE_KILLPRIV_V2,
		},
	}
	srv, err := mountRing(dir, root, opts, o.Log, o.faults, ofs.Throttling)
	if srv == nil && err == nil && os.Geteuid() == 0 {
		// Root mounts by descriptor (mountDirect), never by a path a
		// local user could swap: go-fuse's own mount(2) takes the path.
		srv, err = mountClassicDirect(dir, root, opts, o.Log)
	}
	if srv == nil && err == nil {
		var classic *gofuse.Server
		classic, err = fs.Mount(dir, root, opts)
		srv = &Server{classic: classic}
	}
	if srv != nil {
		srv.mp = dir
	}
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if unix.Stat(dir, &st) == nil {
		srv.dev = st.Dev
	}
	if err := raiseReadAhead(dir, opts.MaxReadAhead); err != nil && os.Geteuid() == 0 {
		o.Log.Printf("art: cannot raise the read-ahead of %s: %v (sequential reads stay slower)", dir, err)
	}
	return srv, nil
}

// mountRing mounts dir and serves it over io_uring. It returns a nil
// server and no error when io_uring cannot be used here (the caller then
// mounts the classic way); a failure after the mount exists is an error.
func mountRing(dir string, root fs.InodeEmbedder, opts *fs.Options, lg *log.Logger, faults *ringFaults, writesWait func() bool) (*Server, error) {
	if err := checkTransport(os.Getenv("ART_FUSE_TRANSPORT")); err != nil {
		return nil, err
	}
	if ok, why := ringUsable(); !ok {
		return nil, forcedRing(os.Getenv("ART_FUSE_TRANSPORT"), why)
	}
	ring, err := startRingThreads(lg, int(opts.MaxWrite), faults)
	if err != nil {
		lg.Printf("art: FUSE over io_uring: %v; serving through /dev/fuse", err)
		return nil, nil
	}
	ring.writesWait = writesWait
	if faults != nil && faults.writesWait != nil {
		ring.writesWait = faults.writesWait
	}
	fd, err := mountDirect(dir, &opts.MountOptions)
	if err != nil {
		ring.stop()
		var mpErr *mountPointError
		if errors.As(err, &mpErr) {
			return nil, err // no other way of mounting goes there either
		}
		// go-fuse's own mount falls back to fusermount3, as the
		// classic path does.
		lg.Printf("art: FUSE over io_uring: %v; serving through /dev/fuse", err)
		return nil, nil
	}
	// go-fuse serves a descriptor art mounted through the /dev/fd/N
	// name; it then neither mounts nor unmounts.
	mo := opts.MountOptions
	mo.DirectMount = false
	mo.ExtraCapabilities |= gofuse.CAP_OVER_IO_URING
	ringOpts := *opts
	ringOpts.MountOptions = mo
	rawFS := fs.NewNodeFS(root, &ringOpts)
	classic, err := gofuse.NewServer(rawFS, fmt.Sprintf("/dev/fd/%d", fd), &mo)
	if err != nil { // go-fuse closed fd
		abortMount(dir)
		ring.stop()
		return nil, fmt.Errorf("serve %s: %w", dir, err)
	}
	go classic.Serve()
	if err := classic.WaitMount(); err != nil {
		abortMount(dir)
		ring.stop()
		return nil, fmt.Errorf("serve %s: %w", dir, err)
	}
	srv := &Server{classic: classic, dir: dir}
	if classic.KernelSettings().Flags64()&gofuse.CAP_OVER_IO_URING != 0 {
		ps := gofuse.NewProtocolServer(rawFS, &mo)
		if err := primeProtocolServer(ps, classic.KernelSettings()); err != nil {
			// The kernel waits for the ring before it sends anything:
			// without one, the mount cannot be served.
			ring.stop()
			abortMount(dir)
			classic.Wait()
			return nil, fmt.Errorf("serve %s over io_uring: %w (ART_FUSE_TRANSPORT=classic serves through /dev/fuse)", dir, err)
		}
		refused, err := ring.register(fd, ps)
		if err != nil {
			// Entries may not have reached the kernel, which holds
			// every request until each queue has one: end it all.
			abortMount(dir)
			classic.Wait()
			ring.wait()
			return nil, fmt.Errorf("serve %s over io_uring: %w (ART_FUSE_TRANSPORT=classic serves through /dev/fuse)", dir, err)
		}
		if refused > 0 {
			// The kernel falls back to /dev/fuse, unless the entries it
			// took already serve every queue; either way it is served.
			lg.Printf("art: FUSE over io_uring: the kernel refused %d ring entries; requests may go through /dev/fuse", refused)
		} else {
			ring.active = true
		}
		srv.ring = ring
	} else {
		ring.stop() // not offered at INIT: /dev/fuse alone
	}
	if err := pollHack(dir); err != nil {
		abortMount(dir)
		srv.Wait()
		return nil, fmt.Errorf("serve %s: %w", dir, err)
	}
	return srv, nil
}

// mountClassicDirect mounts dir as root through its descriptor
// (mountDirect) and serves it through /dev/fuse. It returns a nil server
// and no error when mount(2) itself fails (go-fuse then falls back to
// fusermount3, as it always did), an error when the mount point is
// refused.
func mountClassicDirect(dir string, root fs.InodeEmbedder, opts *fs.Options, lg *log.Logger) (*Server, error) {
	fd, err := mountDirect(dir, &opts.MountOptions)
	if err != nil {
		var mpErr *mountPointError
		if errors.As(err, &mpErr) {
			return nil, err
		}
		return nil, nil
	}
	mo := opts.MountOptions
	mo.DirectMount = false
	classicOpts := *opts
	classicOpts.MountOptions = mo
	rawFS := fs.NewNodeFS(root, &classicOpts)
	classic, err := gofuse.NewServer(rawFS, fmt.Sprintf("/dev/fd/%d", fd), &mo)
	if err != nil { // go-fuse closed fd
		abortMount(dir)
		return nil, fmt.Errorf("serve %s: %w", dir, err)
	}
	go classic.Serve()
	if err := classic.WaitMount(); err != nil {
		abortMount(dir)
		return nil, fmt.Errorf("serve %s: %w", dir, err)
	}
	srv := &Server{classic: classic, dir: dir}
	if err := pollHack(dir); err != nil {
		abortMount(dir)
		srv.Wait()
		return nil, fmt.Errorf("serve %s: %w", dir, err)
	}
	return srv, nil
}

// Abort ends the FUSE connection at dir and detaches it: requests waiting
// on it fail, files still open on it fail from then on, and Wait returns.
// art run uses it when something outside the sandbox still holds files in
// the home at the session's end (a shell there, an editor), which would
// otherwise keep the session from being recorded until it let go, and
// write into the agent's commit meanwhile.
func Abort(dir string) { abortMount(dir) }

// heldPoll is how often AbortWhenHeld looks for a copy of the mount in a
// live mount namespace.
const heldPoll = 100 * time.Millisecond

// AbortWhenHeld waits, after the unmount, for done (closed when the
// serving ended), at most d. A copy of the mount that a live process's
// mount namespace holds (every sandbox an 'art run' starts while the
// mount is up makes one, and keeps it until that session ends) will not
// end by itself: once one is seen the connection is aborted at once, not
// after d. Nothing on this host can still use the mount through art's
// own namespace. It reports whether it aborted and who held it. Where the
// abort fails (without root, unless the fusectl filesystem is mounted and
// the connection the caller's), it returns once it saw a holder (or after
// d) without waiting for done.
func (s *Server) AbortWhenHeld(done <-chan struct{}, d time.Duration) (aborted bool, holders []string) {
	if s.cutOff != nil {
		// Unmount (go-fuse's, which waits for the serving) did it.
		<-done
		return true, *s.cutOff
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(heldPoll)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return false, nil
		case <-deadline.C:
			holders = s.NamespaceHolders(5)
		case <-tick.C:
			if holders = s.NamespaceHolders(5); len(holders) == 0 {
				continue
			}
		}
		if s.dev == 0 || abortConnection(s.dev) != nil {
			return false, holders
		}
		<-done
		return true, holders
	}
}

// Abort ends the mount's connection, wherever it is mounted (a copy in
// another mount namespace included): every request waiting on it fails
// at once and the serving ends. It needs root; it does nothing where the
// device is unknown.
func (s *Server) Abort() {
	if s.dev != 0 {
		if err := abortConnection(s.dev); err != nil {
			log.Printf("art: abort the FUSE connection %d: %v", unix.Minor(s.dev), err)
		}
	}
}

// NamespaceHolders lists processes whose mount namespace still holds a
// copy of the mount ("pid 123 (bwrap)"), one per namespace, at most max
// of them. A process that makes a mount namespace (every sandbox an 'art
// run' starts, unshare -m) copies each mount there is, this one included,
// and the copy keeps the connection after art's own unmount until that
// namespace ends.
func (s *Server) NamespaceHolders(max int) []string {
	if s.dev == 0 {
		return nil
	}
	return namespaceHolders(fmt.Sprintf("%d:%d", unix.Major(s.dev), unix.Minor(s.dev)), max)
}

// namespaceHolders is NamespaceHolders for the device "major:minor".
func namespaceHolders(dev string, max int) []string {
	seen := map[string]bool{}
	var out []string
	eachForeignProcess(func(pid int, base, ns string) bool {
		if seen[ns] {
			return true
		}
		seen[ns] = true
		if ids, _ := deviceMounts(base, dev); len(ids) > 0 {
			out = append(out, processName(pid, base))
		}
		return len(out) < max
	})
	return out
}

// eachForeignProcess calls fn with the pid, /proc directory and mount
// namespace of each live process (but this one) whose mount namespace is
// not art's own, until fn returns false.
func eachForeignProcess(fn func(pid int, base, ns string) bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	own, _ := os.Readlink("/proc/self/ns/mnt")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		base := "/proc/" + e.Name()
		ns, err := os.Readlink(base + "/ns/mnt")
		if err != nil || ns == own {
			continue
		}
		if !fn(pid, base, ns) {
			return
		}
	}
}

// deviceMounts reads, from the mountinfo of the process at base, the
// mount IDs and mount points of device dev ("major:minor").
func deviceMounts(base, dev string) (ids map[string]bool, points []string) {
	info, err := os.ReadFile(base + "/mountinfo")
	if err != nil {
		return nil, nil
	}
	ids = map[string]bool{}
	for _, line := range strings.Split(string(info), "\n") {
		// mount ID, parent ID, major:minor, root, mount point, ...
		if f := strings.Fields(line); len(f) > 4 && f[2] == dev {
			ids[f[0]] = true
			points = append(points, unescapeMountinfo(f[4]))
		}
	}
	return ids, points
}

// processName names a process for a message: "pid 123 (vim)".
func processName(pid int, base string) string {
	comm, _ := os.ReadFile(base + "/comm")
	return fmt.Sprintf("pid %d (%s)", pid, strings.TrimSpace(string(comm)))
}

// Users lists processes, in mount namespaces other than art's own, that
// use a copy of the mount ("pid 123 (vim)"), at most max of them: their
// working directory or root lies in it, or a file of theirs, open or
// mapped, is on it. After art's unmount a copy in another namespace is
// not always a sandbox's, which nothing uses (every art run hides other
// live mounts): a process the user started in a namespace of its own
// (unshare -m, a container, a flatpak) works there as in the mount
// itself, and cutting the connection loses what it writes, mapped pages
// still to be written back included. Files are not touched (no stat of
// a file that may be on another, hung, FUSE mount): fdinfo's mnt_id and
// maps' device are matched against the namespace's mountinfo.
func (s *Server) Users(max int) []string {
	if s.dev == 0 {
		return nil
	}
	return mountUsers(s.dev, max)
}

// mountUsers is Users for the device dev.
func mountUsers(dev uint64, max int) []string {
	want := fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev))
	wantMaps := fmt.Sprintf("%02x:%02x", unix.Major(dev), unix.Minor(dev))
	type nsMounts struct {
		ids    map[string]bool // mount IDs of the device
		points []string        // their mount points
	}
	byNS := map[string]*nsMounts{}
	var out []string
	eachForeignProcess(func(pid int, base, ns string) bool {
		m := byNS[ns]
		if m == nil {
			m = &nsMounts{}
			m.ids, m.points = deviceMounts(base, want)
			byNS[ns] = m
		}
		if len(m.ids) > 0 && processUses(base, m.ids, m.points, wantMaps) {
			out = append(out, processName(pid, base))
		}
		return len(out) < max
	})
	return out
}

// processUses reports whether the process at base (/proc/PID) has its
// working directory or root under one of points, a descriptor on one of
// the mounts ids, or a mapping of the device (maps' "major:minor", hex).
func processUses(base string, ids map[string]bool, points []string, dev string) bool {
	for _, l := range []string{"cwd", "root"} {
		t, err := os.Readlink(base + "/" + l)
		if err != nil {
			continue
		}
		for _, p := range points {
			if t == p || strings.HasPrefix(t, strings.TrimSuffix(p, "/")+"/") {
				return true
			}
		}
	}
	fds, _ := os.ReadDir(base + "/fdinfo")
	for _, fd := range fds {
		info, err := os.ReadFile(base + "/fdinfo/" + fd.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "mnt_id:"); ok && ids[strings.TrimSpace(v)] {
				return true
			}
		}
	}
	maps, _ := os.ReadFile(base + "/maps")
	for _, line := range strings.Split(string(maps), "\n") {
		// address perms offset dev inode path
		if f := strings.Fields(line); len(f) > 4 && f[3] == dev && f[4] != "0" {
			return true
		}
	}
	return false
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Holders lists the processes whose working directory, root or open files
// lie in the mount at dir ("pid 123 (vim)"), at most max of them.
func Holders(dir string, max int) []string {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	in := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		base := "/proc/" + e.Name()
		holds := false
		for _, l := range []string{"cwd", "root"} {
			if t, err := os.Readlink(base + "/" + l); err == nil && in(t) {
				holds = true
			}
		}
		if !holds {
			fds, _ := os.ReadDir(base + "/fd")
			for _, fd := range fds {
				if t, err := os.Readlink(base + "/fd/" + fd.Name()); err == nil && in(t) {
					holds = true
					break
				}
			}
		}
		if holds {
			comm, _ := os.ReadFile(base + "/comm")
			out = append(out, fmt.Sprintf("pid %d (%s)", pid, strings.TrimSpace(string(comm))))
			if len(out) == max {
				break
			}
		}
	}
	return out
}

// abortMount ends the FUSE connection at dir (a forced unmount aborts it:
// every request waiting on it fails at once) and detaches the mount. The
// tests also use it: a process that exits while it holds files open on
// its own mount hangs for ever in the kernel (closing them sends FLUSH to
// a server that is gone) unless the connection was aborted.
func abortMount(dir string) {
	unmountTrusted(dir, syscall.MNT_FORCE)
	unmountTrusted(dir, syscall.MNT_DETACH)
}

// pollHack has the kernel learn, before anyone uses the mount, that it
// does not support poll (go-fuse answers ENOSYS to the poll of its magic
// file, as its own WaitMount does for mounts it makes). Otherwise Go's
// runtime, opening a file of the mount from this process, registers it
// with epoll while holding a scheduler slot, and the kernel's POLL request
// to this same process waits for a slot that never frees: with two such
// opens, the server deadlocked.
func pollHack(dir string) error {
	fd, err := syscall.Open(filepath.Join(dir, ".go-fuse-epoll-hack"), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("poll probe: %w", err)
	}
	defer syscall.Close(fd)
	unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLPRI | unix.POLLOUT}}, 0)
	return nil
}

// checkTransport refuses an ART_FUSE_TRANSPORT art does not know (a typo
// was ignored, and the mount served some other way than asked).
func checkTransport(transport string) error {
	switch transport {
	case "", "classic", "io_uring":
		return nil
	}
	return fmt.Errorf("ART_FUSE_TRANSPORT=%q is not a transport art knows: set it to classic (/dev/fuse) or io_uring, or unset it", transport)
}

// forcedRing is the error for io_uring that cannot be used although
// ART_FUSE_TRANSPORT=io_uring asks for it; otherwise art falls back to
// /dev/fuse in silence.
func forcedRing(transport, why string) error {
	if transport == "io_uring" {
		return fmt.Errorf("FUSE over io_uring (ART_FUSE_TRANSPORT=io_uring): %s; unset ART_FUSE_TRANSPORT to serve through /dev/fuse", why)
	}
	return nil
}

// mountPointError is mountDirect's refusal of the mount point itself,
// which no other way of mounting may then go around.
type mountPointError struct {
	dir string
	err error
}

func (e *mountPointError) Error() string { return e.err.Error() } // it names the path
func (e *mountPointError) Unwrap() error { return e.err }

// mountDirect mounts a FUSE filesystem at dir with mount(2), as go-fuse's
// direct mount does, and returns the connection's descriptor.
//
// The mount point is opened first (owner.OpenDir: no other user's symbolic
// link on the way) and mounted through its descriptor: by its path, a
// directory another user could rename had root mount over what their
// link put there instead (/etc), after every check passed.
func mountDirect(dir string, o *gofuse.MountOptions) (int, error) {
	dfd, err := owner.OpenDir(dir)
	if err != nil {
		return -1, &mountPointError{dir, err}
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return -1, &mountPointError{dir, err}
	}
	fd, err := syscall.Open("/dev/fuse", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /dev/fuse: %w", err)
	}
	opts := []string{
		fmt.Sprintf("fd=%d", fd),
		fmt.Sprintf("rootmode=%o", st.Mode&syscall.S_IFMT),
		fmt.Sprintf("user_id=%d", os.Geteuid()),
		fmt.Sprintf("group_id=%d", os.Getegid()),
		fmt.Sprintf("max_read=%d", o.MaxWrite),
	}
	opts = append(opts, o.Options...)
	if o.AllowOther {
		opts = append(opts, "allow_other")
	}
	if err := syscall.Mount(o.FsName, fdPath(dfd), "fuse."+o.Name, syscall.MS_NOSUID|syscall.MS_NODEV, strings.Join(opts, ",")); err != nil {
		syscall.Close(fd)
		return -1, fmt.Errorf("mount(2) %s: %w", dir, err)
	}
	return fd, nil
}
