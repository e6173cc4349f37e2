#!/usr/bin/env bash
# Latency of torch2onnx's runtime vs ONNX Runtime and PyTorch, same machine, same run, same input.
#
#   bench/run.sh [ITERS]        (after scripts/setup.sh; ITERS defaults to 20)
#   bench/run.sh convert        (only the conversion-time comparison)
#
# Prints a markdown table of median latencies and the ratios t2o/ORT and t2o/PyTorch at 1 and 2
# threads, the max abs difference of outputs vs ONNX Runtime, and conversion time of ResNet-50
# (torch2onnx convert vs torch.onnx.export).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${T2O_BUILD_DIR:-$ROOT/build}"
MODE=all
if [ "${1:-}" = convert ]; then MODE=convert; shift; fi
ITERS="${1:-20}"
WORK="$BUILD/bench"
mkdir -p "$WORK"
cmake --build "$BUILD" --target t2o_bench torch2onnx >/dev/null

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem/{print $2}') GiB"
if [ "$MODE" = convert ]; then /usr/bin/python3 "$ROOT/bench/models.py" export "$WORK" resnet50 >/dev/null; else
  /usr/bin/python3 "$ROOT/bench/models.py" export "$WORK" resnet18 resnet50 mobilenet_v2 > "$WORK/export.jsonl"; fi
field() { /usr/bin/python3 -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }
maxdiff() { /usr/bin/python3 -c "import numpy as np,sys; a=np.load(sys.argv[1]); b=np.load(sys.argv[2]); print(f'{float(np.abs(a-b).max()):.2e}')" "$1" "$2"; }

if [ "$MODE" = all ]; then
echo
echo "| model | threads | t2o ms | ORT ms | PyTorch ms | t2o/ORT | t2o/PyTorch | max abs diff vs ORT |"
echo "|---|---|---|---|---|---|---|---|"
for m in resnet18 resnet50 mobilenet_v2; do
  for t in 1 2; do
    ours=$("$BUILD/t2o_bench" "$WORK/$m.onnx" "$WORK/$m.b1.npy" "$t" "$ITERS" "$WORK/$m.t2o.npy" | field median_ms)
    ort=$(node "$ROOT/bench/ort_bench.js" "$WORK/$m.onnx" "$WORK/$m.b1.npy" "$t" "$ITERS" "$WORK/$m.ort.npy" | field median_ms)
    pt=$(/usr/bin/python3 "$ROOT/bench/models.py" time "$WORK/$m.pt" "$WORK/$m.b1.npy" "$t" "$ITERS" | field median_ms)
    diff=$(maxdiff "$WORK/$m.t2o.npy" "$WORK/$m.ort.npy")
    printf '| %s | %s | %.1f | %.1f | %.1f | %.2f | %.2f | %s |\n' "$m" "$t" "$ours" "$ort" "$pt" \
      "$(echo "$ours / $ort" | bc -l)" "$(echo "$ours / $pt" | bc -l)" "$diff"
  done
done
fi

echo
# Conversion time, median of 3: torch2onnx as a whole process (startup, load, profile, write,
# checker) against torch.onnx.export inside a Python process that has already imported torch.
export_json=$(/usr/bin/python3 "$ROOT/bench/models.py" export-time "$WORK" resnet50 3)
conv=()
cpu=()
for _ in 1 2 3; do
  t0=$(date +%s.%N)
  /usr/bin/time -f '%U %S' -o "$WORK/convert.time" \
    "$BUILD/torch2onnx" convert "$WORK/resnet50.pt" -o "$WORK/resnet50.t2o.onnx" --opset 17 --input x:1x3x224x224 --quiet
  conv+=("$(echo "$(date +%s.%N) - $t0" | bc -l)")
  cpu+=("$(awk '{print $1 + $2}' "$WORK/convert.time")")
done
med3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
printf 'ResNet-50 conversion (opset 17, median of 3, wall / CPU seconds): torch2onnx convert %.2f / %.2f; torch.onnx.export from the eager model %.2f / %.2f, from the same .pt %.2f / %.2f\n' \
  "$(med3 "${conv[@]}")" "$(med3 "${cpu[@]}")" \
  "$(echo "$export_json" | field export_eager_s)" "$(echo "$export_json" | field export_eager_cpu_s)" \
  "$(echo "$export_json" | field export_from_pt_s)" "$(echo "$export_json" | field export_from_pt_cpu_s)"
