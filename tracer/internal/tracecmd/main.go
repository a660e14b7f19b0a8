// Command tracecmd runs a command under package tracer; bench.sh and
// manual checks use it.
//
//	tracecmd [-o text.log] [-json events.jsonl] [-e openat,execve [-bwrap]] [-summary] -- cmd args...
//	tracecmd -e openat,execve -dump-filter FILE
//
// With -e the command is run as `bwrap --dev-bind / / --seccomp 3 -- cmd`
// with the tracer's seccomp filter on fd 3, unless -bwrap=false (then the
// command is expected to install the filter itself, and the list only
// selects the stop mode).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/artproject/art/tracer"
)

func main() {
	text := flag.String("o", "", "strace-like log file (- for stderr)")
	jsonOut := flag.String("json", "", "JSON lines file")
	syscalls := flag.String("e", "", "comma-separated syscalls to trace (seccomp mode)")
	useBwrap := flag.Bool("bwrap", true, "with -e, install the filter with bwrap --seccomp")
	summary := flag.Bool("summary", false, "print the summary (needs -json) as JSON on stdout")
	dump := flag.String("dump-filter", "", "write the seccomp filter for -e to this file and exit")
	flag.Parse()
	if *dump != "" {
		prog, err := tracer.SeccompFilter(strings.Split(*syscalls, ","))
		if err == nil {
			err = os.WriteFile(*dump, prog, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	args := flag.Args()
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: tracecmd [flags] -- cmd args...")
		os.Exit(2)
	}
	var opts tracer.Options
	open := func(name string) io.Writer {
		if name == "-" {
			return os.Stderr
		}
		f, err := os.Create(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(125)
		}
		return f
	}
	if *text != "" {
		opts.Text = open(*text)
	}
	if *jsonOut != "" {
		opts.JSON = open(*jsonOut)
	}
	var extra []*os.File
	if *syscalls != "" {
		opts.Syscalls = strings.Split(*syscalls, ",")
		if *useBwrap {
			prog, err := tracer.SeccompFilter(opts.Syscalls)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(125)
			}
			f, err := os.CreateTemp("", "seccomp")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(125)
			}
			os.Remove(f.Name())
			f.Write(prog)
			f.Seek(0, 0)
			extra = append(extra, f)
			args = append([]string{"bwrap", "--dev-bind", "/", "/", "--seccomp", "3", "--"}, args...)
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = extra
	res, err := tracer.Run(cmd, opts)
	for _, w := range []io.Writer{opts.Text, opts.JSON} {
		if f, ok := w.(*os.File); ok && f != os.Stderr {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracecmd:", err)
		if res.ExitCode == 0 && res.Signal == 0 {
			os.Exit(125)
		}
	}
	if *summary && *jsonOut != "" {
		data, _ := os.ReadFile(*jsonOut)
		evs, err := tracer.ReadJSON(bytes.NewReader(data))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		out, _ := json.MarshalIndent(tracer.Summarize(evs), "", "  ")
		fmt.Println(string(out))
	}
	fmt.Fprintf(os.Stderr, "tracecmd: %d events\n", res.Events)
	if res.Signal != 0 {
		os.Exit(128 + int(res.Signal&0x7f))
	}
	_ = syscall.Getpid
	os.Exit(res.ExitCode)
}
