#pragma once
// Runtime values in files: .npy and ONNX .pb (TensorProto, SequenceProto, OptionalProto).
#include <string>

#include "ir/graph.h"
#include "onnx/tensor_io.h"
#include "runtime/value.h"

namespace t2o {

// Which proto a .pb file holds for a value of this type: "tensor", "sequence" or "optional".
std::string pb_kind_of(const Type& t);
RValue rvalue_from_pb(const PbValue& v);
PbValue pb_from_rvalue(const RValue& v);
// Reads .npy, or .pb as the proto that `type` calls for (a tensor when type is null). A uint16
// tensor read for a bfloat16 input becomes bfloat16 with the same bits (numpy has no bfloat16,
// so .npy files and the ONNX test data store it as uint16).
RValue read_value_file(const std::string& path, const Type* type);
Tensor bfloat16_stored_as_uint16(Tensor t, DType expected);

}  // namespace t2o
