// Complex arithmetic on (real, imaginary) pair tensors (the layout: ops/complex.h): products,
// quotients, sums and differences with complex, real and number operands, conjugates, exp,
// torch.complex / torch.polar, and the ops that are linear in their complex operands (sum, mean,
// matmul, einsum, ...) as the real op on the parts.
#include "torch/ops/complex.h"

#include <cmath>

namespace t2o::cplx {

std::string pair_of(Ctx& c, const TNode* n, size_t i, DType& real) {
  const TV& v = c.in(n, i);
  if (!is_complex(v)) throw UnsupportedError(std::string(n->kind().toQualString()) + " expects a complex tensor");
  real = real_of(v.dtype);
  return v.name;
}

int64_t pair_axis(Ctx& c, int rank) {
  if (c.b.opset() >= 11) return -1;
  if (rank < 0) throw UnsupportedError("a complex tensor of unknown rank before opset 11");
  return rank;
}

int64_t pair_axis(Ctx& c, const TV& z) { return pair_axis(c, z.rank_known ? static_cast<int>(z.shape.size()) : -1); }

void set_complex(Ctx& c, const TNode* n, const std::string& pair, DType complex, std::vector<int64_t> shape) {
  TV r = TV::tensor(pair, complex);
  r.shape = std::move(shape);
  r.rank_known = true;
  c.set(n->output(), r);
}

std::string part_of(Ctx& c, const std::string& pair, int rank, int k) {
  return c.b.op1("Gather", {pair, c.b.i64(k)}, {Attribute::make_int("axis", pair_axis(c, rank))});
}

std::string pair_from(Ctx& c, const std::string& re, const std::string& im, int rank) {
  int64_t a = pair_axis(c, rank);
  return c.b.concat({c.b.unsqueeze(re, {a}), c.b.unsqueeze(im, {a})}, a);
}

std::string real_pair(Ctx& c, const std::string& x, int rank, DType t) {
  return pair_from(c, x, filled(c, c.b.shape_of(x), 0.0, t), rank);
}

TV constant_pair(Ctx& c, const at::Tensor& t) {
  at::Tensor z = t.resolve_conj().resolve_neg();
  TV r = TV::tensor(c.b.constant(tensor_from_torch(at::view_as_real(z).contiguous()), "weight"),
                    z.scalar_type() == at::kComplexDouble ? DType::Complex128 : DType::Complex64);
  r.shape = z.sizes().vec();
  r.rank_known = true;
  return r;
}

namespace {

// An operand of complex arithmetic as its parts: `im` empty for a real operand.
struct Parts {
  std::string re, im;
};

int out_rank(Ctx& c, const TNode* n) { return c.out_rank(n); }

// The complex element type of n's result, from its complex operands.
DType complex_type(Ctx& c, const TNode* n) {
  DType t = DType::Complex64;
  for (const TValue* v : n->inputs()) {
    const TV& x = c.get(v);
    if (x.kind == TV::Kind::Tensor && x.dtype == DType::Complex128) t = x.dtype;
  }
  return t;
}

Parts parts(Ctx& c, const TNode* n, size_t i, DType real) {
  const TV& v = c.in(n, i);
  if (is_complex(v)) {
    int r = v.rank_known ? static_cast<int>(v.shape.size()) : -1;
    std::string pair = v.name;
    if (v.dtype != complex_of(real)) pair = c.b.cast(pair, real);
    return {part_of(c, pair, r, 0), part_of(c, pair, r, 1)};
  }
  if (v.is_const() && v.c.isComplexDouble())
    return {c.b.scalar(v.c.toComplexDouble().real(), real), c.b.scalar(v.c.toComplexDouble().imag(), real)};
  return {c.tensor_as(v, real), ""};
}

// re + i im with both parts broadcast to the result's shape (a part computed from one operand
// alone may have a smaller shape).
void set_parts(Ctx& c, const TNode* n, std::string re, std::string im, DType real) {
  if (im.empty()) im = filled(c, c.b.shape_of(re), 0.0, real);
  std::vector<int64_t> shape = c.out_shape(n);
  re = c.b.op1("Expand", {re, c.b.shape_of(im)});
  im = c.b.op1("Expand", {im, c.b.shape_of(re)});
  set_complex(c, n, pair_from(c, re, im, out_rank(c, n)), complex_of(real), shape);
}

std::string sum_of(Ctx& c, const std::string& a, const std::string& b, bool minus) {
  if (b.empty()) return a;
  if (a.empty()) return minus ? c.b.op1("Neg", {b}) : b;
  return c.b.op1(minus ? "Sub" : "Add", {a, b});
}

std::string product(Ctx& c, const std::string& a, const std::string& b) {
  return a.empty() || b.empty() ? std::string() : c.b.op1("Mul", {a, b});
}

void mul(Ctx& c, const TNode* n) {
  DType t = real_of(complex_type(c, n));
  Parts a = parts(c, n, 0, t), b = parts(c, n, 1, t);
  set_parts(c, n, sum_of(c, product(c, a.re, b.re), product(c, a.im, b.im), true),
            sum_of(c, product(c, a.re, b.im), product(c, a.im, b.re), false), t);
}

// a / b = a conj(b) / |b|^2
void div(Ctx& c, const TNode* n) {
  if (n->inputs().size() > 2 && !c.is_none(n, 2)) throw UnsupportedError("aten::div of complex tensors with a rounding mode");
  DType t = real_of(complex_type(c, n));
  Parts a = parts(c, n, 0, t), b = parts(c, n, 1, t);
  if (b.im.empty()) return set_parts(c, n, c.b.op1("Div", {a.re, b.re}), a.im.empty() ? "" : c.b.op1("Div", {a.im, b.re}), t);
  std::string den = c.b.op1("Add", {c.b.op1("Mul", {b.re, b.re}), c.b.op1("Mul", {b.im, b.im})});
  std::string re = sum_of(c, product(c, a.re, b.re), product(c, a.im, b.im), false);
  std::string im = sum_of(c, product(c, a.im, b.re), product(c, a.re, b.im), true);
  set_parts(c, n, c.b.op1("Div", {re, den}), c.b.op1("Div", {im, den}), t);
}

// add / sub (self, other, alpha): alpha scales `other`.
void add_sub(Ctx& c, const TNode* n, bool minus) {
  DType t = real_of(complex_type(c, n));
  Parts a = parts(c, n, 0, t), b = parts(c, n, 1, t);
  if (n->inputs().size() > 2 && !c.is_none(n, 2)) {
    if (!c.is_const(n, 2) || c.cval(n, 2).isComplexDouble()) throw UnsupportedError("a complex or computed alpha");
    double alpha = c.f(n, 2);
    if (alpha != 1.0) {
      b.re = c.b.op1("Mul", {b.re, c.b.scalar(alpha, t)});
      if (!b.im.empty()) b.im = c.b.op1("Mul", {b.im, c.b.scalar(alpha, t)});
    }
  }
  set_parts(c, n, sum_of(c, a.re, b.re, minus), sum_of(c, a.im, b.im, minus), t);
}
void add(Ctx& c, const TNode* n) { add_sub(c, n, false); }
void sub(Ctx& c, const TNode* n) { add_sub(c, n, true); }

// rsub(self, other, alpha) = other - alpha * self
void rsub(Ctx& c, const TNode* n) {
  DType t = real_of(complex_type(c, n));
  Parts a = parts(c, n, 0, t), b = parts(c, n, 1, t);
  if (n->inputs().size() > 2 && !c.is_none(n, 2) && (!c.is_const(n, 2) || c.f(n, 2) != 1.0))
    throw UnsupportedError("aten::rsub of a complex tensor with alpha");
  set_parts(c, n, sum_of(c, b.re, a.re, true), sum_of(c, b.im, a.im, true), t);
}

void neg(Ctx& c, const TNode* n) {
  DType t;
  std::string z = pair_of(c, n, 0, t);
  set_complex(c, n, c.b.op1("Neg", {z}), c.in(n, 0).dtype, c.out_shape(n));
}

void conj(Ctx& c, const TNode* n) {
  DType t;
  std::string z = pair_of(c, n, 0, t);
  set_complex(c, n, c.b.op1("Mul", {z, c.b.vec({1.0, -1.0}, t)}), c.in(n, 0).dtype, c.out_shape(n));
}

// copy_(self, src) (in place: the write reaches self's views through Ctx::write_through): src,
// complex or real, broadcast to self's shape in self's precision.
void copy(Ctx& c, const TNode* n) {
  const TV& self = c.in(n, 0);
  if (!is_complex(self)) throw UnsupportedError("aten::copy_ of a complex tensor into a real one");
  DType t = real_of(self.dtype);
  Parts s = parts(c, n, 1, t);
  int r = self.rank_known ? static_cast<int>(self.shape.size()) : -1;
  std::string re = c.b.op1("Expand", {s.re, c.b.shape_of(part_of(c, self.name, r, 0))});
  std::string im = s.im.empty() ? filled(c, c.b.shape_of(re), 0.0, t)
                                : c.b.op1("Expand", {s.im, c.b.shape_of(re)});
  set_complex(c, n, pair_from(c, re, im, r), self.dtype, self.shape);
}

void is_complex_op(Ctx& c, const TNode* n) { c.set(n->output(), TV::constant(is_complex(c.dtype(n, 0)))); }

// numel of a complex tensor: its logical shape's product (the pair tensor holds twice as many).
void numel(Ctx& c, const TNode* n) {
  const TV& z = c.in(n, 0);
  if (!z.rank_known) throw UnsupportedError("aten::numel of a complex tensor of unknown rank");
  int64_t p = 1;
  for (int64_t s : z.shape) p = s < 0 || p < 0 ? -1 : p * s;
  if (p >= 0) return c.set(n->output(), TV::constant(p));
  c.out(n, c.b.op1("Div", {c.b.reduce("ReduceProd", c.b.shape_of(z.name), {}, false), c.b.i64(2)}));
}

void same(Ctx& c, const TNode* n) { c.set(n->output(), c.in(n, 0)); }

// exp(a + ib) = e^a (cos b + i sin b)
void exp(Ctx& c, const TNode* n) {
  DType t = real_of(complex_type(c, n));
  Parts z = parts(c, n, 0, t);
  std::string m = c.b.op1("Exp", {z.re});
  set_parts(c, n, c.b.op1("Mul", {m, c.b.op1("Cos", {z.im})}), c.b.op1("Mul", {m, c.b.op1("Sin", {z.im})}), t);
}

void zeros_like(Ctx& c, const TNode* n) {
  DType t;
  std::string z = pair_of(c, n, 0, t);
  set_complex(c, n, filled(c, c.b.shape_of(z), 0.0, t), c.in(n, 0).dtype, c.out_shape(n));
}

// angle(z) = atan2(im, re); log(z) = log|z| + i angle(z)
void angle(Ctx& c, const TNode* n) {
  DType t = real_of(complex_type(c, n));
  Parts z = parts(c, n, 0, t);
  c.out(n, atan2_of(c, z.im, z.re, t));
}

void log(Ctx& c, const TNode* n) {
  DType t = real_of(complex_type(c, n));
  Parts z = parts(c, n, 0, t);
  std::string mag2 = c.b.op1("Add", {c.b.op1("Mul", {z.re, z.re}), c.b.op1("Mul", {z.im, z.im})});
  set_parts(c, n, c.b.op1("Mul", {c.b.op1("Log", {mag2}), c.b.scalar(0.5, t)}), atan2_of(c, z.im, z.re, t), t);
}

// to / type_as of a complex tensor: another precision, or (a real type) its real part as torch
// keeps it, discarding the imaginary one.
void to(Ctx& c, const TNode* n) {
  const TV& z = c.in(n, 0);
  DType want = c.out_dtype(n);
  if (!is_complex(z)) {  // type_as(real tensor, complex tensor)
    if (!is_complex(want)) throw UnsupportedError(std::string(n->kind().toQualString()) + " of a real tensor to a real type given a complex tensor");
    std::string x = c.t_as(n, 0, real_of(want));
    return set_complex(c, n, real_pair(c, x, c.out_rank(n), real_of(want)), want,
                       c.out_shape(n));
  }
  if (is_complex(want)) {
    std::string pair = want == z.dtype ? z.name : c.b.cast(z.name, real_of(want));
    return set_complex(c, n, pair, want, c.out_shape(n));
  }
  std::string re = part_of(c, z.name, static_cast<int>(z.shape.size()), 0);
  c.out(n, c.b.cast(re, want));
}

// to(real tensor, complex dtype): the value with a zero imaginary part.
void to_complex(Ctx& c, const TNode* n, const Converter& real_fn) {
  DType ct = c.out_dtype(n);
  if (!is_complex(ct)) return real_fn(c, n);
  DType t = real_of(ct);
  std::string x = c.t_as(n, 0, t);
  set_complex(c, n, real_pair(c, x, c.out_rank(n), t), ct, c.out_shape(n));
}

// torch.complex(real, imag) and torch.polar(abs, angle): real operands, a complex result.
void complex_from(Ctx& c, const TNode* n) {
  DType t = promote_dtypes(c.dtype(n, 0), c.dtype(n, 1));
  if (t != DType::Float && t != DType::Double) throw UnsupportedError("aten::complex of non-float parts");
  set_parts(c, n, c.t_as(n, 0, t), c.t_as(n, 1, t), t);
}

void polar(Ctx& c, const TNode* n) {
  DType t = promote_dtypes(c.dtype(n, 0), c.dtype(n, 1));
  if (t != DType::Float && t != DType::Double) throw UnsupportedError("aten::polar of non-float parts");
  std::string r = c.t_as(n, 0, t), a = c.t_as(n, 1, t);
  set_parts(c, n, c.b.op1("Mul", {r, c.b.op1("Cos", {a})}), c.b.op1("Mul", {r, c.b.op1("Sin", {a})}), t);
}

// Zero-filled creation ops asked for a complex dtype: zeros of the pair shape.
void complex_zeros(Ctx& c, const TNode* n, const Converter& real_fn) {
  DType ct = c.out_dtype(n);
  if (!is_complex(ct)) return real_fn(c, n);
  std::string size = c.ints_tensor(c.in(n, 0));
  std::string z = filled(c, c.b.concat({size, c.b.i64s({2})}, 0), 0.0, real_of(ct));
  set_complex(c, n, z, ct, c.out_shape(n));
}

// Ops linear in each complex operand, run as the real op on the operands' parts: for one complex
// operand z, f(z) = f(re z) + i f(im z); for two (a product), f(a, b) = f(ar, br) - f(ai, bi) +
// i (f(ar, bi) + f(ai, br)). Operands are the tensor inputs and the tensors of a list input.
class PartRunner {
 public:
  PartRunner(Ctx& c, const TNode* n) : c_(c), n_(n) {
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const TV& v = c.in(n, i);
      if (is_complex(v)) slots_.push_back({i, -1, v});
      if (v.kind == TV::Kind::List)
        for (size_t k = 0; k < v.items.size(); ++k)
          if (is_complex(v.items[k])) slots_.push_back({i, static_cast<int>(k), v.items[k]});
    }
    if (slots_.empty() || slots_.size() > 2)
      throw UnsupportedError(std::string(n->kind().toQualString()) + " of more than two complex tensors");
  }

  // The real op's result with complex operand j replaced by its part parts[j] (0 re, 1 im).
  std::string run(const std::vector<int>& which) {
    std::vector<std::pair<const TValue*, TV>> saved;
    for (size_t j = 0; j < slots_.size(); ++j) {
      const Slot& s = slots_[j];
      const TValue* v = n_->input(s.input);
      TV part = TV::tensor(part_of(c_, s.z.name, static_cast<int>(s.z.shape.size()), which[j]), real_of(s.z.dtype));
      part.shape = s.z.shape;
      part.rank_known = s.z.rank_known;
      TV now = c_.get(v);
      saved.emplace_back(v, now);
      if (s.item < 0) {
        now = part;
      } else {
        now.items[static_cast<size_t>(s.item)] = part;
      }
      c_.set(v, now);
    }
    std::string out;
    c_.complex_pairs = true;
    try {
      op_table().at(n_->kind().toQualString()).fn(c_, n_);
    } catch (...) {
      c_.complex_pairs = false;
      for (auto it = saved.rbegin(); it != saved.rend(); ++it) c_.set(it->first, it->second);
      throw;
    }
    c_.complex_pairs = false;
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) c_.set(it->first, it->second);
    return c_.get(n_->output()).name;
  }

  void convert() {
    DType t = real_of(slots_[0].z.dtype);
    for (const Slot& s : slots_) {
      if (!s.z.rank_known) throw UnsupportedError(std::string(n_->kind().toQualString()) + " of a complex tensor of unknown rank");
      if (s.z.dtype != slots_[0].z.dtype) throw UnsupportedError(std::string(n_->kind().toQualString()) + " of complex tensors of two precisions");
    }
    std::string re, im;
    if (slots_.size() == 1) {
      re = run({0});
      im = run({1});
    } else {
      re = c_.b.op1("Sub", {run({0, 0}), run({1, 1})});
      im = c_.b.op1("Add", {run({0, 1}), run({1, 0})});
    }
    std::vector<int64_t> shape = c_.out_shape(n_);
    set_complex(c_, n_, pair_from(c_, re, im, out_rank(c_, n_)), complex_of(t), shape);
  }

 private:
  struct Slot {
    size_t input;
    int item;  // index in a list input, -1 for a tensor input
    TV z;
  };
  Ctx& c_;
  const TNode* n_;
  std::vector<Slot> slots_;
};

void by_parts(Ctx& c, const TNode* n) { PartRunner(c, n).convert(); }

}  // namespace

void add_complex_arith_ops(OpTable& t, bool complex_table) {
  if (!complex_table) {
    t["aten::complex"] = {complex_from};
    t["aten::polar"] = {polar};
    t["aten::is_complex"] = {is_complex_op};
    for (const char* k : {"aten::zeros", "aten::empty"}) {
      auto it = t.find(k);
      if (it == t.end()) continue;
      Converter real_fn = it->second.fn;
      it->second.fn = [real_fn](Ctx& c, const TNode* n) { complex_zeros(c, n, real_fn); };
    }
    for (const char* k : {"aten::to", "aten::type_as"}) {
      auto it = t.find(k);
      if (it == t.end()) continue;
      Converter real_fn = it->second.fn;
      it->second.fn = [real_fn](Ctx& c, const TNode* n) { to_complex(c, n, real_fn); };
    }
    // Of a real tensor: the tensor itself.
    for (const char* k : {"aten::real", "aten::conj", "aten::_conj", "aten::resolve_conj", "aten::resolve_neg",
                          "aten::conj_physical"})
      if (!t.count(k)) t[k] = {same};
    return;
  }
  t["aten::mul"] = {mul};
  t["aten::div"] = {div};
  t["aten::add"] = {add};
  t["aten::sub"] = {sub};
  t["aten::rsub"] = {rsub};
  t["aten::neg"] = {neg};
  t["aten::exp"] = {exp};
  t["aten::conj"] = {conj};
  t["aten::_conj"] = {conj};
  t["aten::conj_physical"] = {conj};
  t["aten::resolve_conj"] = {same};
  t["aten::resolve_neg"] = {same};
  t["aten::zeros_like"] = {zeros_like};
  t["aten::angle"] = {angle};
  t["aten::numel"] = {numel};
  t["aten::log"] = {log};
  t["aten::to"] = {to};
  t["aten::type_as"] = {to};
  t["aten::copy"] = {copy};
  for (const char* k : {"aten::sum", "aten::mean", "aten::cumsum", "aten::matmul", "aten::mm", "aten::bmm",
                        "aten::mv", "aten::einsum", "aten::linear", "aten::tensordot", "aten::repeat",
                        "aten::expand", "aten::expand_as", "aten::tile", "aten::diagonal", "aten::trace", "aten::tril",
                        "aten::triu", "aten::kron", "aten::outer", "aten::dot"})
    if (op_table().count(k)) t[k] = {by_parts};
}

}  // namespace t2o::cplx
