#pragma once
// convert --triton-repo: the serving bundle of serve/triton.h, with the CLI's summary line.
#include <string>

#include "ir/graph.h"

namespace t2o::cli {

// `onnx_path` names the model (its stem); max_batch is --max-batch (-1 when not given).
void write_triton_bundle(const Model& m, const std::string& repo, const std::string& onnx_path, int max_batch,
                         bool quiet);

}  // namespace t2o::cli
