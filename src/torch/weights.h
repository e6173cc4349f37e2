#pragma once
// Files written by torch.save: a state_dict (weights only) or a pickled nn.Module (weights plus a
// reference to a Python class that C++ cannot rebuild), told apart from TorchScript archives.
#include <torch/script.h>

#include <functional>
#include <string>
#include <vector>

#include "torch/inspect_torch.h"

namespace t2o {

// Kind and the GLOBAL (module.name) references in data.pkl. Throws InputError for non-zip files.
SavedFile classify_saved_file(const std::string& path);

// The tensors of a torch.save(state_dict) file by key. Throws InputError (exit 4) with the class
// name and the way out for a pickled module, and for anything that is not a dict of tensors.
std::vector<std::pair<std::string, at::Tensor>> read_state_dict(const std::string& path);

// Throws an InputError that explains what `path` is when it is a torch.save file rather than
// TorchScript (a state_dict, or a pickled module naming its class); returns otherwise.
void explain_non_torchscript(const std::string& path);

// The reader behind read_state_dict (weights_pickle.cpp), without the file-kind checks.
std::vector<std::pair<std::string, at::Tensor>> unpickle_state_dict(const std::string& path);

// Copies a state_dict into the module's parameters and buffers with strict checking: missing and
// unexpected keys and shape mismatches are all reported by name (InputError, exit 4).
void load_weights(torch::jit::Module& module, const std::string& path,
                  const std::function<void(const std::string&)>& warn);

// The element type of a pickled storage class ("torch.FloatStorage"); InputError for others.
c10::ScalarType storage_dtype(const std::string& storage_class);

// Checks of TorchScript files that libtorch does not make (weights_check.cpp); all throw InputError.
// Storage records at least as long as their pickles declare, and bracket nesting and
// prefix-operator chains in the archive's code, before libtorch parses it.
void check_torchscript_archive(const std::string& path);
// That the tensor's shape, strides and offset stay inside its storage (a truncated record leaves
// them pointing past it). `what` names it in the message.
void check_tensor_storage(const at::Tensor& t, const std::string& what);
// check_tensor_storage over every tensor a loaded module holds: attributes (recursively) and
// tensor constants of its methods.
void check_module_tensors(const torch::jit::Module& module);
// Runs f on a thread with a 512 MB stack (reserved, not committed), rethrowing what it throws.
void run_with_large_stack(const std::function<void()>& f);

}  // namespace t2o
