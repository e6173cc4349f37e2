"""The Triton bundle (convert --triton-repo, export(triton_repo=...)): config.pbtxt parsed with
protobuf's text format against Triton's field numbers, every value checked against the ONNX
model, the bundled model run in ONNX Runtime at batch 1 and max_batch_size; the KServe manifest."""
import importlib
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
import torch
import yaml
from google.protobuf import text_format

import ort
import torch2onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ONNX_TO_TRITON = {onnx.TensorProto.FLOAT: "TYPE_FP32", onnx.TensorProto.INT64: "TYPE_INT64",
                  onnx.TensorProto.BOOL: "TYPE_BOOL", onnx.TensorProto.DOUBLE: "TYPE_FP64",
                  onnx.TensorProto.INT32: "TYPE_INT32", onnx.TensorProto.FLOAT16: "TYPE_FP16"}


@pytest.fixture(scope="module")
def model_config(tmp_path_factory):
    out = tmp_path_factory.mktemp("proto")
    subprocess.run(["protoc", f"--proto_path={HERE}", f"--python_out={out}", "triton_model_config.proto"], check=True)
    sys.path.insert(0, str(out))
    return importlib.import_module("triton_model_config_pb2")


def parse(model_config, path):
    cfg = model_config.ModelConfig()
    with open(path) as f:
        text_format.Parse(f.read(), cfg)
    return cfg


def check_against_model(model_config, cfg, onnx_path):
    """Every input and output of the config against the ONNX graph; returns max_batch_size."""
    g = onnx.load(onnx_path).graph
    init = {i.name for i in g.initializer}
    batched = cfg.max_batch_size > 0
    for entries, values in ((cfg.input, [i for i in g.input if i.name not in init]), (cfg.output, g.output)):
        assert [e.name for e in entries] == [v.name for v in values]
        for e, v in zip(entries, values):
            t = v.type.tensor_type
            assert model_config.DataType.Name(e.data_type) == ONNX_TO_TRITON[t.elem_type]
            dims = [-1 if d.dim_param else d.dim_value for d in t.shape.dim]
            if batched:
                assert t.shape.dim[0].dim_param, f"{v.name}: batching needs a symbolic axis 0"
                dims = dims[1:]
            assert list(e.dims) == (dims or [1])
    return cfg.max_batch_size


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, image, scale):
        f = torch.relu(self.conv(image)).mean(dim=(2, 3))
        return self.fc(f) * scale, f.argmax(dim=1)


def test_export_writes_a_batching_bundle(tmp_path, model_config):
    torch.manual_seed(0)
    m = Net().eval()
    x, s = torch.randn(2, 3, 9, 9), torch.rand(2, 1)
    repo = tmp_path / "repo"
    r = torch2onnx.export(m, (x, s), tmp_path / "My Net.onnx", input_names=["image", "scale"],
                          output_names=["logits", "best"],
                          dynamic_axes={"image": {0: "batch", 2: "h", 3: "w"}, "scale": {0: "batch"}},
                          triton_repo=repo, max_batch=4)
    assert r.triton["model_dir"] == str(repo / "my-net") and r.triton["batch_dim"] == "batch"
    cfg = parse(model_config, repo / "my-net" / "config.pbtxt")
    assert cfg.name == "my-net" and cfg.platform == "onnxruntime_onnx" and cfg.HasField("dynamic_batching")
    model_path = repo / "my-net" / "1" / "model.onnx"
    assert check_against_model(model_config, cfg, model_path) == 4
    assert [list(i.dims) for i in cfg.input] == [[3, -1, -1], [1]]
    # `best` is [batch]: Triton serves it as dims [1] reshaped to [] per request.
    assert [list(o.dims) for o in cfg.output] == [[2], [1]]
    assert cfg.output[1].HasField("reshape") and not cfg.output[1].reshape.shape
    for batch in (1, cfg.max_batch_size):
        xb, sb = torch.randn(batch, 3, 11, 10), torch.rand(batch, 1)
        logits, best = ort.run(model_path, [xb.numpy(), sb.numpy()])
        with torch.no_grad():
            want = m(xb, sb)
        np.testing.assert_allclose(logits, want[0].numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(best, want[1].numpy())
    manifest = yaml.safe_load((repo / "my-net" / "inferenceservice.yaml").read_text())
    assert manifest["apiVersion"] == "serving.kserve.io/v1beta1" and manifest["kind"] == "InferenceService"
    assert manifest["metadata"]["name"] == "my-net"
    pred = manifest["spec"]["predictor"]["model"]
    assert pred["modelFormat"]["name"] == "onnx" and pred["runtime"] == "kserve-tritonserver"
    assert pred["storageUri"].endswith("/repo")


def test_cli_bundle_without_a_batch_axis(tmp_path, model_config, cli):
    class Fixed(torch.nn.Module):
        def forward(self, x, n):
            return x.double() * 2, n + 1

    pt = tmp_path / "fixed.pt"
    torch.jit.script(Fixed()).save(str(pt))
    repo = tmp_path / "repo"
    base = [cli, "convert", str(pt), "-o", str(tmp_path / "fixed.onnx"), "--input", "x:2x3", "--input", "n:4:i64",
            "--triton-repo", str(repo)]
    subprocess.run(base, check=True, capture_output=True)
    cfg = parse(model_config, repo / "fixed" / "config.pbtxt")
    assert cfg.max_batch_size == 0 and not cfg.HasField("dynamic_batching")
    check_against_model(model_config, cfg, repo / "fixed" / "1" / "model.onnx")
    assert [list(i.dims) for i in cfg.input] == [[2, 3], [4]]
    assert model_config.DataType.Name(cfg.output[0].data_type) == "TYPE_FP64"
    x, n = np.ones((2, 3), np.float32), np.arange(4)
    a, b = ort.run(repo / "fixed" / "1" / "model.onnx", [x, n])
    assert a.dtype == np.float64 and (a == 2).all() and b.tolist() == [1, 2, 3, 4]
    # Asking for batching of a model without a batch axis is a usage error naming the input.
    r = subprocess.run(base + ["--max-batch", "8"], capture_output=True, text=True)
    assert r.returncode == 2 and "axis 0 of 'x' is not symbolic" in r.stderr, r.stderr
    # Different batch labels on inputs and outputs: no batching either.
    r2 = subprocess.run([cli, "convert", str(pt), "-o", str(tmp_path / "f2.onnx"), "--input", "x:2x3",
                         "--input", "n:4:i64", "--dynamic", "x:0=b", "--dynamic", "n:0=m", "--triton-repo", str(repo)],
                        capture_output=True, text=True)
    assert r2.returncode == 0, r2.stderr
    assert parse(model_config, repo / "f2" / "config.pbtxt").max_batch_size == 0
