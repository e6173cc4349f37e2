#pragma once
// Which inputs verify feeds, at which sizes, with which values: random per dtype by default
// (integers kept inside what they index), from .npy files when given.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "torch/convert.h"

namespace t2o {

struct PlannedInput {
  std::string name;
  DType dtype = DType::Float;
  Dims base;                        // sizes of sample 0
  std::vector<std::string> labels;  // per axis: dynamic label, or "" for a fixed axis
  std::optional<Tensor> data;       // from --data: every sample uses it
  bool onnx = true;                 // false: removed from the ONNX model (unread), PyTorch still takes it
};

struct Sample {
  std::vector<std::pair<std::string, Tensor>> inputs;  // in ONNX graph-input order
  std::vector<std::pair<std::string, Tensor>> torch_only;  // inputs the ONNX model no longer takes
  // What PyTorch runs on: every input.
  std::vector<std::pair<std::string, Tensor>> torch_inputs() const;
  std::map<std::string, int64_t> sizes;                // dynamic label -> size in this sample
};

class InputPlan {
 public:
  // `graph` is the ONNX graph being verified; its runtime inputs are what we feed. `removed` are
  // inputs the converter removed as unread (remove_unused_inputs): only PyTorch gets them.
  InputPlan(const Graph& graph, const std::vector<InputSpec>& specs, const std::vector<DynamicSpec>& dynamic,
            const std::map<std::string, std::string>& data_files, const std::vector<ValueInfo>& removed = {});

  // Sample 0 is at the base sizes; later samples move every dynamic size not pinned by --data.
  Sample make(int index, uint64_t seed) const;

  // What the converter needs to rebuild the same ONNX graph (for --locate's value links).
  std::vector<InputSpec> convert_inputs() const;
  std::vector<DynamicSpec> convert_dynamic() const;
  const std::vector<PlannedInput>& inputs() const { return inputs_; }
  // Values for inputs whose role the TorchScript graph shows (packed-sequence lengths, EmbeddingBag
  // offsets), so random ones are valid. The generator is given by the caller (verify.cpp, which
  // links libtorch); it returns nothing for an input without such a role. `dims_of` gives the dims
  // another input has in the same sample.
  using DimsOf = std::function<std::optional<Dims>(const std::string&)>;
  using RoleValueFn = std::function<std::optional<Tensor>(const std::string& name, const Dims& dims, DType dtype,
                                                          uint64_t seed, const DimsOf& dims_of)>;
  void set_role_values(RoleValueFn fn) { role_values_ = std::move(fn); }

 private:
  std::map<std::string, int64_t> sizes_for(int index) const;
  const Graph& graph_;
  std::vector<PlannedInput> inputs_;
  std::map<std::string, int64_t> base_sizes_;
  std::map<std::string, bool> pinned_;  // labels fixed by a --data file
  RoleValueFn role_values_;
};

// The exclusive upper bound for integer values of graph value `name`, when it (or a cast,
// reshape, ... of it) is used as an index: Gather data dim, OneHot depth, Embedding rows.
std::optional<int64_t> index_bound(const Graph& g, const std::string& name, const std::map<std::string, int64_t>& sizes);

}  // namespace t2o
