#include <torch/library.h>

#include <mutex>

#include "torch/pitfalls.h"

namespace t2o {

namespace {

at::Tensor add_bias(at::Tensor g, const c10::optional<at::Tensor>& b) {
  return b && b->defined() ? g + *b : g;
}

// hy, cy, workspace (activated gates, the shape CUDA's kernel returns) from the LSTM equations.
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(const at::Tensor& igates, const at::Tensor& hgates,
                                                               const at::Tensor& cx,
                                                               const c10::optional<at::Tensor>& ibias,
                                                               const c10::optional<at::Tensor>& hbias) {
  auto gates = add_bias(igates, ibias) + add_bias(hgates, hbias);
  auto ch = gates.chunk(4, 1);
  auto i = ch[0].sigmoid(), f = ch[1].sigmoid(), g = ch[2].tanh(), o = ch[3].sigmoid();
  auto cy = f * cx + i * g;
  auto hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

// hy, workspace ([B, 5H] like CUDA's) from the GRU equations.
std::tuple<at::Tensor, at::Tensor> fused_gru_cell(const at::Tensor& igates, const at::Tensor& hgates,
                                                  const at::Tensor& hx, const c10::optional<at::Tensor>& ibias,
                                                  const c10::optional<at::Tensor>& hbias) {
  auto gi = add_bias(igates, ibias).chunk(3, 1);
  auto gh = add_bias(hgates, hbias).chunk(3, 1);
  auto r = (gi[0] + gh[0]).sigmoid(), z = (gi[1] + gh[1]).sigmoid();
  auto n = (gi[2] + r * gh[2]).tanh();
  auto hy = (1 - z) * n + z * hx;
  return {hy, at::cat({r, z, n, hx, gh[2]}, 1)};
}

}  // namespace

void install_cpu_fallbacks() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Kept for the life of the process: the dispatcher refers to it.
    static auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::CPU, __FILE__, __LINE__);
    lib->impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
    lib->impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  });
}

}  // namespace t2o
