"""Full-size torchvision classification models: convert at opset 17 with a dynamic batch axis and match
PyTorch in ONNX Runtime at batch 1 and 3.

usage: torchvision_e2e.py TORCH2ONNX [NAME_PREFIX ...]

For each architecture (random weights, see _randomise; eval mode): torch.jit.script
(trace only where scripting is impossible; the output line then says "traced"), save model.pt, compute
PyTorch's outputs at batch 1 and 3, run `TORCH2ONNX convert model.pt -o m.onnx --opset 17
--input x:1x3xHxW --dynamic x:0=batch`, check that the ONNX graph input's batch dim is symbolic, run the
model in ONNX Runtime (tests/interop/ort_run.js) at batch 1 and 3 and compare with PyTorch.

Comparison rule, per output tensor: |got - want| <= RTOL * (|want| + scale), scale = max |want| over the
tensor, i.e. a relative error of RTOL per element plus an absolute error of RTOL times the output's
scale (logits near zero carry the rounding error of the large ones). RTOL is 1e-4 for every model; the
float32 differences seen are around 1e-6 (deepest: vgg, 2.5e-6), so 1e-4 leaves room for other BLAS
builds without hiding a wrong op (those give errors of order 1).

Prints one line per model (name, scripted/traced, convert seconds, output scale, the largest
|diff| / (|want| + scale) at batch 1 and 3); exits 1 listing the failing models. Runs one model at a
time in a temporary directory that is removed at the end.
"""
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import onnx
import torch
import torchvision.models as tvm

HERE = os.path.dirname(os.path.abspath(__file__))
ORT_RUN = os.path.join(HERE, "..", "interop", "ort_run.js")
RTOL = 1e-4
# torchvision's notes that scripted GoogLeNet/Inception return a tuple (the None aux outputs are dropped).
warnings.filterwarnings("ignore", message="Scripted .* always returns")
warnings.filterwarnings("ignore", message="The TorchScript type system doesn't support instance-level")
warnings.filterwarnings("ignore", message="torch.meshgrid: in an upcoming release")


def _randomise(m):
    """Random weights as torchvision initialises them, plus what training would change: BatchNorm running
    stats, and every parameter torchvision initialises to a constant (norm affine parameters, zero biases,
    ViT's zero head and class token, ConvNeXt's 1e-6 layer scale) gets random values, so that no layer is
    an identity or a zero and every op shows in the output."""
    for mod in m.modules():
        if isinstance(mod, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.8, 1.2)
    for name, p in m.named_parameters():
        c = p.flatten()[0].item()
        if not bool(torch.all(p == c)):
            continue
        if name.endswith("layer_scale"):
            p.uniform_(0.2, 0.5)
        elif c != 0:
            p.mul_(torch.empty_like(p).uniform_(0.8, 1.2))
        elif p.dim() == 1:
            p.uniform_(-0.1, 0.1)
        else:
            bound = p[0].numel() ** -0.5
            p.uniform_(-bound, bound)
    return m


def _googlenet():
    return tvm.googlenet(weights=None, aux_logits=False, init_weights=False)


def _inception_v3():
    return tvm.inception_v3(weights=None, aux_logits=False, init_weights=False)


# name, constructor, image size
MODELS = [
    ("alexnet", lambda: tvm.alexnet(weights=None), 224),
    ("resnet50", lambda: tvm.resnet50(weights=None), 224),
    ("resnext50_32x4d", lambda: tvm.resnext50_32x4d(weights=None), 224),
    ("wide_resnet50_2", lambda: tvm.wide_resnet50_2(weights=None), 224),
    ("vgg16_bn", lambda: tvm.vgg16_bn(weights=None), 224),
    ("densenet121", lambda: tvm.densenet121(weights=None), 224),
    ("squeezenet1_1", lambda: tvm.squeezenet1_1(weights=None), 224),
    ("mobilenet_v2", lambda: tvm.mobilenet_v2(weights=None), 224),
    ("mobilenet_v3_large", lambda: tvm.mobilenet_v3_large(weights=None), 224),
    ("mnasnet1_0", lambda: tvm.mnasnet1_0(weights=None), 224),
    ("shufflenet_v2_x1_0", lambda: tvm.shufflenet_v2_x1_0(weights=None), 224),
    ("efficientnet_b0", lambda: tvm.efficientnet_b0(weights=None), 224),
    ("efficientnet_v2_s", lambda: tvm.efficientnet_v2_s(weights=None), 224),
    ("regnet_y_800mf", lambda: tvm.regnet_y_800mf(weights=None), 224),
    ("convnext_tiny", lambda: tvm.convnext_tiny(weights=None), 224),
    ("googlenet", _googlenet, 224),
    ("inception_v3", _inception_v3, 299),
    ("vit_b_16", lambda: tvm.vit_b_16(weights=None), 224),
    ("swin_t", lambda: tvm.swin_t(weights=None), 224),
    ("swin_v2_t", lambda: tvm.swin_v2_t(weights=None), 224),
    ("maxvit_t", lambda: tvm.maxvit_t(weights=None), 224),
]


def flatten(x, out):
    """Tensors of a (nested) output, depth-first, as the converter flattens them; None entries are dropped."""
    if isinstance(x, (tuple, list)):
        for e in x:
            flatten(e, out)
    elif isinstance(x, torch.Tensor):
        out.append(x.detach().numpy())
    elif x is not None:
        raise TypeError(f"unexpected output type {type(x).__name__}")
    return out


def max_rel_diff(want, got):
    """Largest |got - want| / (|want| + scale) over the tensor; the rule is met when this is <= RTOL."""
    want = want.astype(np.float64)
    got = got.astype(np.float64)
    scale = np.abs(want).max()
    if scale == 0:
        return float(np.abs(got).max())
    return float((np.abs(got - want) / (np.abs(want) + scale)).max())


def run(cmd, what):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-2000:]}")
    return r


def check_model(cli, name, make, size, work):
    """Returns the model's result line; raises on any failure."""
    d = os.path.join(work, name)
    os.makedirs(d)
    torch.manual_seed(0)
    with torch.no_grad():
        model = _randomise(make()).eval()
    mode = "scripted"
    with torch.no_grad():
        try:
            ts = torch.jit.script(model)
        except Exception as e:  # noqa: BLE001 - any scripting failure falls back to tracing
            print(f"  {name}: torch.jit.script failed ({str(e).splitlines()[0]}); tracing instead", flush=True)
            ts = torch.jit.trace(model, torch.randn(1, 3, size, size), check_trace=False)
            mode = "traced"
        pt = os.path.join(d, "model.pt")
        ts.save(pt)
        del model
        refs = {}
        for b in (1, 3):
            x = torch.randn(b, 3, size, size)
            bd = os.path.join(d, f"b{b}")
            os.makedirs(bd)
            np.save(os.path.join(bd, "input_0.npy"), x.numpy())
            refs[b] = flatten(ts(x), [])
    del ts
    for k, w in enumerate(refs[3]):
        # A comparison is only worth something if the output depends on the input.
        if not np.isfinite(w).all() or np.array_equal(w[0], w[1]) or np.array_equal(w[1], w[2]):
            raise RuntimeError(f"PyTorch output {k} at batch 3 is not finite or does not vary with the input")
    scale = max(float(np.abs(w).max()) for w in refs[3])
    gc.collect()

    onnx_path = os.path.join(d, "m.onnx")
    t0 = time.monotonic()
    run([cli, "convert", pt, "-o", onnx_path, "--opset", "17", "--input", f"x:1x3x{size}x{size}",
         "--dynamic", "x:0=batch", "--quiet"], "torch2onnx convert")
    secs = time.monotonic() - t0
    os.remove(pt)

    m = onnx.load(onnx_path, load_external_data=False)
    inputs = [i for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
    if len(inputs) != 1:
        raise RuntimeError(f"ONNX graph has {len(inputs)} inputs, wanted 1")
    dim0 = inputs[0].type.tensor_type.shape.dim[0]
    if dim0.HasField("dim_value") or not dim0.dim_param:
        raise RuntimeError(f"ONNX input {inputs[0].name} batch dim is not symbolic: {dim0}")
    n_out = len(m.graph.output)
    del m

    diffs = {}
    for b in (1, 3):
        bd = os.path.join(d, f"b{b}")
        od = os.path.join(bd, "out")
        run(["node", ORT_RUN, onnx_path, bd, od], f"ONNX Runtime at batch {b}")
        want = refs[b]
        if n_out != len(want):
            raise RuntimeError(f"ONNX model has {n_out} outputs, PyTorch {len(want)}")
        worst = 0.0
        for k, w in enumerate(want):
            g = np.load(os.path.join(od, f"output_{k}.npy"))
            if g.shape != w.shape:
                raise RuntimeError(f"batch {b} output {k}: ONNX Runtime shape {g.shape}, PyTorch {w.shape}")
            worst = max(worst, max_rel_diff(w, g))
        diffs[b] = worst
    line = (f"{name:20s} {mode:8s} convert {secs:6.1f}s  scale {scale:8.3g}  diff b1 {diffs[1]:.2e}  "
            f"b3 {diffs[3]:.2e}")
    bad = [b for b in (1, 3) if not diffs[b] <= RTOL]
    if bad:
        raise RuntimeError(f"{line}: exceeds RTOL at batch {', '.join(map(str, bad))}")
    return line


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    cli = os.path.abspath(sys.argv[1])
    prefixes = sys.argv[2:]
    selected = [m for m in MODELS if not prefixes or any(m[0].startswith(p) for p in prefixes)]
    if not selected:
        print("no model matches", " ".join(prefixes))
        return 2
    failures = []
    work = tempfile.mkdtemp(prefix="t2o_torchvision_")
    t_start = time.monotonic()
    try:
        for name, make, size in selected:
            if not hasattr(tvm, name):
                failures.append(name)
                print(f"FAIL {name}: not in this torchvision", flush=True)
                continue
            try:
                print(check_model(cli, name, make, size, work), flush=True)
            except Exception as e:  # noqa: BLE001 - report every model, then fail
                failures.append(name)
                print(f"FAIL {name}: {e}", flush=True)
            shutil.rmtree(os.path.join(work, name), ignore_errors=True)
            gc.collect()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(selected) - len(failures)}/{len(selected)} models passed in {time.monotonic() - t_start:.0f}s")
    if failures:
        print("failed:", " ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
