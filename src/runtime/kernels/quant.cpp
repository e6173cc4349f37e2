// QuantizeLinear, DequantizeLinear (per-tensor, and per-axis from opset 13), DynamicQuantizeLinear.
// Quantization rounds half to even and saturates to the range of the zero point's type.
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/kernels/util.h"

namespace t2o {
namespace kern {
namespace {

// For element i of x (dims), the index into a per-axis parameter of length dims[axis] (0 if scalar).
struct AxisIndex {
  int64_t inner = 1, len = 1;
  bool per_axis = false;
  int64_t at(int64_t i) const { return per_axis ? (i / inner) % len : 0; }
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
  double lo = yt == DType::UInt8 ? 0 : -128, hi = yt == DType::UInt8 ? 255 : 127;
  uint8_t* yp = static_cast<uint8_t*>(Y.raw());
  for (int64_t i = 0; i < X.numel(); ++i) {
    int64_t k = ai.at(i);
    float s = static_cast<float>(S.as_double(k));
    double zp = Z ? static_cast<double>(Z->as_int(k)) : 0.0;
    // Division in float as the spec computes it, then round half to even.
    double q = std::nearbyint(static_cast<double>(static_cast<float>(X.as_double(i)) / s)) + zp;
    q = std::min(std::max(q, lo), hi);
    yp[i] = yt == DType::UInt8 ? static_cast<uint8_t>(q) : static_cast<uint8_t>(static_cast<int8_t>(q));
  }
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
  dispatch_dtype(S.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      T* y = Y.data<T>();
      for (int64_t i = 0; i < X.numel(); ++i) {
        int64_t k = ai.at(i);
        int64_t zp = Z ? Z->as_int(k) : 0;
        float s = static_cast<float>(S.as_double(k));
        y[i] = static_cast<T>(static_cast<float>(X.as_int(i) - zp) * s);
      }
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
  float zpf = scale == 0 ? 0.0f : std::nearbyint(std::min(std::max((0 - mn) / scale, 0.0f), 255.0f));
  uint8_t zp = static_cast<uint8_t>(zpf);
  Tensor& Y = ctx.allocate_output(0, DType::UInt8, X.dims());
  uint8_t* y = Y.data<uint8_t>();
  for (int64_t i = 0; i < X.numel(); ++i) {
    float q = scale == 0 ? zpf : std::nearbyint(x[i] / scale) + zpf;
    y[i] = static_cast<uint8_t>(std::min(std::max(q, 0.0f), 255.0f));
  }
  ctx.allocate_output(1, DType::Float, {}).data<float>()[0] = scale;
  ctx.allocate_output(2, DType::UInt8, {}).data<uint8_t>()[0] = zp;
}

}  // namespace
}  // namespace kern

void register_quant_kernels(KernelRegistry& r) {
  r.add("", "QuantizeLinear", 10, stateless(kern::quantize_linear));
  r.add("", "DequantizeLinear", 10, stateless(kern::dequantize_linear));
  r.add("", "DynamicQuantizeLinear", 11, stateless(kern::dynamic_quantize_linear));
}

}  // namespace t2o
