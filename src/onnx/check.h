#pragma once
// The onnx checker and strict shape inference, with errors a person can act on.
#include <string>

#include "ir/graph.h"

namespace t2o {

// Runs the onnx checker and strict shape inference on a model file. Throws InputError naming the
// node and the problem when the model is invalid.
void check_model_file(const std::string& path);
// Same for an in-memory model (all data inline).
void check_model(const Model& model);

// Runs onnx shape inference and returns the model with value_info filled in.
Model infer_shapes(const Model& model, bool strict = false);

// The onnx library's checker, shape inference and version converter run in a forked child, so
// that a model that crashes them yields an InputError; a child running past this many seconds is
// stopped the same way (default 300).
void set_onnx_call_timeout(int seconds);

// Converts an in-memory model to another opset of the default domain with onnx's version
// converter. Throws Error naming the op when it cannot.
Model convert_version(const Model& model, int target_opset);

}  // namespace t2o
