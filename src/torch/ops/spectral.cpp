// Short-time Fourier transforms and the layout ops on complex tensors (the pair layout of
// ops/complex.h); complex_op_table() gathers every converter that may be given a complex tensor.
#include <algorithm>
#include <cmath>

#include "torch/ops/complex.h"
#include "torch/profile.h"

namespace t2o {
namespace {

using cplx::is_complex;
using cplx::pair_axis;
using cplx::pair_of;
using cplx::real_of;
using cplx::set_complex;

// The `window` argument of stft/istft centred in n_fft samples, as torch pads a shorter one
// (rectangular when none is given).
std::string centred_window(Ctx& c, const TNode* n, int64_t n_fft, int64_t win_length, DType t) {
  const TV* wv = c.arg(n, "window");
  std::string window;
  if (wv && !wv->is_none()) window = c.tensor_as(*wv, t);
  else window = c.b.op1("Expand", {c.b.scalar(1.0, t), c.b.i64s({win_length})});
  if (win_length < n_fft) {
    int64_t left = (n_fft - win_length) / 2;
    window = c.b.pad(window, {left, n_fft - win_length - left}, "constant", 0.0, t);
  }
  return window;
}

// aten::stft(x, n_fft, hop_length, win_length, window, normalized, onesided, return_complex):
// STFT over frames of n_fft samples (torch pads a shorter window on both sides to n_fft).
// The result is [batch, n_fft/2 + 1 (onesided) or n_fft, frames] complex, held as the pair
// tensor; return_complex=False gives that same layout as a real tensor.
void stft(Ctx& c, const TNode* n) {
  int64_t n_fft = c.i(n, "n_fft", 0);
  int r = c.rank(n, 0);
  if (r != 1 && r != 2) throw UnsupportedError("aten::stft of a tensor that is not 1-D or 2-D");
  int64_t hop = c.i(n, "hop_length", n_fft / 4);
  int64_t win_length = c.i(n, "win_length", n_fft);
  bool normalized = c.flag(n, "normalized", false);
  const TV* onesided_v = c.arg(n, "onesided");
  bool onesided = !onesided_v || onesided_v->is_none() || onesided_v->c.toBool();
  const TV* ret_complex = c.arg(n, "return_complex");
  bool as_complex = ret_complex && !ret_complex->is_none() && ret_complex->c.toBool();
  DType t = c.dtype(n, 0);
  if (t != DType::Float && t != DType::Double) throw UnsupportedError("aten::stft of a non-float signal");
  if (win_length > n_fft || win_length <= 0 || hop <= 0) throw Error("aten::stft: invalid win_length or hop_length");
  std::string x = c.t(n, 0);
  if (r == 1) x = c.b.unsqueeze(x, {0});
  // stft.center (files of newer PyTorch): the signal padded by n_fft / 2 on both sides first.
  if (c.flag(n, "center", false)) {
    const TV* mode_v = c.arg(n, "pad_mode");
    std::string mode = mode_v && mode_v->is_const() && mode_v->c.isString() ? mode_v->c.toStringRef() : "reflect";
    std::string onnx_mode = mode == "reflect" ? "reflect" : mode == "constant" ? "constant" : mode == "replicate" ? "edge" : "";
    if (onnx_mode.empty()) throw UnsupportedError("aten::stft with pad_mode '" + mode + "'");
    x = c.b.pad(x, {0, n_fft / 2, 0, n_fft / 2}, onnx_mode, 0.0, t);
  }
  std::string window = centred_window(c, n, n_fft, win_length, t);
  // Frames gathered and windowed, then a DFT of each: the same values as ONNX's STFT op, whose
  // shape inference in onnx 1.12 counts ceil((length - n_fft / 2) / hop) frames and so fails the
  // checker on static lengths. idx[f, k] = f * hop + k, for f < (length - n_fft) / hop + 1.
  std::string length = c.b.dim(x, 1);
  std::string frames = c.b.op1("Add", {c.b.op1("Div", {c.b.op1("Sub", {length, c.b.i64(n_fft)}), c.b.i64(hop)}),
                                      c.b.i64(1)});
  std::string starts = c.b.op1("Mul", {arange_of(c, frames), c.b.i64(hop)});
  std::string idx = c.b.op1("Add", {c.b.unsqueeze(starts, {1}), c.b.unsqueeze(positions(c, n_fft), {0})});
  std::string framed = c.b.op1("Gather", {x, idx}, {Attribute::make_int("axis", 1)});  // [batch, frames, n_fft]
  framed = c.b.op1("Mul", {framed, window});
  // One MatMul with the DFT basis, columns (cos, -sin) per bin computed in double, then
  // [.., bins * 2] -> [.., bins, 2]: at every opset (ONNX Runtime's DFT op, opset 17, was off by
  // 3e-5 on PyTorch's stft samples where the product matches).
  int64_t bins = onesided ? n_fft / 2 + 1 : n_fft;
  std::string spec = c.b.op1("MatMul", {framed, cplx::real_dft_basis(c, n_fft, bins, t)});
  spec = c.b.op1("Reshape", {spec, c.b.i64s({0, 0, bins, 2})});
  // spec: [batch, frames, bins, 2]
  spec = c.b.transpose(spec, {0, 2, 1, 3});  // torch: [batch, bins, frames]
  if (normalized) spec = c.b.op1("Mul", {spec, c.b.scalar(1.0 / std::sqrt(static_cast<double>(n_fft)), t)});
  if (r == 1) spec = c.b.squeeze(spec, {0});
  std::vector<int64_t> shape = c.out_shape(n);
  if (!as_complex) return c.out(n, spec);
  if (shape.size() != static_cast<size_t>(r + 1)) shape.assign(static_cast<size_t>(r + 1), -1);
  set_complex(c, n, spec, t == DType::Double ? DType::Complex128 : DType::Complex64, shape);
}

// |z| = sqrt(re^2 + im^2)
void complex_abs(Ctx& c, const TNode* n) {
  DType t;
  std::string z = pair_of(c, n, 0, t);
  c.out(n, c.b.op1("Sqrt", {c.b.reduce("ReduceSum", c.b.op1("Mul", {z, z}), {pair_axis(c, c.in(n, 0))}, false)}));
}

void view_as_real(Ctx& c, const TNode* n) {
  DType t;
  c.out(n, pair_of(c, n, 0, t));
}

void part(Ctx& c, const TNode* n, int64_t k) {
  DType t;
  std::string z = pair_of(c, n, 0, t);
  int64_t a = pair_axis(c, c.in(n, 0));
  c.out(n, c.b.squeeze(c.b.op1("Gather", {z, c.b.i64s({k})}, {Attribute::make_int("axis", a)}), {a}));
}
void real(Ctx& c, const TNode* n) { part(c, n, 0); }
void imag(Ctx& c, const TNode* n) { part(c, n, 1); }

// reshape/view of a complex tensor: the pair dim stays last.
void complex_reshape(Ctx& c, const TNode* n) {
  const TV& z = c.in(n, 0);
  DType t;
  std::string pair = pair_of(c, n, 0, t);
  std::string shape = c.b.concat({c.ints_tensor(c.in(n, 1)), c.b.i64s({2})}, 0);
  set_complex(c, n, c.b.op1("Reshape", {pair, shape}), z.dtype, c.out_shape(n));
}

// Layout ops on complex tensors: the op itself on the pair tensors, which must leave their last
// (real, imaginary) dim alone. Dims become non-negative against the complex rank, a permutation
// keeps the pair dim last, pads (last dim first) get none for it; a result is complex again with
// the shape torch gave it.
void complex_layout(Ctx& c, const TNode* n) {
  const std::string kind = n->kind().toQualString();
  int rank = -1;
  DType ct = DType::Undefined;
  auto note = [&](const TV& z) {
    if (z.kind != TV::Kind::Tensor || !is_complex(z.dtype)) return;
    if (!z.rank_known) throw UnsupportedError(kind + " of a complex tensor of unknown rank");
    if (rank >= 0 && rank != static_cast<int>(z.shape.size()))
      throw UnsupportedError(kind + " of complex tensors of different ranks (" + std::to_string(rank) + ", " + std::to_string(z.shape.size()) + ")");
    rank = static_cast<int>(z.shape.size());
    ct = z.dtype;
  };
  for (const TValue* v : n->inputs()) {
    const TV& x = c.get(v);
    note(x);
    if (x.kind == TV::Kind::List)
      for (const TV& it : x.items) note(it);
  }
  if (rank < 0) throw UnsupportedError(kind + " expects a complex tensor");
  std::vector<std::pair<const TValue*, TV>> saved;
  auto sub = [&](const TValue* v, TV nv) {
    saved.emplace_back(v, c.get(v));
    c.set(v, std::move(nv));
  };
  auto as_pair = [&](const TV& z) {
    if (z.kind != TV::Kind::Tensor || !is_complex(z.dtype)) return z;  // an index, sizes, a number
    TV r = TV::tensor(z.name, real_of(z.dtype));
    r.shape = z.shape;
    r.shape.push_back(2);
    r.rank_known = true;
    return r;
  };
  // Constant dim arguments made non-negative (`extra`: a dim of the result, one rank larger).
  auto dims = [&](const char* name, int extra) {
    auto k = Ctx::arg_index(n, name);
    if (!k || c.is_none(n, *k)) return;
    const TV& d = c.in(n, *k);
    if (!d.is_const()) throw UnsupportedError(kind + " of a complex tensor along a computed dim");
    auto fix = [&](int64_t v) { return v < 0 ? v + rank + extra : v; };
    if (d.c.isInt()) {
      sub(n->input(*k), TV::constant(c10::IValue(fix(d.c.toInt()))));
    } else if (d.c.isIntList()) {
      std::vector<int64_t> l = d.c.toIntVector();
      for (int64_t& v : l) v = fix(v);
      if (kind == "aten::permute") l.push_back(rank);
      sub(n->input(*k), TV::constant(c10::IValue(l)));
    }
  };
  bool pads = kind == "aten::constant_pad_nd" || kind == "aten::pad";
  try {
    for (const TValue* v : n->inputs()) {
      const TV& x = c.get(v);
      if (x.kind == TV::Kind::List) {
        // cat / stack: every part complex (a real part would need its zero imaginary half); a
        // list of sizes or dims stays as it is.
        if (std::none_of(x.items.begin(), x.items.end(), [](const TV& it) { return is_complex(it); })) continue;
        TV l = x;
        for (TV& it : l.items) {
          if (it.kind != TV::Kind::Tensor || !is_complex(it.dtype))
            throw UnsupportedError(kind + " of complex and real tensors");
          it = as_pair(it);
        }
        sub(v, l);
      } else if (x.kind == TV::Kind::Tensor) {
        sub(v, as_pair(x));
      }
    }
    if (kind == "aten::transpose") {
      dims("dim0", 0);
      dims("dim1", 0);
    } else if (kind == "aten::flatten") {
      dims("start_dim", 0);
      dims("end_dim", 0);
    } else if (kind == "aten::unsqueeze" || kind == "aten::stack") {
      dims("dim", 1);
    } else if (kind == "aten::permute" || kind == "aten::flip" || kind == "aten::roll") {
      // roll without dims rolls the flattened tensor, pair dims included: not a layout op here.
      if (kind == "aten::roll" && (c.is_none(n, 2) || (c.is_const(n, 2) && c.ints(n, 2).empty())))
        throw UnsupportedError("aten::roll of a complex tensor without dims");
      dims("dims", 0);
    } else if (pads) {
      if (!c.is_const(n, 1)) throw UnsupportedError(kind + " of a complex tensor by computed pads");
      std::vector<int64_t> p = c.ints(n, 1);
      if (kind == "aten::pad") {
        const TV& mode = c.in(n, 2);
        if (!mode.is_const() || !mode.c.isString() || mode.c.toStringRef() != "constant")
          throw UnsupportedError("aten::pad of a complex tensor in a mode other than constant");
      }
      size_t vi = kind == "aten::pad" ? 3 : 2;
      if (n->inputs().size() > vi && !c.is_none(n, vi) && (!c.is_const(n, vi) || c.f(n, vi) != 0.0))
        throw UnsupportedError(kind + " of a complex tensor with a value other than 0");
      // torch's pads run from the last dim back, (begin, end) each; ONNX's are all begins, then all ends.
      if (p.size() % 2 || static_cast<int>(p.size() / 2) > rank) throw Error(kind + ": invalid pads");
      std::vector<int64_t> onnx_pads(static_cast<size_t>(2 * (rank + 1)), 0);
      for (size_t k = 0; k < p.size() / 2; ++k) {
        size_t axis = static_cast<size_t>(rank - 1) - k;
        onnx_pads[axis] = p[2 * k];
        onnx_pads[axis + static_cast<size_t>(rank + 1)] = p[2 * k + 1];
      }
      DType rt = real_of(ct);
      std::string y = c.b.pad(c.in(n, 0).name, onnx_pads, "constant", 0.0, rt);
      for (auto it = saved.rbegin(); it != saved.rend(); ++it) c.set(it->first, it->second);
      return set_complex(c, n, y, ct, c.out_shape(n));
    } else {
      dims("dim", 0);
    }
    c.complex_pairs = true;
    op_table().at(kind).fn(c, n);
    c.complex_pairs = false;
  } catch (...) {
    c.complex_pairs = false;
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) c.set(it->first, it->second);
    throw;
  }
  for (auto it = saved.rbegin(); it != saved.rend(); ++it) c.set(it->first, it->second);
  for (size_t k = 0; k < n->outputs().size(); ++k) {
    const TValue* o = n->output(k);
    TV r = c.get(o);
    // The complex shape profiling saw; else the pair shape the converter gave, less the pair dim.
    auto back = [&](TV& x, const Observed* ob) {
      if (x.kind != TV::Kind::Tensor) return;
      x.dtype = ct;
      if (ob && ob->kind == Observed::Kind::Tensor && ob->rank_known) x.shape = ob->sizes;
      else if (x.rank_known && !x.shape.empty()) x.shape.pop_back();
      else throw UnsupportedError(kind + " of a complex tensor: a result of unknown rank");
      x.rank_known = true;
    };
    const Observed* ob = c.observed(o);
    if (r.kind == TV::Kind::List) {
      for (size_t i = 0; i < r.items.size(); ++i)
        back(r.items[i], ob && ob->elems.size() == r.items.size() ? &ob->elems[i] : nullptr);
    } else {
      back(r, ob);
    }
    c.get_mut(o) = r;
  }
}

// aten::view_as_complex(x): x's last dim of 2 is the (real, imaginary) pair already.
void view_as_complex(Ctx& c, const TNode* n) {
  const TV& x = c.in(n, 0);
  DType t = c.dtype(n, 0);
  if (t != DType::Float && t != DType::Double) throw UnsupportedError("aten::view_as_complex of a non-float tensor");
  if (!x.rank_known || x.shape.empty()) throw UnsupportedError("aten::view_as_complex of a tensor of unknown rank");
  std::vector<int64_t> shape(x.shape.begin(), x.shape.end() - 1);
  set_complex(c, n, c.t(n, 0), t == DType::Double ? DType::Complex128 : DType::Complex64, shape);
}

// Overlap-add of frames [B, F, n] placed `hop` apart: [B, n + hop * (F - 1)]. Each frame, padded
// with zeros to a multiple of hop, is `blocks` blocks of hop samples; block r of frame f lands on
// block f + r, so the sum over r of the frames' blocks shifted by r (padding on the frames axis) is
// the result, cut to its length when the frames were padded.
std::string overlap_add(Ctx& c, const std::string& frames, int64_t n, int64_t hop, DType t) {
  int64_t blocks = (n + hop - 1) / hop;
  std::string padded = frames;
  if (blocks * hop != n) padded = c.b.pad(frames, {0, 0, 0, 0, 0, blocks * hop - n}, "constant", 0.0, t);
  std::string b4 = c.b.op1("Reshape", {padded, c.b.i64s({0, 0, blocks, hop})});
  std::string sum;
  for (int64_t r = 0; r < blocks; ++r) {
    std::string part = c.b.squeeze(c.b.slice(b4, {r}, {r + 1}, {2}), {2});  // [B, F, hop]
    part = c.b.pad(part, {0, r, 0, 0, blocks - 1 - r, 0}, "constant", 0.0, t);
    sum = sum.empty() ? part : c.b.op1("Add", {sum, part});
  }
  std::string y = c.b.op1("Reshape", {sum, c.b.i64s({0, -1})});
  if (blocks * hop == n) return y;
  // The padding's zeros past the last frame: n - blocks * hop samples too many.
  return c.b.slice(y, {0}, {n - blocks * hop}, {1});
}

// aten::istft(z, n_fft, hop_length, win_length, window, center, normalized, onesided, length,
// return_complex): each frame's irfft (one MatMul with the inverse basis: the inner bins count
// twice, the imaginary parts of DC and Nyquist not; of a two-sided spectrum only the first
// n_fft / 2 + 1 bins, as torch does for a real result), windowed, overlap-added and divided by the overlap-added squared window; centre
// padding trimmed, `length` cut or zero-padded.
void istft(Ctx& c, const TNode* n) {
  TV z = c.in(n, 0);
  DType t;
  std::string pair;
  if (z.kind == TV::Kind::Tensor && is_complex(z.dtype)) {
    pair = pair_of(c, n, 0, t);
  } else {  // the older real form: the last dim of 2 holds (real, imaginary)
    t = c.dtype(n, 0);
    if ((t != DType::Float && t != DType::Double) || !z.rank_known || z.shape.empty() || z.shape.back() != 2)
      throw UnsupportedError("aten::istft of a real tensor whose last dim is not 2 (real, imaginary)");
    pair = c.t(n, 0);
    z.shape.pop_back();
  }
  if (!z.rank_known || (z.shape.size() != 2 && z.shape.size() != 3))
    throw UnsupportedError("aten::istft of a spectrum that is not 2-D or 3-D");
  int64_t n_fft = c.i(n, "n_fft", 0);
  int64_t hop = c.i(n, "hop_length", n_fft / 4);
  int64_t win_length = c.i(n, "win_length", n_fft);
  bool center = c.flag(n, "center", true);
  bool normalized = c.flag(n, "normalized", false);
  if (c.flag(n, "return_complex", false)) throw UnsupportedError("aten::istft with return_complex=True");
  if (hop <= 0 || win_length <= 0 || win_length > n_fft) throw Error("aten::istft: invalid win_length or hop_length");
  bool batched = z.shape.size() == 3;
  int64_t bins = z.shape[batched ? 1 : 0];
  const TV* os = c.arg(n, "onesided");
  bool onesided = os && !os->is_none() ? os->c.toBool() : bins != n_fft;
  if (bins < 0) bins = onesided ? n_fft / 2 + 1 : n_fft;
  if (bins != (onesided ? n_fft / 2 + 1 : n_fft))
    throw Error("aten::istft: the spectrum has " + std::to_string(bins) + " bins, n_fft " + std::to_string(n_fft) +
                " wants " + std::to_string(onesided ? n_fft / 2 + 1 : n_fft));
  std::string spec = batched ? pair : c.b.unsqueeze(pair, {0});  // [B, bins, F, 2]
  spec = c.b.transpose(spec, {0, 2, 1, 3});                        // [B, F, bins, 2]
  spec = c.b.op1("Reshape", {spec, c.b.i64s({0, 0, bins * 2})});
  // x[j] = sum_k w_k (re_k cos(2 pi jk / n) - im_k sin(2 pi jk / n)) / n
  at::Tensor basis = at::zeros({bins, 2, n_fft}, at::kDouble);
  auto acc = basis.accessor<double, 3>();
  double scale = normalized ? 1.0 / std::sqrt(static_cast<double>(n_fft)) : 1.0 / static_cast<double>(n_fft);
  // A real result is always irfft's (torch drops the bins past n_fft / 2 of a two-sided spectrum).
  for (int64_t k = 0; k <= n_fft / 2; ++k) {
    bool edge = k == 0 || (n_fft % 2 == 0 && k == n_fft / 2);
    double w = edge ? 1.0 : 2.0;
    for (int64_t j = 0; j < n_fft; ++j) {
      double angle = 2.0 * M_PI * static_cast<double>((j * k) % n_fft) / static_cast<double>(n_fft);
      acc[k][0][j] = w * scale * std::cos(angle);
      acc[k][1][j] = edge ? 0.0 : -w * scale * std::sin(angle);
    }
  }
  basis = basis.reshape({bins * 2, n_fft}).to(t == DType::Double ? at::kDouble : at::kFloat);
  std::string frames = c.b.op1("MatMul", {spec, c.b.constant(tensor_from_torch(basis), "idft_basis")});  // [B, F, n]
  std::string window = centred_window(c, n, n_fft, win_length, t);
  std::string y = overlap_add(c, c.b.op1("Mul", {frames, window}), n_fft, hop, t);
  std::string ones = c.b.op1("Expand", {c.b.scalar(1.0, t), c.b.shape_of(frames)});
  std::string env = overlap_add(c, c.b.op1("Mul", {ones, c.b.op1("Mul", {window, window})}), n_fft, hop, t);
  int64_t start = center ? n_fft / 2 : 0;
  const TV* lv = c.arg(n, "length");
  std::string total = c.b.unsqueeze(c.b.dim(y, 1), {0});
  std::string end, want;
  if (lv && !lv->is_none()) {
    want = lv->is_const() ? c.b.i64s({lv->c.toInt()}) : c.b.unsqueeze(c.int_tensor(*lv), {0});
    end = c.b.op1("Add", {want, c.b.i64s({start})});
  } else {
    end = c.b.op1("Sub", {total, c.b.i64s({center ? n_fft / 2 : 0})});
  }
  std::string ends = c.b.op1("Min", {end, total});
  auto cut = [&](const std::string& v) { return c.b.slice_dyn(v, c.b.i64s({start}), ends, c.b.i64s({1})); };
  y = c.b.op1("Div", {cut(y), cut(env)});
  if (!want.empty()) {  // zero-padded up to `length`
    std::string missing = c.b.op1("Max", {c.b.op1("Sub", {end, total}), c.b.i64s({0})});
    y = pad_end(c, y, 2, c.b.concat({c.b.i64s({0}), missing}, 0), 0.0, t, {1});
  }
  if (!batched) y = c.b.squeeze(y, {0});
  c.out(n, y);
}

}  // namespace

void register_spectral_ops(OpTable& t) {
  cplx::add_complex_arith_ops(t, false);
  cplx::add_fft_ops(t, false);
  t["aten::stft"] = {stft};
  t["aten::view_as_complex"] = {view_as_complex};
  t["aten::istft"] = {istft, 10};
}

const OpTable& complex_op_table() {
  static const OpTable table = [] {
    OpTable t;
    cplx::add_complex_arith_ops(t, true);
    cplx::add_fft_ops(t, true);
    t["aten::abs"] = {complex_abs};
    t["aten::view_as_real"] = {view_as_real};
    t["aten::real"] = {real};
    t["aten::imag"] = {imag};
    t["aten::reshape"] = {complex_reshape};
    t["aten::view"] = {complex_reshape};
    t["aten::istft"] = {istft};
    for (const char* k : {"aten::slice", "aten::select", "aten::narrow", "aten::transpose", "aten::permute",
                          "aten::unsqueeze", "aten::squeeze", "aten::flip", "aten::cat", "aten::stack", "aten::chunk",
                          "aten::split", "aten::unbind", "aten::index_select", "aten::flatten",
                          "aten::constant_pad_nd", "aten::pad", "aten::roll"})
      t[k] = {complex_layout};
    return t;
  }();
  return table;
}

}  // namespace t2o
