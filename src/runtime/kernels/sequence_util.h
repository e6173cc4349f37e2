#pragma once
// Axis slicing, concatenation and stacking of whole tensors of any element type (strings too),
// shared by the sequence ops and by Scan/Loop, which cut and join tensors along one axis.
#include <cstring>
#include <string>
#include <vector>

#include "runtime/kernel.h"

namespace t2o::kern {

// Copies n elements from src (starting at element so) into dst (starting at element dof).
inline void copy_elems(Tensor& dst, int64_t dof, const Tensor& src, int64_t so, int64_t n) {
  if (n <= 0) return;
  if (src.dtype() == DType::String) {
    for (int64_t i = 0; i < n; ++i) dst.strings()[dof + i] = src.strings()[so + i];
    return;
  }
  size_t es = dtype_size(src.dtype());
  std::memcpy(static_cast<char*>(dst.raw()) + static_cast<size_t>(dof) * es,
              static_cast<const char*>(src.raw()) + static_cast<size_t>(so) * es, static_cast<size_t>(n) * es);
}

inline int64_t prod_dims(const Dims& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

// t[..., start:start+len, ...] along `axis` (already normalised and in range).
inline Tensor slice_axis(const Tensor& t, int64_t axis, int64_t start, int64_t len) {
  const Dims& d = t.dims();
  size_t a = static_cast<size_t>(axis);
  Dims od = d;
  od[a] = len;
  Tensor out(t.dtype(), od);
  int64_t outer = prod_dims(d, 0, a), inner = prod_dims(d, a + 1, d.size());
  for (int64_t o = 0; o < outer; ++o) copy_elems(out, o * len * inner, t, (o * d[a] + start) * inner, len * inner);
  return out;
}

// t[..., idx, ...] with `axis` removed.
inline Tensor take_axis(const Tensor& t, int64_t axis, int64_t idx) {
  Tensor s = slice_axis(t, axis, idx, 1);
  Dims od = t.dims();
  od.erase(od.begin() + axis);
  return s.reshaped(od);
}

// Joins parts along `axis`; the caller checks ranks and the other dims agree.
inline Tensor concat_axis(const std::vector<Tensor>& parts, int64_t axis) {
  Dims od = parts.front().dims();
  size_t a = static_cast<size_t>(axis);
  int64_t total = 0;
  for (const Tensor& p : parts) total += p.dims()[a];
  od[a] = total;
  Tensor out(parts.front().dtype(), od);
  int64_t outer = prod_dims(od, 0, a), inner = prod_dims(od, a + 1, od.size());
  for (int64_t o = 0; o < outer; ++o) {
    int64_t off = 0;
    for (const Tensor& p : parts) {
      int64_t n = p.dims()[a];
      copy_elems(out, (o * total + off) * inner, p, o * n * inner, n * inner);
      off += n;
    }
  }
  return out;
}

// Stacks equally shaped parts along a new axis `axis` (0..rank).
inline Tensor stack_axis(const std::vector<Tensor>& parts, int64_t axis) {
  std::vector<Tensor> ex;
  ex.reserve(parts.size());
  for (const Tensor& p : parts) {
    Dims d = p.dims();
    d.insert(d.begin() + axis, 1);
    ex.push_back(p.reshaped(d));
  }
  return concat_axis(ex, axis);
}

// The first element of a condition/trip-count tensor, with a clear error when it is empty.
inline bool scalar_bool(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.numel() < 1) ctx.fail(std::string(what) + " must hold one element");
  return t.as_double(0) != 0;
}

}  // namespace t2o::kern
