"""Benchmark models and the PyTorch side of the benchmark.

    /usr/bin/python3 bench/models.py export OUT_DIR [NAME...]     # .pt, .onnx (torch.onnx.export), input.npy
    /usr/bin/python3 bench/models.py time MODEL.pt INPUT.npy THREADS ITERS [OUT.npy]

torchvision architectures with random weights (nothing is downloaded). `export` prints how long
torch.onnx.export took per model, as JSON lines; `time` prints PyTorch's latency as one JSON line.
"""
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torchvision

MODELS = {
    "resnet18": lambda: torchvision.models.resnet18(weights=None),
    "resnet50": lambda: torchvision.models.resnet50(weights=None),
    "mobilenet_v2": lambda: torchvision.models.mobilenet_v2(weights=None),
}


def export(out, names):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(1, 3, 224, 224)
    np.save(os.path.join(out, "input.npy"), x.numpy())
    for name in names or MODELS:
        model = MODELS[name]().eval()
        traced = torch.jit.trace(model, (x,))
        traced.save(os.path.join(out, name + ".pt"))
        t0 = time.perf_counter()
        torch.onnx.export(model, (x,), os.path.join(out, name + ".onnx"), opset_version=13,
                          input_names=["image"], output_names=["logits"])
        secs = time.perf_counter() - t0
        print(json.dumps({"model": name, "torch_onnx_export_s": round(secs, 3)}), flush=True)


def time_model(pt, inp, threads, iters, out=None):
    torch.set_num_threads(int(threads))
    m = torch.jit.load(pt).eval()
    x = torch.from_numpy(np.load(inp))
    with torch.no_grad():
        for _ in range(3):
            y = m(x)
        ms = []
        for _ in range(int(iters)):
            t0 = time.perf_counter()
            y = m(x)
            ms.append((time.perf_counter() - t0) * 1e3)
    if out:
        np.save(out, y.numpy())
    print(json.dumps({"median_ms": statistics.median(ms), "min_ms": min(ms)}))


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "time":
        time_model(*sys.argv[2:])
    else:
        sys.exit(__doc__)
