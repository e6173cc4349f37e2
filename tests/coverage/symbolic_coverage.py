#!/usr/bin/python3
"""Every aten op that torch.onnx 1.13 has a symbolic for (at some opset <= 17) must have a converter
here, or a line in symbolic_gaps.txt saying why not. Run by ctest (coverage.symbolics):

  symbolic_coverage.py --list-ops build/tests/t2o_list_ops [--update]

--update rewrites symbolic_gaps.txt: entries for ops that gained a converter are dropped, reasons of
the others are kept, and newly missing ops get "no converter yet" (edit it to say more)."""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GAPS = os.path.join(HERE, "symbolic_gaps.txt")


def torch_onnx_aten_symbolics(max_opset=17):
    import torch.onnx  # noqa: F401  (imports every symbolic_opset module, which registers them)
    from torch.onnx._internal import registration

    names = set()
    for name, group in registration.registry._registry.items():
        if not name.startswith("aten::") or group.get_min_supported() > max_opset:
            continue
        ns, base = name.split("::", 1)
        # torch.onnx 1.13 registers dunder ops with one trailing underscore dropped (aten::__and_)
        if base.startswith("__") and base.endswith("_") and not base.endswith("__"):
            base += "_"
        names.add(f"{ns}::{base}")
    return sorted(names)


def our_ops(list_ops):
    out = subprocess.run([list_ops], capture_output=True, text=True, check=True).stdout
    return {line.split("\t")[0] for line in out.splitlines() if line.strip()}


def read_gaps(path):
    gaps = {}
    if os.path.exists(path):
        for line in open(path):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            op, _, reason = line.partition("#")
            gaps[op.strip()] = reason.strip()
    return gaps


def write_gaps(path, missing, gaps):
    lines = ["# aten ops that torch.onnx 1.13 has a symbolic for but torch2onnx has no converter, one per line",
             "# with the reason. tests/coverage/symbolic_coverage.py (ctest coverage.symbolics) keeps it complete:",
             "# an op that gains a converter must leave this list, and a newly missing op must join it."]
    for op in missing:
        lines.append(f"{op}  # {gaps.get(op) or 'no converter yet'}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list-ops", required=True, help="the t2o_list_ops executable")
    ap.add_argument("--gaps", default=GAPS)
    ap.add_argument("--update", action="store_true")
    args = ap.parse_args()
    sym = torch_onnx_aten_symbolics()
    ours = our_ops(args.list_ops)
    missing = [op for op in sym if op not in ours]
    gaps = read_gaps(args.gaps)
    if args.update:
        write_gaps(args.gaps, missing, gaps)
        gaps = read_gaps(args.gaps)
    unexplained = [op for op in missing if not gaps.get(op)]
    stale = sorted(op for op in gaps if op in ours)
    print(f"torch.onnx 1.13 aten symbolics: {len(sym)}; with a torch2onnx converter: {len(sym) - len(missing)}; "
          f"missing: {len(missing)} (each with a reason in {os.path.basename(args.gaps)})")
    print(f"torch2onnx converters for aten/prim ops: {len(ours)} "
          f"({len(ours - set(sym))} of them beyond torch.onnx's aten symbolics)")
    for op in unexplained:
        print(f"FAIL {op}: no converter and no reason in {args.gaps}")
    for op in stale:
        print(f"FAIL {op}: has a converter now; remove it from {args.gaps} (or run with --update)")
    ok = not unexplained and not stale
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
