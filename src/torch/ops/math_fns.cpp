// Math functions without a one-op ONNX twin: bit shifts (through multiplication and division by
// powers of two, since ONNX BitShift takes unsigned types only), log-add-exp, heaviside, xlogy,
// entr, hypot, logit, frac, angle conversions, sinc, copysign, signbit, float_power, fmax/fmin, exp2,
// erfinv.
#include <cmath>
#include <limits>

#include "torch/ops/compose.h"

namespace t2o {
namespace {

std::string is_inf(Ctx& c, const std::string& x, DType t) {
  if (c.b.opset() >= 10) return c.b.op1("IsInf", {x});
  double big = t == DType::Double ? std::numeric_limits<double>::max() : t == DType::Float16 ? 65504.0
                                                                                             : std::numeric_limits<float>::max();
  return c.b.op1("Greater", {c.b.op1("Abs", {x}), c.b.scalar(big, t)});
}

// 2^b in type t (b already of type t).
std::string power_of_two(Ctx& c, const TNode* n, const std::string& b, DType t) {
  const TV& bv = c.in(n, 1);
  if (bv.is_const() && !bv.c.isTensor()) return c.b.scalar(std::ldexp(1.0, static_cast<int>(bv.c.toScalar().toLong())), t);
  std::string p = c.b.op1("Pow", {c.b.scalar(2, DType::Double), c.b.cast(b, DType::Double)});
  return t == DType::Double ? p : c.b.cast(p, t);
}

// a << b = a * 2^b (wrapping like the shift); a >> b = floor(a / 2^b): for negative a that is
// -1 - ((-1 - a) / 2^b) with a division of non-negative values, so nothing overflows.
void shift(Ctx& c, const TNode* n, bool left) {
  DType t = c.out_dtype(n);
  std::string a = c.t_as(n, 0, t), b = c.t_as(n, 1, t);
  std::string p = power_of_two(c, n, b, t);
  if (left) return c.out(n, c.b.op1("Mul", {a, p}));
  if (dtype_is_float(t) || t == DType::UInt8 || t == DType::Bool) return c.out(n, c.b.op1("Div", {a, p}));
  std::string neg = c.b.op1("Less", {a, c.b.scalar(0, t)});
  std::string minus_one = c.b.scalar(-1, t);
  std::string u = c.b.op1("Where", {neg, c.b.op1("Sub", {minus_one, a}), a});
  std::string q = c.b.op1("Div", {u, p});
  c.out(n, c.b.op1("Where", {neg, c.b.op1("Sub", {minus_one, q}), q}));
}
void lshift(Ctx& c, const TNode* n) { shift(c, n, true); }
void rshift(Ctx& c, const TNode* n) { shift(c, n, false); }

// log(e^a + e^b) = max + log(1 + e^-|a - b|), and a itself when both are the same infinity.
void logaddexp_base(Ctx& c, const TNode* n, double base) {
  DType t = c.out_dtype(n);
  std::string a = c.t_as(n, 0, t), b = c.t_as(n, 1, t);
  std::string m = c.b.op1("Max", {a, b});
  std::string d = c.b.op1("Neg", {c.b.op1("Abs", {c.b.op1("Sub", {a, b})})});
  double ln = std::log(base);
  if (base != M_E) d = c.b.op1("Mul", {d, c.b.scalar(ln, t)});
  std::string l = c.b.op1("Log", {c.b.op1("Add", {c.b.scalar(1, t), c.b.op1("Exp", {d})})});
  if (base != M_E) l = c.b.op1("Div", {l, c.b.scalar(ln, t)});
  std::string same_inf = c.b.op1("And", {is_inf(c, a, t), equal_to(c, a, b, t)});
  c.out(n, c.b.op1("Where", {same_inf, a, c.b.op1("Add", {m, l})}));
}
void logaddexp(Ctx& c, const TNode* n) { logaddexp_base(c, n, M_E); }
void logaddexp2(Ctx& c, const TNode* n) { logaddexp_base(c, n, 2.0); }

// heaviside(x, values): values where x == 0, else x > 0.
void heaviside(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t), v = c.t_as(n, 1, t);
  std::string step = c.b.op1("Where", {c.b.op1("Greater", {x, c.b.scalar(0, t)}), c.b.scalar(1, t), c.b.scalar(0, t)});
  c.out(n, c.b.op1("Where", {equal_to(c, x, c.b.scalar(0, t), t), v, step}));
}

// xlogy(x, y) = x log y, 0 where x == 0 unless y is NaN; xlog1py likewise with log(1 + y).
void xlogy_like(Ctx& c, const TNode* n, bool plus_one) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t), y = c.t_as(n, 1, t);
  std::string arg = plus_one ? c.b.op1("Add", {y, c.b.scalar(1, t)}) : y;
  std::string v = c.b.op1("Mul", {x, c.b.op1("Log", {arg})});
  std::string zero = c.b.op1("And", {equal_to(c, x, c.b.scalar(0, t), t), c.b.op1("Not", {c.b.op1("IsNaN", {y})})});
  c.out(n, c.b.op1("Where", {zero, c.b.scalar(0, t), v}));
}
void xlogy(Ctx& c, const TNode* n) { xlogy_like(c, n, false); }
void xlog1py(Ctx& c, const TNode* n) { xlogy_like(c, n, true); }

// entr(x) = -x ln x for x > 0, 0 at 0, -inf below (NaN stays NaN).
void entr(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t);
  std::string v = c.b.op1("Neg", {c.b.op1("Mul", {x, c.b.op1("Log", {x})})});
  v = c.b.op1("Where", {equal_to(c, x, c.b.scalar(0, t), t), c.b.scalar(0, t), v});
  c.out(n, c.b.op1("Where", {c.b.op1("Less", {x, c.b.scalar(0, t)}),
                             c.b.scalar(-std::numeric_limits<double>::infinity(), t), v}));
}

void hypot(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string a = c.t_as(n, 0, t), b = c.t_as(n, 1, t);
  c.out(n, c.b.op1("Sqrt", {c.b.op1("Add", {c.b.op1("Mul", {a, a}), c.b.op1("Mul", {b, b})})}));
}

// logit(x, eps) = log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given.
void logit(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t);
  if (auto k = Ctx::arg_index(n, "eps"); k && !c.is_none(n, *k)) {
    double eps = c.f(n, *k);
    x = c.b.op1("Min", {c.b.op1("Max", {x, c.b.scalar(eps, t)}), c.b.scalar(1 - eps, t)});
  }
  c.out(n, c.b.op1("Log", {c.b.op1("Div", {x, c.b.op1("Sub", {c.b.scalar(1, t), x})})}));
}

// frac(x) = x - trunc(x), keeping the sign.
void frac(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t);
  std::string tr = c.b.op1("Mul", {c.b.op1("Sign", {x}), c.b.op1("Floor", {c.b.op1("Abs", {x})})});
  c.out(n, c.b.op1("Sub", {x, tr}));
}

void scaled(Ctx& c, const TNode* n, double k) {
  DType t = c.out_dtype(n);
  c.out(n, c.b.op1("Mul", {c.t_as(n, 0, t), c.b.scalar(k, t)}));
}
void deg2rad(Ctx& c, const TNode* n) { scaled(c, n, M_PI / 180.0); }
void rad2deg(Ctx& c, const TNode* n) { scaled(c, n, 180.0 / M_PI); }

// sinc(x) = sin(pi x) / (pi x), 1 at 0.
void sinc(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t);
  std::string px = c.b.op1("Mul", {x, c.b.scalar(M_PI, t)});
  c.out(n, c.b.op1("Where", {equal_to(c, x, c.b.scalar(0, t), t), c.b.scalar(1, t),
                             c.b.op1("Div", {c.b.op1("Sin", {px}), px})}));
}

// The sign bit: negative numbers, and -0 (whose reciprocal is -inf).
std::string sign_bit(Ctx& c, const std::string& x, DType t) {
  std::string neg = c.b.op1("Less", {x, c.b.scalar(0, t)});
  if (!dtype_is_float(t)) return neg;
  return c.b.op1("Or", {neg, c.b.op1("Less", {c.b.op1("Reciprocal", {x}), c.b.scalar(0, t)})});
}

void copysign(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string a = c.b.op1("Abs", {c.t_as(n, 0, t)});
  c.out(n, c.b.op1("Where", {sign_bit(c, c.t_as(n, 1, t), t), c.b.op1("Neg", {a}), a}));
}

void signbit(Ctx& c, const TNode* n) {
  DType t = c.dtype(n, 0);
  c.out(n, sign_bit(c, c.t(n, 0), t));
}

void float_power(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, c.b.op1("Pow", {c.t_as(n, 0, t), c.t_as(n, 1, t)}));
}

// fmax / fmin: like maximum / minimum, but a NaN loses to a number.
void fmax_fmin(Ctx& c, const TNode* n, bool is_max) {
  DType t = c.out_dtype(n);
  std::string a = c.t_as(n, 0, t), b = c.t_as(n, 1, t);
  std::string m = c.b.op1(is_max ? "Max" : "Min", {a, b});
  if (!dtype_is_float(t)) return c.out(n, m);
  m = c.b.op1("Where", {c.b.op1("IsNaN", {b}), a, m});
  c.out(n, c.b.op1("Where", {c.b.op1("IsNaN", {a}), b, m}));
}
void fmax(Ctx& c, const TNode* n) { fmax_fmin(c, n, true); }
void fmin(Ctx& c, const TNode* n) { fmax_fmin(c, n, false); }

void exp2(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, c.b.op1("Pow", {c.b.scalar(2, t), c.t_as(n, 0, t)}));
}

void identity(Ctx& c, const TNode* n) { c.out(n, c.t(n, 0)); }

// isfinite: neither infinite nor NaN; integers always are.
void isfinite(Ctx& c, const TNode* n) {
  DType t = c.dtype(n, 0);
  std::string x = c.t(n, 0);
  if (!dtype_is_float(t)) {
    Tensor yes(DType::Bool, {1});
    yes.data<bool>()[0] = true;
    return c.out(n, c.b.op1("ConstantOfShape", {c.b.shape_of(x)}, {Attribute::make_tensor("value", yes)}));
  }
  c.out(n, c.b.op1("Not", {c.b.op1("Or", {is_inf(c, x, t), c.b.op1("IsNaN", {x})})}));
}

// Horner evaluation of coefficients (highest first) at w.
std::string poly(Ctx& c, const std::string& w, const std::vector<double>& k, DType t) {
  std::string p = c.b.scalar(k[0], t);
  for (size_t i = 1; i < k.size(); ++i) p = c.b.op1("Add", {c.b.op1("Mul", {p, w}), c.b.scalar(k[i], t)});
  return p;
}

// erfinv: M. Giles' single-precision approximation ("Approximating the erfinv function", 2010),
// refined by Newton steps on Erf; +-inf at +-1 and NaN beyond.
void erfinv(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  if (!dtype_is_float(t)) throw UnsupportedError("aten::erfinv on integers");
  std::string x = c.t_as(n, 0, t);
  std::string one = c.b.scalar(1, t);
  std::string w = c.b.op1("Neg", {c.b.op1("Log", {c.b.op1("Mul", {c.b.op1("Sub", {one, x}), c.b.op1("Add", {one, x})})})});
  std::string central = poly(c, c.b.op1("Sub", {w, c.b.scalar(2.5, t)}),
                             {2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                              -0.00125372503, -0.00417768164, 0.246640727, 1.50140941}, t);
  std::string tail = poly(c, c.b.op1("Sub", {c.b.op1("Sqrt", {w}), c.b.scalar(3, t)}),
                          {-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                           -0.0076224613, 0.00943887047, 1.00167406, 2.83297682}, t);
  std::string y = c.b.op1("Mul", {c.b.op1("Where", {c.b.op1("Less", {w, c.b.scalar(5, t)}), central, tail}), x});
  std::string k = c.b.scalar(2.0 / std::sqrt(M_PI), t);
  for (int step = 0; step < (t == DType::Double ? 2 : 1); ++step) {
    std::string err = c.b.op1("Sub", {c.b.op1("Erf", {y}), x});
    std::string slope = c.b.op1("Mul", {k, c.b.op1("Exp", {c.b.op1("Neg", {c.b.op1("Mul", {y, y})})})});
    y = c.b.op1("Sub", {y, c.b.op1("Div", {err, slope})});
  }
  std::string ax = c.b.op1("Abs", {x});
  std::string inf = c.b.op1("Mul", {c.b.op1("Sign", {x}), c.b.scalar(std::numeric_limits<double>::infinity(), t)});
  y = c.b.op1("Where", {equal_to(c, ax, one, t), inf, y});
  c.out(n, c.b.op1("Where", {c.b.op1("Greater", {ax, one}), c.b.scalar(std::nan(""), t), y}));
}

}  // namespace

void register_math_fn_ops(OpTable& t) {
  t["aten::__lshift__"] = {lshift};
  t["aten::__rshift__"] = {rshift};
  t["aten::bitwise_left_shift"] = {lshift};
  t["aten::bitwise_right_shift"] = {rshift};
  t["aten::logaddexp"] = {logaddexp};
  t["aten::logaddexp2"] = {logaddexp2};
  t["aten::heaviside"] = {heaviside};
  t["aten::xlogy"] = {xlogy};
  t["aten::special_xlogy"] = {xlogy};
  t["aten::special_xlog1py"] = {xlog1py};
  t["aten::special_entr"] = {entr};
  t["aten::hypot"] = {hypot};
  t["aten::logit"] = {logit};
  t["aten::special_logit"] = {logit};
  t["aten::frac"] = {frac};
  t["aten::deg2rad"] = {deg2rad};
  t["aten::rad2deg"] = {rad2deg};
  t["aten::sinc"] = {sinc};
  t["aten::special_sinc"] = {sinc};
  t["aten::copysign"] = {copysign};
  t["aten::signbit"] = {signbit};
  t["aten::float_power"] = {float_power};
  t["aten::fmax"] = {fmax};
  t["aten::fmin"] = {fmin};
  t["aten::exp2"] = {exp2};
  t["aten::special_exp2"] = {exp2};
  t["aten::positive"] = {identity};
  t["aten::isfinite"] = {isfinite};
  t["aten::erfinv"] = {erfinv};
  t["aten::special_erfinv"] = {erfinv};
}

}  // namespace t2o
