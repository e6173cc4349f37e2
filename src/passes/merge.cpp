// Chains of layout ops collapse: Transpose∘Transpose, reshape∘reshape, Squeeze/Unsqueeze pairs,
// Cast after a lossless Cast; and a Reshape that flattens to two dims becomes Flatten. Exact.
#include <algorithm>

#include "passes/graph_util.h"
#include "passes/internal.h"
#include "passes/op_args.h"

namespace t2o::passes {

namespace {

bool is(const Node& n, const char* op) { return is_onnx(n) && n.op_type == op; }

// Every value of `from` is exactly representable in `to`.
bool lossless(DType from, DType to) {
  if (from == to) return true;
  auto in = [&](std::initializer_list<DType> l) { return std::find(l.begin(), l.end(), to) != l.end(); };
  using D = DType;
  switch (from) {
    case D::Bool: return to != D::String && to != D::Undefined && to != D::Complex64 && to != D::Complex128;
    case D::Float16: return in({D::Float, D::Double});
    case D::BFloat16: return in({D::Float, D::Double});
    case D::Float: return in({D::Double});
    case D::Int8: return in({D::Int16, D::Int32, D::Int64, D::Float16, D::Float, D::Double});
    case D::UInt8: return in({D::Int16, D::Int32, D::Int64, D::UInt16, D::UInt32, D::UInt64, D::Float16, D::Float, D::Double});
    case D::Int16: return in({D::Int32, D::Int64, D::Float, D::Double});
    case D::UInt16: return in({D::Int32, D::Int64, D::UInt32, D::UInt64, D::Float, D::Double});
    case D::Int32: return in({D::Int64, D::Double});
    case D::UInt32: return in({D::Int64, D::UInt64, D::Double});
    default: return false;
  }
}

std::optional<std::vector<int64_t>> perm_of(const Node& n, PassContext& ctx) {
  std::vector<int64_t> p = n.attr_ints("perm");
  if (!p.empty()) return p;
  auto s = known_shape(ctx.type(n.inputs[0]));
  if (!s) return std::nullopt;
  for (int i = s->rank() - 1; i >= 0; --i) p.push_back(i);
  return p;
}

// Reshape-like ops: their output holds the input's elements in the same order.
bool reshape_like(const Node& n) {
  return is_onnx(n) && (n.op_type == "Reshape" || n.op_type == "Flatten" || n.op_type == "Squeeze" || n.op_type == "Unsqueeze");
}

int merge_in(Scope& s, PassContext& ctx) {
  Graph& g = s.graph();
  auto u = std::make_unique<Uses>(g);
  int n = 0;
  auto producer = [&](const std::string& v) -> Node* {
    int p = u->producer(v);
    return p < 0 ? nullptr : &g.nodes[static_cast<size_t>(p)];
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& node = g.nodes[i];
    if (removed(node) || !is_onnx(node) || node.inputs.empty() || node.inputs[0].empty()) continue;
    Node* prev = producer(node.inputs[0]);
    if (!prev || removed(*prev) || prev->inputs.empty() || prev->inputs[0].empty()) continue;
    const std::string& x = prev->inputs[0];
    if (is(node, "Transpose") && is(*prev, "Transpose")) {
      auto p1 = perm_of(*prev, ctx), p2 = perm_of(node, ctx);
      if (!p1 || !p2 || p1->size() != p2->size()) continue;
      std::vector<int64_t> q;
      for (int64_t k : *p2) q.push_back((*p1)[static_cast<size_t>(k)]);
      bool identity = true;
      for (size_t k = 0; k < q.size(); ++k) identity = identity && q[k] == static_cast<int64_t>(k);
      if (identity) {
        if (!ctx.allow(node) || !bypass(g, *u, i, node.outputs[0], x)) continue;
        remove_node(g.nodes[i]);
      } else {
        if (!ctx.allow(node)) continue;
        node.inputs[0] = x;
        node.set_attr(Attribute::make_ints("perm", q));
      }
      ++n;
      u = std::make_unique<Uses>(g);
      continue;
    }
    if (is(node, "Reshape") && reshape_like(*prev) && node.inputs.size() == 2) {
      // A target without 0 (copy) entries depends only on the element count.
      const Tensor* t = s.constant(node.inputs[1]);
      if (!t) continue;
      std::vector<int64_t> shape = to_ints(*t);
      if (node.attr_int("allowzero", 0) == 0 && std::find(shape.begin(), shape.end(), 0) != shape.end()) continue;
      if (!ctx.allow(node)) continue;
      node.inputs[0] = x;
      ++n;
      u = std::make_unique<Uses>(g);
      continue;
    }
    bool sq_unsq = is(node, "Squeeze") && is(*prev, "Unsqueeze");
    bool unsq_sq = is(node, "Unsqueeze") && is(*prev, "Squeeze");
    if (sq_unsq || unsq_sq) {
      IntsArg a = ints_arg(node, s, "axes", axes_input(node.op_type, ctx.opset()));
      IntsArg b = ints_arg(*prev, s, "axes", axes_input(prev->op_type, ctx.opset()));
      if (!a.known || !b.known || !a.present || !b.present || a.v.size() != b.v.size()) continue;
      // Negative axes count from the end of the larger rank on both sides.
      const std::string& big = sq_unsq ? node.inputs[0] : x;
      auto sb = known_shape(ctx.type(big));
      bool negative = std::any_of(a.v.begin(), a.v.end(), [](int64_t v) { return v < 0; }) ||
                      std::any_of(b.v.begin(), b.v.end(), [](int64_t v) { return v < 0; });
      if (negative && !sb) continue;
      int64_t rank = sb ? sb->rank() : 1 << 20;
      auto na = normalize_axes(a.v, rank), nb = normalize_axes(b.v, rank);
      if (!na || !nb) continue;
      std::sort(na->begin(), na->end());
      std::sort(nb->begin(), nb->end());
      if (*na != *nb || !ctx.allow(node) || !bypass(g, *u, i, node.outputs[0], x)) continue;
      remove_node(g.nodes[i]);
      ++n;
      u = std::make_unique<Uses>(g);
      continue;
    }
    if (is(node, "Cast") && is(*prev, "Cast")) {
      const Type* tx = ctx.type(x);
      if (!tx || tx->kind != Type::Kind::Tensor || tx->elem == DType::Undefined) continue;
      DType mid = static_cast<DType>(prev->attr_int("to", 0)), to = static_cast<DType>(node.attr_int("to", 0));
      if (!lossless(tx->elem, mid) || !ctx.allow(node)) continue;
      if (to == tx->elem) {
        if (!bypass(g, *u, i, node.outputs[0], x)) continue;
        remove_node(g.nodes[i]);
      } else {
        node.inputs[0] = x;
      }
      ++n;
      u = std::make_unique<Uses>(g);
    }
  }
  drop_removed(g);
  return n;
}

// Flatten(axis) produces [prod(x[:axis]), prod(x[axis:])]; the axis for which Reshape(x, t)
// produces exactly that for every input of x's shape, or -1.
int flatten_axis(const Shape& x, const std::vector<int64_t>& t) {
  if (t.size() != 2 || x.rank() < 1) return -1;
  int r = x.rank();
  auto prod = [&](int lo, int hi) -> std::optional<int64_t> {
    int64_t p = 1;
    for (int k = lo; k < hi; ++k) {
      if (!x.dims[static_cast<size_t>(k)].is_static()) return std::nullopt;
      p *= x.dims[static_cast<size_t>(k)].value;
    }
    return p;
  };
  auto is = [](std::optional<int64_t> v, int64_t c) { return v && *v == c; };
  if (t[0] == 0) {  // copies x[0]: the head of axis 1
    if (t[1] == -1 || (t[1] > 0 && is(prod(1, r), t[1]))) return 1;
    return -1;
  }
  for (int a = 0; a <= r; ++a) {
    bool head = t[0] == -1 ? t[1] > 0 : t[0] > 0 && is(prod(0, a), t[0]);
    bool tail = t[1] == -1 ? t[0] > 0 : t[1] > 0 && is(prod(a, r), t[1]);
    // A -1 takes what is left, so the other side must pin its part.
    if (t[0] == -1) head = head && is(prod(a, r), t[1]);
    if (t[1] == -1) tail = tail && is(prod(0, a), t[0]);
    if (head && tail) return a;
  }
  return -1;
}

}  // namespace

int merge_consecutive(Model& m, PassContext& ctx) {
  return for_each_graph(m, [&](Scope& s) { return merge_in(s, ctx); });
}

int canonicalize_reshape(Model& m, PassContext& ctx) {
  return for_each_graph(m, [&](Scope& s) {
    Graph& g = s.graph();
    int n = 0;
    for (Node& node : g.nodes) {
      if (!is(node, "Reshape") || node.inputs.size() != 2 || node.attr_int("allowzero", 0) != 0) continue;
      const Tensor* t = s.constant(node.inputs[1]);
      auto x = known_shape(ctx.type(node.inputs[0]));
      if (!t || !x) continue;
      int a = flatten_axis(*x, to_ints(*t));
      if (a < 0 || !ctx.allow(node)) continue;
      node.op_type = "Flatten";
      node.inputs.resize(1);
      node.attributes.clear();
      node.set_attr(Attribute::make_int("axis", a));
      ++n;
    }
    return n;
  });
}

}  // namespace t2o::passes
