"""Real library models convert at opset 17 with dynamic axes and match PyTorch in ONNX Runtime at two sizes:
torchvision detection, segmentation and video models, torchaudio models and transforms, and hand-written
UNet / nanoGPT / YOLO-style code (the models are listed in library_models.py).

usage: library_models_e2e.py TORCH2ONNX [--torch-onnx] [--opset N] [--expected FILE] [--keep DIR] [NAME_PREFIX ...]

For each model (random weights, see torchvision_e2e._randomise; eval mode): torch.jit.script it (trace
where the library documents tracing for ONNX export, as for torchvision's detectors, or where the model
does not script; the line then says "traced"), save model.pt, compute the eager PyTorch outputs at both
sizes, run `TORCH2ONNX convert model.pt -o m.onnx --opset 17 (or N) --data NAME=FILE.npy ... --dynamic SPEC ...`
with the first size's inputs, check that every dynamic input axis is symbolic in the ONNX graph, run the
model in ONNX Runtime (tests/interop/ort_run.js) at both sizes and compare with PyTorch. Outputs are
compared after flattening as the converter does: tuples and lists depth-first, dicts by value in
insertion order, None dropped.

Comparison rule, per output tensor: the shapes are equal (for detectors, whose box counts depend on the
data, this says both found the same number of boxes), and |got - want| <= RTOL * (|want| + scale) with
scale = max |want| over the tensor: a relative error of RTOL per element plus an absolute error of RTOL
times the output's scale. RTOL is 1e-4 for every model; float32 rounding differences are around 1e-6,
a wrong op gives errors of order 1. Integer outputs (labels, lengths) are thus compared exactly.
A model that misses this rule gets a second one where its own float32 rounding is the limit: eager
PyTorch in float64 is taken as the exact result, and each float output of ours must be as close to it
as PyTorch's float32 output is (within twice its relative error, or RTOL; and only where that error is
rounding, at most 10 * RTOL), integer outputs equal to
PyTorch's (Mask R-CNN needs it: a box that moves by 1e-3 pixel moves the samples of its mask, and
PyTorch's own float32 masks are 2e-4 from the float64 ones).

With --torch-onnx, torch.onnx 1.13 exports the same module (the scripted module, or for traced models
the eager module, which torch.onnx traces itself) at opset 17 with the same dynamic axes, and its model
runs in ONNX Runtime under the same rule; its result is shown beside ours and never fails the run.

Prints one line per model; exits 1 listing the models that fail with torch2onnx. With --expected FILE
(one model name a line, `#` comments; ctest uses library_models_expected.txt) only the listed models must
pass: a listed model that fails exits 1, a model that passes without being listed is reported so the
list can grow. Each model runs in a temporary directory that is removed at the end; with --keep DIR each
model's files stay in DIR/NAME (model.pt, the inputs of both sizes as s0/ and s1/input_K.npy, m.onnx), ready
for `torch2onnx verify`.
"""
import copy
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torchvision_e2e import _randomise  # noqa: E402
import library_models  # noqa: E402

ORT_RUN = os.path.join(HERE, "..", "interop", "ort_run.js")
OPSET = 17  # --opset N: another target opset (both exporters)
RTOL = 1e-4
for msg in ("torch.meshgrid: in an upcoming release", "The TorchScript type system doesn't support",
            "Converting a tensor to a Python", "__floordiv__ is deprecated", "To copy construct from a tensor",
            "'.*' was found in ScriptModule constants"):
    warnings.filterwarnings("ignore", message=msg)
warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)


def flatten(x, out):
    """Tensors of a (nested) output in the converter's order; None entries are dropped."""
    if isinstance(x, dict):
        for v in x.values():
            flatten(v, out)
    elif isinstance(x, (tuple, list)):
        for e in x:
            flatten(e, out)
    elif isinstance(x, torch.Tensor):
        out.append(x.detach().numpy())
    elif isinstance(x, (int, float, bool)):
        out.append(np.array(x))
    elif x is not None:
        raise TypeError(f"unexpected output type {type(x).__name__}")
    return out


def call_args(named):
    """forward() arguments from (name, tensor) pairs; parts NAME.K are gathered into a list."""
    args, lists = [], {}
    for name, t in named:
        base, _, part = name.rpartition(".")
        if base and part.isdigit():
            if base not in lists:
                lists[base] = []
                args.append(lists[base])
            lists[base].append(t)
        else:
            args.append(t)
    return tuple(args)


def max_rel_diff(want, got):
    want = want.astype(np.float64)
    got = got.astype(np.float64)
    if want.size == 0:
        return 0.0
    scale = np.abs(want).max()
    if scale == 0:
        return float(np.abs(got).max())
    return float((np.abs(got - want) / (np.abs(want) + scale)).max())


def compare(want, got_dir, n_out):
    """Largest relative difference over the outputs; raises when counts or shapes differ."""
    if n_out != len(want):
        raise RuntimeError(f"ONNX model has {n_out} outputs, PyTorch {len(want)}")
    worst = 0.0
    for k, w in enumerate(want):
        g = np.load(os.path.join(got_dir, f"output_{k}.npy"))
        if g.shape != w.shape:
            raise RuntimeError(f"output {k}: ONNX Runtime shape {g.shape}, PyTorch {w.shape}")
        worst = max(worst, max_rel_diff(w, g))
    return worst


def run(cmd, what, timeout=900):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-1500:]}")
    return r


def dynamic_axes(case):
    """{input: {axis: label}} from the case's --dynamic specs."""
    r = {}
    for spec in case.dynamic:
        name, _, axes = spec.partition(":")
        r[name] = {int(a.split("=")[0]): a.split("=")[1] for a in axes.split(",")}
    return r


def check_symbolic(onnx_path, case, names):
    m = onnx.load(onnx_path, load_external_data=False)
    init = {t.name for t in m.graph.initializer}
    inputs = [i for i in m.graph.input if i.name not in init]
    if [i.name for i in inputs] != names:
        raise RuntimeError(f"ONNX inputs {[i.name for i in inputs]}, wanted {names}")
    for name, axes in dynamic_axes(case).items():
        dims = inputs[names.index(name)].type.tensor_type.shape.dim
        for a in axes:
            if dims[a].HasField("dim_value") or not dims[a].dim_param:
                raise RuntimeError(f"ONNX input {name} axis {a} is not symbolic")
    return len(m.graph.output)


def ort_check(onnx_path, d, refs, n_out, keep_outputs=None):
    """Largest relative difference at each size. With keep_outputs (a list), ONNX Runtime's outputs of
    both sizes are appended to it."""
    diffs = []
    for k in (0, 1):
        od = os.path.join(d, f"s{k}", "out")
        run(["node", ORT_RUN, onnx_path, os.path.join(d, f"s{k}"), od], f"ONNX Runtime at size {k + 1}")
        try:
            diffs.append(compare(refs[k], od, n_out))
        except RuntimeError as e:
            raise RuntimeError(f"size {k + 1}: {e}") from None
        if keep_outputs is not None:
            keep_outputs.append([np.load(os.path.join(od, f"output_{j}.npy")) for j in range(n_out)])
        shutil.rmtree(od)
    return diffs


def float64_check(model, named, refs, got):
    """The second rule, for a model whose float32 rounding is amplified past RTOL (a box moved by 1e-3
    pixel moves the RoIAlign samples of its mask): eager PyTorch in float64 is the exact result, and
    every float output of the conversion must lie as close to it as PyTorch's own float32 result does
    (within twice its error, or within RTOL); integer outputs must equal PyTorch's. Returns the worst
    ratio (ours / bound, passing when <= 1) and a description, or None when the model cannot run in
    float64."""
    try:
        m64 = copy.deepcopy(model).double()
        with torch.no_grad():
            exact = []
            for k in (0, 1):
                args = [[t.double() for t in a] if isinstance(a, list) else
                        (a.double() if a.is_floating_point() else a) for a in call_args(named[k])]
                exact.append(flatten(m64(*args), []))
    except Exception:  # noqa: BLE001 - not every model runs in float64
        return None
    worst, ours_w, theirs_w = 0.0, 0.0, 0.0
    for k in (0, 1):
        for w32, w64, g in zip(refs[k], exact[k], got[k]):
            if w32.dtype.kind != "f":
                if not np.array_equal(w32, g):
                    return float("inf"), "integer output differs"
                continue
            if w64.shape != g.shape:
                return float("inf"), "float64 PyTorch gives another shape"
            ours, theirs = max_rel_diff(w64, g), max_rel_diff(w64, w32)
            ours_w, theirs_w = max(ours_w, ours), max(theirs_w, theirs)
            if theirs > 10 * RTOL:  # not rounding: float32 and float64 PyTorch disagree (tied scores reorder)
                return float("inf"), f"PyTorch float32 is {theirs:.1e} from float64, so no reference"
            worst = max(worst, ours / max(RTOL, 2 * theirs))
    return worst, f"float64 reference: ours {ours_w:.1e}, PyTorch float32 {theirs_w:.1e}"


def verdict(diffs):
    text = f"{diffs[0]:.1e} {diffs[1]:.1e}"
    return ("ok " if max(diffs) <= RTOL else "MISMATCH ") + text


def torch_onnx(case, model, ts, named, d, refs):
    """torch.onnx 1.13 on the same module and axes: 'ok d1 d2', 'MISMATCH ...' or 'fails: reason'."""
    path = os.path.join(d, "theirs.onnx")
    names = [n for n, _ in named]
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(ts if case.mode == "script" else model, call_args(named), path, opset_version=OPSET,
                              input_names=names, dynamic_axes=dynamic_axes(case))
        m = onnx.load(path, load_external_data=False)
        got = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
        n_out = len(m.graph.output)
        del m
        if got != names:
            return f"fails: ONNX inputs {got}, wanted {names}"
        diffs = ort_check(path, d, refs, n_out)
        return verdict(diffs)
    except Exception as e:  # noqa: BLE001 - a comparison column, not a test
        return "fails: " + " ".join(str(e).split())[:160]
    finally:
        if os.path.exists(path):
            os.remove(path)


def check_model(cli, case, d, with_torch_onnx, keep):
    """Returns (passed, line)."""
    os.makedirs(d)
    torch.manual_seed(0)
    with torch.no_grad():
        model = _randomise(case.make()).eval()
    named = [case.inputs(k) for k in (0, 1)]
    names = [n for n, _ in named[0]]
    with torch.no_grad():
        if case.mode == "script":
            ts = torch.jit.script(model)
        else:
            ts = torch.jit.trace(model, call_args(named[0]), check_trace=False, strict=False)
        pt = os.path.join(d, "model.pt")
        ts.save(pt)
        refs = [flatten(model(*call_args(named[k])), []) for k in (0, 1)]
    for k in (0, 1):
        sd = os.path.join(d, f"s{k}")
        os.makedirs(sd)
        for i, (_, t) in enumerate(named[k]):
            np.save(os.path.join(sd, f"input_{i}.npy"), t.numpy())
    for k in (0, 1):
        for j, w in enumerate(refs[k]):
            if w.dtype.kind == "f" and not np.isfinite(w).all():
                raise RuntimeError(f"PyTorch output {j} at size {k + 1} is not finite")
    if case.detection and any(r[0].shape[0] == 0 for r in refs):
        raise RuntimeError("PyTorch finds no boxes; the comparison would be empty")

    onnx_path = os.path.join(d, "m.onnx")
    cmd = [cli, "convert", pt, "-o", onnx_path, "--opset", str(OPSET), "--quiet"]
    for i, n in enumerate(names):
        cmd += ["--data", f"{n}={os.path.join(d, 's0', f'input_{i}.npy')}"]
    for spec in case.dynamic:
        cmd += ["--dynamic", spec]
    t0 = time.monotonic()
    ours = ""
    ok = False
    try:
        run(cmd, "torch2onnx convert")
        secs = time.monotonic() - t0
        n_out = check_symbolic(onnx_path, case, names)
        got = []
        diffs = ort_check(onnx_path, d, refs, n_out, got)
        ok = max(diffs) <= RTOL
        ours = f"{verdict(diffs)} ({secs:.0f}s)"
        if not ok:
            f64 = float64_check(model, named, refs, got)
            if f64 is not None:
                ok = f64[0] <= 1
                ours = f"{'ok' if ok else 'MISMATCH'} {diffs[0]:.1e} {diffs[1]:.1e}, {f64[1]} ({secs:.0f}s)"
    except Exception as e:  # noqa: BLE001
        ours = "FAIL " + " ".join(str(e).split())[:400]
    if os.path.exists(onnx_path) and not keep:
        os.remove(onnx_path)
    line = f"{case.name:38s} {'scripted' if case.mode == 'script' else 'traced':8s} torch2onnx: {ours}"
    if with_torch_onnx:
        line += f" | torch.onnx: {torch_onnx(case, model, ts, named[0], d, refs)}"
    return ok, line


def main():
    global OPSET
    argv = sys.argv[1:]
    if not argv:
        print(__doc__)
        return 2
    cli = os.path.abspath(argv[0])
    with_torch_onnx = "--torch-onnx" in argv
    expected = None
    keep = None
    rest = []
    it = iter(argv[1:])
    for a in it:
        if a == "--expected":
            with open(next(it)) as fh:
                expected = {ln.split("#")[0].strip() for ln in fh} - {""}
        elif a == "--opset":
            OPSET = int(next(it))
        elif a == "--keep":
            keep = os.path.abspath(next(it))
        elif a != "--torch-onnx":
            rest.append(a)
    prefixes = rest
    if expected is not None:
        unknown = expected - {c.name for c in library_models.CASES}
        if unknown:
            print("expected-pass list names unknown models:", ", ".join(sorted(unknown)))
            return 2
    selected = [c for c in library_models.CASES if not prefixes or any(c.name.startswith(p) for p in prefixes)]
    if not selected:
        print("no model matches", " ".join(prefixes))
        return 2
    torch.set_num_threads(2)
    failures = []
    work = keep or tempfile.mkdtemp(prefix="t2o_library_")
    t_start = time.monotonic()
    try:
        for case in selected:
            t0 = time.monotonic()
            try:
                d = os.path.join(work, case.name.split(" ")[0] if keep else "m")
                shutil.rmtree(d, ignore_errors=True)
                ok, line = check_model(cli, case, d, with_torch_onnx, keep is not None)
            except Exception as e:  # noqa: BLE001 - report every model, then fail
                ok, line = False, f"{case.name:38s} FAIL (PyTorch side) {' '.join(str(e).split())[:300]}"
            if not ok:
                failures.append(case.name)
            print(f"{line}  [{time.monotonic() - t0:.0f}s]", flush=True)
            if keep is None:
                shutil.rmtree(d, ignore_errors=True)
            gc.collect()
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{len(selected) - len(failures)}/{len(selected)} models passed with torch2onnx in "
          f"{time.monotonic() - t_start:.0f}s")
    if failures:
        print("failed:", ", ".join(failures))
    if expected is not None:
        regressed = [f for f in failures if f in expected]
        new_passes = [c.name for c in selected if c.name not in failures and c.name not in expected]
        if new_passes:
            print("passing but not in the expected-pass list (add them):", ", ".join(new_passes))
        if regressed:
            print("FAIL: expected to pass:", ", ".join(regressed))
            return 1
        return 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
