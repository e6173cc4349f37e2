#include "verify/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace t2o {

TensorStats compare_tensors(const Tensor& ref, const Tensor& got, const Tolerance& tol) {
  TensorStats s;
  s.ref_shape = ref.dims();
  s.got_shape = got.dims();
  s.ref_dtype = ref.dtype();
  s.got_dtype = got.dtype();
  s.numel = ref.numel();
  auto count_special = [](const Tensor& t, int64_t& nan, int64_t& inf) {
    if (!dtype_is_float(t.dtype())) return;
    for (int64_t i = 0; i < t.numel(); ++i) {
      double v = t.as_double(i);
      nan += std::isnan(v);
      inf += std::isinf(v);
    }
  };
  count_special(ref, s.ref_nan, s.ref_inf);
  count_special(got, s.got_nan, s.got_inf);
  if (!s.shape_ok()) {
    s.mismatches = s.numel;
    s.cosine = 0;
    return s;
  }
  double dot = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < s.numel; ++i) {
    double a = ref.as_double(i), b = got.as_double(i);
    bool an = std::isnan(a), bn = std::isnan(b);
    if (an || bn) {
      if (an != bn) ++s.mismatches, ++s.nan_only_one;
      continue;
    }
    if (std::isinf(a) || std::isinf(b)) {
      if (a != b) ++s.mismatches;
      continue;
    }
    double d = std::fabs(a - b);
    double m = std::max(std::fabs(a), std::fabs(b));
    s.max_abs = std::max(s.max_abs, d);
    if (m > 0) s.max_rel = std::max(s.max_rel, d / m);
    if (d > tol.atol + tol.rtol * std::fabs(a)) ++s.mismatches;
    dot += a * b, na += a * a, nb += b * b;
  }
  if (na == 0 && nb == 0) s.cosine = 1;
  else if (na == 0 || nb == 0) s.cosine = 0;
  else s.cosine = dot / (std::sqrt(na) * std::sqrt(nb));
  return s;
}

const std::vector<std::string>& abs_diff_bin_labels() {
  static const std::vector<std::string> labels = {"0",    "<1e-7", "1e-7", "1e-6", "1e-5", "1e-4",
                                                  "1e-3", "1e-2",  "1e-1", "1",    ">=10"};
  return labels;
}

std::vector<int64_t> abs_diff_histogram(const Tensor& ref, const Tensor& got) {
  if (ref.dims() != got.dims()) return {};
  std::vector<int64_t> bins(abs_diff_bin_labels().size(), 0);
  for (int64_t i = 0; i < ref.numel(); ++i) {
    double a = ref.as_double(i), b = got.as_double(i);
    if (!std::isfinite(a) || !std::isfinite(b)) continue;
    double d = std::fabs(a - b);
    size_t bin = 0;
    if (d == 0) bin = 0;
    else if (d < 1e-7) bin = 1;
    else if (d >= 10) bin = bins.size() - 1;
    else bin = 2 + static_cast<size_t>(std::floor(std::log10(d) + 7));  // 1e-7 -> 2, ..., 1 -> 9
    bins[std::min(bin, bins.size() - 1)]++;
  }
  return bins;
}

std::vector<std::pair<double, double>> sample_pairs(const Tensor& ref, const Tensor& got, size_t max) {
  std::vector<std::pair<double, double>> r;
  if (ref.dims() != got.dims() || ref.numel() == 0 || max == 0) return r;
  int64_t n = ref.numel(), step = std::max<int64_t>(1, n / static_cast<int64_t>(max));
  for (int64_t i = 0; i < n && r.size() < max; i += step) {
    double a = ref.as_double(i), b = got.as_double(i);
    if (std::isfinite(a) && std::isfinite(b)) r.emplace_back(a, b);
  }
  return r;
}

std::string TensorStats::verdict() const {
  if (!shape_ok()) return "shape " + dims_to_string(ref_shape) + " vs " + dims_to_string(got_shape);
  if (!dtype_ok())
    return "dtype " + std::string(dtype_name(ref_dtype)) + " vs " + std::string(dtype_name(got_dtype));
  if (nan_only_one) return "NaN on one side (" + std::to_string(nan_only_one) + ")";
  if (mismatches == 0) return "ok";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g%% differ", 100.0 * mismatch_share());
  return buf;
}

}  // namespace t2o
