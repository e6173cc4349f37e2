#include "ir/tensor.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>

#include <immintrin.h>
#include <sys/mman.h>
#include <unistd.h>

namespace t2o {

namespace {
[[noreturn]] void too_large(const std::string& what) {
  throw InputError(what + " exceeds the addressable size (2^62)", "the file declares impossibly large dimensions");
}
}  // namespace

int64_t checked_mul(int64_t a, int64_t b) {
  if (a < 0 || b < 0) throw InputError("size is negative: " + std::to_string(a < 0 ? a : b));
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r) || r > kMaxElements)
    too_large("size " + std::to_string(a) + " x " + std::to_string(b));
  return r;
}

int64_t checked_add(int64_t a, int64_t b) {
  if (a < 0 || b < 0) throw InputError("size is negative: " + std::to_string(a < 0 ? a : b));
  int64_t r;
  if (__builtin_add_overflow(a, b, &r) || r > kMaxElements)
    too_large("size " + std::to_string(a) + " + " + std::to_string(b));
  return r;
}

int64_t numel_of(const Dims& dims) {
  // The non-zero dims are bounded too, even when a zero makes the tensor empty, so that strides
  // and partial products that kernels compute from any subset of the dims cannot overflow.
  int64_t n = 1;
  bool zero = false;
  for (int64_t d : dims) {
    if (d < 0) throw InputError("tensor dimension is negative: " + dims_to_string(dims));
    if (d == 0) {
      zero = true;
      continue;
    }
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements) too_large("tensor of dims " + dims_to_string(dims));
  }
  return zero ? 0 : n;
}

size_t nbytes_of(DType dtype, const Dims& dims) {
  int64_t n = numel_of(dims);
  int64_t es = dtype == DType::String ? static_cast<int64_t>(sizeof(std::string)) : static_cast<int64_t>(dtype_size(dtype));
  int64_t b;
  if (__builtin_mul_overflow(n, es, &b) || b > kMaxElements) too_large("tensor of dims " + dims_to_string(dims));
  return static_cast<size_t>(b);
}

namespace {
std::atomic<size_t> g_limit{0};
std::atomic<size_t> g_used{0};

std::string human_bytes(size_t n) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 6) v /= 1024, ++u;
  char buf[64];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}
}  // namespace

void set_memory_limit(size_t bytes) { g_limit.store(bytes); }
size_t memory_limit() { return g_limit.load(); }
size_t memory_in_use() { return g_used.load(); }

void reserve_memory(size_t bytes) {
  size_t limit = g_limit.load();
  size_t before = g_used.fetch_add(bytes);
  if (limit && (before + bytes > limit || before + bytes < before)) {
    g_used.fetch_sub(bytes);
    throw InputError("a tensor of " + human_bytes(bytes) + " would exceed the memory limit of " + human_bytes(limit) +
                         " (" + human_bytes(before) + " in use)",
                     "the model needs more memory than allowed; raise --max-memory if it is genuine");
  }
}

void release_memory(size_t bytes) { g_used.fetch_sub(bytes); }

namespace {

// Whether any of n values has all its exponent bits set (NaN or infinity).
template <typename U>
bool any_exponent_all_ones(const void* data, int64_t n, U exponent) {
  const U* p = static_cast<const U*>(data);
  bool any = false;
  for (int64_t i = 0; i < n; ++i) any |= (p[i] & exponent) == exponent;
  return any;
}

// The float case 64 values at a time (the loop above scanned a 224 x 224 image in about 90 us, a
// tenth of MobileNetV2's first conv).
__attribute__((target("avx512f"))) bool any_float_nonfinite_avx512(const uint32_t* p, int64_t n) {
  const __m512i e = _mm512_set1_epi32(0x7f800000);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __mmask16 m = 0;
    for (int k = 0; k < 4; ++k) {
      __m512i v = _mm512_and_si512(_mm512_loadu_si512(p + i + 16 * k), e);
      m |= _mm512_cmpeq_epi32_mask(v, e);
    }
    if (m) return true;
  }
  return any_exponent_all_ones<uint32_t>(p + i, n - i, 0x7f800000u);
}

bool any_float_nonfinite(const void* data, int64_t n) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return any_float_nonfinite_avx512(static_cast<const uint32_t*>(data), n);
  return any_exponent_all_ones<uint32_t>(data, n, 0x7f800000u);
}

}  // namespace

bool Tensor::has_nonfinite() const {
  if (!data_) return false;
  switch (dtype_) {
    case DType::Float: return any_float_nonfinite(data_, numel_);
    case DType::Double: return any_exponent_all_ones<uint64_t>(data_, numel_, 0x7ff0000000000000ull);
    case DType::Float16: return any_exponent_all_ones<uint16_t>(data_, numel_, 0x7c00u);
    case DType::BFloat16: return any_exponent_all_ones<uint16_t>(data_, numel_, 0x7f80u);
    default: return false;
  }
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
  reserve_memory(rounded);
  void* p = std::aligned_alloc(64, rounded);
  if (!p) {
    release_memory(rounded);
    throw InputError("out of memory allocating " + human_bytes(n));
  }
  if (zero) std::memset(p, 0, rounded);
  return std::shared_ptr<void>(p, [rounded](void* q) {
    std::free(q);
    release_memory(rounded);
  });
}
// Whole pages from the system for `n` bytes (at least `kMapAtLeast`); nullptr when mapping fails.
constexpr size_t kMapAtLeast = 256 * 1024;
std::shared_ptr<void> map_bytes(size_t n) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t rounded = (n + page - 1) / page * page;
  reserve_memory(rounded);
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    release_memory(rounded);
    return nullptr;
  }
  return std::shared_ptr<void>(p, [rounded](void* q) {
    munmap(q, rounded);
    release_memory(rounded);
  });
}
}  // namespace

Tensor::Tensor(DType dtype, Dims dims) : dtype_(dtype), dims_(std::move(dims)), numel_(numel_of(dims_)) {
  size_t bytes = nbytes_of(dtype_, dims_);  // validates the dims before anything is allocated
  if (dtype_ == DType::String) {
    reserve_memory(bytes);
    std::vector<std::string>* v;
    try {
      v = new std::vector<std::string>(static_cast<size_t>(numel()));
    } catch (...) {
      release_memory(bytes);
      throw;
    }
    storage_ = std::shared_ptr<void>(v, [bytes](void* q) {
      delete static_cast<std::vector<std::string>*>(q);
      release_memory(bytes);
    });
    data_ = v->data();
  } else {
    storage_ = allocate_bytes(bytes);
    data_ = storage_.get();
  }
}

Tensor Tensor::uninitialized_long_lived(DType dtype, Dims dims) {
  size_t bytes = dtype == DType::String ? 0 : nbytes_of(dtype, dims);
  if (bytes < kMapAtLeast) return uninitialized(dtype, std::move(dims));
  std::shared_ptr<void> pages = map_bytes(bytes);
  if (!pages) return uninitialized(dtype, std::move(dims));
  void* data = pages.get();
  return share(dtype, std::move(dims), std::move(pages), data);
}

Tensor Tensor::uninitialized(DType dtype, Dims dims) {
  if (dtype == DType::String) return Tensor(dtype, std::move(dims));
  size_t bytes = nbytes_of(dtype, dims);
  Tensor t;
  t.dtype_ = dtype;
  t.numel_ = numel_of(dims);
  t.dims_ = std::move(dims);
  t.storage_ = allocate_bytes(bytes, false);
  t.data_ = t.storage_.get();
  return t;
}

Tensor Tensor::borrow(DType dtype, Dims dims, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.numel_ = numel_of(dims);
  t.dims_ = std::move(dims);
  t.storage_ = std::shared_ptr<void>(data, [](void*) {});
  t.data_ = data;
  return t;
}

Tensor Tensor::share(DType dtype, Dims dims, std::shared_ptr<void> owner, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.numel_ = numel_of(dims);
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

// Dims were validated when the tensor was made, so the product cannot overflow here.
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
  t.numel_ = numel_;
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
  // Float elements come from files: NaN reads as 0 and values past int64 saturate, where a plain
  // cast would be undefined.
  auto from_float = [](double v) -> int64_t {
    if (std::isnan(v)) return 0;
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    return static_cast<int64_t>(v);
  };
  return dispatch_dtype(dtype_, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      return from_float(static_cast<float>(static_cast<const T*>(data_)[i]));
    else if constexpr (std::is_floating_point_v<T>)
      return from_float(static_cast<double>(static_cast<const T*>(data_)[i]));
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
