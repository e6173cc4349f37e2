#pragma once
// TorchScript (.pt) -> ONNX model. The only header of t2o_torch that callers need; it does not
// expose libtorch types.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace t2o {

// From --input NAME:DIMS[:DTYPE].
struct InputSpec {
  std::string name;
  Dims dims;
  DType dtype = DType::Float;
};

// From --dynamic NAME:AXIS=LABEL,...
struct DynamicSpec {
  std::string input;
  std::map<int, std::string> axes;
};

struct ConvertOptions {
  int opset = 17;
  std::vector<InputSpec> inputs;
  // --data NAME=FILE: real example values for shape learning (an input's dims and dtype come from
  // its value when no --input names it). The resized run for --dynamic crops or tiles them.
  std::map<std::string, Tensor> data;
  std::vector<DynamicSpec> dynamic;
  // Inputs that are per-tensor quantized tensors: name -> (scale, zero point); the input's value
  // (--data) is the integer tensor (uint8: quint8, int8: qint8, int32: qint32). Each becomes three
  // ONNX inputs, as torch.onnx makes them: the integers, NAME_scale (double) and NAME_zero_point (int64).
  std::map<std::string, std::pair<double, int64_t>> quantized;
  std::vector<std::string> output_names;
  std::function<void(const std::string&)> warn;  // called for each warning as it happens
  // Called with a short status line at each step of long work (shape learning runs, conversion);
  // the CLI shows it on a terminal. "" when the work is done.
  std::function<void(const std::string&)> progress;
  std::string weights;                  // --weights: a torch.save(state_dict) file loaded strictly
  std::vector<std::string> custom_ops;  // --custom-op 'SCHEMA=DOMAIN::OP' (torch/custom_op.h)
  std::vector<std::string> plugins;     // runtime plugins that can run custom ops while learning shapes
  // Export training-mode behaviour (torch.onnx's training=TrainingMode.TRAINING): the module is
  // not put in eval mode, dropout stays (ONNX Dropout with training_mode, random) and batch norm
  // normalizes by the batch's statistics. Default: inference semantics.
  bool training = false;
};

// An ONNX value of the top-level graph that holds the same tensor as a TorchScript value; lets
// `verify --locate` compare intermediate values and name the aten op and source line.
struct ValueLink {
  std::string onnx_name;
  std::string torch_value;  // debugName() in the prepared graph (see frontend.h)
  std::string aten_kind;    // kind of the producing node, e.g. "aten::conv2d"; "input" for graph inputs
  std::string source;       // "model.py:42", may be empty
};

struct ConvertResult {
  Model model;
  std::vector<std::string> warnings;
  // Changes that keep the results but that a reader of the model may want to know of (element
  // types the target opset lacks, computed in a wider type).
  std::vector<std::string> notes;
  std::vector<ValueLink> links;
  // Inputs torch.onnx keeps even when the optimized graph no longer reads them: those the model
  // writes in place (x.fill_, x.copy_), and 0-d ones the converted graph reads (for their shape).
  std::vector<std::string> keep_inputs;
};

// Throws t2o::Error: exit code 3 (kExitUnsupported) for ops or opsets we cannot convert, 4
// (kExitBadInput) for a file that is not loadable TorchScript, 2 (kExitUsage) for inputs that
// do not fit the model.
ConvertResult convert_torchscript(const std::string& pt_path, const ConvertOptions& opts);

// The aten/prim ops that have a converter, sorted; for `inspect` and docs.
std::vector<std::string> supported_torch_ops();

}  // namespace t2o
