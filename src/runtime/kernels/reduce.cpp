// Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare.
// The reference kernel walks the input once with an odometer and accumulates into the output
// (double for floating types, 64-bit for integers). The fast path handles float rows: when the
// reduced axes are the trailing ones, each output element reduces one contiguous row.
#include <cmath>
#include <limits>
#include <set>
#include <type_traits>

#include "runtime/kernels/util.h"

namespace t2o {
namespace kern {

enum class RedOp { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// Fast path: reduces float rows [rows x len] into out[rows].
bool reduce_rows_fast(RedOp op, const float* x, float* out, int64_t rows, int64_t len, int threads);
// Reduces x viewed as (outer, len, inner) over the middle axis; false when op is not covered.
bool reduce_block_fast(RedOp op, const float* x, float* out, int64_t outer, int64_t len, int64_t inner, int threads);

namespace {

template <typename T>
constexpr bool is_floatish = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename T>
using AccOf = std::conditional_t<is_floatish<T>, double, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

template <typename A>
bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) return std::isnan(v);
  else return false;
}

// Integer accumulation wraps around (two's complement) instead of overflowing, which is undefined.
template <typename A>
A wrap_add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename A>
A wrap_mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <typename T>
void reduce_ref(RedOp op, const Tensor& x, Tensor& y, const Dims& kept_dims) {
  using Acc = AccOf<T>;
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  int64_t n_out = y.numel();
  int64_t n_in = x.numel();
  int64_t per = n_out ? n_in / std::max<int64_t>(n_out, 1) : 0;
  if (n_out == 0) return;
  Dims rs = strides_of(kept_dims);
  for (size_t d = 0; d < rs.size(); ++d)
    if (kept_dims[d] == 1) rs[d] = 0;
  std::vector<Acc> acc(static_cast<size_t>(n_out));
  Acc init{};
  constexpr bool fl = is_floatish<T>;
  if (op == RedOp::Max) init = fl ? static_cast<Acc>(-std::numeric_limits<double>::infinity()) : std::numeric_limits<Acc>::lowest();
  if (op == RedOp::Min) init = fl ? static_cast<Acc>(std::numeric_limits<double>::infinity()) : std::numeric_limits<Acc>::max();
  if (op == RedOp::Prod) init = Acc(1);
  // Integers keep their own type's limits for Max/Min of an empty set.
  if constexpr (!fl) {
    if (op == RedOp::Max) init = static_cast<Acc>(std::numeric_limits<T>::lowest());
    if (op == RedOp::Min) init = static_cast<Acc>(std::numeric_limits<T>::max());
  }
  std::fill(acc.begin(), acc.end(), init);
  std::vector<double> mx;
  if (op == RedOp::LogSumExp) {
    mx.assign(static_cast<size_t>(n_out), -std::numeric_limits<double>::infinity());
    for_each_broadcast(x.dims(), {rs}, [&](int64_t i, const int64_t* o) {
      double v = static_cast<double>(xp[i]);
      if (v > mx[static_cast<size_t>(o[0])]) mx[static_cast<size_t>(o[0])] = v;
    });
    for (auto& m : mx)
      if (std::isinf(m)) m = 0;  // all -inf (or empty): keep exp() finite
  }
  for_each_broadcast(x.dims(), {rs}, [&](int64_t i, const int64_t* o) {
    Acc& a = acc[static_cast<size_t>(o[0])];
    Acc v = static_cast<Acc>(static_cast<std::conditional_t<fl, double, Acc>>(xp[i]));
    switch (op) {
      case RedOp::Sum: case RedOp::Mean: case RedOp::LogSum: a = wrap_add(a, v); break;
      case RedOp::Max: if (v > a || is_nan(v)) a = v; break;
      case RedOp::Min: if (v < a || is_nan(v)) a = v; break;
      case RedOp::Prod: a = wrap_mul(a, v); break;
      case RedOp::L1: a = wrap_add(a, v < Acc(0) ? wrap_mul(v, Acc(0) - Acc(1)) : v); break;
      case RedOp::L2: case RedOp::SumSquare: a = wrap_add(a, wrap_mul(v, v)); break;
      case RedOp::LogSumExp: a += static_cast<Acc>(std::exp(static_cast<double>(v) - mx[static_cast<size_t>(o[0])])); break;
    }
  });
  // sqrt/log of an integer sum can be NaN or out of T's range: saturate rather than cast.
  auto from_double = [](double v) -> T {
    if constexpr (std::is_integral_v<T>) return saturate_cast<T>(v);
    else return static_cast<T>(v);
  };
  for (int64_t i = 0; i < n_out; ++i) {
    Acc a = acc[static_cast<size_t>(i)];
    double d = static_cast<double>(a);
    switch (op) {
      case RedOp::Mean:
        if constexpr (fl) yp[i] = static_cast<T>(d / static_cast<double>(per));
        else yp[i] = per ? static_cast<T>(a / static_cast<Acc>(per)) : T(0);
        break;
      case RedOp::L2: yp[i] = from_double(std::sqrt(d)); break;
      case RedOp::LogSum: yp[i] = from_double(std::log(d)); break;
      case RedOp::LogSumExp: yp[i] = from_double(std::log(d) + mx[static_cast<size_t>(i)]); break;
      default:
        if constexpr (fl) yp[i] = static_cast<T>(d);
        else yp[i] = static_cast<T>(a);
    }
  }
}

class ReduceKernel : public OpKernel {
 public:
  ReduceKernel(const KernelInfo& info, RedOp op, bool axes_input)
      : op_(op), axes_input_(axes_input), fast_(info.fast_paths) {
    axes_ = info.node.attr_ints("axes");
    keepdims_ = info.node.attr_int("keepdims", 1) != 0;
    noop_ = info.node.attr_int("noop_with_empty_axes", 0) != 0;
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() == DType::Bool || x.dtype() == DType::String) ctx.fail("does not support " + std::string(dtype_name(x.dtype())) + " input");
    std::vector<int64_t> axes = axes_;
    if (axes_input_ && ctx.has_input(1)) {
      const Tensor& a = ctx.input(1);
      if (a.rank() > 1) ctx.fail("axes must be a 1-D tensor");
      axes = to_int_vector(a);
    }
    int64_t r = x.rank();
    if (axes.empty()) {
      if (noop_) {
        ctx.set_output(0, x);
        return;
      }
      for (int64_t i = 0; i < r; ++i) axes.push_back(i);
    }
    std::set<int64_t> red;
    for (int64_t a : axes)
      if (!red.insert(norm_axis(ctx, a, r)).second) ctx.fail("axis " + std::to_string(a) + " is repeated");
    Dims kept = x.dims(), out;
    for (int64_t d = 0; d < r; ++d) {
      if (red.count(d)) {
        kept[static_cast<size_t>(d)] = 1;
        if (keepdims_) out.push_back(1);
      } else {
        out.push_back(x.dims()[static_cast<size_t>(d)]);
      }
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), out);
    if (fast_ && x.dtype() == DType::Float && !red.empty()) {
      // One contiguous block of axes: view x as (outer, len, inner).
      int64_t first = *red.begin(), last = *red.rbegin();
      if (last - first + 1 == static_cast<int64_t>(red.size())) {
        int64_t outer = 1, len = 1, inner = 1;
        for (int64_t d = 0; d < r; ++d) {
          int64_t v = x.dims()[static_cast<size_t>(d)];
          (d < first ? outer : d <= last ? len : inner) *= v;
        }
        if (len > 0 && reduce_block_fast(op_, x.data<float>(), y.data<float>(), outer, len, inner, ctx.threads())) return;
      }
    }
    dispatch_dtype(x.dtype(), [&](auto t) {
      using T = decltype(t);
      if constexpr (!std::is_same_v<T, bool>) reduce_ref<T>(op_, x, y, kept);
    });
  }

 private:
  RedOp op_;
  bool axes_input_;
  bool fast_;
  std::vector<int64_t> axes_;
  bool keepdims_ = true;
  bool noop_ = false;
};

KernelFactory reduce_factory(RedOp op, bool axes_input) {
  return [op, axes_input](const KernelInfo& info) { return std::make_unique<ReduceKernel>(info, op, axes_input); };
}

}  // namespace

bool reduce_rows_fast(RedOp op, const float* x, float* out, int64_t rows, int64_t len, int threads) {
  if (op != RedOp::Sum && op != RedOp::Mean && op != RedOp::Max && op != RedOp::Min && op != RedOp::SumSquare &&
      op != RedOp::L2 && op != RedOp::L1)
    return false;
  parallel_for(rows, threads, std::max<int64_t>(1, 16384 / len), [&](int64_t b, int64_t e) {
    constexpr int W = 8;  // independent partial accumulators so the loop vectorizes
    for (int64_t r = b; r < e; ++r) {
      const float* p = x + r * len;
      float part[W];
      int64_t i = 0;
      if (op == RedOp::Max || op == RedOp::Min) {
        bool mx = op == RedOp::Max;
        float m = p[0];
        bool nan = false;
        for (int64_t j = 0; j < len; ++j) {
          float v = p[j];
          nan |= v != v;
          m = mx ? (v > m ? v : m) : (v < m ? v : m);
        }
        out[r] = nan ? std::numeric_limits<float>::quiet_NaN() : m;
        continue;
      }
      for (float& v : part) v = 0;
      for (; i + W <= len; i += W)
        for (int k = 0; k < W; ++k) {
          float v = p[i + k];
          part[k] += op == RedOp::SumSquare || op == RedOp::L2 ? v * v : op == RedOp::L1 ? std::fabs(v) : v;
        }
      float s = 0;
      for (; i < len; ++i) {
        float v = p[i];
        s += op == RedOp::SumSquare || op == RedOp::L2 ? v * v : op == RedOp::L1 ? std::fabs(v) : v;
      }
      for (float v : part) s += v;
      if (op == RedOp::Mean) s /= static_cast<float>(len);
      if (op == RedOp::L2) s = std::sqrt(s);
      out[r] = s;
    }
  });
  return true;
}

bool reduce_block_fast(RedOp op, const float* x, float* out, int64_t outer, int64_t len, int64_t inner, int threads) {
  if (inner == 1) return reduce_rows_fast(op, x, out, outer, len, threads);
  if (op != RedOp::Sum && op != RedOp::Mean && op != RedOp::Max && op != RedOp::Min && op != RedOp::SumSquare)
    return false;
  // Whole rows of `inner` combine elementwise, so the loops run along contiguous memory.
  parallel_for(outer, threads, std::max<int64_t>(1, 16384 / std::max<int64_t>(len * inner, 1)), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      float* y = out + o * inner;
      const float* xo = x + o * len * inner;
      bool sq = op == RedOp::SumSquare;
      for (int64_t i = 0; i < inner; ++i) y[i] = sq ? xo[i] * xo[i] : xo[i];
      for (int64_t j = 1; j < len; ++j) {
        const float* xp = xo + j * inner;
        switch (op) {
          case RedOp::Max:
            for (int64_t i = 0; i < inner; ++i) y[i] = xp[i] > y[i] || xp[i] != xp[i] ? xp[i] : y[i];
            break;
          case RedOp::Min:
            for (int64_t i = 0; i < inner; ++i) y[i] = xp[i] < y[i] || xp[i] != xp[i] ? xp[i] : y[i];
            break;
          case RedOp::SumSquare:
            for (int64_t i = 0; i < inner; ++i) y[i] += xp[i] * xp[i];
            break;
          default:
            for (int64_t i = 0; i < inner; ++i) y[i] += xp[i];
        }
      }
      if (op == RedOp::Mean)
        for (int64_t i = 0; i < inner; ++i) y[i] /= static_cast<float>(len);
    }
  });
  return true;
}

void register_softmax_kernels(KernelRegistry& r);

}  // namespace kern

void register_reduce_kernels(KernelRegistry& r) {
  using kern::RedOp;
  using kern::reduce_factory;
  // ReduceSum took axes as an input from 13; the others from 18.
  r.add("", "ReduceSum", 1, reduce_factory(RedOp::Sum, false));
  r.add("", "ReduceSum", 13, reduce_factory(RedOp::Sum, true));
  r.add("", "ReduceMean", 1, reduce_factory(RedOp::Mean, false));
  r.add("", "ReduceMean", 18, reduce_factory(RedOp::Mean, true));
  r.add("", "ReduceMax", 1, reduce_factory(RedOp::Max, false));
  r.add("", "ReduceMax", 18, reduce_factory(RedOp::Max, true));
  r.add("", "ReduceMin", 1, reduce_factory(RedOp::Min, false));
  r.add("", "ReduceMin", 18, reduce_factory(RedOp::Min, true));
  r.add("", "ReduceProd", 1, reduce_factory(RedOp::Prod, false));
  r.add("", "ReduceProd", 18, reduce_factory(RedOp::Prod, true));
  r.add("", "ReduceL1", 1, reduce_factory(RedOp::L1, false));
  r.add("", "ReduceL1", 18, reduce_factory(RedOp::L1, true));
  r.add("", "ReduceL2", 1, reduce_factory(RedOp::L2, false));
  r.add("", "ReduceL2", 18, reduce_factory(RedOp::L2, true));
  r.add("", "ReduceLogSum", 1, reduce_factory(RedOp::LogSum, false));
  r.add("", "ReduceLogSum", 18, reduce_factory(RedOp::LogSum, true));
  r.add("", "ReduceLogSumExp", 1, reduce_factory(RedOp::LogSumExp, false));
  r.add("", "ReduceLogSumExp", 18, reduce_factory(RedOp::LogSumExp, true));
  r.add("", "ReduceSumSquare", 1, reduce_factory(RedOp::SumSquare, false));
  r.add("", "ReduceSumSquare", 18, reduce_factory(RedOp::SumSquare, true));
  kern::register_softmax_kernels(r);
}

}  // namespace t2o
