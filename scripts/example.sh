#!/usr/bin/env bash
# The quick start: sets up (idempotently), builds the bundled example model with Debian's PyTorch
# (a small CNN saved in train() mode as TorchScript; nothing is downloaded), then runs torch2onnx
# on it end to end: convert with a dynamic batch axis and verification, inspect, check, run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${T2O_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"
OUT="$BUILD_DIR/example"
T2O="$BUILD_DIR/torch2onnx"
step() { printf '\n$ %s\n' "${*//$OUT\//}"; "$@"; }
/usr/bin/python3 "$ROOT/examples/tiny_cnn.py" "$OUT"
cd "$OUT"
step "$T2O" inspect tiny_cnn.pt
step "$T2O" convert tiny_cnn.pt -o tiny_cnn.onnx --input image:1x3x32x32 --dynamic image:0=batch --verify
step "$T2O" inspect tiny_cnn.onnx
step "$T2O" check tiny_cnn.onnx
step "$T2O" run tiny_cnn.onnx --input image=input.npy --out-dir out
/usr/bin/python3 - <<'PY'
import numpy as np
got, want = np.load("out/output_0.npy"), np.load("expected.npy")
print(f"\nruntime output vs PyTorch's saved output: max abs diff {float(np.abs(got - want).max()):.2e}")
PY
