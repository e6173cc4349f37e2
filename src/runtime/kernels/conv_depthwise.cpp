#include "runtime/kernels/conv_depthwise.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "runtime/kernels/avx512_math.h"
#include "runtime/kernels/util.h"

namespace t2o::kern {

namespace {

std::atomic<uint64_t> g_runs{0};
constexpr int64_t kBlk = 16;

T2O_AVX512_WARNINGS_OFF

struct Post {
  // Up to four element-wise steps: Relu with slope `a`, or Clip to [a, b].
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

struct Row {
  const float* r[3];  // input rows of the three taps (those outside the map are not read)
  const float* next;  // the row the next output row starts to read (prefetched)
  int k0, k1;         // the taps' rows inside the map: [k0, k1)
  __m512 w[9], bias;
  __mmask16 mask;     // lanes that are real channels
  int64_t W;
};

// U output pixels from `ow` on, every tap inside the row, taps' rows [K0, K1) inside the map.
template <int S, int U, int K0, int K1>
T2O_AVX512 inline void interior(const Row& row, const Post& post, float* y, int64_t ow) {
  for (int u = 0; u < U * S; ++u) _mm_prefetch(reinterpret_cast<const char*>(row.next + (ow * S + u) * kBlk), _MM_HINT_T0);
  __m512 acc[U];
  for (int u = 0; u < U; ++u) acc[u] = row.bias;
  for (int kh = K0; kh < K1; ++kh) {
    const float* xr = row.r[kh] + (ow * S - 1) * kBlk;
    for (int kw = 0; kw < 3; ++kw)
      for (int u = 0; u < U; ++u)
        acc[u] = _mm512_fmadd_ps(_mm512_loadu_ps(xr + (u * S + kw) * kBlk), row.w[kh * 3 + kw], acc[u]);
  }
  for (int u = 0; u < U; ++u) _mm512_storeu_ps(y + (ow + u) * kBlk, _mm512_maskz_mov_ps(row.mask, apply(post, acc[u])));
}

// One output pixel whose window may leave the row on either side.
template <int S>
T2O_AVX512 inline void edge(const Row& row, const Post& post, float* y, int64_t ow) {
  __m512 acc = row.bias;
  for (int kh = row.k0; kh < row.k1; ++kh)
    for (int kw = 0; kw < 3; ++kw) {
      int64_t iw = ow * S - 1 + kw;
      if (iw < 0 || iw >= row.W) continue;
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(row.r[kh] + iw * kBlk), row.w[kh * 3 + kw], acc);
    }
  _mm512_storeu_ps(y + ow * kBlk, _mm512_maskz_mov_ps(row.mask, apply(post, acc)));
}

template <int S, int K0, int K1>
T2O_AVX512 void interiors(const Row& row, const Post& post, float* y, int64_t& ow, int64_t last) {
  for (; ow + 8 <= last; ow += 8) interior<S, 8, K0, K1>(row, post, y, ow);
  if (ow + 4 <= last) interior<S, 4, K0, K1>(row, post, y, ow), ow += 4;
  for (; ow < last; ++ow) interior<S, 1, K0, K1>(row, post, y, ow);
}

// Output row `oh` of one channel block: x, the block's [H, W, 16] input; y, its output row.
template <int S>
T2O_AVX512 void out_row(const float* x, const float* w, const float* b, __mmask16 mask, const Post& post, int64_t H,
                        int64_t W, int64_t oh, int64_t OW, float* y) {
  Row row;
  row.W = W;
  row.mask = mask;
  for (int k = 0; k < 9; ++k) row.w[k] = _mm512_loadu_ps(w + k * kBlk);
  row.bias = _mm512_loadu_ps(b);
  const int64_t ih0 = oh * S - 1;
  row.k0 = ih0 < 0 ? 1 : 0;
  row.k1 = static_cast<int>(std::min<int64_t>(3, H - ih0));
  for (int kh = 0; kh < 3; ++kh) row.r[kh] = x + std::clamp<int64_t>(ih0 + kh, 0, H - 1) * W * kBlk;
  row.next = x + std::min(ih0 + 2 + S, H - 1) * W * kBlk;
  // Pixels 1 .. last-1 whose windows stay inside the row: ow * S + 1 <= W - 1.
  const int64_t last = W >= 2 ? std::min(OW, (W - 2) / S + 1) : 1;
  edge<S>(row, post, y, 0);
  int64_t ow = 1;
  // The end pad is at most 1, so the last row's window ends at row H at most: k1 >= 2.
  switch (row.k0 * 4 + row.k1) {
    case 3: interiors<S, 0, 3>(row, post, y, ow, last); break;
    case 7: interiors<S, 1, 3>(row, post, y, ow, last); break;
    case 2: interiors<S, 0, 2>(row, post, y, ow, last); break;
    default: interiors<S, 1, 2>(row, post, y, ow, last); break;
  }
  for (ow = std::max<int64_t>(ow, 1); ow < OW; ++ow) edge<S>(row, post, y, ow);
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
  Post post;
  for (const ConvPostOp& p : post_) {
    post.clip[post.n] = p.kind == ConvPostOp::Kind::Clip;
    post.a[post.n] = _mm512_set1_ps(p.alpha);
    post.b[post.n] = _mm512_set1_ps(p.beta);
    ++post.n;
  }
  const float* w = w_.data<float>();
  const float* b = b_.data<float>();
  const int64_t tail = channels_ % kBlk;
  // Rows of all images and blocks in one range: a thread's share is consecutive rows of a block.
  parallel_for(N * cb * OH, threads, 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t oh = i % OH, plane = i / OH, blk = plane % cb;
      const __mmask16 mask = tail && blk == cb - 1 ? static_cast<__mmask16>((1u << tail) - 1) : 0xFFFF;
      const float* xp = x + plane * H * W * kBlk;
      float* yr = y + (plane * OH + oh) * OW * kBlk;
      if (stride == 1) out_row<1>(xp, w + blk * 9 * kBlk, b + blk * kBlk, mask, post, H, W, oh, OW, yr);
      else out_row<2>(xp, w + blk * 9 * kBlk, b + blk * kBlk, mask, post, H, W, oh, OW, yr);
    }
  });
  g_runs.fetch_add(1, std::memory_order_relaxed);
}

T2O_AVX512_WARNINGS_ON

uint64_t DepthwiseConv::runs_so_far() { return g_runs.load(std::memory_order_relaxed); }

}  // namespace t2o::kern
