// Short-time Fourier transforms and the complex tensors they return. ONNX has no complex type: a
// complex tensor of shape S is held as a real tensor of shape S + [2] (real, imaginary), the
// layout of ONNX's STFT/DFT outputs and of torch.view_as_real. The TV keeps the logical (complex)
// shape and a Complex64/Complex128 dtype, so aten::size reads the complex dims. Only the ops in
// complex_op_table() see such values; any other op given one is reported unsupported, so an op
// that does not know the layout can never compute on it as if it were real.
#include <cmath>

#include "torch/ops/compose.h"

namespace t2o {
namespace {

bool is_complex(DType t) { return t == DType::Complex64 || t == DType::Complex128; }
DType real_of(DType t) { return t == DType::Complex128 ? DType::Double : DType::Float; }

// A complex value's real pair tensor and its real element type.
std::string pair_of(Ctx& c, const TNode* n, size_t i, DType& real) {
  const TV& v = c.in(n, i);
  if (v.kind != TV::Kind::Tensor || !is_complex(v.dtype))
    throw UnsupportedError(std::string(n->kind().toQualString()) + " expects a complex tensor");
  real = real_of(v.dtype);
  return v.name;
}

// The index of the (real, imaginary) dim of a complex value's pair tensor: -1 from opset 11, where
// Squeeze/Unsqueeze/Reduce take negative axes; before, its logical rank.
int64_t pair_axis(Ctx& c, const TV& z) {
  if (c.b.opset() >= 11) return -1;
  if (!z.rank_known) throw UnsupportedError("a complex tensor of unknown rank before opset 11");
  return static_cast<int64_t>(z.shape.size());
}

void set_complex(Ctx& c, const TNode* n, const std::string& pair, DType complex, std::vector<int64_t> shape) {
  TV r = TV::tensor(pair, complex);
  r.shape = std::move(shape);
  r.rank_known = true;
  c.set(n->output(), r);
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
  // The window, centred in n_fft samples (rectangular when none is given).
  const TV* wv = c.arg(n, "window");
  std::string window;
  if (wv && !wv->is_none()) window = c.tensor_as(*wv, t);
  else window = c.b.op1("Expand", {c.b.scalar(1.0, t), c.b.i64s({win_length})});
  if (win_length < n_fft) {
    int64_t left = (n_fft - win_length) / 2;
    window = c.b.pad(window, {left, n_fft - win_length - left}, "constant", 0.0, t);
  }
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
  std::string spec;
  if (c.b.opset() >= 17) {
    spec = c.b.op1("DFT", {c.b.unsqueeze(framed, {3})},
                   {Attribute::make_int("axis", 2), Attribute::make_int("onesided", onesided ? 1 : 0)});
  } else {
    // Before DFT (opset 17): one MatMul with the DFT basis, columns (cos, -sin) per bin computed in
    // double, then [.., bins * 2] -> [.., bins, 2].
    int64_t bins = onesided ? n_fft / 2 + 1 : n_fft;
    at::Tensor basis = at::empty({n_fft, bins, 2}, at::kDouble);
    auto acc = basis.accessor<double, 3>();
    for (int64_t j = 0; j < n_fft; ++j)
      for (int64_t k = 0; k < bins; ++k) {
        // (j * k) mod n_fft keeps the angle small, so cos/sin stay exact for long frames.
        double angle = 2.0 * M_PI * static_cast<double>((j * k) % n_fft) / static_cast<double>(n_fft);
        acc[j][k][0] = std::cos(angle);
        acc[j][k][1] = -std::sin(angle);
      }
    basis = basis.reshape({n_fft, bins * 2}).to(t == DType::Double ? at::kDouble : at::kFloat);
    spec = c.b.op1("MatMul", {framed, c.b.constant(tensor_from_torch(basis), "dft_basis")});
    spec = c.b.op1("Reshape", {spec, c.b.i64s({0, 0, bins, 2})});
  }
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

// complex times / divided by a real number or a real tensor that broadcasts against it.
void complex_scale(Ctx& c, const TNode* n, const char* op) {
  const TV& z = c.in(n, 0);
  DType t;
  std::string pair = pair_of(c, n, 0, t);
  const TV& s = c.in(n, 1);
  if (s.kind == TV::Kind::Tensor && is_complex(s.dtype))
    throw UnsupportedError(std::string(n->kind().toQualString()) + " of two complex tensors");
  std::string k = c.tensor_as(s, t);
  if (!(s.is_const() && !s.c.isTensor()) && !s.number) {
    if (c.b.opset() < 11 && !s.rank_known && !s.is_const())
      throw UnsupportedError(std::string(n->kind().toQualString()) + " by a tensor of unknown rank before opset 11");
    int64_t a = c.b.opset() >= 11 ? -1 : s.is_const() ? s.c.toTensor().dim() : static_cast<int64_t>(s.shape.size());
    k = c.b.unsqueeze(k, {a});
  }
  set_complex(c, n, c.b.op1(op, {pair, k}), z.dtype, c.out_shape(n));
}
void complex_mul(Ctx& c, const TNode* n) { complex_scale(c, n, "Mul"); }
void complex_div(Ctx& c, const TNode* n) { complex_scale(c, n, "Div"); }

}  // namespace

void register_spectral_ops(OpTable& t) { t["aten::stft"] = {stft}; }

const OpTable& complex_op_table() {
  static const OpTable table = [] {
    OpTable t;
    t["aten::abs"] = {complex_abs};
    t["aten::view_as_real"] = {view_as_real};
    t["aten::real"] = {real};
    t["aten::imag"] = {imag};
    t["aten::reshape"] = {complex_reshape};
    t["aten::view"] = {complex_reshape};
    t["aten::mul"] = {complex_mul};
    t["aten::div"] = {complex_div};
    return t;
  }();
  return table;
}

}  // namespace t2o
