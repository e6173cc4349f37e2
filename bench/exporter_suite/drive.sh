#!/bin/bash
# drive.sh IDS OUT: runs runner.py until every test id in IDS has a line in OUT; a test that kills
# the process is recorded as a crash and the run goes on after it.
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="${T2O_BUILD_DIR:-$ROOT/build}"
SUITE="${SUITE_DIR:-$HERE/upstream}"
IDS=$1; OUT=$2
export PYTHONPATH="$HERE:$BUILD/python:$SUITE:$ROOT/tests/coverage/stubs"
export NODE_PATH="${NODE_PATH:-$HOME/.cache/torch2onnx/node_modules}"
for _ in $(seq 200); do
  /usr/bin/python3 "$HERE/runner.py" run "$IDS" "$OUT" && break
  cur=$(cat "$OUT.current")
  echo "{\"id\": $cur, \"status\": \"fail\", \"stage\": \"crash\", \"msg\": \"process died\", \"calls\": 1}" >> "$OUT"
done
