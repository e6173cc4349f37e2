// QuantizeLinear, DequantizeLinear (per-tensor, and per-axis from opset 13), DynamicQuantizeLinear,
// and the internal QuantDequant: a QuantizeLinear -> DequantizeLinear pair with one per-tensor
// scale and zero point, which session build makes of static QDQ models (runtime/optimize.h).
// Quantization rounds half to even and saturates to the range of the zero point's type.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/kernels/util.h"
#include "runtime/optimize.h"

namespace t2o {
namespace kern {
namespace {

// x viewed as (outer, len, inner) around the quantization axis; len is 1 for a per-tensor scale.
struct AxisIndex {
  int64_t inner = 1, len = 1;
  bool per_axis = false;
};

AxisIndex axis_index(const KernelContext& ctx, const Tensor& x, const Tensor& scale, const Tensor* zp) {
  AxisIndex a;
  if (zp && zp->dims() != scale.dims() && !(zp->numel() == 1 && scale.numel() == 1))
    ctx.fail("scale and zero point must have the same shape");
  if (scale.numel() == 1 && scale.rank() <= 1) return a;
  if (scale.rank() != 1) ctx.fail("scale must be a scalar or a 1-D tensor, got " + dims_to_string(scale.dims()));
  if (ctx.opset() < 13) ctx.fail("per-axis scale needs opset 13 or later");
  int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", 1), x.rank());
  if (x.dim(static_cast<int>(axis)) != scale.numel())
    ctx.fail("scale has " + std::to_string(scale.numel()) + " elements but axis " + std::to_string(axis) + " has size " +
             std::to_string(x.dim(static_cast<int>(axis))));
  a.per_axis = true;
  a.len = scale.numel();
  for (int64_t d = axis + 1; d < x.rank(); ++d) a.inner *= x.dims()[static_cast<size_t>(d)];
  return a;
}

void quantize_linear(KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor& S = ctx.input(1);
  const Tensor* Z = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  DType yt = Z ? Z->dtype() : DType::UInt8;
  if (yt != DType::UInt8 && yt != DType::Int8) ctx.fail("zero point must be uint8 or int8");
  if (!dtype_is_float(X.dtype()) && X.dtype() != DType::Int32) ctx.fail("x must be float or int32");
  AxisIndex ai = axis_index(ctx, X, S, Z);
  Tensor& Y = ctx.allocate_output(0, yt, X.dims());
  int64_t len = ai.per_axis ? ai.len : 1, inner = ai.per_axis ? ai.inner : X.numel();
  int64_t outer = len * inner > 0 ? X.numel() / (len * inner) : 0;
  std::vector<float> sc(static_cast<size_t>(len));
  std::vector<float> zp(static_cast<size_t>(len), 0.0f);
  for (int64_t k = 0; k < len; ++k) {
    sc[static_cast<size_t>(k)] = static_cast<float>(S.as_double(k));
    if (Z) zp[static_cast<size_t>(k)] = static_cast<float>(Z->as_int(k));
  }
  auto loop = [&](auto xv, auto yv) {
    using XT = decltype(xv);
    using YT = decltype(yv);
    const XT* x = X.data<XT>();
    YT* y = static_cast<YT*>(Y.raw());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < len; ++k) {
        float s = sc[static_cast<size_t>(k)], z = zp[static_cast<size_t>(k)];
        int64_t base = (o * len + k) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          // Divide in float as the spec does, round half to even, then saturate.
          // NaN (0/0, NaN input) has no defined integer: it maps to the zero point, i.e. to 0.
          float q = std::nearbyint(static_cast<float>(x[base + i]) / s) + z;
          y[base + i] = saturate_cast<YT>(q, saturate_cast<YT>(z));
        }
      }
  };
  dispatch_dtype(X.dtype(), [&](auto xv) {
    using XT = decltype(xv);
    if constexpr (std::is_floating_point_v<XT> || std::is_same_v<XT, Half> || std::is_same_v<XT, BFloat16> ||
                  std::is_same_v<XT, int32_t>) {
      if (yt == DType::UInt8) loop(xv, uint8_t{});
      else loop(xv, int8_t{});
    }
  });
}

void dequantize_linear(KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor& S = ctx.input(1);
  const Tensor* Z = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (X.dtype() != DType::UInt8 && X.dtype() != DType::Int8 && X.dtype() != DType::Int32)
    ctx.fail("x must be uint8, int8 or int32");
  if (Z && Z->dtype() != X.dtype()) ctx.fail("zero point must have the type of x");
  if (!dtype_is_float(S.dtype())) ctx.fail("scale must be floating point");
  AxisIndex ai = axis_index(ctx, X, S, Z);
  Tensor& Y = ctx.allocate_output(0, S.dtype(), X.dims());
  int64_t len = ai.per_axis ? ai.len : 1, inner = ai.per_axis ? ai.inner : X.numel();
  int64_t outer = len * inner > 0 ? X.numel() / (len * inner) : 0;
  std::vector<float> sc(static_cast<size_t>(len));
  std::vector<int32_t> zp(static_cast<size_t>(len), 0);
  for (int64_t k = 0; k < len; ++k) {
    sc[static_cast<size_t>(k)] = static_cast<float>(S.as_double(k));
    if (Z) zp[static_cast<size_t>(k)] = static_cast<int32_t>(Z->as_int(k));
  }
  dispatch_dtype(S.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      dispatch_dtype(X.dtype(), [&](auto xv) {
        using XT = decltype(xv);
        if constexpr (std::is_same_v<XT, uint8_t> || std::is_same_v<XT, int8_t> || std::is_same_v<XT, int32_t>) {
          const XT* x = X.data<XT>();
          T* y = Y.data<T>();
          for (int64_t o = 0; o < outer; ++o)
            for (int64_t k = 0; k < len; ++k) {
              float s = sc[static_cast<size_t>(k)];
              int32_t z = zp[static_cast<size_t>(k)];
              int64_t base = (o * len + k) * inner;
              for (int64_t i = 0; i < inner; ++i)
                y[base + i] = static_cast<T>(static_cast<float>(static_cast<int32_t>(x[base + i]) - z) * s);
            }
        }
      });
    }
  });
}

void dynamic_quantize_linear(KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  if (X.dtype() != DType::Float) ctx.fail("x must be float");
  const float* x = X.data<float>();
  float mn = 0, mx = 0;  // the range always includes 0
  for (int64_t i = 0; i < X.numel(); ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
  float scale = (mx - mn) / 255.0f;
  // Infinite inputs make the scale infinite and these quotients NaN: saturate_cast keeps them defined.
  uint8_t zp = scale == 0 ? 0 : saturate_cast<uint8_t>(std::nearbyint((0 - mn) / scale));
  float zpf = zp;
  Tensor& Y = ctx.allocate_output(0, DType::UInt8, X.dims());
  uint8_t* y = Y.data<uint8_t>();
  for (int64_t i = 0; i < X.numel(); ++i) {
    float q = scale == 0 ? zpf : std::nearbyint(x[i] / scale) + zpf;
    y[i] = saturate_cast<uint8_t>(q, zp);
  }
  ctx.allocate_output(1, DType::Float, {}).data<float>()[0] = scale;
  ctx.allocate_output(2, DType::UInt8, {}).data<uint8_t>()[0] = zp;
}

// DequantizeLinear(QuantizeLinear(x)) in one pass, threaded, with the arithmetic of the two
// reference kernels above so the values are the same bit for bit.
void quantize_dequantize(KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor& S = ctx.input(1);
  const Tensor& Z = ctx.input(2);
  if (X.dtype() != DType::Float || S.numel() != 1 || Z.numel() != 1 || !dtype_is_float(S.dtype()) ||
      (Z.dtype() != DType::UInt8 && Z.dtype() != DType::Int8))
    ctx.fail("needs float x, one float scale and one int8/uint8 zero point");
  float s = static_cast<float>(S.as_double(0));
  int32_t z = static_cast<int32_t>(Z.as_int(0));
  float zf = static_cast<float>(z);
  float lo = Z.dtype() == DType::UInt8 ? 0.0f : -128.0f, hi = Z.dtype() == DType::UInt8 ? 255.0f : 127.0f;
  Tensor& Y = ctx.allocate_output(0, DType::Float, X.dims());
  const float* x = X.data<float>();
  float* y = Y.data<float>();
  // Adding and taking off 1.5 * 2^23 rounds a float of magnitude below 2^22 half to even (the
  // default rounding mode), as nearbyint does, in a form the compiler vectorizes; larger
  // quotients saturate either way, so they are clamped first. NaN passes the clamps and goes to
  // the zero point, i.e. to 0. q - zf is an exact small integer, so y equals (int(q) - z) * s.
  constexpr float kRound = 12582912.0f, kBig = 4194304.0f;
  parallel_for(X.numel(), ctx.threads(), 32768, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float v = x[i] / s;
      v = v < -kBig ? -kBig : (v > kBig ? kBig : v);
      float q = ((v + kRound) - kRound) + zf;
      q = q != q ? zf : q;
      q = q < lo ? lo : (q > hi ? hi : q);
      y[i] = (q - zf) * s;
    }
  });
}

}  // namespace
}  // namespace kern

void register_quant_kernels(KernelRegistry& r) {
  r.add("", "QuantizeLinear", 10, stateless(kern::quantize_linear));
  r.add("", "DequantizeLinear", 10, stateless(kern::dequantize_linear));
  r.add("", "DynamicQuantizeLinear", 11, stateless(kern::dynamic_quantize_linear));
  r.add(kInternalDomain, "QuantDequant", 1, stateless(kern::quantize_dequantize));
}

}  // namespace t2o
