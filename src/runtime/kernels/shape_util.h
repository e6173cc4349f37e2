#pragma once
// Helpers shared by the shape, indexing and tensor-creation kernels. Most of these ops only move
// elements, so they work on element bits (any dtype of the same size behaves alike) or strings.
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/kernels/util.h"

namespace t2o::kern {

struct Bits128 {
  uint64_t lo, hi;
};

// Calls f(T{}) with an unsigned type of the element's size (Bits128 for 16 bytes) or std::string.
template <typename F>
decltype(auto) dispatch_bits(DType t, F&& f) {
  if (t == DType::String) return f(std::string{});
  switch (dtype_size(t)) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    case 16: return f(Bits128{});
    default: throw Error("unsupported element type " + std::string(dtype_name(t)));
  }
}

// dispatch_dtype plus strings, for ops that compare values (Unique).
template <typename F>
decltype(auto) dispatch_with_string(DType t, F&& f) {
  if (t == DType::String) return f(std::string{});
  return dispatch_dtype(t, std::forward<F>(f));
}

// f16/bf16 are storage types: compare and accumulate them as float.
template <typename T>
using math_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <typename T>
T* elems(Tensor& t) {
  if constexpr (std::is_same_v<T, std::string>) return t.strings();
  else return static_cast<T*>(t.raw());
}
template <typename T>
const T* elems(const Tensor& t) {
  if constexpr (std::is_same_v<T, std::string>) return t.strings();
  else return static_cast<const T*>(t.raw());
}

// Copies n elements from src[so] to dst[d0]; memcpy unless strings.
inline void copy_elems(const Tensor& src, int64_t so, Tensor& dst, int64_t d0, int64_t n) {
  if (n <= 0) return;
  if (src.dtype() == DType::String) {
    const std::string* s = src.strings() + so;
    std::string* d = dst.strings() + d0;
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
    return;
  }
  size_t es = dtype_size(src.dtype());
  std::memcpy(static_cast<char*>(dst.raw()) + static_cast<size_t>(d0) * es,
              static_cast<const char*>(src.raw()) + static_cast<size_t>(so) * es, static_cast<size_t>(n) * es);
}

// norm_axis that also rejects any axis of a scalar (norm_axis accepts 0 there).
inline int64_t axis_of(const KernelContext& ctx, int64_t axis, int64_t rank) {
  if (rank == 0) ctx.fail("axis " + std::to_string(axis) + " given for a scalar input");
  return norm_axis(ctx, axis, rank);
}

inline int64_t prod(const Dims& d, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e && i < d.size(); ++i) p *= d[i];
  return p;
}

// Integer tensor (int32/int64) as a vector, failing clearly on other element types.
inline std::vector<int64_t> int_input(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DType::Int64 && t.dtype() != DType::Int32)
    ctx.fail(std::string(what) + " must be int64 or int32, got " + std::string(dtype_name(t.dtype())));
  return to_int_vector(t);
}

// out = in transposed by perm (out.dims()[i] == in.dims()[perm[i]]); `out` is allocated by the caller.
// fast: merges axes and copies contiguous runs or tiles; otherwise one element at a time.
void transpose_into(const Tensor& in, const std::vector<int64_t>& perm, Tensor& out, bool fast, int threads);

}  // namespace t2o::kern
