// torchvision::deform_conv2d (DeformConv2d, DCNv1/v2): ONNX has DeformConv only from opset 19, so
// the sampling is spelled out: every kernel tap of every output position reads the input at its
// offset position by bilinear interpolation (four GatherElements per tap, corners outside the
// image read 0, points at or beyond one pixel outside read 0 altogether, as torchvision's kernel
// does), scaled by the modulation mask; the sampled columns [N, Cin * K, L] then meet the weight
// in one MatMul per weight group. Needs opset 11 (GatherElements); any dims may be dynamic.
#include "torch/ops/compose.h"

namespace t2o {
namespace {

void deform_conv2d(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  if (t != DType::Float && t != DType::Double) throw UnsupportedError("torchvision::deform_conv2d of a non-float input");
  const TV& wv = c.in(n, 1);
  std::vector<int64_t> ws = wv.is_const() && wv.c.isTensor() ? wv.c.toTensor().sizes().vec() : wv.shape;
  if ((!wv.is_const() && !wv.rank_known) || ws.size() != 4 || !all_static(ws))
    throw UnsupportedError("torchvision::deform_conv2d with a weight of unknown shape");
  int64_t cout = ws[0], cin_g = ws[1], kh = ws[2], kw = ws[3], K = kh * kw;
  int64_t sh = c.i(n, "stride_h", 1), sw = c.i(n, "stride_w", 1), ph = c.i(n, "pad_h", 0), pw = c.i(n, "pad_w", 0);
  int64_t dh = c.i(n, "dilation_h", 1), dw = c.i(n, "dilation_w", 1);
  int64_t wgroups = c.i(n, "groups", 1), ogroups = c.i(n, "offset_groups", 1);
  bool use_mask = c.flag(n, "use_mask", false);
  int64_t cin = cin_g * wgroups;
  if (wgroups <= 0 || ogroups <= 0 || cin % ogroups || cout % wgroups)
    throw Error("torchvision::deform_conv2d: channels do not divide into the groups");
  int64_t cg = cin / ogroups;

  std::string x = c.t_as(n, 0, t), offset = c.t_as(n, 2, t);
  std::string nn = c.b.dim(x, 0), H = c.b.dim(x, 2), W = c.b.dim(x, 3);
  std::string Ho = c.b.dim(offset, 2), Wo = c.b.dim(offset, 3);
  auto u = [&](const std::string& s) { return c.b.unsqueeze(s, {0}); };
  std::string L = c.b.op1("Mul", {Ho, Wo});
  // Tap positions before the offsets: py[k, ho, 1] = ho * sh - ph + (k / kw) * dh, px[k, 1, wo] likewise.
  std::vector<double> ky, kx;
  for (int64_t k = 0; k < K; ++k) {
    ky.push_back(static_cast<double>((k / kw) * dh - ph));
    kx.push_back(static_cast<double>((k % kw) * dw - pw));
  }
  std::string hos = c.b.op1("Mul", {c.b.cast(arange_of(c, Ho), t), c.b.scalar(static_cast<double>(sh), t)});
  std::string wos = c.b.op1("Mul", {c.b.cast(arange_of(c, Wo), t), c.b.scalar(static_cast<double>(sw), t)});
  std::string py = c.b.op1("Add", {c.b.reshape(c.b.vec(ky, t), {K, 1, 1}), c.b.unsqueeze(hos, {0, 2})});
  std::string px = c.b.op1("Add", {c.b.reshape(c.b.vec(kx, t), {K, 1, 1}), c.b.unsqueeze(wos, {0, 1})});
  // Offsets [N, G * 2K, Ho, Wo] -> dy, dx [N, G, K, Ho, Wo] (pairs (dy, dx) per tap).
  std::string off6 = c.b.op1("Reshape", {offset, c.b.concat({u(nn), c.b.i64s({ogroups, K, 2}), u(Ho), u(Wo)}, 0)});
  auto pick = [&](int64_t i) { return c.b.op1("Gather", {off6, c.b.i64(i)}, {Attribute::make_int("axis", 3)}); };
  std::string y = c.b.op1("Add", {pick(0), py}), xx = c.b.op1("Add", {pick(1), px});
  std::string Hf = c.b.cast(H, t), Wf = c.b.cast(W, t), one = c.b.scalar(1.0, t), minus1 = c.b.scalar(-1.0, t);
  std::string inside = c.b.op1("And", {c.b.op1("And", {c.b.op1("Greater", {y, minus1}), c.b.op1("Less", {y, Hf})}),
                                      c.b.op1("And", {c.b.op1("Greater", {xx, minus1}), c.b.op1("Less", {xx, Wf})})});
  std::string y0 = c.b.op1("Floor", {y}), x0 = c.b.op1("Floor", {xx});
  std::string ly = c.b.op1("Sub", {y, y0}), lx = c.b.op1("Sub", {xx, x0});
  std::string hy = c.b.op1("Sub", {one, ly}), hx = c.b.op1("Sub", {one, lx});
  std::string mask;
  if (use_mask) {
    mask = c.b.op1("Reshape", {c.t_as(n, 3, t), c.b.concat({u(nn), c.b.i64s({ogroups, 1, -1})}, 0)});  // [N, G, 1, K L]
  }
  // The input as [N, G, Cg, H W]; each corner gathered for every channel of its offset group.
  std::string flat = c.b.op1("Reshape", {x, c.b.concat({u(nn), c.b.i64s({ogroups, cg, -1})}, 0)});
  std::string zero = c.b.scalar(0.0, t);
  std::string cols;
  for (int corner = 0; corner < 4; ++corner) {
    std::string yc = corner < 2 ? y0 : c.b.op1("Add", {y0, one});
    std::string xc = corner % 2 == 0 ? x0 : c.b.op1("Add", {x0, one});
    std::string wgt = c.b.op1("Mul", {corner < 2 ? hy : ly, corner % 2 == 0 ? hx : lx});
    std::string ok = c.b.op1("And", {c.b.op1("And", {c.b.op1("Greater", {yc, minus1}), c.b.op1("Less", {yc, Hf})}),
                                    c.b.op1("And", {c.b.op1("Greater", {xc, minus1}), c.b.op1("Less", {xc, Wf})})});
    ok = c.b.op1("And", {ok, inside});
    wgt = c.b.op1("Where", {ok, wgt, zero});
    std::string yi = c.b.cast(c.b.clip(yc, 0.0, std::nullopt, t), DType::Int64);
    std::string xi = c.b.cast(c.b.clip(xc, 0.0, std::nullopt, t), DType::Int64);
    yi = int_min(c, yi, c.b.op1("Sub", {H, c.b.i64(1)}));
    xi = int_min(c, xi, c.b.op1("Sub", {W, c.b.i64(1)}));
    std::string idx = c.b.op1("Add", {c.b.op1("Mul", {yi, W}), xi});                    // [N, G, K, Ho, Wo]
    idx = c.b.op1("Reshape", {idx, c.b.concat({u(nn), c.b.i64s({ogroups, 1, -1})}, 0)});  // [N, G, 1, K L]
    idx = c.b.op1("Expand", {idx, c.b.concat({u(nn), c.b.i64s({ogroups, cg}), u(c.b.op1("Mul", {L, c.b.i64(K)}))}, 0)});
    std::string v = c.b.op1("GatherElements", {flat, idx}, {Attribute::make_int("axis", 3)});
    wgt = c.b.op1("Reshape", {wgt, c.b.concat({u(nn), c.b.i64s({ogroups, 1, -1})}, 0)});
    v = c.b.op1("Mul", {v, wgt});
    cols = cols.empty() ? v : c.b.op1("Add", {cols, v});
  }
  if (use_mask) cols = c.b.op1("Mul", {cols, mask});
  // [N, G, Cg, K L] -> [N, wg, Cin/wg * K, L]; weight [wg, Cout/wg, Cin/wg * K].
  cols = c.b.op1("Reshape", {cols, c.b.concat({u(nn), c.b.i64s({wgroups, cin_g * K}), u(L)}, 0)});
  std::string w = c.b.reshape(c.t_as(n, 1, t), {wgroups, cout / wgroups, cin_g * K});
  std::string out = c.b.op1("MatMul", {w, cols});  // [N, wg, Cout/wg, L]
  out = c.b.op1("Reshape", {out, c.b.concat({u(nn), c.b.i64s({cout}), u(Ho), u(Wo)}, 0)});
  if (!c.is_none(n, 4)) out = c.b.op1("Add", {out, c.b.reshape(c.t_as(n, 4, t), {cout, 1, 1})});
  c.out(n, out);
}

}  // namespace

void register_deform_ops(OpTable& t) { t["torchvision::deform_conv2d"] = {deform_conv2d, 11}; }

}  // namespace t2o
