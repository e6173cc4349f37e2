// Normalization: batch, layer, group, instance norm (eval semantics), plus F.normalize pieces.
#include "torch/ops/compose.h"
#include "torch/ops/ops.h"

namespace t2o {
namespace {

// weight/bias may be None; ONNX wants per-channel tensors (of the run-time channel count when
// that is dynamic).
std::string param_or(Ctx& c, const TNode* n, size_t i, int64_t channels, double fill, DType t) {
  if (!c.is_none(n, i)) return c.t_as(n, i, t);
  if (channels >= 0) return c.b.vec(std::vector<double>(static_cast<size_t>(channels), fill), t);
  return filled(c, c.b.unsqueeze(c.b.dim(c.t(n, 0), 1), {0}), fill, t);
}

std::string normalize(Ctx& c, const std::string& x, const std::vector<int64_t>& axes, double eps, DType t);
std::string per_channel(Ctx& c, const std::string& p, int r);

// aten::batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn)
void batch_norm(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  if (c.flag(n, 5) && (c.training || c.is_none(n, 3) || c.is_none(n, 4))) {
    // Training-mode export, or no running statistics (track_running_stats=False): the batch's own.
    int r = c.rank(n, 0);
    std::vector<int64_t> axes{0};
    for (int i = 2; i < r; ++i) axes.push_back(i);
    std::string y = normalize(c, c.t_as(n, 0, t), axes, c.f(n, 7), t);
    if (!c.is_none(n, 1)) y = c.b.op1("Mul", {y, per_channel(c, c.t_as(n, 1, t), r)});
    if (!c.is_none(n, 2)) y = c.b.op1("Add", {y, per_channel(c, c.t_as(n, 2, t), r)});
    return c.out(n, y);
  }
  int64_t ch = c.shape(n, 0).at(1);
  if (c.in(n, 3).is_const() && c.in(n, 3).c.isTensor()) ch = c.in(n, 3).c.toTensor().numel();
  std::vector<std::string> in{c.t_as(n, 0, t), param_or(c, n, 1, ch, 1, t), param_or(c, n, 2, ch, 0, t),
                              c.t_as(n, 3, t), c.t_as(n, 4, t)};
  c.out(n, c.b.op1("BatchNormalization", in, {Attribute::make_float("epsilon", static_cast<float>(c.f(n, 7)))}));
}

// Normalizes x over `axes` (mean/variance), used where ONNX has no single op for the opset.
std::string normalize(Ctx& c, const std::string& x, const std::vector<int64_t>& axes, double eps, DType t) {
  std::string mean = c.b.reduce("ReduceMean", x, axes, true);
  std::string d = c.b.op1("Sub", {x, mean});
  std::string var = c.b.reduce("ReduceMean", c.b.op1("Mul", {d, d}), axes, true);
  std::string den = c.b.op1("Sqrt", {c.b.op1("Add", {var, c.b.scalar(eps, t)})});
  return c.b.op1("Div", {d, den});
}

// aten::layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable)
void layer_norm(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  auto shape = c.ints(n, 1);
  int64_t k = static_cast<int64_t>(shape.size());
  double eps = c.f(n, 4);
  std::string x = c.t_as(n, 0, t);
  if (c.b.opset() >= 17) {
    int64_t numel = 1;
    for (int64_t s : shape) numel *= s;
    std::string w = c.is_none(n, 2) ? c.b.constant(tensor_from_torch(at::ones(shape, scalar_type_from_dtype(t))))
                                    : c.t_as(n, 2, t);
    std::vector<std::string> in{x, w};
    if (!c.is_none(n, 3)) in.push_back(c.t_as(n, 3, t));
    (void)numel;
    return c.out(n, c.b.op1("LayerNormalization", in,
                            {Attribute::make_int("axis", -k), Attribute::make_float("epsilon", static_cast<float>(eps))}));
  }
  std::vector<int64_t> axes;
  for (int64_t i = r - k; i < r; ++i) axes.push_back(i);
  std::string y = normalize(c, x, axes, eps, t);
  if (!c.is_none(n, 2)) y = c.b.op1("Mul", {y, c.t_as(n, 2, t)});
  if (!c.is_none(n, 3)) y = c.b.op1("Add", {y, c.t_as(n, 3, t)});
  c.out(n, y);
}

std::string per_channel(Ctx& c, const std::string& p, int r) {
  std::vector<int64_t> shape{-1};
  for (int i = 2; i < r; ++i) shape.push_back(1);
  return c.b.reshape(p, shape);
}

// aten::group_norm(input, num_groups, weight, bias, eps, cudnn_enabled)
void group_norm(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  int64_t g = c.i(n, 1);
  std::string x = c.t_as(n, 0, t);
  std::string grouped = c.b.reshape(x, {0, g, -1});
  std::string y = normalize(c, grouped, {2}, c.f(n, 4), t);
  y = c.b.op1("Reshape", {y, c.b.shape_of(x)});
  if (!c.is_none(n, 2)) y = c.b.op1("Mul", {y, per_channel(c, c.t_as(n, 2, t), r)});
  if (!c.is_none(n, 3)) y = c.b.op1("Add", {y, per_channel(c, c.t_as(n, 3, t), r)});
  c.out(n, y);
}

// aten::instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn)
void instance_norm(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  if (!c.flag(n, 5)) {
    // Running statistics: it is a batch norm.
    int64_t ch = c.shape(n, 0).at(1);
    std::vector<std::string> in{c.t_as(n, 0, t), param_or(c, n, 1, ch, 1, t), param_or(c, n, 2, ch, 0, t),
                                c.t_as(n, 3, t), c.t_as(n, 4, t)};
    return c.out(n, c.b.op1("BatchNormalization", in, {Attribute::make_float("epsilon", static_cast<float>(c.f(n, 7)))}));
  }
  int64_t ch = c.shape(n, 0).at(1);
  std::vector<std::string> in{c.t_as(n, 0, t), param_or(c, n, 1, ch, 1, t), param_or(c, n, 2, ch, 0, t)};
  c.out(n, c.b.op1("InstanceNormalization", in, {Attribute::make_float("epsilon", static_cast<float>(c.f(n, 7)))}));
}

}  // namespace

void register_norm_ops(OpTable& t) {
  t["aten::batch_norm"] = {batch_norm};
  t["aten::layer_norm"] = {layer_norm};
  t["aten::group_norm"] = {group_norm};
  t["aten::instance_norm"] = {instance_norm};
}

}  // namespace t2o
