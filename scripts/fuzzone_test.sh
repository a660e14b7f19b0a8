#!/usr/bin/env bash
# Checks fuzzone.sh's classification with a stand-in `go` command: a bare
# deadline failure is retried, a written failing input fails at once, and a
# deadline failure that repeats three times fails.
set -euo pipefail
cd "$(dirname "$0")/.."
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cat >"$d/go" <<'FAKE'
#!/usr/bin/env bash
n=$(cat "$STATE" 2>/dev/null || echo 0)
echo $((n + 1)) >"$STATE"
case "$MODE:$n" in
flake:0) printf -- '--- FAIL: FuzzX (5.18s)\n    context deadline exceeded\nFAIL\n'; exit 1 ;;
flake:*) echo ok; exit 0 ;;
real:*) printf -- '--- FAIL: FuzzX (0.10s)\n    x_test.go:12: bad\n    Failing input written to testdata/fuzz/FuzzX/abc\n    context deadline exceeded\n'; exit 1 ;;
always:*) printf -- '--- FAIL: FuzzX (5.10s)\n    context deadline exceeded\n'; exit 1 ;;
esac
FAKE
chmod +x "$d/go"
fail=0
for c in "flake 0 2" "real 1 1" "always 1 3"; do
	set -- $c
	rm -f "$d/state"
	rc=0
	PATH="$d:$PATH" STATE="$d/state" MODE=$1 bash scripts/fuzzone.sh pkg FuzzX 1s "$d/log" 2>/dev/null || rc=$?
	runs=$(cat "$d/state")
	if [ "$rc" != "$2" ] || [ "$runs" != "$3" ]; then
		echo "FAIL fuzzone.sh $1: exit $rc after $runs runs, want exit $2 after $3 runs"
		fail=1
	fi
done
[ $fail = 0 ] && echo "ok  fuzzone.sh classifies 3 cases"
exit $fail
