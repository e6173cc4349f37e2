// Quantized tensors (torch.ao.quantization models, quantize_per_tensor): held as their integer
// tensor (TV::name, of the storage type: uint8, int8, int32) with a 0-d float scale (TV::qscale)
// and a 0-d zero point of the storage type (TV::qzero); per-channel ones also name the axis.
// QuantizeLinear / DequantizeLinear move between them and float. A quantized op computes in float
// on dequantized values and quantizes its result with the op's scale and zero point, as torch.onnx
// exports them; other ops given quantized tensors go through Ctx's generic path (context.cpp).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "torch/ops/ops.h"
#include "torch/profile.h"

namespace t2o {

namespace {

// A 0-d zero point of the storage type from a constant int.
std::string zero_const(Ctx& c, int64_t z, DType repr) {
  Tensor t(repr, {});
  dispatch_dtype(repr, [&](auto tag) { t.data<decltype(tag)>()[0] = static_cast<decltype(tag)>(z); });
  return c.b.constant(t, "qzero");
}

}  // namespace

std::string quantized_zero(Ctx& c, int64_t z, DType repr) { return zero_const(c, z, repr); }

bool is_quantized(const TV& v) {
  if (!v.qscale.empty()) return true;
  return v.is_const() && v.c.isTensor() && v.c.toTensor().defined() && v.c.toTensor().is_quantized();
}

TV quantized_tv(Ctx& c, const TV& v) {
  if (!v.qscale.empty()) return v;
  const at::Tensor& t = v.c.toTensor();
  TV q = TV::tensor(c.b.constant(tensor_from_torch(t.int_repr()), "qweight"),
                    dtype_from_scalar_type(c10::toUnderlying(t.scalar_type())));
  q.shape = t.sizes().vec();
  q.rank_known = true;
  if (t.qscheme() == c10::kPerTensorAffine || t.qscheme() == c10::kPerTensorSymmetric) {
    q.qscale = c.b.scalar(t.q_scale(), DType::Float);
    q.qzero = zero_const(c, t.q_zero_point(), q.dtype);
  } else {
    q.qscale = c.b.constant(tensor_from_torch(t.q_per_channel_scales().to(at::kFloat)), "qscales");
    q.qzero = c.b.constant(tensor_from_torch(t.q_per_channel_zero_points().to(c10::toUnderlying(t.scalar_type()))),
                           "qzeros");
    q.qaxis = t.q_per_channel_axis();
  }
  return q;
}

TV dequantized(Ctx& c, const TV& v) {
  if (v.is_const()) {  // a constant quantized tensor: its float values, computed now
    TV f = TV::constant(v.c.toTensor().dequantize());
    return f;
  }
  std::vector<Attribute> attrs;
  if (v.qaxis >= 0) {
    c.b.require(13, "per-channel quantized tensors (DequantizeLinear with an axis)");
    attrs.push_back(Attribute::make_int("axis", v.qaxis));
  }
  TV f = TV::tensor(c.b.op1("DequantizeLinear", {v.name, v.qscale, v.qzero}, attrs), DType::Float);
  f.shape = v.shape;
  f.rank_known = v.rank_known;
  f.rank_seen = v.rank_seen;
  return f;
}

TV requantized(Ctx& c, const TValue* out, const std::string& x, const TV& like, const TV& like_shape) {
  const Observed* o = c.observed(out);
  if (!o || !o->quantized || o->per_channel)
    throw UnsupportedError("a quantized result whose scale and zero point were not seen while learning shapes");
  if (o->qvaries) throw UnsupportedError("a quantized result whose scale and zero point depend on the input values");
  DType repr = o->qdtype;
  // The same parameters as the quantized input `like`: its values are reused (they may be inputs).
  if (!like.qscale.empty() && like.qaxis < 0 && like.dtype == repr) {
    const Observed* li = nullptr;
    for (const TValue* v : out->node()->inputs())
      if (c.get(v).qscale == like.qscale || (c.get(v).kind == TV::Kind::Tensor && c.get(v).name == like.name)) li = c.observed(v);
    if (li && li->quantized && li->qscale == o->qscale && li->qzero == o->qzero)
      return quantize_to(c, like_shape, x, like.qscale, like.qzero, repr);
  }
  return quantize_to(c, like_shape, x, c.b.scalar(o->qscale, DType::Float), zero_const(c, o->qzero, repr), repr);
}

TV quantize_to(Ctx& c, const TV& like_shape, const std::string& x, const std::string& scale, const std::string& zero,
               DType repr) {
  TV q = TV::tensor(c.b.op1("QuantizeLinear", {x, scale, zero}), repr);
  q.qscale = scale;
  q.qzero = zero;
  q.shape = like_shape.shape;
  q.rank_known = like_shape.rank_known;
  q.rank_seen = like_shape.rank_seen;
  return q;
}

namespace {

DType repr_of(c10::ScalarType t) { return dtype_from_scalar_type(c10::toUnderlying(t)); }

// A 0-d float scale / zero point of the storage type from a (constant or computed) argument.
std::string scale_arg(Ctx& c, const TV& v) {
  if (v.is_const() && !v.c.isTensor()) return c.b.scalar(v.c.toScalar().toDouble(), DType::Float);
  std::string s = c.tensor_as(v, DType::Float);
  return v.rank_known && !v.shape.empty() ? c.b.reshape(s, {}) : s;
}
std::string zero_arg(Ctx& c, const TV& v, DType repr) {
  if (v.is_const() && !v.c.isTensor()) return zero_const(c, v.c.toScalar().toLong(), repr);
  std::string z = c.tensor_as(v, repr);
  return v.rank_known && !v.shape.empty() ? c.b.reshape(z, {}) : z;
}

// The storage type of a quantized op's result: what profiling saw, else that of `like`.
DType out_repr(Ctx& c, const TNode* n, const TV& like) {
  const Observed* o = c.observed(n->output());
  if (o && o->quantized && o->qdtype != DType::Undefined) return o->qdtype;
  return like.qscale.empty() ? DType::UInt8 : like.dtype;
}

TV quant_in(Ctx& c, const TNode* n, size_t i) {
  const TV& v = c.in(n, i);
  if (!is_quantized(v)) throw UnsupportedError("a quantized op given a tensor that is not quantized");
  return quantized_tv(c, v);
}

std::string float_in(Ctx& c, const TNode* n, size_t i) { return c.tensor(dequantized(c, quant_in(c, n, i))); }

// Result of a quantized op: float `y` quantized with the op's scale / zero point arguments.
void out_quantized(Ctx& c, const TNode* n, const std::string& y, size_t scale_i, size_t zero_i, const TV& like) {
  DType repr = out_repr(c, n, like);
  c.set(n->output(), quantize_to(c, TV(), y, scale_arg(c, c.in(n, scale_i)), zero_arg(c, c.in(n, zero_i), repr), repr));
}

// Result whose scale and zero point torch chooses (no arguments for them): what profiling saw.
void out_observed(Ctx& c, const TNode* n, const std::string& y, const TV& like) {
  c.set(n->output(), requantized(c, n->output(), y, like, TV()));
}

c10::IValue call_op(const char* name, std::vector<c10::IValue> args) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  torch::jit::Stack stack(std::move(args));
  op.callBoxed(&stack);
  return stack.at(0);
}

std::vector<c10::IValue> call_op_all(const char* name, std::vector<c10::IValue> args) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  torch::jit::Stack stack(std::move(args));
  op.callBoxed(&stack);
  return stack;
}

// aten::quantize_per_tensor(self, scale, zero_point, dtype) (also .tensor_qparams)
void quantize_per_tensor(Ctx& c, const TNode* n) {
  c.b.require(10, "quantize_per_tensor (QuantizeLinear)");
  DType repr = repr_of(static_cast<c10::ScalarType>(c.i(n, 3)));
  std::string x = c.t_as(n, 0, DType::Float);
  const TV& in = c.in(n, 0);
  c.set(n->output(), quantize_to(c, in, x, scale_arg(c, c.in(n, 1)), zero_arg(c, c.in(n, 2), repr), repr));
}

// aten::quantize_per_channel(self, scales, zero_points, axis, dtype)
void quantize_per_channel(Ctx& c, const TNode* n) {
  c.b.require(13, "quantize_per_channel (QuantizeLinear with an axis)");
  DType repr = repr_of(static_cast<c10::ScalarType>(c.i(n, 4)));
  int64_t axis = norm_axis(c.i(n, 3), c.rank(n, 0));
  TV q = TV::tensor(c.b.op1("QuantizeLinear", {c.t_as(n, 0, DType::Float), c.t_as(n, 1, DType::Float),
                                               c.t_as(n, 2, repr)}, {Attribute::make_int("axis", axis)}), repr);
  q.qscale = c.t_as(n, 1, DType::Float);
  q.qzero = c.t_as(n, 2, repr);
  q.qaxis = axis;
  c.set(n->output(), q);
}

void dequantize(Ctx& c, const TNode* n) {
  const TV& v = c.in(n, 0);
  if (!is_quantized(v)) return c.set(n->output(), v);  // already float (a dequantized stub input)
  c.set(n->output(), dequantized(c, quantized_tv(c, v)));
}

void int_repr(Ctx& c, const TNode* n) {
  TV q = quant_in(c, n, 0);
  TV r = TV::tensor(q.name, q.dtype);
  r.shape = q.shape;
  r.rank_known = q.rank_known;
  c.set(n->output(), r);
}

// q_scale(q) / q_zero_point(q): the number, as a float / an int.
void q_param(Ctx& c, const TNode* n, bool scale) {
  TV q = quant_in(c, n, 0);
  DType t = scale ? DType::Float : DType::Int64;
  TV r = TV::tensor(c.b.cast(scale ? q.qscale : q.qzero, t), t);
  r.number = true;
  r.rank_known = true;
  c.set(n->output(), r);
}

// A quantized weight in the graph: its integers and a DequantizeLinear, as torch.onnx writes them
// (ONNX Runtime then runs the op on integers, rounding as torch's kernels do). Returns the float
// weight and its scale (0-d, or 1-D along axis 0).
std::pair<std::string, std::string> dq_weight(Ctx& c, const at::Tensor& w) {
  TV q = quantized_tv(c, TV::constant(w));
  return {c.tensor(dequantized(c, q)), q.qscale};
}

// The float bias quantized to int32 with scale x_scale * w_scale, zero point 0 (torch.onnx's
// form; the int32 is the bias' truncated quotient), and dequantized again.
std::string dq_bias(Ctx& c, const at::Tensor& bias, const std::string& x_scale, const std::string& w_scale,
                    bool per_channel) {
  std::string scale = c.b.op1("Mul", {x_scale, w_scale});
  std::string q = c.b.cast(c.b.op1("Div", {c.b.constant(tensor_from_torch(bias.to(at::kFloat)), "bias"), scale}),
                           DType::Int32);
  std::vector<Attribute> attrs;
  if (per_channel) attrs.push_back(Attribute::make_int("axis", 0));
  return c.b.op1("DequantizeLinear", {q, scale}, attrs);  // no zero point: 0
}

// quantized::linear(X, packed, scale, zero_point) and linear_relu
void linear(Ctx& c, const TNode* n, bool relu) {
  c.b.require(10, "quantized::linear (QuantizeLinear)");
  auto wb = call_op_all("quantized::linear_unpack", {c.cval(n, 1)});
  const at::Tensor& wq = wb.at(0).toTensor();
  bool per_channel = wq.qscheme() != c10::kPerTensorAffine && wq.qscheme() != c10::kPerTensorSymmetric;
  TV x = quant_in(c, n, 0);
  auto [w, w_scale] = dq_weight(c, wq);
  std::string xf = c.tensor(dequantized(c, x));
  bool bias = wb.size() > 1 && wb[1].isTensor();
  std::string b = bias ? dq_bias(c, wb[1].toTensor(), x.qscale, w_scale, per_channel) : std::string();
  std::string y;
  if (x.rank_known && x.shape.size() == 2) {
    y = c.b.linear(xf, w, b);
  } else {
    y = c.b.op1("MatMul", {xf, c.b.transpose(w, {1, 0})});
    if (bias) y = c.b.op1("Add", {y, b});
  }
  if (relu) y = c.b.op1("Relu", {y});
  out_quantized(c, n, y, 2, 3, x);
}

// quantized::conv{1,2,3}d(X, packed, scale, zero_point), *_relu, conv_transpose{1,2,3}d
void conv(Ctx& c, const TNode* n, int dims, bool relu, bool transposed) {
  c.b.require(10, "quantized convolutions (QuantizeLinear)");
  const c10::IValue& packed = c.cval(n, 1);
  // conv1d is packed as a 2-d convolution over a height of 1.
  std::string pre = dims == 3 ? "quantized::conv3d_" : "quantized::conv2d_";
  auto wb = call_op_all(dims == 1 ? "quantized::conv1d_unpack" : dims == 2 ? "quantized::conv2d_unpack" : "quantized::conv3d_unpack",
                        {packed});
  at::Tensor wq = wb.at(0).toTensor();
  auto param = [&](const char* what) {
    std::vector<int64_t> v = call_op((pre + what).c_str(), {packed}).toIntVector();
    if (dims == 1 && v.size() == 2) v.erase(v.begin());
    return v;
  };
  std::vector<int64_t> stride = param("stride"), padding = param("padding"), dilation = param("dilation");
  int64_t groups = call_op((pre + "groups").c_str(), {packed}).toInt();
  if (dims == 1 && wq.dim() == 4) wq = wq.squeeze(2);
  bool per_channel = wq.qscheme() != c10::kPerTensorAffine && wq.qscheme() != c10::kPerTensorSymmetric;
  std::vector<int64_t> pads = padding;
  pads.insert(pads.end(), padding.begin(), padding.end());
  std::vector<Attribute> attrs{Attribute::make_ints("strides", stride), Attribute::make_ints("pads", pads),
                               Attribute::make_ints("dilations", dilation), Attribute::make_int("group", groups)};
  if (transposed) attrs.push_back(Attribute::make_ints("output_padding", param("output_padding")));
  TV x = quant_in(c, n, 0);
  auto [w, w_scale] = dq_weight(c, wq.contiguous());
  std::vector<std::string> in{c.tensor(dequantized(c, x)), w};
  if (wb.size() > 1 && wb[1].isTensor()) in.push_back(dq_bias(c, wb[1].toTensor(), x.qscale, w_scale, per_channel));
  std::string y = c.b.op1(transposed ? "ConvTranspose" : "Conv", in, attrs);
  if (relu) y = c.b.op1("Relu", {y});
  out_quantized(c, n, y, 2, 3, x);
}

// quantized::add / mul (qa, qb, scale, zero_point) and the _relu forms; *_scalar (qa, b) pick their own.
void binary(Ctx& c, const TNode* n, const char* op, bool relu) {
  std::string y = c.b.op1(op, {float_in(c, n, 0), float_in(c, n, 1)});
  if (relu) y = c.b.op1("Relu", {y});
  out_quantized(c, n, y, 2, 3, c.in(n, 0));
}
void binary_scalar(Ctx& c, const TNode* n, const char* op, bool relu) {
  std::string y = c.b.op1(op, {float_in(c, n, 0), c.t_as(n, 1, DType::Float)});
  if (relu) y = c.b.op1("Relu", {y});
  out_observed(c, n, y, quant_in(c, n, 0));
}

// quantized::cat(qx[], dim, scale, zero_point); scale / zero point None: torch picks them.
void cat(Ctx& c, const TNode* n) {
  std::vector<TV> items = tensor_list(c, n, 0);
  std::vector<std::string> parts;
  for (const TV& it : items) {
    if (!is_quantized(it)) throw UnsupportedError("quantized::cat of a tensor that is not quantized");
    parts.push_back(c.tensor(dequantized(c, quantized_tv(c, it))));
  }
  if (items.empty()) throw UnsupportedError("quantized::cat of no tensors");
  int r = items[0].rank_known ? static_cast<int>(items[0].shape.size()) : c.out_rank(n);
  std::string y = c.b.concat(parts, norm_axis(c.i(n, 1), r));
  if (c.is_none(n, 2) || c.is_none(n, 3)) return out_observed(c, n, y, quantized_tv(c, items[0]));
  out_quantized(c, n, y, 2, 3, quantized_tv(c, items[0]));
}

// quantized::sigmoid / hardswish (qx, scale, zero_point); leaky_relu (qx, slope, inplace, scale, zero_point)
void sigmoid(Ctx& c, const TNode* n) { out_quantized(c, n, c.b.op1("Sigmoid", {float_in(c, n, 0)}), 1, 2, c.in(n, 0)); }
void hardswish(Ctx& c, const TNode* n) {
  std::string x = float_in(c, n, 0);
  // HardSwish from opset 14; before, x * HardSigmoid(x) with torch's 1/6 and 1/2.
  std::string y = c.b.opset() >= 14 ? c.b.op1("HardSwish", {x})
                                    : c.b.op1("Mul", {x, c.b.op1("HardSigmoid", {x}, {Attribute::make_float("alpha", 1.0f / 6),
                                                                                      Attribute::make_float("beta", 0.5f)})});
  out_quantized(c, n, y, 1, 2, c.in(n, 0));
}
void leaky_relu(Ctx& c, const TNode* n) {
  std::string y = c.b.op1("LeakyRelu", {float_in(c, n, 0)}, {Attribute::make_float("alpha", static_cast<float>(c.f(n, 1)))});
  out_quantized(c, n, y, 3, 4, c.in(n, 0));
}

// Normalizes x over `axes`, then scales by per-channel weight and bias (channel axis 1) or, for
// layer norm, by weight and bias of the normalized shape.
std::string normalized(Ctx& c, const std::string& x, const std::vector<int64_t>& axes, double eps) {
  std::string mean = c.b.reduce("ReduceMean", x, axes, true);
  std::string d = c.b.op1("Sub", {x, mean});
  std::string var = c.b.reduce("ReduceMean", c.b.op1("Mul", {d, d}), axes, true);
  return c.b.op1("Div", {d, c.b.op1("Sqrt", {c.b.op1("Add", {var, c.b.scalar(eps, DType::Float)})})});
}
std::string affine(Ctx& c, const TNode* n, std::string y, size_t wi, size_t bi, int r, bool channel) {
  auto shaped = [&](size_t i) {
    std::string p = c.t_as(n, i, DType::Float);
    if (!channel) return p;
    std::vector<int64_t> s{-1};
    for (int k = 2; k < r; ++k) s.push_back(1);
    return c.b.reshape(p, s);
  };
  if (!c.is_none(n, wi)) y = c.b.op1("Mul", {y, shaped(wi)});
  if (!c.is_none(n, bi)) y = c.b.op1("Add", {y, shaped(bi)});
  return y;
}

// quantized::layer_norm(qx, normalized_shape, weight, bias, eps, scale, zero_point)
void layer_norm(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  int64_t k = static_cast<int64_t>(c.ints(n, 1).size());
  std::vector<int64_t> axes;
  for (int64_t i = r - k; i < r; ++i) axes.push_back(i);
  std::string y = affine(c, n, normalized(c, float_in(c, n, 0), axes, c.f(n, 4)), 2, 3, r, false);
  out_quantized(c, n, y, 5, 6, c.in(n, 0));
}

// quantized::group_norm(qx, num_groups, weight, bias, eps, scale, zero_point)
void group_norm(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  std::string x = float_in(c, n, 0);
  std::string y = normalized(c, c.b.reshape(x, {0, c.i(n, 1), -1}), {2}, c.f(n, 4));
  y = affine(c, n, c.b.op1("Reshape", {y, c.b.shape_of(x)}), 2, 3, r, true);
  out_quantized(c, n, y, 5, 6, c.in(n, 0));
}

// quantized::instance_norm(qx, weight, bias, eps, scale, zero_point)
void instance_norm(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  std::vector<int64_t> axes;
  for (int i = 2; i < r; ++i) axes.push_back(i);
  std::string y = affine(c, n, normalized(c, float_in(c, n, 0), axes, c.f(n, 3)), 1, 2, r, true);
  out_quantized(c, n, y, 4, 5, c.in(n, 0));
}

// quantized::batch_norm{1,2,3}d(qx, weight, bias, mean, var, eps, scale, zero_point) and _relu
void batch_norm(Ctx& c, const TNode* n, bool relu) {
  std::vector<std::string> in{float_in(c, n, 0), c.t_as(n, 1, DType::Float), c.t_as(n, 2, DType::Float),
                              c.t_as(n, 3, DType::Float), c.t_as(n, 4, DType::Float)};
  std::string y = c.b.op1("BatchNormalization", in, {Attribute::make_float("epsilon", static_cast<float>(c.f(n, 5)))});
  if (relu) y = c.b.op1("Relu", {y});
  out_quantized(c, n, y, 6, 7, c.in(n, 0));
}

}  // namespace

void register_quantized_ops(OpTable& t) {
  t["aten::quantize_per_tensor"] = {quantize_per_tensor, 10};
  t["aten::quantize_per_channel"] = {quantize_per_channel, 13};
  t["aten::dequantize"] = {dequantize};
  t["aten::int_repr"] = {int_repr};
  t["aten::q_scale"] = {[](Ctx& c, const TNode* n) { q_param(c, n, true); }};
  t["aten::q_zero_point"] = {[](Ctx& c, const TNode* n) { q_param(c, n, false); }};
  t["quantized::linear"] = {[](Ctx& c, const TNode* n) { linear(c, n, false); }, 10};
  t["quantized::linear_relu"] = {[](Ctx& c, const TNode* n) { linear(c, n, true); }, 10};
  for (int d = 1; d <= 3; ++d) {
    std::string k = "quantized::conv" + std::to_string(d) + "d";
    t[k] = {[d](Ctx& c, const TNode* n) { conv(c, n, d, false, false); }, 10};
    t[k + "_relu"] = {[d](Ctx& c, const TNode* n) { conv(c, n, d, true, false); }, 10};
    t["quantized::conv_transpose" + std::to_string(d) + "d"] = {[d](Ctx& c, const TNode* n) { conv(c, n, d, false, true); }, 10};
  }
  t["quantized::add"] = {[](Ctx& c, const TNode* n) { binary(c, n, "Add", false); }, 10};
  t["quantized::add_relu"] = {[](Ctx& c, const TNode* n) { binary(c, n, "Add", true); }, 10};
  t["quantized::mul"] = {[](Ctx& c, const TNode* n) { binary(c, n, "Mul", false); }, 10};
  t["quantized::mul_relu"] = {[](Ctx& c, const TNode* n) { binary(c, n, "Mul", true); }, 10};
  t["quantized::add_scalar"] = {[](Ctx& c, const TNode* n) { binary_scalar(c, n, "Add", false); }, 10};
  t["quantized::add_scalar_relu"] = {[](Ctx& c, const TNode* n) { binary_scalar(c, n, "Add", true); }, 10};
  t["quantized::mul_scalar"] = {[](Ctx& c, const TNode* n) { binary_scalar(c, n, "Mul", false); }, 10};
  t["quantized::mul_scalar_relu"] = {[](Ctx& c, const TNode* n) { binary_scalar(c, n, "Mul", true); }, 10};
  t["quantized::cat"] = {cat, 10};
  t["quantized::sigmoid"] = {sigmoid, 10};
  t["quantized::hardswish"] = {hardswish};
  t["quantized::leaky_relu"] = {leaky_relu, 10};
  t["quantized::layer_norm"] = {layer_norm, 10};
  t["quantized::group_norm"] = {group_norm, 10};
  t["quantized::instance_norm"] = {instance_norm, 10};
  for (const char* k : {"quantized::batch_norm", "quantized::batch_norm1d", "quantized::batch_norm2d", "quantized::batch_norm3d"})
    t[k] = {[](Ctx& c, const TNode* n) { batch_norm(c, n, false); }, 10};
  for (const char* k : {"quantized::batch_norm_relu", "quantized::batch_norm1d_relu", "quantized::batch_norm2d_relu",
                        "quantized::batch_norm3d_relu"})
    t[k] = {[](Ctx& c, const TNode* n) { batch_norm(c, n, true); }, 10};
}

}  // namespace t2o
