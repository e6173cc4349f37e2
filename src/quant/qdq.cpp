// Static quantization in the QDQ format: QuantizeLinear/DequantizeLinear pairs with calibrated
// parameters on the float activations Conv/MatMul/Gemm read, int8 weights behind a
// DequantizeLinear. Runtimes that know the pattern run the op in int8; others run it as written.
#include <set>

#include "passes/graph_util.h"
#include "passes/passes.h"
#include "quant/internal.h"

namespace t2o::quant {

namespace {

using passes::make_node;

bool candidate(const Node& n) {
  return passes::is_onnx(n) && (n.op_type == "Conv" || n.op_type == "MatMul" || n.op_type == "Gemm");
}

// Inputs of a candidate that carry data to quantize (Conv's and Gemm's bias stay float).
int quantized_inputs(const Node& n) { return std::min(n.num_inputs(), 2); }

// The per-channel axis of a weight read at input `slot`, or nullopt for a per-tensor scale.
std::optional<int> weight_axis(const Node& n, int slot, const Tensor& w, bool per_channel) {
  if (!per_channel || slot != 1) return std::nullopt;
  if (n.op_type == "Conv") return w.rank() >= 1 ? std::optional<int>(0) : std::nullopt;
  if (w.rank() != 2) return std::nullopt;
  if (n.op_type == "Gemm") return n.attr_int("transB", 0) ? 0 : 1;
  return 1;  // MatMul [K, N]: one scale per output column
}

bool is_float32(PassContext& ctx, const std::string& name) {
  const Type* t = ctx.type(name);
  return !t || t->elem == DType::Float || t->elem == DType::Undefined;
}

}  // namespace

std::vector<std::string> static_activations(Model& m, PassContext& ctx, const QuantizeOptions& o) {
  passes::Scope scope(m.graph);
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const Node& n : m.graph.nodes) {
    if (!candidate(n) || excluded(n, o)) continue;
    for (int k = 0; k < quantized_inputs(n); ++k) {
      const std::string& x = n.inputs[static_cast<size_t>(k)];
      if (!x.empty() && !scope.constant(x) && is_float32(ctx, x) && seen.insert(x).second) names.push_back(x);
    }
  }
  return names;
}

int rewrite_static(Model& m, PassContext& ctx, const QuantizeOptions& o, const std::map<std::string, Range>& ranges,
                   QuantizeResult& r) {
  Graph& g = m.graph;
  passes::Scope scope(g);
  std::vector<bool> dead(g.nodes.size(), false);
  std::map<size_t, std::vector<Node>> insert;
  std::vector<Initializer> added;  // appended after the sweep: the scope points into the list
  auto add = [&](const std::string& hint, Tensor t) {
    std::string name = ctx.fresh(hint);
    added.push_back({name, std::move(t), {}});
    return name;
  };
  // One pair per activation and one dequantized weight per (weight, axis), shared by readers.
  std::map<std::string, std::string> dq_activation;
  std::map<std::pair<std::string, int>, std::string> dq_weight;
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (!candidate(n)) continue;
    if (excluded(n, o)) {
      r.skipped.push_back(describe_skip(n, "excluded"));
      continue;
    }
    std::string base = n.name.empty() ? n.outputs[0] : n.name;
    std::vector<Node>& out = insert[i];
    bool changed = false;
    for (int k = 0; k < quantized_inputs(n); ++k) {
      std::string& x = n.inputs[static_cast<size_t>(k)];
      if (x.empty()) continue;
      if (const Tensor* w = scope.constant(x)) {
        if (w->dtype() != DType::Float) continue;
        std::optional<int> axis = weight_axis(n, k, *w, o.per_channel);
        auto key = std::make_pair(x, axis ? *axis : -1);
        auto it = dq_weight.find(key);
        if (it == dq_weight.end()) {
          QuantizedWeight qw = quantize_weight(*w, axis);
          std::string q = add(x + "_quantized", qw.q), s = add(x + "_scale", qw.scale), z = add(x + "_zero_point", qw.zero);
          std::string y = ctx.fresh(x + "_dequantized");
          Node dq = make_node("DequantizeLinear", {q, s, z}, {y}, ctx.fresh(base + "_dequant_weight", true), n.doc_string);
          if (axis) dq.set_attr(Attribute::make_int("axis", *axis));
          out.push_back(std::move(dq));
          it = dq_weight.emplace(key, y).first;
        }
        x = it->second;
        changed = true;
        continue;
      }
      if (!is_float32(ctx, x)) continue;
      auto range = ranges.find(x);
      if (range == ranges.end()) {
        r.skipped.push_back(describe_skip(n, "no calibrated range for input '" + x + "'"));
        continue;
      }
      auto it = dq_activation.find(x);
      if (it == dq_activation.end()) {
        ActivationParams p = activation_params(range->second.lo, range->second.hi);
        std::string s = add(x + "_scale", Tensor::scalar<float>(p.scale));
        std::string z = add(x + "_zero_point", Tensor::scalar<uint8_t>(p.zero));
        std::string q = ctx.fresh(x + "_quantized"), y = ctx.fresh(x + "_dequantized");
        out.push_back(make_node("QuantizeLinear", {x, s, z}, {q}, ctx.fresh(base + "_quant_input", true), n.doc_string));
        out.push_back(make_node("DequantizeLinear", {q, s, z}, {y}, ctx.fresh(base + "_dequant_input", true), n.doc_string));
        it = dq_activation.emplace(x, y).first;
      }
      x = it->second;
      changed = true;
    }
    if (changed) {
      ++count;
      ++r.by_op[n.op_type];
    }
  }
  for (Initializer& x : added) g.initializers.push_back(std::move(x));
  passes::compact(g, dead, std::move(insert));
  return count;
}

}  // namespace t2o::quant
