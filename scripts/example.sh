#!/usr/bin/env bash
# The quick start: sets up (idempotently), builds the bundled example model with Debian's PyTorch,
# and runs torch2onnx on it end to end.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${T2O_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"
OUT="$BUILD_DIR/example"
T2O="$BUILD_DIR/torch2onnx"
step() { printf '\n$ %s\n' "$*"; "$@"; }
/usr/bin/python3 "$ROOT/examples/tiny_cnn.py" "$OUT"
step "$T2O" inspect "$OUT/tiny_cnn_torch_export.onnx"
step "$T2O" check "$OUT/tiny_cnn_torch_export.onnx"
