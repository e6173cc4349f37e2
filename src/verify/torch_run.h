#pragma once
#include "torch/input_roles.h"
// The PyTorch side of verify: the model prepared exactly as the converter prepares it (so value
// names match the converter's ValueLinks), run in eval mode without autograd.
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/tensor.h"

namespace t2o {

struct TorchRun {
  std::vector<Tensor> outputs;          // flattened depth-first, numbers as 0-d tensors
  std::map<std::string, Tensor> values;  // debugName -> value, when captured
};

class TorchModel {
 public:
  TorchModel(const std::string& pt_path, const std::function<void(const std::string&)>& warn);
  ~TorchModel();
  // Inputs by flattened name (tuple argument `h` -> h.0, h.1). With `capture`, every top-level
  // tensor or number value is kept too (a copy taken when it is produced).
  TorchRun run(const std::vector<std::pair<std::string, Tensor>>& inputs, bool capture);
  // Values an in-place op writes to later: their captured copy is not what the ONNX value holds.
  const std::set<std::string>& mutated() const { return mutated_; }
  // What each integer input feeds (packed-sequence lengths, offsets, ...), for valid random values.
  std::map<std::string, InputRole> input_roles() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::set<std::string> mutated_;
};

}  // namespace t2o
