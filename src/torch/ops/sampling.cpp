// Sampling: grid_sampler (GridSample), affine_grid, and random draws (bernoulli, uniform, normal, multinomial).
#include "torch/ops/compose.h"

namespace t2o {
namespace {

// Coordinate `v` (unnormalized, for an axis of `size` (float) pixels) reflected into range as
// torch's reflect_coordinates does: about [0, size - 1] with align_corners, else about
// [-0.5, size - 0.5], then clipped to [0, size - 1].
std::string reflect(Ctx& c, const std::string& v, const std::string& size, bool align_corners, DType t) {
  std::string one = c.b.scalar(1.0, t), half = c.b.scalar(0.5, t);
  std::string lo = align_corners ? c.b.scalar(0.0, t) : c.b.scalar(-0.5, t);
  std::string span = align_corners ? c.b.op1("Sub", {size, one}) : size;
  std::string in = c.b.op1("Abs", {c.b.op1("Sub", {v, lo})});
  // A span of 0 (one pixel with align_corners) reflects everything to 0.
  std::string safe = c.b.op1("Max", {span, c.b.scalar(1e-30, t)});
  std::string flips = c.b.op1("Floor", {c.b.op1("Div", {in, safe})});
  std::string extra = c.b.op1("Sub", {in, c.b.op1("Mul", {flips, safe})});
  std::string odd = c.b.op1("Sub", {flips, c.b.op1("Mul", {c.b.op1("Floor", {c.b.op1("Mul", {flips, half})}), c.b.scalar(2.0, t)})});
  std::string even = c.b.op1("Less", {odd, half});
  std::string r = c.b.op1("Where", {even, c.b.op1("Add", {extra, lo}), c.b.op1("Add", {c.b.op1("Sub", {span, extra}), lo})});
  r = c.b.op1("Where", {c.b.op1("Greater", {span, c.b.scalar(0.0, t)}), r, c.b.scalar(0.0, t)});
  return c.b.op1("Min", {c.b.op1("Max", {r, c.b.scalar(0.0, t)}), c.b.op1("Sub", {size, one})});
}

// grid_sample before GridSample (opset 16), 4-D: each output position reads its nearest pixel or
// its four bilinear corners by GatherElements of the input flattened to [N, C, H W], corners
// outside the image reading 0 (zeros padding; border and reflection move the coordinate inside
// first), as torch's grid_sampler_2d computes. Needs opset 11.
std::string grid_sample_gathered(Ctx& c, const std::string& x, const std::string& grid, int64_t mode, int64_t padding,
                                 bool align_corners, DType t) {
  if (mode == 2) throw OpsetError("aten::grid_sampler with bicubic interpolation", 16);
  c.b.require(11, "aten::grid_sampler before GridSample (GatherElements)");
  std::string N = c.b.unsqueeze(c.b.dim(x, 0), {0}), C = c.b.unsqueeze(c.b.dim(x, 1), {0});
  std::string Hi = c.b.dim(x, 2), Wi = c.b.dim(x, 3);
  std::string H = c.b.cast(Hi, t), W = c.b.cast(Wi, t);
  std::string one = c.b.scalar(1.0, t), zero = c.b.scalar(0.0, t), half = c.b.scalar(0.5, t);
  auto coord = [&](int64_t k, const std::string& size) {  // grid[..., k] unnormalized
    std::string g = c.b.op1("Gather", {grid, c.b.i64(k)}, {Attribute::make_int("axis", 3)});  // [N, Ho, Wo]
    std::string v = align_corners ? c.b.op1("Mul", {c.b.op1("Mul", {c.b.op1("Add", {g, one}), half}), c.b.op1("Sub", {size, one})})
                                  : c.b.op1("Mul", {c.b.op1("Sub", {c.b.op1("Mul", {c.b.op1("Add", {g, one}), size}), one}), half});
    if (padding == 1) v = c.b.op1("Min", {c.b.op1("Max", {v, zero}), c.b.op1("Sub", {size, one})});
    if (padding == 2) v = reflect(c, v, size, align_corners, t);
    return v;
  };
  std::string ix = coord(0, W), iy = coord(1, H);
  std::string flat = c.b.op1("Reshape", {x, c.b.concat({N, C, c.b.i64s({-1})}, 0)});  // [N, C, H W]
  std::string Ho_Wo = c.b.concat({N, c.b.i64s({1, -1})}, 0);
  // The value at integer coordinates (xc, yc) [N, Ho, Wo], 0 outside the image.
  auto read = [&](const std::string& xc, const std::string& yc, const std::string& weight) {
    std::string ok = c.b.op1("And", {c.b.op1("And", {c.b.op1("Greater", {xc, c.b.scalar(-1.0, t)}), c.b.op1("Less", {xc, W})}),
                                    c.b.op1("And", {c.b.op1("Greater", {yc, c.b.scalar(-1.0, t)}), c.b.op1("Less", {yc, H})})});
    std::string xi = c.b.cast(c.b.op1("Min", {c.b.op1("Max", {xc, zero}), c.b.op1("Sub", {W, one})}), DType::Int64);
    std::string yi = c.b.cast(c.b.op1("Min", {c.b.op1("Max", {yc, zero}), c.b.op1("Sub", {H, one})}), DType::Int64);
    std::string idx = c.b.op1("Reshape", {c.b.op1("Add", {c.b.op1("Mul", {yi, Wi}), xi}), Ho_Wo});  // [N, 1, Ho Wo]
    idx = c.b.op1("Expand", {idx, c.b.concat({N, C, c.b.unsqueeze(c.b.dim(idx, 2), {0})}, 0)});
    std::string v = c.b.op1("GatherElements", {flat, idx}, {Attribute::make_int("axis", 2)});
    std::string w = c.b.op1("Where", {ok, weight, zero});
    return c.b.op1("Mul", {v, c.b.op1("Reshape", {w, Ho_Wo})});
  };
  std::string out;
  if (mode == 1) {
    out = read(c.b.op1("Round", {ix}), c.b.op1("Round", {iy}), one);
  } else {
    std::string x0 = c.b.op1("Floor", {ix}), y0 = c.b.op1("Floor", {iy});
    std::string x1 = c.b.op1("Add", {x0, one}), y1 = c.b.op1("Add", {y0, one});
    std::string lx = c.b.op1("Sub", {ix, x0}), ly = c.b.op1("Sub", {iy, y0});
    std::string hx = c.b.op1("Sub", {one, lx}), hy = c.b.op1("Sub", {one, ly});
    out = c.b.op1("Add", {c.b.op1("Add", {read(x0, y0, c.b.op1("Mul", {hx, hy})), read(x1, y0, c.b.op1("Mul", {lx, hy}))}),
                          c.b.op1("Add", {read(x0, y1, c.b.op1("Mul", {hx, ly})), read(x1, y1, c.b.op1("Mul", {lx, ly}))})});
  }
  std::string Ho = c.b.unsqueeze(c.b.dim(grid, 1), {0}), Wo = c.b.unsqueeze(c.b.dim(grid, 2), {0});
  return c.b.op1("Reshape", {out, c.b.concat({N, C, Ho, Wo}, 0)});
}

// aten::grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners); torch's enums
// in the order of ONNX's mode strings.
void grid_sampler(Ctx& c, const TNode* n) {
  if (c.rank(n, 0) != 4) throw UnsupportedError("aten::grid_sampler on 5-D input (ONNX GridSample is 4-D before opset 20)");
  static const char* modes[] = {"bilinear", "nearest", "bicubic"};
  static const char* paddings[] = {"zeros", "border", "reflection"};
  int64_t mode = c.i(n, "interpolation_mode", 0), padding = c.i(n, "padding_mode", 0);
  if (mode < 0 || mode > 2 || padding < 0 || padding > 2)
    throw UnsupportedError("aten::grid_sampler with interpolation mode " + std::to_string(mode) + ", padding mode " +
                           std::to_string(padding));
  DType t = c.out_dtype(n);
  if (c.b.opset() < 16) return c.out(n, grid_sample_gathered(c, c.t_as(n, 0, t), c.t_as(n, 1, t), mode, padding,
                                                            c.flag(n, "align_corners", false), t));
  c.out(n, c.b.op1("GridSample", {c.t_as(n, 0, t), c.t_as(n, 1, t)},
                   {Attribute::make_string("mode", modes[mode]), Attribute::make_string("padding_mode", paddings[padding]),
                    Attribute::make_int("align_corners", c.flag(n, "align_corners", false))}));
}

// The normalized coordinates of `len` (0-d int64) positions as affine_grid spaces them:
// (2i - (len - 1)) / d with d = max(len - 1, 1) for align_corners (so -1 .. 1, and 0 for one
// position, as torch's linspace_from_neg_one gives), else d = len (pixel centres).
std::string grid_coords(Ctx& c, const std::string& len, bool align_corners, DType t) {
  std::string i = c.b.cast(arange_of(c, len), t);
  std::string lf = c.b.cast(len, t), one = c.b.scalar(1, t);
  std::string last = c.b.op1("Sub", {lf, one});
  std::string d = align_corners ? c.b.op1("Max", {last, one}) : lf;
  return c.b.op1("Div", {c.b.op1("Sub", {c.b.op1("Mul", {i, c.b.scalar(2, t)}), last}), d});
}

// aten::affine_grid_generator(theta, size, align_corners): for size [N, C, H, W] (theta [N, 2, 3])
// grid[n, h, w] = theta[n] @ (x_w, y_h, 1); for [N, C, D, H, W] (theta [N, 3, 4]) likewise with
// (x_w, y_h, z_d, 1). Written as broadcast products of each coordinate with its column of theta,
// so the sizes may be computed (x.shape) and ONNX's AffineGrid (opset 20) is not needed.
void affine_grid_generator(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  const TV& size = c.in(n, 1);
  int spatial = -1;
  if (size.is_const()) spatial = static_cast<int>(size.c.toIntVector().size()) - 2;
  else if (size.kind == TV::Kind::List) spatial = static_cast<int>(size.items.size()) - 2;
  if (spatial != 2 && spatial != 3)
    throw UnsupportedError("aten::affine_grid_generator with a size of unknown length (4 or 5 values are supported)");
  bool align = c.flag(n, "align_corners", false);
  std::string sizes = c.ints_tensor(size);
  std::string theta_t = c.b.transpose(c.t_as(n, 0, t), {0, 2, 1});  // [N, spatial + 1, spatial]
  int out_rank = spatial + 2;                                          // [N, (D,) H, W, spatial]
  std::string grid;
  for (int j = 0; j <= spatial; ++j) {
    // Column j of theta, shaped [N, 1, .., 1, spatial].
    std::string col = c.b.slice(theta_t, {j}, {j + 1}, {1});
    std::vector<int64_t> more;
    for (int k = 0; k < spatial - 1; ++k) more.push_back(2 + k);
    if (!more.empty()) col = c.b.unsqueeze(col, more);
    std::string term = col;
    if (j < spatial) {
      // Coordinate j runs along the output axis of size[-1 - j] (x along W, y along H, z along D).
      int64_t size_index = 2 + spatial - 1 - j;
      std::string len = c.b.reshape(c.b.op1("Gather", {sizes, c.b.i64(size_index)}), {});
      std::string v = grid_coords(c, len, align, t);
      int64_t axis = 1 + (spatial - 1 - j);  // its axis in the output
      term = c.b.op1("Mul", {col, along_axis(c, v, axis, out_rank)});
    }
    grid = grid.empty() ? term : c.b.op1("Add", {grid, term});
  }
  c.out(n, grid);
}

std::string uniform_like(Ctx& c, const std::string& like, DType t, double lo = 0, double hi = 1) {
  return c.b.op1("RandomUniformLike", {like},
                 {Attribute::make_int("dtype", static_cast<int64_t>(t)), Attribute::make_float("low", static_cast<float>(lo)),
                  Attribute::make_float("high", static_cast<float>(hi))});
}

// aten::bernoulli(probs) / bernoulli.p(x, p) / bernoulli.Tensor(x, p): 1 where a uniform draw in
// [0, 1) falls below the probability, so p = 0 and p = 1 give exact results.
void bernoulli(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  DType ft = dtype_is_float(t) ? t : DType::Float;
  const TV* p = c.arg(n, "p");
  std::string x = c.t(n, 0);
  std::string prob = p ? c.tensor_as(*p, ft) : c.t_as(n, 0, ft);
  std::string u = uniform_like(c, x, ft);
  c.out(n, c.b.cast(c.b.op1("Less", {u, prob}), t));
}

// aten::uniform(x, from, to): x.uniform_(a, b) on a fresh tensor.
void uniform(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, uniform_like(c, c.t(n, 0), t, c.f(n, "from", 0), c.f(n, "to", 1)));
}

// aten::normal.Tensor_float(mean, std) and friends: mean + std * N(0, 1) drawn in the broadcast shape;
// normal.float_float(mean, std, size): RandomNormal of a constant shape.
void normal(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  if (auto k = Ctx::arg_index(n, "size"))
    return c.out(n, c.b.op1("RandomNormal", {}, {Attribute::make_ints("shape", c.ints(n, *k)),
                                                 Attribute::make_int("dtype", static_cast<int64_t>(t)),
                                                 Attribute::make_float("mean", static_cast<float>(c.f(n, 0))),
                                                 Attribute::make_float("scale", static_cast<float>(c.f(n, 1)))}));
  std::string mean = c.t_as(n, 0, t), sd = c.t_as(n, 1, t);
  std::string like = c.b.op1("Add", {c.b.op1("Mul", {mean, c.b.scalar(0, t)}), c.b.op1("Mul", {sd, c.b.scalar(0, t)})});
  std::string z = c.b.op1("RandomNormalLike", {like}, {Attribute::make_int("dtype", static_cast<int64_t>(t))});
  c.out(n, c.b.op1("Add", {mean, c.b.op1("Mul", {sd, z})}));
}

// aten::multinomial(probs, num_samples, replacement): draws with replacement (or a single draw)
// are ONNX Multinomial on the log of the weights; without replacement, the Gumbel-top-k trick:
// the num_samples largest of log(w) + Gumbel noise are a draw without replacement with torch's
// distribution. A 1-D input is one row.
void multinomial(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  if (r != 1 && r != 2) throw UnsupportedError("aten::multinomial of a " + std::to_string(r) + "-D input");
  int64_t k = c.i(n, 1);
  bool replacement = c.flag(n, "replacement", false);
  DType ft = dtype_is_float(c.dtype(n, 0)) && c.dtype(n, 0) != DType::Float16 ? c.dtype(n, 0) : DType::Float;
  std::string w = c.t_as(n, 0, ft);
  if (r == 1) w = c.b.unsqueeze(w, {0});
  std::string logw = c.b.op1("Log", {w});
  std::string drawn;
  if (replacement || k == 1) {
    drawn = c.b.op1("Multinomial", {logw}, {Attribute::make_int("sample_size", k),
                                             Attribute::make_int("dtype", static_cast<int64_t>(DType::Int64))});
  } else {
    std::string u = uniform_like(c, logw, ft);
    // -log(-log(u)); u = 0 would give -inf noise, which only ranks that class last.
    std::string gumbel = c.b.op1("Neg", {c.b.op1("Log", {c.b.op1("Neg", {c.b.op1("Log", {u})})})});
    drawn = c.b.topk(c.b.op1("Add", {logw, gumbel}), k, 1, true, true)[1];
  }
  if (r == 1) drawn = c.b.squeeze(drawn, {0});
  c.out(n, drawn);
}

}  // namespace

void register_sampling_ops(OpTable& t) {
  t["aten::grid_sampler"] = {grid_sampler};  // opset 11 (bilinear, nearest) or 16 (bicubic): said by the converter
  t["aten::affine_grid_generator"] = {affine_grid_generator};
  t["aten::multinomial"] = {multinomial};
  t["aten::bernoulli"] = {bernoulli};
  t["aten::uniform"] = {uniform};
  t["aten::normal"] = {normal};
}

}  // namespace t2o
