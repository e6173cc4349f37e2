#pragma once
// Tensors in files: NumPy .npy and ONNX TensorProto .pb (also SequenceProto / OptionalProto).
#include <optional>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace t2o {

Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& t);
Tensor read_tensor_pb(const std::string& path, std::string* name = nullptr);
void write_tensor_pb(const std::string& path, const Tensor& t, const std::string& name = {});
// Reads .npy or .pb by extension.
Tensor read_tensor_file(const std::string& path);

// A .pb file as found in ONNX test data: a TensorProto, SequenceProto or OptionalProto.
struct PbValue {
  enum class Kind { Tensor, Sequence, Optional } kind = Kind::Tensor;
  Tensor tensor;
  std::vector<Tensor> sequence;
  DType seq_elem = DType::Undefined;
  bool has_value = true;                    // for Optional
  std::optional<Kind> optional_elem_kind;   // for Optional with a value
};
// `hint` says which proto to expect: "tensor", "sequence" or "optional".
PbValue read_value_pb(const std::string& path, const std::string& hint);
void write_value_pb(const std::string& path, const PbValue& v, const std::string& name = {});

}  // namespace t2o
