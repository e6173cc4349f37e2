"""The four export snippets users start from, written as one would for torch.onnx, with only the
import swapped (`import torch2onnx as onnx_export`); outputs checked against PyTorch in ONNX
Runtime (or, for the custom op ORT cannot run, in torch2onnx's runtime with the example plugin)."""
import numpy as np
import onnx
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ort
import torch2onnx as onnx_export


# (1) An LSTMCell decoder step, traced on the CPU, with its state as a nested tuple.
class Decoder(nn.Module):
    def __init__(self, vocab=20, emb=8, hidden=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.cell = nn.LSTMCell(emb, hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, tokens, state):
        h, c = self.cell(self.embed(tokens), state)
        return self.out(h), (h, c)


def test_lstm_cell_decoder(tmp_path):
    torch.manual_seed(0)
    model = Decoder().eval()
    tokens = torch.tensor([3, 7])
    h, c = torch.randn(2, 16), torch.randn(2, 16)
    path = str(tmp_path / "dec.onnx")
    onnx_export.export(model, (tokens, (h, c)), path, input_names=["tokens", "h0", "c0"],
                       output_names=["logits", "h1", "c1"], opset_version=13)
    got = ort.run(path, [tokens.numpy(), h.numpy(), c.numpy()])
    with torch.no_grad():
        logits, (h1, c1) = model(tokens, (h, c))
    for g, w in zip(got, (logits, h1, c1)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)
    assert [o.name for o in onnx.load(path).graph.output] == ["logits", "h1", "c1"]


# (2) A fused Conv + BatchNorm + ReLU as an autograd.Function whose symbolic emits onnx_test::cbr.
class _Cbr(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b, scale, shift, padding):
        y = F.conv2d(x, w, b, padding=padding)
        return F.relu(y * scale.view(1, -1, 1, 1) + shift.view(1, -1, 1, 1))

    @staticmethod
    def symbolic(g, x, w, b, scale, shift, padding):
        return g.op("onnx_test::cbr", x, w, b, scale, shift, padding_i=padding)


class CbrNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        scale = self.bn.weight / torch.sqrt(self.bn.running_var + self.bn.eps)
        shift = self.bn.bias - self.bn.running_mean * scale
        return _Cbr.apply(x, self.conv.weight, self.conv.bias, scale, shift, 1)


def test_cbr_custom_op(tmp_path, cbr_plugin):
    torch.manual_seed(1)
    model = CbrNet().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 3, 12, 12)
    # What stops the seed example short of torch2onnx: TorchScript cannot save the Python Function.
    with pytest.raises(RuntimeError, match="Could not export Python function call '_Cbr'"):
        torch.jit.trace(model, x).save(str(tmp_path / "cbr.pt"))
    path = str(tmp_path / "cbr.onnx")
    r = onnx_export.export(model, (x,), path, input_names=["x"], output_names=["y"],
                           dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                           verify=True, plugins=[cbr_plugin])
    assert r.verification.ok
    m = onnx.load(path)
    (node,) = [n for n in m.graph.node if n.domain == "onnx_test"]
    assert node.op_type == "cbr" and len(node.input) == 5
    assert [(a.name, a.i) for a in node.attribute] == [("padding", 1)]
    assert {(o.domain, o.version) for o in m.opset_import} >= {("onnx_test", 1)}
    sess = onnx_export.InferenceSession(path, plugins=[cbr_plugin])
    for batch in (2, 5):
        xb = torch.randn(batch, 3, 12, 12)
        (got,) = sess.run(None, {"x": xb.numpy()})
        with torch.no_grad():
            np.testing.assert_allclose(got, model(xb).numpy(), rtol=1e-4, atol=1e-5)


# (3) Spectral norm: weight_orig / sigma(u, v) per layer, computed by a forward pre-hook.
class SpectralNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.utils.spectral_norm(nn.Conv2d(3, 4, 3))
        self.fc = nn.utils.spectral_norm(nn.Linear(4 * 6 * 6, 5))

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def test_spectral_norm(tmp_path):
    torch.manual_seed(2)
    model = SpectralNet()
    for _ in range(3):  # a few training-mode steps move u and v
        model(torch.randn(4, 3, 8, 8))
    model.eval()
    x = torch.randn(2, 3, 8, 8)
    path = str(tmp_path / "sn.onnx")
    r = onnx_export.export(model, x, path, input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "n"}})
    assert any("spectral norm on conv, fc" in n for n in r.notes)
    names = [i.name for i in onnx.load(path).graph.initializer]
    assert not [n for n in names if n.endswith(("_orig", "_u", "_v"))], names
    xb = torch.randn(3, 3, 8, 8)
    (got,) = ort.run(path, [xb.numpy()])
    with torch.no_grad():
        np.testing.assert_allclose(got, model(xb).numpy(), rtol=1e-4, atol=1e-5)


# (4) Weights from a state_dict: load_state_dict -> eval -> export -> check in ONNX Runtime.
class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return F.log_softmax(self.head(torch.flatten(self.features(x), 1)), dim=1)


def test_state_dict_load_eval_export(tmp_path):
    torch.manual_seed(3)
    trained = Classifier()
    trained(torch.randn(8, 1, 28, 28))  # batch-norm statistics move in train()
    torch.save(trained.state_dict(), tmp_path / "classifier.pth")

    model = Classifier()
    model.load_state_dict(torch.load(tmp_path / "classifier.pth"))
    model.eval()
    dummy = torch.randn(1, 1, 28, 28)
    path = str(tmp_path / "classifier.onnx")
    onnx_export.export(model, dummy, path, input_names=["input"], output_names=["output"],
                       dynamic_axes={"input": {0: "batch_size"}, "output": {0: "batch_size"}}, opset_version=11)
    onnx.checker.check_model(onnx.load(path))
    for batch in (1, 4):
        x = torch.randn(batch, 1, 28, 28)
        (got,) = ort.run(path, [x.numpy()])
        with torch.no_grad():
            np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-4, atol=1e-4)
