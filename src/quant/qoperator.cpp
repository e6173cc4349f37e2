// Static quantization in the QOperator format: QLinearConv and QLinearMatMul on uint8 activations
// and int8 weights, with calibrated output parameters. A QuantizeLinear enters the int8 domain
// once per activation; each quantized op's output gets a DequantizeLinear for float readers, and
// quantized readers take its uint8 output directly, so chains stay in int8. A Relu (or Clip from
// 0) that alone reads a quantized op's output is absorbed: quantizing with its range, whose zero
// point is 0, saturates negative values to 0 exactly as the Relu does.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "passes/graph_util.h"
#include "passes/passes.h"
#include "quant/internal.h"

namespace t2o::quant {

namespace {

using passes::make_node;

bool is_float32(PassContext& ctx, const std::string& name) {
  const Type* t = ctx.type(name);
  return !t || t->elem == DType::Float || t->elem == DType::Undefined;
}

// Why n cannot become a QLinear op ("" when it can).
std::string unsupported(const Node& n, passes::Scope& scope, PassContext& ctx) {
  if (n.outputs.size() != 1) return "more than one output";
  if (!is_float32(ctx, n.outputs[0])) return "its output is not float32";
  if (n.op_type == "Conv") {
    const Tensor* w = n.num_inputs() >= 2 ? scope.constant(n.inputs[1]) : nullptr;
    if (!w || w->dtype() != DType::Float) return "its weight is not a float32 constant";
    if (scope.constant(n.inputs[0])) return "its input is a constant";
    if (!is_float32(ctx, n.inputs[0])) return "its input is not float32";
    if (n.has_input(2)) {
      const Tensor* b = scope.constant(n.inputs[2]);
      if (!b || b->dtype() != DType::Float) return "its bias is not a float32 constant";
    }
    return "";
  }
  // MatMul: each operand an activation (uint8) or a constant weight (int8); not both constant.
  if (n.num_inputs() != 2) return "not two inputs";
  const Tensor *a = scope.constant(n.inputs[0]), *b = scope.constant(n.inputs[1]);
  if (a && b) return "both operands are constants";
  for (int k = 0; k < 2; ++k) {
    const Tensor* c = k == 0 ? a : b;
    if (c ? c->dtype() != DType::Float : !is_float32(ctx, n.inputs[static_cast<size_t>(k)]))
      return "input " + std::to_string(k) + " is not float32";
  }
  return "";
}

bool candidate(const Node& n) { return passes::is_onnx(n) && (n.op_type == "Conv" || n.op_type == "MatMul"); }

// The Relu or Clip(min 0) that alone reads `y`, as the index of that node; -1 otherwise.
int absorbed_relu(const Graph& g, const passes::Uses& uses, passes::Scope& scope, const std::string& y) {
  if (uses.is_output(y) || uses.captured(y) || uses.readers(y).size() != 1) return -1;
  size_t j = uses.readers(y)[0];
  const Node& r = g.nodes[j];
  if (!passes::is_onnx(r) || r.inputs.empty() || r.inputs[0] != y || r.outputs.size() != 1) return -1;
  if (r.op_type == "Relu") return static_cast<int>(j);
  if (r.op_type != "Clip") return -1;
  if (r.has_attr("min") || r.has_attr("max")) {  // opset 6-10
    return r.attr_float("min", -1) == 0 && r.attr_float("max", 1) > 0 ? static_cast<int>(j) : -1;
  }
  const Tensor* lo = r.has_input(1) ? scope.constant(r.inputs[1]) : nullptr;
  if (!lo || lo->numel() != 1 || lo->as_double(0) != 0) return -1;
  if (r.has_input(2)) {
    const Tensor* hi = scope.constant(r.inputs[2]);
    if (!hi || hi->numel() != 1 || !(hi->as_double(0) > 0)) return -1;
  }
  return static_cast<int>(j);
}

}  // namespace

int split_gemms(Model& m, PassContext& ctx, const QuantizeOptions& o) {
  Graph& g = m.graph;
  passes::Scope scope(g);
  std::vector<bool> dead(g.nodes.size(), false);
  std::map<size_t, std::vector<Node>> insert;
  std::vector<Initializer> added;
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!passes::is_onnx(n) || n.op_type != "Gemm" || excluded(n, o) || n.outputs.size() != 1) continue;
    std::string why;
    std::optional<MatMulSite> site = matmul_site(n, scope, why);
    if (!site || scope.constant(n.inputs[0]) || !is_float32(ctx, n.inputs[0])) continue;
    std::string base = n.name.empty() ? n.outputs[0] : n.name;
    std::string w = ctx.fresh(n.inputs[1] + "_kn");
    added.push_back({w, site->alpha == 1 ? site->weight : scaled(site->weight, site->alpha), {}});
    std::string bias = site->bias;
    if (site->bias_value.defined()) {
      bias = ctx.fresh(site->bias + "_scaled");
      added.push_back({bias, site->bias_value, {}});
    }
    const std::string& y = n.outputs[0];
    std::string product = bias.empty() ? y : ctx.fresh(base + "_product");
    std::vector<Node>& out = insert[i];
    out.push_back(make_node("MatMul", {n.inputs[0], w}, {product}, ctx.fresh(base + "_matmul", true), n.doc_string));
    if (!bias.empty()) out.push_back(make_node("Add", {product, bias}, {y}, ctx.fresh(base + "_bias", true), n.doc_string));
    dead[i] = true;
    ++count;
  }
  for (Initializer& x : added) g.initializers.push_back(std::move(x));
  passes::compact(g, dead, std::move(insert));
  return count;
}

std::vector<std::string> qoperator_activations(Model& m, PassContext& ctx, const QuantizeOptions& o) {
  Graph& g = m.graph;
  passes::Scope scope(g);
  passes::Uses uses(g);
  std::vector<std::string> names;
  std::set<std::string> seen;
  auto want = [&](const std::string& x) {
    if (seen.insert(x).second) names.push_back(x);
  };
  for (const Node& n : g.nodes) {
    if (!candidate(n) || excluded(n, o) || !unsupported(n, scope, ctx).empty()) continue;
    for (int k = 0; k < std::min(n.num_inputs(), 2); ++k)
      if (!scope.constant(n.inputs[static_cast<size_t>(k)])) want(n.inputs[static_cast<size_t>(k)]);
    want(n.outputs[0]);
    int relu = absorbed_relu(g, uses, scope, n.outputs[0]);
    if (relu >= 0) want(g.nodes[static_cast<size_t>(relu)].outputs[0]);
  }
  return names;
}

int rewrite_qoperator(Model& m, PassContext& ctx, const QuantizeOptions& o, const std::map<std::string, Range>& ranges,
                      QuantizeResult& r) {
  Graph& g = m.graph;
  passes::Scope scope(g);
  passes::Uses uses(g);
  std::vector<bool> dead(g.nodes.size(), false);
  std::map<size_t, std::vector<Node>> insert;
  std::vector<Initializer> added;  // appended after the sweep: the scope points into the list
  auto add = [&](const std::string& hint, Tensor t) {
    std::string name = ctx.fresh(hint);
    added.push_back({name, std::move(t), {}});
    return name;
  };
  struct QValue {
    std::string q, scale, zero;
    float s = 1;
  };
  std::map<std::string, QValue> quantized;  // float value -> its uint8 form
  auto params = [&](const std::string& x) {
    const Range& rg = ranges.at(x);
    ActivationParams p = activation_params(rg.lo, rg.hi);
    QValue v;
    v.s = p.scale;
    v.scale = add(x + "_scale", Tensor::scalar<float>(p.scale));
    v.zero = add(x + "_zero_point", Tensor::scalar<uint8_t>(p.zero));
    return v;
  };
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (!candidate(n) || dead[i]) continue;
    if (excluded(n, o)) {
      r.skipped.push_back(describe_skip(n, "excluded"));
      continue;
    }
    if (std::string why = unsupported(n, scope, ctx); !why.empty()) {
      r.skipped.push_back(describe_skip(n, why));
      continue;
    }
    const std::string y = n.outputs[0];
    int relu = absorbed_relu(g, uses, scope, y);
    const std::string out = relu >= 0 ? g.nodes[static_cast<size_t>(relu)].outputs[0] : y;
    std::string missing;
    for (int k = 0; k < 2; ++k) {
      const std::string& x = n.inputs[static_cast<size_t>(k)];
      if (!scope.constant(x) && !ranges.count(x)) missing = x;
    }
    if (!ranges.count(out)) missing = out;
    if (!missing.empty()) {
      r.skipped.push_back(describe_skip(n, "no calibrated range for '" + missing + "'"));
      continue;
    }
    std::string base = n.name.empty() ? y : n.name;
    std::vector<Node>& before = insert[i];
    // Operands: [quantized, scale, zero point] each, and the float scale of each.
    std::vector<std::string> operands;
    std::vector<Tensor> weight_scale(2);
    float input_scale = 1;
    for (int k = 0; k < 2; ++k) {
      const std::string& x = n.inputs[static_cast<size_t>(k)];
      if (const Tensor* w = scope.constant(x)) {
        std::optional<int> axis;
        if (o.per_channel) {
          if (n.op_type == "Conv" && k == 1) axis = 0;
          if (n.op_type == "MatMul" && k == 1 && w->rank() == 2) axis = 1;  // [K, N]: per output column
        }
        QuantizedWeight qw = quantize_weight(*w, axis);
        weight_scale[static_cast<size_t>(k)] = qw.scale;
        operands.push_back(add(x + "_quantized", qw.q));
        operands.push_back(add(x + "_scale", qw.scale));
        operands.push_back(add(x + "_zero_point", qw.zero));
        continue;
      }
      auto it = quantized.find(x);
      if (it == quantized.end()) {
        QValue v = params(x);
        v.q = ctx.fresh(x + "_quantized");
        before.push_back(make_node("QuantizeLinear", {x, v.scale, v.zero}, {v.q}, ctx.fresh(base + "_quant_input", true),
                                   n.doc_string));
        it = quantized.emplace(x, v).first;
      }
      if (k == 0) input_scale = it->second.s;
      operands.insert(operands.end(), {it->second.q, it->second.scale, it->second.zero});
    }
    QValue result = params(out);
    result.q = ctx.fresh(out + "_quantized");
    std::vector<std::string> inputs = operands;
    inputs.push_back(result.scale);
    inputs.push_back(result.zero);
    Node q;
    if (n.op_type == "Conv") {
      if (n.has_input(2)) {
        // int32 bias at scale input_scale * weight_scale, zero point 0 (the QLinearConv contract).
        const Tensor& b = *scope.constant(n.inputs[2]);
        const Tensor& ws = weight_scale[1];
        Tensor bq(DType::Int32, b.dims());
        for (int64_t c = 0; c < b.numel(); ++c) {
          double s = static_cast<double>(input_scale) * ws.data<float>()[ws.numel() == 1 ? 0 : c];
          double v = std::nearbyint(static_cast<double>(b.data<float>()[c]) / s);
          if (!std::isfinite(v)) v = 0;
          bq.data<int32_t>()[c] = static_cast<int32_t>(std::clamp(v, -2147483647.0, 2147483647.0));
        }
        inputs.push_back(add(n.inputs[2] + "_int32", bq));
      }
      q = make_node("QLinearConv", inputs, {result.q}, n.name.empty() ? ctx.fresh(base + "_qlinear", true) : n.name,
                    n.doc_string);
      q.attributes = n.attributes;
    } else {
      q = make_node("QLinearMatMul", inputs, {result.q}, n.name.empty() ? ctx.fresh(base + "_qlinear", true) : n.name,
                    n.doc_string);
    }
    before.push_back(std::move(q));
    // The float value for the readers that stay float (dropped later when none does).
    before.push_back(make_node("DequantizeLinear", {result.q, result.scale, result.zero}, {out},
                               ctx.fresh(base + "_dequant_output", true), n.doc_string));
    quantized.emplace(out, result);
    dead[i] = true;
    if (relu >= 0) dead[static_cast<size_t>(relu)] = true;
    ++count;
    ++r.by_op[n.op_type];
  }
  for (Initializer& x : added) g.initializers.push_back(std::move(x));
  passes::compact(g, dead, std::move(insert));
  return count;
}

}  // namespace t2o::quant
