#pragma once
// What flows between runtime nodes: a tensor, a sequence of tensors, an optional, or a map.
#include <memory>
#include <vector>

#include "ir/tensor.h"

namespace t2o {

struct RValue {
  enum class Kind { None, Tensor, Sequence, Optional, Map };
  Kind kind = Kind::None;
  Tensor tensor;                    // Kind::Tensor
  std::vector<Tensor> sequence;     // Kind::Sequence
  std::shared_ptr<RValue> element;  // Kind::Optional: null means "no value"
  DType seq_elem = DType::Undefined;  // element type of an (possibly empty) sequence
  Tensor map_keys, map_values;      // Kind::Map

  RValue() = default;
  RValue(Tensor t) : kind(Kind::Tensor), tensor(std::move(t)) {}  // NOLINT: implicit by design
  static RValue make_sequence(std::vector<Tensor> s, DType elem = DType::Undefined) {
    RValue v;
    v.kind = Kind::Sequence;
    v.seq_elem = elem != DType::Undefined || s.empty() ? elem : s.front().dtype();
    v.sequence = std::move(s);
    return v;
  }
  static RValue make_optional(std::shared_ptr<RValue> e) {
    RValue v;
    v.kind = Kind::Optional;
    v.element = std::move(e);
    return v;
  }
  bool is_tensor() const { return kind == Kind::Tensor; }
  bool is_sequence() const { return kind == Kind::Sequence; }
  bool is_optional() const { return kind == Kind::Optional; }
};

}  // namespace t2o
