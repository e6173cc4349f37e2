// Ops that are a few other aten ops, written as TorchScript and inlined in place of the node
// before profiling: the converters of the ops they use then handle them, dynamic sizes included,
// and profiling observes every intermediate value. Only exact rewrites of torch's own definitions
// (aten's composite implementations) belong here.
#include "torch/decompose.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/jit.h>

#include <algorithm>

namespace t2o {
namespace tj = torch::jit;

namespace {

// Each function replaces the nodes matching its schema; arguments in the schema's order.
const char* kSource = R"TS(
def mT(self: Tensor) -> Tensor:
    return self if self.dim() < 2 else self.transpose(-2, -1)

def mH(self: Tensor) -> Tensor:
    t = self if self.dim() < 2 else self.transpose(-2, -1)
    return t.conj() if self.is_complex() else t

def matrix_H(self: Tensor) -> Tensor:
    t = self if self.dim() < 2 else self.transpose(0, 1)
    return t.conj() if self.is_complex() else t

def dist(self: Tensor, other: Tensor, p: float) -> Tensor:
    return torch.linalg_vector_norm(self - other, p)

def vdot(self: Tensor, other: Tensor) -> Tensor:
    if self.is_complex():
        return (self.conj() * other).sum()
    return (self * other).sum()

def vecdot(x: Tensor, y: Tensor, dim: int) -> Tensor:
    if x.is_complex():
        return (x.conj() * y).sum(dim)
    return (x * y).sum(dim)

def isposinf(self: Tensor) -> Tensor:
    return self == float("inf")

def isneginf(self: Tensor) -> Tensor:
    return self == float("-inf")

def isreal(self: Tensor) -> Tensor:
    if self.is_complex():
        return torch.imag(self) == 0
    return torch.ones_like(self, dtype=11)  # torch.bool

def sgn(self: Tensor) -> Tensor:
    if self.is_complex():
        m = self.abs()
        return self / torch.where(m == 0, torch.ones_like(m), m)
    return torch.sign(self)

def angle(self: Tensor) -> Tensor:
    if self.is_complex():  # the complex converter (the guard is constant at conversion)
        return torch.atan2(torch.imag(self), torch.real(self))
    x = self if self.is_floating_point() else self.to(6)  # torch.float32
    a = torch.where(x < 0, torch.full_like(x, 3.141592653589793), torch.zeros_like(x))
    return torch.where(torch.isnan(x), x, a)

def erfc(self: Tensor) -> Tensor:
    x = self if self.is_floating_point() else self.to(6)  # torch.float32
    return 1.0 - torch.erf(x)

def ndtr(self: Tensor) -> Tensor:
    x = self if self.is_floating_point() else self.to(6)  # torch.float32
    return 0.5 * (1.0 + torch.erf(x * 0.7071067811865476))

def ldexp(self: Tensor, other: Tensor) -> Tensor:
    x = self if self.is_floating_point() else self.to(6)  # torch.float32
    return x * torch.pow(2.0, other.to(x.dtype))

def isclose(self: Tensor, other: Tensor, rtol: float, atol: float, equal_nan: bool) -> Tensor:
    close = self == other
    if equal_nan:
        close = close | (torch.isnan(self) & torch.isnan(other))
    if self.is_floating_point() or other.is_floating_point():
        d = torch.abs(self - other)
        close = close | (torch.isfinite(d) & (d <= atol + rtol * torch.abs(other)))
    return close

def isin(elements: Tensor, test_elements: Tensor, assume_unique: bool, invert: bool) -> Tensor:
    hit = (elements.unsqueeze(-1) == test_elements.flatten()).any(-1)
    return ~hit if invert else hit

def isin_ts(elements: Tensor, test_element: float, assume_unique: bool, invert: bool) -> Tensor:
    hit = elements == test_element
    return ~hit if invert else hit

def isin_st(element: float, test_elements: Tensor, assume_unique: bool, invert: bool) -> Tensor:
    hit = (test_elements.flatten() == element).any()
    return ~hit if invert else hit

def diagflat(self: Tensor, offset: int) -> Tensor:
    return torch.diag(self.flatten(), offset)

def argwhere(self: Tensor) -> Tensor:
    return torch.nonzero(self)

def trapezoid_dx(y: Tensor, dx: float, dim: int) -> Tensor:
    if y.size(dim) == 0:
        return y.sum(dim)
    return (y.sum(dim) - (y.select(dim, 0) + y.select(dim, -1)) * 0.5) * dx

def cumulative_trapezoid_dx(y: Tensor, dx: float, dim: int) -> Tensor:
    n = y.size(dim)
    return (dx / 2.0 * (y.narrow(dim, 0, n - 1) + y.narrow(dim, 1, n - 1))).cumsum(dim)

def _trapezoid_steps(y: Tensor, x: Tensor, dim: int) -> Tensor:
    if x.dim() == 1:
        d = x.diff()
        r = y.dim()
        axis = dim if dim >= 0 else dim + r
        return d.reshape([-1] + [1] * (r - 1 - axis))
    return x.diff(dim=dim)

def trapezoid_x(y: Tensor, x: Tensor, dim: int) -> Tensor:
    n = y.size(dim)
    if n == 0:
        return y.sum(dim)
    return (_trapezoid_steps(y, x, dim) * (y.narrow(dim, 1, n - 1) + y.narrow(dim, 0, n - 1))).sum(dim) / 2.0

def cumulative_trapezoid_x(y: Tensor, x: Tensor, dim: int) -> Tensor:
    n = y.size(dim)
    return (_trapezoid_steps(y, x, dim) * (y.narrow(dim, 1, n - 1) + y.narrow(dim, 0, n - 1)) / 2.0).cumsum(dim)

def vander(x: Tensor, N: Optional[int]) -> Tensor:
    if x.dim() == 0:
        x = x.unsqueeze(0)
    n = x.size(-1) if N is None else N
    return x.unsqueeze(-1) ** torch.arange(n)

def vander_np(x: Tensor, N: Optional[int], increasing: bool) -> Tensor:
    v = vander(x, N)
    return v if increasing else v.flip(-1)

def native_batch_norm(input: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], running_mean: Optional[Tensor],
                      running_var: Optional[Tensor], training: bool, momentum: float, eps: float):
    c = input.size(1)
    shape = [1, c] + [1] * (input.dim() - 2)
    if training or running_mean is None or running_var is None:
        # Batch statistics (biased variance), returned as the saved mean and inverse std.
        flat = input.transpose(0, 1).reshape([c, -1])
        mean = flat.mean(1)
        invstd = 1.0 / torch.sqrt(flat.var(1, unbiased=False) + eps)
        saved_mean, saved_invstd = mean, invstd
    else:
        # Running statistics: torch returns empty saved values.
        mean = running_mean
        invstd = 1.0 / torch.sqrt(running_var + eps)
        saved_mean = torch.zeros([0], dtype=input.dtype)
        saved_invstd = torch.zeros([0], dtype=input.dtype)
    out = (input - mean.reshape(shape)) * invstd.reshape(shape)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out, saved_mean, saved_invstd

def frexp(self: Tensor):
    x = self.to(7)  # float64: 2^e of subnormal and huge values stays finite
    finite_nz = torch.isfinite(x) & (x != 0)
    e = torch.where(finite_nz, torch.floor(torch.log2(torch.abs(x))) + 1, torch.zeros_like(x))
    m = x / torch.pow(2.0, e)
    # log2 may round across a power of two: bring |m| into [0.5, 1).
    up = finite_nz & (torch.abs(m) >= 1)
    down = finite_nz & (torch.abs(m) < 0.5)
    e = torch.where(up, e + 1, torch.where(down, e - 1, e))
    m = torch.where(up, m / 2, torch.where(down, m * 2, m))
    return m.to(self.dtype), e.to(3)  # int32

def renorm(self: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    d = dim if dim >= 0 else dim + self.dim()
    xt = self.transpose(0, d)
    norms = torch.linalg_vector_norm(xt.reshape([xt.size(0), -1]), p, [1], True)
    factor = torch.where(norms > maxnorm, maxnorm / (norms + 1e-7), torch.ones_like(norms))
    return (xt * factor.reshape([-1] + [1] * (self.dim() - 1))).transpose(0, d)

def fftshift(x: Tensor, dim: Optional[List[int]]) -> Tensor:
    dims = list(range(x.dim())) if dim is None else dim
    shifts = [x.size(d) // 2 for d in dims]
    return torch.roll(x, shifts, dims)

def ifftshift(x: Tensor, dim: Optional[List[int]]) -> Tensor:
    dims = list(range(x.dim())) if dim is None else dim
    shifts = [(x.size(d) + 1) // 2 for d in dims]
    return torch.roll(x, shifts, dims)

def sum_to_size(x: Tensor, size: List[int]) -> Tensor:
    lead = x.dim() - len(size)
    dims: List[int] = []
    for i in range(lead):
        dims.append(i)
    for i in range(len(size)):
        if size[i] == 1 and x.size(lead + i) != 1:
            dims.append(lead + i)
    if len(dims) == 0:
        return x
    return x.sum(dims, keepdim=True).reshape(size)

def diagonal_scatter(self: Tensor, src: Tensor, offset: int, dim1: int, dim2: int) -> Tensor:
    y = self.clone()
    y.diagonal(offset, dim1, dim2).copy_(src)
    return y

# Special functions, evaluated in float64 and returned in the op's float type (float32 for integer
# inputs): Lanczos (g = 7) for lgamma, recurrence + asymptotic series for digamma, Cephes' Euler-Maclaurin
# sum for the Hurwitz zeta (polygamma of order >= 1), power series below 20 and asymptotic series above
# for the modified Bessel functions, a continued fraction for the normal tail of log_ndtr.

def _float_type(self: Tensor) -> int:
    return self.dtype if self.is_floating_point() else 6

def _lgamma_pos(y: Tensor) -> Tensor:
    z = y - 1.0
    a = torch.full_like(z, 0.99999999999980993)
    i = 1
    for p in [676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
              12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7]:
        a = a + p / (z + i)
        i += 1
    t = z + 7.5
    return 0.9189385332046727 + (z + 0.5) * torch.log(t) - t + torch.log(a)

def lgamma(self: Tensor) -> Tensor:
    x = self.to(7)
    small = x < 0.5
    y = torch.where(small, 1.0 - x, x)
    g = _lgamma_pos(y)
    r = torch.where(small, torch.log(3.141592653589793 / torch.abs(torch.sin(3.141592653589793 * x))) - g, g)
    pole = (x <= 0) & (x == torch.floor(x))
    r = torch.where(torch.isinf(x) | pole, torch.full_like(x, float("inf")), r)
    return r.to(_float_type(self))

def _digamma64(x: Tensor) -> Tensor:
    small = x < 0.5
    y = torch.where(small, 1.0 - x, x)
    acc = torch.zeros_like(y)
    for k in range(6):
        acc = acc + 1.0 / (y + k)
    z = y + 6.0
    z2 = 1.0 / (z * z)
    series = z2 * (1.0 / 12 - z2 * (1.0 / 120 - z2 * (1.0 / 252 - z2 * (1.0 / 240 - z2 * (1.0 / 132)))))
    d = torch.log(z) - 0.5 / z - series - acc
    px = 3.141592653589793 * x
    d = torch.where(small, d - 3.141592653589793 * torch.cos(px) / torch.sin(px), d)
    pole = (x <= 0) & (x == torch.floor(x))
    d = torch.where(pole, torch.where(x == 0, torch.full_like(x, float("-inf")), torch.full_like(x, float("nan"))), d)
    return torch.where(x == float("inf"), x, d)

def digamma(self: Tensor) -> Tensor:
    return _digamma64(self.to(7)).to(_float_type(self))

def _zeta64(x: Tensor, q: Tensor) -> Tensor:
    s = torch.zeros_like(x + q)
    a = q
    for k in range(10):
        s = s + torch.pow(q + k, -x)
    a = q + 9.0
    b = torch.pow(a, -x)
    w = a
    s = s + b * w / (x - 1.0) - 0.5 * b
    fa = torch.ones_like(s)
    kk = 0.0
    for c in [12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
              -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
              1.8152105401943546773e17, -7.1661652561756670113e18]:
        fa = fa * (x + kk)
        b = b / w
        s = s + fa * b / c
        kk += 1.0
        fa = fa * (x + kk)
        b = b / w
        kk += 1.0
    # Cephes' order of checks: x == 1, then x < 1, then q at or below 0 (the last where wins).
    s = torch.where((q <= 0) & (x != torch.floor(x)), torch.full_like(s, float("nan")), s)
    s = torch.where((q <= 0) & (q == torch.floor(q)), torch.full_like(s, float("inf")), s)
    s = torch.where(x < 1.0, torch.full_like(s, float("nan")), s)
    return torch.where(x == 1.0, torch.full_like(s, float("inf")), s)

def zeta(self: Tensor, other: Tensor) -> Tensor:
    t = torch.promote_types(_float_type(self), _float_type(other))
    return _zeta64(self.to(7), other.to(7)).to(t)

def zeta_ts(self: Tensor, other: float) -> Tensor:
    return _zeta64(self.to(7), torch.full_like(self, other, dtype=7)).to(_float_type(self))

def zeta_st(self: float, other: Tensor) -> Tensor:
    return _zeta64(torch.full_like(other, self, dtype=7), other.to(7)).to(_float_type(other))

def polygamma(n: int, self: Tensor) -> Tensor:
    x = self.to(7)
    if n == 0:
        return _digamma64(x).to(_float_type(self))
    fact = 1.0
    for k in range(2, n + 1):
        fact = fact * k
    sign = 1.0 if n % 2 == 1 else -1.0
    return (sign * fact * _zeta64(torch.full_like(x, n + 1.0), x)).to(_float_type(self))

def mvlgamma(self: Tensor, p: int) -> Tensor:
    x = self.to(7)
    acc = torch.full_like(x, p * (p - 1) / 4.0 * 1.1447298858494002)
    for i in range(p):
        acc = acc + lgamma(x - i / 2.0).to(7)
    return acc.to(_float_type(self))

def _bessel_i64(x: Tensor, nu: int, scaled: bool) -> Tensor:
    a = torch.abs(x)
    # Power series: I_nu(a) = (a/2)^nu sum_k (a^2/4)^k / (k! (k + nu)!)
    q = a * a / 4.0
    term = torch.ones_like(a)
    for k in range(1, nu + 1):
        term = term / k
    total = term
    for k in range(1, 60):
        term = term * q / (k * (k + nu))
        total = total + term
    series = total * torch.pow(a / 2.0, float(nu))
    if scaled:
        series = series * torch.exp(-a)
    # Large a: I_nu(a) ~ e^a / sqrt(2 pi a) sum_k (-1)^k prod_j (4 nu^2 - (2j - 1)^2) / (k! (8a)^k)
    big = torch.clamp(a, min=20.0)
    mu = 4.0 * nu * nu
    t = torch.ones_like(a)
    asum = t
    for k in range(1, 16):
        t = t * -(mu - (2 * k - 1) * (2 * k - 1)) / (k * 8.0 * big)
        asum = asum + t
    asym = asum / torch.sqrt(2.0 * 3.141592653589793 * big)
    if not scaled:
        asym = asym * torch.exp(big)
    r = torch.where(a > 20.0, asym, series)
    if nu % 2 == 1:
        r = torch.where(x < 0, -r, r)
    return r

# histogram: an element lands in the bin of the last edge at or below it, the last edge itself in
# the last bin, elements outside the edges nowhere. Bin edges of a count as torch.linspace makes
# them (from both ends towards the middle); an empty range widened by 0.5 each way, as numpy does.
def _hist_counts(flat: Tensor, edges: Tensor, weight: Optional[Tensor], density: bool) -> Tensor:
    nb = edges.size(0) - 1
    pos = (edges.unsqueeze(0) <= flat.unsqueeze(1)).to(4).sum(1) - 1
    last = edges[nb]
    pos = torch.where(flat == last, torch.full_like(pos, nb - 1), pos)
    inside = torch.logical_and(flat >= edges[0], flat <= last)
    hit = torch.logical_and(pos.unsqueeze(1) == torch.arange(nb).unsqueeze(0), inside.unsqueeze(1)).to(flat.dtype)
    if weight is not None:
        hit = hit * weight.reshape(-1).to(flat.dtype).unsqueeze(1)
    hist = hit.sum(0)
    if density:
        hist = hist / (hist.sum() * (edges[1:] - edges[:-1]))
    return hist

def histogram_bins(self: Tensor, bins: Tensor, weight: Optional[Tensor], density: bool):
    flat = self.reshape(-1)
    return _hist_counts(flat, bins.to(self.dtype), weight, density), bins

def histogram_ct(self: Tensor, bins: int, rng: Optional[List[float]], weight: Optional[Tensor], density: bool):
    flat = self.reshape(-1)
    if rng is None:
        lo = flat.min()
        hi = flat.max()
    else:
        lo = torch.full([], rng[0], dtype=self.dtype)
        hi = torch.full([], rng[1], dtype=self.dtype)
    same = lo == hi
    lo = torch.where(same, lo - 0.5, lo)
    hi = torch.where(same, hi + 0.5, hi)
    idx = torch.arange(bins + 1).to(self.dtype)
    step = (hi - lo) / bins
    edges = torch.where(idx < (bins + 1) // 2, lo + idx * step, hi - (bins - idx) * step)
    return _hist_counts(flat, edges, weight, density), edges

# mode as torch computes it on the CPU: among the most frequent values of a slice the smallest, and
# the last position holding it. Counts come from comparing every pair of the slice (n x n).
def mode(self: Tensor, dim: int, keepdim: bool):
    scalar = self.dim() == 0
    d = 0 if scalar else dim
    x = self.reshape([1]) if scalar else self
    x = x.transpose(d, -1)
    counts = (x.unsqueeze(-1) == x.unsqueeze(-2)).to(4).sum(-1)
    top = counts == counts.max(-1, keepdim=True)[0]
    fill = x.max(-1, keepdim=True)[0].expand_as(x)
    v = torch.where(top, x, fill).min(-1, keepdim=True)[0]
    pos = torch.arange(x.size(-1)).expand_as(x)
    i = torch.where(x == v, pos, torch.full_like(pos, -1)).max(-1, keepdim=True)[0]
    v = v.transpose(d, -1)
    i = i.transpose(d, -1)
    if scalar or not keepdim:
        v = v.squeeze(d)
        i = i.squeeze(d)
    return v, i

def gcd(self: Tensor, other: Tensor) -> Tensor:
    # Euclid on |a|, |b| element-wise, until every pair is done (an ONNX Loop; at most 92 steps for
    # int64, whose worst case is a pair of consecutive Fibonacci numbers). Done pairs keep their value.
    # The body runs at least once, so that shape learning sees it even when every pair starts done.
    a = torch.abs(self + other * 0)
    b = torch.abs(other + self * 0)
    first = True
    while first or bool(torch.any(b != 0)):
        first = False
        nz = b != 0
        r = torch.remainder(a, torch.where(nz, b, torch.ones_like(b)))
        a = torch.where(nz, b, a)
        b = torch.where(nz, r, b)
    return a

def lcm(self: Tensor, other: Tensor) -> Tensor:
    g = gcd(self, other)
    zero = g == 0
    q = torch.div(self, torch.where(zero, torch.ones_like(g), g), rounding_mode='trunc')
    return torch.where(zero, torch.zeros_like(g), torch.abs(q * other))

def i0(self: Tensor) -> Tensor:
    return _bessel_i64(self.to(7), 0, False).to(_float_type(self))

def i0e(self: Tensor) -> Tensor:
    return _bessel_i64(self.to(7), 0, True).to(_float_type(self))

def i1(self: Tensor) -> Tensor:
    return _bessel_i64(self.to(7), 1, False).to(_float_type(self))

def i1e(self: Tensor) -> Tensor:
    return _bessel_i64(self.to(7), 1, True).to(_float_type(self))

def log_ndtr(self: Tensor) -> Tensor:
    ft = _float_type(self)
    x = self.to(7)
    # x >= -1: log of 0.5 erfc(-x / sqrt 2) in the op's float type (ndtr >= 0.158 there).
    xf = x.to(ft)
    near = torch.log(0.5 * (1.0 + torch.erf(xf * 0.7071067811865476))).to(7)
    # x < -1: ndtr(x) = phi(x) R(-x), Mills' ratio R(t) = 1 / (t + 1 / (t + 2 / (t + 3 / ...))).
    t = torch.clamp(-x, min=1.0)
    cf = t
    for k in range(60, 0, -1):
        cf = t + k / cf
    tail = -0.5 * x * x - 0.9189385332046727 - torch.log(cf)
    return torch.where(x < -1.0, tail, near).to(ft)

def spherical_bessel_j0(self: Tensor) -> Tensor:
    x = self.to(7)
    r = torch.where(x == 0, torch.ones_like(x), torch.sin(x) / x)
    return torch.where(torch.isinf(x), torch.zeros_like(x), r).to(_float_type(self))

# Small dense linear algebra (square matrices whose size is known when converting; the loops unroll
# over it): Gauss-Jordan elimination with partial pivoting, as LAPACK's getrf pivots, and the
# Cholesky-Banachiewicz column order.

def _gauss_jordan(A: Tensor, B: Tensor) -> Tensor:
    n = A.size(-1)
    M = torch.cat([A, B], -1)
    ar = torch.arange(n)
    for i in range(n):
        col = torch.abs(M[..., :, i])
        col = torch.where(ar >= i, col, torch.full_like(col, -1.0))
        p = torch.argmax(col, -1, keepdim=True)
        perm = torch.where(ar == i, p, torch.where(ar == p, torch.full_like(p, i), ar))
        M = torch.gather(M, -2, perm.unsqueeze(-1).expand_as(M))
        piv = M[..., i:i + 1, :] / M[..., i:i + 1, i:i + 1]
        M = M - M[..., :, i:i + 1] * piv
        M = torch.where((ar == i).unsqueeze(-1), piv, M)
    return M[..., :, n:]

def inv(A: Tensor) -> Tensor:
    return _gauss_jordan(A, torch.eye(A.size(-1), dtype=A.dtype).expand_as(A))

def inv_ex(A: Tensor, check_errors: bool):
    return inv(A), torch.zeros(A.shape[:-2], dtype=3)

def _solve_left(A: Tensor, B: Tensor) -> Tensor:
    vector = B.dim() == 1 or (B.dim() == A.dim() - 1 and B.shape == A.shape[:-1])
    b = B.unsqueeze(-1) if vector else B
    a = A + torch.zeros_like(b[..., :1, :1])
    b = b + torch.zeros_like(A[..., :1, :1])
    x = _gauss_jordan(a, b)
    return x.squeeze(-1) if vector else x

def solve(A: Tensor, B: Tensor, left: bool) -> Tensor:
    if not left:
        return _solve_left(A.transpose(-2, -1), B.transpose(-2, -1)).transpose(-2, -1)
    return _solve_left(A, B)

def solve_ex(A: Tensor, B: Tensor, left: bool, check_errors: bool):
    x = solve(A, B, left)
    return x, torch.zeros(A.shape[:-2], dtype=3)

def cholesky(A: Tensor, upper: bool) -> Tensor:
    n = A.size(-1)
    ar = torch.arange(n)
    L = torch.zeros_like(A)
    for j in range(n):
        d = torch.sqrt(A[..., j, j] - (L[..., j, :j] * L[..., j, :j]).sum(-1))
        col = (A[..., :, j] - (L[..., :, :j] * L[..., j:j + 1, :j]).sum(-1)) / d.unsqueeze(-1)
        col = torch.where(ar == j, d.unsqueeze(-1), torch.where(ar > j, col, torch.zeros_like(col)))
        L = torch.where(ar == j, col.unsqueeze(-1), L)
    return L.transpose(-2, -1) if upper else L

def cholesky_ex(A: Tensor, upper: bool, check_errors: bool):
    return cholesky(A, upper), torch.zeros(A.shape[:-2], dtype=3)

def matrix_power(A: Tensor, k: int) -> Tensor:
    if k == 0:
        return torch.eye(A.size(-1), dtype=A.dtype).expand_as(A).clone()
    base = inv(A) if k < 0 else A
    r = base
    for _ in range(abs(k) - 1):
        r = torch.matmul(r, base)
    return r

def unique_consecutive(self: Tensor, return_inverse: bool, return_counts: bool, dim: Optional[int]):
    # dim=None only (the rule requires it): runs of equal values in the flattened tensor.
    flat = self.flatten()
    keep = torch.cat([torch.ones([1], dtype=11), flat[1:] != flat[:-1]])
    values = flat[keep]
    inverse = (torch.cumsum(keep.to(4), 0) - 1).reshape(self.shape) if return_inverse else torch.zeros([0], dtype=4)
    if return_counts:
        pos = torch.nonzero(keep).flatten()
        counts = torch.diff(torch.cat([pos, torch.full([1], flat.size(0), dtype=4)]))
    else:
        counts = torch.zeros([0], dtype=4)
    return values, inverse, counts

def bincount(self: Tensor, weights: Optional[Tensor], minlength: int) -> Tensor:
    size = torch.clamp(self.max() + 1, min=minlength)
    hit = self.unsqueeze(1) == torch.arange(size)
    if weights is None:
        return hit.to(4).sum(0)
    w = weights.to(7) if not weights.is_floating_point() else weights
    return (hit.to(w.dtype) * w.unsqueeze(1)).sum(0).to(7 if not weights.is_floating_point() else weights.dtype)

def block_diag(tensors: List[Tensor]) -> Tensor:
    mats: List[Tensor] = []
    for t in tensors:
        if t.dim() == 0:
            mats.append(t.reshape([1, 1]))
        elif t.dim() == 1:
            mats.append(t.reshape([1, -1]))
        else:
            mats.append(t)
    cols = 0
    for m in mats:
        cols += m.size(1)
    rows: List[Tensor] = []
    left = 0
    for m in mats:
        rows.append(torch.constant_pad_nd(m, [left, cols - left - m.size(1)], 0.0))
        left += m.size(1)
    return torch.cat(rows, 0)

def combinations(self: Tensor, r: int, with_replacement: bool) -> Tensor:
    if r == 0:
        return torch.zeros([0], dtype=self.dtype)
    if r == 1:
        return self.unsqueeze(1)
    ar = torch.arange(self.size(0))
    axes: List[Tensor] = []
    for _ in range(r):
        axes.append(ar)
    grids = torch.meshgrid(axes, indexing="ij")
    keep = torch.ones_like(grids[0], dtype=11)
    for k in range(r - 1):
        keep = keep & ((grids[k] <= grids[k + 1]) if with_replacement else (grids[k] < grids[k + 1]))
    cols: List[Tensor] = []
    for g in grids:
        cols.append(self[g[keep]])
    return torch.stack(cols, 1)

def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float, reduction: int) -> Tensor:
    dim = input1.dim() - 1
    eps = 1e-12
    prod = (input1 * input2).sum(dim)
    mag1 = (input1 * input1).sum(dim) + eps
    mag2 = (input2 * input2).sum(dim) + eps
    cos = prod / torch.sqrt(mag1 * mag2)
    zeros = torch.zeros_like(cos)
    pos = torch.where(target == 1, 1 - cos, zeros)
    neg = torch.where(target == -1, (cos - margin).clamp_min(0), zeros)
    out = pos + neg
    if reduction == 1:
        return out.mean()
    if reduction == 2:
        return out.sum()
    return out

def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float, p: float, eps: float,
                        swap: bool, reduction: int) -> Tensor:
    dist_pos = torch.pairwise_distance(anchor, positive, p, eps)
    dist_neg = torch.pairwise_distance(anchor, negative, p, eps)
    if swap:
        dist_neg = torch.min(dist_neg, torch.pairwise_distance(positive, negative, p, eps))
    out = (margin + dist_pos - dist_neg).clamp_min(0)
    if reduction == 1:
        return out.mean()
    if reduction == 2:
        return out.sum()
    return out

def multi_margin_loss(input: Tensor, target: Tensor, p: float, margin: float, weight: Optional[Tensor],
                      reduction: int) -> Tensor:
    x = input if input.dim() == 2 else input.reshape([1, -1])
    t = target.reshape([-1, 1])
    z = (margin - x.gather(1, t) + x).clamp_min(0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight[t]
    z = z.scatter(1, t, 0.0)
    out = z.sum(1) / x.size(1)
    if input.dim() < 2:
        out = out.reshape(target.shape)
    if reduction == 1:
        return out.mean()
    if reduction == 2:
        return out.sum()
    return out

def select_scatter(self: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    y = self.clone()
    y.select(dim, index).copy_(src)
    return y

def slice_scatter(self: Tensor, src: Tensor, dim: int, start: Optional[int], end: Optional[int], step: int) -> Tensor:
    y = self.clone()
    y.transpose(0, dim)[start:end:step].copy_(src.transpose(0, dim))
    return y
)TS";

struct Rule {
  const char* schema;
  const char* fn;
};

const Rule kRules[] = {
    {"aten::mT(Tensor(a) self) -> Tensor(a)", "mT"},
    {"aten::mH(Tensor(a) self) -> Tensor(a)", "mH"},
    {"aten::adjoint(Tensor(a) self) -> Tensor(a)", "mH"},
    {"aten::matrix_H(Tensor(a) self) -> Tensor(a)", "matrix_H"},
    {"aten::dist(Tensor self, Tensor other, Scalar p=2) -> Tensor", "dist"},
    {"aten::vdot(Tensor self, Tensor other) -> Tensor", "vdot"},
    {"aten::linalg_vecdot(Tensor x, Tensor y, *, int dim=-1) -> Tensor", "vecdot"},
    {"aten::isposinf(Tensor self) -> Tensor", "isposinf"},
    {"aten::isneginf(Tensor self) -> Tensor", "isneginf"},
    {"aten::isreal(Tensor self) -> Tensor", "isreal"},
    {"aten::sgn(Tensor self) -> Tensor", "sgn"},
    {"aten::angle(Tensor self) -> Tensor", "angle"},
    {"aten::erfc(Tensor self) -> Tensor", "erfc"},
    {"aten::special_erfc(Tensor self) -> Tensor", "erfc"},
    {"aten::special_ndtr(Tensor self) -> Tensor", "ndtr"},
    {"aten::ldexp.Tensor(Tensor self, Tensor other) -> Tensor", "ldexp"},
    {"aten::isclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) -> Tensor",
     "isclose"},
    {"aten::isin.Tensor_Tensor(Tensor elements, Tensor test_elements, *, bool assume_unique=False, bool invert=False) -> Tensor",
     "isin"},
    {"aten::isin.Tensor_Scalar(Tensor elements, Scalar test_element, *, bool assume_unique=False, bool invert=False) -> Tensor",
     "isin_ts"},
    {"aten::isin.Scalar_Tensor(Scalar element, Tensor test_elements, *, bool assume_unique=False, bool invert=False) -> Tensor",
     "isin_st"},
    {"aten::diagflat(Tensor self, int offset=0) -> Tensor", "diagflat"},
    {"aten::argwhere(Tensor self) -> Tensor", "argwhere"},
    {"aten::trapezoid.dx(Tensor y, *, Scalar dx=1, int dim=-1) -> Tensor", "trapezoid_dx"},
    {"aten::trapz.dx(Tensor y, *, float dx=1, int dim=-1) -> Tensor", "trapezoid_dx"},
    {"aten::trapezoid.x(Tensor y, Tensor x, *, int dim=-1) -> Tensor", "trapezoid_x"},
    {"aten::trapz.x(Tensor y, Tensor x, *, int dim=-1) -> Tensor", "trapezoid_x"},
    {"aten::cumulative_trapezoid.dx(Tensor y, *, Scalar dx=1, int dim=-1) -> Tensor", "cumulative_trapezoid_dx"},
    {"aten::cumulative_trapezoid.x(Tensor y, Tensor x, *, int dim=-1) -> Tensor", "cumulative_trapezoid_x"},
    {"aten::linalg_vander(Tensor x, *, int? N=None) -> Tensor", "vander"},
    {"aten::vander(Tensor x, int? N=None, bool increasing=False) -> Tensor", "vander_np"},
    {"aten::cosine_embedding_loss(Tensor input1, Tensor input2, Tensor target, float margin=0.0, int reduction=Mean) -> Tensor",
     "cosine_embedding_loss"},
    {"aten::triplet_margin_loss(Tensor anchor, Tensor positive, Tensor negative, float margin=1.0, float p=2, float eps=1e-06, bool swap=False, int reduction=Mean) -> Tensor",
     "triplet_margin_loss"},
    {"aten::multi_margin_loss(Tensor self, Tensor target, Scalar p=1, Scalar margin=1, Tensor? weight=None, int reduction=Mean) -> Tensor",
     "multi_margin_loss"},
    {"aten::native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
     "native_batch_norm"},
    {"aten::frexp.Tensor(Tensor self) -> (Tensor mantissa, Tensor exponent)", "frexp"},
    {"aten::renorm(Tensor self, Scalar p, int dim, Scalar maxnorm) -> Tensor", "renorm"},
    {"aten::fft_fftshift(Tensor self, int[1]? dim=None) -> Tensor", "fftshift"},
    {"aten::fft_ifftshift(Tensor self, int[1]? dim=None) -> Tensor", "ifftshift"},
    {"aten::sum_to_size(Tensor self, int[] size) -> Tensor", "sum_to_size"},
    {"aten::diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor", "diagonal_scatter"},
    {"aten::lgamma(Tensor self) -> Tensor", "lgamma"},
    {"aten::gcd(Tensor self, Tensor other) -> Tensor", "gcd"},
    {"aten::lcm(Tensor self, Tensor other) -> Tensor", "lcm"},
    {"aten::histogram.bins_tensor(Tensor self, Tensor bins, *, Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)",
     "histogram_bins"},
    {"aten::histogram.bin_ct(Tensor self, int bins=100, *, float[]? range=None, Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)",
     "histogram_ct"},
    {"aten::mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)", "mode"},
    {"aten::digamma(Tensor self) -> Tensor", "digamma"},
    {"aten::special_digamma(Tensor self) -> Tensor", "digamma"},
    {"aten::special_psi(Tensor self) -> Tensor", "digamma"},
    {"aten::special_gammaln(Tensor self) -> Tensor", "lgamma"},
    {"aten::polygamma(int n, Tensor self) -> Tensor", "polygamma"},
    {"aten::special_polygamma(int n, Tensor self) -> Tensor", "polygamma"},
    {"aten::special_zeta(Tensor self, Tensor other) -> Tensor", "zeta"},
    {"aten::special_zeta.other_scalar(Tensor self, Scalar other) -> Tensor", "zeta_ts"},
    {"aten::special_zeta.self_scalar(Scalar self, Tensor other) -> Tensor", "zeta_st"},
    {"aten::mvlgamma(Tensor self, int p) -> Tensor", "mvlgamma"},
    {"aten::special_multigammaln(Tensor self, int p) -> Tensor", "mvlgamma"},
    {"aten::i0(Tensor self) -> Tensor", "i0"},
    {"aten::special_i0(Tensor self) -> Tensor", "i0"},
    {"aten::special_modified_bessel_i0(Tensor self) -> Tensor", "i0"},
    {"aten::special_i0e(Tensor self) -> Tensor", "i0e"},
    {"aten::special_i1(Tensor self) -> Tensor", "i1"},
    {"aten::special_modified_bessel_i1(Tensor self) -> Tensor", "i1"},
    {"aten::special_i1e(Tensor self) -> Tensor", "i1e"},
    {"aten::special_log_ndtr(Tensor self) -> Tensor", "log_ndtr"},
    {"aten::special_spherical_bessel_j0(Tensor x) -> Tensor", "spherical_bessel_j0"},
    {"aten::linalg_inv(Tensor A) -> Tensor", "inv"},
    {"aten::inverse(Tensor self) -> Tensor", "inv"},
    {"aten::linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (Tensor inverse, Tensor info)", "inv_ex"},
    {"aten::linalg_solve(Tensor A, Tensor B, *, bool left=True) -> Tensor", "solve"},
    {"aten::linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False) -> (Tensor result, Tensor info)",
     "solve_ex"},
    {"aten::linalg_cholesky(Tensor self, *, bool upper=False) -> Tensor", "cholesky"},
    {"aten::cholesky(Tensor self, bool upper=False) -> Tensor", "cholesky"},
    {"aten::linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False) -> (Tensor L, Tensor info)",
     "cholesky_ex"},
    {"aten::linalg_matrix_power(Tensor self, int n) -> Tensor", "matrix_power"},
    {"aten::matrix_power(Tensor self, int n) -> Tensor", "matrix_power"},
    {"aten::unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False, int? dim=None) -> (Tensor, Tensor, Tensor)",
     "unique_consecutive"},
    {"aten::bincount(Tensor self, Tensor? weights=None, int minlength=0) -> Tensor", "bincount"},
    {"aten::block_diag(Tensor[] tensors) -> Tensor", "block_diag"},
    {"aten::combinations(Tensor self, int r=2, bool with_replacement=False) -> Tensor", "combinations"},
    {"aten::select_scatter(Tensor self, Tensor src, int dim, int index) -> Tensor", "select_scatter"},
    {"aten::slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor",
     "slice_scatter"},
};

struct Compiled {
  std::shared_ptr<tj::CompilationUnit> cu;
  std::vector<std::pair<c10::FunctionSchema, std::shared_ptr<tj::Graph>>> rules;
};

const Compiled& compiled() {
  static Compiled c = [] {
    Compiled r;
    r.cu = torch::jit::compile(kSource);
    for (const Rule& rule : kRules) {
      c10::FunctionSchema schema = tj::parseSchema(rule.schema);
      auto g = tj::toGraphFunction(r.cu->get_function(rule.fn)).graph()->copy();
      tj::Inline(*g);
      r.rules.emplace_back(std::move(schema), std::move(g));
    }
    return r;
  }();
  return c;
}

void collect(tj::Block* b, std::vector<tj::Node*>& out) {
  for (tj::Node* n : b->nodes()) {
    out.push_back(n);
    for (tj::Block* sub : n->blocks()) collect(sub, out);
  }
}

// The nodes inserted before `end` since `first`, sub-blocks included, take the replaced node's
// source range and scope, so messages and reports point at the user's line and module.
void adopt_origin(tj::Node* first, tj::Node* end, tj::Node* from) {
  for (tj::Node* n = first; n != end; n = n->next()) {
    n->setSourceRange(from->sourceRange());
    n->setScope(from->scope());
    if (from->callstack()) n->setCallStack(*from->callstack());
    for (tj::Block* sub : n->blocks())
      if (sub->nodes().begin() != sub->nodes().end())
        adopt_origin(*sub->nodes().begin(), sub->return_node(), from);
  }
}

}  // namespace

std::vector<std::string> decomposed_ops() {
  std::vector<std::string> r;
  for (const Rule& rule : kRules) {
    std::string name = rule.schema;
    name = name.substr(0, name.find_first_of(".("));
    if (std::find(r.begin(), r.end(), name) == r.end()) r.push_back(name);
  }
  std::sort(r.begin(), r.end());
  return r;
}

int decompose_ops(tj::Graph& g) {
  std::vector<tj::Node*> nodes;
  collect(g.block(), nodes);
  // Compiling the functions takes a moment: only when some node may need one.
  static const std::vector<std::string> names = decomposed_ops();
  if (std::none_of(nodes.begin(), nodes.end(), [](const tj::Node* n) {
        return std::binary_search(names.begin(), names.end(), std::string(n->kind().toQualString()));
      }))
    return 0;
  const Compiled& c = compiled();
  int count = 0;
  for (tj::Node* n : nodes) {
    for (const auto& [schema, fg] : c.rules) {
      // Same operator and overload (argument types are checked by arity and below: SymInt and
      // int spell the same argument differently across releases).
      if (n->kind().toQualString() != schema.name() || !n->maybeSchema() ||
          n->schema().overload_name() != schema.overload_name() || fg->inputs().size() != n->inputs().size())
        continue;
      bool complex_in = std::any_of(n->inputs().begin(), n->inputs().end(), [](const tj::Value* v) {
        auto t = v->type()->cast<c10::TensorType>();
        return t && t->scalarType() && c10::isComplexType(*t->scalarType());
      });
      if (complex_in) break;
      // unique_consecutive along a dim is not this rewrite.
      if (schema.name() == "aten::unique_consecutive" && n->inputs().size() > 3 &&
          n->input(3)->type()->kind() != c10::TypeKind::NoneType)
        break;
      tj::Node* before = n->prev();
      std::vector<tj::Value*> outs;
      {
        tj::WithInsertPoint guard(n);
        // A Scalar argument given to a float parameter becomes a float first (an int there would
        // reach float arithmetic in the interpreter).
        std::vector<tj::Value*> args(n->inputs().begin(), n->inputs().end());
        for (size_t i = 0; i < args.size(); ++i) {
          auto want = fg->inputs()[i]->type();
          auto have = args[i]->type();
          if (want->kind() == c10::TypeKind::FloatType && have->kind() != c10::TypeKind::FloatType &&
              (have->kind() == c10::TypeKind::IntType || have->kind() == c10::TypeKind::NumberType ||
               have->kind() == c10::TypeKind::BoolType))
            args[i] = g.insert(c10::Symbol::fromQualString("aten::Float"), {args[i]});
        }
        outs = tj::insertGraph(g, *fg, args);
      }
      adopt_origin(before->next(), n, n);
      // Several outputs: the function returns them as a tuple.
      if (n->outputs().size() > 1 && outs.size() == 1 && outs[0]->node()->kind() == c10::prim::TupleConstruct)
        outs = std::vector<tj::Value*>(outs[0]->node()->inputs().begin(), outs[0]->node()->inputs().end());
      if (outs.size() == n->outputs().size()) {
        for (size_t k = 0; k < outs.size(); ++k) n->output(k)->replaceAllUsesWith(outs[k]);
        n->destroy();
        ++count;
      }
      break;
    }
  }
  return count;
}

}  // namespace t2o
