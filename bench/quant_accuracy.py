"""Accuracy of int8 quantization on image classifiers over hundreds of held-out inputs.

    /usr/bin/python3 bench/quant_accuracy.py [--t2o build/torch2onnx] [--work DIR] [--held 500]
                                             [--calib 64] [--steps N] [--only LABEL,...]
                                             [MODEL...]  (resnet50 mobilenet_v2)

No trained weights can be downloaded here, and a classifier with random weights says little: with
its BatchNorm statistics left at their defaults every input lands in the same class, so a top-1
agreement of 100% is free; with statistics estimated on data the network is chaotic (the float
model itself changes its argmax on about half of the inputs under noise of one int8 step). So each
model is **trained here**, briefly, on a task of the same kind of inputs, and has what quantization
meets in practice: weights shaped by gradient descent, BatchNorm statistics of real activations,
and inputs both far from and close to its decision boundaries.

Inputs: bench/quant_inputs.py's smooth structured images (a 7x7 grid of normal values per channel
upsampled bicubically to 224x224, plus pixel noise, standardised per channel) with a class signal:
10 classes, each a fixed 7x7x3 template grid (seed 1000 + class) added to an equally strong random
grid before upsampling. Training: torchvision's architecture with a 10-class head, Adam (lr 1e-3),
batches of 16 fresh images (seeds 100, 101, ...), --steps steps. Calibration set: seed 1; held-out
set: seed 2 (disjoint draws, never trained on).

For each model: torch2onnx convert (opset 17), then torch2onnx quantize on the calibration set and
evaluated on the held-out set: static per-channel QDQ (minmax and entropy), static QOperator
(minmax), dynamic per-channel. Printed: top-1 agreement with the float model, the number of
distinct float classes behind it, the cosine of the logits; and for context the float model's
accuracy on the task and its own top-1 agreement with itself under Gaussian input noise of half an
int8 step of the input range (what no quantizer can do better than on inputs that close to a
boundary).
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torchvision


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CLASSES = 10

MODELS = {
    "resnet50": lambda: torchvision.models.resnet50(weights=None, num_classes=CLASSES),
    "mobilenet_v2": lambda: torchvision.models.mobilenet_v2(weights=None, num_classes=CLASSES),
}

VARIANTS = [
    ("static qdq minmax", ["--mode", "static", "--per-channel"]),
    ("static qdq entropy", ["--mode", "static", "--per-channel", "--method", "entropy"]),
    ("static qoperator minmax", ["--mode", "static", "--per-channel", "--format", "qoperator"]),
    ("dynamic", ["--mode", "dynamic", "--per-channel"]),
]


def task_images(count, seed):
    """`count` images of the task and their labels: class c's images are its template (a 3x7x7
    normal grid, seed 1000 + c) plus an equally strong random grid, upsampled bicubically to
    224x224, plus 0.1 pixel noise, standardised per channel (bench/quant_inputs.py's images with
    a class signal in them). Classes drawn uniformly."""
    g = torch.Generator().manual_seed(seed)
    templates = torch.stack([torch.randn(3, 7, 7, generator=torch.Generator().manual_seed(1000 + c))
                             for c in range(CLASSES)])
    y = torch.randint(0, CLASSES, (count,), generator=g)
    low = templates[y] + torch.randn(count, 3, 7, 7, generator=g)
    img = torch.nn.functional.interpolate(low, size=(224, 224), mode="bicubic", align_corners=False)
    img = img + 0.1 * torch.randn(img.shape, generator=g)
    img = (img - img.mean(dim=(2, 3), keepdim=True)) / img.std(dim=(2, 3), keepdim=True)
    return img, y


def build(name, calib, out, steps):
    torch.manual_seed(0)
    model = MODELS[name]()
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    model.train()
    for step in range(steps):
        x, y = task_images(16, 100 + step)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 25 == 0 or step == steps - 1:
            print(f"  {name} step {step} loss {loss.item():.3f}", flush=True)
    model.eval()
    with torch.no_grad():
        torch.jit.trace(model, torch.from_numpy(calib[0])).save(out)
    return model


def float_context(model, held, y_held):
    """The float model's accuracy on the task, and its top-1 agreement with itself under noise of
    half an int8 step of the held-out inputs' range."""
    x = torch.from_numpy(held[:, 0])
    step = float(x.max() - x.min()) / 255
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        clean = torch.cat([model(x[k:k + 25]) for k in range(0, x.shape[0], 25)]).argmax(1)
        noisy = torch.cat([model(x[k:k + 25] + 0.5 * step * torch.randn(x[k:k + 25].shape, generator=g))
                           for k in range(0, x.shape[0], 25)]).argmax(1)
    return float((clean == y_held).float().mean()), float((clean == noisy).float().mean())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--t2o", default=os.path.join(ROOT, "build", "torch2onnx"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench_quant_accuracy"))
    ap.add_argument("--held", type=int, default=500)
    ap.add_argument("--calib", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--steps", type=int, default=200, help="training steps (batches of 16)")
    ap.add_argument("--only", default="", help="comma-separated variant labels to run (default: all): "
                    + ", ".join(label for label, _ in VARIANTS))
    ap.add_argument("models", nargs="*", default=list(MODELS))
    a = ap.parse_args()
    only = [x.strip() for x in a.only.split(",") if x.strip()]
    unknown = set(only) - {label for label, _ in VARIANTS}
    if unknown:
        ap.error("unknown variant(s): " + ", ".join(sorted(unknown)))
    os.makedirs(a.work, exist_ok=True)
    calib_path, held_path = os.path.join(a.work, "calib.npy"), os.path.join(a.work, "held.npy")
    calib, _ = task_images(a.calib, 1)
    held, y_held = task_images(a.held, 2)
    calib, held = calib.unsqueeze(1).numpy(), held.unsqueeze(1).numpy()
    np.save(calib_path, calib)
    np.save(held_path, held)
    torch.set_num_threads(a.threads or os.cpu_count())
    rows = []
    for name in a.models:
        pt, fl = os.path.join(a.work, name + ".pt"), os.path.join(a.work, name + ".onnx")
        model = build(name, calib, pt, a.steps)
        acc, self_agree = float_context(model, held, y_held)
        print(f"{name:14s} float: task accuracy {100 * acc:.1f}%, top-1 agreement with itself under "
              f"half-step input noise {100 * self_agree:.2f}%", flush=True)
        subprocess.run([a.t2o, "convert", pt, "-o", fl, "--opset", "17", "--input", "x:1x3x224x224", "--quiet"], check=True)
        for label, args in VARIANTS:
            if only and label not in only:
                continue
            q, rep = os.path.join(a.work, f"{name}.{label.replace(' ', '_')}.onnx"), os.path.join(a.work, "report.json")
            cmd = [a.t2o, "quantize", fl, "-o", q, *args, "--eval", held_path, "--runs", "0", "--quiet", "--report", rep,
                   "--threads", str(a.threads)]
            if "static" in args:
                cmd += ["--calibrate", calib_path]
            subprocess.run(cmd, check=True)
            with open(rep) as f:
                out = json.load(f)["accuracy"]["outputs"][0]
            rows.append((name, label, out["top1_agreement"], out["top1_rows"], out["float_classes"], out["cosine"]))
            print(f"{name:14s} {label:26s} top-1 agreement {100 * rows[-1][2]:6.2f}% of {rows[-1][3]} inputs "
                  f"({rows[-1][4]} distinct float classes)  cosine {rows[-1][5]:.6f}", flush=True)


if __name__ == "__main__":
    main()
