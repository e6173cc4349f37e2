// PyTorch side of the example custom op: mylib::cbr, a fused Conv2d + BatchNorm (as a per-channel
// scale and shift) + ReLU. Load it in Python with torch.ops.load_library("libcbr_torch.so").
#include <torch/library.h>
#include <torch/torch.h>

namespace {

at::Tensor cbr(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const at::Tensor& scale,
               const at::Tensor& shift, int64_t padding) {
  at::Tensor y = at::conv2d(x, w, b, /*stride=*/1, /*padding=*/padding);
  return at::relu(y * scale.view({1, -1, 1, 1}) + shift.view({1, -1, 1, 1}));
}

}  // namespace

TORCH_LIBRARY(mylib, m) {
  m.def("cbr(Tensor x, Tensor w, Tensor b, Tensor scale, Tensor shift, int padding=1) -> Tensor", cbr);
}
