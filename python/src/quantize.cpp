// torch2onnx.quantize: the quantizer (src/quant) on .onnx files, with the accuracy report the
// `torch2onnx quantize` command prints, as a dict.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "module.h"
#include "onnx/check.h"
#include "onnx/model_io.h"
#include "passes/graph_util.h"
#include "quant/quant.h"

namespace t2o::pyext {

namespace pyb = pybind11;

namespace {

struct QuantizeCall {
  std::string mode = "dynamic", method = "minmax", format = "qdq";
  double percentile = 99.99;
  bool per_channel = false, fp16_io = false;
  std::vector<std::string> exclude, calibrate, eval;
  std::map<std::string, std::vector<int64_t>> input_sizes;
  int samples = 8, eval_samples = 8, runs = 5, threads = 0;
};

pyb::dict accuracy_dict(const AccuracyReport& acc) {
  pyb::list outs;
  for (const OutputAccuracy& o : acc.outputs) {
    pyb::dict d;
    d["name"] = o.name;
    d["max_abs"] = o.max_abs;
    d["cosine"] = o.cosine;
    if (o.top1) d["top1_agreement"] = *o.top1, d["top1_rows"] = o.rows, d["float_classes"] = o.classes;
    outs.append(d);
  }
  pyb::dict a;
  a["samples"] = acc.samples;
  a["outputs"] = outs;
  a["drop"] = acc.drop();
  return a;
}

}  // namespace

void init_quantize(pyb::module_& m) {
  m.attr("has_quantizer") = true;
  m.def("quantize_file", [](const std::string& in, const std::string& out, const QuantizeCall& c,
                            const pyb::object& warn) {
    QuantizeOptions o;
    if (c.mode != "dynamic" && c.mode != "static" && c.mode != "fp16")
      throw Error("mode must be 'dynamic', 'static' or 'fp16', got '" + c.mode + "'", "", kExitUsage);
    if (c.method != "minmax" && c.method != "percentile" && c.method != "entropy")
      throw Error("method must be 'minmax', 'percentile' or 'entropy', got '" + c.method + "'", "", kExitUsage);
    if (c.format != "qdq" && c.format != "qoperator")
      throw Error("format must be 'qdq' or 'qoperator', got '" + c.format + "'", "", kExitUsage);
    if (c.format == "qoperator" && c.mode != "static") throw Error("format='qoperator' is for mode='static'", "", kExitUsage);
    if (!c.calibrate.empty() && c.mode != "static") throw Error("calibrate is for mode='static'", "", kExitUsage);
    o.mode = c.mode == "static" ? QuantMode::Static : c.mode == "fp16" ? QuantMode::Float16 : QuantMode::Dynamic;
    o.method = c.method == "percentile" ? CalibMethod::Percentile
               : c.method == "entropy"  ? CalibMethod::Entropy
                                        : CalibMethod::MinMax;
    o.format = c.format == "qoperator" ? QuantFormat::QOperator : QuantFormat::QDQ;
    o.percentile = c.percentile;
    o.per_channel = c.per_channel;
    o.keep_io_float32 = !c.fp16_io;
    o.exclude = c.exclude;
    o.generated_samples = c.samples;
    o.threads = c.threads;
    for (const auto& [name, dims] : c.input_sizes) o.input_sizes[name] = Dims(dims.begin(), dims.end());
    std::vector<std::string> warnings;
    o.warn = [&](const std::string& w) { warnings.push_back(w); };
    QuantizeResult r;
    AccuracyReport acc;
    {
      pyb::gil_scoped_release unlocked;
      Model input = load_model(in);
      if (!c.calibrate.empty()) o.calibration = load_input_sets(input, c.calibrate);
      std::vector<InputSet> eval = c.eval.empty() ? std::vector<InputSet>{} : load_input_sets(input, c.eval);
      Model q = passes::deep_copy(input);
      r = quantize(q, o);
      check_model(q);
      if (eval.empty()) eval = generate_input_sets(input, c.eval_samples, o.seed + 1000, c.threads, o.input_sizes);
      acc = compare_accuracy(input, q, eval, c.runs, c.threads);
      save_model(q, out);
    }
    if (!warn.is_none())
      for (const std::string& w : warnings) warn(w);
    pyb::dict d;
    d["mode"] = c.mode;
    d["quantized_nodes"] = r.quantized;
    d["quantized_by_op"] = r.by_op;
    d["skipped"] = r.skipped;
    d["calibration"] = pyb::dict(pyb::arg("samples") = r.calibration_samples, pyb::arg("generated") = r.generated_calibration);
    d["initializer_bytes"] = pyb::dict(pyb::arg("before") = r.initializer_bytes_before,
                                       pyb::arg("after") = r.initializer_bytes_after);
    d["accuracy"] = accuracy_dict(acc);
    d["latency_ms"] = pyb::dict(pyb::arg("float") = acc.float_ms, pyb::arg("quantized") = acc.quant_ms,
                                pyb::arg("runs") = acc.runs);
    d["warnings"] = warnings;
    return d;
  }, pyb::arg("input"), pyb::arg("output"), pyb::arg("options"), pyb::arg("warn") = pyb::none());

  pyb::class_<QuantizeCall>(m, "QuantizeOptions")
      .def(pyb::init<>())
      .def_readwrite("mode", &QuantizeCall::mode)
      .def_readwrite("method", &QuantizeCall::method)
      .def_readwrite("format", &QuantizeCall::format)
      .def_readwrite("percentile", &QuantizeCall::percentile)
      .def_readwrite("per_channel", &QuantizeCall::per_channel)
      .def_readwrite("fp16_io", &QuantizeCall::fp16_io)
      .def_readwrite("exclude", &QuantizeCall::exclude)
      .def_readwrite("calibrate", &QuantizeCall::calibrate)
      .def_readwrite("eval", &QuantizeCall::eval)
      .def_readwrite("input_sizes", &QuantizeCall::input_sizes)
      .def_readwrite("samples", &QuantizeCall::samples)
      .def_readwrite("eval_samples", &QuantizeCall::eval_samples)
      .def_readwrite("runs", &QuantizeCall::runs)
      .def_readwrite("threads", &QuantizeCall::threads);
}

}  // namespace t2o::pyext
