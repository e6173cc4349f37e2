// Loss functions: nll / cross entropy (class indices or probabilities, weights, ignore_index,
// label smoothing), binary cross entropy (with logits), regression losses, kl_div, margin losses.
// Reductions follow torch's enum: 0 none, 1 mean, 2 sum.
#include "torch/ops/compose.h"

namespace t2o {
namespace {

int64_t reduction_of(Ctx& c, const TNode* n) { return c.i(n, "reduction", 1); }

// Per-element terms of a loss over class indices along `axis` of log-probabilities `logp`:
// loss = -w[t] * logp[t] and the weight w[t] a mean divides by, both 0 where t == ignore_index.
struct ClassTerms {
  std::string loss, denom, valid;
};

ClassTerms class_terms(Ctx& c, const std::string& logp, const std::vector<int64_t>& shape, const TV& target,
                       const TV* weight, int64_t ignore_index, int64_t axis, DType t) {
  int r = static_cast<int>(shape.size());
  std::string tgt = c.tensor_as(target, DType::Int64);
  std::string valid = c.b.op1("Not", {c.b.op1("Equal", {tgt, c.b.i64(ignore_index)})});
  std::string safe = c.b.op1("Where", {valid, tgt, c.b.i64(0)});
  std::string picked;
  if (c.b.opset() >= 11) {
    picked = c.b.op1("GatherElements", {logp, c.b.unsqueeze(safe, {axis})}, {Attribute::make_int("axis", axis)});
    picked = c.b.squeeze(picked, {axis});
  } else {
    // No GatherElements yet: select the target's class with a one-hot mask.
    std::string classes = arange_of(c, dim_size(c, logp, shape, axis));
    std::string hot = c.b.op1("Equal", {c.b.unsqueeze(safe, {axis}), along_axis(c, classes, axis, r)});
    picked = c.b.reduce("ReduceSum", c.b.op1("Where", {hot, logp, c.b.scalar(0, t)}), {axis}, false);
  }
  std::string denom = c.b.cast(valid, t);
  if (weight) {
    std::string wt = c.b.op1("Gather", {c.tensor_as(*weight, t), safe}, {Attribute::make_int("axis", 0)});
    picked = c.b.op1("Mul", {picked, wt});
    denom = c.b.op1("Where", {valid, wt, c.b.scalar(0, t)});
  }
  std::string loss = c.b.op1("Where", {valid, c.b.op1("Neg", {picked}), c.b.scalar(0, t)});
  return {loss, denom, valid};
}

// Mean over the targets' weights (torch: sum(loss) / sum(w[t]) over the targets not ignored).
std::string reduce_weighted(Ctx& c, const std::string& loss, const std::string& denom, int64_t reduction) {
  if (reduction != 1) return reduce_loss(c, loss, reduction);
  return c.b.op1("Div", {c.b.reduce("ReduceSum", loss, {}, false), c.b.reduce("ReduceSum", denom, {}, false)});
}

const TV* optional_arg(Ctx& c, const TNode* n, const char* name) {
  const TV* v = c.arg(n, name);
  return v && !v->is_none() ? v : nullptr;
}

// aten::nll_loss / nll_loss2d / nll_loss_nd(self, target, weight, reduction, ignore_index)
void nll_loss(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  int64_t axis = r == 1 ? 0 : 1;
  int64_t reduction = reduction_of(c, n), ignore = c.i(n, "ignore_index", -100);
  const TV* weight = optional_arg(c, n, "weight");
  std::string x = c.t_as(n, 0, t);
  if (c.b.opset() >= 12) {
    static const char* names[] = {"none", "mean", "sum"};
    std::string tgt = c.t_as(n, 1, DType::Int64);
    if (r == 1) x = c.b.unsqueeze(x, {0}), tgt = c.b.unsqueeze(tgt, {0});
    std::vector<std::string> in{x, tgt};
    if (weight) in.push_back(c.tensor_as(*weight, t));
    std::string y = c.b.op1("NegativeLogLikelihoodLoss", in,
                            {Attribute::make_string("reduction", names[reduction]),
                             Attribute::make_int("ignore_index", ignore)});
    return c.out(n, r == 1 && reduction == 0 ? c.b.squeeze(y, {0}) : y);
  }
  ClassTerms k = class_terms(c, x, c.shape(n, 0), c.in(n, 1), weight, ignore, axis, t);
  c.out(n, reduce_weighted(c, k.loss, k.denom, reduction));
}

// aten::cross_entropy_loss(self, target, weight, reduction, ignore_index, label_smoothing)
void cross_entropy(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  int64_t axis = r == 1 ? 0 : 1;
  int64_t reduction = reduction_of(c, n);
  double eps = c.f(n, "label_smoothing", 0.0);
  const TV* weight = optional_arg(c, n, "weight");
  auto shape = c.shape(n, 0);
  std::string x = c.t_as(n, 0, t);
  std::string logp = c.b.softmax("LogSoftmax", x, axis, r);
  std::string classes = c.b.cast(dim_size(c, x, shape, axis), t);
  std::string w = weight ? along_axis(c, c.tensor_as(*weight, t), axis, r) : std::string();
  if (dtype_is_float(c.dtype(n, 1))) {
    // Class probabilities: -sum_c w_c p_c log q_c, smoothed towards uniform; a mean is over the samples.
    std::string p = c.t_as(n, 1, t);
    if (eps > 0)
      p = c.b.op1("Add", {c.b.op1("Mul", {p, c.b.scalar(1 - eps, t)}),
                          c.b.op1("Div", {c.b.scalar(eps, t), classes})});
    std::string e = c.b.op1("Mul", {logp, p});
    if (weight) e = c.b.op1("Mul", {e, w});
    return c.out(n, reduce_loss(c, c.b.op1("Neg", {c.b.reduce("ReduceSum", e, {axis}, false)}), reduction));
  }
  ClassTerms k = class_terms(c, logp, shape, c.in(n, 1), weight, c.i(n, "ignore_index", -100), axis, t);
  std::string nll = reduce_weighted(c, k.loss, k.denom, reduction);
  if (eps <= 0) return c.out(n, nll);
  // Smoothing adds eps/C times the loss against every class, normalised like the nll part.
  std::string all = weight ? c.b.op1("Mul", {logp, w}) : logp;
  std::string smooth = c.b.op1("Neg", {c.b.reduce("ReduceSum", all, {axis}, false)});
  smooth = c.b.op1("Where", {k.valid, smooth, c.b.scalar(0, t)});
  smooth = reduce_weighted(c, smooth, k.denom, reduction);
  c.out(n, c.b.op1("Add", {c.b.op1("Mul", {nll, c.b.scalar(1 - eps, t)}),
                           c.b.op1("Mul", {smooth, c.b.op1("Div", {c.b.scalar(eps, t), classes})})}));
}

std::string weighted(Ctx& c, const TNode* n, const std::string& loss, DType t) {
  const TV* w = optional_arg(c, n, "weight");
  return w ? c.b.op1("Mul", {loss, c.tensor_as(*w, t)}) : loss;
}

// aten::binary_cross_entropy_with_logits(self, target, weight, pos_weight, reduction), in torch's
// stable form: (1 - y) x + lw (log(exp(-m) + exp(-x - m)) + m), m = max(-x, 0), lw = 1 + (pw - 1) y.
void bce_with_logits(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t), y = c.t_as(n, 1, t);
  std::string nx = c.b.op1("Neg", {x});
  std::string m = c.b.op1("Max", {nx, c.b.scalar(0, t)});
  std::string lse = c.b.op1("Add", {c.b.op1("Log", {c.b.op1("Add", {c.b.op1("Exp", {c.b.op1("Neg", {m})}),
                                                                     c.b.op1("Exp", {c.b.op1("Sub", {nx, m})})})}),
                                    m});
  if (const TV* pw = optional_arg(c, n, "pos_weight")) {
    std::string lw = c.b.op1("Add", {c.b.op1("Mul", {c.b.op1("Sub", {c.tensor_as(*pw, t), c.b.scalar(1, t)}), y}),
                                     c.b.scalar(1, t)});
    lse = c.b.op1("Mul", {lw, lse});
  }
  std::string loss = c.b.op1("Add", {c.b.op1("Mul", {c.b.op1("Sub", {c.b.scalar(1, t), y}), x}), lse});
  c.out(n, reduce_loss(c, weighted(c, n, loss, t), reduction_of(c, n)));
}

// aten::binary_cross_entropy(self, target, weight, reduction): logs clamped at -100 as in torch.
void bce(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t), y = c.t_as(n, 1, t);
  auto clamped_log = [&](const std::string& v) { return c.b.op1("Max", {c.b.op1("Log", {v}), c.b.scalar(-100, t)}); };
  std::string a = c.b.op1("Mul", {y, clamped_log(x)});
  std::string b = c.b.op1("Mul", {c.b.op1("Sub", {c.b.scalar(1, t), y}),
                                  clamped_log(c.b.op1("Sub", {c.b.scalar(1, t), x}))});
  std::string loss = c.b.op1("Neg", {c.b.op1("Add", {a, b})});
  c.out(n, reduce_loss(c, weighted(c, n, loss, t), reduction_of(c, n)));
}

std::string difference(Ctx& c, const TNode* n, DType t) { return c.b.op1("Sub", {c.t_as(n, 0, t), c.t_as(n, 1, t)}); }

void mse_loss(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string d = difference(c, n, t);
  c.out(n, reduce_loss(c, c.b.op1("Mul", {d, d}), reduction_of(c, n)));
}

void l1_loss(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, reduce_loss(c, c.b.op1("Abs", {difference(c, n, t)}), reduction_of(c, n)));
}

// Quadratic below the threshold k, linear above: smooth_l1 is 0.5 d^2 / k | |d| - k/2 (plain l1 at
// k = 0); huber is 0.5 d^2 | k (|d| - k/2).
void quadratic_linear(Ctx& c, const TNode* n, bool huber) {
  DType t = c.out_dtype(n);
  double k = huber ? c.f(n, "delta", 1.0) : c.f(n, "beta", 1.0);
  std::string z = c.b.op1("Abs", {difference(c, n, t)});
  if (!huber && k == 0) return c.out(n, reduce_loss(c, z, reduction_of(c, n)));
  std::string sq = c.b.op1("Mul", {c.b.op1("Mul", {z, z}), c.b.scalar(huber ? 0.5 : 0.5 / k, t)});
  std::string lin = c.b.op1("Sub", {z, c.b.scalar(0.5 * k, t)});
  if (huber) lin = c.b.op1("Mul", {lin, c.b.scalar(k, t)});
  std::string loss = c.b.op1("Where", {c.b.op1("Less", {z, c.b.scalar(k, t)}), sq, lin});
  c.out(n, reduce_loss(c, loss, reduction_of(c, n)));
}
void smooth_l1(Ctx& c, const TNode* n) { quadratic_linear(c, n, false); }
void huber(Ctx& c, const TNode* n) { quadratic_linear(c, n, true); }

// aten::kl_div(self, target, reduction, log_target): target * (log target - self), with
// 0 log 0 = 0; log_target: exp(target) * (target - self).
void kl_div(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t), y = c.t_as(n, 1, t);
  std::string loss;
  if (c.flag(n, "log_target", false)) {
    loss = c.b.op1("Mul", {c.b.op1("Exp", {y}), c.b.op1("Sub", {y, x})});
  } else {
    std::string zero = equal_to(c, y, c.b.scalar(0, t), t);
    std::string ylogy = c.b.op1("Where", {zero, c.b.scalar(0, t), c.b.op1("Mul", {y, c.b.op1("Log", {y})})});
    loss = c.b.op1("Sub", {ylogy, c.b.op1("Mul", {y, x})});
  }
  c.out(n, reduce_loss(c, loss, reduction_of(c, n)));
}

// aten::soft_margin_loss(self, target, reduction): log(1 + exp(-y x)).
void soft_margin(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string z = c.b.op1("Neg", {c.b.op1("Mul", {c.t_as(n, 0, t), c.t_as(n, 1, t)})});
  std::string loss = c.b.op1("Log", {c.b.op1("Add", {c.b.scalar(1, t), c.b.op1("Exp", {z})})});
  c.out(n, reduce_loss(c, loss, reduction_of(c, n)));
}

// aten::margin_ranking_loss(x1, x2, target, margin, reduction): max(0, -y (x1 - x2) + margin).
void margin_ranking(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string d = c.b.op1("Sub", {c.t_as(n, 0, t), c.t_as(n, 1, t)});
  std::string z = c.b.op1("Add", {c.b.op1("Neg", {c.b.op1("Mul", {c.t_as(n, 2, t), d})}),
                                  c.b.scalar(c.f(n, "margin", 0.0), t)});
  c.out(n, reduce_loss(c, c.b.op1("Max", {z, c.b.scalar(0, t)}), reduction_of(c, n)));
}

// aten::hinge_embedding_loss(self, target, margin, reduction): x where y != -1 plus
// max(0, margin - x) where y != 1 (so targets other than +-1 get both terms, as in torch).
void hinge_embedding(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  DType yt = promote_dtypes(c.dtype(n, 1), t);
  std::string x = c.t_as(n, 0, t), y = c.t_as(n, 1, yt);
  std::string zero = c.b.scalar(0, t);
  std::string margin = c.b.op1("Max", {c.b.op1("Sub", {c.b.scalar(c.f(n, "margin", 1.0), t), x}), zero});
  std::string m = c.b.op1("Where", {equal_to(c, y, c.b.scalar(1, yt), yt), zero, margin});
  std::string s = c.b.op1("Where", {equal_to(c, y, c.b.scalar(-1, yt), yt), zero, x});
  c.out(n, reduce_loss(c, c.b.op1("Add", {m, s}), reduction_of(c, n)));
}

// aten::poisson_nll_loss(input, target, log_input, full, eps, reduction)
void poisson_nll(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t), y = c.t_as(n, 1, t);
  std::string loss = c.flag(n, "log_input", true)
                         ? c.b.op1("Sub", {c.b.op1("Exp", {x}), c.b.op1("Mul", {y, x})})
                         : c.b.op1("Sub", {x, c.b.op1("Mul", {y, c.b.op1("Log", {c.b.op1("Add", {x, c.b.scalar(c.f(n, "eps", 1e-8), t)})})})});
  if (c.flag(n, "full", false)) {
    // Stirling's term y log y - y + log(2 pi y) / 2, where y > 1.
    std::string st = c.b.op1("Add", {c.b.op1("Sub", {c.b.op1("Mul", {y, c.b.op1("Log", {y})}), y}),
                                     c.b.op1("Mul", {c.b.op1("Log", {c.b.op1("Mul", {y, c.b.scalar(2 * M_PI, t)})}),
                                                     c.b.scalar(0.5, t)})});
    loss = c.b.op1("Add", {loss, c.b.op1("Where", {c.b.op1("Greater", {y, c.b.scalar(1, t)}), st, c.b.scalar(0, t)})});
  }
  c.out(n, reduce_loss(c, loss, reduction_of(c, n)));
}

}  // namespace

void register_loss_ops(OpTable& t) {
  t["aten::nll_loss"] = {nll_loss};
  t["aten::nll_loss2d"] = {nll_loss};
  t["aten::nll_loss_nd"] = {nll_loss};
  t["aten::cross_entropy_loss"] = {cross_entropy};
  t["aten::binary_cross_entropy_with_logits"] = {bce_with_logits};
  t["aten::binary_cross_entropy"] = {bce};
  t["aten::mse_loss"] = {mse_loss};
  t["aten::l1_loss"] = {l1_loss};
  t["aten::smooth_l1_loss"] = {smooth_l1};
  t["aten::huber_loss"] = {huber};
  t["aten::kl_div"] = {kl_div};
  t["aten::soft_margin_loss"] = {soft_margin};
  t["aten::margin_ranking_loss"] = {margin_ranking};
  t["aten::hinge_embedding_loss"] = {hinge_embedding};
  t["aten::poisson_nll_loss"] = {poisson_nll};
}

}  // namespace t2o
