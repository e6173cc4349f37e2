#!/usr/bin/env bash
# torch2onnx runtime vs ONNX Runtime on already exported models, repeated and interleaved so that
# both sides see the same machine (bench/run.sh also exports and times PyTorch).
#
#   bench/compare.sh MODEL_DIR [REPS] [ITERS] [MODEL[@BATCH]...]
#
# MODEL_DIR holds MODEL.onnx and MODEL.bBATCH.npy (bench/models.py export; BATCH defaults to 1,
# the default list is `bench/models.py list`). For each model and thread count (1, 2) it runs ours
# and ORT back to back (which goes first alternates), REPS times, ITERS timed runs each, and prints
# per side the median of the REPS medians, the smallest min and the median CPU ms per run (process
# CPU time, all threads: it counts spinning), their ratios, the median over repetitions of each
# repetition's ratio ("paired": it cancels most of a virtual machine's drift between
# repetitions), GFLOP/s against the machine's measured FMA peak at that thread count,
# peak RSS growth over the process's start (MB), session build time, and the max abs difference of
# the outputs relative to the output's scale. ORT_NO_SPIN=1 passes through to ort_bench.js and
# makes our side wait passively too (OMP_WAIT_POLICY=passive): the like-for-like comparison.
#
# Figures from a busy machine measure the scheduler, not the runtimes. Before each row the script
# measures how many cores other processes keep busy (over one second, from /proc/stat, while
# nothing of the benchmark runs) and waits up to LOAD_WAIT seconds (default 300) for that to
# fall below MAX_BUSY cores (default 0.3); a row measured anyway is marked "LOADED". The load
# average is printed at the start and end, but inside the run it mostly counts the benchmark.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${T2O_BUILD_DIR:-$ROOT/build}"
DIR="$1"
REPS="${2:-3}"
ITERS="${3:-20}"
shift $(( $# < 3 ? $# : 3 ))
MODELS=("$@")
if [ ${#MODELS[@]} -eq 0 ]; then read -r -a MODELS <<< "$(/usr/bin/python3 "$ROOT/bench/models.py" list)"; fi
MAX_BUSY="${MAX_BUSY:-0.3}"
LOAD_WAIT="${LOAD_WAIT:-300}"
T2O_ENV=()
[ "${ORT_NO_SPIN:-}" = 1 ] && T2O_ENV=(OMP_WAIT_POLICY=passive)
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

# Cores kept busy by other processes during one second.
busy_cores() {
  local a b
  a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
  awk -v n="$(nproc)" -v u="$(( b[1] + b[2] + b[3] + b[6] + b[7] + b[8] - a[1] - a[2] - a[3] - a[6] - a[7] - a[8] ))" \
      -v t="$(( b[1] + b[2] + b[3] + b[4] + b[5] + b[6] + b[7] + b[8] - a[1] - a[2] - a[3] - a[4] - a[5] - a[6] - a[7] - a[8] ))" \
      'BEGIN { printf "%.2f", t ? n * u / t : 0 }'
}
BUSY=0
wait_quiet() {
  local waited=0
  BUSY=$(busy_cores)
  while awk -v b="$BUSY" -v m="$MAX_BUSY" 'BEGIN { exit !(b > m) }' && [ "$waited" -lt "$LOAD_WAIT" ]; do
    sleep 4; waited=$((waited + 5)); BUSY=$(busy_cores)
  done
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
PEAK1=$("$BUILD/t2o_bench" --peak 1)
PEAK2=$("$BUILD/t2o_bench" --peak 2)
echo "measured FMA peak (float32): $PEAK1 GFLOP/s at 1 thread, $PEAK2 at 2"
echo
echo "| model | batch | threads | t2o median ms | ORT median ms | t2o/ORT (median) | t2o/ORT (paired) | t2o/ORT (min) | t2o/ORT (CPU) | t2o GFLOP/s (% peak) | ORT GFLOP/s (% peak) | t2o / ORT peak RSS MB | t2o / ORT build ms | max diff / scale | others busy (cores) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for entry in "${MODELS[@]}"; do
  m="${entry%@*}"
  b=1
  [ "$entry" != "$m" ] && b="${entry#*@}"
  input="$DIR/$m.b$b.npy"
  [ -f "$input" ] || input="$DIR/input.npy"
  gflop=$(/usr/bin/python3 "$ROOT/bench/flops.py" "$DIR/$m.onnx" "$input")
  for t in 1 2; do
    wait_quiet
    flag="$BUSY"
    awk -v b="$BUSY" -v m="$MAX_BUSY" 'BEGIN { exit !(b > m) }' && flag="$BUSY LOADED"
    : > "$OUT/t2o" ; : > "$OUT/ort"
    for rep in $(seq "$REPS"); do
      # Which side goes first alternates, so neither always runs right after the other.
      if [ $((rep % 2)) = 1 ]; then
        env "${T2O_ENV[@]}" "$BUILD/t2o_bench" "$DIR/$m.onnx" "$input" "$t" "$ITERS" "$OUT/$m.t2o.npy" >> "$OUT/t2o"
        node "$ROOT/bench/ort_bench.js" "$DIR/$m.onnx" "$input" "$t" "$ITERS" "$OUT/$m.ort.npy" >> "$OUT/ort"
      else
        node "$ROOT/bench/ort_bench.js" "$DIR/$m.onnx" "$input" "$t" "$ITERS" "$OUT/$m.ort.npy" >> "$OUT/ort"
        env "${T2O_ENV[@]}" "$BUILD/t2o_bench" "$DIR/$m.onnx" "$input" "$t" "$ITERS" "$OUT/$m.t2o.npy" >> "$OUT/t2o"
      fi
    done
    peak=$PEAK1
    [ "$t" = 2 ] && peak=$PEAK2
    /usr/bin/python3 - "$OUT" "$m" "$b" "$t" "$gflop" "$peak" "$flag" <<'EOF'
import json, statistics, sys
import numpy as np
out, m, b, t, gflop, peak, flag = sys.argv[1:]
gflop, peak = float(gflop), float(peak)
rows = {side: [json.loads(l) for l in open(f"{out}/{side}") if l.strip()] for side in ("t2o", "ort")}
def load(side):
    med = lambda k: statistics.median(r[k] for r in rows[side])
    return med("median_ms"), min(r["min_ms"] for r in rows[side]), med("cpu_ms"), med("rss_mb"), med("build_ms")
(tm, tn, tc, tr, tb), (om, on, oc, orss, ob) = load("t2o"), load("ort")
paired = statistics.median(x["median_ms"] / y["median_ms"] for x, y in zip(rows["t2o"], rows["ort"]))
a, o = np.load(f"{out}/{m}.t2o.npy"), np.load(f"{out}/{m}.ort.npy")
scale = max(float(np.abs(o).max()), 1e-30)
diff = float(np.abs(a.astype(np.float64) - o).max()) / scale
rate = lambda ms: f"{gflop / ms * 1e3:.0f} ({100 * gflop / ms * 1e3 / peak:.0f}%)"
print(f"| {m} | {b} | {t} | {tm:.2f} | {om:.2f} | {tm / om:.2f} | {paired:.2f} | {tn / on:.2f} | {tc / oc:.2f} "
      f"| {rate(tm)} | {rate(om)} | {tr:.0f} / {orss:.0f} | {tb:.0f} / {ob:.0f} | {diff:.1e} | {flag} |")
EOF
  done
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
