#pragma once
// Declarations shared by the files of t2o_quant (not part of its public API).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "quant/quant.h"

namespace t2o {
class PassContext;
}

namespace t2o::quant {

// A constant float tensor as int8: w ~= q * scale, zero point 0 (symmetric, range [-127, 127] so
// that negation stays representable). scale and zero are scalars, or 1-D along `axis`.
struct QuantizedWeight {
  Tensor q, scale, zero;
};
QuantizedWeight quantize_weight(const Tensor& w, std::optional<int> axis);

// uint8 parameters for values in [lo, hi]; the range is widened to hold 0 exactly, as
// DynamicQuantizeLinear does, so zero padding and ReLU zeros stay exact.
struct ActivationParams {
  float scale = 1;
  uint8_t zero = 0;
};
ActivationParams activation_params(float lo, float hi);

// Observed range of one activation.
struct Range {
  float lo = 0, hi = 0;
};
// Runs the float model on every set and returns the range of each named value.
std::map<std::string, Range> calibrate(const Model& m, const std::vector<std::string>& names,
                                       const std::vector<InputSet>& sets, const QuantizeOptions& o);

bool excluded(const Node& n, const QuantizeOptions& o);
std::string describe_skip(const Node& n, const std::string& why);

// The rewrites; each returns the number of nodes it quantized and records skips in `r`.
int rewrite_dynamic(Model& m, PassContext& ctx, const QuantizeOptions& o, QuantizeResult& r);
// Float activations read by the nodes static quantization rewrites (what calibration must see).
std::vector<std::string> static_activations(Model& m, PassContext& ctx, const QuantizeOptions& o);
int rewrite_static(Model& m, PassContext& ctx, const QuantizeOptions& o, const std::map<std::string, Range>& ranges,
                   QuantizeResult& r);

}  // namespace t2o::quant
