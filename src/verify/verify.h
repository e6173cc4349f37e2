#pragma once
// torch2onnx verify: run PyTorch and the ONNX model on the same inputs, compare every output,
// and (locate) find the first ONNX node whose value departs from its TorchScript counterpart.
// This header does not expose libtorch types.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "torch/convert.h"
#include "verify/compare.h"

namespace t2o {

struct VerifyOptions {
  std::vector<InputSpec> inputs;          // sizes; default: the ONNX model's (symbolic dims: 2)
  std::vector<DynamicSpec> dynamic;       // default: the ONNX model's symbolic dims
  std::map<std::string, std::string> data;  // input name -> .npy/.pb file used in every sample
  int samples = 1;
  Tolerance tol;
  bool locate = false;  // compare intermediates even when the outputs agree
  bool all_nodes = false;  // locate compares every linked node, not only up to the first diverging one
  std::string backend = "t2o";  // or "ort"
  uint64_t seed = 0;
  // Links from a conversion just made in this process; otherwise verify converts again.
  std::optional<std::vector<ValueLink>> links;
  std::function<void(const std::string&)> warn;
  std::function<void(int done, int total)> progress;
};

struct OutputCheck {
  std::string name;
  TensorStats stats;
  std::vector<int64_t> abs_diff_hist;  // abs_diff_histogram (compare.h)
  std::vector<std::pair<double, double>> pairs;  // sample_pairs (compare.h): (torch, onnx) values
};

struct SampleResult {
  int index = 0;
  std::vector<std::pair<std::string, Tensor>> inputs;
  std::map<std::string, int64_t> sizes;  // dynamic label -> size
  std::vector<OutputCheck> outputs;
  std::string problem;  // e.g. output count differs; makes the sample fail
  bool ok() const;
};

// One value at the diverging node: its ONNX name, what it is on the torch side, and how it compares.
struct ValueCheck {
  std::string onnx_name;
  std::string torch_value;  // debugName, empty when there is no TorchScript counterpart
  std::string what;         // "initializer", "model input", "not linked", "not captured", ...
  std::optional<TensorStats> stats;
};

// One ONNX node of the main graph, by the worst of its linked outputs (with all_nodes).
struct NodeCheck {
  int index = -1;
  std::string name;
  std::optional<TensorStats> worst;  // none: no output of it could be compared
};

struct LocateResult {
  bool ran = false;
  bool intermediates = false;  // false: only outputs could be compared
  bool found = false;
  int sample = 0;
  int compared = 0;  // linked values compared before the verdict
  std::string note;
  int node_index = -1;  // in the ONNX graph's node list (topological order)
  std::string node_name, op_type, aten_op, source;
  std::string module;  // the submodule the node came from ("layer3.1.conv2"), "" at top level
  std::vector<ValueCheck> outputs, inputs;
  std::vector<NodeCheck> nodes;  // with VerifyOptions::all_nodes
};

struct VerifyReport {
  std::string pt_path, onnx_path, backend;
  Tolerance tol;
  std::vector<SampleResult> samples;
  LocateResult locate;
  std::vector<std::string> notes;
  bool ok() const;
};

VerifyReport verify_model(const std::string& pt_path, const std::string& onnx_path, const VerifyOptions& opts);

// The table a person reads, and the whole report as JSON text (for --json).
std::string format_report(const VerifyReport& r);
std::string report_json(const VerifyReport& r);

}  // namespace t2o
