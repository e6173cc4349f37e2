#pragma once
// oneDNN fast paths for f32 convolution, transposed convolution and pooling. Activations stay in
// plain NC<spatial> layout at the kernel boundary; weights are kept in the layout oneDNN picks.
// Primitives are created once per input shape and cached in the object (one object per node).
#include <memory>

#include "runtime/kernels/conv_geom.h"

namespace t2o::kern {

class DnnlConv {
 public:
  // `transpose`: ConvTranspose (weights C x M/group x k...), else Conv (weights M x C/group x k...).
  DnnlConv(bool transpose, int64_t group);
  ~DnnlConv();
  DnnlConv(const DnnlConv&) = delete;
  DnnlConv& operator=(const DnnlConv&) = delete;

  // Declares the weight constant and packs it for the geometry `probe` (batch 1, `channels`
  // input channels; `bias` only says whether there is one). Later runs reuse the packing
  // whenever oneDNN picks the same layout, and pack again (once) when it does not.
  void prepack(const Tensor& w, const Tensor* bias, int64_t channels, const Geom& probe);
  // y = conv(x, w) + b over f32 tensors with geometry g (g.out must match y). For constant
  // weights pass the same tensors as to prepack. Returns false when oneDNN has no implementation
  // for this configuration: the caller then uses the reference kernel.
  bool run(const Tensor& x, const Tensor& w, const Tensor* b, const Geom& g, Tensor& y);

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
  bool run(const Tensor& x, const Geom& g, Tensor& y);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace t2o::kern
