// Reductions, softmax family, arg/top-k/sort, cumsum (variance and std are in stats.cpp, p-norms in
// linalg.cpp).
#include "torch/ops/ops.h"

namespace t2o {
namespace {

// Reduction dims argument: None or [] means all dims.
std::vector<int64_t> dims_arg(Ctx& c, const TNode* n, size_t i, int r) {
  if (i >= n->inputs().size() || c.is_none(n, i)) return {};
  std::vector<int64_t> d = c.ints(n, i);
  for (auto& v : d) v = norm_axis(v, std::max(r, 1));
  return d;
}

// aten::sum/mean/prod/amax/amin(x, dim?, keepdim, dtype?) and the all-dims forms (x, dtype?).
void reduce(Ctx& c, const TNode* n, const std::string& op) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  std::string x = c.t_as(n, 0, op == "ReduceMean" || op == "ReduceSum" || op == "ReduceProd" ? t : c.dtype(n, 0));
  if (r == 0) return c.out(n, x);
  bool has_dims = n->inputs().size() >= 3 && n->input(1)->type()->kind() != c10::TypeKind::IntType &&
                  n->input(1)->type()->kind() != c10::TypeKind::NoneType && !c.is_none(n, 1);
  if (op == "ReduceProd" && n->inputs().size() >= 3 && n->input(1)->type()->kind() == c10::TypeKind::IntType) {
    // prod(x, int dim, keepdim, dtype)
    return c.out(n, c.b.reduce(op, x, {norm_axis(c.i(n, 1), r)}, c.flag(n, 2)));
  }
  std::vector<int64_t> axes = has_dims ? dims_arg(c, n, 1, r) : std::vector<int64_t>{};
  bool keep = has_dims && c.flag(n, 2);
  std::string y = c.b.reduce(op, x, axes, keep);
  c.out(n, c.t_as(n, 0, t) == x ? y : c.b.cast(y, t));
}
void sum(Ctx& c, const TNode* n) { reduce(c, n, "ReduceSum"); }
void mean(Ctx& c, const TNode* n) { reduce(c, n, "ReduceMean"); }
void prod(Ctx& c, const TNode* n) { reduce(c, n, "ReduceProd"); }
void amax(Ctx& c, const TNode* n) { reduce(c, n, "ReduceMax"); }
void amin(Ctx& c, const TNode* n) { reduce(c, n, "ReduceMin"); }

// aten::max / aten::min: all-reduce, (values, indices) along a dim, or elementwise with another tensor.
void max_min(Ctx& c, const TNode* n, bool is_max) {
  DType t = c.out_dtype(n);
  if (n->inputs().size() == 1) return c.out(n, c.b.reduce(is_max ? "ReduceMax" : "ReduceMin", c.t(n, 0), {}, false));
  if (n->inputs().size() == 2 && n->input(1)->type()->kind() == c10::TypeKind::TensorType)
    return c.out(n, c.b.op1(is_max ? "Max" : "Min", {c.t_as(n, 0, t), c.t_as(n, 1, t)}));
  int r = c.rank(n, 0);
  int64_t axis = norm_axis(c.i(n, 1), r);
  bool keep = n->inputs().size() > 2 && c.flag(n, 2);
  std::string x = c.t(n, 0);
  c.out(n, 0, c.b.reduce(is_max ? "ReduceMax" : "ReduceMin", x, {axis}, keep));
  if (n->outputs().size() > 1)
    c.out(n, 1, c.b.op1(is_max ? "ArgMax" : "ArgMin", {x},
                        {Attribute::make_int("axis", axis), Attribute::make_int("keepdims", keep)}));
}
void max(Ctx& c, const TNode* n) { max_min(c, n, true); }
void min(Ctx& c, const TNode* n) { max_min(c, n, false); }

void arg(Ctx& c, const TNode* n, const char* op) {
  std::string x = c.t(n, 0);
  bool keep = n->inputs().size() > 2 && c.flag(n, 2);
  if (c.is_none(n, 1)) {
    int r = c.rank(n, 0);
    std::string y = c.b.op1(op, {c.b.reshape(x, {-1})}, {Attribute::make_int("axis", 0), Attribute::make_int("keepdims", 0)});
    // The index into the flattened tensor; keepdim keeps every dim, at size 1.
    return c.out(n, keep ? c.b.reshape(y, std::vector<int64_t>(static_cast<size_t>(r), 1)) : y);
  }
  int64_t axis = norm_axis(c.i(n, 1), c.rank(n, 0));
  c.out(n, c.b.op1(op, {x}, {Attribute::make_int("axis", axis), Attribute::make_int("keepdims", keep)}));
}
void argmax(Ctx& c, const TNode* n) { arg(c, n, "ArgMax"); }
void argmin(Ctx& c, const TNode* n) { arg(c, n, "ArgMin"); }

void softmax_like(Ctx& c, const TNode* n, const std::string& op) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  c.out(n, c.b.softmax(op, c.t_as(n, 0, t), c.i(n, 1), r));
}
void softmax(Ctx& c, const TNode* n) { softmax_like(c, n, "Softmax"); }
void log_softmax(Ctx& c, const TNode* n) { softmax_like(c, n, "LogSoftmax"); }

void frobenius(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  c.out(n, c.b.reduce("ReduceL2", c.t(n, 0), dims_arg(c, n, 1, r), n->inputs().size() > 2 && c.flag(n, 2)));
}

void logsumexp(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  c.out(n, c.b.reduce("ReduceLogSumExp", c.t_as(n, 0, c.out_dtype(n)), dims_arg(c, n, 1, r), c.flag(n, 2)));
}

// aten::all/any: through int32, since ONNX reductions do not take bool.
void all_any(Ctx& c, const TNode* n, bool all) {
  if (is_list_value(n, 0)) {  // all(list of bools)
    const TV& l = c.in(n, 0);
    if (l.kind != TV::Kind::List) throw UnsupportedError("aten::all/any on an unknown list");
    bool acc = all;
    std::vector<std::string> dyn;
    for (const TV& e : l.items) {
      if (e.is_const()) acc = all ? (acc && e.c.toBool()) : (acc || e.c.toBool());
      else dyn.push_back(c.tensor_as(e, DType::Bool));
    }
    if (dyn.empty() || acc != all) return c.set(n->output(), TV::constant(acc));
    std::string r = dyn[0];
    for (size_t i = 1; i < dyn.size(); ++i) r = c.b.op1(all ? "And" : "Or", {r, dyn[i]});
    return c.out(n, r);
  }
  int r = c.rank(n, 0);
  std::string x = c.b.cast(c.t_as(n, 0, DType::Bool), DType::Int32);
  std::vector<int64_t> axes;
  bool keep = false;
  if (n->inputs().size() > 1) {
    axes = {norm_axis(c.i(n, 1), r)};
    keep = c.flag(n, 2);
  }
  c.out(n, c.b.cast(c.b.reduce(all ? "ReduceMin" : "ReduceMax", x, axes, keep), DType::Bool));
}
void all(Ctx& c, const TNode* n) { all_any(c, n, true); }
void any(Ctx& c, const TNode* n) { all_any(c, n, false); }

void cumsum(Ctx& c, const TNode* n) {
  c.b.require(11, "CumSum");
  DType t = c.out_dtype(n);
  int64_t axis = norm_axis(c.i(n, 1), c.rank(n, 0));
  c.out(n, c.b.op1("CumSum", {c.t_as(n, 0, t), c.b.i64(axis)}));
}

// aten::topk(x, k, dim, largest, sorted)
void topk(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  int64_t axis = norm_axis(c.i(n, 2), r);
  auto outs = c.is_const(n, 1) ? c.b.topk(c.t(n, 0), c.i(n, 1), axis, c.flag(n, 3), c.flag(n, 4))
                               : c.b.topk_dyn(c.t(n, 0), c.b.unsqueeze(c.int_tensor(c.in(n, 1)), {0}), axis,
                                              c.flag(n, 3), c.flag(n, 4));
  c.out(n, 0, outs[0]);
  c.out(n, 1, outs[1]);
}

// aten::sort(x, dim, descending) / argsort: a full-length TopK.
void sort(Ctx& c, const TNode* n, bool indices_only) {
  int r = c.rank(n, 0);
  size_t di = n->inputs().size() > 3 ? 2 : 1;  // sort.stable(x, stable, dim, descending)
  int64_t axis = norm_axis(c.i(n, di), r);
  bool desc = c.flag(n, di + 1);
  int64_t len = c.shape(n, 0).at(static_cast<size_t>(axis));
  std::string x = c.t(n, 0);
  auto outs = len >= 0 ? c.b.topk(x, len, axis, desc, true)
                       : c.b.topk_dyn(x, c.b.unsqueeze(c.b.dim(x, axis), {0}), axis, desc, true);
  if (indices_only) return c.out(n, outs[1]);
  c.out(n, 0, outs[0]);
  c.out(n, 1, outs[1]);
}
void sort_(Ctx& c, const TNode* n) {
  if (!list_sort(c, n)) sort(c, n, false);
}
void argsort(Ctx& c, const TNode* n) { sort(c, n, true); }

}  // namespace

void register_reduce_ops(OpTable& t) {
  t["aten::sum"] = {sum};
  t["aten::mean"] = {mean};
  t["aten::prod"] = {prod};
  t["aten::amax"] = {amax};
  t["aten::amin"] = {amin};
  t["aten::max"] = {max};
  t["aten::min"] = {min};
  t["aten::argmax"] = {argmax};
  t["aten::argmin"] = {argmin};
  t["aten::softmax"] = {softmax};
  t["aten::log_softmax"] = {log_softmax};
  t["aten::frobenius_norm"] = {frobenius};
  t["aten::logsumexp"] = {logsumexp};
  t["aten::all"] = {all};
  t["aten::any"] = {any};
  t["aten::cumsum"] = {cumsum};
  t["aten::topk"] = {topk};
  t["aten::sort"] = {sort_};
  t["aten::argsort"] = {argsort};
}

}  // namespace t2o
