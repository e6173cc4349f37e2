"""End-to-end tests of the export pitfalls (docs/pitfalls.md), through the torch2onnx CLI.

usage: pitfall_e2e.py ITEM --cli torch2onnx --work DIR [--torch-lib L --plugin P]

For each case: build the fixture (tests/models/pitfall_models.py), convert -> check -> run in our
runtime and in ONNX Runtime (tests/interop/ort_run.js) -> compare with PyTorch's outputs, plus the
item's own checks (warnings, error messages, inspect output, graph contents).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import pitfall_models  # noqa: E402

ORT_RUN = os.path.join(HERE, "..", "interop", "ort_run.js")
A = None
failures = []


def fail(msg):
    print("FAIL:", msg)
    failures.append(msg)


def cli(*args, expect=0, cwd=None):
    r = subprocess.run([A.cli, *map(str, args)], capture_output=True, text=True, cwd=cwd)
    if expect is not None and r.returncode != expect:
        fail(f"torch2onnx {' '.join(map(str, args))}: exit {r.returncode}, wanted {expect}\n{r.stdout}{r.stderr}")
    return r


def expect_in(text, needles, what):
    for n in needles:
        if n not in text:
            fail(f"{what}: {n!r} not in output:\n{text}")


def compare(ref_dir, out_dir, tol, what):
    k = 0
    while os.path.exists(os.path.join(ref_dir, f"output_{k}.npy")):
        want = np.load(os.path.join(ref_dir, f"output_{k}.npy"))
        got_path = os.path.join(out_dir, f"output_{k}.npy")
        if not os.path.exists(got_path):
            fail(f"{what}: output {k} missing")
            return
        got = np.load(got_path)
        if want.shape != got.shape:
            fail(f"{what}: output {k} shape {got.shape}, PyTorch {want.shape}")
        elif not np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol[0], atol=tol[1]):
            fail(f"{what}: output {k} differs, max |diff| {np.abs(got.astype(np.float64) - want).max():.3g}")
        k += 1
    if k == 0:
        fail(f"{what}: no reference outputs in {ref_dir}")


def run_both(d, onnx, case, tag, plugin=None):
    """Runs every run_K of the fixture in our runtime and in ONNX Runtime; compares with PyTorch."""
    k = 0
    while os.path.isdir(os.path.join(d, f"run_{k}")):
        rd = os.path.join(d, f"run_{k}")
        args = ["run", onnx, "--quiet", "--out-dir", os.path.join(d, f"out_t2o_{tag}_{k}")]
        for j, name in enumerate(case["inputs"]):
            args += ["--input", f"{name}={os.path.join(rd, f'input_{j}.npy')}"]
        if plugin:
            args += ["--plugin", plugin]
        if cli(*args).returncode == 0:
            compare(rd, os.path.join(d, f"out_t2o_{tag}_{k}"), case["tol"], f"{tag} run {k} (torch2onnx runtime)")
        if case.get("ort", True):
            od = os.path.join(d, f"out_ort_{tag}_{k}")
            r = subprocess.run(["node", ORT_RUN, onnx, rd, od], capture_output=True, text=True)
            if r.returncode != 0:
                fail(f"{tag} run {k}: ONNX Runtime failed: {r.stderr}")
            else:
                compare(rd, od, case["tol"], f"{tag} run {k} (ONNX Runtime)")
        k += 1


def convert_check_run(d, case, opset, model="model.pt", extra=(), plugin=None):
    onnx = os.path.join(d, f"model_{opset}.onnx")
    r = cli("convert", os.path.join(d, case.get("model", model)), "-o", onnx, "--opset", opset, *case["convert"],
            *extra, cwd=d)
    if r.returncode != 0:
        return None, r
    cli("check", onnx)
    run_both(d, onnx, case, f"opset{opset}", plugin)
    return onnx, r


def onnx_graph(path):
    import onnx
    return onnx.load(path)


def generic(d, case, **kw):
    out = []
    for opset in case["opsets"]:
        out.append(convert_check_run(d, case, opset, **kw))
    return out


# --- per item ---------------------------------------------------------------------------------

def item_weights(d, case):
    generic(d, case)
    r = cli("inspect", os.path.join(d, "weights.pth"))
    expect_in(r.stdout, ["state_dict", "no architecture", "conv.weight", "bn.running_mean", "--weights"], "inspect weights")
    r = cli("convert", os.path.join(d, "arch.pt"), "-o", os.path.join(d, "bad.onnx"), "--input", "x:2x3x16x16",
            "--weights", os.path.join(d, "bad_weights.pth"), expect=4)
    expect_in(r.stderr, ["missing keys: fc.bias", "unexpected keys: head.weight", "shape mismatches: conv.weight"],
              "strict --weights")
    r = cli("convert", os.path.join(d, "model_pickled.pth"), "-o", os.path.join(d, "p.onnx"), "--input", "x:2x3x16x16",
            expect=4)
    expect_in(r.stderr, ["pitfall_models.WeightsNet", "torch.jit.script", "--weights"], "pickled module")
    r = cli("inspect", os.path.join(d, "model_pickled.pth"))
    expect_in(r.stdout, ["pickled Python module", "pitfall_models.WeightsNet"], "inspect pickled module")
    r = cli("convert", os.path.join(d, "weights.pth"), "-o", os.path.join(d, "w.onnx"), "--input", "x:2x3x16x16",
            expect=4)
    expect_in(r.stderr, ["state_dict", "--weights"], "convert a state_dict")


def item_opset(d, case):
    (onnx9, _), (onnx13, _) = generic(d, case)
    for v in case["versions"]:  # up from 9
        out = os.path.join(d, f"model_v{v}.onnx")
        if cli("convert-version", onnx9, "-o", out, "--opset", v).returncode == 0:
            cli("check", out)
            g = onnx_graph(out)
            got = [o.version for o in g.opset_import if o.domain in ("", "ai.onnx")]
            if got != [v]:
                fail(f"convert-version --opset {v}: model imports {got}")
            run_both(d, out, case, f"v{v}")
    # Down, where onnx 1.12 has no adapters (Relu 13 -> 12): torch2onnx's own, proven by running.
    for v in (11, 9):
        down = os.path.join(d, f"down{v}.onnx")
        r = cli("convert-version", onnx13, "-o", down, "--opset", v)
        expect_in(r.stdout, ["outputs match"], f"convert-version down to {v}")
        cli("check", down)
        run_both(d, down, case, f"down{v}")
    # Down past an op newer than the target: written out with older ops.
    ln = os.path.join(d, "ln17.onnx")
    cli("convert", os.path.join(d, "layernorm.pt"), "-o", ln, "--opset", 17, "--input", "x:2x16")
    ln13 = os.path.join(d, "ln13.onnx")
    r = cli("convert-version", ln, "-o", ln13, "--opset", 13)
    expect_in(r.stdout, ["opset 17 -> 13", "outputs match"], "convert-version down past an op")
    cli("check", ln13)
    if any(n.op_type == "LayerNormalization" for n in onnx_graph(ln13).graph.node):
        fail("convert-version to 13 kept LayerNormalization")
    rd = os.path.join(d, "ln_run")
    os.makedirs(rd, exist_ok=True)
    np.save(os.path.join(rd, "input_0.npy"), np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32))
    outs = []
    for m in (ln, ln13):
        od = os.path.join(d, "ln_out_" + os.path.basename(m))
        r = subprocess.run(["node", ORT_RUN, m, rd, od], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"ONNX Runtime failed on {m}: {r.stderr}")
            return
        outs.append(np.load(os.path.join(od, "output_0.npy")))
    if not np.allclose(outs[0], outs[1], rtol=1e-4, atol=1e-5):
        fail(f"LayerNormalization at 13 differs from 17 in ONNX Runtime: {np.abs(outs[0] - outs[1]).max()}")


def item_custom_op(d, case):
    plugin = A.plugin
    # The torch library is not loaded here: --custom-op alone makes the model load; the plugin
    # gives exact shapes while converting.
    results = generic(d, case, extra=["--plugin", plugin], plugin=plugin)
    for onnx, _ in results:
        if onnx:
            g = onnx_graph(onnx)
            nodes = [n for n in g.graph.node if n.domain == "mylib" and n.op_type == "Cbr"]
            if len(nodes) != 1:
                fail("expected one mylib::Cbr node")
            elif [a.name for a in nodes[0].attribute] != ["padding"]:
                fail(f"Cbr attributes {[a.name for a in nodes[0].attribute]}")
            if not any(o.domain == "mylib" and o.version == 1 for o in g.opset_import):
                fail("no opset import for domain mylib")
    # Without the plugin: a warning says the output shape is assumed like x (wrong for this op,
    # whose channels change, so the shape-learning run then fails further on).
    r = cli("convert", os.path.join(d, "model.pt"), "-o", os.path.join(d, "noplugin.onnx"), *case["convert"], cwd=d,
            expect=None)
    expect_in(r.stderr, ["no kernel for mylib::cbr", "--plugin"], "custom op without plugin")
    # Without --custom-op the model does not even load.
    r = cli("convert", os.path.join(d, "model.pt"), "-o", os.path.join(d, "x.onnx"), "--input", "x:2x3x12x12",
            expect=4)
    expect_in(r.stderr, ["mylib::cbr", "--custom-op"], "custom op undeclared")
    # The runtime needs the plugin for mylib::Cbr.
    if results and results[0][0]:
        r = cli("run", results[0][0], "--quiet", "--out-dir", os.path.join(d, "np"), "--input",
                f"x={os.path.join(d, 'run_0', 'input_0.npy')}", expect=None)
        if r.returncode == 0:
            fail("run without --plugin should fail on mylib::Cbr")
        expect_in(r.stderr, ["Cbr"], "run without plugin")
        # verify runs PyTorch with the op's torch library and our runtime with the plugin.
        cli("verify", os.path.join(d, "model.pt"), results[0][0], "--input", "x:2x3x12x12", "--samples", 2,
            "--plugin", plugin, "--torch-library", A.torch_lib, expect=0)


def item_spectral(d, case):
    for onnx, _ in generic(d, case):
        if not onnx:
            continue
        g = onnx_graph(onnx).graph
        names = [i.name for i in g.initializer]
        if any(k in n for n in names for k in ("weight_orig", "weight_u", "weight_v")):
            fail(f"spectral-norm parameters left in the ONNX: {names}")
        big = [i for i in g.initializer if len(i.dims) >= 2]
        if len(big) != case["layers"]:
            fail(f"expected {case['layers']} weight matrices, got {[(i.name, list(i.dims)) for i in big]}")
        ops = sorted({n.op_type for n in g.node})
        if any(o in ops for o in ("ReduceL2", "Div", "MatMul", "ReduceSum")) and "Gemm" not in ops:
            fail(f"power-iteration nodes left: {ops}")
    for f in ("model.pt", "state_dict.pth"):
        r = cli("inspect", os.path.join(d, f))
        expect_in(r.stdout, ["spectral-norm parametrizations", "conv", "fc"], f"inspect {f}")


def item_train_mode(d, case):
    for onnx, r in generic(d, case):
        if r.returncode == 0:
            expect_in(r.stderr, case["warn"], "train-mode warning")
            ops = {n.op_type for n in onnx_graph(onnx).graph.node}
            if "Dropout" in ops:
                fail("Dropout left in the ONNX")
    if os.path.basename(d) != "traced_then_eval":  # its modules say eval(); only the graph does not
        r = cli("inspect", os.path.join(d, "model.pt"))
        expect_in(r.stdout, ["train() mode"], "inspect train-mode model")


ITEMS = {
    "weights": item_weights, "opset": item_opset, "custom_op": item_custom_op, "spectral": item_spectral,
    "train_mode": item_train_mode,
}


def main():
    global A
    p = argparse.ArgumentParser()
    p.add_argument("item")
    p.add_argument("--cli", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--torch-lib")
    p.add_argument("--plugin")
    A = p.parse_args()
    for k in ("cli", "work", "torch_lib", "plugin"):  # commands run in the fixture folders
        if getattr(A, k):
            setattr(A, k, os.path.abspath(getattr(A, k)))
    d = os.path.join(A.work, A.item)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    build = pitfall_models.BUILDERS[A.item]
    if A.item == "custom_op":
        build(d, A.torch_lib)
    else:
        build(d)
    cases = [d] if os.path.exists(os.path.join(d, "case.json")) else sorted(
        os.path.join(d, s) for s in os.listdir(d) if os.path.exists(os.path.join(d, s, "case.json")))
    for cd in cases:
        with open(os.path.join(cd, "case.json")) as f:
            case = json.load(f)
        ITEMS.get(A.item, generic)(cd, case)
    print(f"{A.item}: {len(cases)} case(s), {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
