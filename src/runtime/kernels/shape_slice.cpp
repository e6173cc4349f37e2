// Slice and Pad: per-axis index maps over the input, copied in contiguous runs where possible.
#include <limits>

#include "runtime/kernels/shape_util.h"

namespace t2o {
namespace kern {
namespace {

class Slice : public OpKernel {
 public:
  explicit Slice(const KernelInfo& info) : fast_(info.fast_paths) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Node& n = ctx.node();
    std::vector<int64_t> starts, ends, axes, steps;
    if (ctx.opset() < 10) {
      starts = n.attr_ints("starts");
      ends = n.attr_ints("ends");
      axes = n.attr_ints("axes");
    } else {
      starts = int_input(ctx, ctx.input(1), "starts");
      ends = int_input(ctx, ctx.input(2), "ends");
      if (ctx.has_input(3)) axes = int_input(ctx, ctx.input(3), "axes");
      if (ctx.has_input(4)) steps = int_input(ctx, ctx.input(4), "steps");
    }
    size_t m = starts.size();
    if (axes.empty())
      for (size_t i = 0; i < m; ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(m, 1);
    if (ends.size() != m || axes.size() != m || steps.size() != m)
      ctx.fail("starts, ends, axes and steps must have the same length");
    size_t r = x.dims().size();
    Dims st(r, 0), sp(r, 1), od = x.dims();
    std::vector<bool> seen(r, false);
    for (size_t i = 0; i < m; ++i) {
      size_t a = static_cast<size_t>(axis_of(ctx, axes[i], static_cast<int64_t>(r)));
      if (seen[a]) ctx.fail("axes repeat axis " + std::to_string(axes[i]));
      seen[a] = true;
      int64_t dim = x.dims()[a], step = steps[i], s = starts[i], e = ends[i];
      if (step == 0) ctx.fail("steps must not be 0");
      if (s < 0) s += dim;
      if (e < 0) e += dim;
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        od[a] = e > s ? (e - s + step - 1) / step : 0;
      } else {
        s = std::clamp<int64_t>(s, 0, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
        od[a] = s > e ? (s - e - step - 1) / -step : 0;
      }
      st[a] = s;
      sp[a] = step;
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), od);
    if (y.numel() == 0) return;
    Dims ist = strides_of(x.dims());
    int64_t base = 0;
    for (size_t k = 0; k < r; ++k) base += st[k] * ist[k];
    // Trailing axes taken whole, plus one more with step 1, form contiguous runs.
    size_t outer_r = r;
    int64_t run = 1;
    while (fast_ && outer_r > 0 && sp[outer_r - 1] == 1) {
      size_t k = outer_r - 1;
      run *= od[k];
      --outer_r;
      if (od[k] != x.dims()[k]) break;
    }
    std::vector<int64_t> idx(outer_r, 0);
    int64_t rows = y.numel() / run, off = base;
    for (int64_t row = 0; row < rows; ++row) {
      copy_elems(x, off, y, row * run, run);
      for (size_t k = outer_r; k-- > 0;) {
        off += sp[k] * ist[k];
        if (++idx[k] < od[k]) break;
        off -= sp[k] * ist[k] * od[k];
        idx[k] = 0;
      }
    }
  }

 private:
  bool fast_;
};

template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return T(static_cast<float>(v));
  else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) return saturate_cast<T>(v);  // a file's float
  else return static_cast<T>(v);
}

// Source index along one axis for output index o; -1 means the constant value.
int64_t pad_source(int64_t o, int64_t before, int64_t dim, const std::string& mode) {
  int64_t i = o - before;
  if (i >= 0 && i < dim) return i;
  if (mode == "edge") return std::clamp<int64_t>(i, 0, dim - 1);
  if (mode == "wrap") return ((i % dim) + dim) % dim;
  if (mode == "reflect") {
    if (dim == 1) return 0;
    int64_t p = 2 * (dim - 1), k = ((i % p) + p) % p;
    return k >= dim ? p - k : k;
  }
  return -1;
}

void pad(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& n = ctx.node();
  std::string mode = n.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") ctx.fail("unknown mode '" + mode + "'");
  std::vector<int64_t> pads, axes;
  double attr_value = 0;
  const Tensor* cv = nullptr;
  if (ctx.opset() < 11) {
    pads = n.attr_ints(ctx.opset() < 2 ? "paddings" : "pads");
    attr_value = n.attr_float("value", 0.0f);
  } else {
    pads = int_input(ctx, ctx.input(1), "pads");
    if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
      cv = &ctx.input(2);
      if (cv->dtype() != x.dtype()) ctx.fail("constant_value must have the input's element type");
    }
    if (ctx.has_input(3)) axes = int_input(ctx, ctx.input(3), "axes");
  }
  int64_t r = x.rank();
  if (axes.empty())
    for (int64_t k = 0; k < r; ++k) axes.push_back(k);
  size_t na = axes.size();
  if (pads.size() != 2 * na) ctx.fail("pads has " + std::to_string(pads.size()) + " entries, expected " + std::to_string(2 * na));
  Dims pb(static_cast<size_t>(r), 0), pe(static_cast<size_t>(r), 0), od = x.dims();
  for (int64_t p : pads)
    if (p < -kMaxElements || p > kMaxElements) ctx.fail("pad " + std::to_string(p) + " is out of range");
  for (size_t i = 0; i < na; ++i) {
    size_t a = static_cast<size_t>(axis_of(ctx, axes[i], r));
    pb[a] = pads[i];
    pe[a] = pads[i + na];
  }
  for (size_t k = 0; k < static_cast<size_t>(r); ++k) {
    int64_t dim = x.dims()[k];
    if (__builtin_add_overflow(dim, pb[k], &od[k]) || __builtin_add_overflow(od[k], pe[k], &od[k]))
      ctx.fail("pads of axis " + std::to_string(k) + " overflow");
    if (od[k] < 0) ctx.fail("pads remove more than the size of axis " + std::to_string(k));
    if (dim == 0 && od[k] > 0 && mode != "constant") ctx.fail("cannot pad an empty axis in " + mode + " mode");
  }
  // The output (size-checked and counted against the memory limit) first, then the index maps,
  // which are no longer than its axes.
  Tensor& y = ctx.allocate_output(0, x.dtype(), od);
  if (y.numel() == 0) return;
  std::vector<std::vector<int64_t>> maps(static_cast<size_t>(r));
  for (size_t k = 0; k < static_cast<size_t>(r); ++k)
    for (int64_t o = 0; o < od[k]; ++o) maps[k].push_back(pad_source(o, pb[k], x.dims()[k], mode));
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T value = cv ? cv->data<T>()[0] : from_double<T>(attr_value);
    const T* s = x.data<T>();
    T* d = y.data<T>();
    if (r == 0) {
      d[0] = s[0];
      return;
    }
    size_t last = static_cast<size_t>(r - 1);
    Dims ist = strides_of(x.dims());
    int64_t width = od[last], rows = y.numel() / width;
    std::vector<int64_t> idx(last, 0);
    const std::vector<int64_t>& lm = maps[last];
    for (int64_t row = 0; row < rows; ++row) {
      T* dr = d + row * width;
      int64_t base = 0;
      bool constant_row = false;
      for (size_t k = 0; k < last; ++k) {
        int64_t m = maps[k][static_cast<size_t>(idx[k])];
        if (m < 0) constant_row = true;
        base += m * ist[k];
      }
      if (constant_row) {
        for (int64_t j = 0; j < width; ++j) dr[j] = value;
      } else {
        for (int64_t j = 0; j < width; ++j) {
          int64_t m = lm[static_cast<size_t>(j)];
          dr[j] = m < 0 ? value : s[base + m];
        }
      }
      for (size_t k = last; k-- > 0;) {
        if (++idx[k] < od[k]) break;
        idx[k] = 0;
      }
    }
  });
}

}  // namespace
}  // namespace kern

void register_shape_slice_kernels(KernelRegistry& r) {
  using namespace kern;
  r.add("", "Slice", 1, factory_of<Slice>());
  r.add("", "Pad", 1, stateless(pad));
}

}  // namespace t2o
