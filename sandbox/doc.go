// Package sandbox builds and runs the bubblewrap (bwrap) sandbox an agent
// runs in.
//
// It owns: turning a Config into a bwrap command line (read-only host root,
// private /tmp, /dev/shm and /run, own /dev and /proc, hidden /root, /home
// and caller-named paths, the host's bound unix sockets covered (sockets.go),
// the agent home bound at /home/agent, extra binds,
// a cleared environment, no network unless asked, no capabilities, no new
// privileges, no further user namespaces); parsing binds.json; choosing the
// unprivileged host user the agent runs as when the caller is root; running
// the command interactively on a fresh pty or non-interactively with the
// caller's stdio; exit status mapping (126/127/124/128+n); timeouts, signals
// and killing the whole process tree; memory and process-count limits
// (cgroup v2 when available, rlimits otherwise); keeping the caller and the
// sandbox in one scheduling group where the scheduler's autogroup would
// split them (schedgroup.go); and a preflight check that bwrap works on
// this host.
//
// It must not know about FUSE, the overlay or the repository: the caller
// hands it a plain host directory to use as the home (for art, the FUSE
// mount point) and the host paths to hide (for art, the repository). The
// home, the workspace directory inside it and every bind source must be
// reachable by the user the agent runs as (see AgentUser), because bwrap
// itself runs as that user.
//
// Tracing: Config.Starter lets another package (the ptrace tracer) start and
// wait for the bwrap process itself while Run keeps doing I/O, limits,
// timeouts and signal handling. Every sandbox runs under a seccomp-bpf
// program of its own (seccomp.go: no kernel keyring), which Config.Seccomp
// extends with another (the tracer's) for the calls it lets through.
package sandbox
