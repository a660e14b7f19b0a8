#!/usr/bin/env bash
# bench.sh: overhead of package tracer against no tracing and against strace.
#
# Usage: bash tracer/bench.sh [rounds]   (from anywhere; needs go, bc;
#        bwrap and strace rows are skipped when those are missing)
#
# Workloads:
#   find: find $(go env GOROOT)/src -type f -name '*.go' -exec cat {} + > /dev/null
#   dd:   dd if=/dev/zero of=/dev/null bs=4k count=500000   (1M syscalls)
# Each runs untraced, under this tracer (internal/tracecmd: full tracing,
# and seccomp mode with the openat,execve filter installed by
# bwrap --dev-bind / / --seccomp 3), and under strace (-f, and
# -f --seccomp-bpf -e trace=openat,execve). Logs are written as text to
# /dev/null, as with strace -o /dev/null. "bwrap + allow-all filter" is the
# kernel's own cost of having any seccomp filter, without a tracer: the
# floor for seccomp mode.
#
# The configurations run interleaved, one of each per round, and the best
# time of all rounds (default 7) is printed with its ratio to the untraced
# run, so that load from other processes skews all rows alike.
#
# Measured on the dev VM (2 vCPU AMD EPYC, Linux 6.18, strace 6.1, shared
# with other jobs: load 5-11), best of 9 interleaved rounds:
#
#   find | cat, 7711 files                   time    vs untraced
#   untraced                                0.214s    1.00x
#   tracer, all syscalls, text log          2.136s    9.97x
#   tracer, all syscalls, no log            1.742s    8.14x
#   strace -f -o /dev/null                  2.049s    9.57x
#   bwrap + allow-all filter, no tracer     0.263s    1.23x
#   tracer, openat,execve (bwrap --seccomp) 0.566s    2.64x
#   strace -f --seccomp-bpf -e openat,execve 0.518s   2.42x
#   dd bs=4k count=500000
#   untraced                                0.257s    1.00x
#   untraced in bwrap                       0.275s    1.07x
#   bwrap + allow-all filter, no tracer     0.301s    1.17x
#   tracer, openat,execve (bwrap --seccomp) 0.313s    1.22x
#   strace -f --seccomp-bpf -e openat,execve 0.303s   1.18x
#
# Tracer and strace are within noise of each other (other runs: tracer
# 2.03s vs strace 2.33s full, 0.44s vs 0.80s filtered). In seccomp mode
# the tracer adds nothing measurable to dd over the kernel's own cost of
# an (allow-all) seccomp filter, which is ~45 ns per syscall here, 17-20%
# of dd's ~250 ns syscalls; so the 1.1x target is out of reach on this VM
# for any seccomp-based tracer.
set -euo pipefail
rounds=${1:-7}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$here" && go build -o "$tmp/tracecmd" ./internal/tracecmd)
T=$tmp/tracecmd
src=$(go env GOROOT)/src
have() { command -v "$1" >/dev/null; }
# struct sock_filter {BPF_RET|BPF_K, 0, 0, SECCOMP_RET_ALLOW}
printf '\x06\x00\x00\x00\x00\x00\xff\x7f' >"$tmp/allow.bpf"

find_w() { find "$src" -type f -name '*.go' -exec cat {} +; }
dd_w() { dd if=/dev/zero of=/dev/null bs=4k count=500000 status=none; }

# Configurations: $1 is the workload function.
untraced() { bash -c "$(declare -f "$1"); src=$src; $1"; }
in_bwrap() { bwrap --dev-bind / / -- bash -c "$(declare -f "$1"); src=$src; $1"; }
allow_all() { bwrap --dev-bind / / --seccomp 3 -- bash -c "$(declare -f "$1"); src=$src; $1" 3<"$tmp/allow.bpf"; }
tracer_all() { "$T" -o /dev/null -- bash -c "$(declare -f "$1"); src=$src; $1"; }
tracer_nolog() { "$T" -- bash -c "$(declare -f "$1"); src=$src; $1"; }
tracer_filter() { "$T" -o /dev/null -e openat,execve -- bash -c "$(declare -f "$1"); src=$src; $1"; }
strace_all() { strace -f -o /dev/null bash -c "$(declare -f "$1"); src=$src; $1"; }
strace_filter() { strace -f --seccomp-bpf -e trace=openat,execve -o /dev/null bash -c "$(declare -f "$1"); src=$src; $1"; }

declare -A label=(
	[untraced]="untraced"
	[in_bwrap]="untraced in bwrap"
	[allow_all]="bwrap + allow-all filter, no tracer"
	[tracer_all]="tracer, all syscalls, text log"
	[tracer_nolog]="tracer, all syscalls, no log"
	[tracer_filter]="tracer, openat,execve (bwrap --seccomp)"
	[strace_all]="strace -f -o /dev/null"
	[strace_filter]="strace -f --seccomp-bpf -e openat,execve"
)

# bench WORKLOAD CONFIG...: interleaved rounds, prints the best times.
bench() {
	local w=$1
	shift
	declare -A best=()
	local c s e t
	for ((r = 0; r < rounds; r++)); do
		for c in "$@"; do
			s=$(date +%s%N)
			"$c" "$w" >/dev/null 2>&1 </dev/null || true
			e=$(date +%s%N)
			t=$(((e - s) / 1000))
			if [[ -z ${best[$c]:-} ]] || ((t < best[$c])); then best[$c]=$t; fi
		done
	done
	local base=${best[$1]}
	for c in "$@"; do
		printf '  %-42s %8.3fs  %6.2fx\n' "${label[$c]}" "$(echo "${best[$c]} / 1000000" | bc -l)" "$(echo "${best[$c]} / $base" | bc -l)"
	done
}

configs_find=(untraced tracer_all tracer_nolog)
configs_dd=(untraced)
if have bwrap; then
	configs_find+=(in_bwrap allow_all tracer_filter)
	configs_dd+=(in_bwrap allow_all tracer_filter)
fi
if have strace; then
	configs_find+=(strace_all strace_filter)
	configs_dd+=(strace_filter)
fi

find_w >/dev/null 2>&1 || true # warm the page cache
echo "find | cat over $(find "$src" -type f -name '*.go' | wc -l) .go files, best of $rounds rounds ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)):"
bench find_w "${configs_find[@]}"
echo "dd bs=4k count=500000, best of $rounds rounds:"
bench dd_w "${configs_dd[@]}"
