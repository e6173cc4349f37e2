// The runtime's Int8MatMul (runtime/optimize.h): a float activation quantized to 8 bits, times
// constant int8 weights, accumulated in int32 and scaled back to float, with an optional bias.
//   Int8MatMul(A, Wq, Ws, [bias], [x_scale, x_zero_point])  attributes: trans_b
// Without x_scale the activation is quantized as DynamicQuantizeLinear does (uint8, range of this
// run including 0), and the result is exactly what DynamicQuantizeLinear -> MatMulInteger -> Cast
// -> Mul(a_scale * Ws) [-> Add bias] computes. With x_scale / x_zero_point (a static QDQ model's
// QuantizeLinear -> DequantizeLinear -> MatMul(., DequantizeLinear(Wq))) the activation is
// quantized with them; the product is then exact in int32 where the float graph rounds each sum.
// Ws holds one scale, or one per output column; Wq's zero point is 0 (symmetric weights).
// Attribute activation = "gelu": the erf GELU of the result (a rewrite after this one, see
// runtime/optimize.h), to float rounding of the separate ops. Attribute src_quantized: A is the
// 8-bit activation already (x_zero_point's type). Inputs 6 and 7, y_scale / y_zero_point: Y is
// QuantizeLinear of the float result (a QLinearMatMul: the float result divided by y_scale where
// QLinearMatMul multiplies by a_scale * b_scale / y_scale, so a value on a rounding boundary may
// land one step away).
//
// The fast path is oneDNN's u8/s8 x s8 matmul with the activation's zero point, per-column output
// scales and the bias as a post-op, used on CPUs with VNNI (or AMX) only: without them oneDNN's
// int8 kernels add pairs of products in 16 bits, which can saturate.
#include <immintrin.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "runtime/kernels/elementwise_util.h"
#include "runtime/kernels/int8.h"
#include "runtime/kernels/int8_dnnl.h"
#include "runtime/kernels/matmul_util.h"
#include "runtime/optimize.h"

namespace t2o::kern {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// The int32 products are written into the float output's buffer and converted in place.
typedef int32_t __attribute__((may_alias)) AliasedI32;

// DynamicQuantizeLinear's range: min and max of x and 0, NaN skipped (std::min(mn, v) keeps mn
// unless v < mn; vminps(v, mn) is the same rule, lane by lane, and the lanes combine alike).
// GCC's avx512 intrinsics start from an undefined vector (spurious -Wmaybe-uninitialized).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f"))) void range_avx512(const float* x, int64_t n, float& mn, float& mx) {
  __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    lo = _mm512_min_ps(v, lo);
    hi = _mm512_max_ps(v, hi);
  }
  alignas(64) float l[16], h[16];
  _mm512_store_ps(l, lo);
  _mm512_store_ps(h, hi);
  mn = 0;
  mx = 0;
  for (int k = 0; k < 16; ++k) {
    mn = std::min(mn, l[k]);
    mx = std::max(mx, h[k]);
  }
  for (; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
}

// quantize_one on 16 lanes. max(a, v) / min(a, v) return v when v is NaN (the second operand), as
// the scalar clamps do; the NaN then goes to z before the final clamps.
__attribute__((target("avx512f"))) void quantize_avx512(const float* x, int64_t n, float s, float z, float lo,
                                                        float hi, uint8_t* q) {
  const __m512 vs = _mm512_set1_ps(s), vz = _mm512_set1_ps(z), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const __m512 big = _mm512_set1_ps(4194304.0f), nbig = _mm512_set1_ps(-4194304.0f), rnd = _mm512_set1_ps(12582912.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_div_ps(_mm512_loadu_ps(x + i), vs);
    v = _mm512_min_ps(big, _mm512_max_ps(nbig, v));
    __m512 r = _mm512_add_ps(_mm512_sub_ps(_mm512_add_ps(v, rnd), rnd), vz);
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q), vz);
    r = _mm512_min_ps(vhi, _mm512_max_ps(vlo, r));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(r)));
  }
  for (; i < n; ++i) q[i] = static_cast<uint8_t>(static_cast<int32_t>(quantize_one(x[i], s, z, lo, hi)) & 0xff);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

void range_of(const float* x, int64_t n, float& mn, float& mx) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return range_avx512(x, n, mn, mx);
  mn = 0;
  mx = 0;
  for (int64_t i = 0; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
}

using int8_dnnl::engine;

}  // namespace

void dynamic_quant_params(const float* x, int64_t n, float& s, int32_t& z, int threads) {
  float mn = 0, mx = 0;
  std::mutex mu;
  parallel_for(n, threads, 65536, [&](int64_t b, int64_t e) {
    float lo = 0, hi = 0;
    range_of(x + b, e - b, lo, hi);
    std::lock_guard<std::mutex> lock(mu);
    mn = std::min(mn, lo);
    mx = std::max(mx, hi);
  });
  s = (mx - mn) / 255.0f;
  z = s == 0 ? 0 : saturate_cast<uint8_t>(std::nearbyint((0 - mn) / s));
}

void dynamic_quantize_bytes(const float* x, int64_t n, float s, int32_t z, uint8_t* q, int threads) {
  if (std::isfinite(s) && s != 0) return quantize_bytes(x, n, s, static_cast<float>(z), 0.0f, 255.0f, q, threads);
  std::fill(q, q + n, static_cast<uint8_t>(z));
  if (s != 0)
    for (int64_t i = 0; i < n; ++i)
      q[i] = saturate_cast<uint8_t>(std::nearbyint(x[i] / s) + static_cast<float>(z), static_cast<uint8_t>(z));
}

namespace {

class Int8MatMulKernel : public OpKernel {
 public:
  explicit Int8MatMulKernel(const KernelInfo& info) {
    const Node& n = info.node;
    trans_b_ = n.attr_int("trans_b", 0) != 0;
    gelu_ = n.attr_string("activation", "") == "gelu";
    if (!gelu_ && n.has_attr("activation")) return;
    const Tensor* w = info.constant_input(1);
    const Tensor* ws = info.constant_input(2);
    if (!w || !ws) return;  // run() reports it
    if (w->dtype() != DType::Int8 || w->rank() != 2 || !dtype_is_float(ws->dtype())) return;
    K_ = w->dim(trans_b_ ? 1 : 0);
    N_ = w->dim(trans_b_ ? 0 : 1);
    if (ws->numel() != 1 && ws->numel() != N_) return;
    wq_ = *w;
    for (int64_t j = 0; j < N_; ++j) ws_.push_back(static_cast<float>(ws->as_double(ws->numel() == 1 ? 0 : j)));
    if (n.has_input(3)) {
      const Tensor* b = info.constant_input(3);
      if (!b || b->dtype() != DType::Float || b->numel() != N_) return;
      bias_.assign(b->data<float>(), b->data<float>() + N_);
    }
    if (n.has_input(4)) {
      std::optional<QuantParam> x = constant_quant_param(info, 4);
      if (!x) return;
      static_ = true;
      x_ = *x;
    }
    src_quantized_ = n.attr_int("src_quantized", 0) != 0;
    if (src_quantized_ && !static_) return;
    if (n.has_input(6)) {
      std::optional<QuantParam> yq = constant_quant_param(info, 6);
      if (!yq || gelu_) return;
      y_quantized_ = true;
      y_ = *yq;
    }
    valid_ = true;
    fast_ = info.fast_paths && int8_products_exact();
    // Column sums of W: (a - z) . w = a . w - z * colsum(w), so the product runs without a zero point.
    colsum_.assign(static_cast<size_t>(N_), 0);
    const int8_t* wp = wq_.data<int8_t>();
    for (int64_t k = 0; k < K_; ++k)
      for (int64_t j = 0; j < N_; ++j) colsum_[static_cast<size_t>(j)] += trans_b_ ? wp[j * K_ + k] : wp[k * N_ + j];
  }

  void run(KernelContext& ctx) override {
    if (!valid_) ctx.fail("needs constant int8 2-D weights, their scales (1 or N), a float bias of N and one activation scale");
    const Tensor& A = ctx.input(0);
    const DType at = src_quantized_ ? (x_.is_signed ? DType::Int8 : DType::UInt8) : DType::Float;
    if (A.dtype() != at) ctx.fail("A must be " + std::string(dtype_name(at)));
    if (A.rank() < 1 || A.dim(-1) != K_)
      ctx.fail("A is " + dims_to_string(A.dims()) + ", the weights need " + std::to_string(K_) + " in its last dim");
    Dims od = A.dims();
    od.back() = N_;
    if (y_quantized_) {
      // The float result in a scratch tensor, then QuantizeLinear into Y.
      Tensor f = Tensor::uninitialized(DType::Float, od);
      if (f.numel() > 0) compute(ctx, A, f.data<float>(), f.numel() / N_);
      Tensor& Y = ctx.allocate_output_uninit(0, y_.is_signed ? DType::Int8 : DType::UInt8, od);
      if (Y.numel() > 0)
        quantize_bytes(f.data<float>(), f.numel(), y_.scale, static_cast<float>(y_.zero), y_.lo(), y_.hi(),
                       static_cast<uint8_t*>(Y.raw()), ctx.threads());
      return;
    }
    Tensor& Y = ctx.allocate_output_uninit(0, DType::Float, od);
    if (Y.numel() == 0) return;
    compute(ctx, A, Y.data<float>(), Y.numel() / N_);  // N_ > 0: Y is not empty
  }

 private:
  // The float result of the product into y (`rows` rows of A, times N).
  void compute(KernelContext& ctx, const Tensor& A, float* y, int64_t rows) {
    if (K_ == 0) {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < N_; ++j) y[r * N_ + j] = bias_.empty() ? 0.0f : bias_[static_cast<size_t>(j)];
      return;
    }
    float s;
    int32_t z;
    if (static_) {
      s = x_.scale;
      z = x_.zero;
    } else {
      dynamic_quant_params(A.data<float>(), A.numel(), s, z, ctx.threads());
    }
    // Quantized A; a zero or non-finite scale leaves every value at the zero point (or NaN
    // quotients), which the reference arithmetic below handles as the ONNX ops do.
    const size_t count = static_cast<size_t>(A.numel());
    std::unique_ptr<uint8_t[]> own;
    const uint8_t* q = static_cast<const uint8_t*>(A.raw());
    const bool finite = std::isfinite(s) && s != 0;
    if (!src_quantized_) {
      own.reset(new uint8_t[count]);  // uninitialized: every byte is written
      q = own.get();
      if (static_)
        quantize_bytes(A.data<float>(), A.numel(), s, static_cast<float>(z), x_.lo(), x_.hi(), own.get(), ctx.threads());
      else
        dynamic_quantize_bytes(A.data<float>(), A.numel(), s, z, own.get(), ctx.threads());
    }
    // Output scale per column, computed as the graph's Mul(a_scale, Ws) does.
    std::vector<float> scale(static_cast<size_t>(N_));
    for (int64_t j = 0; j < N_; ++j) scale[static_cast<size_t>(j)] = s * ws_[static_cast<size_t>(j)];
    if (fast_ && finite && dnnl_run(rows, q, z, scale.data(), y, ctx.threads())) return;
    reference(rows, q, z, scale.data(), y);
  }

  struct Prim {
    dnnl::matmul prim;
    memory::desc scratchpad;
  };

  // int32 accumulation, then float(acc) * scale[n] (+ bias[n]).
  void reference(int64_t rows, const uint8_t* q, int32_t z, const float* scale, float* y) const {
    const int8_t* w = wq_.data<int8_t>();
    std::vector<int32_t> acc(static_cast<size_t>(N_));
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(acc.begin(), acc.end(), 0);
      const uint8_t* qr = q + r * K_;
      for (int64_t k = 0; k < K_; ++k) {
        int32_t av = (x_.is_signed ? static_cast<int32_t>(static_cast<int8_t>(qr[k])) : static_cast<int32_t>(qr[k])) - z;
        if (av == 0) continue;
        for (int64_t j = 0; j < N_; ++j)
          acc[static_cast<size_t>(j)] += av * static_cast<int32_t>(trans_b_ ? w[j * K_ + k] : w[k * N_ + j]);
      }
      float* yr = y + r * N_;
      for (int64_t j = 0; j < N_; ++j) {
        float v = static_cast<float>(acc[static_cast<size_t>(j)]) * scale[j];
        yr[j] = bias_.empty() ? v : v + bias_[static_cast<size_t>(j)];
      }
      if (gelu_) gelu(yr, N_);
    }
  }

  // oneDNN's plain u8/s8 x s8 -> s32 product (no attributes: its fastest kernels), written into
  // y's buffer, then converted there: acc - z * colsum(W), exact in int32, times scale (+ bias).
  bool dnnl_run(int64_t rows, const uint8_t* q, int32_t z, const float* scale, float* y, int threads) {
    try {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(rows);
      memory::desc a_md({rows, K_}, x_.is_signed ? dt::s8 : dt::u8, tag::ab);
      memory::desc c_md({rows, N_}, dt::s32, tag::ab);
      if (it == cache_.end()) {
        if (rejected_.count(rows)) return false;
        if (cache_.size() >= 64) cache_.clear();
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        memory::desc w_any({K_, N_}, dt::s8, tag::any);
        dnnl::matmul::primitive_desc pd;
        try {
          pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, w_any, c_md), attr, engine());
        } catch (const dnnl::error&) {
          rejected_.insert(rows);
          return false;
        }
        if (!packed_ || packed_->get_desc() != pd.weights_desc()) {
          packed_ = int8_dnnl::pack(memory::desc({K_, N_}, dt::s8, trans_b_ ? tag::ba : tag::ab), wq_.raw(),
                                    pd.weights_desc());
          cache_.clear();  // primitives made for the previous packing
        }
        it = cache_.emplace(rows, Prim{dnnl::matmul(pd), pd.scratchpad_desc()}).first;
      }
      Prim& p = it->second;
      AliasedI32* acc = reinterpret_cast<AliasedI32*>(y);
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(a_md, engine(), const_cast<uint8_t*>(q))},
                                           {DNNL_ARG_WEIGHTS, *packed_},
                                           {DNNL_ARG_DST, memory(c_md, engine(), acc)}};
      if (p.scratchpad.get_size()) args.emplace(DNNL_ARG_SCRATCHPAD, int8_dnnl::scratchpad(p.scratchpad, scratch_));
      dnnl::stream st(engine());
      p.prim.execute(st, args);
      st.wait();
    } catch (const dnnl::error&) {
      return false;
    }
    const int32_t* cs = colsum_.data();
    const float* b = bias_.empty() ? nullptr : bias_.data();
    const int64_t n = N_;
    parallel_for(rows, threads, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const AliasedI32* ar = reinterpret_cast<const AliasedI32*>(y + r * n);
        float* yr = y + r * n;
        if (b) {
          for (int64_t j = 0; j < n; ++j) yr[j] = static_cast<float>(ar[j] - z * cs[j]) * scale[j] + b[j];
        } else {
          for (int64_t j = 0; j < n; ++j) yr[j] = static_cast<float>(ar[j] - z * cs[j]) * scale[j];
        }
      }
    });
    if (gelu_) {
      // oneDNN's vectorized erf GELU, in place (the per-element erf above would call expf).
      try {
        std::lock_guard<std::mutex> lock(mu_);
        memory ym(memory::desc({rows, N_}, dt::f32, tag::ab), engine(), y);
        dnnl::stream st(engine());
        it_gelu(rows).execute(st, {{DNNL_ARG_SRC, ym}, {DNNL_ARG_DST, ym}});
        st.wait();
      } catch (const dnnl::error&) {
        for (int64_t r = 0; r < rows; ++r) gelu(y + r * n, n);
      }
    }
    return true;
  }

  // The GELU primitive for `rows` rows (the caller holds mu_).
  dnnl::eltwise_forward& it_gelu(int64_t rows) {
    auto it = gelu_prims_.find(rows);
    if (it != gelu_prims_.end()) return it->second;
    if (gelu_prims_.size() >= 64) gelu_prims_.clear();
    memory::desc md({rows, N_}, dt::f32, tag::ab);
    dnnl::eltwise_forward p(dnnl::eltwise_forward::primitive_desc(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_gelu_erf, md, 0.0f, 0.0f),
        engine()));
    return gelu_prims_.emplace(rows, std::move(p)).first->second;
  }

  // The erf GELU as the float kernels' fast path computes it (Gelu, FusedMatMul's reference tail).
  static void gelu(float* y, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] = 0.5f * y[j] * (1.0f + fast_erf(y[j] * 0.7071067811865476f));
  }

  bool valid_ = false, fast_ = false, trans_b_ = false, static_ = false, gelu_ = false;
  bool src_quantized_ = false, y_quantized_ = false;
  QuantParam y_;  // the output's, when it is quantized
  int64_t K_ = 0, N_ = 0;
  Tensor wq_;
  std::vector<float> ws_, bias_;
  std::vector<int32_t> colsum_;
  QuantParam x_;  // the activation's quantization (static; dynamic computes its own)
  std::mutex mu_;
  std::map<int64_t, Prim> cache_;
  std::map<int64_t, dnnl::eltwise_forward> gelu_prims_;
  std::set<int64_t> rejected_;
  std::shared_ptr<memory> packed_;
  std::vector<uint8_t> scratch_;
};

}  // namespace

std::optional<QuantParam> constant_quant_param(const KernelInfo& info, int scale_input) {
  const Node& n = info.node;
  const Tensor* s = n.has_input(scale_input) ? info.constant_input(scale_input) : nullptr;
  const Tensor* z = n.has_input(scale_input + 1) ? info.constant_input(scale_input + 1) : nullptr;
  if (!s || s->numel() != 1 || !dtype_is_float(s->dtype())) return std::nullopt;
  if (n.has_input(scale_input + 1) && (!z || z->numel() != 1 || (z->dtype() != DType::UInt8 && z->dtype() != DType::Int8)))
    return std::nullopt;
  QuantParam p;
  p.scale = static_cast<float>(s->as_double(0));
  if (!(p.scale > 0) || !std::isfinite(p.scale)) return std::nullopt;
  p.zero = z ? static_cast<int32_t>(z->as_int(0)) : 0;
  p.is_signed = z && z->dtype() == DType::Int8;
  return p;
}

void quantize_bytes(const float* x, int64_t n, float s, float z, float lo, float hi, uint8_t* q, int threads) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  parallel_for(n, threads, 65536, [&](int64_t b, int64_t e) {
    if (avx512) return quantize_avx512(x + b, e - b, s, z, lo, hi, q + b);
    for (int64_t i = b; i < e; ++i) q[i] = static_cast<uint8_t>(static_cast<int32_t>(quantize_one(x[i], s, z, lo, hi)) & 0xff);
  });
}

bool int8_products_exact() {
  static const bool ok = [] {
    auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    auto has = [isa](unsigned want) { return (isa & want) == want; };
    return has(dnnl_cpu_isa_avx512_core_vnni) || has(dnnl_cpu_isa_avx2_vnni);
  }();
  return ok;
}

void register_int8_matmul_kernels(KernelRegistry& r) {
  r.add(kInternalDomain, "Int8MatMul", 1, factory_of<Int8MatMulKernel>());
}

}  // namespace t2o::kern
