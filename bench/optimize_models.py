"""Models of the optimizer benchmark (bench/optimize.sh): ResNet-50, MobileNetV2 and a BERT-style encoder;
also, by name only, the 2-layer LSTM of bench/models.py (bench/quantize.sh).

    /usr/bin/python3 bench/optimize_models.py OUT_DIR [NAME...]

For each: NAME.pt (TorchScript, scripted), NAME.torch.onnx (torch.onnx.export of the eager module at
opset 17 with a dynamic batch, as users export), NAME.input.npy, and NAME.spec (the torch2onnx
convert arguments). Random weights, BatchNorm statistics randomised (tests/e2e/torchvision_e2e.py).
"""
import os
import sys
import warnings

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import models as bench_models  # noqa: E402  (Lstm)
import node_counts  # noqa: E402  (BertStyle)
import torchvision_e2e as tv  # noqa: E402

warnings.filterwarnings("ignore")

MODELS = {
    "resnet50": (lambda: torchvision.models.resnet50(weights=None), lambda: torch.randn(1, 3, 224, 224), "x", [0]),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(weights=None), lambda: torch.randn(1, 3, 224, 224), "x", [0]),
    "bert_encoder": (node_counts.BertStyle, lambda: torch.randint(0, 1000, (1, 32)), "tokens", [0, 1]),
    # 2 layers, hidden 512, 100 steps, batch 1 (time first), static shapes.
    "lstm": (bench_models.Lstm, lambda: torch.randn(100, 1, 512), "input", []),
}
DEFAULT = ["resnet50", "mobilenet_v2", "bert_encoder"]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name in sys.argv[2:] or DEFAULT:
        make, example, input_name, axes = MODELS[name]
        torch.manual_seed(0)
        x = example()
        with torch.no_grad():
            model = tv._randomise(make()).eval()
            torch.jit.script(model).save(os.path.join(out, name + ".pt"))
        node_counts.export_torch(model, (x,), os.path.join(out, name + ".torch.onnx"), 17, input_name, axes)
        np.save(os.path.join(out, name + ".input.npy"), x.numpy())
        dtype = "i64" if x.dtype == torch.int64 else "f32"
        dyn = ",".join(f"{a}={'batch' if a == 0 else 'seq'}" for a in axes)
        spec = f"--input {input_name}:{'x'.join(map(str, x.shape))}:{dtype}" + (f" --dynamic {input_name}:{dyn}" if axes else "")
        with open(os.path.join(out, name + ".spec"), "w") as f:
            f.write(spec + "\n")
        print(name, flush=True)


if __name__ == "__main__":
    main()
