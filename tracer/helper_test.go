//go:build linux

package tracer

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// The test binary doubles as the traced helper program: with
// TRACER_TEST_HELPER set, TestMain runs the named helper instead of the
// tests. A Go program is multi-threaded, which the tracer must follow.
func TestMain(m *testing.M) {
	if h := os.Getenv("TRACER_TEST_HELPER"); h != "" {
		os.Exit(runHelper(h, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func runHelper(name string, args []string) int {
	switch name {
	case "basic":
		return helperBasic(args[0], args[1])
	case "thread-exec":
		return helperThreadExec()
	case "churn":
		return helperChurn()
	case "decode":
		return helperDecode(args[0])
	case "untraced-clone":
		return helperUntracedClone()
	case "seccomp-kill":
		return helperSeccompKill(args[0])
	}
	fmt.Fprintln(os.Stderr, "unknown helper", name)
	return 100
}

// helperBasic does one of each thing the tracer must see, then exits 3.
func helperBasic(dir, port string) int {
	must := func(err error) {
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(101)
		}
	}
	must(os.Chdir(dir))
	// A relative read: openat(AT_FDCWD, "in.txt", O_RDONLY|O_CLOEXEC).
	_, err := os.ReadFile("in.txt")
	must(err)
	// A write: O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0640.
	f, err := os.OpenFile(filepath.Join(dir, "out.txt"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	must(err)
	_, err = f.WriteString("hello\n")
	must(err)
	must(f.Close())
	must(os.Rename(filepath.Join(dir, "out.txt"), filepath.Join(dir, "renamed.txt")))
	must(syscall.Unlink(filepath.Join(dir, "renamed.txt")))
	must(os.Mkdir("sub", 0o750))
	_, err = os.Open(filepath.Join(dir, "missing"))
	if err == nil {
		os.Exit(102)
	}
	// A child program.
	must(exec.Command("/bin/true").Run())
	// A blocking connect to a closed port: ECONNREFUSED from connect(2).
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	must(err)
	p, _ := strconv.Atoi(port)
	err = syscall.Connect(fd, &syscall.SockaddrInet4{Port: p, Addr: [4]byte{127, 0, 0, 1}})
	if err != syscall.ECONNREFUSED {
		fmt.Fprintln(os.Stderr, "helper: connect:", err)
		os.Exit(103)
	}
	syscall.Close(fd)
	// Several threads at once, each opening its own file.
	const n = 4
	var opened, release sync.WaitGroup
	opened.Add(n)
	release.Add(1)
	var done sync.WaitGroup
	for i := 0; i < n; i++ {
		done.Add(1)
		go func(i int) {
			defer done.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			os.WriteFile(filepath.Join(dir, "thread-"+strconv.Itoa(i)), nil, 0o600)
			opened.Done()
			release.Wait()
		}(i)
	}
	opened.Wait()
	release.Done()
	done.Wait()
	return 3
}

// helperThreadExec calls execve from a thread that is not the thread
// group leader: the kernel gives the execing thread the leader's tid.
func helperThreadExec() int {
	ch := make(chan error)
	go func() {
		runtime.LockOSThread()
		// Never returns on success.
		ch <- syscall.Exec("/bin/sh", []string{"sh", "-c", "exit 5"}, os.Environ())
	}()
	fmt.Fprintln(os.Stderr, "helper: exec:", <-ch)
	return 104
}

// helperChurn keeps many threads and processes busy with path syscalls
// until it is killed.
func helperChurn() int {
	long := "/" + string(bytes.Repeat([]byte("x"), 3000))
	for i := 0; i < 4; i++ {
		go func() {
			for {
				syscall.Access(long, 0)
				syscall.Access("/etc/passwd", 0)
			}
		}()
	}
	for i := 0; i < 2; i++ {
		c := exec.Command("/bin/sh", "-c", "while :; do cat /etc/hostname >/dev/null; done")
		c.Start()
	}
	time.Sleep(time.Minute)
	return 0
}

// helperCmd returns a command running helper name.
func helperCmd(t *testing.T, ctx context.Context, name string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	if ctx != nil {
		cmd = exec.CommandContext(ctx, exe, args...)
	} else {
		cmd = exec.Command(exe, args...)
	}
	cmd.Env = append(os.Environ(), "TRACER_TEST_HELPER="+name)
	return cmd
}

// helperUntracedClone tries clone(CLONE_UNTRACED), whose child a tracer
// does not follow, and clone3, and prints what each returned. A child
// made exits at once, as raw clone's child of a Go program must.
func helperUntracedClone() int {
	r, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, syscall.CLONE_UNTRACED|uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if errno == 0 && r == 0 {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
	if errno == 0 {
		var ws syscall.WaitStatus
		syscall.Wait4(int(r), &ws, 0, nil)
	}
	fmt.Printf("clone: %d\n", int(errno))
	var args [88]byte // struct clone_args, CLONE_ARGS_SIZE_VER2
	binary.NativeEndian.PutUint64(args[32:], uint64(syscall.SIGCHLD))
	r, _, errno = syscall.RawSyscall(435, uintptr(unsafe.Pointer(&args)), uintptr(len(args)), 0)
	if errno == 0 && r == 0 {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
	if errno == 0 {
		var ws syscall.WaitStatus
		syscall.Wait4(int(r), &ws, 0, nil)
	}
	fmt.Printf("clone3: %d\n", int(errno))
	return 0
}

// helperSeccompKill installs, on its own thread, a seccomp filter that
// kills the process at mkdirat, then makes dir with mkdirat: the kernel
// skips the call and the process dies of SIGSYS.
func helperSeccompKill(dir string) int {
	runtime.LockOSThread()
	const (
		ldNr  = 0x20 // BPF_LD|BPF_W|BPF_ABS
		jeqK  = 0x15 // BPF_JMP|BPF_JEQ|BPF_K
		retK  = 0x06 // BPF_RET|BPF_K
		kill  = 0x80000000
		allow = 0x7fff0000
	)
	type sockFilter struct {
		code   uint16
		jt, jf uint8
		k      uint32
	}
	prog := []sockFilter{{ldNr, 0, 0, 0}, {jeqK, 0, 1, syscall.SYS_MKDIRAT}, {retK, 0, 0, kill}, {retK, 0, 0, allow}}
	fprog := struct {
		n    uint16
		prog *sockFilter
	}{uint16(len(prog)), &prog[0]}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, 38, 1, 0); e != 0 { // PR_SET_NO_NEW_PRIVS
		fmt.Fprintln(os.Stderr, "no_new_privs:", e)
		return 101
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, 22, 2, uintptr(unsafe.Pointer(&fprog))); e != 0 { // PR_SET_SECCOMP, SECCOMP_MODE_FILTER
		fmt.Fprintln(os.Stderr, "seccomp:", e)
		return 102
	}
	p, _ := syscall.BytePtrFromString(dir)
	const atFdcwd = 0xffffff9c
	syscall.RawSyscall(syscall.SYS_MKDIRAT, atFdcwd, uintptr(unsafe.Pointer(p)), 0o755)
	return 103 // not reached
}
