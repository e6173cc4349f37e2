#pragma once
// Shared by the matmul family files: numpy matmul shapes and the oneDNN matmul fast path.
#include <memory>

#include "runtime/kernels/util.h"

namespace t2o::kern {

// The shapes of a numpy matmul: batch dims broadcast, 1-D operands promoted then squeezed.
struct MatmulShape {
  int64_t M = 1, K = 1, N = 1;
  Dims batch;           // broadcast batch dims
  Dims a_bstr, b_bstr;  // per batch dim: element stride of a whole matrix (0 when broadcast)
  Dims out;
  int64_t batch_a = 1, batch_b = 1;  // product of each side's own batch dims
};
MatmulShape matmul_shape(const KernelContext& ctx, const Dims& a0, const Dims& b0);

// oneDNN float matmul (matmul_dnnl.cpp). A constant 2-D B is packed at creation. `gelu` applies
// the erf GELU to the result (after the bias), as FusedMatMul asks.
struct DnnlMatmul;
std::shared_ptr<DnnlMatmul> dnnl_matmul_make(bool trans_a, bool trans_b, float alpha, const Tensor* const_b,
                                             bool gelu = false);
// C[batch, M, N] = alpha * op(A) op(B) (+ bias[N]) (+ beta_sum * C). A has batch_a (1 or batch)
// matrices, B batch_b (1 or batch); the constant B is used when b is null. Returns false when
// oneDNN rejects the configuration (the caller then runs the reference kernel).
bool dnnl_matmul_run(DnnlMatmul& m, int64_t batch_a, int64_t batch_b, int64_t M, int64_t K, int64_t N,
                     const float* a, const float* b, const float* bias, float beta_sum, float* c);

// Whether the constant B has a packed copy, so that its data as stored need not be kept.
bool dnnl_matmul_can_release_b(const DnnlMatmul& m);
// Drops the reference to the constant B's data (the packed copy stays): `placeholder` has B's
// dims and no data. The plain B is rebuilt from the packed copy if a shape ever needs it.
bool dnnl_matmul_release_b(DnnlMatmul& m, const Tensor& placeholder);
// The constant B as stored (rebuilt after a release).
Tensor dnnl_matmul_plain_b(DnnlMatmul& m);

void register_matmul_extra_kernels(KernelRegistry& r);  // matmul_quant.cpp
void register_einsum_kernels(KernelRegistry& r);        // matmul_einsum.cpp

}  // namespace t2o::kern
