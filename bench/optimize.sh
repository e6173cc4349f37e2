#!/usr/bin/env bash
# What the optimizer buys, same machine, same run:
#   1. ONNX Runtime latency of torch2onnx's optimized file vs torch.onnx.export's file (opset 17),
#   2. torch2onnx runtime session-build time of the optimized vs the unoptimized (--no-optimize) file.
#
#   bench/optimize.sh [REPS] [ITERS] [MODELS...]     (after scripts/setup.sh; REPS 5, ITERS 20)
#
# Models: resnet50 mobilenet_v2 bert_encoder (bench/optimize_models.py). Runs alternate between the
# two files REPS times (a noisy, shared machine hurts both alike); the tables give medians over the
# REPS per-process medians, min over all runs, and process CPU ms per run. Prints the load average
# before and after: numbers taken at load >= 1.5 are not worth much.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${T2O_BUILD_DIR:-$ROOT/build}"
REPS="${1:-5}"
ITERS="${2:-20}"
shift $(( $# < 2 ? $# : 2 ))
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && MODELS=(resnet50 mobilenet_v2 bert_encoder)
WORK="$BUILD/bench_optimize"
mkdir -p "$WORK"
cmake --build "$BUILD" --target t2o_bench torch2onnx >/dev/null
export NODE_PATH="${NODE_PATH:-$HOME/.cache/torch2onnx/node_modules}"
/usr/bin/python3 "$ROOT/bench/optimize_models.py" "$WORK" "${MODELS[@]}" >/dev/null
for m in "${MODELS[@]}"; do
  # shellcheck disable=SC2046
  "$BUILD/torch2onnx" convert "$WORK/$m.pt" -o "$WORK/$m.t2o.onnx" --opset 17 $(cat "$WORK/$m.spec") --quiet
  # shellcheck disable=SC2046
  "$BUILD/torch2onnx" convert "$WORK/$m.pt" -o "$WORK/$m.raw.onnx" --opset 17 $(cat "$WORK/$m.spec") --quiet --no-optimize
done
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
nodes() { /usr/bin/python3 -c "import onnx,sys; print(len(onnx.load(sys.argv[1], load_external_data=False).graph.node))" "$1"; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "ONNX Runtime, torch2onnx's optimized file vs torch.onnx.export's (opset 17):"
echo "| model | threads | nodes ours / torch.onnx | ours median ms | torch.onnx median ms | ours/torch.onnx (median) | ours min | torch.onnx min | ours CPU ms | torch.onnx CPU ms | ours/torch.onnx (CPU) | max abs diff |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for m in "${MODELS[@]}"; do
  for t in 1 2; do
    : > "$OUT/a"; : > "$OUT/b"
    for _ in $(seq "$REPS"); do
      node "$ROOT/bench/ort_bench.js" "$WORK/$m.t2o.onnx" "$WORK/$m.input.npy" "$t" "$ITERS" "$OUT/$m.a.npy" >> "$OUT/a"
      node "$ROOT/bench/ort_bench.js" "$WORK/$m.torch.onnx" "$WORK/$m.input.npy" "$t" "$ITERS" "$OUT/$m.b.npy" >> "$OUT/b"
    done
    /usr/bin/python3 - "$OUT" "$m" "$t" "$(nodes "$WORK/$m.t2o.onnx") / $(nodes "$WORK/$m.torch.onnx")" <<'PY'
import json, statistics, sys
import numpy as np
out, m, t, nodes = sys.argv[1:]
def load(side):
    rows = [json.loads(l) for l in open(f"{out}/{side}") if l.strip()]
    return (statistics.median(r["median_ms"] for r in rows), min(r["min_ms"] for r in rows),
            statistics.median(r["cpu_ms"] for r in rows))
(am, an, ac), (bm, bn, bc) = load("a"), load("b")
diff = float(np.abs(np.load(f"{out}/{m}.a.npy") - np.load(f"{out}/{m}.b.npy")).max())
print(f"| {m} | {t} | {nodes} | {am:.2f} | {bm:.2f} | {am / bm:.2f} | {an:.2f} | {bn:.2f} | {ac:.2f} | {bc:.2f} | {ac / bc:.2f} | {diff:.1e} |")
PY
  done
done
echo
echo "torch2onnx runtime session build (Session construction, 2 threads), optimized vs --no-optimize:"
echo "| model | nodes optimized / unoptimized | optimized build ms (median) | unoptimized build ms | ratio | optimized build CPU ms | unoptimized build CPU ms | ratio (CPU) |"
echo "|---|---|---|---|---|---|---|---|"
for m in "${MODELS[@]}"; do
  : > "$OUT/a"; : > "$OUT/b"
  for _ in $(seq "$REPS"); do
    "$BUILD/t2o_bench" "$WORK/$m.t2o.onnx" "$WORK/$m.input.npy" 2 1 >> "$OUT/a"
    "$BUILD/t2o_bench" "$WORK/$m.raw.onnx" "$WORK/$m.input.npy" 2 1 >> "$OUT/b"
  done
  /usr/bin/python3 - "$OUT" "$m" "$(nodes "$WORK/$m.t2o.onnx") / $(nodes "$WORK/$m.raw.onnx")" <<'PY'
import json, statistics, sys
out, m, nodes = sys.argv[1:]
def load(side):
    rows = [json.loads(l) for l in open(f"{out}/{side}") if l.strip()]
    return statistics.median(r["build_ms"] for r in rows), statistics.median(r["build_cpu_ms"] for r in rows)
(aw, ac), (bw, bc) = load("a"), load("b")
print(f"| {m} | {nodes} | {aw:.1f} | {bw:.1f} | {aw / bw:.2f} | {ac:.1f} | {bc:.1f} | {ac / bc:.2f} |")
PY
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
