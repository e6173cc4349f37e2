// Generated sequences: linspace, logspace and the signal windows (hann, hamming, blackman, bartlett).
// Constant arguments give torch's own values as a constant; computed ones are composed the way
// torch computes them.
#include <cmath>

#include "torch/ops/compose.h"

namespace t2o {
namespace {

bool all_const(Ctx& c, const TNode* n, size_t count) {
  for (size_t i = 0; i < count && i < n->inputs().size(); ++i)
    if (!c.is_const(n, i)) return false;
  return true;
}

at::TensorOptions options(Ctx& c, const TNode* n) {
  return at::TensorOptions().dtype(scalar_type_from_dtype(c.out_dtype(n)));
}

// start + i * step for the first half, end - (steps - 1 - i) * step for the rest, as torch's kernel
// does (so the last value is exactly `end`); one step gives `start`.
std::string linspace_of(Ctx& c, const TNode* n, DType t) {
  std::string start = c.t_as(n, 0, t), end = c.t_as(n, 1, t);
  std::string steps = c.int_tensor(c.in(n, 2));
  std::string i = arange_of(c, steps);
  std::string last = c.b.op1("Sub", {steps, c.b.i64(1)});
  std::string span = c.b.op1("Sub", {end, start});
  std::string step = c.b.op1("Div", {span, c.b.cast(int_max(c, last, c.b.i64(1)), t)});
  std::string fi = c.b.cast(i, t);
  std::string lo = c.b.op1("Add", {start, c.b.op1("Mul", {step, fi})});
  std::string hi = c.b.op1("Sub", {end, c.b.op1("Mul", {step, c.b.cast(c.b.op1("Sub", {last, i}), t)})});
  std::string half = int_max(c, c.b.op1("Div", {steps, c.b.i64(2)}), c.b.i64(1));
  return c.b.op1("Where", {c.b.op1("Less", {i, half}), lo, hi});
}

void linspace(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  if (all_const(c, n, 3)) {
    at::Tensor r = at::linspace(c.cval(n, 0).toScalar(), c.cval(n, 1).toScalar(), c.i(n, 2), options(c, n));
    return c.out(n, c.b.constant(tensor_from_torch(r), "linspace"));
  }
  if (!dtype_is_float(t)) throw UnsupportedError("aten::linspace of integers with computed bounds");
  c.out(n, linspace_of(c, n, t));
}

void logspace(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  double base = c.f(n, "base", 10.0);
  if (all_const(c, n, 3)) {
    at::Tensor r = at::logspace(c.cval(n, 0).toScalar(), c.cval(n, 1).toScalar(), c.i(n, 2), base, options(c, n));
    return c.out(n, c.b.constant(tensor_from_torch(r), "logspace"));
  }
  if (!dtype_is_float(t)) throw UnsupportedError("aten::logspace of integers with computed bounds");
  c.out(n, c.b.op1("Pow", {c.b.scalar(base, t), linspace_of(c, n, t)}));
}

enum class Window { Hann, Hamming, Blackman, Bartlett };

// x = 2 pi n / (N - 1) (N for periodic windows) for n < N; length 1 gives [1].
void window(Ctx& c, const TNode* n, Window kind) {
  DType t = c.out_dtype(n);
  bool periodic = c.flag(n, "periodic", true);
  double alpha = c.f(n, "alpha", 0.54), beta = c.f(n, "beta", 0.46);
  if (c.is_const(n, 0)) {
    int64_t len = c.i(n, 0);
    auto o = options(c, n);
    at::Tensor r = kind == Window::Hann       ? at::hann_window(len, periodic, o)
                   : kind == Window::Hamming  ? at::hamming_window(len, periodic, alpha, beta, o)
                   : kind == Window::Blackman ? at::blackman_window(len, periodic, o)
                                              : at::bartlett_window(len, periodic, o);
    return c.out(n, c.b.constant(tensor_from_torch(r), "window"));
  }
  std::string len = c.int_tensor(c.in(n, 0));
  std::string pos = c.b.cast(arange_of(c, len), t);
  std::string denom = c.b.cast(periodic ? len : c.b.op1("Sub", {len, c.b.i64(1)}), t);
  std::string x = c.b.op1("Div", {c.b.op1("Mul", {pos, c.b.scalar(2 * M_PI, t)}), denom});
  auto cosine = [&](double k) { return c.b.op1("Cos", {c.b.op1("Mul", {x, c.b.scalar(k, t)})}); };
  std::string w;
  switch (kind) {
    case Window::Hann: alpha = beta = 0.5; [[fallthrough]];
    case Window::Hamming: w = c.b.op1("Sub", {c.b.scalar(alpha, t), c.b.op1("Mul", {cosine(1), c.b.scalar(beta, t)})}); break;
    case Window::Blackman:
      w = c.b.op1("Add", {c.b.op1("Sub", {c.b.scalar(0.42, t), c.b.op1("Mul", {cosine(1), c.b.scalar(0.5, t)})}),
                          c.b.op1("Mul", {cosine(2), c.b.scalar(0.08, t)})});
      break;
    case Window::Bartlett:  // 1 - |2n / (N - 1) - 1| = 1 - |x / pi - 1|
      w = c.b.op1("Sub", {c.b.scalar(1, t), c.b.op1("Abs", {c.b.op1("Sub", {c.b.op1("Div", {x, c.b.scalar(M_PI, t)}),
                                                                             c.b.scalar(1, t)})})});
      break;
  }
  std::string single = c.b.op1("Equal", {len, c.b.i64(1)});
  c.out(n, c.b.op1("Where", {single, c.b.scalar(1, t), w}));
}
void hann(Ctx& c, const TNode* n) { window(c, n, Window::Hann); }
void hamming(Ctx& c, const TNode* n) { window(c, n, Window::Hamming); }
void blackman(Ctx& c, const TNode* n) { window(c, n, Window::Blackman); }
void bartlett(Ctx& c, const TNode* n) { window(c, n, Window::Bartlett); }

}  // namespace

void register_range_ops(OpTable& t) {
  t["aten::linspace"] = {linspace};
  t["aten::logspace"] = {logspace};
  t["aten::hann_window"] = {hann};
  t["aten::hamming_window"] = {hamming};
  t["aten::blackman_window"] = {blackman};
  t["aten::bartlett_window"] = {bartlett};
}

}  // namespace t2o
