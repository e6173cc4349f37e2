// Shape ops: view/reshape/flatten/permute/transpose/squeeze/unsqueeze/expand/repeat,
// cat/stack/split/chunk/unbind, slicing (steps, negatives), select/narrow/flip/roll.
#include <algorithm>
#include <climits>

#include "torch/ops/compose.h"
#include "torch/ops/ops.h"

namespace t2o {
namespace {

void reshape(Ctx& c, const TNode* n) {
  c.out(n, c.b.op1("Reshape", {c.t(n, 0), c.ints_tensor(c.in(n, 1))}));
}

void reshape_as(Ctx& c, const TNode* n) {
  c.out(n, c.b.op1("Reshape", {c.t(n, 0), c.b.shape_of(c.t(n, 1))}));
}

// Known output shape: a constant when static, else the dims of `x` kept via Shape.
std::string shape_tensor(Ctx& c, const std::vector<int64_t>& shape, const std::string& like) {
  bool st = true;
  for (int64_t s : shape) st = st && s >= 0;
  if (st) return c.b.i64s(shape);
  (void)like;
  return {};
}

void flatten(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  int64_t s = norm_axis(c.i(n, 1), std::max(r, 1)), e = norm_axis(c.i(n, 2), std::max(r, 1));
  std::string x = c.t(n, 0);
  if (r == 0) return c.out(n, c.b.reshape(x, {1}));
  if (e == r - 1) {
    if (s == 0) return c.out(n, c.b.reshape(x, {-1}));
    // ONNX Flatten gives 2-D; torch keeps the leading dims, so use Reshape with 0 (copy) dims.
    std::vector<int64_t> shape(static_cast<size_t>(s), 0);
    shape.push_back(-1);
    return c.out(n, c.b.reshape(x, shape));
  }
  std::vector<int64_t> out = c.out_shape(n);
  std::string st = shape_tensor(c, out, x);
  if (!st.empty()) return c.out(n, c.b.op1("Reshape", {x, st}));
  std::vector<int64_t> shape(static_cast<size_t>(s), 0);
  shape.push_back(-1);
  for (int64_t i = e + 1; i < r; ++i) shape.push_back(0);
  c.out(n, c.b.reshape(x, shape));
}

void permute(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  if (r <= 1) return c.out(n, c.t(n, 0));
  auto p = c.ints(n, 1);
  for (auto& v : p) v = norm_axis(v, r);
  c.out(n, c.b.transpose(c.t(n, 0), p));
}

void transpose(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  if (r < 2) return c.out(n, c.t(n, 0));
  int64_t a = norm_axis(c.i(n, 1), r), b = norm_axis(c.i(n, 2), r);
  std::vector<int64_t> p;
  for (int i = 0; i < r; ++i) p.push_back(i);
  std::swap(p[static_cast<size_t>(a)], p[static_cast<size_t>(b)]);
  if (a == b) return c.out(n, c.t(n, 0));
  c.out(n, c.b.transpose(c.t(n, 0), p));
}

// A dynamic dim is squeezed when it was 1 in the profiling runs; the output rank (which cannot
// vary between runs) says whether that happened.
// Removes the dims of x (rank r) that are 1 and marked in the bool [r] tensor `candidate`: which
// dims go is decided at run time, so the output's rank may depend on the input's sizes.
std::string squeeze_where_one(Ctx& c, const std::string& x, int r, const std::string& candidate) {
  std::string s = c.b.shape_of(x);
  std::string drop = c.b.op1("And", {c.b.op1("Equal", {s, c.b.i64(1)}), candidate});
  std::string kept = c.b.op1("Compress", {positions(c, r), c.b.op1("Not", {drop})},
                             {Attribute::make_int("axis", 0)});
  std::vector<Attribute> attrs;
  if (c.b.opset() >= 14) attrs.push_back(Attribute::make_int("allowzero", 1));
  return c.b.op1("Reshape", {x, c.b.op1("Gather", {s, kept})}, attrs);
}

void squeeze(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  auto shape = c.shape(n, 0);
  if (n->inputs().size() > 1 && !c.is_const(n, 1)) {
    // A computed dim: dim + r when negative, compared with every axis.
    std::string d = c.int_tensor(c.in(n, 1));
    d = c.b.op1("Add", {d, c.b.op1("Mul", {c.b.cast(c.b.op1("Less", {d, c.b.i64(0)}), DType::Int64), c.b.i64(r)})});
    return c.out(n, squeeze_where_one(c, c.t(n, 0), r, c.b.op1("Equal", {positions(c, r), c.b.reshape(d, {})})));
  }
  std::vector<int64_t> cand;
  if (n->inputs().size() > 1) {
    for (int64_t d : c.ints(n, 1)) cand.push_back(norm_axis(d, std::max(r, 1)));
  } else {
    for (int i = 0; i < r; ++i) cand.push_back(i);
  }
  std::vector<int64_t> axes, dynamic;
  for (int64_t d : cand) {
    if (r == 0) continue;
    int64_t len = shape[static_cast<size_t>(d)];
    if (len == 1) axes.push_back(d);
    if (len < 0) dynamic.push_back(d);
  }
  if (!dynamic.empty()) {
    // Whether a dynamic dim is 1 is known only at run time: the dims kept are chosen then (the
    // output's rank is what the profiling runs saw, when they agreed).
    std::vector<double> candidate(static_cast<size_t>(r), 0.0);
    for (int64_t d : cand) candidate[static_cast<size_t>(d)] = 1.0;
    return c.out(n, squeeze_where_one(c, c.t(n, 0), r, c.b.vec(candidate, DType::Bool)));
  }
  if (axes.empty()) return c.out(n, c.t(n, 0));
  c.out(n, c.b.squeeze(c.t(n, 0), axes));
}

void unsqueeze(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  if (!c.is_const(n, 1)) {  // a computed dim: Unsqueeze takes axes as an input from opset 13
    c.b.require(13, "aten::unsqueeze of a computed dim (Unsqueeze with axes as an input)");
    const TV& d = c.in(n, 1);
    std::string axes = c.int_tensor(d);
    if (!(d.rank_known && d.shape.size() == 1)) axes = c.b.unsqueeze(axes, {0});
    return c.out(n, c.b.op1("Unsqueeze", {c.t(n, 0), axes}));
  }
  c.out(n, c.b.unsqueeze(c.t(n, 0), {norm_axis(c.i(n, 1), r + 1)}));
}

// A computed size of -1 keeps the input's size: 1 for Expand, whose broadcasting does the same.
std::string keep_sizes(Ctx& c, const std::string& shape) {
  return c.b.op1("Where", {c.b.op1("Equal", {shape, c.b.i64(-1)}), c.b.i64(1), shape});
}

void expand(Ctx& c, const TNode* n) {
  const TV& sz = c.in(n, 1);
  std::string shape;
  if (sz.is_const() || (sz.kind == TV::Kind::List)) {
    // -1 keeps a size; Expand's broadcasting does the same with 1.
    TV fixed = sz;
    if (fixed.is_const()) {
      auto v = fixed.c.toIntVector();
      for (auto& e : v)
        if (e == -1) e = 1;
      shape = c.b.i64s(v);
    } else {
      bool computed = false;
      for (auto& e : fixed.items) {
        if (e.is_const() && e.c.toInt() == -1) e = TV::constant(int64_t{1});
        computed = computed || !e.is_const();
      }
      shape = c.ints_tensor(fixed);
      if (computed) shape = keep_sizes(c, shape);
    }
  } else {
    shape = keep_sizes(c, c.ints_tensor(sz));
  }
  c.out(n, c.b.op1("Expand", {c.t(n, 0), shape}));
}

void expand_as(Ctx& c, const TNode* n) {
  c.out(n, c.b.op1("Expand", {c.t(n, 0), c.b.shape_of(c.t(n, 1))}));
}

void repeat(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  const TV& rv = c.in(n, 1);
  // The repeat counts, constant or computed (their number is always known).
  size_t count = rv.is_const() ? c.ints(n, 1).size() : rv.kind == TV::Kind::List ? rv.items.size() : 0;
  if (count == 0 && !rv.is_const()) throw UnsupportedError("aten::repeat with repeats of unknown length");
  std::string x = c.t(n, 0);
  std::string reps = rv.is_const() ? c.b.i64s(c.ints(n, 1)) : c.ints_tensor(rv);
  if (static_cast<int>(count) < r) {  // torch.tile: missing leading counts are 1
    if (n->kind() != c10::Symbol::fromQualString("aten::tile"))
      throw UnsupportedError("aten::repeat with fewer counts than dims");
    reps = c.b.concat({c.b.i64s(std::vector<int64_t>(static_cast<size_t>(r) - count, 1)), reps}, 0);
  }
  if (static_cast<int>(count) > r) {
    std::vector<int64_t> axes;
    for (int i = 0; i < static_cast<int>(count) - r; ++i) axes.push_back(i);
    x = c.b.unsqueeze(x, axes);
  }
  c.out(n, c.b.op1("Tile", {x, reps}));
}

void cat(Ctx& c, const TNode* n) {
  if (c.in(n, 0).sequence) return sequence_concat(c, n, false);
  DType t = c.out_dtype(n);
  int r = c.out_rank(n);
  std::vector<std::string> parts;
  for (const TV& e : tensor_list(c, n, 0)) {
    // torch.cat skips empty 1-D tensors (legacy behaviour).
    bool empty_1d = e.is_const() && e.c.isTensor() ? e.c.toTensor().dim() == 1 && e.c.toTensor().size(0) == 0
                                                   : e.rank_known && e.shape.size() == 1 && e.shape[0] == 0;
    if (empty_1d && r != 1) continue;
    parts.push_back(c.tensor_as(e, t));
  }
  c.out(n, c.b.concat(parts, norm_axis(c.i(n, 1), r)));
}

void stack(Ctx& c, const TNode* n) {
  if (c.in(n, 0).sequence) return sequence_concat(c, n, true);
  DType t = c.out_dtype(n);
  int r = c.out_rank(n);
  int64_t axis = norm_axis(c.i(n, 1), r);
  std::vector<std::string> parts;
  for (const TV& e : tensor_list(c, n, 0)) parts.push_back(c.b.unsqueeze(c.tensor_as(e, t), {axis}));
  c.out(n, parts.size() == 1 ? parts[0] : c.b.concat(parts, axis));
}

// nn.utils.rnn.pad_sequence(sequences, batch_first, padding_value): each [L_i, *] tensor padded at
// the end of dim 0 to the longest, stacked on dim 0 (batch first) or 1. Lengths known at conversion
// pad by constants; otherwise by their run-time maximum (Max of int64 needs opset 12).
void pad_sequence(Ctx& c, const TNode* n) {
  if (c.in(n, 0).sequence) throw UnsupportedError("aten::pad_sequence of a list whose length changes at run time");
  DType t = c.out_dtype(n);
  const int64_t axis = c.flag(n, "batch_first", false) ? 0 : 1;
  const double value = c.f(n, "padding_value", 0.0);
  std::vector<TV> items = tensor_list(c, n, 0);
  std::vector<std::string> xs;
  int64_t longest = 0;
  bool static_lengths = true;
  for (const TV& e : items) {
    xs.push_back(c.tensor_as(e, t));
    static_lengths = static_lengths && e.rank_known && !e.shape.empty() && e.shape[0] >= 0;
    if (static_lengths) longest = std::max(longest, e.shape[0]);
  }
  const int k = c.out_rank(n) - 1;  // each item's rank
  std::string longest_dyn;
  if (!static_lengths) {
    c.b.require(12, "pad_sequence of tensors whose lengths change at run time");
    std::vector<std::string> lens;
    for (const std::string& x : xs) lens.push_back(c.b.slice(c.b.shape_of(x), {0}, {1}, {0}));
    longest_dyn = lens.size() == 1 ? lens[0] : c.b.op1("Max", lens);
  }
  std::vector<std::string> parts;
  for (size_t i = 0; i < xs.size(); ++i) {
    std::string padded;
    if (static_lengths) {
      std::vector<int64_t> pads(static_cast<size_t>(2 * k), 0);
      pads[static_cast<size_t>(k)] = longest - items[i].shape[0];
      padded = pads[static_cast<size_t>(k)] == 0 ? xs[i] : c.b.pad(xs[i], pads, "constant", value, t);
    } else {
      std::string end = c.b.op1("Sub", {longest_dyn, c.b.slice(c.b.shape_of(xs[i]), {0}, {1}, {0})});
      std::vector<std::string> pads{c.b.i64s(std::vector<int64_t>(static_cast<size_t>(k), 0)), end};
      if (k > 1) pads.push_back(c.b.i64s(std::vector<int64_t>(static_cast<size_t>(k - 1), 0)));
      padded = c.b.op1("Pad", {xs[i], c.b.concat(pads, 0), c.b.scalar(value, t)},
                       {Attribute::make_string("mode", "constant")});
    }
    parts.push_back(c.b.unsqueeze(padded, {axis}));
  }
  c.out(n, parts.size() == 1 ? parts[0] : c.b.concat(parts, axis));
}

void emit_split(Ctx& c, const TNode* n, const std::vector<int64_t>& sizes, int64_t axis, bool squeeze_parts) {
  std::vector<std::string> parts = sizes.size() == 1 ? std::vector<std::string>{c.t(n, 0)}
                                                     : c.b.split(c.t(n, 0), sizes, axis);
  if (squeeze_parts)
    for (auto& p : parts) p = c.b.squeeze(p, {axis});
  std::vector<TV> items;
  for (const auto& p : parts) items.push_back(TV::tensor(p, c.dtype(n, 0)));
  if (n->outputs().size() == 1 && n->output()->type()->kind() == c10::TypeKind::ListType)
    return c.set(n->output(), TV::list(items));
  for (size_t k = 0; k < n->outputs().size(); ++k) c.set(n->output(k), items.at(k));
}


// How many parts a split produced in the profiling runs (its outputs, or the length of its list).
int64_t part_count(Ctx& c, const TNode* n) {
  if (!(n->outputs().size() == 1 && n->output()->type()->kind() == c10::TypeKind::ListType))
    return static_cast<int64_t>(n->outputs().size());
  const Observed* o = c.observed(n->output());
  if (!o || o->kind != Observed::Kind::List || o->elems.empty())
    throw UnsupportedError(std::string(n->kind().toQualString()) + " into a number of parts that was not observed");
  return static_cast<int64_t>(o->elems.size());
}

// Whether the node returns one list whose length differed between the profiling runs: its parts
// are then an ONNX sequence (their number is only known at run time).
bool part_count_varies(Ctx& c, const TNode* n) {
  // Before opset 11 (no sequences) the parts stay the first run's, right for the parts every size
  // has (p[0], p[1]) but not for len().
  if (c.b.opset() < 11) return false;
  if (!(n->outputs().size() == 1 && n->output()->type()->kind() == c10::TypeKind::ListType)) return false;
  const Observed* o = c.observed(n->output());
  return o && o->kind == Observed::Kind::List && o->varies;
}

// The parts of x along axis as an ONNX sequence: chunks of `step` (0-d int64, the last one
// shorter), or with an empty step single slices with the axis removed (unbind).
void emit_sequence_split(Ctx& c, const TNode* n, const std::string& step, int64_t axis) {
  std::vector<std::string> ins{c.t(n, 0)};
  if (!step.empty()) ins.push_back(step);
  TV r = TV::tensor(c.b.op1("SplitToSequence", ins, {Attribute::make_int("axis", axis),
                                                      Attribute::make_int("keepdims", step.empty() ? 0 : 1)}),
                    c.dtype(n, 0));
  r.sequence = true;
  c.set(n->output(), r);
}

// Parts [i*step, (i+1)*step) of a dynamic axis, the last one open-ended; `step` is a 0-d int64.
void emit_dynamic_split(Ctx& c, const TNode* n, const std::string& step, int64_t count, int64_t axis) {
  if (part_count_varies(c, n)) return emit_sequence_split(c, n, step, axis);
  std::string x = c.t(n, 0), s1 = c.b.unsqueeze(step, {0});
  std::vector<TV> items;
  for (int64_t i = 0; i < count; ++i) {
    std::string start = i == 0 ? c.b.i64s({0}) : c.b.op1("Mul", {s1, c.b.i64s({i})});
    std::string end = i + 1 == count ? c.b.i64s({INT64_MAX}) : c.b.op1("Mul", {s1, c.b.i64s({i + 1})});
    items.push_back(TV::tensor(c.b.slice_dyn(x, start, end, c.b.i64s({axis})), c.dtype(n, 0)));
  }
  if (n->outputs().size() == 1 && n->output()->type()->kind() == c10::TypeKind::ListType)
    return c.set(n->output(), TV::list(items));
  for (size_t k = 0; k < n->outputs().size(); ++k) c.set(n->output(k), items.at(k));
}

// Parts of computed sizes (a traced detector splits its boxes per image by counts read from shapes):
// each part runs from the sum of the sizes before it to that sum plus its own size.
void emit_computed_split(Ctx& c, const TNode* n, const TV& sizes, int64_t axis) {
  std::string x = c.t(n, 0), axes = c.b.i64s({axis});
  std::string start = c.b.i64s({0});
  std::vector<TV> items;
  for (const TV& e : sizes.items) {
    std::string end = c.b.op1("Add", {start, c.b.unsqueeze(c.int_tensor(e), {0})});
    items.push_back(TV::tensor(c.b.slice_dyn(x, start, end, axes), c.dtype(n, 0)));
    start = end;
  }
  if (n->outputs().size() == 1 && n->output()->type()->kind() == c10::TypeKind::ListType)
    return c.set(n->output(), TV::list(items));
  for (size_t k = 0; k < n->outputs().size(); ++k) c.set(n->output(k), items.at(k));
}

// aten::split(x, split_size | sizes, dim), aten::split_with_sizes, aten::chunk, aten::unbind
void split(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  int64_t axis = norm_axis(c.i(n, 2), r);
  const TV& s = c.in(n, 1);
  std::vector<int64_t> sizes;
  if (s.kind == TV::Kind::List && std::any_of(s.items.begin(), s.items.end(), [](const TV& e) { return !e.is_const(); })) {
    c.b.require(10, std::string(n->kind().toQualString()) + " with computed sizes (Slice with inputs)");
    return emit_computed_split(c, n, s, axis);
  }
  if (s.is_const() && s.c.isInt()) {
    int64_t len = c.shape(n, 0).at(static_cast<size_t>(axis)), step = s.c.toInt();
    if (len < 0) return emit_dynamic_split(c, n, c.b.i64(step), part_count(c, n), axis);
    for (int64_t at = 0; at < len; at += step) sizes.push_back(std::min(step, len - at));
  } else {
    sizes = c.ints(n, 1);
  }
  emit_split(c, n, sizes, axis, false);
}

void chunk(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  int64_t axis = norm_axis(c.i(n, 2), r);
  int64_t len = c.shape(n, 0).at(static_cast<size_t>(axis));
  if (!c.is_const(n, 1)) {  // a computed number of chunks: step = ceil(len / chunks)
    std::string k = c.int_tensor(c.in(n, 1));
    std::string l = c.b.dim(c.t(n, 0), axis);
    std::string step = c.b.op1("Div", {c.b.op1("Sub", {c.b.op1("Add", {l, k}), c.b.i64(1)}), k});
    return emit_dynamic_split(c, n, step, part_count(c, n), axis);
  }
  int64_t chunks = c.i(n, 1);
  if (len < 0) {  // step = ceil(len / chunks)
    std::string l = c.b.dim(c.t(n, 0), axis);
    std::string step = c.b.op1("Div", {c.b.op1("Add", {l, c.b.i64(chunks - 1)}), c.b.i64(chunks)});
    return emit_dynamic_split(c, n, step, part_count(c, n), axis);
  }
  int64_t step = (len + chunks - 1) / chunks;
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < len; at += step) sizes.push_back(std::min(step, len - at));
  emit_split(c, n, sizes, axis, false);
}

void unbind(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  int64_t axis = norm_axis(c.i(n, 1), r);
  int64_t len = c.shape(n, 0).at(static_cast<size_t>(axis));
  if (len < 0 && part_count_varies(c, n)) return emit_sequence_split(c, n, "", axis);
  if (len < 0) {  // a dim that varies but always unbinds into the observed number of parts
    int64_t count = part_count(c, n);
    std::vector<TV> items;
    std::string x = c.t(n, 0);
    for (int64_t i = 0; i < count; ++i)
      items.push_back(TV::tensor(c.b.op1("Gather", {x, c.b.i64(i)}, {Attribute::make_int("axis", axis)}), c.dtype(n, 0)));
    if (n->outputs().size() == 1 && n->output()->type()->kind() == c10::TypeKind::ListType)
      return c.set(n->output(), TV::list(items));
    for (size_t k = 0; k < n->outputs().size(); ++k) c.set(n->output(k), items.at(k));
    return;
  }
  emit_split(c, n, std::vector<int64_t>(static_cast<size_t>(len), 1), axis, true);
}

// aten::slice(x, dim, start, end, step)
void slice(Ctx& c, const TNode* n) {
  if (is_list_value(n, 0)) return list_slice(c, n);
  int r = c.rank(n, 0);
  int64_t axis = norm_axis(c.i(n, 1), r);
  int64_t step = c.is_none(n, 4) ? 1 : c.i(n, 4);
  const TV& s = c.in(n, 2);
  const TV& e = c.in(n, 3);
  if ((s.is_const()) && (e.is_const())) {
    int64_t start = s.is_none() ? 0 : s.c.toInt();
    int64_t end = e.is_none() ? INT64_MAX : e.c.toInt();
    if (start == 0 && end == INT64_MAX && step == 1) return c.out(n, c.t(n, 0));
    if (c.b.opset() < 10 && step != 1) {  // opset 9's Slice has no steps
      auto shape = c.shape(n, 0);
      size_t a = static_cast<size_t>(axis);
      if (a < shape.size() && shape[a] >= 0) return c.out(n, c.b.take(c.t(n, 0), shape[a], start, end, step, axis));
    }
    return c.out(n, c.b.slice(c.t(n, 0), {start}, {end}, {axis}, {step}));
  }
  auto one = [&](const TV& v, int64_t dflt) {
    if (v.is_none()) return c.b.i64s({dflt});
    return c.b.unsqueeze(c.int_tensor(v), {0});
  };
  std::string steps = step == 1 ? std::string() : c.b.i64s({step});
  c.out(n, c.b.slice_dyn(c.t(n, 0), one(s, 0), one(e, INT64_MAX), c.b.i64s({axis}), steps));
}

// aten::select(x, dim, index): Gather with a 0-d index drops the dim.
void select(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  int64_t axis = norm_axis(c.i(n, 1), r);
  std::string idx;
  if (c.is_const(n, 2)) {
    int64_t i = c.i(n, 2);
    int64_t len = c.shape(n, 0).at(static_cast<size_t>(axis));
    if (i < 0 && len >= 0) i += len;
    // Gather takes negative indices from opset 11; before, count from the run-time length.
    idx = i < 0 && c.b.opset() < 11 ? c.b.op1("Add", {c.b.dim(c.t(n, 0), axis), c.b.i64(i)}) : c.b.i64(i);
  } else {
    idx = c.int_tensor(c.in(n, 2));
  }
  c.out(n, c.b.op1("Gather", {c.t(n, 0), idx}, {Attribute::make_int("axis", axis)}));
}

// aten::narrow(x, dim, start, length): Slice takes negative starts as counted from the end.
void narrow(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  int64_t axis = norm_axis(c.i(n, 1), r);
  if (c.is_const(n, 2) && c.is_const(n, 3)) {
    int64_t start = c.i(n, 2), len = c.i(n, 3);
    int64_t size = c.shape(n, 0).at(static_cast<size_t>(axis));
    if (start < 0 && size >= 0) start += size;
    int64_t end = start < 0 && start + len >= 0 ? INT64_MAX : start + len;
    return c.out(n, c.b.slice(c.t(n, 0), {start}, {end}, {axis}));
  }
  std::string start = c.b.unsqueeze(c.int_tensor(c.in(n, 2)), {0});
  std::string end = c.b.op1("Add", {start, c.b.unsqueeze(c.int_tensor(c.in(n, 3)), {0})});
  c.out(n, c.b.slice_dyn(c.t(n, 0), start, end, c.b.i64s({axis})));
}

void flip(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  auto shape = c.shape(n, 0);
  std::vector<int64_t> dims, starts, ends, steps;
  for (int64_t d : c.ints(n, 1)) {
    d = norm_axis(d, r);
    // Dims of 0 or 1 elements stay as they are (and ONNX shape inference sizes a reversing Slice
    // of an empty dim as 1).
    if (d < static_cast<int64_t>(shape.size()) && shape[static_cast<size_t>(d)] >= 0 && shape[static_cast<size_t>(d)] <= 1)
      continue;
    dims.push_back(d);
    starts.push_back(-1);
    ends.push_back(INT64_MIN);
    steps.push_back(-1);
  }
  if (dims.empty()) return c.set(n->output(), c.in(n, 0));
  if (c.b.opset() < 10) {
    // Opset 9's Slice has no steps: gather the reversed indices of each (static) dim.
    std::string x = c.t(n, 0);
    for (int64_t d : dims) {
      int64_t len = shape.at(static_cast<size_t>(d));
      if (len < 0) c.b.require(10, "flip of a dynamic dimension (Slice with negative steps)");
      x = c.b.take(x, len, -1, INT64_MIN, -1, d);
    }
    return c.out(n, x);
  }
  c.out(n, c.b.slice(c.t(n, 0), starts, ends, dims, steps));
}

// x rolled by k along axis: x[len-k:] then x[:len-k]. Static lengths fold k; dynamic ones compute
// k = shift mod len (ONNX Mod on ints takes the divisor's sign, as Python does).
// `shift_t` (a 1-element int64 tensor) instead of `shift`: a shift computed at run time.
std::string roll_axis(Ctx& c, const std::string& x, int64_t shift, int64_t axis, int64_t len,
                      const std::string& shift_t = {}) {
  if (len >= 0 && shift_t.empty()) {
    if (len == 0) return x;
    int64_t k = ((shift % len) + len) % len;
    if (k == 0) return x;
    return c.b.concat({c.b.slice(x, {len - k}, {len}, {axis}), c.b.slice(x, {0}, {len - k}, {axis})}, axis);
  }
  c.b.require(10, "aten::roll of a dynamic dimension (Mod, computed Slice bounds)");
  std::string l = c.b.unsqueeze(c.b.dim(x, axis), {0});
  std::string cut = c.b.op1("Sub", {l, c.b.op1("Mod", {shift_t.empty() ? c.b.i64s({shift}) : shift_t, l})});
  std::string ax = c.b.i64s({axis});
  return c.b.concat({c.b.slice_dyn(x, cut, c.b.i64s({INT64_MAX}), ax), c.b.slice_dyn(x, c.b.i64s({0}), cut, ax)}, axis);
}

void roll(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  auto dims = c.ints(n, 2);
  std::string x = c.t(n, 0);
  const TV& sv = c.in(n, 1);
  if (!sv.is_const()) {  // shifts computed (fftshift of a dynamic dim: size // 2)
    if (sv.kind != TV::Kind::List || dims.empty() || sv.items.size() != dims.size())
      throw UnsupportedError("aten::roll with computed shifts that are not one per dim");
    for (size_t i = 0; i < dims.size(); ++i) {
      int64_t axis = norm_axis(dims[i], r);
      const TV& s = sv.items[i];
      int64_t len = c.shape(n, 0).at(static_cast<size_t>(axis));
      x = s.is_const() ? roll_axis(c, x, s.c.toInt(), axis, len)
                       : roll_axis(c, x, 0, axis, len, c.b.unsqueeze(c.int_tensor(s), {0}));
    }
    return c.out(n, x);
  }
  auto shifts = c.ints(n, 1);
  if (dims.empty()) {  // roll of the flattened tensor
    int64_t len = 1;
    for (int64_t s : c.shape(n, 0)) len = s < 0 || len < 0 ? -1 : len * s;
    std::string y = roll_axis(c, c.b.reshape(x, {-1}), shifts.at(0), 0, len);
    return c.out(n, c.b.op1("Reshape", {y, c.b.shape_of(x)}));
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t axis = norm_axis(dims[i], r);
    x = roll_axis(c, x, shifts.at(i), axis, c.shape(n, 0).at(static_cast<size_t>(axis)));
  }
  c.out(n, x);
}

void movedim(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  auto src = c.ints(n, 1), dst = c.ints(n, 2);
  std::vector<int64_t> perm(static_cast<size_t>(r), -1);
  std::vector<bool> used(static_cast<size_t>(r), false);
  for (size_t i = 0; i < src.size(); ++i) {
    perm[static_cast<size_t>(norm_axis(dst[i], r))] = norm_axis(src[i], r);
    used[static_cast<size_t>(norm_axis(src[i], r))] = true;
  }
  int64_t next = 0;
  for (auto& p : perm) {
    if (p >= 0) continue;
    while (used[static_cast<size_t>(next)]) ++next;
    p = next++;
  }
  c.out(n, c.b.transpose(c.t(n, 0), perm));
}

void unflatten(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  int64_t axis = norm_axis(c.i(n, 1), r);
  auto sizes = c.ints(n, 2);
  std::vector<int64_t> shape(static_cast<size_t>(axis), 0);
  shape.insert(shape.end(), sizes.begin(), sizes.end());
  for (int64_t i = axis + 1; i < r; ++i) shape.push_back(0);
  c.out(n, c.b.reshape(c.t(n, 0), shape));
}

}  // namespace

std::vector<TV> tensor_list(Ctx& c, const TNode* n, size_t i) {
  const TV& v = c.in(n, i);
  if (v.kind == TV::Kind::List) return v.items;
  if (v.is_const() && v.c.isTensorList()) {
    std::vector<TV> r;
    for (const auto& t : v.c.toTensorVector()) r.push_back(TV::constant(t));
    return r;
  }
  throw UnsupportedError(std::string(n->kind().toQualString()) + " on a tensor list of unknown length");
}

void register_shape_ops(OpTable& t) {
  t["aten::view"] = {reshape};
  t["aten::reshape"] = {reshape};
  t["aten::_reshape_alias"] = {reshape};
  t["aten::view_as"] = {reshape_as};
  t["aten::reshape_as"] = {reshape_as};
  t["aten::flatten"] = {flatten};
  t["aten::permute"] = {permute};
  t["aten::transpose"] = {transpose};
  t["aten::swapaxes"] = {transpose};
  t["aten::swapdims"] = {transpose};
  t["aten::squeeze"] = {squeeze};
  t["aten::unsqueeze"] = {unsqueeze};
  t["aten::expand"] = {expand};
  t["aten::expand_as"] = {expand_as};
  t["aten::broadcast_to"] = {expand};
  t["aten::repeat"] = {repeat};
  t["aten::tile"] = {repeat};
  t["aten::cat"] = {cat};
  t["aten::concat"] = {cat};
  t["aten::stack"] = {stack};
  t["aten::pad_sequence"] = {pad_sequence};
  t["aten::split"] = {split};
  t["aten::split_with_sizes"] = {split};
  t["aten::chunk"] = {chunk};
  t["aten::unbind"] = {unbind};
  t["aten::slice"] = {slice};
  t["aten::select"] = {select};
  t["aten::narrow"] = {narrow};
  t["aten::narrow_copy"] = {narrow};
  t["aten::flip"] = {flip};
  t["aten::roll"] = {roll};
  t["aten::movedim"] = {movedim};
  t["aten::moveaxis"] = {movedim};
  t["aten::unflatten"] = {unflatten};
}

}  // namespace t2o
