#!/usr/bin/env bash
# Runs every Go fuzz target of the module for DURATION each (default 60s)
# and prints the executions per fuzzer and their sum, for the README's
# reliability table. Extra arguments go to go test (e.g. -parallel=1).
#   bash faults/fuzzall.sh 60s
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-60s}
shift || true
log=$(mktemp)
trap 'rm -f "$log"' EXIT
total=0
printf '%-12s %-24s %14s\n' package fuzzer executions
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		if ! bash scripts/fuzzone.sh "$pkg" "$f" "$t" "$log" "$@"; then
			cat "$log"
			echo "FAIL fuzz $pkg $f"
			exit 1
		fi
		n=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | awk '{print $2}' || true)
		n=${n:-0}
		total=$((total + n))
		printf '%-12s %-24s %14d\n' "${pkg#github.com/artproject/art/}" "$f" "$n"
	done
done
printf '%-37s %14d\n' "total ($t each)" "$total"
