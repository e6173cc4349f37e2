// Layer normalization written out as ops becomes LayerNormalization (a standard op from opset 17):
//   mean = ReduceMean(X, axes, keepdims=1); d = X - mean; var = ReduceMean(d*d | d^2, axes)
//   Y = d / Sqrt(var + eps) [* gamma] [+ beta]
// when the axes are X's trailing axes, every intermediate is read only inside the chain, and
// gamma/beta are constants that vary only along the normalized axes. Float only: the fused op
// computes in float (stash_type 1), which is the chain's own precision only for float inputs.
#include <algorithm>

#include "passes/graph_util.h"
#include "passes/internal.h"
#include "passes/op_args.h"

namespace t2o::passes {

namespace {

struct Chain {
  const Graph& g;
  const Uses& u;
  const Scope& s;
  PassContext& ctx;
  const Node* node(const std::string& v, const char* op) const {
    int p = u.producer(v);
    if (p < 0) return nullptr;
    const Node& n = g.nodes[static_cast<size_t>(p)];
    return is_onnx(n) && n.op_type == op && n.outputs.size() == 1 ? &n : nullptr;
  }
  size_t index(const Node* n) const { return static_cast<size_t>(n - g.nodes.data()); }
  bool only(const std::string& v, const Node* reader) const { return u.only_reader(v, index(reader)); }
  // Normalized axes of a keepdims ReduceMean, or nullopt.
  std::optional<std::vector<int64_t>> mean_axes(const Node& r, int64_t rank) const {
    if (r.attr_int("keepdims", 1) != 1) return std::nullopt;
    IntsArg a = ints_arg(r, s, "axes", axes_input("ReduceMean", ctx.opset()));
    if (!a.known || !a.present || a.v.empty()) return std::nullopt;
    auto n = normalize_axes(a.v, rank);
    if (n) std::sort(n->begin(), n->end());
    return n;
  }
};

// gamma/beta materialized to the normalized shape, or undefined when c varies elsewhere.
Tensor over_normalized(const Tensor& c, const Dims& norm, DType t) {
  if (c.rank() > static_cast<int>(norm.size()) || c.dtype() != t) return {};
  size_t off = norm.size() - static_cast<size_t>(c.rank());
  for (int k = 0; k < c.rank(); ++k)
    if (c.dim(k) != 1 && c.dim(k) != norm[off + static_cast<size_t>(k)]) return {};
  std::vector<double> v = to_doubles(c);
  int64_t total = numel_of(norm);
  std::vector<double> r(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) {
    // Index into c by broadcasting: strip leading dims, clamp size-1 dims to 0.
    int64_t rem = i, ci = 0, stride = 1;
    for (size_t k = norm.size(); k-- > 0;) {
      int64_t idx = rem % norm[k];
      rem /= norm[k];
      if (k >= off) {
        int64_t cd = c.dim(static_cast<int>(k - off));
        ci += (cd == 1 ? 0 : idx) * stride;
        stride *= cd;
      }
    }
    r[static_cast<size_t>(i)] = v[static_cast<size_t>(ci)];
  }
  return from_doubles(r, norm, t);
}

}  // namespace

int fuse_layer_norm(Model& m, PassContext& ctx) {
  if (ctx.opset() < 17) return 0;
  return for_each_graph(m, [&](Scope& s) {
    Graph& g = s.graph();
    auto u = std::make_unique<Uses>(g);
    int fused = 0;
    for (size_t j = 0; j < g.nodes.size(); ++j) {
      const Node& div = g.nodes[j];
      if (removed(div) || !is_onnx(div) || div.op_type != "Div" || div.inputs.size() != 2) continue;
      Chain c{g, *u, s, ctx};
      const Node* sqrt = c.node(div.inputs[1], "Sqrt");
      const Node* sub = c.node(div.inputs[0], "Sub");
      if (!sqrt || !sub || !c.only(div.inputs[1], &div)) continue;
      const Node* add_eps = c.node(sqrt->inputs[0], "Add");
      if (!add_eps || !c.only(sqrt->inputs[0], sqrt)) continue;
      size_t ei = s.constant(add_eps->inputs[1]) ? 1 : 0;
      const Tensor* eps = s.constant(add_eps->inputs[ei]);
      if (!eps || eps->numel() != 1) continue;
      const Node* var = c.node(add_eps->inputs[1 - ei], "ReduceMean");
      if (!var || !c.only(add_eps->inputs[1 - ei], add_eps)) continue;
      const std::string& d = div.inputs[0];
      const Node* sq = c.node(var->inputs[0], "Mul");
      if (sq && !(sq->inputs[0] == d && sq->inputs[1] == d)) sq = nullptr;
      if (!sq) {
        sq = c.node(var->inputs[0], "Pow");
        const Tensor* two = sq && sq->inputs.size() == 2 ? s.constant(sq->inputs[1]) : nullptr;
        if (!sq || sq->inputs[0] != d || !two || !all_equal(*two, 2)) continue;
      }
      if (!c.only(var->inputs[0], var)) continue;
      // d is read by the square and the division only.
      bool d_ok = !u->is_output(d) && !u->captured(d);
      for (size_t r : u->readers(d)) d_ok = d_ok && (r == c.index(sq) || r == j);
      const Node* mean = c.node(sub->inputs[1], "ReduceMean");
      if (!d_ok || !mean || !c.only(sub->inputs[1], sub)) continue;
      const std::string& x = sub->inputs[0];
      if (mean->inputs.empty() || mean->inputs[0] != x) continue;
      const Type* tx = ctx.type(x);
      auto sx = known_shape(tx);
      if (!sx || tx->elem != DType::Float || sx->rank() < 1) continue;
      int64_t r = sx->rank();
      auto a1 = c.mean_axes(*mean, r), a2 = c.mean_axes(*var, r);
      if (!a1 || !a2 || *a1 != *a2) continue;
      int64_t k = static_cast<int64_t>(a1->size());
      bool trailing = true;
      for (int64_t i = 0; i < k; ++i) trailing = trailing && (*a1)[static_cast<size_t>(i)] == r - k + i;
      Dims norm;
      for (int64_t i = r - k; i < r; ++i) {
        const Dim& dd = sx->dims[static_cast<size_t>(i)];
        if (!dd.is_static()) trailing = false;
        norm.push_back(dd.value);
      }
      if (!trailing) continue;
      // Optional scale and bias after the division.
      std::string out = div.outputs[0];
      size_t last = j;
      Tensor gamma, beta;
      std::vector<size_t> extra;
      auto next_reader = [&](const std::string& v, const char* op) -> const Node* {
        const auto& rs = u->readers(v);
        if (rs.size() != 1 || u->is_output(v) || u->captured(v)) return nullptr;
        const Node& n = g.nodes[rs[0]];
        return is_onnx(n) && n.op_type == op && n.inputs.size() == 2 && n.outputs.size() == 1 ? &n : nullptr;
      };
      if (const Node* mul = next_reader(out, "Mul")) {
        const Tensor* gc = s.constant(mul->inputs[mul->inputs[0] == out ? 1 : 0]);
        if (gc && (gamma = over_normalized(*gc, norm, DType::Float)).defined()) {
          out = mul->outputs[0];
          last = c.index(mul);
          extra.push_back(last);
        }
      }
      if (gamma.defined()) {
        if (const Node* add = next_reader(out, "Add")) {
          const Tensor* bc = s.constant(add->inputs[add->inputs[0] == out ? 1 : 0]);
          if (bc && (beta = over_normalized(*bc, norm, DType::Float)).defined()) {
            out = add->outputs[0];
            last = c.index(add);
            extra.push_back(last);
          }
        }
      }
      if (!gamma.defined()) gamma = from_doubles(std::vector<double>(static_cast<size_t>(numel_of(norm)), 1.0), norm, DType::Float);
      if (!ctx.allow(*mean)) continue;
      std::string gn = ctx.fresh(mean->name + "_scale"), bn = ctx.fresh(mean->name + "_bias");
      add_initializer(g, gn, gamma);
      std::vector<std::string> ins{x, gn};
      if (beta.defined()) {
        add_initializer(g, bn, beta);
        ins.push_back(bn);
      }
      Node ln = make_node("LayerNormalization", ins, {out}, mean->name, mean->doc_string);
      ln.set_attr(Attribute::make_int("axis", r - k));
      ln.set_attr(Attribute::make_float("epsilon", static_cast<float>(eps->as_double(0))));
      std::vector<size_t> gone{c.index(mean), c.index(sub), c.index(sq), c.index(var), c.index(add_eps), c.index(sqrt), j};
      gone.insert(gone.end(), extra.begin(), extra.end());
      for (size_t i : gone) remove_node(g.nodes[i]);
      g.nodes[last] = std::move(ln);
      ++fused;
      u = std::make_unique<Uses>(g);
    }
    drop_removed(g);
    return fused;
  });
}

}  // namespace t2o::passes
