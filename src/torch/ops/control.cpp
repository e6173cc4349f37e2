// Control flow: prim::If -> ONNX If (or the taken branch when the condition is known), and
// prim::Loop -> ONNX Loop with loop-carried values.
#include <climits>

#include "torch/ops/ops.h"

namespace t2o {
namespace {

ValueInfo value_info(const std::string& name, DType t, const Observed* o) {
  std::optional<Shape> shape;
  if (o && o->kind == Observed::Kind::Tensor && o->rank_known) {
    Shape s;
    for (int64_t d : o->sizes) s.dims.push_back(d >= 0 ? Dim::fixed(d) : Dim{});
    shape = s;
  } else if (o && (o->kind == Observed::Kind::Int || o->kind == Observed::Kind::Float || o->kind == Observed::Kind::Bool)) {
    shape = Shape{};
  }
  return {name, Type::tensor(t, shape), {}};
}

DType value_dtype(Ctx& c, const TValue* v) {
  const Observed* o = c.observed(v);
  if (o && o->dtype != DType::Undefined) return o->dtype;
  throw UnsupportedError("control flow value %" + v->debugName() + " of unknown type (branch never ran?)");
}

// A subgraph output must be produced inside the subgraph, so values from outside get an Identity.
std::string subgraph_output(Ctx& c, const TV& v, DType t) {
  if (v.kind == TV::Kind::List) throw UnsupportedError("control flow yielding a list (needs ONNX sequences)");
  return c.b.op1("Identity", {c.tensor_as(v, t)});
}

std::shared_ptr<Graph> convert_branch(Ctx& c, torch::jit::Block* block, const TNode* n, const std::string& name) {
  auto g = std::make_shared<Graph>();
  g->name = name;
  c.b.push_graph(g.get());
  try {
    c.convert_block(block);
    for (size_t k = 0; k < block->outputs().size(); ++k) {
      DType t = value_dtype(c, n->output(k));
      std::string out = subgraph_output(c, c.get(block->outputs()[k]), t);
      g->outputs.push_back(value_info(out, t, c.observed(n->output(k))));
    }
  } catch (...) {
    c.b.pop_graph();
    throw;
  }
  c.b.pop_graph();
  return g;
}

bool raises(const torch::jit::Block* b) {
  for (const TNode* n : b->nodes())
    if (n->kind() == c10::prim::RaiseException) return true;
  return false;
}

void if_(Ctx& c, const TNode* n) {
  const TV& cond = c.in(n, 0);
  // A branch that raises is assumed not taken (the model is checked on valid inputs).
  bool r0 = raises(n->blocks()[0]), r1 = raises(n->blocks()[1]);
  if (cond.is_const() || r0 != r1) {
    int pick = cond.is_const() ? (cond.c.toBool() ? 0 : 1) : (r0 ? 1 : 0);
    auto* taken = const_cast<torch::jit::Block*>(n->blocks()[static_cast<size_t>(pick)]);
    c.convert_block(taken);
    for (size_t k = 0; k < n->outputs().size(); ++k) c.set(n->output(k), c.get(taken->outputs()[k]));
    return;
  }
  // Branches without results only held asserts or warnings.
  if (n->outputs().empty()) return;
  std::string cnd = c.t_as(n, 0, DType::Bool);
  std::string src = c.b.source();
  auto then_g = convert_branch(c, const_cast<torch::jit::Block*>(n->blocks()[0]), n, c.b.fresh("then"));
  auto else_g = convert_branch(c, const_cast<torch::jit::Block*>(n->blocks()[1]), n, c.b.fresh("else"));
  c.b.set_origin(src, "prim::If");
  auto outs = c.b.op("If", {cnd}, {Attribute::make_graph("then_branch", then_g), Attribute::make_graph("else_branch", else_g)},
                     static_cast<int>(n->outputs().size()));
  for (size_t k = 0; k < outs.size(); ++k) c.out(n, k, outs[k]);
}

// for-loops with a known, small trip count are unrolled: list building (append) and shape
// arithmetic then stay compile-time, and the graph needs no Loop.
bool try_unroll(Ctx& c, const TNode* n, torch::jit::Block* body) {
  const TV& trip = c.in(n, 0);
  const TV& cv = c.in(n, 1);
  if (!trip.is_const() || !cv.is_const() || !cv.c.toBool() || trip.c.toInt() > 256) return false;
  TNode* cond_src = body->outputs()[0]->node();
  if (cond_src->kind() != c10::prim::Constant) return false;
  int64_t count = trip.c.toInt();
  size_t carried = n->inputs().size() - 2;
  std::vector<TV> vals;
  for (size_t k = 0; k < carried; ++k) vals.push_back(c.in(n, 2 + k));
  for (int64_t i = 0; i < count; ++i) {
    c.set(body->inputs()[0], TV::constant(i));
    for (size_t k = 0; k < carried; ++k) c.set(body->inputs()[k + 1], vals[k]);
    c.convert_block(body);
    for (size_t k = 0; k < carried; ++k) vals[k] = c.get(body->outputs()[k + 1]);
  }
  for (size_t k = 0; k < carried; ++k) c.set(n->output(k), vals[k]);
  return true;
}

void loop(Ctx& c, const TNode* n) {
  auto* body = const_cast<torch::jit::Block*>(n->blocks()[0]);
  if (try_unroll(c, n, body)) return;
  size_t carried = n->inputs().size() - 2;
  std::string src = c.b.source();
  std::string m;
  const TV& trip = c.in(n, 0);
  if (!(trip.is_const() && trip.c.toInt() == INT64_MAX)) m = c.int_tensor(trip);
  std::string cond0;
  const TV& cv = c.in(n, 1);
  if (!(cv.is_const() && cv.c.toBool())) cond0 = c.t_as(n, 1, DType::Bool);
  std::vector<std::string> init;
  std::vector<DType> types;
  for (size_t k = 0; k < carried; ++k) {
    const TV& v = c.in(n, 2 + k);
    if (v.kind == TV::Kind::List) throw UnsupportedError("prim::Loop carrying a list (needs ONNX sequences)");
    types.push_back(value_dtype(c, n->output(k)));
    init.push_back(c.tensor_as(v, types.back()));
  }
  auto g = std::make_shared<Graph>();
  g->name = c.b.fresh("loop_body");
  std::string iter = c.b.fresh("iter"), cond_in = c.b.fresh("cond_in");
  g->inputs.push_back({iter, Type::tensor(DType::Int64, Shape{}), {}});
  g->inputs.push_back({cond_in, Type::tensor(DType::Bool, Shape{}), {}});
  TV it = TV::tensor(iter, DType::Int64);
  c.set(body->inputs()[0], it);
  for (size_t k = 0; k < carried; ++k) {
    std::string name = c.b.fresh("carried");
    g->inputs.push_back(value_info(name, types[k], c.observed(body->inputs()[k + 1])));
    c.set(body->inputs()[k + 1], TV::tensor(name, types[k]));
  }
  c.b.push_graph(g.get());
  try {
    c.convert_block(body);
    std::string cond_out = subgraph_output(c, c.get(body->outputs()[0]), DType::Bool);
    g->outputs.push_back({cond_out, Type::tensor(DType::Bool, Shape{}), {}});
    for (size_t k = 0; k < carried; ++k) {
      std::string out = subgraph_output(c, c.get(body->outputs()[k + 1]), types[k]);
      g->outputs.push_back(value_info(out, types[k], c.observed(n->output(k))));
    }
  } catch (...) {
    c.b.pop_graph();
    throw;
  }
  c.b.pop_graph();
  c.b.set_origin(src, "prim::Loop");
  std::vector<std::string> in{m, cond0};
  in.insert(in.end(), init.begin(), init.end());
  if (carried == 0) {
    // A loop with no carried values has no observable effect in a pure graph.
    return;
  }
  auto outs = c.b.op("Loop", in, {Attribute::make_graph("body", g)}, static_cast<int>(carried));
  for (size_t k = 0; k < carried; ++k) c.out(n, k, outs[k]);
}

}  // namespace

void register_control_ops(OpTable& t) {
  t["prim::If"] = {if_};
  t["prim::Loop"] = {loop};
}

}  // namespace t2o
