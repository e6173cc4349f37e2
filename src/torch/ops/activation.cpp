// Activation functions. ONNX lacks several (GELU, SiLU, Mish before late opsets), so they are
// composed from primitives that every opset 9-17 runtime has.
#include <climits>
#include <cmath>

#include "torch/ops/ops.h"

namespace t2o {
namespace {

std::string x_of(Ctx& c, const TNode* n) { return c.t_as(n, 0, c.out_dtype(n)); }

void relu(Ctx& c, const TNode* n) { c.out(n, c.b.op1("Relu", {x_of(c, n)})); }

void relu6(Ctx& c, const TNode* n) { c.out(n, c.b.clip(x_of(c, n), 0.0, 6.0, c.out_dtype(n))); }

void hardtanh(Ctx& c, const TNode* n) {
  double lo = n->inputs().size() > 1 ? c.f(n, 1) : -1.0, hi = n->inputs().size() > 2 ? c.f(n, 2) : 1.0;
  c.out(n, c.b.clip(x_of(c, n), lo, hi, c.out_dtype(n)));
}

void leaky_relu(Ctx& c, const TNode* n) {
  double a = n->inputs().size() > 1 ? c.f(n, 1) : 0.01;
  c.out(n, c.b.op1("LeakyRelu", {x_of(c, n)}, {Attribute::make_float("alpha", static_cast<float>(a))}));
}

void elu(Ctx& c, const TNode* n) {
  double alpha = n->inputs().size() > 1 ? c.f(n, 1) : 1.0;
  double scale = n->inputs().size() > 2 ? c.f(n, 2) : 1.0;
  double in_scale = n->inputs().size() > 3 ? c.f(n, 3) : 1.0;
  DType t = c.out_dtype(n);
  std::string x = x_of(c, n);
  if (in_scale != 1.0) {
    // scale * (x>0 ? x : alpha*(exp(x*in_scale)-1))
    std::string neg = c.b.op1("Mul", {c.b.scalar(alpha, t),
                                      c.b.op1("Sub", {c.b.op1("Exp", {c.b.op1("Mul", {x, c.b.scalar(in_scale, t)})}),
                                                      c.b.scalar(1, t)})});
    std::string y = c.b.op1("Where", {c.b.op1("Greater", {x, c.b.scalar(0, t)}), x, neg});
    return c.out(n, c.b.op1("Mul", {y, c.b.scalar(scale, t)}));
  }
  std::string y = c.b.op1("Elu", {x}, {Attribute::make_float("alpha", static_cast<float>(alpha))});
  if (scale != 1.0) y = c.b.op1("Mul", {y, c.b.scalar(scale, t)});
  c.out(n, y);
}

void selu(Ctx& c, const TNode* n) { c.out(n, c.b.op1("Selu", {x_of(c, n)})); }

void celu(Ctx& c, const TNode* n) {
  c.b.require(12, "Celu");
  double a = n->inputs().size() > 1 ? c.f(n, 1) : 1.0;
  c.out(n, c.b.op1("Celu", {x_of(c, n)}, {Attribute::make_float("alpha", static_cast<float>(a))}));
}

void gelu(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = x_of(c, n);
  std::string approx = n->inputs().size() > 1 ? c.str(n, 1) : "none";
  std::string inner;
  if (approx == "tanh") {
    // 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))
    std::string x3 = c.b.op1("Mul", {c.b.op1("Mul", {x, x}), x});
    std::string s = c.b.op1("Add", {x, c.b.op1("Mul", {x3, c.b.scalar(0.044715, t)})});
    inner = c.b.op1("Tanh", {c.b.op1("Mul", {s, c.b.scalar(std::sqrt(2.0 / M_PI), t)})});
  } else {
    inner = c.b.op1("Erf", {c.b.op1("Div", {x, c.b.scalar(std::sqrt(2.0), t)})});
  }
  std::string y = c.b.op1("Mul", {x, c.b.op1("Add", {inner, c.b.scalar(1, t)})});
  c.out(n, c.b.op1("Mul", {y, c.b.scalar(0.5, t)}));
}

void silu(Ctx& c, const TNode* n) {
  std::string x = x_of(c, n);
  c.out(n, c.b.op1("Mul", {x, c.b.op1("Sigmoid", {x})}));
}

void mish(Ctx& c, const TNode* n) {
  std::string x = x_of(c, n);
  c.out(n, c.b.op1("Mul", {x, c.b.op1("Tanh", {c.b.op1("Softplus", {x})})}));
}

void hardsigmoid(Ctx& c, const TNode* n) {
  c.out(n, c.b.op1("HardSigmoid", {x_of(c, n)},
                   {Attribute::make_float("alpha", 1.0f / 6), Attribute::make_float("beta", 0.5f)}));
}

void hardswish(Ctx& c, const TNode* n) {
  std::string x = x_of(c, n);
  if (c.b.opset() >= 14) return c.out(n, c.b.op1("HardSwish", {x}));
  std::string hs = c.b.op1("HardSigmoid", {x}, {Attribute::make_float("alpha", 1.0f / 6), Attribute::make_float("beta", 0.5f)});
  c.out(n, c.b.op1("Mul", {x, hs}));
}

void softplus(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  double beta = n->inputs().size() > 1 ? c.f(n, 1) : 1.0;
  double threshold = n->inputs().size() > 2 ? c.f(n, 2) : 20.0;
  std::string x = x_of(c, n);
  std::string y = beta == 1.0 ? c.b.op1("Softplus", {x})
                              : c.b.op1("Div", {c.b.op1("Softplus", {c.b.op1("Mul", {x, c.b.scalar(beta, t)})}),
                                                c.b.scalar(beta, t)});
  // torch returns x itself where beta * x > threshold; from a threshold of 20 on the two differ by less
  // than float rounding (log1p(exp(20)) - 20 = 2e-9).
  if (threshold < 20.0) {
    std::string above = c.b.op1("Greater", {c.b.op1("Mul", {x, c.b.scalar(beta, t)}), c.b.scalar(threshold, t)});
    y = c.b.op1("Where", {above, x, y});
  }
  c.out(n, y);
}

void softsign(Ctx& c, const TNode* n) { c.out(n, c.b.op1("Softsign", {x_of(c, n)})); }

void logsigmoid(Ctx& c, const TNode* n) {
  // -softplus(-x) is the stable form.
  std::string x = x_of(c, n);
  c.out(n, c.b.op1("Neg", {c.b.op1("Softplus", {c.b.op1("Neg", {x})})}));
}

void prelu(Ctx& c, const TNode* n) {
  std::string x = x_of(c, n), w = c.t_as(n, 1, c.out_dtype(n));
  int r = c.rank(n, 0);
  // torch's weight is per channel (dim 1); ONNX broadcasts from the right.
  int64_t wn = c.in(n, 1).is_const() ? c.in(n, 1).c.toTensor().numel() : -1;
  if (r > 2 && wn != 1) {
    std::vector<int64_t> shape{-1};
    for (int i = 2; i < r; ++i) shape.push_back(1);
    w = c.b.reshape(w, shape);
  }
  if (r == 0 && wn == 1) w = c.b.reshape(w, {});  // a 0-d input stays 0-d (a [1] slope would broadcast it)
  c.out(n, c.b.op1("PRelu", {x, w}));
}

void glu(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  int64_t axis = norm_axis(n->inputs().size() > 1 ? c.i(n, 1) : -1, r);
  int64_t len = c.shape(n, 0)[static_cast<size_t>(axis)];
  std::string x = x_of(c, n);
  std::vector<std::string> parts;
  if (len >= 0) {
    parts = c.b.split(x, {len / 2, len / 2}, axis);
  } else {  // halves at the run-time length
    std::string half = c.b.unsqueeze(c.b.op1("Div", {c.b.dim(x, axis), c.b.i64(2)}), {0});
    std::string ax = c.b.i64s({axis});
    parts = {c.b.slice_dyn(x, c.b.i64s({0}), half, ax), c.b.slice_dyn(x, half, c.b.i64s({INT64_MAX}), ax)};
  }
  c.out(n, c.b.op1("Mul", {parts[0], c.b.op1("Sigmoid", {parts[1]})}));
}

void threshold(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = x_of(c, n);
  std::string gt = c.b.op1("Greater", {x, c.b.scalar(c.f(n, 1), t)});
  c.out(n, c.b.op1("Where", {gt, x, c.b.scalar(c.f(n, 2), t)}));
}

void shrink(Ctx& c, const TNode* n, bool soft) {
  double l = n->inputs().size() > 1 ? c.f(n, 1) : 0.5;
  c.out(n, c.b.op1("Shrink", {x_of(c, n)},
                   {Attribute::make_float("lambd", static_cast<float>(l)),
                    Attribute::make_float("bias", soft ? static_cast<float>(l) : 0.0f)}));
}
void hardshrink(Ctx& c, const TNode* n) { shrink(c, n, false); }
void softshrink(Ctx& c, const TNode* n) { shrink(c, n, true); }

void tanhshrink(Ctx& c, const TNode* n) {
  std::string x = x_of(c, n);
  c.out(n, c.b.op1("Sub", {x, c.b.op1("Tanh", {x})}));
}

}  // namespace

void register_activation_ops(OpTable& t) {
  t["aten::relu"] = {relu};
  t["aten::relu6"] = {relu6};
  t["aten::hardtanh"] = {hardtanh};
  t["aten::leaky_relu"] = {leaky_relu};
  t["aten::elu"] = {elu};
  t["aten::selu"] = {selu};
  t["aten::celu"] = {celu};
  t["aten::gelu"] = {gelu};
  t["aten::silu"] = {silu};
  t["aten::mish"] = {mish};
  t["aten::hardsigmoid"] = {hardsigmoid};
  t["aten::hardswish"] = {hardswish};
  t["aten::softplus"] = {softplus};
  t["aten::softsign"] = {softsign};
  t["aten::log_sigmoid"] = {logsigmoid};
  t["aten::prelu"] = {prelu};
  t["aten::glu"] = {glu};
  t["aten::threshold"] = {threshold};
  t["aten::hardshrink"] = {hardshrink};
  t["aten::softshrink"] = {softshrink};
  t["aten::tanhshrink"] = {tanhshrink};
}

}  // namespace t2o
