#!/usr/bin/env bash
# Latency of torch2onnx's runtime vs ONNX Runtime and PyTorch, same machine, same run, same input.
#
#   bench/run.sh [ITERS]        (after scripts/setup.sh; ITERS defaults to 20)
#
# Prints a markdown table of median latencies and the ratios t2o/ORT and t2o/PyTorch at 1 and 2
# threads, the max abs difference of outputs vs ONNX Runtime, and conversion time of ResNet-50
# (torch2onnx convert vs torch.onnx.export).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${T2O_BUILD_DIR:-$ROOT/build}"
ITERS="${1:-20}"
WORK="$BUILD/bench"
mkdir -p "$WORK"
cmake --build "$BUILD" --target t2o_bench torch2onnx >/dev/null

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem/{print $2}') GiB"
/usr/bin/python3 "$ROOT/bench/models.py" export "$WORK" > "$WORK/export.jsonl"
field() { /usr/bin/python3 -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }
maxdiff() { /usr/bin/python3 -c "import numpy as np,sys; a=np.load(sys.argv[1]); b=np.load(sys.argv[2]); print(f'{float(np.abs(a-b).max()):.2e}')" "$1" "$2"; }

echo
echo "| model | threads | t2o ms | ORT ms | PyTorch ms | t2o/ORT | t2o/PyTorch | max abs diff vs ORT |"
echo "|---|---|---|---|---|---|---|---|"
for m in resnet18 resnet50 mobilenet_v2; do
  for t in 1 2; do
    ours=$("$BUILD/t2o_bench" "$WORK/$m.onnx" "$WORK/input.npy" "$t" "$ITERS" "$WORK/$m.t2o.npy" | field median_ms)
    ort=$(node "$ROOT/bench/ort_bench.js" "$WORK/$m.onnx" "$WORK/input.npy" "$t" "$ITERS" "$WORK/$m.ort.npy" | field median_ms)
    pt=$(/usr/bin/python3 "$ROOT/bench/models.py" time "$WORK/$m.pt" "$WORK/input.npy" "$t" "$ITERS" | field median_ms)
    diff=$(maxdiff "$WORK/$m.t2o.npy" "$WORK/$m.ort.npy")
    printf '| %s | %s | %.1f | %.1f | %.1f | %.2f | %.2f | %s |\n' "$m" "$t" "$ours" "$ort" "$pt" \
      "$(echo "$ours / $ort" | bc -l)" "$(echo "$ours / $pt" | bc -l)" "$diff"
  done
done

echo
export_s=$(grep resnet50 "$WORK/export.jsonl" | field torch_onnx_export_s)
t0=$(date +%s.%N)
if "$BUILD/torch2onnx" convert "$WORK/resnet50.pt" -o "$WORK/resnet50.t2o.onnx" --input x:1x3x224x224 --quiet; then
  conv_s=$(echo "$(date +%s.%N) - $t0" | bc -l)
  printf 'ResNet-50 conversion: torch2onnx convert %.2f s, torch.onnx.export %.2f s\n' "$conv_s" "$export_s"
else
  printf 'ResNet-50 conversion: torch2onnx convert failed; torch.onnx.export %.2f s\n' "$export_s"
fi
