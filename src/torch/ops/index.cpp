// Indexing: index_select/gather/scatter/index/index_put/masked_fill/embedding/nonzero.
#include "torch/ops/ops.h"

namespace t2o {
namespace {

void index_select(Ctx& c, const TNode* n) {
  int64_t axis = norm_axis(c.i(n, 1), c.rank(n, 0));
  c.out(n, c.b.op1("Gather", {c.t(n, 0), c.t_as(n, 2, DType::Int64)}, {Attribute::make_int("axis", axis)}));
}

void gather(Ctx& c, const TNode* n) {
  c.b.require(11, "GatherElements");
  int64_t axis = norm_axis(c.i(n, 1), c.rank(n, 0));
  c.out(n, c.b.op1("GatherElements", {c.t(n, 0), c.t_as(n, 2, DType::Int64)}, {Attribute::make_int("axis", axis)}));
}

// aten::scatter(x, dim, index, src|value[, reduce]) / scatter_add(x, dim, index, src)
void scatter(Ctx& c, const TNode* n, const std::string& reduction) {
  c.b.require(reduction.empty() ? 11 : 16, reduction.empty() ? "ScatterElements" : "ScatterElements with reduction");
  DType t = c.out_dtype(n);
  int64_t axis = norm_axis(c.i(n, 1), c.rank(n, 0));
  std::string idx = c.t_as(n, 2, DType::Int64);
  std::string src = c.t_as(n, 3, t);
  if (c.in(n, 3).is_const() && !c.in(n, 3).c.isTensor()) src = c.b.op1("Expand", {src, c.b.shape_of(idx)});
  std::string red = reduction;
  if (n->inputs().size() > 4 && !c.is_none(n, 4)) {
    red = c.str(n, 4);
    if (red == "multiply") red = "mul";
    c.b.require(16, "scatter with reduce");
  }
  std::vector<Attribute> attrs{Attribute::make_int("axis", axis)};
  if (!red.empty()) attrs.push_back(Attribute::make_string("reduction", red));
  c.out(n, c.b.op1("ScatterElements", {c.t_as(n, 0, t), idx, src}, attrs));
}
void scatter_(Ctx& c, const TNode* n) { scatter(c, n, ""); }
void scatter_add(Ctx& c, const TNode* n) { scatter(c, n, "add"); }

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
  if (l.kind != TV::Kind::List) throw UnsupportedError("aten::index with an unknown index list");
  std::vector<std::pair<int64_t, TV>> r;
  for (size_t i = 0; i < l.items.size(); ++i)
    if (!l.items[i].is_none()) r.push_back({static_cast<int64_t>(i), l.items[i]});
  return r;
}

void index(Ctx& c, const TNode* n) {
  auto idx = index_list(c, n);
  std::string x = c.t(n, 0);
  if (idx.size() == 1) {
    auto [axis, i] = idx[0];
    if (c.dtype_of(i) == DType::Bool || c.dtype_of(i) == DType::UInt8) {
      if (axis != 0) throw UnsupportedError("aten::index with a boolean mask after other dims");
      c.b.require(11, "boolean mask indexing (GatherND)");
      std::string nz = c.b.transpose(c.b.op1("NonZero", {c.tensor_as(i, DType::Bool)}), {1, 0});
      return c.out(n, c.b.op1("GatherND", {x, nz}));
    }
    return c.out(n, c.b.op1("Gather", {x, c.tensor_as(i, DType::Int64)}, {Attribute::make_int("axis", axis)}));
  }
  // Several integer index tensors on the leading dims: one GatherND over their broadcast.
  c.b.require(11, "advanced indexing with several tensors (GatherND)");
  for (size_t k = 0; k < idx.size(); ++k)
    if (idx[k].first != static_cast<int64_t>(k)) throw UnsupportedError("aten::index with non-leading index tensors");
  std::vector<std::string> parts;
  std::string shape;
  for (auto& [axis, i] : idx) {
    std::string t = c.tensor_as(i, DType::Int64);
    parts.push_back(t);
  }
  // Broadcast all indices to a common shape by adding zeros of each other's shape.
  std::string acc = parts[0];
  for (size_t k = 1; k < parts.size(); ++k) acc = c.b.op1("Add", {acc, c.b.op1("Mul", {parts[k], c.b.i64(0)})});
  std::string common = c.b.shape_of(acc);
  std::vector<std::string> cols;
  for (auto& p : parts) cols.push_back(c.b.unsqueeze(c.b.op1("Expand", {p, common}), {-1}));
  c.out(n, c.b.op1("GatherND", {x, c.b.concat(cols, -1)}));
}

// aten::index_put(x, indices, values, accumulate)
void index_put(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  auto idx = index_list(c, n);
  std::string x = c.t_as(n, 0, t), v = c.t_as(n, 2, t);
  bool acc = c.flag(n, 3);
  if (idx.size() == 1 && (c.dtype_of(idx[0].second) == DType::Bool) && idx[0].first == 0 && !acc)
    return c.out(n, c.b.op1("Where", {c.tensor_as(idx[0].second, DType::Bool), v, x}));
  if (idx.size() != 1 || idx[0].first != 0) throw UnsupportedError("aten::index_put beyond a single leading index");
  c.b.require(11, "index_put (ScatterND)");
  std::string i = c.tensor_as(idx[0].second, DType::Int64);
  int r = c.rank(n, 0);
  std::string ishape = c.b.shape_of(i);
  std::string tail = c.b.slice(c.b.shape_of(x), {1}, {r}, {0});
  std::string upd = c.b.op1("Expand", {v, c.b.concat({ishape, tail}, 0)});
  std::vector<Attribute> attrs;
  if (acc) {
    c.b.require(16, "index_put with accumulate");
    attrs.push_back(Attribute::make_string("reduction", "add"));
  }
  c.out(n, c.b.op1("ScatterND", {x, c.b.unsqueeze(i, {-1}), upd}, attrs));
}

void nonzero(Ctx& c, const TNode* n) { c.out(n, c.b.transpose(c.b.op1("NonZero", {c.t(n, 0)}), {1, 0})); }

}  // namespace

void register_index_ops(OpTable& t) {
  t["aten::index_select"] = {index_select};
  t["aten::gather"] = {gather};
  t["aten::scatter"] = {scatter_};
  t["aten::scatter_add"] = {scatter_add};
  t["aten::embedding"] = {embedding};
  t["aten::masked_fill"] = {masked_fill};
  t["aten::index"] = {index};
  t["aten::index_put"] = {index_put};
  t["aten::nonzero"] = {nonzero};
}

}  // namespace t2o
