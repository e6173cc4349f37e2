"""Complex tensors inside models, as users write them: rotary position embeddings in the LLaMA style
(a complex buffer, view_as_complex, a complex product, view_as_real), global filter layers (GFNet),
Fourier neural operators (complex weights written into slices of a complex zeros tensor), LaMa's
Fourier unit, Autoformer's auto-correlation, and the torch.fft family with its n / s / dim / norm
arguments. Every model's inputs and outputs are real; the complex values live inside."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    ang = torch.outer(torch.arange(end).float(), freqs)
    return torch.polar(torch.ones_like(ang), ang)


class RotaryAttention(nn.Module):
    """LLaMA's apply_rotary_emb: the precomputed complex buffer sliced to the sequence length."""
    def __init__(self):
        super().__init__()
        self.register_buffer("freqs_cis", freqs_cis(8, 64), persistent=False)
        self.wq = nn.Linear(16, 16)
        self.wk = nn.Linear(16, 16)

    def forward(self, x):
        b, t = x.shape[0], x.shape[1]
        xq = self.wq(x).view(b, t, 2, 8)
        xk = self.wk(x).view(b, t, 2, 8)
        xq_ = torch.view_as_complex(xq.float().reshape(b, t, 2, 4, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(b, t, 2, 4, 2))
        fc = self.freqs_cis[:t].view(1, t, 1, 4)
        q = torch.view_as_real(xq_ * fc).flatten(3).type_as(xq)
        k = torch.view_as_real(xk_ * fc).flatten(3).type_as(xk)
        return torch.matmul(q.transpose(1, 2), k.permute(0, 2, 3, 1)).softmax(-1)


class PolarRotary(nn.Module):
    """Rotary angles computed in forward: torch.polar, the rotation multiplied on the left."""
    def forward(self, x):
        t = x.shape[1]
        freqs = 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))
        ang = torch.outer(torch.arange(t).float(), freqs)
        fc = torch.polar(torch.ones_like(ang), ang)
        xc = torch.view_as_complex(x.reshape(x.shape[0], t, 4, 2))
        return torch.view_as_real(fc * xc).flatten(2)


class GlobalFilter(nn.Module):
    """GFNet's global filter: rfft2 over the token grid, a learned complex filter, irfft2 (ortho)."""
    def __init__(self, dim=4, h=6, w=4):
        super().__init__()
        self.complex_weight = nn.Parameter(torch.randn(h, w, dim, 2) * 0.5)

    def forward(self, x):
        a, b = x.shape[1], x.shape[2]
        y = torch.fft.rfft2(x, dim=(1, 2), norm="ortho")
        y = y * torch.view_as_complex(self.complex_weight)
        return torch.fft.irfft2(y, s=(a, b), dim=(1, 2), norm="ortho")


class AutoCorrelation(nn.Module):
    """Autoformer: period-based dependencies from rfft(q) * conj(rfft(k)), back with irfft(n=L)."""
    def forward(self, q, k):
        L = q.shape[1]
        qf = torch.fft.rfft(q.permute(0, 2, 1).contiguous(), dim=-1)
        kf = torch.fft.rfft(k.permute(0, 2, 1).contiguous(), dim=-1)
        corr = torch.fft.irfft(qf * torch.conj(kf), n=L, dim=-1)
        return corr, torch.mean(corr, dim=1)


class SpectralConv2d(nn.Module):
    """The Fourier neural operator's layer: complex weights (parameters) applied to the lowest modes
    by einsum, written into a complex zeros tensor, irfft2 back to the input's size."""
    def __init__(self, cin=3, cout=4, m1=3, m2=2):
        super().__init__()
        self.m1, self.m2, self.cout = m1, m2, cout
        g = torch.Generator().manual_seed(3)
        self.weights1 = nn.Parameter(torch.rand(cin, cout, m1, m2, dtype=torch.cfloat, generator=g))
        self.weights2 = nn.Parameter(torch.rand(cin, cout, m1, m2, dtype=torch.cfloat, generator=g))

    def forward(self, x):
        bs = x.shape[0]
        x_ft = torch.fft.rfft2(x)
        out_ft = torch.zeros(bs, self.cout, x.size(-2), x.size(-1) // 2 + 1, dtype=torch.cfloat, device=x.device)
        out_ft[:, :, :self.m1, :self.m2] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :self.m1, :self.m2], self.weights1)
        out_ft[:, :, -self.m1:, :self.m2] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -self.m1:, :self.m2], self.weights2)
        return torch.fft.irfft2(out_ft, s=(x.size(-2), x.size(-1)))


class FourierUnit(nn.Module):
    """LaMa's Fourier unit: rfftn (ortho), real and imaginary parts stacked as channels, a 1x1 conv,
    torch.complex of the two halves, irfftn back to the input's size."""
    def __init__(self, c=3):
        super().__init__()
        self.conv = nn.Conv2d(c * 2, c * 2, 1)

    def forward(self, x):
        batch = x.shape[0]
        f = torch.fft.rfftn(x, dim=(-2, -1), norm="ortho")
        f = torch.stack((f.real, f.imag), dim=-1)
        f = f.permute(0, 1, 4, 2, 3).contiguous()
        f = f.view((batch, -1,) + f.size()[3:])
        f = F.relu(self.conv(f))
        f = f.view((batch, -1, 2,) + f.size()[2:]).permute(0, 1, 3, 4, 2).contiguous()
        f = torch.complex(f[..., 0], f[..., 1])
        return torch.fft.irfftn(f, s=x.shape[-2:], dim=(-2, -1), norm="ortho")


class FftForms(nn.Module):
    """The transforms and their arguments: fft/ifft with n (cut and padded), fft2 + fftshift, hfft of
    ihfft, fftn over every dim with norm="forward", rfft/irfft of odd length, ifftn of a real tensor,
    complex sums and differences, abs."""
    def forward(self, x):
        a = torch.fft.fft(x).abs()
        b = torch.fft.fftshift(torch.fft.fft2(x), dim=(-2, -1)).abs()
        c = torch.fft.ifft(torch.fft.fft(x, n=12), n=4).real
        d = torch.fft.hfft(torch.fft.ihfft(x), n=x.shape[-1])
        e = torch.view_as_real(torch.fft.fftn(x, norm="forward"))
        f = torch.fft.irfft(torch.fft.rfft(x, n=7), n=7)
        g = torch.view_as_real(torch.fft.fft(x, dim=1) + torch.fft.ifft(x, dim=1) - 2 * torch.fft.fft(x, dim=1))
        h = torch.view_as_real(torch.fft.ifftn(x, dim=(0, 2), norm="ortho"))
        return a, b, c, d, e, f, g, h


class ComplexArithmetic(nn.Module):
    """Complex quotients (by complex, real and number), exp, log, angle, sums and means over dims,
    matmul of two complex matrices, a complex constant (a buffer), conj_physical, imag, negation,
    zeros_like, real tensors made complex (to, type_as), a complex one made double; and what the
    converter rewrites into other ops (mH, sgn, linalg.vecdot, isreal), whose rewrites must keep complex
    semantics."""
    def __init__(self):
        super().__init__()
        self.register_buffer("rot", torch.polar(torch.ones(4), torch.arange(4).float()))

    def forward(self, re, im):
        z = torch.complex(re, im)
        w = z * self.rot
        q = (w / (z + 2.0)) / 3.0 - z.exp() / (1.0 + z.conj_physical().abs())
        s = torch.view_as_real(q.sum(-1)), torch.view_as_real(q.mean(dim=0, keepdim=True))
        m = torch.view_as_real(torch.matmul(z, z.transpose(-2, -1)))
        n = (-w).imag + torch.view_as_real(torch.zeros_like(z)).sum(-1)
        a = z.angle() + torch.view_as_real(torch.log(z)).sum(-1)
        p = torch.view_as_real(re.to(torch.complex64) * z + im.type_as(z))
        d = z.to(torch.complex128).real
        h = torch.view_as_real(z.mH @ z.sgn()), torch.view_as_real(torch.linalg.vecdot(z, z.flip(1))), z.isreal()
        return s[0], s[1], m, n, a, p, d, h[0], h[1], h[2]


class UnevenHopRoundTrip(nn.Module):
    """stft / istft with n_fft not a multiple of hop_length, with and without `length`."""
    def forward(self, x):
        w = torch.hann_window(16)
        z = torch.stft(x, 16, 6, window=w, return_complex=True)
        a = torch.istft(z * 0.5, 16, 6, window=w, length=x.shape[-1])
        b = torch.istft(z, 16, 7, win_length=14, window=torch.hann_window(14))
        return a, b


class LongConvolution(nn.Module):
    """Hyena's FFT convolution: a filter as long as the sequence, applied by rfft / irfft of twice the
    length (n = 4200 = 60 x 70: the four-step factorization), and other long transforms."""
    def __init__(self, length=2100, channels=3):
        super().__init__()
        g = torch.Generator().manual_seed(5)
        self.k = nn.Parameter(torch.randn(channels, length, generator=g) * torch.exp(-torch.arange(length) / 300.0))

    def forward(self, u):
        seqlen = u.shape[-1]
        fft_size = 2 * seqlen
        k_f = torch.fft.rfft(self.k, n=fft_size) / fft_size
        u_f = torch.fft.rfft(u, n=fft_size)
        y = torch.fft.irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seqlen]
        c = torch.view_as_real(torch.fft.fft(u, n=1500, norm="ortho"))  # 30 x 50, cut
        d = torch.view_as_real(torch.fft.ihfft(u).resolve_conj())         # 42 x 50, real in
        return y + u, c, d


def fixtures():
    r = torch.randn
    return {
        "cx_rotary_trace": lambda: dict(model=RotaryAttention(), inputs=[r(2, 10, 16)], mode="trace",
                                        dynamic=["x:0=b,1=t"], alt_inputs=[r(3, 7, 16)],
                                        min_opset=(10, "aten::slice", "fc = self.freqs_cis[:t]")),
        "cx_rotary_script": lambda: dict(model=RotaryAttention(), inputs=[r(2, 10, 16)],
                                         dynamic=["x:0=b,1=t"], alt_inputs=[r(1, 13, 16)],
                                         min_opset=(10, "aten::slice", "fc = self.freqs_cis[:t]")),
        "cx_polar_rotary": lambda: dict(model=PolarRotary(), inputs=[r(2, 10, 8)], dynamic=["x:0=b,1=t"],
                                        alt_inputs=[r(3, 5, 8)]),
        "cx_global_filter": lambda: dict(model=GlobalFilter(), inputs=[r(2, 6, 6, 4)], mode="trace",
                                         dynamic=["x:0=b"], alt_inputs=[r(3, 6, 6, 4)]),
        "cx_autocorrelation": lambda: dict(model=AutoCorrelation(), inputs=[r(2, 12, 3), r(2, 12, 3)],
                                           dynamic=["q:0=b,1=l", "k:0=b,1=l"], alt_inputs=[r(1, 9, 3), r(1, 9, 3)],
                                           min_opset=(10, "aten::fft_irfft", "corr = torch.fft.irfft")),
        "cx_fno_trace": lambda: dict(model=SpectralConv2d(), inputs=[r(2, 3, 8, 6)], mode="trace",
                                     dynamic=["x:0=b,2=h,3=w"], alt_inputs=[r(1, 3, 10, 9)],
                                     min_opset=(12, "aten::einsum", "self.weights1)")),
        "cx_fno_script": lambda: dict(model=SpectralConv2d(), inputs=[r(2, 3, 8, 6)],
                                      dynamic=["x:0=b,2=h,3=w"], alt_inputs=[r(3, 3, 7, 8)],
                                      min_opset=(12, "aten::einsum", "self.weights1)")),
        "cx_fourier_unit": lambda: dict(model=FourierUnit(), inputs=[r(2, 3, 8, 6)], mode="trace",
                                        dynamic=["x:0=b,2=h,3=w"], alt_inputs=[r(1, 3, 5, 9)],
                                        min_opset=(10, "aten::fft_irfftn", "return torch.fft.irfftn")),
        "cx_fft_forms": lambda: dict(model=FftForms(), inputs=[r(2, 5, 6)], dynamic=["x:1=n,2=m"],
                                     alt_inputs=[r(2, 4, 9)], min_opset=(10, "aten::roll", "b = torch.fft.fftshift")),
        "cx_fft_forms_trace": lambda: dict(model=FftForms(), inputs=[r(2, 5, 6)], mode="trace"),
        "cx_istft_uneven_hop": lambda: dict(model=UnevenHopRoundTrip(), inputs=[r(2, 100)], dynamic=["x:0=b,1=t"],
                                            alt_inputs=[r(1, 131)],
                                            min_opset=(10, "aten::istft", "a = torch.istft(")),
        "cx_long_convolution": lambda: dict(model=LongConvolution(), inputs=[r(2, 3, 2100)], dynamic=["u:0=b"],
                                            alt_inputs=[r(1, 3, 2100)]),
        "cx_arithmetic": lambda: dict(model=ComplexArithmetic(), inputs=[r(3, 4), r(3, 4)],
                                      dynamic=["re:0=n", "im:0=n"], alt_inputs=[r(5, 4), r(5, 4)]),
    }
