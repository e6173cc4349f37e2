// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (which is NLL of LogSoftmax over axis 1).
// input (N, C, d1..dk), target (N, d1..dk); "mean" divides by the summed weights of the
// targets that are not ignore_index.
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/kernels/util.h"

namespace t2o::kern {
namespace {

template <typename T>
constexpr bool is_floatish = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The NLL over log-probabilities lp[(n*C + c)*D + d]; writes the loss (reduced or not) into out 0.
void nll(KernelContext& ctx, const std::vector<double>& lp, const Dims& in_dims, const Tensor& target,
         const Tensor* weight, DType out_t) {
  if (in_dims.size() < 2) ctx.fail("input must have rank >= 2, got " + dims_to_string(in_dims));
  int64_t N = in_dims[0], C = in_dims[1];
  Dims tdims{N};
  tdims.insert(tdims.end(), in_dims.begin() + 2, in_dims.end());
  if (target.dims() != tdims)
    ctx.fail("target has shape " + dims_to_string(target.dims()) + ", expected " + dims_to_string(tdims));
  if (target.dtype() != DType::Int32 && target.dtype() != DType::Int64) ctx.fail("target must be int32 or int64");
  if (weight && weight->numel() != C) ctx.fail("weight must have " + std::to_string(C) + " elements");
  std::string reduction = ctx.node().attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") ctx.fail("unknown reduction '" + reduction + "'");
  bool has_ii = ctx.node().has_attr("ignore_index");
  int64_t ii = ctx.node().attr_int("ignore_index", 0);
  int64_t D = N ? target.numel() / std::max<int64_t>(N, 1) : 0;
  std::vector<double> loss(static_cast<size_t>(target.numel()));
  double wsum = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      int64_t i = n * D + d;
      int64_t t = target.as_int(i);
      if (has_ii && t == ii) continue;
      if (t < 0 || t >= C) ctx.fail("target " + std::to_string(t) + " is out of range [0, " + std::to_string(C) + ")");
      double w = weight ? weight->as_double(t) : 1.0;
      loss[static_cast<size_t>(i)] = -lp[static_cast<size_t>((n * C + t) * D + d)] * w;
      wsum += w;
    }
  Tensor& out = ctx.allocate_output(0, out_t, reduction == "none" ? tdims : Dims{});
  dispatch_dtype(out_t, [&](auto v) {
    using T = decltype(v);
    if constexpr (is_floatish<T>) {
      T* o = out.data<T>();
      if (reduction == "none") {
        for (size_t i = 0; i < loss.size(); ++i) o[i] = static_cast<T>(static_cast<float>(loss[i]));
        return;
      }
      double s = 0;
      for (double l : loss) s += l;
      if (reduction == "mean") s = wsum == 0 ? (s == 0 ? 0.0 : std::numeric_limits<double>::quiet_NaN()) : s / wsum;
      o[0] = static_cast<T>(static_cast<float>(s));
    }
  });
}

void nll_loss(KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  if (!dtype_is_float(X.dtype())) ctx.fail("input must be floating point");
  std::vector<double> lp(static_cast<size_t>(X.numel()));
  for (int64_t i = 0; i < X.numel(); ++i) lp[static_cast<size_t>(i)] = X.as_double(i);
  nll(ctx, lp, X.dims(), ctx.input(1), ctx.has_input(2) ? &ctx.input(2) : nullptr, X.dtype());
}

void softmax_cross_entropy(KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  if (!dtype_is_float(X.dtype())) ctx.fail("scores must be floating point");
  if (X.rank() < 2) ctx.fail("scores must have rank >= 2, got " + dims_to_string(X.dims()));
  int64_t N = X.dim(0), C = X.dim(1), D = X.numel() / std::max<int64_t>(N * C, 1);
  std::vector<double> lp(static_cast<size_t>(X.numel()));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      double m = -std::numeric_limits<double>::infinity(), s = 0;
      for (int64_t c = 0; c < C; ++c) m = std::max(m, X.as_double((n * C + c) * D + d));
      for (int64_t c = 0; c < C; ++c) s += std::exp(X.as_double((n * C + c) * D + d) - m);
      double ls = std::log(s) + m;
      for (int64_t c = 0; c < C; ++c) {
        int64_t i = (n * C + c) * D + d;
        lp[static_cast<size_t>(i)] = X.as_double(i) - ls;
      }
    }
  nll(ctx, lp, X.dims(), ctx.input(1), ctx.has_input(2) ? &ctx.input(2) : nullptr, X.dtype());
  if (ctx.has_output(1)) {
    Tensor& L = ctx.allocate_output(1, X.dtype(), X.dims());
    dispatch_dtype(X.dtype(), [&](auto v) {
      using T = decltype(v);
      if constexpr (is_floatish<T>)
        for (size_t i = 0; i < lp.size(); ++i) L.data<T>()[i] = static_cast<T>(static_cast<float>(lp[i]));
    });
  }
}

}  // namespace

void register_loss_kernels(KernelRegistry& r) {
  r.add("", "NegativeLogLikelihoodLoss", 12, stateless(nll_loss));
  r.add("", "SoftmaxCrossEntropyLoss", 12, stateless(softmax_cross_entropy));
}

}  // namespace t2o::kern
