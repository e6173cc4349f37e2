// Recurrent layers (LSTM, GRU, RNN) in the int8 modes: W and R become int8 initializers behind a
// DequantizeLinear (symmetric; with --per-channel one scale per row of G*H, shared by the
// directions, from opset 13), and the layer's name goes into the model's metadata under
// kInt8RecurrentKey: the file's request that runtimes which can quantize the activations at run
// time (X, and h at each step) do so. ONNX has no int8 recurrent op; any runtime runs the file as
// written, in float on the dequantized weights. Static mode treats them the same way: a recurrent
// state has no fixed range to calibrate.
#include "passes/graph_util.h"
#include "passes/passes.h"
#include "quant/internal.h"
#include "runtime/optimize.h"

namespace t2o::quant {

int rewrite_recurrent(Model& m, PassContext& ctx, const QuantizeOptions& o, QuantizeResult& r) {
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
  const bool per_row = o.per_channel && m.opset("") >= 13;
  std::vector<std::string> names;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (!passes::is_onnx(n) || (n.op_type != "LSTM" && n.op_type != "GRU" && n.op_type != "RNN")) continue;
    if (excluded(n, o)) {
      r.skipped.push_back(describe_skip(n, "excluded"));
      continue;
    }
    std::string why;
    for (int k = 1; k <= 2 && why.empty(); ++k) {
      const Tensor* w = n.has_input(k) ? scope.constant(n.inputs[static_cast<size_t>(k)]) : nullptr;
      if (!w) why = std::string(k == 1 ? "W" : "R") + " is computed, not a constant weight";
      else if (w->dtype() != DType::Float) why = std::string(k == 1 ? "W" : "R") + " is not float32";
      else if (w->rank() != 3) why = std::string(k == 1 ? "W" : "R") + " does not have rank 3";
    }
    if (!why.empty()) {
      r.skipped.push_back(describe_skip(n, why));
      continue;
    }
    if (n.name.empty()) n.name = ctx.fresh(n.op_type, true);
    std::vector<Node>& out = insert[i];
    for (int k = 1; k <= 2; ++k) {
      std::string& x = n.inputs[static_cast<size_t>(k)];
      std::optional<int> axis = per_row ? std::optional<int>(1) : std::nullopt;
      QuantizedWeight qw = quantize_weight(*scope.constant(x), axis);
      std::string q = add(x + "_quantized", qw.q), s = add(x + "_scale", qw.scale), z = add(x + "_zero_point", qw.zero);
      std::string y = ctx.fresh(x + "_dequantized");
      Node dq = passes::make_node("DequantizeLinear", {q, s, z}, {y}, ctx.fresh(n.name + "_dequant_weight", true),
                                  n.doc_string);
      if (axis) dq.set_attr(Attribute::make_int("axis", *axis));
      out.push_back(std::move(dq));
      x = y;
    }
    names.push_back(n.name);
    ++r.by_op[n.op_type];
  }
  for (Initializer& x : added) g.initializers.push_back(std::move(x));
  passes::compact(g, dead, std::move(insert));
  if (!names.empty()) {
    std::string* list = nullptr;
    for (auto& [key, value] : m.metadata_props)
      if (key == kInt8RecurrentKey) list = &value;
    if (!list) list = &m.metadata_props.emplace_back(kInt8RecurrentKey, "").second;
    for (const std::string& name : names) *list += (list->empty() ? "" : "\n") + name;
  }
  return static_cast<int>(names.size());
}

}  // namespace t2o::quant
