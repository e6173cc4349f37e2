// Unary math ops (trigonometric, exponential, rounding, sign) and the IsInf/IsNaN/Not predicates.
// Select-style loops (x < 0 ? a * x : x) vectorize only when GCC may evaluate both arms, which
// -ftrapping-math forbids; we never read FP exception flags, so values are unchanged.
#pragma GCC optimize("no-trapping-math")
#include <cmath>
#include <type_traits>

#include "runtime/kernels/elementwise_util.h"

namespace t2o {

namespace {

using namespace kern;


// Float input, bool output (IsInf, IsNaN).
template <typename Op>
KernelFactory predicate_factory(Op op) {
  return [op](const KernelInfo& info) {
    bool fast = info.fast_paths;
    return std::make_unique<FnKernel>([op, fast](KernelContext& ctx) {
      const Tensor& x = ctx.input(0);
      Tensor& out = ctx.allocate_output(0, DType::Bool, x.dims());
      dispatch_dtype(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (is_float_like<T>) unary_apply<T, bool>(x, out, op, fast, ctx.threads());
        else ctx.fail("does not support element type " + std::string(dtype_name(x.dtype())));
      });
    });
  };
}

// -x in unsigned arithmetic: the most negative integer wraps to itself instead of overflowing.
template <typename C>
C wrap_neg(C x) {
  if constexpr (std::is_integral_v<C> && std::is_signed_v<C>)
    return static_cast<C>(0 - static_cast<std::make_unsigned_t<C>>(x));
  else
    return -x;
}

struct AbsOp {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) return std::fabs(x);
    else if constexpr (std::is_signed_v<C>) return x < 0 ? wrap_neg(x) : x;
    else return x;
  }
};

struct SignOp {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(x)) return x;
      return static_cast<C>((x > C(0)) - (x < C(0)));
    } else if constexpr (std::is_signed_v<C>) {
      return static_cast<C>((x > C(0)) - (x < C(0)));
    } else {
      return static_cast<C>(x > C(0));
    }
  }
};

struct ErfOp {
  template <typename C>
  auto operator()(C x) const { return std::erf(x); }
  float fast(float x) const { return fast_erf(x); }
};

struct TanhOp {
  template <typename C>
  C operator()(C x) const { return std::tanh(x); }
  float fast(float x) const { return fast_tanh(x); }
};

}  // namespace

void register_elementwise_unary_kernels(KernelRegistry& r) {
  using T = Types;
  r.add("", "Abs", 1, unary_factory<T::Numeric>(fixed(AbsOp{})));
  r.add("", "Neg", 1, unary_factory<T::Signed>(fixed([](auto x) { return wrap_neg(x); })));
  r.add("", "Sign", 9, unary_factory<T::Numeric>(fixed(SignOp{})));
  r.add("", "Reciprocal", 1, unary_factory<T::Float>(fixed([](auto x) { return decltype(x)(1) / x; })));
  r.add("", "Sqrt", 1, unary_factory<T::Float>(fixed([](auto x) { return std::sqrt(x); })));
  r.add("", "Exp", 1, unary_factory<T::Float>(fixed([](auto x) { return std::exp(x); })));
  r.add("", "Log", 1, unary_factory<T::Float>(fixed([](auto x) { return std::log(x); })));
  r.add("", "Ceil", 1, unary_factory<T::Float>(fixed([](auto x) { return std::ceil(x); })));
  r.add("", "Floor", 1, unary_factory<T::Float>(fixed([](auto x) { return std::floor(x); })));
  // nearbyint rounds half to even in the default rounding mode, as ONNX requires.
  r.add("", "Round", 11, unary_factory<T::Float>(fixed([](auto x) { return std::nearbyint(x); })));
  r.add("", "Erf", 9, unary_factory<T::Numeric>(fixed(ErfOp{})));
  r.add("", "Sin", 7, unary_factory<T::Float>(fixed([](auto x) { return std::sin(x); })));
  r.add("", "Cos", 7, unary_factory<T::Float>(fixed([](auto x) { return std::cos(x); })));
  r.add("", "Tan", 7, unary_factory<T::Float>(fixed([](auto x) { return std::tan(x); })));
  r.add("", "Asin", 7, unary_factory<T::Float>(fixed([](auto x) { return std::asin(x); })));
  r.add("", "Acos", 7, unary_factory<T::Float>(fixed([](auto x) { return std::acos(x); })));
  r.add("", "Atan", 7, unary_factory<T::Float>(fixed([](auto x) { return std::atan(x); })));
  r.add("", "Sinh", 9, unary_factory<T::Float>(fixed([](auto x) { return std::sinh(x); })));
  r.add("", "Cosh", 9, unary_factory<T::Float>(fixed([](auto x) { return std::cosh(x); })));
  r.add("", "Tanh", 1, unary_factory<T::Float>(fixed(TanhOp{})));
  r.add("", "Asinh", 9, unary_factory<T::Float>(fixed([](auto x) { return std::asinh(x); })));
  r.add("", "Acosh", 9, unary_factory<T::Float>(fixed([](auto x) { return std::acosh(x); })));
  r.add("", "Atanh", 9, unary_factory<T::Float>(fixed([](auto x) { return std::atanh(x); })));
  r.add("", "Not", 1, unary_factory<T::Bool>(fixed([](bool x) { return !x; })));
  r.add("", "IsNaN", 9, predicate_factory([](auto x) { return std::isnan(x); }));
  r.add("", "IsInf", 10, [](const KernelInfo& info) {
    bool neg = info.node.attr_int("detect_negative", 1) != 0;
    bool pos = info.node.attr_int("detect_positive", 1) != 0;
    return predicate_factory([neg, pos](auto x) { return std::isinf(x) && (x > 0 ? pos : neg); })(info);
  });
}

}  // namespace t2o
