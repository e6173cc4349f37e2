#!/usr/bin/env bash
# Sets up (idempotently) and runs the whole test suite. Extra arguments go to ctest,
# e.g. scripts/test.sh -L unit    or    scripts/test.sh -R conformance
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${T2O_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" "$@"
