#pragma once
// Latency of ONNX files in ONNX Runtime, for `quantize --ort`: a node process with
// onnxruntime-node (found through NODE_PATH or $T2O_CACHE_DIR / ~/.cache/torch2onnx/node_modules,
// where scripts/setup.sh installs it) times each file on the same inputs, one after the other.
#include <optional>
#include <string>
#include <vector>

#include "quant/quant.h"

namespace t2o::cli {

struct OrtLatency {
  std::vector<double> median_ms;  // per model, in the order given
  std::string version;            // onnxruntime-node's
  std::string error;              // why there are no figures (ORT not found, a session failed, ...)
};

// Median of `runs` runs (after one warm-up) of each model on `inputs`, ORT with all graph
// optimizations and `threads` intra-op threads (0: its default).
OrtLatency ort_latency(const std::vector<std::string>& models, const InputSet& inputs, int runs, int threads);

}  // namespace t2o::cli
