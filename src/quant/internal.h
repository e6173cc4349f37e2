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
namespace passes {
class Scope;
}
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

Tensor transpose_2d(const Tensor& w);
Tensor scaled(const Tensor& t, float k);  // float32 copy times k

// A MatMul or Gemm with a constant 2-D float weight, as y = alpha * (x @ weight) + bias.
struct MatMulSite {
  Tensor weight;           // [K, N] float (Gemm's transB applied)
  float alpha = 1;         // Gemm's alpha
  std::string bias;        // Gemm's C ("" for none)
  Tensor bias_value;       // C times beta, when beta != 1 (C is then constant)
};
// nullopt with `why` set when n is not such a site.
std::optional<MatMulSite> matmul_site(const Node& n, passes::Scope& s, std::string& why);

bool excluded(const Node& n, const QuantizeOptions& o);
std::string describe_skip(const Node& n, const std::string& why);

// The rewrites; each returns the number of nodes it quantized and records skips in `r`.
int rewrite_dynamic(Model& m, PassContext& ctx, const QuantizeOptions& o, QuantizeResult& r);
// Float activations read by the nodes static quantization rewrites (what calibration must see).
std::vector<std::string> static_activations(Model& m, PassContext& ctx, const QuantizeOptions& o);
int rewrite_static(Model& m, PassContext& ctx, const QuantizeOptions& o, const std::map<std::string, Range>& ranges,
                   QuantizeResult& r);

// LSTM / GRU / RNN with constant float W and R, in every int8 mode: int8 weights behind
// DequantizeLinear, the layer named in the metadata that asks for run-time activation
// quantization (runtime/optimize.h, kInt8RecurrentKey).
int rewrite_recurrent(Model& m, PassContext& ctx, const QuantizeOptions& o, QuantizeResult& r);

// QOperator format. Gemms with a constant weight first become MatMul (+ Add), so that the
// product's own range is calibrated (QLinearMatMul has no bias); then the activations to
// calibrate (inputs and outputs of the ops to rewrite, and of the Relus they absorb); then the
// rewrite to QLinearConv / QLinearMatMul.
int split_gemms(Model& m, PassContext& ctx, const QuantizeOptions& o);
std::vector<std::string> qoperator_activations(Model& m, PassContext& ctx, const QuantizeOptions& o);
int rewrite_qoperator(Model& m, PassContext& ctx, const QuantizeOptions& o, const std::map<std::string, Range>& ranges,
                      QuantizeResult& r);

// fp16: float32 initializers and the float32 values of ops that run well in float16 become
// float16; Casts join them to the ops that stay float32 and (with keep_io_float32) to the graph's
// inputs and outputs. Returns the number of nodes that run in float16.
int rewrite_fp16(Model& m, PassContext& ctx, const QuantizeOptions& o, QuantizeResult& r);

}  // namespace t2o::quant
