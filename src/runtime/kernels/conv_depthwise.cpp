#include "runtime/kernels/conv_depthwise.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <limits>
#include <utility>

#include "runtime/kernels/avx512_math.h"
#include "runtime/kernels/util.h"

namespace t2o::kern {

namespace {

std::atomic<uint64_t> g_runs{0};
constexpr int64_t kBlk = 16;

T2O_AVX512_WARNINGS_OFF

struct Post {
  // Up to four element-wise steps: Relu with slope `a`, Clip to [a, b], Swish or HardSwish.
  int n = 0;
  ConvPostOp::Kind kind[4] = {};
  __m512 a[4], b[4];
};

T2O_AVX512 inline __m512 apply(const Post& p, __m512 v) {
  for (int i = 0; i < p.n; ++i) {
    switch (p.kind[i]) {
      case ConvPostOp::Kind::Clip: v = clamp512(v, p.a[i], p.b[i]); break;
      case ConvPostOp::Kind::Swish: v = swish512(v); break;
      case ConvPostOp::Kind::HardSwish: v = hardswish512(v); break;
      default: {
        // Relu of a nonzero slope: x < 0 ? slope * x : x (NaN is not below zero: kept).
        __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
        v = _mm512_mask_mul_ps(v, neg, v, p.a[i]);
      }
    }
  }
  return v;
}

// One output row of one channel block is cut into strips of at most 16 pixels. A strip keeps its
// U accumulators in registers; each input pixel of a window row is loaded once and feeds the (up
// to K) outputs whose windows hold it. Only the strip at the row's start can read pixels in the
// left pad (its first L = K / 2 pixels), and only the one at its end pixels in the end pad (its
// last R): the taps on them are left out at compile time.
struct Strips {
  const float* x;     // the block's [H, W, 16] input
  const float* w;     // the block's K x K taps, 16 lanes each
  const float* b;     // the block's bias (16 lanes)
  const Post* post;   // post-ops applied before the store, or null
  float lo, hi;       // without `post`: the Relu / Clip post-op as one clamp (-inf / +inf when none)
  __mmask16 mask;     // lanes that are real channels
  int64_t H, W;
  bool prefetch;      // whether strips prefetch the rows the next output row will add
};

constexpr int kMaxK = 5;

template <int K, int S, int U, int L, int R>
T2O_AVX512 void strip(const Strips& s, const float* const rows[kMaxK + 2], int k0, int k1, float* y, int64_t ow0) {
  constexpr int P = K / 2;
  constexpr int kJ = (U - 1) * S + K;  // input pixels of one window row
  // The rows the next output row adds (rows[K], and rows[K + 1] at stride 2), when the map is too
  // large to stay in cache: the part of them this strip's columns will read.
  for (int r = K; r < K + S; ++r)
    if (rows[r])
      for (int j = 0; j < U * S; ++j) _mm_prefetch(reinterpret_cast<const char*>(rows[r] + (ow0 * S + j) * kBlk), _MM_HINT_T0);
  __m512 acc[U];
  const __m512 bias = _mm512_loadu_ps(s.b);
#pragma GCC unroll 16
  for (int u = 0; u < U; ++u) acc[u] = bias;
  for (int kh = k0; kh < k1; ++kh) {
    const float* xr = rows[kh] + ow0 * S * kBlk;  // pixel j of the window row is at xr + (j - P) * 16
    __m512 w[K];
#pragma GCC unroll 5
    for (int kw = 0; kw < K; ++kw) w[kw] = _mm512_loadu_ps(s.w + (kh * K + kw) * kBlk);
#pragma GCC unroll 40
    for (int j = 0; j < kJ; ++j) {
      if (j < L || j >= kJ - R) continue;
      __m512 v = _mm512_loadu_ps(xr + (j - P) * kBlk);
      // One load per pixel: without this GCC folds the load into each of its FMAs.
      __asm__("" : "+v"(v));
      // Output u reads pixel j through tap kw when j = u * S + kw.
#pragma GCC unroll 5
      for (int kw = 0; kw < K; ++kw)
        if (j >= kw && (j - kw) % S == 0 && (j - kw) / S < U) acc[(j - kw) / S] = _mm512_fmadd_ps(v, w[kw], acc[(j - kw) / S]);
    }
  }
  if (s.post) {
#pragma GCC unroll 16
    for (int u = 0; u < U; ++u) _mm512_storeu_ps(y + (ow0 + u) * kBlk, _mm512_maskz_mov_ps(s.mask, apply(*s.post, acc[u])));
    return;
  }
  const __m512 lo = _mm512_set1_ps(s.lo), hi = _mm512_set1_ps(s.hi);
#pragma GCC unroll 16
  for (int u = 0; u < U; ++u)
    _mm512_storeu_ps(y + (ow0 + u) * kBlk, _mm512_maskz_mov_ps(s.mask, clamp512(acc[u], lo, hi)));
}

using StripFn = void (*)(const Strips&, const float* const[kMaxK + 2], int, int, float*, int64_t);
constexpr int kMaxStrip = 16;
// Per strip width U: the strip with L = 0 or K / 2 leading pixels in the pad and R = 0 .. K / 2
// trailing ones, at index (L ? K / 2 + 1 : 0) + R.
using StripRow = std::array<StripFn, 2 * (kMaxK / 2 + 1)>;

template <int K, int S, int U, int... Rs>
constexpr StripRow strip_row(std::integer_sequence<int, Rs...>) {
  StripRow r{};
  constexpr int n = sizeof...(Rs);
  const StripFn no_left[n] = {&strip<K, S, U, 0, Rs>...};
  const StripFn left[n] = {&strip<K, S, U, K / 2, Rs>...};
  for (int i = 0; i < n; ++i) {
    r[static_cast<size_t>(i)] = no_left[i];
    r[static_cast<size_t>(n + i)] = left[i];
  }
  return r;
}
template <int K, int S, int... Us>
constexpr std::array<StripRow, sizeof...(Us)> strip_table(std::integer_sequence<int, Us...>) {
  return {{strip_row<K, S, Us + 1>(std::make_integer_sequence<int, K / 2 + 1>{})...}};
}
// Inputs of more bytes than this (about half of a 1 MB L2) are prefetched a row ahead.
constexpr int64_t kPrefetchAbove = 512 << 10;
// kStrips[K == 5][S - 1][U - 1]
const std::array<StripRow, kMaxStrip> kStrips[2][2] = {
    {strip_table<3, 1>(std::make_integer_sequence<int, kMaxStrip>{}),
     strip_table<3, 2>(std::make_integer_sequence<int, kMaxStrip>{})},
    {strip_table<5, 1>(std::make_integer_sequence<int, kMaxStrip>{}),
     strip_table<5, 2>(std::make_integer_sequence<int, kMaxStrip>{})}};

// Output row `oh` of one channel block into y (its OW x 16 floats).
T2O_AVX512 void out_row(const Strips& s, int64_t K, int64_t stride, int64_t oh, int64_t OW, float* y) {
  const int64_t P = K / 2;
  const int64_t ih0 = oh * stride - P;
  const float* rows[kMaxK + 2];
  for (int64_t kh = 0; kh < K; ++kh) rows[kh] = s.x + std::clamp<int64_t>(ih0 + kh, 0, s.H - 1) * s.W * kBlk;
  for (int64_t r = K; r < K + 2; ++r) rows[r] = s.prefetch && ih0 + r < s.H ? s.x + (ih0 + r) * s.W * kBlk : nullptr;
  const int k0 = static_cast<int>(std::max<int64_t>(0, -ih0));
  const int k1 = static_cast<int>(std::min<int64_t>(K, s.H - ih0));
  // Strips of equal size (to within one pixel), at most kMaxStrip each.
  const int64_t n = (OW + kMaxStrip - 1) / kMaxStrip;
  const auto& table = kStrips[K == 5][stride - 1];
  int64_t ow0 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t u = OW * (i + 1) / n - ow0;
    const bool l = ow0 == 0;
    // Pixels of the strip's last window past the row's end (at most P: end pads are at most P).
    const int64_t r = std::max<int64_t>(0, (ow0 + u - 1) * stride - P + K - s.W);
    table[static_cast<size_t>(u - 1)][static_cast<size_t>((l ? P + 1 : 0) + r)](s, rows, k0, k1, y, ow0);
    ow0 += u;
  }
}
T2O_AVX512_WARNINGS_ON

}  // namespace

bool DepthwiseConv::qualifies(const Tensor& w, const Tensor* bias, int64_t group,
                              const std::vector<ConvPostOp>& post) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 || w.dtype() != DType::Float || w.rank() != 4 || w.dim(1) != 1 || (w.dim(2) != 3 && w.dim(2) != 5) ||
      w.dim(3) != w.dim(2) || w.dim(0) != group || group < 1 || post.size() > 4)
    return false;
  if (bias && (bias->dtype() != DType::Float || bias->numel() != w.dim(0))) return false;
  for (const ConvPostOp& p : post)
    if (p.kind == ConvPostOp::Kind::Sum) return false;
  return true;
}

bool DepthwiseConv::takes(const Geom& g) const {
  const int64_t p = kernel_ / 2;
  if (g.nsp != 2 || g.k[0] != kernel_ || g.k[1] != kernel_) return false;
  if (g.stride[0] != g.stride[1] || (g.stride[0] != 1 && g.stride[0] != 2)) return false;
  if (g.dil[0] != 1 || g.dil[1] != 1 || g.pb[0] != p || g.pb[1] != p || g.pe[0] > p || g.pe[1] > p) return false;
  return true;
}

std::unique_ptr<DepthwiseConv> DepthwiseConv::make(const Tensor& w, const Tensor* bias,
                                                   const std::vector<ConvPostOp>& post) {
  std::unique_ptr<DepthwiseConv> d(new DepthwiseConv());
  const int64_t c = w.dim(0), cb = (c + kBlk - 1) / kBlk, kk = w.dim(2) * w.dim(3);
  d->channels_ = c;
  d->kernel_ = w.dim(2);
  d->post_ = post;
  d->w_ = Tensor(DType::Float, {cb, kk, kBlk});
  d->b_ = Tensor(DType::Float, {cb, kBlk});
  const float* ws = w.data<float>();
  float* wd = d->w_.data<float>();
  float* bd = d->b_.data<float>();
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t k = 0; k < kk; ++k) wd[((ch / kBlk) * kk + k) * kBlk + ch % kBlk] = ws[ch * kk + k];
    if (bias) bd[ch] = bias->data<float>()[ch];
  }
  return d;
}

T2O_AVX512_WARNINGS_OFF

T2O_AVX512 void DepthwiseConv::run(const float* x, int64_t N, int64_t H, int64_t W, float* y, int64_t OH, int64_t OW,
                                   int64_t stride, int threads) const {
  const int64_t cb = (channels_ + kBlk - 1) / kBlk;
  // A plain Relu is a clamp to [0, inf) (so that -inf gives 0, not -inf * 0). A lone clamp is the
  // strips' own; other post-ops run in `post` before each store.
  const float inf = std::numeric_limits<float>::infinity();
  using K = ConvPostOp::Kind;
  Post post;
  float lo[4], hi[4];
  for (const ConvPostOp& p : post_) {
    const bool clip = p.kind == K::Clip || (p.kind == K::Relu && p.alpha == 0.0f);
    post.kind[post.n] = clip ? K::Clip : p.kind;
    lo[post.n] = p.alpha;
    hi[post.n] = p.kind == K::Clip ? p.beta : inf;
    post.a[post.n] = _mm512_set1_ps(lo[post.n]);
    post.b[post.n] = _mm512_set1_ps(hi[post.n]);
    ++post.n;
  }
  const bool lone = post.n == 1 && post.kind[0] == K::Clip;
  const float clamp_lo = lone ? lo[0] : -inf, clamp_hi = lone ? hi[0] : inf;
  const int64_t tail = channels_ % kBlk;
  // Rows of all images and blocks in one range: a thread's share is consecutive rows of a block.
  parallel_for(N * cb * OH, threads, 4, [&](int64_t begin, int64_t end) {
    Strips s;
    s.post = post.n > 0 && !lone ? &post : nullptr;
    s.lo = clamp_lo;
    s.hi = clamp_hi;
    s.H = H;
    s.W = W;
    s.prefetch = 4 * cb * H * W * kBlk > kPrefetchAbove;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t oh = i % OH, plane = i / OH, blk = plane % cb;
      s.mask = tail && blk == cb - 1 ? static_cast<__mmask16>((1u << tail) - 1) : 0xFFFF;
      s.x = x + plane * H * W * kBlk;
      s.w = w_.data<float>() + blk * kernel_ * kernel_ * kBlk;
      s.b = b_.data<float>() + blk * kBlk;
      out_row(s, kernel_, stride, oh, OW, y + (plane * OH + oh) * OW * kBlk);
    }
  });
  g_runs.fetch_add(1, std::memory_order_relaxed);
}

T2O_AVX512_WARNINGS_ON

uint64_t DepthwiseConv::runs_so_far() { return g_runs.load(std::memory_order_relaxed); }

}  // namespace t2o::kern
