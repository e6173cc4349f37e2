#pragma once
// Depthwise 3x3 and 5x5 convolution (group = channels = output channels) over activations blocked
// by 16 channels (nChw16c, runtime/kernels/conv_dnnl.h): the MobileNet-style layer. One 16-lane vector
// holds a pixel's channels of a block. An output row is cut into strips of up to 16 pixels whose
// sums stay in registers; each input pixel of a window row is loaded once and multiplied by the
// (up to K) taps that reach it, and the post-ops run in registers before the store. A thread
// takes consecutive rows of a block; inputs larger than about half an L2 are prefetched a row
// ahead. In MobileNetV2 it replaced oneDNN's depthwise kernel, which did not split one image's
// rows between threads well (at 2 threads a 56 x 56 x 144 layer took 110 us there).
//
// Pads of K / 2 at the top and left (the end pads follow from the output size), stride 1 or 2 on
// both axes, dilation 1, bias optional, post-ops Relu (any slope), Clip, Swish and HardSwish
// (EfficientNet's and MobileNetV3's); AVX-512 only.
// Results are the direct convolution's sums in the order bias, then taps row by row.
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/kernels/conv_dnnl.h"

namespace t2o::kern {

class DepthwiseConv {
 public:
  // Whether a convolution qualifies: w float [C, 1, K, K] (K 3 or 5) with group C; bias null or C
  // floats; post-ops among Relu, Clip, Swish and HardSwish; a CPU with AVX-512.
  static bool qualifies(const Tensor& w, const Tensor* bias, int64_t group, const std::vector<ConvPostOp>& post);
  // Whether it computes this geometry (2-d, its K x K kernel, stride 1 or 2 on both axes,
  // dilation 1, pads of K / 2 at the top and left, end pads of at most K / 2).
  bool takes(const Geom& g) const;
  // Multiply-adds per output element (K * K).
  int64_t taps() const { return kernel_ * kernel_; }
  // Weights and bias rearranged into blocks of 16 channels (padded with zeros).
  static std::unique_ptr<DepthwiseConv> make(const Tensor& w, const Tensor* bias, const std::vector<ConvPostOp>& post);
  // x: [N, ceil(C/16), H, W, 16]; y: [N, ceil(C/16), OH, OW, 16]. Channels past C are written as
  // zeros.
  void run(const float* x, int64_t N, int64_t H, int64_t W, float* y, int64_t OH, int64_t OW, int64_t stride,
           int threads) const;
  // Convolutions computed this way so far, process-wide (for tests and diagnostics).
  static uint64_t runs_so_far();

 private:
  DepthwiseConv() = default;
  int64_t channels_ = 0;
  int64_t kernel_ = 3;
  Tensor w_, b_;  // [CB, K * K, 16] and [CB, 16]
  std::vector<ConvPostOp> post_;
};

}  // namespace t2o::kern
