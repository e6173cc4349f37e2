#!/usr/bin/env bash
# Installs what torch2onnx needs on Debian 12, then configures and builds it.
# Idempotent and fast when everything is already there.
#
#   scripts/setup.sh            install missing packages, build into ./build
#   T2O_CACHE_DIR=DIR           where ONNX Runtime's Node package goes (default ~/.cache/torch2onnx)
#   T2O_BUILD_DIR=DIR           build folder (default ./build)
#   T2O_SKIP_INSTALL=1          build only (no packages, and no .pth file for the Python package)
#   T2O_PYTHON_SITE=DIR         where the .pth file making `import torch2onnx` work goes
#                               (default: Debian python3's site directory, /usr/local/lib/python3.X/dist-packages)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${T2O_BUILD_DIR:-$ROOT/build}"
CACHE_DIR="${T2O_CACHE_DIR:-$HOME/.cache/torch2onnx}"
ORT_VERSION=1.30.0

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev python3-torch python3-torchvision python3-numpy
  # libtorch's BLAS: without it the reference BLAS runs PyTorch's float matmuls (shape learning,
  # verify) many times slower
  libopenblas0-openmp
  libonnx-dev python3-onnx libonnx-testdata
  libprotobuf-dev protobuf-compiler
  libdnnl-dev ocl-icd-opencl-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev python3-dev python3-pytest python3-yaml python3-torchaudio
  nodejs npm bc
  graphviz chromium python3-pil
  clang-14 libclang-rt-14-dev libomp-14-dev
)

log() { printf '[setup] %s\n' "$*" >&2; }
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    # node and npm may come from elsewhere than Debian; accept them if they run.
    if [[ $p == nodejs ]] && command -v node >/dev/null; then continue; fi
    if [[ $p == npm ]] && command -v npm >/dev/null; then continue; fi
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]} == 0)); then
    log "Debian packages: all present"
    return
  fi
  log "installing: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
}

install_ort() {
  local pkg="$CACHE_DIR/node_modules/onnxruntime-node/package.json"
  if [[ -f $pkg ]] && grep -q "\"version\": \"$ORT_VERSION\"" "$pkg"; then
    log "onnxruntime-node $ORT_VERSION: present in $CACHE_DIR"
    return
  fi
  mkdir -p "$CACHE_DIR"
  log "installing onnxruntime-node@$ORT_VERSION into $CACHE_DIR"
  # Its install script downloads GPU binaries we do not use; the CPU library ships in the package.
  (cd "$CACHE_DIR" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error "onnxruntime-node@$ORT_VERSION" >&2)
}

build() {
  if [[ ! -f $BUILD_DIR/build.ninja ]]; then
    log "configuring $BUILD_DIR"
    cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DT2O_CACHE_DIR="$CACHE_DIR" >&2
  fi
  log "building"
  cmake --build "$BUILD_DIR" -j "$(nproc)" >&2
}

# `import torch2onnx` for Debian's python3: a .pth file in its site directory naming the package
# folder of the build (the native module and the .py files sit together in $BUILD_DIR/python).
install_python_path() {
  local site want
  want="$(cd "$BUILD_DIR" && pwd)/python"
  site="${T2O_PYTHON_SITE:-$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')}"
  if [[ -f $site/torch2onnx.pth && $(cat "$site/torch2onnx.pth") == "$want" ]]; then
    log "python: torch2onnx importable (from $want)"
    return
  fi
  $SUDO mkdir -p "$site"
  echo "$want" | $SUDO tee "$site/torch2onnx.pth" >/dev/null
  log "python: $site/torch2onnx.pth -> $want"
}

if [[ ${T2O_SKIP_INSTALL:-0} != 1 ]]; then
  install_packages
  install_ort
fi
build
if [[ ${T2O_SKIP_INSTALL:-0} != 1 || -n ${T2O_PYTHON_SITE:-} ]]; then install_python_path; fi
log "ready: $BUILD_DIR/torch2onnx"
