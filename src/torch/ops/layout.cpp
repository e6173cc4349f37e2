// Layout: broadcasting several tensors, grids, splitting at sections or indices, the stacking variants
// (hstack, vstack, dstack, column_stack, atleast_Nd), flips and rotations, repeat_interleave,
// channel_shuffle, identity views. Sizes come from the tensors (Shape), so dynamic dims keep working.
#include <climits>

#include "torch/ops/compose.h"

namespace t2o {
namespace {

// The broadcast shape of several tensors: a constant when all shapes are known, else the shape of
// a chain of Expands (Expand broadcasts both ways).
std::string broadcast_shape(Ctx& c, const std::vector<TV>& items, std::vector<std::string>& names) {
  bool known = true;
  std::vector<int64_t> shape;
  for (const TV& v : items) {
    std::vector<int64_t> s = v.is_const() && v.c.isTensor() ? v.c.toTensor().sizes().vec() : v.shape;
    known = known && (v.is_const() || v.rank_known) && all_static(s);
    if (!known) break;
    if (s.size() > shape.size()) shape.insert(shape.begin(), s.size() - shape.size(), 1);
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& d = shape[shape.size() - s.size() + i];
      if (d == 1) d = s[i];
      else if (s[i] != 1 && s[i] != d) throw Error("broadcast_tensors: shapes do not broadcast");
    }
  }
  for (const TV& v : items) names.push_back(c.tensor(v));
  if (known) return c.b.i64s(shape);
  std::string sh = c.b.shape_of(names[0]);
  for (size_t i = 1; i < names.size(); ++i) sh = c.b.shape_of(c.b.op1("Expand", {names[i], sh}));
  return sh;
}

void broadcast_tensors(Ctx& c, const TNode* n) {
  std::vector<std::string> names;
  std::string shape = broadcast_shape(c, tensor_list(c, n, 0), names);
  for (auto& x : names) x = c.b.op1("Expand", {x, shape});
  set_tensor_list(c, n, names, DType::Undefined);
}

// aten::_infer_size(a, b): the broadcast of two size lists (F.binary_cross_entropy's weight).
void infer_size(Ctx& c, const TNode* n) {
  auto items = [&](size_t i) {
    const TV& v = c.in(n, i);
    if (v.kind == TV::Kind::List) return v.items;
    std::vector<TV> r;
    for (int64_t d : c.ints(n, i)) r.push_back(TV::constant(d));
    return r;
  };
  std::vector<TV> a = items(0), b = items(1);
  if (a.size() < b.size()) std::swap(a, b);
  size_t off = a.size() - b.size();
  std::vector<TV> out(a.begin(), a.end());
  for (size_t i = 0; i < b.size(); ++i) {
    const TV &x = a[off + i], &y = b[i];
    auto one = [](const TV& v) { return v.is_const() && v.c.toInt() == 1; };
    // A known size is preferred over a computed one: they must agree unless one is 1.
    out[off + i] = one(x) ? y : one(y) ? x : y.is_const() ? y : x;
  }
  c.set(n->output(), TV::list(out));
}

// aten::meshgrid(tensors, indexing="ij"|"xy"): "xy" swaps the roles of the first two axes.
std::vector<std::string> meshgrid_parts(Ctx& c, const TNode* n, bool xy) {
  std::vector<TV> items = tensor_list(c, n, 0);
  size_t k = items.size();
  std::vector<std::string> flat, sizes;
  for (const TV& v : items) {
    flat.push_back(c.b.reshape(c.tensor(v), {-1}));
    std::vector<int64_t> s = v.is_const() && v.c.isTensor() ? v.c.toTensor().sizes().vec() : v.shape;
    bool known = v.is_const() || v.rank_known;
    int64_t len = known && s.empty() ? 1 : known && s.size() == 1 ? s[0] : -1;
    sizes.push_back(len >= 0 ? c.b.i64s({len}) : c.b.shape_of(flat.back()));
  }
  std::vector<size_t> axis_of(k);
  for (size_t i = 0; i < k; ++i) axis_of[i] = i;
  if (xy && k >= 2) std::swap(axis_of[0], axis_of[1]);
  std::vector<std::string> shape_parts(k);
  for (size_t i = 0; i < k; ++i) shape_parts[axis_of[i]] = sizes[i];
  std::string shape = c.b.concat(shape_parts, 0);
  std::vector<std::string> out;
  for (size_t i = 0; i < k; ++i) {
    std::vector<int64_t> s(k, 1);
    s[axis_of[i]] = -1;
    out.push_back(c.b.op1("Expand", {c.b.reshape(flat[i], s), shape}));
  }
  return out;
}

void meshgrid(Ctx& c, const TNode* n) {
  bool xy = false;
  if (auto k = Ctx::arg_index(n, "indexing")) xy = c.str(n, *k) == "xy";
  set_tensor_list(c, n, meshgrid_parts(c, n, xy), DType::Undefined);
}

void cartesian_prod(Ctx& c, const TNode* n) {
  auto parts = meshgrid_parts(c, n, false);
  if (parts.size() == 1) return c.out(n, c.b.reshape(parts[0], {-1}));
  for (auto& p : parts) p = c.b.reshape(p, {-1, 1});
  c.out(n, c.b.concat(parts, 1));
}

// Pieces [start_i, end_i) of x along axis.
std::vector<std::string> pieces(Ctx& c, const std::string& x, const std::vector<int64_t>& bounds, int64_t axis) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) out.push_back(c.b.slice(x, {bounds[i]}, {bounds[i + 1]}, {axis}));
  return out;
}

std::vector<std::string> sections_of(Ctx& c, const std::string& x, const std::string& k, int64_t count, int64_t axis);

// `sections` near-equal pieces: the first len % sections get one element more, as in torch.
std::vector<std::string> sections(Ctx& c, const TNode* n, const std::string& x, int64_t count, int64_t axis) {
  if (count <= 0) throw Error("tensor_split: sections must be positive");
  auto len = static_size(c.shape(n, 0), axis);
  if (len) {
    std::vector<int64_t> b{0};
    for (int64_t i = 0; i < count; ++i) b.push_back(b.back() + *len / count + (i < *len % count ? 1 : 0));
    return pieces(c, x, b, axis);
  }
  return sections_of(c, x, c.b.i64(count), count, axis);
}

// `count` near-equal pieces of a dynamic axis; `k` names count as a 0-d int64 (computed or not).
std::vector<std::string> sections_of(Ctx& c, const std::string& x, const std::string& k, int64_t count, int64_t axis) {
  std::string l = c.b.dim(x, axis);
  std::string q = c.b.op1("Div", {l, k}), rem = c.b.op1("Sub", {l, c.b.op1("Mul", {q, k})});
  std::vector<std::string> out;
  for (int64_t i = 0; i < count; ++i) {
    auto start = [&](int64_t j) {
      return c.b.op1("Add", {c.b.op1("Mul", {c.b.i64(j), q}), int_min(c, c.b.i64(j), rem)});
    };
    out.push_back(c.b.slice_dyn(x, c.b.unsqueeze(start(i), {0}), c.b.unsqueeze(start(i + 1), {0}), c.b.i64s({axis})));
  }
  return out;
}

std::vector<std::string> split_at(Ctx& c, const std::string& x, std::vector<int64_t> idx, int64_t axis) {
  idx.insert(idx.begin(), 0);
  idx.push_back(INT64_MAX);
  return pieces(c, x, idx, axis);
}

// aten::tensor_split(x, sections | indices | tensor, dim)
void tensor_split(Ctx& c, const TNode* n) {
  int64_t axis = norm_axis(c.i(n, "dim", 0), c.rank(n, 0));
  std::string x = c.t(n, 0);
  std::vector<std::string> parts;
  if (auto k = Ctx::arg_index(n, "sections")) {
    parts = sections(c, n, x, c.i(n, *k), axis);
  } else if (auto k2 = Ctx::arg_index(n, "indices")) {
    parts = split_at(c, x, c.ints(n, *k2), axis);
  } else if (!c.in(n, 1).is_const()) {
    // Split points computed by the model: a 1-D tensor of L points gives L + 1 pieces (L is its
    // static length), a 0-d one that many near-equal sections (as many as profiling saw).
    std::string idx = c.t_as(n, 1, DType::Int64);
    if (c.rank(n, 1) == 1) {
      int64_t points = c.shape(n, 1)[0];
      if (points < 0) throw UnsupportedError("aten::tensor_split at a number of points that varies");
      for (int64_t i = 0; i <= points; ++i) {
        std::string start = i == 0 ? c.b.i64s({0}) : c.b.slice(idx, {i - 1}, {i}, {0});
        std::string end = i == points ? c.b.i64s({INT64_MAX}) : c.b.slice(idx, {i}, {i + 1}, {0});
        parts.push_back(c.b.slice_dyn(x, start, end, c.b.i64s({axis})));
      }
    } else {
      const Observed* o = c.observed(n->output());
      if (!o || o->kind != Observed::Kind::List || o->elems.empty())
        throw UnsupportedError("aten::tensor_split into a computed number of sections that was not observed");
      parts = sections_of(c, x, c.b.reshape(idx, {}), static_cast<int64_t>(o->elems.size()), axis);
    }
  } else {
    const c10::IValue& v = c.cval(n, 1);  // the split points decide the number of outputs
    at::Tensor t = v.toTensor().to(at::kLong).contiguous();
    if (t.dim() == 0) parts = sections(c, n, x, t.item<int64_t>(), axis);
    else parts = split_at(c, x, std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()), axis);
  }
  set_tensor_list(c, n, parts, c.dtype(n, 0));
}

// aten::hsplit / vsplit / dsplit(x, sections | indices): tensor_split along dim 1 (0 for 1-D) / 0 / 2.
void hvd_split(Ctx& c, const TNode* n, int64_t axis) {
  std::string x = c.t(n, 0);
  std::vector<std::string> parts;
  if (auto k = Ctx::arg_index(n, "sections")) parts = sections(c, n, x, c.i(n, *k), axis);
  else parts = split_at(c, x, c.ints(n, 1), axis);
  set_tensor_list(c, n, parts, c.dtype(n, 0));
}
void hsplit(Ctx& c, const TNode* n) { hvd_split(c, n, c.rank(n, 0) == 1 ? 0 : 1); }
void vsplit(Ctx& c, const TNode* n) { hvd_split(c, n, 0); }
void dsplit(Ctx& c, const TNode* n) { hvd_split(c, n, 2); }

// x viewed with at least `dims` dims, as torch.atleast_{1,2,3}d: [] -> [1,..], [n] -> [1, n(, 1)],
// [m, n] -> [m, n, 1].
std::string at_least(Ctx& c, const TV& v, int dims, DType t) {
  std::string x = c.tensor_as(v, t);
  int r = v.is_const() && v.c.isTensor() ? static_cast<int>(v.c.toTensor().dim()) : v.is_const() ? 0 : static_cast<int>(v.shape.size());
  if (!v.is_const() && !v.rank_known) throw UnsupportedError("stacking a tensor of unknown rank");
  if (r >= dims) return x;
  if (r == 0) return c.b.reshape(x, std::vector<int64_t>(static_cast<size_t>(dims), 1));
  if (r == 1) return dims == 2 ? c.b.unsqueeze(x, {0}) : c.b.unsqueeze(x, {0, 2});
  return c.b.unsqueeze(x, {2});
}

int rank_of(const TV& v) {
  if (v.is_const()) return v.c.isTensor() ? static_cast<int>(v.c.toTensor().dim()) : 0;
  return static_cast<int>(v.shape.size());
}

void stack_like(Ctx& c, const TNode* n, int dims, int64_t axis) {
  DType t = c.out_dtype(n);
  std::vector<std::string> parts;
  auto items = tensor_list(c, n, 0);
  // hstack joins 1-D pieces along dim 0, deciding by the first piece as torch does.
  bool first_1d = !items.empty() && rank_of(items[0]) <= 1;
  for (const TV& v : items) parts.push_back(at_least(c, v, dims, t));
  c.out(n, c.b.concat(parts, dims == 1 && first_1d ? 0 : axis));
}
void hstack(Ctx& c, const TNode* n) { stack_like(c, n, 1, 1); }
void vstack(Ctx& c, const TNode* n) { stack_like(c, n, 2, 0); }
void dstack(Ctx& c, const TNode* n) { stack_like(c, n, 3, 2); }

// Columns: 0-d and 1-D tensors become [n, 1].
void column_stack(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::vector<std::string> parts;
  for (const TV& v : tensor_list(c, n, 0)) {
    std::string x = c.tensor_as(v, t);
    parts.push_back(rank_of(v) <= 1 ? c.b.reshape(x, {-1, 1}) : x);
  }
  c.out(n, c.b.concat(parts, 1));
}

void atleast(Ctx& c, const TNode* n, int dims) {
  if (is_list_value(n, 0)) {
    std::vector<std::string> parts;
    for (const TV& v : tensor_list(c, n, 0)) parts.push_back(at_least(c, v, dims, c.dtype_of(v)));
    return set_tensor_list(c, n, parts, DType::Undefined);
  }
  c.out(n, at_least(c, c.in(n, 0), dims, c.dtype(n, 0)));
}
void atleast_1d(Ctx& c, const TNode* n) { atleast(c, n, 1); }
void atleast_2d(Ctx& c, const TNode* n) { atleast(c, n, 2); }
void atleast_3d(Ctx& c, const TNode* n) { atleast(c, n, 3); }

// x reversed along axis: Slice with step -1 from opset 10; before, a Gather of the reversed
// positions (len - 1 - i for a dynamic length).
std::string reversed(Ctx& c, const std::string& x, const std::vector<int64_t>& shape, int64_t axis) {
  // Reversing 0 or 1 elements changes nothing, and ONNX shape inference sizes a reversing Slice of
  // an empty dim as 1.
  if (auto len = static_size(shape, axis); len && *len <= 1) return x;
  if (c.b.opset() >= 10) return c.b.slice(x, {-1}, {INT64_MIN}, {axis}, {-1});
  if (auto len = static_size(shape, axis)) return c.b.take(x, *len, -1, INT64_MIN, -1, axis);
  std::string len = c.b.dim(x, axis);
  std::string back = c.b.op1("Sub", {c.b.op1("Sub", {len, c.b.i64(1)}), arange_of(c, len)});
  return c.b.op1("Gather", {x, back}, {Attribute::make_int("axis", axis)});
}

void fliplr(Ctx& c, const TNode* n) { c.out(n, reversed(c, c.t(n, 0), c.shape(n, 0), 1)); }
void flipud(Ctx& c, const TNode* n) { c.out(n, reversed(c, c.t(n, 0), c.shape(n, 0), 0)); }

std::vector<int64_t> swapped(int r, int64_t a, int64_t b) {
  std::vector<int64_t> p;
  for (int i = 0; i < r; ++i) p.push_back(i);
  std::swap(p[static_cast<size_t>(a)], p[static_cast<size_t>(b)]);
  return p;
}

// aten::rot90(x, k, dims): quarter turns from dims[0] towards dims[1].
void rot90(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  auto dk = Ctx::arg_index(n, "dims");
  std::vector<int64_t> dims = dk ? c.ints(n, *dk) : std::vector<int64_t>{0, 1};
  if (dims.size() != 2) throw Error("rot90: dims must name two axes");
  int64_t a = norm_axis(dims[0], r), b = norm_axis(dims[1], r);
  int64_t k = ((c.i(n, "k", 1) % 4) + 4) % 4;
  std::string x = c.t(n, 0);
  auto shape = c.shape(n, 0);
  if (k == 0) return c.out(n, x);
  if (k == 2) return c.out(n, reversed(c, reversed(c, x, shape, a), shape, b));
  x = reversed(c, x, shape, k == 1 ? b : a);
  c.out(n, c.b.transpose(x, swapped(r, a, b)));
}

void ravel(Ctx& c, const TNode* n) { c.out(n, c.b.reshape(c.t(n, 0), {-1})); }

// Views and copies that change nothing for real tensors (alias, lift, conj and neg resolution).
void same(Ctx& c, const TNode* n) { c.set(n->output(), c.in(n, 0)); }

// aten::channel_shuffle(x, groups): [N, g, C/g, ...] transposed to [N, C/g, g, ...].
void channel_shuffle(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  int64_t g = c.i(n, "groups", 1);
  std::string x = c.t(n, 0);
  std::string s = c.b.shape_of(x);
  std::string split = concat_parts(c, {shape_part(c, s, 0, 1), c.b.i64s({g, -1}), shape_part(c, s, 2, r)});
  std::string y = c.b.transpose(c.b.op1("Reshape", {x, split}), swapped(r + 1, 1, 2));
  c.out(n, c.b.op1("Reshape", {y, s}));
}

// Positions 0..n-1 each repeated repeats[i] times (repeats computed): position p belongs to the
// number of cumulative counts at or below it.
std::string repeated_positions(Ctx& c, const std::string& repeats) {
  c.b.require(11, "repeat_interleave with computed repeats (CumSum, Range)");
  std::string cum = c.b.op1("CumSum", {repeats, c.b.i64(0)});
  std::string total = c.b.reshape(c.b.slice(cum, {-1}, {INT64_MAX}, {0}), {});
  std::string p = c.b.op1("Range", {c.b.i64(0), total, c.b.i64(1)});
  std::string done = c.b.op1("Not", {c.b.op1("Less", {c.b.unsqueeze(p, {1}), c.b.unsqueeze(cum, {0})})});
  return c.b.reduce("ReduceSum", c.b.cast(done, DType::Int64), {1}, false);
}

// aten::repeat_interleave(x, repeats: int | Tensor, dim=None, output_size) and (repeats) alone.
void repeat_interleave(Ctx& c, const TNode* n) {
  auto self_k = Ctx::arg_index(n, "self");
  const TV& reps = *c.arg(n, "repeats");
  if (!self_k) {  // repeat_interleave(repeats): the indices
    if (reps.is_const()) {
      at::Tensor r = reps.c.toTensor();
      return c.out(n, c.b.constant(tensor_from_torch(at::repeat_interleave(r)), "positions"));
    }
    return c.out(n, repeated_positions(c, c.tensor_as(reps, DType::Int64)));
  }
  std::string x = c.t(n, 0);
  int r = c.rank(n, 0);
  int64_t axis = 0;
  auto dk = Ctx::arg_index(n, "dim");
  if (!dk || c.is_none(n, *dk)) {
    x = c.b.reshape(x, {-1});
    r = 1;
  } else {
    axis = norm_axis(c.i(n, *dk), r);
  }
  bool one = reps.is_const() ? !reps.c.isTensor() || reps.c.toTensor().numel() == 1
                             : reps.number || (reps.rank_known && (reps.shape.empty() || (reps.shape.size() == 1 && reps.shape[0] == 1)));
  if (one) {
    // Each element repeated the same number of times: a new axis after `axis`, expanded and merged.
    std::string k = reps.is_const() && reps.c.isTensor() ? c.b.i64s({reps.c.toTensor().item<int64_t>()})
                                                          : c.b.reshape(c.tensor_as(reps, DType::Int64), {1});
    std::vector<std::string> e(static_cast<size_t>(r + 1), c.b.i64s({1}));
    e[static_cast<size_t>(axis + 1)] = k;
    std::string y = c.b.op1("Expand", {c.b.unsqueeze(x, {axis + 1}), c.b.concat(e, 0)});
    std::string s = c.b.shape_of(x);
    std::string merged = concat_parts(c, {shape_part(c, s, 0, axis), c.b.i64s({-1}), shape_part(c, s, axis + 1, r)});
    return c.out(n, c.b.op1("Reshape", {y, merged}));
  }
  std::string idx;
  if (reps.is_const()) {
    at::Tensor rt = reps.c.toTensor().to(at::kLong);
    idx = c.b.constant(tensor_from_torch(at::repeat_interleave(rt)), "positions");
  } else {
    // torch broadcasts one count to every element: repeats may have length 1 at run time.
    std::string rr = c.b.reshape(c.tensor_as(reps, DType::Int64), {-1});
    rr = c.b.op1("Expand", {rr, c.b.unsqueeze(c.b.dim(x, axis), {0})});
    idx = repeated_positions(c, rr);
  }
  c.out(n, c.b.op1("Gather", {x, idx}, {Attribute::make_int("axis", axis)}));
  // The output's length along `axis` is the sum of the counts: a value, never a profiled constant.
  TV& out = c.get_mut(n->output());
  if (!reps.is_const() && out.rank_known && axis < static_cast<int64_t>(out.shape.size()))
    out.shape[static_cast<size_t>(axis)] = -1;
}

// aten::_dim_arange(like, dim): arange(like.size(dim)).
void dim_arange(Ctx& c, const TNode* n) {
  int64_t axis = norm_axis(c.i(n, 1), c.rank(n, 0));
  std::string x = c.t(n, 0);
  if (auto len = static_size(c.shape(n, 0), axis))
    return c.out(n, c.b.constant(tensor_from_torch(at::arange(*len, at::kLong)), "arange"));
  c.out(n, arange_of(c, c.b.dim(x, axis)));
}

}  // namespace

void register_layout_ops(OpTable& t) {
  t["aten::broadcast_tensors"] = {broadcast_tensors};
  t["aten::_infer_size"] = {infer_size};
  t["aten::meshgrid"] = {meshgrid};
  t["aten::cartesian_prod"] = {cartesian_prod};
  t["aten::tensor_split"] = {tensor_split};
  t["aten::hsplit"] = {hsplit};
  t["aten::vsplit"] = {vsplit};
  t["aten::dsplit"] = {dsplit};
  t["aten::hstack"] = {hstack};
  t["aten::vstack"] = {vstack};
  t["aten::row_stack"] = {vstack};
  t["aten::dstack"] = {dstack};
  t["aten::column_stack"] = {column_stack};
  t["aten::atleast_1d"] = {atleast_1d};
  t["aten::atleast_2d"] = {atleast_2d};
  t["aten::atleast_3d"] = {atleast_3d};
  t["aten::fliplr"] = {fliplr};
  t["aten::flipud"] = {flipud};
  t["aten::rot90"] = {rot90};
  t["aten::ravel"] = {ravel};
  for (const char* op : {"aten::alias", "aten::lift", "aten::resolve_conj", "aten::resolve_neg", "aten::conj_physical"})
    t[op] = {same};
  t["aten::channel_shuffle"] = {channel_shuffle};
  t["aten::repeat_interleave"] = {repeat_interleave};
  t["aten::_dim_arange"] = {dim_arange};
}

}  // namespace t2o
