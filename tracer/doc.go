// Package tracer records what a sandboxed program does: a ptrace(2)
// tracer for a whole process tree, assisted by seccomp-bpf, with syscall
// decoding and the log formats art stores and shows.
//
// It owns:
//
//   - Run: start an exec.Cmd under ptrace and follow every fork, vfork,
//     clone (threads too) and exec of its tree until the last process ends,
//     re-injecting signals, keeping group-stops stopped, and reporting the
//     first process's exit status or terminating signal exactly. All ptrace
//     requests run on one locked OS thread. Processes in other pid
//     namespaces (bwrap --unshare-pid) are recorded with their host pid and
//     their namespace pid.
//   - SeccompFilter: the classic BPF program that makes only the chosen
//     syscalls stop the tracer (SECCOMP_RET_TRACE), to be installed by
//     bwrap --seccomp FD (art hands it to the sandbox, which runs it after
//     its own rules). With Options.Syscalls set, Run resumes tracees
//     with PTRACE_CONT and only handles PTRACE_EVENT_SECCOMP stops, stepping
//     each to its syscall exit for the result, as strace --seccomp-bpf does.
//   - The syscall name tables of amd64 (with x32 and i386) and arm64 (with
//     32-bit ARM), generated from the kernel's lists by
//     internal/gensysnum (go generate), and Lookup, which names unknown
//     syscalls with the closest known ones.
//   - Decoding: paths read from the tracee's memory (process_vm_readv, or
//     PTRACE_PEEKDATA), resolved against the tracee's cwd or dirfd; open
//     flags and modes; execve argv; socket addresses; errno names. A tracee
//     that dies or passes a bad pointer yields an error marker in the
//     argument, never a tracer failure.
//   - Event and its two formats: a strace-like text line and JSON lines
//     (field names documented on Event), with ReadJSON to load them back.
//   - Summarize: files read, written, created, renamed, deleted, programs
//     run, connections attempted and per-syscall counts of a trace.
//
// It does not build the bwrap command line, choose which syscalls to trace,
// or store logs: package sandbox and the CLI do.
//
// Requirements: Linux 5.3 or later (PTRACE_GET_SYSCALL_INFO), amd64 or
// arm64, and the right to ptrace the command (the same user, or
// CAP_SYS_PTRACE).
package tracer
