// Padding (constant/reflect/replicate/circular), interpolation (nearest, nearest-exact, linear,
// bilinear, trilinear, bicubic with align_corners), pixel shuffle.
#include <algorithm>
#include <climits>
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

// Pads given as a list with computed elements (UNet's size differences): the ONNX pads tensor is
// gathered from torch's list, with zeros for the dims it leaves alone. Needs Pad's input form.
std::string computed_pads(Ctx& c, const TNode* n, int r) {
  c.b.require(11, "Pad with computed pads");
  const TV& list = c.in(n, 1);
  size_t len = list.kind == TV::Kind::List ? list.items.size() : 0;
  if (len == 0 || len % 2) throw UnsupportedError("pad with a computed list of unknown length");
  std::string p = c.b.concat({c.ints_tensor(list), c.b.i64s({0})}, 0);
  std::vector<int64_t> idx(static_cast<size_t>(2 * r), static_cast<int64_t>(len));
  for (size_t i = 0; i + 1 < len; i += 2) {
    size_t dim = static_cast<size_t>(r - 1) - i / 2;
    idx[dim] = static_cast<int64_t>(i);
    idx[dim + static_cast<size_t>(r)] = static_cast<int64_t>(i + 1);
  }
  return c.b.op1("Gather", {p, c.b.i64s(idx)}, {Attribute::make_int("axis", 0)});
}

void emit_pad(Ctx& c, const TNode* n, const std::string& mode, double value) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  std::string x = c.t_as(n, 0, t);
  const TV& list = c.in(n, 1);
  bool computed = list.kind == TV::Kind::List &&
                  std::any_of(list.items.begin(), list.items.end(), [](const TV& e) { return !e.is_const(); });
  if (computed) {
    if (mode == "circular") throw UnsupportedError("circular padding by computed amounts");
    std::vector<std::string> in{x, computed_pads(c, n, r)};
    if (mode == "constant") in.push_back(c.b.scalar(value, t));
    return c.out(n, c.b.op1("Pad", in, {Attribute::make_string("mode", mode)}));
  }
  auto p = c.ints(n, 1);
  if (mode == "circular") {  // the last lo elements, x, the first hi: no length needed
    for (size_t i = 0; i + 1 < p.size(); i += 2) {
      int64_t axis = r - 1 - static_cast<int64_t>(i / 2);
      int64_t lo = p[i], hi = p[i + 1];
      std::vector<std::string> parts;
      if (lo > 0) parts.push_back(c.b.slice(x, {-lo}, {INT64_MAX}, {axis}));
      parts.push_back(x);
      if (hi > 0) parts.push_back(c.b.slice(x, {0}, {hi}, {axis}));
      x = parts.size() > 1 ? c.b.concat(parts, axis) : x;
      // Negative amounts crop (out[i] = x[(i - lo) mod n], as torch computes it).
      if (lo < 0 || hi < 0) x = c.b.slice(x, {lo < 0 ? -lo : 0}, {hi < 0 ? hi : INT64_MAX}, {axis});
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

// `given`: the scale factor the call gave (> 0), which torch maps coordinates by instead of in/out.
Taps resize_taps(const Interp& m, int64_t in, int64_t out, double given = 0) {
  double scale = given > 0 ? 1.0 / given : static_cast<double>(in) / static_cast<double>(out);
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
                             const std::vector<int64_t>& out, DType t, const std::vector<double>& given = {}) {
  int64_t r = static_cast<int64_t>(in.size());
  for (int64_t axis = 2; axis < r; ++axis) {
    int64_t li = in[static_cast<size_t>(axis)], lo = out[static_cast<size_t>(axis)];
    double g = given.empty() ? 0.0 : given[static_cast<size_t>(axis - 2)];
    if (li == lo && (g <= 0 || g == 1.0)) continue;  // every mode maps i to i
    Taps taps = resize_taps(m, li, lo, g);
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

// The scale factors the call gave (F.interpolate(scale_factor=...)): torch then maps coordinates by
// 1/scale, not by in/out, so ONNX must get the same scales. Empty when the call gave sizes.
// With `sizing`, the scales also when recompute_scale_factor=True (torch then computes the output
// size from them, and maps coordinates by in/out of that size).
std::vector<double> given_scales(Ctx& c, const TNode* n, size_t spatial, bool sizing = false) {
  std::vector<double> s;
  const TV* v = c.arg(n, "scale_factors");
  if (!v) v = c.arg(n, "scale_factor");  // aten::__interpolate
  const TV* recompute = c.arg(n, "recompute_scale_factor");
  if (!sizing && recompute && recompute->is_const() && recompute->c.isBool() && recompute->c.toBool()) return {};
  // The builtin always sizes the output from the scales and maps coordinates by in/out (what
  // F.interpolate did before 1.5), whatever recompute_scale_factor says.
  if (!sizing && n->kind() == c10::Symbol::fromQualString("aten::__interpolate")) return {};
  if (v && v->is_const() && v->c.isDouble()) {
    s.push_back(v->c.toDouble());
  } else if (v && v->is_const() && v->c.isDoubleList()) {
    s = v->c.toDoubleVector();
  } else if (v && v->kind == TV::Kind::List) {  // built by F.interpolate's loop
    for (const TV& e : v->items) {
      if (!e.is_const() || !(e.c.isDouble() || e.c.isInt())) return {};
      s.push_back(e.c.toScalar().toDouble());
    }
  } else {
    for (const char* name : {"scales_d", "scales_h", "scales_w", "scales"}) {
      const TV* e = c.arg(n, name);
      if (!e) continue;
      if (!e->is_const() || !e->c.isDouble()) return {};
      s.push_back(e->c.toDouble());
    }
  }
  if (s.size() == 1 && spatial > 1) s.assign(spatial, s[0]);
  if (s.size() != spatial) return {};
  return s;
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
  // With align_corners torch maps coordinates by (in - 1) / (out - 1) whatever scales were given, and
  // ONNX's align_corners with scales would take the unrounded in * scale as the output length.
  std::vector<double> given = m.coord == "align_corners" ? std::vector<double>{} : given_scales(c, n, r - 2);
  if (!spatial_static) c.b.require(11, std::string(n->kind().toQualString()) + " with dynamic spatial sizes (Resize)");
  if (c.b.opset() < 11) {
    // Upsample (9) and Resize (10) pick floor(i / scale): torch's nearest when every scale is whole
    // (and is the one the call gave, if it gave one).
    bool whole = true;
    for (size_t i = 0; i < r; ++i)
      whole = whole && scales[i] == std::floor(scales[i]) && (given.empty() || i < 2 || given[i - 2] == scales[i]);
    if (m.mode != "nearest" || m.coord != "asymmetric" || !whole || !dtype_is_float(t))
      return c.out(n, resize_by_gather(c, x, m, in, out, t, given));
    std::string sc = c.b.vec(scales, DType::Float);
    if (c.b.opset() < 10) return c.out(n, c.b.op1("Upsample", {x, sc}, {Attribute::make_string("mode", m.mode)}));
    return c.out(n, c.b.op1("Resize", {x, sc}, {Attribute::make_string("mode", m.mode)}));
  }
  std::vector<Attribute> attrs{Attribute::make_string("mode", m.mode),
                               Attribute::make_string("coordinate_transformation_mode", m.coord)};
  if (m.mode == "nearest") attrs.push_back(Attribute::make_string("nearest_mode", m.nearest));
  if (m.mode == "cubic") attrs.push_back(Attribute::make_float("cubic_coeff_a", -0.75f));
  std::string roi = c.b.opset() >= 13 ? std::string() : c.b.vec({}, DType::Float);
  if (!given.empty()) {
    std::vector<double> sc{1.0, 1.0};
    sc.insert(sc.end(), given.begin(), given.end());
    return c.out(n, c.b.op1("Resize", {x, roi, c.b.vec(sc, DType::Float)}, attrs));
  }
  // Sizes keep N and C from the input, so a dynamic batch still works; spatial sizes are the
  // call's output_size, computed when the model computes them.
  std::vector<int64_t> spatial(out.begin() + 2, out.end());
  std::string sizes;
  const TV* osz = c.arg(n, "output_size");
  if (!osz) osz = c.arg(n, "size");  // aten::__interpolate
  TV one_size;  // one size for every spatial axis
  if (osz && osz->is_const() && osz->c.isInt()) {
    one_size = TV::constant(c10::IValue(std::vector<int64_t>(r - 2, osz->c.toInt())));
    osz = &one_size;
  }
  bool osz_computed = osz && !osz->is_none() && !osz->is_const();
  // A constant output_size from an input of varying size (detectors resize every image to 320x320).
  bool osz_fixed = osz && !osz->is_none() && osz->is_const() && osz->c.isIntList();
  if (in[0] >= 0 && in[1] >= 0 && spatial_static) {
    sizes = c.b.i64s(out);
  } else {
    std::string shape = c.b.shape_of(x);
    std::string nc = c.b.slice(shape, {0}, {2}, {0});
    std::string spatial_sizes;
    if (osz_computed) {
      spatial_sizes = c.ints_tensor(*osz);
    } else if (osz_fixed) {
      spatial_sizes = c.b.i64s(osz->c.toIntVector());
    } else if (std::vector<double> sc = given_scales(c, n, r - 2, true); !spatial_static && !sc.empty()) {
      // floor(in * scale), as torch sizes the output from recomputed scales
      std::string in_sp = c.b.cast(c.b.slice(shape, {2}, {static_cast<int64_t>(r)}, {0}), DType::Double);
      spatial_sizes = c.b.cast(c.b.op1("Floor", {c.b.op1("Mul", {in_sp, c.b.vec(sc, DType::Double)})}), DType::Int64);
    } else if (spatial_static) {
      spatial_sizes = c.b.i64s(spatial);
    } else {
      throw UnsupportedError(std::string(n->kind().toQualString()) + " to a size that varies but is not computed");
    }
    sizes = c.b.concat({nc, spatial_sizes}, 0);
  }
  std::string empty_scales = c.b.vec({}, DType::Float);
  c.out(n, c.b.op1("Resize", {x, roi, c.b.opset() >= 13 ? std::string() : empty_scales, sizes}, attrs));
}

void nearest(Ctx& c, const TNode* n) { emit_resize(c, n, {"nearest", "asymmetric", "floor"}); }
void nearest_exact(Ctx& c, const TNode* n) { emit_resize(c, n, {"nearest", "tf_half_pixel_for_nn", "floor"}); }

// aten::upsample_{linear1d,bilinear2d,trilinear3d,bicubic2d}(x, output_size, align_corners, ...)
// Without align_corners torch samples at (o + 0.5) * in / out - 0.5 for every output length, 1
// included: that is ONNX's half_pixel. pytorch_half_pixel samples a length-1 output at 0 instead
// (Mask R-CNN pastes masks of boxes narrower than a pixel as resizes to width 1).
void linear(Ctx& c, const TNode* n, const std::string& mode) {
  bool align = c.flag(n, 2);
  emit_resize(c, n, {mode, align ? "align_corners" : "half_pixel", ""});
}
void bilinear(Ctx& c, const TNode* n) { linear(c, n, "linear"); }
void bicubic(Ctx& c, const TNode* n) { linear(c, n, "cubic"); }

// aten::__interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias):
// what F.interpolate compiles to in some scripted code; the same forms as the upsample ops.
void interpolate(Ctx& c, const TNode* n) {
  const TV* mode_v = c.arg(n, "mode");
  std::string mode = mode_v && mode_v->is_const() && mode_v->c.isString() ? mode_v->c.toStringRef() : "nearest";
  if (c.flag(n, "antialias", false)) throw UnsupportedError("aten::__interpolate with antialias=True");
  bool align = c.flag(n, "align_corners", false);
  if (mode == "nearest") return nearest(c, n);
  if (mode == "nearest-exact") return nearest_exact(c, n);
  if (mode == "linear" || mode == "bilinear" || mode == "trilinear")
    return emit_resize(c, n, {"linear", align ? "align_corners" : "half_pixel", ""});
  if (mode == "bicubic") return emit_resize(c, n, {"cubic", align ? "align_corners" : "half_pixel", ""});
  throw UnsupportedError("aten::__interpolate with mode '" + mode + "'");
}

// Dim i of x as a 1-element int64: a constant where the profiled shape has it.
std::string dim_1d(Ctx& c, const std::string& x, const std::vector<int64_t>& in, int i) {
  int64_t v = in[static_cast<size_t>(i)];
  return v >= 0 ? c.b.i64s({v}) : c.b.unsqueeze(c.b.dim(x, i), {0});
}

void pixel_shuffle(Ctx& c, const TNode* n) {
  int64_t r = c.i(n, 1);
  std::string x = c.t(n, 0);
  if (c.rank(n, 0) == 4 && c.b.opset() >= 11)
    return c.out(n, c.b.op1("DepthToSpace", {x}, {Attribute::make_int("blocksize", r), Attribute::make_string("mode", "CRD")}));
  // Before DepthToSpace's CRD mode: reshape-transpose-reshape, with shapes computed where dims are
  // dynamic.
  auto in = c.shape(n, 0);
  if (in.size() != 4) throw UnsupportedError("pixel_shuffle on a non-4-D tensor");
  if (in[1] >= 0 && in[2] >= 0 && in[3] >= 0) {
    std::string y = c.b.reshape(x, {0, in[1] / (r * r), r, r, in[2], in[3]});
    y = c.b.transpose(y, {0, 1, 4, 2, 5, 3});
    return c.out(n, c.b.reshape(y, {0, in[1] / (r * r), in[2] * r, in[3] * r}));
  }
  auto d = [&](int i) { return dim_1d(c, x, in, i); };
  std::string rr = c.b.i64s({r});
  std::string ch = c.b.op1("Div", {d(1), c.b.i64s({r * r})});
  std::string y = c.b.op1("Reshape", {x, c.b.concat({d(0), ch, rr, rr, d(2), d(3)}, 0)});
  y = c.b.transpose(y, {0, 1, 4, 2, 5, 3});
  auto times_r = [&](int i) { return c.b.op1("Mul", {d(i), rr}); };
  c.out(n, c.b.op1("Reshape", {y, c.b.concat({d(0), ch, times_r(2), times_r(3)}, 0)}));
}

// out[n, c*r*r + i*r + j, h, w] = in[n, c, h*r + i, w*r + j]: SpaceToDepth orders channels the
// other way, so reshape-transpose-reshape, with shapes computed where dims are dynamic.
void pixel_unshuffle(Ctx& c, const TNode* n) {
  int64_t r = c.i(n, 1);
  auto in = c.shape(n, 0);
  if (in.size() != 4) throw UnsupportedError("pixel_unshuffle on a non-4-D tensor");
  std::string x = c.t(n, 0);
  bool st = in[1] >= 0 && in[2] >= 0 && in[3] >= 0;
  if (st) {
    std::string y = c.b.reshape(x, {0, in[1], in[2] / r, r, in[3] / r, r});
    y = c.b.transpose(y, {0, 1, 3, 5, 2, 4});
    return c.out(n, c.b.reshape(y, {0, in[1] * r * r, in[2] / r, in[3] / r}));
  }
  auto d = [&](int i) { return dim_1d(c, x, in, i); };
  auto div = [&](int i) { return c.b.op1("Div", {d(i), c.b.i64s({r})}); };
  std::string rr = c.b.i64s({r});
  std::string y = c.b.op1("Reshape", {x, c.b.concat({d(0), d(1), div(2), rr, div(3), rr}, 0)});
  y = c.b.transpose(y, {0, 1, 3, 5, 2, 4});
  std::string ch = c.b.op1("Mul", {d(1), c.b.i64s({r * r})});
  c.out(n, c.b.op1("Reshape", {y, c.b.concat({d(0), ch, div(2), div(3)}, 0)}));
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
  t["aten::__interpolate"] = {interpolate};
  t["aten::pixel_unshuffle"] = {pixel_unshuffle};
}

}  // namespace t2o
