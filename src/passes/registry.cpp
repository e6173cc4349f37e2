// The built-in passes, in pipeline order, with what each does (shown by `optimize --help`).
#include "passes/internal.h"

namespace t2o {

const std::vector<Pass>& builtin_passes() {
  using namespace passes;
  static const std::vector<Pass> all{
      {"eliminate_dead", "remove nodes whose outputs nothing reads and initializers nothing uses", 1, eliminate_dead},
      {"fold_constants",
       "evaluate nodes whose inputs are all constant with the runtime's reference kernels (results up to 64 KiB, "
       "or no larger than the constants they replace); Constant nodes become initializers",
       1, fold_constants},
      {"fold_shapes",
       "Shape/Size of static dims, and the Gather/Slice/Concat/Unsqueeze/Squeeze/Cast/arithmetic on them, become "
       "constants; symbolic dims stay symbolic (a Reshape/Expand target that copies them uses 0/1)",
       1, fold_shapes},
      {"eliminate_identity", "remove Identity and inference-mode Dropout", 1, eliminate_identity},
      {"eliminate_noop",
       "remove ops that return their input: Cast to the same type, identity Transpose, Reshape/Expand/Squeeze/"
       "Unsqueeze/Slice/Pad/Tile that change nothing, single-input Concat/Sum/Max/Min/Mean, x*1, x/1, x+0, x-0, x^1",
       1, eliminate_noop},
      {"merge_consecutive",
       "Transpose of Transpose becomes one Transpose, reshapes of reshapes one Reshape, Squeeze/Unsqueeze pairs "
       "cancel, Cast of a lossless Cast becomes one Cast",
       1, merge_consecutive},
      {"canonicalize_reshape", "a Reshape that flattens into two dims becomes Flatten", 1, canonicalize_reshape},
      {"fuse_pad_into_conv", "a zero constant Pad of spatial dims before Conv becomes the Conv's pads", 1,
       fuse_pad_into_conv},
      {"fuse_bn_into_conv",
       "BatchNormalization after Conv/ConvTranspose is folded into the weights and bias (groups, ConvTranspose's "
       "[Cin, Cout/group] layout)",
       2, fuse_bn_into_conv},
      {"fuse_bn_into_gemm", "BatchNormalization after Gemm is folded into B and C (transB, alpha, beta)", 2,
       fuse_bn_into_gemm},
      {"fuse_mul_add_into_conv",
       "Mul/Div/Add/Sub by a per-output-channel constant after Conv/ConvTranspose/Gemm is folded into its weights "
       "or bias",
       2, fuse_mul_add_into_conv},
      {"fuse_matmul_add_into_gemm", "MatMul of 2-D operands followed by Add of a broadcastable bias becomes Gemm", 2,
       fuse_matmul_add_into_gemm},
      {"fuse_layer_norm",
       "the mean/variance/normalize chain over trailing axes (with scale and bias) becomes LayerNormalization "
       "(opset 17 and later, float)",
       2, fuse_layer_norm},
      {"eliminate_common_subexpressions", "nodes with the same op, attributes and inputs are computed once", 1,
       eliminate_common_subexpressions},
      {"dedup_initializers", "initializers with the same type, shape and bytes are stored once", 1,
       dedup_initializers},
  };
  return all;
}

const Pass* find_pass(const std::string& name) {
  for (const Pass& p : builtin_passes())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace t2o
