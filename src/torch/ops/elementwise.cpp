// Arithmetic, comparison and math functions, with torch's broadcasting and scalar promotion:
// operands are cast to the result type the profiling run observed.
#include <cmath>

#include "torch/ops/compose.h"

namespace t2o {

bool is_list_value(const TNode* n, size_t i) {
  return n->input(i)->type()->kind() == c10::TypeKind::ListType;
}

// Numbers (0-d, "weak") adopt the tensor's type unless they are of a higher category.
DType compare_dtype(Ctx& c, const TNode* n) {
  DType a = c.dtype(n, 0), b = c.dtype(n, 1);
  bool wa = c.in(n, 0).is_const() && !c.in(n, 0).c.isTensor(), wb = c.in(n, 1).is_const() && !c.in(n, 1).c.isTensor();
  wa = wa || c.in(n, 0).number;
  wb = wb || c.in(n, 1).number;
  auto cat = [](DType t) { return t == DType::Bool ? 0 : dtype_is_float(t) ? 2 : 1; };
  if (wa && !wb) return cat(a) > cat(b) ? (a == DType::Float ? DType::Float : a) : b;
  if (wb && !wa) return cat(b) > cat(a) ? (b == DType::Float ? DType::Float : b) : a;
  return promote_dtypes(a, b);
}

namespace {

std::string alpha_scaled(Ctx& c, const TNode* n, size_t i, DType out) {
  std::string y = c.t_as(n, i, out);
  if (n->inputs().size() > 2 && !c.is_none(n, 2)) {
    double alpha = c.f(n, 2);
    if (alpha != 1.0) y = c.b.op1("Mul", {y, c.b.scalar(alpha, out)});
  }
  return y;
}

void add(Ctx& c, const TNode* n) {
  if (is_list_value(n, 0)) return list_add(c, n);
  DType out = c.out_dtype(n);
  c.out(n, c.b.op1("Add", {c.t_as(n, 0, out), alpha_scaled(c, n, 1, out)}));
}

void sub(Ctx& c, const TNode* n) {
  DType out = c.out_dtype(n);
  c.out(n, c.b.op1("Sub", {c.t_as(n, 0, out), alpha_scaled(c, n, 1, out)}));
}

void rsub(Ctx& c, const TNode* n) {
  DType out = c.out_dtype(n);
  c.out(n, c.b.op1("Sub", {c.t_as(n, 1, out), alpha_scaled(c, n, 0, out)}));
}

template <const char* Op>
void binary(Ctx& c, const TNode* n) {
  DType out = c.out_dtype(n);
  c.out(n, c.b.op1(Op, {c.t_as(n, 0, out), c.t_as(n, 1, out)}));
}


constexpr char kMul[] = "Mul", kMax[] = "Max", kMin[] = "Min", kAnd[] = "And", kOr[] = "Or", kXor[] = "Xor";

std::string floor_div(Ctx& c, const std::string& a, const std::string& b, DType t) {
  if (dtype_is_float(t)) return c.b.op1("Floor", {c.b.op1("Div", {a, b})});
  // Integer Div truncates; floor matters for negative quotients, so go through double.
  std::string q = c.b.op1("Floor", {c.b.op1("Div", {c.b.cast(a, DType::Double), c.b.cast(b, DType::Double)})});
  return c.b.cast(q, t);
}

void div(Ctx& c, const TNode* n) {
  DType out = c.out_dtype(n);
  std::string mode;
  if (n->inputs().size() > 2 && !c.is_none(n, 2)) mode = c.str(n, 2);
  if (mode.empty()) return c.out(n, c.b.op1("Div", {c.t_as(n, 0, out), c.t_as(n, 1, out)}));
  std::string a = c.t_as(n, 0, out), b = c.t_as(n, 1, out);
  if (mode == "floor") return c.out(n, floor_div(c, a, b, out));
  if (!dtype_is_float(out)) return c.out(n, c.b.op1("Div", {a, b}));
  std::string q = c.b.op1("Div", {a, b});  // trunc: sign(q) * floor(|q|)
  c.out(n, c.b.op1("Mul", {c.b.op1("Sign", {q}), c.b.op1("Floor", {c.b.op1("Abs", {q})})}));
}

void floordiv(Ctx& c, const TNode* n) {
  DType out = c.out_dtype(n);
  c.out(n, floor_div(c, c.t_as(n, 0, out), c.t_as(n, 1, out), out));
}

void remainder(Ctx& c, const TNode* n) {
  DType out = c.out_dtype(n);
  std::string a = c.t_as(n, 0, out), b = c.t_as(n, 1, out);
  // Mod arrives in opset 10; before, integers take the floor-division form too.
  if (!dtype_is_float(out) && c.b.opset() >= 10)
    return c.out(n, c.b.op1("Mod", {a, b}, {Attribute::make_int("fmod", 0)}));
  c.out(n, c.b.op1("Sub", {a, c.b.op1("Mul", {floor_div(c, a, b, out), b})}));
}

void fmod(Ctx& c, const TNode* n) {
  DType out = c.out_dtype(n);
  c.b.require(10, "fmod");
  c.out(n, c.b.op1("Mod", {c.t_as(n, 0, out), c.t_as(n, 1, out)}, {Attribute::make_int("fmod", 1)}));
}

void pow(Ctx& c, const TNode* n) {
  DType out = c.out_dtype(n);
  c.out(n, c.b.op1("Pow", {c.t_as(n, 0, out), c.t_as(n, 1, out)}));
}

// int[] == int[] (nn.RNN's hx.size() check): equal when every element is; lists of different
// lengths never are.
void compare_int_lists(Ctx& c, const TNode* n, bool negate) {
  auto len = [&](size_t i) -> int64_t {
    const TV& v = c.in(n, i);
    if (v.kind == TV::Kind::List) return static_cast<int64_t>(v.items.size());
    if (v.is_const() && v.c.isList()) return static_cast<int64_t>(v.c.toListRef().size());
    return -1;
  };
  if (len(0) >= 0 && len(1) >= 0 && len(0) != len(1)) return c.set(n->output(), TV::constant(c10::IValue(negate)));
  std::string eq = c.b.op1("Equal", {c.ints_tensor(c.in(n, 0)), c.ints_tensor(c.in(n, 1))});
  std::string all = c.b.reduce("ReduceMin", c.b.cast(eq, DType::Int32), {}, false);
  std::string r = c.b.cast(all, DType::Bool);
  c.out(n, negate ? c.b.op1("Not", {r}) : r);
}

// Equal takes floats from opset 11; before, a == b is "neither a < b nor a > b, and neither is NaN".
std::string equal(Ctx& c, const std::string& a, const std::string& b, DType t) {
  if (c.b.opset() >= 11 || t == DType::Bool || t == DType::Int32 || t == DType::Int64) return c.b.op1("Equal", {a, b});
  if (!dtype_is_float(t)) return c.b.op1("Equal", {c.b.cast(a, DType::Int64), c.b.cast(b, DType::Int64)});
  std::string ordered = c.b.op1("Or", {c.b.op1("Less", {a, b}), c.b.op1("Greater", {a, b})});
  std::string nan = c.b.op1("Or", {c.b.op1("IsNaN", {a}), c.b.op1("IsNaN", {b})});
  return c.b.op1("Not", {c.b.op1("Or", {ordered, nan})});
}

void compare(Ctx& c, const TNode* n, const std::string& op, bool negate) {
  if (op == "Equal" && is_list_value(n, 0) && is_list_value(n, 1)) return compare_int_lists(c, n, negate);
  DType t = compare_dtype(c, n);
  std::string a = c.t_as(n, 0, t), b = c.t_as(n, 1, t);
  std::string r;
  if (op == "LessOrEqual" || op == "GreaterOrEqual") {
    if (c.b.opset() >= 12) {
      r = c.b.op1(op, {a, b});
    } else {
      // Not Greater would call NaN <= 1 true.
      r = c.b.op1("Or", {c.b.op1(op == "LessOrEqual" ? "Less" : "Greater", {a, b}), equal(c, a, b, t)});
    }
  } else if (op == "Equal") {
    r = equal(c, a, b, t);
  } else {
    r = c.b.op1(op, {a, b});
  }
  if (negate) r = c.b.op1("Not", {r});
  c.out(n, r);
}
void eq(Ctx& c, const TNode* n) { compare(c, n, "Equal", false); }
void ne(Ctx& c, const TNode* n) { compare(c, n, "Equal", true); }
void lt(Ctx& c, const TNode* n) { compare(c, n, "Less", false); }
void gt(Ctx& c, const TNode* n) { compare(c, n, "Greater", false); }
void le(Ctx& c, const TNode* n) { compare(c, n, "LessOrEqual", false); }
void ge(Ctx& c, const TNode* n) { compare(c, n, "GreaterOrEqual", false); }

// Integer and/or/xor in ops every opset has (ONNX's BitwiseAnd & co. came with opset 18), in int64,
// where the narrower types' values are the same bits sign-extended. Bits 0-62 are the digits
// d - 2 (d / 2), d = v / 2^k, of v, or for a negative v one minus those of ~v = -1 - v (which is
// non-negative: nothing wraps), combined per bit on a new last axis; the sign bit (v < 0) is
// combined apart. A non-negative result is the sum of its bits' values, a negative one -1 minus
// that of its complement's: sums stay as small as the result's magnitude (ONNX Runtime's int64
// ReduceSum is not exact near 2^63).
std::string integer_bitwise(Ctx& c, const TNode* n, const char* op) {
  DType t = c.out_dtype(n);
  int ra = c.rank(n, 0), rb = c.rank(n, 1), r = c.out_rank(n);
  if (ra < 0 || rb < 0 || r < 0) throw UnsupportedError("bitwise ops on integers of unknown rank");
  std::vector<int64_t> powers(63);
  for (int k = 0; k < 63; ++k) powers[static_cast<size_t>(k)] = int64_t{1} << k;
  std::string p = c.b.constant(Tensor::from_vector<int64_t>(powers, {63}), "bit_values");
  std::string zero = c.b.scalar(0, DType::Int64), one = c.b.scalar(1, DType::Int64);
  auto split = [&](size_t i, int rank) {
    std::string v = c.t_as(n, i, DType::Int64);
    std::string neg = c.b.op1("Less", {v, zero});
    std::string mag = c.b.op1("Where", {neg, c.b.op1("Sub", {c.b.scalar(-1, DType::Int64), v}), v});
    std::string two = c.b.scalar(2, DType::Int64);
    std::string d = c.b.op1("Div", {c.b.unsqueeze(mag, {rank}), p});
    std::string bits = c.b.op1("Sub", {d, c.b.op1("Mul", {c.b.op1("Div", {d, two}), two})});
    bits = c.b.op1("Where", {c.b.unsqueeze(neg, {rank}), c.b.op1("Sub", {one, bits}), bits});
    return std::make_pair(bits, c.b.cast(neg, DType::Int64));
  };
  auto [abits, asign] = split(0, ra);
  auto [bbits, bsign] = split(1, rb);
  auto combine = [&](const std::string& x, const std::string& y) {
    if (op == kAnd) return c.b.op1("Mul", {x, y});
    if (op == kOr) return c.b.op1("Max", {x, y});
    return c.b.op1("Abs", {c.b.op1("Sub", {x, y})});
  };
  std::string sign = c.b.op1("Equal", {combine(asign, bsign), one});
  std::string bits = combine(abits, bbits);
  bits = c.b.op1("Where", {c.b.unsqueeze(sign, {r}), c.b.op1("Sub", {one, bits}), bits});
  std::string sum = c.b.reduce("ReduceSum", c.b.op1("Mul", {bits, p}), {r}, false);
  std::string v = c.b.op1("Where", {sign, c.b.op1("Sub", {c.b.scalar(-1, DType::Int64), sum}), sum});
  return t == DType::Int64 ? v : c.b.cast(v, t);
}

void logical(Ctx& c, const TNode* n, const char* op) {
  DType t = c.out_dtype(n);
  if (dtype_is_integer(t)) return c.out(n, integer_bitwise(c, n, op));
  if (t != DType::Bool) throw UnsupportedError("bitwise ops on " + std::string(dtype_name(t)));
  c.out(n, c.b.op1(op, {c.t_as(n, 0, DType::Bool), c.t_as(n, 1, DType::Bool)}));
}
void and_(Ctx& c, const TNode* n) { logical(c, n, kAnd); }
void or_(Ctx& c, const TNode* n) { logical(c, n, kOr); }
void xor_(Ctx& c, const TNode* n) { logical(c, n, kXor); }
void not_(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  // Two's complement: ~v = -1 - v, which never overflows; uint8: 255 - v.
  if (dtype_is_integer(t)) return c.out(n, c.b.op1("Sub", {c.b.scalar(t == DType::UInt8 ? 255 : -1, t), c.t_as(n, 0, t)}));
  if (t != DType::Bool) throw UnsupportedError("bitwise_not of " + std::string(dtype_name(t)));
  c.out(n, c.b.op1("Not", {c.t_as(n, 0, DType::Bool)}));
}

// Unary ops whose ONNX twin has the same meaning; the input is cast to the output type first.
template <const char* Op>
void unary(Ctx& c, const TNode* n) {
  DType out = c.out_dtype(n), in = c.dtype(n, 0);
  // math.ceil / math.floor of a float number give an int: computed on the float, then cast.
  if (dtype_is_float(in) && !dtype_is_float(out) && out != DType::Undefined)
    return c.out(n, c.b.cast(c.b.op1(Op, {c.t(n, 0)}), out));
  c.out(n, c.b.op1(Op, {c.t_as(n, 0, out)}));
}
constexpr char kAbs[] = "Abs", kNeg[] = "Neg", kExp[] = "Exp", kLog[] = "Log", kSqrt[] = "Sqrt", kSin[] = "Sin",
               kCos[] = "Cos", kTan[] = "Tan", kAsin[] = "Asin", kAcos[] = "Acos", kAtan[] = "Atan",
               kSinh[] = "Sinh", kCosh[] = "Cosh", kAsinh[] = "Asinh", kAcosh[] = "Acosh", kAtanh[] = "Atanh",
               kTanh[] = "Tanh", kSigmoid[] = "Sigmoid", kReciprocal[] = "Reciprocal", kFloor[] = "Floor",
               kCeil[] = "Ceil", kSign[] = "Sign", kErf[] = "Erf";

// Round half to even. Before opset 11 (no Round): floor, plus one when the fraction is above 1/2 or
// is 1/2 and the floor is odd; x - floor(x) is exact, so ties are found exactly.
std::string round_even(Ctx& c, const std::string& x, DType t) {
  if (c.b.opset() >= 11) return c.b.op1("Round", {x});
  std::string fl = c.b.op1("Floor", {x});
  std::string frac = c.b.op1("Sub", {x, fl});
  std::string half = c.b.scalar(0.5, t);
  std::string parity = c.b.op1("Sub", {fl, c.b.op1("Mul", {c.b.op1("Floor", {c.b.op1("Mul", {fl, half})}), c.b.scalar(2, t)})});
  std::string tie_up = c.b.op1("And", {equal(c, frac, half, t), c.b.op1("Greater", {parity, half})});
  std::string up = c.b.op1("Or", {c.b.op1("Greater", {frac, half}), tie_up});
  return c.b.op1("Add", {fl, c.b.cast(up, t)});
}

void round(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  if (n->inputs().size() > 1 && c.i(n, 1) != 0) {
    double s = std::pow(10.0, static_cast<double>(c.i(n, 1)));
    std::string x = c.b.op1("Mul", {c.t(n, 0), c.b.scalar(s, t)});
    return c.out(n, c.b.op1("Div", {round_even(c, x, t), c.b.scalar(s, t)}));
  }
  c.out(n, round_even(c, c.t(n, 0), t));
}

void trunc(Ctx& c, const TNode* n) {
  std::string x = c.t(n, 0);
  c.out(n, c.b.op1("Mul", {c.b.op1("Sign", {x}), c.b.op1("Floor", {c.b.op1("Abs", {x})})}));
}

void rsqrt(Ctx& c, const TNode* n) {
  c.out(n, c.b.op1("Reciprocal", {c.b.op1("Sqrt", {c.t_as(n, 0, c.out_dtype(n))})}));
}

void square(Ctx& c, const TNode* n) {
  std::string x = c.t_as(n, 0, c.out_dtype(n));
  c.out(n, c.b.op1("Mul", {x, x}));
}

void log_base(Ctx& c, const TNode* n, double base) {
  DType t = c.out_dtype(n);
  c.out(n, c.b.op1("Div", {c.b.op1("Log", {c.t_as(n, 0, t)}), c.b.scalar(std::log(base), t)}));
}
void log2(Ctx& c, const TNode* n) { log_base(c, n, 2.0); }
void log10(Ctx& c, const TNode* n) { log_base(c, n, 10.0); }

void log1p(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, c.b.op1("Log", {c.b.op1("Add", {c.t_as(n, 0, t), c.b.scalar(1, t)})}));
}

void expm1(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, c.b.op1("Sub", {c.b.op1("Exp", {c.t_as(n, 0, t)}), c.b.scalar(1, t)}));
}

void isnan(Ctx& c, const TNode* n) { c.out(n, c.b.op1("IsNaN", {c.t(n, 0)})); }
void isinf(Ctx& c, const TNode* n) {
  DType t = c.dtype(n, 0);
  if (c.b.opset() >= 10 || !dtype_is_float(t)) {
    c.b.require(10, "IsInf");
    return c.out(n, c.b.op1("IsInf", {c.t(n, 0)}));
  }
  // Opset 9: only the infinities lie beyond the dtype's largest finite value.
  double big = t == DType::Double ? 1.7976931348623157e308 : t == DType::Float16 ? 65504.0 : 3.4028234663852886e38;
  c.out(n, c.b.op1("Greater", {c.b.op1("Abs", {c.t(n, 0)}), c.b.scalar(big, t)}));
}

std::optional<double> opt_scalar(Ctx& c, const TNode* n, size_t i) {
  if (c.is_none(n, i)) return std::nullopt;
  return c.f(n, i);
}

void clamp(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  bool tensor_bounds = (!c.is_none(n, 1) && !c.is_const(n, 1)) ||
                       (n->inputs().size() > 2 && !c.is_none(n, 2) && !c.is_const(n, 2));
  if (tensor_bounds || (!c.is_none(n, 1) && c.in(n, 1).c.isTensor())) {
    std::string y = c.t_as(n, 0, t);
    if (!c.is_none(n, 1)) y = c.b.op1("Max", {y, c.t_as(n, 1, t)});
    if (n->inputs().size() > 2 && !c.is_none(n, 2)) y = c.b.op1("Min", {y, c.t_as(n, 2, t)});
    return c.out(n, y);
  }
  auto lo = opt_scalar(c, n, 1);
  auto hi = n->inputs().size() > 2 ? opt_scalar(c, n, 2) : std::nullopt;
  c.out(n, c.b.clip(c.t_as(n, 0, t), lo, hi, t));
}
void clamp_min(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  if (!c.is_const(n, 1)) return c.out(n, c.b.op1("Max", {c.t_as(n, 0, t), c.t_as(n, 1, t)}));
  c.out(n, c.b.clip(c.t_as(n, 0, t), c.f(n, 1), std::nullopt, t));
}
void clamp_max(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  if (!c.is_const(n, 1)) return c.out(n, c.b.op1("Min", {c.t_as(n, 0, t), c.t_as(n, 1, t)}));
  c.out(n, c.b.clip(c.t_as(n, 0, t), std::nullopt, c.f(n, 1), t));
}

void where(Ctx& c, const TNode* n) {
  if (n->inputs().size() == 1) {  // where(cond): one index tensor per dim, as nonzero(cond).unbind(1)
    int r = c.rank(n, 0);
    std::string nz = c.b.op1("NonZero", {c.t(n, 0)});
    std::vector<TV> items;
    for (int d = 0; d < r; ++d)
      items.push_back(TV::tensor(c.b.op1("Gather", {nz, c.b.i64(d)}, {Attribute::make_int("axis", 0)}), DType::Int64));
    return c.set(n->output(), TV::list(items));
  }
  DType t = c.out_dtype(n);
  c.out(n, c.b.op1("Where", {c.t_as(n, 0, DType::Bool), c.t_as(n, 1, t), c.t_as(n, 2, t)}));
}

void lerp(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string a = c.t_as(n, 0, t), b = c.t_as(n, 1, t), w = c.t_as(n, 2, t);
  c.out(n, c.b.op1("Add", {a, c.b.op1("Mul", {w, c.b.op1("Sub", {b, a})})}));
}

void addcmul(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string p = c.b.op1(n->kind().toQualString() == std::string("aten::addcmul") ? "Mul" : "Div",
                          {c.t_as(n, 1, t), c.t_as(n, 2, t)});
  if (n->inputs().size() > 3 && c.f(n, 3) != 1.0) p = c.b.op1("Mul", {p, c.b.scalar(c.f(n, 3), t)});
  c.out(n, c.b.op1("Add", {c.t_as(n, 0, t), p}));
}

void atan2(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, atan2_of(c, c.t_as(n, 0, t), c.t_as(n, 1, t), t));
}

// aten::nan_to_num(x, nan, posinf, neginf): defaults are 0 and the dtype's finite extremes.
void nan_to_num(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t);
  if (!dtype_is_float(t)) return c.out(n, x);
  double big = t == DType::Double ? 1.7976931348623157e308 : t == DType::Float16 ? 65504.0 : 3.4028234663852886e38;
  double nan = c.is_none(n, 1) ? 0.0 : c.f(n, 1);
  double pos = c.is_none(n, 2) ? big : c.f(n, 2), neg = c.is_none(n, 3) ? -big : c.f(n, 3);
  std::string y = c.b.op1("Where", {c.b.op1("IsNaN", {x}), c.b.scalar(nan, t), x});
  if (c.b.opset() >= 10) {
    y = c.b.op1("Where", {c.b.op1("IsInf", {y}, {Attribute::make_int("detect_negative", 0)}), c.b.scalar(pos, t), y});
    y = c.b.op1("Where", {c.b.op1("IsInf", {y}, {Attribute::make_int("detect_positive", 0)}), c.b.scalar(neg, t), y});
  } else {
    // No IsInf: only the infinities lie beyond the dtype's largest finite value.
    y = c.b.op1("Where", {c.b.op1("Greater", {y, c.b.scalar(big, t)}), c.b.scalar(pos, t), y});
    y = c.b.op1("Where", {c.b.op1("Less", {y, c.b.scalar(-big, t)}), c.b.scalar(neg, t), y});
  }
  c.out(n, y);
}

// aten::mul on a list (a tuple made one) and a number repeats the list: `(x, y) * k`.
void mul(Ctx& c, const TNode* n) {
  if (is_list_value(n, 0) || is_list_value(n, 1)) return list_mul(c, n);
  binary<kMul>(c, n);
}

}  // namespace

void register_elementwise_ops(OpTable& t) {
  t["aten::add"] = {add};
  t["aten::sub"] = {sub};
  t["aten::rsub"] = {rsub};
  t["aten::mul"] = {mul};
  t["aten::div"] = {div};
  t["aten::true_divide"] = {div};
  t["aten::floordiv"] = {floordiv};
  t["aten::floor_divide"] = {floordiv};
  t["aten::remainder"] = {remainder};
  t["aten::fmod"] = {fmod};
  t["aten::pow"] = {pow};
  t["aten::maximum"] = {binary<kMax>};
  t["aten::minimum"] = {binary<kMin>};
  t["aten::eq"] = {eq};
  t["aten::ne"] = {ne};
  t["aten::lt"] = {lt};
  t["aten::gt"] = {gt};
  t["aten::le"] = {le};
  t["aten::ge"] = {ge};
  t["aten::__and__"] = {and_};
  t["aten::__or__"] = {or_};
  t["aten::__xor__"] = {xor_};
  t["aten::bitwise_and"] = {and_};
  t["aten::bitwise_or"] = {or_};
  t["aten::bitwise_xor"] = {xor_};
  t["aten::bitwise_not"] = {not_};
  t["aten::logical_and"] = {and_};
  t["aten::logical_or"] = {or_};
  t["aten::logical_xor"] = {xor_};
  t["aten::logical_not"] = {not_};
  t["aten::abs"] = {unary<kAbs>};
  t["aten::neg"] = {unary<kNeg>};
  t["aten::exp"] = {unary<kExp>};
  t["aten::log"] = {unary<kLog>};
  t["aten::log2"] = {log2};
  t["aten::log10"] = {log10};
  t["aten::log1p"] = {log1p};
  t["aten::expm1"] = {expm1};
  t["aten::sqrt"] = {unary<kSqrt>};
  t["aten::rsqrt"] = {rsqrt};
  t["aten::square"] = {square};
  t["aten::sin"] = {unary<kSin>};
  t["aten::cos"] = {unary<kCos>};
  t["aten::tan"] = {unary<kTan>};
  t["aten::asin"] = {unary<kAsin>};
  t["aten::acos"] = {unary<kAcos>};
  t["aten::atan"] = {unary<kAtan>};
  t["aten::atan2"] = {atan2};
  t["aten::sinh"] = {unary<kSinh>};
  t["aten::cosh"] = {unary<kCosh>};
  t["aten::asinh"] = {unary<kAsinh>};
  t["aten::acosh"] = {unary<kAcosh>};
  t["aten::atanh"] = {unary<kAtanh>};
  t["aten::tanh"] = {unary<kTanh>};
  t["aten::sigmoid"] = {unary<kSigmoid>};
  t["aten::reciprocal"] = {unary<kReciprocal>};
  t["aten::floor"] = {unary<kFloor>};
  t["aten::ceil"] = {unary<kCeil>};
  t["aten::round"] = {round};
  t["aten::trunc"] = {trunc};
  t["aten::sign"] = {unary<kSign>};
  t["aten::erf"] = {unary<kErf>};
  t["aten::isnan"] = {isnan};
  t["aten::isinf"] = {isinf};
  t["aten::clamp"] = {clamp};
  t["aten::clip"] = {clamp};
  t["aten::clamp_min"] = {clamp_min};
  t["aten::clamp_max"] = {clamp_max};
  t["aten::where"] = {where};
  t["aten::nan_to_num"] = {nan_to_num};
  t["aten::lerp"] = {lerp};
  t["aten::addcmul"] = {addcmul};
  t["aten::addcdiv"] = {addcmul};
}

}  // namespace t2o
