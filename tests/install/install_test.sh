#!/usr/bin/env bash
# Installs torch2onnx from BUILD_DIR into a fresh prefix, then builds and runs a project outside
# the tree against it: with find_package(torch2onnx) (CMake) and with pkg-config.
#   install_test.sh BUILD_DIR SOURCE_DIR PYTHON
set -euo pipefail
BUILD=$1 SRC=$2 PY=$3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/t2o-install.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PREFIX=$WORK/prefix
cmake --install "$BUILD" --prefix "$PREFIX" --component devel >/dev/null
LIB=$PREFIX/lib
test -f "$LIB/cmake/torch2onnx/torch2onnxConfig.cmake"
test -f "$PREFIX/include/torch2onnx/runtime/session.h"

# The runtime library, and programs built on it, must not need libtorch.
needs_libtorch() { readelf -d "$1" | grep NEEDED | grep -q 'libtorch\.so\|libtorch_cpu\.so\|libc10\.so'; }
if needs_libtorch "$LIB/libtorch2onnx_runtime.so"; then
  echo "libtorch2onnx_runtime.so depends on libtorch:" >&2
  readelf -d "$LIB/libtorch2onnx_runtime.so" | grep NEEDED >&2
  exit 1
fi

# CMake: find_package(torch2onnx) from the prefix only.
cmake -S "$SRC/tests/install/consumer" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$WORK/build" >/dev/null
CASE=/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d
"$WORK/build/run_model" "$CASE/model.onnx" "$CASE/test_data_set_0/input_0.pb" "$CASE/test_data_set_0/output_0.pb"
if needs_libtorch "$WORK/build/run_model"; then
  echo "run_model links libtorch" >&2
  exit 1
fi

# The converter library from outside the tree (a small TorchScript model saved by PyTorch).
if [[ -x $WORK/build/convert_model ]]; then
  "$PY" - "$WORK/lin.pt" <<'PYEOF'
import sys, torch
torch.jit.script(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()).save(sys.argv[1])
PYEOF
  "$WORK/build/convert_model" "$WORK/lin.pt" "$WORK/lin.onnx"
  test -s "$WORK/lin.onnx"
fi

# pkg-config: the same program built by hand.
export PKG_CONFIG_PATH=$LIB/pkgconfig
g++ -std=c++20 -O1 "$SRC/tests/install/consumer/run_model.cpp" -o "$WORK/run_model_pc" \
  $(pkg-config --cflags --libs torch2onnx) -Wl,-rpath,"$LIB"
"$WORK/run_model_pc" "$CASE/model.onnx" "$CASE/test_data_set_0/input_0.pb" "$CASE/test_data_set_0/output_0.pb"
echo "installed torch2onnx $(pkg-config --modversion torch2onnx): find_package and pkg-config consumers ran"
