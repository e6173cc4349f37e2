#pragma once
// Graph fixes for models that would otherwise not convert on this machine (docs/pitfalls.md).
#include <torch/script.h>

namespace t2o {

// A model scripted for a GPU names torch.device("cuda") in its code; conversion runs on the CPU,
// so every device constant becomes "cpu" and .cuda() calls become no-ops. Returns how many changed.
int normalize_devices(torch::jit::Graph& g);

// Ops that libtorch can trace on a GPU but has no CPU kernel for (aten::_thnn_fused_lstm_cell,
// _thnn_fused_gru_cell): registers CPU kernels from the cells' defining equations so the
// shape-learning run can execute them. Idempotent.
void install_cpu_fallbacks();
// Ops of newer PyTorch releases (e.g. aten::scaled_dot_product_attention), so files saved by them load.
void register_newer_torch_ops();

}  // namespace t2o
