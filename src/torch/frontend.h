#pragma once
// Loading and canonicalising TorchScript: eval, freeze, inline, and the jit passes that leave a
// pure, flat graph for the converters.
#include <torch/script.h>

#include <functional>
#include <string>
#include <vector>

namespace t2o {

struct PreparedGraph {
  std::shared_ptr<torch::jit::Graph> graph;  // forward, without `self`
  // forward's arguments (without self) as declared; graph inputs are these flattened depth-first.
  std::vector<c10::Argument> arguments;
  std::string source_file;
  // What loading changed that a reader of the converted model may want to know (GPU device
  // constants made CPU), one sentence each.
  std::vector<std::string> notes;
  // The loaded module. It owns the source text the graph's source ranges point into, which
  // libtorch's error reports read: it must outlive every run of the graph.
  torch::jit::Module module;
};

// Loads a TorchScript file on the CPU (ops of newer PyTorch releases registered first). Throws
// InputError, with a hint, for files libtorch cannot load.
torch::jit::Module load_module(const std::string& path);

// Registers torchvision's ops (torchvision::nms, roi_align, ...) by loading its `_C` library when
// installed (T2O_TORCHVISION_LIB, else the system Python's torchvision); once per process. Returns
// the library's path, or "" when none loads.
std::string load_torchvision_ops();

// The method that converts as the model's forward: "forward", or for a module whose forward is
// overloaded (a scripted nn.LSTM / nn.GRU: forward__0 takes a Tensor, forward__1 a PackedSequence)
// the first overload whose arguments are all tensors, numbers or containers of them. "" when none.
std::string forward_method_name(const torch::jit::Module& module);

// Throws InputError for files libtorch cannot load. Warnings go to `warn`.
// `weights`: a state_dict file loaded into the module (strictly) before freezing.
// `training`: keep training-mode behaviour (ConvertOptions::training) instead of eval semantics.
PreparedGraph load_and_prepare(const std::string& path, const std::function<void(const std::string&)>& warn,
                               const std::string& weights = {}, bool training = false);

}  // namespace t2o
