// Order statistics: kthvalue, median and nanmedian (whole tensor or along a dim, with indices),
// msort, quantile and nanquantile. Each sorts along the dim (TopK over its full length, dynamic
// lengths included) and picks positions; NaN counts as larger than every number, as torch sorts it.
#include <cmath>
#include <limits>

#include "torch/ops/compose.h"

namespace t2o {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Element count of a profiled shape, -1 when a dim is dynamic (the length of the flattened tensor).
int64_t flat_length(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t d : shape) numel = d < 0 || numel < 0 ? -1 : numel * d;
  return numel;
}

// x with NaN replaced by +inf (so that a sort puts them last), and whether each element was NaN
// ("" for integer types, which have none).
std::pair<std::string, std::string> nan_last(Ctx& c, const std::string& x, DType t) {
  if (!dtype_is_float(t)) return {x, ""};
  std::string isnan = c.b.op1("IsNaN", {x});
  return {c.b.op1("Where", {isnan, c.b.scalar(std::numeric_limits<double>::infinity(), t), x}), isnan};
}

// Ascending values and indices of x along `axis`, over its full length (static or not).
std::vector<std::string> sort_up(Ctx& c, const std::string& x, const std::vector<int64_t>& shape, int64_t axis) {
  c.b.require(10, "sorting (TopK)");
  int64_t len = shape.at(static_cast<size_t>(axis));
  return len >= 0 ? c.b.topk(x, len, axis, false, true)
                  : c.b.topk_dyn(x, c.b.unsqueeze(c.b.dim(x, axis), {0}), axis, false, true);
}

// The k-th smallest (k: 0-d int64, 1-based) of x along `axis`, values and indices; the axis is
// dropped unless keep. NaN (as +inf while sorting) comes back as NaN; with `nan_wins` (median) a
// slice holding a NaN gives NaN and the index of its first NaN.
std::pair<std::string, std::string> kth_along(Ctx& c, const std::string& x, DType t, const std::vector<int64_t>& shape,
                                              int64_t axis, const std::string& k, bool keep, bool nan_wins = false) {
  auto [xs, isnan] = nan_last(c, x, t);
  auto s = sort_up(c, xs, shape, axis);
  std::string pos = c.b.op1("Sub", {k, c.b.i64(1)});
  std::string v = c.b.op1("Gather", {s[0], pos}, {Attribute::make_int("axis", axis)});
  std::string i = c.b.op1("Gather", {s[1], pos}, {Attribute::make_int("axis", axis)});
  if (!isnan.empty()) {
    std::string picked_nan = c.b.op1("Gather", {c.b.op1("GatherElements", {isnan, s[1]}, {Attribute::make_int("axis", axis)}), pos},
                                     {Attribute::make_int("axis", axis)});
    v = c.b.op1("Where", {picked_nan, c.b.scalar(kNaN, t), v});
    if (nan_wins) {
      std::string nan01 = c.b.cast(isnan, DType::Int32);
      std::string any = c.b.cast(c.b.reduce("ReduceMax", nan01, {axis}, false), DType::Bool);
      std::string first = c.b.op1("ArgMax", {nan01}, {Attribute::make_int("axis", axis), Attribute::make_int("keepdims", 0)});
      v = c.b.op1("Where", {any, c.b.scalar(kNaN, t), v});
      i = c.b.op1("Where", {any, first, i});
    }
  }
  if (keep) {
    v = c.b.unsqueeze(v, {axis});
    i = c.b.unsqueeze(i, {axis});
  }
  return {v, i};
}

// aten::kthvalue(x, k, dim=-1, keepdim=False) -> (values, indices)
void kthvalue(Ctx& c, const TNode* n) {
  DType t = c.dtype(n, 0);
  int r = c.rank(n, 0);
  int64_t axis = norm_axis(c.i(n, "dim", -1), std::max(r, 1));
  std::string x = c.t(n, 0);
  auto [v, i] = kth_along(c, x, t, c.shape(n, 0), axis, c.int_tensor(c.in(n, 1)), c.flag(n, "keepdim", false));
  c.out(n, 0, v);
  c.out(n, 1, i);
}

// Lower median position (1-based) of a dim of length len: (len - 1) / 2 + 1.
std::string median_k(Ctx& c, const std::string& x, const std::vector<int64_t>& shape, int64_t axis) {
  int64_t len = shape.at(static_cast<size_t>(axis));
  if (len >= 0) return c.b.i64((len - 1) / 2 + 1);
  return c.b.op1("Add", {c.b.op1("Div", {c.b.op1("Sub", {c.b.dim(x, axis), c.b.i64(1)}), c.b.i64(2)}), c.b.i64(1)});
}

// aten::median(x) (the lower median of all elements, NaN when there is one) and
// aten::median(x, dim, keepdim) -> (values, indices).
void median(Ctx& c, const TNode* n) {
  DType t = c.dtype(n, 0);
  int r = c.rank(n, 0);
  std::string x = c.t(n, 0);
  if (n->outputs().size() == 1) {
    int64_t numel = flat_length(c.shape(n, 0));
    std::string flat = c.b.reshape(x, {-1});
    auto [v, i] = kth_along(c, flat, t, {numel}, 0, median_k(c, flat, {numel}, 0), false, true);
    return c.out(n, v);
  }
  int64_t axis = norm_axis(c.i(n, 1), std::max(r, 1));
  auto [v, i] = kth_along(c, x, t, c.shape(n, 0), axis, median_k(c, x, c.shape(n, 0), axis), c.flag(n, 2), true);
  c.out(n, 0, v);
  c.out(n, 1, i);
}

// aten::nanmedian: the lower median of the values that are not NaN (NaN when all are).
void nanmedian(Ctx& c, const TNode* n) {
  DType t = c.dtype(n, 0);
  if (!dtype_is_float(t)) return median(c, n);
  int r = c.rank(n, 0);
  std::string x = c.t(n, 0);
  std::vector<int64_t> shape = c.shape(n, 0);
  int64_t axis = 0;
  bool keep = false;
  if (n->outputs().size() == 1) {
    int64_t numel = flat_length(shape);
    x = c.b.reshape(x, {-1});
    shape = {numel};
  } else {
    axis = norm_axis(c.i(n, 1), std::max(r, 1));
    keep = c.flag(n, 2);
  }
  c.b.require(11, "nanmedian (GatherElements)");
  auto [xs, isnan] = nan_last(c, x, t);
  auto s = sort_up(c, xs, shape, axis);
  std::string cnt = c.b.reduce("ReduceSum", c.b.cast(c.b.op1("Not", {isnan}), DType::Int64), {axis}, true);
  std::string pos = c.b.op1("Div", {c.b.op1("Sub", {cnt, c.b.i64(1)}), c.b.i64(2)});
  std::string none = c.b.op1("Equal", {cnt, c.b.i64(0)});  // every value NaN
  pos = c.b.op1("Where", {none, c.b.i64(0), pos});
  std::string v = c.b.op1("GatherElements", {s[0], pos}, {Attribute::make_int("axis", axis)});
  std::string i = c.b.op1("GatherElements", {s[1], pos}, {Attribute::make_int("axis", axis)});
  v = c.b.op1("Where", {none, c.b.scalar(kNaN, t), v});
  if (!keep) {
    v = c.b.squeeze(v, {axis});
    i = c.b.squeeze(i, {axis});
  }
  if (n->outputs().size() == 1) return c.out(n, v);
  c.out(n, 0, v);
  c.out(n, 1, i);
}

// aten::msort(x): sorted along dim 0.
void msort(Ctx& c, const TNode* n) {
  DType t = c.dtype(n, 0);
  auto [xs, isnan] = nan_last(c, c.t(n, 0), t);
  auto s = sort_up(c, xs, c.shape(n, 0), 0);
  std::string v = s[0];
  if (!isnan.empty()) v = c.b.op1("GatherElements", {c.t(n, 0), s[1]}, {Attribute::make_int("axis", 0)});
  c.out(n, v);
}

// aten::quantile / nanquantile(x, q, dim=None, keepdim=False, *, interpolation='linear'):
// q a float or a 0-d / 1-D tensor (a 1-D q puts its axis first in the result). The dim is moved
// last and sorted; the q-th positions q * (n - 1) (n: the values not NaN, for nanquantile) are
// picked and interpolated as `interpolation` says. quantile gives NaN for a slice with a NaN,
// nanquantile for one with no other value.
void quantile(Ctx& c, const TNode* n, bool skip_nan) {
  c.b.require(11, "quantile (GatherElements)");
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  std::string x = c.t_as(n, 0, t);
  std::vector<int64_t> shape = c.shape(n, 0);
  const TV& qv = c.in(n, 1);
  bool q_vector = false;
  std::string q;
  if (qv.is_const() && !qv.c.isTensor()) {
    q = c.b.vec({qv.c.toScalar().toDouble()}, DType::Double);
  } else {
    q_vector = c.rank(n, 1) == 1;
    q = c.b.reshape(c.t_as(n, 1, DType::Double), {-1});
  }
  const TV* dimv = c.arg(n, "dim");
  bool all_dims = !dimv || dimv->is_none();
  bool keep = c.flag(n, "keepdim", false);
  std::string interp = "linear";
  if (const TV* iv = c.arg(n, "interpolation"); iv && iv->is_const() && iv->c.isString()) interp = iv->c.toStringRef();
  int64_t axis = 0;
  if (all_dims) {
    int64_t numel = flat_length(shape);
    x = c.b.reshape(x, {-1});
    shape = {numel};
  } else {
    axis = norm_axis(c.i(n, "dim", 0), std::max(r, 1));
    if (r == 0) {
      x = c.b.reshape(x, {1});
      shape = {1};
    }
  }
  int xr = static_cast<int>(shape.size());
  int64_t last = xr - 1;
  if (axis != last) {  // the dim last
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < xr; ++d)
      if (d != axis) perm.push_back(d);
    perm.push_back(axis);
    x = c.b.transpose(x, perm);
    std::vector<int64_t> moved;
    for (int64_t d : perm) moved.push_back(shape[static_cast<size_t>(d)]);
    shape = moved;
  }
  auto [xs, isnan] = nan_last(c, x, t);
  auto s = sort_up(c, xs, shape, last);
  std::string cnt;  // [..., 1] or 0-d, double
  if (skip_nan && !isnan.empty())
    cnt = c.b.reduce("ReduceSum", c.b.cast(c.b.op1("Not", {isnan}), DType::Double), {last}, true);
  else
    cnt = c.b.cast(dim_size(c, x, shape, last), DType::Double);
  // Positions [..., m]: q * (n - 1), at least 0 (no values left: NaN below).
  std::string lead = shape_part(c, c.b.shape_of(x), 0, last);
  std::string out_shape = concat_parts(c, {lead, c.b.shape_of(q)});
  std::string pos = c.b.op1("Mul", {q, c.b.op1("Sub", {cnt, c.b.scalar(1, DType::Double)})});
  pos = c.b.op1("Max", {pos, c.b.scalar(0, DType::Double)});
  pos = c.b.op1("Expand", {pos, out_shape});
  std::string lo = c.b.op1("Floor", {pos}), hi = c.b.op1("Ceil", {pos});
  auto pick = [&](const std::string& p) {
    return c.b.op1("GatherElements", {s[0], c.b.cast(p, DType::Int64)}, {Attribute::make_int("axis", last)});
  };
  std::string v;
  if (interp == "lower") {
    v = pick(lo);
  } else if (interp == "higher") {
    v = pick(hi);
  } else if (interp == "nearest") {
    v = pick(c.b.op1("Round", {pos}));
  } else if (interp == "midpoint") {
    std::string a = pick(lo), b = pick(hi);
    v = c.b.op1("Add", {a, c.b.op1("Mul", {c.b.op1("Sub", {b, a}), c.b.scalar(0.5, t)})});
  } else if (interp == "linear") {
    std::string a = pick(lo), b = pick(hi);
    std::string w = c.b.cast(c.b.op1("Sub", {pos, lo}), t);
    v = c.b.op1("Add", {a, c.b.op1("Mul", {c.b.op1("Sub", {b, a}), w})});
  } else {
    throw UnsupportedError("aten::quantile with interpolation '" + interp + "'");
  }
  if (!isnan.empty()) {
    std::string bad = skip_nan ? c.b.op1("Equal", {cnt, c.b.scalar(0, DType::Double)})
                               : c.b.cast(c.b.reduce("ReduceMax", c.b.cast(isnan, DType::Int32), {last}, true), DType::Bool);
    v = c.b.op1("Where", {bad, c.b.scalar(kNaN, t), v});
  }
  // [..., m] -> [m, ...] (1-D q) or [...] (a number or 0-d q); then the reduced dims back as 1s.
  int vr = xr;  // rank of v: lead dims + m
  if (q_vector) {
    std::vector<int64_t> perm{vr - 1};
    for (int64_t d = 0; d < vr - 1; ++d) perm.push_back(d);
    v = c.b.transpose(v, perm);
  } else {
    v = c.b.squeeze(v, {vr - 1});
  }
  if (keep) {
    int off = q_vector ? 1 : 0;
    if (all_dims) {
      std::vector<int64_t> axes;
      for (int d = 0; d < r; ++d) axes.push_back(off + d);
      if (!axes.empty()) v = c.b.unsqueeze(v, axes);
    } else if (r > 0) {
      v = c.b.unsqueeze(v, {off + axis});
    }
  }
  c.out(n, v);
}

}  // namespace

void register_order_stat_ops(OpTable& t) {
  t["aten::kthvalue"] = {kthvalue};
  t["aten::median"] = {median};
  t["aten::nanmedian"] = {nanmedian};
  t["aten::msort"] = {msort};
  t["aten::quantile"] = {[](Ctx& c, const TNode* n) { quantile(c, n, false); }};
  t["aten::nanquantile"] = {[](Ctx& c, const TNode* n) { quantile(c, n, true); }};
}

}  // namespace t2o
