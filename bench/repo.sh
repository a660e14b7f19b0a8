#!/usr/bin/env bash
# bench/repo.sh — art next to git on the same real tree (issue 2, "Performance").
#
# usage: bench/repo.sh [TREE]
#   TREE defaults to $(go env GOROOT)/src. It is copied once into a temp dir and
#   both tools work on that one copy; art's .art/ and git's git dir both live in
#   the same temp dir (same disk). One run per row, warm page cache (see README).
#
# env: ARTBENCH_TMP   parent of the temp dir (default ${TMPDIR:-/tmp})
#      ARTBENCH_KEEP=1 keep the temp dir (its path is printed)
#      ARTBENCH_OUT   where the table and the log go (default bench/out)
#
# Exit status: 0 when every row was measured (PASS or FAIL), 1 when some row
# could not be measured (ERROR: art or git failed), 2 on a setup problem.
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
tree=${1:-$(go env GOROOT)/src}
[[ -d $tree ]] || { echo "repo.sh: $tree is not a directory" >&2; exit 2; }
tree=$(cd "$tree" && pwd)
for t in go git hyperfine du find xargs awk; do
	command -v "$t" >/dev/null || { echo "repo.sh: $t not found in PATH" >&2; exit 2; }
done

work=$(mktemp -d "${ARTBENCH_TMP:-${TMPDIR:-/tmp}}/artbench.XXXXXX")
cleanup() {
	if [[ ${ARTBENCH_KEEP:-} == 1 ]]; then
		echo "repo.sh: kept $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

out=${ARTBENCH_OUT:-$here/out}
mkdir -p "$out"
log=$out/repo.log
table=$out/repo.txt
: >"$log"
note() { printf '%s\n' "$*" >>"$log"; }

# ---------------------------------------------------------------- helpers
now() { printf '%s' "$EPOCHREALTIME"; }
# timed CMD...: run CMD (a function or command; its stderr goes to the log) and
# set T_REAL (wall seconds) and T_CPU (user+sys seconds of it and its children).
TIMEFORMAT='%R %U %S'
timed() {
	local rc=0 u s
	{ time "$@" 2>>"$log"; } 2>"$work/time" || rc=$?
	read -r T_REAL u s <"$work/time"
	T_CPU=$(awk -v u="$u" -v s="$s" 'BEGIN{printf "%.3f", u+s}')
	return $rc
}
load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?'; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.6f", b-a}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b+0 == 0) print "n/a"; else printf "%.2f", a/b }'; }
fmt_s() { # seconds -> "1.234 s" / "12.3 ms"
	awk -v s="$1" 'BEGIN{ if (s >= 1) printf "%.3f s", s; else printf "%.1f ms", s*1000 }'
}
fmt_b() { awk -v b="$1" 'BEGIN{ printf "%.1f MiB", b/1048576 }'; }
dsize() { du -sb "$1" | awk '{print $1}'; }
warm() { # read the whole tree so both tools start from a warm page cache
	find "$1" -type f -print0 | xargs -0 cat >/dev/null
	sync
}
# hyperfine median (seconds) of one command; extra hyperfine args before "--"
hmedian() {
	local csv=$work/hf.csv args=()
	while [[ $1 != -- ]]; do args+=("$1"); shift; done
	shift
	hyperfine -N --style basic --export-csv "$csv" "${args[@]}" "$@" >>"$log" 2>&1 || return 1
	awk -F, 'NR==2{print $4}' "$csv" # command,mean,stddev,median,...
}

rows=()
cpu=()
errors=0
row() { # name art ref ratio bar result
	rows+=("$(printf '%-44s %12s %12s %7s %7s  %s' "$@")")
	[[ $6 == ERROR ]] && errors=$((errors + 1))
	return 0
}
judge() { # a b max -> PASS/FAIL on the exact a/b (the table shows it rounded)
	if awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN{ exit !(b+0 > 0 && a/b <= m+0) }'; then echo PASS; else echo FAIL; fi
}

# ---------------------------------------------------------------- setup
art=$work/art
(cd "$root" && CGO_ENABLED=0 go build -o "$art" .) || { echo "repo.sh: building art failed" >&2; exit 2; }

# A tiny data generator: seeded ChaCha8 bytes, so every run sees the same data.
mkdir -p "$work/gen"
cat >"$work/gen/main.go" <<'EOF'
// gen create FILE SIZE SEED: FILE = SIZE seeded random bytes.
// gen insert FILE SIZE SEED: insert SIZE seeded random bytes in the middle of FILE.
package main

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
)

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func main() {
	size, err := strconv.ParseInt(os.Args[3], 10, 64)
	must(err)
	seed, err := strconv.ParseUint(os.Args[4], 10, 64)
	must(err)
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	rng := rand.NewChaCha8(key)
	switch os.Args[1] {
	case "create":
		f, err := os.Create(os.Args[2])
		must(err)
		_, err = io.CopyN(f, rng, size)
		must(err)
		must(f.Close())
	case "insert":
		f, err := os.OpenFile(os.Args[2], os.O_RDWR, 0)
		must(err)
		st, err := f.Stat()
		must(err)
		mid := st.Size() / 2
		tail := make([]byte, st.Size()-mid)
		_, err = f.ReadAt(tail, mid)
		must(err)
		ins := make([]byte, size)
		_, err = rng.Read(ins)
		must(err)
		_, err = f.WriteAt(ins, mid)
		must(err)
		_, err = f.WriteAt(tail, mid+size)
		must(err)
		must(f.Close())
	default:
		panic("unknown mode " + os.Args[1])
	}
}
EOF
(cd "$work/gen" && GOFLAGS= go build -o "$work/genbin" main.go) || { echo "repo.sh: building the data generator failed" >&2; exit 2; }
gen=$work/genbin

src=$work/ws/src
mkdir -p "$work/ws"
cp -a "$tree" "$src"
rm -rf "$src/.art" "$src/.git"
nfiles=$(find "$src" -type f | wc -l)
nbytes=$(dsize "$src")

# git: identical tree, its git dir next to it (same disk), no user/system config,
# no auto gc, art's .art/ excluded so git never sees art's repository.
gd=$work/git.git
printf '/.art/\n' >"$work/git-exclude"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.invalid
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.invalid
export GIT_PAGER=cat NO_COLOR=1
g() { git --git-dir="$gd" --work-tree="$src" -c gc.auto=0 -c core.excludesFile="$work/git-exclude" "$@"; }
db=$src/.art/art.db
load0=$(load)

{
	echo "art repo benchmark — $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "art:  $(git --no-optional-locks -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$([[ -z $(git --no-optional-locks -C "$root" status --porcelain --untracked-files=no 2>/dev/null) ]] || echo ' + uncommitted changes')"
	echo "tree: $tree ($nfiles files, $(fmt_b "$nbytes")), copied to $src"
	echo "host: $(nproc) cores, $(go version | awk '{print $3}'), $(git --version), hyperfine $(hyperfine --version | awk '{print $2}'); load average at start: $load0"
	echo "one run per row on a warm page cache (caches cannot be dropped here: the tree is"
	echo "cat to /dev/null and sync'd before each timed push/commit, for art and git alike)"
} >"$table"
cat "$table" >>"$log"

# ---------------------------------------------------------------- 1. first push
art_first() { "$art" init -m "$src" >>"$log" && "$art" push -m "$src" -q -M first >"$work/push1"; }
git_first() { g init -q && g add -A && g commit -qm first; }
art_second() { "$art" push -m "$src" -q -M second >"$work/push2"; }
git_second() { g add -A && g commit -qm second; }

art_ok=1
warm "$src"
if timed art_first; then
	a1=$T_REAL; a1c=$T_CPU
else
	art_ok=0
fi
first_ok=$art_ok
note "art first push: $(cat "$work/push1" 2>/dev/null)"
if ((first_ok)); then
	art_size=$(dsize "$src/.art")
	note "art .art after first push: $art_size bytes"
	note "art .art after first push: $(ls -l "$src/.art" | tail -n +2 | awk '{print $NF": "$5}' | tr '\n' ' ')"
fi

warm "$src"
timed git_first || { echo "repo.sh: git's first commit failed (see $log)" >&2; exit 2; }
g1=$T_REAL; g1c=$T_CPU
git_size=$(dsize "$gd")
note "git .git after first commit: $git_size bytes"
gfiles=$(g ls-files | wc -l)
note "git first commit: $gfiles files in the index"

if ((art_ok)); then
	r=$(ratio "$a1" "$g1")
	row "first push (init+push vs init+add+commit)" "$(fmt_s "$a1")" "$(fmt_s "$g1")" "$r" "<=1.00" "$(judge "$a1" "$g1" 1.0)"
	cpu+=("$(printf '%-44s %12s %12s %7s' "first push" "$(fmt_s "$a1c")" "$(fmt_s "$g1c")" "$(ratio "$a1c" "$g1c")")")
else
	row "first push (init+push vs init+add+commit)" "error" "$(fmt_s "$g1")" "-" "<=1.00" ERROR
fi

# git gc of a copy of the first commit's .git, for information.
cp -a "$gd" "$work/gc.git"
git --git-dir="$work/gc.git" -c gc.auto=0 gc -q >>"$log" 2>&1
git_gc_size=$(dsize "$work/gc.git")
rm -rf "$work/gc.git"
sync

# ---------------------------------------------------------------- 2. push after a one-line change
f=$src/fmt/print.go
[[ -f $f ]] || f=$(find "$src" -type f -name '*.go' -not -path '*/.art/*' | sort | awk 'NR==1')
[[ -n $f ]] || f=$(find "$src" -type f -not -path '*/.art/*' | sort | awk 'NR==1')
note "changed file: ${f#"$src"/}"
# Five rounds, each appending one line and timing art's push and git's
# add+commit of it, interleaved; the row shows the medians (one push takes
# ~0.15 s, where this VM's run-to-run noise is ±15 %).
median() { sort -n | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
a2s=() a2cs=() g2s=() g2cs=()
for round in 1 2 3 4 5; do
	printf '// artbench: one more line %d\n' "$round" >>"$f"
	sync
	if ((art_ok)); then
		if timed art_second; then
			a2s+=("$T_REAL") a2cs+=("$T_CPU")
		else
			art_ok=0
		fi
		note "art second push, round $round: $(cat "$work/push2")"
	fi
	sync
	timed git_second || { echo "repo.sh: git's second commit failed (see $log)" >&2; exit 2; }
	g2s+=("$T_REAL") g2cs+=("$T_CPU")
done
if ((art_ok)); then
	a2=$(printf '%s\n' "${a2s[@]}" | median) a2c=$(printf '%s\n' "${a2cs[@]}" | median)
	note "art push after a change, 5 rounds: ${a2s[*]} s"
fi
g2=$(printf '%s\n' "${g2s[@]}" | median) g2c=$(printf '%s\n' "${g2cs[@]}" | median)
note "git add+commit after a change, 5 rounds: ${g2s[*]} s"
if ((art_ok)); then
	r=$(ratio "$a2" "$g2")
	row "push after a 1-line change (median of 5)" "$(fmt_s "$a2")" "$(fmt_s "$g2")" "$r" "<=1.00" "$(judge "$a2" "$g2" 1.0)"
	cpu+=("$(printf '%-44s %12s %12s %7s' "push after a 1-line change" "$(fmt_s "$a2c")" "$(fmt_s "$g2c")" "$(ratio "$a2c" "$g2c")")")
else
	row "push after a 1-line change (median of 5)" "error" "$(fmt_s "$g2")" "-" "<=1.00" ERROR
fi

# ---------------------------------------------------------------- 3. diff of those two commits
gdiff=(git --git-dir="$gd" --work-tree="$src" -c core.pager=cat diff HEAD~1 HEAD)
g diff HEAD~1 HEAD >"$work/git.diff"
note "git diff: $(wc -l <"$work/git.diff") lines"
gd3=$(hmedian --warmup 3 --runs 20 -n git-diff -- "${gdiff[*]}") || { echo "repo.sh: hyperfine of git diff failed (see $log)" >&2; exit 2; }
if ((art_ok)) && "$art" diff --db "$db" HEAD~1 HEAD >"$work/art.diff" 2>>"$log" &&
	ad3=$(hmedian --warmup 3 --runs 20 -n art-diff -- "$art diff --db $db HEAD~1 HEAD"); then
	note "art diff: $(wc -l <"$work/art.diff") lines"
	r=$(ratio "$ad3" "$gd3")
	row "diff HEAD~1 HEAD (median of 20, hyperfine -N)" "$(fmt_s "$ad3")" "$(fmt_s "$gd3")" "$r" "<=1.00" "$(judge "$ad3" "$gd3" 1.0)"
else
	row "diff HEAD~1 HEAD (median of 20, hyperfine -N)" "error" "$(fmt_s "$gd3")" "-" "<=1.00" ERROR
fi

# ---------------------------------------------------------------- 4. branch: 11k files vs 10 files
small=$work/small/ws
mkdir -p "$small"
for i in 0 1 2 3 4 5 6 7 8 9; do printf 'file %d\n' "$i" >"$small/f$i.txt"; done
sdb=$small/.art/art.db
# Interleaved, alternating order, so that disk and CPU noise from the rest of the
# host falls on both trees alike: delete bench-x (untimed), create it (timed).
branch_once() { # DB OUTFILE
	"$art" branch -d --db "$1" bench-x >/dev/null 2>>"$log" || return 1
	local t0=$EPOCHREALTIME
	"$art" branch --db "$1" bench-x >/dev/null 2>>"$log" || return 1
	local t1=$EPOCHREALTIME
	if [[ -n $2 ]]; then echo "$(sub "$t0" "$t1")" >>"$2"; fi
}
median() { sort -g "$1" | awk 'NF{a[++n]=$1} END{ if (n%2) print a[(n+1)/2]; else printf "%.6f\n", (a[n/2]+a[n/2+1])/2 }'; }
bench_branches() {
	"$art" branch --db "$sdb" bench-x >>"$log" 2>&1 && "$art" branch --db "$db" bench-x >>"$log" 2>&1 || return 1
	local i o1 o2
	: >"$work/branch.small"; : >"$work/branch.large"
	for i in $(seq 1 23); do # 3 warm-up rounds, then 20 timed
		o1=; o2=
		((i <= 3)) || { o1=$work/branch.small; o2=$work/branch.large; }
		if ((i % 2)); then
			branch_once "$sdb" "$o1" && branch_once "$db" "$o2" || return 1
		else
			branch_once "$db" "$o2" && branch_once "$sdb" "$o1" || return 1
		fi
	done
	bs=$(median "$work/branch.small") && bl=$(median "$work/branch.large")
}
if ((art_ok)) && "$art" init -m "$small" >>"$log" 2>&1 && "$art" push -m "$small" -q >>"$log" 2>&1 && bench_branches; then
	note "art branch, 20 interleaved runs each: median $(fmt_s "$bl") ($nfiles files), $(fmt_s "$bs") (10 files)"
	r=$(ratio "$bl" "$bs")
	row "branch X: ${nfiles}-file vs 10-file tree (median/20)" "$(fmt_s "$bl")" "$(fmt_s "$bs")" "$r" "<=1.25" "$(judge "$bl" "$bs" 1.25)"
else
	row "branch X: ${nfiles}-file vs 10-file tree (median/20)" "error" "-" "-" "<=1.25" ERROR
fi

# ---------------------------------------------------------------- 5. size after the first push
if ((first_ok)); then
	r=$(ratio "$art_size" "$git_size")
	row "repo size after first push (vs .git loose)" "$(fmt_b "$art_size")" "$(fmt_b "$git_size")" "$r" "<=1.00" "$(judge "$art_size" "$git_size" 1.0)"
	r=$(ratio "$art_size" "$git_gc_size")
	row "  same, vs .git after git gc (information)" "$(fmt_b "$art_size")" "$(fmt_b "$git_gc_size")" "$r" "-" "info"
else
	row "repo size after first push (vs .git loose)" "error" "$(fmt_b "$git_size")" "-" "<=1.00" ERROR
fi

# ---------------------------------------------------------------- 6. 20 x 1 MiB inserted into a 200 MiB file
big=$work/big/ws
mkdir -p "$big"
mib=1048576
"$gen" create "$big/data.bin" $((200 * mib)) 1
big_ok=1
"$art" init -m "$big" >>"$log" 2>&1 && "$art" push -m "$big" -q -M base >>"$log" 2>&1 || big_ok=0
if ((big_ok)); then
	before=$(dsize "$big/.art")
	t0=$(now)
	for i in $(seq 1 20); do
		"$gen" insert "$big/data.bin" "$mib" $((100 + i))
		"$art" push -m "$big" -q -M "insert $i" >>"$log" 2>&1 || { big_ok=0; break; }
	done
	t1=$(now)
fi
if ((big_ok)); then
	after=$(dsize "$big/.art")
	growth=$((after - before))
	note "200 MiB file: .art $before -> $after bytes; 20 inserts + pushes took $(fmt_s "$(sub "$t0" "$t1")")"
	r=$(ratio "$growth" $((20 * mib)))
	row "growth, 20 x 1 MiB into a 200 MiB file" "$(fmt_b "$growth")" "$(fmt_b $((20 * mib)))" "$r" "<=2.00" "$(judge "$growth" "$((20 * mib))" 2.0)"
else
	row "growth, 20 x 1 MiB into a 200 MiB file" "error" "$(fmt_b $((20 * mib)))" "-" "<=2.00" ERROR
fi

# ---------------------------------------------------------------- table
{
	echo
	printf '%-44s %12s %12s %7s %7s  %s\n' "row" "art" "git / ref" "ratio" "bar" "result"
	printf '%s\n' "${rows[@]}"
	echo
	echo "ratio = art / (git or ref). branch row: art on this tree / art on a 10-file tree."
	echo "growth row: bytes the .art dir grew / bytes inserted."
	if ((${#cpu[@]})); then
		echo
		echo "CPU time (user+sys, incl. children) of the one-shot rows, for reading them on a busy host:"
		printf '%s\n' "${cpu[@]}"
	fi
	echo
	echo "art first push:  $(sed -n 's/^art first push: //p' "$log" | head -n 1)"
	echo "art second push: $(sed -n 's/^art second push, round 1: //p' "$log" | head -n 1)"
	echo "git index: $gfiles files; changed file: ${f#"$src"/}"
	sed -n 's/^200 MiB file: /200 MiB file: /p' "$log"
	echo "load average at end: $(load) on $(nproc) cores"
	awk -v a="$load0" -v l="$(load)" -v n="$(nproc)" 'BEGIN{ if (a+0 > n+0 || l+0 > n+0) print "WARNING: the host was busy (load above the core count): wall times are noisy; re-run on a quiet host" }'
} >>"$table"
cat "$table"
echo "(table in $table, details in $log)"
((errors == 0)) || exit 1
