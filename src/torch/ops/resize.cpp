// Padding (constant/reflect/replicate/circular), interpolation (nearest, nearest-exact, linear,
// bilinear, trilinear, bicubic with align_corners), pixel shuffle.
#include <algorithm>
#include <cmath>

#include "torch/ops/ops.h"

namespace t2o {
namespace {

// torch pads the last dim first ([l, r, t, b, ...]); ONNX lists all begins then all ends.
std::vector<int64_t> onnx_pads(const std::vector<int64_t>& p, int r) {
  std::vector<int64_t> pads(static_cast<size_t>(2 * r), 0);
  for (size_t i = 0; i + 1 < p.size(); i += 2) {
    size_t dim = static_cast<size_t>(r - 1) - i / 2;
    pads[dim] = p[i];
    pads[dim + static_cast<size_t>(r)] = p[i + 1];
  }
  return pads;
}

void emit_pad(Ctx& c, const TNode* n, const std::string& mode, double value) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  auto p = c.ints(n, 1);
  std::string x = c.t_as(n, 0, t);
  if (mode == "circular") {
    auto shape = c.shape(n, 0);
    for (size_t i = 0; i + 1 < p.size(); i += 2) {
      int64_t axis = r - 1 - static_cast<int64_t>(i / 2), len = shape[static_cast<size_t>(axis)];
      int64_t lo = p[i], hi = p[i + 1];
      if (len < 0) throw UnsupportedError("circular padding of a dynamic dimension");
      std::vector<std::string> parts;
      if (lo > 0) parts.push_back(c.b.slice(x, {len - lo}, {len}, {axis}));
      parts.push_back(x);
      if (hi > 0) parts.push_back(c.b.slice(x, {0}, {hi}, {axis}));
      x = c.b.concat(parts, axis);
    }
    return c.out(n, x);
  }
  c.out(n, c.b.pad(x, onnx_pads(p, r), mode, value, t));
}

void constant_pad(Ctx& c, const TNode* n) { emit_pad(c, n, "constant", n->inputs().size() > 2 ? c.f(n, 2) : 0.0); }
void reflection_pad(Ctx& c, const TNode* n) { emit_pad(c, n, "reflect", 0); }
void replication_pad(Ctx& c, const TNode* n) { emit_pad(c, n, "edge", 0); }

// aten::pad(x, pad, mode, value)
void pad(Ctx& c, const TNode* n) {
  std::string mode = c.str(n, 2);
  double value = c.is_none(n, 3) ? 0.0 : c.f(n, 3);
  if (mode == "replicate") mode = "edge";
  emit_pad(c, n, mode, value);
}

struct Interp {
  std::string mode;        // nearest, linear, cubic
  std::string coord;       // coordinate_transformation_mode
  std::string nearest;     // nearest_mode
};

// Output position i of an axis of length in -> out reads input taps idx[k][i] with weights w[k][i], as
// torch computes them (area_pixel_compute_source_index; cubic with A = -0.75 and clamped taps).
struct Taps {
  std::vector<std::vector<int64_t>> idx;
  std::vector<std::vector<double>> w;
};

Taps resize_taps(const Interp& m, int64_t in, int64_t out) {
  double scale = static_cast<double>(in) / static_cast<double>(out);
  bool align = m.coord == "align_corners";
  if (align) scale = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  size_t k = m.mode == "nearest" ? 1 : m.mode == "linear" ? 2 : 4;
  Taps t{std::vector<std::vector<int64_t>>(k), std::vector<std::vector<double>>(k)};
  auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v, 0, in - 1); };
  for (int64_t i = 0; i < out; ++i) {
    double x = static_cast<double>(i);
    if (m.mode == "nearest") {
      double src = m.coord == "asymmetric" ? x * scale : (x + 0.5) * scale;  // nearest / nearest-exact
      t.idx[0].push_back(std::min(static_cast<int64_t>(std::floor(src)), in - 1));
      t.w[0].push_back(1.0);
      continue;
    }
    double src = align ? x * scale : (x + 0.5) * scale - 0.5;
    if (m.mode == "linear" && src < 0) src = 0;
    int64_t i0 = static_cast<int64_t>(std::floor(src));
    double f = src - static_cast<double>(i0);
    if (m.mode == "linear") {
      t.idx[0].push_back(clamp(i0));
      t.idx[1].push_back(clamp(i0 + 1));
      t.w[0].push_back(1.0 - f);
      t.w[1].push_back(f);
      continue;
    }
    const double a = -0.75;
    auto near = [&](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
    auto far = [&](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
    double w[4] = {far(f + 1), near(f), near(1 - f), far(2 - f)};
    for (size_t j = 0; j < 4; ++j) {
      t.idx[j].push_back(clamp(i0 - 1 + static_cast<int64_t>(j)));
      t.w[j].push_back(w[j]);
    }
  }
  return t;
}

// Interpolation as Gathers of constant taps times constant weights, one spatial axis after the
// other: what opsets 9 and 10 can say exactly (their Upsample/Resize have only asymmetric coordinates).
std::string resize_by_gather(Ctx& c, std::string x, const Interp& m, const std::vector<int64_t>& in,
                             const std::vector<int64_t>& out, DType t) {
  int64_t r = static_cast<int64_t>(in.size());
  for (int64_t axis = 2; axis < r; ++axis) {
    int64_t li = in[static_cast<size_t>(axis)], lo = out[static_cast<size_t>(axis)];
    if (li == lo) continue;  // every mode maps i to i
    Taps taps = resize_taps(m, li, lo);
    Dims wdims(static_cast<size_t>(r - axis), 1);
    wdims[0] = lo;
    std::string acc;
    for (size_t k = 0; k < taps.idx.size(); ++k) {
      std::string g = c.b.op1("Gather", {x, c.b.i64s(taps.idx[k])}, {Attribute::make_int("axis", axis)});
      if (m.mode != "nearest") {
        Tensor w(t, wdims);
        dispatch_dtype(t, [&](auto tag) {
          using T = decltype(tag);
          for (size_t i = 0; i < taps.w[k].size(); ++i) {
            if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
              w.data<T>()[i] = T(static_cast<float>(taps.w[k][i]));
            else
              w.data<T>()[i] = static_cast<T>(taps.w[k][i]);
          }
        });
        g = c.b.op1("Mul", {g, c.b.constant(w, "resize_weights")});
      }
      acc = acc.empty() ? g : c.b.op1("Add", {acc, g});
    }
    x = acc;
  }
  return x;
}

void emit_resize(Ctx& c, const TNode* n, const Interp& m) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t);
  std::vector<int64_t> in = c.shape(n, 0), out = c.out_shape(n);
  size_t r = in.size();
  bool spatial_static = true;
  std::vector<double> scales;
  for (size_t i = 0; i < r; ++i) {
    if (i >= 2 && (in[i] < 0 || out[i] < 0)) spatial_static = false;
    scales.push_back(i < 2 || !spatial_static ? 1.0 : static_cast<double>(out[i]) / static_cast<double>(in[i]));
  }
  if (!spatial_static) throw UnsupportedError(std::string(n->kind().toQualString()) + " with dynamic spatial sizes");
  if (c.b.opset() < 11) {
    // Upsample (9) and Resize (10) pick floor(i / scale): torch's nearest when every scale is whole.
    bool whole = true;
    for (double s : scales) whole = whole && s == std::floor(s);
    if (m.mode != "nearest" || m.coord != "asymmetric" || !whole || !dtype_is_float(t))
      return c.out(n, resize_by_gather(c, x, m, in, out, t));
    std::string sc = c.b.vec(scales, DType::Float);
    if (c.b.opset() < 10) return c.out(n, c.b.op1("Upsample", {x, sc}, {Attribute::make_string("mode", m.mode)}));
    return c.out(n, c.b.op1("Resize", {x, sc}, {Attribute::make_string("mode", m.mode)}));
  }
  std::vector<Attribute> attrs{Attribute::make_string("mode", m.mode),
                               Attribute::make_string("coordinate_transformation_mode", m.coord)};
  if (m.mode == "nearest") attrs.push_back(Attribute::make_string("nearest_mode", m.nearest));
  if (m.mode == "cubic") attrs.push_back(Attribute::make_float("cubic_coeff_a", -0.75f));
  // Sizes keep N and C from the input, so a dynamic batch still works.
  std::vector<int64_t> spatial(out.begin() + 2, out.end());
  std::string sizes;
  if (in[0] >= 0 && in[1] >= 0) {
    sizes = c.b.i64s(out);
  } else {
    std::string nc = c.b.slice(c.b.shape_of(x), {0}, {2}, {0});
    sizes = c.b.concat({nc, c.b.i64s(spatial)}, 0);
  }
  std::string roi = c.b.opset() >= 13 ? std::string() : c.b.vec({}, DType::Float);
  std::string empty_scales = c.b.vec({}, DType::Float);
  c.out(n, c.b.op1("Resize", {x, roi, c.b.opset() >= 13 ? std::string() : empty_scales, sizes}, attrs));
}

void nearest(Ctx& c, const TNode* n) { emit_resize(c, n, {"nearest", "asymmetric", "floor"}); }
void nearest_exact(Ctx& c, const TNode* n) { emit_resize(c, n, {"nearest", "tf_half_pixel_for_nn", "floor"}); }

// aten::upsample_{linear1d,bilinear2d,trilinear3d,bicubic2d}(x, output_size, align_corners, ...)
void linear(Ctx& c, const TNode* n, const std::string& mode) {
  bool align = c.flag(n, 2);
  emit_resize(c, n, {mode, align ? "align_corners" : "pytorch_half_pixel", ""});
}
void bilinear(Ctx& c, const TNode* n) { linear(c, n, "linear"); }
void bicubic(Ctx& c, const TNode* n) { linear(c, n, "cubic"); }

void pixel_shuffle(Ctx& c, const TNode* n) {
  int64_t r = c.i(n, 1);
  std::string x = c.t(n, 0);
  if (c.rank(n, 0) == 4 && c.b.opset() >= 11)
    return c.out(n, c.b.op1("DepthToSpace", {x}, {Attribute::make_int("blocksize", r), Attribute::make_string("mode", "CRD")}));
  auto in = c.shape(n, 0);
  if (in.size() != 4) throw UnsupportedError("pixel_shuffle on a non-4-D tensor");
  auto out = c.out_shape(n);
  std::string y = c.b.reshape(x, {0, out[1], r, r, in[2], in[3]});
  y = c.b.transpose(y, {0, 1, 4, 2, 5, 3});
  c.out(n, c.b.reshape(y, {0, out[1], out[2], out[3]}));
}

void pixel_unshuffle(Ctx& c, const TNode* n) {
  int64_t r = c.i(n, 1);
  auto in = c.shape(n, 0);
  if (in.size() != 4 || in[1] < 0 || in[2] < 0 || in[3] < 0) throw UnsupportedError("pixel_unshuffle on this shape");
  std::string y = c.b.reshape(c.t(n, 0), {0, in[1], in[2] / r, r, in[3] / r, r});
  y = c.b.transpose(y, {0, 1, 3, 5, 2, 4});
  c.out(n, c.b.reshape(y, {0, in[1] * r * r, in[2] / r, in[3] / r}));
}

}  // namespace

void register_resize_ops(OpTable& t) {
  t["aten::constant_pad_nd"] = {constant_pad};
  t["aten::pad"] = {pad};
  t["aten::reflection_pad1d"] = {reflection_pad};
  t["aten::reflection_pad2d"] = {reflection_pad};
  t["aten::reflection_pad3d"] = {reflection_pad};
  t["aten::replication_pad1d"] = {replication_pad};
  t["aten::replication_pad2d"] = {replication_pad};
  t["aten::replication_pad3d"] = {replication_pad};
  t["aten::upsample_nearest1d"] = {nearest};
  t["aten::upsample_nearest2d"] = {nearest};
  t["aten::upsample_nearest3d"] = {nearest};
  t["aten::_upsample_nearest_exact1d"] = {nearest_exact};
  t["aten::_upsample_nearest_exact2d"] = {nearest_exact};
  t["aten::_upsample_nearest_exact3d"] = {nearest_exact};
  t["aten::upsample_linear1d"] = {bilinear};
  t["aten::upsample_bilinear2d"] = {bilinear};
  t["aten::upsample_trilinear3d"] = {bilinear};
  t["aten::upsample_bicubic2d"] = {bicubic};
  t["aten::pixel_shuffle"] = {pixel_shuffle};
  t["aten::pixel_unshuffle"] = {pixel_unshuffle};
}

}  // namespace t2o
