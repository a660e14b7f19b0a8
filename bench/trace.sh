#!/usr/bin/env bash
# bench/trace.sh — the syscall tracer inside art run, next to strace, in one run.
#
# Workloads (each timed inside the sandbox, so the session's own start and
# commit do not count):
#   readall: find SRC -name '*.go' -exec cat {} +   (many opens)
#   dd:      dd if=/dev/zero of=/dev/null bs=4k count=500000   (many syscalls, none listed)
# Each traced time is a ratio to its own untraced baseline in the same run
# (best of ROUNDS; the rounds interleave all configurations):
#   art run --trace --trace-syscalls openat,execve   vs strace -f --seccomp-bpf -e trace=openat,execve
#   art run --trace (all syscalls, log to a file)    vs strace -f -o FILE
# Usage: bench/trace.sh [ROUNDS]   (root; needs bwrap, fuse3, strace)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-3}
out=${ARTBENCH_OUT:-$here/out}
mkdir -p "$out"
work=$(mktemp -d "${ARTBENCH_TMP:-/var/tmp}/artbench-tr.XXXXXX")
trap 'rm -rf "$work"' EXIT
art=$work/art
(cd "$here/.." && CGO_ENABLED=0 go build -o "$art" .)
src=$(go env GOROOT)/src
mkdir -p "$work/ws"
(cd "$work/ws" && "$art" init >/dev/null && echo seed >seed && "$art" push -q >/dev/null)

readall="find $src -name '*.go' -exec cat {} + >/dev/null"
dd="dd if=/dev/zero of=/dev/null bs=4k count=500000 status=none"
inside() { # inside ART-FLAGS... -- CMD: seconds measured inside art run
	local cmd=${*: -1}
	local flags=("${@:1:$#-1}")
	(cd "$work/ws" && "$art" run -i=false "${flags[@]}" -- sh -c "s=\$(date +%s.%N); $cmd; echo \"\$(date +%s.%N) - \$s\" | bc -l" 2>/dev/null)
}
host() { # host CMD...: seconds on the host
	local s e
	s=$(date +%s.%N)
	"$@" >/dev/null 2>&1
	e=$(date +%s.%N)
	echo "$e - $s" | bc -l
}
declare -A T
best() { # best KEY SECONDS: keep the smaller time (every time goes to trace.log)
	echo "round $round $1 $2" >>"$out/trace.log"
	if [ -z "${T[$1]:-}" ] || [ "$(echo "$2 < ${T[$1]}" | bc -l)" = 1 ]; then T[$1]=$2; fi
}

: >"$out/trace.log"
# Rounds outermost, every configuration once per round: load from other
# jobs on the host then skews all configurations alike.
for round in $(seq "$rounds"); do
	for w in readall dd; do
		cmd=${!w}
		best "$w.art.plain" "$(inside -b "plain-$w-$round" "$cmd")"
		best "$w.art.filter" "$(inside -b "filter-$w-$round" --trace --trace-syscalls openat,execve --trace-log "$work/f.log" "$cmd")"
		best "$w.art.full" "$(inside -b "full-$w-$round" --trace --trace-log "$work/full.log" "$cmd")"
		best "$w.host.plain" "$(host sh -c "$cmd")"
		best "$w.strace.filter" "$(host strace -f --seccomp-bpf -e trace=openat,execve -o "$work/s.log" sh -c "$cmd")"
		best "$w.strace.full" "$(host strace -f -o "$work/s.log" sh -c "$cmd")"
	done
done

r() { echo "scale=2; $1 / $2" | bc -l; }
{
	echo "art tracer benchmark — $(date -u +%FT%TZ); best of $rounds; load $(cut -d' ' -f1-3 /proc/loadavg)"
	printf "%-34s %10s %10s %10s %10s\n" workload untraced "filter" "full" "ratios f/full"
	for w in readall dd; do
		printf "%-34s %9.3fs %9.3fs %9.3fs %5s %5s\n" "$w: art run --trace" "${T[$w.art.plain]}" "${T[$w.art.filter]}" "${T[$w.art.full]}" \
			"$(r "${T[$w.art.filter]}" "${T[$w.art.plain]}")" "$(r "${T[$w.art.full]}" "${T[$w.art.plain]}")"
		printf "%-34s %9.3fs %9.3fs %9.3fs %5s %5s\n" "$w: strace on the host" "${T[$w.host.plain]}" "${T[$w.strace.filter]}" "${T[$w.strace.full]}" \
			"$(r "${T[$w.strace.filter]}" "${T[$w.host.plain]}")" "$(r "${T[$w.strace.full]}" "${T[$w.host.plain]}")"
	done
	echo "bars: filtered overhead <= strace --seccomp-bpf's; dd filtered <= 1.1x; full <= strace -f -o FILE"
} | tee "$out/trace.txt"
