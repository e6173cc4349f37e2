"""Builds TorchScript fixtures for the converter tests.

usage: fixtures.py OUT_DIR [NAME_PREFIX ...]

For each fixture NAME writes OUT_DIR/NAME/{model.pt, spec.txt, input_K.npy, output_K.npy}.
spec.txt lines: `input NAME DIMS DTYPE`, `dynamic NAME:AXIS=LABEL`, `tol RTOL ATOL`, `expect_error EXIT TEXT`,
`data` (shape learning uses the saved inputs, as --data does), alt/ holds inputs at other dynamic sizes
(from alt_inputs=[...]) with PyTorch's outputs,
`min_opset N OP FILE:LINE` (from min_opset=(N, OP, TEXT[, WHERE]): the fixture needs opset N because of torch op
OP on the line holding TEXT).
Outputs are flattened depth-first (dicts by value in insertion order), as the converter flattens them.
"""
import inspect
import os
import sys
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_basic  # noqa: E402
import zoo_vision  # noqa: E402
import zoo_ops  # noqa: E402
import zoo_control  # noqa: E402
import zoo_rnn  # noqa: E402
import zoo_dynamic  # noqa: E402
import zoo_tail  # noqa: E402
import zoo_dict  # noqa: E402
import zoo_breadth  # noqa: E402
import zoo_complex  # noqa: E402

DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.int32: "i32", torch.bool: "bool",
          torch.uint8: "u8", torch.float16: "f16", torch.int8: "i8", torch.int16: "i16"}


def flatten(x, out):
    if isinstance(x, dict):  # by value, in insertion order
        for v in x.values():
            flatten(v, out)
    elif isinstance(x, (tuple, list)):
        for e in x:
            flatten(e, out)
    elif isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (int, float, bool)):
        out.append(torch.tensor(x))
    else:
        raise TypeError(type(x))
    return out


def is_number(x):
    return isinstance(x, (bool, int, float))


def number_input(x):
    """A forward() argument that is a number: its 0-d tensor input (int64, float64 or bool, as TorchScript's
    int, float and bool)."""
    return torch.tensor(x, dtype=torch.bool if isinstance(x, bool) else torch.int64 if isinstance(x, int)
                        else torch.float64)


def arg_names(module, n):
    fn = module.forward
    names = [p for p in inspect.signature(fn).parameters]
    return names[:n]


def min_opset_line(module, opset, op, text, where=None):
    """`min_opset N OP FILE:LINE`: below opset N conversion fails on torch op OP at the line of `where`
    (default: the model's class) that contains `text`."""
    where = where or type(module)
    src, start = inspect.getsourcelines(where)
    hits = [start + i for i, line in enumerate(src) if text in line]
    if len(hits) != 1:
        raise ValueError(f"min_opset: {text!r} is on {len(hits)} lines of {where.__name__}, expected one")
    return f"min_opset {opset} {op} {os.path.basename(inspect.getsourcefile(where))}:{hits[0]}"


def rewrite_code(pt, subs):
    """Edits the saved TorchScript code (each (old, new) must match exactly once), as a newer PyTorch
    would have written it; the model's outputs stay those of the original module. Drops the debug
    tables, which index the old text."""
    tmp = pt + ".tmp"
    hits = [0] * len(subs)
    with zipfile.ZipFile(pt) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as zout:
        for item in zin.infolist():
            if item.filename.endswith(".debug_pkl"):
                continue
            data = zin.read(item.filename)
            if "/code/" in item.filename and item.filename.endswith(".py"):
                text = data.decode()
                for i, (old, new) in enumerate(subs):
                    hits[i] += text.count(old)
                    text = text.replace(old, new)
                data = text.encode()
            zout.writestr(item, data)
    bad = [old for (old, _), h in zip(subs, hits) if h != 1]
    if bad:
        os.remove(tmp)
        raise ValueError(f"rewrite_code: not found exactly once in {pt}: {bad}")
    os.replace(tmp, pt)


def write(out_dir, name, f):
    module, inputs = f["model"], f["inputs"]
    module.eval()
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):  # a fixture that lost an output must not keep its old file
        if old.endswith(".npy"):
            os.remove(os.path.join(d, old))
    torch.manual_seed(0)
    with torch.no_grad():
        if f.get("mode", "script") == "trace":
            ts = torch.jit.trace(module, tuple(inputs), check_trace=False)
        else:
            ts = torch.jit.script(module)
        if f.get("train_mode"):
            ts.train()
        ts.save(os.path.join(d, "model.pt"))
        if "rewrite_code" in f:
            rewrite_code(os.path.join(d, "model.pt"), f["rewrite_code"])
        outputs = [] if "expect_error" in f else flatten(module(*inputs), [])
    names = arg_names(module, len(inputs))
    lines = []
    flat_in = []
    for nm, x in zip(names, inputs):
        parts = ([(nm, x)] if isinstance(x, torch.Tensor) else [(nm, number_input(x))] if is_number(x)
                 else [(f"{nm}.{i}", e) for i, e in enumerate(x)])
        for pn, t in parts:
            lines.append(f"input {pn} {'x'.join(str(s) for s in t.shape) or 'scalar'} {DTYPES[t.dtype]}")
            flat_in.append(t)
    for dyn in f.get("dynamic", []):
        lines.append(f"dynamic {dyn}")
    if "tol" in f:
        lines.append(f"tol {f['tol'][0]} {f['tol'][1]}")
    if "expect_error" in f:
        lines.append(f"expect_error {f['expect_error']}")
    if "min_opset" in f:
        lines.append(min_opset_line(module, *f["min_opset"]))
    if f.get("data"):
        lines.append("data")
    for k, t in enumerate(flat_in):
        np.save(os.path.join(d, f"input_{k}.npy"), t.numpy())
    for k, t in enumerate(outputs):
        np.save(os.path.join(d, f"output_{k}.npy"), np.array(t.detach().numpy(), order="C"))
    # Inputs at other sizes along the dynamic axes: the ONNX model must give PyTorch's outputs there too.
    alt = os.path.join(d, "alt")
    if os.path.isdir(alt):
        for old in os.listdir(alt):
            os.remove(os.path.join(alt, old))
    if "alt_inputs" in f:
        os.makedirs(alt, exist_ok=True)
        with torch.no_grad():
            alt_out = flatten(module(*f["alt_inputs"]), [])
        alt_in = [number_input(x) if is_number(x) else x for x in f["alt_inputs"]]
        for k, t in enumerate(flatten(alt_in, [])):
            np.save(os.path.join(alt, f"input_{k}.npy"), t.numpy())
        for k, t in enumerate(alt_out):
            np.save(os.path.join(alt, f"output_{k}.npy"), np.array(t.detach().numpy(), order="C"))
    with open(os.path.join(d, "spec.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def main():
    out_dir = sys.argv[1]
    prefixes = sys.argv[2:]
    fixtures = {}
    for zoo in (zoo_basic, zoo_vision, zoo_ops, zoo_control, zoo_rnn, zoo_dynamic, zoo_tail, zoo_dict, zoo_breadth, zoo_complex):
        fixtures.update(zoo.fixtures())
    for name, f in sorted(fixtures.items()):
        if prefixes and not any(name.startswith(p) for p in prefixes):
            continue
        torch.manual_seed(0)
        write(out_dir, name, f() if callable(f) else f)
    with open(os.path.join(out_dir, "index.txt"), "w") as fh:
        fh.write("\n".join(sorted(n for n in os.listdir(out_dir) if os.path.isdir(os.path.join(out_dir, n)))) + "\n")


if __name__ == "__main__":
    main()
