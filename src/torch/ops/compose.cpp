#include "torch/ops/compose.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace t2o {

std::string arange_of(Ctx& c, const std::string& len) {
  if (c.b.opset() >= 11) {
    std::string l = c.b.reshape(len, {});
    return c.b.op1("Range", {c.b.i64(0), l, c.b.i64(1)});
  }
  Tensor on(DType::Bool, {1});
  on.data<bool>()[0] = true;
  std::string ones = c.b.op1("ConstantOfShape", {c.b.reshape(len, {1})}, {Attribute::make_tensor("value", on)});
  return c.b.reshape(c.b.op1("NonZero", {ones}), {-1});
}

std::string filled(Ctx& c, const std::string& shape, double value, DType t) {
  Tensor v(t, {1});
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      v.data<T>()[0] = T(static_cast<float>(value));
    else
      v.data<T>()[0] = static_cast<T>(value);
  });
  return c.b.op1("ConstantOfShape", {shape}, {Attribute::make_tensor("value", v)});
}

std::string positions(Ctx& c, int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int64_t>(i);
  return c.b.i64s(p);
}

std::string pad_end(Ctx& c, const std::string& x, int r, const std::string& pads_end, double fill, DType t,
                    const std::vector<int>& dims) {
  if (c.b.opset() >= 11) {
    std::string pads = c.b.concat({c.b.i64s(std::vector<int64_t>(static_cast<size_t>(r), 0)), pads_end}, 0);
    return c.b.op1("Pad", {x, pads, c.b.scalar(fill, t)}, {Attribute::make_string("mode", "constant")});
  }
  std::string y = x;
  for (int d : dims) {
    std::string s = c.b.shape_of(y);
    std::vector<std::string> parts;
    if (d > 0) parts.push_back(c.b.slice(s, {0}, {d}, {0}));
    parts.push_back(c.b.slice(pads_end, {d}, {d + 1}, {0}));
    if (d + 1 < r) parts.push_back(c.b.slice(s, {d + 1}, {r}, {0}));
    y = c.b.concat({y, filled(c, c.b.concat(parts, 0), fill, t)}, d);
  }
  return y;
}

std::string band_mask(Ctx& c, const std::string& rows, const std::string& cols, const std::string& k, bool upper) {
  std::string d = c.b.op1("Sub", {c.b.unsqueeze(arange_of(c, cols), {0}), c.b.unsqueeze(arange_of(c, rows), {1})});
  return c.b.op1("Not", {c.b.op1(upper ? "Less" : "Greater", {d, k})});
}

std::optional<int64_t> static_size(const std::vector<int64_t>& shape, int64_t axis) {
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()) || shape[static_cast<size_t>(axis)] < 0) return std::nullopt;
  return shape[static_cast<size_t>(axis)];
}

std::string dim_size(Ctx& c, const std::string& x, const std::vector<int64_t>& shape, int64_t axis) {
  if (auto s = static_size(shape, axis)) return c.b.i64(*s);
  return c.b.dim(x, axis);
}

std::string equal_to(Ctx& c, const std::string& a, const std::string& b, DType t) {
  if (c.b.opset() >= 11 || !dtype_is_float(t)) return c.b.op1("Equal", {a, b});
  std::string ordered = c.b.op1("Or", {c.b.op1("Less", {a, b}), c.b.op1("Greater", {a, b})});
  std::string nan = c.b.op1("Or", {c.b.op1("IsNaN", {a}), c.b.op1("IsNaN", {b})});
  return c.b.op1("Not", {c.b.op1("Or", {ordered, nan})});
}

std::string atan2_of(Ctx& c, const std::string& y, const std::string& x, DType t) {
  // atan(y/x) corrected by pi for x < 0, on the side of y's sign.
  std::string base = c.b.op1("Atan", {c.b.op1("Div", {y, x})});
  // atan2(0, 0) is 0 (the quotient is NaN); atan2(0, x < 0) is pi below.
  std::string zero = c.b.scalar(0, t);
  base = c.b.op1("Where", {c.b.op1("And", {equal_to(c, x, zero, t), equal_to(c, y, zero, t)}), zero, base});
  std::string neg_x = c.b.op1("Less", {x, zero});
  std::string pi = c.b.op1("Where", {c.b.op1("Less", {y, zero}), c.b.scalar(-M_PI, t), c.b.scalar(M_PI, t)});
  return c.b.op1("Add", {base, c.b.op1("Where", {neg_x, pi, zero})});
}

std::string reduce_loss(Ctx& c, const std::string& loss, int64_t reduction) {
  if (reduction == 0) return loss;
  return c.b.reduce(reduction == 1 ? "ReduceMean" : "ReduceSum", loss, {}, false);
}

std::string along_axis(Ctx& c, const std::string& v, int64_t axis, int rank) {
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(axis)] = -1;
  return c.b.reshape(v, shape);
}

std::string int_min(Ctx& c, const std::string& a, const std::string& b) {
  return c.b.op1("Where", {c.b.op1("Less", {a, b}), a, b});
}

std::string int_max(Ctx& c, const std::string& a, const std::string& b) {
  return c.b.op1("Where", {c.b.op1("Less", {a, b}), b, a});
}

bool all_static(const std::vector<int64_t>& shape) {
  for (int64_t d : shape)
    if (d < 0) return false;
  return true;
}

std::string shape_part(Ctx& c, const std::string& shape, int64_t from, int64_t to) {
  if (from >= to) return {};
  return c.b.slice(shape, {from}, {to}, {0});
}

std::string concat_parts(Ctx& c, const std::vector<std::string>& parts) {
  std::vector<std::string> p;
  for (const auto& s : parts)
    if (!s.empty()) p.push_back(s);
  if (p.empty()) return c.b.i64s({});
  return c.b.concat(p, 0);
}

void set_tensor_list(Ctx& c, const TNode* n, const std::vector<std::string>& parts, DType t) {
  std::vector<TV> items;
  for (const auto& p : parts) items.push_back(TV::tensor(p, t));
  if (n->outputs().size() == 1 && n->output()->type()->kind() == c10::TypeKind::ListType)
    return c.set(n->output(), TV::list(items));
  for (size_t k = 0; k < n->outputs().size(); ++k) c.set(n->output(k), items.at(k));
}

std::string scaled_sum(Ctx& c, const TNode* n, std::string p, DType t) {
  const TV* beta = c.arg(n, "beta");
  const TV* alpha = c.arg(n, "alpha");
  auto factor = [&](const TV* v, std::string& x) {
    if (!v || v->is_none()) return true;  // 1
    if (v->is_const()) {
      double k = v->c.toScalar().toDouble();
      if (!dtype_is_float(t)) k = std::trunc(k);
      if (k == 0.0) return false;
      if (k != 1.0) x = c.b.op1("Mul", {x, c.b.scalar(k, t)});
      return true;
    }
    x = c.b.op1("Mul", {x, c.tensor_as(*v, t)});
    return true;
  };
  if (!factor(alpha, p)) p = c.b.op1("Mul", {p, c.b.scalar(0.0, t)});
  std::string s = c.t_as(n, 0, t);
  if (!factor(beta, s)) return p;
  return c.b.op1("Add", {s, p});
}

}  // namespace t2o
