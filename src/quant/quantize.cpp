// quantize(): checks what the opset allows, calibrates (static), rewrites, drops the float weights.
#include "passes/passes.h"
#include "quant/internal.h"

namespace t2o {

namespace {

void require_opset(const Model& m, int64_t need, const std::string& what) {
  int64_t v = m.opset("");
  if (v >= need) return;
  throw Error(what + " needs opset " + std::to_string(need) + " or later; the model is at opset " + std::to_string(v),
              "move the model first: torch2onnx convert-version IN.onnx -o IN13.onnx --opset 13");
}

}  // namespace

QuantizeResult quantize(Model& m, const QuantizeOptions& o) {
  QuantizeResult r;
  r.initializer_bytes_before = m.graph.parameter_bytes();
  if (o.mode == QuantMode::Float16) {
    PassContext ctx(m);
    r.quantized = quant::rewrite_fp16(m, ctx, o, r);
    OptimizeOptions clean;
    clean.passes = {"eliminate_dead"};
    optimize(m, clean);
    r.initializer_bytes_after = m.graph.parameter_bytes();
    return r;
  }
  if (o.mode == QuantMode::Dynamic) {
    require_opset(m, 11, "dynamic quantization (DynamicQuantizeLinear, MatMulInteger)");
  } else {
    require_opset(m, 10, "static quantization (QuantizeLinear, DequantizeLinear)");
    if (o.per_channel) require_opset(m, 13, "per-channel weights (DequantizeLinear's axis)");
  }
  PassContext ctx(m);
  if (o.mode == QuantMode::Dynamic) {
    r.quantized = quant::rewrite_dynamic(m, ctx, o, r);
  } else {
    const bool qop = o.format == QuantFormat::QOperator;
    if (qop) quant::split_gemms(m, ctx, o);
    std::vector<std::string> names = qop ? quant::qoperator_activations(m, ctx, o) : quant::static_activations(m, ctx, o);
    // Calibration runs only when some activation needs a range (a model whose only quantized
    // layers are recurrent has none: their activations are quantized at run time).
    std::vector<InputSet> sets = o.calibration;
    if (sets.empty() && !names.empty()) {
      r.generated_calibration = true;
      if (o.warn)
        o.warn("calibrating on " + std::to_string(o.generated_samples) +
               " GENERATED random input sets: activation ranges of random data rarely match real data, so this "
               "model is for trying the pipeline, not for production; give real inputs with --calibrate");
      sets = generate_input_sets(m, o.generated_samples, o.seed, o.threads, o.input_sizes);
    }
    r.calibration_samples = names.empty() ? 0 : static_cast<int>(sets.size());
    std::map<std::string, quant::Range> ranges;
    if (!names.empty()) ranges = quant::calibrate(m, names, sets, o);
    r.quantized = qop ? quant::rewrite_qoperator(m, ctx, o, ranges, r) : quant::rewrite_static(m, ctx, o, ranges, r);
  }
  // Recurrent layers: int8 weights, activations quantized at run time (quant/recurrent.cpp).
  r.quantized += quant::rewrite_recurrent(m, ctx, o, r);
  // The float weights no node reads any more.
  OptimizeOptions clean;
  clean.passes = {"eliminate_dead"};
  optimize(m, clean);
  r.initializer_bytes_after = m.graph.parameter_bytes();
  return r;
}

}  // namespace t2o
