#pragma once
// Element-wise comparison of a reference tensor (PyTorch) with a candidate (ONNX side).
#include <string>
#include <utility>
#include <vector>

#include "ir/tensor.h"

namespace t2o {

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-4;
};

struct TensorStats {
  Dims ref_shape, got_shape;
  DType ref_dtype = DType::Undefined, got_dtype = DType::Undefined;
  int64_t numel = 0;
  int64_t mismatches = 0;  // elements outside atol + rtol * |ref|, NaN on one side, or unequal Inf
  double max_abs = 0;      // over elements finite on both sides
  double max_rel = 0;      // |a - b| / max(|a|, |b|), so at most 2
  double cosine = 1;       // over elements finite on both sides
  int64_t ref_nan = 0, got_nan = 0, ref_inf = 0, got_inf = 0;
  int64_t nan_only_one = 0;  // positions where exactly one side is NaN

  bool shape_ok() const { return ref_shape == got_shape; }
  bool dtype_ok() const { return ref_dtype == got_dtype; }
  bool ok() const { return shape_ok() && dtype_ok() && mismatches == 0; }
  // Intermediate values may legitimately be carried in a wider type (ints as int64).
  bool values_ok() const { return shape_ok() && mismatches == 0; }
  double mismatch_share() const { return numel ? static_cast<double>(mismatches) / static_cast<double>(numel) : 0; }
  // One short phrase for tables: "ok", "shape 1x3 vs 1x4", "12.5% differ", "NaN on one side (3)".
  std::string verdict() const;
};

// NaN at the same position on both sides agrees (a model may legitimately produce NaN); Inf
// agrees only with the same Inf. Shapes must match exactly; dtypes are reported, and a dtype
// difference is a mismatch, since users depend on the output type.
TensorStats compare_tensors(const Tensor& ref, const Tensor& got, const Tolerance& tol);

// How |ref - got| spreads over the elements finite on both sides, in decades: bin 0 counts exact
// agreement, bin 1 differences below 1e-7, then one bin per decade up to [1, 10), and the last bin
// 10 and more. Empty when the shapes differ.
std::vector<int64_t> abs_diff_histogram(const Tensor& ref, const Tensor& got);
const std::vector<std::string>& abs_diff_bin_labels();

// Up to `max` (ref, got) pairs of evenly spaced elements finite on both sides, for a scatter plot.
std::vector<std::pair<double, double>> sample_pairs(const Tensor& ref, const Tensor& got, size_t max = 400);

}  // namespace t2o
