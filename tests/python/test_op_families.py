"""Ops whose edge cases the converter once got wrong or lacked: order statistics (kthvalue, median,
nanmedian, msort, quantile, nanquantile) with NaN and ties-free data, 0-d tensors given to ops with
a dim argument, softplus's threshold, align_corners resizes by a scale factor. Each exported through
torch2onnx.export and compared with eager PyTorch in ONNX Runtime and in torch2onnx's runtime, at
the example sizes and, where axes are dynamic, at other sizes."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

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
