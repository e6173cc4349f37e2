"""Model forms that PyTorch's own exporter tests use and torch.onnx exports, exported through
torch2onnx.export and checked against eager PyTorch in ONNX Runtime and in torch2onnx's runtime,
at the example args and, for dynamic axes, at other sizes."""
import math
from typing import Dict, List

import numpy as np
import pytest
import torch
import torchvision
from torch.nn.utils import rnn as rnn_utils

import ort
import torch2onnx


def flat(out):
    if isinstance(out, torch.Tensor):
        return [out.detach().numpy()]
    return [o for e in out for o in flat(e)]


def check(model, args, path, others=(), rtol=1e-5, atol=1e-6, **export):
    r = torch2onnx.export(model, args, path, **export)
    sess = torch2onnx.InferenceSession(path)
    for a in [args, *others]:
        a = a if isinstance(a, tuple) else (a,)
        feeds = [x.numpy() if isinstance(x, torch.Tensor) else np.array(x) for x in a]
        with torch.no_grad():
            want = flat(model(*a))
        for got in (ort.run(path, feeds), sess.run(None, dict(zip(r.input_names, feeds)))):
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.shape == w.shape
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return r


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce(tmp_path, opset, reduce):
    torch.manual_seed(0)
    for include_self in (True, False):
        for dim in (0, 1):
            class M(torch.nn.Module):
                def forward(self, x, idx, src):
                    return x.scatter_reduce(dim, idx, src, reduce=reduce, include_self=include_self)

            x, src = torch.randn(4, 5), torch.randn(3, 4)  # index smaller than src and x
            idx = torch.randint(0, x.shape[dim], (3, 4))
            check(M(), (x, idx, src), tmp_path / "m.onnx", opset_version=opset)


class Advanced(torch.nn.Module):
    def forward(self, x):
        a = x[:, torch.tensor([[0, 2], [1, 1]]), :, torch.tensor([2, 1]), torch.tensor([0, 3])]  # apart: B in front
        b = x[:, :, torch.tensor([1, 0]), torch.tensor([[2], [3]])]  # adjacent: B where the first one was
        return a, b


class AdvancedPut(torch.nn.Module):
    def forward(self, x, u, v):
        x[1:2, 1:3, torch.tensor([1])] += u
        x[..., torch.tensor([2, 1, 3])] = v
        return x


def test_advanced_indexing_at_any_axes(tmp_path):
    check(Advanced(), torch.randn(3, 4, 5, 6, 7), tmp_path / "a.onnx")
    check(AdvancedPut(), (torch.randn(3, 4, 5), torch.tensor([10.0, 15.0]).view(1, 2, 1), torch.randn(3, 4, 3)),
          tmp_path / "p.onnx")


class Squeezes(torch.nn.Module):
    def forward(self, x, dim: int):
        return torch.squeeze(x), torch.squeeze(x, 2), torch.squeeze(x, dim)


def test_squeeze_decides_at_run_time(tmp_path):
    # With every axis dynamic, whether a dim is 1 is known only at run time.
    x = torch.randn(2, 1, 4)
    check(Squeezes(), (x, 1), tmp_path / "s.onnx", others=[(torch.randn(3, 2, 1), 1), (torch.randn(1, 1, 5), 0)],
          input_names=["x", "dim"], dynamic_axes={"x": {0: "a", 1: "b", 2: "c"}})


class Repeats(torch.nn.Module):
    def forward(self, x, repeats):
        return torch.repeat_interleave(x, repeats, dim=1)


def test_repeat_interleave_with_a_run_time_length(tmp_path):
    x = torch.tensor([[1, 2, 4], [3, 4, 7]])
    with pytest.warns(torch2onnx.ConversionWarning, match="fails at other sizes"):
        check(Repeats(), (x, torch.tensor([2])), tmp_path / "r.onnx", others=[(x, torch.tensor([4]))],
              input_names=["x", "repeats"], dynamic_axes={"repeats": {0: "r"}})


class PackedRnn(torch.nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(5, 3, num_layers=2, bidirectional=True)

    def forward(self, x, lengths):
        p = rnn_utils.pack_padded_sequence(x, lengths)
        out, h = self.rnn(p)
        return rnn_utils.pad_packed_sequence(out)[0], h


def batch(n, seed):
    g = torch.Generator().manual_seed(seed)
    lengths = sorted(torch.randint(1, 12, (n,), generator=g).tolist(), reverse=True)
    x = rnn_utils.pad_sequence([torch.randn(k, 5, generator=g) for k in lengths])
    return x, torch.tensor(lengths, dtype=torch.int32)


@pytest.mark.parametrize("cell", [torch.nn.RNN, torch.nn.LSTM, torch.nn.GRU])
def test_traced_packed_rnn_without_a_state_runs_at_any_batch(tmp_path, cell):
    # Tracing bakes the default zero state at the traced batch; the output's length is max(lengths).
    torch.manual_seed(1)
    check(PackedRnn(cell).eval(), batch(7, 0), tmp_path / "rnn.onnx", others=[batch(8, 1), batch(3, 2)],
          rtol=1e-4, atol=1e-5, input_names=["x", "lengths"], dynamic_axes={"x": [0, 1], "lengths": [0]})


@pytest.mark.parametrize("cell", [torch.nn.LSTM, torch.nn.GRU])
def test_scripted_rnn_with_an_overloaded_forward(tmp_path, cell):
    # torch.jit.script(nn.LSTM) has no forward, only forward__0 (Tensor) and forward__1 (PackedSequence).
    torch.manual_seed(2)
    kw = {"proj_size": 4} if cell is torch.nn.LSTM else {}
    m = cell(6, 8, 2, batch_first=True, **kw).eval()
    sm = torch.jit.script(m)
    assert "forward" not in sm._c._method_names()
    p = tmp_path / "rnn.onnx"
    with pytest.warns(torch2onnx.ConversionWarning, match="forward__0"):
        torch2onnx.export(sm, (torch.randn(3, 5, 6),), p, input_names=["x"], dynamic_axes={"x": [0, 1]})
    x = torch.randn(2, 9, 6)
    with torch.no_grad():
        want = flat(m(x))
    got = ort.run(p, [x.numpy()])
    assert len(got) == len(want) == (3 if cell is torch.nn.LSTM else 2)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


class Stft(torch.nn.Module):
    def forward(self, x):
        return torch.stft(x, n_fft=16, hop_length=4, center=False, return_complex=False)


def test_stft_with_a_static_length(tmp_path):
    check(Stft(), torch.randn(2, 37), tmp_path / "stft.onnx", rtol=1e-4, atol=1e-4)


class DictIn(torch.nn.Module):
    def forward(self, x, d):
        key = list(d.keys())[1]
        return {"sum": x + d["a"] * key, "scaled": d[key].relu() * 3}


def test_dict_arguments_are_their_tensors(tmp_path):
    # As torch.onnx: a dict among args (a trailing one holds keyword arguments) is its tensors, in
    # order, a tensor key before its value.
    x, a, b = torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)
    key = torch.tensor(2.0)
    r = torch2onnx.export(DictIn(), (x, {"a": a, key: b}, {}), tmp_path / "d.onnx", verify=True)
    assert r.verification.ok and len(r.input_names) == 4
    other_key = torch.tensor(-1.5)
    feeds = [x.numpy(), a.numpy(), other_key.numpy(), b.numpy()]
    want = DictIn()(x, {"a": a, other_key: b})
    for got in (torch2onnx.InferenceSession(r.path).run(None, dict(zip(r.input_names, feeds))), ort.run(r.path, feeds)):
        np.testing.assert_allclose(got[0], want["sum"].numpy(), rtol=1e-6)
        np.testing.assert_allclose(got[1], want["scaled"].numpy(), rtol=1e-6)


class AffineGrid(torch.nn.Module):
    def __init__(self, align_corners):
        super().__init__()
        self.align_corners = align_corners

    def forward(self, x, theta):
        grid = torch.nn.functional.affine_grid(theta, x.shape, align_corners=self.align_corners)
        return torch.nn.functional.grid_sample(x, grid, align_corners=self.align_corners), grid


class AffineGrid3d(torch.nn.Module):
    def forward(self, theta):
        return torch.nn.functional.affine_grid(theta, [theta.size(0), 2, 4, 1, 5], align_corners=True)


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_with_run_time_sizes(tmp_path, align_corners):
    torch.manual_seed(0)
    m = AffineGrid(align_corners)
    args = (torch.randn(3, 2, 5, 6), torch.randn(3, 2, 3))
    others = [(torch.randn(1, 2, 1, 9), torch.randn(1, 2, 3)), (torch.randn(2, 2, 7, 4), torch.randn(2, 2, 3))]
    dyn = {"x": {0: "n", 2: "h", 3: "w"}, "theta": {0: "n"}}
    check(m, args, tmp_path / "t.onnx", others, rtol=1e-4, atol=1e-5, input_names=["x", "theta"], dynamic_axes=dyn)
    check(torch.jit.script(m), args, tmp_path / "s.onnx", others, rtol=1e-4, atol=1e-5, dynamic_axes=dyn)
    check(AffineGrid3d(), torch.randn(3, 3, 4), tmp_path / "3d.onnx", [torch.randn(2, 3, 4)], rtol=1e-5, atol=1e-6,
          input_names=["theta"], dynamic_axes={"theta": [0]})


class Diff(torch.nn.Module):
    def forward(self, x, p):
        return x.diff(dim=1), torch.diff(x, n=2, dim=0, prepend=p, append=p), (x > 0).diff()


def test_diff(tmp_path):
    args = (torch.randn(4, 6), torch.randn(1, 6))
    dyn = {"x": [0, 1], "p": [1]}
    others = [(torch.randn(2, 3), torch.randn(1, 3))]
    check(Diff(), args, tmp_path / "t.onnx", others, input_names=["x", "p"], dynamic_axes=dyn)
    check(torch.jit.script(Diff()), args, tmp_path / "s.onnx", others, dynamic_axes=dyn)


class RowsTimesTwo(torch.nn.Module):
    def forward(self, x):
        out = []
        for row in x:
            out.append(row * 2)
        return out


def test_list_of_run_time_length_is_a_sequence_output(tmp_path):
    m = torch.jit.script(RowsTimesTwo())
    r = torch2onnx.export(m, torch.rand(2, 2, 3), tmp_path / "s.onnx", input_names=["x"],
                          dynamic_axes={"x": [0]}, verify=True)
    assert r.verification.ok
    assert onnx_output_kind(r.path) == "sequence_type"
    sess = torch2onnx.InferenceSession(r.path)
    x = torch.rand(4, 2, 3)
    (got,) = sess.run(None, {"x": x.numpy()})
    assert len(got) == 4
    for g, w in zip(got, m(x)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-6)


def onnx_output_kind(path):
    import onnx
    return onnx.load(str(path)).graph.output[0].type.WhichOneof("value")


class SetSliceToVector(torch.nn.Module):
    def forward(self, x):
        x[:, x.size(0):] = torch.tensor([1.0, 2.0, 3.0])
        return x


def test_traced_slice_assignment_broadcasts_at_run_time(tmp_path):
    # Tracing records the value expanded to the slice's sizes of that run (a constant after
    # TorchScript's folding); at other sizes the value must broadcast to the slice as it is then.
    check(SetSliceToVector(), torch.ones(2, 5, 3), tmp_path / "s.onnx", [torch.randn(3, 4, 3), torch.randn(1, 6, 3)],
          input_names=["x"], dynamic_axes={"x": [0, 1]})


class Draw(torch.nn.Module):
    def forward(self, w):
        return torch.multinomial(w, 3, replacement=True), torch.multinomial(w, 1), torch.multinomial(w, 2)


def test_multinomial(tmp_path):
    # Each row has two classes of non-zero weight: draws with replacement and single draws fall on
    # them, two draws without replacement are those two in some order.
    w = torch.tensor([[0.0, 10.0, 0.0, 5.0], [3.0, 0.0, 100.0, 0.0]])
    r = torch2onnx.export(Draw(), w, tmp_path / "m.onnx")
    allowed = [{1, 3}, {0, 2}]
    for outs in (ort.run(r.path, [w.numpy()]), torch2onnx.InferenceSession(r.path).run(None, {r.input_names[0]: w.numpy()})):
        with_rep, single, without = outs
        assert with_rep.shape == (2, 3) and single.shape == (2, 1) and without.shape == (2, 2)
        for row in range(2):
            assert set(with_rep[row]) <= allowed[row] and set(single[row]) <= allowed[row]
            assert set(without[row]) == allowed[row]


class MasksWithIndices(torch.nn.Module):
    def forward(self, a, b, x, y):
        m1, m2 = (a <= 0) | (a > 25), (b < 1) | (b >= 12)
        y[m1, m2] = 0.0
        picked = x[:, m1, torch.tensor([2])]  # a mask beside an index tensor
        plane = x[x[:, :, 0] > 0, torch.tensor([1])]  # a 2-D mask, then an index tensor
        return y, picked, plane


def test_boolean_masks_together_with_other_indices(tmp_path):
    # torch reads a mask among index tensors as the positions it keeps; how many depends on values.
    a = torch.tensor([0, 4, 24, 25])
    b = torch.tensor([0, 3, 12, 15])
    torch.manual_seed(0)
    x, y = torch.randn(3, 4, 3), torch.randn(4, 4)
    others = [(torch.tensor([26, 4, -1, 25]), torch.tensor([13, 3, 11, 0]), torch.randn(3, 4, 3), torch.randn(4, 4))]
    check(MasksWithIndices(), (a, b, x, y), tmp_path / "m.onnx", others)


class ZerosOfShapeSlice(torch.nn.Module):
    def forward(self, x):
        return x.new_zeros(x.shape[1:x.size(2)]) + x.size(1)


def test_list_slice_at_computed_positions(tmp_path):
    # A list of sizes cut at a computed position has a run-time length: held as a 1-D tensor.
    m = torch.jit.script(ZerosOfShapeSlice())
    check(m, torch.rand(1, 2, 3, 4), tmp_path / "z.onnx", [torch.rand(2, 5, 3, 1)], input_names=["x"],
          dynamic_axes={"x": [0, 1, 2, 3]})


class OptionalPair(torch.nn.Module):
    def forward(self, x, y: tuple):
        first, second = y
        return (x + first if first is not None else x * 2), (x - second if second is not None else x)


def test_tuple_with_none_and_fewer_output_names(tmp_path):
    # As torch.onnx: None inside a tuple argument is no input, the tensors beside it are inputs;
    # output_names may name only the first outputs.
    x, y1 = torch.randn(2, 3), torch.randn(2, 3)
    r = torch2onnx.export(OptionalPair(), (x, (None, y1)), tmp_path / "o.onnx", output_names=["a"])
    assert len(r.input_names) == 2 and r.output_names[0] == "a" and len(r.output_names) == 2
    x2, y2 = torch.randn(2, 3), torch.randn(2, 3)
    want = OptionalPair()(x2, (None, y2))
    for got in (ort.run(r.path, [x2.numpy(), y2.numpy()]),
                torch2onnx.InferenceSession(r.path).run(None, dict(zip(r.input_names, [x2.numpy(), y2.numpy()])))):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-6)


def test_roi_pool(tmp_path):
    import torchvision
    torch.manual_seed(0)
    x = torch.randn(2, 3, 10, 12)
    rois = torch.tensor([[0, 0.0, 0.0, 9.0, 9.0], [1, 3.3, 1.7, 20.0, 15.0], [0, 5.0, 5.0, 5.4, 5.6],
                         [1, -4.0, -2.0, 3.0, 30.0]])
    others = [(torch.randn(1, 3, 7, 9), torch.tensor([[0, 1.0, 2.0, 13.0, 11.0], [0, 0.2, 0.6, 1.2, 2.5]]))]
    check(torchvision.ops.RoIPool((3, 2), 0.5), (x, rois), tmp_path / "r.onnx", others, input_names=["x", "rois"],
          dynamic_axes={"x": [0, 2, 3], "rois": [0]})


class PsRoiAlign(torch.nn.Module):
    def forward(self, x, rois, level):
        # adaptive sampling (a grid of ceil(bin size) points) and a fixed 2 x 2 grid
        a = torchvision.ops.ps_roi_align(x, rois, (2, 3), 0.5, -1)
        b = torchvision.ops.ps_roi_align(level, rois, 2, 0.25, 2)
        return a, b


def test_ps_roi_align(tmp_path):
    # position-sensitive RoI Align (R-FCN): bin (i, j) of output channel c reads input channel
    # (c * ph + i) * pw + j, sampled as roi_align(aligned=True)
    torch.manual_seed(0)
    x, level = torch.randn(2, 12, 10, 12), torch.randn(2, 8, 5, 6)
    rois = torch.tensor([[0, 0.0, 0.0, 9.0, 9.0], [1, 3.3, 1.7, 20.0, 15.0], [0, 5.0, 5.0, 5.4, 5.6],
                         [1, -4.0, -2.0, 3.0, 30.0]])
    others = [(torch.randn(1, 12, 7, 9), torch.tensor([[0, 1.0, 2.0, 13.0, 11.0], [0, 0.2, 0.6, 1.2, 2.5]]),
               torch.randn(1, 8, 4, 4))]
    check(PsRoiAlign(), (x, rois, level), tmp_path / "p.onnx", others, input_names=["x", "rois", "level"],
          dynamic_axes={"x": [0, 2, 3], "rois": [0], "level": [0, 2, 3]})


def test_ps_roi_pool(tmp_path):
    # corners at exact halves after scaling (rounded away from zero), outside the image, smaller than
    # a pixel, and bins that come out empty
    torch.manual_seed(0)
    x = torch.randn(2, 18, 10, 12) * 100
    rois = torch.tensor([[0, 5.0, -5.0, 17.0, 9.0], [1, 3.3, 1.7, 20.0, 15.0], [0, 5.0, 5.0, 5.4, 5.6],
                         [1, -9.0, -4.0, 31.0, 30.0], [0, 21.0, 17.0, 40.0, 30.0]])
    others = [(torch.randn(1, 18, 7, 9), torch.tensor([[0, 1.0, 2.0, 13.0, 11.0], [0, 0.2, 0.6, 1.2, 2.5]]))]
    check(torchvision.ops.PSRoIPool((2, 3), 0.5), (x, rois), tmp_path / "p.onnx", others, input_names=["x", "rois"],
          dynamic_axes={"x": [0, 2, 3], "rois": [0]}, rtol=1e-5, atol=1e-4)


class SinusoidalPositions(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, x):
        # an integer tensor times a Python float: float32 in eager PyTorch and in the trace
        inv = torch.exp(torch.arange(0, 8, 2) * (-math.log(10000.0) / 8))
        t = torch.arange(x.shape[1])[:, None] * inv
        return self.proj(x + torch.cat([t.sin(), t.cos()], -1))


def test_traced_python_float_times_an_integer_tensor_stays_float32(tmp_path):
    # Saved, the float is a 0-d float64 constant, which libtorch's interpreter and torch.jit.freeze
    # promote the product with to float64 (the frozen model then fails in the float32 Linear).
    torch.manual_seed(0)
    r = check(SinusoidalPositions().eval(), torch.randn(2, 5, 8), tmp_path / "s.onnx", [torch.randn(1, 9, 8)],
              input_names=["x"], dynamic_axes={"x": [0, 1]}, verify=True)
    assert r.verification.ok


class HeightPooled(torch.nn.Module):
    """A CRNN's feature extractor: the height pooled away, the width kept as the sequence."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.avg = torch.nn.AdaptiveAvgPool2d((1, None))
        self.max = torch.nn.AdaptiveMaxPool2d((None, 3))

    def forward(self, x):
        f = self.conv(x)
        return self.avg(f).squeeze(2).permute(0, 2, 1), self.max(f)


def test_adaptive_pool_keeping_a_traced_axis(tmp_path):
    # Traced, a None output size is the input's size: a computed list [1, x.size(3)]
    torch.manual_seed(0)
    check(HeightPooled().eval(), torch.randn(2, 1, 8, 30), tmp_path / "h.onnx", [torch.randn(1, 1, 8, 45)],
          input_names=["x"], dynamic_axes={"x": {0: "batch", 3: "width"}})


class GroupsFromBatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(1, 1, 3))

    def forward(self, x):
        b = x.shape[0]  # traced, the conv's groups keep the example's batch
        return torch.nn.functional.conv1d(x.reshape(1, b, -1), self.w.expand(b, 1, 3), groups=b).reshape(b, -1)


def test_a_dynamic_axis_the_model_cannot_change_is_reported(tmp_path):
    # Resized runs that move the length work, none that moves the batch does: the batch is named.
    m = GroupsFromBatch()
    with pytest.warns(torch2onnx.ConversionWarning, match=r"--dynamic axes batch change size \(.*groups"):
        r = torch2onnx.export(m, torch.randn(2, 20), tmp_path / "g.onnx", input_names=["x"],
                              dynamic_axes={"x": {0: "batch", 1: "length"}})
    x = torch.randn(2, 33)  # the length does change
    with torch.no_grad():
        np.testing.assert_allclose(ort.run(r.path, [x.numpy()])[0], m(x).numpy(), rtol=1e-5, atol=1e-6)


class SparseGraph(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, edges, weights):
        n = x.shape[0]
        adj = torch.sparse_coo_tensor(edges, weights, (n, n))
        inferred = torch.sparse_coo_tensor(edges, weights)  # sized by the largest index
        deg = torch.sparse.sum(adj, (1,)).to_dense()
        return torch.sparse.mm(adj, self.lin(x)) / deg.clamp(min=1e-3)[:, None], inferred.coalesce().to_dense()


def test_sparse_coo_tensors_are_held_densely(tmp_path):
    # a GCN layer over a sparse adjacency with repeated edges (which sum)
    torch.manual_seed(0)
    m = torch.jit.script(SparseGraph().eval())
    e0 = torch.tensor([[0, 1, 1, 4, 2, 0], [1, 0, 0, 4, 3, 1]])
    e1 = torch.tensor([[0, 6, 3, 3, 5], [6, 0, 2, 2, 1]])
    check(m, (torch.randn(5, 4), e0, torch.rand(6)), tmp_path / "s.onnx", [(torch.randn(7, 4), e1, torch.rand(5))],
          input_names=["x", "edges", "weights"], dynamic_axes={"x": [0], "edges": [1], "weights": [0]})


class PadSequences(torch.nn.Module):
    def forward(self, a, b, c):
        first = rnn_utils.pad_sequence([a, b, c], batch_first=True, padding_value=-1.0)
        return first, rnn_utils.pad_sequence([a * 2, b], batch_first=False)


@pytest.mark.parametrize("dynamic", [False, True])
def test_pad_sequence(tmp_path, dynamic):
    a, b, c = torch.randn(3, 2), torch.randn(5, 2), torch.randn(1, 2)
    others = [(torch.randn(4, 2), torch.randn(2, 2), torch.randn(6, 2))] if dynamic else []
    check(PadSequences(), (a, b, c), tmp_path / "p.onnx", others, input_names=["a", "b", "c"],
          dynamic_axes={"a": [0], "b": [0], "c": [0]} if dynamic else None)


class GradModes(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        with torch.no_grad():
            y = self.lin(x)
            with torch.no_grad():
                z = y * 2
        return z.detach() + 1


def test_scripted_grad_mode_blocks(tmp_path):
    torch.manual_seed(0)
    check(torch.jit.script(GradModes().eval()), torch.randn(2, 3), tmp_path / "g.onnx", [torch.randn(5, 3)],
          input_names=["x"], dynamic_axes={"x": [0]})


class ComplexNumber(torch.nn.Module):
    def forward(self, x):
        z = torch.view_as_complex(x)
        # a Python complex: traced, a 0-d complex128 constant that promoted the result to complex128
        return torch.view_as_real(z * z.conj() + torch.exp(1j * z.angle()) * (0.5 - 2j))


def test_traced_python_complex_number(tmp_path):
    check(ComplexNumber(), torch.randn(3, 4, 2), tmp_path / "c.onnx", [torch.randn(5, 4, 2)], input_names=["x"],
          dynamic_axes={"x": [0]})


class AreaResize(torch.nn.Module):
    def forward(self, x):
        # traced, the output sizes are computed from the input's: adaptive pooling to computed sizes
        return (torch.nn.functional.interpolate(x, scale_factor=0.5, mode="area"),
                torch.nn.functional.interpolate(x, scale_factor=(0.37, 0.6), mode="area", recompute_scale_factor=True))


def test_area_interpolation_with_a_scale_factor(tmp_path):
    check(AreaResize(), torch.randn(2, 3, 12, 10), tmp_path / "a.onnx", [torch.randn(1, 3, 17, 23)],
          input_names=["x"], dynamic_axes={"x": [0, 2, 3]})


class Parts(torch.nn.Module):
    def forward(self, x):
        parts = x.unbind(0)
        acc = torch.zeros_like(x[0])
        for p in parts:
            acc = acc + p
        return torch.stack(parts, 1), torch.cat(x.split(2, 0), 1), acc, parts[1], len(x.chunk(2, 0)) + x


def test_parts_of_a_dynamic_dim_are_a_sequence(tmp_path):
    # unbind / split / chunk of a dynamic dim into a number of parts that changes with it: an ONNX
    # sequence, so len() and every consumer follow the run-time size (len was frozen before).
    m = torch.jit.script(Parts())
    r = torch2onnx.export(m, torch.randn(4, 3), tmp_path / "p.onnx", input_names=["x"], dynamic_axes={"x": [0]},
                          verify=True)
    assert r.verification.ok
    sess = torch2onnx.InferenceSession(r.path)
    for x in (torch.randn(6, 3), torch.randn(2, 3)):
        want = m(x)
        for got in (sess.run(None, {"x": x.numpy()}), ort.run(r.path, [x.numpy()])):
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w.numpy(), rtol=1e-6)


@torch.jit.script
class Boxes:
    """A TorchScript class the model creates and reads (as torchvision's ImageList)."""

    def __init__(self, xy: torch.Tensor, scale: float):
        self.xy = xy
        self.scale = scale

    def scaled(self) -> torch.Tensor:
        return self.xy * self.scale


class SharedDicts(torch.nn.Module):
    """Dicts held by a list and changed through it, an object built in forward, and a branch that
    only inputs of more than 64 rows take (`if x.numel() > N`, as torchvision's batched_nms)."""

    def forward(self, x: torch.Tensor) -> List[Dict[str, torch.Tensor]]:
        result: List[Dict[str, torch.Tensor]] = []
        for i in range(x.size(0)):
            result.append({"v": x[i], "n": x[i].sum()})
        for i in range(len(result)):
            b = Boxes(result[i]["v"], 2.0)
            result[i]["v"] = b.scaled()  # seen through `result`
        if x.numel() > 64:
            out = torch.unique(x.flatten())
            v, s = out[: x.size(1)], out.sum()
        else:
            v, s = x[0] - 1, x.sum()
        result.append({"v": v, "n": s})
        return result


def test_shared_dicts_objects_and_a_branch_no_example_takes(tmp_path):
    torch.manual_seed(3)
    sm = torch.jit.script(SharedDicts())
    p = tmp_path / "m.onnx"
    x = torch.randn(2, 5)
    torch2onnx.export(sm, (x,), p, input_names=["x"], dynamic_axes={"x": [1]})
    for a in [x, torch.randn(2, 7), torch.randn(2, 40)]:  # the last takes the other branch
        with torch.no_grad():
            want = [t.numpy() for d in sm(a) for t in d.values()]
        got = ort.run(p, [a.numpy()])
        assert len(got) == len(want) == 6
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


class AppendInBothBranches(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        result: List[torch.Tensor] = [x[0]]
        if x.numel() > 64:
            result.append(x[1] * 2)
        else:
            result.append(x[0] - 1)
        return result


def test_list_appended_in_both_branches_is_a_list_output(tmp_path):
    # Each branch appends one tensor: the list stays element-wise, its items If outputs of known rank.
    sm = torch.jit.script(AppendInBothBranches())
    p = tmp_path / "m.onnx"
    torch2onnx.export(sm, (torch.randn(2, 5),), p, input_names=["x"], dynamic_axes={"x": [1]})
    for a in [torch.randn(2, 7), torch.randn(2, 40)]:
        want = [t.numpy() for t in sm(a)]
        got = ort.run(p, [a.numpy()])
        assert len(got) == 2
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
