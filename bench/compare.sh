#!/usr/bin/env bash
# torch2onnx runtime vs ONNX Runtime on already exported models, repeated and interleaved so that
# a noisy, shared machine hurts both sides alike (bench/run.sh also exports and times PyTorch).
#
#   bench/compare.sh MODEL_DIR [REPS] [ITERS] [MODELS...]
#
# MODEL_DIR holds MODEL.onnx files and input.npy (bench/models.py export). For each model and
# thread count (1, 2) it runs ours then ORT, REPS times, ITERS timed runs each, and prints per
# side the median of the REPS medians, the smallest min and the median CPU ms per run (process
# CPU time, all threads: not inflated by waiting for a core, but it counts spinning), their
# ratios, and the max abs difference of the outputs. ORT_NO_SPIN=1 passes through to ort_bench.js.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${T2O_BUILD_DIR:-$ROOT/build}"
DIR="$1"
REPS="${2:-5}"
ITERS="${3:-10}"
shift $(( $# < 3 ? $# : 3 ))
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && MODELS=(resnet18 resnet50 mobilenet_v2)
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| model | threads | t2o median ms | ORT median ms | t2o/ORT (median) | t2o min ms | ORT min ms | t2o/ORT (min) | t2o CPU ms | ORT CPU ms | t2o/ORT (CPU) | max abs diff |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for m in "${MODELS[@]}"; do
  for t in 1 2; do
    : > "$OUT/t2o" ; : > "$OUT/ort"
    for _ in $(seq "$REPS"); do
      "$BUILD/t2o_bench" "$DIR/$m.onnx" "$DIR/input.npy" "$t" "$ITERS" "$OUT/$m.t2o.npy" >> "$OUT/t2o"
      node "$ROOT/bench/ort_bench.js" "$DIR/$m.onnx" "$DIR/input.npy" "$t" "$ITERS" "$OUT/$m.ort.npy" >> "$OUT/ort"
    done
    /usr/bin/python3 - "$OUT" "$m" "$t" <<'EOF'
import json, statistics, sys
import numpy as np
out, m, t = sys.argv[1:]
def load(side):
    rows = [json.loads(l) for l in open(f"{out}/{side}") if l.strip()]
    return (statistics.median(r["median_ms"] for r in rows), min(r["min_ms"] for r in rows),
            statistics.median(r["cpu_ms"] for r in rows))
(tm, tn, tc), (om, on, oc) = load("t2o"), load("ort")
diff = float(np.abs(np.load(f"{out}/{m}.t2o.npy") - np.load(f"{out}/{m}.ort.npy")).max())
print(f"| {m} | {t} | {tm:.1f} | {om:.1f} | {tm / om:.2f} | {tn:.1f} | {on:.1f} | {tn / on:.2f} "
      f"| {tc:.1f} | {oc:.1f} | {tc / oc:.2f} | {diff:.1e} |")
EOF
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
