"""Measures which element types ONNX Runtime's CPU provider implements for each op the converter
emits, at each opset 9-17, by creating a one-node session per (op, type, opset). An entry "OP.K" is
about input K alone having the type (Pow's exponent).

usage: ort_types_probe.py OUT.inc            writes the table src/onnx/ort_cpu_types.inc includes
       ort_types_probe.py --check TABLE.inc  exits 1 when the table differs from what ORT says

The converter's type legalization (src/onnx/legalize.cpp) computes in a wider type wherever this
table says ORT has no kernel, so converted models load in ORT. Needs onnxruntime-node (NODE_PATH).
"""
import json
import os
import subprocess
import sys
import tempfile

import onnx
import onnx.helper as h
from onnx import TensorProto as T

TYPES = {"u8": T.UINT8, "i8": T.INT8, "u16": T.UINT16, "i16": T.INT16, "i32": T.INT32, "i64": T.INT64,
         "u32": T.UINT32, "u64": T.UINT64, "f16": T.FLOAT16, "bf16": T.BFLOAT16, "f32": T.FLOAT,
         "f64": T.DOUBLE, "bool": T.BOOL}
OPSETS = range(9, 18)
UNARY = ["Abs", "Neg", "Relu", "Sign", "Floor", "Ceil", "Round", "Sqrt", "Exp", "Log", "Reciprocal", "Sigmoid",
         "Tanh", "Erf", "Atan", "Sin", "Cos", "Not", "IsNaN", "IsInf", "Identity", "Softplus", "Softsign", "Elu",
         "Selu", "Celu", "LeakyRelu", "HardSigmoid", "HardSwish", "Shrink", "NonZero", "Shape", "Size", "Flatten",
         "Transpose", "Softmax", "LogSoftmax", "Trilu"]
BINARY = ["Add", "Sub", "Mul", "Div", "Mod", "Pow", "Max", "Min", "Sum", "Mean", "Equal", "Less", "Greater",
          "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "BitShift", "MatMul", "PRelu"]
REDUCE = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceMean", "ReduceL1", "ReduceL2",
          "ReduceSumSquare", "ReduceLogSumExp", "ArgMax", "ArgMin"]
OTHER = ["Where", "Clip", "CumSum", "Reshape", "Concat", "Slice", "Gather", "GatherElements", "GatherND", "Expand",
         "Tile", "Squeeze", "Unsqueeze", "Pad", "TopK", "Range", "Split", "ScatterElements", "ScatterND", "Einsum",
         "Resize", "OneHot", "ConstantOfShape", "Cast", "Pow.1"]
# Ops on NCHW-style inputs and the rest the converter emits with a type parameter.
SPATIAL = ["Gemm", "Conv", "ConvTranspose", "AveragePool", "MaxPool", "GlobalAveragePool", "GlobalMaxPool",
           "LpPool", "DepthToSpace", "SpaceToDepth", "InstanceNormalization", "LRN", "Unique", "GridSample",
           "Det", "Compress", "ReverseSequence", "Hardmax", "LayerNormalization", "Upsample"]


def i64(name, vals, dims=None):
    return h.make_tensor(name, T.INT64, [len(vals)] if dims is None else dims, vals)


def node_for(op, t, opset):
    """(nodes, inputs, initializers) of a one-op graph computing on element type t, or None."""
    x = h.make_tensor_value_info("x", t, [2, 3])
    y = h.make_tensor_value_info("y", t, [2, 3])
    if op in UNARY:
        attrs = {}
        if op in ("Softmax", "LogSoftmax") and opset < 13:
            attrs["axis"] = 1
        return [h.make_node(op, ["x"], ["o"], **attrs)], [x], []
    if op in BINARY:
        if op == "MatMul":
            y = h.make_tensor_value_info("y", t, [3, 2])
        attrs = {"direction": "LEFT"} if op == "BitShift" else {}
        return [h.make_node(op, ["x", "y"], ["o"], **attrs)], [x, y], []
    if op in REDUCE:
        if op.startswith("Arg"):
            return [h.make_node(op, ["x"], ["o"], axis=1)], [x], []
        if op == "ReduceSum" and opset >= 13:
            return [h.make_node(op, ["x", "a"], ["o"])], [x], [i64("a", [1])]
        return [h.make_node(op, ["x"], ["o"], axes=[1])], [x], []
    c = h.make_tensor_value_info("c", T.BOOL, [2, 3])
    if op == "Where":
        return [h.make_node(op, ["c", "x", "y"], ["o"])], [c, x, y], []
    if op == "Clip":
        if opset < 11:
            return [h.make_node(op, ["x"], ["o"], min=0.0, max=1.0)], [x], []
        return [h.make_node(op, ["x", "lo", "hi"], ["o"])], [x, h.make_tensor_value_info("lo", t, []),
                                                           h.make_tensor_value_info("hi", t, [])], []
    if op == "CumSum":
        return [h.make_node(op, ["x", "a"], ["o"])], [x], [i64("a", [1], [])]
    if op == "Reshape":
        return [h.make_node(op, ["x", "s"], ["o"])], [x], [i64("s", [6])]
    if op == "Concat":
        return [h.make_node(op, ["x", "y"], ["o"], axis=0)], [x, y], []
    if op == "Slice":
        if opset < 10:
            return [h.make_node(op, ["x"], ["o"], starts=[0], ends=[1], axes=[0])], [x], []
        return [h.make_node(op, ["x", "a", "b"], ["o"])], [x], [i64("a", [0]), i64("b", [1])]
    if op == "Gather":
        return [h.make_node(op, ["x", "i"], ["o"])], [x], [i64("i", [0, 1])]
    if op == "GatherElements":
        return [h.make_node(op, ["x", "i"], ["o"])], [x], [i64("i", [0, 1, 0, 1, 0, 1], [2, 3])]
    if op == "GatherND":
        return [h.make_node(op, ["x", "i"], ["o"])], [x], [i64("i", [0, 1], [2, 1])]
    if op == "ScatterElements":
        return [h.make_node(op, ["x", "i", "y"], ["o"])], [x, y], [i64("i", [0, 1, 0, 1, 0, 1], [2, 3])]
    if op == "ScatterND":
        u = h.make_tensor_value_info("u", t, [1, 3])
        return [h.make_node(op, ["x", "i", "u"], ["o"])], [x, u], [i64("i", [1], [1, 1])]
    if op == "Expand":
        return [h.make_node(op, ["x", "s"], ["o"])], [x], [i64("s", [2, 2, 3])]
    if op == "Tile":
        return [h.make_node(op, ["x", "s"], ["o"])], [x], [i64("s", [2, 1])]
    if op in ("Squeeze", "Unsqueeze"):
        xin = h.make_tensor_value_info("x", t, [1, 3]) if op == "Squeeze" else x
        if opset < 13:
            return [h.make_node(op, ["x"], ["o"], axes=[0])], [xin], []
        return [h.make_node(op, ["x", "a"], ["o"])], [xin], [i64("a", [0])]
    if op == "Pad":
        if opset < 11:
            return [h.make_node(op, ["x"], ["o"], pads=[0, 1, 0, 1])], [x], []
        return [h.make_node(op, ["x", "p"], ["o"])], [x], [i64("p", [0, 1, 0, 1])]
    if op == "TopK":
        if opset < 10:
            return [h.make_node(op, ["x"], ["o", "oi"], k=2)], [x], []
        return [h.make_node(op, ["x", "k"], ["o", "oi"])], [x], [i64("k", [2])]
    if op == "Range":
        if opset < 11:
            return None
        s = [h.make_tensor_value_info(n, t, []) for n in ("a", "b", "d")]
        return [h.make_node(op, ["a", "b", "d"], ["o"])], s, []
    if op == "Split":
        return [h.make_node(op, ["x"], ["o", "o2"], axis=0)], [x], []
    if op == "Einsum":
        if opset < 12:
            return None
        y = h.make_tensor_value_info("y", t, [3, 2])
        return [h.make_node(op, ["x", "y"], ["o"], equation="ij,jk->ik")], [x, y], []
    if op == "Resize":
        xin = h.make_tensor_value_info("x", t, [1, 1, 2, 3])
        if opset < 10:
            return [h.make_node("Upsample", ["x", "sc"], ["o"], mode="nearest")], [xin], [
                h.make_tensor("sc", T.FLOAT, [4], [1, 1, 2, 2])]
        if opset < 11:
            return [h.make_node(op, ["x", "sc"], ["o"], mode="nearest")], [xin], [
                h.make_tensor("sc", T.FLOAT, [4], [1, 1, 2, 2])]
        return [h.make_node(op, ["x", "r", "sc"], ["o"], mode="nearest")], [xin], [
            h.make_tensor("r", T.FLOAT, [0], []), h.make_tensor("sc", T.FLOAT, [4], [1, 1, 2, 2])]
    if op == "OneHot":  # the type is the indices'
        return [h.make_node(op, ["x", "d", "v"], ["o"])], [x], [i64("d", [4], []), h.make_tensor("v", T.FLOAT, [2], [0, 1])]
    if op == "ConstantOfShape":
        return [h.make_node(op, ["s"], ["o"], value=h.make_tensor("v", t, [1], [1]))], [], [i64("s", [2, 3])]
    if op == "Pow.1":  # "OP.K": input K alone of type t (Pow's exponent, under a float base)
        xf = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
        return [h.make_node("Pow", ["x", "y"], ["o"])], [xf, y], []
    if op == "Cast":  # from t to float
        return [h.make_node(op, ["x"], ["o"], to=T.FLOAT)], [x], []
    return spatial_node_for(op, t, opset)


def spatial_node_for(op, t, opset):
    x4 = h.make_tensor_value_info("x", t, [1, 4, 4, 4])
    if op == "Gemm":
        a = h.make_tensor_value_info("x", t, [2, 3])
        b = h.make_tensor_value_info("y", t, [3, 2])
        cc = h.make_tensor_value_info("z", t, [2])
        return [h.make_node(op, ["x", "y", "z"], ["o"])], [a, b, cc], []
    if op in ("Conv", "ConvTranspose"):
        w = h.make_tensor_value_info("w", t, [4, 4, 3, 3])
        return [h.make_node(op, ["x", "w"], ["o"])], [x4, w], []
    if op in ("AveragePool", "MaxPool", "LpPool"):
        return [h.make_node(op, ["x"], ["o"], kernel_shape=[2, 2])], [x4], []
    if op in ("GlobalAveragePool", "GlobalMaxPool"):
        return [h.make_node(op, ["x"], ["o"])], [x4], []
    if op in ("DepthToSpace", "SpaceToDepth"):
        return [h.make_node(op, ["x"], ["o"], blocksize=2)], [x4], []
    if op == "InstanceNormalization":
        s = h.make_tensor_value_info("s", t, [4])
        b = h.make_tensor_value_info("b", t, [4])
        return [h.make_node(op, ["x", "s", "b"], ["o"])], [x4, s, b], []
    if op == "LayerNormalization":
        if opset < 17:
            return None
        s = h.make_tensor_value_info("s", t, [4])
        b = h.make_tensor_value_info("b", t, [4])
        return [h.make_node(op, ["x", "s", "b"], ["o"])], [x4, s, b], []
    if op == "LRN":
        return [h.make_node(op, ["x"], ["o"], size=3)], [x4], []
    if op == "Unique":
        if opset < 11:
            return None
        return [h.make_node(op, ["x"], ["o", "i", "inv", "c"], sorted=1)], [x4], []
    if op == "GridSample":
        if opset < 16:
            return None
        g = h.make_tensor_value_info("g", t, [1, 2, 2, 2])
        return [h.make_node(op, ["x", "g"], ["o"])], [x4, g], []
    if op == "Det":
        if opset < 11:
            return None
        return [h.make_node(op, ["x"], ["o"])], [x4], []
    if op == "Compress":
        c = h.make_tensor("c", T.BOOL, [4], [1, 0, 1, 0])
        return [h.make_node(op, ["x", "c"], ["o"], axis=1)], [x4], [c]
    if op == "ReverseSequence":
        if opset < 10:
            return None
        l = h.make_tensor_value_info("l", T.INT64, [4])
        return [h.make_node(op, ["x", "l"], ["o"], batch_axis=1, time_axis=0)], [x4, l], []
    if op == "Hardmax":
        return [h.make_node(op, ["x"], ["o"], axis=1 if opset < 13 else -1)], [x4], []
    if op == "Upsample":
        if opset > 9:
            return None
        return [h.make_node(op, ["x", "sc"], ["o"], mode="nearest")], [x4], [
            h.make_tensor("sc", T.FLOAT, [4], [1, 1, 2, 2])]
    raise ValueError(op)


def build(folder):
    cases = []
    for op in UNARY + BINARY + REDUCE + OTHER + SPATIAL:
        for tn, t in TYPES.items():
            for opset in OPSETS:
                made = node_for(op, t, opset)
                if made is None:
                    continue
                nodes, ins, inits = made
                outs = [h.make_value_info(o, onnx.TypeProto()) for o in nodes[0].output]
                m = h.make_model(h.make_graph(nodes, "g", ins, outs, inits), opset_imports=[h.make_opsetid("", opset)])
                m.ir_version = 7 if opset < 15 else 8
                # Only cases the ONNX schema allows: the table records what ORT adds as a restriction.
                try:
                    m = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
                    onnx.checker.check_model(m)
                except Exception:
                    continue
                f = os.path.join(folder, f"{op}_{tn}_{opset}.onnx")
                onnx.save(m, f)
                cases.append([op, tn, opset, f])
    return cases


RUNNER = r"""
const ort = require('onnxruntime-node');
const cases = JSON.parse(require('fs').readFileSync(process.argv[2]));
(async () => {
  const out = [];
  for (const [op, t, opset, f] of cases) {
    try { await ort.InferenceSession.create(f, {graphOptimizationLevel: 'disabled'}); out.push([op, t, opset, true]); }
    catch (e) { out.push([op, t, opset, false]); }
  }
  console.log(JSON.stringify(out));
})();
"""


def measure():
    with tempfile.TemporaryDirectory() as d:
        cases = build(d)
        with open(os.path.join(d, "cases.json"), "w") as f:
            json.dump(cases, f)
        with open(os.path.join(d, "run.js"), "w") as f:
            f.write(RUNNER)
        r = subprocess.run(["node", os.path.join(d, "run.js"), os.path.join(d, "cases.json")], capture_output=True,
                           text=True, check=True)
        return json.loads(r.stdout)


def table_text(results):
    """One line per (op, opset, types the schema allows but ORT lacks)."""
    missing = {}
    for op, t, opset, ok in results:
        if not ok:
            missing.setdefault((op, opset), []).append(t)
    lines = ["// Generated by tests/interop/ort_types_probe.py from onnxruntime-node 1.30 (CPU provider): element",
             "// types the ONNX schema allows but ORT has no kernel for, per op and opset. Do not edit by hand.",
             "// {op, opset, \"types\"}"]
    for (op, opset) in sorted(missing):
        lines.append(f'{{"{op}", {opset}, "{" ".join(missing[(op, opset)])}"}},')
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        want = table_text(measure())
        with open(sys.argv[2]) as f:
            have = f.read()
        if have != want:
            import difflib
            sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), want.splitlines(True), "checked in", "measured"))
            print("ort_cpu_types.inc differs from what ONNX Runtime implements; regenerate it with this script")
            return 1
        print(f"ort_cpu_types.inc matches ONNX Runtime ({len(want.splitlines()) - 3} op/opset entries)")
        return 0
    with open(sys.argv[1], "w") as f:
        f.write(table_text(measure()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
