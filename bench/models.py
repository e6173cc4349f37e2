"""Benchmark models and the PyTorch side of the benchmark.

    /usr/bin/python3 bench/models.py export OUT_DIR [NAME...]     # .pt, .onnx (torch.onnx.export), input.npy
    /usr/bin/python3 bench/models.py time MODEL.pt INPUT.npy THREADS ITERS [OUT.npy]
    /usr/bin/python3 bench/models.py export-time OUT_DIR NAME REPEATS  # torch.onnx.export, median of REPEATS

torchvision architectures with random weights (nothing is downloaded). `export` prints how long
torch.onnx.export took per model, as JSON lines; `time` prints PyTorch's latency as one JSON line. `export-time` times torch.onnx.export in this
process (torch already imported), from the eager model and from the saved TorchScript file.
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


def export_time(out, name, repeats):
    torch.manual_seed(0)
    x = torch.randn(1, 3, 224, 224)
    model = MODELS[name]().eval()
    # Wall and CPU seconds (CPU time is the steadier measure on a shared machine).
    eager, script, eager_cpu, script_cpu = [], [], [], []
    for _ in range(int(repeats)):
        t0, c0 = time.perf_counter(), time.process_time()
        torch.onnx.export(model, (x,), os.path.join(out, name + ".export.onnx"), opset_version=17)
        eager.append(time.perf_counter() - t0)
        eager_cpu.append(time.process_time() - c0)
        t0, c0 = time.perf_counter(), time.process_time()
        ts = torch.jit.load(os.path.join(out, name + ".pt")).eval()
        torch.onnx.export(ts, (x,), os.path.join(out, name + ".export.onnx"), opset_version=17)
        script.append(time.perf_counter() - t0)
        script_cpu.append(time.process_time() - c0)
    med = statistics.median
    print(json.dumps({"model": name, "export_eager_s": med(eager), "export_eager_cpu_s": med(eager_cpu),
                      "export_from_pt_s": med(script), "export_from_pt_cpu_s": med(script_cpu)}), flush=True)


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
    elif sys.argv[1] == "export-time":
        export_time(*sys.argv[2:])
    elif sys.argv[1] == "time":
        time_model(*sys.argv[2:])
    else:
        sys.exit(__doc__)
