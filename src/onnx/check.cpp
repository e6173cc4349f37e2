#include "onnx/check.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <filesystem>

#include "onnx/model_io.h"

namespace t2o {

namespace {

// The onnx library prefixes messages with source locations and repeats context over several
// lines; one line with the node is what a person needs.
std::string tidy(std::string msg) {
  for (char& c : msg)
    if (c == '\n') c = ' ';
  while (!msg.empty() && msg.back() == ' ') msg.pop_back();
  const std::string prefix = "[ShapeInferenceError] ";
  if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
  return msg;
}

onnx::ModelProto to_proto(const Model& m) {
  onnx::ModelProto p;
  model_to_proto(m, p);
  return p;
}

void check_proto(onnx::ModelProto& proto, const std::string& what) {
  try {
    onnx::checker::check_model(proto);
  } catch (const std::exception& e) {
    throw InputError(what + " is not a valid ONNX model: " + tidy(e.what()));
  }
  try {
    onnx::ShapeInferenceOptions opts{/*check_type=*/true, /*error_mode=*/1, /*enable_data_propagation=*/false};
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), opts);
  } catch (const std::exception& e) {
    throw InputError(what + " fails shape inference: " + tidy(e.what()));
  }
}

}  // namespace

void check_model_file(const std::string& path) {
  // Load through our reader first: it gives clear messages for missing/corrupt files and reads
  // external data, so the checker sees the complete model.
  Model m = load_model(path);
  onnx::ModelProto proto = to_proto(m);
  check_proto(proto, "'" + path + "'");
}

void check_model(const Model& model) {
  onnx::ModelProto proto = to_proto(model);
  check_proto(proto, "model");
}

Model infer_shapes(const Model& model, bool strict) {
  onnx::ModelProto proto = to_proto(model);
  try {
    onnx::ShapeInferenceOptions opts{true, strict ? 1 : 0, false};
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), opts);
  } catch (const std::exception& e) {
    throw InputError("shape inference failed: " + tidy(e.what()));
  }
  return model_from_proto(proto);
}

Model convert_version(const Model& model, int target_opset) {
  onnx::ModelProto proto = to_proto(model);
  try {
    onnx::ModelProto out = onnx::version_conversion::ConvertVersion(proto, target_opset);
    return model_from_proto(out);
  } catch (const std::exception& e) {
    throw Error("cannot convert the model to opset " + std::to_string(target_opset) + ": " + tidy(e.what()));
  }
}

}  // namespace t2o
