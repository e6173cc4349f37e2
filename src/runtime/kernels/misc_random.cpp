// Random generators: RandomUniform(Like), RandomNormal(Like), Bernoulli, Multinomial.
// Each kernel owns a generator seeded once at build (from `seed` when given), so a seeded
// session is reproducible run to run; values never match other runtimes' streams bit for bit.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "runtime/kernels/util.h"

namespace t2o {
namespace {

template <typename T>
void store(T* p, int64_t i, double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) p[i] = T(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>) p[i] = v != 0;
  else if constexpr (std::is_integral_v<T>) p[i] = kern::saturate_cast<T>(v);  // high/mean come from the model
  else p[i] = static_cast<T>(v);
}

class RandomKernel : public OpKernel {
 public:
  enum class Kind { Uniform, Normal, UniformLike, NormalLike, Bernoulli, Multinomial };
  RandomKernel(const KernelInfo& info, Kind kind) : kind_(kind) {
    const Node& n = info.node;
    if (n.has_attr("seed")) {
      float s = n.attr_float("seed", 0.f);
      gen_.seed(static_cast<uint64_t>(kern::saturate_cast<int64_t>(s)) ^ 0x9e3779b97f4a7c15ULL);
    } else {
      gen_.seed(std::random_device{}());
    }
    has_dtype_ = n.has_attr("dtype");
    dtype_ = static_cast<DType>(n.attr_int("dtype", kind == Kind::Multinomial ? 6 : 1));
    if (!dtype_is_valid(static_cast<int32_t>(dtype_)) || dtype_ == DType::String || dtype_ == DType::Undefined)
      throw Error(n.describe() + ": unsupported dtype attribute");
    a_ = kind == Kind::Normal || kind == Kind::NormalLike ? n.attr_float("mean", 0.f) : n.attr_float("low", 0.f);
    b_ = kind == Kind::Normal || kind == Kind::NormalLike ? n.attr_float("scale", 1.f) : n.attr_float("high", 1.f);
    shape_ = n.attr_ints("shape");
    samples_ = n.attr_int("sample_size", 1);
  }

  void run(KernelContext& ctx) override {
    std::lock_guard<std::mutex> lock(mu_);  // the generator is shared state across runs
    switch (kind_) {
      case Kind::Uniform:
      case Kind::Normal: {
        for (int64_t d : shape_)
          if (d < 0) ctx.fail("shape has a negative dimension");
        fill(ctx, ctx.allocate_output(0, dtype_, shape_));
        return;
      }
      case Kind::UniformLike:
      case Kind::NormalLike: {
        const Tensor& x = ctx.input(0);
        fill(ctx, ctx.allocate_output(0, has_dtype_ ? dtype_ : x.dtype(), x.dims()));
        return;
      }
      case Kind::Bernoulli: bernoulli(ctx); return;
      case Kind::Multinomial: multinomial(ctx); return;
    }
  }

 private:
  void fill(const KernelContext& ctx, Tensor& out) {
    if (!dtype_is_float(out.dtype())) ctx.fail("random values need a floating-point dtype");
    bool normal = kind_ == Kind::Normal || kind_ == Kind::NormalLike;
    std::uniform_real_distribution<double> u(a_, b_);
    std::normal_distribution<double> g(a_, b_);
    dispatch_dtype(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* p = out.data<T>();
      for (int64_t i = 0; i < out.numel(); ++i) store(p, i, normal ? g(gen_) : u(gen_));
    });
  }

  void bernoulli(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (!dtype_is_float(x.dtype())) ctx.fail("input probabilities must be floating point");
    Tensor& out = ctx.allocate_output(0, has_dtype_ ? dtype_ : x.dtype(), x.dims());
    std::uniform_real_distribution<double> u(0.0, 1.0);
    dispatch_dtype(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* p = out.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        double pr = x.as_double(i);
        if (!(pr >= 0 && pr <= 1)) ctx.fail("probability " + std::to_string(pr) + " is outside [0, 1]");
        store(p, i, u(gen_) < pr ? 1.0 : 0.0);
      }
    });
  }

  void multinomial(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 2) ctx.fail("input must have shape [batch, classes]");
    if (dtype_ != DType::Int32 && dtype_ != DType::Int64) ctx.fail("dtype must be int32 or int64");
    if (samples_ < 1) ctx.fail("sample_size must be positive");
    int64_t batch = x.dim(0), classes = x.dim(1);
    if (classes < 1) ctx.fail("there must be at least one class");
    Tensor& out = ctx.allocate_output(0, dtype_, {batch, samples_});
    std::vector<double> cdf(static_cast<size_t>(classes));
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int64_t b = 0; b < batch; ++b) {
      // Inputs are unnormalised log-probabilities.
      double mx = -INFINITY;
      for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, x.as_double(b * classes + c));
      double acc = 0;
      for (int64_t c = 0; c < classes; ++c) cdf[static_cast<size_t>(c)] = acc += std::exp(x.as_double(b * classes + c) - mx);
      for (int64_t s = 0; s < samples_; ++s) {
        double r = u(gen_) * acc;
        int64_t c = static_cast<int64_t>(std::upper_bound(cdf.begin(), cdf.end(), r) - cdf.begin());
        c = std::min(c, classes - 1);
        if (dtype_ == DType::Int32) out.data<int32_t>()[b * samples_ + s] = static_cast<int32_t>(c);
        else out.data<int64_t>()[b * samples_ + s] = c;
      }
    }
  }

  Kind kind_;
  std::mt19937_64 gen_;
  std::mutex mu_;
  bool has_dtype_ = false;
  DType dtype_ = DType::Float;
  double a_ = 0, b_ = 1;
  Dims shape_;
  int64_t samples_ = 1;
};

KernelFactory random_kernel(RandomKernel::Kind k) {
  return [k](const KernelInfo& info) { return std::make_unique<RandomKernel>(info, k); };
}

}  // namespace

void register_random_kernels(KernelRegistry& r) {
  using K = RandomKernel::Kind;
  r.add("", "RandomUniform", 1, random_kernel(K::Uniform));
  r.add("", "RandomNormal", 1, random_kernel(K::Normal));
  r.add("", "RandomUniformLike", 1, random_kernel(K::UniformLike));
  r.add("", "RandomNormalLike", 1, random_kernel(K::NormalLike));
  r.add("", "Multinomial", 7, random_kernel(K::Multinomial));
  r.add("", "Bernoulli", 15, random_kernel(K::Bernoulli));
}

}  // namespace t2o
