"""convert-version on every converter fixture: converted at opset 17 and moved down to each opset the
fixture converts at, and converted at its lowest opset and moved up to 17; each result must pass
`torch2onnx check` and match PyTorch's outputs in ONNX Runtime.

usage: convert_version_e2e.py TORCH2ONNX FIXTURE_DIR [NAME_PREFIX ...] [--opsets 9,11,13]

Fixtures come from tests/models/fixtures.py (spec.txt: inputs, dynamic axes, tolerance, min_opset).
A move that opsets 9-17 cannot express is refused with exit 3 and a reason; REFUSALS lists the
ones expected here with the reason's text. Each must still be refused for that reason (or now
convert and match); any other refusal is a failure.
Prints one line per fixture and direction; exits 1 listing the failures.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ORT_RUN = os.path.join(HERE, "..", "interop", "ort_run.js")

# (fixture, source opset, target opset) -> text of the reason. Dynamic dims make these values
# computed at run time, and the target has no op that computes them.
_RANGE9 = "Range before opset 11 needs constant bounds"
_SCATTER_REDUCE = "reduction needs opset 16"
REFUSALS = {
    ("tail_cumulative", 17, 9): _RANGE9,
    ("tail_distances", 17, 9): _RANGE9,
    ("tail_linalg", 17, 9): _RANGE9,
    ("tail_ranges_computed", 17, 9): _RANGE9,
    ("tail_windows", 17, 9): _RANGE9,
    ("tail_selection", 17, 9): _RANGE9,
    ("tail_loss_class", 17, 9): "GatherElements before opset 11 needs static shapes",
    ("tail_loss_class", 17, 11): "NegativeLogLikelihoodLoss_0' (zoo_tail.py:57 aten::nll_loss_nd) from opset 17 to 11: the op exists only from opset 12",
    ("tail_layout", 17, 9): "a stepped slice of a dim whose size is not known",
    ("tail_math_shifts", 17, 9): "Mod 'Mod_0' (zoo_tail.py:237 aten::remainder) from opset 17 to 9: the op exists only from opset 10",
    ("tail_index_update", 17, 9): _SCATTER_REDUCE,
    ("tail_index_update", 17, 11): _SCATTER_REDUCE,
    ("tail_index_update", 17, 13): _SCATTER_REDUCE,
    ("tail_stats", 17, 9): _SCATTER_REDUCE,
    ("tail_stats", 17, 11): _SCATTER_REDUCE,
    ("tail_stats", 17, 13): _SCATTER_REDUCE,
    ("br_fake_quant_script", 17, 11): "per-axis (per-channel) quantization exists only from opset 13",
    ("br_fake_quant_trace", 17, 11): "per-axis (per-channel) quantization exists only from opset 13",
    # torchvision's aligned=True is RoiAlign's half_pixel mode, which opset 16 introduced.
    ("tv_detection_ops", 17, 11): "coordinate_transformation_mode half_pixel",
    ("tv_detection_ops", 17, 13): "coordinate_transformation_mode half_pixel",
}


def read_spec(d):
    spec = {"inputs": [], "dynamic": [], "rtol": 1e-3, "atol": 1e-4, "min_opset": 9, "error": False,
            "data": False}
    for line in open(os.path.join(d, "spec.txt")):
        p = line.split()
        if not p:
            continue
        if p[0] == "input":
            spec["inputs"].append(f"{p[1]}:{p[2]}:{p[3]}")
        elif p[0] == "dynamic":
            spec["dynamic"].append(p[1])
        elif p[0] == "tol":
            spec["rtol"], spec["atol"] = float(p[1]), float(p[2])
        elif p[0] == "min_opset":
            spec["min_opset"] = int(p[1])
        elif p[0] == "expect_error":
            spec["error"] = True
        elif p[0] == "data":  # shape learning on the saved inputs (convert --data)
            spec["data"] = True
    return spec


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def matches_pytorch(onnx, d, spec, out):
    r = run(["node", ORT_RUN, onnx, d, out])
    if r.returncode != 0:
        return f"ONNX Runtime failed: {r.stderr.strip()[-400:]}"
    k = 0
    while os.path.exists(os.path.join(d, f"output_{k}.npy")):
        want = np.load(os.path.join(d, f"output_{k}.npy"))
        got_path = os.path.join(out, f"output_{k}.npy")
        if not os.path.exists(got_path):
            return f"output {k} missing"
        got = np.load(got_path)
        if want.shape != got.shape:
            return f"output {k}: shape {got.shape}, PyTorch {want.shape}"
        if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
            ok = np.array_equal(want, got)
        else:
            ok = np.allclose(got, want, rtol=spec["rtol"], atol=spec["atol"], equal_nan=True)
        if not ok:
            return f"output {k}: max |diff| {np.nanmax(np.abs(got.astype(np.float64) - want)):.3g}"
        k += 1
    return ""


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opsets = None
    for a in sys.argv[1:]:
        if a.startswith("--opsets="):
            opsets = [int(x) for x in a.split("=", 1)[1].split(",")]
    if len(args) < 2:
        print(__doc__)
        return 2
    cli, fixtures, prefixes = os.path.abspath(args[0]), args[1], args[2:]
    names = [n.strip() for n in open(os.path.join(fixtures, "index.txt")) if n.strip()]
    names = [n for n in names if not prefixes or any(n.startswith(p) for p in prefixes)]
    work = tempfile.mkdtemp(prefix="t2o_cv_")
    failures = []
    try:
        for name in names:
            d = os.path.join(fixtures, name)
            spec = read_spec(d)
            if spec["error"]:
                continue
            conv = [cli, "convert", os.path.join(d, "model.pt"), "--quiet"]
            for k, i in enumerate(spec["inputs"]):
                conv += ["--input", i]
                if spec["data"]:
                    conv += ["--data", f"{i.split(':')[0]}={os.path.join(d, f'input_{k}.npy')}"]
            for dyn in spec["dynamic"]:
                conv += ["--dynamic", dyn]
            low = max(9, spec["min_opset"])
            targets = [v for v in (opsets or range(9, 17)) if low <= v < 17]
            cases = [(17, v) for v in targets] + [(low, 17)]
            for src, dst in cases:
                what = f"{name} {src}->{dst}"
                base = os.path.join(work, f"{name}_{src}.onnx")
                if not os.path.exists(base):
                    r = run(conv + ["-o", base, "--opset", str(src)])
                    if r.returncode != 0:
                        failures.append(what)
                        print(f"FAIL {what}: convert --opset {src}: {r.stderr.strip()[-300:]}", flush=True)
                        continue
                out = os.path.join(work, f"{name}_{src}_{dst}.onnx")
                r = run([cli, "convert-version", base, "-o", out, "--opset", str(dst)])
                problem = ""
                refusal = REFUSALS.get((name, src, dst))
                if r.returncode == 3 and refusal and refusal in r.stderr:
                    print(f"ok   {what}  (refused as expected: {refusal})", flush=True)
                    continue
                if r.returncode != 0:
                    problem = f"convert-version exit {r.returncode}: {r.stderr.strip()[-400:]}"
                elif run([cli, "check", out]).returncode != 0:
                    problem = "the result fails torch2onnx check"
                else:
                    problem = matches_pytorch(out, d, spec, os.path.join(work, f"out_{name}_{src}_{dst}"))
                if problem:
                    failures.append(what)
                    print(f"FAIL {what}: {problem}", flush=True)
                else:
                    note = r.stdout.strip().split("(", 1)[-1].rstrip(")")
                    print(f"ok   {what}  ({note})", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failure(s)" + (": " + " ".join(failures) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
