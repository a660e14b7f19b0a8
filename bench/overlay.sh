#!/usr/bin/env bash
# bench/overlay.sh — the copy-on-write home next to native, in one run.
#
# On a tar of $(go env GOROOT)/src, with the repository and the native
# directory on the same filesystem (disk, then tmpfs), it times:
#   untar, read every file, rm -rf       native | art mount | art mount over /dev/fuse
#                                        | go-fuse loopback
#   the same as one script               inside art run | on art mount
#   sequential 1 GiB write and read      native | art mount
#   commit after the untar               art (unmount+fold) | git add+commit
#   commit after changing one file       art
#   art run -- true (commit included)    art | bare bwrap
#   read-all with a 20-rule policy       art run with policy | art run without
# and prints ratios. go-fuse's loopback filesystem shows what any go-fuse
# filesystem costs on this machine, apart from art's own work.
#
# Usage: bench/overlay.sh [TREE]   (root; needs bwrap, fuse3, git)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tree=${1:-$(go env GOROOT)/src}
out=${ARTBENCH_OUT:-$here/out}
mkdir -p "$out"
work=$(mktemp -d "${ARTBENCH_TMP:-/var/tmp}/artbench-ov.XXXXXX")
cleanup() {
	for m in $(awk -v w="$work" 'index($5, w) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	[ -n "${ARTBENCH_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

art=$work/art
loop=$work/loopback
(cd "$here/.." && CGO_ENABLED=0 go build -o "$art" . && go build -o "$loop" ./bench/loopback)
tar -C "$(dirname "$tree")" -cf "$work/src.tar" "$(basename "$tree")"
files=$(tar -tf "$work/src.tar" | grep -vc '/$')
mb=$(($(stat -c %s "$work/src.tar") / 1048576))

declare -A T
now() { date +%s.%N; }
timed() { # timed KEY cmd...: wall seconds of cmd into T[KEY]
	local k=$1
	shift
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
	local s
	s=$(now)
	"$@"
	T[$k]=$(echo "$(now) - $s" | bc -l)
}
ratio() { echo "scale=2; $1 / $2" | bc -l; }

mount_art() { # mount_art WS MNT [TRANSPORT]: art mount of WS's repository at MNT, in the background
	(cd "$1" && ART_FUSE_TRANSPORT=${3:-} exec "$art" mount -b main "$2" 2>>"$work/mount.log") &
	MPID=$!
	for _ in $(seq 100); do
		grep -q " $2 " /proc/self/mountinfo && return 0
		sleep 0.05
	done
	echo "art mount did not come up" >&2
	exit 2
}
umount_art() { # umount_art: SIGINT, wait for the fold+commit
	kill -INT "$MPID"
	wait "$MPID" || true
}

workload() { # workload PREFIX DIR: untar, read, rm in DIR
	timed "$1.untar" tar -C "$2" -xf "$work/src.tar"
	timed "$1.read" sh -c "find '$2' -type f -exec cat {} + >/dev/null"
	timed "$1.rm" rm -rf "$2/$(basename "$tree")"
}

run_fs() { # run_fs LABEL BASE: the small-file workload on BASE
	local base=$1/$2
	mkdir -p "$base/native" "$base/ws" "$base/mnt" "$base/lb-back" "$base/lb-mnt"
	workload "$2.native" "$base/native"
	(cd "$base/ws" && "$art" init >/dev/null && echo seed >seed && "$art" push -q >/dev/null)
	mount_art "$base/ws" "$base/mnt"
	workload "$2.art" "$base/mnt/ws"
	umount_art
	# The same mount with every request on /dev/fuse (no io_uring).
	mount_art "$base/ws" "$base/mnt" classic
	workload "$2.dev" "$base/mnt/ws"
	umount_art
	"$loop" "$base/lb-back" "$base/lb-mnt" &
	local lpid=$!
	for _ in $(seq 100); do grep -q " $base/lb-mnt " /proc/self/mountinfo && break; sleep 0.05; done
	workload "$2.loop" "$base/lb-mnt"
	kill -INT $lpid
	wait $lpid || true
	# The same script inside art run and on art mount, so that the
	# sandbox is the only difference: the tar is read from the workspace
	# (through the mount), the steps run back to back, caches are dropped
	# once before the script, and tar neither chowns nor keeps modes
	# against the umask, which it does as root on the mount and cannot as
	# the agent (23k more requests for the mount's untar). The mount rows
	# above read the tar from the host disk and drop caches before each
	# step.
	cp "$work/src.tar" "$base/ws/"
	(cd "$base/ws" && "$art" push -q >/dev/null)
	local script='
		n() { date +%s.%N; }
		a=$(n); tar --no-same-owner --no-same-permissions -xf src.tar; b=$(n)
		find . -type f -exec cat {} + >/dev/null; c=$(n)
		rm -rf '"$(basename "$tree")"'; d=$(n)
		echo "$a $b $c $d"'
	local t a b c d
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
	mount_art "$base/ws" "$base/mnt"
	t=$(cd "$base/mnt/ws" && sh -c "$script")
	umount_art
	read -r a b c d <<<"$t"
	T[$2.same.untar]=$(echo "$b - $a" | bc -l)
	T[$2.same.read]=$(echo "$c - $b" | bc -l)
	T[$2.same.rm]=$(echo "$d - $c" | bc -l)
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
	t=$(cd "$base/ws" && "$art" run -i=false -- sh -c "$script" 2>>"$work/run.log")
	read -r a b c d <<<"$t"
	T[$2.run.untar]=$(echo "$b - $a" | bc -l)
	T[$2.run.read]=$(echo "$c - $b" | bc -l)
	T[$2.run.rm]=$(echo "$d - $c" | bc -l)
}

echo "art overlay benchmark — $(date -u +%FT%TZ)"
echo "tree: $tree ($files files, $mb MiB tar); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
run_fs "$work" disk
mkdir -p "$work/tmpfs"
mount -t tmpfs -o size=4g tmpfs "$work/tmpfs"
run_fs "$work/tmpfs" t

# Sequential 1 GiB write and read.
base=$work/seq
mkdir -p "$base/native" "$base/ws" "$base/mnt"
timed seq.native.write dd if=/dev/zero of="$base/native/big" bs=1M count=1024 conv=fsync status=none
timed seq.native.read dd if="$base/native/big" of=/dev/null bs=1M status=none
(cd "$base/ws" && "$art" init >/dev/null && echo seed >seed && "$art" push -q >/dev/null)
mount_art "$base/ws" "$base/mnt"
timed seq.art.write dd if=/dev/zero of="$base/mnt/ws/big" bs=1M count=1024 conv=fsync status=none
timed seq.art.read dd if="$base/mnt/ws/big" of=/dev/null bs=1M status=none
rm -f "$base/mnt/ws/big"
umount_art

# Commit after the untar (unmount + fold) vs git add+commit of the same files.
base=$work/commit
mkdir -p "$base/ws" "$base/mnt" "$base/git"
(cd "$base/ws" && "$art" init >/dev/null && echo seed >seed && "$art" push -q >/dev/null)
mount_art "$base/ws" "$base/mnt"
tar -C "$base/mnt/ws" -xf "$work/src.tar"
s=$(now)
umount_art
T[commit.art]=$(echo "$(now) - $s" | bc -l)
tar -C "$base/git" -xf "$work/src.tar"
export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b
git -C "$base/git" -c gc.auto=0 init -q
timed commit.git sh -c "git -C '$base/git' -c gc.auto=0 add -A && git -C '$base/git' -c gc.auto=0 commit -qm x"
# Commit after changing one file.
mount_art "$base/ws" "$base/mnt"
f=$(cd "$base/mnt/ws" && find . -name '*.go' -print -quit)
echo "// changed" >>"$base/mnt/ws/$f"
s=$(now)
umount_art
T[commit.one]=$(echo "$(now) - $s" | bc -l)

# art run -- true, commit included, vs a bare bwrap.
base=$work/run
mkdir -p "$base/ws"
(cd "$base/ws" && "$art" init >/dev/null && echo seed >seed && "$art" push -q >/dev/null)
hyperfine -N --warmup 2 --runs 15 --export-json "$work/run.json" \
	"bwrap --ro-bind / / --unshare-all --die-with-parent true" \
	"$art -d $base/ws/.art/art.db run -m $base/ws -i=false -- true" >>"$work/hyperfine.log" 2>&1
T[run.bwrap]=$(python3 -c "import json;d=json.load(open('$work/run.json'));print(d['results'][0]['median'])")
T[run.art]=$(python3 -c "import json;d=json.load(open('$work/run.json'));print(d['results'][1]['median'])")

# Read-all inside art run with a 20-rule policy vs none.
base=$work/pol
mkdir -p "$base/ws"
tar -C "$base/ws" -xf "$work/src.tar"
(cd "$base/ws" && "$art" init >/dev/null && "$art" push -q >/dev/null)
rules=()
for p in '*.pem' '*.key' '.env' '.env.*' 'id_rsa*' 'secrets/' '.ssh/' '.aws/' 'credentials*' '.netrc' \
	'/nonexistent/a/**' '**/testdata/huge/**' '*.secret' 'private/' '.git/hooks/' '.git/config' '.envrc' '.vscode/' '.idea/' '.mcp.json'; do
	rules+=(--allow "$p=none")
done
readall='s=$(date +%s.%N); find . -type f -exec cat {} + >/dev/null; echo "$(date +%s.%N) - $s" | bc -l'
T[pol.none]=$(cd "$base/ws" && "$art" run -i=false -- sh -c "$readall" 2>>"$work/run.log")
T[pol.20]=$(cd "$base/ws" && "$art" run -i=false "${rules[@]}" -- sh -c "$readall" 2>>"$work/run.log")

row() { # row LABEL ART REF BAR
	local r
	r=$(ratio "$2" "$3")
	local ok=PASS
	# Judged on the exact ratio; the table shows it rounded.
	if [ "$(echo "$2 > $4 * $3" | bc -l)" = 1 ]; then ok=FAIL; fi
	printf "%-44s %9.3f s %9.3f s %7s %7s  %s\n" "$1" "$2" "$3" "$r" "<=$4" "$ok"
}
info() { # info LABEL ART REF
	printf "%-44s %9.3f s %9.3f s %7s %7s  %s\n" "$1" "$2" "$3" "$(ratio "$2" "$3")" "-" "info"
}
{
	echo
	printf "%-44s %11s %11s %7s %7s  %s\n" row art ref ratio bar result
	for fs in disk t; do
		name=$([ $fs = disk ] && echo disk || echo tmpfs)
		row "untar, art mount vs native ($name)" "${T[$fs.art.untar]}" "${T[$fs.native.untar]}" 2
		row "read all, art mount vs native ($name)" "${T[$fs.art.read]}" "${T[$fs.native.read]}" 1.5
		row "rm -rf, art mount vs native ($name)" "${T[$fs.art.rm]}" "${T[$fs.native.rm]}" 2
		info "  untar, art over /dev/fuse vs native ($name)" "${T[$fs.dev.untar]}" "${T[$fs.native.untar]}"
		info "  read all, art over /dev/fuse vs native ($name)" "${T[$fs.dev.read]}" "${T[$fs.native.read]}"
		info "  rm -rf, art over /dev/fuse vs native ($name)" "${T[$fs.dev.rm]}" "${T[$fs.native.rm]}"
		info "  untar, go-fuse loopback vs native ($name)" "${T[$fs.loop.untar]}" "${T[$fs.native.untar]}"
		info "  read all, go-fuse loopback vs native ($name)" "${T[$fs.loop.read]}" "${T[$fs.native.read]}"
		info "  rm -rf, go-fuse loopback vs native ($name)" "${T[$fs.loop.rm]}" "${T[$fs.native.rm]}"
		info "  untar, art mount vs go-fuse loopback ($name)" "${T[$fs.art.untar]}" "${T[$fs.loop.untar]}"
		info "  read all, art mount vs go-fuse loopback ($name)" "${T[$fs.art.read]}" "${T[$fs.loop.read]}"
		row "untar, inside art run vs art mount ($name)" "${T[$fs.run.untar]}" "${T[$fs.same.untar]}" 1.1
		row "read all, inside art run vs art mount ($name)" "${T[$fs.run.read]}" "${T[$fs.same.read]}" 1.1
		row "rm -rf, inside art run vs art mount ($name)" "${T[$fs.run.rm]}" "${T[$fs.same.rm]}" 1.1
	done
	mbs() { echo "scale=1; 1024 / $1" | bc -l; }
	printf "%-44s %9s MB/s %7s MB/s\n" "sequential 1 GiB write (art, native)" "$(mbs "${T[seq.art.write]}")" "$(mbs "${T[seq.native.write]}")"
	row "  write time, native vs art (>= 50% = <=2)" "${T[seq.art.write]}" "${T[seq.native.write]}" 2
	printf "%-44s %9s MB/s %7s MB/s\n" "sequential 1 GiB read (art, native)" "$(mbs "${T[seq.art.read]}")" "$(mbs "${T[seq.native.read]}")"
	row "  read time, native vs art (>= 50% = <=2)" "${T[seq.art.read]}" "${T[seq.native.read]}" 2
	row "commit after untar vs git add+commit" "${T[commit.art]}" "${T[commit.git]}" 1
	row "commit after changing one file vs 50 ms" "${T[commit.one]}" 0.05 1
	row "art run -- true vs bare bwrap" "${T[run.art]}" "${T[run.bwrap]}" 2
	row "read all in art run: 20-rule policy vs none" "${T[pol.20]}" "${T[pol.none]}" 1.1
	echo "(unmount included in the commit rows; ratios are art / ref; load at end $(cut -d' ' -f1-3 /proc/loadavg))"
} | tee "$out/overlay.txt"
