// Activations: Relu family, sigmoids, soft functions, Clip, PRelu, Gelu and Mish.
// Select-style loops (x < 0 ? a * x : x) vectorize only when GCC may evaluate both arms, which
// -ftrapping-math forbids; we never read FP exception flags, so values are unchanged.
#pragma GCC optimize("no-trapping-math")
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/kernels/elementwise_util.h"

namespace t2o {

namespace {

using namespace kern;


struct ReluOp {
  template <typename C>
  C operator()(C x) const { return x < C(0) ? C(0) : x; }
};

struct LeakyReluOp {
  float alpha;
  template <typename C>
  C operator()(C x) const { return x < C(0) ? static_cast<C>(alpha) * x : x; }
};

struct EluOp {
  float alpha;
  template <typename C>
  C operator()(C x) const { return x < C(0) ? static_cast<C>(alpha) * std::expm1(x) : x; }
  float fast(float x) const { return x < 0.0f ? alpha * (fast_exp(x) - 1.0f) : x; }
};

struct CeluOp {
  float alpha;
  template <typename C>
  C operator()(C x) const {
    C a = static_cast<C>(alpha);
    return x > C(0) ? x : a * std::expm1(x / a);
  }
  float fast(float x) const { return x > 0.0f ? x : alpha * (fast_exp(x / alpha) - 1.0f); }
};

struct SeluOp {
  float alpha, gamma;
  template <typename C>
  C operator()(C x) const {
    return x > C(0) ? static_cast<C>(gamma) * x : static_cast<C>(gamma) * (static_cast<C>(alpha) * std::expm1(x));
  }
  float fast(float x) const { return x > 0.0f ? gamma * x : gamma * (alpha * (fast_exp(x) - 1.0f)); }
};

struct SigmoidOp {
  template <typename C>
  C operator()(C x) const {
    // Both branches stay finite: exp never sees a large positive argument.
    if (x >= C(0)) return C(1) / (C(1) + std::exp(-x));
    C e = std::exp(x);
    return e / (C(1) + e);
  }
  float fast(float x) const { return fast_sigmoid(x); }
};

struct HardSigmoidOp {
  float alpha, beta;
  template <typename C>
  C operator()(C x) const {
    C v = static_cast<C>(alpha) * x + static_cast<C>(beta);
    return v < C(0) ? C(0) : (v > C(1) ? C(1) : v);
  }
};

struct HardSwishOp {
  template <typename C>
  C operator()(C x) const {
    C v = x / C(6) + C(0.5);
    return x * (v < C(0) ? C(0) : (v > C(1) ? C(1) : v));
  }
};

struct SoftplusOp {
  template <typename C>
  C operator()(C x) const { return x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
};

struct SoftsignOp {
  template <typename C>
  C operator()(C x) const { return x / (C(1) + std::fabs(x)); }
};

struct ThresholdedReluOp {
  float alpha;
  template <typename C>
  C operator()(C x) const { return x > static_cast<C>(alpha) ? x : C(0); }
};

struct ShrinkOp {
  float bias, lambd;
  template <typename C>
  C operator()(C x) const {
    double v = static_cast<double>(x);
    // Integer inputs with a bias past their range saturate (a plain cast is undefined there).
    if (v < -lambd) return st<C>(v + bias);
    if (v > lambd) return st<C>(v - bias);
    return C(0);
  }
};

struct GeluOp {
  bool tanh_approx;
  template <typename C>
  C operator()(C x) const {
    if (tanh_approx) {
      const C k = static_cast<C>(0.7978845608028654);  // sqrt(2 / pi)
      return C(0.5) * x * (C(1) + std::tanh(k * (x + static_cast<C>(0.044715) * x * x * x)));
    }
    return C(0.5) * x * (C(1) + std::erf(x * static_cast<C>(0.7071067811865476)));
  }
  float fast(float x) const {
    if (!tanh_approx) return 0.5f * x * (1.0f + fast_erf(x * 0.7071067811865476f));
    return 0.5f * x * (1.0f + fast_tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  }
};

struct MishOp {
  template <typename C>
  C operator()(C x) const { return x * std::tanh(SoftplusOp{}(x)); }
  // tanh(log(1 + u)) = u(u + 2) / (u(u + 2) + 2) with u = e^x; beyond 20 it is 1 in float.
  // Below -100 e^x is 0 in float (fast_exp stops at its smallest normal): x * 0, so -0 for large
  // negative x and NaN for -inf, as the formula gives.
  float fast(float x) const {
    float u = fast_exp(x);
    float n = u * (u + 2.0f);
    float m = x * n / (n + 2.0f);
    return x > 20.0f ? x : x < -100.0f ? x * 0.0f : m;
  }
};

struct ClipOp {
  double lo, hi;
  template <typename C>
  C operator()(C x) const {
    C l = static_cast<C>(lo), h = static_cast<C>(hi);
    C v = x < l ? l : x;
    return v > h ? h : v;
  }
};

// Clip before opset 11 takes its bounds from attributes.
KernelFactory clip_attr_factory() {
  return unary_factory<Types::Float>([](const Node& n) {
    return ClipOp{n.attr_float("min", std::numeric_limits<float>::lowest()),
                  n.attr_float("max", std::numeric_limits<float>::max())};
  });
}

// From opset 11 the bounds are optional scalar inputs of the input's type.
void run_clip(KernelContext& ctx, bool fast) {
  const Tensor& x = ctx.input(0);
  auto bound = [&](int i, auto dflt) {
    using C = decltype(dflt);
    if (!ctx.has_input(i)) return dflt;
    const Tensor& b = ctx.input(i);
    if (b.dtype() != x.dtype()) ctx.fail("bound type " + std::string(dtype_name(b.dtype())) + " differs from input");
    if (b.numel() != 1) ctx.fail("bounds must be scalars, got shape " + dims_to_string(b.dims()));
    return st<C>(ld(b.as_double(0)));  // saturating: an int64 bound near 2^63 rounds past the range as a double
  };
  Tensor& out = ctx.allocate_output(0, x.dtype(), x.dims());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (accepts<T>(Types::Numeric)) {
      using C = calc_t<T>;
      C lo = bound(1, std::numeric_limits<C>::lowest());
      C hi = bound(2, std::numeric_limits<C>::max());
      if constexpr (std::is_integral_v<C>) {
        // Bounds of 64-bit integers are read exactly, not through double.
        if (ctx.has_input(1)) lo = static_cast<C>(ctx.input(1).data<T>()[0]);
        if (ctx.has_input(2)) hi = static_cast<C>(ctx.input(2).data<T>()[0]);
      }
      auto op = [lo, hi](C v) {
        v = v < lo ? lo : v;
        return v > hi ? hi : v;
      };
      unary_apply<T, T>(x, out, op, fast, ctx.threads());
    } else {
      ctx.fail("does not support element type " + std::string(dtype_name(x.dtype())));
    }
  });
}

// PRelu: slope broadcasts onto X (unidirectionally). Before opset 7 a 1-D slope holds one
// value per channel (dim 1), so it is viewed as [C, 1, ..., 1].
void run_prelu(KernelContext& ctx, bool fast) {
  const Tensor& x = ctx.input(0);
  Tensor s = ctx.input(1);
  if (ctx.opset() < 7 && s.rank() == 1 && x.rank() > 2 && s.numel() == x.dim(1)) {
    Dims d(static_cast<size_t>(x.rank() - 1), 1);
    d[0] = s.numel();
    s = s.reshaped(d);
  }
  if (x.dtype() != s.dtype()) ctx.fail("slope type " + std::string(dtype_name(s.dtype())) + " differs from input");
  Dims od = broadcast_dims(ctx, x.dims(), s.dims());
  if (od != x.dims())
    ctx.fail("slope shape " + dims_to_string(s.dims()) + " does not broadcast to input shape " + dims_to_string(x.dims()));
  Tensor& out = ctx.allocate_output(0, x.dtype(), od);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (accepts<T>(Types::Signed)) {
      auto op = [](auto v, auto k) { return v < decltype(v)(0) ? v * k : v; };
      binary_apply<T, T, T>(x, s, out, op, fast, ctx.threads());
    } else {
      ctx.fail("does not support element type " + std::string(dtype_name(x.dtype())));
    }
  });
}

template <typename Fn>
KernelFactory fast_factory(Fn fn) {
  return [fn](const KernelInfo& info) {
    bool fast = info.fast_paths;
    return std::make_unique<FnKernel>([fn, fast](KernelContext& ctx) { fn(ctx, fast); });
  };
}

KernelFactory gelu_factory() {
  return unary_factory<Types::Float>([](const Node& n) { return GeluOp{n.attr_string("approximate", "none") == "tanh"}; });
}

}  // namespace

void register_activation_kernels(KernelRegistry& r) {
  using T = Types;
  r.add("", "Relu", 1, unary_factory<T::Signed>(fixed(ReluOp{})));
  r.add("", "LeakyRelu", 1, unary_factory<T::Float>([](const Node& n) { return LeakyReluOp{n.attr_float("alpha", 0.01f)}; }));
  r.add("", "Elu", 1, unary_factory<T::Float>([](const Node& n) { return EluOp{n.attr_float("alpha", 1.0f)}; }));
  r.add("", "Celu", 12, unary_factory<T::Float>([](const Node& n) { return CeluOp{n.attr_float("alpha", 1.0f)}; }));
  r.add("", "Selu", 1, unary_factory<T::Float>([](const Node& n) {
          return SeluOp{n.attr_float("alpha", 1.67326319217681884765625f), n.attr_float("gamma", 1.05070102214813232421875f)};
        }));
  r.add("", "Sigmoid", 1, unary_factory<T::Float>(fixed(SigmoidOp{})));
  r.add("", "HardSigmoid", 1, unary_factory<T::Float>([](const Node& n) {
          return HardSigmoidOp{n.attr_float("alpha", 0.2f), n.attr_float("beta", 0.5f)};
        }));
  r.add("", "HardSwish", 14, unary_factory<T::Float>(fixed(HardSwishOp{})));
  r.add("", "Softplus", 1, unary_factory<T::Float>(fixed(SoftplusOp{})));
  r.add("", "Softsign", 1, unary_factory<T::Float>(fixed(SoftsignOp{})));
  r.add("", "ThresholdedRelu", 10, unary_factory<T::Float>([](const Node& n) { return ThresholdedReluOp{n.attr_float("alpha", 1.0f)}; }));
  r.add("", "Shrink", 9, unary_factory<T::Numeric>([](const Node& n) {
          return ShrinkOp{n.attr_float("bias", 0.0f), n.attr_float("lambd", 0.5f)};
        }));
  r.add("", "Clip", 1, clip_attr_factory());
  r.add("", "Clip", 11, fast_factory(run_clip));
  r.add("", "PRelu", 1, fast_factory(run_prelu));
  r.add("", "Gelu", 20, gelu_factory());
  r.add("com.microsoft", "Gelu", 1, gelu_factory());
  r.add("", "Mish", 18, unary_factory<T::Float>(fixed(MishOp{})));
}

}  // namespace t2o
