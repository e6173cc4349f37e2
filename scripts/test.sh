#!/usr/bin/env bash
# Sets up (idempotently) and runs the whole test suite:
#   1. every ctest test of the main build (labels unit, conformance, e2e, interop);
#   2. the bad-input, I/O and session tests again under AddressSanitizer + UndefinedBehaviorSanitizer
#      (a build without libtorch), so malformed files are shown not to crash or corrupt memory.
# Extra arguments go to the first ctest, e.g. scripts/test.sh -L unit; T2O_NO_SANITIZE=1 skips step 2.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${T2O_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"
status=0
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$(nproc)" "$@") || status=$?

if [[ ${T2O_NO_SANITIZE:-0} != 1 ]]; then
  ASAN_DIR="$BUILD_DIR-asan"
  if [[ ! -f $ASAN_DIR/build.ninja ]]; then
    cmake -S "$ROOT" -B "$ASAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DT2O_SANITIZE=ON \
      -DT2O_WITH_TORCH=OFF >/dev/null
  fi
  cmake --build "$ASAN_DIR" -j "$(nproc)" --target torch2onnx cli_test onnx_io_test runtime_session_test >&2
  # The 2 GB external-data test is skipped here: it only moves bytes and is slow under ASan.
  (cd "$ASAN_DIR" && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --output-on-failure -j "$(nproc)" -R '^(CliBadInput|Cli|TensorIo|ModelIo|Session)\.' \
      -E 'OverTwoGigabytes') || status=$?
fi
exit $status
