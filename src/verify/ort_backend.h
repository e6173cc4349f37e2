#pragma once
// Runs an ONNX model in ONNX Runtime (its Node binding) so that verify can tell "our runtime
// disagrees" from "the model disagrees".
#include <string>
#include <utility>
#include <vector>

#include "ir/tensor.h"

namespace t2o {

// Throws a usage Error with an install hint when node or onnxruntime-node is missing.
void require_ort();
// Outputs in the order of `output_names`.
std::vector<Tensor> run_ort(const std::string& onnx_path, const std::vector<std::pair<std::string, Tensor>>& inputs,
                            const std::vector<std::string>& output_names);

}  // namespace t2o
