// Offline weight quantization and activation parameters.
#include <algorithm>
#include <cmath>

#include "quant/internal.h"

namespace t2o::quant {

namespace {

// Values of a float tensor as float (f16/bf16/f64 weights convert here).
std::vector<float> float_values(const Tensor& w) {
  std::vector<float> v(static_cast<size_t>(w.numel()));
  if (w.dtype() == DType::Float) std::copy(w.data<float>(), w.data<float>() + w.numel(), v.begin());
  else
    for (int64_t i = 0; i < w.numel(); ++i) v[static_cast<size_t>(i)] = static_cast<float>(w.as_double(i));
  return v;
}

}  // namespace

QuantizedWeight quantize_weight(const Tensor& w, std::optional<int> axis) {
  std::vector<float> v = float_values(w);
  int64_t len = 1, inner = w.numel();
  if (axis) {
    len = w.dim(*axis);
    inner = 1;
    for (int d = *axis + 1; d < w.rank(); ++d) inner *= w.dim(d);
  }
  std::vector<float> absmax(static_cast<size_t>(len), 0.0f);
  int64_t outer = len * inner > 0 ? w.numel() / (len * inner) : 0;
  auto each = [&](auto&& f) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < len; ++k)
        for (int64_t i = 0; i < inner; ++i) f(k, (o * len + k) * inner + i);
  };
  each([&](int64_t k, int64_t i) {
    float a = std::fabs(v[static_cast<size_t>(i)]);
    if (std::isfinite(a)) absmax[static_cast<size_t>(k)] = std::max(absmax[static_cast<size_t>(k)], a);
  });
  QuantizedWeight r;
  Dims sd = axis ? Dims{len} : Dims{};
  r.scale = Tensor(DType::Float, sd);
  r.zero = Tensor(DType::Int8, sd);
  float* s = r.scale.data<float>();
  // An all-zero channel keeps scale 1 (a zero scale would be a division by zero in QuantizeLinear).
  for (int64_t k = 0; k < len; ++k) s[k] = absmax[static_cast<size_t>(k)] > 0 ? absmax[static_cast<size_t>(k)] / 127.0f : 1.0f;
  r.q = Tensor(DType::Int8, w.dims());
  int8_t* q = r.q.data<int8_t>();
  each([&](int64_t k, int64_t i) {
    float x = std::nearbyint(v[static_cast<size_t>(i)] / s[k]);
    q[i] = static_cast<int8_t>(std::isnan(x) ? 0.0f : std::clamp(x, -127.0f, 127.0f));
  });
  return r;
}

ActivationParams activation_params(float lo, float hi) {
  lo = std::min(lo, 0.0f);
  hi = std::max(hi, 0.0f);
  ActivationParams p;
  if (!(hi > lo) || !std::isfinite(hi - lo)) return p;
  p.scale = (hi - lo) / 255.0f;
  p.zero = static_cast<uint8_t>(std::clamp(std::nearbyint(-lo / p.scale), 0.0f, 255.0f));
  return p;
}

bool excluded(const Node& n, const QuantizeOptions& o) {
  return std::any_of(o.exclude.begin(), o.exclude.end(),
                     [&](const std::string& e) { return e == n.name || e == n.op_type; });
}

std::string describe_skip(const Node& n, const std::string& why) { return n.describe() + ": " + why; }

}  // namespace t2o::quant
