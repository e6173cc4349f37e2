#!/usr/bin/env bash
# Sets up (idempotently) and runs the whole test suite:
#   1. every ctest test of the main build (labels unit, conformance, e2e, interop, long) except the
#      label `slow` (run it with scripts/test.sh -L slow);
#   2. the bad-input, I/O, session and hardening tests again under AddressSanitizer +
#      UndefinedBehaviorSanitizer (a build without libtorch), so malformed files are shown not to
#      crash or corrupt memory; the fuzz regression inputs are replayed there too;
#   3. one Session run from 8 threads at once (runtime_threads_test) and the task pool
#      (runtime_task_pool_test) under ThreadSanitizer;
#   4. each libFuzzer harness without libtorch in a clang build (tests/fuzz/run.sh): 400000 executions
#      (T2O_FUZZ_RUNS) from seed 1 (T2O_FUZZ_SEED), at most T2O_FUZZ_SECONDS (default 150) each.
# Extra arguments go to the first ctest, e.g. scripts/test.sh -L unit; T2O_NO_SANITIZE=1 skips
# steps 2 and 3, T2O_NO_FUZZ=1 (or T2O_FUZZ_SECONDS=0) step 4.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${T2O_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"
status=0
# Without arguments every label but `slow` (the library-model comparison and convert-version on every
# fixture, ~20 min each: scripts/test.sh -L slow).
CTEST_ARGS=("$@")
if ((${#CTEST_ARGS[@]} == 0)); then CTEST_ARGS=(-LE slow); fi
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$(nproc)" "${CTEST_ARGS[@]}") || status=$?

if [[ ${T2O_NO_SANITIZE:-0} != 1 ]]; then
  ASAN_DIR="$BUILD_DIR-asan"
  if [[ ! -f $ASAN_DIR/build.ninja ]]; then
    cmake -S "$ROOT" -B "$ASAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DT2O_SANITIZE=ON \
      -DT2O_WITH_TORCH=OFF >/dev/null
  fi
  cmake --build "$ASAN_DIR" -j "$(nproc)" --target torch2onnx cli_test onnx_io_test runtime_session_test \
    runtime_bind_test hardening_test hardening_cli_test fuzz_model fuzz_value_file >&2
  # The 2 GB external-data test is skipped here: it only moves bytes and is slow under ASan.
  (cd "$ASAN_DIR" && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --output-on-failure -j "$(nproc)" \
      -R '^(CliBadInput|Cli|TensorIo|ModelIo|Session|SessionBind|Hardening[A-Za-z]*|CliHardening|FuzzRegressions)\.' \
      -E 'OverTwoGigabytes') || status=$?

  # Each run single-threaded inside (OpenMP's own threads are not instrumented); the 8 callers, and
  # the task pool's callers and helpers (std::thread), are the threads under test.
  TSAN_DIR="$BUILD_DIR-tsan"
  if [[ ! -f $TSAN_DIR/build.ninja ]]; then
    cmake -S "$ROOT" -B "$TSAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DT2O_TSAN=ON \
      -DT2O_WITH_TORCH=OFF >/dev/null
  fi
  cmake --build "$TSAN_DIR" -j "$(nproc)" --target runtime_threads_test runtime_task_pool_test >&2
  (cd "$TSAN_DIR" && OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --output-on-failure -R '^(SessionThreads\.ConcurrentRuns|TaskPool\.)') || status=$?
fi

if [[ ${T2O_NO_FUZZ:-0} != 1 && ${T2O_FUZZ_SECONDS:-150} != 0 ]]; then
  # A fixed seed and execution bound: the same commit fuzzes the same inputs here and in CI.
  T2O_FUZZ_SEED="${T2O_FUZZ_SEED:-1}" T2O_FUZZ_RUNS="${T2O_FUZZ_RUNS:-400000}" \
    "$ROOT/tests/fuzz/run.sh" "${T2O_FUZZ_SECONDS:-150}" || status=$?
fi
exit $status
