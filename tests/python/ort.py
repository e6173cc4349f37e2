"""Runs an ONNX model in ONNX Runtime through its Node package, as tests/interop/ort_run.js does."""
import os
import subprocess
import tempfile

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
ORT_RUN = os.path.join(_HERE, "..", "interop", "ort_run.js")


def run(model_path, inputs):
    """Outputs (in graph order) of the model on `inputs` (arrays in graph-input order)."""
    env = dict(os.environ)
    env.setdefault("NODE_PATH", os.path.expanduser("~/.cache/torch2onnx/node_modules"))
    with tempfile.TemporaryDirectory() as d:
        ind, outd = os.path.join(d, "in"), os.path.join(d, "out")
        os.makedirs(ind)
        os.makedirs(outd)
        for k, a in enumerate(inputs):
            np.save(os.path.join(ind, f"input_{k}.npy"), np.ascontiguousarray(a).reshape(np.shape(a)))  # 0-d stays 0-d
        r = subprocess.run(["node", ORT_RUN, os.fspath(model_path), ind, outd], env=env, capture_output=True, text=True)
        assert r.returncode == 0, f"ONNX Runtime failed:\n{r.stderr}"
        outs = []
        while os.path.exists(os.path.join(outd, f"output_{len(outs)}.npy")):
            outs.append(np.load(os.path.join(outd, f"output_{len(outs)}.npy")))
        return outs
