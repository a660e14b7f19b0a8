#!/usr/bin/env bash
# Runs every Go fuzz target briefly (default 5s each; pass a duration).
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-5s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "fuzz $pkg $f ($t)"
		bash scripts/fuzzone.sh "$pkg" "$f" "$t" "$log" || { cat "$log"; echo "FAIL fuzz $pkg $f"; exit 1; }
	done
done
echo "ok  fuzz targets passed"
