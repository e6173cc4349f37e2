"""Converter fixtures for forms that user models take and the other zoos do not cover: builtins that
scripted code resolves to when a file is loaded without Python (aten::__interpolate), fake
quantization from quantization-aware training, unique, as_strided with x.stride(), NumPy-style
x.T and nonzero(as_tuple=True), x.set_(y)."""
import math
from typing import List, Optional

import torch
from torch import nn
from torch.nn import functional as F


def _nearest2x(x):
    return torch.ops.aten.__interpolate(x, None, 2.0, "nearest", None, None, False)


def _bilinear_to(x, y):
    return torch.ops.aten.__interpolate(x, [y.size(0), y.size(1)], None, "bilinear", False, None, False)


def _bicubic6(x):
    return torch.ops.aten.__interpolate(x, 6, None, "bicubic", True, None, False)


def _recomputed(x):
    return torch.ops.aten.__interpolate(x, None, [1.5, 2.5], "bilinear", True, True, False)


def _bilinear_by(x):
    return torch.ops.aten.__interpolate(x, None, 1.5, "bilinear", False, None, False)


class InterpolateBuiltin(nn.Module):
    """aten::__interpolate, what F.interpolate is in a scripted file loaded without Python: sizes
    from another input, one int size, scales with and without recompute_scale_factor."""
    def forward(self, x, y):
        return _nearest2x(x), _bilinear_to(x, y), _bicubic6(x), _recomputed(x), _bilinear_by(x)


class FakeQuant(nn.Module):
    """Per tensor (uint8, int8, a 7-bit range, tensor qparams) and per channel."""
    def forward(self, x, scale, zp):
        a = torch.fake_quantize_per_tensor_affine(x, 0.05, 3, 0, 255)
        b = torch.fake_quantize_per_tensor_affine(x, 1.0 / 127, 0, -128, 127)
        c = torch.fake_quantize_per_tensor_affine(x, 0.1, 0, 0, 127)
        d = torch.fake_quantize_per_tensor_affine(x, scale, zp, -128, 127)
        cs = torch.tensor([0.02, 0.05, 0.1, 0.2])
        cz = torch.tensor([0, 1, 2, 3], dtype=torch.int32)
        e = torch.fake_quantize_per_channel_affine(x, cs, cz, 1, 0, 255)
        f = torch.fake_quantize_per_channel_affine(x, cs, cz * 0, 1, -128, 127)
        g = torch.fake_quantize_per_channel_affine(x, cs, cz, 1, 0, 15)
        return a, b, c, d, e, f, g


class UniqueOps(nn.Module):
    def forward(self, x, rows):
        u, counts = torch.unique(x, sorted=True, return_counts=True)
        v, inverse = torch.unique(x, sorted=True, return_inverse=True)
        r, rinv = torch.unique(rows, dim=0, sorted=True, return_inverse=True)
        return u, counts, v, inverse, r, rinv


class AsStrided(nn.Module):
    """Windows over a tensor through its strides (what hand-written unfold code does)."""
    def forward(self, x):
        size = list(x.size())
        size[1] = size[1] * 2 - 1
        st = list(x.stride())
        st[1] = st[1] // 2
        return x.as_strided((3, 3, 3), (1, 4, 2), storage_offset=2), x.as_strided(size, st), x[:, : x.stride(1)]


class NumpyForms(nn.Module):
    def forward(self, x, y):
        rows, cols = torch.nonzero(x > 0, as_tuple=True)
        x.set_(y)
        return x.T, rows, cols, x * 2


class Spectral(nn.Module):
    """torch.stft and the complex values it returns: magnitudes, parts, a shorter window centred in
    n_fft, normalization, a 1-D signal, in-place scaling of a complex tensor."""
    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hann_window(48))

    def forward(self, x, mono):
        spec = torch.stft(x, 64, hop_length=16, win_length=48, window=self.window, normalized=True, return_complex=True)
        spec /= 2.0
        pair = torch.view_as_real(torch.stft(mono, 32, return_complex=True))
        full = torch.stft(x, 32, hop_length=8, onesided=False, return_complex=True, center=False)
        return spec.abs().pow(2), spec.real, spec.imag, pair, full.abs(), spec.reshape(-1, spec.size(-1)).abs()


class RefinedLoop(nn.Module):
    """A loop that carries an Optional list only because `is not None` refines it inside (the body
    passes it through), and a trip count from math.ceil of a size ratio (Emformer's mask code)."""
    def __init__(self, use_mask: bool):
        super().__init__()
        self.use_mask = use_mask

    def forward(self, x):
        cols: Optional[List[bool]] = None
        if self.use_mask:
            cols = [True, False, True]
        n = math.ceil(x.size(0) / 4)
        out = torch.zeros(x.size(1))
        for i in range(n):
            out = out + x[i * 4]
            if cols is not None:
                out = out + float(len(cols))
        return out, torch.tensor(float(math.floor(x.size(1) / 3)))


class EyeDtype(nn.Module):
    """torch.eye(n, dtype=...): the dtype (an int in TorchScript) is not a column count."""
    def forward(self, x):
        return (torch.eye(x.shape[0], dtype=torch.float64), torch.eye(4, dtype=torch.long), torch.eye(x.size(1), 3),
                torch.eye(x.size(1), x.size(2), dtype=torch.int32))


class InplaceInIf(nn.Module):
    """In-place writes inside if-branches to tensors from before the if: through a select, a mask,
    a slice of a local tensor, and a whole-tensor zero_ (the writes must leave the If as results)."""
    def forward(self, x, y):
        state = torch.zeros(3, x.size(1))
        if x.sum() > 0:
            x[0] = y
            state[:] = y * 2
        else:
            x[x < 0] = 0.0
            state[1:, 1] += 1.0
        z = x.clone()
        if y.mean() > 0:
            z.zero_()
        return x + 1, state, z


class ComputedArgs(nn.Module):
    """Arguments that are tensors or computed: baddbmm/addmm factors, chunk counts; and
    nn.Embedding(max_norm=...), whose lookup renormalizes the rows it reads."""
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4, max_norm=1.0)
        with torch.no_grad():
            self.emb.weight.mul_(3)

    def forward(self, x, b1, b2, alpha, beta, idx):
        return (torch.baddbmm(x, b1, b2, alpha=alpha, beta=beta), torch.addmm(x[0], b1[0], b2[0], alpha=alpha, beta=beta),
                torch.baddbmm(x, b1, b2, beta=0.0), x.chunk(x.size(2) // 2, dim=2), self.emb(idx))


class PoolCeilPad(nn.Module):
    """Average pooling with ceil_mode and count_include_pad: the last window's divisor counts the
    padding but not its overhang past it."""
    def forward(self, x, y):
        return (F.avg_pool1d(x, (6,), stride=(3,), padding=(2,), ceil_mode=True, count_include_pad=True),
                F.avg_pool2d(y, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=True),
                F.avg_pool1d(x, 3, stride=1, padding=1, ceil_mode=True, count_include_pad=False))


class BilinearUnbatched(nn.Module):
    """nn.Bilinear (with and without bias, leading dims) and pooling of unbatched (C, L...) inputs."""
    def __init__(self):
        super().__init__()
        self.b = nn.Bilinear(3, 4, 5)
        self.b2 = nn.Bilinear(3, 4, 2, bias=False)

    def forward(self, x, y, z, w):
        return (self.b(x, y), self.b2(x, y), F.max_pool1d(z, 2), F.avg_pool2d(w, 2),
                F.max_pool2d(w, 2, return_indices=True)[1])


class ResizeToOne(nn.Module):
    """Linear and cubic resizes to a length of 1 without align_corners: torch samples the middle of the
    input there (Mask R-CNN pastes the mask of a box narrower than a pixel this way), where ONNX's
    pytorch_half_pixel would sample index 0. The traced form takes the sizes from a tensor."""
    def forward(self, x, hw):
        a = F.interpolate(x, size=(1, 5), mode="bilinear", align_corners=False)
        b = F.interpolate(x, size=(6, 1), mode="bicubic", align_corners=False)
        c = F.interpolate(x, size=(1, 1), mode="bilinear", align_corners=True)
        d = F.interpolate(x.flatten(2), size=1, mode="linear", align_corners=False)
        e = F.interpolate(x, size=(int(hw[0]), int(hw[1])), mode="bilinear", align_corners=False)
        return a, b, c, d, e


class ListAliases(nn.Module):
    """Lists put into another list before a loop appends to them (torchaudio's Emformer builds its
    attention mask so): TorchScript lists are shared, the outer list sees the appends. And torch.cat
    skipping an empty 1-D tensor, as Emformer's summary is without memory."""
    def forward(self, x):
        firsts: List[torch.Tensor] = []
        seconds: List[torch.Tensor] = []
        both = [firsts, seconds]
        for i in range(x.size(0)):
            firsts.append(x[i] * 2)
            seconds.append(x[i] + float(i))
        summary = torch.empty(0).to(dtype=x.dtype)
        joined = torch.cat([torch.cat(part) for part in both])
        return torch.cat([joined, summary]), len(both[0])


class _Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.steps = 0
        self.register_buffer("total", torch.zeros(4))


class ModuleState(nn.Module):
    """forward() assigning attributes, its own and a submodule's, plainly, in an if and in a loop: reads
    see the latest assignment (the ONNX model starts from the saved values, as the first call does)."""
    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.ones(3, 4))
        self.scale = 2.0
        self.sub = _Counter()

    def forward(self, x):
        self.acc = self.acc + x
        if bool(x.sum() > 0):
            self.scale = self.scale * 3.0
        else:
            self.acc = self.acc - 1.0
        for i in range(x.size(0)):
            self.sub.total = self.sub.total + x[i]
            self.sub.steps += 1
        return self.acc * self.scale, self.sub.total * self.sub.steps


class ListMethods(nn.Module):
    """Python list methods on lists known element-wise: `in` on sizes (a computed element), sort,
    reverse, extend, count, clear."""
    def forward(self, x):
        dims = [x.size(0), x.size(1)]
        ks = [5, 3, 1, 4]
        ks.sort()
        ks.reverse()
        ks.extend([7, 8])
        tmp = [1, 2]
        tmp.clear()
        y = x * ks[0] + ks[-1] + ks.count(3) + len(tmp)
        if 4 in dims:
            return y + 1.0
        return y - 1.0


class IndexLists(nn.Module):
    """x[[0, 2]] traced (the index tensors are constants of the trace), and tensor_split at split
    points the model computes."""
    def forward(self, x, points):
        a = x[[0, 2, 3]]
        b = x[:, [1, 0]]
        c = x[[0, 1], [2, 1]]
        parts = torch.tensor_split(x, points * 1, dim=0)
        return a, b, c, parts[0], parts[1], parts[2]


class PackedTraced(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(5, 7, num_layers=2)

    def forward(self, x, lengths):
        p = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=True)
        out, _ = self.rnn(p)
        return nn.utils.rnn.pad_packed_sequence(out)[0]


class EncoderPadMask(nn.Module):
    """nn.TransformerEncoder in eval mode with a key padding mask takes PyTorch's nested-tensor fast path
    (the padded positions come out as zeros); held here as padded tensors with the mask beside them."""
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)

    def forward(self, x, pad):
        return self.enc(x, src_key_padding_mask=pad)


def _pad_mask(lengths, t):
    return torch.arange(t)[None, :] >= torch.tensor(lengths)[:, None]


class MaxUnpool(nn.Module):
    """max_unpool after max_pool with indices (2-D batched and unbatched, 3-D, an explicit output size)."""
    def forward(self, x, v):
        y, i = F.max_pool2d(x, 2, return_indices=True)
        a = F.max_unpool2d(y, i, 2)
        b = F.max_unpool2d(y, i, 2, output_size=[x.size(2) + 1, x.size(3) + 1])
        y1, i1 = F.max_pool2d(x[0], 2, return_indices=True)
        y3, i3 = F.max_pool3d(v, 2, return_indices=True)
        return a, b, F.max_unpool2d(y1, i1, 2), F.max_unpool3d(y3, i3, 2)


class LSTMProj(nn.Module):
    """nn.LSTM with proj_size (ONNX's LSTM has no projection): two layers, given or zero initial states."""
    def __init__(self, bidirectional, batch_first):
        super().__init__()
        self.rnn = nn.LSTM(5, 8, num_layers=2, proj_size=3, bidirectional=bidirectional, batch_first=batch_first)

    def forward(self, x, h0, c0):
        y, (h, c) = self.rnn(x, (h0, c0))
        y2, _ = self.rnn(x)
        return y, h, c, y2


class NumberArgs(nn.Module):
    """int, float and bool forward() arguments without defaults: 0-d ONNX inputs (a loop count, a factor,
    a branch), beside one with a default, which stays a constant."""
    def forward(self, x, n: int, scale: float, flip: bool, k: int = 3):
        y = x * scale + n
        for i in range(n):
            y = y + float(i)
        if flip:
            y = -y
        return y[:k], y.sum() * n


class PackedScripted(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(5, 7, bidirectional=True)

    def forward(self, x, lengths):
        p = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=True)
        out, h = self.rnn(p)
        return nn.utils.rnn.pad_packed_sequence(out)[0], h


class BagOffsets(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(10, 4, mode="mean")
        self.emb = nn.Embedding(7, 3)

    def forward(self, idx, offsets, tokens):
        return self.bag(idx, offsets), self.emb(tokens)


class BiasFreeCells(nn.Module):
    """Linear and LSTM/GRU cells without biases on 2-D inputs (Gemm has no bias input before opset 11)."""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 6, bias=False)
        self.lstm = nn.LSTMCell(6, 5, bias=False)
        self.gru = nn.GRUCell(5, 3, bias=False)

    def forward(self, x, h, c):
        h1, c1 = self.lstm(self.fc(x), (h, c))
        return self.gru(h1), c1


class PixelShuffleDynamic(nn.Module):
    """pixel_shuffle and pixel_unshuffle where every dim of the input is dynamic."""
    def forward(self, x):
        return F.pixel_shuffle(x, 2), F.pixel_unshuffle(x, 2)


class OldOpsetForms(nn.Module):
    """Ops whose ONNX forms before opset 11 differ: arange with computed bounds (no Range), two index
    tensors (no GatherND), scatter_add (dense, Pad without input pads), nearest interpolation by a
    scale factor that is not whole (torch maps positions by 1 / scale, not in / out)."""
    def forward(self, x, idx):
        n = x.size(0)
        a = torch.arange(0.5, n * 1.5, 0.75)
        b = torch.arange(n - 1, -1, -2)
        g = x[idx, idx.flip(0)]
        s = torch.zeros(n, 3).scatter_add(0, idx.abs().unsqueeze(1).expand(-1, 3), x[:3, 0])
        u = F.interpolate(x, scale_factor=2.3, mode="nearest", recompute_scale_factor=False)
        return a, b, g, s, u


class TriDynamic(nn.Module):
    """tril/triu where the matrix sizes or the diagonal are computed (a causal mask as nanoGPT builds
    it): Trilu from opset 14, a band of positions before."""
    def forward(self, x):
        t = x.size(-1)
        causal = torch.tril(torch.ones(t, t)).view(1, t, t)
        return x.tril(), x.triu(1), x.tril(x.size(0) - 3), x.masked_fill(causal[:, :x.size(1), :t] == 0, -1.0)


class ToList(nn.Module):
    """Tensor.tolist() in scripted code: a nested list of Python numbers read back into the graph."""
    def forward(self, x):
        v: List[List[float]] = x.tolist()
        return torch.tensor(v[1]) * v[0][2] + len(v)


class AdaptiveMaxIndices(nn.Module):
    """Adaptive max pooling with return_indices (OpInfo's samples): windows that do not divide the input
    (overlapping, of two widths), equal windows, an unbatched input, and 1-D / 3-D; the indices are flat
    within each (n, c) plane."""
    def forward(self, x, u, v, w):
        a, ia = F.adaptive_max_pool2d(x, (2, 3), return_indices=True)
        b, ib = F.adaptive_max_pool2d(x, 2, return_indices=True)
        d, idd = F.adaptive_max_pool2d(u, (3, 2), return_indices=True)
        e, ie = F.adaptive_max_pool1d(v, 3, return_indices=True)
        f, i_f = F.adaptive_max_pool3d(w, (2, 2, 3), return_indices=True)
        return a, ia, b, ib, d, idd, e, ie, f, i_f


class DoubleConvNet(nn.Module):
    """A model converted with .double(): ONNX Runtime's CPU provider has no float64 Conv, ConvTranspose or
    AveragePool, so those compute in float32 between casts (the model must load and run there); the
    rest stays float64."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.up = nn.ConvTranspose2d(4, 2, 2, stride=2)
        self.fc = nn.Linear(2, 3)

    def forward(self, x):
        y = F.avg_pool2d(torch.relu(self.conv(x)), 2)
        return self.fc(self.up(y).permute(0, 2, 3, 1)), F.adaptive_max_pool2d(y, 1)


class QuantChunk(nn.Module):
    """torchvision's quantized ShuffleNetV2 block: a quantized tensor chunked in two (each part keeps the
    scale and zero point), one part through a quantized conv + relu, concatenated back, channels shuffled.
    Tolerance: one step of the output's scale (0.00706). PyTorch's quantized conv accumulates in int32 and
    requantizes through a float32 multiplier; the ONNX form convolves the dequantized values in float, so
    a result within float rounding of a half step may round the other way (1 of 432 elements here)."""
    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv = nn.Sequential(nn.Conv2d(4, 4, 1), nn.ReLU())
        self.branch = nn.Sequential(nn.Conv2d(2, 2, 3, padding=1), nn.ReLU())
        self.cat = torch.ao.nn.quantized.FloatFunctional()
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        x = self.conv(self.quant(x))
        x1, x2 = x.chunk(2, dim=1)
        y = self.cat.cat([x1, self.branch(x2)], 1)
        b, c, h, w = y.shape
        y = y.view(b, 2, c // 2, h, w).transpose(1, 2).contiguous().view(b, c, h, w)
        return self.dequant(y)


def quant_chunk():
    torch.backends.quantized.engine = "qnnpack"
    m = QuantChunk().eval()
    torch.ao.quantization.fuse_modules(m, [["conv.0", "conv.1"], ["branch.0", "branch.1"]], inplace=True)
    m.qconfig = torch.ao.quantization.get_default_qconfig("qnnpack")
    torch.ao.quantization.prepare(m, inplace=True)
    with torch.no_grad():
        for i in range(4):
            m(torch.randn(2, 4, 6, 6, generator=torch.Generator().manual_seed(i)))
    return torch.ao.quantization.convert(m)


class ComplexRoundTrip(nn.Module):
    """HDemucs-style spectrogram round trip: STFT, the complex spectrum cut (slice), padded back
    (F.pad), transposed twice, concatenated, rebuilt from real pairs (view_as_complex), and inverted
    by istft with and without `length`, batched and not; rolled, flipped, stacked and picked
    (index_select) along negative dims."""
    def forward(self, x, mono):
        w = torch.hann_window(16)
        z = torch.stft(x, 16, 4, window=w, return_complex=True)
        cut = F.pad(z[..., :-1, :], [0, 0, 0, 1])
        cut = cut.transpose(1, 2).transpose(1, 2)
        both = torch.cat([z, cut], 0)
        rebuilt = torch.view_as_complex(torch.view_as_real(both) * 0.5)
        a = torch.istft(rebuilt, 16, 4, window=w, length=x.size(1))
        b = torch.istft(z, 16, 4, window=w)
        zm = torch.stft(mono, 16, 4, window=torch.hann_window(12), win_length=12, return_complex=True)
        c = torch.istft(zm, 16, 4, window=torch.hann_window(12), win_length=12, length=mono.size(0) - 3)
        rolled = torch.view_as_real(torch.roll(z, 1, -1))
        stacked = torch.view_as_real(torch.stack([z.flip(-2), z], -1)[..., 0].unsqueeze(-1).squeeze(-1))
        full = torch.stft(x, 16, 4, window=w, return_complex=True, onesided=False)
        d = torch.istft(full, 16, 4, window=w, onesided=False)  # a real result: irfft of the first 9 bins
        picked = torch.view_as_real(z.index_select(-1, torch.tensor([0, 2])))
        return a, b, c, rolled, stacked, d, picked


class WideOutputPadding(nn.Module):
    """Transposed convolutions whose output_padding reaches the stride (torch allows it below the
    dilation; ONNX Runtime refuses it): covered by the end padding, and beyond it (zeros plus bias)."""
    def __init__(self):
        super().__init__()
        self.a = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=2, dilation=3)
        self.b = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=3, output_padding=2, dilation=3)
        self.c = nn.ConvTranspose1d(2, 2, 2, stride=1, padding=0, output_padding=1, dilation=2, bias=False)

    def forward(self, x, y):
        return self.a(x), self.b(x), self.c(y)


class IntScaledProducts(nn.Module):
    """addmm-style ops on integers take alpha and beta truncated (2.7 -> 2, 0.5 -> 0: self ignored);
    addbmm sums the batch's products."""
    def forward(self, a, m1, m2, v, b1, b2, f):
        return (torch.addmm(a, m1, m2, beta=2.7, alpha=1.6), torch.addmv(v, m1, m2[:, 0], beta=0.5, alpha=3),
                torch.addbmm(f, b1, b2, beta=0.5, alpha=2.0), torch.addbmm(a, b1.long(), b2.long()))


class Atan2Zeros(nn.Module):
    """atan2 where both arguments are 0 (0, not the NaN of 0 / 0), on floats and integers."""
    def forward(self, y, x, iy, ix):
        return torch.atan2(y, x), torch.atan2(iy, ix)


class DeformableConvs(nn.Module):
    """torchvision's DeformConv2d as detection necks use it: DCNv1 (offsets from a conv), DCNv2 with a
    modulation mask, stride, padding, dilation, two weight groups and two offset groups; offsets large
    enough to sample outside the image."""
    def __init__(self):
        super().__init__()
        import torchvision
        self.off1 = nn.Conv2d(4, 18, 3, padding=1)
        self.dc1 = torchvision.ops.DeformConv2d(4, 6, 3, padding=1)
        self.off2 = nn.Conv2d(4, 2 * 2 * 9 + 2 * 9, 3, stride=2, padding=2, dilation=2)
        self.dc2 = torchvision.ops.DeformConv2d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2, bias=False)

    def forward(self, x):
        import torchvision
        a = self.dc1(x, self.off1(x) * 3.0)
        o = self.off2(x)
        offset, mask = o[:, :36] * 2.0, torch.sigmoid(o[:, 36:])
        b = torchvision.ops.deform_conv2d(x, offset, self.dc2.weight, None, stride=2, padding=2, dilation=2, mask=mask)
        return a, b


class GridSamples(nn.Module):
    """F.grid_sample in every mode and padding that GridSample (opset 16) has besides bicubic, with and
    without align_corners, on a grid that reaches outside the image (spatial transformers, flow warping)."""
    def forward(self, x, grid):
        g = grid * 1.4
        outs = []
        for mode in ("bilinear", "nearest"):
            for padding in ("zeros", "border", "reflection"):
                for ac in (False, True):
                    outs.append(F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=ac))
        return outs


def fixtures():
    r = torch.randn
    qx = torch.randn(6, 4, 3, 3) * 2
    return {
        "br_bias_free_cells": lambda: dict(model=BiasFreeCells(), inputs=[r(3, 4), r(3, 5), r(3, 5)],
                                           dynamic=["x:0=b", "h:0=b", "c:0=b"], alt_inputs=[r(2, 4), r(2, 5), r(2, 5)]),
        "br_pixel_shuffle_dynamic": lambda: dict(model=PixelShuffleDynamic(), inputs=[r(2, 8, 4, 6)],
                                                 dynamic=["x:0=n,1=c,2=h,3=w"], alt_inputs=[r(1, 12, 6, 2)]),
        "br_old_opset_forms": lambda: dict(model=OldOpsetForms(), inputs=[r(4, 4, 3), torch.tensor([3, 0, -1])],
                                           data=True, dynamic=["x:0=n,1=m"], alt_inputs=[r(6, 6, 3), torch.tensor([5, 1, -2])]),
        "br_tri_dynamic": lambda: dict(model=TriDynamic(), inputs=[r(4, 5, 5)], dynamic=["x:0=b,1=n,2=n"],
                                       alt_inputs=[r(6, 3, 3)], min_opset=(10, "aten::slice", "x.masked_fill(causal")),
        "br_tolist": lambda: dict(model=ToList(), inputs=[r(2, 3)]),
        "br_atan2_zeros": lambda: dict(model=Atan2Zeros(),
                                       inputs=[torch.tensor([0.0, 1.0, -1.0, 0.0, 2.0]), torch.tensor([0.0, 0.0, -2.0, -1.0, 3.0]),
                                               torch.tensor([0, 3, -2, 0]), torch.tensor([0, 0, -1, 5])]),
        "br_int_scaled_products": lambda: dict(
            model=IntScaledProducts(),
            inputs=[torch.randint(-9, 9, (2, 3)), torch.randint(-9, 9, (2, 2)), torch.randint(-9, 9, (2, 3)),
                    torch.randint(-9, 9, (2,)), torch.randint(-4, 4, (5, 2, 4)).float(),
                    torch.randint(-4, 4, (5, 4, 3)).float(), r(2, 3)]),
        "br_wide_output_padding": lambda: dict(model=WideOutputPadding(), inputs=[r(1, 2, 5, 6), r(2, 2, 7)],
                                               dynamic=["x:0=b,2=h,3=w", "y:2=t"], alt_inputs=[r(2, 2, 4, 7), r(2, 2, 9)]),
        "br_complex_istft": lambda: dict(model=ComplexRoundTrip(), inputs=[r(2, 100), r(90)],
                                         dynamic=["x:0=b,1=t", "mono:0=m"], alt_inputs=[r(3, 130), r(77)],
                                         min_opset=(10, "aten::istft", "a = torch.istft(rebuilt")),
        "br_quant_chunk": lambda: dict(model=quant_chunk(), inputs=[r(2, 4, 6, 6)], dynamic=["x:0=b"],
                                       alt_inputs=[r(3, 4, 6, 6)], tol=(0, 0.0072),
                                       min_opset=(10, "aten::quantize_per_tensor", "x = self.conv(self.quant(x))")),
        "br_double_conv": lambda: dict(model=DoubleConvNet().double(), inputs=[r(2, 3, 10, 10, dtype=torch.float64)],
                                       dynamic=["x:0=b"], alt_inputs=[r(1, 3, 10, 10, dtype=torch.float64)]),
        "br_deform_conv": lambda: dict(model=DeformableConvs(), inputs=[r(2, 4, 7, 9)], mode="trace",
                                       dynamic=["x:0=b,2=h,3=w"], alt_inputs=[r(1, 4, 10, 6)],
                                       min_opset=(11, "torchvision::deform_conv2d", "return torch.ops.torchvision.deform_conv2d(",
                                                  __import__("torchvision").ops.deform_conv2d)),
        "br_grid_sample": lambda: dict(model=GridSamples(), inputs=[r(2, 3, 5, 7), torch.rand(2, 4, 6, 2) * 2 - 1],
                                       dynamic=["x:0=b,2=h,3=w", "grid:0=b,1=ho,2=wo"],
                                       alt_inputs=[r(1, 3, 1, 9), torch.rand(1, 3, 5, 2) * 2 - 1],
                                       min_opset=(11, "aten::grid_sampler", "outs.append(F.grid_sample")),
        "br_adaptive_max_indices": lambda: dict(model=AdaptiveMaxIndices(),
                                                inputs=[r(2, 3, 6, 8), r(4, 5, 5), r(3, 4, 7), r(1, 2, 4, 3, 5)]),
        "br_fake_quant_trace": lambda: dict(model=FakeQuant(), inputs=[qx, torch.tensor(0.02), torch.tensor(2)], mode="trace",
                                            data=True, dynamic=["x:0=n"], alt_inputs=[qx[:2], torch.tensor(0.02), torch.tensor(2)],
                                            min_opset=(11, "aten::fake_quantize_per_channel_affine", "g = torch.fake")),
        "br_fake_quant_script": lambda: dict(model=FakeQuant(), inputs=[qx, torch.tensor(0.02), torch.tensor(2)], data=True,
                                             min_opset=(11, "aten::fake_quantize_per_channel_affine", "g = torch.fake")),
        "br_unique": lambda: dict(model=UniqueOps(), inputs=[torch.tensor([[1, 3, 2], [3, 7, 1]]),
                                                             torch.tensor([[1, 2], [0, 5], [1, 2], [0, 4]])],
                                  data=True, min_opset=(11, "aten::_unique2", "u, counts = torch.unique")),
        "br_as_strided_script": lambda: dict(model=AsStrided(), inputs=[r(5, 8, 7)]),
        "br_as_strided_trace": lambda: dict(model=AsStrided(), inputs=[r(5, 8, 7)], mode="trace"),
        "br_numpy_forms": lambda: dict(model=NumpyForms(), inputs=[r(4, 5), r(3, 6)], mode="trace", data=True),
        "br_spectral": lambda: dict(model=Spectral(), inputs=[r(2, 400), r(300)], dynamic=["x:0=b,1=t", "mono:0=m"],
                                    alt_inputs=[r(3, 333), r(257)], tol=(1e-4, 1e-4)),
        "br_refined_loop": lambda: dict(model=RefinedLoop(True), inputs=[r(10, 5)], dynamic=["x:0=n,1=m"],
                                        alt_inputs=[r(13, 7)]),
        "br_refined_loop_none": lambda: dict(model=RefinedLoop(False), inputs=[r(10, 5)], dynamic=["x:0=n,1=m"],
                                             alt_inputs=[r(13, 7)]),
        "br_eye_dtype": lambda: dict(model=EyeDtype(), inputs=[r(2, 3, 4)], mode="trace", dynamic=["x:0=a,1=b,2=c"],
                                     alt_inputs=[r(5, 6, 7)]),
        "br_inplace_if": lambda: dict(model=InplaceInIf(), inputs=[r(3, 4).abs(), r(4).abs()], dynamic=["x:1=n", "y:0=n"],
                                      alt_inputs=[-r(3, 6).abs(), -r(6).abs()],
                                      min_opset=(11, "aten::copy_", "x[0] = y")),
        "br_computed_args": lambda: dict(model=ComputedArgs(), mode="trace", data=True,
                                         inputs=[r(2, 3, 6), r(2, 3, 4), r(2, 4, 6), torch.tensor(0.5), torch.tensor(2.0),
                                                 torch.tensor([[1, 2, 2], [7, 0, 3]])],
                                         # traced: reported at the model's line that calls into torch (the
                                         # recorded Python stack is searched past torch's own files)
                                         min_opset=(11, "aten::embedding_renorm", "self.emb(idx))")),
        "br_pool_ceil": lambda: dict(model=PoolCeilPad(), inputs=[r(1, 3, 9), r(1, 2, 6, 6)], tol=(1e-4, 1e-5)),
        "br_bilinear_unbatched": lambda: dict(model=BilinearUnbatched(), inputs=[r(2, 7, 3), r(2, 7, 4), r(3, 8), r(2, 6, 6)],
                                              dynamic=["x:0=a", "y:0=a", "z:1=l", "w:1=h,2=v"], tol=(1e-4, 1e-5),
                                              alt_inputs=[r(3, 7, 3), r(3, 7, 4), r(3, 10), r(2, 4, 8)],
                                              min_opset=(12, "aten::bilinear", "return (self.b(x, y)")),
        "br_interpolate_builtin": lambda: dict(
            model=InterpolateBuiltin(), inputs=[r(1, 2, 4, 4), r(9, 7)], dynamic=["x:0=n,2=h,3=w", "y:0=a,1=b"],
            alt_inputs=[r(2, 2, 5, 3), r(4, 11)], tol=(1e-4, 1e-5),
            min_opset=(11, "aten::__interpolate", "x, None, 2.0", _nearest2x)),
        "br_resize_to_one_script": lambda: dict(model=ResizeToOne(), inputs=[r(1, 2, 5, 7), torch.tensor([1, 3])],
                                                data=True, tol=(1e-4, 1e-5)),
        "br_resize_to_one_trace": lambda: dict(model=ResizeToOne(), inputs=[r(1, 2, 5, 7), torch.tensor([4, 1])],
                                               mode="trace", data=True, tol=(1e-4, 1e-5)),
        "br_list_methods": lambda: dict(model=ListMethods(), inputs=[r(3, 4)], dynamic=["x:0=n"], alt_inputs=[r(5, 4)]),
        "br_list_methods_other": lambda: dict(model=ListMethods(), inputs=[r(3, 5)], dynamic=["x:0=n"], alt_inputs=[r(4, 5)]),
        "br_index_lists_trace": lambda: dict(model=IndexLists(), inputs=[r(5, 4), torch.tensor([1, 3])], mode="trace",
                                             data=True, dynamic=["x:1=w"], alt_inputs=[r(5, 6), torch.tensor([2, 4])],
                                             min_opset=(10, "aten::tensor_split", "parts = torch.tensor_split(", IndexLists)),
        # Traced, the LSTM's default initial state is zeros of the traced batch (at another batch
        # PyTorch's kernel would read out of bounds): the converter makes them zeros of the batch the
        # RNN gets, as torch.onnx does, so the model runs at any batch.
        "br_packed_traced_batch": lambda: dict(model=PackedTraced(), inputs=[r(6, 3, 5), torch.tensor([6, 4, 2])], mode="trace",
                                               data=True, dynamic=["x:1=b", "lengths:0=b"], tol=(1e-4, 1e-5),
                                               alt_inputs=[r(6, 5, 5), torch.tensor([6, 5, 3, 2, 1])]),
        "br_encoder_pad_mask": lambda: dict(model=EncoderPadMask(), inputs=[r(2, 5, 16), _pad_mask([5, 3], 5)], data=True,
                                            dynamic=["x:0=b,1=t", "pad:0=b,1=t"], tol=(1e-4, 1e-5),
                                            alt_inputs=[r(3, 7, 16), _pad_mask([2, 7, 4], 7)]),
        "br_max_unpool": lambda: dict(model=MaxUnpool(), inputs=[r(2, 3, 6, 8), r(1, 2, 4, 4, 6)], dynamic=["x:0=n,2=h,3=w"],
                                      alt_inputs=[r(1, 3, 4, 10), r(1, 2, 4, 4, 6)]),
        "br_lstm_proj": lambda: dict(model=LSTMProj(False, False), inputs=[r(6, 2, 5), r(2, 2, 3), r(2, 2, 8)],
                                     dynamic=["x:0=t,1=b", "h0:1=b", "c0:1=b"], tol=(1e-4, 1e-5),
                                     alt_inputs=[r(4, 3, 5), r(2, 3, 3), r(2, 3, 8)]),
        "br_lstm_proj_bidir": lambda: dict(model=LSTMProj(True, True), inputs=[r(2, 6, 5), r(4, 2, 3), r(4, 2, 8)],
                                           dynamic=["x:0=b,1=t", "h0:1=b", "c0:1=b"], tol=(1e-4, 1e-5),
                                           alt_inputs=[r(3, 4, 5), r(4, 3, 3), r(4, 3, 8)],
                                           min_opset=(10, "aten::lstm", "y, (h, c) = self.rnn(x, (h0, c0))", LSTMProj)),
        "br_number_args": lambda: dict(model=NumberArgs(), inputs=[r(5, 4), 2, 0.5, True], data=True,
                                       alt_inputs=[r(5, 4), 4, -1.5, False], tol=(1e-5, 1e-5)),
        # Shape learning without --data: random lengths must be positive and sorted, offsets start at 0,
        # token ids stay inside the table.
        "br_random_lengths": lambda: dict(model=PackedScripted(), inputs=[r(6, 3, 5), torch.tensor([6, 4, 2])],
                                          dynamic=["x:0=t,1=b", "lengths:0=b"], tol=(1e-4, 1e-5),
                                          alt_inputs=[r(8, 2, 5), torch.tensor([8, 3])]),
        "br_random_offsets": lambda: dict(model=BagOffsets(), inputs=[torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]),
                                                                     torch.tensor([0, 3, 3, 6]), torch.tensor([[6, 0, 2]])],
                                          tol=(1e-5, 1e-6)),
        "br_module_state": lambda: dict(model=ModuleState(), inputs=[r(3, 4)]),
        "br_module_state_neg": lambda: dict(model=ModuleState(), inputs=[-r(3, 4).abs()]),
        "br_list_aliases": lambda: dict(model=ListAliases(), inputs=[r(3, 4)], dynamic=["x:0=n"], alt_inputs=[r(5, 4)],
                                        min_opset=(13, "prim::Loop", "for i in range(x.size(0)):", ListAliases)),
    }
