// Sampling: grid_sampler (GridSample) and random draws shaped like a tensor (bernoulli, uniform, normal).
#include "torch/ops/ops.h"

namespace t2o {
namespace {

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
  c.out(n, c.b.op1("GridSample", {c.t_as(n, 0, t), c.t_as(n, 1, t)},
                   {Attribute::make_string("mode", modes[mode]), Attribute::make_string("padding_mode", paddings[padding]),
                    Attribute::make_int("align_corners", c.flag(n, "align_corners", false))}));
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

}  // namespace

void register_sampling_ops(OpTable& t) {
  t["aten::grid_sampler"] = {grid_sampler, 16};
  t["aten::bernoulli"] = {bernoulli};
  t["aten::uniform"] = {uniform};
  t["aten::normal"] = {normal};
}

}  // namespace t2o
