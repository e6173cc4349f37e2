// Control flow: prim::If -> ONNX If (or the taken branch when the condition is known), and
// prim::Loop -> ONNX Loop with loop-carried values.
#include <algorithm>
#include <climits>
#include <functional>
#include <set>

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

bool is_tensor_list(const TValue* v) {
  auto l = v->type()->cast<c10::ListType>();
  return l && l->getElementType()->kind() == c10::TypeKind::TensorType;
}

Type sequence_type(DType elem) {
  Type t;
  t.kind = Type::Kind::Sequence;
  t.inner = std::make_shared<Type>(Type::tensor(elem));
  return t;
}

TV sequence_tv(const std::string& name, DType elem) {
  TV r = TV::tensor(name, elem);
  r.sequence = true;
  return r;
}

// Element type of a list of tensors: from its known items, the profile, or what is appended to it.
DType list_elem_dtype(Ctx& c, const TValue* v, const TV* tv = nullptr) {
  if (tv && tv->sequence) return tv->dtype;
  if (tv && tv->kind == TV::Kind::List)
    for (const TV& e : tv->items)
      if (c.dtype_of(e) != DType::Undefined) return c.dtype_of(e);
  if (const Observed* o = c.observed(v))
    for (const Observed& e : o->elems)
      if (e.dtype != DType::Undefined) return e.dtype;
  for (const auto& u : v->uses())
    if (u.user->kind() == c10::aten::append)
      if (const Observed* o = c.observed(u.user->input(1)); o && o->dtype != DType::Undefined) return o->dtype;
  return DType::Float;
}

// A sequence output of a subgraph needs its own value; Identity takes sequences from opset 14.
std::string sequence_copy(Ctx& c, const TV& s) {
  if (c.b.opset() >= 14) return c.b.op1("Identity", {s.name});
  return c.b.op1("SequenceErase", {c.b.op1("SequenceInsert", {s.name, c.b.scalar(0, s.dtype)})});
}

// A subgraph output must be produced inside the subgraph, so values from outside get an Identity.
std::string subgraph_output(Ctx& c, const TV& v, DType t) {
  if (v.sequence) return sequence_copy(c, v);
  if (v.kind == TV::Kind::List) throw UnsupportedError("control flow yielding a list of unknown length");
  return c.b.op1("Identity", {c.tensor_as(v, t)});
}

bool inside(const torch::jit::Block* b, const torch::jit::Block* outer) {
  for (; b; b = b->owningNode() ? b->owningNode()->owningBlock() : nullptr)
    if (b == outer) return true;
  return false;
}

// Lists of tensors defined outside `blocks` and appended to inside them: they leave the If or
// Loop as sequences. Other in-place list changes have no sequence form here (`error` says so).
std::vector<const TValue*> mutated_lists(const std::vector<torch::jit::Block*>& blocks, std::string& error) {
  std::vector<const TValue*> r;
  std::function<void(torch::jit::Block*, torch::jit::Block*)> walk = [&](torch::jit::Block* b,
                                                                          torch::jit::Block* top) {
    for (TNode* m : b->nodes()) {
      for (auto* sub : m->blocks()) walk(sub, top);
      if (m->inputs().empty() || !is_tensor_list(m->input(0)) || inside(m->input(0)->node()->owningBlock(), top))
        continue;
      std::string kind = m->kind().toQualString();
      static const std::set<std::string> mutating{"aten::append", "aten::pop", "aten::insert", "aten::extend",
                                                  "aten::clear", "aten::_set_item", "aten::remove", "aten::reverse",
                                                  "aten::add_", "aten::sort"};
      if (!mutating.count(kind)) continue;
      if (kind != "aten::append" && error.empty()) {
        std::string src = Ctx::source_of(m);
        error = kind + (src.empty() ? "" : " at " + src) +
                " changes a list inside control flow; only append is supported there";
      }
      if (std::find(r.begin(), r.end(), m->input(0)) == r.end()) r.push_back(m->input(0));
    }
  };
  for (auto* b : blocks) walk(b, b);
  return r;
}

// Runs the conversion of an If or Loop; when it fails, the lists it changes are poisoned too, so
// later readers are skipped like the node's own outputs.
void with_lists(Ctx& c, const std::vector<torch::jit::Block*>& blocks,
                const std::function<void(const std::vector<const TValue*>&)>& fn) {
  std::string error;
  auto lists = mutated_lists(blocks, error);
  try {
    if (!error.empty()) throw UnsupportedError(error);
    fn(lists);
  } catch (...) {
    for (const TValue* l : lists) {
      TV p = TV::constant(c10::IValue());
      p.poisoned = true;
      c.set(l, p);
    }
    throw;
  }
}

struct Branch {
  std::shared_ptr<Graph> g;
  std::vector<TV> outs;   // the block's results
  std::vector<TV> lists;  // the appended-to lists at the end of the block
};

Branch convert_branch(Ctx& c, torch::jit::Block* block, const std::string& name,
                      const std::vector<const TValue*>& lists, const std::vector<TV>& seqs) {
  Branch r;
  r.g = std::make_shared<Graph>();
  r.g->name = name;
  for (size_t k = 0; k < lists.size(); ++k) c.set(lists[k], seqs[k]);
  c.b.push_graph(r.g.get());
  try {
    c.convert_block(block);
    for (const TValue* v : block->outputs()) r.outs.push_back(c.get(v));
    for (const TValue* v : lists) r.lists.push_back(c.get(v));
  } catch (...) {
    c.b.pop_graph();
    throw;
  }
  c.b.pop_graph();
  return r;
}

bool raises(const torch::jit::Block* b) {
  for (const TNode* n : b->nodes())
    if (n->kind() == c10::prim::RaiseException) return true;
  return false;
}

bool same_const(const TV& a, const TV& b) {
  if (!a.is_const() || !b.is_const()) return false;
  const c10::IValue &x = a.c, &y = b.c;
  if (x.isTensor() || y.isTensor()) return x.isTensor() && y.isTensor() && x.toTensor().is_same(y.toTensor());
  return x == y;
}

// One ONNX output of an If: a tensor (or constant both branches agree on), or a sequence.
struct IfOut {
  bool constant = false, sequence = false;
  TV value;  // when constant
  DType dtype = DType::Undefined;
  const Observed* obs = nullptr;
};

void if_lists(Ctx& c, const TNode* n, const std::vector<const TValue*>& lists);

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
  auto* b0 = const_cast<torch::jit::Block*>(n->blocks()[0]);
  auto* b1 = const_cast<torch::jit::Block*>(n->blocks()[1]);
  with_lists(c, {b0, b1}, [&](const std::vector<const TValue*>& lists) { if_lists(c, n, lists); });
}

void if_lists(Ctx& c, const TNode* n, const std::vector<const TValue*>& lists) {
  auto* b0 = const_cast<torch::jit::Block*>(n->blocks()[0]);
  auto* b1 = const_cast<torch::jit::Block*>(n->blocks()[1]);
  // Branches without results only held asserts or warnings.
  if (n->outputs().empty() && lists.empty()) return;
  std::string cnd = c.t_as(n, 0, DType::Bool);
  std::string src = c.b.source();
  std::vector<TV> before;
  for (const TValue* l : lists) before.push_back(c.get(l));
  Branch th = convert_branch(c, b0, c.b.fresh("then"), lists, before);
  Branch el = convert_branch(c, b1, c.b.fresh("else"), lists, before);
  c.b.set_origin(src, "prim::If");
  // The If's results: the node's outputs, then the lists its branches append to.
  std::vector<const TValue*> vals(n->outputs().begin(), n->outputs().end());
  vals.insert(vals.end(), lists.begin(), lists.end());
  th.outs.insert(th.outs.end(), th.lists.begin(), th.lists.end());
  el.outs.insert(el.outs.end(), el.lists.begin(), el.lists.end());
  // Plan the ONNX outputs: one per tensor; lists of equal length stay element-wise, lists of
  // different lengths become sequences.
  std::vector<IfOut> plan;
  std::vector<std::vector<size_t>> slots(vals.size());  // plan indices per result (lists: per item)
  std::vector<int> kinds(vals.size(), 0);                // 0 tensor, 1 element-wise list, 2 sequence
  auto add = [&](IfOut o) {
    plan.push_back(std::move(o));
    return plan.size() - 1;
  };
  for (size_t k = 0; k < vals.size(); ++k) {
    const TV &a = th.outs[k], &b = el.outs[k];
    bool list = is_tensor_list(vals[k]) || a.kind == TV::Kind::List || b.kind == TV::Kind::List || a.sequence ||
                b.sequence;
    if (!list) {
      IfOut o;
      o.dtype = value_dtype(c, vals[k]);
      o.obs = c.observed(vals[k]);
      slots[k].push_back(add(o));
      continue;
    }
    if (a.kind == TV::Kind::List && b.kind == TV::Kind::List && a.items.size() == b.items.size()) {
      kinds[k] = 1;
      const Observed* obs = c.observed(vals[k]);
      for (size_t j = 0; j < a.items.size(); ++j) {
        IfOut o;
        if (same_const(a.items[j], b.items[j]) ||
            (a.items[j].kind == TV::Kind::Tensor && b.items[j].kind == TV::Kind::Tensor &&
             a.items[j].name == b.items[j].name && !a.items[j].sequence)) {
          o.constant = true;  // the same value on both sides (a constant or an item from before the If)
          o.value = a.items[j];
        } else {
          o.dtype = c.dtype_of(a.items[j]) != DType::Undefined ? c.dtype_of(a.items[j]) : c.dtype_of(b.items[j]);
          if (obs && k < n->outputs().size() && j < obs->elems.size()) o.obs = &obs->elems[j];
          if (o.dtype == DType::Undefined && o.obs) o.dtype = o.obs->dtype;
          if (o.dtype == DType::Undefined) throw UnsupportedError("list item of unknown type from a branch");
        }
        slots[k].push_back(add(o));
      }
      continue;
    }
    if (!is_tensor_list(vals[k]))
      throw UnsupportedError("a branch yielding lists of different lengths that are not tensors");
    c.b.require(13, "lists of different lengths from the two branches (sequences in If)");
    kinds[k] = 2;
    IfOut o;
    o.sequence = true;
    o.dtype = list_elem_dtype(c, vals[k], a.sequence || (a.kind == TV::Kind::List && !a.items.empty()) ? &a : &b);
    slots[k].push_back(add(o));
  }
  // Emit the planned outputs inside each branch.
  for (Branch* br : {&th, &el}) {
    c.b.push_graph(br->g.get());
    try {
      auto emit = [&](const IfOut& o, const TV& v) {
        if (o.constant) return;
        if (o.sequence) {
          TV s = to_sequence(c, v, o.dtype);
          std::string name = s.name == v.name ? sequence_copy(c, s) : s.name;
          br->g->outputs.push_back({name, sequence_type(o.dtype), {}});
          return;
        }
        br->g->outputs.push_back(value_info(subgraph_output(c, v, o.dtype), o.dtype, o.obs));
      };
      for (size_t k = 0; k < vals.size(); ++k) {
        const TV& v = br->outs[k];
        if (kinds[k] == 1)
          for (size_t j = 0; j < slots[k].size(); ++j) emit(plan[slots[k][j]], v.items[j]);
        else
          emit(plan[slots[k][0]], v);
      }
    } catch (...) {
      c.b.pop_graph();
      throw;
    }
    c.b.pop_graph();
  }
  int n_out = 0;
  for (const IfOut& o : plan) n_out += o.constant ? 0 : 1;
  std::vector<std::string> outs;
  if (n_out > 0)
    outs = c.b.op("If", {cnd}, {Attribute::make_graph("then_branch", th.g), Attribute::make_graph("else_branch", el.g)},
                  n_out);
  std::vector<TV> results;
  size_t next = 0;
  for (const IfOut& o : plan) {
    if (o.constant) {
      results.push_back(o.value);
      continue;
    }
    results.push_back(o.sequence ? sequence_tv(outs[next], o.dtype) : TV::tensor(outs[next], o.dtype));
    ++next;
  }
  for (size_t k = 0; k < vals.size(); ++k) {
    if (kinds[k] == 1) {
      std::vector<TV> items;
      for (size_t j : slots[k]) items.push_back(results[j]);
      c.set(vals[k], TV::list(items));
    } else {
      c.set(vals[k], results[slots[k][0]]);
    }
  }
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

void loop_lists(Ctx& c, const TNode* n, const std::vector<const TValue*>& lists);

void loop(Ctx& c, const TNode* n) {
  auto* body = const_cast<torch::jit::Block*>(n->blocks()[0]);
  if (try_unroll(c, n, body)) return;
  with_lists(c, {body}, [&](const std::vector<const TValue*>& lists) { loop_lists(c, n, lists); });
}

// Lists appended to in the body ride along as extra carried sequences.
void loop_lists(Ctx& c, const TNode* n, const std::vector<const TValue*>& lists) {
  auto* body = const_cast<torch::jit::Block*>(n->blocks()[0]);
  size_t carried = n->inputs().size() - 2;
  bool seq = !lists.empty();
  for (size_t k = 0; k < carried; ++k)
    seq = seq || is_tensor_list(n->output(k)) || c.in(n, 2 + k).kind == TV::Kind::List;
  if (seq) c.b.require(13, "a list built in a loop (sequences in Loop)");
  std::string src = c.b.source();
  std::string m;
  const TV& trip = c.in(n, 0);
  if (!(trip.is_const() && trip.c.toInt() == INT64_MAX)) m = c.int_tensor(trip);
  std::string cond0;
  const TV& cv = c.in(n, 1);
  if (!(cv.is_const() && cv.c.toBool())) cond0 = c.t_as(n, 1, DType::Bool);
  std::vector<std::string> init;
  std::vector<DType> types;
  std::vector<bool> is_seq;
  for (size_t k = 0; k < carried; ++k) {
    const TV& v = c.in(n, 2 + k);
    if (is_tensor_list(n->output(k)) || v.kind == TV::Kind::List) {
      if (!is_tensor_list(n->output(k))) throw UnsupportedError("prim::Loop carrying a list that is not of tensors");
      types.push_back(list_elem_dtype(c, n->output(k), &v));
      is_seq.push_back(true);
      init.push_back(to_sequence(c, v, types.back()).name);
      continue;
    }
    types.push_back(value_dtype(c, n->output(k)));
    is_seq.push_back(false);
    init.push_back(c.tensor_as(v, types.back()));
  }
  for (const TValue* l : lists) {
    const TV& v = c.get(l);
    types.push_back(list_elem_dtype(c, l, &v));
    is_seq.push_back(true);
    init.push_back(to_sequence(c, v, types.back()).name);
  }
  size_t total = carried + lists.size();
  auto g = std::make_shared<Graph>();
  g->name = c.b.fresh("loop_body");
  std::string iter = c.b.fresh("iter"), cond_in = c.b.fresh("cond_in");
  g->inputs.push_back({iter, Type::tensor(DType::Int64, Shape{}), {}});
  g->inputs.push_back({cond_in, Type::tensor(DType::Bool, Shape{}), {}});
  TV it = TV::tensor(iter, DType::Int64);
  c.set(body->inputs()[0], it);
  for (size_t k = 0; k < total; ++k) {
    std::string name = c.b.fresh("carried");
    const TValue* v = k < carried ? body->inputs()[k + 1] : lists[k - carried];
    if (is_seq[k]) {
      g->inputs.push_back({name, sequence_type(types[k]), {}});
      c.set(v, sequence_tv(name, types[k]));
    } else {
      g->inputs.push_back(value_info(name, types[k], c.observed(v)));
      c.set(v, TV::tensor(name, types[k]));
    }
  }
  c.b.push_graph(g.get());
  try {
    c.convert_block(body);
    std::string cond_out = subgraph_output(c, c.get(body->outputs()[0]), DType::Bool);
    g->outputs.push_back({cond_out, Type::tensor(DType::Bool, Shape{}), {}});
    for (size_t k = 0; k < total; ++k) {
      TV v = k < carried ? c.get(body->outputs()[k + 1]) : c.get(lists[k - carried]);
      if (is_seq[k]) {
        TV s = to_sequence(c, v, types[k]);
        g->outputs.push_back({s.name == v.name ? sequence_copy(c, s) : s.name, sequence_type(types[k]), {}});
        continue;
      }
      std::string out = subgraph_output(c, v, types[k]);
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
  if (total == 0) {
    // A loop with no carried values has no observable effect in a pure graph.
    return;
  }
  auto outs = c.b.op("Loop", in, {Attribute::make_graph("body", g)}, static_cast<int>(total));
  for (size_t k = 0; k < total; ++k) {
    TV r = is_seq[k] ? sequence_tv(outs[k], types[k]) : TV::tensor(outs[k], types[k]);
    if (k < carried)
      c.set(n->output(k), r);
    else
      c.set(lists[k - carried], r);
  }
}

}  // namespace

TV to_sequence(Ctx& c, const TV& list, DType elem) {
  if (list.sequence) return list;
  c.b.require(11, "a list of tensors as an ONNX sequence");
  std::vector<TV> items;
  if (list.kind == TV::Kind::List) {
    items = list.items;
  } else if (list.is_const() && list.c.isList()) {
    for (const auto& e : list.c.toListRef()) items.push_back(TV::constant(e));
  } else {
    throw UnsupportedError("a value used as a list of tensors is not one");
  }
  if (items.empty())
    return sequence_tv(c.b.op1("SequenceEmpty", {}, {Attribute::make_int("dtype", static_cast<int64_t>(elem))}), elem);
  std::vector<std::string> names;
  for (const TV& e : items) names.push_back(c.tensor_as(e, elem));
  return sequence_tv(c.b.op1("SequenceConstruct", names), elem);
}

void sequence_concat(Ctx& c, const TNode* n, bool new_axis) {
  const TV& s = c.in(n, 0);
  int64_t axis = norm_axis(c.i(n, 1), c.out_rank(n));
  std::string y = c.b.op1("ConcatFromSequence", {s.name},
                          {Attribute::make_int("axis", axis), Attribute::make_int("new_axis", new_axis ? 1 : 0)});
  DType t = c.out_dtype(n);
  c.out(n, t == s.dtype ? y : c.b.cast(y, t));
}

void register_control_ops(OpTable& t) {
  t["prim::If"] = {if_};
  t["prim::Loop"] = {loop};
}

}  // namespace t2o
