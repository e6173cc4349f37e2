// Tensor creation: zeros/ones/full/empty (+ _like, new_), arange, random, eye, tril/triu.
#include <set>

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

std::string filled(Ctx& c, const std::string& shape, double value, DType t) {
  Tensor v(t, {1});
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      v.data<T>()[0] = T(static_cast<float>(value));
    else
      v.data<T>()[0] = static_cast<T>(value);
  });
  return c.b.op1("ConstantOfShape", {shape}, {Attribute::make_tensor("value", v)});
}

// aten::zeros/ones/empty(size, dtype, layout, device, pin) and full(size, value, ...)
void zeros(Ctx& c, const TNode* n) {
  if (!const_fill(c, n, c.in(n, 0), 0)) c.out(n, filled(c, c.ints_tensor(c.in(n, 0)), 0, c.out_dtype(n)));
}
void ones(Ctx& c, const TNode* n) {
  if (!const_fill(c, n, c.in(n, 0), 1)) c.out(n, filled(c, c.ints_tensor(c.in(n, 0)), 1, c.out_dtype(n)));
}
void full(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string shape = c.ints_tensor(c.in(n, 0));
  if (c.is_const(n, 1)) return c.out(n, filled(c, shape, c.f(n, 1), t));
  c.out(n, c.b.op1("Expand", {c.t_as(n, 1, t), shape}));
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
  if (!const_fill(c, n, c.in(n, 1), 0)) c.out(n, filled(c, c.ints_tensor(c.in(n, 1)), 0, c.out_dtype(n)));
}
void new_ones(Ctx& c, const TNode* n) {
  if (!const_fill(c, n, c.in(n, 1), 1)) c.out(n, filled(c, c.ints_tensor(c.in(n, 1)), 1, c.out_dtype(n)));
}
void new_full(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string shape = c.ints_tensor(c.in(n, 1));
  if (c.is_const(n, 2)) return c.out(n, filled(c, shape, c.f(n, 2), t));
  c.out(n, c.b.op1("Expand", {c.t_as(n, 2, t), shape}));
}
void fill(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, c.b.op1("Expand", {c.t_as(n, 1, t), c.b.shape_of(c.t(n, 0))}));
}

// aten::arange(end | start, end | start, end, step, dtype, layout, device, pin)
void arange(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  size_t nums = n->inputs().size() >= 4 ? n->inputs().size() - 4 : n->inputs().size();
  // arange.start_out-like overloads: count the leading number arguments.
  nums = 0;
  for (const TValue* v : n->inputs()) {
    auto k = v->type()->kind();
    if (k == c10::TypeKind::IntType || k == c10::TypeKind::FloatType || k == c10::TypeKind::NumberType ||
        k == c10::TypeKind::TensorType)
      ++nums;
    else
      break;
  }
  std::vector<const TV*> a;
  for (size_t i = 0; i < nums; ++i) a.push_back(&c.in(n, i));
  bool all_const = true;
  for (const TV* v : a) all_const = all_const && v->is_const();
  if (all_const || c.b.opset() < 11) {
    if (!all_const) c.b.require(11, "arange with computed bounds (Range)");
    at::Tensor r = nums == 1   ? at::arange(a[0]->c.toScalar())
                   : nums == 2 ? at::arange(a[0]->c.toScalar(), a[1]->c.toScalar())
                               : at::arange(a[0]->c.toScalar(), a[1]->c.toScalar(), a[2]->c.toScalar());
    return c.out(n, c.b.constant(tensor_from_torch(r.to(scalar_type_from_dtype(t))), "arange"));
  }
  std::string start = nums >= 2 ? c.tensor_as(*a[0], t) : c.b.scalar(0, t);
  std::string limit = c.tensor_as(*a[nums >= 2 ? 1 : 0], t);
  std::string delta = nums == 3 ? c.tensor_as(*a[2], t) : c.b.scalar(1, t);
  auto to_scalar = [&](const std::string& x, const TV& v) { return v.rank_known && !v.shape.empty() ? c.b.reshape(x, {}) : x; };
  if (nums >= 2) start = to_scalar(start, *a[0]);
  limit = to_scalar(limit, *a[nums >= 2 ? 1 : 0]);
  c.out(n, c.b.op1("Range", {start, limit, delta}));
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
  int64_t rows = c.i(n, 0);
  int64_t cols = n->input(1)->type()->kind() == c10::TypeKind::IntType ? c.i(n, 1) : rows;
  at::Tensor e = at::eye(rows, cols, at::TensorOptions().dtype(scalar_type_from_dtype(c.out_dtype(n))));
  c.out(n, c.b.constant(tensor_from_torch(e), "eye"));
}

void tri(Ctx& c, const TNode* n, bool upper) {
  int64_t k = n->inputs().size() > 1 ? c.i(n, 1) : 0;
  std::string x = c.t(n, 0);
  if (c.b.opset() >= 14)
    return c.out(n, c.b.op1("Trilu", {x, c.b.i64(k)}, {Attribute::make_int("upper", upper)}));
  auto shape = c.shape(n, 0);
  int64_t rows = shape.at(shape.size() - 2), cols = shape.back();
  if (rows < 0 || cols < 0) c.b.require(14, "tril/triu on dynamic sizes (Trilu)");
  at::Tensor ones = at::ones({rows, cols}, at::kBool);
  at::Tensor mask = upper ? at::triu(ones, k) : at::tril(ones, k);
  DType t = c.dtype(n, 0);
  c.out(n, c.b.op1("Where", {c.b.constant(tensor_from_torch(mask), "mask"), x, c.b.scalar(0, t)}));
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

void register_creation_ops(OpTable& t) {
  t["aten::zeros"] = {zeros};
  t["aten::empty"] = {zeros};
  t["aten::ones"] = {ones};
  t["aten::full"] = {full};
  t["aten::zeros_like"] = {zeros_like};
  t["aten::empty_like"] = {zeros_like};
  t["aten::ones_like"] = {ones_like};
  t["aten::full_like"] = {full_like};
  t["aten::new_zeros"] = {new_zeros};
  t["aten::new_empty"] = {new_zeros};
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
}

}  // namespace t2o
