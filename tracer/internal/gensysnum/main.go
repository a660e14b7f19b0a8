// Command gensysnum generates the syscall name tables of package tracer
// (zsysnames_amd64.go, zsysnames_arm64.go) from the kernel's own lists.
//
// Sources, merged and cross-checked (a name with two different numbers, or a
// number with two different names, is a fatal error):
//
//   - golang.org/x/sys/unix zsysnum_linux_{amd64,arm64,386,arm}.go, which are
//     themselves generated from the kernel headers by x/sys's mksysnum and
//     are always present in the module cache (x/sys is a dependency);
//   - when installed, the kernel UAPI headers of this machine:
//     /usr/include/x86_64-linux-gnu/asm/unistd_{64,32,x32}.h (Debian
//     linux-libc-dev) and, through `cpp -dM`, the arm64 asm-generic list in
//     /usr/aarch64-linux-gnu/include (Debian linux-libc-dev-arm64-cross).
//
// The x32 table comes from unistd_x32.h only (x/sys has none); x86_64
// syscalls numbered 424 and up are "common" in syscall_64.tbl and so are
// added to it when the header predates them.
//
// Run it with `go generate ./tracer/` from the module root.
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

type table struct {
	name    string         // Go identifier suffix
	doc     string         // comment
	byNr    map[int]string // number -> name
	byName  map[string]int
	sources []string
}

func newTable(name, doc string) *table {
	return &table{name: name, doc: doc, byNr: map[int]string{}, byName: map[string]int{}}
}

func (t *table) add(src, name string, nr int) {
	if old, ok := t.byName[name]; ok && old != nr {
		log.Fatalf("%s: %s: syscall %q is %d here but %d in %v", t.name, src, name, nr, old, t.sources)
	}
	if old, ok := t.byNr[nr]; ok && old != name {
		log.Fatalf("%s: %s: syscall number %d is %q here but %q in %v", t.name, src, nr, name, old, t.sources)
	}
	t.byName[name] = nr
	t.byNr[nr] = name
}

func (t *table) merge(src string, m map[string]int) {
	if len(m) == 0 {
		log.Printf("%s: %s: no syscalls found, skipped", t.name, src)
		return
	}
	for name, nr := range m {
		t.add(src, name, nr)
	}
	t.sources = append(t.sources, src)
}

var (
	xsysRE   = regexp.MustCompile(`(?m)^\s*SYS_(\w+)\s*=\s*(\d+)\s*$`)
	headerRE = regexp.MustCompile(`(?m)^#define __NR_(\w+)\s+(\d+)\s*$`)
	x32RE    = regexp.MustCompile(`(?m)^#define __NR_(\w+)\s+\(__X32_SYSCALL_BIT \+ (\d+)\)\s*$`)
	cppRE    = regexp.MustCompile(`(?m)^#define (__NR(?:3264)?_\w+) (\w+)\s*$`)
)

// notSyscalls are constants of x/sys's lists that are not system calls.
var notSyscalls = map[string]bool{"syscall_mask": true}

func parse(re *regexp.Regexp, data []byte) map[string]int {
	m := map[string]int{}
	for _, sub := range re.FindAllSubmatch(data, -1) {
		name := strings.ToLower(string(sub[1]))
		if notSyscalls[name] {
			continue
		}
		nr, err := strconv.Atoi(string(sub[2]))
		if err != nil {
			log.Fatal(err)
		}
		m[name] = nr
	}
	return m
}

func readOptional(path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		log.Printf("optional source %s: %v (skipped)", path, err)
		return nil
	}
	return data
}

// cppGeneric expands the arm64 asm-generic syscall list with the C
// preprocessor and resolves __NR_x -> __NR3264_x -> number chains.
func cppGeneric(includeDir string) map[string]int {
	if _, err := os.Stat(filepath.Join(includeDir, "asm", "unistd.h")); err != nil {
		log.Printf("optional source %s: %v (skipped)", includeDir, err)
		return nil
	}
	cmd := exec.Command("cpp", "-dM", "-nostdinc", "-I"+includeDir, "-")
	cmd.Stdin = strings.NewReader("#include <asm/unistd.h>\n")
	out, err := cmd.Output()
	if err != nil {
		log.Printf("optional source cpp %s: %v (skipped)", includeDir, err)
		return nil
	}
	defs := map[string]string{}
	for _, sub := range cppRE.FindAllSubmatch(out, -1) {
		defs[string(sub[1])] = string(sub[2])
	}
	m := map[string]int{}
	for macro := range defs {
		if !strings.HasPrefix(macro, "__NR_") || macro == "__NR_syscalls" {
			continue
		}
		v := defs[macro]
		for i := 0; i < 8; i++ {
			if next, ok := defs[v]; ok {
				v = next
			}
		}
		nr, err := strconv.Atoi(v)
		if err != nil {
			continue // e.g. __NR_arch_specific_syscall aliases
		}
		m[strings.TrimPrefix(macro, "__NR_")] = nr
	}
	// asm-generic defines these helper numbers that are not syscalls.
	delete(m, "arch_specific_syscall")
	return m
}

func xsysDir() string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		log.Fatalf("locating golang.org/x/sys: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "unix")
}

func xsys(dir, arch string) (string, map[string]int) {
	path := filepath.Join(dir, "zsysnum_linux_"+arch+".go")
	data, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	// Name the source by module version, not by a machine-local path.
	src := "golang.org/x/sys/unix/zsysnum_linux_" + arch + ".go"
	if i := strings.Index(path, "golang.org/x/sys@"); i >= 0 {
		src = path[i:]
	}
	return src, parse(xsysRE, data)
}

func emit(file, constraint string, tables ...*table) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by \"go run ./internal/gensysnum\"; DO NOT EDIT.\n\n")
	fmt.Fprintf(&b, "//go:build %s\n\n", constraint)
	fmt.Fprintf(&b, "package tracer\n\n")
	for _, t := range tables {
		nrs := make([]int, 0, len(t.byNr))
		for nr := range t.byNr {
			nrs = append(nrs, nr)
		}
		sort.Ints(nrs)
		fmt.Fprintf(&b, "// %s\n//\n// Sources:\n", t.doc)
		for _, s := range t.sources {
			fmt.Fprintf(&b, "//   - %s\n", s)
		}
		fmt.Fprintf(&b, "var sysnames%s = [...]string{\n", t.name)
		for _, nr := range nrs {
			fmt.Fprintf(&b, "\t%d: %q,\n", nr, t.byNr[nr])
		}
		fmt.Fprintf(&b, "}\n\n")
	}
	src, err := format.Source(b.Bytes())
	if err != nil {
		log.Fatalf("%s: %v", file, err)
	}
	if err := os.WriteFile(file, src, 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s", file)
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("gensysnum: ")
	dir := xsysDir()
	const x86inc = "/usr/include/x86_64-linux-gnu/asm/"

	amd64 := newTable("AMD64", "sysnamesAMD64 maps x86_64 system call numbers to names.")
	amd64.merge(xsys(dir, "amd64"))
	amd64.merge(x86inc+"unistd_64.h", parse(headerRE, readOptional(x86inc+"unistd_64.h")))

	x32 := newTable("X32", "sysnamesX32 maps x32 system call numbers (without __X32_SYSCALL_BIT) to names.")
	x32.merge(x86inc+"unistd_x32.h", parse(x32RE, readOptional(x86inc+"unistd_x32.h")))
	if len(x32.byNr) == 0 {
		log.Fatalf("x32: %sunistd_x32.h is required (apt-get install linux-libc-dev)", x86inc)
	}
	common := map[string]int{}
	for nr, name := range amd64.byNr {
		if _, ok := x32.byName[name]; nr >= 424 && !ok {
			common[name] = nr
		}
	}
	if len(common) > 0 {
		x32.merge("x86_64 common syscalls >= 424 (syscall_64.tbl)", common)
	}

	i386 := newTable("I386", "sysnamesI386 maps i386 (ia32 compat) system call numbers to names.")
	i386.merge(xsys(dir, "386"))
	i386.merge(x86inc+"unistd_32.h", parse(headerRE, readOptional(x86inc+"unistd_32.h")))

	arm64 := newTable("ARM64", "sysnamesARM64 maps arm64 system call numbers to names.")
	arm64.merge(xsys(dir, "arm64"))
	arm64.merge("cpp -dM /usr/aarch64-linux-gnu/include/asm/unistd.h", cppGeneric("/usr/aarch64-linux-gnu/include"))

	arm := newTable("ARM", "sysnamesARM maps 32-bit ARM EABI (arm64 compat) system call numbers to names.")
	arm.merge(xsys(dir, "arm"))

	emit("zsysnames_amd64.go", "linux && amd64", amd64, x32, i386)
	emit("zsysnames_arm64.go", "linux && arm64", arm64, arm)
}
