#pragma once
// A serving bundle for NVIDIA Triton (and KServe on top of it), derived from the model's own
// types and symbolic dims:
//
//   REPO/NAME/config.pbtxt            platform onnxruntime_onnx, inputs/outputs with TYPE_* and dims
//   REPO/NAME/1/model.onnx            (+ model.onnx.data when the model is too large for one file)
//   REPO/NAME/inferenceservice.yaml   a KServe InferenceService running it on Triton
//
// Batching (max_batch_size, dims without the batch axis, dynamic_batching) is configured only
// when axis 0 of every input and output is the same symbolic dim; other symbolic dims are -1.
#include <string>

#include "ir/graph.h"

namespace t2o {

struct TritonOptions {
  std::string name;          // model name in the repository (a directory name)
  int max_batch = -1;        // -1: 8 when the model batches, else no batching; 0: no batching
  std::string storage_uri;   // the manifest's storageUri (default: a placeholder to edit)
};

struct TritonBundle {
  std::string model_dir, config_path, model_path, manifest_path;
  int max_batch_size = 0;   // as written (0: batching off)
  std::string batch_dim;    // the symbolic dim used as the batch axis, when batching
};

// The config.pbtxt text. Throws a usage Error when max_batch > 0 is asked of a model whose axis
// 0 is not one common symbolic dim, and an unsupported Error for non-tensor inputs or outputs.
std::string triton_config(const Model& m, const TritonOptions& o, TritonBundle* info = nullptr);

// Writes the three files (each atomically) and returns where they are.
TritonBundle write_triton_repo(const Model& m, const std::string& repo, const TritonOptions& o);

// A name both Triton and Kubernetes accept, from a file name: "ResNet_50.onnx" -> "resnet-50".
std::string serving_name(const std::string& file);

}  // namespace t2o
