// Tensor creation: zeros/ones/full/empty (+ _like, new_), arange, random, eye, tril/triu.
#include <set>

#include "torch/ops/compose.h"
#include "torch/ops/ops.h"

namespace t2o {
namespace {

// Whether a later in-place op writes into v or a view of it (then v must be a constant we can
// mutate at conversion time).
bool mutated_later(const TValue* v, int depth = 0) {
  if (depth > 6) return false;
  static const std::set<std::string> views{"aten::slice", "aten::select", "aten::view", "aten::narrow",
                                           "aten::permute", "aten::transpose", "aten::unsqueeze",
                                           "aten::squeeze", "aten::reshape", "aten::expand"};
  for (const auto& u : v->uses()) {
    const auto* s = u.user->maybeSchema();
    if (s && s->is_mutable() && u.offset == 0) return true;
    if (views.count(u.user->kind().toQualString()) && u.offset == 0 && mutated_later(u.user->output(), depth + 1))
      return true;
  }
  return false;
}

// Static shape and mutated later: a constant torch tensor; otherwise nullopt.
bool const_fill(Ctx& c, const TNode* n, const TV& shape, double value) {
  if (!mutated_later(n->output())) return false;
  std::vector<int64_t> dims;
  if (shape.is_const()) {
    dims = shape.c.toIntVector();
  } else if (shape.kind == TV::Kind::List) {
    for (const TV& e : shape.items) {
      if (!e.is_const()) return false;
      dims.push_back(e.c.toInt());
    }
  } else {
    return false;
  }
  at::Tensor t = at::full(dims, value, at::TensorOptions().dtype(scalar_type_from_dtype(c.out_dtype(n))));
  c.set(n->output(), TV::constant(t));
  return true;
}

// The result of a creation op sized by `sizes`: a dim given by a computed size is dynamic,
// whatever the profiling runs saw (the size may come from a tensor's values).
void out_sized(Ctx& c, const TNode* n, const std::string& name, const TV& sizes) {
  c.out(n, name);
  TV tv = c.get(n->output());
  if (!tv.rank_known) return;
  if (sizes.kind == TV::Kind::List && sizes.items.size() == tv.shape.size()) {
    for (size_t i = 0; i < sizes.items.size(); ++i)
      if (!sizes.items[i].is_const()) tv.shape[i] = -1;
  } else if (!sizes.is_const()) {
    for (auto& d : tv.shape) d = -1;
  }
  c.set(n->output(), tv);
}

// aten::zeros/ones/empty(size, dtype, layout, device, pin) and full(size, value, ...)
void zeros(Ctx& c, const TNode* n) {
  if (!const_fill(c, n, c.in(n, 0), 0)) out_sized(c, n, filled(c, c.ints_tensor(c.in(n, 0)), 0, c.out_dtype(n)), c.in(n, 0));
}
void ones(Ctx& c, const TNode* n) {
  if (!const_fill(c, n, c.in(n, 0), 1)) out_sized(c, n, filled(c, c.ints_tensor(c.in(n, 0)), 1, c.out_dtype(n)), c.in(n, 0));
}
void full(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string shape = c.ints_tensor(c.in(n, 0));
  if (c.is_const(n, 1)) return out_sized(c, n, filled(c, shape, c.f(n, 1), t), c.in(n, 0));
  out_sized(c, n, c.b.op1("Expand", {c.t_as(n, 1, t), shape}), c.in(n, 0));
}

// *_like(self, ...) and new_*(self, size, ...)
void zeros_like(Ctx& c, const TNode* n) { c.out(n, filled(c, c.b.shape_of(c.t(n, 0)), 0, c.out_dtype(n))); }
void ones_like(Ctx& c, const TNode* n) { c.out(n, filled(c, c.b.shape_of(c.t(n, 0)), 1, c.out_dtype(n))); }
void full_like(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string shape = c.b.shape_of(c.t(n, 0));
  if (c.is_const(n, 1)) return c.out(n, filled(c, shape, c.f(n, 1), t));
  c.out(n, c.b.op1("Expand", {c.t_as(n, 1, t), shape}));
}
void new_zeros(Ctx& c, const TNode* n) {
  if (!const_fill(c, n, c.in(n, 1), 0)) out_sized(c, n, filled(c, c.ints_tensor(c.in(n, 1)), 0, c.out_dtype(n)), c.in(n, 1));
}
void new_ones(Ctx& c, const TNode* n) {
  if (!const_fill(c, n, c.in(n, 1), 1)) out_sized(c, n, filled(c, c.ints_tensor(c.in(n, 1)), 1, c.out_dtype(n)), c.in(n, 1));
}
void new_full(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string shape = c.ints_tensor(c.in(n, 1));
  if (c.is_const(n, 2)) return out_sized(c, n, filled(c, shape, c.f(n, 2), t), c.in(n, 1));
  out_sized(c, n, c.b.op1("Expand", {c.t_as(n, 2, t), shape}), c.in(n, 1));
}
void fill(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, c.b.op1("Expand", {c.t_as(n, 1, t), c.b.shape_of(c.t(n, 0))}));
}

// aten::arange(end, ...), arange.start(start, end, ...), arange.start_step(start, end, step, ...):
// bounds by schema name (the dtype that follows is an int too, and must not be read as one).
void arange(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  const TV* start = c.arg(n, "start");
  const TV* end = c.arg(n, "end");
  const TV* step = c.arg(n, "step");
  if (!end) throw UnsupportedError("aten::arange overload without `end`");
  bool all_const = end->is_const() && (!start || start->is_const()) && (!step || step->is_const());
  if (all_const) {
    at::Scalar s0 = start ? start->c.toScalar() : at::Scalar(int64_t{0});
    at::Scalar s2 = step ? step->c.toScalar() : at::Scalar(int64_t{1});
    at::Tensor r = at::arange(s0, end->c.toScalar(), s2);
    return c.out(n, c.b.constant(tensor_from_torch(r.to(scalar_type_from_dtype(t))), "arange"));
  }
  auto bound = [&](const TV* v, double dflt) {
    if (!v) return c.b.scalar(dflt, t);
    std::string x = c.tensor_as(*v, t);
    return v->rank_known && !v->shape.empty() ? c.b.reshape(x, {}) : x;
  };
  std::string s0 = bound(start, 0), s1 = bound(end, 0), s2 = bound(step, 1);
  if (c.b.opset() >= 11) return c.out(n, c.b.op1("Range", {s0, s1, s2}));
  // Before Range: ceil((end - start) / step) elements (none when negative), counted in double, and
  // start + i * step over the indices of that many ones.
  auto dbl = [&](const std::string& v) { return t == DType::Double ? v : c.b.cast(v, DType::Double); };
  std::string count = c.b.op1("Ceil", {c.b.op1("Div", {c.b.op1("Sub", {dbl(s1), dbl(s0)}), dbl(s2)})});
  count = c.b.cast(c.b.op1("Max", {count, c.b.scalar(0, DType::Double)}), DType::Int64);
  std::string i = arange_of(c, count);
  if (t != DType::Int64) i = c.b.cast(i, t);
  c.out(n, c.b.op1("Add", {c.b.op1("Mul", {i, s2}), s0}));
}

void random(Ctx& c, const TNode* n, const char* op) {
  auto shape = c.ints(n, 0);
  c.out(n, c.b.op1(op, {}, {Attribute::make_ints("shape", shape),
                            Attribute::make_int("dtype", static_cast<int64_t>(c.out_dtype(n)))}));
}
void rand(Ctx& c, const TNode* n) { random(c, n, "RandomUniform"); }
void randn(Ctx& c, const TNode* n) { random(c, n, "RandomNormal"); }
void rand_like(Ctx& c, const TNode* n) {
  c.out(n, c.b.op1("RandomUniformLike", {c.t(n, 0)}, {Attribute::make_int("dtype", static_cast<int64_t>(c.out_dtype(n)))}));
}
void randn_like(Ctx& c, const TNode* n) {
  c.out(n, c.b.op1("RandomNormalLike", {c.t(n, 0)}, {Attribute::make_int("dtype", static_cast<int64_t>(c.out_dtype(n)))}));
}

void eye(Ctx& c, const TNode* n) {
  // eye(n, m, dtype, ...) or eye(n, dtype, ...): by schema name, as dtype is an int too.
  auto m_at = Ctx::arg_index(n, "m");
  const TV& rv = c.in(n, 0);
  const TV& cv = m_at ? c.in(n, *m_at) : rv;
  if (rv.is_const() && cv.is_const()) {
    at::Tensor e = at::eye(rv.c.toInt(), cv.c.toInt(), at::TensorOptions().dtype(scalar_type_from_dtype(c.out_dtype(n))));
    return c.out(n, c.b.constant(tensor_from_torch(e), "eye"));
  }
  // Computed sizes: row index == column index over two Ranges.
  auto range = [&](const TV& v) { return arange_of(c, c.int_tensor(v)); };
  std::string eq = c.b.op1("Equal", {c.b.unsqueeze(range(rv), {1}), c.b.unsqueeze(range(cv), {0})});
  c.out(n, c.b.cast(eq, c.out_dtype(n)));
}

void tri(Ctx& c, const TNode* n, bool upper) {
  std::string x = c.t(n, 0);
  bool k_const = n->inputs().size() < 2 || c.is_const(n, 1);
  int64_t kc = k_const && n->inputs().size() > 1 ? c.i(n, 1) : 0;
  auto k = [&] {  // the diagonal as a 0-d int64 (Trilu takes it as an input)
    if (k_const) return c.b.i64(kc);
    std::string v = c.int_tensor(c.in(n, 1));
    return c.in(n, 1).rank_known && !c.in(n, 1).shape.empty() ? c.b.reshape(v, {}) : v;
  };
  if (c.b.opset() >= 14) return c.out(n, c.b.op1("Trilu", {x, k()}, {Attribute::make_int("upper", upper)}));
  // Before Trilu: a constant mask for static sizes and diagonal, else the band of positions.
  DType t = c.dtype(n, 0);
  auto shape = c.shape(n, 0);
  int r = static_cast<int>(shape.size());
  if (r < 2) throw UnsupportedError("tril/triu of a tensor with fewer than 2 dims");
  int64_t rows = shape[static_cast<size_t>(r - 2)], cols = shape[static_cast<size_t>(r - 1)];
  std::string mask;
  if (k_const && rows >= 0 && cols >= 0) {
    at::Tensor ones = at::ones({rows, cols}, at::kBool);
    mask = c.b.constant(tensor_from_torch(upper ? at::triu(ones, kc) : at::tril(ones, kc)), "mask");
  } else {
    mask = band_mask(c, c.b.dim(x, r - 2), c.b.dim(x, r - 1), k(), upper);
  }
  c.out(n, c.b.op1("Where", {mask, x, c.b.scalar(0, t)}));
}
void tril(Ctx& c, const TNode* n) { tri(c, n, false); }
void triu(Ctx& c, const TNode* n) { tri(c, n, true); }

void scalar_tensor(Ctx& c, const TNode* n) { c.out(n, c.t_as(n, 0, c.out_dtype(n))); }

// aten::tensor / as_tensor with computed elements: a (nested) list of numbers.
void tensor(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  const TV& v = c.in(n, 0);
  if (v.kind != TV::Kind::List) return c.out(n, c.tensor_as(v, t));
  std::vector<std::string> parts;
  for (const TV& e : v.items) parts.push_back(c.b.unsqueeze(c.tensor_as(e, t), {0}));
  std::string y = c.b.concat(parts, 0);
  c.out(n, c.b.op1("Reshape", {y, c.b.i64s(c.out_shape(n))}));
}

}  // namespace

// aten::meshgrid(tensors[, indexing]): input i, flattened, lies along axis i of the grid ("xy" swaps
// the first two axes) and is expanded to the lengths of all inputs, taken from their shapes so the
// grid follows dynamic sizes (YOLO heads build it from the feature map's own size).
void meshgrid(Ctx& c, const TNode* n) {
  std::vector<TV> in = tensor_list(c, n, 0);
  const TV* ix = c.arg(n, "indexing");
  bool xy = ix && ix->is_const() && ix->c.isString() && ix->c.toStringRef() == "xy" && in.size() >= 2;
  auto axis_of = [&](size_t i) { return xy && i < 2 ? 1 - i : i; };
  size_t r = in.size();
  std::vector<std::string> flat(r), lens(r);
  std::vector<int64_t> static_len(r, -1);
  for (size_t i = 0; i < r; ++i) {
    flat[i] = c.b.reshape(c.tensor(in[i]), {-1});
    size_t a = axis_of(i);
    lens[a] = c.b.shape_of(flat[i]);
    if (in[i].rank_known) {
      int64_t len = 1;
      for (int64_t d : in[i].shape) len = d < 0 || len < 0 ? -1 : len * d;
      static_len[a] = len;
    }
  }
  std::string full = r == 1 ? lens[0] : c.b.concat(lens, 0);
  std::vector<TV> out;
  for (size_t i = 0; i < r; ++i) {
    std::vector<int64_t> along(r, 1);
    along[axis_of(i)] = -1;
    TV g = TV::tensor(c.b.op1("Expand", {c.b.reshape(flat[i], along), full}), c.dtype_of(in[i]));
    g.rank_known = true;
    g.shape = static_len;
    out.push_back(g);
  }
  c.set(n->output(), TV::list(out));
}

// Sparse COO tensors are held densely. torch.sparse_coo_tensor(indices [ndim, nnz], values [nnz,
// dense dims...], size) is the dense tensor with each entry's values added at its index: ScatterND
// with reduction add (opset 16), so duplicate indices sum as coalescing sums them. Without a size,
// each sparse dim is one past its largest index. Sparse products and sums are then the dense ones
// (_sparse_mm, mm, _sparse_sum), and to_dense / coalesce give the value itself. The ONNX model holds
// the dense size: a graph's adjacency of N nodes takes N x N elements.
void sparse_coo_tensor(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string idx = c.t_as(n, 0, DType::Int64);
  std::string vals = c.t_as(n, 1, t);
  std::string shape;
  if (n->inputs().size() > 2 && n->input(2)->type()->cast<c10::ListType>()) {
    shape = c.ints_tensor(c.in(n, 2));
  } else {
    std::string sparse = c.b.op1("Add", {c.b.reduce("ReduceMax", idx, {1}, false), c.b.i64s({1})});
    std::string dense = c.b.slice(c.b.shape_of(vals), {1}, {std::numeric_limits<int64_t>::max()}, {0});
    shape = c.b.concat({sparse, dense}, 0);
  }
  std::string zeros = filled(c, shape, 0, t);
  c.out(n, c.b.op1("ScatterND", {zeros, c.b.transpose(idx, {1, 0}), vals}, {Attribute::make_string("reduction", "add")}));
}
void sparse_mm(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, c.b.op1("MatMul", {c.t_as(n, 0, t), c.t_as(n, 1, t)}));
}
void sparse_sum(Ctx& c, const TNode* n) {
  std::vector<int64_t> dims = n->inputs().size() > 1 && n->input(1)->type()->cast<c10::ListType>() ? c.ints(n, 1)
                                                                                                   : std::vector<int64_t>{};
  c.out(n, c.b.reduce("ReduceSum", c.t_as(n, 0, c.out_dtype(n)), dims, false));
}
void dense_value(Ctx& c, const TNode* n) { c.out(n, c.t_as(n, 0, c.out_dtype(n))); }

void register_creation_ops(OpTable& t) {
  t["aten::zeros"] = {zeros};
  t["aten::sparse_coo_tensor"] = {sparse_coo_tensor, 16};
  t["aten::_sparse_coo_tensor_unsafe"] = {sparse_coo_tensor, 16};
  t["aten::_sparse_mm"] = {sparse_mm};
  t["aten::_sparse_sum"] = {sparse_sum};
  t["aten::to_dense"] = {dense_value};
  t["aten::coalesce"] = {dense_value};
  t["aten::empty"] = {zeros};
  t["aten::empty_strided"] = {zeros};
  t["aten::ones"] = {ones};
  t["aten::full"] = {full};
  t["aten::zeros_like"] = {zeros_like};
  t["aten::empty_like"] = {zeros_like};
  t["aten::ones_like"] = {ones_like};
  t["aten::full_like"] = {full_like};
  t["aten::new_zeros"] = {new_zeros};
  t["aten::new_empty"] = {new_zeros};
  t["aten::new_empty_strided"] = {new_zeros};
  t["aten::new_ones"] = {new_ones};
  t["aten::new_full"] = {new_full};
  t["aten::fill"] = {fill};
  t["aten::arange"] = {arange};
  t["aten::rand"] = {rand};
  t["aten::randn"] = {randn};
  t["aten::rand_like"] = {rand_like};
  t["aten::randn_like"] = {randn_like};
  t["aten::eye"] = {eye};
  t["aten::tril"] = {tril};
  t["aten::triu"] = {triu};
  t["aten::scalar_tensor"] = {scalar_tensor};
  t["aten::tensor"] = {tensor};
  t["aten::as_tensor"] = {tensor};
  t["aten::meshgrid"] = {meshgrid};
}

}  // namespace t2o
