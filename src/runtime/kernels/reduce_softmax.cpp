// Softmax, LogSoftmax, Hardmax. Before opset 13 the input is coerced to 2-D at `axis`
// (rows = dims before axis, row length = product of the rest); from 13 the op runs along one axis.
// Both become (outer, n, inner) with stride `inner` along the reduced axis.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>
#include <algorithm>

#include "runtime/kernels/avx512_math.h"
#include "runtime/kernels/softmax.h"
#include "runtime/kernels/util.h"

namespace t2o {
namespace kern {


namespace {

// exp(x) for x <= 0 (callers pass x - max), written with plain arithmetic so the row loops
// vectorize (no libm call): x = k*ln2 + r, |r| <= ln2/2, exp(r) by a degree-7 Taylor polynomial
// (relative error < 1e-7), times 2^k. Below -87 the result is 0: exp leaves float's normal
// range there, and subnormal probabilities (masked attention scores, -inf) would make the next
// matmul run at a fraction of its speed (a causal decoder's attention·V took 30x as long). NaN of
// either sign gives NaN (the row maxima below skip a NaN; its exp makes the row's sum NaN). The
// test compares bit patterns as unsigned integers (negative floats order that way): a float
// compare-and-select would not vectorize under the default -ftrapping-math.
inline float exp_vec(float x) {
  uint32_t ub;
  std::memcpy(&ub, &x, 4);
  const uint32_t lim = 0xC2AE0000u;  // bits of -87.0f
  // Below -87 down to -inf (0xFF800000); above that come NaNs with the sign bit set (x86's own
  // NaN, from inf - inf or 0 * inf), which must stay NaN.
  const bool under = ub > lim && ub <= 0xFF800000u;
  const uint32_t keep = under ? 0u : ~0u;
  ub = under ? lim : ub;
  std::memcpy(&x, &ub, 4);
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float kf = x * 1.44269504088896341f + shifter;
  kf -= shifter;
  float r = x - kf * 0.693359375f;  // ln2 split in two parts for exact range reduction
  r -= kf * -2.12194440e-4f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t k = static_cast<int32_t>(kf);
  int32_t bits = (k + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  float e = p * scale;
  uint32_t eb;
  std::memcpy(&eb, &e, 4);
  eb &= keep;
  std::memcpy(&e, &eb, 4);
  return e;
}

// Probabilities below float's normal range are 0 (see exp_vec), by the same bit-pattern test.
inline float flush_tiny(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  b = b < 0x00800000u ? 0u : b;
  std::memcpy(&v, &b, 4);
  return v;
}

template <typename T>
void softmax_ref(SoftKind kind, const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      const T* xp = x + o * n * inner + in;
      T* yp = y + o * n * inner + in;
      if (kind == SoftKind::Hardmax) {
        int64_t best = 0;
        for (int64_t j = 1; j < n; ++j)
          if (static_cast<double>(xp[j * inner]) > static_cast<double>(xp[best * inner])) best = j;
        for (int64_t j = 0; j < n; ++j) yp[j * inner] = static_cast<T>(j == best ? 1.0f : 0.0f);
        continue;
      }
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<double>(xp[j * inner]));
      double s = 0;
      for (int64_t j = 0; j < n; ++j) s += std::exp(static_cast<double>(xp[j * inner]) - m);
      double ls = std::log(s);
      for (int64_t j = 0; j < n; ++j) {
        double v = static_cast<double>(xp[j * inner]) - m;
        yp[j * inner] = static_cast<T>(static_cast<float>(kind == SoftKind::Softmax ? std::exp(v) / s : v - ls));
      }
    }
}

class SoftmaxKernel : public OpKernel {
 public:
  SoftmaxKernel(const KernelInfo& info, SoftKind kind) : kind_(kind), fast_(info.fast_paths) {
    coerce_2d_ = info.opset < 13;
    axis_ = info.node.attr_int("axis", coerce_2d_ ? 1 : -1);
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (!dtype_is_float(x.dtype())) ctx.fail("expects a floating-point input, got " + std::string(dtype_name(x.dtype())));
    int64_t r = x.rank();
    int64_t axis = r == 0 ? 0 : norm_axis(ctx, axis_, r);
    int64_t outer = 1, n = 1, inner = 1;
    for (int64_t d = 0; d < r; ++d) {
      int64_t v = x.dims()[static_cast<size_t>(d)];
      if (d < axis) outer *= v;
      else if (d == axis || coerce_2d_) n *= v;
      else inner *= v;
    }
    Tensor& y = ctx.allocate_output_uninit(0, x.dtype(), x.dims());
    if (x.numel() == 0) return;
    if (fast_ && x.dtype() == DType::Float && kind_ != SoftKind::Hardmax) {
      if (inner == 1) softmax_rows_fast(kind_, x.data<float>(), y.data<float>(), outer, n, ctx.threads());
      else softmax_strided_fast(kind_, x.data<float>(), y.data<float>(), outer, n, inner, ctx.threads());
      return;
    }
    dispatch_dtype(x.dtype(), [&](auto t) {
      using T = decltype(t);
      if constexpr (!std::is_same_v<T, bool>)
        softmax_ref<T>(kind_, x.data<T>(), y.data<T>(), outer, n, inner);
    });
  }

 private:
  SoftKind kind_;
  bool fast_;
  bool coerce_2d_;
  int64_t axis_;
};

KernelFactory softmax_factory(SoftKind kind) {
  return [kind](const KernelInfo& info) { return std::make_unique<SoftmaxKernel>(info, kind); };
}

T2O_AVX512_WARNINGS_OFF

// exp(v - m), 0 where v - m < -87 (exp_vec's rule).
T2O_AVX512 inline __m512 exp_shifted512(__m512 v, __m512 m) {
  __m512 d = _mm512_sub_ps(v, m);
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(d, _mm512_set1_ps(-87.0f), _CMP_GE_OQ), exp512(d));
}
// e * inv, 0 where that falls below float's normal range (flush_tiny's rule).
T2O_AVX512 inline __m512 scale_flushed512(__m512 e, __m512 inv) {
  __m512 p = _mm512_mul_ps(e, inv);
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(p, _mm512_set1_ps(std::numeric_limits<float>::min()), _CMP_GE_OQ), p);
}

// One row by AVX-512, with exp_vec's rules (0 below -87, probabilities below float's normal
// range 0; -inf, a masked score, gives 0). Returns false, having written nothing, when the row
// holds NaN or +inf, or nothing but -inf: the careful code handles those.
T2O_AVX512 bool softmax_row_avx512(SoftKind kind, const float* x, float* y, int64_t n) {
  const __m512 finite = _mm512_set1_ps(std::numeric_limits<float>::max());
  __m512 mv = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __mmask16 ok = 0xFFFF;
  const int64_t full = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  for (int64_t j = 0; j < full; j += 16) {
    __m512 v = _mm512_loadu_ps(x + j);
    ok &= _mm512_cmp_ps_mask(v, finite, _CMP_LE_OQ);  // false for NaN and +inf (-inf is a mask)
    mv = _mm512_max_ps(mv, v);
  }
  if (tail) {
    __m512 v = _mm512_maskz_loadu_ps(tail, x + full);
    ok &= static_cast<__mmask16>(_mm512_cmp_ps_mask(v, finite, _CMP_LE_OQ) | ~tail);
    mv = _mm512_mask_max_ps(mv, tail, mv, v);
  }
  if (ok != 0xFFFF) return false;
  const float m = _mm512_reduce_max_ps(mv);
  if (m == -std::numeric_limits<float>::infinity()) return false;  // nothing but -inf
  const __m512 mm = _mm512_set1_ps(m);
  __m512 sv = _mm512_setzero_ps();
  for (int64_t j = 0; j < full; j += 16) {
    __m512 e = exp_shifted512(_mm512_loadu_ps(x + j), mm);
    _mm512_storeu_ps(y + j, e);
    sv = _mm512_add_ps(sv, e);
  }
  if (tail) {
    __m512 e = _mm512_maskz_mov_ps(tail, exp_shifted512(_mm512_maskz_loadu_ps(tail, x + full), mm));
    _mm512_mask_storeu_ps(y + full, tail, e);
    sv = _mm512_add_ps(sv, e);
  }
  const float s = _mm512_reduce_add_ps(sv);
  if (kind == SoftKind::Softmax) {
    const __m512 inv = _mm512_set1_ps(1.0f / s);
    for (int64_t j = 0; j < full; j += 16) _mm512_storeu_ps(y + j, scale_flushed512(_mm512_loadu_ps(y + j), inv));
    if (tail) _mm512_mask_storeu_ps(y + full, tail, scale_flushed512(_mm512_maskz_loadu_ps(tail, y + full), inv));
  } else {
    // (x - m) - log(s): x - m loses nothing near the max, where x - (m + log(s)) would lose m's
    // low bits.
    const __m512 ls = _mm512_set1_ps(std::log(s));
    for (int64_t j = 0; j < full; j += 16)
      _mm512_storeu_ps(y + j, _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + j), mm), ls));
    if (tail)
      _mm512_mask_storeu_ps(y + full, tail, _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + full), mm), ls));
  }
  return true;
}

T2O_AVX512_WARNINGS_ON

}  // namespace

void softmax_rows_fast(SoftKind kind, const float* x, float* y, int64_t rows, int64_t n, int threads) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  parallel_for(rows, threads, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xp = x + r * n;
      float* yp = y + r * n;
      if (avx512 && n > 0 && softmax_row_avx512(kind, xp, yp, n)) continue;
      float mp[8];
      for (float& v : mp) v = xp[0];
      int64_t q = 0;
      for (; q + 8 <= n; q += 8)
        for (int k = 0; k < 8; ++k) mp[k] = xp[q + k] > mp[k] ? xp[q + k] : mp[k];
      float m = mp[0];
      for (float v : mp) m = v > m ? v : m;
      for (; q < n; ++q) m = xp[q] > m ? xp[q] : m;
      if (std::isinf(m) || std::isnan(m)) {  // rare: let the careful code handle infinities and NaN
        softmax_ref<float>(kind, xp, yp, 1, n, 1);
        continue;
      }
      // Separate loops: the exp loop vectorizes; the sum keeps 8 partial sums so it does too.
      for (int64_t j = 0; j < n; ++j) yp[j] = exp_vec(xp[j] - m);
      float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int64_t j = 0;
      for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; ++k) part[k] += yp[j + k];
      float s = 0;
      for (; j < n; ++j) s += yp[j];
      for (float v : part) s += v;
      if (kind == SoftKind::Softmax) {
        float inv = 1.0f / s;
        for (int64_t i = 0; i < n; ++i) yp[i] = flush_tiny(yp[i] * inv);
      } else {
        float ls = std::log(s);
        for (int64_t i = 0; i < n; ++i) yp[i] = (xp[i] - m) - ls;
      }
    }
  });
}

// Softmax along a non-last axis: (outer, n, inner). Max, exp and sum run across `inner`
// (contiguous) for all n at once, so every loop is unit-stride.
void softmax_strided_fast(SoftKind kind, const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                          int threads) {
  parallel_for(outer, threads, 1, [&](int64_t b, int64_t e) {
    std::vector<float> m(static_cast<size_t>(inner)), s(static_cast<size_t>(inner));
    for (int64_t o = b; o < e; ++o) {
      const float* xo = x + o * n * inner;
      float* yo = y + o * n * inner;
      std::copy(xo, xo + inner, m.begin());
      for (int64_t j = 1; j < n; ++j)
        for (int64_t i = 0; i < inner; ++i) m[static_cast<size_t>(i)] = std::max(m[static_cast<size_t>(i)], xo[j * inner + i]);
      bool odd = false;
      for (float v : m) odd |= std::isinf(v) || std::isnan(v);
      if (odd) {  // rare: infinities or NaN take the careful path
        softmax_ref<float>(kind, xo, yo, 1, n, inner);
        continue;
      }
      std::fill(s.begin(), s.end(), 0.0f);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < inner; ++i) {
          float v = exp_vec(xo[j * inner + i] - m[static_cast<size_t>(i)]);
          yo[j * inner + i] = v;
          s[static_cast<size_t>(i)] += v;
        }
      if (kind == SoftKind::Softmax) {
        for (float& v : s) v = 1.0f / v;
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < inner; ++i) yo[j * inner + i] = flush_tiny(yo[j * inner + i] * s[static_cast<size_t>(i)]);
      } else {
        for (float& v : s) v = std::log(v);
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < inner; ++i)
            yo[j * inner + i] = (xo[j * inner + i] - m[static_cast<size_t>(i)]) - s[static_cast<size_t>(i)];
      }
    }
  });
}

void register_softmax_kernels(KernelRegistry& r) {
  r.add("", "Softmax", 1, softmax_factory(SoftKind::Softmax));
  r.add("", "Softmax", 13, softmax_factory(SoftKind::Softmax));
  r.add("", "LogSoftmax", 1, softmax_factory(SoftKind::LogSoftmax));
  r.add("", "LogSoftmax", 13, softmax_factory(SoftKind::LogSoftmax));
  r.add("", "Hardmax", 1, softmax_factory(SoftKind::Hardmax));
  r.add("", "Hardmax", 13, softmax_factory(SoftKind::Hardmax));
}

}  // namespace kern
}  // namespace t2o
