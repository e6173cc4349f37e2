// Binary, variadic and selection elementwise ops: arithmetic, comparison, logic, bit shifts,
// Mod, Pow, Max/Min/Sum/Mean and Where, all with numpy broadcasting.
// Select-style loops (x < 0 ? a * x : x) vectorize only when GCC may evaluate both arms, which
// -ftrapping-math forbids; we never read FP exception flags, so values are unchanged.
#pragma GCC optimize("no-trapping-math")
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime/kernels/elementwise_util.h"

namespace t2o {

void register_elementwise_unary_kernels(KernelRegistry& r);
void register_elementwise_cast_kernels(KernelRegistry& r);

namespace {

using namespace kern;

template <typename T>
constexpr bool is_signed_int = std::is_integral_v<T> && std::is_signed_v<T>;

std::string type_msg(DType t) { return "does not support element type " + std::string(dtype_name(t)); }

bool has_zero(const Tensor& t) {
  return dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i)
      if (ld(p[i]) == calc_t<T>(0)) return true;
    return false;
  });
}

void check_same_types(const KernelContext& ctx, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    ctx.fail("input element types differ: " + std::string(dtype_name(a.dtype())) + " and " +
             std::string(dtype_name(b.dtype())));
}

// Before opset 7, broadcast=1 with an axis aligns B's dims at that axis of A rather than at
// the end; trailing ones make numpy broadcasting do the same. kNoAxis: numpy rules.
constexpr int64_t kNoAxis = INT64_MIN;

int64_t legacy_axis(const KernelInfo& info) {
  const Node& n = info.node;
  if (info.opset >= 7 || n.attr_int("broadcast", 0) == 0 || !n.has_attr("axis")) return kNoAxis;
  return n.attr_int("axis");
}

Tensor align_rhs(const KernelContext& ctx, const Tensor& a, const Tensor& b, int64_t axis) {
  if (axis == kNoAxis) return b;
  int64_t ax = norm_axis(ctx, axis, a.rank());
  if (ax + b.rank() > a.rank())
    ctx.fail("B of shape " + dims_to_string(b.dims()) + " does not fit A of shape " + dims_to_string(a.dims()) +
             " at axis " + std::to_string(axis));
  Dims d = b.dims();
  d.resize(static_cast<size_t>(a.rank() - ax), 1);
  return b.reshaped(d);
}

// out = op(a, b); the output is bool for comparisons and the input type otherwise. Integer
// division by zero is rejected up front because it would trap.
template <Types ts, bool to_bool, typename Op>
void run_binary(KernelContext& ctx, const Op& op, bool fast, bool int_divisor, int64_t axis) {
  const Tensor& a = ctx.input(0);
  const Tensor b = align_rhs(ctx, a, ctx.input(1), axis);
  check_same_types(ctx, a, b);
  if (int_divisor && dtype_is_integer(b.dtype()) && has_zero(b)) ctx.fail("integer division by zero");
  Dims od = broadcast_dims(ctx, a.dims(), b.dims());
  Tensor& out = ctx.allocate_output_uninit(0, to_bool ? DType::Bool : a.dtype(), od);
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using R = std::conditional_t<to_bool, bool, T>;
    if constexpr (accepts<T>(ts)) binary_apply<T, T, R>(a, b, out, op, fast, ctx.threads());
    else ctx.fail(type_msg(a.dtype()));
  });
}

// Equal also compares strings (opset 19).
void run_equal_strings(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  check_same_types(ctx, a, b);
  Dims od = broadcast_dims(ctx, a.dims(), b.dims());
  Tensor& out = ctx.allocate_output(0, DType::Bool, od);
  const std::string* pa = a.strings();
  const std::string* pb = b.strings();
  bool* po = out.data<bool>();
  std::vector<Dims> s = {broadcast_strides(a.dims(), od), broadcast_strides(b.dims(), od)};
  for_each_broadcast(od, s, [&](int64_t i, const int64_t* off) { po[i] = pa[off[0]] == pb[off[1]]; });
}

template <Types ts, bool to_bool, typename MakeOp>
KernelFactory binary_factory(MakeOp make, bool int_divisor = false) {
  return [make, int_divisor](const KernelInfo& info) {
    auto op = make(info.node);
    bool fast = info.fast_paths;
    int64_t axis = legacy_axis(info);
    return std::make_unique<FnKernel>([op, fast, int_divisor, axis](KernelContext& ctx) {
      run_binary<ts, to_bool>(ctx, op, fast, int_divisor, axis);
    });
  };
}

// Integer +, -, * wrap like numpy: done in unsigned arithmetic of at least 32 bits, because
// signed overflow (and uint16 * uint16 promoted to int) would be undefined.
template <typename F>
struct Wrapping {
  F f;
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
      using U = std::conditional_t<(sizeof(C) < 4), uint32_t, std::make_unsigned_t<C>>;
      return static_cast<C>(f(static_cast<U>(a), static_cast<U>(b)));
    } else {
      return static_cast<C>(f(a, b));
    }
  }
};
// Spelled out: clang 14 lacks C++20's implicit deduction for aggregates (P1816).
template <typename F>
Wrapping(F) -> Wrapping<F>;

struct DivOp {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (is_signed_int<C>) {
      // INT_MIN / -1 traps; negate in unsigned arithmetic instead (wraps as two's complement).
      if (b == C(-1)) return static_cast<C>(0 - static_cast<std::make_unsigned_t<C>>(a));
    }
    return static_cast<C>(a / b);
  }
};

struct ModOp {
  bool fmod = false;
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      C r = std::fmod(a, b);
      // Without fmod the result takes the divisor's sign, as Python's %.
      if (!fmod && r != C(0) && ((r < C(0)) != (b < C(0)))) r += b;
      return r;
    } else if constexpr (is_signed_int<C>) {
      if (b == C(-1)) return C(0);
      C r = static_cast<C>(a % b);
      if (!fmod && r != C(0) && ((r < C(0)) != (b < C(0)))) r = static_cast<C>(r + b);
      return r;
    } else {
      return static_cast<C>(a % b);
    }
  }
};

template <typename B, typename E>
B int_pow(B base, E e) {
  if constexpr (std::is_signed_v<E>) {
    if (e < 0) {
      if (base == B(1)) return B(1);
      if constexpr (std::is_signed_v<B>)
        if (base == B(-1)) return (e % 2) ? B(-1) : B(1);
      return B(0);
    }
  }
  // Square-and-multiply in unsigned arithmetic so overflow wraps instead of being undefined.
  using U = std::make_unsigned_t<std::conditional_t<(sizeof(B) < 4), int32_t, B>>;
  U result = 1, b = static_cast<U>(base);
  auto n = static_cast<std::make_unsigned_t<E>>(e);
  while (n) {
    if (n & 1) result *= b;
    b *= b;
    n >>= 1;
  }
  return static_cast<B>(result);
}

struct PowOp {
  template <typename X, typename Y>
  auto operator()(X a, Y b) const {
    if constexpr (std::is_integral_v<X> && std::is_integral_v<Y>) return int_pow(a, b);
    else if constexpr (std::is_same_v<X, Y>) return std::pow(a, b);
    else return std::pow(static_cast<double>(a), static_cast<double>(b));
  }
};

// Pow keeps the base's type; an exponent of another type is read as double so the
// instantiations stay few.
void run_pow(KernelContext& ctx, bool fast, int64_t axis) {
  const Tensor& a = ctx.input(0);
  const Tensor b = align_rhs(ctx, a, ctx.input(1), axis);
  Dims od = broadcast_dims(ctx, a.dims(), b.dims());
  if (b.dtype() == DType::String || b.dtype() == DType::Bool) ctx.fail("exponent " + type_msg(b.dtype()));
  Tensor& out = ctx.allocate_output(0, a.dtype(), od);
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (accepts<T>(Types::Numeric)) {
      if (a.dtype() == b.dtype()) {
        binary_apply<T, T, T>(a, b, out, PowOp{}, fast, ctx.threads());
        return;
      }
      Tensor e(DType::Double, b.dims());
      double* pe = e.data<double>();
      for (int64_t i = 0; i < b.numel(); ++i) pe[i] = b.as_double(i);
      binary_apply<T, double, T>(a, e, out, PowOp{}, fast, ctx.threads());
    } else {
      ctx.fail(type_msg(a.dtype()));
    }
  });
}

struct BitShiftOp {
  bool left = true;
  template <typename C>
  C operator()(C a, C b) const {
    if (b >= C(sizeof(C) * 8)) return C(0);
    return left ? static_cast<C>(a << b) : static_cast<C>(a >> b);
  }
};

struct MaxOp {
  template <typename C>
  C operator()(C a, C b) const { return a < b ? b : a; }
};
struct MinOp {
  template <typename C>
  C operator()(C a, C b) const { return b < a ? b : a; }
};
auto plus = [](auto a, auto b) { return a + b; };
using AddOp = Wrapping<decltype(plus)>;

// Max/Min/Sum/Mean over any number of broadcast inputs, folded pairwise.
template <typename Op>
void run_variadic(KernelContext& ctx, const Op& op, bool fast, bool mean) {
  std::vector<const Tensor*> ins;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) ins.push_back(&ctx.input(i));
  if (ins.empty()) ctx.fail("needs at least one input");
  Dims od = ins[0]->dims();
  for (size_t i = 1; i < ins.size(); ++i) {
    check_same_types(ctx, *ins[0], *ins[i]);
    od = broadcast_dims(ctx, od, ins[i]->dims());
  }
  DType dt = ins[0]->dtype();
  if (mean && !dtype_is_float(dt)) ctx.fail(type_msg(dt));
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (accepts<T>(Types::Numeric)) {
      if (ins.size() == 1) {
        Tensor& out = ctx.allocate_output(0, dt, od);
        std::memcpy(out.raw(), ins[0]->raw(), out.nbytes());
        return;
      }
      Tensor acc = *ins[0];
      for (size_t i = 1; i < ins.size(); ++i) {
        Dims d = broadcast_dims(ctx, acc.dims(), ins[i]->dims());
        Tensor next = (i + 1 == ins.size() && !mean) ? ctx.allocate_output(0, dt, d) : Tensor(dt, d);
        binary_apply<T, T, T>(acc, *ins[i], next, op, fast, ctx.threads());
        acc = next;
      }
      if (mean) {
        Tensor& out = ctx.allocate_output(0, dt, od);
        auto k = static_cast<calc_t<T>>(ins.size());
        unary_apply<T, T>(acc, out, [k](auto x) { return x / k; }, fast, ctx.threads());
      }
    } else {
      ctx.fail(type_msg(dt));
    }
  });
}

template <typename Op>
KernelFactory variadic_factory(Op op, bool mean = false) {
  return [op, mean](const KernelInfo& info) {
    bool fast = info.fast_paths;
    return std::make_unique<FnKernel>([op, fast, mean](KernelContext& ctx) { run_variadic(ctx, op, fast, mean); });
  };
}

void run_where(KernelContext& ctx, bool fast) {
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  if (c.dtype() != DType::Bool) ctx.fail("condition must be bool, got " + std::string(dtype_name(c.dtype())));
  check_same_types(ctx, x, y);
  Dims od = broadcast_dims(ctx, broadcast_dims(ctx, c.dims(), x.dims()), y.dims());
  Tensor& out = ctx.allocate_output(0, x.dtype(), od);
  std::vector<Dims> s = {broadcast_strides(c.dims(), od), broadcast_strides(x.dims(), od),
                         broadcast_strides(y.dims(), od)};
  const bool* pc = c.data<bool>();
  if (x.dtype() == DType::String) {
    const std::string* px = x.strings();
    const std::string* py = y.strings();
    std::string* po = out.strings();
    for_each_broadcast(od, s, [&](int64_t i, const int64_t* off) { po[i] = pc[off[0]] ? px[off[1]] : py[off[2]]; });
    return;
  }
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
    if (!fast) {
      for_each_broadcast(od, s, [&](int64_t i, const int64_t* off) { po[i] = pc[off[0]] ? px[off[1]] : py[off[2]]; });
      return;
    }
    BcastPlan<3> p = make_plan<3>(od, {&c.dims(), &x.dims(), &y.dims()});
    plan_run(p, ctx.threads(), [&](int64_t o, const std::array<int64_t, 3>& off, int64_t n) {
      const bool* __restrict cc = pc + off[0];
      const T* __restrict xx = px + off[1];
      const T* __restrict yy = py + off[2];
      T* __restrict oo = po + o;
      const int64_t sc = p.istr[0], sx = p.istr[1], sy = p.istr[2];
      for (int64_t i = 0; i < n; ++i) oo[i] = cc[i * sc] ? xx[i * sx] : yy[i * sy];
    });
  });
}

template <typename Fn>
KernelFactory fast_factory(Fn fn) {
  return [fn](const KernelInfo& info) {
    bool fast = info.fast_paths;
    return std::make_unique<FnKernel>([fn, fast](KernelContext& ctx) { fn(ctx, fast); });
  };
}

}  // namespace

void register_elementwise_kernels(KernelRegistry& r) {
  using T = Types;
  auto sub = Wrapping{[](auto a, auto b) { return a - b; }};
  auto mul = Wrapping{[](auto a, auto b) { return a * b; }};
  r.add("", "Add", 1, binary_factory<T::Numeric, false>(fixed(AddOp{plus})));
  r.add("", "Sub", 1, binary_factory<T::Numeric, false>(fixed(sub)));
  r.add("", "Mul", 1, binary_factory<T::Numeric, false>(fixed(mul)));
  r.add("", "Div", 1, binary_factory<T::Numeric, false>(fixed(DivOp{}), true));
  r.add("", "Mod", 10, binary_factory<T::Numeric, false>([](const Node& n) { return ModOp{n.attr_int("fmod", 0) != 0}; }, true));
  r.add("", "Pow", 1, [](const KernelInfo& info) {
    bool fast = info.fast_paths;
    int64_t axis = legacy_axis(info);
    return std::make_unique<FnKernel>([fast, axis](KernelContext& ctx) { run_pow(ctx, fast, axis); });
  });
  r.add("", "BitShift", 11, binary_factory<T::Unsigned, false>([](const Node& n) {
          return BitShiftOp{n.attr_string("direction", "LEFT") == "LEFT"};
        }));
  r.add("", "Equal", 1, [](const KernelInfo& info) {
    auto numeric = binary_factory<T::All, true>(fixed([](auto a, auto b) { return a == b; }))(info);
    return std::make_unique<FnKernel>([k = std::shared_ptr<OpKernel>(std::move(numeric))](KernelContext& ctx) {
      if (ctx.input(0).dtype() == DType::String) run_equal_strings(ctx);
      else k->run(ctx);
    });
  });
  r.add("", "Greater", 1, binary_factory<T::Numeric, true>(fixed([](auto a, auto b) { return a > b; })));
  r.add("", "Less", 1, binary_factory<T::Numeric, true>(fixed([](auto a, auto b) { return a < b; })));
  r.add("", "GreaterOrEqual", 12, binary_factory<T::Numeric, true>(fixed([](auto a, auto b) { return a >= b; })));
  r.add("", "LessOrEqual", 12, binary_factory<T::Numeric, true>(fixed([](auto a, auto b) { return a <= b; })));
  r.add("", "And", 1, binary_factory<T::Bool, false>(fixed([](bool a, bool b) { return a && b; })));
  r.add("", "Or", 1, binary_factory<T::Bool, false>(fixed([](bool a, bool b) { return a || b; })));
  r.add("", "Xor", 1, binary_factory<T::Bool, false>(fixed([](bool a, bool b) { return a != b; })));
  r.add("", "Max", 1, variadic_factory(MaxOp{}));
  r.add("", "Min", 1, variadic_factory(MinOp{}));
  r.add("", "Sum", 1, variadic_factory(AddOp{plus}));
  r.add("", "Mean", 1, variadic_factory(AddOp{plus}, true));
  r.add("", "Where", 9, fast_factory(run_where));
  register_elementwise_unary_kernels(r);
  register_elementwise_cast_kernels(r);
}

}  // namespace t2o
