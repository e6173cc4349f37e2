// Ops that order or scan along an axis: TopK, Unique, ArgMax/ArgMin, CumSum, ReverseSequence.
// Orderings put NaN above every number so sorts stay well-defined; ties keep the lower index.
#include <cmath>
#include <numeric>

#include "runtime/kernels/shape_util.h"

namespace t2o {
namespace kern {
namespace {

template <typename M>
bool less_nan_max(const M& a, const M& b) {
  if constexpr (std::is_floating_point_v<M>) {
    if (std::isnan(b)) return !std::isnan(a);
    if (std::isnan(a)) return false;
  }
  return a < b;
}

// Splits dims around an axis: outer * dim * inner.
struct AxisView {
  int64_t outer, dim, inner;
  AxisView(const Dims& d, size_t a) : outer(prod(d, 0, a)), dim(d[a]), inner(prod(d, a + 1, d.size())) {}
};

class TopK : public OpKernel {
 public:
  explicit TopK(const KernelInfo& info)
      : axis_(info.node.attr_int("axis", -1)), largest_(info.node.attr_int("largest", 1) != 0),
        k_attr_(info.node.attr_int("k", -1)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    int64_t k = k_attr_;
    if (ctx.opset() >= 10) {
      const Tensor& kt = ctx.input(1);
      if (kt.numel() != 1) ctx.fail("k must hold one element");
      k = kt.as_int(0);
    }
    if (x.rank() == 0) ctx.fail("input must have rank >= 1");
    size_t a = static_cast<size_t>(norm_axis(ctx, axis_, x.rank()));
    AxisView v(x.dims(), a);
    if (k < 0 || k > v.dim) ctx.fail("k = " + std::to_string(k) + " is out of range for an axis of size " + std::to_string(v.dim));
    Dims od = x.dims();
    od[a] = k;
    Tensor& vals = ctx.allocate_output(0, x.dtype(), od);
    Tensor& inds = ctx.allocate_output(1, DType::Int64, od);
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      using M = math_t<T>;
      const T* s = x.data<T>();
      T* dv = vals.data<T>();
      int64_t* di = inds.data<int64_t>();
      std::vector<std::pair<M, int64_t>> buf(static_cast<size_t>(v.dim));
      auto before = [&](const std::pair<M, int64_t>& p, const std::pair<M, int64_t>& q) {
        if (largest_ ? less_nan_max(q.first, p.first) : less_nan_max(p.first, q.first)) return true;
        if (less_nan_max(p.first, q.first) || less_nan_max(q.first, p.first)) return false;
        return p.second < q.second;
      };
      for (int64_t o = 0; o < v.outer; ++o)
        for (int64_t j = 0; j < v.inner; ++j) {
          for (int64_t i = 0; i < v.dim; ++i) buf[static_cast<size_t>(i)] = {static_cast<M>(s[(o * v.dim + i) * v.inner + j]), i};
          std::partial_sort(buf.begin(), buf.begin() + k, buf.end(), before);
          for (int64_t i = 0; i < k; ++i) {
            int64_t off = (o * k + i) * v.inner + j;
            dv[off] = T(buf[static_cast<size_t>(i)].first);
            di[off] = buf[static_cast<size_t>(i)].second;
          }
        }
    });
  }

 private:
  int64_t axis_;
  bool largest_;
  int64_t k_attr_;
};

void unique(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  bool sorted = ctx.node().attr_int("sorted", 1) != 0;
  bool has_axis = ctx.node().has_attr("axis");
  Tensor src = has_axis ? x : x.reshaped({x.numel()});
  if (src.rank() == 0) ctx.fail("cannot take unique slices of a scalar");
  size_t a = static_cast<size_t>(has_axis ? norm_axis(ctx, ctx.node().attr_int("axis"), x.rank()) : 0);
  AxisView v(src.dims(), a);
  std::vector<int64_t> order(static_cast<size_t>(v.dim));
  std::iota(order.begin(), order.end(), 0);
  std::vector<int64_t> group_of(order.size());  // slice -> unique group (in sorted order)
  std::vector<int64_t> first;                    // group -> first occurrence
  std::vector<int64_t> counts;
  dispatch_with_string(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using M = std::conditional_t<std::is_same_v<T, std::string>, std::string, math_t<T>>;
    const T* s = elems<T>(src);
    // Slices compare lexicographically over (outer, inner).
    auto cmp = [&](int64_t p, int64_t q) {
      for (int64_t o = 0; o < v.outer; ++o)
        for (int64_t j = 0; j < v.inner; ++j) {
          M ep = static_cast<M>(s[(o * v.dim + p) * v.inner + j]), eq = static_cast<M>(s[(o * v.dim + q) * v.inner + j]);
          if (less_nan_max(ep, eq)) return -1;
          if (less_nan_max(eq, ep)) return 1;
        }
      return 0;
    };
    std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) { return cmp(p, q) < 0; });
    for (size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || cmp(order[i - 1], order[i]) != 0) {
        first.push_back(order[i]);
        counts.push_back(0);
      }
      group_of[static_cast<size_t>(order[i])] = static_cast<int64_t>(first.size()) - 1;
      ++counts.back();
    }
  });
  size_t u = first.size();
  std::vector<int64_t> out_pos(u);  // group -> output position
  std::iota(out_pos.begin(), out_pos.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(u);
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(), [&](int64_t p, int64_t q) { return first[static_cast<size_t>(p)] < first[static_cast<size_t>(q)]; });
    for (size_t i = 0; i < u; ++i) out_pos[static_cast<size_t>(by_first[i])] = static_cast<int64_t>(i);
  }
  Dims od = src.dims();
  od[a] = static_cast<int64_t>(u);
  Tensor& y = ctx.allocate_output(0, x.dtype(), od);
  Tensor& yi = ctx.allocate_output(1, DType::Int64, {static_cast<int64_t>(u)});
  Tensor& yinv = ctx.allocate_output(2, DType::Int64, {v.dim});
  Tensor& yc = ctx.allocate_output(3, DType::Int64, {static_cast<int64_t>(u)});
  for (size_t g = 0; g < u; ++g) {
    int64_t p = out_pos[g];
    yi.data<int64_t>()[p] = first[g];
    yc.data<int64_t>()[p] = counts[g];
    for (int64_t o = 0; o < v.outer; ++o)
      copy_elems(src, (o * v.dim + first[g]) * v.inner, y, (o * static_cast<int64_t>(u) + p) * v.inner, v.inner);
  }
  for (int64_t i = 0; i < v.dim; ++i) yinv.data<int64_t>()[i] = out_pos[static_cast<size_t>(group_of[static_cast<size_t>(i)])];
}

void arg_extreme(KernelContext& ctx, bool is_max) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) ctx.fail("input must have rank >= 1");
  size_t a = static_cast<size_t>(norm_axis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
  bool keep = ctx.node().attr_int("keepdims", 1) != 0, last = ctx.node().attr_int("select_last_index", 0) != 0;
  AxisView v(x.dims(), a);
  if (v.dim == 0) ctx.fail("cannot take the arg of an empty axis");
  Dims od = x.dims();
  if (keep) od[a] = 1;
  else od.erase(od.begin() + static_cast<int64_t>(a));
  Tensor& y = ctx.allocate_output(0, DType::Int64, od);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using M = math_t<T>;
    const T* s = x.data<T>();
    int64_t* d = y.data<int64_t>();
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t j = 0; j < v.inner; ++j) {
        const T* p = s + o * v.dim * v.inner + j;
        M best = static_cast<M>(p[0]);
        int64_t bi = 0;
        for (int64_t i = 1; i < v.dim; ++i) {
          M e = static_cast<M>(p[i * v.inner]);
          bool better = is_max ? less_nan_max(best, e) : less_nan_max(e, best);
          bool tie = !less_nan_max(best, e) && !less_nan_max(e, best);
          if (better || (last && tie)) {
            best = e;
            bi = i;
          }
        }
        d[o * v.inner + j] = bi;
      }
  });
}

void cum_sum(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& at = ctx.input(1);
  if (at.numel() != 1) ctx.fail("axis must hold one element");
  if (x.rank() == 0) ctx.fail("input must have rank >= 1");
  size_t a = static_cast<size_t>(norm_axis(ctx, at.as_int(0), x.rank()));
  bool excl = ctx.node().attr_int("exclusive", 0) != 0, rev = ctx.node().attr_int("reverse", 0) != 0;
  AxisView v(x.dims(), a);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using M = math_t<T>;
    using A = std::conditional_t<std::is_floating_point_v<M>, double, M>;
    const T* s = x.data<T>();
    T* d = y.data<T>();
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t j = 0; j < v.inner; ++j) {
        A acc{};
        for (int64_t t = 0; t < v.dim; ++t) {
          int64_t i = rev ? v.dim - 1 - t : t;
          int64_t off = (o * v.dim + i) * v.inner + j;
          A e = static_cast<A>(static_cast<M>(s[off]));
          if (!excl) acc = static_cast<A>(acc + e);
          d[off] = T(static_cast<M>(acc));
          if (excl) acc = static_cast<A>(acc + e);
        }
      }
  });
}

void reverse_sequence(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> lens = int_input(ctx, ctx.input(1), "sequence_lens");
  int64_t ta = ctx.node().attr_int("time_axis", 0), ba = ctx.node().attr_int("batch_axis", 1);
  if (x.rank() < 2) ctx.fail("input must have rank >= 2");
  if (!((ta == 0 && ba == 1) || (ta == 1 && ba == 0))) ctx.fail("time_axis and batch_axis must be 0 and 1 in some order");
  int64_t steps = x.dims()[static_cast<size_t>(ta)], batch = x.dims()[static_cast<size_t>(ba)];
  if (static_cast<int64_t>(lens.size()) != batch) ctx.fail("sequence_lens must have one entry per batch");
  int64_t inner = prod(x.dims(), 2, x.dims().size());
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
  copy_elems(x, 0, y, 0, x.numel());
  auto off = [&](int64_t t, int64_t b) { return (ta == 0 ? t * batch + b : b * steps + t) * inner; };
  for (int64_t b = 0; b < batch; ++b) {
    int64_t len = lens[static_cast<size_t>(b)];
    if (len < 0 || len > steps) ctx.fail("sequence length " + std::to_string(len) + " exceeds the time axis size " + std::to_string(steps));
    for (int64_t t = 0; t < len; ++t) copy_elems(x, off(t, b), y, off(len - 1 - t, b), inner);
  }
}

}  // namespace
}  // namespace kern

void register_indexing_sort_kernels(KernelRegistry& r) {
  using namespace kern;
  r.add("", "TopK", 1, factory_of<TopK>());
  r.add("", "Unique", 11, stateless(unique));
  r.add("", "ArgMax", 1, stateless([](KernelContext& c) { arg_extreme(c, true); }));
  r.add("", "ArgMin", 1, stateless([](KernelContext& c) { arg_extreme(c, false); }));
  r.add("", "CumSum", 11, stateless(cum_sum));
  r.add("", "ReverseSequence", 10, stateless(reverse_sequence));
}

}  // namespace t2o
