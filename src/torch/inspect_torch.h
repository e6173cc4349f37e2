#pragma once
// `torch2onnx inspect` for PyTorch files (TorchScript .pt, torch.save'd state_dict or module),
// without libtorch types so the CLI can include it.
#include <cstdint>
#include <string>
#include <vector>

namespace t2o {

struct SavedFile {
  enum class Kind { TorchScript, StateDict, PickledModule, Unknown } kind = Kind::Unknown;
  std::vector<std::string> globals;  // "module.Name" referenced by data.pkl, in order, unique
  std::string main_class;            // pickled module: the user's class (or the first nn class)
};

struct TensorEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t numel = 0;
};

struct TorchFileReport {
  SavedFile file;
  std::vector<TensorEntry> tensors;               // parameters and buffers, or state_dict entries
  std::vector<std::string> spectral_norm_layers;  // layers with weight_orig/u/v or parametrizations
  std::vector<std::string> training_modules;      // TorchScript: submodules saved in train() mode
  std::vector<std::string> forward_args;          // TorchScript: forward() arguments "name: type"
};

// True when the file starts like a zip archive (TorchScript and torch.save files both are).
bool is_zip_file(const std::string& path);

// Throws InputError for unreadable files; a pickled module is reported, not an error.
TorchFileReport inspect_torch_file(const std::string& path);

}  // namespace t2o
