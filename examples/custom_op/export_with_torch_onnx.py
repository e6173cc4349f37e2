"""What torch.onnx.export (PyTorch 1.13) does with the example custom op, for docs/pitfalls.md.

usage: python3 export_with_torch_onnx.py path/to/libcbr_torch.so
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "models"))
import pitfall_models  # noqa: E402

torch.ops.load_library(sys.argv[1])
m = pitfall_models.CbrNet().eval()
x = torch.randn(2, 3, 12, 12)
for what, model in (("traced", m), ("scripted", torch.jit.script(m))):
    try:
        torch.onnx.export(model, (x,), "/tmp/cbr_torch_onnx.onnx", opset_version=13)
        print(f"{what}: exported")
    except Exception as e:  # noqa: BLE001
        print(f"{what}: {type(e).__module__}.{type(e).__name__}: {str(e).strip().splitlines()[0]}")
