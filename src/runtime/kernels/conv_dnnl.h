#pragma once
// oneDNN fast paths for f32 convolution, transposed convolution and pooling. Activations stay in
// plain NC<spatial> layout at the kernel boundary; weights are kept in the layout oneDNN picks.
// Primitives are created once per input shape and cached in the object (one object per node).
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/kernels/conv_geom.h"

namespace t2o::kern {

// An operation applied to the conv output before it is stored (FusedConv, see optimize.h).
struct ConvPostOp {
  enum class Kind { Relu, Clip, Swish, HardSwish, Sum };
  Kind kind = Kind::Relu;
  float alpha = 0, beta = 0;  // Relu: negative slope; Clip: bounds
  // The plain (reference) form of an eltwise post-op.
  float apply(float x) const;
};
// FusedConv's or Int8Conv's post-ops from their attributes (see runtime/optimize.h); empty for a
// plain Conv. Throws Error naming the node on malformed attributes.
std::vector<ConvPostOp> conv_post_ops(const Node& n);
// Plain form of the post-ops from `first` on over a finished f32 conv output `c` (in place when it
// can); at a Sum the result broadcasts with `residual`, as the unfused Add would.
Tensor apply_post_ops_ref(const KernelContext& ctx, const std::vector<ConvPostOp>& post, Tensor c, const Tensor* residual,
                          size_t first = 0);

// Channel-blocked activations, oneDNN's nChw16c (AVX-512) or nChw8c: a 2-d conv output kept in
// the layout the next conv reads, so no reorder runs between them. Physical dims are
// [N, ceil(C/b), H, W, b]; channels past C are zero.
int64_t channel_block();  // 16 with AVX-512, else 8
Dims blocked_dims(const Dims& logical, int64_t blk);
// Logical [N, C, H, W] of a blocked tensor with `c` channels; throws when they do not fit.
Dims logical_dims(const Dims& blocked, int64_t c);
// Reorders between plain NCHW and blocked f32 (`to` already has its dims).
void to_plain(const Tensor& blocked, Tensor& plain);
void to_blocked(const Tensor& plain, Tensor& blocked);

class DnnlConv {
 public:
  // `transpose`: ConvTranspose (weights C x M/group x k...), else Conv (weights M x C/group x k...).
  DnnlConv(bool transpose, int64_t group, std::vector<ConvPostOp> post = {});
  // Block sizes (0 = plain NCHW) of the activations as the caller stores them: x, y, residual.
  void set_layout(int64_t src_blk, int64_t dst_blk, int64_t res_blk);
  ~DnnlConv();
  DnnlConv(const DnnlConv&) = delete;
  DnnlConv& operator=(const DnnlConv&) = delete;

  // x, y and residual are stored as set_layout says; g is the logical geometry.
  // Declares the weight constant and packs it for the geometry `probe` (batch 1, `channels`
  // input channels; `bias` only says whether there is one). Later runs reuse the packing
  // whenever oneDNN picks the same layout, and pack again (once) when it does not.
  void prepack(const Tensor& w, const Tensor* bias, int64_t channels, const Geom& probe);
  // y = conv(x, w) + b over f32 tensors with geometry g (g.out must match y). For constant
  // weights pass the same tensors as to prepack. Returns false when oneDNN has no implementation
  // for this configuration: the caller then uses the reference kernel. With a Sum post-op,
  // `residual` (same dims as y) is added before the post-ops that follow it.
  bool run(const Tensor& x, const Tensor& w, const Tensor* b, const Geom& g, Tensor& y,
           const Tensor* residual = nullptr);
  // Frees the packed copies of the constant weights (another path computes this conv); a later
  // run packs again.
  void drop_packed();
  // Whether the constant weights have a packed copy that can stand for them (see release).
  bool can_release() const;
  // From now on the constant weights are `placeholder` (their dims, no data): runs use the packed
  // copies, and the weights as given are rebuilt from them (exactly) if something needs them.
  bool release(const Tensor& placeholder);
  // The constant weights as given (rebuilt after a release).
  Tensor plain_weights();
  // Runs so far, process-wide, that cut the conv into tasks over output channel blocks (one
  // image, blocked activations, constant weights, idle threads sleeping: see task_pool.h).
  static uint64_t runs_in_parts_so_far();
  // Constant weights packed so far, process-wide, in a second (or later) layout for one conv.
  static uint64_t extra_layouts_so_far();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class DnnlPool {
 public:
  enum class Kind { Max, AvgIncludePad, AvgExcludePad };
  explicit DnnlPool(Kind kind);
  ~DnnlPool();
  DnnlPool(const DnnlPool&) = delete;
  DnnlPool& operator=(const DnnlPool&) = delete;
  // Pools f32 x into y with geometry g. Returns false when oneDNN cannot (use the reference).
  // With blk, x and y are 2-d activations blocked by blk ([N, C/blk, H, W, blk], C = channels).
  bool run(const Tensor& x, const Geom& g, Tensor& y, int64_t blk = 0, int64_t channels = 0);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace t2o::kern
