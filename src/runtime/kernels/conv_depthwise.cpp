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
  // Up to four element-wise steps: Relu with slope `a` (not 0), or Clip to [a, b].
  int n = 0;
  bool clip[4] = {};
  __m512 a[4], b[4];
};

T2O_AVX512 inline __m512 apply(const Post& p, __m512 v) {
  for (int i = 0; i < p.n; ++i) {
    if (p.clip[i]) {
      v = clamp512(v, p.a[i], p.b[i]);
    } else {
      // x < 0 ? slope * x : x (NaN is not below zero: kept).
      __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
      v = _mm512_mask_mul_ps(v, neg, v, p.a[i]);
    }
  }
  return v;
}

// One output row of one channel block is cut into strips of at most 16 pixels. A strip keeps its
// U accumulators in registers; each input pixel of a window row is loaded once and feeds the (up
// to three) outputs whose windows hold it. The first pixel a strip could read lies in the left pad
// only for the strip at the row's start (L) and the last one in the end pad only for the strip at
// its end (R): the taps on them are left out at compile time.
struct Strips {
  const float* x;     // the block's [H, W, 16] input
  const float* w;     // the block's nine taps, 16 lanes each
  const float* b;     // the block's bias (16 lanes)
  float lo, hi;       // the Relu / Clip post-op as one clamp (-inf / +inf when there is none)
  __mmask16 mask;     // lanes that are real channels
  int64_t H, W;
  bool prefetch;      // whether strips prefetch the rows the next output row will add
};

template <int S, int U, bool L, bool R>
T2O_AVX512 void strip(const Strips& s, const float* const rows[5], int k0, int k1, float* y, int64_t ow0) {
  constexpr int kJ = (U - 1) * S + 3;  // input pixels of one window row
  // The rows the next output row adds (rows[3], and rows[4] at stride 2), when the map is too
  // large to stay in cache: the part of them this strip's columns will read.
  for (int r = 3; r < 3 + S; ++r)
    if (rows[r])
      for (int j = 0; j < U * S; ++j) _mm_prefetch(reinterpret_cast<const char*>(rows[r] + (ow0 * S + j) * kBlk), _MM_HINT_T0);
  __m512 acc[U];
  const __m512 bias = _mm512_loadu_ps(s.b);
#pragma GCC unroll 16
  for (int u = 0; u < U; ++u) acc[u] = bias;
  for (int kh = k0; kh < k1; ++kh) {
    const float* xr = rows[kh] + ow0 * S * kBlk;  // pixel j of the window row is at xr + (j - 1) * 16
    const __m512 w0 = _mm512_loadu_ps(s.w + (kh * 3) * kBlk);
    const __m512 w1 = _mm512_loadu_ps(s.w + (kh * 3 + 1) * kBlk);
    const __m512 w2 = _mm512_loadu_ps(s.w + (kh * 3 + 2) * kBlk);
#pragma GCC unroll 40
    for (int j = 0; j < kJ; ++j) {
      if ((L && j == 0) || (R && j == kJ - 1)) continue;
      __m512 v = _mm512_loadu_ps(xr + (j - 1) * kBlk);
      // One load per pixel: without this GCC folds the load into each of its FMAs.
      __asm__("" : "+v"(v));
      // Output u reads pixel j through tap kw when j = u * S + kw.
      if (j % S == 0 && j / S < U) acc[j / S] = _mm512_fmadd_ps(v, w0, acc[j / S]);
      if (j >= 1 && (j - 1) % S == 0 && (j - 1) / S < U) acc[(j - 1) / S] = _mm512_fmadd_ps(v, w1, acc[(j - 1) / S]);
      if (j >= 2 && (j - 2) % S == 0 && (j - 2) / S < U) acc[(j - 2) / S] = _mm512_fmadd_ps(v, w2, acc[(j - 2) / S]);
    }
  }
  const __m512 lo = _mm512_set1_ps(s.lo), hi = _mm512_set1_ps(s.hi);
#pragma GCC unroll 16
  for (int u = 0; u < U; ++u)
    _mm512_storeu_ps(y + (ow0 + u) * kBlk, _mm512_maskz_mov_ps(s.mask, clamp512(acc[u], lo, hi)));
}

using StripFn = void (*)(const Strips&, const float* const[5], int, int, float*, int64_t);

// kStrips[S - 1][U - 1][L * 2 + R]
template <int S, int... Us>
constexpr std::array<std::array<StripFn, 4>, sizeof...(Us)> strip_table(std::integer_sequence<int, Us...>) {
  return {{{&strip<S, Us + 1, false, false>, &strip<S, Us + 1, false, true>, &strip<S, Us + 1, true, false>,
            &strip<S, Us + 1, true, true>}...}};
}
constexpr int kMaxStrip = 16;
// Inputs of more bytes than this (about half of a 1 MB L2) are prefetched a row ahead.
constexpr int64_t kPrefetchAbove = 512 << 10;
const std::array<std::array<StripFn, 4>, kMaxStrip> kStrips[2] = {
    strip_table<1>(std::make_integer_sequence<int, kMaxStrip>{}),
    strip_table<2>(std::make_integer_sequence<int, kMaxStrip>{})};

// Output row `oh` of one channel block into y (its OW x 16 floats), then the post-ops the clamp
// did not take, over the row.
T2O_AVX512 void out_row(const Strips& s, int64_t stride, int64_t oh, int64_t OW, const Post* rest, float* y) {
  const int64_t ih0 = oh * stride - 1;
  const float* rows[5];
  for (int kh = 0; kh < 3; ++kh) rows[kh] = s.x + std::clamp<int64_t>(ih0 + kh, 0, s.H - 1) * s.W * kBlk;
  for (int r = 3; r < 5; ++r) rows[r] = s.prefetch && ih0 + r < s.H ? s.x + (ih0 + r) * s.W * kBlk : nullptr;
  const int k0 = ih0 < 0 ? 1 : 0;
  const int k1 = static_cast<int>(std::min<int64_t>(3, s.H - ih0));
  // Strips of equal size (to within one pixel), at most kMaxStrip each.
  const int64_t n = (OW + kMaxStrip - 1) / kMaxStrip;
  const auto& table = kStrips[stride - 1];
  int64_t ow0 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t u = OW * (i + 1) / n - ow0;
    const bool l = ow0 == 0;
    const bool r = (ow0 + u - 1) * stride + 1 >= s.W;  // the last tap's pixel lies in the end pad
    table[static_cast<size_t>(u - 1)][(l ? 2 : 0) + (r ? 1 : 0)](s, rows, k0, k1, y, ow0);
    ow0 += u;
  }
  if (rest)
    for (int64_t ow = 0; ow < OW; ++ow)
      _mm512_storeu_ps(y + ow * kBlk, _mm512_maskz_mov_ps(s.mask, apply(*rest, _mm512_loadu_ps(y + ow * kBlk))));
}
T2O_AVX512_WARNINGS_ON

}  // namespace

bool DepthwiseConv::qualifies(const Tensor& w, const Tensor* bias, int64_t group,
                              const std::vector<ConvPostOp>& post) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 || w.dtype() != DType::Float || w.rank() != 4 || w.dim(1) != 1 || w.dim(2) != 3 || w.dim(3) != 3 ||
      w.dim(0) != group || group < 1 || post.size() > 4)
    return false;
  if (bias && (bias->dtype() != DType::Float || bias->numel() != w.dim(0))) return false;
  for (const ConvPostOp& p : post)
    if (p.kind != ConvPostOp::Kind::Relu && p.kind != ConvPostOp::Kind::Clip) return false;
  return true;
}

bool DepthwiseConv::takes(const Geom& g) {
  if (g.nsp != 2 || g.stride[0] != g.stride[1] || (g.stride[0] != 1 && g.stride[0] != 2)) return false;
  if (g.dil[0] != 1 || g.dil[1] != 1 || g.pb[0] != 1 || g.pb[1] != 1 || g.pe[0] > 1 || g.pe[1] > 1) return false;
  return true;
}

std::unique_ptr<DepthwiseConv> DepthwiseConv::make(const Tensor& w, const Tensor* bias,
                                                   const std::vector<ConvPostOp>& post) {
  std::unique_ptr<DepthwiseConv> d(new DepthwiseConv());
  const int64_t c = w.dim(0), cb = (c + kBlk - 1) / kBlk;
  d->channels_ = c;
  d->post_ = post;
  d->w_ = Tensor(DType::Float, {cb, 9, kBlk});
  d->b_ = Tensor(DType::Float, {cb, kBlk});
  const float* ws = w.data<float>();
  float* wd = d->w_.data<float>();
  float* bd = d->b_.data<float>();
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t k = 0; k < 9; ++k) wd[((ch / kBlk) * 9 + k) * kBlk + ch % kBlk] = ws[ch * 9 + k];
    if (bias) bd[ch] = bias->data<float>()[ch];
  }
  return d;
}

T2O_AVX512_WARNINGS_OFF

T2O_AVX512 void DepthwiseConv::run(const float* x, int64_t N, int64_t H, int64_t W, float* y, int64_t OH, int64_t OW,
                                   int64_t stride, int threads) const {
  const int64_t cb = (channels_ + kBlk - 1) / kBlk;
  // A plain Relu is a clamp to [0, inf) (so that -inf gives 0, not -inf * 0). A lone clamp is the
  // strips' own; other post-ops run over each finished row.
  const float inf = std::numeric_limits<float>::infinity();
  Post post;
  float lo[4], hi[4];
  for (const ConvPostOp& p : post_) {
    const bool relu = p.kind != ConvPostOp::Kind::Clip;
    post.clip[post.n] = !relu || p.alpha == 0.0f;
    lo[post.n] = p.alpha;
    hi[post.n] = relu ? inf : p.beta;
    post.a[post.n] = _mm512_set1_ps(lo[post.n]);
    post.b[post.n] = _mm512_set1_ps(hi[post.n]);
    ++post.n;
  }
  const bool lone = post.n == 1 && post.clip[0];
  const Post* rest = post.n > 0 && !lone ? &post : nullptr;
  const float clamp_lo = lone ? lo[0] : -inf, clamp_hi = lone ? hi[0] : inf;
  const int64_t tail = channels_ % kBlk;
  // Rows of all images and blocks in one range: a thread's share is consecutive rows of a block.
  parallel_for(N * cb * OH, threads, 4, [&](int64_t begin, int64_t end) {
    Strips s;
    s.lo = clamp_lo;
    s.hi = clamp_hi;
    s.H = H;
    s.W = W;
    s.prefetch = 4 * cb * H * W * kBlk > kPrefetchAbove;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t oh = i % OH, plane = i / OH, blk = plane % cb;
      s.mask = tail && blk == cb - 1 ? static_cast<__mmask16>((1u << tail) - 1) : 0xFFFF;
      s.x = x + plane * H * W * kBlk;
      s.w = w_.data<float>() + blk * 9 * kBlk;
      s.b = b_.data<float>() + blk * kBlk;
      out_row(s, stride, oh, OW, rest, y + (plane * OH + oh) * OW * kBlk);
    }
  });
  g_runs.fetch_add(1, std::memory_order_relaxed);
}

T2O_AVX512_WARNINGS_ON

uint64_t DepthwiseConv::runs_so_far() { return g_runs.load(std::memory_order_relaxed); }

}  // namespace t2o::kern
