// Gradient of the "ai.onnx.preview.training" domain: dY/dX for each X in `xs`, where Y (`y`) is
// computed from the xs and `zs` by other nodes of the same graph and dY is all ones.
// The node's inputs are only the xs and zs, so the forward nodes between them and y are found in
// the graph at build time, re-evaluated here by a small interpreter (the executor may schedule
// this node before y exists, and y's intermediates may already be released), then differentiated
// in reverse. Everything is computed in double and stored in each X's type (f32 or f64).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/kernels/util.h"

namespace t2o {
namespace {

const char* kDomain = "ai.onnx.preview.training";

// A dense tensor of doubles: the interpreter's only value type.
struct Val {
  Dims dims;
  std::vector<double> v;
};

Val filled(const Dims& d, double x) { return Val{d, std::vector<double>(static_cast<size_t>(numel_of(d)), x)}; }

Val from_tensor(const KernelContext& ctx, const Tensor& t, const std::string& name) {
  if (t.dtype() != DType::Float && t.dtype() != DType::Double)
    ctx.fail("'" + name + "' is " + std::string(dtype_name(t.dtype())) + "; only f32 and f64 are differentiable here");
  Val r{t.dims(), std::vector<double>(static_cast<size_t>(t.numel()))};
  for (int64_t i = 0; i < t.numel(); ++i) r.v[static_cast<size_t>(i)] = t.as_double(i);
  return r;
}

// Elementwise f(a, b) with numpy broadcasting.
template <typename F>
Val binary(const KernelContext& ctx, const Val& a, const Val& b, F&& f) {
  Dims out = kern::broadcast_dims(ctx, a.dims, b.dims);
  Val r = filled(out, 0);
  kern::for_each_broadcast(out, {kern::broadcast_strides(a.dims, out), kern::broadcast_strides(b.dims, out)},
                           [&](int64_t i, const int64_t* off) {
                             r.v[static_cast<size_t>(i)] = f(a.v[static_cast<size_t>(off[0])], b.v[static_cast<size_t>(off[1])]);
                           });
  return r;
}

template <typename F>
Val unary(const Val& a, F&& f) {
  Val r = a;
  for (double& x : r.v) x = f(x);
  return r;
}

// Sums a gradient over the broadcast shape `g.dims` back to an operand's shape `to`: a broadcast
// operand contributed to every element it was stretched over.
Val unbroadcast(const Val& g, const Dims& to) {
  if (g.dims == to) return g;
  Val r = filled(to, 0);
  kern::for_each_broadcast(g.dims, {kern::broadcast_strides(to, g.dims)}, [&](int64_t i, const int64_t* off) {
    r.v[static_cast<size_t>(off[0])] += g.v[static_cast<size_t>(i)];
  });
  return r;
}

// C[m,n] = op(A) * op(B) for 2-D operands, transposing as asked (enough for MatMul's backward).
Val matmul2d(const KernelContext& ctx, const Val& a, bool ta, const Val& b, bool tb) {
  if (a.dims.size() != 2 || b.dims.size() != 2) ctx.fail("MatMul is differentiable here only for 2-D operands");
  int64_t m = ta ? a.dims[1] : a.dims[0], k = ta ? a.dims[0] : a.dims[1];
  int64_t kb = tb ? b.dims[1] : b.dims[0], n = tb ? b.dims[0] : b.dims[1];
  if (k != kb) ctx.fail("MatMul shapes " + dims_to_string(a.dims) + " and " + dims_to_string(b.dims) + " disagree");
  Val c = filled({m, n}, 0);
  auto at = [&](int64_t i, int64_t p) { return ta ? a.v[static_cast<size_t>(p * m + i)] : a.v[static_cast<size_t>(i * k + p)]; };
  auto bt = [&](int64_t p, int64_t j) { return tb ? b.v[static_cast<size_t>(j * k + p)] : b.v[static_cast<size_t>(p * n + j)]; };
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      double x = at(i, p);
      for (int64_t j = 0; j < n; ++j) c.v[static_cast<size_t>(i * n + j)] += x * bt(p, j);
    }
  return c;
}

const std::set<std::string>& supported_ops() {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div", "Neg", "Identity", "Relu",
                                            "Sigmoid", "Tanh", "Exp", "MatMul", "Constant"};
  return ops;
}

class GradientKernel : public OpKernel {
 public:
  explicit GradientKernel(const KernelInfo& info) {
    const Node& n = info.node;
    xs_ = n.attr_strings("xs");
    zs_ = n.attr_strings("zs");
    y_ = n.attr_string("y", "");
    if (xs_.empty()) throw Error(n.describe() + ": Gradient needs a non-empty 'xs'");
    if (y_.empty()) throw Error(n.describe() + ": Gradient needs 'y'");
    if (!info.graph) throw Error(n.describe() + ": Gradient needs its graph to find the nodes computing y");
    graph_ = info.graph;
    collect_forward_nodes(n);
  }

  void run(KernelContext& ctx) override {
    size_t nx = xs_.size(), nz = zs_.size();
    if (static_cast<size_t>(ctx.num_inputs()) != nx + nz)
      ctx.fail("expected " + std::to_string(nx + nz) + " inputs (xs then zs), got " + std::to_string(ctx.num_inputs()));
    if (!unsupported_.empty()) ctx.fail("cannot differentiate through " + unsupported_);

    std::map<std::string, Val> vals;
    for (size_t i = 0; i < nx; ++i) vals[xs_[i]] = from_tensor(ctx, ctx.input(static_cast<int>(i)), xs_[i]);
    for (size_t i = 0; i < nz; ++i) vals[zs_[i]] = from_tensor(ctx, ctx.input(static_cast<int>(nx + i)), zs_[i]);
    // Other leaves (initializers, or graph values the user left out of zs) are held constant.
    for (const std::string& name : leaves_) {
      if (vals.count(name)) continue;
      if (const Initializer* init = graph_->find_initializer(name)) {
        vals[name] = from_tensor(ctx, init->tensor, name);
      } else if (const RValue* rv = ctx.lookup(name); rv && rv->is_tensor()) {
        vals[name] = from_tensor(ctx, rv->tensor, name);
      } else {
        ctx.fail("'" + name + "' is needed to compute '" + y_ + "' but is neither in xs/zs nor available");
      }
    }

    for (const Node* n : fwd_) forward(ctx, *n, vals);

    // Reverse sweep: seed dY with ones, then push each node's output gradient to its inputs.
    std::map<std::string, Val> grads;
    grads[y_] = filled(vals.at(y_).dims, 1.0);
    for (auto it = fwd_.rbegin(); it != fwd_.rend(); ++it) backward(ctx, **it, vals, grads);

    for (size_t i = 0; i < nx; ++i) {
      if (!ctx.has_output(static_cast<int>(i))) continue;
      const Tensor& x = ctx.input(static_cast<int>(i));
      auto g = grads.find(xs_[i]);
      // An x that y does not depend on has a zero gradient.
      Val gv = g == grads.end() ? filled(x.dims(), 0) : unbroadcast(g->second, x.dims());
      Tensor& out = ctx.allocate_output_uninit(static_cast<int>(i), x.dtype(), x.dims());
      for (int64_t k = 0; k < out.numel(); ++k) {
        double d = gv.v[static_cast<size_t>(k)];
        if (out.dtype() == DType::Float) out.data<float>()[k] = static_cast<float>(d);
        else out.data<double>()[k] = d;
      }
    }
  }

 private:
  // Walks back from y through producers until reaching xs/zs or values no node here produces;
  // keeps the needed nodes in the graph's (topological) order.
  void collect_forward_nodes(const Node& self) {
    std::set<std::string> stop(xs_.begin(), xs_.end());
    stop.insert(zs_.begin(), zs_.end());
    std::map<std::string, const Node*> producer;
    for (const Node& n : graph_->nodes) {
      if (&n == &self) continue;
      for (const std::string& o : n.outputs)
        if (!o.empty()) producer[o] = &n;
    }
    if (!stop.count(y_) && !producer.count(y_)) throw Error(self.describe() + ": no node computes y '" + y_ + "'");
    std::set<const Node*> needed;
    std::set<std::string> leaves;
    std::vector<std::string> todo = {y_};
    std::set<std::string> seen;
    while (!todo.empty()) {
      std::string v = todo.back();
      todo.pop_back();
      if (v.empty() || !seen.insert(v).second || stop.count(v)) continue;
      auto p = producer.find(v);
      if (p == producer.end()) {
        leaves.insert(v);
        continue;
      }
      if (needed.insert(p->second).second) {
        for (const std::string& in : p->second->inputs) todo.push_back(in);
      }
    }
    for (const Node& n : graph_->nodes)
      if (needed.count(&n)) {
        fwd_.push_back(&n);
        // Reported at run time so that a model merely containing such a Gradient still loads.
        bool ok = (n.domain.empty() || n.domain == "ai.onnx") && supported_ops().count(n.op_type);
        if (!ok && unsupported_.empty()) unsupported_ = (n.domain.empty() ? "" : n.domain + "::") + n.op_type + " (" + n.describe() + ")";
      }
    leaves_.assign(leaves.begin(), leaves.end());
  }

  static const Val& in(const KernelContext& ctx, const Node& n, int i, const std::map<std::string, Val>& vals) {
    if (!n.has_input(i)) ctx.fail(n.describe() + " lacks input " + std::to_string(i));
    auto it = vals.find(n.inputs[static_cast<size_t>(i)]);
    if (it == vals.end()) ctx.fail("no value for '" + n.inputs[static_cast<size_t>(i)] + "'");
    return it->second;
  }

  void forward(const KernelContext& ctx, const Node& n, std::map<std::string, Val>& vals) const {
    const std::string& op = n.op_type;
    Val r;
    if (op == "Constant") {
      const Tensor* t = n.attr_tensor("value");
      if (!t) ctx.fail(n.describe() + ": only a Constant with 'value' is supported on the path to y");
      r = from_tensor(ctx, *t, n.outputs[0]);
    } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
      const Val &a = in(ctx, n, 0, vals), &b = in(ctx, n, 1, vals);
      if (op == "Add") r = binary(ctx, a, b, [](double x, double y) { return x + y; });
      else if (op == "Sub") r = binary(ctx, a, b, [](double x, double y) { return x - y; });
      else if (op == "Mul") r = binary(ctx, a, b, [](double x, double y) { return x * y; });
      else r = binary(ctx, a, b, [](double x, double y) { return x / y; });
    } else if (op == "MatMul") {
      r = matmul2d(ctx, in(ctx, n, 0, vals), false, in(ctx, n, 1, vals), false);
    } else {
      const Val& a = in(ctx, n, 0, vals);
      if (op == "Neg") r = unary(a, [](double x) { return -x; });
      else if (op == "Identity") r = a;
      else if (op == "Relu") r = unary(a, [](double x) { return x > 0 ? x : 0.0; });
      else if (op == "Sigmoid") r = unary(a, [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
      else if (op == "Tanh") r = unary(a, [](double x) { return std::tanh(x); });
      else if (op == "Exp") r = unary(a, [](double x) { return std::exp(x); });
      else ctx.fail("cannot differentiate through " + op);
    }
    vals[n.outputs[0]] = std::move(r);
  }

  // Adds `g` (already in the operand's shape) to the gradient of value `name`.
  static void accumulate(std::map<std::string, Val>& grads, const std::string& name, Val g) {
    auto it = grads.find(name);
    if (it == grads.end()) {
      grads.emplace(name, std::move(g));
      return;
    }
    for (size_t i = 0; i < g.v.size(); ++i) it->second.v[i] += g.v[i];
  }

  void backward(const KernelContext& ctx, const Node& n, const std::map<std::string, Val>& vals,
                std::map<std::string, Val>& grads) const {
    auto git = grads.find(n.outputs[0]);
    if (git == grads.end() || n.op_type == "Constant") return;  // y does not depend on this output
    const Val g = git->second;
    const std::string& op = n.op_type;
    auto push = [&](int i, const Val& gi) {
      const std::string& name = n.inputs[static_cast<size_t>(i)];
      accumulate(grads, name, unbroadcast(gi, vals.at(name).dims));
    };
    auto mul = [&](const Val& a, const Val& b, auto f) { return binary(ctx, a, b, f); };
    if (op == "Add" || op == "Sub") {
      push(0, g);
      push(1, op == "Add" ? g : unary(g, [](double x) { return -x; }));
    } else if (op == "Mul") {
      const Val &a = in(ctx, n, 0, vals), &b = in(ctx, n, 1, vals);
      push(0, mul(g, b, [](double x, double y) { return x * y; }));
      push(1, mul(g, a, [](double x, double y) { return x * y; }));
    } else if (op == "Div") {
      // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 = -y/b.
      const Val &b = in(ctx, n, 1, vals), &y = vals.at(n.outputs[0]);
      push(0, mul(g, b, [](double x, double d) { return x / d; }));
      Val gy = mul(g, y, [](double x, double q) { return -x * q; });
      push(1, mul(gy, b, [](double x, double d) { return x / d; }));
    } else if (op == "MatMul") {
      // Y = A B: dA = dY B^T, dB = A^T dY.
      const Val &a = in(ctx, n, 0, vals), &b = in(ctx, n, 1, vals);
      push(0, matmul2d(ctx, g, false, b, true));
      push(1, matmul2d(ctx, a, true, g, false));
    } else {
      const Val &x = in(ctx, n, 0, vals), &y = vals.at(n.outputs[0]);
      if (op == "Neg") push(0, unary(g, [](double d) { return -d; }));
      else if (op == "Identity") push(0, g);
      else if (op == "Relu") push(0, mul(g, x, [](double d, double v) { return v > 0 ? d : 0.0; }));
      else if (op == "Sigmoid") push(0, mul(g, y, [](double d, double s) { return d * s * (1 - s); }));
      else if (op == "Tanh") push(0, mul(g, y, [](double d, double t) { return d * (1 - t * t); }));
      else if (op == "Exp") push(0, mul(g, y, [](double d, double e) { return d * e; }));
      else ctx.fail("cannot differentiate through " + op);
    }
  }

  const Graph* graph_ = nullptr;
  std::vector<std::string> xs_, zs_;
  std::string y_;
  std::vector<const Node*> fwd_;     // nodes computing y from xs/zs, in topological order
  std::vector<std::string> leaves_;  // values they read that neither they nor xs/zs provide
  std::string unsupported_;          // first op on the path with no backward rule, if any
};

}  // namespace

void register_gradient_kernels(KernelRegistry& r) {
  r.add(kDomain, "Gradient", 1, factory_of<GradientKernel>());
}

}  // namespace t2o
