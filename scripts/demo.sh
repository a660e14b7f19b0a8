#!/usr/bin/env bash
# The main job, end to end: a demo workspace, a scripted agent session inside
# 'art run' (a real bwrap sandbox over a real FUSE home), then 'art log' and
# 'art diff' of what the agent did, and an export with 'art pull --commit'.
set -euo pipefail
ART=${ART:-$PWD/bin/art}
demo=$(mktemp -d /tmp/art-demo.XXXXXX)
trap 'rm -rf "$demo"' EXIT
ws=$demo/app
mkdir -p "$ws/src"
printf 'def greet(name):\n    return "hello " + name\n' > "$ws/src/greet.py"
printf '# app\nA tiny demo project.\n' > "$ws/README.md"
printf 'print("old script")\n' > "$ws/old.py"
cd "$ws"
set -x
"$ART" init
"$ART" push -q -M "initial import"
# The "agent": edits a file, adds one, deletes one, and tries to escape.
"$ART" run -i=false -M "agent session" -- sh -c '
  sed -i "s/hello/hello, dear/" src/greet.py
  printf "from src.greet import greet\nprint(greet(\"world\"))\n" > main.py
  rm old.py
  echo "agent: trying to write the host /etc:"; touch /etc/art-demo 2>&1 || true
  echo "agent: done"'
"$ART" log
"$ART" diff
"$ART" diff --stat
ls "$ws"                      # the host workspace is untouched ...
"$ART" pull -q --commit HEAD  # ... until you export the state you choose
ls "$ws"
"$ART" fsck
