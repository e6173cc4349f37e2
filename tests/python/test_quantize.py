"""torch2onnx.quantize: the quantizer on .onnx files from Python, as `torch2onnx quantize` runs it."""
import numpy as np
import onnx
import pytest
import torch

import ort
import torch2onnx


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3)))


class Tagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.rnn = torch.nn.LSTM(16, 32, 2)
        self.out = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.out(self.rnn(x)[0])


def exported(tmp_path, module, example, name):
    path = tmp_path / (name + ".onnx")
    torch2onnx.export(module.eval(), (example,), path, input_names=["x"], opset_version=17)
    return path


def test_dynamic_report_and_file(tmp_path):
    f = exported(tmp_path, Tagger(), torch.randn(10, 2, 16), "tagger")
    q = tmp_path / "tagger.int8.onnx"
    r = torch2onnx.quantize(f, q, mode="dynamic", per_channel=True, eval_samples=4, runs=2)
    onnx.checker.check_model(onnx.load(str(q)))
    assert r["quantized_by_op"]["LSTM"] == 2 and r["quantized_nodes"] == 3, r  # one LSTM node per layer
    assert r["initializer_bytes"]["after"] * 3 < r["initializer_bytes"]["before"]
    (out,) = r["accuracy"]["outputs"]
    assert 0 < out["max_abs"] < 0.1 and out["cosine"] > 0.999, out
    assert r["latency_ms"]["float"] > 0 and r["latency_ms"]["quantized"] > 0
    meta = {p.key: p.value for p in onnx.load(str(q)).metadata_props}
    assert meta["ai.torch2onnx.int8_recurrent"], meta
    # ONNX Runtime runs the file as written: float LSTM on the dequantized weights.
    x = np.random.default_rng(0).standard_normal((10, 2, 16)).astype(np.float32)
    (y,) = ort.run(q, [x])
    (want,) = torch2onnx.InferenceSession(str(f)).run(None, {"x": x})
    assert 0 < np.abs(y - want).max() < 0.05
    # An impossible bound (no drop at all) raises after writing the file.
    q.unlink()
    with pytest.raises(torch2onnx.MismatchError) as e:
        torch2onnx.quantize(f, q, mode="dynamic", eval_samples=2, runs=0, max_drop=0.0)
    assert e.value.exit_code == 1 and q.exists()


def test_static_with_calibration_files_and_max_drop(tmp_path):
    f = exported(tmp_path, Classifier(), torch.randn(1, 3, 12, 12), "clf")
    rng = np.random.default_rng(3)
    np.save(tmp_path / "calib.npy", rng.standard_normal((6, 1, 3, 12, 12)).astype(np.float32))
    np.save(tmp_path / "held.npy", rng.standard_normal((8, 1, 3, 12, 12)).astype(np.float32))
    q = tmp_path / "clf.int8.onnx"
    seen = []
    r = torch2onnx.quantize(f, q, mode="static", per_channel=True, calibrate=tmp_path / "calib.npy",
                            eval=[tmp_path / "held.npy"], runs=0, warn=seen.append, max_drop=0.5)
    assert r["calibration"] == {"samples": 6, "generated": False}
    assert r["passed"] and seen == []
    assert r["accuracy"]["outputs"][0]["top1_rows"] == 8
    ops = {n.op_type for n in onnx.load(str(q)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= ops


def test_generated_calibration_warns_and_bad_options_are_usage_errors(tmp_path):
    f = exported(tmp_path, Classifier(), torch.randn(1, 3, 12, 12), "clf")
    seen = []
    torch2onnx.quantize(f, tmp_path / "g.onnx", mode="static", runs=0, eval_samples=2, samples=2, warn=seen.append)
    assert any("GENERATED" in w for w in seen), seen
    with pytest.raises(torch2onnx.UsageError):
        torch2onnx.quantize(f, tmp_path / "u.onnx", mode="int4")
    with pytest.raises(torch2onnx.UsageError):
        torch2onnx.quantize(f, tmp_path / "u.onnx", mode="dynamic", calibrate=tmp_path / "x.npy")
