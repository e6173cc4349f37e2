#pragma once
// AVX-512 math shared by the kernels that have an AVX-512 path (chosen at run time with
// __builtin_cpu_supports("avx512f"); the rest of the build targets baseline x86-64).
#include <immintrin.h>

#include <cstdint>

#define T2O_AVX512 __attribute__((target("avx512f")))

// GCC 12's AVX-512 min/max/roundscale intrinsics pass an uninitialised "undefined" vector that
// its own warnings then report once inlined: code using them goes between these two.
#if defined(__GNUC__) && !defined(__clang__)
#define T2O_AVX512_WARNINGS_OFF                                \
  _Pragma("GCC diagnostic push")                               \
  _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")       \
  _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define T2O_AVX512_WARNINGS_ON _Pragma("GCC diagnostic pop")
#else
#define T2O_AVX512_WARNINGS_OFF
#define T2O_AVX512_WARNINGS_ON
#endif

namespace t2o::kern {

// Whether this CPU runs the AVX-512 paths (checked once).
inline bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

T2O_AVX512_WARNINGS_OFF

// min(max(x, lo), hi) that keeps NaN: vmaxps / vminps return their second operand when either is
// NaN, so x goes second.
T2O_AVX512 inline __m512 clamp512(__m512 x, __m512 lo, __m512 hi) {
  return _mm512_min_ps(hi, _mm512_max_ps(lo, x));
}
// max(x, 0), NaN kept (as std::max(x, 0.f) and PyTorch's relu do).
T2O_AVX512 inline __m512 relu512(__m512 x) { return _mm512_max_ps(_mm512_setzero_ps(), x); }

// exp by range reduction to |r| <= ln2/2 and a degree-7 polynomial (relative error ~1e-7);
// inputs are clamped to [-88, 88], NaN stays NaN.
T2O_AVX512 inline __m512 exp512(__m512 x) {
  x = clamp512(x, _mm512_set1_ps(-88.0f), _mm512_set1_ps(88.0f));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// 1 / d for d >= 1: the 14-bit estimate and one Newton step (about an ulp, a fifth of a divide's
// cost).
T2O_AVX512 inline __m512 recip512(__m512 d) {
  __m512 r = _mm512_rcp14_ps(d);
  return _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
}

// 1 / (1 + e^-x). exp512 stops at e^88, so below -88 the quotient would stay at 6e-39: 0 there
// instead (as float's own sigmoid gives from -104 on), so that a closed gate times an infinite
// value is NaN, not inf. NaN stays NaN.
T2O_AVX512 inline __m512 sigmoid512(__m512 x) {
  __m512 one = _mm512_set1_ps(1.0f);
  __m512 s = recip512(_mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-88.0f), _CMP_NLT_UQ), s);
}

// SiLU (swish with beta 1), x / (1 + e^-x), as x * sigmoid(x): -inf gives NaN and +inf gives +inf,
// as the quotient does.
T2O_AVX512 inline __m512 swish512(__m512 x) { return _mm512_mul_ps(x, sigmoid512(x)); }

// HardSwish, x * min(max(x / 6 + 1/2, 0), 1).
T2O_AVX512 inline __m512 hardswish512(__m512 x) {
  __m512 g = _mm512_fmadd_ps(x, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
  return _mm512_mul_ps(x, clamp512(g, _mm512_setzero_ps(), _mm512_set1_ps(1.0f)));
}

// The erf GELU, 0.5 x (1 + erf(x / sqrt 2)), with erfc(z) for z >= 0 from Abramowitz and Stegun
// 7.1.26 (t = 1 / (1 + 0.3275911 z), a degree-5 polynomial in t times exp(-z^2); absolute error
// below 1.5e-7): 1 + erf is 2 - erfc(z) for x >= 0 and erfc(z) below. Where erfc(z) is below
// float's range (z > 13) it is 0, so -inf gives NaN as the formula does; NaN stays NaN.
T2O_AVX512 inline __m512 gelu_erf512(__m512 x) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 z = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678118654752f));
  const __m512 zc = _mm512_min_ps(z, _mm512_set1_ps(13.0f));
  const __m512 d = _mm512_fmadd_ps(zc, _mm512_set1_ps(0.3275911f), _mm512_set1_ps(1.0f));
  __m512 t = _mm512_rcp14_ps(d);
  t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.0f)));
  __m512 p = _mm512_set1_ps(1.061405429f);
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
  p = _mm512_mul_ps(p, t);
  const __m512 erfc = _mm512_mul_ps(p, exp512(_mm512_mul_ps(_mm512_sub_ps(zero, zc), zc)));
  const __mmask16 pos = _mm512_cmp_ps_mask(x, zero, _CMP_GE_OQ);
  const __mmask16 tiny = _mm512_cmp_ps_mask(z, _mm512_set1_ps(13.0f), _CMP_GT_OQ) & ~pos;
  __m512 one_plus = _mm512_mask_sub_ps(erfc, pos, _mm512_set1_ps(2.0f), erfc);
  one_plus = _mm512_mask_mov_ps(one_plus, tiny, zero);
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), one_plus);
}

// y[i] = f(y[i]) for i < n in place, 16 at a time (f: a functor whose operator() maps a vector;
// declared T2O_AVX512 so that it inlines here).
template <typename F>
T2O_AVX512 inline void map512_inplace(float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(y + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, y + i)));
  }
}

T2O_AVX512_WARNINGS_ON

}  // namespace t2o::kern
