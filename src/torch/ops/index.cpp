// Indexing: index_select/gather/scatter/index/index_put/masked_fill/embedding/nonzero.
#include <algorithm>
#include <climits>
#include <cmath>

#include "torch/ops/compose.h"
#include "torch/ops/ops.h"

namespace t2o {
namespace {

void index_select(Ctx& c, const TNode* n) {
  int64_t axis = norm_axis(c.i(n, 1), c.rank(n, 0));
  std::string idx = c.t_as(n, 2, DType::Int64);
  if (c.rank(n, 2) == 0) idx = c.b.unsqueeze(idx, {0});  // a 0-d index keeps the dim, at size 1
  c.out(n, c.b.op1("Gather", {c.t(n, 0), idx}, {Attribute::make_int("axis", axis)}));
}

// Before GatherElements (opset 11), on static shapes: a Gather from the flattened input at
// flat = base + index * stride[axis], where base holds the other coordinates' offsets.
std::string gather_flat(Ctx& c, const TNode* n, int64_t axis) {
  auto xs = c.shape(n, 0), is = c.shape(n, 2);
  for (int64_t d : xs)
    if (d < 0) c.b.require(11, "gather on dynamic sizes (GatherElements)");
  for (int64_t d : is)
    if (d < 0) c.b.require(11, "gather on dynamic sizes (GatherElements)");
  size_t r = xs.size();
  std::vector<int64_t> stride(r, 1);
  for (size_t d = r; d-- > 1;) stride[d - 1] = stride[d] * xs[d];
  int64_t numel = 1;
  for (int64_t d : is) numel *= d;
  std::vector<int64_t> base(static_cast<size_t>(numel), 0);
  for (int64_t k = 0; k < numel; ++k) {
    int64_t rest = k;
    for (size_t d = r; d-- > 0;) {
      int64_t coord = rest % is[d];
      rest /= is[d];
      if (static_cast<int64_t>(d) != axis) base[static_cast<size_t>(k)] += coord * stride[d];
    }
  }
  std::string idx = c.t_as(n, 2, DType::Int64);
  int64_t len = xs[static_cast<size_t>(axis)];
  idx = c.b.op1("Where", {c.b.op1("Less", {idx, c.b.i64(0)}), c.b.op1("Add", {idx, c.b.i64(len)}), idx});
  std::string flat = c.b.op1("Add", {c.b.constant(Tensor::from_vector<int64_t>(base, is), "gather_base"),
                                      c.b.op1("Mul", {idx, c.b.i64(stride[static_cast<size_t>(axis)])})});
  return c.b.op1("Gather", {c.b.reshape(c.t(n, 0), {-1}), flat}, {Attribute::make_int("axis", 0)});
}

void gather(Ctx& c, const TNode* n) {
  int64_t axis = norm_axis(c.i(n, 1), c.rank(n, 0));
  if (c.b.opset() < 11) return c.out(n, gather_flat(c, n, axis));
  c.out(n, c.b.op1("GatherElements", {c.t(n, 0), c.t_as(n, 2, DType::Int64)}, {Attribute::make_int("axis", axis)}));
}

// aten::scatter(x, dim, index, src|value[, reduce]) / scatter_add(x, dim, index, src)
// Scatter with a reduction, densely (ScatterElements reduces only from opset 16, and never by max/min
// before 18): for each position p along `axis` of x, the src elements whose index is p (a [..., L]
// mask beside src) reduced over `axis` by `op`, shaped like x; positions no index names hold
// `ident`. With `count`, also how many src elements reached each position.
std::string reduce_at_positions(Ctx& c, const std::string& x, const std::string& idx, const std::string& src,
                                int64_t axis, int r, DType t, const std::string& op, double ident,
                                std::string* count = nullptr) {
  std::string mask = c.b.op1("Equal", {c.b.unsqueeze(idx, {r}), arange_of(c, c.b.dim(x, axis))});
  std::string filled = c.b.op1("Where", {mask, c.b.unsqueeze(src, {r}), c.b.scalar(ident, t)});
  // Move the positions axis (last) into `axis`, drop the reduced one.
  std::vector<int64_t> perm;
  for (int i = 0; i <= r; ++i) perm.push_back(i);
  std::swap(perm[static_cast<size_t>(axis)], perm[static_cast<size_t>(r)]);
  auto to_x = [&](const std::string& reduced, double fill) {
    std::string v = c.b.squeeze(c.b.transpose(reduced, perm), {r});
    // Dims other than `axis` may be shorter in index than in x: the rest takes `fill`.
    std::vector<int> others;
    for (int d = 0; d < r; ++d)
      if (d != axis) others.push_back(d);
    return pad_end(c, v, r, c.b.op1("Sub", {c.b.shape_of(x), c.b.shape_of(v)}), fill, t, others);
  };
  if (count) *count = to_x(c.b.reduce("ReduceSum", c.b.cast(mask, t), {axis}, true), 0);
  return to_x(c.b.reduce(op, filled, {axis}, true), ident);
}

// Before opset 16, scatter_add and scatter(reduce=...) add or multiply densely.
std::string dense_scatter(Ctx& c, const std::string& x, const std::string& idx, const std::string& src, int64_t axis,
                          int r, DType t, bool mul) {
  std::string red = reduce_at_positions(c, x, idx, src, axis, r, t, mul ? "ReduceProd" : "ReduceSum", mul ? 1 : 0);
  return c.b.op1(mul ? "Mul" : "Add", {x, red});
}

void scatter(Ctx& c, const TNode* n, const std::string& reduction) {
  DType t = c.out_dtype(n);
  int64_t axis = norm_axis(c.i(n, 1), c.rank(n, 0));
  std::string idx = c.t_as(n, 2, DType::Int64);
  std::string src = c.t_as(n, 3, t);
  if (c.in(n, 3).is_const() && !c.in(n, 3).c.isTensor()) {
    src = c.b.op1("Expand", {src, c.b.shape_of(idx)});
  } else {
    // torch reads src only where index has elements (index may be smaller); ONNX wants equal shapes.
    const TV& iv = c.in(n, 2);
    const TV& sv = c.in(n, 3);
    bool same = iv.rank_known && sv.rank_known && iv.shape == sv.shape &&
                std::all_of(iv.shape.begin(), iv.shape.end(), [](int64_t d) { return d >= 0; });
    if (!same) {
      int r = c.rank(n, 2);
      std::vector<int64_t> axes;
      for (int i = 0; i < r; ++i) axes.push_back(i);
      src = c.b.slice_dyn(src, c.b.i64s(std::vector<int64_t>(static_cast<size_t>(r), 0)), c.b.shape_of(idx),
                          c.b.i64s(axes));
    }
  }
  std::string red = reduction;
  if (n->inputs().size() > 4 && !c.is_none(n, 4)) {
    red = c.str(n, 4);
    if (red == "multiply") red = "mul";
  }
  if (!red.empty() && c.b.opset() < 16) {
    if (red != "add" && red != "mul") throw UnsupportedError("scatter with reduce='" + red + "'");
    return c.out(n, dense_scatter(c, c.t_as(n, 0, t), idx, src, axis, c.rank(n, 0), t, red == "mul"));
  }
  std::vector<Attribute> attrs{Attribute::make_int("axis", axis)};
  if (!red.empty()) attrs.push_back(Attribute::make_string("reduction", red));
  // Opsets 9 and 10 call it Scatter.
  c.out(n, c.b.op1(c.b.opset() >= 11 ? "ScatterElements" : "Scatter", {c.t_as(n, 0, t), idx, src}, attrs));
}
void scatter_(Ctx& c, const TNode* n) { scatter(c, n, ""); }
void scatter_add(Ctx& c, const TNode* n) { scatter(c, n, "add"); }

// aten::scatter_reduce(self, dim, index, src, reduce, include_self): sum / prod (and mean's sum and
// count) through ScatterElements with a reduction (opset 16); amax / amin, which ONNX's reductions
// lack before opset 18, and everything before 16 densely: for each output position along `dim`,
// the src elements whose index points there (a [src..., out_len] mask), reduced over `dim`.
void scatter_reduce(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  int64_t axis = norm_axis(c.i(n, "dim", 0), std::max(r, 1));
  std::string reduce = c.arg(n, "reduce")->c.toStringRef();
  bool include_self = c.flag(n, "include_self", true);
  std::string x = c.t_as(n, 0, t), idx = c.t_as(n, 2, DType::Int64), src = c.t_as(n, 3, t);
  if (r == 0) {  // a 0-d self: index and src are 0-d or one element; treat all as 1-D
    x = c.b.reshape(x, {1});
    idx = c.b.reshape(idx, {-1});
    src = c.b.reshape(src, {-1});
    r = 1;
  }
  // torch reads src only where index has elements.
  {
    std::vector<int64_t> axes;
    for (int i = 0; i < r; ++i) axes.push_back(i);
    src = c.b.slice_dyn(src, c.b.i64s(std::vector<int64_t>(static_cast<size_t>(r), 0)), c.b.shape_of(idx), c.b.i64s(axes));
  }
  std::string len = c.b.dim(x, axis);
  idx = c.b.op1("Add", {idx, c.b.op1("Mul", {c.b.cast(c.b.op1("Less", {idx, c.b.i64(0)}), DType::Int64), len})});
  auto scatter_with = [&](const std::string& base, const std::string& upd, const std::string& red) {
    std::vector<Attribute> attrs{Attribute::make_int("axis", axis)};
    if (!red.empty()) attrs.push_back(Attribute::make_string("reduction", red));
    return c.b.op1("ScatterElements", {base, idx, upd}, attrs);
  };
  std::string ones = c.b.op1("Expand", {c.b.scalar(1, t), c.b.shape_of(idx)});
  std::string zeros_x = c.b.op1("Mul", {x, c.b.scalar(0, t)});
  // How many src elements reach each position of x.
  std::string count;
  std::string y;
  if (c.b.opset() >= 16 && reduce != "amax" && reduce != "amin") {
    count = scatter_with(zeros_x, ones, "add");
    if (reduce == "prod") {
      std::string base = include_self ? x : scatter_with(x, ones, "");
      y = scatter_with(base, src, "mul");
    } else {
      std::string base = include_self ? x : scatter_with(x, c.b.op1("Mul", {ones, c.b.scalar(0, t)}), "");
      y = scatter_with(base, src, "add");
      if (reduce == "mean") {
        std::string den = include_self ? c.b.op1("Add", {count, c.b.scalar(1, t)}) : count;
        std::string safe = c.b.op1("Max", {den, c.b.scalar(1, t)});
        y = c.b.op1("Div", {y, safe});
      } else if (reduce != "sum") {
        throw UnsupportedError("scatter_reduce with reduce='" + reduce + "'");
      }
    }
  } else {
    double ident = reduce == "prod" ? 1.0 : reduce == "amax" ? -INFINITY : reduce == "amin" ? INFINITY : 0.0;
    if (!dtype_is_float(t) && std::isinf(ident))
      ident = ident > 0 ? static_cast<double>(INT32_MAX) : static_cast<double>(INT32_MIN);
    std::string op = reduce == "prod" ? "ReduceProd" : reduce == "amax" ? "ReduceMax" : reduce == "amin" ? "ReduceMin" : "ReduceSum";
    if (op == "ReduceSum" && reduce != "sum" && reduce != "mean") throw UnsupportedError("scatter_reduce with reduce='" + reduce + "'");
    std::string red = reduce_at_positions(c, x, idx, src, axis, r, t, op, ident, &count);
    std::string combined = red;
    if (include_self) {
      if (reduce == "prod") combined = c.b.op1("Mul", {x, red});
      else if (reduce == "amax") combined = c.b.op1("Max", {x, red});
      else if (reduce == "amin") combined = c.b.op1("Min", {x, red});
      else combined = c.b.op1("Add", {x, red});
    }
    if (reduce == "mean") {
      std::string den = include_self ? c.b.op1("Add", {count, c.b.scalar(1, t)}) : count;
      combined = c.b.op1("Div", {combined, c.b.op1("Max", {den, c.b.scalar(1, t)})});
    }
    y = c.b.op1("Where", {c.b.op1("Greater", {count, c.b.scalar(0, t)}), combined, x});
  }
  if (c.rank(n, 0) == 0) y = c.b.reshape(y, {});
  c.out(n, y);
}

void embedding(Ctx& c, const TNode* n) {
  c.out(n, c.b.op1("Gather", {c.t(n, 0), c.t_as(n, 1, DType::Int64)}, {Attribute::make_int("axis", 0)}));
}

void masked_fill(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, c.b.op1("Where", {c.t_as(n, 1, DType::Bool), c.t_as(n, 2, t), c.t_as(n, 0, t)}));
}

// The non-None index tensors of x[...] and their positions.
std::vector<std::pair<int64_t, TV>> index_list(Ctx& c, const TNode* n) {
  const TV& l = c.in(n, 1);
  std::vector<std::pair<int64_t, TV>> r;
  if (l.is_const() && l.c.isList()) {  // a traced x[[0, 2]]: the list of constant index tensors is folded
    auto items = l.c.toListRef();
    for (size_t i = 0; i < items.size(); ++i)
      if (!items[i].isNone()) r.push_back({static_cast<int64_t>(i), TV::constant(items[i])});
    return r;
  }
  if (l.kind != TV::Kind::List) throw UnsupportedError("aten::index with an unknown index list");
  for (size_t i = 0; i < l.items.size(); ++i)
    if (!l.items[i].is_none()) r.push_back({static_cast<int64_t>(i), l.items[i]});
  return r;
}

bool is_mask(Ctx& c, const TV& i) { return c.dtype_of(i) == DType::Bool || c.dtype_of(i) == DType::UInt8; }

int mask_rank(const TV& m) {
  if (m.is_const()) return static_cast<int>(m.c.toTensor().dim());
  if (!m.rank_known) throw UnsupportedError("boolean mask of unknown rank");
  return static_cast<int>(m.shape.size());
}

// A boolean mask over dims [p, p + k) of x: those dims flattened into one (so the mask selects
// along a single axis p), and the flat positions the mask keeps.
struct MaskSel {
  std::string xf, pos;
};

MaskSel mask_select(Ctx& c, const std::string& x, int r, int64_t p, const TV& mask) {
  int64_t k = mask_rank(mask);
  if (k == 0) throw UnsupportedError("indexing with a 0-d boolean mask");
  if (p + k > r) throw UnsupportedError("boolean mask with more dims than the indexed tensor");
  MaskSel s{x, {}};
  if (k > 1) {
    std::string shp = c.b.shape_of(x);
    std::vector<std::string> parts;
    if (p > 0) parts.push_back(c.b.slice(shp, {0}, {p}, {0}));
    parts.push_back(c.b.i64s({-1}));
    if (p + k < r) parts.push_back(c.b.slice(shp, {p + k}, {r}, {0}));
    s.xf = c.b.op1("Reshape", {x, c.b.concat(parts, 0)});
  }
  std::string flat = c.b.reshape(c.tensor_as(mask, DType::Bool), {-1});
  s.pos = c.b.squeeze(c.b.op1("NonZero", {flat}), {0});
  return s;
}

// Integer index tensors at some axes of x (rank r), torch's advanced indexing: the indexed axes
// are moved to the front, the indices broadcast together to B and stacked as [B..., k] for
// GatherND / ScatterND. torch puts B where the first indexed axis was when the indexed axes are
// adjacent, else in front (`at`).
struct Advanced {
  std::vector<int64_t> perm;  // x -> indexed axes first, the others after in order
  std::string stacked;        // [B..., k] int64
  std::string bshape;         // shape of B
  int nb = 0;                 // rank of B
  int64_t at = 0;
  int count = 0;              // index tensors, masks counted once per dim they cover
  bool masked = false;        // a boolean mask among them: B's size depends on its values
  std::vector<std::string> parts, lens;  // each index tensor (negatives wrapped) and its axis's length
};

// Boolean masks among index tensors are the positions they keep, as torch reads them: a k-D mask
// over dims [p, p + k) is k index tensors (its NonZero rows), and the indices after it shift by k - 1.
std::vector<std::pair<int64_t, TV>> masks_as_indices(Ctx& c, const std::vector<std::pair<int64_t, TV>>& idx) {
  std::vector<std::pair<int64_t, TV>> out;
  int64_t shift = 0;
  for (const auto& [axis, i] : idx) {
    if (!is_mask(c, i)) {
      out.push_back({axis + shift, i});
      continue;
    }
    int k = mask_rank(i);
    if (k == 0) throw UnsupportedError("indexing with a 0-d boolean mask together with other index tensors");
    std::string nz = c.b.op1("NonZero", {c.tensor_as(i, DType::Bool)});  // [k, n]
    for (int j = 0; j < k; ++j) {
      TV t = TV::tensor(c.b.op1("Gather", {nz, c.b.i64(j)}, {Attribute::make_int("axis", 0)}), DType::Int64);
      t.rank_known = true;
      t.shape = {-1};
      out.push_back({axis + shift + j, t});
    }
    shift += k - 1;
  }
  return out;
}

Advanced advanced(Ctx& c, const std::string& x, int r, const std::vector<std::pair<int64_t, TV>>& given) {
  std::vector<std::pair<int64_t, TV>> idx = masks_as_indices(c, given);
  Advanced a;
  a.count = static_cast<int>(idx.size());
  a.masked = std::any_of(given.begin(), given.end(), [&](const auto& g) { return is_mask(c, g.second); });
  std::vector<bool> indexed(static_cast<size_t>(r), false);
  for (const auto& [axis, i] : idx) {
    if (axis >= r) throw UnsupportedError("more indices than the tensor has dims");
    indexed[static_cast<size_t>(axis)] = true;
    a.perm.push_back(axis);
    int ir = i.is_const() ? static_cast<int>(i.c.toTensor().dim()) : i.rank_known ? static_cast<int>(i.shape.size()) : -1;
    if (ir < 0) throw UnsupportedError("an index tensor of unknown rank");
    a.nb = std::max(a.nb, ir);
  }
  for (int d = 0; d < r; ++d)
    if (!indexed[static_cast<size_t>(d)]) a.perm.push_back(d);
  bool adjacent = true;
  for (size_t k = 1; k < idx.size(); ++k) adjacent = adjacent && idx[k].first == idx[k - 1].first + 1;
  a.at = adjacent ? idx[0].first : 0;
  std::string shape = c.b.shape_of(x);
  for (const auto& [axis, i] : idx) {
    std::string t = c.tensor_as(i, DType::Int64);
    std::string len = c.b.op1("Gather", {shape, c.b.i64(axis)});
    a.parts.push_back(c.b.op1("Add", {t, c.b.op1("Mul", {c.b.cast(c.b.op1("Less", {t, c.b.i64(0)}), DType::Int64), len})}));
    a.lens.push_back(len);
  }
  std::string acc = a.parts[0];
  for (size_t k = 1; k < a.parts.size(); ++k) acc = c.b.op1("Add", {acc, c.b.op1("Mul", {a.parts[k], c.b.i64(0)})});
  a.bshape = c.b.shape_of(acc);
  std::vector<std::string> cols;
  for (auto& p : a.parts) cols.push_back(c.b.unsqueeze(c.b.op1("Expand", {p, a.bshape}), {-1}));
  a.stacked = c.b.concat(cols, -1);
  return a;
}

// [B..., rest...] -> torch's layout [rest[:at], B..., rest[at:]] (and back with `inverse`).
std::vector<int64_t> b_to_torch(const Advanced& a, int rest, bool inverse) {
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < a.at; ++k) perm.push_back(a.nb + k);
  for (int64_t k = 0; k < a.nb; ++k) perm.push_back(k);
  for (int64_t k = a.at; k < rest; ++k) perm.push_back(a.nb + k);
  if (!inverse) return perm;
  std::vector<int64_t> inv(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inv[static_cast<size_t>(perm[k])] = static_cast<int64_t>(k);
  return inv;
}

bool identity(const std::vector<int64_t>& p) {
  for (size_t k = 0; k < p.size(); ++k)
    if (p[k] != static_cast<int64_t>(k)) return false;
  return true;
}

void index(Ctx& c, const TNode* n) {
  auto idx = index_list(c, n);
  std::string x = c.t(n, 0);
  if (idx.size() == 1) {
    auto [axis, i] = idx[0];
    if (is_mask(c, i)) {
      MaskSel s = mask_select(c, x, c.rank(n, 0), axis, i);
      c.out(n, c.b.op1("Gather", {s.xf, s.pos}, {Attribute::make_int("axis", axis)}));
      // The number of selected positions depends on the mask's values, not on the profiled run.
      TV& r = c.get_mut(n->output());
      if (r.rank_known && axis < static_cast<int64_t>(r.shape.size())) r.shape[static_cast<size_t>(axis)] = -1;
      return;
    }
    return c.out(n, c.b.op1("Gather", {x, c.tensor_as(i, DType::Int64)}, {Attribute::make_int("axis", axis)}));
  }
  // Several integer index tensors: one GatherND over their broadcast, from x with the indexed axes
  // moved to the front, and B moved to where torch puts it.
  int r = c.rank(n, 0);
  Advanced a = advanced(c, x, r, idx);
  if (!identity(a.perm)) x = c.b.transpose(x, a.perm);
  std::string y;
  if (c.b.opset() >= 11) {
    y = c.b.op1("GatherND", {x, a.stacked});
  } else {
    // Before GatherND: the indexed axes (now in front) flattened into one, read by Gather at the
    // linear position of each index tuple (Horner over the axes' lengths).
    std::string linear = a.parts[0];
    for (size_t k = 1; k < a.parts.size(); ++k)
      linear = c.b.op1("Add", {c.b.op1("Mul", {linear, a.lens[k]}), a.parts[k]});
    std::string flat_shape = c.b.concat({c.b.i64s({-1}), c.b.slice(c.b.shape_of(x), {a.count}, {r}, {0})}, 0);
    y = c.b.op1("Gather", {c.b.op1("Reshape", {x, flat_shape}), linear}, {Attribute::make_int("axis", 0)});
  }
  int rest = r - a.count;
  std::vector<int64_t> to_torch = b_to_torch(a, rest, false);
  if (!identity(to_torch)) y = c.b.transpose(y, to_torch);
  c.out(n, y);
  if (a.masked) {  // B's size is the masks' count of true values, not the profiled run's
    TV& out = c.get_mut(n->output());
    for (int64_t d = a.at; d < a.at + a.nb && out.rank_known && d < static_cast<int64_t>(out.shape.size()); ++d)
      out.shape[static_cast<size_t>(d)] = -1;
  }
}

// aten::index_put(x, indices, values, accumulate)
void index_put(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  auto idx = index_list(c, n);
  std::string x = c.t_as(n, 0, t), v = c.t_as(n, 2, t);
  bool acc = c.flag(n, 3);
  if (idx.size() == 1 && is_mask(c, idx[0].second)) {
    int r = c.rank(n, 0);
    int64_t p = idx[0].first;
    const TV& mask = idx[0].second;
    int64_t k = mask_rank(mask), tail = r - p - k;
    if (c.rank(n, 2) <= tail) {
      // Values that do not depend on the selected positions: broadcast under the mask.
      std::string m = c.tensor_as(mask, DType::Bool);
      if (tail > 0) {
        std::vector<int64_t> axes;
        for (int64_t a = 0; a < tail; ++a) axes.push_back(k + a);
        m = c.b.unsqueeze(m, axes);
      }
      return c.out(n, acc ? c.b.op1("Add", {x, c.b.op1("Where", {m, v, c.b.scalar(0, t)})})
                          : c.b.op1("Where", {m, v, x}));
    }
    // Values per selected position: scatter along the flattened mask axis, moved to the front.
    c.b.require(11, "index_put with a boolean mask (ScatterND)");
    MaskSel s = mask_select(c, x, r, p, mask);
    std::string sel = c.b.op1("Gather", {s.xf, s.pos}, {Attribute::make_int("axis", p)});
    std::string upd = c.b.op1("Expand", {v, c.b.shape_of(sel)});
    if (acc) upd = c.b.op1("Add", {sel, upd});  // a mask selects each position once
    int fr = static_cast<int>(r - k + 1);
    std::vector<int64_t> perm{p}, inv(static_cast<size_t>(fr));
    for (int64_t a = 0; a < fr; ++a)
      if (a != p) perm.push_back(a);
    for (int64_t a = 0; a < fr; ++a) inv[static_cast<size_t>(perm[static_cast<size_t>(a)])] = a;
    std::string y =
        c.b.op1("ScatterND", {c.b.transpose(s.xf, perm), c.b.unsqueeze(s.pos, {-1}), c.b.transpose(upd, perm)});
    y = c.b.transpose(y, inv);
    if (k > 1) y = c.b.op1("Reshape", {y, c.b.shape_of(x)});
    return c.out(n, y);
  }
  if (idx.size() != 1 || idx[0].first != 0) {
    // Index tensors anywhere: values broadcast to torch's result layout, moved to [B..., rest...],
    // scattered into x with the indexed axes in front, and x moved back.
    int r = c.rank(n, 0);
    c.b.require(11, "index_put at several index tensors (ScatterND)");
    Advanced a = advanced(c, x, r, idx);
    int rest = r - a.count;
    std::string xp = identity(a.perm) ? x : c.b.transpose(x, a.perm);
    std::string rest_shape = c.b.slice(c.b.shape_of(xp), {static_cast<int64_t>(a.count)}, {r}, {0});
    std::string sel_shape = c.b.concat({a.bshape, rest_shape}, 0);  // [B..., rest...]
    std::vector<int64_t> to_torch = b_to_torch(a, rest, false), from_torch = b_to_torch(a, rest, true);
    std::string torch_shape = identity(to_torch) ? sel_shape
                                                 : c.b.op1("Gather", {sel_shape, c.b.i64s(to_torch)});
    std::string upd = c.b.op1("Expand", {v, torch_shape});
    if (!identity(from_torch)) upd = c.b.transpose(upd, from_torch);
    std::vector<Attribute> attrs;
    if (acc) {
      c.b.require(16, "index_put with accumulate");
      attrs.push_back(Attribute::make_string("reduction", "add"));
    }
    std::string y = c.b.op1("ScatterND", {xp, a.stacked, upd}, attrs);
    if (!identity(a.perm)) {
      std::vector<int64_t> inv(a.perm.size());
      for (size_t k = 0; k < a.perm.size(); ++k) inv[static_cast<size_t>(a.perm[k])] = static_cast<int64_t>(k);
      y = c.b.transpose(y, inv);
    }
    return c.out(n, y);
  }
  c.b.require(11, "index_put (ScatterND)");
  std::string i = c.tensor_as(idx[0].second, DType::Int64);
  int r = c.rank(n, 0);
  std::string ishape = c.b.shape_of(i);
  std::string tail = c.b.slice(c.b.shape_of(x), {1}, {r}, {0});
  std::string upd = c.b.op1("Expand", {v, c.b.concat({ishape, tail}, 0)});
  std::vector<Attribute> attrs;
  if (acc && c.b.opset() < 16) {
    // Duplicates accumulate: each row p of x gains the sum of the values whose index is p.
    std::string len = c.b.dim(x, 0);
    std::string flat_i = c.b.reshape(i, {-1});
    flat_i = c.b.op1("Add", {flat_i, c.b.op1("Mul", {c.b.cast(c.b.op1("Less", {flat_i, c.b.i64(0)}), DType::Int64), len})});
    std::string flat_u = c.b.op1("Reshape", {upd, c.b.concat({c.b.i64s({-1}), tail}, 0)});  // [K, tail...]
    std::string mask = c.b.op1("Equal", {c.b.unsqueeze(flat_i, {1}), c.b.op1("Range", {c.b.i64(0), len, c.b.i64(1)})});
    std::vector<int64_t> ones;
    for (int k = 2; k <= r; ++k) ones.push_back(k);
    if (!ones.empty()) mask = c.b.unsqueeze(mask, ones);  // [K, L, 1...]
    DType t = c.dtype_of(c.in(n, 0));
    std::string filled = c.b.op1("Where", {mask, c.b.unsqueeze(flat_u, {1}), c.b.scalar(0, t)});
    return c.out(n, c.b.op1("Add", {x, c.b.reduce("ReduceSum", filled, {0}, false)}));
  }
  if (acc) attrs.push_back(Attribute::make_string("reduction", "add"));
  c.out(n, c.b.op1("ScatterND", {x, c.b.unsqueeze(i, {-1}), upd}, attrs));
}

void nonzero(Ctx& c, const TNode* n) {
  if (c.rank(n, 0) == 0) {  // [1, 0] when the element is nonzero, [0, 0] when not
    std::string k = c.b.cast(c.b.op1("Not", {c.b.op1("Equal", {c.b.cast(c.t(n, 0), DType::Double), c.b.scalar(0, DType::Double)})}),
                             DType::Int64);
    std::string shape = c.b.concat({c.b.reshape(k, {1}), c.b.i64s({0})}, 0);
    return c.out(n, c.b.op1("ConstantOfShape", {shape}, {Attribute::make_tensor("value", Tensor(DType::Int64, {1}))}));
  }
  c.out(n, c.b.transpose(c.b.op1("NonZero", {c.t(n, 0)}), {1, 0}));
}

}  // namespace

void register_index_ops(OpTable& t) {
  t["aten::index_select"] = {index_select};
  t["aten::gather"] = {gather};
  t["aten::scatter"] = {scatter_};
  t["aten::scatter_add"] = {scatter_add};
  t["aten::scatter_reduce"] = {scatter_reduce};
  t["aten::embedding"] = {embedding};
  t["aten::masked_fill"] = {masked_fill};
  t["aten::index"] = {index};
  t["aten::index_put"] = {index_put};
  t["aten::nonzero"] = {nonzero};
}

}  // namespace t2o
