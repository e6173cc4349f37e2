// Updates at indices along a dim or of the flattened tensor: index_add / index_copy / index_fill /
// index_reduce, put, masked_scatter.
#include <limits>

#include "torch/ops/compose.h"

namespace t2o {
namespace {

struct IndexArgs {
  DType t;
  int r;
  int64_t axis;
  std::string x, idx;
  std::vector<int64_t> shape;
};

IndexArgs index_args(Ctx& c, const TNode* n) {
  IndexArgs a;
  a.t = c.out_dtype(n);
  a.r = c.rank(n, 0);
  if (a.r == 0) throw UnsupportedError(std::string(n->kind().toQualString()) + " on a 0-d tensor");
  a.axis = norm_axis(c.i(n, "dim", 0), a.r);
  a.x = c.t_as(n, 0, a.t);
  a.shape = c.shape(n, 0);
  a.idx = c.b.reshape(c.tensor_as(*c.arg(n, "index"), DType::Int64), {-1});
  return a;
}

// The index repeated over the other dims of `src` (ScatterElements takes one index per element).
std::string index_like(Ctx& c, const IndexArgs& a, const std::string& src) {
  return c.b.op1("Expand", {along_axis(c, a.idx, a.axis, a.r), c.b.shape_of(src)});
}

// hot: [L, k, 1, ..] true where index k names position L along the axis (to broadcast against
// source values unsqueezed at the axis); named: [1, .., L, .., 1] whether any index names L.
struct Hits {
  std::string hot, named;
};

Hits hits(Ctx& c, const IndexArgs& a) {
  std::string pos = arange_of(c, dim_size(c, a.x, a.shape, a.axis));
  std::string hot = c.b.op1("Equal", {c.b.unsqueeze(pos, {1}), c.b.unsqueeze(a.idx, {0})});
  std::string any = c.b.reduce("ReduceSum", c.b.cast(hot, DType::Int64), {1}, false);
  std::vector<int64_t> tail;
  for (int64_t i = a.axis + 1; i < a.r; ++i) tail.push_back(i - a.axis + 1);
  return {tail.empty() ? hot : c.b.unsqueeze(hot, tail), along_axis(c, c.b.op1("Greater", {any, c.b.i64(0)}), a.axis, a.r)};
}

// Each position's selected source values reduced with `op` (`fill` where an index does not hit);
// exact, since values are chosen with Where rather than multiplied by a one-hot matrix.
std::string reduce_hits(Ctx& c, const IndexArgs& a, const std::string& hot, const std::string& src, const std::string& op,
                        double fill) {
  std::string v = c.b.op1("Where", {hot, c.b.unsqueeze(src, {a.axis}), c.b.scalar(fill, a.t)});
  return c.b.reduce(op, v, {a.axis + 1}, false);
}

// torch adds source.select(dim, i) into x.select(dim, index[i]) with broadcasting, so the source
// may have size-1 dims, or fewer dims (right-aligned within a slice): it is expanded to x's shape
// with index's length along dim.
std::string source(Ctx& c, const TNode* n, const IndexArgs& a) {
  const TV& sv = *c.arg(n, "source");
  std::string s = c.tensor_as(sv, a.t);
  int rs = sv.is_const() && sv.c.isTensor() ? static_cast<int>(sv.c.toTensor().dim())
           : sv.rank_known                  ? static_cast<int>(sv.shape.size())
                                            : -1;
  if (rs == 0) return c.b.reshape(s, std::vector<int64_t>(static_cast<size_t>(a.r), 1));
  if (rs < 0) return s;
  if (rs > a.r) throw Error(std::string(n->kind().toQualString()) + ": the source has more dims than the tensor");
  if (rs < a.r) {
    if (a.axis != 0) throw UnsupportedError(std::string(n->kind().toQualString()) + " with a source of fewer dims along dim > 0");
    std::vector<int64_t> at;
    for (int k = 1; k <= a.r - rs; ++k) at.push_back(k);
    s = c.b.unsqueeze(s, at);
  }
  std::string xs = c.b.shape_of(a.x);
  std::string target = concat_parts(c, {shape_part(c, xs, 0, a.axis), shape_part(c, c.b.shape_of(s), a.axis, a.axis + 1),
                                        shape_part(c, xs, a.axis + 1, a.r)});
  return c.b.op1("Expand", {s, target});
}

// aten::index_add(x, dim, index, source, alpha): duplicates accumulate. ScatterElements adds from
// opset 16; before, each position sums the source rows whose index names it.
void index_add(Ctx& c, const TNode* n) {
  IndexArgs a = index_args(c, n);
  std::string src = source(c, n, a);
  double alpha = c.f(n, "alpha", 1.0);
  if (alpha != 1.0) src = c.b.op1("Mul", {src, c.b.scalar(alpha, a.t)});
  if (c.b.opset() >= 16)
    return c.out(n, c.b.op1("ScatterElements", {a.x, index_like(c, a, src), src},
                            {Attribute::make_int("axis", a.axis), Attribute::make_string("reduction", "add")}));
  c.out(n, c.b.op1("Add", {a.x, reduce_hits(c, a, hits(c, a).hot, src, "ReduceSum", 0)}));
}

// aten::index_copy(x, dim, index, source)
void index_copy(Ctx& c, const TNode* n) {
  IndexArgs a = index_args(c, n);
  std::string src = source(c, n, a);
  c.out(n, c.b.op1(c.b.opset() >= 11 ? "ScatterElements" : "Scatter", {a.x, index_like(c, a, src), src},
                   {Attribute::make_int("axis", a.axis)}));
}

// aten::index_fill(x, dim, index, value); negative indices count from the end.
void index_fill(Ctx& c, const TNode* n) {
  IndexArgs a = index_args(c, n);
  std::string len = dim_size(c, a.x, a.shape, a.axis);
  a.idx = c.b.op1("Where", {c.b.op1("Less", {a.idx, c.b.i64(0)}), c.b.op1("Add", {a.idx, len}), a.idx});
  std::string v = c.tensor_as(*c.arg(n, "value"), a.t);
  c.out(n, c.b.op1("Where", {hits(c, a).named, v, a.x}));
}

// aten::index_reduce(x, dim, index, source, reduce, include_self): prod / mean / amax / amin of the
// source rows per position, combined with x's value unless include_self is false; positions no
// index names keep x.
void index_reduce(Ctx& c, const TNode* n) {
  IndexArgs a = index_args(c, n);
  std::string how = c.str(n, *Ctx::arg_index(n, "reduce"));
  bool include = c.flag(n, "include_self", true);
  std::string src = source(c, n, a);
  Hits h = hits(c, a);
  const std::string& hot = h.hot;
  double inf = std::numeric_limits<double>::infinity();
  std::string y;
  if (how == "prod") {
    y = reduce_hits(c, a, hot, src, "ReduceProd", 1);
    if (include) y = c.b.op1("Mul", {y, a.x});
  } else if (how == "amax" || how == "amin") {
    bool mx = how == "amax";
    if (!dtype_is_float(a.t)) throw UnsupportedError("index_reduce amax/amin on integers");
    y = reduce_hits(c, a, hot, src, mx ? "ReduceMax" : "ReduceMin", mx ? -inf : inf);
    if (include) y = c.b.op1(mx ? "Max" : "Min", {y, a.x});
  } else if (how == "mean") {
    if (!dtype_is_float(a.t)) throw UnsupportedError("index_reduce mean on integers (floor division)");
    std::string sum = reduce_hits(c, a, hot, src, "ReduceSum", 0);
    std::string ones = c.b.op1("Where", {hot, c.b.scalar(1, a.t), c.b.scalar(0, a.t)});
    std::string cnt = c.b.reduce("ReduceSum", ones, {1}, false);
    cnt = along_axis(c, c.b.reshape(cnt, {-1}), a.axis, a.r);
    if (include) sum = c.b.op1("Add", {sum, a.x}), cnt = c.b.op1("Add", {cnt, c.b.scalar(1, a.t)});
    y = c.b.op1("Div", {sum, c.b.op1("Max", {cnt, c.b.scalar(1, a.t)})});
  } else {
    throw UnsupportedError("index_reduce with reduce='" + how + "'");
  }
  c.out(n, c.b.op1("Where", {h.named, y, a.x}));
}

// aten::put(x, index, source, accumulate): writes into the flattened x.
void put(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t);
  std::string flat = c.b.reshape(x, {-1});
  std::string idx = c.b.reshape(c.t_as(n, 1, DType::Int64), {-1});
  std::string numel = c.b.op1("Size", {x});
  idx = c.b.op1("Where", {c.b.op1("Less", {idx, c.b.i64(0)}), c.b.op1("Add", {idx, numel}), idx});
  std::string src = c.b.reshape(c.t_as(n, 2, t), {-1});
  std::vector<Attribute> attrs{Attribute::make_int("axis", 0)};
  if (c.flag(n, "accumulate", false)) {
    c.b.require(16, "put with accumulate=True (ScatterElements with reduction)");
    attrs.push_back(Attribute::make_string("reduction", "add"));
  }
  std::string y = c.b.op1(c.b.opset() >= 11 ? "ScatterElements" : "Scatter", {flat, idx, src}, attrs);
  c.out(n, c.b.op1("Reshape", {y, c.b.shape_of(x)}));
}

// aten::masked_scatter(x, mask, source): the positions where mask holds, in order, take source's
// leading elements; the running count of such positions indexes source.
void masked_scatter(Ctx& c, const TNode* n) {
  c.b.require(11, "masked_scatter (CumSum)");
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t);
  std::string shape = c.b.shape_of(c.b.op1("Expand", {x, c.b.shape_of(c.t(n, 1))}));
  x = c.b.op1("Expand", {x, shape});
  std::string m = c.b.reshape(c.b.op1("Expand", {c.t_as(n, 1, DType::Bool), shape}), {-1});
  std::string k = c.b.op1("Sub", {c.b.op1("CumSum", {c.b.cast(m, DType::Int64), c.b.i64(0)}), c.b.i64(1)});
  std::string src = c.b.reshape(c.t_as(n, 2, t), {-1});
  std::string taken = c.b.op1("Gather", {src, c.b.op1("Where", {m, k, c.b.i64(0)})}, {Attribute::make_int("axis", 0)});
  std::string y = c.b.op1("Where", {m, taken, c.b.reshape(x, {-1})});
  c.out(n, c.b.op1("Reshape", {y, shape}));
}

}  // namespace

// aten::fill_diagonal_(x, value, wrap) (registered without the underscore: the in-place fallback
// then updates x and what views it): the elements whose indices are all equal take the value. A
// matrix taller than wide with wrap=True starts the diagonal again every cols + 1 rows, as torch
// steps through the storage.
void fill_diagonal(Ctx& c, const TNode* n) {
  c.b.require(11, "fill_diagonal_ (Range)");
  DType t = c.dtype(n, 0);
  int r = c.rank(n, 0);
  if (r < 2) throw UnsupportedError("aten::fill_diagonal_ of a tensor with fewer than 2 dims");
  std::string x = c.t(n, 0);
  auto arange = [&](int64_t axis) {
    return along_axis(c, c.b.op1("Range", {c.b.i64(0), c.b.dim(x, axis), c.b.i64(1)}), axis, r);
  };
  std::string on;
  bool wrap = c.flag(n, "wrap", false);
  if (r == 2) {
    std::string rows = arange(0), cols = arange(1), ncols = c.b.dim(x, 1);
    // Flat position i * cols + j on the diagonal: a multiple of cols + 1, within the first cols rows
    // unless wrapping.
    std::string flat = c.b.op1("Add", {c.b.op1("Mul", {rows, ncols}), cols});
    on = c.b.op1("Equal", {c.b.op1("Mod", {flat, c.b.op1("Add", {ncols, c.b.i64(1)})}), c.b.i64(0)});
    if (!wrap) on = c.b.op1("And", {on, c.b.op1("Less", {rows, ncols})});
  } else {
    std::string first = arange(0);
    for (int a = 1; a < r; ++a) {
      std::string e = c.b.op1("Equal", {arange(a), first});
      on = on.empty() ? e : c.b.op1("And", {on, e});
    }
  }
  std::string v = c.t_as(n, 1, t);
  c.out(n, c.b.op1("Where", {on, v, x}));
}

void register_index_update_ops(OpTable& t) {
  t["aten::fill_diagonal"] = {fill_diagonal};
  t["aten::index_add"] = {index_add};
  t["aten::index_copy"] = {index_copy};
  t["aten::index_fill"] = {index_fill};
  t["aten::index_reduce"] = {index_reduce};
  t["aten::put"] = {put};
  t["aten::masked_scatter"] = {masked_scatter};
}

}  // namespace t2o
