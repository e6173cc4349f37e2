// LayerNormalization (opset 17): rows are the dims from `axis` on; Scale and B broadcast to them.
// Mean and InvStdDev outputs have the row dims replaced by 1. The fast path handles float rows
// with full-length (or absent) Scale and B.
#include <cmath>
#include <type_traits>

#include "runtime/kernels/avx512_math.h"
#include "runtime/kernels/util.h"

namespace t2o::kern {

namespace {

T2O_AVX512_WARNINGS_OFF

// y = (x - mean) * inv * scale + bias at j, lanes k.
T2O_AVX512 inline void layer_norm_out16(const float* xp, float* yp, const float* scale, const float* bias, int64_t j,
                                        __mmask16 k, __m512 m, __m512 iv) {
  const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, xp + j), m), iv);
  const __m512 sc = _mm512_maskz_loadu_ps(k, scale + j);
  const __m512 v = bias ? _mm512_fmadd_ps(d, sc, _mm512_maskz_loadu_ps(k, bias + j)) : _mm512_mul_ps(d, sc);
  _mm512_mask_storeu_ps(yp + j, k, v);
}

// One row with AVX-512: the same two passes (mean, then the sum of squared deviations) and
// y = (x - mean) * inv * scale + bias, 16 lanes at a time (the tail masked).
T2O_AVX512 void layer_norm_row_avx512(const float* xp, float* yp, const float* scale, const float* bias, int64_t len,
                                      float eps, float& mean_out, float& inv_out) {
  const int64_t full = len / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (len - full)) - 1);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= full; i += 32) {
    s0 = _mm512_add_ps(s0, _mm512_loadu_ps(xp + i));
    s1 = _mm512_add_ps(s1, _mm512_loadu_ps(xp + i + 16));
  }
  if (i < full) s0 = _mm512_add_ps(s0, _mm512_loadu_ps(xp + i));
  if (tail) s1 = _mm512_add_ps(s1, _mm512_maskz_loadu_ps(tail, xp + full));
  const float mean = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) / static_cast<float>(len);
  const __m512 m = _mm512_set1_ps(mean);
  s0 = _mm512_setzero_ps();
  s1 = _mm512_setzero_ps();
  for (i = 0; i + 32 <= full; i += 32) {
    const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(xp + i), m), d1 = _mm512_sub_ps(_mm512_loadu_ps(xp + i + 16), m);
    s0 = _mm512_fmadd_ps(d0, d0, s0);
    s1 = _mm512_fmadd_ps(d1, d1, s1);
  }
  if (i < full) {
    const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(xp + i), m);
    s0 = _mm512_fmadd_ps(d, d, s0);
  }
  if (tail) {
    const __m512 d = _mm512_maskz_sub_ps(tail, _mm512_maskz_loadu_ps(tail, xp + full), m);
    s1 = _mm512_fmadd_ps(d, d, s1);
  }
  const float var = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) / static_cast<float>(len);
  const float inv = 1.0f / std::sqrt(var + eps);
  const __m512 iv = _mm512_set1_ps(inv);
  for (i = 0; i < full; i += 16) layer_norm_out16(xp, yp, scale, bias, i, 0xFFFF, m, iv);
  if (tail) layer_norm_out16(xp, yp, scale, bias, full, tail, m, iv);
  mean_out = mean;
  inv_out = inv;
}

T2O_AVX512_WARNINGS_ON

}  // namespace

// Fast path over float rows. scale/bias have `len` entries (bias may be null); mean/inv may be null.
void layer_norm_rows_fast(const float* x, float* y, const float* scale, const float* bias, float* mean_out,
                          float* inv_out, int64_t rows, int64_t len, float eps, int threads) {
  if (has_avx512() && len >= 16) {
    const int t = task_threads_for(threads, work_us(8.0 * static_cast<double>(rows * len), 8.0 * static_cast<double>(rows * len)));
    parallel_for(rows, t, std::max<int64_t>(1, 8192 / len), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        float mean, inv;
        layer_norm_row_avx512(x + r * len, y + r * len, scale, bias, len, eps, mean, inv);
        if (mean_out) mean_out[r] = mean;
        if (inv_out) inv_out[r] = inv;
      }
    });
    return;
  }
  parallel_for(rows, threads, std::max<int64_t>(1, 8192 / std::max<int64_t>(len, 1)), [&](int64_t b, int64_t e) {
    constexpr int W = 8;
    for (int64_t r = b; r < e; ++r) {
      const float* xp = x + r * len;
      float* yp = y + r * len;
      float part[W] = {};
      int64_t i = 0;
      for (; i + W <= len; i += W)
        for (int k = 0; k < W; ++k) part[k] += xp[i + k];
      float s = 0;
      for (; i < len; ++i) s += xp[i];
      for (float v : part) s += v;
      float mean = s / static_cast<float>(len);
      float vpart[W] = {};
      for (i = 0; i + W <= len; i += W)
        for (int k = 0; k < W; ++k) {
          float d = xp[i + k] - mean;
          vpart[k] += d * d;
        }
      float v = 0;
      for (; i < len; ++i) v += (xp[i] - mean) * (xp[i] - mean);
      for (float p : vpart) v += p;
      float inv = 1.0f / std::sqrt(v / static_cast<float>(len) + eps);
      if (bias)
        for (int64_t j = 0; j < len; ++j) yp[j] = (xp[j] - mean) * inv * scale[j] + bias[j];
      else
        for (int64_t j = 0; j < len; ++j) yp[j] = (xp[j] - mean) * inv * scale[j];
      if (mean_out) mean_out[r] = mean;
      if (inv_out) inv_out[r] = inv;
    }
  });
}

namespace {

template <typename T>
constexpr bool is_floatish = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

class LayerNormKernel : public OpKernel {
 public:
  explicit LayerNormKernel(const KernelInfo& info) : fast_(info.fast_paths) {
    axis_ = info.node.attr_int("axis", -1);
    eps_ = info.node.attr_float("epsilon", 1e-5f);
    stash_ = info.node.attr_int("stash_type", 1);
  }
  void run(KernelContext& ctx) override {
    const Tensor& X = ctx.input(0);
    const Tensor& S = ctx.input(1);
    const Tensor* B = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (!dtype_is_float(X.dtype())) ctx.fail("expects a floating-point input");
    if (S.dtype() != X.dtype() || (B && B->dtype() != X.dtype())) ctx.fail("Scale and B must have the type of X");
    int64_t r = X.rank();
    int64_t axis = norm_axis(ctx, axis_, r);
    Dims row(X.dims().begin() + axis, X.dims().end());
    auto check = [&](const Tensor& t, const char* what) {
      if (t.rank() > static_cast<int>(row.size()) || broadcast_dims(ctx, t.dims(), row) != row)
        ctx.fail(std::string(what) + " of shape " + dims_to_string(t.dims()) + " does not broadcast to " + dims_to_string(row));
    };
    check(S, "Scale");
    if (B) check(*B, "B");
    int64_t len = numel_of(row), rows = len ? X.numel() / len : 0;
    Dims stat_dims(X.dims().begin(), X.dims().begin() + axis);
    stat_dims.resize(static_cast<size_t>(r), 1);
    DType st = stash_ == 1 ? DType::Float : X.dtype();
    Tensor& Y = ctx.allocate_output_uninit(0, X.dtype(), X.dims());
    Tensor mean_t = ctx.has_output(1) ? ctx.allocate_output(1, st, stat_dims) : Tensor();
    Tensor inv_t = ctx.has_output(2) ? ctx.allocate_output(2, st, stat_dims) : Tensor();
    if (X.numel() == 0) return;
    if (fast_ && X.dtype() == DType::Float && S.numel() == len && (!B || B->numel() == len)) {
      layer_norm_rows_fast(X.data<float>(), Y.data<float>(), S.data<float>(), B ? B->data<float>() : nullptr,
                           mean_t.defined() ? mean_t.data<float>() : nullptr,
                           inv_t.defined() ? inv_t.data<float>() : nullptr, rows, len, eps_, ctx.threads());
      return;
    }
    // Offsets of Scale and B within a row (broadcast).
    std::vector<int64_t> soff(static_cast<size_t>(len)), boff(static_cast<size_t>(len));
    for_each_broadcast(row, {broadcast_strides(S.dims(), row), B ? broadcast_strides(B->dims(), row) : Dims(row.size(), 0)},
                       [&](int64_t i, const int64_t* o) {
                         soff[static_cast<size_t>(i)] = o[0];
                         boff[static_cast<size_t>(i)] = o[1];
                       });
    dispatch_dtype(X.dtype(), [&](auto t) {
      using T = decltype(t);
      if constexpr (is_floatish<T>) {
        const T* x = X.data<T>();
        T* y = Y.data<T>();
        const T* s = S.data<T>();
        const T* b = B ? B->data<T>() : nullptr;
        for (int64_t i = 0; i < rows; ++i) {
          const T* xp = x + i * len;
          double sum = 0, sq = 0;
          for (int64_t j = 0; j < len; ++j) sum += static_cast<double>(xp[j]);
          double mean = sum / static_cast<double>(len);
          for (int64_t j = 0; j < len; ++j) sq += (static_cast<double>(xp[j]) - mean) * (static_cast<double>(xp[j]) - mean);
          double inv = 1.0 / std::sqrt(sq / static_cast<double>(len) + eps_);
          for (int64_t j = 0; j < len; ++j) {
            size_t u = static_cast<size_t>(j);
            double v = (static_cast<double>(xp[j]) - mean) * inv * static_cast<double>(s[soff[u]]);
            if (b) v += static_cast<double>(b[boff[u]]);
            y[i * len + j] = static_cast<T>(static_cast<float>(v));
          }
          auto put = [&](Tensor& o, double v) {
            if (!o.defined()) return;
            dispatch_dtype(o.dtype(), [&](auto u) {
              using U = decltype(u);
              if constexpr (is_floatish<U>) o.data<U>()[i] = static_cast<U>(static_cast<float>(v));
            });
          };
          put(mean_t, mean);
          put(inv_t, inv);
        }
      }
    });
  }

 private:
  bool fast_;
  int64_t axis_;
  float eps_;
  int64_t stash_;
};

}  // namespace

void register_layer_norm_kernels(KernelRegistry& r) {
  // ONNX Runtime's optimizer writes LayerNormalization into the default domain below opset 17 too
  // (its contrib op of the same meaning), so the kernel serves those models as well.
  r.add("", "LayerNormalization", 1, factory_of<LayerNormKernel>());
  r.add("", "LayerNormalization", 17, factory_of<LayerNormKernel>());
}

}  // namespace t2o::kern
