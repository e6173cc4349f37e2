// Tensor-creation ops: EyeLike and Range.
#include <cmath>

#include "runtime/kernels/shape_util.h"

namespace t2o {
namespace kern {
namespace {

void eye_like(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) ctx.fail("input must be 2-D, got " + dims_to_string(x.dims()));
  DType dt = x.dtype();
  if (ctx.node().has_attr("dtype")) {
    int64_t v = ctx.node().attr_int("dtype");
    if (!dtype_is_valid(static_cast<int32_t>(v))) ctx.fail("invalid dtype " + std::to_string(v));
    dt = static_cast<DType>(v);
  }
  int64_t k = ctx.node().attr_int("k", 0), rows = x.dim(0), cols = x.dim(1);
  Tensor& y = ctx.allocate_output(0, dt, x.dims());
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    T* d = y.data<T>();
    for (int64_t i = 0; i < rows * cols; ++i) d[i] = T{};
    T one;
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) one = T(1.0f);
    else one = static_cast<T>(1);
    for (int64_t i = 0; i < rows; ++i)
      if (i + k >= 0 && i + k < cols) d[i * cols + i + k] = one;
  });
}

void range(KernelContext& ctx) {
  const Tensor& st = ctx.input(0);
  const Tensor& lt = ctx.input(1);
  const Tensor& dl = ctx.input(2);
  if (st.numel() != 1 || lt.numel() != 1 || dl.numel() != 1) ctx.fail("start, limit and delta must be scalars");
  if (lt.dtype() != st.dtype() || dl.dtype() != st.dtype()) ctx.fail("start, limit and delta must share one element type");
  dispatch_dtype(st.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      ctx.fail("unsupported element type " + std::string(dtype_name(st.dtype())));
    } else {
      T s = st.data<T>()[0], l = lt.data<T>()[0], d = dl.data<T>()[0];
      if (d == T{}) ctx.fail("delta must not be 0");
      double n = std::ceil((static_cast<double>(l) - static_cast<double>(s)) / static_cast<double>(d));
      // NaN bounds give an empty range; a count past what can be addressed fails at allocation.
      int64_t count = n > 0 ? saturate_cast<int64_t>(n) : 0;
      Tensor& y = ctx.allocate_output(0, st.dtype(), {count});
      T* p = y.data<T>();
      // Repeated addition, as the operator's definition states; integers wrap as unsigned would,
      // so the step after the last element (which may overflow) stays defined.
      T v = s;
      for (int64_t i = 0; i < count; ++i) {
        p[i] = v;
        if constexpr (std::is_integral_v<T>)
          v = static_cast<T>(static_cast<std::make_unsigned_t<T>>(v) + static_cast<std::make_unsigned_t<T>>(d));
        else
          v = static_cast<T>(v + d);
      }
    }
  });
}

}  // namespace
}  // namespace kern

void register_tensor_kernels(KernelRegistry& r) {
  using namespace kern;
  r.add("", "EyeLike", 9, stateless(eye_like));
  r.add("", "Range", 11, stateless(range));
}

}  // namespace t2o
