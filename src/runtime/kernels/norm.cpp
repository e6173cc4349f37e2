// BatchNormalization, InstanceNormalization, GroupNormalization, MeanVarianceNormalization, Dropout.
// LayerNormalization lives in norm_layer.cpp, the losses in loss.cpp.
// Statistics accumulate in double; inference BatchNorm becomes y = x * a[c] + b[c], with a and b
// precomputed at build when scale, bias, mean and var are constants (the fast path).
#include <cmath>
#include <random>
#include <set>
#include <type_traits>

#include "runtime/kernels/util.h"

namespace t2o {
namespace kern {

void register_layer_norm_kernels(KernelRegistry& r);
void register_loss_kernels(KernelRegistry& r);

// Fast path (tests reach it through a Session with fast_paths on): y[n, c, :] = x[n, c, :] * a[c] + b[c] over float planes.
void channel_affine_fast(const float* x, float* y, const float* a, const float* b, int64_t N, int64_t C,
                         int64_t plane, int threads) {
  parallel_for(N * C, threads, std::max<int64_t>(1, 16384 / std::max<int64_t>(plane, 1)), [&](int64_t s, int64_t e) {
    for (int64_t nc = s; nc < e; ++nc) {
      float av = a[nc % C], bv = b[nc % C];
      const float* xp = x + nc * plane;
      float* yp = y + nc * plane;
      for (int64_t i = 0; i < plane; ++i) yp[i] = xp[i] * av + bv;
    }
  });
}

namespace {

template <typename T>
constexpr bool is_floatish = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Calls f(T{}) for floating element types; fails otherwise.
template <typename F>
void dispatch_float(const KernelContext& ctx, DType t, F&& f) {
  if (!dtype_is_float(t)) ctx.fail("expects a floating-point input, got " + std::string(dtype_name(t)));
  dispatch_dtype(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (is_floatish<T>) f(v);
  });
}

std::vector<double> as_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.as_double(i);
  return v;
}

class BatchNormKernel : public OpKernel {
 public:
  explicit BatchNormKernel(const KernelInfo& info) : fast_(info.fast_paths) {
    eps_ = info.node.attr_float("epsilon", 1e-5f);
    momentum_ = info.node.attr_float("momentum", 0.9f);
    training_ = info.opset >= 14 && info.node.attr_int("training_mode", 0) != 0;
    if (info.fast_paths && !training_) {
      const Tensor* s = info.constant_input(1);
      const Tensor* b = info.constant_input(2);
      const Tensor* m = info.constant_input(3);
      const Tensor* v = info.constant_input(4);
      if (s && b && m && v && s->numel() == b->numel() && s->numel() == m->numel() && s->numel() == v->numel()) {
        std::vector<double> sd = as_doubles(*s), bd = as_doubles(*b), md = as_doubles(*m), vd = as_doubles(*v);
        for (size_t c = 0; c < sd.size(); ++c) {
          double a = sd[c] / std::sqrt(vd[c] + eps_);
          a_.push_back(static_cast<float>(a));
          b_.push_back(static_cast<float>(bd[c] - md[c] * a));
        }
      }
    }
  }

  void run(KernelContext& ctx) override {
    const Tensor& X = ctx.input(0);
    if (X.rank() < 2) ctx.fail("X must have rank >= 2, got " + dims_to_string(X.dims()));
    int64_t N = X.dim(0), C = X.dim(1);
    int64_t plane = C ? X.numel() / std::max<int64_t>(N * C, 1) : 0;
    // Per channel (spatial) or, as the old spatial=0 form, per activation.
    int64_t groups = C;
    for (int i = 1; i <= 4; ++i) {
      const Tensor& p = ctx.input(i);
      if (p.numel() != C) {
        if (p.numel() == C * plane && p.numel() > 0 && !training_) groups = C * plane;
        else ctx.fail("input " + std::to_string(i) + " has " + std::to_string(p.numel()) + " elements, expected " + std::to_string(C));
      }
    }
    Tensor& Y = ctx.allocate_output(0, X.dtype(), X.dims());
    if (!a_.empty() && X.dtype() == DType::Float && static_cast<int64_t>(a_.size()) == C) {
      channel_affine_fast(X.data<float>(), Y.data<float>(), a_.data(), b_.data(), N, C, plane, ctx.threads());
      return;
    }
    std::vector<double> sc = as_doubles(ctx.input(1)), bi = as_doubles(ctx.input(2)), mean = as_doubles(ctx.input(3)),
                        var = as_doubles(ctx.input(4));
    if (fast_ && !training_ && X.dtype() == DType::Float && groups == C) {
      // Parameters computed at run time: fold them into a per-channel affine now.
      std::vector<float> a(static_cast<size_t>(C)), b(static_cast<size_t>(C));
      for (size_t c = 0; c < a.size(); ++c) {
        double av = sc[c] / std::sqrt(var[c] + eps_);
        a[c] = static_cast<float>(av);
        b[c] = static_cast<float>(bi[c] - mean[c] * av);
      }
      channel_affine_fast(X.data<float>(), Y.data<float>(), a.data(), b.data(), N, C, plane, ctx.threads());
      return;
    }
    dispatch_float(ctx, X.dtype(), [&](auto t) {
      using T = decltype(t);
      const T* x = X.data<T>();
      T* y = Y.data<T>();
      std::vector<double> m = mean, v = var;
      if (training_) {
        // Batch statistics over every axis but the channel (population variance).
        std::vector<double> s(static_cast<size_t>(C)), s2(static_cast<size_t>(C));
        for (int64_t n = 0; n < N; ++n)
          for (int64_t c = 0; c < C; ++c)
            for (int64_t i = 0; i < plane; ++i) {
              double xv = static_cast<double>(x[(n * C + c) * plane + i]);
              s[static_cast<size_t>(c)] += xv;
            }
        double cnt = static_cast<double>(N * plane);
        for (int64_t c = 0; c < C; ++c) m[static_cast<size_t>(c)] = s[static_cast<size_t>(c)] / cnt;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t c = 0; c < C; ++c)
            for (int64_t i = 0; i < plane; ++i) {
              double d = static_cast<double>(x[(n * C + c) * plane + i]) - m[static_cast<size_t>(c)];
              s2[static_cast<size_t>(c)] += d * d;
            }
        for (int64_t c = 0; c < C; ++c) v[static_cast<size_t>(c)] = s2[static_cast<size_t>(c)] / cnt;
        for (int o = 1; o <= 2; ++o) {
          if (!ctx.has_output(o)) continue;
          Tensor& r = ctx.allocate_output(o, ctx.input(3).dtype(), {C});
          dispatch_float(ctx, r.dtype(), [&](auto u) {
            using U = decltype(u);
            const std::vector<double>& running = o == 1 ? mean : var;
            const std::vector<double>& cur = o == 1 ? m : v;
            for (int64_t c = 0; c < C; ++c)
              r.data<U>()[c] = static_cast<U>(static_cast<float>(running[static_cast<size_t>(c)] * momentum_ +
                                                                 cur[static_cast<size_t>(c)] * (1 - momentum_)));
          });
        }
      }
      int64_t gp = groups == C ? plane : 1;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t g = 0; g < groups; ++g) {
          size_t gi = static_cast<size_t>(g);
          double a = sc[gi] / std::sqrt(v[gi] + eps_);
          double b = bi[gi] - m[gi] * a;
          const T* xp = x + (n * groups + g) * gp;
          T* yp = y + (n * groups + g) * gp;
          for (int64_t i = 0; i < gp; ++i) yp[i] = static_cast<T>(static_cast<float>(static_cast<double>(xp[i]) * a + b));
        }
    });
  }

 private:
  bool fast_;
  float eps_, momentum_;
  bool training_;
  std::vector<float> a_, b_;
};

void instance_norm(KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor& S = ctx.input(1);
  const Tensor& B = ctx.input(2);
  if (X.rank() < 3) ctx.fail("input must have rank >= 3, got " + dims_to_string(X.dims()));
  int64_t N = X.dim(0), C = X.dim(1), plane = X.numel() / std::max<int64_t>(N * C, 1);
  if (S.numel() != C || B.numel() != C) ctx.fail("scale and B must have " + std::to_string(C) + " elements");
  double eps = ctx.node().attr_float("epsilon", 1e-5f);
  std::vector<double> sc = as_doubles(S), bi = as_doubles(B);
  Tensor& Y = ctx.allocate_output(0, X.dtype(), X.dims());
  dispatch_float(ctx, X.dtype(), [&](auto t) {
    using T = decltype(t);
    parallel_for(N * C, ctx.threads(), 4, [&](int64_t s, int64_t e) {
      for (int64_t nc = s; nc < e; ++nc) {
        const T* xp = X.data<T>() + nc * plane;
        T* yp = Y.data<T>() + nc * plane;
        double sum = 0, sq = 0;
        for (int64_t i = 0; i < plane; ++i) sum += static_cast<double>(xp[i]);
        double mean = sum / static_cast<double>(plane);
        for (int64_t i = 0; i < plane; ++i) {
          double d = static_cast<double>(xp[i]) - mean;
          sq += d * d;
        }
        size_t c = static_cast<size_t>(nc % C);
        double a = sc[c] / std::sqrt(sq / static_cast<double>(plane) + eps);
        for (int64_t i = 0; i < plane; ++i)
          yp[i] = static_cast<T>(static_cast<float>((static_cast<double>(xp[i]) - mean) * a + bi[c]));
      }
    });
  });
}

// GroupNormalization (opset 18): statistics over each group of C / num_groups channels. Scale
// and bias are per group (opset 18) or per channel (the opset 21 form), told apart by length.
void group_norm(KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor& S = ctx.input(1);
  const Tensor& B = ctx.input(2);
  if (X.rank() < 2) ctx.fail("input must have rank >= 2, got " + dims_to_string(X.dims()));
  int64_t G = ctx.node().attr_int("num_groups", 0);
  int64_t N = X.dim(0), C = X.dim(1);
  if (G <= 0 || C % G != 0) ctx.fail("num_groups " + std::to_string(G) + " must divide the " + std::to_string(C) + " channels");
  bool per_channel = S.numel() == C && C != G;
  if ((S.numel() != G && !per_channel) || B.numel() != S.numel())
    ctx.fail("scale and bias must have num_groups (" + std::to_string(G) + ") or C elements");
  double eps = ctx.node().attr_float("epsilon", 1e-5f);
  int64_t plane = X.numel() / std::max<int64_t>(N * C, 1), cpg = C / G, len = cpg * plane;
  std::vector<double> sc = as_doubles(S), bi = as_doubles(B);
  Tensor& Y = ctx.allocate_output(0, X.dtype(), X.dims());
  if (X.numel() == 0) return;
  dispatch_float(ctx, X.dtype(), [&](auto t) {
    using T = decltype(t);
    for (int64_t ng = 0; ng < N * G; ++ng) {
      const T* xp = X.data<T>() + ng * len;
      T* yp = Y.data<T>() + ng * len;
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < len; ++i) sum += static_cast<double>(xp[i]);
      double mean = sum / static_cast<double>(len);
      for (int64_t i = 0; i < len; ++i) sq += (static_cast<double>(xp[i]) - mean) * (static_cast<double>(xp[i]) - mean);
      double inv = 1.0 / std::sqrt(sq / static_cast<double>(len) + eps);
      int64_t g = ng % G;
      for (int64_t i = 0; i < len; ++i) {
        size_t k = static_cast<size_t>(per_channel ? g * cpg + i / plane : g);
        yp[i] = static_cast<T>(static_cast<float>((static_cast<double>(xp[i]) - mean) * inv * sc[k] + bi[k]));
      }
    }
  });
}

void mean_variance_norm(KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  std::vector<int64_t> axes = ctx.node().attr_ints("axes", {0, 2, 3});
  std::set<int64_t> red;
  for (int64_t a : axes) red.insert(norm_axis(ctx, a, X.rank()));
  Dims kept = X.dims();
  for (int64_t a : red) kept[static_cast<size_t>(a)] = 1;
  Dims ks = strides_of(kept);
  for (size_t d = 0; d < ks.size(); ++d)
    if (kept[d] == 1) ks[d] = 0;
  int64_t groups = numel_of(kept), per = groups ? X.numel() / groups : 0;
  Tensor& Y = ctx.allocate_output(0, X.dtype(), X.dims());
  if (X.numel() == 0) return;
  dispatch_float(ctx, X.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    std::vector<double> mean(static_cast<size_t>(groups)), var(static_cast<size_t>(groups));
    for_each_broadcast(X.dims(), {ks}, [&](int64_t i, const int64_t* o) { mean[static_cast<size_t>(o[0])] += static_cast<double>(x[i]); });
    for (double& m : mean) m /= static_cast<double>(per);
    for_each_broadcast(X.dims(), {ks}, [&](int64_t i, const int64_t* o) {
      double d = static_cast<double>(x[i]) - mean[static_cast<size_t>(o[0])];
      var[static_cast<size_t>(o[0])] += d * d;
    });
    for (double& v : var) v = std::sqrt(v / static_cast<double>(per)) + 1e-9;
    for_each_broadcast(X.dims(), {ks}, [&](int64_t i, const int64_t* o) {
      size_t g = static_cast<size_t>(o[0]);
      y[i] = static_cast<T>(static_cast<float>((static_cast<double>(x[i]) - mean[g]) / var[g]));
    });
  });
}

class DropoutKernel : public OpKernel {
 public:
  explicit DropoutKernel(const KernelInfo& info) : opset_(info.opset) {
    ratio_ = info.node.attr_float("ratio", 0.5f);
    // Before 7, is_test=0 meant training; we treat the old form as inference like every runtime does.
    has_seed_ = info.node.has_attr("seed");
    seed_ = static_cast<uint32_t>(info.node.attr_int("seed", 0));
    rng_.seed(std::random_device{}());
  }
  void run(KernelContext& ctx) override {
    const Tensor& X = ctx.input(0);
    float ratio = ratio_;
    bool training = false;
    if (opset_ >= 12) {
      if (ctx.has_input(1)) ratio = static_cast<float>(ctx.input(1).as_double(0));
      if (ctx.has_input(2)) training = ctx.input(2).as_int(0) != 0;
    }
    if (training && (ratio < 0 || ratio >= 1)) ctx.fail("ratio must be in [0, 1), got " + std::to_string(ratio));
    DType mask_t = opset_ >= 10 ? DType::Bool : X.dtype();
    if (!training || ratio == 0) {
      ctx.set_output(0, X);
      if (ctx.has_output(1)) {
        Tensor& m = ctx.allocate_output(1, mask_t, X.dims());
        dispatch_dtype(mask_t, [&](auto t) {
          using T = decltype(t);
          if constexpr (std::is_same_v<T, bool>) std::fill(m.data<T>(), m.data<T>() + m.numel(), true);
          else std::fill(m.data<T>(), m.data<T>() + m.numel(), static_cast<T>(1.0f));
        });
      }
      return;
    }
    Tensor& Y = ctx.allocate_output(0, X.dtype(), X.dims());
    Tensor mask = ctx.has_output(1) ? ctx.allocate_output(1, DType::Bool, X.dims()) : Tensor(DType::Bool, X.dims());
    // With a seed, every run restarts the stream, and the draws follow numpy's RandomState
    // (uniform doubles from two 32-bit words): the ONNX reference masks are reproduced exactly.
    if (has_seed_) rng_.seed(seed_);
    float scale = 1.0f / (1.0f - ratio);
    dispatch_float(ctx, X.dtype(), [&](auto t) {
      using T = decltype(t);
      for (int64_t i = 0; i < X.numel(); ++i) {
        uint32_t a = static_cast<uint32_t>(rng_()) >> 5, b = static_cast<uint32_t>(rng_()) >> 6;
        double u = (a * 67108864.0 + b) / 9007199254740992.0;
        bool k = u >= ratio;
        mask.data<bool>()[i] = k;
        Y.data<T>()[i] = static_cast<T>(k ? static_cast<float>(X.data<T>()[i]) * scale : 0.0f);
      }
    });
  }

 private:
  int64_t opset_;
  float ratio_;
  bool has_seed_;
  uint32_t seed_;
  std::mt19937 rng_;
};

}  // namespace
}  // namespace kern

void register_norm_kernels(KernelRegistry& r) {
  r.add("", "BatchNormalization", 1, factory_of<kern::BatchNormKernel>());
  r.add("", "BatchNormalization", 14, factory_of<kern::BatchNormKernel>());
  r.add("", "InstanceNormalization", 1, stateless(kern::instance_norm));
  r.add("", "MeanVarianceNormalization", 9, stateless(kern::mean_variance_norm));
  r.add("", "GroupNormalization", 18, stateless(kern::group_norm));
  r.add("", "Dropout", 1, factory_of<kern::DropoutKernel>());
  r.add("", "Dropout", 12, factory_of<kern::DropoutKernel>());
  kern::register_layer_norm_kernels(r);
  kern::register_loss_kernels(r);
}

}  // namespace t2o
