"""Ops whose edge cases the converter once got wrong or lacked: order statistics (kthvalue, median,
nanmedian, msort, quantile, nanquantile) with NaN and ties-free data, 0-d tensors given to ops with
a dim argument, softplus's threshold, align_corners resizes by a scale factor, gcd / lcm, integer bitwise ops, histogram, mode. Each exported through
torch2onnx.export and compared with eager PyTorch in ONNX Runtime and in torch2onnx's runtime, at
the example sizes and, where axes are dynamic, at other sizes."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import torch2onnx
from test_model_forms import check


def distinct(*shape, seed=0):
    """Values without ties (order statistics pick positions; tied indices are arbitrary in torch)."""
    g = torch.Generator().manual_seed(seed)
    n = int(np.prod(shape))
    return (torch.randperm(n, generator=g).float() / n - 0.5).reshape(shape)


def with_nans(x, every=7):
    x = x.clone()
    x.view(-1)[::every] = float("nan")
    return x


class KthMedian(torch.nn.Module):
    def forward(self, x):
        v, i = x.kthvalue(2, dim=1, keepdim=True)
        m, mi = x.median(dim=-1)
        nm, nmi = x.nanmedian(dim=0)
        return v, i, m, mi, nm, x.median(), x.nanmedian(), torch.msort(x)


@pytest.mark.parametrize("opset", [13, 17])
def test_kthvalue_median_nanmedian_msort(tmp_path, opset):
    x = distinct(5, 6)
    check(KthMedian(), (x,), tmp_path / "m.onnx", others=[(distinct(5, 6, seed=1),)], opset_version=opset)


def test_order_statistics_along_dynamic_dims_and_with_nans(tmp_path):
    # A dynamic dim length: the median's position is computed at run time. NaN: median and
    # quantile give NaN for a slice holding one, nanmedian / nanquantile skip them (NaN when all are).
    class M(torch.nn.Module):
        def forward(self, x):
            nm, _ = x.nanmedian(dim=1)
            return (x.median(dim=1)[0], nm, torch.quantile(x, 0.3, dim=1), torch.nanquantile(x, 0.3, dim=1))

    x = with_nans(distinct(4, 9))
    x[2] = float("nan")  # a row of NaNs only
    y = with_nans(distinct(3, 6, seed=2), every=4)
    check(M(), (x,), tmp_path / "m.onnx", others=[(y,)], opset_version=17, input_names=["x"],
          dynamic_axes={"x": {0: "n", 1: "len"}})


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_quantile_forms(tmp_path, interpolation):
    q = torch.tensor([0.0, 0.25, 0.5, 0.9, 1.0])

    class M(torch.nn.Module):
        def forward(self, x):
            return (torch.quantile(x, q, dim=0, keepdim=True, interpolation=interpolation),
                    torch.quantile(x, q, interpolation=interpolation),
                    torch.quantile(x, 0.75, dim=-1, interpolation=interpolation),
                    torch.quantile(x, q, keepdim=True, interpolation=interpolation),
                    torch.quantile(x, 0.4, keepdim=True, interpolation=interpolation))

    check(M(), (distinct(3, 4, 5),), tmp_path / "m.onnx", opset_version=17)


def test_zero_d_tensors_with_a_dim(tmp_path):
    class M(torch.nn.Module):
        def forward(self, s, i):
            return (s.argmax(0), s.argmin(-1, keepdim=True), s.logsumexp(0), s.cumsum(0), s.max(0)[0],
                    s.max(0, keepdim=True)[1], torch.all(s > 0, 0), s.gather(0, i), s.index_select(0, i.view(1)),
                    s.permute(()), s.tile((2, 3)), s.kthvalue(1, 0)[0], s.unfold(0, 1, 1))

    check(M(), (torch.tensor(1.5), torch.tensor(0)), tmp_path / "m.onnx", opset_version=17)


def test_softplus_threshold(tmp_path):
    class M(torch.nn.Module):
        def forward(self, x):
            return F.softplus(x, beta=3, threshold=0.2), F.softplus(x, beta=1, threshold=1.0), F.softplus(x)

    check(M(), (torch.linspace(-3, 3, 41),), tmp_path / "m.onnx", opset_version=17)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_align_corners_resize_by_a_scale_factor(tmp_path, mode):
    class M(torch.nn.Module):
        def forward(self, x):
            return F.interpolate(x, scale_factor=1.7, mode=mode, align_corners=True)

    check(M(), (torch.randn(2, 3, 4, 5),), tmp_path / "m.onnx", others=[(torch.randn(1, 3, 6, 3),)],
          opset_version=17, rtol=1e-4, atol=1e-5, input_names=["x"], dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}})


class Composites(torch.nn.Module):
    """Composite ops the converter rewrites into the aten ops they are made of (src/torch/decompose.cpp)."""

    def forward(self, x, y, t):
        a = x.mT + y.mH
        b = torch.dist(x, y, 3) + torch.vdot(x.flatten(), y.flatten()) + torch.linalg.vecdot(x, y).sum()
        c = torch.isclose(x, y, rtol=0.1, atol=0.05) | torch.isposinf(x) | torch.isneginf(y) | torch.isreal(x)
        d = torch.isin(t, torch.tensor([1, 3])) & ~torch.isin(t, 2)
        e = torch.trapezoid(x, dim=0) + torch.trapz(x, torch.arange(x.shape[-1]).float()) .sum()
        f = torch.cumulative_trapezoid(x, dx=0.5)
        g = torch.erfc(x) + torch.special.ndtr(y) + torch.ldexp(x, t) + torch.angle(x) + torch.sgn(y)
        m, ex = torch.frexp(x * 100)
        h = torch.linalg.vander(x[0], N=4) + torch.vander(y[0], N=4)
        s = torch.select_scatter(x, y[0], 0, 1) + torch.slice_scatter(x, y[:, :2], 1, 1, 5, 2)
        return (a, b, c, d, e, f, g, m, ex, h, s, torch.argwhere(x > 0), torch.diagflat(x[0], 1))


def test_composites(tmp_path):
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    x[0, 0], y[1, 1] = float("inf"), float("-inf")
    t = torch.randint(0, 4, (3, 4))
    x2, y2 = torch.randn(5, 4), torch.randn(5, 4)
    check(Composites(), (x, y, t), tmp_path / "m.onnx", others=[(x2, y2, torch.randint(0, 4, (5, 4)))], opset_version=17,
          rtol=1e-4, atol=1e-5, input_names=["x", "y", "t"], dynamic_axes={"x": {0: "n"}, "y": {0: "n"}, "t": {0: "n"}})


class Losses(torch.nn.Module):
    def forward(self, a, b, c, target, cls):
        return (F.cosine_embedding_loss(a, b, target, margin=0.2), F.cosine_embedding_loss(a, b, target, reduction="none"),
                F.triplet_margin_loss(a, b, c, swap=True), F.triplet_margin_loss(a, b, c, p=1.5, reduction="sum"),
                F.multi_margin_loss(a, cls), F.multi_margin_loss(a, cls, p=2, margin=0.5, weight=torch.linspace(0.5, 1.5, 6),
                                                                reduction="none"))


def test_losses(tmp_path):
    torch.manual_seed(0)
    args = (torch.randn(4, 6), torch.randn(4, 6), torch.randn(4, 6), torch.tensor([1, -1, 1, -1]), torch.tensor([0, 5, 2, 2]))
    check(Losses(), args, tmp_path / "m.onnx", opset_version=17, rtol=1e-4, atol=1e-5)


def test_native_batch_norm_and_batch_statistics(tmp_path):
    class M(torch.nn.Module):
        def forward(self, x, w, b, rm, rv):
            out, _, _ = torch.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5)
            # Training mode updates the running statistics it is given: copies keep rm, rv for the next call.
            out2, mean, invstd = torch.native_batch_norm(x, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5)
            return out, out2, mean, invstd

    args = (torch.randn(2, 3, 4, 5), torch.rand(3) + 0.5, torch.randn(3), torch.randn(3), torch.rand(3) + 0.5)
    check(M(), args, tmp_path / "m.onnx", opset_version=17, rtol=1e-4, atol=1e-5)


class DiagonalWrites(torch.nn.Module):
    def forward(self, x, v):
        a = x.clone()
        a.diagonal().copy_(v[: a.diagonal().shape[0]])
        b = x.clone()
        b.diagonal(1).fill_(-1.0)
        c = x.clone()
        c.diagonal(-2).mul_(10)
        d = x.clone()
        d.fill_diagonal_(7.0)
        e = x.t().contiguous()
        e.fill_diagonal_(3.0, wrap=True)
        f = torch.diagonal_scatter(x, v[: x.diagonal(1).shape[0]], 1)
        return a, b, c, d, e, f


def test_writes_through_diagonals(tmp_path):
    # Writes into x.diagonal() reach x (they were lost before: wrong numbers); fill_diagonal_ with
    # and without wrap, tall and wide matrices through a dynamic row count (at least 3 rows: the
    # diagonal's length, learned by profiling, stays that of the example).
    check(DiagonalWrites(), (torch.randn(7, 3), torch.arange(10.0)), tmp_path / "m.onnx",
          others=[(torch.randn(5, 3), torch.arange(10.0)), (torch.randn(3, 3), torch.arange(10.0))], opset_version=17,
          input_names=["x", "v"], dynamic_axes={"x": {0: "n"}})


def test_fill_diagonal_of_a_cube(tmp_path):
    class M(torch.nn.Module):
        def forward(self, x):
            y = x * 2
            y.fill_diagonal_(0.0)
            return y

    check(M(), (torch.randn(3, 3, 3),), tmp_path / "m.onnx", opset_version=17)


class Special(torch.nn.Module):
    def forward(self, x, p):
        return (torch.lgamma(x), torch.digamma(x), torch.special.zeta(p + 1.5, p), torch.polygamma(2, p),
                torch.mvlgamma(p + 3, 3), torch.i0(x), torch.special.i0e(x), torch.special.i1(x), torch.special.i1e(x),
                torch.special.log_ndtr(x), torch.special.spherical_bessel_j0(x))


def test_special_functions(tmp_path):
    # Negative and non-integer x, poles (lgamma, digamma at 0 and -2), the Bessel series/asymptotic
    # switch at 20, the normal tail far below -1.
    x = torch.tensor([-30.0, -7.5, -2.0, -1.3, -0.5, 0.0, 1e-3, 0.5, 1.0, 2.5, 7.0, 19.5, 20.5, 35.0, 80.0])
    p = torch.linspace(0.2, 12.0, 15)
    check(Special(), (x, p), tmp_path / "m.onnx", opset_version=17)


@pytest.mark.parametrize("opset", [11, 13, 16])
def test_accumulating_scatters_before_opset_16(tmp_path, opset):
    # Duplicate indices accumulate at every opset (ONNX's scatters reduce only from opset 16).
    class M(torch.nn.Module):
        def forward(self, x, idx, src, rows, vals):
            a = x.scatter_add(1, idx, src)
            b = x.scatter(0, idx[:2], src[:2], reduce="multiply")
            c = x.index_put((rows,), vals, accumulate=True)
            d = torch.zeros(6, dtype=torch.long).scatter_add_(0, rows.abs(), torch.ones_like(rows))
            return a, b, c, d

    x = torch.randn(4, 5)
    idx = torch.tensor([[0, 0, 2], [1, 1, 1], [4, 0, 4], [3, 3, 3]])
    rows = torch.tensor([1, -1, 1, 0, 3])
    check(M(), (x, idx, torch.randn(4, 3), rows, torch.randn(5, 5)), tmp_path / "m.onnx", opset_version=opset)


class SmallLinalg(torch.nn.Module):
    def forward(self, a, b, v):
        spd = a @ a.mT + 4 * torch.eye(4)
        return (torch.linalg.inv(a), torch.inverse(a), torch.linalg.solve(a, b), torch.linalg.solve(a, v),
                torch.linalg.solve(a, b.mT, left=False), torch.linalg.cholesky(spd), torch.linalg.cholesky(spd, upper=True),
                torch.linalg.matrix_power(a, 3), torch.linalg.matrix_power(a, -2), torch.linalg.matrix_power(a, 0),
                torch.linalg.inv_ex(a)[0])


def test_small_linear_algebra(tmp_path):
    # A dynamic batch of 4x4 systems; the first matrix needs a row exchange (zero pivot).
    torch.manual_seed(0)
    a = torch.randn(3, 4, 4)
    a[0, 0, 0] = 0.0
    args = (a, torch.randn(3, 4, 2), torch.randn(3, 4))
    others = [(torch.randn(5, 4, 4), torch.randn(5, 4, 2), torch.randn(5, 4))]
    check(SmallLinalg(), args, tmp_path / "m.onnx", others=others, opset_version=17, rtol=1e-4, atol=1e-4,
          input_names=["a", "b", "v"], dynamic_axes={"a": {0: "n"}, "b": {0: "n"}, "v": {0: "n"}})


def test_unique_consecutive_and_bincount(tmp_path):
    class M(torch.nn.Module):
        def forward(self, x, w):
            v, inv, cnt = torch.unique_consecutive(x, return_inverse=True, return_counts=True)
            return v, inv, cnt, torch.bincount(x.flatten()), torch.bincount(x.flatten(), w, minlength=12)

    x = torch.tensor([[1, 1, 2, 2], [3, 1, 1, 5]])
    check(M(), (x, torch.rand(8)), tmp_path / "m.onnx", others=[(torch.tensor([[0, 0, 0, 9], [9, 2, 2, 2]]), torch.rand(8))],
          opset_version=17)


def test_block_diag_and_combinations(tmp_path):
    class M(torch.nn.Module):
        def forward(self, a, b, v):
            return (torch.block_diag(a, b, v, torch.tensor(5.0)), torch.combinations(v), torch.combinations(v, 3),
                    torch.combinations(v, 2, with_replacement=True), torch.combinations(v, 1))

    check(M(), (torch.randn(2, 3), torch.randn(3, 1), torch.arange(4.0)), tmp_path / "m.onnx", opset_version=17)


def test_writes_through_movedim_and_refused_views(tmp_path):
    class Moved(torch.nn.Module):
        def forward(self, x):
            y = x.clone()
            y.movedim(0, 2)[1:, 0] = 5.0
            z = x.clone()
            torch.movedim(z, (0, 1), (2, 0)).mul_(2)
            return y, z

    check(Moved(), (torch.randn(2, 3, 4),), tmp_path / "m.onnx", opset_version=17)

    class Unfolded(torch.nn.Module):  # a write through unfold's windows: refused, not lost
        def forward(self, x):
            y = x.clone()
            y.unfold(0, 2, 2).mul_(3)
            return y

    with pytest.raises(torch2onnx.UnsupportedError, match="unfold"):
        torch2onnx.export(Unfolded(), (torch.randn(6),), tmp_path / "u.onnx", opset_version=17)


def test_export_leaves_each_submodule_in_its_mode(tmp_path):
    # A model in train() holding a submodule in eval(): export must not switch the submodule to
    # training (model.train(was_training) would, and the user's next eager call would drop out).
    for script in (False, True):
        inner = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).eval()
        outer = torch.nn.Sequential(inner, torch.nn.ReLU())
        model = torch.jit.script(outer) if script else outer
        torch2onnx.export(model, (torch.randn(2, 4),), tmp_path / "m.onnx", opset_version=17)
        assert model.training and not model[0].training and not model[0][1].training


@pytest.mark.parametrize("opset", [11, 17])
def test_gcd_lcm(tmp_path, opset):
    # Euclid as an ONNX Loop that runs until every pair is done: zeros, signs, a pair of consecutive
    # Fibonacci numbers (the slowest case), int32 and broadcasting.
    class M(torch.nn.Module):
        def forward(self, a, b):
            return torch.gcd(a, b), torch.lcm(a, b), torch.gcd(a.int(), b[:1].int())

    a = torch.tensor([[0, 0, 12, -18, 832040], [7, -35, 1, 0, 100]])
    b = torch.tensor([[0, 5, -8, 24, 514229], [0, 49, 1, -9, 75]])
    g = torch.Generator().manual_seed(3)
    others = [(torch.randint(-1000, 1000, (3, 5), generator=g), torch.randint(-60, 60, (3, 5), generator=g))]
    check(M(), (a, b), tmp_path / "m.onnx", others=others, opset_version=opset, input_names=["a", "b"],
          dynamic_axes={"a": {0: "n"}, "b": {0: "n"}})
    # Exported on pairs that are all done before the first step (b == 0): Euclid's loop body is
    # still learned, and the model runs on other values.
    check(M(), (a, torch.zeros_like(b)), tmp_path / "z.onnx", others=[(a, b)] + others, opset_version=opset,
          input_names=["a", "b"], dynamic_axes={"a": {0: "n"}, "b": {0: "n"}})


@pytest.mark.parametrize("opset", [9, 17])
def test_integer_bitwise_ops(tmp_path, opset):
    # ONNX has BitwiseAnd & co. only from opset 18: and/or/xor/not on every integer type from bits,
    # with negative values, the int64 extremes, a Python number and broadcasting.
    class M(torch.nn.Module):
        def forward(self, a, b, u, s):
            return (a & b, a | b, a ^ b, ~a, a & 6, a.int() ^ b[:1].int(), s | s.flip(0), ~s, u & u.flip(0), u | 3, ~u,
                    u ^ u.flip(0), a.short() & b.short())

    big, small = torch.iinfo(torch.int64).max, torch.iinfo(torch.int64).min
    a = torch.tensor([[0, -1, 5, small, big, -123456789], [7, 12, -8, 1, -2, 1 << 40]])
    b = torch.tensor([[3, -1, -6, -1, small, 987654321], [5, 10, 8, big, -3, -(1 << 41)]])
    u = torch.tensor([0, 1, 127, 128, 255, 200], dtype=torch.uint8)
    s = torch.tensor([-128, -1, 0, 1, 127, 85], dtype=torch.int8)
    check(M(), (a, b, u, s), tmp_path / "m.onnx", opset_version=opset)


def test_histogram(tmp_path):
    # Bin counts, given range, weights with density, explicit edges and an empty range (widened by
    # 0.5 each way); the value equal to the last edge lands in the last bin, values outside nowhere.
    class M(torch.nn.Module):
        def forward(self, x, e, w):
            h1, b1 = torch.histogram(x, 5)
            h2, b2 = torch.histogram(x, 4, range=[-1.0, 1.0], weight=w, density=True)
            h3, b3 = torch.histogram(x, e)
            h4, b4 = torch.histogram(x * 0 + 1.0, 3)
            return h1, b1, h2, b2, h3, b3, h4, b4

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 7, generator=g)
    x[0, 0] = 2.0
    e = torch.tensor([-2.0, -0.5, 0.0, 0.3, 2.0])
    check(M(), (x, e, torch.rand(3, 7, generator=g)), tmp_path / "m.onnx", opset_version=17,
          others=[(torch.randn(3, 9, generator=g), e, torch.rand(3, 9, generator=g))], input_names=["x", "e", "w"],
          dynamic_axes={"x": {1: "n"}, "w": {1: "n"}})


def test_mode(tmp_path):
    # The smallest of the most frequent values and the last position holding it, along any dim,
    # with keepdim, on integers and on a 0-d tensor.
    class M(torch.nn.Module):
        def forward(self, x, k):
            a, ai = torch.mode(x, 1)
            b, bi = torch.mode(x, 0, keepdim=True)
            c, ci = torch.mode(k)
            d, di = torch.mode(x[0, 0])
            return a, ai, b, bi, c, ci, d, di

    x = torch.tensor([[3.0, 1, 3, 1, 2], [5, 5, 4, 4, 4], [7, 8, 9, 7, 9], [1, 1, 1, 1, 1]])
    k = torch.tensor([[2, 2, 1, 1, 3], [0, -1, -1, 0, 0]])
    check(M(), (x, k), tmp_path / "m.onnx", opset_version=17)


@pytest.mark.parametrize("opset", [13, 17])
def test_small_integer_powers(tmp_path, opset):
    # uint8 / int8 bases and exponents: ONNX's Pow types its base from int32 up, and ONNX Runtime's
    # kernels take the exponent as int32, int64, float or double only.
    class M(torch.nn.Module):
        def forward(self, u, e, s):
            return u.pow(e), s.pow(e), u.float().pow(e)

    u = torch.tensor([2, 3, 5, 0], dtype=torch.uint8)
    check(M(), (u, torch.tensor([1, 2, 3, 0], dtype=torch.uint8), torch.tensor([-2, 3, -1, 4], dtype=torch.int8)),
          tmp_path / "m.onnx", opset_version=opset)
