// Constant folding with the runtime's reference kernels: a node whose inputs are all constant is
// run once, and its outputs become initializers under the same names. There is no second
// evaluator to drift from what the runtime (and the ONNX spec it is tested against) computes.
#include <set>
#include <unordered_map>

#include "passes/graph_util.h"
#include "passes/internal.h"
#include "runtime/exec.h"

namespace t2o::passes {

namespace {

// Folded results up to this size are always worth it; larger ones only when they replace at
// least as many bytes of constants that die with the node (so the model never grows much).
constexpr size_t kAlwaysFoldBytes = 64 * 1024;

const std::set<std::string> kNeverFold{
    "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli",
    "Dropout",  // eliminate_identity owns it; with training on it is random
    "If", "Loop", "Scan", "SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceErase",
    "SplitToSequence", "Optional", "OptionalGetElement", "OptionalHasElement",
    // Quantized weights stay integers behind their DequantizeLinear (the QDQ form): ONNX Runtime
    // and other int8 back ends run such ops on the integers, rounding as the quantized model does.
    "DequantizeLinear",
};

// Ops whose output can be far larger than their inputs; folded only when inference knows the
// output size.
const std::set<std::string> kExpanding{"Expand", "Tile", "ConstantOfShape", "Range", "Resize", "Upsample",
                                       "Pad", "OneHot", "EyeLike", "Einsum", "MatMul", "Gemm", "ConvTranspose",
                                       "DepthToSpace", "Col2Im"};

bool has_subgraph(const Node& n) {
  for (const Attribute& a : n.attributes)
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

std::optional<size_t> predicted_bytes(PassContext& ctx, const Node& n) {
  size_t total = 0;
  for (const auto& o : n.outputs) {
    if (o.empty()) continue;
    auto s = known_shape(ctx.type(o));
    const Type* t = ctx.type(o);
    if (!s || !s->is_static() || t->elem == DType::Undefined) return std::nullopt;
    total += static_cast<size_t>(numel_of(s->static_dims())) * std::max<size_t>(1, dtype_size(t->elem));
  }
  return total;
}

}  // namespace

// Runs one node on constant inputs with the reference kernels; nullopt when it cannot.
std::optional<std::vector<Tensor>> evaluate_node(const Node& n, const std::vector<const Tensor*>& ins,
                                                 const std::unordered_map<std::string, int64_t>& opsets) {
  Graph g;
  Node copy = n;
  for (size_t i = 0; i < copy.inputs.size(); ++i) {
    if (copy.inputs[i].empty()) continue;
    copy.inputs[i] = "in" + std::to_string(i);
    g.initializers.push_back({copy.inputs[i], *ins[i], {}});
  }
  for (size_t i = 0; i < copy.outputs.size(); ++i) {
    if (copy.outputs[i].empty()) continue;
    copy.outputs[i] = "out" + std::to_string(i);
    g.outputs.push_back({copy.outputs[i], Type{}, {}});
  }
  g.nodes.push_back(std::move(copy));
  try {
    ExecOptions eo;
    eo.threads = 1;
    eo.fast_paths = false;
    GraphExec exec(g, opsets, eo);
    std::vector<RValue> outs = exec.run_graph({}, nullptr);
    std::vector<Tensor> r;
    for (RValue& v : outs) {
      if (!v.is_tensor()) return std::nullopt;
      // Results may live in the executor's buffer pool; a clone owns its storage.
      r.push_back(v.tensor.clone());
    }
    return r;
  } catch (const std::exception&) {
    return std::nullopt;  // the runtime cannot evaluate it (or the model would fail there too)
  }
}

int fold_constants(Model& m, PassContext& ctx) {
  std::unordered_map<std::string, int64_t> opsets;
  for (const auto& o : m.opset_import) opsets[o.domain == "ai.onnx" ? "" : o.domain] = o.version;
  return for_each_graph(m, [&](Scope& s) {
    Graph& g = s.graph();
    Uses u(g);
    int folded = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      Node& n = g.nodes[i];
      if (removed(n) || !is_onnx(n) || n.outputs.empty()) continue;
      bool is_output = false;
      for (const auto& o : n.outputs) is_output = is_output || (!o.empty() && u.is_output(o));
      if (is_output) continue;  // an initializer as a graph output is legal but not portable
      if (n.op_type == "Constant") {
        Tensor t = constant_node_value(n);
        if (!t.defined() || n.outputs.size() != 1 || !ctx.allow(n)) continue;
        add_initializer(g, n.outputs[0], t);
        remove_node(n);
        ++folded;
        continue;
      }
      if (kNeverFold.count(n.op_type) || has_subgraph(n) || n.inputs.empty()) continue;
      std::vector<const Tensor*> ins;
      bool all_const = true;
      size_t dying_bytes = 0;
      std::set<std::string> seen;
      for (const auto& in : n.inputs) {
        const Tensor* t = in.empty() ? nullptr : s.constant(in);
        if (!in.empty() && !t) all_const = false;
        ins.push_back(t);
        if (t && seen.insert(in).second && u.only_reader(in, i) && g.find_initializer(in)) dying_bytes += t->nbytes();
      }
      if (!all_const) continue;
      auto predicted = predicted_bytes(ctx, n);
      if (!predicted && kExpanding.count(n.op_type)) continue;
      size_t allowed = std::max(kAlwaysFoldBytes, dying_bytes);
      if (predicted && *predicted > allowed) continue;
      auto outs = evaluate_node(n, ins, opsets);
      if (!outs) continue;
      size_t bytes = 0;
      for (const Tensor& t : *outs) bytes += t.nbytes();
      if (bytes > allowed || !ctx.allow(n)) continue;
      size_t k = 0;
      for (const auto& o : n.outputs) {
        if (o.empty()) continue;
        add_initializer(g, o, (*outs)[k]);
        s.define_constant(o, (*outs)[k]);
        ++k;
      }
      remove_node(n);
      ++folded;
    }
    drop_removed(g);
    return folded;
  });
}

}  // namespace t2o::passes
