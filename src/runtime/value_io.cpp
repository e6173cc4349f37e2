#include "runtime/value_io.h"

#include <cstring>
#include <filesystem>

namespace t2o {

std::string pb_kind_of(const Type& t) {
  if (t.kind == Type::Kind::Sequence) return "sequence";
  if (t.kind == Type::Kind::Optional) return "optional";
  return "tensor";
}

RValue rvalue_from_pb(const PbValue& v) {
  switch (v.kind) {
    case PbValue::Kind::Tensor: return RValue(v.tensor);
    case PbValue::Kind::Sequence: return RValue::make_sequence(v.sequence, v.seq_elem);
    case PbValue::Kind::Optional:
      if (!v.has_value) return RValue::make_optional(nullptr);
      if (v.optional_elem_kind == PbValue::Kind::Tensor) return RValue::make_optional(std::make_shared<RValue>(v.tensor));
      return RValue::make_optional(std::make_shared<RValue>(RValue::make_sequence(v.sequence, v.seq_elem)));
  }
  return {};
}

PbValue pb_from_rvalue(const RValue& v) {
  PbValue pv;
  if (v.is_tensor()) {
    pv.tensor = v.tensor;
  } else if (v.is_sequence()) {
    pv.kind = PbValue::Kind::Sequence;
    pv.sequence = v.sequence;
    pv.seq_elem = v.seq_elem;
  } else if (v.is_optional()) {
    pv.kind = PbValue::Kind::Optional;
    pv.has_value = v.element != nullptr;
    if (v.element && v.element->is_tensor()) {
      pv.optional_elem_kind = PbValue::Kind::Tensor;
      pv.tensor = v.element->tensor;
    } else if (v.element) {
      pv.optional_elem_kind = PbValue::Kind::Sequence;
      pv.sequence = v.element->sequence;
    }
  }
  return pv;
}

Tensor bfloat16_stored_as_uint16(Tensor t, DType expected) {
  if (expected != DType::BFloat16 || t.dtype() != DType::UInt16) return t;
  Tensor b(DType::BFloat16, t.dims());
  if (t.nbytes() > 0) std::memcpy(b.raw(), t.raw(), t.nbytes());
  return b;
}

RValue read_value_file(const std::string& path, const Type* type) {
  RValue v = std::filesystem::path(path).extension() == ".npy"
                 ? RValue(read_npy(path))
                 : rvalue_from_pb(read_value_pb(path, type ? pb_kind_of(*type) : "tensor"));
  if (type && type->kind == Type::Kind::Tensor && v.is_tensor())
    v.tensor = bfloat16_stored_as_uint16(std::move(v.tensor), type->elem);
  return v;
}

}  // namespace t2o
