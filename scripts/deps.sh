#!/usr/bin/env bash
# Installs what art needs at run and test time, when missing: bubblewrap,
# fuse3 (fusermount3, /dev/fuse), and the tools the tests drive (git, fio,
# python3, and strace, which an escape test aims at a process outside the
# sandbox: without it that test skipped); with the argument "bench", also
# what the benchmarks drive (hyperfine, bc).
# Go modules come from go.mod.
set -euo pipefail
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v git >/dev/null 2>&1 || need+=(git)
command -v fio >/dev/null 2>&1 || need+=(fio)
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v strace >/dev/null 2>&1 || need+=(strace)
# cgo for the race detector (make test): a C compiler and libc's headers.
command -v gcc >/dev/null 2>&1 || need+=(gcc)
[ -e /usr/include/stdlib.h ] || need+=(libc6-dev)
if [ "${1:-}" = bench ]; then # what bench/*.sh drive besides art
	command -v hyperfine >/dev/null 2>&1 || need+=(hyperfine)
	command -v bc >/dev/null 2>&1 || need+=(bc)
fi
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "art: missing ${need[*]}; install them: sudo apt-get install -y ${need[*]}" >&2
		exit 1
	fi
	echo "art: installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! command -v go >/dev/null 2>&1; then
	for g in /usr/local/go/bin /usr/lib/go/bin; do
		[ -x "$g/go" ] && export PATH="$g:$PATH"
	done
fi
command -v go >/dev/null 2>&1 || { echo "art: Go toolchain not found (install golang or put go on PATH)" >&2; exit 1; }
