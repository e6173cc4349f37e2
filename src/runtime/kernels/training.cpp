// Optimizer steps of the "ai.onnx.preview.training" domain: Adagrad, Adam, Momentum.
// Each updates n tensors at once: inputs R, T, then groups of n (X, G, and the optimizer's state),
// outputs the new X's followed by the new states. Arithmetic is in double, stored in X's type.
// (Gradient needs autodiff of the whole graph and is not runnable here.)
#include <cmath>
#include <string>
#include <vector>

#include "runtime/kernel.h"

namespace t2o {
namespace {

enum class Opt { Adagrad, Adam, Momentum };

void put(Tensor& t, int64_t i, double v) {
  if (t.dtype() == DType::Float) t.data<float>()[i] = static_cast<float>(v);
  else t.data<double>()[i] = v;
}

class OptimizerKernel : public OpKernel {
 public:
  OptimizerKernel(const KernelInfo& info, Opt opt) : opt_(opt) {
    const Node& n = info.node;
    norm_ = n.attr_float("norm_coefficient", 0.f);
    if (opt == Opt::Adagrad) {
      decay_ = n.attr_float("decay_factor", 0.f);
      eps_ = n.attr_float("epsilon", 1e-6f);
    } else if (opt == Opt::Adam) {
      alpha_ = n.attr_float("alpha", 0.9f);
      beta_ = n.attr_float("beta", 0.999f);
      eps_ = n.attr_float("epsilon", 1e-6f);
      norm_post_ = n.attr_float("norm_coefficient_post", 0.f);
    } else {
      if (!n.has_attr("alpha") || !n.has_attr("beta") || !n.has_attr("mode") || !n.has_attr("norm_coefficient"))
        throw Error(n.describe() + ": Momentum needs alpha, beta, mode and norm_coefficient");
      alpha_ = n.attr_float("alpha", 0.f);
      beta_ = n.attr_float("beta", 0.f);
      std::string mode = n.attr_string("mode", "standard");
      if (mode != "standard" && mode != "nesterov") throw Error(n.describe() + ": unknown mode '" + mode + "'");
      nesterov_ = mode == "nesterov";
    }
  }

  void run(KernelContext& ctx) override {
    int groups = opt_ == Opt::Adam ? 4 : 3;  // X, G, states
    int rest = ctx.num_inputs() - 2;
    if (rest <= 0 || rest % groups != 0) ctx.fail("expected R, T and " + std::to_string(groups) + " groups of tensors");
    int n = rest / groups;
    double r = ctx.input(0).as_double(0);
    int64_t t = ctx.input(1).as_int(0);
    for (int k = 0; k < n; ++k) {
      const Tensor& x = ctx.input(2 + k);
      if (x.dtype() != DType::Float && x.dtype() != DType::Double) ctx.fail("X must be f32 or f64");
      std::vector<const Tensor*> in;
      for (int g = 1; g < groups; ++g) {
        in.push_back(&ctx.input(2 + g * n + k));
        if (in.back()->dims() != x.dims() || in.back()->dtype() != x.dtype())
          ctx.fail("tensor group " + std::to_string(k) + " disagrees in shape or type");
      }
      Tensor& xo = ctx.allocate_output(k, x.dtype(), x.dims());
      std::vector<Tensor*> so;
      for (int g = 2; g < groups; ++g) so.push_back(&ctx.allocate_output((g - 1) * n + k, x.dtype(), x.dims()));
      for (int64_t i = 0; i < x.numel(); ++i) {
        double xv = x.as_double(i), gr = norm_ * xv + in[0]->as_double(i);
        if (opt_ == Opt::Adagrad) {
          double rate = r / (1.0 + static_cast<double>(t) * decay_);
          double h = in[1]->as_double(i) + gr * gr;
          put(*so[0], i, h);
          put(xo, i, xv - rate * gr / (std::sqrt(h) + eps_));
        } else if (opt_ == Opt::Momentum) {
          double beta = t > 0 ? beta_ : 1.0;
          double v = alpha_ * in[1]->as_double(i) + beta * gr;
          put(*so[0], i, v);
          put(xo, i, nesterov_ ? xv - r * (gr + alpha_ * v) : xv - r * v);
        } else {
          double v = alpha_ * in[1]->as_double(i) + (1 - alpha_) * gr;
          double h = beta_ * in[2]->as_double(i) + (1 - beta_) * gr * gr;
          double rate = t > 0 ? r * std::sqrt(1 - std::pow(beta_, static_cast<double>(t))) /
                                    (1 - std::pow(alpha_, static_cast<double>(t)))
                              : r;
          put(*so[0], i, v);
          put(*so[1], i, h);
          put(xo, i, (1 - norm_post_) * (xv - rate * v / (std::sqrt(h) + eps_)));
        }
      }
    }
  }

 private:
  Opt opt_;
  double norm_ = 0, norm_post_ = 0, decay_ = 0, eps_ = 0, alpha_ = 0, beta_ = 0;
  bool nesterov_ = false;
};

KernelFactory optimizer(Opt o) {
  return [o](const KernelInfo& info) { return std::make_unique<OptimizerKernel>(info, o); };
}

}  // namespace

void register_training_kernels(KernelRegistry& r) {
  r.add("ai.onnx.preview.training", "Adagrad", 1, optimizer(Opt::Adagrad));
  r.add("ai.onnx.preview.training", "Adam", 1, optimizer(Opt::Adam));
  r.add("ai.onnx.preview.training", "Momentum", 1, optimizer(Opt::Momentum));
}

}  // namespace t2o
