"""Fixtures for the less common aten ops: sampling, losses, statistics, cumulative scans, indexing
updates, layout, linear algebra and bit shifts. Inputs exercise edge cases (ignore_index, weights,
each reduction, ties, negative dims, keepdim); ops whose output sizes follow the input's get
dynamic axes with alt_inputs at other sizes."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GridSample(nn.Module):
    def forward(self, x, grid):
        a = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        b = F.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True)
        c = F.grid_sample(x, grid, mode="bicubic", padding_mode="reflection", align_corners=False)
        d = F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=True)
        e = F.grid_sample(x, grid, mode="bicubic", padding_mode="zeros", align_corners=True)
        return a, b, c, d, e


class RandomDraws(nn.Module):
    """Draws whose outcome is certain (probabilities 0 and 1, empty ranges), so they compare exactly."""
    def forward(self, x):
        q = (x > 0).float()
        a = torch.bernoulli(q)
        b = q.bernoulli(1.0) + torch.zeros_like(q).bernoulli(0.0)
        c = torch.empty_like(x).uniform_(2.5, 2.5)
        d = torch.normal(x, 0.0)
        return a, b, c, d, torch.bernoulli(q.double())


class ImplicitInts(nn.Module):
    def forward(self, x, i):
        k = (x > 0).sum()
        return x[:k], x.narrow(0, 0, i), torch.ones(i) * k


class ConvSame(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 3, 4, 3))
        self.w1 = nn.Parameter(torch.randn(2, 3, 5))

    def forward(self, x, s):
        return (F.conv2d(x, self.w, padding="same", dilation=(1, 2)), F.conv2d(x, self.w, padding="valid"),
                F.conv1d(s, self.w1, padding="same"))


class ClassLosses(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.tensor([0.2, 1.0, 2.0, 0.5, 1.5]))
        self.register_buffer("w3", torch.tensor([1.0, 0.3, 2.0]))

    def forward(self, x, t, img, tmap, p):
        lp = F.log_softmax(x, 1)
        limg = F.log_softmax(img, 1)
        return (F.nll_loss(lp, t), F.nll_loss(lp, t, weight=self.w, reduction="sum"),
                F.nll_loss(lp, t, ignore_index=1, reduction="none"), F.nll_loss(lp, t, weight=self.w, ignore_index=2),
                F.nll_loss(limg, tmap, ignore_index=0), F.nll_loss(limg, tmap, weight=self.w3, reduction="none"),
                F.nll_loss(lp[0], t[0]),
                F.cross_entropy(x, t), F.cross_entropy(x, t, weight=self.w, label_smoothing=0.2),
                F.cross_entropy(x, t, ignore_index=3, label_smoothing=0.1, reduction="sum"),
                F.cross_entropy(img, tmap, weight=self.w3, ignore_index=2, label_smoothing=0.3, reduction="none"),
                F.cross_entropy(img, tmap, weight=self.w3, ignore_index=1, label_smoothing=0.25),
                F.cross_entropy(x, p), F.cross_entropy(x, p, weight=self.w, label_smoothing=0.1, reduction="none"),
                F.cross_entropy(x[1], t[1], label_smoothing=0.1))


class ValueLosses(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("pw", torch.tensor([1.0, 2.0, 0.5, 3.0]))

    def forward(self, x, y, w, sign):
        return (F.binary_cross_entropy_with_logits(x, y),
                F.binary_cross_entropy_with_logits(x * 20, y, weight=w, pos_weight=self.pw, reduction="none"),
                F.binary_cross_entropy(x.sigmoid(), y, reduction="sum"), F.binary_cross_entropy(x.sigmoid(), y, weight=w),
                F.mse_loss(x, y), F.l1_loss(x, y, reduction="none"), F.smooth_l1_loss(x, y, beta=0.5),
                F.smooth_l1_loss(x, y, beta=0.0, reduction="sum"), F.huber_loss(x, y, delta=0.7, reduction="none"),
                F.kl_div(F.log_softmax(x, 1), y, reduction="batchmean"), F.kl_div(x, y - 0.5, log_target=True),
                F.kl_div(x, y, reduction="none"), F.soft_margin_loss(x, sign), F.margin_ranking_loss(x, y, sign, margin=0.1),
                F.hinge_embedding_loss(x, sign, margin=0.5, reduction="none"), F.hinge_embedding_loss(x, y),
                F.poisson_nll_loss(x, y), F.poisson_nll_loss(x.abs(), y * 3, log_input=False, full=True))


class Stats(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("edges", torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0]))

    def forward(self, x, rows, vals):
        v, m = torch.var_mean(x, 1)
        s, m2 = torch.std_mean(x, (0, 2), unbiased=False, keepdim=True)
        v3, m3 = torch.var_mean(x, dim=-1, correction=2)
        v4, m4 = torch.var_mean(x)
        lo, hi = torch.aminmax(x, dim=1, keepdim=True)
        lo2, hi2 = torch.aminmax(x)
        r = (x * 2).round() / 2  # lands on the edges
        xn = torch.where(x > 1, torch.full_like(x, float("nan")), x)
        srt = rows.sort(dim=1).values
        return (v, m, s, m2, v3, m3, v4, m4, x.var(1), x.std(dim=(0, 2), keepdim=True), x.var(unbiased=False), lo, hi,
                lo2, hi2, torch.count_nonzero(x.round(), dim=1), torch.count_nonzero(x.round()), torch.nansum(xn),
                torch.nanmean(xn, 1), torch.nansum(xn, dim=(0, 2), keepdim=True), torch.histc(x, 7),
                torch.histc(r, 5, -1, 1), torch.bucketize(r, self.edges), torch.bucketize(r, self.edges, right=True, out_int32=True),
                torch.searchsorted(srt, vals), torch.searchsorted(srt, vals.round(), side="right"),
                torch.searchsorted(rows, vals, sorter=rows.argsort(dim=1)), torch.searchsorted(self.edges, r))


class Cumulative(nn.Module):
    def forward(self, x, k):
        return (torch.cumprod(x, 1), torch.cumprod(k, 0), torch.cumprod(k, -1, dtype=torch.float64),
                torch.logcumsumexp(x, -1), torch.cummax(x, 1), torch.cummin(x, 0), torch.cummax(k, 1), torch.cummin(k, -1))


class ReduceDtypes(nn.Module):
    """Existing reductions on integers and with a dtype argument."""
    def forward(self, x, k):
        v, i = torch.max(k, 1)
        w, j = torch.min(k, 0, keepdim=True)
        return (v, i, w, j, k.amax(1), x.sum(1, dtype=torch.float64), x.mean(dtype=torch.float64), k.sum(dtype=torch.int32),
                k.prod(1), torch.clamp(x, min=x[0], max=x[1] + 1), x.type_as(k), x.new_full((2, 3), 7))


class Layout(nn.Module):
    def forward(self, x, v, w):
        b1, b2, b3 = torch.broadcast_tensors(x, v[:1].view(1, 1, 1), x[:, :1])
        g1, g2 = torch.meshgrid(v, w, indexing="ij")
        h1, h2, h3 = torch.meshgrid(v, w, v[:2], indexing="xy")
        p1 = torch.tensor_split(x, 4, dim=1)
        p2 = torch.tensor_split(x, [1, 4, -1], dim=-1)
        p3 = torch.tensor_split(x, torch.tensor([2, 3]), dim=1)
        hs = torch.hsplit(x, 3)
        vs = torch.vsplit(x, [1])
        ds = torch.dsplit(x, [2])
        stacks = (torch.hstack([v, w]), torch.hstack([x, x]), torch.vstack([v, v]), torch.dstack([v, v]),
                  torch.column_stack([v, v.unsqueeze(1)]), torch.atleast_3d(v), torch.atleast_2d(x.sum()), torch.atleast_1d(x))
        flips = (torch.fliplr(x), torch.flipud(x), torch.rot90(x, 1, [1, 2]), torch.rot90(x, -1, [0, 2]).contiguous(), torch.rot90(x, 2),
                 torch.rot90(x, 4))
        reps = (torch.repeat_interleave(x, 2, dim=1), torch.repeat_interleave(v, 3), torch.repeat_interleave(x, 2),
                x.repeat_interleave(torch.tensor([1, 0, 2, 1, 3, 1]), dim=1), x.repeat_interleave(torch.tensor([2]), dim=-1))
        return (b1, b2, b3, g1, g2, h1, h2, h3, p1, p2, p3, hs, vs, ds, stacks, flips, reps, torch.cartesian_prod(v, w),
                F.channel_shuffle(x.unsqueeze(-1), 3), torch.ravel(x), torch._dim_arange(x, 2), x.swapdims(0, 2).contiguous(),
                x.narrow_copy(2, 1, 2))


class SplitDynamic(nn.Module):
    def forward(self, x):
        return torch.tensor_split(x, 3, dim=0), torch.tensor_split(x, 2, dim=1)


class RepeatComputed(nn.Module):
    def forward(self, x, r):
        return torch.repeat_interleave(x, r, dim=0), torch.repeat_interleave(r), x.repeat_interleave(r[0], dim=1)


class Windows(nn.Module):
    def forward(self, x, img, cols, cols2):
        return (x.unfold(1, 3, 2), x.unfold(-1, 4, 1), x.unfold(0, 1, 1), img.unfold(2, 2, 2), F.unfold(img, 3),
                F.unfold(img, (2, 3), dilation=(2, 1), padding=1, stride=(2, 1)), F.unfold(img[0], 2, stride=2),
                F.fold(cols, (6, 7), 3, padding=1), F.fold(cols2, (7, 8), (2, 3), dilation=(1, 2), stride=(2, 1)),
                F.fold(cols2[0], (7, 8), (2, 3), dilation=(1, 2), stride=(2, 1)))


class WindowsDynamic(nn.Module):
    def forward(self, x, img):
        return x.unfold(1, 3, 2), F.unfold(img, (2, 3), padding=(1, 0), stride=(2, 3)), F.unfold(img, 2)


class Linalg(nn.Module):
    def forward(self, a, b, m, v, p, q):
        return (torch.tensordot(a, b, dims=([1, 2], [1, 0])), torch.tensordot(a, b, 1), torch.tensordot(a, a, 3),
                torch.inner(a, b.permute(2, 1, 0)), torch.inner(v, v), torch.addmv(v, m, v, beta=0.5, alpha=2.0),
                torch.addr(m, v, v, beta=0.0), torch.linalg.multi_dot([v, m, m, v]), torch.chain_matmul(m, m, m),
                torch.kron(m, a), torch.cross(p, q, dim=1), torch.linalg.cross(p, q[:1]), torch.cross(p, q),
                torch.diagonal(a, 1, 1, 2), torch.diagonal(a, -1, 0, 2), torch.diagonal(a, 7), torch.trace(m),
                torch.diag(v), torch.diag(v, -2), torch.diag(m, 1), torch.diag_embed(a, 1), torch.diag_embed(a, -1, 0, 2))


class Distances(nn.Module):
    def forward(self, a, b, z):
        return (torch.cdist(a, b), torch.cdist(a, b, p=1.0), torch.cdist(a, b, p=float("inf")), torch.cdist(a.round(), b.round(), p=0.0),
                torch.cdist(a, b, p=3.0), F.pairwise_distance(a, a.flip(0)), F.pairwise_distance(a[0], a[1], p=1.0, keepdim=True),
                F.pdist(a[0], 1.5), F.cosine_similarity(a, a.flip(0), dim=-1), F.cosine_similarity(a, z, dim=2),
                F.cosine_similarity(z, z), torch.linalg.norm(a), torch.linalg.norm(a, dim=1, ord=3),
                torch.linalg.norm(a[0], "fro"), torch.linalg.norm(a[0], float("inf")), torch.linalg.matrix_norm(a, ord=-1),
                torch.linalg.matrix_norm(a, 1, dim=(0, 2), keepdim=True), torch.linalg.matrix_norm(a, float("-inf")),
                torch.linalg.vector_norm(a, 0, dim=(0, 2)), torch.linalg.vector_norm(a, float("-inf")),
                torch.norm(a, 2, 1, True), torch.norm(a, p=1, dtype=torch.float64), torch.linalg.vector_norm(a, -1.5, 1))


class Determinants(nn.Module):
    def forward(self, m):
        s, l = torch.linalg.slogdet(m)
        return torch.linalg.det(m), torch.det(m[0]), torch.logdet(m), s, l


class IndexUpdate(nn.Module):
    """`cols` is an input rather than a slice of x: at opset 10, ONNX Runtime's Slice shape inference
    gives a slice of a symbolic dim that dim's name, and reuses buffers of the wrong size."""
    def forward(self, x, idx, src, fidx, cols):
        return (x.index_add(0, idx, src), x.index_add(1, idx, cols * 2), torch.index_add(x, 0, idx, src, alpha=2.0),
                x.index_copy(0, torch.tensor([4, 1, 2]), src), x.index_fill(1, fidx, -1.0), x.index_fill(0, idx, x[0, 0]),
                x.index_reduce(0, idx, src, "prod"), x.index_reduce(0, idx, src, "mean", include_self=False),
                x.index_reduce(1, idx, cols * 2, "amax"), x.index_reduce(0, idx, src, "amin", include_self=False),
                x.index_reduce(0, idx, src, "mean"), x.put(torch.tensor([0, -1, 7]), cols[0]), x.long().index_add(0, idx, src.long()))


class UpdatesNewer(nn.Module):
    def forward(self, x, idx, src):
        return x.put(idx, src[0], accumulate=True), x.masked_scatter(x > 0, src * 10)


class Selection(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(10, 3))

    def forward(self, x, idx, bags, offs, w, ends):
        return (torch.masked_select(x, x > 0), torch.masked_select(x, x[0] > 0), torch.take(x, torch.tensor([[0, -1], [3, 7]])),
                torch.take_along_dim(x, torch.tensor([1, 0, 19])), F.one_hot(idx, 6), F.one_hot(idx),
                F.embedding_bag(bags, self.table, offs), F.embedding_bag(bags, self.table, offs, mode="max"),
                F.embedding_bag(bags, self.table, offs, mode="sum", per_sample_weights=w),
                F.embedding_bag(bags, self.table, ends, include_last_offset=True, padding_idx=2),
                F.embedding_bag(bags, self.table, ends, mode="max", include_last_offset=True),
                F.embedding_bag(bags.view(2, -1), self.table, mode="sum", padding_idx=4),
                F.embedding_bag(bags.view(2, -1), self.table, mode="mean"),
                F.embedding_bag(bags.view(2, -1), self.table, mode="max", padding_idx=4))


class SelectNewer(nn.Module):
    def forward(self, x, i):
        return torch.take_along_dim(x, x.argsort(1), 1), torch.take_along_dim(x, i, 0), torch.take_along_dim(x, i[:, 1:2], 1)


class MathShifts(nn.Module):
    def forward(self, i, u, x, y):
        return (i << 2, i >> 1, i >> torch.tensor(3), u << 1, u >> 2, torch.bitwise_left_shift(i, i.abs() % 5),
                torch.bitwise_right_shift(i, 2), torch.bitwise_right_shift(i.int(), i.abs().int() % 7), (i * 0 + 5) << 3,
                torch.logaddexp(x, y), torch.logaddexp2(x, y), torch.logaddexp(x * float("inf"), x * float("inf")),
                torch.heaviside(x.round(), y), torch.xlogy(x.round(), y.abs()), torch.special.xlog1py(x, y.abs()),
                torch.special.entr(x), torch.hypot(x, y), torch.logit(x.sigmoid()), torch.logit(x, eps=0.1), torch.frac(x * 3),
                torch.deg2rad(x), torch.rad2deg(i), torch.sinc(x.round()), torch.copysign(x, y), torch.copysign(x, y * 0),
                torch.copysign(i, -1), torch.signbit(y * 0), torch.signbit(i), torch.float_power(x.abs(), 2.5),
                torch.fmax(torch.where(x > 0, x, x / 0 * 0), y), torch.fmin(x, torch.where(y > 0, y, y / 0 * 0)), torch.exp2(x),
                torch.erfinv(torch.tanh(x)), torch.erfinv(torch.tensor([-1.0, 1.0, 1.5, 0.0, -0.999999])),
                torch.erfinv(torch.tanh(x).double()))


class RangesComputed(nn.Module):
    """Sequences whose length comes from a dynamic size, composed in the graph."""
    def forward(self, x):
        n = x.size(0)
        return (torch.linspace(-1.0, float(n), n), torch.logspace(0.5, -1.0, n, base=2.0), torch.hann_window(n),
                torch.hamming_window(n, periodic=False), torch.blackman_window(n), torch.bartlett_window(n, periodic=False),
                torch.bartlett_window(n), torch.hann_window(n, periodic=False), torch.linspace(0.0, 1.0, 5))


class NnForms(nn.Module):
    def __init__(self):
        super().__init__()
        self.wt = nn.Parameter(torch.randn(3, 4, 5))
        self.bt = nn.Parameter(torch.randn(5))
        self.g = nn.Parameter(torch.rand(5, 1, 1) + 0.5)
        self.v = nn.Parameter(torch.randn(5, 4, 3))

    def forward(self, x, y):
        ln = torch.native_layer_norm(y, [3, 4], self.v[0].t(), self.v[1].t(), 1e-5)
        return (torch.conv_tbc(x, self.wt, self.bt, 1), ln[0], ln[1], ln[2], torch._weight_norm(self.v, self.g, 0),
                torch._weight_norm(self.v, self.g[0, 0, 0], -1), torch._weight_norm(self.v, self.g.view(1, 1, 5)[..., :3], 2),
                F.rrelu(y), F.rrelu(y, 0.2, 0.4), torch._log_softmax(y, 1, False))


def _class_inputs():
    t = torch.tensor([0, 2, 1, 3, 2, 4])
    tmap = torch.randint(0, 3, (2, 4, 5))
    tmap[0, 0, :3] = torch.tensor([0, 1, 2])
    return [torch.randn(6, 5), t, torch.randn(2, 3, 4, 5), tmap, torch.softmax(torch.randn(6, 5), 1)]


def _class_alt():
    return [torch.randn(3, 5), torch.tensor([4, 3, 1]), torch.randn(3, 3, 2, 7), torch.randint(0, 3, (3, 2, 7)),
            torch.softmax(torch.randn(3, 5), 1)]


def _value_inputs(n):
    y = torch.rand(n, 4)
    y[0, :2] = 0
    return [torch.randn(n, 4), y, torch.rand(n, 4), torch.randint(0, 2, (n, 4)).float() * 2 - 1]


def _math_inputs():
    i = torch.tensor([[-7, -1, 0, 3], [12, -128, 255, -3]])
    u = torch.tensor([[0, 1, 127, 200], [255, 3, 64, 9]], dtype=torch.uint8)
    x = torch.tensor([[0.0, -0.0, 1.5, -2.25], [0.5, -0.5, 3.0, 0.1]])
    y = torch.tensor([[-0.0, 2.0, -1.0, 0.0], [1.5, -3.0, 0.25, -0.0]])
    return [i, u, x, y]


def fixtures():
    r = torch.randn
    grid = lambda *s: torch.rand(*s, 2) * 2.4 - 1.2  # noqa: E731  (reaches past the border)
    return {
        "tail_grid_sample": lambda: dict(
            model=GridSample(), inputs=[r(2, 3, 5, 6), grid(2, 4, 7)], dynamic=["x:0=n,2=h,3=w", "grid:0=n,1=gh,2=gw"],
            alt_inputs=[r(1, 3, 7, 4), grid(1, 3, 5)], tol=(1e-4, 1e-5),
            min_opset=(16, "aten::grid_sampler", 'c = F.grid_sample(x, grid, mode="bicubic"')),
        "tail_random_draws": lambda: dict(model=RandomDraws(), inputs=[r(3, 4)], dynamic=["x:0=n"], alt_inputs=[r(5, 4)]),
        "tail_implicit_ints": lambda: dict(model=ImplicitInts(), inputs=[r(6), torch.tensor(3)], data=True,
                                           min_opset=(10, "aten::slice", "return x[:k]")),
        "tail_conv_same_trace": lambda: dict(model=ConvSame(), inputs=[r(1, 3, 7, 8), r(2, 3, 9)], mode="trace", data=True,
                                             dynamic=["x:2=h,3=w", "s:2=len"], alt_inputs=[r(1, 3, 9, 6), r(2, 3, 6)],
                                             tol=(1e-4, 1e-5)),
        "tail_conv_same_script": lambda: dict(model=ConvSame(), inputs=[r(1, 3, 7, 8), r(2, 3, 9)], tol=(1e-4, 1e-5)),
        "tail_loss_class": lambda: dict(model=ClassLosses(), inputs=_class_inputs(), data=True, tol=(1e-4, 1e-5),
                                        dynamic=["x:0=n", "t:0=n", "img:0=b,2=h,3=w", "tmap:0=b,1=h,2=w", "p:0=n"],
                                        alt_inputs=_class_alt()),
        "tail_loss_value": lambda: dict(model=ValueLosses(), inputs=_value_inputs(5), tol=(1e-4, 1e-5), data=True,
                                        dynamic=["x:0=n", "y:0=n", "w:0=n", "sign:0=n"], alt_inputs=_value_inputs(3)),
        "tail_stats": lambda: dict(model=Stats(), inputs=[r(3, 4, 5), r(3, 6), r(3, 4)], tol=(1e-4, 1e-5),
                                   dynamic=["x:0=a,2=b", "rows:0=m", "vals:0=m,1=j"],
                                   alt_inputs=[r(2, 4, 7), r(2, 6), r(2, 5)]),
        "tail_cumulative": lambda: dict(model=Cumulative(), inputs=[r(3, 5), torch.randint(-2, 3, (4, 6))],
                                        dynamic=["x:0=a,1=b", "k:0=c,1=d"], data=True,
                                        alt_inputs=[r(2, 7), torch.randint(-2, 3, (5, 3))]),
        "tail_reduce_dtypes": lambda: dict(model=ReduceDtypes(), inputs=[r(3, 4), torch.randint(-5, 5, (3, 4))],
                                           dynamic=["x:0=a", "k:0=a"], data=True, alt_inputs=[r(5, 4), torch.randint(-5, 5, (5, 4))]),
        "tail_layout": lambda: dict(model=Layout(), inputs=[r(3, 6, 5), r(4), r(3)], dynamic=["x:0=a,2=b", "v:0=n", "w:0=m"], data=True,
                                    alt_inputs=[r(2, 6, 7), r(5), r(2)]),
        "tail_split_dynamic": lambda: dict(model=SplitDynamic(), inputs=[r(7, 5)], dynamic=["x:0=a,1=b"], alt_inputs=[r(4, 6)],
                                           min_opset=(10, "aten::tensor_split", "torch.tensor_split(x, 3, dim=0)")),
        "tail_repeat_computed": lambda: dict(model=RepeatComputed(), inputs=[r(4, 3), torch.tensor([2, 0, 1, 3])], data=True,
                                             min_opset=(11, "aten::repeat_interleave", "torch.repeat_interleave(x, r, dim=0)")),
        "tail_windows": lambda: dict(model=Windows(), inputs=[r(3, 10), r(1, 2, 6, 7), r(2, 18, 42), r(1, 12, 12)],
                                     dynamic=["x:0=a,1=b"], data=True, alt_inputs=[r(2, 9), r(1, 2, 6, 7), r(2, 18, 42), r(1, 12, 12)]),
        "tail_windows_dynamic": lambda: dict(model=WindowsDynamic(), inputs=[r(3, 10), r(2, 3, 7, 9)],
                                             dynamic=["x:1=b", "img:2=h,3=w"], data=True,
                                             alt_inputs=[r(3, 7), r(2, 3, 6, 11)],
                                             min_opset=(10, "aten::im2col", "F.unfold(img, (2, 3), padding=(1, 0)")),
        "tail_linalg": lambda: dict(model=Linalg(), inputs=[r(2, 3, 4), r(4, 3, 5), r(3, 3), r(3), r(2, 3), r(2, 3)],
                                    tol=(1e-4, 1e-5), dynamic=["a:0=n", "p:0=k", "q:0=k"],
                                    alt_inputs=[r(3, 3, 4), r(4, 3, 5), r(3, 3), r(3), r(4, 3), r(4, 3)]),
        "tail_distances": lambda: dict(model=Distances(), inputs=[r(2, 4, 3), r(2, 5, 3), torch.cat([r(1, 4, 3), torch.zeros(1, 4, 3)])],
                                       tol=(1e-4, 1e-5), dynamic=["a:1=p", "b:1=q", "z:1=p"],
                                       alt_inputs=[r(2, 6, 3), r(2, 2, 3), torch.cat([torch.zeros(1, 6, 3), r(1, 6, 3)])]),
        "tail_det": lambda: dict(model=Determinants(), inputs=[torch.randn(3, 4, 4) + 3 * torch.eye(4)], tol=(1e-4, 1e-5),
                                 min_opset=(11, "aten::linalg_det", "return torch.linalg.det(m)")),
        "tail_index_update": lambda: dict(model=IndexUpdate(), inputs=[r(5, 4), torch.tensor([0, 2, 0]), r(3, 4),
                                                                       torch.tensor([-1, 1]), r(5, 3)], data=True,
                                          dynamic=["x:1=w", "src:1=w"], alt_inputs=[r(5, 6), torch.tensor([0, 2, 0]), r(3, 6),
                                                                                   torch.tensor([-1, 1]), r(5, 3)]),
        "tail_updates_newer": lambda: dict(model=UpdatesNewer(), inputs=[r(4, 5), torch.tensor([0, 3, 0, -1, 7]), r(4, 5)],
                                           data=True, min_opset=(16, "aten::put", "x.put(idx, src[0], accumulate=True)")),
        "tail_selection": lambda: dict(model=Selection(), inputs=[r(5, 4), torch.tensor([0, 3, 5, 1]), torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]),
                                                                  torch.tensor([0, 2, 2, 5]), torch.rand(8), torch.tensor([0, 2, 2, 5, 8])],
                                        data=True),
        "tail_select_newer": lambda: dict(model=SelectNewer(), inputs=[r(4, 5), torch.tensor([[0, 3, 1, 2, 2]])],
                                          dynamic=["x:0=a"], alt_inputs=[r(6, 5), torch.tensor([[5, 3, 1, 0, 2]])], data=True,
                                          min_opset=(11, "aten::take_along_dim", "torch.take_along_dim(x, x.argsort(1), 1)")),
        "tail_ranges_computed": lambda: dict(model=RangesComputed(), inputs=[r(7, 2)], dynamic=["x:0=n"], alt_inputs=[r(4, 2)]),
        "tail_nn_forms": lambda: dict(model=NnForms(), inputs=[r(6, 2, 4), r(2, 3, 4)], dynamic=["x:0=t,1=b", "y:0=b"],
                                      alt_inputs=[r(3, 5, 4), r(4, 3, 4)], tol=(1e-4, 1e-5)),
        "tail_math_shifts": lambda: dict(model=MathShifts(), inputs=_math_inputs(), data=True, tol=(1e-4, 1e-5)),
    }
