#include "ir/tensor.h"

#include <cstdlib>
#include <cstring>

namespace t2o {

int64_t numel_of(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string dims_to_string(const Dims& dims) {
  if (dims.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(dims[i]);
  }
  return s;
}

namespace {
std::shared_ptr<void> allocate_bytes(size_t n, bool zero = true) {
  size_t rounded = (n + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw Error("out of memory allocating " + std::to_string(n) + " bytes");
  if (zero) std::memset(p, 0, rounded);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}
}  // namespace

Tensor::Tensor(DType dtype, Dims dims) : dtype_(dtype), dims_(std::move(dims)) {
  for (int64_t d : dims_)
    if (d < 0) throw Error("tensor dimension is negative: " + dims_to_string(dims_));
  if (dtype_ == DType::String) {
    auto* v = new std::vector<std::string>(static_cast<size_t>(numel()));
    storage_ = std::shared_ptr<void>(v, [](void* q) { delete static_cast<std::vector<std::string>*>(q); });
    data_ = v->data();
  } else {
    storage_ = allocate_bytes(nbytes());
    data_ = storage_.get();
  }
}

Tensor Tensor::uninitialized(DType dtype, Dims dims) {
  if (dtype == DType::String) return Tensor(dtype, std::move(dims));
  for (int64_t d : dims)
    if (d < 0) throw Error("tensor dimension is negative: " + dims_to_string(dims));
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.storage_ = allocate_bytes(t.nbytes(), false);
  t.data_ = t.storage_.get();
  return t;
}

Tensor Tensor::borrow(DType dtype, Dims dims, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.storage_ = std::shared_ptr<void>(data, [](void*) {});
  t.data_ = data;
  return t;
}

Tensor Tensor::share(DType dtype, Dims dims, std::shared_ptr<void> owner, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.storage_ = std::move(owner);
  t.data_ = data;
  return t;
}

Tensor Tensor::from_strings(const std::vector<std::string>& values, Dims dims) {
  Tensor t(DType::String, std::move(dims));
  if (static_cast<size_t>(t.numel()) != values.size()) throw Error("Tensor::from_strings: size does not match dims");
  for (size_t i = 0; i < values.size(); ++i) t.strings()[i] = values[i];
  return t;
}

size_t Tensor::nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

std::string* Tensor::strings() {
  check_type(DType::String);
  return static_cast<std::string*>(data_);
}
const std::string* Tensor::strings() const {
  check_type(DType::String);
  return static_cast<const std::string*>(data_);
}

void Tensor::check_type(DType want) const {
  if (dtype_ != want)
    throw Error("tensor element type is " + std::string(dtype_name(dtype_)) + ", expected " +
                std::string(dtype_name(want)));
}

Tensor Tensor::clone() const {
  if (!defined()) return {};
  Tensor t(dtype_, dims_);
  if (dtype_ == DType::String) {
    for (int64_t i = 0; i < numel(); ++i) t.strings()[i] = strings()[i];
  } else if (nbytes()) {
    std::memcpy(t.data_, data_, nbytes());
  }
  return t;
}

Tensor Tensor::reshaped(Dims dims) const {
  if (numel_of(dims) != numel())
    throw Error("cannot reshape " + dims_to_string(dims_) + " to " + dims_to_string(dims));
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

double Tensor::as_double(int64_t i) const {
  if (dtype_ == DType::String) throw Error("as_double on a string tensor");
  return dispatch_dtype(dtype_, [&](auto tag) -> double {
    using T = decltype(tag);
    return static_cast<double>(static_cast<const T*>(data_)[i]);
  });
}

int64_t Tensor::as_int(int64_t i) const {
  return dispatch_dtype(dtype_, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      return static_cast<int64_t>(static_cast<float>(static_cast<const T*>(data_)[i]));
    else
      return static_cast<int64_t>(static_cast<const T*>(data_)[i]);
  });
}

bool Tensor::equals(const Tensor& o) const {
  if (dtype_ != o.dtype_ || dims_ != o.dims_) return false;
  if (dtype_ == DType::String) {
    for (int64_t i = 0; i < numel(); ++i)
      if (strings()[i] != o.strings()[i]) return false;
    return true;
  }
  return nbytes() == 0 || std::memcmp(data_, o.data_, nbytes()) == 0;
}

}  // namespace t2o
