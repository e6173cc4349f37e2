// Linear algebra beyond plain products: tensordot/inner/kron/multi_dot, addmv/addr, cross products,
// determinants, diagonals and traces, vector and matrix norms, distances (cdist, pdist, pairwise, cosine).
#include <climits>
#include <cmath>

#include "torch/ops/compose.h"

namespace t2o {
namespace {

std::vector<int64_t> shape_of(const TV& v) {
  return v.is_const() && v.c.isTensor() ? v.c.toTensor().sizes().vec() : v.shape;
}

// Product of the listed dims of x (1-element 1-D int64): a constant when they are known.
std::string dims_product(Ctx& c, const std::string& x, const std::vector<int64_t>& shape, const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p = shape[static_cast<size_t>(d)] < 0 || p < 0 ? -1 : p * shape[static_cast<size_t>(d)];
  if (p >= 0) return c.b.i64s({p});
  std::vector<std::string> parts;
  for (int64_t d : dims) parts.push_back(c.b.unsqueeze(c.b.dim(x, d), {0}));
  return c.b.reduce("ReduceProd", c.b.concat(parts, 0), {0}, true);
}

// Sum over dims_a of a against dims_b of b: both permuted and flattened to matrices, one MatMul,
// then reshaped to a's free dims followed by b's.
std::string contract(Ctx& c, const TV& av, const TV& bv, std::vector<int64_t> da, std::vector<int64_t> db, DType t) {
  auto sa = shape_of(av), sb = shape_of(bv);
  int ra = static_cast<int>(sa.size()), rb = static_cast<int>(sb.size());
  if (da.size() != db.size()) throw Error("tensordot: the two dimension lists differ in length");
  for (auto& d : da) d = norm_axis(d, ra);
  for (auto& d : db) d = norm_axis(d, rb);
  std::vector<int64_t> fa, fb;
  for (int64_t i = 0; i < ra; ++i)
    if (!std::count(da.begin(), da.end(), i)) fa.push_back(i);
  for (int64_t i = 0; i < rb; ++i)
    if (!std::count(db.begin(), db.end(), i)) fb.push_back(i);
  std::string a = c.tensor_as(av, t), b = c.tensor_as(bv, t);
  std::vector<int64_t> pa = fa, pb = db;
  pa.insert(pa.end(), da.begin(), da.end());
  pb.insert(pb.end(), fb.begin(), fb.end());
  std::string at = c.b.transpose(a, pa), bt = c.b.transpose(b, pb);
  std::string k = dims_product(c, a, sa, da);
  std::string a2 = c.b.op1("Reshape", {at, c.b.concat({c.b.i64s({-1}), k}, 0)});
  std::string b2 = c.b.op1("Reshape", {bt, c.b.concat({k, c.b.i64s({-1})}, 0)});
  std::string y = c.b.op1("MatMul", {a2, b2});
  std::vector<int64_t> out;
  bool known = true;
  for (int64_t d : fa) out.push_back(sa[static_cast<size_t>(d)]), known = known && out.back() >= 0;
  for (int64_t d : fb) out.push_back(sb[static_cast<size_t>(d)]), known = known && out.back() >= 0;
  if (known) return c.b.reshape(y, out);
  std::vector<std::string> parts;
  for (int64_t d : fa) parts.push_back(c.b.unsqueeze(c.b.dim(a, d), {0}));
  for (int64_t d : fb) parts.push_back(c.b.unsqueeze(c.b.dim(b, d), {0}));
  return c.b.op1("Reshape", {y, concat_parts(c, parts)});
}

void tensordot(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, contract(c, c.in(n, 0), c.in(n, 1), c.ints(n, 2), c.ints(n, 3), t));
}

void inner(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int ra = c.rank(n, 0), rb = c.rank(n, 1);
  if (ra == 0 || rb == 0) return c.out(n, c.b.op1("Mul", {c.t_as(n, 0, t), c.t_as(n, 1, t)}));
  c.out(n, contract(c, c.in(n, 0), c.in(n, 1), {ra - 1}, {rb - 1}, t));
}

void addmv(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, scaled_sum(c, n, c.b.op1("MatMul", {c.t_as(n, 1, t), c.t_as(n, 2, t)}), t));
}

void addr(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, scaled_sum(c, n, c.b.op1("Mul", {c.b.unsqueeze(c.t_as(n, 1, t), {1}), c.t_as(n, 2, t)}), t));
}

// aten::chain_matmul / linalg_multi_dot: left to right (MatMul treats 1-D ends as vectors).
void multi_dot(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  auto items = tensor_list(c, n, 0);
  std::string y = c.tensor_as(items.at(0), t);
  for (size_t i = 1; i < items.size(); ++i) y = c.b.op1("MatMul", {y, c.tensor_as(items[i], t)});
  c.out(n, y);
}

// aten::kron(a, b): a's dims interleaved with b's, multiplied, then each pair merged.
void kron(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int ra = c.rank(n, 0), rb = c.rank(n, 1), r = std::max(ra, rb);
  std::string a = c.t_as(n, 0, t), b = c.t_as(n, 1, t);
  auto lead = [&](std::string x, int rx) {
    std::vector<int64_t> axes;
    for (int i = 0; i < r - rx; ++i) axes.push_back(i);
    return axes.empty() ? x : c.b.unsqueeze(x, axes);
  };
  a = lead(a, ra), b = lead(b, rb);
  std::vector<int64_t> odd, even;
  for (int i = 0; i < r; ++i) odd.push_back(2 * i + 1), even.push_back(2 * i);
  std::string p = c.b.op1("Mul", {c.b.unsqueeze(a, odd), c.b.unsqueeze(b, even)});
  c.out(n, c.b.op1("Reshape", {p, c.b.op1("Mul", {c.b.shape_of(a), c.b.shape_of(b)})}));
}

// aten::cross(a, b, dim=None) / linalg_cross(a, b, dim=-1); dim None means the first dim of size 3.
void cross(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  auto out = c.out_shape(n);
  int r = static_cast<int>(out.size());
  int64_t axis = -1;
  auto k = Ctx::arg_index(n, "dim");
  if (k && !c.is_none(n, *k)) {
    axis = norm_axis(c.i(n, *k), r);
  } else {
    for (int i = 0; i < r && axis < 0; ++i)
      if (out[static_cast<size_t>(i)] == 3) axis = i;
    if (axis < 0) throw Error("cross: no dimension of size 3");
  }
  auto comps = [&](size_t i) {
    int ri = c.rank(n, i);
    int64_t ai = axis - (r - ri);
    std::string x = c.t_as(n, i, t);
    return c.b.split(x, {1, 1, 1}, ai);
  };
  auto a = comps(0), b = comps(1);
  auto term = [&](int i, int j) {
    return c.b.op1("Sub", {c.b.op1("Mul", {a[static_cast<size_t>(i)], b[static_cast<size_t>(j)]}),
                           c.b.op1("Mul", {a[static_cast<size_t>(j)], b[static_cast<size_t>(i)]})});
  };
  c.out(n, c.b.concat({term(1, 2), term(2, 0), term(0, 1)}, axis));
}

void det(Ctx& c, const TNode* n) {
  c.b.require(11, "determinant (Det)");
  c.out(n, c.b.op1("Det", {c.t_as(n, 0, c.out_dtype(n))}));
}

// log det: NaN for a negative determinant, as in torch.
void logdet(Ctx& c, const TNode* n) {
  c.b.require(11, "determinant (Det)");
  c.out(n, c.b.op1("Log", {c.b.op1("Det", {c.t_as(n, 0, c.out_dtype(n))})}));
}

// (sign, log|det|) from the determinant itself: exact in sign, and fine while det stays in range.
void slogdet(Ctx& c, const TNode* n) {
  c.b.require(11, "determinant (Det)");
  std::string d = c.b.op1("Det", {c.t_as(n, 0, c.out_dtype(n, 1))});
  c.out(n, 0, c.b.op1("Sign", {d}));
  c.out(n, 1, c.b.op1("Log", {c.b.op1("Abs", {d})}));
}

// The diagonal at `offset` of dims (d1, d2), moved last: those dims go to the end, are flattened,
// and the diagonal's flat positions gathered.
std::string diagonal_of(Ctx& c, const std::string& x, const std::vector<int64_t>& shape, int64_t offset, int64_t d1,
                        int64_t d2) {
  int r = static_cast<int>(shape.size());
  d1 = norm_axis(d1, r), d2 = norm_axis(d2, r);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i)
    if (i != d1 && i != d2) perm.push_back(i);
  perm.push_back(d1), perm.push_back(d2);
  std::string y = c.b.transpose(x, perm);
  std::vector<int64_t> flat(static_cast<size_t>(r - 2), 0);
  flat.push_back(-1);
  y = c.b.reshape(y, flat);
  int64_t rows = shape[static_cast<size_t>(d1)], cols = shape[static_cast<size_t>(d2)];
  std::string idx;
  if (rows >= 0 && cols >= 0) {
    std::vector<int64_t> v;
    int64_t len = offset >= 0 ? std::min(rows, cols - offset) : std::min(rows + offset, cols);
    for (int64_t i = 0; i < len; ++i) v.push_back(offset >= 0 ? i * (cols + 1) + offset : i * (cols + 1) - offset * cols);
    idx = c.b.constant(Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}), "diagonal");
  } else {
    std::string R = c.b.dim(x, d1), C = c.b.dim(x, d2);
    std::string len = offset >= 0 ? int_min(c, R, c.b.op1("Sub", {C, c.b.i64(offset)}))
                                  : int_min(c, c.b.op1("Add", {R, c.b.i64(offset)}), C);
    len = int_max(c, len, c.b.i64(0));
    std::string start = offset >= 0 ? c.b.i64(offset) : c.b.op1("Mul", {c.b.i64(-offset), C});
    idx = c.b.op1("Add", {c.b.op1("Mul", {arange_of(c, len), c.b.op1("Add", {C, c.b.i64(1)})}), start});
  }
  return c.b.op1("Gather", {y, idx}, {Attribute::make_int("axis", r - 2)});
}

void diagonal(Ctx& c, const TNode* n) {
  c.out(n, diagonal_of(c, c.t(n, 0), c.shape(n, 0), c.i(n, "offset", 0), c.i(n, "dim1", 0), c.i(n, "dim2", 1)));
}

void trace(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string d = diagonal_of(c, c.t_as(n, 0, t), c.shape(n, 0), 0, 0, 1);
  c.out(n, c.b.reduce("ReduceSum", d, {0}, false));
}

// Square matrices with v's last dim on the diagonal at `offset` (the rest 0), in the last two dims.
std::string embed_diagonal(Ctx& c, const std::string& v, const std::vector<int64_t>& shape, int64_t offset, DType t) {
  int r = static_cast<int>(shape.size());
  std::string eye;
  if (shape.back() >= 0) {
    at::Tensor e = at::eye(shape.back(), at::kBool);
    eye = c.b.constant(tensor_from_torch(e), "eye");
  } else {
    std::string pos = arange_of(c, c.b.dim(v, r - 1));
    eye = c.b.op1("Equal", {c.b.unsqueeze(pos, {1}), c.b.unsqueeze(pos, {0})});
  }
  std::string m = c.b.op1("Where", {eye, c.b.unsqueeze(v, {r - 1}), c.b.scalar(0, t)});
  if (offset == 0) return m;
  int64_t k = std::abs(offset);
  std::vector<int64_t> pads(static_cast<size_t>(2 * (r + 1)), 0);
  // offset > 0: k columns before and k rows after; offset < 0: k rows before and k columns after.
  size_t rows = static_cast<size_t>(r - 1), cols = static_cast<size_t>(r);
  pads[offset > 0 ? cols : rows] = k;
  pads[static_cast<size_t>(r + 1) + (offset > 0 ? rows : cols)] = k;
  return c.b.pad(m, pads, "constant", 0, t);
}

// aten::diag(x, diagonal): a 1-D x becomes a matrix, a matrix gives its diagonal.
void diag(Ctx& c, const TNode* n) {
  DType t = c.dtype(n, 0);
  int64_t k = c.i(n, "diagonal", 0);
  if (c.rank(n, 0) == 2) return c.out(n, diagonal_of(c, c.t(n, 0), c.shape(n, 0), k, 0, 1));
  c.out(n, embed_diagonal(c, c.t(n, 0), c.shape(n, 0), k, t));
}

void diag_embed(Ctx& c, const TNode* n) {
  DType t = c.dtype(n, 0);
  int r = c.rank(n, 0);
  int64_t d1 = norm_axis(c.i(n, "dim1", -2), r + 1), d2 = norm_axis(c.i(n, "dim2", -1), r + 1);
  std::string m = embed_diagonal(c, c.t(n, 0), c.shape(n, 0), c.i(n, "offset", 0), t);
  // m holds the matrix in its last two dims; move them to (dim1, dim2).
  std::vector<int64_t> perm(static_cast<size_t>(r + 1), -1);
  perm[static_cast<size_t>(d1)] = r - 1;
  perm[static_cast<size_t>(d2)] = r;
  int64_t next = 0;
  for (auto& p : perm)
    if (p < 0) p = next++;
  bool identity = true;
  for (int i = 0; i <= r; ++i) identity = identity && perm[static_cast<size_t>(i)] == i;
  c.out(n, identity ? m : c.b.transpose(m, perm));
}

// p-norms over `axis` of d (the differences): 2, 1, inf, 0 (count of non-zeros), or general p.
std::string p_norm(Ctx& c, const std::string& d, double p, const std::vector<int64_t>& axes, bool keep, DType t) {
  if (p == 2.0) return c.b.reduce("ReduceL2", d, axes, keep);
  if (p == 1.0) return c.b.reduce("ReduceL1", d, axes, keep);
  std::string a = c.b.op1("Abs", {d});
  if (std::isinf(p)) return c.b.reduce(p > 0 ? "ReduceMax" : "ReduceMin", a, axes, keep);
  if (p == 0.0) return c.b.reduce("ReduceSum", c.b.cast(c.b.op1("Not", {equal_to(c, d, c.b.scalar(0, t), t)}), t), axes, keep);
  std::string s = c.b.reduce("ReduceSum", c.b.op1("Pow", {a, c.b.scalar(p, t)}), axes, keep);
  return c.b.op1("Pow", {s, c.b.scalar(1.0 / p, t)});
}

// aten::cdist(x1 [.., P, M], x2 [.., R, M], p) -> [.., P, R], from the differences of all pairs.
void cdist(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = std::max(c.rank(n, 0), c.rank(n, 1));
  std::string a = c.b.unsqueeze(c.t_as(n, 0, t), {c.rank(n, 0) - 1});
  std::string b = c.b.unsqueeze(c.t_as(n, 1, t), {c.rank(n, 1) - 2});
  c.out(n, p_norm(c, c.b.op1("Sub", {a, b}), c.f(n, "p", 2.0), {r}, false, t));
}

// aten::pairwise_distance(x1, x2, p, eps, keepdim): the p-norm of x1 - x2 + eps over the last dim.
void pairwise_distance(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = std::max(c.rank(n, 0), c.rank(n, 1));
  std::string d = c.b.op1("Add", {c.b.op1("Sub", {c.t_as(n, 0, t), c.t_as(n, 1, t)}), c.b.scalar(c.f(n, "eps", 1e-6), t)});
  if (r == 0) return c.out(n, p_norm(c, c.b.reshape(d, {1}), c.f(n, "p", 2.0), {0}, false, t));
  c.out(n, p_norm(c, d, c.f(n, "p", 2.0), {r - 1}, c.flag(n, "keepdim", false), t));
}

// aten::pdist(x [N, M], p): distances of the rows i < j, in row-major order of (i, j) — the order in
// which NonZero lists the pairs of an upper-triangular mask.
void pdist(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t);
  std::string pos = arange_of(c, dim_size(c, x, c.shape(n, 0), 0));
  std::string pairs = c.b.op1("NonZero", {c.b.op1("Less", {c.b.unsqueeze(pos, {1}), c.b.unsqueeze(pos, {0})})});
  auto row = [&](int64_t k) {
    std::string i = c.b.reshape(c.b.slice(pairs, {k}, {k + 1}, {0}), {-1});
    return c.b.op1("Gather", {x, i}, {Attribute::make_int("axis", 0)});
  };
  c.out(n, p_norm(c, c.b.op1("Sub", {row(0), row(1)}), c.f(n, "p", 2.0), {1}, false, t));
}

// aten::cosine_similarity(x1, x2, dim, eps), as torch 1.13 computes it: both broadcast, each divided
// by max(its norm, eps), then the dot product.
void cosine_similarity(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = std::max(c.rank(n, 0), c.rank(n, 1));
  int64_t axis = norm_axis(c.i(n, "dim", 1), r);
  std::string a = c.t_as(n, 0, t), b = c.t_as(n, 1, t);
  auto sa = c.shape(n, 0), sb = c.shape(n, 1);
  if (sa != sb || !all_static(sa)) {
    a = c.b.op1("Expand", {a, c.b.shape_of(b)});
    b = c.b.op1("Expand", {b, c.b.shape_of(a)});
  }
  double eps = c.f(n, "eps", 1e-8);
  auto unit = [&](const std::string& x) {
    std::string norm = c.b.op1("Max", {c.b.reduce("ReduceL2", x, {axis}, true), c.b.scalar(eps, t)});
    return c.b.op1("Div", {x, norm});
  };
  c.out(n, c.b.reduce("ReduceSum", c.b.op1("Mul", {unit(a), unit(b)}), {axis}, false));
}

// aten::norm(x, p, dim, keepdim, dtype) in its overloads, and linalg_vector_norm(x, ord, dim, keepdim, dtype).
void vector_norm(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  double p = c.is_none(n, 1) ? 2.0 : c.f(n, 1);
  std::vector<int64_t> axes;
  if (auto k = Ctx::arg_index(n, "dim"); k && !c.is_none(n, *k))
    for (int64_t d : c.ints(n, *k)) axes.push_back(norm_axis(d, std::max(r, 1)));
  std::sort(axes.begin(), axes.end());
  std::string x = c.t_as(n, 0, t);
  if (r == 0) return c.out(n, p == 0.0 ? p_norm(c, c.b.reshape(x, {1}), p, {}, false, t) : c.b.op1("Abs", {x}));
  c.out(n, p_norm(c, x, p, axes, c.flag(n, "keepdim", false), t));
}

// aten::linalg_matrix_norm(A, ord, dim=[-2, -1], keepdim): "fro", and the induced 1 / inf norms
// (max column / row sum of |A|) with their minimum counterparts.
std::string matrix_norm(Ctx& c, const std::string& x, int r, const c10::IValue& ord, std::vector<int64_t> dims, bool keep) {
  if (dims.size() != 2) throw Error("matrix_norm: dim must name two dims");
  for (auto& d : dims) d = norm_axis(d, r);
  if (ord.isString()) {
    if (ord.toStringRef() != "fro") throw UnsupportedError("matrix norm '" + ord.toStringRef() + "' (needs an SVD)");
    std::vector<int64_t> axes = dims;
    std::sort(axes.begin(), axes.end());
    return c.b.reduce("ReduceL2", x, axes, keep);
  }
  double p = ord.toScalar().toDouble();
  if (std::fabs(p) != 1.0 && !std::isinf(p)) throw UnsupportedError("matrix norm of order " + std::to_string(p) + " (needs an SVD)");
  // ord +-1: sum over rows (dims[0]) then the extreme over columns; ord +-inf the other way round.
  int64_t sum_dim = std::isinf(p) ? dims[1] : dims[0], ext_dim = std::isinf(p) ? dims[0] : dims[1];
  std::string s = c.b.reduce("ReduceSum", c.b.op1("Abs", {x}), {sum_dim}, true);
  std::string y = c.b.reduce(p > 0 ? "ReduceMax" : "ReduceMin", s, {ext_dim}, true);
  if (keep) return y;
  std::vector<int64_t> axes = dims;
  std::sort(axes.begin(), axes.end());
  return c.b.squeeze(y, axes);
}

void linalg_matrix_norm(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  auto dk = Ctx::arg_index(n, "dim");
  std::vector<int64_t> dims = dk ? c.ints(n, *dk) : std::vector<int64_t>{-2, -1};
  c.out(n, matrix_norm(c, c.t_as(n, 0, t), r, c.cval(n, 1), dims, c.flag(n, "keepdim", false)));
}

// aten::linalg_norm(x, ord=None, dim=None, keepdim, dtype): a vector norm over one dim (or all of a
// 1-D x, or all with ord None), a matrix norm over two.
void linalg_norm(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  std::string x = c.t_as(n, 0, t);
  bool keep = c.flag(n, "keepdim", false);
  auto dk = Ctx::arg_index(n, "dim");
  std::vector<int64_t> dims;
  if (dk && !c.is_none(n, *dk)) dims = c.ints(n, *dk);
  const c10::IValue& ord = c.cval(n, 1);
  if (ord.isNone()) {
    std::vector<int64_t> axes;
    for (int64_t d : dims) axes.push_back(norm_axis(d, r));
    std::sort(axes.begin(), axes.end());
    if (axes.empty() && r == 0) return c.out(n, c.b.op1("Abs", {x}));
    return c.out(n, c.b.reduce("ReduceL2", x, axes, keep));
  }
  if (dims.size() == 2 || (dims.empty() && r == 2)) {
    if (dims.empty()) dims = {0, 1};
    return c.out(n, matrix_norm(c, x, r, ord, dims, keep));
  }
  if (ord.isString()) throw Error("linalg_norm: a string order needs a matrix");
  std::vector<int64_t> axes;
  for (int64_t d : dims) axes.push_back(norm_axis(d, r));
  c.out(n, p_norm(c, x, ord.toScalar().toDouble(), axes, keep, t));
}

}  // namespace

void register_linalg_ops(OpTable& t) {
  t["aten::tensordot"] = {tensordot};
  t["aten::inner"] = {inner};
  t["aten::addmv"] = {addmv};
  t["aten::addr"] = {addr};
  t["aten::chain_matmul"] = {multi_dot};
  t["aten::linalg_multi_dot"] = {multi_dot};
  t["aten::kron"] = {kron};
  t["aten::cross"] = {cross};
  t["aten::linalg_cross"] = {cross};
  t["aten::det"] = {det};
  t["aten::linalg_det"] = {det};
  t["aten::logdet"] = {logdet};
  t["aten::slogdet"] = {slogdet};
  t["aten::linalg_slogdet"] = {slogdet};
  t["aten::diagonal"] = {diagonal};
  t["aten::trace"] = {trace};
  t["aten::diag"] = {diag};
  t["aten::diag_embed"] = {diag_embed};
  t["aten::cdist"] = {cdist};
  t["aten::pairwise_distance"] = {pairwise_distance};
  t["aten::pdist"] = {pdist};
  t["aten::cosine_similarity"] = {cosine_similarity};
  t["aten::norm"] = {vector_norm};
  t["aten::linalg_vector_norm"] = {vector_norm};
  t["aten::linalg_matrix_norm"] = {linalg_matrix_norm};
  t["aten::linalg_norm"] = {linalg_norm};
}

}  // namespace t2o
