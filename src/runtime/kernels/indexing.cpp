// Indexing ops: gathers, scatters, masks (Compress, NonZero, Trilu) and OneHot.
// Every index is checked against its axis before any element moves.
#include "runtime/kernels/shape_util.h"

namespace t2o {
namespace kern {
namespace {

int64_t check_index(const KernelContext& ctx, int64_t i, int64_t dim) {
  int64_t v = i < 0 ? i + dim : i;
  if (v < 0 || v >= dim) ctx.fail("index " + std::to_string(i) + " is out of range for an axis of size " + std::to_string(dim));
  return v;
}

void gather(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> idx = int_input(ctx, ctx.input(1), "indices");
  const Dims& id = ctx.input(1).dims();
  if (x.rank() == 0) ctx.fail("cannot gather from a scalar");
  size_t a = static_cast<size_t>(norm_axis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
  int64_t dim = x.dims()[a];
  for (int64_t& i : idx) i = check_index(ctx, i, dim);
  Dims od(x.dims().begin(), x.dims().begin() + static_cast<int64_t>(a));
  od.insert(od.end(), id.begin(), id.end());
  od.insert(od.end(), x.dims().begin() + static_cast<int64_t>(a) + 1, x.dims().end());
  Tensor& y = ctx.allocate_output(0, x.dtype(), od);
  int64_t outer = prod(x.dims(), 0, a), inner = prod(x.dims(), a + 1, x.dims().size());
  int64_t n = static_cast<int64_t>(idx.size());
  if (y.numel() == 0) return;
  parallel_for(outer * n, ctx.threads(), std::max<int64_t>(1, 32768 / inner), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / n, j = t % n;
      copy_elems(x, (o * dim + idx[static_cast<size_t>(j)]) * inner, y, t * inner, inner);
    }
  });
}

// Data offset (with the axis coordinate zeroed) for each position of `idims`, plus the axis stride.
template <typename F>
void for_each_elements_pos(const KernelContext& ctx, const Dims& xd, const Dims& idims, size_t a, F&& f) {
  if (xd.size() != idims.size()) ctx.fail("indices must have the data's rank");
  for (size_t k = 0; k < xd.size(); ++k)
    if (k != a && idims[k] > xd[k]) ctx.fail("indices shape " + dims_to_string(idims) + " exceeds data shape " + dims_to_string(xd));
  Dims st = strides_of(xd);
  Dims vs = st;
  vs[a] = 0;
  for_each_broadcast(idims, {vs}, [&](int64_t i, const int64_t* off) { f(i, off[0], st[a]); });
}

void gather_elements(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  std::vector<int64_t> idx = int_input(ctx, it, "indices");
  if (x.rank() == 0) ctx.fail("cannot gather from a scalar");
  size_t a = static_cast<size_t>(norm_axis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
  Tensor& y = ctx.allocate_output(0, x.dtype(), it.dims());
  int64_t dim = x.dims()[a];
  for_each_elements_pos(ctx, x.dims(), it.dims(), a, [&](int64_t i, int64_t off, int64_t sa) {
    copy_elems(x, off + check_index(ctx, idx[static_cast<size_t>(i)], dim) * sa, y, i, 1);
  });
}

void gather_nd(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  std::vector<int64_t> idx = int_input(ctx, it, "indices");
  int64_t b = ctx.node().attr_int("batch_dims", 0), r = x.rank(), q = it.rank();
  if (q < 1 || r < 1) ctx.fail("data and indices must have rank >= 1");
  int64_t k = it.dims().back();
  if (b < 0 || b >= std::min(q, r) || k > r - b) ctx.fail("batch_dims and indices' last dimension do not fit the data's rank");
  size_t ub = static_cast<size_t>(b), uk = static_cast<size_t>(k);
  for (size_t i = 0; i < ub; ++i)
    if (x.dims()[i] != it.dims()[i]) ctx.fail("batch dimensions of data and indices differ");
  Dims od(it.dims().begin(), it.dims().end() - 1);
  od.insert(od.end(), x.dims().begin() + b + k, x.dims().end());
  Tensor& y = ctx.allocate_output(0, x.dtype(), od);
  int64_t slice = prod(x.dims(), ub + uk, x.dims().size()), batches = prod(x.dims(), 0, ub);
  int64_t n = prod(it.dims(), ub, it.dims().size() - 1), xsz = prod(x.dims(), ub, x.dims().size());
  Dims st = strides_of(x.dims());
  for (int64_t bt = 0; bt < batches; ++bt)
    for (int64_t j = 0; j < n; ++j) {
      int64_t off = bt * xsz;
      for (size_t t = 0; t < uk; ++t)
        off += check_index(ctx, idx[static_cast<size_t>((bt * n + j) * k) + t], x.dims()[ub + t]) * st[ub + t];
      copy_elems(x, off, y, (bt * n + j) * slice, slice);
    }
}

enum class Reduce { None, Add, Mul, Max, Min };

Reduce reduction_of(const KernelContext& ctx) {
  std::string s = ctx.node().attr_string("reduction", "none");
  if (s == "none") return Reduce::None;
  if (s == "add") return Reduce::Add;
  if (s == "mul") return Reduce::Mul;
  if (s == "max") return Reduce::Max;
  if (s == "min") return Reduce::Min;
  ctx.fail("unknown reduction '" + s + "'");
}

// out[o] op= upd[u] for n elements.
void apply(Reduce red, const Tensor& upd, int64_t u, Tensor& out, int64_t o, int64_t n) {
  if (red == Reduce::None) return copy_elems(upd, u, out, o, n);
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using M = math_t<T>;
    const T* s = upd.data<T>() + u;
    T* d = out.data<T>() + o;
    for (int64_t i = 0; i < n; ++i) {
      M a = static_cast<M>(d[i]), b = static_cast<M>(s[i]), v;
      if constexpr (std::is_same_v<T, bool>) {
        v = red == Reduce::Mul || red == Reduce::Min ? (a && b) : (a || b);
      } else {
        switch (red) {
          case Reduce::Add: v = static_cast<M>(a + b); break;
          case Reduce::Mul: v = static_cast<M>(a * b); break;
          case Reduce::Max: v = std::max(a, b); break;
          default: v = std::min(a, b); break;
        }
      }
      d[i] = T(v);
    }
  });
}

void scatter_elements(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  std::vector<int64_t> idx = int_input(ctx, it, "indices");
  if (upd.dims() != it.dims()) ctx.fail("updates must have the shape of indices");
  if (upd.dtype() != x.dtype()) ctx.fail("updates must have the data's element type");
  if (x.rank() == 0) ctx.fail("cannot scatter into a scalar");
  size_t a = static_cast<size_t>(norm_axis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
  Reduce red = reduction_of(ctx);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
  copy_elems(x, 0, y, 0, x.numel());
  int64_t dim = x.dims()[a];
  for_each_elements_pos(ctx, x.dims(), it.dims(), a, [&](int64_t i, int64_t off, int64_t sa) {
    apply(red, upd, i, y, off + check_index(ctx, idx[static_cast<size_t>(i)], dim) * sa, 1);
  });
}

void scatter_nd(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  std::vector<int64_t> idx = int_input(ctx, it, "indices");
  if (it.rank() < 1) ctx.fail("indices must have rank >= 1");
  if (upd.dtype() != x.dtype()) ctx.fail("updates must have the data's element type");
  int64_t k = it.dims().back();
  if (k > x.rank()) ctx.fail("indices' last dimension exceeds the data's rank");
  size_t uk = static_cast<size_t>(k);
  Dims want(it.dims().begin(), it.dims().end() - 1);
  want.insert(want.end(), x.dims().begin() + k, x.dims().end());
  if (upd.dims() != want) ctx.fail("updates shape " + dims_to_string(upd.dims()) + ", expected " + dims_to_string(want));
  Reduce red = reduction_of(ctx);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
  copy_elems(x, 0, y, 0, x.numel());
  int64_t slice = prod(x.dims(), uk, x.dims().size()), n = prod(it.dims(), 0, it.dims().size() - 1);
  Dims st = strides_of(x.dims());
  for (int64_t j = 0; j < n; ++j) {
    int64_t off = 0;
    for (size_t t = 0; t < uk; ++t) off += check_index(ctx, idx[static_cast<size_t>(j * k) + t], x.dims()[t]) * st[t];
    apply(red, upd, j * slice, y, off, slice);
  }
}

void compress(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& c = ctx.input(1);
  if (c.rank() != 1) ctx.fail("condition must be 1-D");
  bool has_axis = ctx.node().has_attr("axis");
  Tensor flat = has_axis ? x : x.reshaped({x.numel()});
  if (flat.rank() == 0) ctx.fail("cannot compress a scalar along an axis");
  size_t a = static_cast<size_t>(has_axis ? norm_axis(ctx, ctx.node().attr_int("axis"), x.rank()) : 0);
  int64_t dim = flat.dims()[a];
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < c.numel(); ++i)
    if (c.as_double(i) != 0) {
      if (i >= dim) ctx.fail("condition selects index " + std::to_string(i) + " beyond the axis size " + std::to_string(dim));
      keep.push_back(i);
    }
  Dims od = flat.dims();
  od[a] = static_cast<int64_t>(keep.size());
  Tensor& y = ctx.allocate_output(0, x.dtype(), od);
  int64_t outer = prod(od, 0, a), inner = prod(od, a + 1, od.size()), n = od[a];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j) copy_elems(flat, (o * dim + keep[static_cast<size_t>(j)]) * inner, y, (o * n + j) * inner, inner);
}

void non_zero(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> hits;
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i)
      if (static_cast<math_t<T>>(p[i]) != math_t<T>{}) hits.push_back(i);
  });
  // A scalar reads as 1-D, as numpy's nonzero did.
  Dims d = x.rank() == 0 ? Dims{1} : x.dims();
  int64_t r = static_cast<int64_t>(d.size()), n = static_cast<int64_t>(hits.size());
  Tensor& y = ctx.allocate_output(0, DType::Int64, {r, n});
  int64_t* out = y.data<int64_t>();
  for (int64_t j = 0; j < n; ++j) {
    int64_t rem = hits[static_cast<size_t>(j)];
    for (int64_t k = r; k-- > 0;) {
      out[k * n + j] = rem % d[static_cast<size_t>(k)];
      rem /= d[static_cast<size_t>(k)];
    }
  }
}

void one_hot(KernelContext& ctx) {
  const Tensor& ind = ctx.input(0);
  const Tensor& dt = ctx.input(1);
  const Tensor& vals = ctx.input(2);
  if (dt.numel() != 1) ctx.fail("depth must hold one element");
  if (vals.numel() != 2) ctx.fail("values must hold [off_value, on_value]");
  double depth_value = dt.as_double(0);
  if (!(depth_value >= 0)) ctx.fail("depth must be non-negative");
  int64_t depth = saturate_cast<int64_t>(depth_value);
  int64_t r = ind.rank();
  int64_t axis = ctx.node().attr_int("axis", -1);
  if (axis < 0) axis += r + 1;
  if (axis < 0 || axis > r) ctx.fail("axis out of range");
  size_t a = static_cast<size_t>(axis);
  Dims od = ind.dims();
  od.insert(od.begin() + axis, depth);
  Tensor& y = ctx.allocate_output(0, vals.dtype(), od);
  int64_t outer = prod(ind.dims(), 0, a), inner = prod(ind.dims(), a, ind.dims().size());
  for (int64_t i = 0; i < y.numel(); ++i) copy_elems(vals, 0, y, i, 1);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      // A NaN index selects nothing.
      int64_t v = dtype_is_float(ind.dtype()) ? saturate_cast<int64_t>(ind.as_double(o * inner + j), INT64_MIN)
                                               : ind.as_int(o * inner + j);
      if (v < 0) v += depth;
      if (v >= 0 && v < depth) copy_elems(vals, 1, y, (o * depth + v) * inner + j, 1);
    }
}

void trilu(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) ctx.fail("input must have rank >= 2");
  int64_t k = 0;
  if (ctx.has_input(1)) {
    if (ctx.input(1).numel() != 1) ctx.fail("k must hold one element");
    k = ctx.input(1).as_int(0);
  }
  bool upper = ctx.node().attr_int("upper", 1) != 0;
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
  int64_t rows = x.dim(-2), cols = x.dim(-1), mats = rows * cols != 0 ? x.numel() / (rows * cols) : 0;
  dispatch_bits(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* s = elems<T>(x);
    T* d = elems<T>(y);
    for (int64_t m = 0; m < mats; ++m)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          int64_t o = (m * rows + i) * cols + j;
          bool keep = upper ? j - i >= k : j - i <= k;
          d[o] = keep ? s[o] : T{};
        }
  });
}

}  // namespace
}  // namespace kern

void register_indexing_sort_kernels(KernelRegistry& r);

void register_indexing_kernels(KernelRegistry& r) {
  using namespace kern;
  register_indexing_sort_kernels(r);
  r.add("", "Gather", 1, stateless(gather));
  r.add("", "GatherElements", 11, stateless(gather_elements));
  r.add("", "GatherND", 11, stateless(gather_nd));
  r.add("", "Scatter", 9, stateless(scatter_elements));
  r.add("", "ScatterElements", 11, stateless(scatter_elements));
  r.add("", "ScatterND", 11, stateless(scatter_nd));
  r.add("", "Compress", 9, stateless(compress));
  r.add("", "NonZero", 9, stateless(non_zero));
  r.add("", "OneHot", 9, stateless(one_hot));
  r.add("", "Trilu", 14, stateless(trilu));
}

}  // namespace t2o
