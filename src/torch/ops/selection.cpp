// Selecting elements: masked_select, take, take_along_dim, one_hot, embedding_bag.
#include <limits>

#include "torch/ops/compose.h"

namespace t2o {
namespace {

// The result's length depends on values, not on the profiled run: keep it dynamic.
void dynamic_length(Ctx& c, const TNode* n, size_t axis) {
  TV& r = c.get_mut(n->output());
  if (r.rank_known && axis < r.shape.size()) r.shape[axis] = -1;
}

// aten::masked_select(x, mask): x and mask broadcast, then the elements where mask holds (1-D).
void masked_select(Ctx& c, const TNode* n) {
  std::string x = c.t(n, 0), m = c.t_as(n, 1, DType::Bool);
  if (c.shape(n, 0) != c.shape(n, 1) || !all_static(c.shape(n, 0))) {
    std::string shape = c.b.shape_of(c.b.op1("Expand", {x, c.b.shape_of(m)}));
    x = c.b.op1("Expand", {x, shape});
    m = c.b.op1("Expand", {m, shape});
  }
  std::string pos = c.b.reshape(c.b.op1("NonZero", {c.b.reshape(m, {-1})}), {-1});
  c.out(n, c.b.op1("Gather", {c.b.reshape(x, {-1}), pos}, {Attribute::make_int("axis", 0)}));
  dynamic_length(c, n, 0);
}

std::string wrap_negative(Ctx& c, const std::string& idx, const std::string& len) {
  return c.b.op1("Where", {c.b.op1("Less", {idx, c.b.i64(0)}), c.b.op1("Add", {idx, len}), idx});
}

// aten::take(x, index): elements of the flattened x, shaped like index.
void take(Ctx& c, const TNode* n) {
  std::string x = c.t(n, 0);
  std::string idx = wrap_negative(c, c.t_as(n, 1, DType::Int64), c.b.op1("Size", {x}));
  c.out(n, c.b.op1("Gather", {c.b.reshape(x, {-1}), idx}, {Attribute::make_int("axis", 0)}));
}

// aten::take_along_dim(x, indices, dim=None): GatherElements after broadcasting x and indices in
// every dim but `dim`; without dim, on both flattened.
void take_along_dim(Ctx& c, const TNode* n) {
  std::string x = c.t(n, 0), idx = c.t_as(n, 1, DType::Int64);
  auto k = Ctx::arg_index(n, "dim");
  if (!k || c.is_none(n, *k)) {
    std::string flat = c.b.reshape(x, {-1});
    return c.out(n, c.b.op1("Gather", {flat, c.b.reshape(idx, {-1})}, {Attribute::make_int("axis", 0)}));
  }
  c.b.require(11, "take_along_dim (GatherElements)");
  int r = c.rank(n, 0);
  int64_t axis = norm_axis(c.i(n, *k), r);
  auto sx = c.shape(n, 0), si = c.shape(n, 1);
  bool same = sx.size() == si.size() && all_static(sx) && all_static(si);
  for (size_t d = 0; same && d < sx.size(); ++d) same = static_cast<int64_t>(d) == axis || sx[d] == si[d];
  if (!same) {
    // The broadcast of both with `axis` at size 1, then each keeps its own length there.
    std::string x1 = c.b.slice(x, {0}, {1}, {axis}), i1 = c.b.slice(idx, {0}, {1}, {axis});
    std::string common = c.b.shape_of(c.b.op1("Expand", {x1, c.b.shape_of(i1)}));
    auto with = [&](const std::string& v) {
      return concat_parts(c, {shape_part(c, common, 0, axis), c.b.unsqueeze(c.b.dim(v, axis), {0}),
                              shape_part(c, common, axis + 1, r)});
    };
    x = c.b.op1("Expand", {x, with(x)});
    idx = c.b.op1("Expand", {idx, with(idx)});
  }
  c.out(n, c.b.op1("GatherElements", {x, idx}, {Attribute::make_int("axis", axis)}));
}

// aten::one_hot(x, num_classes=-1) -> int64 [..., C]; C = max(x) + 1 when not given.
void one_hot(Ctx& c, const TNode* n) {
  std::string x = c.t_as(n, 0, DType::Int64);
  std::string classes;
  if (const TV* kv = c.arg(n, "num_classes"); kv && !kv->is_const()) {  // a computed class count
    std::string k = c.int_tensor(*kv);
    if (kv->rank_known && !kv->shape.empty()) k = c.b.reshape(k, {});
    classes = arange_of(c, k);
    return c.out(n, c.b.cast(c.b.op1("Equal", {c.b.unsqueeze(x, {c.rank(n, 0)}), classes}), DType::Int64));
  }
  int64_t k = c.i(n, "num_classes", -1);
  if (k >= 0) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < k; ++i) v.push_back(i);
    classes = c.b.constant(Tensor::from_vector<int64_t>(v, {k}), "classes");
  } else {
    std::string top = c.b.reduce("ReduceMax", c.b.reshape(x, {-1}), {}, false);
    classes = arange_of(c, c.b.op1("Add", {top, c.b.i64(1)}));
  }
  c.out(n, c.b.cast(c.b.op1("Equal", {c.b.unsqueeze(x, {c.rank(n, 0)}), classes}), DType::Int64));
  if (k < 0) {
    TV& r = c.get_mut(n->output());
    if (r.rank_known && !r.shape.empty()) r.shape.back() = -1;
  }
}

// aten::embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
// include_last_offset, padding_idx): sum (0), mean (1) or max (2) of the rows of each bag; an
// empty bag (or one of padding only) gives zeros. Bags are the rows of 2-D indices, or the runs
// [offsets[b], offsets[b + 1]) of 1-D indices, selected with a [bags, N] mask.
void embedding_bag(Ctx& c, const TNode* n) {
  for (size_t k = 1; k < n->outputs().size(); ++k)
    if (!n->output(k)->uses().empty())
      throw UnsupportedError("aten::embedding_bag's offset2bag / bag_size / max_indices outputs");
  DType t = c.out_dtype(n);
  int64_t mode = c.i(n, "mode", 0);
  if (mode < 0 || mode > 2) throw Error("embedding_bag: unknown mode " + std::to_string(mode));
  int64_t pad = c.i(n, "padding_idx", -1);
  std::string idx = c.t_as(n, 1, DType::Int64);
  std::string emb = c.b.op1("Gather", {c.t_as(n, 0, t), idx}, {Attribute::make_int("axis", 0)});  // [.., D]
  const TV* psw = c.arg(n, "per_sample_weights");
  if (psw && !psw->is_none()) emb = c.b.op1("Mul", {emb, c.b.unsqueeze(c.tensor_as(*psw, t), {c.rank(n, 1)})});
  std::string keep = pad >= 0 ? c.b.op1("Not", {c.b.op1("Equal", {idx, c.b.i64(pad)})}) : std::string();
  std::string mask;  // [bags, N] (1-D indices) or [bags, L] (2-D)
  std::string values;  // [bags, N, D] candidates
  if (c.rank(n, 1) == 2) {
    mask = keep.empty() ? c.b.op1("Equal", {idx, idx}) : keep;
    values = emb;
  } else {
    std::string offsets = c.t_as(n, 2, DType::Int64);
    std::string total = c.b.op1("Shape", {idx});
    std::string starts = offsets, ends;
    if (c.flag(n, "include_last_offset", false)) {
      starts = c.b.slice(offsets, {0}, {-1}, {0});
      ends = c.b.slice(offsets, {1}, {INT64_MAX}, {0});
    } else {
      ends = c.b.concat({c.b.slice(offsets, {1}, {INT64_MAX}, {0}), total}, 0);
    }
    std::string pos = c.b.unsqueeze(arange_of(c, total), {0});
    mask = c.b.op1("And", {c.b.op1("Not", {c.b.op1("Less", {pos, c.b.unsqueeze(starts, {1})})}),
                           c.b.op1("Less", {pos, c.b.unsqueeze(ends, {1})})});
    if (!keep.empty()) mask = c.b.op1("And", {mask, c.b.unsqueeze(keep, {0})});
    values = c.b.unsqueeze(emb, {0});
  }
  std::string m3 = c.b.unsqueeze(mask, {2});
  std::string count = c.b.reduce("ReduceSum", c.b.cast(mask, t), {1}, true);  // [bags, 1]
  std::string nonempty = c.b.op1("Greater", {count, c.b.scalar(0, t)});
  std::string y;
  if (mode == 2) {
    y = c.b.reduce("ReduceMax", c.b.op1("Where", {m3, values, c.b.scalar(-std::numeric_limits<double>::infinity(), t)}), {1},
                   false);
  } else {
    y = c.b.reduce("ReduceSum", c.b.op1("Where", {m3, values, c.b.scalar(0, t)}), {1}, false);
    if (mode == 1) y = c.b.op1("Div", {y, c.b.op1("Max", {count, c.b.scalar(1, t)})});
  }
  c.out(n, 0, c.b.op1("Where", {nonempty, y, c.b.scalar(0, t)}));
  for (size_t k = 1; k < n->outputs().size(); ++k) {
    TV unused = TV::constant(c10::IValue());
    unused.poisoned = true;
    c.set(n->output(k), unused);
  }
}

}  // namespace

void register_selection_ops(OpTable& t) {
  t["aten::masked_select"] = {masked_select};
  t["aten::take"] = {take};
  t["aten::take_along_dim"] = {take_along_dim};
  t["aten::one_hot"] = {one_hot};
  t["aten::embedding_bag"] = {embedding_bag};
}

}  // namespace t2o
