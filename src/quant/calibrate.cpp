// Calibration: activation ranges observed while the float model runs on the calibration sets.
#include <algorithm>
#include <cmath>

#include "quant/internal.h"
#include "runtime/session.h"

namespace t2o::quant {

namespace {

// Percentile keeps a strided sample of each value per set, enough for percentiles of 1e-4
// resolution without holding every activation of every set.
constexpr int64_t kKeptPerSet = int64_t{1} << 16;

struct Observed {
  float lo = INFINITY, hi = -INFINITY;
  std::vector<float> kept;
};

void observe(Observed& ob, const Tensor& t, bool keep) {
  const float* p = t.data<float>();
  int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(p[i])) ob.lo = std::min(ob.lo, p[i]), ob.hi = std::max(ob.hi, p[i]);
  if (!keep || n == 0) return;
  int64_t stride = (n + kKeptPerSet - 1) / kKeptPerSet;  // at most kKeptPerSet values
  for (int64_t i = 0; i < n; i += stride)
    if (std::isfinite(p[i])) ob.kept.push_back(p[i]);
}

float quantile(std::vector<float>& v, double q) {
  size_t k = static_cast<size_t>(std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

std::map<std::string, Range> calibrate(const Model& m, const std::vector<std::string>& names,
                                       const std::vector<InputSet>& sets, const QuantizeOptions& o) {
  bool percentile = o.method == CalibMethod::Percentile;
  std::map<std::string, Observed> obs;
  for (const auto& n : names) obs[n];
  SessionOptions so;
  so.threads = o.threads;
  Session s(m, so);
  for (size_t k = 0; k < sets.size(); ++k) {
    if (o.progress)
      o.progress("calibrating: set " + std::to_string(k + 1) + " of " + std::to_string(sets.size()));
    std::map<std::string, RValue> feed(sets[k].begin(), sets[k].end());
    std::map<std::string, RValue> all;
    try {
      all = s.run_all(feed);
    } catch (const InputError& e) {
      throw InputError("calibration set " + std::to_string(k + 1) + " does not fit the model: " + e.what(),
                       "each set needs every input with the model's dtype and shape");
    } catch (const Error& e) {
      throw Error("the float model fails on calibration set " + std::to_string(k + 1) + ": " + e.what(),
                  "check the calibration data against the model's inputs", e.exit_code());
    }
    for (auto& [name, ob] : obs) {
      auto it = all.find(name);
      const RValue* v = it != all.end() ? &it->second : nullptr;
      if (!v)
        if (auto f = feed.find(name); f != feed.end()) v = &f->second;
      if (v && v->is_tensor() && v->tensor.dtype() == DType::Float) observe(ob, v->tensor, percentile);
    }
  }
  if (o.progress) o.progress("");
  std::map<std::string, Range> ranges;
  for (auto& [name, ob] : obs) {
    if (!(ob.lo <= ob.hi)) continue;  // never seen as a float tensor
    Range r{ob.lo, ob.hi};
    if (percentile && !ob.kept.empty()) {
      double tail = (100.0 - o.percentile) / 100.0;
      r.lo = std::min(quantile(ob.kept, tail), 0.0f);
      r.hi = std::max(quantile(ob.kept, 1.0 - tail), 0.0f);
    }
    ranges[name] = r;
  }
  return ranges;
}

}  // namespace t2o::quant
