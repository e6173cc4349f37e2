// Calibration: activation ranges observed while the float model runs on the calibration sets.
#include <algorithm>
#include <cmath>

#include "quant/internal.h"
#include "runtime/session.h"

namespace t2o::quant {

namespace {

// Percentile and entropy keep a strided sample of each value per set, enough for percentiles of 1e-4
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

// Entropy calibration: the clipping threshold T whose quantization of [0, T] keeps the most
// information of the observed distribution of magnitudes, measured as the KL divergence between
// the histogram with everything beyond T piled into its last bin and that histogram merged down to
// the quantized levels and spread back over its non-empty bins. Values of one sign get all 256
// levels over [0, T]; signed values spread 256 levels over [-T, T], so 128 per side.
constexpr int kBins = 2048;

float entropy_threshold(const std::vector<float>& v, float top, int levels) {
  if (!(top > 0) || v.empty()) return top;
  std::vector<double> hist(kBins, 0.0);
  const double width = static_cast<double>(top) / kBins;
  for (float x : v) {
    // Exact zeros (ReLU's half of the values, padding) stay exact at any threshold; counted, their
    // spike in the first bin would push the threshold down to keep that bin apart.
    if (x == 0) continue;
    auto b = static_cast<int64_t>(std::fabs(static_cast<double>(x)) / width);
    ++hist[static_cast<size_t>(std::clamp<int64_t>(b, 0, kBins - 1))];
  }
  double total = 0;
  for (double h : hist) total += h;
  if (!(total > 0)) return top;
  double best_kl = INFINITY;
  int best = kBins;
  std::vector<double> p, q;
  double beyond = 0;  // mass above bin i
  for (int i = kBins; i >= levels; --i) {
    if (i < kBins) beyond += hist[static_cast<size_t>(i)];
  }
  // Walk i upwards so that `beyond` shrinks as bins join the kept part.
  for (int i = levels; i <= kBins; ++i) {
    if (i > levels) beyond -= hist[static_cast<size_t>(i - 1)];
    p.assign(hist.begin(), hist.begin() + i);
    p[static_cast<size_t>(i - 1)] += beyond;
    // Merge the i kept bins into `levels` groups, then spread each group's mass evenly over the
    // bins of the group that held anything (empty bins stay empty: a zero in P must be one in Q).
    q.assign(static_cast<size_t>(i), 0.0);
    for (int g = 0; g < levels; ++g) {
      int lo = static_cast<int>(static_cast<int64_t>(g) * i / levels), hi = static_cast<int>(static_cast<int64_t>(g + 1) * i / levels);
      double mass = 0;
      int used = 0;
      for (int k = lo; k < hi; ++k) {
        mass += hist[static_cast<size_t>(k)];
        used += hist[static_cast<size_t>(k)] > 0;
      }
      for (int k = lo; k < hi; ++k)
        if (hist[static_cast<size_t>(k)] > 0) q[static_cast<size_t>(k)] = mass / used;
    }
    // Q lacks the clipped mass that P piles into its last bin: that is what clipping costs.
    const double kept = total - beyond;
    if (!(kept > 0)) continue;
    double kl = 0;
    for (int k = 0; k < i; ++k) {
      double pk = p[static_cast<size_t>(k)] / total, qk = q[static_cast<size_t>(k)] / kept;
      if (pk > 0) kl += qk > 0 ? pk * std::log(pk / qk) : pk * 50.0;  // an unrepresented bin costs dearly
    }
    if (kl < best_kl) best_kl = kl, best = i;
  }
  return static_cast<float>((static_cast<double>(best) + 0.5) * width);
}

}  // namespace

std::map<std::string, Range> calibrate(const Model& m, const std::vector<std::string>& names,
                                       const std::vector<InputSet>& sets, const QuantizeOptions& o) {
  bool percentile = o.method == CalibMethod::Percentile, entropy = o.method == CalibMethod::Entropy;
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
      if (v && v->is_tensor() && v->tensor.dtype() == DType::Float) observe(ob, v->tensor, percentile || entropy);
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
    if (entropy && !ob.kept.empty()) {
      bool signed_values = ob.lo < 0 && ob.hi > 0;
      float top = std::max(std::fabs(ob.lo), std::fabs(ob.hi));
      float t = entropy_threshold(ob.kept, top, signed_values ? 128 : 256);
      r.lo = std::max(ob.lo, -t);
      r.hi = std::min(ob.hi, t);
    }
    ranges[name] = r;
  }
  return ranges;
}

}  // namespace t2o::quant
