#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang (ASan + UBSan, no libtorch unless asked) and runs each
# for a bounded time, single-process. Used by scripts/test.sh (CI) and by hand for long campaigns.
#   tests/fuzz/run.sh [SECONDS_PER_HARNESS] [HARNESS...]
#   T2O_FUZZ_DIR=DIR      build folder (default build-fuzz next to the source tree)
#   T2O_FUZZ_CORPUS=DIR   corpora (default DIR/corpus; kept between runs so campaigns accumulate)
#   T2O_FUZZ_TORCH=1      also build fuzz_torch (libtorch; a much longer build)
#   T2O_FUZZ_SEED=N       libFuzzer's seed (default: a new one each run)
#   T2O_FUZZ_RUNS=N       stop each harness after N executions (the time limit still applies)
# A crash, sanitizer report, timeout (>10 s) or RSS over 2 GB fails the run (leaks show as RSS growth;
# LeakSanitizer is off because of libraries' one-time allocations); libFuzzer leaves the input as
# crash-*/timeout-*/oom-* in the build folder: minimise it, add it to tests/fuzz/regressions/HARNESS/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SECONDS_EACH="${1:-150}"
shift || true
DIR="${T2O_FUZZ_DIR:-$ROOT/build-fuzz}"
CORPUS="${T2O_FUZZ_CORPUS:-$DIR/corpus}"
TORCH=OFF
HARNESSES=("$@")
if [[ ${T2O_FUZZ_TORCH:-0} == 1 ]]; then TORCH=ON; fi
if ((${#HARNESSES[@]} == 0)); then
  HARNESSES=(fuzz_model fuzz_value_file)
  [[ $TORCH == ON ]] && HARNESSES+=(fuzz_torch)
fi
if [[ ! -f $DIR/build.ninja ]]; then
  cmake -S "$ROOT" -B "$DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
    -DCMAKE_C_COMPILER=clang-14 -DT2O_FUZZ=ON -DT2O_SANITIZE=ON -DT2O_WITH_TORCH=$TORCH -DT2O_PCH=OFF >&2
fi
cmake --build "$DIR" -j "$(nproc)" --target "${HARNESSES[@]}" >&2
"$ROOT/tests/fuzz/seed_corpus.sh" "$CORPUS" $([[ $TORCH == ON ]] && echo fuzz_torch)
# A seed (and a bound on executions) makes a run repeatable: the same commit fuzzes the same inputs, so
# a clean run here is a clean run in CI; on a slower machine the time limit cuts the same sequence short.
bound=()
[[ -n ${T2O_FUZZ_SEED:-} ]] && bound+=("-seed=$T2O_FUZZ_SEED")
[[ -n ${T2O_FUZZ_RUNS:-} ]] && bound+=("-runs=$T2O_FUZZ_RUNS")
status=0
passed=0
failed=0
for h in "${HARNESSES[@]}"; do
  mkdir -p "$CORPUS/$h" "$DIR/artifacts/$h"
  echo "[fuzz] $h for ${SECONDS_EACH}s" >&2
  # Regression inputs join the corpus so that mutations start from known trouble spots.
  extra=()
  [[ -d $ROOT/tests/fuzz/regressions/$h ]] && extra+=("$ROOT/tests/fuzz/regressions/$h")
  (cd "$DIR/artifacts/$h" && ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$DIR/tests/fuzz/$h" -max_total_time="$SECONDS_EACH" "${bound[@]}" -timeout=10 -rss_limit_mb=2048 \
      -malloc_limit_mb=2048 -max_len=1048576 -print_final_stats=1 "$CORPUS/$h" "${extra[@]}" 2>&1 | tail -n 25) &&
    passed=$((passed + 1)) || { failed=$((failed + 1)); status=1; }
done
echo "fuzz: $passed passed, $failed failed"
exit $status
