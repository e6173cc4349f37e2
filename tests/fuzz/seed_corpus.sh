#!/usr/bin/env bash
# Fills seed corpora for the harnesses from the ONNX backend test data (and, for fuzz_torch, from
# models made with Debian's torch). Folders that already hold files are left as they are.
#   tests/fuzz/seed_corpus.sh OUT_DIR [fuzz_torch]
# OUT_DIR/fuzz_model: every model.onnx under 1 MB; OUT_DIR/fuzz_value_file: every test-data .pb
# under 64 KB prefixed with its kind byte (1 tensor, 2 sequence, 3 optional; see
# fuzz_value_file.cpp), and .npy files of each dtype (kind byte 0).
set -euo pipefail
OUT="$1"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
/usr/bin/python3 - "$OUT" "${T2O_TESTDATA:-/usr/share/libonnx-testdata/data}" <<'PY'
import io, os, sys
import numpy as np
out, data = sys.argv[1], sys.argv[2]
models, values = os.path.join(out, "fuzz_model"), os.path.join(out, "fuzz_value_file")
fill_models = not (os.path.isdir(models) and os.listdir(models))
fill_values = not (os.path.isdir(values) and os.listdir(values))
os.makedirs(models, exist_ok=True)
os.makedirs(values, exist_ok=True)
for root, _, files in os.walk(data):
    rel = os.path.relpath(root, data).replace(os.sep, "_")
    for f in files:
        p = os.path.join(root, f)
        size = os.path.getsize(p)
        if fill_models and f == "model.onnx" and size < (1 << 20):
            with open(p, "rb") as src, open(os.path.join(models, rel + "_" + f), "wb") as dst:
                dst.write(src.read())
        elif fill_values and f.endswith(".pb") and size < (64 << 10):
            kind = b"\x02" if "seq" in rel else b"\x03" if "optional" in rel else b"\x01"
            with open(p, "rb") as src, open(os.path.join(values, rel + "_" + f), "wb") as dst:
                dst.write(kind + src.read())
if fill_values:
    for i, dt in enumerate(["<f4", "<f8", "<f2", "|i1", "<i2", "<i4", "<i8", "|u1", "|b1", "<c8"]):
        for shape in [(2, 3), ()]:
            b = io.BytesIO()
            np.save(b, np.arange(int(np.prod(shape)) or 1).astype(dt).reshape(shape))
            with open(os.path.join(values, f"npy_{i}_{len(shape)}"), "wb") as dst:
                dst.write(b"\x00" + b.getvalue())
PY
if [[ ${2:-} == fuzz_torch ]]; then
  mkdir -p "$OUT/fuzz_torch"
  [[ -n $(ls -A "$OUT/fuzz_torch") ]] || /usr/bin/python3 "$HERE/torch_inputs.py" corpus "$OUT/fuzz_torch"
fi
