#pragma once
// ModelProto <-> t2o::Model, faithfully, including external data.
#include <string>

#include "ir/graph.h"

namespace onnx {
class ModelProto;
class TensorProto;
class GraphProto;
}  // namespace onnx

namespace t2o {

struct SaveOptions {
  // Initializers at least this large go to an external data file when external data is used.
  size_t external_threshold = 1024;
  enum class External { Auto, Never, Always } external = External::Auto;  // Auto: only when over 2 GB
  std::string external_file;  // default: "<model file name>.data" next to the model
};

// Reads an .onnx file; tensors stored as external data are read relative to the file's folder.
// Throws InputError (exit 4) with a one-line reason for missing, truncated or non-ONNX files.
Model load_model(const std::string& path);
Model load_model_from_bytes(const std::string& bytes, const std::string& base_dir = ".",
                            const std::string& what = "model");
// Writes atomically (temp file + rename); external data files likewise.
void save_model(const Model& model, const std::string& path, const SaveOptions& opts = {});
std::string save_model_to_bytes(const Model& model);  // all data inline; fails above 2 GB

// Conversions used by other modules and tests.
Model model_from_proto(const onnx::ModelProto& proto, const std::string& base_dir = ".");
void model_to_proto(const Model& model, onnx::ModelProto& proto);
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir = ".");
void tensor_to_proto(const Tensor& t, onnx::TensorProto& proto);

// Writes bytes to path atomically: a failure leaves any existing file untouched.
void write_file_atomic(const std::string& path, const std::string& bytes);
std::string read_file(const std::string& path, const std::string& what = "file");

}  // namespace t2o
