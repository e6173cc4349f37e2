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

// Optional[Tensor] values that control flow may leave None travel as (has, tensor) pairs: `has`
// a 0-d bool, the tensor an empty placeholder of the right type and rank when there is none.
bool optional_pair(const TV& a, const TV& b) {
  bool none_a = a.is_none() && !a.poisoned, none_b = b.is_none() && !b.poisoned;
  if (none_a && none_b) return false;
  return none_a || none_b || !a.has.empty() || !b.has.empty();
}

// The (has, tensor) parts of a value yielded where an Optional is expected.
std::pair<std::string, std::string> pair_parts(Ctx& c, const TV& v, DType t, int rank) {
  if (v.is_none()) {
    // Unknown rank (an If output, whose branches may differ in shape): a scalar stands in; it is
    // never read while `has` is false. If before opset 11 wants both branches' outputs of one shape,
    // which an empty placeholder does not have.
    c.b.require(11, "an If whose branches yield tensors of different shapes (a value one branch leaves unset, "
                    "as after an early return)");
    std::vector<int64_t> dims(static_cast<size_t>(std::max(rank, 0)), 0);
    std::string empty = c.b.op1("ConstantOfShape", {c.b.i64s(dims)},
                                {Attribute::make_tensor("value", Tensor(t, {1}))});
    return {c.b.scalar(0, DType::Bool), empty};
  }
  if (!v.has.empty()) return {v.has, c.tensor_as(v, t)};
  return {c.b.scalar(1, DType::Bool), c.tensor_as(v, t)};
}

bool optional_tensor_type(const TValue* v) {
  auto o = v->type()->cast<c10::OptionalType>();
  return o && o->getElementType()->kind() == c10::TypeKind::TensorType;
}

int known_rank(const TV& v, const Observed* o) {
  if (v.is_const() && v.c.isTensor()) return static_cast<int>(v.c.toTensor().dim());
  if (v.kind == TV::Kind::Tensor && v.rank_known) return static_cast<int>(v.shape.size());
  if (o && o->kind == Observed::Kind::Tensor && o->rank_known) return static_cast<int>(o->sizes.size());
  return -1;
}

bool inside(const torch::jit::Block* b, const torch::jit::Block* outer) {
  for (; b; b = b->owningNode() ? b->owningNode()->owningBlock() : nullptr)
    if (b == outer) return true;
  return false;
}

// Lists of tensors defined outside `blocks` and appended to inside them: they leave the If or
// Loop as sequences. Other in-place list changes have no sequence form here (`error` says so).
// Ops that change a list in place.
const std::set<std::string> kListMutators{"aten::append",    "aten::pop",    "aten::insert",  "aten::extend",
                                          "aten::clear",     "aten::remove", "aten::reverse", "aten::add_",
                                          "aten::_set_item", "aten::sort",   "aten::Delete"};

// With `tensors` (If), also tensors defined outside that an in-place op inside writes, directly or
// through views taken inside (x[mask] = v, x[:, 1:].zero_()): they leave the If as results too.
std::vector<const TValue*> mutated_lists(const std::vector<torch::jit::Block*>& blocks, std::string& error,
                                         bool tensors = false) {
  std::vector<const TValue*> r;
  static const std::set<std::string> views{"aten::slice",  "aten::select",    "aten::narrow",
                                           "aten::view",   "aten::reshape",   "aten::permute",
                                           "aten::transpose", "aten::t",      "aten::swapaxes",
                                           "aten::detach", "aten::alias",     "prim::unchecked_cast",
                                           "aten::squeeze", "aten::unsqueeze", "aten::expand"};
  std::function<void(torch::jit::Block*, torch::jit::Block*)> walk = [&](torch::jit::Block* b,
                                                                          torch::jit::Block* top) {
    for (TNode* m : b->nodes()) {
      for (auto* sub : m->blocks()) walk(sub, top);
      if (m->inputs().empty()) continue;
      std::string kind = m->kind().toQualString();
      if (tensors && kind.size() > 1 && kind.back() == '_' && m->input(0)->type()->cast<c10::TensorType>()) {
        const TValue* v = m->input(0);
        while (inside(v->node()->owningBlock(), top) && !v->node()->inputs().empty() &&
               views.count(v->node()->kind().toQualString()))
          v = v->node()->input(0);
        if (!inside(v->node()->owningBlock(), top) && v->type()->cast<c10::TensorType>() &&
            std::find(r.begin(), r.end(), v) == r.end())
          r.push_back(v);
        continue;
      }
      if (inside(m->input(0)->node()->owningBlock(), top)) continue;
      // Dicts are held key by key at conversion time; a branch or iteration that changes one has
      // no ONNX form here. Found before converting, since an If without results is not converted
      // at all. The dict is returned with the error, so it is poisoned like the lists.
      static const std::set<std::string> dict_mutating{"aten::_set_item", "aten::update", "aten::pop",
                                                       "aten::popitem", "aten::clear", "aten::setdefault",
                                                       "aten::Delete"};
      if (m->input(0)->type()->kind() == c10::TypeKind::DictType && dict_mutating.count(kind)) {
        if (error.empty()) {
          std::string src = Ctx::source_of(m);
          error = kind + (src.empty() ? "" : " at " + src) + " changes a dict inside control flow";
        }
        if (std::find(r.begin(), r.end(), m->input(0)) == r.end()) r.push_back(m->input(0));
        continue;
      }
      if (!kListMutators.count(kind)) continue;
      if (!is_tensor_list(m->input(0))) {
        // Lists of dicts, numbers or lists changed in a branch or iteration: no sequence form.
        if (m->input(0)->type()->kind() != c10::TypeKind::ListType) continue;
        if (error.empty()) {
          std::string src = Ctx::source_of(m);
          error = kind + (src.empty() ? "" : " at " + src) + " changes a list of " +
                  m->input(0)->type()->expectRef<c10::ListType>().getElementType()->annotation_str() +
                  " inside control flow";
        }
        if (std::find(r.begin(), r.end(), m->input(0)) == r.end()) r.push_back(m->input(0));
        continue;
      }
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
                const std::function<void(const std::vector<const TValue*>&)>& fn, bool tensors = false) {
  std::string error;
  auto lists = mutated_lists(blocks, error, tensors);
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
  bool has = false;  // the `has` half of an Optional pair (the tensor half follows it)
  int rank = -1;     // Optional pairs: the tensor's rank, for the placeholder
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
    if (cond.is_const()) c.constant_ifs[n] = pick;
    auto* taken = const_cast<torch::jit::Block*>(n->blocks()[static_cast<size_t>(pick)]);
    c.convert_block(taken);
    for (size_t k = 0; k < n->outputs().size(); ++k) c.set(n->output(k), c.get(taken->outputs()[k]));
    return;
  }
  auto* b0 = const_cast<torch::jit::Block*>(n->blocks()[0]);
  auto* b1 = const_cast<torch::jit::Block*>(n->blocks()[1]);
  with_lists(c, {b0, b1}, [&](const std::vector<const TValue*>& lists) { if_lists(c, n, lists); }, true);
}

void if_lists(Ctx& c, const TNode* n, const std::vector<const TValue*>& lists) {
  auto* b0 = const_cast<torch::jit::Block*>(n->blocks()[0]);
  auto* b1 = const_cast<torch::jit::Block*>(n->blocks()[1]);
  // Branches without results only held asserts or warnings.
  if (n->outputs().empty() && lists.empty()) return;
  std::string cnd = c.t_as(n, 0, DType::Bool);
  std::string src = c.b.source(), module = c.b.module();
  std::vector<TV> before;
  for (const TValue* l : lists) before.push_back(c.get(l));
  Branch th = convert_branch(c, b0, c.b.fresh("then"), lists, before);
  Branch el = convert_branch(c, b1, c.b.fresh("else"), lists, before);
  c.b.set_origin(src, "prim::If", module);
  // The If's results: the node's outputs, then the lists its branches append to.
  std::vector<const TValue*> vals(n->outputs().begin(), n->outputs().end());
  vals.insert(vals.end(), lists.begin(), lists.end());
  // A result that a failed op inside a branch left unset: that op is reported already; the If's
  // results are skipped like any dependent of it.
  auto poisoned = [](const std::vector<TV>& vs) {
    return std::any_of(vs.begin(), vs.end(), [](const TV& v) { return v.poisoned; });
  };
  if (poisoned(th.outs) || poisoned(el.outs) || poisoned(th.lists) || poisoned(el.lists)) {
    for (const TValue* v : vals) {
      TV p = TV::constant(c10::IValue());
      p.poisoned = true;
      c.set(v, p);
    }
    return;
  }
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
    if (!list && optional_pair(a, b)) {
      kinds[k] = 3;
      const TV& t = a.is_none() ? b : a;
      IfOut h;
      h.has = true;
      h.dtype = DType::Bool;
      IfOut o;
      o.dtype = c.dtype_of(t) != DType::Undefined ? c.dtype_of(t) : value_dtype(c, vals[k]);
      o.rank = known_rank(t, c.observed(vals[k]));  // -1: the If output declares no rank
      slots[k].push_back(add(h));
      slots[k].push_back(add(o));
      continue;
    }
    if (!list) {
      IfOut o;
      // A tensor from before the If that neither branch changed.
      if (k >= n->outputs().size() && a.kind == TV::Kind::Tensor && b.kind == TV::Kind::Tensor && a.name == b.name &&
          a.has.empty() && b.has.empty()) {
        o.constant = true;
        o.value = a;
        slots[k].push_back(add(o));
        continue;
      }
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
          // The rank both branches agree on (the sizes may differ between them).
          const TV &x = a.items[j], &y = b.items[j];
          if (x.kind == TV::Kind::Tensor && y.kind == TV::Kind::Tensor && x.rank_known && y.rank_known &&
              x.shape.size() == y.shape.size())
            o.rank = static_cast<int>(x.shape.size());
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
        // Only the element type: the branch not taken while profiling may yield another shape, or rank.
        br->g->outputs.push_back({subgraph_output(c, v, o.dtype), Type::tensor(o.dtype), {}});
      };
      for (size_t k = 0; k < vals.size(); ++k) {
        const TV& v = br->outs[k];
        if (kinds[k] == 1) {
          for (size_t j = 0; j < slots[k].size(); ++j) emit(plan[slots[k][j]], v.items[j]);
        } else if (kinds[k] == 3) {
          const IfOut& o = plan[slots[k][1]];
          auto [has, t] = pair_parts(c, v, o.dtype, o.rank);
          br->g->outputs.push_back({c.b.op1("Identity", {has}), Type::tensor(DType::Bool, Shape{}), {}});
          br->g->outputs.push_back({c.b.op1("Identity", {t}), Type::tensor(o.dtype), {}});
        } else {
          emit(plan[slots[k][0]], v);
        }
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
      for (size_t j : slots[k]) {
        items.push_back(results[j]);
        if (!plan[j].constant && plan[j].rank >= 0) {
          items.back().rank_known = true;
          items.back().shape.assign(static_cast<size_t>(plan[j].rank), -1);
        }
      }
      c.set(vals[k], TV::list(items));
    } else if (kinds[k] == 3) {
      TV r = results[slots[k][1]];
      r.has = results[slots[k][0]].name;
      int rank = plan[slots[k][1]].rank;
      r.rank_known = rank >= 0;
      r.shape.assign(static_cast<size_t>(std::max(rank, 0)), -1);
      c.set(vals[k], r);
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
  with_lists(c, {body}, [&](const std::vector<const TValue*>& lists) { loop_lists(c, n, lists); }, true);
}

// Lists appended to in the body ride along as extra carried sequences, and tensors from outside
// that the body writes in place (x[i] += v) as extra carried tensors; Optional tensors that may be
// None ride as (has, tensor) pairs.
void loop_lists(Ctx& c, const TNode* n, const std::vector<const TValue*>& lists) {
  auto* body = const_cast<torch::jit::Block*>(n->blocks()[0]);
  size_t carried = n->inputs().size() - 2;
  // Tensors written in place ride as tensors; only lists need ONNX sequences in the Loop.
  bool seq = std::any_of(lists.begin(), lists.end(), [](const TValue* l) {
    return is_tensor_list(l) || !l->type()->cast<c10::TensorType>();
  });
  for (size_t k = 0; k < carried; ++k)
    seq = seq || is_tensor_list(n->output(k)) || c.in(n, 2 + k).kind == TV::Kind::List;
  if (seq) c.b.require(13, "a list built in a loop (sequences in Loop)");
  std::string src = c.b.source(), module = c.b.module();
  std::string m;
  const TV& trip = c.in(n, 0);
  if (!(trip.is_const() && trip.c.toInt() == INT64_MAX)) m = c.int_tensor(trip);
  std::string cond0;
  const TV& cv = c.in(n, 1);
  if (!(cv.is_const() && cv.c.toBool())) cond0 = c.t_as(n, 1, DType::Bool);
  // One entry per carried TorchScript value (then per list); a pair takes two ONNX slots.
  // Invariant: the body passes the value through unchanged (TorchScript carries values whose type it
  // refines inside the loop, such as an Optional list); it keeps its value and takes no ONNX slot.
  enum class Kind { Tensor, Sequence, Pair, Invariant };
  struct Carried {
    Kind kind;
    DType dtype;
    int rank = -1;
  };
  std::vector<Carried> cs;
  std::vector<std::string> init;
  // `out` is `in`, directly, through a type refinement, or through ifs whose every branch yields it.
  std::function<bool(const TValue*, const TValue*)> passes_through = [&](const TValue* out, const TValue* in) {
    if (out == in) return true;
    const TNode* p = out->node();
    if (p->kind() == c10::prim::unchecked_cast) return passes_through(p->input(0), in);
    if (p->kind() != c10::prim::If) return false;
    for (const auto* b : p->blocks())
      if (!passes_through(b->outputs()[out->offset()], in)) return false;
    return true;
  };
  auto invariant = [&](size_t k) {
    const TValue* in = body->inputs()[k + 1];
    if (!passes_through(body->outputs()[k + 1], in)) return false;
    const TV& v = c.in(n, 2 + k);
    bool plain_tensor = v.kind == TV::Kind::Tensor && v.has.empty() && !v.sequence && !v.packed;
    if (!v.is_const() && !plain_tensor) return false;
    for (const auto& use : in->uses())
      if (kListMutators.count(use.user->kind().toQualString())) return false;
    return true;
  };
  for (size_t k = 0; k < carried; ++k) {
    const TV& v = c.in(n, 2 + k);
    if (invariant(k)) {
      cs.push_back({Kind::Invariant, DType::Undefined});
      continue;
    }
    if (is_tensor_list(n->output(k)) || v.kind == TV::Kind::List) {
      if (!is_tensor_list(n->output(k))) throw UnsupportedError("prim::Loop carrying a list that is not of tensors");
      cs.push_back({Kind::Sequence, list_elem_dtype(c, n->output(k), &v)});
      init.push_back(to_sequence(c, v, cs.back().dtype).name);
      continue;
    }
    if (v.is_none() || !v.has.empty() || optional_tensor_type(n->output(k))) {
      const Observed* o = c.observed(n->output(k));
      if (!o || o->dtype == DType::Undefined) o = c.observed(body->outputs()[k + 1]);
      DType t = !v.is_none() && c.dtype_of(v) != DType::Undefined ? c.dtype_of(v)
                : o && o->dtype != DType::Undefined          ? o->dtype
                                                               : DType::Float;
      int rank = known_rank(v, o);
      if (rank < 0) throw UnsupportedError("a loop-carried Optional tensor of unknown rank");
      cs.push_back({Kind::Pair, t, rank});
      auto [has, val] = pair_parts(c, v, t, rank);
      init.push_back(has);
      init.push_back(val);
      continue;
    }
    cs.push_back({Kind::Tensor, value_dtype(c, n->output(k))});
    init.push_back(c.tensor_as(v, cs.back().dtype));
  }
  for (const TValue* l : lists) {
    const TV& v = c.get(l);
    if (!is_tensor_list(l) && l->type()->cast<c10::TensorType>()) {  // written in place in the body
      if (v.kind != TV::Kind::Tensor && !(v.is_const() && v.c.isTensor()))
        throw UnsupportedError("an in-place write inside a loop to a value that is not a tensor");
      cs.push_back({Kind::Tensor, c.dtype_of(v)});
      init.push_back(c.tensor(v));
      continue;
    }
    cs.push_back({Kind::Sequence, list_elem_dtype(c, l, &v)});
    init.push_back(to_sequence(c, v, cs.back().dtype).name);
  }
  auto value_of = [&](size_t k) { return k < carried ? body->inputs()[k + 1] : lists[k - carried]; };
  auto g = std::make_shared<Graph>();
  g->name = c.b.fresh("loop_body");
  std::string iter = c.b.fresh("iter"), cond_in = c.b.fresh("cond_in");
  g->inputs.push_back({iter, Type::tensor(DType::Int64, Shape{}), {}});
  g->inputs.push_back({cond_in, Type::tensor(DType::Bool, Shape{}), {}});
  c.set(body->inputs()[0], TV::tensor(iter, DType::Int64));
  for (size_t k = 0; k < cs.size(); ++k) {
    std::string name = c.b.fresh("carried");
    const TValue* v = value_of(k);
    if (cs[k].kind == Kind::Invariant) {
      c.set(v, c.in(n, 2 + k));
    } else if (cs[k].kind == Kind::Sequence) {
      g->inputs.push_back({name, sequence_type(cs[k].dtype), {}});
      c.set(v, sequence_tv(name, cs[k].dtype));
    } else if (cs[k].kind == Kind::Pair) {
      std::string has = c.b.fresh("carried_has");
      g->inputs.push_back({has, Type::tensor(DType::Bool, Shape{}), {}});
      g->inputs.push_back({name, Type::tensor(cs[k].dtype), {}});
      TV t = TV::tensor(name, cs[k].dtype);
      t.has = has;
      t.rank_known = true;
      t.shape.assign(static_cast<size_t>(cs[k].rank), -1);
      c.set(v, t);
    } else {
      g->inputs.push_back(value_info(name, cs[k].dtype, c.observed(v)));
      c.set(v, TV::tensor(name, cs[k].dtype));
    }
  }
  c.b.push_graph(g.get());
  try {
    c.convert_block(body);
    std::string cond_out = subgraph_output(c, c.get(body->outputs()[0]), DType::Bool);
    g->outputs.push_back({cond_out, Type::tensor(DType::Bool, Shape{}), {}});
    for (size_t k = 0; k < cs.size(); ++k) {
      if (cs[k].kind == Kind::Invariant) continue;
      TV v = k < carried ? c.get(body->outputs()[k + 1]) : c.get(lists[k - carried]);
      if (cs[k].kind == Kind::Sequence) {
        TV sq = to_sequence(c, v, cs[k].dtype);
        g->outputs.push_back({sq.name == v.name ? sequence_copy(c, sq) : sq.name, sequence_type(cs[k].dtype), {}});
      } else if (cs[k].kind == Kind::Pair) {
        auto [has, val] = pair_parts(c, v, cs[k].dtype, cs[k].rank);
        g->outputs.push_back({c.b.op1("Identity", {has}), Type::tensor(DType::Bool, Shape{}), {}});
        g->outputs.push_back({c.b.op1("Identity", {val}), Type::tensor(cs[k].dtype), {}});
      } else {
        std::string out = subgraph_output(c, v, cs[k].dtype);
        g->outputs.push_back(value_info(out, cs[k].dtype, c.observed(k < carried ? n->output(k) : lists[k - carried])));
      }
    }
  } catch (...) {
    c.b.pop_graph();
    throw;
  }
  c.b.pop_graph();
  c.b.set_origin(src, "prim::Loop", module);
  std::vector<std::string> in{m, cond0};
  in.insert(in.end(), init.begin(), init.end());
  for (size_t k = 0; k < carried; ++k)
    if (cs[k].kind == Kind::Invariant) c.set(n->output(k), c.in(n, 2 + k));
  if (init.empty()) return;  // a loop with no carried values has no observable effect in a pure graph
  auto outs = c.b.op("Loop", in, {Attribute::make_graph("body", g)}, static_cast<int>(init.size()));
  size_t at = 0;
  for (size_t k = 0; k < cs.size(); ++k) {
    TV r;
    if (cs[k].kind == Kind::Invariant) continue;
    if (cs[k].kind == Kind::Pair) {
      r = TV::tensor(outs[at + 1], cs[k].dtype);
      r.has = outs[at];
      r.rank_known = true;
      r.shape.assign(static_cast<size_t>(cs[k].rank), -1);
      at += 2;
    } else {
      r = cs[k].kind == Kind::Sequence ? sequence_tv(outs[at], cs[k].dtype) : TV::tensor(outs[at], cs[k].dtype);
      ++at;
    }
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
