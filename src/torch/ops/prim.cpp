// prim:: ops and the scalar/list plumbing of TorchScript (sizes, numbers, lists, casts).
#include <algorithm>
#include <functional>

#include "torch/ops/ops.h"

namespace t2o {
namespace {

void identity(Ctx& c, const TNode* n) {
  TV v = c.in(n, 0);
  c.set(n->output(), v);
}

// dropout(x, p, train): the identity at inference; in a training-mode export with train set, ONNX's
// Dropout with training_mode (random, as torch's).
void dropout(Ctx& c, const TNode* n) {
  if (!c.training || !c.is_const(n, 2) || !c.flag(n, 2) || c.f(n, 1) == 0.0) return identity(c, n);
  std::string kind = n->kind().toQualString();
  if (kind != "aten::dropout" && kind != "aten::dropout_")
    throw UnsupportedError(kind + " in a training-mode export (ONNX's Dropout zeroes single elements)");
  c.b.require(12, "dropout in a training-mode export (Dropout with training_mode)");
  c.out(n, c.b.op1("Dropout", {c.t(n, 0), c.b.scalar(c.f(n, 1), DType::Float), c.b.scalar(1, DType::Bool)}));
}

void list_construct(Ctx& c, const TNode* n) {
  std::vector<TV> items;
  for (size_t i = 0; i < n->inputs().size(); ++i) {
    items.push_back(c.in(n, i));
    if (n->input(i)->type()->kind() == c10::TypeKind::ListType) items.back().alias = n->input(i);
  }
  c.set(n->output(), TV::list(items));
}

// The current state of a list element that aliases a list value (TV::alias).
TV current(Ctx& c, const TV& item) {
  if (!item.alias) return c.current_state(item);
  TV v = c.get(item.alias);
  if (!v.alias) v.alias = item.alias;
  return v;
}

std::vector<TV> items_of(Ctx& c, const TNode* n, size_t i) {
  const TV& v = c.in(n, i);
  if (v.kind == TV::Kind::List) {
    std::vector<TV> r;
    for (const TV& e : v.items) r.push_back(current(c, e));
    return r;
  }
  if (v.is_const() && (v.c.isList() || v.c.isTuple())) {
    std::vector<TV> r;
    if (v.c.isList())
      for (const auto& e : v.c.toListRef()) r.push_back(TV::constant(e));
    else
      for (const auto& e : v.c.toTupleRef().elements()) r.push_back(TV::constant(e));
    return r;
  }
  throw UnsupportedError(std::string(n->kind().toQualString()) + " on a list that is not known element-wise");
}

// An element of an ONNX sequence (a list of tensors built in a Loop or If).
TV sequence_at(Ctx& c, const TV& s, const std::string& pos) {
  TV r = TV::tensor(c.b.op1("SequenceAt", {s.name, pos}), s.dtype);
  return r;
}

void list_unpack(Ctx& c, const TNode* n) {
  if (c.in(n, 0).sequence) {
    for (size_t k = 0; k < n->outputs().size(); ++k)
      c.set(n->output(k), sequence_at(c, c.in(n, 0), c.b.i64(static_cast<int64_t>(k))));
    return;
  }
  auto items = items_of(c, n, 0);
  if (items.size() != n->outputs().size()) throw Error("internal: unpack arity mismatch");
  for (size_t k = 0; k < items.size(); ++k) c.set(n->output(k), items[k]);
}

void list_index(Ctx& c, const TNode* n) {
  if (c.in(n, 0).sequence) return c.set(n->output(), sequence_at(c, c.in(n, 0), c.int_tensor(c.in(n, 1))));
  auto items = items_of(c, n, 0);
  if (!c.is_const(n, 1)) {  // a computed index into a list of tensors: read it as a sequence
    if (n->output()->type()->kind() != c10::TypeKind::TensorType)
      throw UnsupportedError("a computed index into a list of numbers");
    DType t = c.out_dtype(n);
    TV seq = to_sequence(c, TV::list(items), t);
    return c.set(n->output(), sequence_at(c, seq, c.int_tensor(c.in(n, 1))));
  }
  int64_t i = c.i(n, 1);
  if (i < 0) i += static_cast<int64_t>(items.size());
  if (i < 0 || i >= static_cast<int64_t>(items.size()))
    throw Error("list index " + std::to_string(c.i(n, 1)) + " out of range for a list of " +
                std::to_string(items.size()) + " items");
  c.set(n->output(), items[static_cast<size_t>(i)]);
}

void list_len(Ctx& c, const TNode* n) {
  const TV& v = c.in(n, 0);
  if (v.kind == TV::Kind::Tensor) {  // len(tensor): first dim
    if (v.rank_known && !v.shape.empty() && v.shape[0] >= 0) return c.set(n->output(), TV::constant(v.shape[0]));
    if (!v.sequence) return c.out(n, c.b.dim(v.name, 0));
    TV r = TV::tensor(c.b.op1("SequenceLength", {v.name}), DType::Int64);
    r.number = true;
    r.rank_known = true;
    return c.set(n->output(), r);
  }
  c.set(n->output(), TV::constant(static_cast<int64_t>(items_of(c, n, 0).size())));
}

// Static dims become constants; dynamic ones Shape/Gather, so the graph keeps working at other sizes.
TV size_of(Ctx& c, const TV& x, int64_t d) {
  int rank = static_cast<int>(x.shape.size());
  d = norm_axis(d, rank);
  if (x.is_const()) return TV::constant(x.c.toTensor().size(d));
  if (x.rank_known && x.shape.at(static_cast<size_t>(d)) >= 0) return TV::constant(x.shape[static_cast<size_t>(d)]);
  TV r = TV::tensor(c.b.dim(x.name, d), DType::Int64);
  r.number = true;
  r.rank_known = true;
  return r;
}

void size(Ctx& c, const TNode* n) {
  const TV& x = c.in(n, 0);
  if (!x.is_const() && !x.rank_known) throw UnsupportedError("aten::size on a tensor of unknown rank");
  if (n->inputs().size() > 1) return c.set(n->output(), size_of(c, x, c.i(n, 1)));
  int rank = x.is_const() ? static_cast<int>(x.c.toTensor().dim()) : static_cast<int>(x.shape.size());
  std::vector<TV> items;
  for (int d = 0; d < rank; ++d) items.push_back(size_of(c, x, d));
  c.set(n->output(), TV::list(items));
}

// A traced x.shape read as a tensor (torchvision's detectors under tracing): Shape, never the traced sizes.
void shape_as_tensor(Ctx& c, const TNode* n) { c.out(n, c.b.shape_of(c.t(n, 0))); }

void dim(Ctx& c, const TNode* n) { c.set(n->output(), TV::constant(static_cast<int64_t>(c.rank(n, 0)))); }

void numel(Ctx& c, const TNode* n) {
  const TV& x = c.in(n, 0);
  int64_t p = 1;
  for (int64_t s : x.shape) p = s < 0 || p < 0 ? -1 : p * s;
  if (p >= 0) return c.set(n->output(), TV::constant(p));
  c.out(n, c.b.reduce("ReduceProd", c.b.shape_of(x.name), {}, false));
}

void num_to_tensor(Ctx& c, const TNode* n) {
  c.set(n->output(), TV::tensor(c.t(n, 0), c.dtype(n, 0)));
}

// aten::Int / Float / Bool: a 0-d tensor (or number) to a TorchScript number.
void to_number(Ctx& c, const TNode* n) {
  DType want = c.out_dtype(n);
  const TV& v = c.in(n, 0);
  std::string x = c.tensor_as(v, want);
  if (v.rank_known && !v.shape.empty()) x = c.b.reshape(x, {});
  c.out(n, x);
}

// prim::tolist(x, dim, elem_type): a tensor of static shape as a (nested) list of Python numbers,
// each a 0-d value read by Gather.
void tolist(Ctx& c, const TNode* n) {
  auto shape = c.shape(n, 0);
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) throw UnsupportedError("prim::tolist of a tensor with dynamic dims");
    count *= d;
  }
  if (count > 4096) throw UnsupportedError("prim::tolist of more than 4096 elements");
  DType src = c.dtype(n, 0);
  DType t = src == DType::Bool ? DType::Bool : dtype_is_float(src) ? DType::Float : DType::Int64;
  std::function<TV(const std::string&, size_t)> build = [&](const std::string& v, size_t d) -> TV {
    if (d == shape.size()) {
      TV r = TV::tensor(v, t);
      r.number = true;
      r.rank_known = true;
      return r;
    }
    std::vector<TV> items;
    for (int64_t i = 0; i < shape[d]; ++i)
      items.push_back(build(c.b.op1("Gather", {v, c.b.i64(i)}, {Attribute::make_int("axis", 0)}), d + 1));
    return TV::list(items);
  };
  c.set(n->output(), build(c.t_as(n, 0, t), 0));
}

void is_none(Ctx& c, const TNode* n) {
  bool a = c.is_none(n, 0), b = c.is_none(n, 1);
  bool is = n->kind() == c10::Symbol::fromQualString("aten::__is__");
  // An Optional that control flow may leave None: decided at run time.
  const TV* opt = !c.in(n, 0).has.empty() && b ? &c.in(n, 0) : !c.in(n, 1).has.empty() && a ? &c.in(n, 1) : nullptr;
  if (opt) return c.out(n, is ? c.b.op1("Not", {opt->has}) : c.b.op1("Identity", {opt->has}));
  bool same = a && b;
  if (!a && !b) {
    // Identity of two tensors: the same ONNX value means the same object (MHA's `query is key`).
    const TV& x = c.in(n, 0);
    const TV& y = c.in(n, 1);
    if (x.kind != TV::Kind::Tensor || y.kind != TV::Kind::Tensor)
      throw UnsupportedError("aten::__is__ between two non-tensor values");
    same = x.name == y.name;
  }
  c.set(n->output(), TV::constant(is ? same : !same));
}

void not_(Ctx& c, const TNode* n) { c.out(n, c.b.op1("Not", {c.t_as(n, 0, DType::Bool)})); }

void nothing(Ctx&, const TNode*) {}

// list.append mutates the list value itself; later readers of the list see the new element.
void append(Ctx& c, const TNode* n) {
  TV& list = c.get_mut(n->input(0));
  if (list.is_const() && list.c.isList()) {
    std::vector<TV> items;
    for (const auto& e : list.c.toListRef()) items.push_back(TV::constant(e));
    list = TV::list(items);
  }
  if (list.sequence) {
    TV s = list;
    s.name = c.b.op1("SequenceInsert", {list.name, c.tensor_as(c.in(n, 1), list.dtype)});
    list = s;
    return c.set(n->output(), s);
  }
  if (list.kind != TV::Kind::List) throw UnsupportedError("aten::append to a list that is not known element-wise");
  list.items.push_back(c.in(n, 1));
  c.set(n->output(), list);
}

// Element-wise known lists changed in place: pop, del, insert (constant positions).
std::vector<TV>& mutable_items(Ctx& c, const TNode* n) {
  TV& list = c.get_mut(n->input(0));
  if (list.is_const() && list.c.isList()) {
    std::vector<TV> items;
    for (const auto& e : list.c.toListRef()) items.push_back(TV::constant(e));
    list = TV::list(items);
  }
  if (list.kind != TV::Kind::List)
    throw UnsupportedError(std::string(n->kind().toQualString()) + " on a list that is not known element-wise");
  return list.items;
}

size_t list_pos(Ctx& c, const TNode* n, size_t i, size_t len, bool end_ok, int64_t dflt) {
  int64_t k = i < n->inputs().size() ? c.i(n, i) : dflt;
  if (k < 0) k += static_cast<int64_t>(len);
  if (k < 0 || k > static_cast<int64_t>(len) || (!end_ok && k == static_cast<int64_t>(len)))
    throw UnsupportedError(std::string(n->kind().toQualString()) + " index out of range");
  return static_cast<size_t>(k);
}

void list_pop(Ctx& c, const TNode* n) {
  auto& items = mutable_items(c, n);
  size_t k = list_pos(c, n, 1, items.size(), false, -1);
  TV v = items[k];
  items.erase(items.begin() + static_cast<long>(k));
  c.set(n->output(), v);
}

void list_delete(Ctx& c, const TNode* n) {
  auto& items = mutable_items(c, n);
  items.erase(items.begin() + static_cast<long>(list_pos(c, n, 1, items.size(), false, 0)));
}

void list_insert(Ctx& c, const TNode* n) {
  auto& items = mutable_items(c, n);
  // Python's insert clamps the position.
  int64_t k = c.i(n, 1), len = static_cast<int64_t>(items.size());
  if (k < 0) k = std::max<int64_t>(0, k + len);
  k = std::min(k, len);
  items.insert(items.begin() + static_cast<long>(k), c.in(n, 2));
}

void list_reverse(Ctx& c, const TNode* n) {
  auto& items = mutable_items(c, n);
  std::reverse(items.begin(), items.end());
}

void list_clear(Ctx& c, const TNode* n) { mutable_items(c, n).clear(); }

void list_extend(Ctx& c, const TNode* n) {
  auto more = items_of(c, n, 1);
  auto& items = mutable_items(c, n);
  items.insert(items.end(), more.begin(), more.end());
}

// Number comparisons of list elements (int, float, bool lists): a 0-d tensor, or a constant when
// both sides are known.
DType list_elem_dtype(const TValue* list) {
  auto lt = list->type()->cast<c10::ListType>();
  auto k = lt ? lt->getElementType()->kind() : c10::TypeKind::AnyType;
  return k == c10::TypeKind::FloatType ? DType::Double : k == c10::TypeKind::BoolType ? DType::Bool : DType::Int64;
}

// x in list: constant when every element and x are, else Or over Equal.
void list_contains(Ctx& c, const TNode* n) {
  auto items = items_of(c, n, 0);
  const TV& x = c.in(n, 1);
  bool all_const = x.is_const();
  for (const TV& e : items) all_const = all_const && e.is_const();
  if (all_const) {
    bool found = false;
    for (const TV& e : items) found = found || e.c == x.c;
    return c.set(n->output(), TV::constant(found));
  }
  DType t = list_elem_dtype(n->input(0));
  if (t == DType::Bool) t = DType::Int64;
  std::string xv = c.tensor_as(x, t), any;
  for (const TV& e : items) {
    std::string eq = c.b.op1("Equal", {c.tensor_as(e, t), xv});
    any = any.empty() ? eq : c.b.op1("Or", {any, eq});
  }
  if (any.empty()) return c.set(n->output(), TV::constant(false));
  TV r = TV::tensor(any, DType::Bool);
  r.number = true;
  r.rank_known = true;
  c.set(n->output(), r);
}

void list_count(Ctx& c, const TNode* n) {
  auto items = items_of(c, n, 0);
  const TV& x = c.in(n, 1);
  int64_t k = 0;
  for (const TV& e : items) {
    if (!e.is_const() || !x.is_const()) throw UnsupportedError("list.count of computed values");
    k += e.c == x.c ? 1 : 0;
  }
  c.set(n->output(), TV::constant(k));
}

}  // namespace

// list.sort() on numbers known at conversion time (aten::sort on a list; tensors go to sort).
bool list_sort(Ctx& c, const TNode* n) {
  if (!is_list_value(n, 0)) return false;
  auto& items = mutable_items(c, n);
  for (const TV& e : items)
    if (!e.is_const() || !(e.c.isInt() || e.c.isDouble() || e.c.isBool()))
      throw UnsupportedError("list.sort of computed values");
  bool desc = n->inputs().size() > 1 && c.flag(n, 1);
  std::stable_sort(items.begin(), items.end(), [&](const TV& a, const TV& b) {
    double x = a.c.isDouble() ? a.c.toDouble() : static_cast<double>(a.c.isBool() ? a.c.toBool() : a.c.toInt());
    double y = b.c.isDouble() ? b.c.toDouble() : static_cast<double>(b.c.isBool() ? b.c.toBool() : b.c.toInt());
    return desc ? x > y : x < y;
  });
  return true;
}

namespace {

void none_out(Ctx& c, const TNode* n) {
  for (const TValue* o : n->outputs()) c.set(o, TV::constant(c10::IValue()));
}

void prim_dtype(Ctx& c, const TNode* n) {
  c.set(n->output(), TV::constant(static_cast<int64_t>(scalar_type_from_dtype(c.dtype(n, 0)))));
}

void prim_device(Ctx& c, const TNode* n) { c.set(n->output(), TV::constant(c10::Device(c10::kCPU))); }
// aten::copy_(self, src) / zero_(self): self's dtype and shape (src broadcast to it). The write
// reaches the tensor self views through Ctx::write_through. A traced `x[...] = v` records v
// expanded to the target's sizes as constants (Python's setitem broadcasts with the sizes of that
// run); the target's sizes may change at run time, so v itself is broadcast to the target. That never changes a valid result: an expand is a broadcast, so
// broadcasting its result or its input to the target agree whenever the expand was valid.
void copy(Ctx& c, const TNode* n) {
  DType t = c.dtype(n, 0);
  const TV* src = &c.in(n, 1);
  const TNode* e = n->input(1)->node();
  auto constant_sizes = [&] {
    const TV& s = c.in(e, 1);
    return s.is_const() || (s.kind == TV::Kind::List &&
                            std::all_of(s.items.begin(), s.items.end(), [](const TV& i) { return i.is_const(); }));
  };
  if (e->kind() == c10::Symbol::fromQualString("aten::expand") && constant_sizes() && c.in(e, 0).kind != TV::Kind::List)
    src = &c.in(e, 0);
  TV collapsed;
  if (src->is_const() && src->c.isTensor()) {
    // The same when TorchScript folded that expand into a constant: its expanded dims (stride 0)
    // hold one value each and become 1, to broadcast to the target's run-time sizes.
    at::Tensor v = src->c.toTensor();
    bool expanded = false;
    for (int64_t d = 0; d < v.dim(); ++d)
      if (v.stride(d) == 0 && v.size(d) > 1) {
        v = v.narrow(d, 0, 1);
        expanded = true;
      }
    if (expanded) {
      collapsed = TV::constant(c10::IValue(v.contiguous()));
      src = &collapsed;
    }
  }
  c.out(n, c.b.op1("Expand", {c.tensor_as(*src, t), c.b.shape_of(c.t(n, 0))}));
}
void zero(Ctx& c, const TNode* n) {
  c.out(n, c.b.op1("Expand", {c.b.scalar(0, c.dtype(n, 0)), c.b.shape_of(c.t(n, 0))}));
}

// device.type: conversion runs on the CPU ("batch_sizes should always be on CPU" checks).
void device_type(Ctx& c, const TNode* n) { c.set(n->output(), TV::constant(std::string("cpu"))); }

// Strings only feed assertion and warning messages, which the ONNX graph does not keep.
void message(Ctx& c, const TNode* n) { c.set(n->output(), TV::constant(std::string("<message>"))); }

void false_const(Ctx& c, const TNode* n) { c.set(n->output(), TV::constant(false)); }
// The profiling run has grad mode on, so branches taken under it are the ones with known types.
void true_const(Ctx& c, const TNode* n) { c.set(n->output(), TV::constant(true)); }

void is_floating_point(Ctx& c, const TNode* n) { c.set(n->output(), TV::constant(dtype_is_float(c.dtype(n, 0)))); }

// aten::to / type_as / casts: only the dtype matters on CPU.
void to(Ctx& c, const TNode* n) {
  DType want = c.out_dtype(n);
  c.out(n, c.t_as(n, 0, want));
}

// prim::min / prim::max of two numbers or of a list of them (enumerate() over a list of tensors
// takes min(len, ...) as its trip count).
template <bool IsMax>
void number_min_max(Ctx& c, const TNode* n) {
  std::vector<TV> xs = n->inputs().size() == 1 ? items_of(c, n, 0) : std::vector<TV>{c.in(n, 0), c.in(n, 1)};
  if (xs.empty()) throw Error(std::string(n->kind().toQualString()) + "() of an empty list");
  if (std::all_of(xs.begin(), xs.end(), [](const TV& x) { return x.is_const(); })) {
    c10::IValue best = xs[0].c;
    for (const TV& x : xs) {
      double v = x.c.toScalar().toDouble(), b = best.toScalar().toDouble();
      if (IsMax ? v > b : v < b) best = x.c;
    }
    return c.set(n->output(), TV::constant(best));
  }
  DType t = c.out_dtype(n);
  std::vector<std::string> parts;
  for (const TV& x : xs) parts.push_back(c.tensor_as(x, t));
  TV r = TV::tensor(parts.size() == 1 ? parts[0] : c.b.op1(IsMax ? "Max" : "Min", parts), t);
  r.number = true;
  r.rank_known = true;
  c.set(n->output(), r);
}

// prim::isinstance[types=...](x), from x's static type; where that is a union (Optional, Union, Any),
// from what x holds at conversion time. Lists, tuples and dicts match by kind: `isinstance(x, list)`
// names no element type.
void isinstance(Ctx& c, const TNode* n) {
  c10::TypePtr have = n->input()->type();
  auto k = have->kind();
  if (k == c10::TypeKind::UnionType || k == c10::TypeKind::OptionalType || k == c10::TypeKind::AnyType) {
    const TV& v = c.in(n, 0);
    if (v.is_const()) have = v.c.type();
    else if (v.kind == TV::Kind::Tensor) have = v.sequence ? c10::TypePtr(c10::ListType::ofTensors()) : c10::TensorType::get();
    else throw UnsupportedError("prim::isinstance on a list or tuple held as a union");
  }
  bool r = false;
  for (const c10::TypePtr& want : n->tys(c10::attr::types)) {
    auto wk = want->kind();
    bool container = wk == c10::TypeKind::ListType || wk == c10::TypeKind::TupleType || wk == c10::TypeKind::DictType;
    r = r || (container ? wk == have->kind() : have->isSubtypeOf(*want));
  }
  c.set(n->output(), TV::constant(r));
}

}  // namespace

void list_add(Ctx& c, const TNode* n) {
  const TV &l = c.in(n, 0), &r = c.in(n, 1);
  if (l.sequence || r.sequence) {
    // seq + [items] appends; [items] + seq inserts in front.
    if (l.sequence && r.sequence) throw UnsupportedError("aten::add of two lists built in control flow");
    TV s = l.sequence ? l : r;
    auto items = items_of(c, n, l.sequence ? 1 : 0);
    for (size_t k = 0; k < items.size(); ++k) {
      std::vector<std::string> in{s.name, c.tensor_as(items[k], s.dtype)};
      if (!l.sequence) in.push_back(c.b.i64(static_cast<int64_t>(k)));
      s.name = c.b.op1("SequenceInsert", in);
    }
    return c.set(n->output(), s);
  }
  auto a = items_of(c, n, 0), b = items_of(c, n, 1);
  a.insert(a.end(), b.begin(), b.end());
  c.set(n->output(), TV::list(a));
}

void list_mul(Ctx& c, const TNode* n) {
  const size_t l = is_list_value(n, 0) ? 0 : 1;
  auto items = items_of(c, n, l);
  std::vector<TV> r;
  for (int64_t i = 0, k = c.i(n, 1 - l); i < k; ++i) r.insert(r.end(), items.begin(), items.end());
  c.set(n->output(), TV::list(r));
}

void list_slice(Ctx& c, const TNode* n) {
  auto items = items_of(c, n, 0);
  int64_t len = static_cast<int64_t>(items.size());
  bool computed_bounds = (!c.is_none(n, 1) && !c.is_const(n, 1)) || (!c.is_none(n, 2) && !c.is_const(n, 2));
  bool ints = std::all_of(items.begin(), items.end(), [&](const TV& v) {
    return v.is_const() ? v.c.isInt() : v.kind == TV::Kind::Tensor && c.dtype_of(v) == DType::Int64 && v.rank_known &&
                                            v.shape.empty();
  });
  if (computed_bounds && ints && !c.is_none(n, 3) && c.is_const(n, 3)) {
    // x.shape[1:x.size(2)]: a list of ints cut at computed positions has a run-time length, so it
    // is held as a 1-D int64 tensor (what sizes and shapes take).
    auto bound = [&](size_t i, int64_t dflt) {
      return c.is_none(n, i) ? c.b.i64s({dflt}) : c.b.unsqueeze(c.int_tensor(c.in(n, i)), {0});
    };
    std::string t = c.b.slice_dyn(c.ints_tensor(TV::list(items)), bound(1, 0), bound(2, INT64_MAX), c.b.i64s({0}),
                                  c.b.i64s({c.i(n, 3)}));
    TV r = TV::tensor(t, DType::Int64);
    r.rank_known = true;
    r.shape = {-1};
    return c.set(n->output(), r);
  }
  // Python's slice of a list: negative bounds count from the end, then both clamp to the list.
  int64_t st = c.is_none(n, 3) ? 1 : c.i(n, 3);
  if (st == 0) throw UnsupportedError("list slice with step 0");
  auto clamp = [&](size_t i, int64_t dflt) {
    if (c.is_none(n, i)) return dflt;
    int64_t v = c.i(n, i);
    if (v < 0) v += len;
    return st > 0 ? std::clamp<int64_t>(v, 0, len) : std::clamp<int64_t>(v, -1, len - 1);
  };
  int64_t s = clamp(1, st > 0 ? 0 : len - 1), e = clamp(2, st > 0 ? len : -1);
  std::vector<TV> r;
  for (int64_t i = s; st > 0 ? i < e : i > e; i += st) r.push_back(items[static_cast<size_t>(i)]);
  c.set(n->output(), TV::list(r));
}

void register_prim_ops(OpTable& t) {
  t["prim::ListConstruct"] = {list_construct};
  t["prim::TupleConstruct"] = {list_construct};
  t["prim::ListUnpack"] = {list_unpack};
  t["prim::TupleUnpack"] = {list_unpack};
  t["prim::TupleIndex"] = {list_index};
  t["aten::__getitem__"] = {list_index};
  t["aten::len"] = {list_len};
  t["aten::size"] = {size};
  t["prim::shape"] = {size};
  t["aten::_shape_as_tensor"] = {shape_as_tensor};
  t["aten::dim"] = {dim};
  t["aten::numel"] = {numel};
  t["prim::NumToTensor"] = {num_to_tensor};
  t["aten::Int"] = {to_number};
  t["aten::Float"] = {to_number};
  t["aten::Bool"] = {to_number};
  t["aten::ScalarImplicit"] = {to_number};
  t["aten::IntImplicit"] = {to_number};
  t["aten::FloatImplicit"] = {to_number};
  t["aten::item"] = {to_number};
  t["prim::tolist"] = {tolist};
  t["aten::__is__"] = {is_none};
  t["aten::__isnot__"] = {is_none};
  t["aten::__not__"] = {not_};
  t["prim::unchecked_cast"] = {identity};
  t["prim::isinstance"] = {isinstance};
  t["prim::min"] = {number_min_max<false>};
  t["prim::max"] = {number_min_max<true>};
  t["aten::list"] = {identity};
  t["aten::detach"] = {identity};
  t["aten::contiguous"] = {identity};
  t["aten::clone"] = {identity};
  t["aten::dropout"] = {dropout};
  t["aten::feature_dropout"] = {dropout};
  t["aten::alpha_dropout"] = {dropout};
  t["aten::feature_alpha_dropout"] = {identity};
  t["aten::lift_fresh"] = {identity};
  t["aten::warn"] = {nothing};
  t["aten::format"] = {message};
  t["aten::append"] = {append};
  t["aten::pop"] = {list_pop};
  t["aten::Delete"] = {list_delete};
  t["aten::insert"] = {list_insert};
  t["aten::reverse"] = {list_reverse};
  t["aten::clear"] = {list_clear};
  t["aten::extend"] = {list_extend};
  t["aten::__contains__"] = {list_contains};
  t["aten::count"] = {list_count};
  t["prim::RaiseException"] = {nothing};
  t["prim::Uninitialized"] = {none_out};
  t["prim::dtype"] = {prim_dtype};
  t["prim::device"] = {prim_device};
  t["prim::type"] = {device_type};
  t["aten::cpu"] = {identity};
  t["aten::copy"] = {copy};
  t["aten::zero"] = {zero};
  t["aten::is_floating_point"] = {is_floating_point};
  t["aten::is_autocast_enabled"] = {false_const};
  t["prim::is_cuda"] = {false_const};
  t["prim::is_mkldnn"] = {false_const};
  t["prim::is_nested"] = {false_const};
  t["prim::is_quantized"] = {false_const};
  t["prim::requires_grad"] = {false_const};
  t["aten::is_autocast_cpu_enabled"] = {false_const};
  t["aten::is_grad_enabled"] = {true_const};
  t["aten::to"] = {to};
  t["aten::type_as"] = {to};
  t["aten::float"] = {to};
  t["aten::double"] = {to};
  t["aten::long"] = {to};
  t["aten::int"] = {to};
  t["aten::bool"] = {to};
  t["aten::half"] = {to};
}

}  // namespace t2o
