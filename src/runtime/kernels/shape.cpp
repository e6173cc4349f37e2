// Shape ops: views (Reshape, Flatten, Squeeze, Unsqueeze, Identity share the input's storage),
// shape queries, constants, and the copies Concat, Split, Expand, Tile.
#include <optional>

#include "runtime/kernels/shape_util.h"

namespace t2o {
namespace kern {
namespace {

// The attribute form before `since` and the input form (input `idx`) from it; nullopt when absent.
std::optional<std::vector<int64_t>> ints_attr_or_input(const KernelContext& ctx, int since, const char* name, int idx) {
  if (ctx.opset() < since) {
    if (!ctx.node().has_attr(name)) return std::nullopt;
    return ctx.node().attr_ints(name);
  }
  if (!ctx.has_input(idx)) return std::nullopt;
  return int_input(ctx, ctx.input(idx), name);
}

void view_output(KernelContext& ctx, const Tensor& x, Dims dims) {
  if (numel_of(dims) != x.numel())
    ctx.fail("cannot view " + dims_to_string(x.dims()) + " as " + dims_to_string(dims));
  ctx.set_output(0, RValue(x.reshaped(std::move(dims))));
}

void identity(KernelContext& ctx) { ctx.set_output(0, ctx.input_value(0)); }

void reshape(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> shape = ctx.opset() < 5 ? ctx.node().attr_ints("shape") : int_input(ctx, ctx.input(1), "shape");
  bool allowzero = ctx.node().attr_int("allowzero", 0) != 0;
  Dims out(shape.size());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t s = shape[i];
    if (s == 0 && !allowzero) {
      if (i >= x.dims().size()) ctx.fail("shape has 0 at axis " + std::to_string(i) + " beyond the input's rank");
      s = x.dims()[i];
    } else if (s == -1) {
      if (infer >= 0) ctx.fail("shape has more than one -1");
      infer = static_cast<int>(i);
      continue;
    } else if (s < 0) {
      ctx.fail("shape has invalid dimension " + std::to_string(s));
    }
    out[i] = s;
    known = checked_mul(known, s);
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known)
      ctx.fail("cannot infer -1 reshaping " + dims_to_string(x.dims()) + " to " + dims_to_string(shape));
    out[static_cast<size_t>(infer)] = x.numel() / known;
  }
  view_output(ctx, x, out);
}

void flatten(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t r = x.rank(), axis = ctx.node().attr_int("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) ctx.fail("axis out of range for rank " + std::to_string(r));
  size_t a = static_cast<size_t>(axis);
  view_output(ctx, x, {prod(x.dims(), 0, a), prod(x.dims(), a, x.dims().size())});
}

void squeeze(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto axes = ints_attr_or_input(ctx, 13, "axes", 1);
  int64_t r = x.rank();
  std::vector<bool> drop(static_cast<size_t>(r), false);
  if (axes) {
    for (int64_t a : *axes) {
      int64_t k = axis_of(ctx, a, r);
      if (x.dims()[static_cast<size_t>(k)] != 1)
        ctx.fail("cannot squeeze axis " + std::to_string(a) + " of size " + std::to_string(x.dims()[static_cast<size_t>(k)]));
      drop[static_cast<size_t>(k)] = true;
    }
  } else {
    for (int64_t k = 0; k < r; ++k) drop[static_cast<size_t>(k)] = x.dims()[static_cast<size_t>(k)] == 1;
  }
  Dims out;
  for (int64_t k = 0; k < r; ++k)
    if (!drop[static_cast<size_t>(k)]) out.push_back(x.dims()[static_cast<size_t>(k)]);
  view_output(ctx, x, out);
}

void unsqueeze(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto axes = ints_attr_or_input(ctx, 13, "axes", 1);
  if (!axes) ctx.fail("axes are required");
  int64_t r = x.rank() + static_cast<int64_t>(axes->size());
  std::vector<bool> ins(static_cast<size_t>(r), false);
  for (int64_t a : *axes) {
    int64_t k = norm_axis(ctx, a, r);
    if (ins[static_cast<size_t>(k)]) ctx.fail("axes repeat axis " + std::to_string(a));
    ins[static_cast<size_t>(k)] = true;
  }
  Dims out;
  size_t j = 0;
  for (int64_t k = 0; k < r; ++k) out.push_back(ins[static_cast<size_t>(k)] ? 1 : x.dims()[j++]);
  view_output(ctx, x, out);
}

void shape_op(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t r = x.rank();
  int64_t start = ctx.node().attr_int("start", 0), end = ctx.node().attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  int64_t n = std::max<int64_t>(0, end - start);
  Tensor& y = ctx.allocate_output(0, DType::Int64, {n});
  for (int64_t i = 0; i < n; ++i) y.data<int64_t>()[i] = x.dims()[static_cast<size_t>(start + i)];
}

void size_op(KernelContext& ctx) {
  ctx.allocate_output(0, DType::Int64, {}).data<int64_t>()[0] = ctx.input(0).numel();
}

Tensor dense_of_sparse(const SparseTensor& sp) {
  Tensor out(sp.values.dtype(), sp.dims);
  int64_t nnz = sp.values.numel(), r = static_cast<int64_t>(sp.dims.size());
  Dims st = strides_of(sp.dims);
  // Indices are [nnz] linear offsets or [nnz, rank] coordinates; anything else would be read past.
  bool linear = sp.indices.rank() == 1;
  if (!sp.indices.defined() || sp.indices.dtype() != DType::Int64 ||
      sp.indices.numel() != (linear ? nnz : nnz * r) || (!linear && sp.indices.rank() != 2))
    throw InputError("Constant: sparse_value indices do not match its " + std::to_string(nnz) + " values");
  for (int64_t i = 0; i < nnz; ++i) {
    int64_t off = 0;
    if (linear) {
      off = sp.indices.as_int(i);
    } else {
      for (int64_t k = 0; k < r; ++k) {
        int64_t c = sp.indices.as_int(i * r + k);
        if (c < 0 || c >= sp.dims[static_cast<size_t>(k)]) throw InputError("Constant: sparse_value index out of range");
        off += c * st[static_cast<size_t>(k)];
      }
    }
    if (off < 0 || off >= out.numel()) throw Error("Constant: sparse_value index out of range");
    copy_elems(sp.values, i, out, off, 1);
  }
  return out;
}

class Constant : public OpKernel {
 public:
  explicit Constant(const KernelInfo& info) {
    const Node& n = info.node;
    const Attribute* a = nullptr;
    for (const char* name : {"value", "sparse_value", "value_float", "value_floats", "value_int", "value_ints",
                             "value_string", "value_strings"})
      if ((a = n.find_attr(name))) break;
    if (!a) throw Error(n.describe() + ": Constant has none of the value attributes");
    const std::string& k = a->name;
    if (k == "value") value_ = a->t;
    else if (k == "sparse_value") value_ = dense_of_sparse(a->sparse);
    else if (k == "value_float") value_ = Tensor::scalar<float>(a->f);
    else if (k == "value_floats") value_ = Tensor::from_vector<float>(a->floats, {static_cast<int64_t>(a->floats.size())});
    else if (k == "value_int") value_ = Tensor::scalar<int64_t>(a->i);
    else if (k == "value_ints") value_ = Tensor::from_vector<int64_t>(a->ints, {static_cast<int64_t>(a->ints.size())});
    else if (k == "value_string") value_ = Tensor::from_strings({a->s}, {});
    else value_ = Tensor::from_strings(a->strings, {static_cast<int64_t>(a->strings.size())});
  }
  void run(KernelContext& ctx) override { ctx.set_output(0, RValue(value_)); }

 private:
  Tensor value_;
};

void constant_of_shape(KernelContext& ctx) {
  std::vector<int64_t> shape = int_input(ctx, ctx.input(0), "shape");
  for (int64_t d : shape)
    if (d < 0) ctx.fail("shape has negative dimension " + std::to_string(d));
  const Tensor* v = ctx.node().attr_tensor("value");
  Tensor val = v ? *v : Tensor::scalar<float>(0.0f);
  if (val.numel() != 1) ctx.fail("value must hold one element");
  Tensor& y = ctx.allocate_output(0, val.dtype(), shape);
  dispatch_bits(val.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T c = elems<T>(val)[0];
    T* p = elems<T>(y);
    for (int64_t i = 0; i < y.numel(); ++i) p[i] = c;
  });
}

void concat(KernelContext& ctx) {
  int n = ctx.num_inputs();
  if (n < 1) ctx.fail("needs at least one input");
  const Tensor& x0 = ctx.input(0);
  int64_t r = x0.rank();
  if (r == 0) ctx.fail("cannot concatenate scalars");
  int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", ctx.opset() < 4 ? 1 : 0), r);
  size_t a = static_cast<size_t>(axis);
  Dims od = x0.dims();
  od[a] = 0;
  std::vector<const Tensor*> ins;
  for (int i = 0; i < n; ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != x0.dtype()) ctx.fail("inputs have different element types");
    bool ok = t.rank() == r;
    for (size_t k = 0; ok && k < od.size(); ++k) ok = k == a || t.dims()[k] == od[k];
    if (!ok) ctx.fail("cannot concatenate " + dims_to_string(x0.dims()) + " and " + dims_to_string(t.dims()) + " on axis " + std::to_string(axis));
    od[a] += t.dims()[a];
    ins.push_back(&t);
  }
  Tensor& y = ctx.allocate_output_uninit(0, x0.dtype(), od);  // every element is copied
  int64_t outer = prod(od, 0, a), row = prod(od, a, od.size());
  if (y.numel() == 0) return;
  // Each input contributes one contiguous run per outer index.
  parallel_for(outer, ctx.threads(), std::max<int64_t>(1, 65536 / row), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      int64_t off = o * row;
      for (const Tensor* t : ins) {
        int64_t run = t->numel() / outer;
        copy_elems(*t, o * run, y, off, run);
        off += run;
      }
    }
  });
}

void split(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t r = x.rank();
  if (r == 0) ctx.fail("cannot split a scalar");
  int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", 0), r);
  size_t a = static_cast<size_t>(axis);
  int64_t dim = x.dims()[a];
  int nout = ctx.num_outputs();
  auto sizes = ints_attr_or_input(ctx, 13, "split", 1);
  std::vector<int64_t> parts;
  if (sizes && !sizes->empty()) {
    parts = *sizes;
    if (static_cast<int>(parts.size()) != nout) ctx.fail("split has " + std::to_string(parts.size()) + " sizes for " + std::to_string(nout) + " outputs");
    int64_t sum = 0;
    for (int64_t p : parts) {
      if (p < 0) ctx.fail("split sizes must be non-negative");
      sum += p;
    }
    if (sum != dim) ctx.fail("split sizes sum to " + std::to_string(sum) + ", not the axis size " + std::to_string(dim));
  } else {
    if (ctx.node().has_attr("num_outputs")) nout = static_cast<int>(ctx.node().attr_int("num_outputs"));
    if (nout <= 0) ctx.fail("needs at least one output");
    bool uneven = ctx.node().has_attr("num_outputs");  // opset 18: the last part may be smaller
    if (!uneven && dim % nout) ctx.fail("axis size " + std::to_string(dim) + " does not split evenly into " + std::to_string(nout));
    int64_t chunk = (dim + nout - 1) / nout;
    for (int i = 0; i < nout; ++i) parts.push_back(std::clamp<int64_t>(dim - chunk * i, 0, chunk));
  }
  int64_t outer = prod(x.dims(), 0, a), inner = prod(x.dims(), a + 1, x.dims().size());
  int64_t start = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    Dims od = x.dims();
    od[a] = parts[i];
    // Every element is copied: no zeroing first.
    Tensor& y = ctx.allocate_output_uninit(static_cast<int>(i), x.dtype(), od);
    const int64_t run = parts[i] * inner;
    if (run > 0)
      parallel_for(outer, ctx.threads(), std::max<int64_t>(1, 65536 / run), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) copy_elems(x, (o * dim + start) * inner, y, o * run, run);
      });
    start += parts[i];
  }
}

void expand(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> shape = int_input(ctx, ctx.input(1), "shape");
  for (int64_t d : shape)
    if (d < 0) ctx.fail("shape has negative dimension " + std::to_string(d));
  Dims od = broadcast_dims(ctx, x.dims(), shape);
  Tensor& y = ctx.allocate_output_uninit(0, x.dtype(), od);  // every element is copied
  if (y.numel() == 0) return;
  // Trailing axes the input already has in full are copied as contiguous runs.
  size_t r = od.size(), off = r - x.dims().size(), k = r;
  int64_t run = 1;
  while (k > off && x.dims()[k - 1 - off] == od[k - 1]) run *= od[--k];
  Dims outer(od.begin(), od.begin() + static_cast<int64_t>(k));
  Dims st = broadcast_strides(x.dims(), od);
  st.resize(k);
  for_each_broadcast(outer, {st}, [&](int64_t i, const int64_t* o) { copy_elems(x, o[0], y, i * run, run); });
}

void tile(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> reps = int_input(ctx, ctx.input(1), "repeats");
  size_t r = x.dims().size();
  if (reps.size() != r) ctx.fail("repeats has " + std::to_string(reps.size()) + " entries for rank " + std::to_string(r));
  Dims od(r);
  for (size_t k = 0; k < r; ++k) {
    if (reps[k] < 0) ctx.fail("repeats must be non-negative");
    od[k] = checked_mul(x.dims()[k], reps[k]);
  }
  Tensor& y = ctx.allocate_output(0, x.dtype(), od);
  if (y.numel() == 0) return;
  if (r == 0) return copy_elems(x, 0, y, 0, 1);
  // x at the origin of y, a row (last axis) at a time; then, from the last axis to the first, each
  // block that holds x's extent along an axis is repeated along it by doubling copies, so the work
  // is a copy per input row plus a few per block, however many the repeats.
  Dims yst = strides_of(od);
  int64_t in_row = x.dims()[r - 1], xrows = x.numel() / in_row;
  std::vector<int64_t> idx(r - 1, 0);
  for (int64_t row = 0; row < xrows; ++row) {
    int64_t dst = 0;
    for (size_t k = 0; k + 1 < r; ++k) dst += idx[k] * yst[k];
    copy_elems(x, row * in_row, y, dst, in_row);
    for (size_t k = r - 1; k-- > 0;) {
      if (++idx[k] < x.dims()[k]) break;
      idx[k] = 0;
    }
  }
  for (size_t k = r; k-- > 0;) {
    int64_t have = x.dims()[k] * yst[k], want = od[k] * yst[k];
    if (have == want) continue;
    int64_t slabs = 1;
    for (size_t j = 0; j < k; ++j) slabs *= x.dims()[j];
    std::vector<int64_t> at(k, 0);
    for (int64_t s = 0; s < slabs; ++s) {
      int64_t base = 0;
      for (size_t j = 0; j < k; ++j) base += at[j] * yst[j];
      for (int64_t done = have; done < want;) {
        int64_t n = std::min(done, want - done);
        copy_elems(y, base, y, base + done, n);
        done += n;
      }
      for (size_t j = k; j-- > 0;) {
        if (++at[j] < x.dims()[j]) break;
        at[j] = 0;
      }
    }
  }
}

}  // namespace
}  // namespace kern

void register_shape_transpose_kernels(KernelRegistry& r);
void register_shape_slice_kernels(KernelRegistry& r);

void register_shape_kernels(KernelRegistry& r) {
  using namespace kern;
  register_shape_transpose_kernels(r);
  register_shape_slice_kernels(r);
  r.add("", "Concat", 1, stateless(concat));
  r.add("", "Constant", 1, factory_of<Constant>());
  r.add("", "ConstantOfShape", 9, stateless(constant_of_shape));
  r.add("", "Expand", 8, stateless(expand));
  r.add("", "Flatten", 1, stateless(flatten));
  r.add("", "Identity", 1, stateless(identity));
  r.add("", "Reshape", 1, stateless(reshape));
  r.add("", "Shape", 1, stateless(shape_op));
  r.add("", "Size", 1, stateless(size_op));
  r.add("", "Split", 1, stateless(split));
  r.add("", "Squeeze", 1, stateless(squeeze));
  r.add("", "Unsqueeze", 1, stateless(unsqueeze));
  r.add("", "Tile", 6, stateless(tile));
}

}  // namespace t2o
