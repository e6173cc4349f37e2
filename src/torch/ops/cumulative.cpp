// Cumulative ops without an ONNX twin: cumprod, logcumsumexp, cummax, cummin (and diff). Each output element
// reduces its prefix, selected by a lower-triangular mask over (position, earlier position); that is
// exact (no log/exp detour) and works for any length, at the cost of a square intermediate.
#include <limits>

#include "torch/ops/compose.h"

namespace t2o {
namespace {

struct Prefix {
  std::string x;     // the input with a new axis at `axis`: [.., 1, L, ..]
  std::string mask;  // [L, L, 1, ..] true where the second index is at most the first
  std::string positions;  // 0..L-1 along axis + 1 of the expanded rank
  int64_t axis;
};

Prefix prefix(Ctx& c, const TNode* n, const std::string& x) {
  int r = std::max(c.rank(n, 0), 1);
  Prefix p;
  p.axis = norm_axis(c.i(n, "dim", 0), r);
  auto shape = c.shape(n, 0);
  std::string pos = arange_of(c, dim_size(c, x, shape, p.axis));
  std::string mask = c.b.op1("Not", {c.b.op1("Greater", {c.b.unsqueeze(pos, {0}), c.b.unsqueeze(pos, {1})})});
  std::vector<int64_t> tail;
  for (int64_t a = p.axis + 1; a < r; ++a) tail.push_back(a - p.axis + 1);
  p.mask = tail.empty() ? mask : c.b.unsqueeze(mask, tail);
  p.x = c.b.unsqueeze(x, {p.axis});
  p.positions = along_axis(c, pos, p.axis + 1, r + 1);
  return p;
}

std::string input(Ctx& c, const TNode* n, DType t) {
  std::string x = c.t_as(n, 0, t);
  return c.rank(n, 0) == 0 ? c.b.reshape(x, {1}) : x;
}

std::string output(Ctx& c, const TNode* n, const std::string& y) { return c.rank(n, 0) == 0 ? c.b.reshape(y, {}) : y; }

// The prefix reduction of x, with `fill` outside the prefix.
std::string scan(Ctx& c, const Prefix& p, const std::string& op, double fill, DType t) {
  std::string masked = c.b.op1("Where", {p.mask, p.x, c.b.scalar(fill, t)});
  return c.b.reduce(op, masked, {p.axis + 1}, false);
}

// aten::cumprod(x, dim, *, dtype)
void cumprod(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = input(c, n, t);
  c.out(n, output(c, n, scan(c, prefix(c, n, x), "ReduceProd", 1, t)));
}

void logcumsumexp(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = input(c, n, t);
  c.out(n, output(c, n, scan(c, prefix(c, n, x), "ReduceLogSumExp", -std::numeric_limits<double>::infinity(), t)));
}

// The identity of max (most = false) or of min (most = true) in type t.
double extreme(DType t, bool most) {
  if (dtype_is_float(t)) return most ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  switch (t) {
    case DType::UInt8: return most ? 255 : 0;
    case DType::Int8: return most ? 127 : -128;
    case DType::Int16: return most ? 32767 : -32768;
    case DType::Int32: return most ? 2147483647.0 : -2147483648.0;
    case DType::Bool: return most ? 1 : 0;
    default: return most ? 9.2233720368547748e18 : -9223372036854775808.0;  // the largest double below 2^63
  }
}

// aten::cummax / cummin(x, dim) -> (values, indices); the index is the last position holding the
// running extreme, as torch's scan (x >= best) keeps it.
void cum_extreme(Ctx& c, const TNode* n, bool is_max) {
  DType t = c.out_dtype(n);
  std::string x = input(c, n, t);
  Prefix p = prefix(c, n, x);
  std::string v = scan(c, p, is_max ? "ReduceMax" : "ReduceMin", extreme(t, !is_max), t);
  std::string same = c.b.op1("And", {p.mask, equal_to(c, p.x, c.b.unsqueeze(v, {p.axis + 1}), t)});
  std::string at = c.b.op1("Where", {same, p.positions, c.b.i64(-1)});
  c.out(n, 0, output(c, n, v));
  c.out(n, 1, output(c, n, c.b.reduce("ReduceMax", at, {p.axis + 1}, false)));
}
void cummax(Ctx& c, const TNode* n) { cum_extreme(c, n, true); }
void cummin(Ctx& c, const TNode* n) { cum_extreme(c, n, false); }

// aten::diff(x, n, dim, prepend, append): prepend and append joined along dim, then n times the
// difference of neighbours, x[1:] - x[:-1] (exclusive or for bools, as torch computes it). The
// slices have constant bounds, so any length works.
void diff(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  int64_t axis = norm_axis(c.i(n, "dim", -1), r);
  int64_t times = c.i(n, "n", 1);
  DType t = c.out_dtype(n);
  std::vector<std::string> parts;
  for (const char* name : {"prepend", "self", "append"}) {
    const TV* v = name == std::string("self") ? &c.in(n, 0) : c.arg(n, name);
    if (v && !v->is_none()) parts.push_back(c.tensor_as(*v, t));
  }
  std::string x = parts.size() == 1 ? parts[0] : c.b.concat(parts, axis);
  const int64_t end = std::numeric_limits<int64_t>::max();
  for (int64_t k = 0; k < times; ++k) {
    std::string later = c.b.slice(x, {1}, {end}, {axis}), earlier = c.b.slice(x, {0}, {-1}, {axis});
    x = c.b.op1(t == DType::Bool ? "Xor" : "Sub", {later, earlier});
  }
  c.out(n, x);
}

}  // namespace

void register_cumulative_ops(OpTable& t) {
  t["aten::cumprod"] = {cumprod};
  t["aten::logcumsumexp"] = {logcumsumexp};
  t["aten::cummax"] = {cummax};
  t["aten::cummin"] = {cummin};
  t["aten::diff"] = {diff};
}

}  // namespace t2o
