"""Op-family fixtures: one small module per family, so a failure names the family."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Arith(nn.Module):
    def forward(self, x, y):
        a = (x + 2) * y - x / (y.abs() + 1) + 3 ** x.clamp(-1, 1)
        b = torch.where(x > y, x, y) + (x // 0.7) + torch.remainder(x, 0.9) + x.sqrt().nan_to_num(0.0) * 0
        c = torch.maximum(x, y) - torch.minimum(x, y) + torch.rsqrt(y.abs() + 1) + torch.erf(x) + x.sign()
        return a, b, c, (x >= y).float(), (x != y) & (x < 0.5)


class SmallInts(nn.Module):
    """uint8/int8/int16 arithmetic: ONNX accepts these types in Add/Mul/Relu/... only from opset 14."""
    def forward(self, img, q, s):
        a = (img + img) * 2 - img // 3  # wraps around in uint8, as in torch
        b = torch.relu(q) + q.abs() - torch.max(q, -q)
        c = s * s + s.clamp(-100, 100) - s.neg()
        return a, b, c, (img > 100) & (q < 0), img.float() / 255 + q + s


class MathFns(nn.Module):
    def forward(self, x):
        p = x.abs() + 0.1
        return (torch.exp(x), torch.log(p), torch.log2(p), torch.sin(x), torch.cos(x), torch.atan(x), torch.floor(x),
                torch.ceil(x), torch.round(x), torch.trunc(x), torch.sigmoid(x), torch.tanh(x), torch.reciprocal(p),
                F.softplus(x, beta=2.0), F.elu(x), F.selu(x), F.leaky_relu(x, 0.2), F.hardswish(x), F.hardsigmoid(x),
                F.silu(x), F.mish(x), F.gelu(x, approximate="tanh"), F.relu6(x * 4), F.hardtanh(x), F.logsigmoid(x))


class Reduce(nn.Module):
    def forward(self, x):
        v, i = x.max(dim=1, keepdim=True)
        return (x.sum(), x.sum(dim=(1, 2)), x.mean(dim=-1, keepdim=True), x.amax(dim=0), x.prod(dim=2), v, i,
                x.argmax(dim=2), x.argmin(), x.var(dim=1), x.std(dim=2, unbiased=False), x.norm(p=2, dim=1),
                torch.logsumexp(x, dim=2), F.softmax(x, dim=1), F.log_softmax(x, dim=-1),
                x.topk(2, dim=2)[0], x.sort(dim=1, descending=True)[0], (x > 0).all(dim=1), (x > 0).any(),
                x.topk(3, dim=1, largest=False), x.sort(dim=2)[0])


class Shapes(nn.Module):
    def forward(self, x):
        n = x.size(0)
        a = x.view(n, -1).reshape(n, 4, -1).permute(0, 2, 1).contiguous().flatten(1)
        b = x.transpose(1, 3).unsqueeze(0).squeeze(0)
        c1, c2 = x.chunk(2, dim=1)
        parts = x.split([1, 3], dim=1)
        s = torch.stack([c1, c2], dim=2).sum(2)
        d = x[:, 1:3, ::2, -2:] * 2
        e = x.flip(2).roll(shifts=(1, -2), dims=(1, 3))
        f = x.select(1, 0).narrow(1, 1, 2).repeat(1, 2, 1)
        g = x[:, :1].expand(-1, 4, -1, -1)
        h = torch.cat([parts[0], parts[1], s], dim=1)
        return a, b, d, e, f, g, h, torch.unbind(x, 1)[2], torch.movedim(x, 1, -1)


class Index(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)

    def forward(self, x, idx):
        a = x.index_select(1, idx)
        b = torch.gather(x, 1, idx.view(1, -1).expand(x.size(0), -1))
        c = x.masked_fill(x > 0.5, -1.0)
        d = x[idx]
        e = self.emb(idx)
        f = x.scatter(1, idx.view(1, -1).expand(x.size(0), -1), 0.0)
        return a, b, c, d, e, f, torch.tril(x), torch.triu(x, 1)


class Creation(nn.Module):
    def forward(self, x):
        n = x.size(1)
        a = torch.zeros(2, n) + torch.ones_like(x[:2]) + torch.full((2, n), 3.0)
        b = torch.arange(n, dtype=torch.float32) * x
        return a, b, x.new_zeros((3, n)), torch.zeros_like(x, dtype=torch.int64)


class ConvPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(3, 4, 3, padding=1)
        self.c2 = nn.Conv2d(3, 6, 3, stride=2, padding=1, groups=3, dilation=1)
        self.c3 = nn.Conv3d(2, 2, 3, padding="same")
        self.t2 = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1)
        self.gn = nn.GroupNorm(2, 6)
        self.inn = nn.InstanceNorm2d(3, affine=True)
        self.ln = nn.LayerNorm([7])
        self.prelu = nn.PReLU(6)

    def forward(self, x, v, w):
        a = self.c1(v)
        b = self.prelu(self.gn(self.c2(x)))
        c = self.c3(w)
        d = self.t2(x)
        e = F.max_pool2d(x, 3, 2, 1, ceil_mode=True)
        f = F.avg_pool2d(x, 3, 2, ceil_mode=True)
        g = F.adaptive_avg_pool2d(x, (3, 5))
        h = F.adaptive_max_pool2d(x, 2)
        i = self.inn(x)
        j = self.ln(x)
        return a, b, c, d, e, f, g, h, i, j


class Resize(nn.Module):
    def forward(self, x):
        return (F.interpolate(x, scale_factor=2.0, mode="nearest"),
                F.interpolate(x, size=(5, 9), mode="bilinear", align_corners=False),
                F.interpolate(x, size=(10, 12), mode="bilinear", align_corners=True),
                F.interpolate(x, scale_factor=2.0, mode="bicubic", align_corners=False),
                F.pad(x, (1, 2, 0, 1)), F.pad(x, (2, 2, 1, 1), mode="reflect"), F.pad(x, (1, 1, 2, 0), mode="replicate"),
                F.pad(x, (1, 1, 1, 1), mode="circular"), F.pixel_shuffle(x[:, :4], 2), F.pixel_unshuffle(x, 2))


class MatMuls(nn.Module):
    def forward(self, a, b, v):
        return (a @ b, torch.bmm(a, b), torch.baddbmm(a @ b, a, b, beta=0.5, alpha=2.0), torch.mv(a[0], v),
                torch.dot(v, v), torch.outer(v, v), torch.addmm(b[0, 0], a[0], b[0]))


class Einsum(nn.Module):
    def forward(self, a, b):
        return torch.einsum("bij,bjk->bik", a, b)


class Unsupported(nn.Module):
    def forward(self, x):
        q, _ = torch.linalg.qr(x)
        return q.sum() + torch.det(x[0:2, 0:2])


class NeedsOpset(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, 0), torch.cumsum(x, dim=1)


class MaskIndex(nn.Module):
    def forward(self, x, m1, m2, m3):
        a = x[:, m1]
        b = x[m2]
        c = x[:, :, m3]
        y = x.clone()
        y[:, m1] = 0.5
        z = x.clone()
        z[m2] = x[m2] * 2 + 1
        w = x.clone()
        w[:, :, m3] = torch.arange(5.0).view(5, 1)
        u = x.clone()
        u[:, m1] = x[:, m1] - 3
        return a, b, c, y, z, w, u


class MaskIndexEllipsis(nn.Module):
    def forward(self, x, m):
        y = x.clone()
        y[..., m] = -1.0
        return x[..., m] * 2, y


class PoolDivisor(nn.Module):
    def forward(self, x, w):
        return (F.avg_pool2d(x, 3, 2, divisor_override=4), F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, divisor_override=5),
                F.avg_pool2d(x, (2, 3), (2, 2), (1, 1), ceil_mode=False, count_include_pad=False, divisor_override=2),
                F.avg_pool2d(x, 2, 3, 0, ceil_mode=True, divisor_override=3),
                F.avg_pool3d(w, 2, 2, 1, ceil_mode=True, divisor_override=7),
                F.avg_pool3d(w, (1, 2, 3), divisor_override=1))


class MHAFast(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x, pad):
        a, w = self.mha(x, x, x, key_padding_mask=pad)
        b, w2 = self.mha(x, x, x, key_padding_mask=pad, average_attn_weights=False)
        c, _ = self.mha(x, x, x, key_padding_mask=pad, need_weights=False)
        d, w3 = self.mha(x, x, x)
        return a, w, b, w2, c, d, w3


class MHAMasks(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2)
        self.cross = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x, kv, pad, am):
        fm = torch.zeros(am.shape).masked_fill(am, -3.0)
        a, w = self.mha(x, x, x, attn_mask=am, key_padding_mask=pad, average_attn_weights=False)
        b, w2 = self.mha(x, x, x, attn_mask=fm)
        c, _ = self.cross(x.transpose(0, 1), kv, kv, need_weights=False)
        return a, w, b, w2, c


class EncoderLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.post = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.pre = nn.TransformerEncoderLayer(8, 2, 12, dropout=0.0, activation="gelu", batch_first=True,
                                              norm_first=True)

    def forward(self, x, pad):
        return self.pre(self.post(x, src_key_padding_mask=pad), src_key_padding_mask=pad), self.post(x)


def _mask_inputs():
    x = torch.randn(2, 5, 3, 2)
    m1 = torch.tensor([True, False, True, True, False])
    m2 = torch.tensor([[True, False, False, True, True], [False, True, False, False, True]])
    m3 = torch.tensor([[True, False], [False, False], [True, True]])
    return [x, m1, m2, m3]


def _mha_inputs():
    return [torch.randn(2, 4, 8), torch.tensor([[False, False, True, False], [False, True, True, False]])]


class SDPA(nn.Module):
    """PyTorch 1.13's F._scaled_dot_product_attention: float and bool masks, causal, the weights."""

    def forward(self, q, k, v, fmask, bmask):
        a, w = F._scaled_dot_product_attention(q, k, v, fmask, 0.0, True, False)
        b = F._scaled_dot_product_attention(q, k, v, bmask, 0.0, False, False)[0]
        c = F._scaled_dot_product_attention(q, k[:, :, :3], v[:, :, :3], None, 0.0, False, True)[0]
        return a, w, b, c


class SDPATorch2(nn.Module):
    """Saved as PyTorch 2 writes F.scaled_dot_product_attention (see the rewrite in fixtures())."""

    def forward(self, q, k, v, bmask):
        a = F._scaled_dot_product_attention(q, k, v, bmask, 0.0, False, False)[0]
        b = F._scaled_dot_product_attention(q * 0.5, k, v, None, 0.0, False, True)[0]
        return a, b


class SDPACausal(nn.Module):
    def forward(self, q, k, v):
        return F._scaled_dot_product_attention(q, k, v, None, 0.0, False, True)[0]


def _sdpa_inputs():
    r = torch.randn
    keep = torch.rand(3, 5) > 0.5
    keep[:, 0] = True  # every query attends to some key
    return [r(2, 2, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 6), r(3, 5), keep]


def fixtures():
    r = torch.randn
    return {
        "op_arith": lambda: dict(model=Arith(), inputs=[r(3, 4), r(3, 4)]),
        "op_math": lambda: dict(model=MathFns(), inputs=[r(2, 5)]),
        "op_small_ints": lambda: dict(model=SmallInts(), inputs=[
            torch.randint(0, 256, (3, 5), dtype=torch.uint8), torch.randint(-128, 128, (3, 5), dtype=torch.int8),
            torch.randint(-300, 300, (3, 5), dtype=torch.int16)], mode="trace"),
        "op_reduce": lambda: dict(model=Reduce(), inputs=[r(3, 4, 5)]),
        "op_shapes_script": lambda: dict(model=Shapes(), inputs=[r(2, 4, 6, 5)]),
        "op_shapes_trace": lambda: dict(model=Shapes(), inputs=[r(2, 4, 6, 5)], mode="trace"),
        "op_shapes_dynamic": lambda: dict(model=Shapes(), inputs=[r(2, 4, 6, 5)], dynamic=["x:0=batch"]),
        "op_index": lambda: dict(model=Index(), inputs=[r(4, 5), torch.tensor([0, 2, 3])]),
        "op_creation": lambda: dict(model=Creation(), inputs=[r(3, 5)]),
        "op_convpool": lambda: dict(model=ConvPool(), inputs=[r(1, 3, 9, 7), r(2, 3, 8), r(1, 2, 4, 5, 6)],
                                    tol=(1e-3, 1e-4)),
        "op_resize": lambda: dict(model=Resize(), inputs=[r(1, 4, 4, 6)], tol=(1e-3, 1e-4)),
        "op_matmul": lambda: dict(model=MatMuls(), inputs=[r(2, 4, 3), r(2, 3, 5), r(3)]),
        "op_einsum": lambda: dict(model=Einsum(), inputs=[r(2, 4, 3), r(2, 3, 5)],
                                  min_opset=(12, "aten::einsum", 'torch.einsum("bij,bjk->bik", a, b)')),
        "op_needs_opset": lambda: dict(model=NeedsOpset(), inputs=[r(3, 4, 5)],
                                       min_opset=(11, "aten::cumsum", "torch.cumsum(x, 0)")),
        "op_maskindex_script": lambda: dict(model=MaskIndex(), inputs=_mask_inputs(),
                                            min_opset=(11, "aten::index_put", "z[m2] = x[m2] * 2 + 1")),
        "op_maskindex_trace": lambda: dict(model=MaskIndex(), inputs=_mask_inputs(), mode="trace",
                                           min_opset=(11, "aten::index_put", "z[m2] = x[m2] * 2 + 1")),
        "op_maskindex_ellipsis": lambda: dict(model=MaskIndexEllipsis(),
                                              inputs=[r(2, 3, 4), torch.tensor([1, 0, 1, 1]) > 0], mode="trace"),
        "op_pool_divisor": lambda: dict(model=PoolDivisor(), inputs=[r(1, 2, 9, 8), r(1, 2, 5, 6, 7)],
                                        tol=(1e-4, 1e-5)),
        "op_mha_fast_script": lambda: dict(model=MHAFast(), inputs=_mha_inputs(), tol=(1e-4, 1e-5)),
        "op_mha_fast_trace": lambda: dict(model=MHAFast(), inputs=_mha_inputs(), mode="trace", tol=(1e-4, 1e-5)),
        "op_encoder_layer_script": lambda: dict(model=EncoderLayers(), inputs=_mha_inputs(), tol=(1e-4, 1e-5)),
        "op_encoder_layer_trace": lambda: dict(model=EncoderLayers(), inputs=_mha_inputs(), mode="trace",
                                               tol=(1e-4, 1e-5)),
        "op_mha_masks": lambda: dict(model=MHAMasks(), inputs=[r(4, 2, 8), r(2, 5, 8), torch.tensor(
            [[False, False, True, False], [False, True, False, False]]), torch.triu(torch.ones(4, 4), 1) > 0],
                                     tol=(1e-4, 1e-5)),
        "op_sdpa_script": lambda: dict(model=SDPA(), inputs=_sdpa_inputs(), tol=(1e-4, 1e-5)),
        "op_sdpa_trace": lambda: dict(model=SDPA(), inputs=_sdpa_inputs(), mode="trace", tol=(1e-4, 1e-5)),
        "op_sdpa_causal_dynamic": lambda: dict(
            model=SDPACausal(), inputs=[r(2, 2, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 6)], tol=(1e-4, 1e-5),
            dynamic=["q:0=batch,2=queries", "k:0=batch,2=keys", "v:0=batch,2=keys"]),
        # A file saved by PyTorch 2 (aten::scaled_dot_product_attention, with `scale`): loads and converts.
        "op_sdpa_torch2": lambda: dict(
            model=SDPATorch2(), inputs=[_sdpa_inputs()[i] for i in (0, 1, 2, 4)], tol=(1e-4, 1e-5),
            rewrite_code=[("_0, _1 = torch._scaled_dot_product_attention(q, k, v, bmask)",
                           "_0 = torch.scaled_dot_product_attention(q, k, v, bmask)"),
                          ("_2, _3 = torch._scaled_dot_product_attention(torch.mul(q, 0.5), k, v, None, 0., False, True)",
                           "_2 = torch.scaled_dot_product_attention(q, k, v, None, 0., True, scale=0.25)")]),
        "err_unsupported": lambda: dict(model=Unsupported(), inputs=[r(4, 4)],
                                        expect_error="3 aten::linalg_qr"),
    }
