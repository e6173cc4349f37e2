#pragma once
// Winograd convolution for float 2-d convolutions with 3x3 kernels, stride 1, dilation 1, one
// group and pads of 0 or 1 (the bulk of a ResNet's arithmetic), in two tile sizes:
// - F(2x2, 3x3): 4x4 input tiles at a stride of 2, 16 products, 2.25x fewer multiplications than
//   the direct convolution; the transforms only add, subtract and halve, so results differ from
//   the direct convolution's by float rounding (a few 1e-7 of the output's scale).
// - F(4x4, 3x3): 6x6 input tiles at a stride of 4, 36 products, 4x fewer multiplications; its
//   transforms scale by up to 8 and 1/24, so results differ by about 1e-5 of the output's scale.
//   On maps of 36 tiles or more (21 x 21 outputs and up): a 56 x 56 x 64 conv 0.93 -> 0.53 ms,
//   28 x 28 x 128 0.62 -> 0.44 at 1 thread (0.48 and 0.43 with the products batched).
// The input is cut into tiles and transformed (B^T d B); the products of [tiles, C] x [C, M] run as
// oneDNN matmuls against the transformed weights (G g G^T, computed and packed once); each result
// tile is transformed back (A^T m A), with the bias and the post-ops applied as it is stored.
//
// "Of the output's scale": a tile's rounding error follows its largest input, so one input far
// above the rest (1e30 among values near 1) swamps the small outputs of its tiles. A NaN or an
// infinity would spread over the whole tile (inf - inf): convs that may see one skip Winograd
// (ConvKernel, the `nonfinite_in` mark of runtime/optimize.h and the run's input check).
//
// Activations are channel-blocked by 16 (nChw16c, runtime/kernels/conv_dnnl.h); AVX-512 only.
// Tiles go through in chunks so that the transformed tiles stay in cache between the steps.
#include <memory>
#include <vector>

#include "runtime/kernels/conv_dnnl.h"

namespace t2o::kern {

class WinogradConv {
 public:
  // Whether a convolution qualifies: w float [M, C, 3, 3] (C, M >= 32); bias null or M floats;
  // post-ops among Relu (any slope), Clip and one Sum; a CPU with AVX-512.
  static bool qualifies(const Tensor& w, const Tensor* bias, const std::vector<ConvPostOp>& post);
  // The transformed weights for tiles of `tile` x `tile` outputs (2 or 4) computed and packed
  // (16/9 or 4 times the weights' size); `tiles`, the tiles of a typical run, chooses how the
  // products run. nullptr unless the convolution qualifies or when oneDNN refuses the products.
  static std::unique_ptr<WinogradConv> make(const Tensor& w, const Tensor* bias, const std::vector<ConvPostOp>& post,
                                            int tile = 2, int64_t tiles = 0);
  ~WinogradConv();
  // The tile size (2 or 4) that pays for this geometry, 0 when Winograd does not compute it
  // (stride 1, dilation 1, pads [top, left, bottom, right] of 0 or 1) or does not pay: too few
  // tiles per image for the products to beat the direct convolution (small maps leave the matmuls
  // too few rows). Either tile size computes every geometry it takes.
  static int takes(const Dims& stride, const Dims& dilation, const Dims& pads, int64_t OH, int64_t OW);
  // x: [N, ceil(C/16), H, W, 16]; y: [N, ceil(M/16), OH, OW, 16] (not r's buffer); r, the
  // residual of the Sum (y's dims) or null. Channels past M are written as zeros. Returns false
  // when oneDNN refused a product (y's contents are then unspecified).
  bool run(const float* x, int64_t N, int64_t H, int64_t W, const Dims& pads, float* y, int64_t OH, int64_t OW,
           const float* r, int threads);
  // Convolutions computed this way so far, process-wide (for tests and diagnostics); with tile 4,
  // those computed as F(4x4, 3x3).
  static uint64_t runs_so_far(int tile = 0);

 private:
  WinogradConv();
  // run() for few tiles: the threads share each phase (see there).
  bool run_split(const float* x, int64_t N, int64_t H, int64_t W, const Dims& pads, float* y, int64_t OH, int64_t OW,
                 const float* r, int threads);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace t2o::kern
