package fuse

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/artproject/art/fuse/uring"
)

// FUSE over io_uring (Linux 6.14+, include/uapi/linux/fuse.h).
//
// Why: on a VM, a request read from /dev/fuse is answered by whichever
// server thread the kernel wakes, usually on another CPU than the caller;
// each of the two cross-CPU wake-ups of a round trip costs about 20 µs
// here (an inter-processor interrupt through the hypervisor), which made a
// FUSE round trip 45-50 µs against 7 µs when both sides share a CPU. With
// io_uring the kernel keeps one request queue per CPU and puts a request
// on the queue of the CPU its caller runs on; art serves each queue from a
// thread pinned to that CPU, so the round trip stays on one CPU. Requests
// the ring does not carry (FORGET, INTERRUPT) and notifications still go
// through /dev/fuse and go-fuse's own server.
const (
	uringCmdRegister       = 1
	uringCmdCommitAndFetch = 2

	// struct fuse_uring_req_header: in_out[128], op_in[128], then
	// struct fuse_uring_ent_in_out {flags, commit_id u64; payload_sz u32}.
	ringHdrInOut     = 0
	ringHdrOpIn      = 128
	ringHdrOpInSize  = 128
	ringHdrCommitID  = 256 + 8
	ringHdrPayloadSz = 256 + 16
	ringHdrSize      = 256 + 32

	inHeaderSize  = 40 // struct fuse_in_header
	outHeaderSize = 16 // struct fuse_out_header

	opWrite      = 16
	opFsync      = 20
	opSetxattr   = 21
	opFsyncdir   = 30
	ringEntries  = 8 // entries registered per queue
	eventfdToken = ^uint64(0)

	// URingParam is the module parameter that lets FUSE servers use
	// io_uring; off by default, and only root may turn it on.
	URingParam = "/sys/module/fuse/parameters/enable_uring"
)

// ringServer answers a FUSE connection's requests through io_uring: one
// thread per online CPU, pinned to it, owning that CPU's kernel queue.
type ringServer struct {
	fd         int // a dup of the connection's /dev/fuse descriptor
	ps         *gofuse.ProtocolServer
	log        *log.Logger
	maxPayload int
	threads    []*ringThread
	wg         sync.WaitGroup
	active     bool        // every entry registered: the kernel uses the ring
	faults     *ringFaults // nil but in tests
	procs      int         // Ps added to GOMAXPROCS for the threads (see addProcs)
	// writesWait reports whether a write would now wait for the
	// filesystem to store what it holds (overlay.FS.Throttling): such
	// writes are answered off the thread, as fsync is.
	writesWait func() bool
}

// ringProcs serialises changes of GOMAXPROCS by ring servers: the value
// is process-wide, and mounts in one process (tests) come and go
// concurrently.
var ringProcs sync.Mutex

// addProcs adds n to GOMAXPROCS (n < 0 gives them back). A ring thread
// waits for requests inside io_uring_enter, a system call during which
// it keeps its P, Go's right to run code: the runtime's monitor hands it
// to other threads only when it next looks, after up to 10 ms when the
// process has been quiet. With one ring thread per CPU and GOMAXPROCS at
// the CPU count, every other goroutine could wait that long for a P: the
// thread that mounts waited 1-16 ms (4.6 ms on average over 15 runs of
// art run -- true, 1.6 ms with the extra Ps) for the ring to be registered,
// and the handlers that run off the ring threads (fsync, setxattr) and
// the journal's applier wait the same way. One P per ring thread keeps
// the rest of the program its share of the CPUs.
func addProcs(n int) {
	ringProcs.Lock()
	defer ringProcs.Unlock()
	runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)+n))
}

// served is how many requests the ring threads answered.
func (s *ringServer) served() uint64 {
	var n uint64
	for _, t := range s.threads {
		n += t.served.Load()
	}
	return n
}

// ringThread owns one ring and the kernel queues registered on it.
type ringThread struct {
	s      *ringServer
	cpu    int
	queues []int
	ents   []ringEnt
	mem    []byte // headers, iovecs and payload buffers, shared with the kernel
	efd    int    // eventfd: handlers run off the thread wake it with their replies
	efdBuf []byte
	start  chan error     // the thread's ring is made (nil) or not
	reg    chan error     // to the thread: register (nil) or end (an error)
	regd   chan regResult // from the thread: how its registration went
	async  sync.WaitGroup // handlers running off the thread (they write efd)
	served atomic.Uint64  // requests answered: per thread, so the threads share no written line

	mu   sync.Mutex
	done []int // entries answered off the thread, to commit
}

// ringEnt is one registered entry: the kernel writes a request into its
// header and payload buffers and expects the reply in the same places.
type ringEnt struct {
	qid     int
	hdr     []byte
	payload []byte
	iov     *[2]unix.Iovec
}

// ringUsable reports whether this kernel and this process can serve FUSE
// over io_uring, turning the module parameter on when root may; the
// reason comes back when not. ART_FUSE_TRANSPORT=classic forces /dev/fuse.
func ringUsable() (bool, string) {
	return ringUsableAt(os.Getenv("ART_FUSE_TRANSPORT"), os.Geteuid(), URingParam)
}

func ringUsableAt(transport string, euid int, param string) (bool, string) {
	if transport == "classic" {
		return false, "ART_FUSE_TRANSPORT=classic"
	}
	if euid != 0 {
		return false, "not root (art mounts through fusermount3)"
	}
	b, err := os.ReadFile(param)
	if err != nil {
		return false, "the kernel has no FUSE over io_uring (Linux 6.14+, CONFIG_FUSE_IO_URING)"
	}
	if strings.TrimSpace(string(b)) != "Y" {
		// The parameter only allows servers to ask for io_uring at INIT;
		// servers that do not ask are unaffected.
		if err := os.WriteFile(param, []byte("1"), 0); err != nil {
			return false, fmt.Sprintf("cannot enable %s: %v", param, err)
		}
	}
	return true, ""
}

// startRingThreads starts one pinned thread per online CPU, each making
// its ring. Queues of CPUs that are possible but offline are registered
// on the threads round-robin (the kernel needs every queue served before
// it uses any).
func startRingThreads(lg *log.Logger, maxPayload int, faults *ringFaults) (*ringServer, error) {
	var online unix.CPUSet
	if err := unix.SchedGetaffinity(0, &online); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	possible, err := possibleCPUs()
	if err != nil {
		return nil, err
	}
	s := &ringServer{log: lg, maxPayload: maxPayload, fd: -1, faults: faults}
	for cpu := 0; cpu < len(online)*64; cpu++ {
		if online.IsSet(cpu) {
			s.threads = append(s.threads, &ringThread{s: s, cpu: cpu, start: make(chan error, 1), reg: make(chan error, 1), regd: make(chan regResult, 1)})
		}
	}
	if len(s.threads) == 0 {
		return nil, errors.New("no CPU in this process's affinity mask")
	}
	byCPU := map[int]*ringThread{}
	for _, t := range s.threads {
		byCPU[t.cpu] = t
	}
	offline := 0
	for q := 0; q < possible; q++ {
		t := byCPU[q]
		if t == nil {
			t = s.threads[offline%len(s.threads)]
			offline++
		}
		t.queues = append(t.queues, q)
	}
	s.procs = len(s.threads)
	addProcs(s.procs)
	for _, t := range s.threads {
		s.wg.Add(1)
		go t.run()
	}
	var firstErr error
	for _, t := range s.threads {
		if err := <-t.start; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		s.stop()
		return nil, firstErr
	}
	return s, nil
}

// possibleCPUs is the number of CPUs the kernel may use
// (/sys/devices/system/cpu/possible, a list like "0-3,8-11"): it makes
// one queue for each.
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, fmt.Errorf("read possible CPUs: %w", err)
	}
	return countCPUList(strings.TrimSpace(string(b)))
}

func countCPUList(list string) (int, error) {
	n := 0
	for _, r := range strings.Split(list, ",") {
		var lo, hi int
		if _, err := fmt.Sscanf(r, "%d-%d", &lo, &hi); err != nil {
			if _, err := fmt.Sscanf(r, "%d", &lo); err != nil {
				return 0, fmt.Errorf("CPU list %q: %w", list, err)
			}
			hi = lo
		}
		if hi < lo {
			return 0, fmt.Errorf("CPU list %q: range %q", list, r)
		}
		n += hi - lo + 1
	}
	return n, nil
}

// regResult is how one thread's registration went: entries the kernel
// refused (it then serves the connection through /dev/fuse, unless the
// entries it did take already cover every queue), and a failure of art's
// own before the entries reached the kernel.
type regResult struct {
	refused int
	err     error
}

// register hands the threads the connection (after INIT, which made the
// kernel ready for ring entries) and waits until each has registered its
// entries. It returns how many entries the kernel refused; an error means
// entries may never have reached the kernel, which then holds every
// request of the connection until the ring is complete: the caller must
// abort the connection.
func (s *ringServer) register(fd int, ps *gofuse.ProtocolServer) (int, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if f := s.faults; f != nil && f.failDup && err == nil {
		unix.Close(dup)
		err = syscall.EMFILE
	}
	if err != nil {
		s.stop()
		return 0, fmt.Errorf("dup /dev/fuse: %w", err)
	}
	s.fd, s.ps = dup, ps
	for _, t := range s.threads {
		t.reg <- nil
	}
	refused := 0
	var firstErr error
	for _, t := range s.threads {
		r := <-t.regd
		refused += r.refused
		if r.err != nil && firstErr == nil {
			firstErr = r.err
		}
	}
	return refused, firstErr
}

// stop ends threads that have not registered (setup failed); registered
// threads end when the connection does.
func (s *ringServer) stop() {
	for _, t := range s.threads {
		select {
		case t.reg <- errors.New("stopped"):
		default:
		}
	}
	s.wait()
}

// wait returns once every thread has ended (the connection is gone).
func (s *ringServer) wait() {
	s.wg.Wait()
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
	if s.procs > 0 {
		addProcs(-s.procs)
		s.procs = 0
	}
}

func (t *ringThread) run() {
	defer t.s.wg.Done()
	// The thread stays locked to this goroutine and ends with it: its CPU
	// affinity must never pass to other goroutines.
	runtime.LockOSThread()
	ring, err := t.setup()
	t.start <- err
	if err != nil {
		return
	}
	live := 0 // entries the kernel may still write a request into
	defer func() { t.teardown(ring, live) }()
	if err := <-t.reg; err != nil || t.s.fd < 0 {
		return
	}
	// Until registration says otherwise, every entry may be in the
	// kernel's hands.
	live = len(t.ents)
	early, refused, err := t.registerEntries(ring)
	t.regd <- regResult{refused, err}
	if err != nil {
		return // the caller aborts the connection; the buffers stay
	}
	live -= refused
	for _, i := range early {
		t.serve(ring, i)
	}
	live = t.loop(ring, live)
}

// setup pins the thread, makes its ring and its buffers.
func (t *ringThread) setup() (*uring.Ring, error) {
	var set unix.CPUSet
	set.Set(t.cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("pin to CPU %d: %w", t.cpu, err)
	}
	n := len(t.queues) * ringEntries
	ring, err := uring.New(uint32(2*n + 2))
	if err != nil {
		return nil, err
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		ring.Close()
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	t.efd = efd
	page := os.Getpagesize()
	hdrSlot := 512 // header (288) + iovec pair (32), aligned
	payload := (t.s.maxPayload + page - 1) / page * page
	hdrArea := (n*hdrSlot + 8 + page - 1) / page * page
	mem, err := unix.Mmap(-1, 0, hdrArea+n*payload, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		ring.Close()
		unix.Close(efd)
		return nil, fmt.Errorf("mmap ring buffers: %w", err)
	}
	t.mem = mem
	t.efdBuf = mem[n*hdrSlot : n*hdrSlot+8]
	for i := 0; i < n; i++ {
		e := ringEnt{
			qid:     t.queues[i/ringEntries],
			hdr:     mem[i*hdrSlot : i*hdrSlot+ringHdrSize],
			payload: mem[hdrArea+i*payload : hdrArea+(i+1)*payload],
			iov:     (*[2]unix.Iovec)(unsafe.Pointer(&mem[i*hdrSlot+ringHdrSize])),
		}
		e.iov[0].Base = &e.hdr[0]
		e.iov[0].SetLen(ringHdrSize)
		e.iov[1].Base = &e.payload[0]
		e.iov[1].SetLen(len(e.payload))
		if f := t.s.faults; f != nil && f.refuse != nil && f.refuse(t.cpu, i) {
			e.iov[1].SetLen(len(e.payload) / 2) // below the kernel's minimum
		}
		t.ents = append(t.ents, e)
	}
	return ring, nil
}

// teardown closes the ring. The buffers and the eventfd go too, unless
// entries are still live (the loop failed): the kernel may yet copy a
// request into those buffers, and a handler still running writes the
// eventfd, so both stay, leaked, rather than be reused under them.
func (t *ringThread) teardown(ring *uring.Ring, live int) {
	ring.Close()
	if live > 0 {
		return
	}
	// A handler may have had its reply committed (by the wake-up of
	// another) before it wrote the eventfd: let it write before the
	// descriptor is closed and its number reused.
	t.async.Wait()
	unix.Close(t.efd)
	if t.mem != nil {
		unix.Munmap(t.mem)
	}
}

// fuseCmd fills a URING_CMD entry for entry i.
func (t *ringThread) fuseCmd(ring *uring.Ring, i int, op uint32, commitID uint64) error {
	sqe := ring.Next()
	if sqe == nil {
		return errors.New("submission queue full")
	}
	sqe.SetOp(uring.OpURingCmd, int32(t.s.fd))
	sqe.SetCmdOp(op)
	sqe.SetAddr(unsafe.Pointer(t.ents[i].iov), 2)
	sqe.SetUserData(uint64(i))
	cmd := sqe.Cmd() // struct fuse_uring_cmd_req {flags, commit_id u64; qid u16}
	binary.LittleEndian.PutUint64(cmd[8:], commitID)
	binary.LittleEndian.PutUint16(cmd[16:], uint16(t.ents[i].qid))
	return nil
}

func (t *ringThread) armEventfd(ring *uring.Ring) error {
	sqe := ring.Next()
	if sqe == nil {
		return errors.New("submission queue full")
	}
	sqe.SetOp(uring.OpRead, int32(t.efd))
	sqe.SetAddr(unsafe.Pointer(&t.efdBuf[0]), 8)
	sqe.SetUserData(eventfdToken)
	return nil
}

// registerEntries offers every entry to the kernel. A refusal completes
// at once with an error; accepted entries complete only with a request,
// and those that already did come back to be served. err is a failure
// before the entries reached the kernel.
func (t *ringThread) registerEntries(ring *uring.Ring) (early []int, refused int, err error) {
	for i := range t.ents {
		if err := t.fuseCmd(ring, i, uringCmdRegister, 0); err != nil {
			return nil, 0, err
		}
	}
	if err := t.armEventfd(ring); err != nil {
		return nil, 0, err
	}
	if err := ring.Submit(0); err != nil {
		return nil, 0, err
	}
	for {
		c, ok := ring.Pop()
		if !ok {
			return early, refused, nil
		}
		switch {
		case c.UserData == eventfdToken:
			// Cannot complete yet: nothing wrote the eventfd.
		case c.Res < 0:
			if refused == 0 {
				t.s.log.Printf("art: FUSE over io_uring: the kernel refused a ring entry for queue %d: %v", t.ents[c.UserData].qid, syscall.Errno(-c.Res))
			}
			refused++
		default:
			early = append(early, int(c.UserData))
		}
	}
}

// loop serves requests until the kernel has ended every entry (the
// connection is gone). It returns how many entries are still live: none,
// unless waiting on the ring failed.
func (t *ringThread) loop(ring *uring.Ring, live int) int {
	for live > 0 {
		if err := ring.Submit(1); err != nil {
			t.s.log.Printf("art: FUSE over io_uring: %v", err)
			return live
		}
		for {
			c, ok := ring.Pop()
			if !ok {
				break
			}
			if c.UserData == eventfdToken {
				t.commitDone(ring)
				if c.Res >= 0 {
					t.armEventfd(ring)
				}
				continue
			}
			if c.Res < 0 {
				// The connection ended (ENOTCONN, ECONNABORTED) or
				// the entry was cancelled: it will carry no more.
				live--
				if e := syscall.Errno(-c.Res); e != syscall.ENOTCONN && e != syscall.ECONNABORTED && e != syscall.ECANCELED && e != syscall.ENODEV {
					t.s.log.Printf("art: FUSE over io_uring: entry %d: %v", c.UserData, e)
				}
				continue
			}
			t.serve(ring, int(c.UserData))
		}
	}
	return 0
}

// serve answers the request in entry i: here, on this CPU, or — for
// requests that may wait long (fsync waits for the disk, a write while
// the filesystem throttles writers) or that send the kernel a
// notification (setxattr of an ACL), which must not hold up the queue's
// other requests — on a goroutine that hands the reply back through the
// eventfd.
func (t *ringThread) serve(ring *uring.Ring, i int) {
	e := &t.ents[i]
	op := binary.LittleEndian.Uint32(e.hdr[4:8])
	async := op == opFsync || op == opFsyncdir || op == opSetxattr
	if op == opWrite && t.s.writesWait != nil && t.s.writesWait() {
		async = true
	}
	if async {
		t.async.Add(1)
		go func() {
			defer t.async.Done()
			f := t.s.faults
			if f != nil && f.beforeHandle != nil {
				f.beforeHandle()
			}
			t.handle(e)
			t.mu.Lock()
			t.done = append(t.done, i)
			t.mu.Unlock()
			if f != nil && f.beforeWake != nil {
				f.beforeWake()
			}
			var one [8]byte
			binary.LittleEndian.PutUint64(one[:], 1)
			unix.Write(t.efd, one[:])
		}()
		return
	}
	t.handle(e)
	t.commit(ring, i)
}

func (t *ringThread) commitDone(ring *uring.Ring) {
	t.mu.Lock()
	done := t.done
	t.done = nil
	t.mu.Unlock()
	for _, i := range done {
		t.commit(ring, i)
	}
}

func (t *ringThread) commit(ring *uring.Ring, i int) {
	commitID := binary.LittleEndian.Uint64(t.ents[i].hdr[ringHdrCommitID:])
	if err := t.fuseCmd(ring, i, uringCmdCommitAndFetch, commitID); err != nil {
		// Cannot happen: the queue has room for every entry twice.
		t.s.log.Printf("art: FUSE over io_uring: commit: %v", err)
	}
}

// handle runs the request in e through go-fuse's protocol server and
// leaves the reply in e's buffers: the out header where the in header
// was, the rest in the payload buffer.
func (t *ringThread) handle(e *ringEnt) {
	h := e.hdr
	length := int(binary.LittleEndian.Uint32(h[0:4]))
	unique := binary.LittleEndian.Uint64(h[8:16])
	payloadSz := int(binary.LittleEndian.Uint32(h[ringHdrPayloadSz:]))
	opIn := length - inHeaderSize - payloadSz
	if opIn < 0 || opIn > ringHdrOpInSize || payloadSz > len(e.payload) {
		t.s.log.Printf("art: FUSE over io_uring: malformed request (length %d, payload %d)", length, payloadSz)
		t.replyErr(e, unique, syscall.EIO)
		return
	}
	in := [][]byte{h[ringHdrInOut : ringHdrInOut+inHeaderSize], h[ringHdrOpIn : ringHdrOpIn+opIn], e.payload[:payloadSz]}
	out := [][]byte{h[ringHdrInOut : ringHdrInOut+outHeaderSize], e.payload}
	n, st := t.s.ps.HandleRequest(in, out)
	t.served.Add(1)
	if !st.Ok() || n < outHeaderSize {
		if st.Ok() {
			st = gofuse.EIO
		}
		t.replyErr(e, unique, syscall.Errno(st))
		return
	}
	binary.LittleEndian.PutUint32(h[ringHdrPayloadSz:], uint32(n-outHeaderSize))
}

func (t *ringThread) replyErr(e *ringEnt, unique uint64, errno syscall.Errno) {
	h := e.hdr
	binary.LittleEndian.PutUint32(h[0:4], outHeaderSize)
	binary.LittleEndian.PutUint32(h[4:8], uint32(-int32(errno)))
	binary.LittleEndian.PutUint64(h[8:16], unique)
	binary.LittleEndian.PutUint32(h[ringHdrPayloadSz:], 0)
}

// primeProtocolServer gives ps the INIT exchange the kernel had with the
// classic server, so it parses requests for the same protocol version
// and flags.
func primeProtocolServer(ps *gofuse.ProtocolServer, init *gofuse.InitIn) error {
	in := unsafe.Slice((*byte)(unsafe.Pointer(init)), unsafe.Sizeof(*init))
	out := make([]byte, 512)
	n, st := ps.HandleRequest([][]byte{in}, [][]byte{out})
	if !st.Ok() {
		return fmt.Errorf("replay INIT: %v", st)
	}
	if n < outHeaderSize || int32(binary.LittleEndian.Uint32(out[4:8])) != 0 {
		return fmt.Errorf("replay INIT: refused")
	}
	return nil
}

// ringFaults are failures the tests inject into the transport.
type ringFaults struct {
	refuse       func(cpu, entry int) bool // register this entry so that the kernel refuses it
	failDup      bool                      // the dup of /dev/fuse fails
	beforeHandle func()                    // an off-thread handler starts late
	beforeWake   func()                    // an off-thread handler wakes its thread late
	writesWait   func() bool               // replaces the filesystem's Throttling
}
