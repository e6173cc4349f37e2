"""Quantized models (torch.ao.quantization) exported as torch.onnx exports them: a quantized input or
output is three values (the integers, the scale, the zero point), quantized ops compute on
dequantized values between QuantizeLinear / DequantizeLinear, and weights stay integers behind a
DequantizeLinear. ONNX Runtime and torch2onnx's runtime must give torch's integers exactly."""
import numpy as np
import onnx
import pytest
import torch

import ort
import torch2onnx


def q(t, scale=0.5, zero=128):
    return torch.quantize_per_tensor(t, scale, zero, torch.quint8)


def ramp(*shape, offset=0.0, max_val=None):
    t = torch.arange(int(np.prod(shape)), dtype=torch.float).view(shape) + offset
    if max_val is not None and t.abs().max() > max_val:
        t = t * max_val / t.abs().max()
    return t


def feeds_of(args):
    out = []
    for a in args:
        if a.is_quantized:
            out += [a.int_repr().numpy(), np.array(a.q_scale()), np.array(a.q_zero_point())]
        else:
            out.append(a.numpy())
    return out


def want_of(y):
    ys = y if isinstance(y, (tuple, list)) else [y]
    out = []
    for t in ys:
        if t.is_quantized:
            out += [t.int_repr().numpy(), np.array(t.q_scale(), dtype=np.float32),
                    np.array(t.q_zero_point(), dtype=t.int_repr().numpy().dtype)]
        else:
            out.append(t.detach().numpy())
    return out


def check(model, args, path, opset=17):
    r = torch2onnx.export(model, args, path, opset_version=opset)
    feeds = feeds_of(args)
    with torch.no_grad():
        want = want_of(model(*args))
    got_ort = ort.run(path, feeds)
    got_ours = torch2onnx.InferenceSession(path).run(None, dict(zip(r.input_names, feeds)))
    for got in (got_ort, got_ours):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=1e-6)
            else:
                np.testing.assert_array_equal(g, w)
    return r


def test_quantized_input_and_output_are_three_values(tmp_path):
    model = torch.ao.nn.quantized.Linear(4, 8)
    model.set_weight_bias(torch.quantize_per_tensor(ramp(8, 4), 0.5, 0, torch.qint8), torch.arange(8.0))
    r = check(model, (q(ramp(4, 4, offset=-8)),), tmp_path / "linear.onnx")
    assert r.input_names == ["x", "x_scale", "x_zero_point"]
    g = onnx.load(str(tmp_path / "linear.onnx")).graph
    assert [i.type.tensor_type.elem_type for i in g.input] == [onnx.TensorProto.UINT8, onnx.TensorProto.DOUBLE,
                                                             onnx.TensorProto.INT64]
    # The weight stays int8 behind a DequantizeLinear.
    assert any(i.data_type == onnx.TensorProto.INT8 for i in g.initializer)
    assert {n.op_type for n in g.node} >= {"DequantizeLinear", "QuantizeLinear"}


def test_quantized_convolutions(tmp_path):
    torch.manual_seed(0)
    conv = torch.ao.nn.quantized.Conv2d(3, 4, 3, stride=2, padding=1)
    conv.set_weight_bias(torch.quantize_per_tensor(ramp(4, 3, 3, 3, max_val=2.0), 0.25, 0, torch.qint8),
                         torch.tensor([0.0, 1.0, -1.0, 0.5]))
    conv.scale, conv.zero_point = 0.5, 100
    check(conv, (q(ramp(1, 3, 6, 6, offset=-40, max_val=10)),), tmp_path / "conv.onnx")


class Arith(torch.nn.Module):
    def forward(self, x, y):
        o = torch.ops.quantized.add(x, y, 0.4, 100)
        o = torch.ops.quantized.mul(o, x, 0.4, 100)
        return torch.ops.quantized.cat([o, torch.relu(x)], 1, 0.5, 90)


def test_quantized_arithmetic_and_ops_on_quantized_tensors(tmp_path):
    x, y = q(ramp(3, 4, offset=-6, max_val=3), 0.2, 128), q(ramp(3, 4, offset=-2, max_val=2), 0.2, 128)
    check(Arith(), (x, y), tmp_path / "arith.onnx")


class Qat(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv = torch.nn.Conv2d(2, 4, 3)
        self.fc = torch.nn.Linear(4 * 4 * 4, 3)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        x = torch.relu(self.conv(self.quant(x)))
        return self.dequant(self.fc(x.flatten(1)))


@pytest.mark.parametrize("opset", [13, 17])
def test_converted_qat_model_with_per_channel_weights(tmp_path, opset):
    m = Qat()
    m.qconfig = torch.ao.quantization.get_default_qat_qconfig("fbgemm")
    m = torch.ao.quantization.prepare_qat(m.train())
    with torch.no_grad():
        m.conv.weight.copy_(ramp(4, 2, 3, 3, max_val=1.0))
        m.fc.weight.copy_(ramp(3, 64, max_val=0.5))
    for _ in range(3):  # observers see data before conversion
        m(ramp(2, 2, 6, 6, offset=-30, max_val=4))
    m = torch.ao.quantization.convert(m.eval())
    assert m.conv.weight().qscheme() == torch.per_channel_affine
    check(m, (ramp(2, 2, 6, 6, offset=-20, max_val=3),), tmp_path / "qat.onnx", opset=opset)
