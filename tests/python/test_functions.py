"""autograd.Function subclasses: with a symbolic they export as the node it emits (traced, and
scripted where the symbolic allows); without one, traced, the ops of its forward are exported (as
torch.onnx does) and, scripted, the error names the Function and its line."""
import numpy as np
import onnx
import pytest
import torch

import ort
import torch2onnx


class _ScaledTanh(torch.autograd.Function):
    """Two outputs, attributes computed from Python arguments, a standard-domain-free custom op."""

    @staticmethod
    def forward(ctx, x, bias, alpha, mode):
        y = torch.tanh(x * alpha + bias)
        return (y, y.abs().amax(dim=-1)) if mode == "both" else (y, y.sum(dim=-1))

    @staticmethod
    def symbolic(g, x, bias, alpha, mode):
        return g.op("mydomain::ScaledTanh", x, bias, alpha_f=alpha * 2.0, mode_s=mode, axes_is=[-1, 0], outputs=2)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(4))

    def forward(self, x):
        y, s = _ScaledTanh.apply(x, self.bias, 0.5, "both")
        z, _ = _ScaledTanh.apply(y, self.bias, 1.5, "sum")
        return z, s


def nodes(path, domain):
    return [n for n in onnx.load(path).graph.node if n.domain == domain]


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def test_traced_functions_become_their_nodes(tmp_path):
    torch.manual_seed(0)
    m = Net().eval()
    x = torch.randn(3, 4)
    p = tmp_path / "f.onnx"
    r = torch2onnx.export(m, (x,), p)
    a, b = nodes(p, "mydomain")
    assert a.op_type == b.op_type == "ScaledTanh" and len(a.output) == 2
    assert attrs(a) == {"alpha": pytest.approx(1.0), "mode": b"both", "axes": [-1, 0]}
    assert attrs(b)["alpha"] == pytest.approx(3.0) and attrs(b)["mode"] == b"sum"
    assert a.output[0] == b.input[0]  # the second call reads the first one's output
    # Shapes were learned by running the Functions' own forward: the second output is [3].
    out = {o.name: [d.dim_value for d in o.type.tensor_type.shape.dim] for o in onnx.load(p).graph.output}
    assert out == {"output.0": [3, 4], "output.1": [3]}
    # The runtime has no kernel for the custom nodes, so the optimizer cannot prove a rewrite and
    # leaves the model as converted, saying so; nothing else is worth a warning.
    assert [w for w in r.warnings if "left unoptimized" not in w] == []
    assert any("no kernel for mydomain::ScaledTanh" in w for w in r.warnings)
    # The model itself is untouched: apply() is PyTorch's again.
    z, s = m(x)
    assert z.shape == (3, 4) and torch.autograd.Function.apply is not None
    assert "apply" not in torch.autograd.Function.__dict__


class _Clamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, limit: float):
        return x.clamp(-limit, limit)

    @staticmethod
    def symbolic(g, x, limit):
        return g.op("mydomain::Clamp", x, limit_f=limit)


class ScriptNet(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x = x * 2
        return _Clamp.apply(x, 0.75)


def test_scripted_functions(tmp_path):
    x = torch.randn(2, 3)
    p = tmp_path / "s.onnx"
    torch2onnx.export(ScriptNet(), (x,), p, script=True)
    (n,) = nodes(p, "mydomain")
    assert n.op_type == "Clamp" and attrs(n) == {"limit": pytest.approx(0.75)}
    assert [x.op_type for x in onnx.load(p).graph.node if x.op_type == "If"], "script keeps the control flow"
    assert "apply" not in _Clamp.__dict__


class _NoSymbolic(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3


class Plain(torch.nn.Module):
    def forward(self, x):
        return _NoSymbolic.apply(x) + 1


def test_function_without_symbolic_is_inlined_when_traced(tmp_path):
    # As torch.onnx: the ops of its forward are exported in its place, with a note naming it.
    x = torch.randn(2)
    r = torch2onnx.export(Plain(), (x,), tmp_path / "n.onnx")
    assert [n.op_type for n in onnx.load(r.path).graph.node] == ["Mul", "Add"]
    assert any("_NoSymbolic (test_functions.py:" in n and "no symbolic()" in n for n in r.notes)
    np.testing.assert_allclose(ort.run(r.path, [x.numpy()])[0], (x * 3 + 1).numpy(), rtol=1e-6)
    # TorchScript cannot compile a Python Function: scripted, it is an error naming it, with the fix.
    with pytest.raises(torch2onnx.UnsupportedError, match="_NoSymbolic .*has no symbolic") as e:
        torch2onnx.export(Plain(), (x,), tmp_path / "s.onnx", script=True)
    assert "def symbolic(g" in e.value.hint and e.value.exit_code == 3
    assert not (tmp_path / "s.onnx").exists()


class _TwoNodes(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.neg()

    @staticmethod
    def symbolic(g, x):
        return g.op("Neg", g.op("Identity", x))


def test_symbolic_with_several_nodes_is_refused_clearly(tmp_path):
    class M(torch.nn.Module):
        def forward(self, x):
            return _TwoNodes.apply(x)

    with pytest.raises(torch2onnx.UnsupportedError, match="emits 2 nodes"):
        torch2onnx.export(M(), torch.randn(2), tmp_path / "t.onnx")


class _StdRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clamp_min(0)

    @staticmethod
    def symbolic(g, x):
        return g.op("Relu", x)


def test_symbolic_emitting_a_standard_op_runs_anywhere(tmp_path):
    class M(torch.nn.Module):
        def forward(self, x):
            return _StdRelu.apply(x) * 2

    p = tmp_path / "r.onnx"
    torch2onnx.export(M(), torch.randn(5), p)
    relu = [n for n in onnx.load(p).graph.node if n.op_type == "Relu"]
    assert len(relu) == 1 and relu[0].domain in ("", "ai.onnx")
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    (got,) = torch2onnx.InferenceSession(p).run(None, {"x": x})
    np.testing.assert_allclose(got, np.maximum(x, 0) * 2)
