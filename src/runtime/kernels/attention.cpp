// ai.torch2onnx.internal::Attention(q, k, v, [mask]): scaled dot-product attention over heads, as
// runtime/optimize.h fuses it from the Transpose / MatMul / scale / mask / Softmax / MatMul /
// Transpose chain of PyTorch's multi-head attention.
//   q [B, Sq, H, D], k [B, Skv, H, D], v [B, Skv, H, Dv]   (a B or H of 1 broadcasts)
//   y [B, Sq, H, Dv], y[b, :, h, :] = softmax(mask(scale * q_bh k_bh^T)) v_bh
// mask "where": scores where the bool mask is true become `fill`; "add": the float mask is added;
// either broadcasts to [B, H, Sq, Skv] like numpy. The heads are read and written in place (no
// transposes), and each (b, h) runs on one thread, so its [Sq, Skv] scores stay in cache from
// the first product to the second. Under a "where" mask whose fill lies more than 100 below a
// block of rows' scores (a causal mask's -inf, -1e4 or float's lowest), the keys no row of the
// block sees are not computed: their softmax weights are below float resolution next to the
// row's sum (GPT-style causal attention at 256 tokens: 1.36 -> 0.80 ms per layer at 1 thread,
// with the masking and the row maxima vectorized). K is transposed in 16 x 16 register blocks
// (ViT-B/16 at 1 thread: 0.98 -> 0.90 ms per layer).
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <vector>

#include "runtime/kernels/avx512_math.h"
#include "runtime/kernels/softmax.h"
#include "runtime/kernels/util.h"
#include "runtime/optimize.h"

namespace t2o {

namespace {

using dnnl::memory;
using dt = memory::data_type;

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// A [B, S, H, D] operand: element (b, s, h, d) at b * sb + s * ss + h * sh + d (0 strides broadcast).
struct Operand {
  const float* p;
  int64_t sb, ss, sh;
  const float* at(int64_t b, int64_t h) const { return p + b * sb + h * sh; }
};

Operand operand(const Tensor& t) {
  const Dims& d = t.dims();
  return {t.data<float>(), d[0] == 1 ? 0 : d[1] * d[2] * d[3], d[2] * d[3], d[2] == 1 ? 0 : d[3]};
}

// The two oneDNN products of one head, for one geometry.
struct Products {
  dnnl::matmul scores, context;
  memory::desc q, kt, s, v, y, scores_pad, context_pad;
};

// AVX-512 head kernels: K^T copied once per head into a row-padded scratch, then blocks of R query
// rows: R x 64 scores in registers over the head size, and R x 64 outputs over the keys.
constexpr int64_t kRows = 6;

T2O_AVX512_WARNINGS_OFF

// r[c] = column c of the 16 x 16 block whose rows are r[0..16).
T2O_AVX512 inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {  // 128-bit lane L of t[2i]: (2i, 4L), (2i+1, 4L), (2i, 4L+1), (2i+1, 4L+1)
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  __m512 u[4][4];  // lane L of u[g][c]: column 4L + c of rows 4g .. 4g + 3
  for (int g = 0; g < 4; ++g) {
    u[g][0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[g][1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[g][2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[g][3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int c = 0; c < 4; ++c) {  // column 4L + c gathers lane L of u[0..4)[c]
    __m512 p0 = _mm512_shuffle_f32x4(u[0][c], u[1][c], 0x44), p1 = _mm512_shuffle_f32x4(u[0][c], u[1][c], 0xEE);
    __m512 p2 = _mm512_shuffle_f32x4(u[2][c], u[3][c], 0x44), p3 = _mm512_shuffle_f32x4(u[2][c], u[3][c], 0xEE);
    r[c] = _mm512_shuffle_f32x4(p0, p2, 0x88);
    r[4 + c] = _mm512_shuffle_f32x4(p0, p2, 0xDD);
    r[8 + c] = _mm512_shuffle_f32x4(p1, p3, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(p1, p3, 0xDD);
  }
}

// kt[d * ldk + j] = k[j * ks + d] for j < Skv; 0 for Skv <= j < ldk (a multiple of 16): blocks of
// 16 keys x 16 dimensions transposed in registers.
T2O_AVX512 void transpose_k(const float* k, int64_t ks, int64_t Skv, int64_t D, float* kt, int64_t ldk) {
  for (int64_t j0 = 0; j0 < ldk; j0 += 16) {
    const int64_t rows = std::min<int64_t>(16, Skv - j0);
    for (int64_t d0 = 0; d0 < D; d0 += 16) {
      const int64_t cols = std::min<int64_t>(16, D - d0);
      const __mmask16 cm = cols == 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1);
      __m512 r[16];
      for (int64_t i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_maskz_loadu_ps(cm, k + (j0 + i) * ks + d0) : _mm512_setzero_ps();
      transpose16(r);
      for (int64_t c = 0; c < cols; ++c) _mm512_storeu_ps(kt + (d0 + c) * ldk + j0, r[c]);
    }
  }
}

// s[r * lds + j] = scale * q_r . k_j for r < R and j < n (a multiple of 16, at most ldk).
template <int R>
T2O_AVX512 void scores_block(const float* q, int64_t qs, const float* kt, int64_t ldk, int64_t n, int64_t D,
                             float scale, float* s, int64_t lds) {
  const __m512 sc = _mm512_set1_ps(scale);
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    __m512 acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; ++d) {
      const float* kp = kt + d * ldk + j;
      __m512 k0 = _mm512_loadu_ps(kp), k1 = _mm512_loadu_ps(kp + 16), k2 = _mm512_loadu_ps(kp + 32),
             k3 = _mm512_loadu_ps(kp + 48);
      for (int r = 0; r < R; ++r) {
        __m512 qv = _mm512_set1_ps(q[r * qs + d]);
        acc[r][0] = _mm512_fmadd_ps(qv, k0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(qv, k1, acc[r][1]);
        acc[r][2] = _mm512_fmadd_ps(qv, k2, acc[r][2]);
        acc[r][3] = _mm512_fmadd_ps(qv, k3, acc[r][3]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < 4; ++c) _mm512_storeu_ps(s + r * lds + j + 16 * c, _mm512_mul_ps(acc[r][c], sc));
  }
  for (; j < n; j += 16) {
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; ++d) {
      __m512 kv = _mm512_loadu_ps(kt + d * ldk + j);
      for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r * qs + d]), kv, acc[r]);
    }
    for (int r = 0; r < R; ++r) _mm512_storeu_ps(s + r * lds + j, _mm512_mul_ps(acc[r], sc));
  }
}

// y[r * ys + c] = sum_j p[r * lds + j] * v[j * vs + c] for r < R and c < Dv.
template <int R>
T2O_AVX512 void context_block(const float* p, int64_t lds, const float* v, int64_t vs, int64_t Skv, int64_t Dv,
                              float* y, int64_t ys) {
  for (int64_t c0 = 0; c0 < Dv; c0 += 64) {
    __mmask16 m[4];
    for (int b = 0; b < 4; ++b) {
      int64_t left = Dv - c0 - 16 * b;
      m[b] = left >= 16 ? static_cast<__mmask16>(0xFFFF) : left <= 0 ? 0 : static_cast<__mmask16>((1u << left) - 1);
    }
    __m512 acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int b = 0; b < 4; ++b) acc[r][b] = _mm512_setzero_ps();
    for (int64_t j = 0; j < Skv; ++j) {
      const float* vp = v + j * vs + c0;
      __m512 v0 = _mm512_maskz_loadu_ps(m[0], vp), v1 = _mm512_maskz_loadu_ps(m[1], vp + 16),
             v2 = _mm512_maskz_loadu_ps(m[2], vp + 32), v3 = _mm512_maskz_loadu_ps(m[3], vp + 48);
      for (int r = 0; r < R; ++r) {
        __m512 pv = _mm512_set1_ps(p[r * lds + j]);
        acc[r][0] = _mm512_fmadd_ps(pv, v0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(pv, v1, acc[r][1]);
        acc[r][2] = _mm512_fmadd_ps(pv, v2, acc[r][2]);
        acc[r][3] = _mm512_fmadd_ps(pv, v3, acc[r][3]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int b = 0; b < 4; ++b) _mm512_mask_storeu_ps(y + r * ys + c0 + 16 * b, m[b], acc[r][b]);
  }
}

// 1 + the last j < n with m[j * step] false (bool bytes); 0 when every one is true.
T2O_AVX512 int64_t last_visible(const bool* m, int64_t step, int64_t n) {
  int64_t j = n;
  if (step == 1) {
    for (; j >= 16; j -= 16) {
      __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + j - 16)));
      unsigned open = static_cast<unsigned>(static_cast<__mmask16>(~_mm512_test_epi32_mask(b, b)));
      if (open) return j - 16 + (31 - __builtin_clz(open)) + 1;
    }
  }
  while (j > 0 && m[(j - 1) * step]) --j;
  return j;
}

// The largest of s[0 .. n), n >= 1 (NaNs may be skipped: they make the softmax NaN either way).
T2O_AVX512 float row_max(const float* s, int64_t n) {
  __m512 m = _mm512_set1_ps(s[0]);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(s + j));
  float r = _mm512_reduce_max_ps(m);
  for (; j < n; ++j) r = std::max(r, s[j]);
  return r;
}

// s[j] = fill where m[j] (bool bytes), for j < n.
T2O_AVX512 void mask_row_where(const bool* m, float* s, int64_t n, float fill) {
  const __m512 f = _mm512_set1_ps(fill);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + j)));
    __mmask16 k = _mm512_test_epi32_mask(b, b);
    if (k) _mm512_mask_storeu_ps(s + j, k, f);
  }
  for (; j < n; ++j)
    if (m[j]) s[j] = fill;
}
// s[j] += m[j] for j < n.
T2O_AVX512 void mask_row_add(const float* m, float* s, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(s + j, _mm512_add_ps(_mm512_loadu_ps(s + j), _mm512_loadu_ps(m + j)));
  for (; j < n; ++j) s[j] += m[j];
}

T2O_AVX512_WARNINGS_ON

// f(std::integral_constant<int, R>) for R = rows, 1 <= rows <= kRows.
template <typename F>
void with_rows(int rows, F&& f) {
  switch (rows) {
    case 6: return f(std::integral_constant<int, 6>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 2: return f(std::integral_constant<int, 2>{});
    default: return f(std::integral_constant<int, 1>{});
  }
}

class AttentionKernel : public OpKernel {
 public:
  enum class Mask { None, Where, Add };
  explicit AttentionKernel(const KernelInfo& info) : fast_(info.fast_paths) {
    const Node& n = info.node;
    scale_ = n.attr_float("scale", 1.0f);
    fill_ = n.attr_float("fill", 0.0f);
    std::string m = n.attr_string("mask", "");
    if (m == "where") mask_ = Mask::Where;
    else if (m == "add") mask_ = Mask::Add;
    else if (!m.empty()) throw Error(n.describe() + ": mask must be where or add, got " + m);
    if (mask_ != Mask::None && n.inputs.size() < 4) throw Error(n.describe() + ": a mask kind needs input 3");
  }

  void run(KernelContext& ctx) override {
    const Tensor& q = ctx.input(0);
    const Tensor& k = ctx.input(1);
    const Tensor& v = ctx.input(2);
    for (const Tensor* t : {&q, &k, &v})
      if (t->dtype() != DType::Float || t->rank() != 4)
        ctx.fail("q, k and v must be 4-D float [batch, sequence, heads, head size], got " + dims_to_string(t->dims()));
    int64_t B = std::max({q.dim(0), k.dim(0), v.dim(0)}), H = std::max({q.dim(2), k.dim(2), v.dim(2)});
    int64_t Sq = q.dim(1), Skv = k.dim(1), D = q.dim(3), Dv = v.dim(3);
    for (const Tensor* t : {&q, &k, &v})
      if ((t->dim(0) != 1 && t->dim(0) != B) || (t->dim(2) != 1 && t->dim(2) != H))
        ctx.fail("batch and head counts of q, k, v do not broadcast: " + dims_to_string(q.dims()) + ", " +
                 dims_to_string(k.dims()) + ", " + dims_to_string(v.dims()));
    if (k.dim(3) != D || v.dim(1) != Skv)
      ctx.fail("k must be [.., " + std::to_string(Sq) + "-like, .., " + std::to_string(D) + "] and v share k's sequence, got " +
               dims_to_string(k.dims()) + " and " + dims_to_string(v.dims()));
    // The mask's strides over [B, H, Sq, Skv].
    const Tensor* mt = mask_ == Mask::None ? nullptr : &ctx.input(3);
    int64_t ms[4] = {0, 0, 0, 0};
    if (mt) {
      if (mt->dtype() != (mask_ == Mask::Where ? DType::Bool : DType::Float) || mt->rank() > 4)
        ctx.fail(std::string("the mask must be ") + (mask_ == Mask::Where ? "bool" : "float") + " of rank <= 4");
      const int64_t want[4] = {B, H, Sq, Skv};
      int64_t stride = 1;
      for (int i = 3, j = static_cast<int>(mt->rank()) - 1; i >= 0; --i, --j) {
        int64_t d = j >= 0 ? mt->dim(j) : 1;
        if (d != 1 && d != want[i])
          ctx.fail("the mask " + dims_to_string(mt->dims()) + " does not broadcast to the scores' [" + std::to_string(B) +
                   ", " + std::to_string(H) + ", " + std::to_string(Sq) + ", " + std::to_string(Skv) + "]");
        ms[i] = d == 1 ? 0 : stride;
        stride *= d;
      }
    }
    Tensor& y = ctx.allocate_output_uninit(0, DType::Float, {B, Sq, H, Dv});
    if (y.numel() == 0) return;
    if (Skv == 0) {  // softmax over nothing: no weights, as the unfused graph's empty product gives
      std::fill(y.data<float>(), y.data<float>() + y.numel(), 0.0f);
      return;
    }
    Operand oq = operand(q), ok = operand(k), ov = operand(v);
    float* yp = y.data<float>();
    static const bool avx512 = __builtin_cpu_supports("avx512f");
    const bool own = fast_ && avx512;
    std::shared_ptr<const Products> prod =
        fast_ && !own ? products(Sq, Skv, D, Dv, oq.ss, ok.ss, ov.ss, H * Dv) : nullptr;
    size_t pad = prod ? std::max(prod->scores_pad.get_size(), prod->context_pad.get_size()) : 0;
    const int64_t ldk = (Skv + 15) / 16 * 16, ys = H * Dv;
    // For a "where" mask, 1 + the last key each of its distinct rows leaves unmasked (0: none).
    // Not when the run's inputs hold a NaN or an infinity: a hidden key's weight is 0, but 0 times
    // a NaN or infinite value of V is NaN, as PyTorch computes it, so every key is computed.
    std::vector<int64_t> vis;
    const int64_t mb = ms[0] ? B : 1, mh = ms[1] ? H : 1, mq = ms[2] ? Sq : 1;
    if (own && mt && mask_ == Mask::Where && !ctx.nonfinite_inputs()) {
      vis.resize(static_cast<size_t>(mb * mh * mq));
      for (int64_t b = 0; b < mb; ++b)
        for (int64_t h = 0; h < mh; ++h)
          for (int64_t i = 0; i < mq; ++i)
            vis[static_cast<size_t>((b * mh + h) * mq + i)] =
                last_visible(mt->data<bool>() + b * ms[0] + h * ms[1] + i * ms[2], ms[3], Skv);
    }
    kern::parallel_for(B * H, ctx.threads(), 1, [&](int64_t b0, int64_t e0) {
      std::vector<float> s(static_cast<size_t>(own ? kRows * ldk : Sq * Skv));
      std::vector<float> kt(static_cast<size_t>(own ? D * ldk : 0));
      std::vector<char> scratch(pad);
      for (int64_t t = b0; t < e0; ++t) {
        int64_t b = t / H, h = t % H;
        const float* qh = oq.at(b, h);
        const float* kh = ok.at(b, h);
        const float* vh = ov.at(b, h);
        float* yh = yp + b * Sq * ys + h * Dv;
        if (own) {
          transpose_k(kh, ok.ss, Skv, D, kt.data(), ldk);
          for (int64_t i = 0; i < Sq; i += kRows) {
            int rows = static_cast<int>(std::min<int64_t>(kRows, Sq - i));
            // Keys that only the mask's fill reaches in every row of the block (the future, under a
            // causal mask) are left out when their softmax weight is below float resolution.
            int64_t n = vis.empty() ? Skv : 0;
            for (int r = 0; r < rows && n < Skv; ++r) {
              const int64_t v = vis[static_cast<size_t>(((ms[0] ? b : 0) * mh + (ms[1] ? h : 0)) * mq + (ms[2] ? i + r : 0))];
              n = v == 0 ? Skv : std::max(n, v);  // a row that sees no key spreads its weights over every fill
            }
            for (int pass = 0; pass < 2; ++pass) {
              const int64_t ext = std::min(ldk, (n + 15) / 16 * 16), used = std::min(ext, Skv);
              with_rows(rows, [&](auto r) {
                scores_block<r()>(qh + i * oq.ss, oq.ss, kt.data(), ldk, ext, D, scale_, s.data(), ldk);
              });
              if (mt) apply_mask(*mt, ms, b, h, i, rows, s.data(), ldk, used);
              if (used < Skv && !fill_negligible(s.data(), ldk, rows, used)) {
                n = Skv;  // weights the fill leaves visible: every key, as written
                continue;
              }
              for (int r = 0; r < rows; ++r)
                kern::softmax_rows_fast(kern::SoftKind::Softmax, s.data() + r * ldk, s.data() + r * ldk, 1, used, 1);
              with_rows(rows, [&](auto r) { context_block<r()>(s.data(), ldk, vh, ov.ss, used, Dv, yh + i * ys, ys); });
              break;
            }
          }
          continue;
        }
        if (prod) run_product(prod->scores, prod->q, qh, prod->kt, kh, prod->s, s.data(), prod->scores_pad, scratch);
        else reference_scores(qh, oq.ss, kh, ok.ss, s.data(), Sq, Skv, D);
        if (mt) apply_mask(*mt, ms, b, h, 0, Sq, s.data(), Skv, Skv);
        kern::softmax_rows_fast(kern::SoftKind::Softmax, s.data(), s.data(), Sq, Skv, 1);
        if (prod) run_product(prod->context, prod->s, s.data(), prod->v, vh, prod->y, yh, prod->context_pad, scratch);
        else reference_context(s.data(), vh, ov.ss, yh, ys, Sq, Skv, Dv);
      }
    });
  }

 private:
  // Scores of one head without oneDNN: scale * q k^T.
  void reference_scores(const float* qh, int64_t qs, const float* kh, int64_t ks, float* s, int64_t Sq, int64_t Skv,
                        int64_t D) const {
    for (int64_t i = 0; i < Sq; ++i)
      for (int64_t j = 0; j < Skv; ++j) {
        float acc = 0;
        for (int64_t d = 0; d < D; ++d) acc += qh[i * qs + d] * kh[j * ks + d];
        s[i * Skv + j] = scale_ * acc;
      }
  }
  static void reference_context(const float* p, const float* vh, int64_t vs, float* yh, int64_t ys, int64_t Sq,
                                int64_t Skv, int64_t Dv) {
    for (int64_t i = 0; i < Sq; ++i)
      for (int64_t d = 0; d < Dv; ++d) {
        float acc = 0;
        for (int64_t j = 0; j < Skv; ++j) acc += p[i * Skv + j] * vh[j * vs + d];
        yh[i * ys + d] = acc;
      }
  }

  // Whether the fill is so far below each row's largest score among the first `used` that the keys
  // left out would get softmax weights under 4e-44 (exp(-100)): nothing next to the row's sum of
  // weights >= 1, as float rounds. False for a NaN fill.
  bool fill_negligible(const float* s, int64_t lds, int rows, int64_t used) const {
    for (int r = 0; r < rows; ++r)
      if (!(fill_ < row_max(s + r * lds, used) - 100.0f)) return false;
    return true;
  }

  // The mask on rows i0 .. i0 + rows of head (b, h), scores `lds` floats apart.
  void apply_mask(const Tensor& m, const int64_t* ms, int64_t b, int64_t h, int64_t i0, int64_t rows, float* s,
                  int64_t lds, int64_t Skv) const {
    int64_t base = b * ms[0] + h * ms[1] + i0 * ms[2];
    static const bool avx512 = __builtin_cpu_supports("avx512f");
    if (avx512 && ms[3] == 1) {  // keys contiguous in the mask: 16 at a time
      for (int64_t i = 0; i < rows; ++i) {
        if (mask_ == Mask::Where) mask_row_where(m.data<bool>() + base + i * ms[2], s + i * lds, Skv, fill_);
        else mask_row_add(m.data<float>() + base + i * ms[2], s + i * lds, Skv);
      }
      return;
    }
    if (mask_ == Mask::Where) {
      const bool* mp = m.data<bool>() + base;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < Skv; ++j)
          if (mp[i * ms[2] + j * ms[3]]) s[i * lds + j] = fill_;
    } else {
      const float* mp = m.data<float>() + base;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < Skv; ++j) s[i * lds + j] += mp[i * ms[2] + j * ms[3]];
    }
  }

  static void run_product(const dnnl::matmul& prim, const memory::desc& a_md, const float* a, const memory::desc& b_md,
                          const float* b, const memory::desc& c_md, float* c, const memory::desc& pad_md,
                          std::vector<char>& scratch) {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(a_md, cpu_engine(), const_cast<float*>(a))},
                                         {DNNL_ARG_WEIGHTS, memory(b_md, cpu_engine(), const_cast<float*>(b))},
                                         {DNNL_ARG_DST, memory(c_md, cpu_engine(), c)}};
    if (pad_md.get_size()) args.emplace(DNNL_ARG_SCRATCHPAD, memory(pad_md, cpu_engine(), scratch.data()));
    dnnl::stream st(cpu_engine());
    prim.execute(st, args);
    st.wait();
  }

  // The products for one geometry (rows of q, k, v and y `*_row` floats apart), made once;
  // null when oneDNN has none (the loops above run instead).
  std::shared_ptr<const Products> products(int64_t Sq, int64_t Skv, int64_t D, int64_t Dv, int64_t q_row,
                                            int64_t k_row, int64_t v_row, int64_t y_row) {
    auto key = std::make_tuple(Sq, Skv, D, Dv, q_row, k_row, v_row, y_row);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    std::shared_ptr<const Products> made;
    try {
      auto p = std::make_shared<Products>();
      p->q = memory::desc({Sq, D}, dt::f32, {q_row, 1});
      p->kt = memory::desc({D, Skv}, dt::f32, {1, k_row});
      p->s = memory::desc({Sq, Skv}, dt::f32, {Skv, 1});
      p->v = memory::desc({Skv, Dv}, dt::f32, {v_row, 1});
      p->y = memory::desc({Sq, Dv}, dt::f32, {y_row, 1});
      dnnl::primitive_attr a1, a2;
      a1.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      a2.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      if (scale_ != 1.0f) a1.set_output_scales(0, {scale_});
      // One head's products run inside a parallel loop over heads: single-threaded (oneDNN fixes
      // its thread count when it makes a primitive; inside an OpenMP region it ran on one thread
      // anyway, but inside a task (task_pool.h) it would open a region of its own).
      kern::OmpThreadLimit one(1);
      dnnl::matmul::primitive_desc pd1(dnnl::matmul::desc(p->q, p->kt, p->s), a1, cpu_engine());
      dnnl::matmul::primitive_desc pd2(dnnl::matmul::desc(p->s, p->v, p->y), a2, cpu_engine());
      p->scores = dnnl::matmul(pd1);
      p->context = dnnl::matmul(pd2);
      p->scores_pad = pd1.scratchpad_desc();
      p->context_pad = pd2.scratchpad_desc();
      made = p;
    } catch (const dnnl::error&) {
      made = nullptr;
    }
    if (cache_.size() >= 16) cache_.clear();
    cache_.emplace(key, made);
    return made;
  }

  bool fast_;
  float scale_ = 1.0f, fill_ = 0.0f;
  Mask mask_ = Mask::None;
  std::mutex mu_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>,
           std::shared_ptr<const Products>>
      cache_;
};

}  // namespace

void register_attention_kernels(KernelRegistry& r) {
  r.add(kInternalDomain, "Attention", 1, factory_of<AttentionKernel>());
}

}  // namespace t2o
