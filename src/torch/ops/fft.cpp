// The torch.fft family (fft, ifft, rfft, irfft, hfft, ihfft and their 2-D and n-D forms) on the
// pair tensors of ops/complex.h. Each transformed axis is one MatMul with that axis' DFT matrix
// (the axis moved last, its (real, imaginary) pairs flattened): from opset 9, for any length, and
// with lengths known only at run time the matrix is computed in the graph (Range, Cos, Sin). The
// n-D forms transform one axis after another, as the DFT is separable: rfftn is the real-to-half
// transform of the last axis, then complex transforms of the others; irfftn the reverse.
#include <algorithm>
#include <cmath>
#include <set>

#include "torch/ops/complex.h"

namespace t2o::cplx {
namespace {

enum class Form { C2C, R2C, C2R };

struct FftOp {
  Form form;
  bool inverse;    // the transform's direction (ifft, irfft, ihfft): sets its default scaling
  bool hermitian;  // hfft / ihfft: the input (hfft) or the result (ihfft) conjugated
  int dims;        // 1 (n, dim), 2 (s, dim = (-2, -1)) or 0 for n-D (s, dim = all or the last len(s))
};

// A length: static when v >= 0, else the 0-d int64 tensor t.
struct Len {
  int64_t v = -1;
  std::string t;
};

std::string len_tensor(Ctx& c, const Len& l) { return l.v >= 0 ? c.b.i64(l.v) : l.t; }

Len size_of(Ctx& c, const std::string& x, const std::vector<int64_t>& shape, int64_t axis) {
  if (auto s = static_size(shape, axis)) return {*s, ""};
  return {-1, c.b.dim(x, axis)};
}

Len half_bins(Ctx& c, const Len& n) {
  if (n.v >= 0) return {n.v / 2 + 1, ""};
  return {-1, c.b.op1("Add", {c.b.op1("Div", {n.t, c.b.i64(2)}), c.b.i64(1)})};
}

// x (rank trank) cut or zero-padded at the end of `axis` from `have` to `want` elements.
std::string fit(Ctx& c, const std::string& x, int trank, int64_t axis, const Len& have, const Len& want, DType t) {
  if (have.v >= 0 && want.v >= 0) {
    if (want.v < have.v) return c.b.slice(x, {0}, {want.v}, {axis});
    if (want.v == have.v) return x;
    std::vector<int64_t> pads(static_cast<size_t>(2 * trank), 0);
    pads[static_cast<size_t>(trank + axis)] = want.v - have.v;
    return c.b.pad(x, pads, "constant", 0.0, t);
  }
  c.b.require(10, "an FFT length known only at run time");
  std::string w = c.b.unsqueeze(len_tensor(c, want), {0});
  std::string y = c.b.slice_dyn(x, c.b.i64s({0}), w, c.b.i64s({axis}));
  std::string missing = int_max(c, c.b.op1("Sub", {w, c.b.unsqueeze(len_tensor(c, have), {0})}), c.b.i64s({0}));
  std::string before = axis > 0 ? c.b.i64s(std::vector<int64_t>(static_cast<size_t>(axis), 0)) : "";
  std::string after = trank - axis - 1 > 0 ? c.b.i64s(std::vector<int64_t>(static_cast<size_t>(trank - axis - 1), 0)) : "";
  return pad_end(c, y, trank, concat_parts(c, {before, missing, after}), 0.0, t, {static_cast<int>(axis)});
}

}  // namespace

std::string real_dft_basis(Ctx& c, int64_t n, int64_t bins, DType t) {
  at::Tensor b = at::empty({n, bins, 2}, at::kDouble);
  auto a = b.accessor<double, 3>();
  for (int64_t j = 0; j < n; ++j)
    for (int64_t k = 0; k < bins; ++k) {
      double angle = 2.0 * M_PI * static_cast<double>((j * k) % n) / static_cast<double>(n);
      a[j][k][0] = std::cos(angle);
      a[j][k][1] = -std::sin(angle);
    }
  return c.b.constant(tensor_from_torch(b.reshape({n, 2 * bins}).to(t == DType::Double ? at::kDouble : at::kFloat)),
                      "dft_basis");
}

namespace {

// The unscaled DFT matrix of one axis of length n, laid out for `x @ basis` with x's last axis the
// flattened input: C2C [2n, 2n] ((j, re|im) -> (k, re|im)), R2C [n, 2 bins], C2R [2 bins, n]
// (bins = n / 2 + 1; the inner bins count twice, the imaginary parts of DC and Nyquist not, as
// irfft ignores them). Angles are 2 pi ((j k) mod n) / n, exact for long axes.
std::string basis(Ctx& c, Form form, bool inverse, const Len& n, DType t) {
  double sgn = inverse ? 1.0 : -1.0;  // e^{sgn i theta}
  if (n.v >= 0) {
    if (n.v == 0) throw Error("an FFT of length 0");
    int64_t N = n.v, bins = N / 2 + 1;
    auto angle = [&](int64_t j, int64_t k) {
      return 2.0 * M_PI * static_cast<double>((j * k) % N) / static_cast<double>(N);
    };
    at::Tensor b;
    if (form == Form::C2C) {
      b = at::empty({N, 2, N, 2}, at::kDouble);
      auto a = b.accessor<double, 4>();
      for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < N; ++k) {
          double C = std::cos(angle(j, k)), S = std::sin(angle(j, k));
          a[j][0][k][0] = C;
          a[j][1][k][0] = -sgn * S;
          a[j][0][k][1] = sgn * S;
          a[j][1][k][1] = C;
        }
      b = b.reshape({2 * N, 2 * N});
    } else if (form == Form::R2C) {
      return real_dft_basis(c, N, bins, t);
    } else {
      b = at::empty({bins, 2, N}, at::kDouble);
      auto a = b.accessor<double, 3>();
      for (int64_t k = 0; k < bins; ++k) {
        bool edge = k == 0 || 2 * k == N;
        for (int64_t j = 0; j < N; ++j) {
          a[k][0][j] = (edge ? 1.0 : 2.0) * std::cos(angle(k, j));
          a[k][1][j] = edge ? 0.0 : -2.0 * std::sin(angle(k, j));
        }
      }
      b = b.reshape({2 * bins, N});
    }
    return c.b.constant(tensor_from_torch(b.to(t == DType::Double ? at::kDouble : at::kFloat)), "dft_basis");
  }
  // n known at run time: the same matrix from Range, Cos and Sin (angles in float32).
  Len bins = half_bins(c, n);
  std::string rows = arange_of(c, len_tensor(c, form == Form::C2R ? bins : n));
  std::string cols = arange_of(c, len_tensor(c, form == Form::R2C ? bins : n));
  std::string jk = c.b.op1("Mul", {c.b.unsqueeze(rows, {1}), c.b.unsqueeze(cols, {0})});
  std::string m = c.b.op1("Sub", {jk, c.b.op1("Mul", {c.b.op1("Div", {jk, n.t}), n.t})});  // jk mod n
  std::string theta = c.b.op1("Div", {c.b.op1("Mul", {c.b.cast(m, DType::Float), c.b.scalar(2.0 * M_PI, DType::Float)}),
                                      c.b.cast(n.t, DType::Float)});
  std::string C = c.b.op1("Cos", {theta}), S = c.b.op1("Sin", {theta});
  if (t != DType::Float) {
    C = c.b.cast(C, t);
    S = c.b.cast(S, t);
  }
  auto last2 = [&](const std::string& a, const std::string& b) {  // [r, c] x 2 -> [r, c, 2]
    return c.b.concat({c.b.unsqueeze(a, {2}), c.b.unsqueeze(b, {2})}, 2);
  };
  std::string nr = c.b.unsqueeze(len_tensor(c, form == Form::C2R ? bins : n), {0});
  std::string nc = c.b.unsqueeze(len_tensor(c, form == Form::R2C ? bins : n), {0});
  std::string two = c.b.i64s({2});
  if (form == Form::C2C) {
    std::string sS = c.b.op1("Mul", {S, c.b.scalar(sgn, t)});
    std::string b = c.b.concat({c.b.unsqueeze(last2(C, sS), {1}), c.b.unsqueeze(last2(c.b.op1("Neg", {sS}), C), {1})}, 1);
    return c.b.op1("Reshape", {b, c.b.concat({c.b.op1("Mul", {nr, two}), c.b.op1("Mul", {nc, two})}, 0)});
  }
  if (form == Form::R2C)
    return c.b.op1("Reshape", {last2(C, c.b.op1("Neg", {S})), c.b.concat({nr, c.b.op1("Mul", {nc, two})}, 0)});
  // C2R: rows are bins k; weights 1 at DC and Nyquist (0 for their imaginary parts), 2 elsewhere.
  std::string k = c.b.unsqueeze(rows, {1});
  std::string edge = c.b.op1("Or", {equal_to(c, k, c.b.i64(0), DType::Int64),
                                    equal_to(c, c.b.op1("Mul", {k, c.b.i64(2)}), n.t, DType::Int64)});
  std::string w = c.b.op1("Where", {edge, c.b.scalar(1.0, t), c.b.scalar(2.0, t)});
  std::string wi = c.b.op1("Where", {edge, c.b.scalar(0.0, t), c.b.scalar(-2.0, t)});
  std::string re = c.b.unsqueeze(c.b.op1("Mul", {C, w}), {1}), im = c.b.unsqueeze(c.b.op1("Mul", {S, wi}), {1});
  return c.b.op1("Reshape", {c.b.concat({re, im}, 1), c.b.concat({c.b.op1("Mul", {nr, two}), nc}, 0)});
}

// The permutation moving `axis` of a rank-r tensor last, and its inverse.
void axis_last(int r, int64_t axis, std::vector<int64_t>& perm, std::vector<int64_t>& inv) {
  perm.clear();
  for (int64_t d = 0; d < r; ++d)
    if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  inv.assign(static_cast<size_t>(r), 0);
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
}

// A value being transformed: a real tensor or a pair tensor, its logical rank and shape.
struct Val {
  std::string x;
  bool pair = false;
  int rank = 0;
  std::vector<int64_t> shape;
  DType t = DType::Float;
};

std::vector<int64_t> leading_zeros(int count, std::vector<int64_t> tail) {
  std::vector<int64_t> s(static_cast<size_t>(count), 0);
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

// How one axis is transformed: a dense DFT matrix (short axes, any axis whose length is known only
// at run time, and prime lengths up to the size limit); for a longer static length n = n1 n2, the
// four-step factorization (DFTs of n1 and n2 points with a twiddle product between, so matrices of
// n1^2 and n2^2 entries, computed in double, instead of n^2). ONNX's DFT op (opset 17) is not used:
// ONNX Runtime 1.30's float32 DFT of length 4200 was off by 1e-2 of the signal's scale.
enum class Method { Dense, FourStep };
constexpr int64_t kDenseMax = 1024;                        // longer static axes factor when they can
constexpr double kMaxBasisElements = 32.0 * 1024 * 1024;  // 128 MB as float32

int64_t factor_near_sqrt(int64_t n) {
  int64_t best = 0;
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) best = d;
  return best;
}

Method method_for(Form form, const Len& n) {
  if (n.v < 0 || n.v <= kDenseMax) return Method::Dense;
  if (factor_near_sqrt(n.v) > 0) return Method::FourStep;
  double N = static_cast<double>(n.v), bins = static_cast<double>(n.v / 2 + 1);
  double elems = form == Form::C2C ? 4 * N * N : 2 * N * bins;
  if (elems <= kMaxBasisElements) return Method::Dense;
  throw UnsupportedError("an FFT of prime length " + std::to_string(n.v) + ": its DFT matrix would take " +
                         std::to_string(static_cast<int64_t>(elems * 4 / (1 << 20))) +
                         " MB (lengths with factors are split into shorter transforms)");
}

// The full spectrum [.., n, ..] of a half one [.., n / 2 + 1, ..] (a pair tensor, along `axis`):
// bins past n / 2 are the conjugates of those before, in reverse.
std::string hermitian_full(Ctx& c, const std::string& half, int64_t axis, int64_t n, DType t) {
  int64_t bins = n / 2 + 1, extra = n - bins;
  if (extra == 0) return half;
  std::string tail = c.b.take(half, bins, extra, 0, -1, axis);  // X[n - bins], ..., X[1]
  tail = c.b.op1("Mul", {tail, c.b.vec({1.0, -1.0}, t)});
  return c.b.concat({half, tail}, axis);
}

// Twiddles w^(j2 k1) (w = e^(sgn 2 pi i / n)) as a [n1, n2] pair constant.
std::string twiddles(Ctx& c, int64_t n1, int64_t n2, bool inverse, DType t) {
  int64_t n = n1 * n2;
  double sgn = inverse ? 1.0 : -1.0;
  at::Tensor w = at::empty({n1, n2, 2}, at::kDouble);
  auto a = w.accessor<double, 3>();
  for (int64_t k1 = 0; k1 < n1; ++k1)
    for (int64_t j2 = 0; j2 < n2; ++j2) {
      double angle = 2.0 * M_PI * static_cast<double>((j2 * k1) % n) / static_cast<double>(n);
      a[k1][j2][0] = std::cos(angle);
      a[k1][j2][1] = sgn * std::sin(angle);
    }
  return c.b.constant(tensor_from_torch(w.to(t == DType::Double ? at::kDouble : at::kFloat)), "twiddles");
}

void step(Ctx& c, Val& v, Form form, bool inverse, int64_t axis, const Len& n, bool given);

// C2C of the static length n = n1 n2 along `axis` of a pair value (already of that length):
// x[n2 j1 + j2] as [n1, n2]; DFTs over j1, twiddles w^(j2 k1), DFTs over j2; X[k1 + n1 k2] is
// then the transpose, flattened.
void four_step(Ctx& c, Val& v, bool inverse, int64_t axis, int64_t n) {
  int64_t n1 = factor_near_sqrt(n), n2 = n / n1;
  int r = v.rank;
  std::vector<int64_t> perm, inv;
  axis_last(r, axis, perm, inv);
  std::vector<int64_t> shape;
  for (int64_t d : perm) shape.push_back(v.shape[static_cast<size_t>(d)]);
  if (axis != r - 1) {
    std::vector<int64_t> p = perm;
    p.push_back(r);
    v.x = c.b.transpose(v.x, p);
  }
  v.x = c.b.op1("Reshape", {v.x, c.b.i64s(leading_zeros(r - 1, {n1, n2, 2}))});
  v.rank = r + 1;
  v.shape.assign(shape.begin(), shape.end() - 1);
  v.shape.push_back(n1);
  v.shape.push_back(n2);
  step(c, v, Form::C2C, inverse, r - 1, {n1, ""}, false);
  // Twiddle product on [.., k1, j2].
  std::string tw = twiddles(c, n1, n2, inverse, v.t);
  std::string zr = part_of(c, v.x, r + 1, 0), zi = part_of(c, v.x, r + 1, 1);
  std::string tr = part_of(c, tw, 2, 0), ti = part_of(c, tw, 2, 1);
  std::string re = c.b.op1("Sub", {c.b.op1("Mul", {zr, tr}), c.b.op1("Mul", {zi, ti})});
  std::string im = c.b.op1("Add", {c.b.op1("Mul", {zr, ti}), c.b.op1("Mul", {zi, tr})});
  v.x = pair_from(c, re, im, r + 1);
  step(c, v, Form::C2C, inverse, r, {n2, ""}, false);
  std::vector<int64_t> swap;
  for (int64_t d = 0; d < r - 1; ++d) swap.push_back(d);
  swap.insert(swap.end(), {r, r - 1, r + 1});
  v.x = c.b.transpose(v.x, swap);
  v.x = c.b.op1("Reshape", {v.x, c.b.i64s(leading_zeros(r - 1, {n, 2}))});
  v.rank = r;
  shape.back() = n;
  v.shape = shape;
  if (axis != r - 1) {
    inv.push_back(r);
    v.x = c.b.transpose(v.x, inv);
    std::vector<int64_t> back(static_cast<size_t>(r));
    for (int64_t d = 0; d < r; ++d) back[static_cast<size_t>(d)] = shape[static_cast<size_t>(inv[static_cast<size_t>(d)])];
    v.shape = back;
  }
}

// R2C and C2R through the C2C factorization: a real input becomes a pair with zero imaginary parts
// and keeps the first n / 2 + 1 bins; a half spectrum is made full and keeps the real part.
void four_step_form(Ctx& c, Val& v, Form form, bool inverse, int64_t axis, int64_t n) {
  int r = v.rank;
  if (form == Form::R2C) {
    v.x = real_pair(c, v.x, r, v.t);
    v.pair = true;
  } else if (form == Form::C2R) {
    v.x = hermitian_full(c, v.x, axis, n, v.t);
  }
  v.shape[static_cast<size_t>(axis)] = n;
  four_step(c, v, inverse, axis, n);
  if (form == Form::R2C) {
    v.x = c.b.slice(v.x, {0}, {n / 2 + 1}, {axis});
    v.shape[static_cast<size_t>(axis)] = n / 2 + 1;
  } else if (form == Form::C2R) {
    v.x = part_of(c, v.x, r, 0);
    v.pair = false;
  }
}

// One axis of signal length n transformed to the output layout of `form`; `given`: n was asked
// for (the n / s argument), so the input is first cut or zero-padded to it.
void step(Ctx& c, Val& v, Form form, bool inverse, int64_t axis, const Len& n, bool given) {
  int r = v.rank;
  if (given) {  // the input cut or padded to the length asked for (else it has that length)
    Len have = size_of(c, v.x, v.shape, axis);
    Len in_len = form == Form::C2R ? half_bins(c, n) : n;
    v.x = fit(c, v.x, r + (v.pair ? 1 : 0), axis, have, in_len, v.t);
    v.shape[static_cast<size_t>(axis)] = in_len.v;
  }
  Method m = method_for(form, n);
  if (m == Method::FourStep) return four_step_form(c, v, form, inverse, axis, n.v);
  std::vector<int64_t> perm, inv;
  axis_last(r, axis, perm, inv);
  if (v.pair) {
    perm.push_back(r);
    if (axis != r - 1) v.x = c.b.transpose(v.x, perm);
    v.x = c.b.op1("Reshape", {v.x, c.b.i64s(leading_zeros(r - 1, {-1}))});
  } else if (axis != r - 1) {
    v.x = c.b.transpose(v.x, perm);
  }
  v.x = c.b.op1("MatMul", {v.x, basis(c, form, inverse, n, v.t)});
  v.pair = form != Form::C2R;
  if (v.pair) {
    v.x = c.b.op1("Reshape", {v.x, c.b.i64s(leading_zeros(r - 1, {-1, 2}))});
    inv.push_back(r);
  }
  if (axis != r - 1) v.x = c.b.transpose(v.x, inv);
  Len out = form == Form::R2C ? half_bins(c, n) : n;
  v.shape[static_cast<size_t>(axis)] = out.v;
}

void fft(Ctx& c, const TNode* n, const FftOp& op) {
  const std::string kind = n->kind().toQualString();
  const TV& in = c.in(n, 0);
  if (!in.rank_known) throw UnsupportedError(kind + " of a tensor of unknown rank");
  bool complex_in = is_complex(in);
  if (op.form == Form::R2C && complex_in) throw Error(kind + " expects a real input");
  Val v;
  v.rank = static_cast<int>(in.shape.size());
  v.shape = in.shape;
  DType it = complex_in ? real_of(in.dtype) : c.dtype(n, 0);
  v.t = it == DType::Double ? DType::Double : DType::Float;
  v.x = complex_in ? in.name : c.tensor_as(in, v.t);
  v.pair = complex_in;
  if (complex_in && real_of(in.dtype) != v.t) v.x = c.b.cast(v.x, v.t);
  // Lengths (n / s) and dims.
  std::vector<int64_t> dims;
  std::vector<Len> lens;
  if (op.dims == 1) {
    dims.push_back(c.i(n, "dim", -1));
    const TV* nv = c.arg(n, "n");
    if (nv && !nv->is_none()) lens.push_back(nv->is_const() ? Len{nv->c.toInt(), ""} : Len{-1, c.int_tensor(*nv)});
  } else {
    const TV* sv = c.arg(n, "s");
    if (sv && !sv->is_none()) {
      if (sv->is_const()) {
        for (int64_t s : sv->c.toIntVector()) lens.push_back({s, ""});
      } else if (sv->kind == TV::Kind::List) {
        for (const TV& e : sv->items) lens.push_back(e.is_const() ? Len{e.c.toInt(), ""} : Len{-1, c.int_tensor(e)});
      } else {
        throw UnsupportedError(kind + " with sizes that are not a list");
      }
    }
    const TV* dv = c.arg(n, "dim");
    if (dv && !dv->is_none()) {
      if (!dv->is_const()) throw UnsupportedError(kind + " along computed dims");
      dims = dv->c.isInt() ? std::vector<int64_t>{dv->c.toInt()} : dv->c.toIntVector();
    } else if (op.dims == 2) {
      dims = {-2, -1};
    } else {
      int count = lens.empty() ? v.rank : static_cast<int>(lens.size());
      for (int d = v.rank - count; d < v.rank; ++d) dims.push_back(d);
    }
  }
  if (dims.empty()) throw Error(kind + ": no dims to transform");
  if (!lens.empty() && lens.size() != dims.size()) throw Error(kind + ": the sizes and dims differ in length");
  std::set<int64_t> seen;
  for (int64_t& d : dims) {
    if (d < -v.rank || d >= v.rank) throw Error(kind + ": dim " + std::to_string(d) + " out of range");
    d = norm_axis(d, v.rank);
    if (!seen.insert(d).second) throw Error(kind + ": a dim given twice");
  }
  for (const Len& l : lens)
    if (l.v == 0 || l.v < -1) throw Error(kind + ": invalid FFT length " + std::to_string(l.v));
  auto len_at = [&](size_t i) { return lens.empty() ? size_of(c, v.x, v.shape, dims[i]) : lens[i]; };
  std::vector<Len> signal(dims.size());  // each axis' signal length, for the scaling
  size_t last = dims.size() - 1;
  if (op.form == Form::R2C) {
    signal[last] = len_at(last);
    step(c, v, Form::R2C, false, dims[last], signal[last], !lens.empty());
    for (size_t i = 0; i < last; ++i) {
      signal[i] = len_at(i);
      step(c, v, Form::C2C, false, dims[i], signal[i], !lens.empty());
    }
    if (op.hermitian) v.x = c.b.op1("Mul", {v.x, c.b.vec({1.0, -1.0}, v.t)});
  } else {
    if (!v.pair) {
      v.x = real_pair(c, v.x, v.rank, v.t);
      v.pair = true;
    }
    if (op.form == Form::C2R) {
      if (op.hermitian) v.x = c.b.op1("Mul", {v.x, c.b.vec({1.0, -1.0}, v.t)});
      for (size_t i = 0; i < last; ++i) {
        signal[i] = len_at(i);
        step(c, v, Form::C2C, true, dims[i], signal[i], !lens.empty());
      }
      // The output length: given, else 2 (bins - 1).
      if (!lens.empty()) {
        signal[last] = lens[last];
      } else {
        Len bins = size_of(c, v.x, v.shape, dims[last]);
        signal[last] = bins.v >= 0 ? Len{2 * (bins.v - 1), ""}
                                   : Len{-1, c.b.op1("Mul", {c.b.op1("Sub", {bins.t, c.b.i64(1)}), c.b.i64(2)})};
        if (bins.v == 1) throw Error(kind + ": an output of length 0 (give n)");
      }
      step(c, v, Form::C2R, true, dims[last], signal[last], !lens.empty());
    } else {
      for (size_t i = 0; i < dims.size(); ++i) {
        signal[i] = len_at(i);
        step(c, v, Form::C2C, op.inverse, dims[i], signal[i], !lens.empty());
      }
    }
  }
  // Scaling: "backward" (the default) divides the inverse direction by the signal size N,
  // "forward" the forward one, "ortho" both by sqrt(N).
  const TV* nm = c.arg(n, "norm");
  std::string norm = nm && !nm->is_none() ? nm->c.toStringRef() : "backward";
  if (norm != "backward" && norm != "forward" && norm != "ortho") throw Error(kind + ": invalid norm '" + norm + "'");
  bool scaled = norm == "ortho" || (norm == "backward") == op.inverse;
  if (scaled) {
    bool fixed = std::all_of(signal.begin(), signal.end(), [](const Len& l) { return l.v >= 0; });
    std::string k;
    if (fixed) {
      double size = 1.0;
      for (const Len& l : signal) size *= static_cast<double>(l.v);
      k = c.b.scalar(norm == "ortho" ? 1.0 / std::sqrt(size) : 1.0 / size, v.t);
    } else {
      std::string size = len_tensor(c, signal[0]);
      for (size_t i = 1; i < signal.size(); ++i) size = c.b.op1("Mul", {size, len_tensor(c, signal[i])});
      std::string f = c.b.cast(size, v.t);
      if (norm == "ortho") f = c.b.op1("Sqrt", {f});
      k = c.b.op1("Div", {c.b.scalar(1.0, v.t), f});
    }
    v.x = c.b.op1("Mul", {v.x, k});
  }
  if (!v.pair) {
    DType want = c.out_dtype(n);
    return c.out(n, want != v.t && want != DType::Undefined ? c.b.cast(v.x, want) : v.x);
  }
  set_complex(c, n, v.x, complex_of(v.t), c.out_shape(n));
}

}  // namespace

void add_fft_ops(OpTable& t, bool /*complex_table*/) {
  const std::vector<std::pair<const char*, FftOp>> ops{
      {"aten::fft_fft", {Form::C2C, false, false, 1}},    {"aten::fft_ifft", {Form::C2C, true, false, 1}},
      {"aten::fft_fft2", {Form::C2C, false, false, 2}},   {"aten::fft_ifft2", {Form::C2C, true, false, 2}},
      {"aten::fft_fftn", {Form::C2C, false, false, 0}},   {"aten::fft_ifftn", {Form::C2C, true, false, 0}},
      {"aten::fft_rfft", {Form::R2C, false, false, 1}},   {"aten::fft_rfft2", {Form::R2C, false, false, 2}},
      {"aten::fft_rfftn", {Form::R2C, false, false, 0}},  {"aten::fft_ihfft", {Form::R2C, true, true, 1}},
      {"aten::fft_ihfft2", {Form::R2C, true, true, 2}},   {"aten::fft_ihfftn", {Form::R2C, true, true, 0}},
      {"aten::fft_irfft", {Form::C2R, true, false, 1}},   {"aten::fft_irfft2", {Form::C2R, true, false, 2}},
      {"aten::fft_irfftn", {Form::C2R, true, false, 0}},  {"aten::fft_hfft", {Form::C2R, false, true, 1}},
      {"aten::fft_hfft2", {Form::C2R, false, true, 2}},   {"aten::fft_hfftn", {Form::C2R, false, true, 0}},
  };
  for (const auto& [name, op] : ops) {
    FftOp o = op;
    t[name] = {[o](Ctx& c, const TNode* n) { fft(c, n, o); }};
  }
}

}  // namespace t2o::cplx
