// Dynamic quantization: int8 weights offline, uint8 activations at run time
// (DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul by both scales [-> Add bias]).
#include <array>
#include <cmath>

#include "passes/graph_util.h"
#include "passes/passes.h"
#include "quant/internal.h"

namespace t2o::quant {

namespace {

using passes::make_node;

}  // namespace

Tensor transpose_2d(const Tensor& w) {
  Tensor t(w.dtype(), {w.dim(1), w.dim(0)});
  int64_t r = w.dim(0), c = w.dim(1);
  size_t es = w.nbytes() / static_cast<size_t>(std::max<int64_t>(w.numel(), 1));
  auto* src = static_cast<const char*>(w.raw());
  auto* dst = static_cast<char*>(t.raw());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j)
      std::copy(src + (i * c + j) * es, src + (i * c + j + 1) * es, dst + (j * r + i) * es);
  return t;
}

Tensor scaled(const Tensor& t, float k) {
  Tensor r(DType::Float, t.dims());
  for (int64_t i = 0; i < t.numel(); ++i) r.data<float>()[i] = static_cast<float>(t.as_double(i)) * k;
  return r;
}

std::optional<MatMulSite> matmul_site(const Node& n, passes::Scope& s, std::string& why) {
  if (n.num_inputs() < 2) return why = "too few inputs", std::nullopt;
  const Tensor* w = s.constant(n.inputs[1]);
  if (!w) return why = "input 1 is computed, not a constant weight", std::nullopt;
  if (w->dtype() != DType::Float) return why = "its weight is not float32", std::nullopt;
  if (w->rank() != 2) return why = "its weight has rank " + std::to_string(w->rank()) + ", not 2", std::nullopt;
  MatMulSite site;
  site.weight = *w;
  if (n.op_type == "Gemm") {
    if (n.attr_int("transA", 0)) return why = "transA=1 is not handled", std::nullopt;
    if (n.attr_int("transB", 0)) site.weight = transpose_2d(*w);
    site.alpha = n.attr_float("alpha", 1.0f);
    float beta = n.attr_float("beta", 1.0f);
    if (n.has_input(2) && beta != 0) {
      site.bias = n.inputs[2];
      if (beta != 1) {
        const Tensor* c = s.constant(n.inputs[2]);
        if (!c || !dtype_is_float(c->dtype())) return why = "beta != 1 with a bias that is not constant", std::nullopt;
        site.bias_value = scaled(*c, beta);
      }
    }
  }
  return site;
}

int rewrite_dynamic(Model& m, PassContext& ctx, const QuantizeOptions& o, QuantizeResult& r) {
  Graph& g = m.graph;
  passes::Scope scope(g);
  std::vector<bool> dead(g.nodes.size(), false);
  std::map<size_t, std::vector<Node>> insert;
  // One DynamicQuantizeLinear per activation, however many products read it.
  std::map<std::string, std::array<std::string, 3>> quantized;
  // Appended after the sweep: the scope points into the initializer list.
  std::vector<Initializer> added;
  auto add_initializer = [&](Graph&, const std::string& name, Tensor t) { added.push_back({name, std::move(t), {}}); };
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!passes::is_onnx(n) || (n.op_type != "MatMul" && n.op_type != "Gemm")) continue;
    if (excluded(n, o)) {
      r.skipped.push_back(describe_skip(n, "excluded"));
      continue;
    }
    std::string why;
    std::optional<MatMulSite> site = matmul_site(n, scope, why);
    if (!site) {
      r.skipped.push_back(describe_skip(n, why));
      continue;
    }
    const Type* at = ctx.type(n.inputs[0]);
    if (at && at->elem != DType::Float && at->elem != DType::Undefined) {
      r.skipped.push_back(describe_skip(n, "its input is " + std::string(dtype_name(at->elem)) + ", not float32"));
      continue;
    }
    std::vector<Node>& out = insert[i];
    const std::string& a = n.inputs[0];
    std::string base = n.name.empty() ? n.outputs[0] : n.name;
    auto [it, fresh] = quantized.try_emplace(a);
    if (fresh) {
      it->second = {ctx.fresh(a + "_quantized"), ctx.fresh(a + "_scale"), ctx.fresh(a + "_zero_point")};
      out.push_back(make_node("DynamicQuantizeLinear", {a}, {it->second[0], it->second[1], it->second[2]},
                              ctx.fresh(base + "_quant_input", true), n.doc_string));
    }
    const auto& [aq, as, az] = it->second;
    QuantizedWeight qw = quantize_weight(site->weight, o.per_channel ? std::optional<int>(1) : std::nullopt);
    std::string wq = ctx.fresh(n.inputs[1] + "_quantized"), ws = ctx.fresh(n.inputs[1] + "_scale");
    std::string wz = ctx.fresh(n.inputs[1] + "_zero_point");
    add_initializer(g, wq, qw.q);
    add_initializer(g, ws, site->alpha == 1 ? qw.scale : scaled(qw.scale, site->alpha));
    // Symmetric weights have zero point 0 in every column: one scalar serves per-column scales too.
    add_initializer(g, wz, Tensor::scalar<int8_t>(0));
    std::string acc = ctx.fresh(base + "_int32"), accf = ctx.fresh(base + "_int32_float");
    std::string scale = ctx.fresh(base + "_output_scale");
    out.push_back(make_node("MatMulInteger", {aq, wq, az, wz}, {acc}, ctx.fresh(base + "_matmul_integer", true), n.doc_string));
    Node cast = make_node("Cast", {acc}, {accf}, ctx.fresh(base + "_cast", true), n.doc_string);
    cast.set_attr(Attribute::make_int("to", static_cast<int64_t>(DType::Float)));
    out.push_back(std::move(cast));
    out.push_back(make_node("Mul", {as, ws}, {scale}, ctx.fresh(base + "_scale", true), n.doc_string));
    std::string y = n.outputs[0];
    std::string bias = site->bias;
    if (site->bias_value.defined()) {
      bias = ctx.fresh(site->bias + "_scaled");
      add_initializer(g, bias, site->bias_value);
    }
    std::string unbiased = bias.empty() ? y : ctx.fresh(base + "_unbiased");
    out.push_back(make_node("Mul", {accf, scale}, {unbiased}, ctx.fresh(base + "_rescale", true), n.doc_string));
    if (!bias.empty()) out.push_back(make_node("Add", {unbiased, bias}, {y}, ctx.fresh(base + "_bias", true), n.doc_string));
    dead[i] = true;
    ++count;
    ++r.by_op[n.op_type];
  }
  for (Initializer& x : added) g.initializers.push_back(std::move(x));
  passes::compact(g, dead, std::move(insert));
  return count;
}

}  // namespace t2o::quant
