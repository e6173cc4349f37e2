#pragma once
// Tensor: dtype + dims + shared contiguous storage. Copies share storage; clone() deep-copies.
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/dtype.h"
#include "ir/error.h"

namespace t2o {

using Dims = std::vector<int64_t>;

// Sizes come from files: every product of dims goes through these, which throw InputError
// (exit 4) instead of wrapping. Elements are capped at 2^62 and bytes at 2^62, so callers may add
// and multiply by small factors afterwards without overflowing.
constexpr int64_t kMaxElements = int64_t{1} << 62;
int64_t checked_mul(int64_t a, int64_t b);  // both >= 0; the product, or throws past kMaxElements
int64_t checked_add(int64_t a, int64_t b);  // both >= 0; likewise
int64_t numel_of(const Dims& dims);         // throws on a negative dim or past kMaxElements
size_t nbytes_of(DType dtype, const Dims& dims);
std::string dims_to_string(const Dims& dims);  // "1x3x224x224", "scalar" for rank 0

// A cap on the bytes held by all tensors of the process (their storage and the runtime's buffer
// pool). Allocations past it throw InputError naming the size, before any memory is touched, so a
// small file that declares huge tensors fails cleanly. Default: no cap (0).
void set_memory_limit(size_t bytes);
size_t memory_limit();
size_t memory_in_use();
// Accounting for storage allocated outside Tensor (the runtime's pool): reserve throws when the
// cap would be exceeded; release returns the bytes.
void reserve_memory(size_t bytes);
void release_memory(size_t bytes);

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-filled storage (64-byte aligned). Strings start empty.
  Tensor(DType dtype, Dims dims);

  // Storage left as the allocator returns it (64-byte aligned), for buffers the caller
  // overwrites fully. Not for strings.
  static Tensor uninitialized(DType dtype, Dims dims);
  // Like uninitialized, but large storage is mapped from the system and unmapped when freed, so
  // freeing it gives the memory back instead of leaving a hole in the heap (for large long-lived
  // tensors such as weights, which the runtime may drop once it holds them packed).
  static Tensor uninitialized_long_lived(DType dtype, Dims dims);

  // Wraps memory owned by the caller; the caller keeps it alive while the tensor is used.
  static Tensor borrow(DType dtype, Dims dims, void* data);
  // Wraps memory kept alive by `owner`.
  static Tensor share(DType dtype, Dims dims, std::shared_ptr<void> owner, void* data);

  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, Dims dims) {
    Tensor t(dtype_of<T>(), std::move(dims));
    if (static_cast<size_t>(t.numel()) != values.size()) throw Error("Tensor::from_vector: size does not match dims");
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
    return t;
  }
  template <typename T>
  static Tensor scalar(T v) { return from_vector<T>({v}, {}); }
  static Tensor from_strings(const std::vector<std::string>& values, Dims dims);

  bool defined() const { return dtype_ != DType::Undefined; }
  DType dtype() const { return dtype_; }
  const Dims& dims() const { return dims_; }
  int64_t dim(int i) const { return dims_.at(static_cast<size_t>(i < 0 ? i + rank() : i)); }
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const;

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T>
  T* data() {
    check_type(dtype_of<T>());
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    check_type(dtype_of<T>());
    return static_cast<const T*>(data_);
  }
  // String tensors keep their elements here.
  std::string* strings();
  const std::string* strings() const;

  Tensor clone() const;
  // Same storage, new dims (numel must match).
  Tensor reshaped(Dims dims) const;
  // Whether two tensors share storage.
  bool same_storage(const Tensor& o) const { return storage_ == o.storage_; }
  // Whether no other tensor shares this one's storage (so writing it is invisible to others).
  bool sole_owner() const { return storage_ && storage_.use_count() == 1; }
  // Element i converted to double (for messages, tests and small scalar reads).
  double as_double(int64_t i) const;
  int64_t as_int(int64_t i) const;
  // Exact equality of dtype, dims and bytes (NaN payloads compared bitwise).
  bool equals(const Tensor& o) const;
  // Whether a floating-point element is NaN or infinite (false for other dtypes and without data).
  bool has_nonfinite() const;

 private:
  void check_type(DType want) const;
  DType dtype_ = DType::Undefined;
  Dims dims_;
  int64_t numel_ = 1;  // of dims_, checked when the dims were set
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
};

// Calls f(T{}) with T the C++ type of dtype; strings and complex are rejected.
template <typename F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Float: return f(float{});
    case DType::Double: return f(double{});
    case DType::Float16: return f(Half{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::Int8: return f(int8_t{});
    case DType::Int16: return f(int16_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::UInt8: return f(uint8_t{});
    case DType::UInt16: return f(uint16_t{});
    case DType::UInt32: return f(uint32_t{});
    case DType::UInt64: return f(uint64_t{});
    case DType::Bool: return f(bool{});
    default: throw Error("unsupported element type " + std::string(dtype_name(t)));
  }
}

}  // namespace t2o
