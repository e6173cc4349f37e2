#pragma once
// Graph fixes for models that would otherwise not convert on this machine (docs/pitfalls.md).
#include <torch/script.h>

#include <string>
#include <vector>

namespace t2o {

// A model scripted for a GPU names torch.device("cuda") in its code; conversion runs on the CPU,
// so every device constant becomes "cpu" and .cuda() calls become no-ops. Returns how many changed.
int normalize_devices(torch::jit::Graph& g);

// Ops that libtorch can trace on a GPU but has no CPU kernel for (aten::_thnn_fused_lstm_cell,
// _thnn_fused_gru_cell): registers CPU kernels from the cells' defining equations so the
// shape-learning run can execute them. Idempotent.
void install_cpu_fallbacks();
// Module state the frozen graph still reads through `self` (buffers updated in place, such as
// InstanceNorm's running stats in a model saved in train()): replaced by their values. Returns
// how many reads were replaced.
int resolve_module_attributes(torch::jit::Graph& g, const c10::IValue& self);
// forward() assigning module attributes (`self.acc = self.acc + x`, `self.calls += 1`): each
// assigned attribute becomes a value of the graph, starting from its saved value and carried
// through the Ifs and Loops that assign it, so reads see the latest assignment. Returns the
// attributes' names. The ONNX model keeps no state: every call starts from the saved values.
std::vector<std::string> thread_module_state(torch::jit::Graph& g, const c10::IValue& self);
// Training-time behaviour baked into a graph (traced in train(): dropout with train=True,
// batch/instance norm using batch statistics although running statistics exist) rewritten to
// inference semantics. Returns one line per kind of change, naming the modules.
std::vector<std::string> to_inference_semantics(torch::jit::Graph& g);

// RNNs traced without an initial state start from zeros of the traced batch size: those zeros
// are rebuilt from the batch the RNN gets, so the model runs at any batch. Returns how many RNNs.
int dynamic_default_rnn_states(torch::jit::Graph& g);

// Ops of newer PyTorch releases (e.g. aten::scaled_dot_product_attention), so files saved by them load.
void register_newer_torch_ops();

}  // namespace t2o
