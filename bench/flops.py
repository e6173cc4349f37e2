"""Floating-point work of one run of an ONNX model on a given input, in GFLOP (a multiply-add is 2).

    /usr/bin/python3 bench/flops.py MODEL.onnx INPUT.npy

Counts MatMul, Gemm, Conv, ConvTranspose, LSTM and GRU (the ops that carry nearly all of a
model's arithmetic) from shapes that ONNX shape inference gives once the first input has the
input file's dims. Prints the total.
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference


def dims_of(vi):
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    out = []
    for d in t.shape.dim:
        if not d.HasField("dim_value"):
            return None
        out.append(d.dim_value)
    return out


def main(model_path, input_path):
    model = onnx.load(model_path)
    x = np.load(input_path)
    first = model.graph.input[0].type.tensor_type.shape
    for d, n in zip(first.dim, x.shape):
        d.ClearField("dim_param")
        d.dim_value = n
    # Data propagation follows Shape -> Gather -> Concat -> Reshape chains (a decoder's heads).
    model = shape_inference.infer_shapes(model, data_prop=True)
    shapes = {}
    for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        s = dims_of(vi)
        if s is not None:
            shapes[vi.name] = s
    for init in model.graph.initializer:
        shapes[init.name] = list(init.dims)

    def attr(node, name, default):
        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    total = 0.0
    for node in model.graph.node:
        ins = [shapes.get(i) for i in node.input]
        out = shapes.get(node.output[0]) if node.output else None
        op = node.op_type
        if op == "MatMul" and ins[0] and out:
            total += 2.0 * np.prod(out) * ins[0][-1]
        elif op == "Gemm" and ins[0] and out:
            k = ins[0][0] if attr(node, "transA", 0) else ins[0][1]
            total += 2.0 * np.prod(out) * k
        elif op == "Conv" and ins[1] and out:
            total += 2.0 * np.prod(out) * np.prod(ins[1][1:])
        elif op == "ConvTranspose" and ins[0] and ins[1]:
            total += 2.0 * np.prod(ins[0]) * np.prod(ins[1][1:])
        elif op in ("LSTM", "GRU") and ins[0] and ins[1]:
            steps, batch, size = ins[0]
            dirs, gates_hidden, _ = ins[1]
            hidden = gates_hidden // (4 if op == "LSTM" else 3)
            total += 2.0 * steps * batch * dirs * gates_hidden * (size + hidden)
    print(f"{total / 1e9:.4f}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
