// Pooling: AveragePool, MaxPool (with Indices), LpPool, their Global forms, MaxUnpool, LRN.
// Reference loops handle every dtype and attribute; f32 Max/AveragePool use oneDNN when allowed.
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/kernels/avx512_math.h"
#include "runtime/kernels/conv_dnnl.h"
#include "runtime/kernels/util.h"
#include "runtime/optimize.h"

namespace t2o {

namespace {

using kern::Geom;
using kern::WindowAttrs;

// Compute type of a storage type: float for f16/bf16/f32, double for f64, itself for integers.
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double,
                                 std::conditional_t<std::is_integral_v<T>, T, float>>;

template <typename T>
bool is_float_family() {
  return std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> ||
         std::is_same_v<T, BFloat16>;
}

Dims spatial(const Dims& d) { return Dims(d.begin() + 2, d.end()); }

Dims with_nc(const Tensor& x, const Dims& sp) {
  Dims d{x.dim(0), x.dim(1)};
  d.insert(d.end(), sp.begin(), sp.end());
  return d;
}

void check_input(const KernelContext& ctx, const Tensor& x) {
  if (x.rank() < 3) ctx.fail("X must have rank >= 3 (N x C x spatial), got " + dims_to_string(x.dims()));
  if (x.rank() > 5) ctx.fail("only 1, 2 and 3 spatial dimensions are supported");
}

// Calls f(i0, i1, i2) for every in-range input position of output window (o0, o1, o2).
template <typename F>
inline void for_window(const Geom& g, int64_t o0, int64_t o1, int64_t o2, F&& f) {
  for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
    int64_t i0 = o0 * g.stride[0] - g.pb[0] + k0 * g.dil[0];
    if (i0 < 0 || i0 >= g.in[0]) continue;
    for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
      int64_t i1 = o1 * g.stride[1] - g.pb[1] + k1 * g.dil[1];
      if (i1 < 0 || i1 >= g.in[1]) continue;
      for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
        int64_t i2 = o2 * g.stride[2] - g.pb[2] + k2 * g.dil[2];
        if (i2 < 0 || i2 >= g.in[2]) continue;
        f(i0, i1, i2);
      }
    }
  }
}

// Runs f(plane, o0, o1, o2, out_offset) over every output element, planes in parallel.
template <typename F>
void for_outputs(int64_t planes, const Geom& g, int threads, F&& f) {
  kern::parallel_for(planes, threads, 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      int64_t off = p * g.out_size();
      for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
        for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
          for (int64_t o2 = 0; o2 < g.out[2]; ++o2) f(p, o0, o1, o2, off++);
    }
  });
}

// Number of window positions inside [-pb, in + pe) (AveragePool with count_include_pad).
int64_t padded_count(const Geom& g, int64_t o0, int64_t o1, int64_t o2) {
  int64_t o[3] = {o0, o1, o2}, n = 1;
  for (int d = 0; d < 3; ++d) {
    int64_t c = 0;
    for (int64_t k = 0; k < g.k[d]; ++k) {
      int64_t i = o[d] * g.stride[d] - g.pb[d] + k * g.dil[d];
      if (i >= -g.pb[d] && i < g.in[d] + g.pe[d]) ++c;
    }
    n *= c;
  }
  return n;
}

class PoolKernel : public OpKernel {
 public:
  enum class Kind { Avg, Max, Lp };
  PoolKernel(const KernelInfo& info, Kind kind) : kind_(kind), attrs_(WindowAttrs::from_node(info.node)) {
    const Node& n = info.node;
    count_include_pad_ = n.attr_int("count_include_pad", 0) != 0;
    storage_order_ = n.attr_int("storage_order", 0);
    if (kind == Kind::Lp) {
      const Attribute* a = n.find_attr("p");
      p_ = !a ? 2.0 : a->type == AttrType::Float ? a->f : static_cast<double>(a->i);
    }
    if (attrs_.kernel.empty()) throw Error(n.describe() + ": kernel_shape is required");
    blk_ = n.attr_int("block", 0);
    keep_nan_ = n.attr_int("keep_nan", 0) != 0;
    channels_ = n.attr_int("channels", 0);
    if (blk_ && (!info.fast_paths || attrs_.kernel.size() != 2 || channels_ < 1))
      throw Error(n.describe() + ": blocked layouts need fast paths, a 2-d window and a channel count");
    if (info.fast_paths && kind != Kind::Lp)
      dnnl_ = std::make_unique<kern::DnnlPool>(kind == Kind::Max ? kern::DnnlPool::Kind::Max
                                               : count_include_pad_ ? kern::DnnlPool::Kind::AvgIncludePad
                                                                    : kern::DnnlPool::Kind::AvgExcludePad);
  }

  void run(KernelContext& ctx) override {
    if (blk_) return run_blocked(ctx);
    const Tensor& x = ctx.input(0);
    check_input(ctx, x);
    Geom g = kern::forward_geom(ctx.node(), attrs_, spatial(x.dims()), attrs_.kernel);
    // Both paths write every output element: no need to zero it first.
    Tensor& y = ctx.allocate_output_uninit(0, x.dtype(), with_nc(x, g.out));
    bool want_idx = kind_ == Kind::Max && ctx.num_outputs() > 1 && ctx.has_output(1);
    Tensor* idx = want_idx ? &ctx.allocate_output(1, DType::Int64, y.dims()) : nullptr;
    if (y.numel() == 0) return;
    if (dnnl_ && !idx && x.dtype() == DType::Float && !exact(ctx) && dnnl_->run(x, g, y)) return;
    Geom g3 = g.as_3d();
    int64_t planes = x.dim(0) * x.dim(1);
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        ctx.fail("bool input is not supported");
      } else {
        if (kind_ != Kind::Max && !is_float_family<T>())
          ctx.fail("element type " + std::string(dtype_name(x.dtype())) + " is not supported");
        run_typed<T>(x.data<T>(), y.data<T>(), idx ? idx->data<int64_t>() : nullptr, planes, g3, ctx.threads());
      }
    });
  }

 private:
  // BlockedPool: X and Y channel-blocked ([N, C/b, H, W, b], C = channels); oneDNN pools them as
  // they are, the reference goes through NCHW copies.
  void run_blocked(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::Float || x.rank() != 5 || x.dims().back() != blk_ || x.dim(1) * blk_ < channels_)
      ctx.fail("expects an f32 input blocked by " + std::to_string(blk_) + ", got " + dims_to_string(x.dims()));
    Dims xd = kern::logical_dims(x.dims(), channels_);
    Geom g = kern::forward_geom(ctx.node(), attrs_, spatial(xd), attrs_.kernel);
    Dims yd{xd[0], xd[1]};
    yd.insert(yd.end(), g.out.begin(), g.out.end());
    Tensor& y = ctx.allocate_output_uninit(0, DType::Float, kern::blocked_dims(yd, blk_));
    if (y.numel() == 0) return;
    if (dnnl_ && !exact(ctx) && dnnl_->run(x, g, y, blk_, channels_)) return;
    Tensor xp = Tensor::uninitialized(DType::Float, xd), yp = Tensor::uninitialized(DType::Float, yd);
    kern::to_plain(x, xp);
    run_typed<float>(xp.data<float>(), yp.data<float>(), nullptr, xd[0] * xd[1], g.as_3d(), ctx.threads());
    kern::to_blocked(yp, y);
  }

  // oneDNN's max pooling skips a NaN (PyTorch returns it): runs NaN may reach take the reference.
  bool exact(const KernelContext& ctx) const { return kind_ == Kind::Max && (keep_nan_ || ctx.nonfinite_inputs()); }

  template <typename T>
  void run_typed(const T* x, T* y, int64_t* idx, int64_t planes, const Geom& g, int threads) const {
    using A = acc_t<T>;
    int64_t isz = g.in_size();
    for_outputs(planes, g, threads, [&](int64_t p, int64_t o0, int64_t o1, int64_t o2, int64_t off) {
      const T* xp = x + p * isz;
      if (kind_ == Kind::Max) {
        A best = std::numeric_limits<A>::lowest();
        if constexpr (std::numeric_limits<A>::has_infinity) best = -std::numeric_limits<A>::infinity();
        int64_t at = -1;
        for_window(g, o0, o1, o2, [&](int64_t i0, int64_t i1, int64_t i2) {
          int64_t flat = (i0 * g.in[1] + i1) * g.in[2] + i2;
          A v = static_cast<A>(xp[flat]);
          // A NaN wins, as in PyTorch (v != v: NaN; the last one's position is reported).
          if (at < 0 || v > best || v != v) {
            best = v;
            // storage_order 1 numbers positions column-major.
            at = storage_order_ ? i0 + (i1 + i2 * g.in[1]) * g.in[0] : flat;
          }
        });
        y[off] = T(best);
        if (idx) idx[off] = p * isz + std::max<int64_t>(at, 0);
        return;
      }
      A sum = 0;
      int64_t count = 0;
      for_window(g, o0, o1, o2, [&](int64_t i0, int64_t i1, int64_t i2) {
        A v = static_cast<A>(xp[(i0 * g.in[1] + i1) * g.in[2] + i2]);
        sum += kind_ == Kind::Lp ? static_cast<A>(std::pow(std::fabs(static_cast<double>(v)), p_)) : v;
        ++count;
      });
      if (kind_ == Kind::Lp) {
        y[off] = T(static_cast<A>(std::pow(static_cast<double>(sum), 1.0 / p_)));
        return;
      }
      if (count_include_pad_) count = padded_count(g, o0, o1, o2);
      y[off] = T(count > 0 ? sum / static_cast<A>(count) : A(0));
    });
  }

  Kind kind_;
  WindowAttrs attrs_;
  bool count_include_pad_ = false;
  int64_t storage_order_ = 0;
  double p_ = 2.0;
  int64_t blk_ = 0, channels_ = 0;
  bool keep_nan_ = false;  // NaN may reach this pool from inside the model (optimize.h)
  std::unique_ptr<kern::DnnlPool> dnnl_;
};

template <PoolKernel::Kind K>
KernelFactory pool_factory() {
  return [](const KernelInfo& info) { return std::make_unique<PoolKernel>(info, K); };
}

// ai.torch2onnx.internal::BlockedPool: a MaxPool (kind "max") or AveragePool ("avg") on
// channel-blocked activations (runtime/optimize.h), with their attributes plus block / channels.
std::unique_ptr<OpKernel> make_blocked_pool(const KernelInfo& info) {
  std::string kind = info.node.attr_string("kind", "");
  if (kind != "max" && kind != "avg") throw Error(info.node.describe() + ": kind must be max or avg");
  return std::make_unique<PoolKernel>(info, kind == "max" ? PoolKernel::Kind::Max : PoolKernel::Kind::Avg);
}

// GlobalAveragePool / GlobalMaxPool / GlobalLpPool: one window covering all spatial dims.
class GlobalPoolKernel : public OpKernel {
 public:
  GlobalPoolKernel(const KernelInfo& info, PoolKernel::Kind kind) : kind_(kind) {
    const Attribute* a = info.node.find_attr("p");
    p_ = !a ? 2.0 : a->type == AttrType::Float ? a->f : static_cast<double>(a->i);
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) ctx.fail("X must have rank >= 2, got " + dims_to_string(x.dims()));
    Dims yd(x.dims());
    for (size_t i = 2; i < yd.size(); ++i) yd[i] = 1;
    Tensor& y = ctx.allocate_output(0, x.dtype(), yd);
    int64_t planes = x.dim(0) * x.dim(1), sz = planes ? x.numel() / planes : 0;
    if (planes > 0 && sz == 0) ctx.fail("X has an empty spatial dimension");
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        if (!is_float_family<T>() && kind_ != PoolKernel::Kind::Max)
          ctx.fail("element type " + std::string(dtype_name(x.dtype())) + " is not supported");
        using A = acc_t<T>;
        const T* xp = x.data<T>();
        T* yp = y.data<T>();
        const int threads = kern::task_threads_for(ctx.threads(), kern::work_us(0, 4.0 * static_cast<double>(x.numel())));
        kern::parallel_for(planes, threads, 16, [&](int64_t b, int64_t e) {
          for (int64_t p = b; p < e; ++p) {
            const T* s = xp + p * sz;
            if (kind_ == PoolKernel::Kind::Max) {
              A best = static_cast<A>(s[0]);
              for (int64_t i = 1; i < sz; ++i) {
                A v = static_cast<A>(s[i]);
                if (v > best || v != v) best = v;  // a NaN wins and stays, as in PyTorch
              }
              yp[p] = T(best);
            } else if (kind_ == PoolKernel::Kind::Avg) {
              A sum = 0;
              for (int64_t i = 0; i < sz; ++i) sum += static_cast<A>(s[i]);
              yp[p] = T(sum / static_cast<A>(sz));
            } else {
              double sum = 0;
              for (int64_t i = 0; i < sz; ++i) sum += std::pow(std::fabs(static_cast<double>(static_cast<A>(s[i]))), p_);
              yp[p] = T(static_cast<A>(std::pow(sum, 1.0 / p_)));
            }
          }
        });
      } else {
        ctx.fail("bool input is not supported");
      }
    });
  }

 private:
  PoolKernel::Kind kind_;
  double p_;
};

// ai.torch2onnx.internal::BlockedGlobalPool (kind "avg" | "max", block, channels): a
// GlobalAveragePool / GlobalMaxPool reading channel-blocked activations ([N, C/b, H, W, b],
// runtime/optimize.h) and writing the plain [N, C, 1, 1] result, so that the conv before it needs
// no reorder. Sums in float, pixel by pixel, as the plain kernel does; a NaN wins a max.
T2O_AVX512_WARNINGS_OFF
T2O_AVX512 void blocked_global_pool16(const float* x, int64_t hw, bool max, float* out) {
  __m512 acc = max ? _mm512_loadu_ps(x) : _mm512_setzero_ps();
  __mmask16 nan = _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q);
  for (int64_t p = max ? 1 : 0; p < hw; ++p) {
    const __m512 v = _mm512_loadu_ps(x + p * 16);
    if (max) {
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      acc = _mm512_max_ps(acc, v);
    } else {
      acc = _mm512_add_ps(acc, v);
    }
  }
  if (max) {
    acc = _mm512_mask_mov_ps(acc, nan, _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()));
  } else {
    acc = _mm512_div_ps(acc, _mm512_set1_ps(static_cast<float>(hw)));
  }
  _mm512_storeu_ps(out, acc);
}
T2O_AVX512_WARNINGS_ON

class BlockedGlobalPoolKernel : public OpKernel {
 public:
  explicit BlockedGlobalPoolKernel(const KernelInfo& info) {
    const std::string kind = info.node.attr_string("kind", "");
    if (kind != "max" && kind != "avg") throw Error(info.node.describe() + ": kind must be max or avg");
    max_ = kind == "max";
    blk_ = info.node.attr_int("block", 0);
    channels_ = info.node.attr_int("channels", 0);
    if (blk_ < 1 || blk_ > 64 || channels_ < 1) throw Error(info.node.describe() + ": needs a block of 1..64 and a channel count");
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::Float || x.rank() != 5 || x.dim(4) != blk_ || x.dim(1) != (channels_ + blk_ - 1) / blk_)
      ctx.fail("expects an f32 input blocked by " + std::to_string(blk_) + " over " + std::to_string(channels_) +
               " channels, got " + dims_to_string(x.dims()));
    const int64_t n = x.dim(0), cb = x.dim(1), hw = x.dim(2) * x.dim(3);
    if (n > 0 && hw == 0) ctx.fail("X has an empty spatial dimension");
    Tensor& y = ctx.allocate_output_uninit(0, DType::Float, {n, channels_, 1, 1});
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const bool avx = blk_ == 16 && kern::has_avx512();
    const int threads = kern::task_threads_for(ctx.threads(), kern::work_us(0, 4.0 * static_cast<double>(x.numel())));
    kern::parallel_for(n * cb, threads, 8, [&](int64_t b, int64_t e) {
      std::vector<float> acc(static_cast<size_t>(blk_));
      for (int64_t plane = b; plane < e; ++plane) {
        const float* s = xp + plane * hw * blk_;
        const int64_t c0 = (plane % cb) * blk_, lanes = std::min(blk_, channels_ - c0);
        if (avx) {
          blocked_global_pool16(s, hw, max_, acc.data());
        } else {
          for (int64_t l = 0; l < blk_; ++l) acc[l] = max_ ? s[l] : 0.0f;
          for (int64_t p = max_ ? 1 : 0; p < hw; ++p)
            for (int64_t l = 0; l < blk_; ++l) {
              const float v = s[p * blk_ + l];
              if (!max_) acc[l] += v;
              else if (v > acc[l] || v != v) acc[l] = v;  // a NaN wins and stays
            }
          if (!max_)
            for (int64_t l = 0; l < blk_; ++l) acc[l] /= static_cast<float>(hw);
        }
        std::memcpy(yp + (plane / cb) * channels_ + c0, acc.data(), static_cast<size_t>(lanes) * sizeof(float));
      }
    });
  }

 private:
  bool max_ = false;
  int64_t blk_ = 0, channels_ = 0;
};

template <PoolKernel::Kind K>
KernelFactory global_factory() {
  return [](const KernelInfo& info) { return std::make_unique<GlobalPoolKernel>(info, K); };
}

class MaxUnpoolKernel : public OpKernel {
 public:
  explicit MaxUnpoolKernel(const KernelInfo& info) : attrs_(WindowAttrs::from_node(info.node)) {
    if (attrs_.kernel.empty()) throw Error(info.node.describe() + ": kernel_shape is required");
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& ind = ctx.input(1);
    check_input(ctx, x);
    if (ind.dims() != x.dims()) ctx.fail("I must have the shape of X");
    size_t n = static_cast<size_t>(x.rank() - 2);
    if (attrs_.kernel.size() != n) ctx.fail("kernel_shape needs one value per spatial dimension");
    Dims s = attrs_.strides.empty() ? Dims(n, 1) : attrs_.strides;
    Dims pads = attrs_.pads.empty() ? Dims(2 * n, 0) : attrs_.pads;
    if (s.size() != n || pads.size() != 2 * n) ctx.fail("strides/pads do not match the spatial rank");
    Dims sp(n);
    for (size_t i = 0; i < n; ++i) sp[i] = (x.dim(static_cast<int>(i) + 2) - 1) * s[i] - pads[i] - pads[i + n] + attrs_.kernel[i];
    Dims dd = with_nc(x, sp), yd = dd;
    if (ctx.has_input(2)) {
      yd = kern::to_int_vector(ctx.input(2));
      if (yd.size() != x.dims().size()) ctx.fail("output_shape must have rank " + std::to_string(x.rank()) + " values");
      for (int64_t v : yd)
        if (v < 0) ctx.fail("output_shape must not be negative");
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), yd);
    size_t es = dtype_size(x.dtype());
    std::memset(y.raw(), 0, y.nbytes());
    // Indices number positions of the inferred shape; an explicit output_shape keeps each
    // value at the same coordinates (as the ONNX reference outputs do).
    int64_t total = numel_of(dd);
    Dims ystr = kern::strides_of(yd), dstr = kern::strides_of(dd);
    const char* xs = static_cast<const char*>(x.raw());
    char* ys = static_cast<char*>(y.raw());
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t at = ind.as_int(i);
      if (at < 0 || at >= total)
        ctx.fail("index " + std::to_string(at) + " is out of range for unpooled shape " + dims_to_string(dd));
      int64_t off = 0, rest = at;
      for (size_t d = 0; d < dd.size(); ++d) {
        int64_t c = rest / dstr[d];
        rest %= dstr[d];
        if (c >= yd[d]) ctx.fail("index " + std::to_string(at) + " falls outside output_shape " + dims_to_string(yd));
        off += c * ystr[d];
      }
      std::memcpy(ys + off * static_cast<int64_t>(es), xs + i * static_cast<int64_t>(es), es);
    }
  }

 private:
  WindowAttrs attrs_;
};

class LrnKernel : public OpKernel {
 public:
  explicit LrnKernel(const KernelInfo& info)
      : size_(info.node.attr_int("size", 0)), alpha_(info.node.attr_float("alpha", 1e-4f)),
        beta_(info.node.attr_float("beta", 0.75f)), bias_(info.node.attr_float("bias", 1.0f)) {
    if (size_ < 1) throw Error(info.node.describe() + ": size must be a positive odd number");
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 3) ctx.fail("X must have rank >= 3, got " + dims_to_string(x.dims()));
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    int64_t n = x.dim(0), c = x.dim(1), sz = c && n ? x.numel() / (n * c) : 0;
    int64_t lo = (size_ - 1) / 2, hi = size_ - 1 - lo;
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> ||
                    std::is_same_v<T, BFloat16>) {
        using A = acc_t<T>;
        const T* xp = x.data<T>();
        T* yp = y.data<T>();
        kern::parallel_for(n * c, ctx.threads(), 1, [&](int64_t b, int64_t e) {
          for (int64_t p = b; p < e; ++p) {
            int64_t b0 = p / c, ch = p % c;
            int64_t c0 = std::max<int64_t>(0, ch - lo), c1 = std::min<int64_t>(c - 1, ch + hi);
            for (int64_t i = 0; i < sz; ++i) {
              A sq = 0;
              for (int64_t k = c0; k <= c1; ++k) {
                A v = static_cast<A>(xp[(b0 * c + k) * sz + i]);
                sq += v * v;
              }
              A v = static_cast<A>(xp[p * sz + i]);
              yp[p * sz + i] = T(static_cast<A>(v / std::pow(bias_ + alpha_ / size_ * sq, beta_)));
            }
          }
        });
      } else {
        ctx.fail("element type " + std::string(dtype_name(x.dtype())) + " is not supported");
      }
    });
  }

 private:
  int64_t size_;
  double alpha_, beta_, bias_;
};

// ai.torch2onnx.internal::BlockedConcat (block, channels = each input's channel count): Concat
// on the channel axis of channel-blocked inputs ([N, C_k/b, H, W, b]), every input but the last
// of whole blocks: per image, the inputs' blocks one after the other (runtime/optimize.h).
class BlockedConcatKernel : public OpKernel {
 public:
  explicit BlockedConcatKernel(const KernelInfo& info) {
    blk_ = info.node.attr_int("block", 0);
    channels_ = info.node.attr_ints("channels");
    if (blk_ < 1 || blk_ > 64 || channels_.size() != info.node.inputs.size())
      throw Error(info.node.describe() + ": needs a block of 1..64 and one channel count per input");
    int64_t off = 0;
    for (size_t k = 0; k < channels_.size(); ++k) {
      if (channels_[k] < 1 || (k + 1 < channels_.size() && channels_[k] % blk_ != 0))
        throw Error(info.node.describe() + ": every input but the last needs whole blocks of channels");
      first_block_.push_back(off);
      off += channels_[k] / blk_;
    }
  }
  void run(KernelContext& ctx) override {
    const Tensor& x0 = ctx.input(0);
    int64_t cb = 0;
    for (size_t k = 0; k < channels_.size(); ++k) {
      const Tensor& x = ctx.input(static_cast<int>(k));
      const int64_t xb = (channels_[k] + blk_ - 1) / blk_;
      if (x.dtype() != DType::Float || x.rank() != 5 || x.dim(4) != blk_ || x.dim(1) != xb || x.dim(0) != x0.dim(0) ||
          x.dim(2) != x0.dim(2) || x.dim(3) != x0.dim(3))
        ctx.fail("input " + std::to_string(k) + " is " + dims_to_string(x.dims()) + ", expected f32 [" +
                 std::to_string(x0.dim(0)) + ", " + std::to_string(xb) + ", " + std::to_string(x0.dim(2)) + ", " +
                 std::to_string(x0.dim(3)) + ", " + std::to_string(blk_) + "]");
      cb += xb;
    }
    const int64_t n = x0.dim(0), plane = x0.dim(2) * x0.dim(3) * blk_;
    Tensor& y = ctx.allocate_output_uninit(0, DType::Float, {n, cb, x0.dim(2), x0.dim(3), blk_});
    float* yp = y.data<float>();
    // One copy per image and input: its blocks are contiguous on both sides.
    const int64_t jobs = n * static_cast<int64_t>(channels_.size());
    const int threads = kern::task_threads_for(ctx.threads(), kern::work_us(0, 8.0 * static_cast<double>(y.numel())));
    kern::parallel_for(jobs, threads, 1, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t img = j / static_cast<int64_t>(channels_.size());
        const size_t k = static_cast<size_t>(j % static_cast<int64_t>(channels_.size()));
        const Tensor& x = ctx.input(static_cast<int>(k));
        const int64_t xb = x.dim(1);
        std::memcpy(yp + (img * cb + first_block_[k]) * plane, x.data<float>() + img * xb * plane,
                    static_cast<size_t>(xb * plane) * sizeof(float));
      }
    });
  }

 private:
  int64_t blk_ = 0;
  std::vector<int64_t> channels_;
  std::vector<int64_t> first_block_;  // each input's first block in the output
};

// ai.torch2onnx.internal::BlockedScale (block, channels): Mul(X, S) with X channel-blocked
// ([N, C/b, H, W, b]) and its output blocked too: a squeeze-and-excitation scale between two
// convs (runtime/optimize.h). S of one value per channel (and image) scales each pixel's lanes;
// any other S that broadcasts with X is multiplied through the plain layout, as Mul would.
T2O_AVX512_WARNINGS_OFF
T2O_AVX512 void scale_plane16(const float* x, int64_t hw, const float* scale, int64_t lanes, float* y) {
  const __m512 s = _mm512_loadu_ps(scale);
  const __mmask16 m = static_cast<__mmask16>((1u << lanes) - 1);
  for (int64_t p = 0; p < hw; ++p) _mm512_storeu_ps(y + p * 16, _mm512_maskz_mul_ps(m, _mm512_loadu_ps(x + p * 16), s));
}
T2O_AVX512_WARNINGS_ON

class BlockedScaleKernel : public OpKernel {
 public:
  explicit BlockedScaleKernel(const KernelInfo& info) {
    blk_ = info.node.attr_int("block", 0);
    channels_ = info.node.attr_int("channels", 0);
    if (blk_ < 1 || blk_ > 64 || channels_ < 1) throw Error(info.node.describe() + ": needs a block of 1..64 and a channel count");
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& s = ctx.input(1);
    if (x.dtype() != DType::Float || x.rank() != 5 || x.dim(4) != blk_ || x.dim(1) != (channels_ + blk_ - 1) / blk_)
      ctx.fail("expects an f32 X blocked by " + std::to_string(blk_) + " over " + std::to_string(channels_) +
               " channels, got " + dims_to_string(x.dims()));
    if (s.dtype() != DType::Float) ctx.fail("S must be float like X");
    const Dims xl = kern::logical_dims(x.dims(), channels_);
    const Dims out = kern::broadcast_dims(ctx, xl, s.dims());
    if (out.size() != 4) ctx.fail("Mul of blocked X " + dims_to_string(xl) + " by S " + dims_to_string(s.dims()) + " is not 4-d");
    const Dims st = kern::broadcast_strides(s.dims(), out);
    if (out != xl || st[2] != 0 || st[3] != 0) {
      general(ctx, x, xl, s, out);
      return;
    }
    Tensor& y = ctx.allocate_output_uninit(0, DType::Float, x.dims());
    const int64_t cb = x.dim(1), hw = x.dim(2) * x.dim(3), b = blk_;
    const float* xp = x.data<float>();
    const float* sp = s.data<float>();
    float* yp = y.data<float>();
    const bool avx = b == 16 && kern::has_avx512();
    const int threads = kern::task_threads_for(ctx.threads(), kern::work_us(0, 8.0 * static_cast<double>(x.numel())));
    // Pixels of all planes in one range (a net's first blocks have two planes of 12544 pixels).
    kern::parallel_for(x.dim(0) * cb * hw, threads, 2048, [&](int64_t q0, int64_t q1) {
      alignas(64) float sv[64];
      for (int64_t q = q0; q < q1;) {
        const int64_t plane = q / hw, end = std::min(q1, (plane + 1) * hw);
        const int64_t n = plane / cb, c0 = (plane % cb) * b, lanes = std::min(b, channels_ - c0);
        for (int64_t l = 0; l < b; ++l) sv[l] = l < lanes ? sp[n * st[0] + (c0 + l) * st[1]] : 0.0f;
        const float* xs = xp + q * b;
        float* ys = yp + q * b;
        if (avx) {
          scale_plane16(xs, end - q, sv, lanes, ys);
        } else {
          for (int64_t i = 0; i < end - q; ++i)
            for (int64_t l = 0; l < b; ++l) ys[i * b + l] = l < lanes ? xs[i * b + l] * sv[l] : 0.0f;
        }
        q = end;
      }
    });
  }

 private:
  // Any S: X to NCHW, Mul with broadcasting, the result blocked.
  void general(KernelContext& ctx, const Tensor& x, const Dims& xl, const Tensor& s, const Dims& out) const {
    Tensor xp = Tensor::uninitialized(DType::Float, xl);
    kern::to_plain(x, xp);
    Tensor prod = Tensor::uninitialized(DType::Float, out);
    const float* a = xp.data<float>();
    const float* sv = s.data<float>();
    float* o = prod.data<float>();
    kern::for_each_broadcast(out, {kern::broadcast_strides(xl, out), kern::broadcast_strides(s.dims(), out)},
                             [&](int64_t i, const int64_t* off) { o[i] = a[off[0]] * sv[off[1]]; });
    Tensor& y = ctx.allocate_output(0, DType::Float, kern::blocked_dims(out, blk_));
    kern::to_blocked(prod, y);
  }

  int64_t blk_ = 0, channels_ = 0;
};

}  // namespace

void register_pool_kernels(KernelRegistry& r) {
  using K = PoolKernel::Kind;
  r.add("", "AveragePool", 1, pool_factory<K::Avg>());
  r.add("", "MaxPool", 1, pool_factory<K::Max>());
  r.add("", "LpPool", 1, pool_factory<K::Lp>());
  r.add("", "GlobalAveragePool", 1, global_factory<K::Avg>());
  r.add("", "GlobalMaxPool", 1, global_factory<K::Max>());
  r.add("", "GlobalLpPool", 1, global_factory<K::Lp>());
  r.add("", "MaxUnpool", 9, factory_of<MaxUnpoolKernel>());
  r.add("", "LRN", 1, factory_of<LrnKernel>());
  r.add(kInternalDomain, "BlockedPool", 1, make_blocked_pool);
  r.add(kInternalDomain, "BlockedGlobalPool", 1, factory_of<BlockedGlobalPoolKernel>());
  r.add(kInternalDomain, "BlockedScale", 1, factory_of<BlockedScaleKernel>());
  r.add(kInternalDomain, "BlockedConcat", 1, factory_of<BlockedConcatKernel>());
}

}  // namespace t2o
