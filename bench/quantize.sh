#!/usr/bin/env bash
# What int8 quantization does on our runtime: size, accuracy against the float model, latency.
#
#   bench/quantize.sh [THREADS] [MODELS...]     (after scripts/setup.sh; THREADS 2)
#
# Models: mobilenet_v2 resnet50 bert_encoder (bench/optimize_models.py, random weights; also lstm
# when named: 2 layers, hidden 512, 100 steps, dynamic and static, evaluated on 64 generated
# sequences), converted
# by torch2onnx at opset 17. Image models: static QDQ per-channel, calibrated on 16 structured
# images (bench/quant_inputs.py, seed 1) and evaluated on 64 others (seed 2); also dynamic. The
# encoder: dynamic per-channel, evaluated on 64 generated token sequences (batch 1, seq 128). Latency: median of 5
# runs after a warm-up, both models in the same process, in turn. Prints the load average before
# and after: numbers taken at load >= 1.5 are not worth much.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${T2O_BUILD_DIR:-$ROOT/build}"
THREADS="${1:-2}"
shift $(( $# < 1 ? $# : 1 ))
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && MODELS=(mobilenet_v2 resnet50 bert_encoder)
WORK="$BUILD/bench_quantize"
mkdir -p "$WORK"
T2O="$BUILD/torch2onnx"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$ROOT/bench/optimize_models.py" "$WORK" "${MODELS[@]}" >/dev/null
/usr/bin/python3 "$ROOT/bench/quant_inputs.py" "$WORK/calib.npy" 16 1
/usr/bin/python3 "$ROOT/bench/quant_inputs.py" "$WORK/held.npy" 64 2
for m in "${MODELS[@]}"; do
  # shellcheck disable=SC2046
  "$T2O" convert "$WORK/$m.pt" -o "$WORK/$m.onnx" --opset 17 $(cat "$WORK/$m.spec") --quiet
  if [ "$m" = lstm ]; then
    for mode in dynamic static; do
      echo "== $m $mode per-channel (recurrent layers: int8 weights, activations quantized at run time)"
      "$T2O" quantize "$WORK/$m.onnx" -o "$WORK/$m.$mode.onnx" --mode "$mode" --per-channel --eval-samples 64 \
        --input input:100x1x512 --threads "$THREADS" --ort --report "$WORK/$m.$mode.json"
    done
  elif [ "$m" = bert_encoder ]; then
    echo "== $m dynamic per-channel"
    "$T2O" quantize "$WORK/$m.onnx" -o "$WORK/$m.dynamic.onnx" --mode dynamic --per-channel --eval-samples 64 --input tokens:1x128 \
      --threads "$THREADS" --ort --report "$WORK/$m.dynamic.json"
  else
    echo "== $m static QDQ per-channel (minmax)"
    "$T2O" quantize "$WORK/$m.onnx" -o "$WORK/$m.static.onnx" --mode static --per-channel --calibrate "$WORK/calib.npy" \
      --eval "$WORK/held.npy" --threads "$THREADS" --ort --report "$WORK/$m.static.json"
    echo "== $m dynamic per-channel"
    "$T2O" quantize "$WORK/$m.onnx" -o "$WORK/$m.dynamic.onnx" --mode dynamic --per-channel --eval "$WORK/held.npy" \
      --threads "$THREADS" --ort --report "$WORK/$m.dynamic.json"
  fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
