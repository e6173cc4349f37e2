#pragma once
// Machinery shared by the elementwise and activation kernels: compute types for f16/bf16, a
// broadcast plan that collapses dims so the inner loop runs over a contiguous (or scalar) run,
// and unary/binary runners with a fast path and a plain reference path.
#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "runtime/kernels/util.h"

namespace t2o::kern {

template <typename T>
constexpr bool is_low_float = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
// The type arithmetic happens in: f16/bf16 are storage only and compute as float.
template <typename T>
using calc_t = std::conditional_t<is_low_float<T>, float, T>;
template <typename T>
constexpr bool is_float_like = std::is_floating_point_v<calc_t<T>>;

template <typename T>
inline calc_t<T> ld(T v) {
  if constexpr (is_low_float<T>) return static_cast<float>(v);
  else return v;
}

// Converts a computed value to the storage type R; float -> integer saturates (NaN -> 0) so
// out-of-range values never hit undefined behaviour.
template <typename R, typename C>
inline R st(C v) {
  if constexpr (is_low_float<R>) {
    return R(static_cast<float>(v));
  } else if constexpr (std::is_same_v<R, bool>) {
    return v != C(0);
  } else if constexpr (std::is_integral_v<R> && std::is_floating_point_v<C>) {
    if (std::isnan(v)) return R(0);
    if (v <= static_cast<C>(std::numeric_limits<R>::lowest())) return std::numeric_limits<R>::lowest();
    if (v >= static_cast<C>(std::numeric_limits<R>::max())) return std::numeric_limits<R>::max();
    return static_cast<R>(v);
  } else {
    return static_cast<R>(v);
  }
}

// exp for float without a libm call, so loops over it vectorize: x = n*ln2 + r with |r| <= ln2/2,
// then a degree-7 Taylor polynomial (truncation ~5e-9, below float precision). Rounding uses
// the 1.5*2^23 trick and the scale 2^n is built from bit patterns, so NaN propagates and no
// float->int conversion can overflow. Saturates to the smallest normal below -87.3 and to
// ~1.6e38 above 88 (callers use it where that does not matter: sigmoid, tanh, elu, ...).
inline float fast_exp(float x) {
  x = x > 88.0f ? 88.0f : x;
  x = x < -87.3f ? -87.3f : x;
  const float magic = 12582912.0f;  // 1.5 * 2^23
  float t = x * 1.44269504088896341f + magic;
  float n = t - magic;
  // ln2 split in two so n * hi is exact: hi = 355/512.
  float r = x - n * 0.693359375f;
  r = r - n * -2.1219444005469058e-4f;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r * r + r + 1.0f;
  uint32_t tb;
  std::memcpy(&tb, &t, 4);
  uint32_t sb = (tb - 0x4B400000u + 127u) << 23;
  float scale;
  std::memcpy(&scale, &sb, 4);
  return p * scale;
}

// fast_exp stops at e^87.3: below -87.3 the quotient would stay at 6e-39, so 0 there (NaN stays
// NaN), which makes x * sigmoid(x) NaN at -inf and -0 for large negative x, as unfused.
inline float fast_sigmoid(float x) {
  const float s = 1.0f / (1.0f + fast_exp(-x));
  return x < -87.3f ? 0.0f : s;
}

// tanh: odd Taylor series near 0 (where 1 - 2/(e^2x + 1) would cancel), exp form elsewhere.
inline float fast_tanh(float x) {
  float a = std::fabs(x);
  float x2 = x * x;
  float small = x * (1.0f + x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315 + x2 * (62.0f / 2835 +
                                                                                         x2 * (-1382.0f / 155925))))));
  float e = fast_exp(2.0f * a);
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = x < 0 ? -big : big;
  return a < 0.3f ? small : big;
}

// erf: its Maclaurin series up to x^21 for |x| < 1 (error ~1e-9 relative there), beyond that
// 1 - erfc with Numerical Recipes' erfc fit (fractional error < 1.2e-7). Branch-free so that
// loops over it vectorise.
inline float fast_erf(float x) {
  float a = std::fabs(x);
  float x2 = x * x;
  float p = 1.0f / 76204800;
  p = p * x2 - 1.0f / 6894720;
  p = p * x2 + 1.0f / 685440;
  p = p * x2 - 1.0f / 75600;
  p = p * x2 + 1.0f / 9360;
  p = p * x2 - 1.0f / 1320;
  p = p * x2 + 1.0f / 216;
  p = p * x2 - 1.0f / 42;
  p = p * x2 + 1.0f / 10;
  p = p * x2 - 1.0f / 3;
  p = p * x2 + 1.0f;
  float small = 1.1283791670955126f * x * p;
  float t = 1.0f / (1.0f + 0.5f * a);
  float q = 0.17087277f;
  q = q * t - 0.82215223f;
  q = q * t + 1.48851587f;
  q = q * t - 1.13520398f;
  q = q * t + 0.27886807f;
  q = q * t - 0.18628806f;
  q = q * t + 0.09678418f;
  q = q * t + 0.37409196f;
  q = q * t + 1.00002368f;
  q = q * t - 1.26551223f;
  float big = 1.0f - t * fast_exp(q - x2);
  big = x < 0 ? -big : big;
  return a < 1.0f ? small : big;
}

// An op may offer `float fast(float)`, an approximation used on the fast path only.
template <typename Op>
concept HasFast = requires(const Op& o, float v) {
  { o.fast(v) } -> std::same_as<float>;
};

// Elements per parallel chunk: below this, threading costs more than it saves.
constexpr int64_t kGrain = 32768;

// A broadcast of K inputs onto `out`, with dims of size 1 dropped and adjacent dims merged
// where every input walks them contiguously. The innermost dim then has stride 0 or 1 per input.
template <size_t K>
struct BcastPlan {
  Dims cdims;
  std::array<Dims, K> cstr;
  std::array<int64_t, K> istr{};
  int64_t inner = 1;
  int64_t numel = 0;
};

template <size_t K>
BcastPlan<K> make_plan(const Dims& out, const std::array<const Dims*, K>& ins) {
  BcastPlan<K> p;
  p.numel = numel_of(out);
  std::array<Dims, K> s;
  for (size_t j = 0; j < K; ++j) s[j] = broadcast_strides(*ins[j], out);
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    bool merge = !p.cdims.empty();
    for (size_t j = 0; j < K && merge; ++j) merge = p.cstr[j].back() == s[j][d] * out[d];
    if (merge) {
      p.cdims.back() *= out[d];
      for (size_t j = 0; j < K; ++j) p.cstr[j].back() = s[j][d];
      continue;
    }
    p.cdims.push_back(out[d]);
    for (size_t j = 0; j < K; ++j) p.cstr[j].push_back(s[j][d]);
  }
  if (p.cdims.empty()) {
    p.cdims.push_back(1);
    for (size_t j = 0; j < K; ++j) p.cstr[j].push_back(0);
  }
  p.inner = p.cdims.back();
  for (size_t j = 0; j < K; ++j) p.istr[j] = p.cstr[j].back();
  return p;
}

// Calls seg(out_offset, input_offsets, len) for each run of the inner dim, in parallel chunks.
template <size_t K, typename Seg>
void plan_run(const BcastPlan<K>& p, int threads, Seg&& seg) {
  if (p.numel == 0) return;
  parallel_for(p.numel, threads, kGrain, [&](int64_t b, int64_t e) {
    size_t r = p.cdims.size();
    std::vector<int64_t> idx(r);
    std::array<int64_t, K> off{};
    int64_t rem = b;
    for (size_t d = r; d-- > 0;) {
      idx[d] = rem % p.cdims[d];
      rem /= p.cdims[d];
      for (size_t j = 0; j < K; ++j) off[j] += idx[d] * p.cstr[j][d];
    }
    int64_t pos = b;
    while (pos < e) {
      int64_t len = std::min(p.inner - idx[r - 1], e - pos);
      seg(pos, off, len);
      pos += len;
      idx[r - 1] += len;
      for (size_t j = 0; j < K; ++j) off[j] += len * p.istr[j];
      if (idx[r - 1] < p.inner) continue;
      for (size_t j = 0; j < K; ++j) off[j] -= p.inner * p.istr[j];
      idx[r - 1] = 0;
      for (size_t d = r - 1; d-- > 0;) {
        if (++idx[d] < p.cdims[d]) {
          for (size_t j = 0; j < K; ++j) off[j] += p.cstr[j][d];
          break;
        }
        for (size_t j = 0; j < K; ++j) off[j] -= p.cstr[j][d] * (p.cdims[d] - 1);
        idx[d] = 0;
      }
    }
  });
}

// float16 runs compute on float blocks converted in bulk (F16C): the same values as converting
// element by element with ld/st, several times faster.
template <typename T>
constexpr bool half_or_float = std::is_same_v<T, Half> || std::is_same_v<T, float>;
template <typename A, typename B, typename R>
constexpr bool half_blocks = (std::is_same_v<A, Half> || std::is_same_v<B, Half> || std::is_same_v<R, Half>) &&
                             half_or_float<A> && half_or_float<B> && half_or_float<R>;
inline constexpr int64_t kHalfBlock = 512;

// n values of p as floats: p itself for float, else converted into buf.
template <typename T>
inline const float* floats_of(const T* p, int64_t n, float* buf) {
  if constexpr (std::is_same_v<T, float>) {
    return p;
  } else {
    halves_to_floats(reinterpret_cast<const uint16_t*>(p), buf, static_cast<size_t>(n));
    return buf;
  }
}
template <typename R>
inline void store_floats(const float* v, R* o, int64_t n) {
  if constexpr (std::is_same_v<R, Half>) floats_to_halves(v, reinterpret_cast<uint16_t*>(o), static_cast<size_t>(n));
}

// One inner run of a binary op; separate loops per stride pattern so each one vectorizes.
template <typename A, typename B, typename R, typename Op>
inline void binary_seg(const A* __restrict a, int64_t sa, const B* __restrict b, int64_t sb, R* __restrict o,
                       int64_t n, const Op& op) {
  if constexpr (half_blocks<A, B, R>) {
    float fa[kHalfBlock], fb[kHalfBlock], fo[kHalfBlock];
    for (int64_t s = 0; s < n; s += kHalfBlock) {
      int64_t m = std::min(kHalfBlock, n - s);
      const float* xa = floats_of(sa ? a + s : a, sa ? m : 1, fa);
      const float* xb = floats_of(sb ? b + s : b, sb ? m : 1, fb);
      float* y = fo;
      if constexpr (std::is_same_v<R, float>) y = o + s;
      binary_seg<float, float, float>(xa, sa, xb, sb, y, m, op);
      store_floats(y, o + s, m);
    }
    return;
  }
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i) o[i] = st<R>(op(ld(a[i]), ld(b[i])));
  } else if (sa) {
    const auto y = ld(b[0]);
    for (int64_t i = 0; i < n; ++i) o[i] = st<R>(op(ld(a[i]), y));
  } else if (sb) {
    const auto x = ld(a[0]);
    for (int64_t i = 0; i < n; ++i) o[i] = st<R>(op(x, ld(b[i])));
  } else {
    const R v = st<R>(op(ld(a[0]), ld(b[0])));
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

// out = op(a, b) with numpy broadcasting; `out` is already allocated with the broadcast dims.
template <typename A, typename B, typename R, typename Op>
void binary_apply(const Tensor& a, const Tensor& b, Tensor& out, const Op& op, bool fast, int threads) {
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  R* po = out.data<R>();
  if (!fast) {
    std::vector<Dims> s = {broadcast_strides(a.dims(), out.dims()), broadcast_strides(b.dims(), out.dims())};
    for_each_broadcast(out.dims(), s, [&](int64_t i, const int64_t* off) {
      po[i] = st<R>(op(ld(pa[off[0]]), ld(pb[off[1]])));
    });
    return;
  }
  BcastPlan<2> p = make_plan<2>(out.dims(), {&a.dims(), &b.dims()});
  plan_run(p, threads, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n) {
    binary_seg(pa + off[0], p.istr[0], pb + off[1], p.istr[1], po + o, n, op);
  });
}

// out = op(x) elementwise; out has x's dims.
template <typename T, typename R, typename Op>
void unary_apply(const Tensor& x, Tensor& out, const Op& op, bool fast, int threads) {
  const T* px = x.data<T>();
  R* po = out.data<R>();
  int64_t n = x.numel();
  if (!fast) {
    for (int64_t i = 0; i < n; ++i) po[i] = st<R>(op(ld(px[i])));
    return;
  }
  parallel_for(n, threads, kGrain, [&](int64_t b, int64_t e) {
    const T* __restrict s = px + b;
    R* __restrict d = po + b;
    if constexpr (half_blocks<T, T, R>) {
      float fx[kHalfBlock], fo[kHalfBlock];
      for (int64_t k = 0; k < e - b; k += kHalfBlock) {
        int64_t m = std::min(kHalfBlock, e - b - k);
        const float* x = floats_of(s + k, m, fx);
        float* y = fo;
        if constexpr (std::is_same_v<R, float>) y = d + k;
        if constexpr (HasFast<Op>) {
          for (int64_t i = 0; i < m; ++i) y[i] = st<float>(op.fast(x[i]));
        } else {
          for (int64_t i = 0; i < m; ++i) y[i] = st<float>(op(x[i]));
        }
        store_floats(y, d + k, m);
      }
    } else if constexpr (HasFast<Op> && std::is_same_v<calc_t<T>, float>) {
      for (int64_t i = 0; i < e - b; ++i) d[i] = st<R>(op.fast(ld(s[i])));
    } else {
      for (int64_t i = 0; i < e - b; ++i) d[i] = st<R>(op(ld(s[i])));
    }
  });
}

// Which element types an op accepts.
enum class Types { Float, Signed, Numeric, Bool, Integer, Unsigned, All };

template <typename T>
constexpr bool accepts(Types t) {
  switch (t) {
    case Types::Float: return is_float_like<T>;
    case Types::Signed: return is_float_like<T> || (std::is_integral_v<T> && std::is_signed_v<T>);
    case Types::Numeric: return !std::is_same_v<T, bool>;
    case Types::Bool: return std::is_same_v<T, bool>;
    case Types::Integer: return std::is_integral_v<T> && !std::is_same_v<T, bool>;
    case Types::Unsigned: return std::is_unsigned_v<T> && !std::is_same_v<T, bool>;
    case Types::All: return true;
  }
  return false;
}

// Runs a unary op whose output has the input's type; rejects types outside `ts` clearly.
template <Types ts, typename Op>
void run_unary_same(KernelContext& ctx, const Op& op, bool fast) {
  const Tensor& x = ctx.input(0);
  Tensor& out = ctx.allocate_output_uninit(0, x.dtype(), x.dims());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (accepts<T>(ts)) unary_apply<T, T>(x, out, op, fast, ctx.threads());
    else ctx.fail("does not support element type " + std::string(dtype_name(x.dtype())));
  });
}

// A factory for a unary op whose functor is built from the node's attributes at session build.
template <Types ts, typename MakeOp>
KernelFactory unary_factory(MakeOp make) {
  return [make](const KernelInfo& info) {
    auto op = make(info.node);
    bool fast = info.fast_paths;
    return std::make_unique<FnKernel>([op, fast](KernelContext& ctx) { run_unary_same<ts>(ctx, op, fast); });
  };
}

// An op-parameter factory for ops without attributes: every node gets the same functor.
template <typename Op>
auto fixed(Op op) {
  return [op](const Node&) { return op; };
}

}  // namespace t2o::kern
