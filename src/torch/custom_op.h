#pragma once
// Custom operators (--custom-op 'SCHEMA=DOMAIN::OP'): the schema is registered with libtorch so a
// .pt that calls the op loads without the library that implements it, and the op converts to one
// ONNX node in DOMAIN (non-tensor arguments become attributes). While the converter learns
// shapes it runs the op through, in order: the op's own torch library when one is loaded, a
// runtime plugin (--plugin) that implements DOMAIN::OP, or else a stand-in that returns zeros
// shaped like the first tensor argument (with a warning: shapes after it may then be wrong).
#include <functional>
#include <string>
#include <vector>

#include "torch/context.h"

namespace t2o {

struct CustomOpSpec {
  std::string schema;  // "mylib::cbr(Tensor x, Tensor w, int k=1) -> Tensor"
  std::string name;    // "mylib::cbr"
  std::string domain;  // "mylib"
  std::string op_type; // "Cbr"
};

// Throws a usage Error for a malformed spec.
CustomOpSpec parse_custom_op(const std::string& spec);

// Registers schemas (unless a loaded library already defines the op) and their converters.
void register_custom_ops(const std::vector<std::string>& specs, const std::vector<std::string>& plugins,
                         const std::function<void(const std::string&)>& warn);

// The converter of a declared custom op ("mylib::cbr"), or nullptr.
const Converter* custom_op_converter(const std::string& kind);

// Adds an opset import (version 1) for every non-default domain used by the model's nodes.
void add_custom_domains(Model& model);

}  // namespace t2o
