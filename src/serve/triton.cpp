#include "serve/triton.h"

#include <cctype>
#include <filesystem>

#include "onnx/model_io.h"

namespace fs = std::filesystem;

namespace t2o {

namespace {

// Triton's DataType names (model_config.proto).
std::string triton_type(DType t, const std::string& value) {
  switch (t) {
    case DType::Bool: return "TYPE_BOOL";
    case DType::UInt8: return "TYPE_UINT8";
    case DType::UInt16: return "TYPE_UINT16";
    case DType::UInt32: return "TYPE_UINT32";
    case DType::UInt64: return "TYPE_UINT64";
    case DType::Int8: return "TYPE_INT8";
    case DType::Int16: return "TYPE_INT16";
    case DType::Int32: return "TYPE_INT32";
    case DType::Int64: return "TYPE_INT64";
    case DType::Float16: return "TYPE_FP16";
    case DType::Float: return "TYPE_FP32";
    case DType::Double: return "TYPE_FP64";
    case DType::String: return "TYPE_STRING";
    case DType::BFloat16: return "TYPE_BF16";
    default:
      throw Error("'" + value + "' has element type " + std::string(dtype_name(t)) + ", which Triton has no type for",
                  {}, kExitUnsupported);
  }
}

const Shape& tensor_shape(const ValueInfo& vi) {
  if (vi.type.kind != Type::Kind::Tensor)
    throw Error("'" + vi.name + "' is a " + vi.type.to_string() + "; Triton serves tensors only",
                "return tensors from the model", kExitUnsupported);
  if (!vi.type.shape)
    throw Error("'" + vi.name + "' has no known rank, which Triton's dims need", {}, kExitUnsupported);
  return *vi.type.shape;
}

// The symbolic dim that axis 0 of every input and output shares, or "" with the reason in `why`.
std::string common_batch_dim(const std::vector<const ValueInfo*>& values, std::string& why) {
  std::string label;
  for (const ValueInfo* vi : values) {
    const Shape& s = tensor_shape(*vi);
    if (s.rank() == 0 || !s.dims[0].is_symbolic()) {
      why = "axis 0 of '" + vi->name + "' is " + (s.rank() == 0 ? "absent (a scalar)" : "not symbolic (" + s.to_string() + ")");
      return {};
    }
    if (label.empty()) {
      label = s.dims[0].symbol;
    } else if (s.dims[0].symbol != label) {
      why = "axis 0 of '" + vi->name + "' is '" + s.dims[0].symbol + "', not '" + label + "'";
      return {};
    }
  }
  return label;
}

void tensor_entry(std::string& out, const ValueInfo& vi, bool batched) {
  const Shape& s = tensor_shape(vi);
  std::string dims;
  for (size_t i = batched ? 1 : 0; i < s.dims.size(); ++i)
    dims += (dims.empty() ? "" : ", ") + std::to_string(s.dims[i].is_static() ? s.dims[i].value : -1);
  out += "  {\n    name: \"" + vi.name + "\"\n    data_type: " + triton_type(vi.type.elem, vi.name) + "\n";
  // Triton needs at least one dim: a scalar is served as [1] and reshaped back.
  if (dims.empty()) out += "    dims: [ 1 ]\n    reshape { shape: [ ] }\n";
  else out += "    dims: [ " + dims + " ]\n";
  out += "  }";
}

}  // namespace

std::string serving_name(const std::string& file) {
  std::string stem = fs::path(file).stem().string(), r;
  for (char c : stem) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) r += static_cast<char>(std::tolower(u));
    else if (!r.empty() && r.back() != '-') r += '-';
  }
  while (!r.empty() && r.back() == '-') r.pop_back();
  if (r.size() > 63) r.resize(63);
  return r.empty() ? "model" : r;
}

std::string triton_config(const Model& m, const TritonOptions& o, TritonBundle* info) {
  std::vector<const ValueInfo*> ins = m.graph.runtime_inputs(), all = ins;
  for (const ValueInfo& vi : m.graph.outputs) all.push_back(&vi);
  std::string why;
  std::string batch = common_batch_dim(all, why);
  int max_batch = 0;
  if (o.max_batch > 0) {
    if (batch.empty())
      throw Error("--max-batch " + std::to_string(o.max_batch) + ": the model has no batch axis: " + why,
                  "convert with axis 0 of every input dynamic under one label (e.g. --dynamic x:0=batch), or leave "
                  "--max-batch out to serve without batching",
                  kExitUsage);
    max_batch = o.max_batch;
  } else if (o.max_batch < 0 && !batch.empty()) {
    max_batch = 8;
  }
  bool batched = max_batch > 0;
  std::string out = "name: \"" + o.name + "\"\nplatform: \"onnxruntime_onnx\"\nmax_batch_size: " +
                    std::to_string(max_batch) + "\n";
  auto section = [&](const char* field, const std::vector<const ValueInfo*>& vs) {
    out += std::string(field) + " [\n";
    for (size_t i = 0; i < vs.size(); ++i) {
      tensor_entry(out, *vs[i], batched);
      out += i + 1 < vs.size() ? ",\n" : "\n";
    }
    out += "]\n";
  };
  section("input", ins);
  section("output", std::vector<const ValueInfo*>(all.begin() + static_cast<long>(ins.size()), all.end()));
  if (batched) out += "dynamic_batching { }\n";
  if (info) {
    info->max_batch_size = max_batch;
    info->batch_dim = batched ? batch : std::string();
  }
  return out;
}

TritonBundle write_triton_repo(const Model& m, const std::string& repo, const TritonOptions& given) {
  TritonOptions o = given;
  if (o.name.empty()) o.name = "model";
  if (o.name.find('/') != std::string::npos || o.name == "." || o.name == "..")
    throw Error("'" + o.name + "' is not a model name for a Triton repository", "use a plain directory name", kExitUsage);
  TritonBundle b;
  std::string config = triton_config(m, o, &b);
  fs::path dir = fs::path(repo) / o.name;
  std::error_code ec;
  fs::create_directories(dir / "1", ec);
  if (ec) throw Error("cannot create '" + (dir / "1").string() + "': " + ec.message(), {}, kExitUsage);
  b.model_dir = dir.string();
  b.model_path = (dir / "1" / "model.onnx").string();
  b.config_path = (dir / "config.pbtxt").string();
  b.manifest_path = (dir / "inferenceservice.yaml").string();
  save_model(m, b.model_path);
  write_file_atomic(b.config_path, config);
  std::string repo_name = fs::absolute(repo).lexically_normal().filename().string();
  if (repo_name.empty()) repo_name = fs::absolute(repo).lexically_normal().parent_path().filename().string();
  std::string uri = o.storage_uri.empty() ? "s3://CHANGE-ME/" + repo_name : o.storage_uri;
  write_file_atomic(b.manifest_path,
                    "# KServe InferenceService: model '" + o.name + "' on NVIDIA Triton (runtime kserve-tritonserver).\n"
                    "# storageUri must point at the uploaded model repository, the folder that holds " + o.name + "/.\n"
                    "apiVersion: serving.kserve.io/v1beta1\n"
                    "kind: InferenceService\n"
                    "metadata:\n"
                    "  name: " + serving_name(o.name) + "\n"
                    "spec:\n"
                    "  predictor:\n"
                    "    model:\n"
                    "      modelFormat:\n"
                    "        name: onnx\n"
                    "      protocolVersion: v2\n"
                    "      runtime: kserve-tritonserver\n"
                    "      storageUri: \"" + uri + "\"\n");
  return b;
}

}  // namespace t2o
