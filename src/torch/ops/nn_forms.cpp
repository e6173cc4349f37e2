// Other forms of nn layers that TorchScript can hold: conv_tbc (time-batch-channel convolution),
// native_layer_norm (with its statistics), _weight_norm, rrelu in eval mode, _log_softmax.
#include "torch/ops/compose.h"

namespace t2o {
namespace {

// aten::conv_tbc(x [T, B, Cin], weight [K, Cin, Cout], bias [Cout], pad) -> [T', B, Cout]: a Conv
// over [B, Cin, T].
void conv_tbc(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  const TV& w = c.in(n, 1);
  std::vector<int64_t> ws = w.is_const() ? w.c.toTensor().sizes().vec() : w.shape;
  if (ws.size() != 3 || ws[0] < 0) throw UnsupportedError("aten::conv_tbc with a weight of unknown kernel size");
  int64_t pad = c.i(n, "pad", 0);
  std::string x = c.b.transpose(c.t_as(n, 0, t), {1, 2, 0});
  std::string k = c.b.transpose(c.tensor_as(w, t), {2, 1, 0});
  std::string y = c.b.op1("Conv", {x, k, c.t_as(n, 2, t)},
                          {Attribute::make_ints("kernel_shape", {ws[0]}), Attribute::make_ints("pads", {pad, pad}),
                           Attribute::make_ints("strides", {1}), Attribute::make_ints("dilations", {1})});
  c.out(n, c.b.transpose(y, {2, 0, 1}));
}

// aten::native_layer_norm(x, normalized_shape, weight, bias, eps) -> (y, mean, rstd), the
// statistics shaped [.., 1, ..1] over the normalized dims.
void native_layer_norm(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  int64_t k = static_cast<int64_t>(c.ints(n, 1).size());
  std::vector<int64_t> axes;
  for (int64_t i = r - k; i < r; ++i) axes.push_back(i);
  std::string x = c.t_as(n, 0, t);
  std::string mean = c.b.reduce("ReduceMean", x, axes, true);
  std::string d = c.b.op1("Sub", {x, mean});
  std::string var = c.b.reduce("ReduceMean", c.b.op1("Mul", {d, d}), axes, true);
  std::string rstd = c.b.op1("Reciprocal", {c.b.op1("Sqrt", {c.b.op1("Add", {var, c.b.scalar(c.f(n, "eps", 1e-5), t)})})});
  std::string y = c.b.op1("Mul", {d, rstd});
  if (!c.is_none(n, 2)) y = c.b.op1("Mul", {y, c.t_as(n, 2, t)});
  if (!c.is_none(n, 3)) y = c.b.op1("Add", {y, c.t_as(n, 3, t)});
  c.out(n, 0, y);
  c.out(n, 1, mean);
  c.out(n, 2, rstd);
}

// aten::_weight_norm(v, g, dim): v * g / ||v||, the norm over every dim but `dim` (over all for -1).
void weight_norm(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  int64_t dim = c.i(n, "dim", 0);
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < r; ++i)
    if (dim == -1 || i != norm_axis(dim, r)) axes.push_back(i);
  std::string v = c.t_as(n, 0, t);
  std::string norm = c.b.reduce("ReduceL2", v, axes, true);
  c.out(n, c.b.op1("Mul", {v, c.b.op1("Div", {c.t_as(n, 1, t), norm})}));
}

// aten::rrelu(x, lower, upper, training): outside training a leaky relu with the mean slope.
void rrelu(Ctx& c, const TNode* n) {
  if (c.flag(n, "training", false)) throw UnsupportedError("aten::rrelu in training mode (random slopes)");
  double slope = (c.f(n, "lower", 0.125) + c.f(n, "upper", 1.0 / 3)) / 2;
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t);
  c.out(n, c.b.op1("Where", {c.b.op1("Less", {x, c.b.scalar(0, t)}), c.b.op1("Mul", {x, c.b.scalar(slope, t)}), x}));
}

// aten::_log_softmax(x, dim, half_to_float)
void log_softmax(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, c.b.softmax("LogSoftmax", c.t_as(n, 0, t), c.i(n, "dim", -1), c.rank(n, 0)));
}

}  // namespace

void register_nn_form_ops(OpTable& t) {
  t["aten::conv_tbc"] = {conv_tbc};
  t["aten::native_layer_norm"] = {native_layer_norm};
  t["aten::_weight_norm"] = {weight_norm};
  t["aten::rrelu"] = {rrelu};
  t["aten::_log_softmax"] = {log_softmax};
}

}  // namespace t2o
