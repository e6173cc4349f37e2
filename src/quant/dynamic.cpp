// Dynamic quantization: int8 weights offline, uint8 activations at run time
// (DynamicQuantizeLinear -> MatMulInteger / ConvInteger -> Cast -> Mul by both scales [-> Add bias]).
#include <array>
#include <cmath>
#include <cstdio>

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

namespace {

// Measured on ResNet-50 and MobileNetV2 (docs/quantize.md): convs below this ran slower with
// dynamic int8 than in float, those above faster.
constexpr double kDynamicConvMinIntensity = 64;

// A 2-d Conv with a constant float weight [M, C/group, KH, KW] and a constant bias (or none).
std::optional<Tensor> conv_weight(const Node& n, passes::Scope& s, std::string& why) {
  if (n.num_inputs() < 2) return why = "too few inputs", std::nullopt;
  const Tensor* w = s.constant(n.inputs[1]);
  if (!w) return why = "input 1 is computed, not a constant weight", std::nullopt;
  if (w->dtype() != DType::Float) return why = "its weight is not float32", std::nullopt;
  if (w->rank() != 4)
    return why = "only 2-d convolutions are quantized in dynamic mode (weight of rank " + std::to_string(w->rank()) + ")",
           std::nullopt;
  if (n.has_input(2)) {
    const Tensor* b = s.constant(n.inputs[2]);
    if (!b || b->dtype() != DType::Float || b->numel() != w->dim(0)) return why = "its bias is not a constant float vector", std::nullopt;
  }
  // Where it pays: run-time quantization reads the float input twice and writes it again as 8
  // bits, and the result is float, so a conv with few multiply-adds per activation value moved
  // (depthwise and grouped convs, 1x1 convs between thin layers, a first conv on 3 channels)
  // runs slower in int8 than in float. Per output position: M * K multiply-adds against C * stride
  // area values read and M written.
  const int64_t m = w->dim(0), k = w->dim(1) * w->dim(2) * w->dim(3), c = w->dim(1) * n.attr_int("group", 1);
  std::vector<int64_t> st = n.attr_ints("strides", {1, 1});
  const int64_t area = st.size() == 2 ? std::max<int64_t>(st[0], 1) * std::max<int64_t>(st[1], 1) : 1;
  const double intensity = static_cast<double>(m * k) / static_cast<double>(c * area + m);
  if (intensity < kDynamicConvMinIntensity) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "run-time int8 does not pay here: %.0f multiply-adds per activation value moved, below %.0f "
                  "(static mode quantizes it)", intensity, kDynamicConvMinIntensity);
    return why = buf, std::nullopt;
  }
  return *w;
}

// t's values as [len, 1, 1], a per-channel factor of a conv's [N, M, H, W] output.
Tensor per_channel(const Tensor& t) { return t.reshaped({t.numel(), 1, 1}); }

}  // namespace

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
    const bool conv = n.op_type == "Conv";
    if (!passes::is_onnx(n) || (n.op_type != "MatMul" && n.op_type != "Gemm" && !conv)) continue;
    if (excluded(n, o)) {
      r.skipped.push_back(describe_skip(n, "excluded"));
      continue;
    }
    std::string why;
    std::optional<MatMulSite> site;
    if (conv) {
      if (std::optional<Tensor> w = conv_weight(n, scope, why)) {
        site.emplace();
        site->weight = std::move(*w);
        if (n.has_input(2)) site->bias_value = per_channel(*scope.constant(n.inputs[2]));
        site->bias = n.has_input(2) ? n.inputs[2] : "";
      }
    } else {
      site = matmul_site(n, scope, why);
    }
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
    // Per output column of [K, N], per output channel (axis 0) of a conv's weight.
    std::optional<int> axis;
    if (o.per_channel) axis = conv ? 0 : 1;
    QuantizedWeight qw = quantize_weight(site->weight, axis);
    std::string wq = ctx.fresh(n.inputs[1] + "_quantized"), ws = ctx.fresh(n.inputs[1] + "_scale");
    add_initializer(g, wq, qw.q);
    if (conv && axis) qw.scale = per_channel(qw.scale);  // scales M output channels of [N, M, H, W]
    add_initializer(g, ws, site->alpha == 1 ? qw.scale : scaled(qw.scale, site->alpha));
    std::string acc = ctx.fresh(base + "_int32"), accf = ctx.fresh(base + "_int32_float");
    std::string scale = ctx.fresh(base + "_output_scale");
    if (conv) {
      // ConvInteger takes Conv's attributes; W's zero point is 0, its default.
      Node ci = make_node("ConvInteger", {aq, wq, az}, {acc}, ctx.fresh(base + "_conv_integer", true), n.doc_string);
      ci.attributes = n.attributes;
      out.push_back(std::move(ci));
    } else {
      // Symmetric weights have zero point 0 in every column: one scalar serves per-column scales too.
      std::string wz = ctx.fresh(n.inputs[1] + "_zero_point");
      add_initializer(g, wz, Tensor::scalar<int8_t>(0));
      out.push_back(make_node("MatMulInteger", {aq, wq, az, wz}, {acc}, ctx.fresh(base + "_matmul_integer", true), n.doc_string));
    }
    Node cast = make_node("Cast", {acc}, {accf}, ctx.fresh(base + "_cast", true), n.doc_string);
    cast.set_attr(Attribute::make_int("to", static_cast<int64_t>(DType::Float)));
    out.push_back(std::move(cast));
    out.push_back(make_node("Mul", {as, ws}, {scale}, ctx.fresh(base + "_scale", true), n.doc_string));
    std::string y = n.outputs[0];
    std::string bias = site->bias;
    if (site->bias_value.defined()) {
      bias = ctx.fresh(site->bias + (conv ? "_per_channel" : "_scaled"));
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
