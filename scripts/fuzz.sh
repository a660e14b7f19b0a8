#!/usr/bin/env bash
# Runs every Go fuzz target briefly (default 5s each; pass a duration).
set -euo pipefail
t=${1:-5s}
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "fuzz $pkg $f ($t)"
		go test -run='^$' -fuzz="^$f\$" -fuzztime="$t" "$pkg" >/tmp/art-fuzz.log 2>&1 || { cat /tmp/art-fuzz.log; echo "FAIL fuzz $pkg $f"; exit 1; }
	done
done
echo "ok  fuzz targets passed"
