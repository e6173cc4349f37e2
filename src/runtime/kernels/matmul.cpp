// MatMul (numpy batch broadcasting, 1-D operands), Gemm, MatMulInteger, QLinearMatMul, Det.
// Reference kernels accumulate in double (floating types) or 64-bit integers; float32 MatMul and
// Gemm go through oneDNN (matmul_dnnl.cpp) when fast paths are on.
#include <cmath>
#include <type_traits>

#include "runtime/kernels/avx512_math.h"
#include "runtime/kernels/matmul_util.h"
#include "runtime/optimize.h"

namespace t2o::kern {
namespace {

template <typename T>
constexpr bool is_floatish = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <typename T>
using MmAcc = std::conditional_t<is_floatish<T>, double, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

}  // namespace

MatmulShape matmul_shape(const KernelContext& ctx, const Dims& a0, const Dims& b0) {
  if (a0.empty() || b0.empty()) ctx.fail("MatMul operands must have rank >= 1");
  Dims a = a0, b = b0;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  MatmulShape s;
  s.M = a[a.size() - 2];
  s.K = a.back();
  s.N = b.back();
  if (b[b.size() - 2] != s.K)
    ctx.fail("inner dimensions differ: " + dims_to_string(a0) + " x " + dims_to_string(b0));
  Dims ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  s.batch = broadcast_dims(ctx, ab, bb);
  Dims as = broadcast_strides(ab, s.batch), bs = broadcast_strides(bb, s.batch);
  for (auto& v : as) v *= s.M * s.K;
  for (auto& v : bs) v *= s.K * s.N;
  s.a_bstr = as;
  s.b_bstr = bs;
  s.batch_a = numel_of(ab);
  s.batch_b = numel_of(bb);
  s.out = s.batch;
  if (a0.size() > 1) s.out.push_back(s.M);
  if (b0.size() > 1) s.out.push_back(s.N);
  return s;
}

namespace {

// Y[m,n] = sum_k A[m,k] * B[k,n] for one matrix pair; accumulates a row at a time (i-k-j order).
template <typename T, typename Acc>
void gemm_block(const T* a, const T* b, T* y, int64_t M, int64_t K, int64_t N, int64_t a_rs, int64_t a_cs,
                int64_t b_rs, int64_t b_cs, std::vector<Acc>& row) {
  row.resize(static_cast<size_t>(N));
  for (int64_t m = 0; m < M; ++m) {
    std::fill(row.begin(), row.end(), Acc(0));
    for (int64_t k = 0; k < K; ++k) {
      Acc av = static_cast<Acc>(a[m * a_rs + k * a_cs]);
      const T* bp = b + k * b_rs;
      for (int64_t n = 0; n < N; ++n) row[static_cast<size_t>(n)] += av * static_cast<Acc>(bp[n * b_cs]);
    }
    for (int64_t n = 0; n < N; ++n) y[m * N + n] = static_cast<T>(row[static_cast<size_t>(n)]);
  }
}

template <typename T>
void matmul_ref(const MatmulShape& s, const T* a, const T* b, T* y) {
  using Acc = MmAcc<T>;
  std::vector<Acc> row;
  int64_t nb = numel_of(s.batch);
  Dims bs_idx;
  std::vector<Dims> strides{s.a_bstr, s.b_bstr};
  int64_t i = 0;
  auto one = [&](int64_t ao, int64_t bo) {
    gemm_block<T, Acc>(a + ao, b + bo, y + i * s.M * s.N, s.M, s.K, s.N, s.K, 1, s.N, 1, row);
    ++i;
  };
  if (s.batch.empty()) {
    one(0, 0);
    return;
  }
  if (nb == 0) return;
  // for_each_broadcast yields offsets in units of the strides given (whole matrices here).
  for_each_broadcast(s.batch, strides, [&](int64_t, const int64_t* off) { one(off[0], off[1]); });
}

bool batch_is_simple(const MatmulShape& s) {
  // oneDNN runs equal batches, or one side a single matrix broadcast over the other's batch.
  int64_t nb = numel_of(s.batch);
  return (s.batch_a == nb && (s.batch_b == nb || s.batch_b == 1)) || (s.batch_a == 1 && s.batch_b == nb);
}

// MatMul and Gemm on oneDNN with a constant B: the kernel holds B packed, so the session may drop
// B as given (OpKernel::release_constant); B comes back from the packed copy when asked.
class PackedBKernel : public OpKernel {
 public:
  bool can_release_constant(int i) const override {
    return i == 1 && dnnl_ && const_b_.defined() && dnnl_matmul_can_release_b(*dnnl_);
  }
  void release_constant(int i, const Tensor& placeholder) override {
    if (i == 1 && dnnl_matmul_release_b(*dnnl_, placeholder)) const_b_ = placeholder;
  }
  Tensor restore_constant(int i) override { return i == 1 && dnnl_ ? dnnl_matmul_plain_b(*dnnl_) : Tensor(); }

 protected:
  // B with data: the constant's plain copy when the session released it.
  Tensor plain(const Tensor& B) const {
    return dnnl_ && B.same_storage(const_b_) && !B.raw() ? dnnl_matmul_plain_b(*dnnl_) : B;
  }

  Tensor const_b_;
  std::shared_ptr<DnnlMatmul> dnnl_;
};

T2O_AVX512_WARNINGS_OFF

// y = GELU(y) in place, 16 values at a time.
struct GeluVec {
  T2O_AVX512 __m512 operator()(__m512 v) const { return gelu_erf512(v); }
};
T2O_AVX512 void gelu_range(float* y, int64_t n) { map512_inplace(y, n, GeluVec{}); }

T2O_AVX512_WARNINGS_ON

// MatMul, and the runtime's FusedMatMul (optimize.h): MatMul with a constant 2-D B, plus a bias
// of N values (input 2), then optionally the erf GELU (attribute activation = "gelu").
class MatMulKernel : public PackedBKernel {
 public:
  explicit MatMulKernel(const KernelInfo& info) {
    fused_ = info.node.op_type == "FusedMatMul";
    gelu_ = fused_ && info.node.attr_string("activation", "") == "gelu";
    if (info.fast_paths) {
      const Tensor* b = info.constant_input(1);
      bool packable = b && b->rank() == 2 && b->dtype() == DType::Float;
      // With AVX-512 the GELU runs as a pass over the result (gelu_pass): oneDNN's post-op took
      // 0.59 ms of a 197 x 768 x 3072 product's 9.06 ms on a Zen 4 core, the pass about 0.3.
      own_gelu_ = gelu_ && has_avx512();
      dnnl_ = dnnl_matmul_make(false, false, 1.0f, packable ? b : nullptr, gelu_ && !own_gelu_);
      if (packable) const_b_ = *b;
    }
  }
  void run(KernelContext& ctx) override {
    const Tensor& A = ctx.input(0);
    const Tensor& B = ctx.input(1);
    if (A.dtype() != B.dtype()) ctx.fail("A and B have different element types");
    MatmulShape s = matmul_shape(ctx, A.dims(), B.dims());
    const Tensor* bias = fused_ && ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (bias && (bias->dtype() != A.dtype() || bias->numel() != s.N || B.rank() != 2))
      ctx.fail("FusedMatMul needs a 2-D B and a bias of N values of A's type");
    Tensor& Y = ctx.allocate_output_uninit(0, A.dtype(), s.out);
    if (Y.numel() == 0) return;
    if (dnnl_ && A.dtype() == DType::Float && s.K > 0 && batch_is_simple(s) && (!fused_ || s.batch_b == 1)) {
      bool const_b = const_b_.defined() && B.same_storage(const_b_);
      int64_t M = s.M, ba = s.batch_a, bb = s.batch_b;
      if (bb == 1) {  // fold A's batch into rows
        M *= ba;
        ba = 1;
      }
      const float* bp = B.data<float>();
      if (dnnl_matmul_run(*dnnl_, ba, bb, M, s.K, s.N, A.data<float>(), const_b ? nullptr : bp,
                          bias ? bias->data<float>() : nullptr, 0.0f, Y.data<float>())) {
        if (own_gelu_) gelu_pass(ctx, Y.data<float>(), Y.numel());
        return;
      }
    }
    const Tensor Bd = plain(B);
    dispatch_dtype(A.dtype(), [&](auto t) {
      using T = decltype(t);
      if constexpr (std::is_same_v<T, bool>) {
        ctx.fail("does not support bool");
      } else {
        matmul_ref<T>(s, A.data<T>(), Bd.data<T>(), Y.data<T>());
        if constexpr (std::is_floating_point_v<T>) {
          if (fused_) bias_gelu(Y.data<T>(), Y.numel(), s.N, bias ? bias->data<T>() : nullptr);
        } else if (fused_) {
          ctx.fail("FusedMatMul runs float and double only");
        }
      }
    });
  }

 private:
  // FusedMatMul's tail on the reference path: y += bias (rows of n), then the erf GELU.
  template <typename T>
  void bias_gelu(T* y, int64_t count, int64_t n, const T* b) const {
    for (int64_t i = 0; i < count; ++i) {
      double v = static_cast<double>(y[i]) + (b ? static_cast<double>(b[i % n]) : 0.0);
      if (gelu_) v = 0.5 * v * (1.0 + std::erf(v * 0.7071067811865476));
      y[i] = static_cast<T>(v);
    }
  }

  static void gelu_pass(const KernelContext& ctx, float* y, int64_t n) {
    const int threads = task_threads_for(ctx.threads(), work_us(40.0 * static_cast<double>(n), 8.0 * static_cast<double>(n)));
    parallel_for((n + 15) / 16, threads, 256, [&](int64_t b, int64_t e) {
      gelu_range(y + b * 16, std::min(n, e * 16) - b * 16);
    });
  }

  bool fused_ = false, gelu_ = false;
  bool own_gelu_ = false;  // the GELU runs in gelu_pass, not in oneDNN
};

class GemmKernel : public PackedBKernel {
 public:
  explicit GemmKernel(const KernelInfo& info) {
    trans_a_ = info.node.attr_int("transA", 0) != 0;
    trans_b_ = info.node.attr_int("transB", 0) != 0;
    alpha_ = info.node.attr_float("alpha", 1.0f);
    beta_ = info.node.attr_float("beta", 1.0f);
    const Tensor* b = info.constant_input(1);
    if (info.fast_paths) {
      dnnl_ = dnnl_matmul_make(trans_a_, trans_b_, alpha_, b && b->rank() == 2 ? b : nullptr);
      if (b && b->rank() == 2 && b->dtype() == DType::Float) const_b_ = *b;
    }
  }
  void run(KernelContext& ctx) override {
    const Tensor& A = ctx.input(0);
    const Tensor& B = ctx.input(1);
    if (A.rank() != 2 || B.rank() != 2) ctx.fail("A and B must be 2-D, got " + dims_to_string(A.dims()) + " and " + dims_to_string(B.dims()));
    if (A.dtype() != B.dtype()) ctx.fail("A and B have different element types");
    int64_t M = trans_a_ ? A.dim(1) : A.dim(0), K = trans_a_ ? A.dim(0) : A.dim(1);
    int64_t KB = trans_b_ ? B.dim(1) : B.dim(0), N = trans_b_ ? B.dim(0) : B.dim(1);
    if (K != KB) ctx.fail("inner dimensions differ: " + std::to_string(K) + " vs " + std::to_string(KB));
    const Tensor* C = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (C && C->dtype() != A.dtype()) ctx.fail("C has a different element type");
    if (C && C->rank() > 2) ctx.fail("C must have rank <= 2");
    Dims cs;
    if (C) {
      Dims out = broadcast_dims(ctx, C->dims(), {M, N});
      if (out != Dims{M, N}) ctx.fail("C of shape " + dims_to_string(C->dims()) + " does not broadcast to " + dims_to_string({M, N}));
      cs = broadcast_strides(C->dims(), {M, N});
    }
    Tensor& Y = ctx.allocate_output_uninit(0, A.dtype(), {M, N});
    if (Y.numel() == 0) return;
    if (dnnl_ && A.dtype() == DType::Float && K > 0) {
      bool use_const = const_b_.defined() && B.same_storage(const_b_);
      float* y = Y.data<float>();
      const float* bias = nullptr;
      float beta_sum = 0.0f;
      std::vector<float> scaled;
      if (C && beta_ != 0.0f) {
        const float* c = C->data<float>();
        // oneDNN applies the output scale (alpha) after adding the bias: a row C goes in as
        // C * beta / alpha, unless that leaves float's range where C * beta does not.
        bool row = C->numel() == N && cs[1] == 1 && cs[0] == 0 && alpha_ != 0.0f;
        if (row && beta_ != alpha_) {
          scaled.assign(c, c + N);
          const float ratio = beta_ / alpha_;
          for (float& v : scaled) {
            const float s2 = v * ratio;
            if (std::isinf(s2) && !std::isinf(v * beta_)) row = false;
            v = s2;
          }
        }
        if (row) {
          bias = scaled.empty() ? c : scaled.data();
        } else {
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) y[m * N + n] = c[m * cs[0] + n * cs[1]];
          beta_sum = beta_;
        }
      }
      if (dnnl_matmul_run(*dnnl_, 1, 1, M, K, N, A.data<float>(), use_const ? nullptr : B.data<float>(), bias,
                          beta_sum, y))
        return;
    }
    const Tensor Bd = plain(B);
    dispatch_dtype(A.dtype(), [&](auto t) {
      using T = decltype(t);
      if constexpr (std::is_same_v<T, bool>) {
        ctx.fail("does not support bool");
      } else {
        using Acc = MmAcc<T>;
        std::vector<Acc> row;
        T* y = Y.data<T>();
        gemm_block<T, Acc>(A.data<T>(), Bd.data<T>(), y, M, K, N, trans_a_ ? 1 : K, trans_a_ ? M : 1,
                           trans_b_ ? 1 : N, trans_b_ ? K : 1, row);
        const T* c = C ? C->data<T>() : nullptr;
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            double v = static_cast<double>(static_cast<Acc>(y[m * N + n])) * alpha_;
            if (c && beta_ != 0.0f) v += static_cast<double>(beta_) * static_cast<double>(c[m * cs[0] + n * cs[1]]);
            if constexpr (is_floatish<T>) y[m * N + n] = static_cast<T>(static_cast<float>(v));
            else y[m * N + n] = saturate_cast<T>(v);  // alpha / beta from the file can take it past T
          }
      }
    });
  }

 private:
  bool trans_a_, trans_b_;
  float alpha_, beta_;
};

}  // namespace
}  // namespace t2o::kern

namespace t2o {

void register_matmul_kernels(KernelRegistry& r) {
  r.add("", "MatMul", 1, factory_of<kern::MatMulKernel>());
  r.add(kInternalDomain, "FusedMatMul", 1, factory_of<kern::MatMulKernel>());
  r.add("", "Gemm", 1, factory_of<kern::GemmKernel>());
  kern::register_matmul_extra_kernels(r);
}

}  // namespace t2o
