// torch2onnx quantize: float ONNX in, int8 standard ONNX out, with an accuracy report (quant/quant.h).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/ort_latency.h"
#include "cli/quant_report.h"
#include "cli/specs.h"
#include "onnx/check.h"
#include "onnx/model_io.h"
#include "passes/graph_util.h"
#include "quant/quant.h"

namespace fs = std::filesystem;

namespace t2o::cli {

namespace {

struct QuantizeArgs {
  std::string input, output, mode, method = "minmax", format = "qdq", exclude, report;
  std::vector<std::string> calibrate, eval, inputs;
  double percentile = 99.99;
  bool per_channel = false, quiet = false, fp16_io = false, ort = false;
  std::optional<double> max_drop;
  int samples = 8, eval_samples = 8, runs = 5, threads = 0;
};

std::string mib(int64_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

// The checker judges the output; when it fails, the input decides whose fault it is.
void check_output(const Model& quantized, const Model& input) {
  try {
    check_model(quantized);
  } catch (const InputError& e) {
    try {
      check_model(input);
    } catch (const InputError& in) {
      throw InputError(std::string("the input model fails the ONNX checker: ") + in.what(), "fix the input model first");
    }
    throw Error(std::string("the quantized model fails the ONNX checker: ") + e.what(),
                "exclude the node named above with --exclude and report the model");
  }
}

nlohmann::json report_json(const QuantizeArgs& a, const QuantizeResult& q, const AccuracyReport& acc,
                           const std::vector<InputSet>& eval, bool eval_generated, int64_t size_before, int64_t size_after,
                           const std::optional<OrtLatency>& ort) {
  nlohmann::json j;
  j["input"] = a.input;
  j["output"] = a.output;
  j["mode"] = a.mode;
  if (a.mode == "static") j["format"] = a.format, j["method"] = a.method;
  j["per_channel"] = a.per_channel;
  j["quantized_nodes"] = q.quantized;
  j["quantized_by_op"] = q.by_op;
  j["skipped"] = q.skipped;
  if (a.mode == "static") j["calibration"] = {{"samples", q.calibration_samples}, {"generated", q.generated_calibration}};
  nlohmann::json outs = nlohmann::json::array();
  for (const OutputAccuracy& o : acc.outputs) {
    nlohmann::json x{{"name", o.name}, {"max_abs", o.max_abs}, {"cosine", o.cosine}};
    if (o.top1) x["top1_agreement"] = *o.top1, x["top1_rows"] = o.rows, x["float_classes"] = o.classes;
    outs.push_back(x);
  }
  j["accuracy"] = {{"samples", acc.samples}, {"sizes", set_sizes(eval)}, {"generated", eval_generated},
                   {"outputs", outs},         {"drop", acc.drop()}};
  j["file_bytes"] = {{"before", size_before}, {"after", size_after}};
  j["initializer_bytes"] = {{"before", q.initializer_bytes_before}, {"after", q.initializer_bytes_after}};
  j["latency_ms"] = {{"float", acc.float_ms}, {"quantized", acc.quant_ms}, {"runs", acc.runs}, {"statistic", "median"}};
  if (ort && ort->error.empty())
    j["latency_ms"]["onnxruntime"] = {{"float", ort->median_ms[0]}, {"quantized", ort->median_ms[1]}, {"version", ort->version}};
  else if (ort)
    j["latency_ms"]["onnxruntime"] = {{"error", ort->error}};
  if (a.max_drop) j["max_drop"] = *a.max_drop, j["passed"] = acc.drop() <= *a.max_drop;
  return j;
}

void print_report(const QuantizeArgs& a, const QuantizeResult& q, const AccuracyReport& acc,
                  const std::vector<InputSet>& eval, bool eval_generated, int64_t size_before, int64_t size_after,
                  const std::optional<OrtLatency>& ort) {
  std::string ops;
  for (const auto& [op, n] : q.by_op) ops += fmt::format("{}{} {}", ops.empty() ? "" : ", ", n, op);
  std::printf("wrote %s (%s, %d nodes quantized%s%s)\n", a.output.c_str(), a.mode.c_str(), q.quantized,
              ops.empty() ? "" : ": ", ops.c_str());
  for (const std::string& s : q.skipped) std::printf("  left in float: %s\n", s.c_str());
  std::printf("size      %s -> %s (%.2fx smaller)\n", mib(size_before).c_str(), mib(size_after).c_str(),
              size_after > 0 ? static_cast<double>(size_before) / static_cast<double>(size_after) : 0.0);
  if (acc.runs > 0)
    std::printf("latency   %.3f ms -> %.3f ms (median of %d runs, torch2onnx runtime)\n", acc.float_ms, acc.quant_ms, acc.runs);
  if (ort && ort->error.empty())
    std::printf("          %.3f ms -> %.3f ms (median of %d runs, ONNX Runtime %s, same files and first input set)\n",
                ort->median_ms[0], ort->median_ms[1], acc.runs, ort->version.c_str());
  print_quant_accuracy(acc, eval, eval_generated);
}

int quantize_cmd(const QuantizeArgs& a) {
  if (fs::absolute(a.output) == fs::absolute(a.input))
    throw Error("the output would overwrite the input model", "choose another name with -o", kExitUsage);
  if (a.format == "qoperator" && a.mode != "static")
    throw Error("--format qoperator is for --mode static", "dynamic quantization writes MatMulInteger; drop --format", kExitUsage);
  if (a.fp16_io && a.mode != "fp16")
    throw Error("--fp16-io is for --mode fp16", "drop --fp16-io", kExitUsage);
  if (a.mode != "static" && !a.calibrate.empty())
    throw Error("--calibrate is for --mode static", a.mode == "fp16" ? "fp16 needs no calibration" :
                "dynamic quantization computes activation ranges at run time", kExitUsage);
  QuantizeOptions o;
  o.mode = a.mode == "static" ? QuantMode::Static : a.mode == "fp16" ? QuantMode::Float16 : QuantMode::Dynamic;
  o.method = a.method == "percentile" ? CalibMethod::Percentile
             : a.method == "entropy"  ? CalibMethod::Entropy
                                      : CalibMethod::MinMax;
  o.format = a.format == "qoperator" ? QuantFormat::QOperator : QuantFormat::QDQ;
  o.keep_io_float32 = !a.fp16_io;
  o.percentile = a.percentile;
  o.per_channel = a.per_channel;
  o.exclude = split_list(a.exclude);
  o.generated_samples = a.samples;
  o.threads = a.threads;
  for (const std::string& spec : a.inputs) {
    InputArg in = parse_input_spec(spec);
    o.input_sizes[in.name] = in.dims;
  }
  o.warn = [](const std::string& w) { print_warning(w); };
  if (!a.quiet) o.progress = status_line();
  Model input = load_model(a.input);
  for (const auto& [name, dims] : o.input_sizes)
    if (!input.graph.find_input(name) || input.graph.find_initializer(name))
      throw Error("--input names '" + name + "', which is not an input of the model", "see 'torch2onnx inspect MODEL'",
                  kExitUsage);
  if (!a.calibrate.empty()) o.calibration = load_input_sets(input, a.calibrate);
  std::vector<InputSet> eval;
  bool eval_generated = a.eval.empty();
  if (!eval_generated) eval = load_input_sets(input, a.eval);
  // The float model must stay as loaded: passes may edit subgraphs, which plain copies share.
  Model m = passes::deep_copy(input);
  QuantizeResult q = quantize(m, o);
  if (q.quantized == 0)
    print_warning(o.mode == QuantMode::Float16 ? "no node was converted: the model has no float32 op that runs in float16"
                                               : "no node was quantized: the model has no Conv/MatMul/Gemm/LSTM/GRU/RNN this mode handles");
  check_output(m, input);
  // Held out from calibration: another seed than the generated calibration sets.
  if (eval_generated) eval = generate_input_sets(input, a.eval_samples, o.seed + 1000, a.threads, o.input_sizes);
  AccuracyReport acc = compare_accuracy(input, m, eval, a.runs, a.threads);
  save_model(m, a.output);
  std::optional<OrtLatency> ort;
  if (a.ort && a.runs > 0 && !eval.empty()) {
    ort = ort_latency({a.input, a.output}, eval[0], a.runs, a.threads);
    if (!ort->error.empty()) print_warning("--ort: no ONNX Runtime latency: " + ort->error);
  }
  int64_t before = static_cast<int64_t>(fs::file_size(a.input)), after = static_cast<int64_t>(fs::file_size(a.output));
  if (!a.report.empty()) {
    std::string text = report_json(a, q, acc, eval, eval_generated, before, after, ort).dump(2) + "\n";
    if (a.report == "-") std::fputs(text.c_str(), stdout);
    else write_file_atomic(a.report, text);
  }
  if (!a.quiet && a.report != "-") print_report(a, q, acc, eval, eval_generated, before, after, ort);
  if (a.max_drop && acc.drop() > *a.max_drop) {
    print_error(fmt::format("accuracy drop {:.4g} exceeds --max-drop {:.4g} (written anyway: {})", acc.drop(), *a.max_drop,
                            a.output),
                "exclude sensitive nodes with --exclude, try --per-channel, or calibrate on more representative data");
    return kExitMismatch;
  }
  return 0;
}

}  // namespace

std::string set_sizes(const std::vector<InputSet>& sets) {
  std::string r;
  if (sets.empty()) return r;
  for (const auto& [name, t] : sets[0]) r += (r.empty() ? "" : ", ") + name + " " + dims_to_string(t.dims());
  return r;
}

void print_quant_accuracy(const AccuracyReport& acc, const std::vector<InputSet>& eval, bool generated) {
  std::printf("accuracy  on %d %s input sets (%s), against the float model:\n", acc.samples,
              generated ? "generated" : "given", set_sizes(eval).c_str());
  for (const OutputAccuracy& o : acc.outputs) {
    std::string top1 = o.top1 ? fmt::format("  top-1 agreement {:.2f}% ({} rows, {} distinct float classes)",
                                            100.0 * *o.top1, o.rows, o.classes)
                              : "";
    std::printf("  %-20s max abs diff %.4g  cosine %.6f%s\n", o.name.c_str(), o.max_abs, o.cosine, top1.c_str());
  }
}

Runner add_quantize(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  auto* cmd = app.add_subcommand("quantize", "Quantize an ONNX model to int8 or float16 (standard ONNX) and report the accuracy.");
  cmd->footer(
      "dynamic: constant float32 weights of MatMul/Gemm and 2-d Conv become int8 (symmetric; per output\n"
      "  column or channel with --per-channel); activations are quantized at run time: DynamicQuantizeLinear\n"
      "  -> MatMulInteger / ConvInteger -> Cast -> Mul by both scales (-> Add bias). Needs opset 11.\n"
      "  --exclude Conv keeps the convolutions float.\n"
      "LSTM/GRU/RNN (dynamic and static): W and R become int8 behind a DequantizeLinear (per row of the\n"
      "  gates with --per-channel at opset 13) and the layer is named in the model's metadata\n"
      "  (ai.torch2onnx.int8_recurrent): runtimes that can quantize its activations at run time do so (the\n"
      "  torch2onnx runtime on CPUs with AVX-512 VNNI); others run it in float on the dequantized weights.\n"
      "static: the float model runs on the calibration sets and records the range of every float input of\n"
      "  Conv/MatMul/Gemm (minmax, or the --percentile share of values); those inputs get QuantizeLinear ->\n"
      "  DequantizeLinear (uint8, asymmetric) and constant weights are stored as int8 behind a\n"
      "  DequantizeLinear (symmetric; per output channel with --per-channel, which needs opset 13).\n"
      "  Biases stay float. Without --calibrate it calibrates on generated random inputs and warns.\n"
      "  --method entropy picks, per tensor, the clipping range whose quantized histogram loses least\n"
      "  information (KL divergence); it helps where a few outliers stretch a range.\n"
      "  --format qoperator writes QLinearConv / QLinearMatMul (int32 conv bias; Gemm becomes MatMul + Add)\n"
      "  with uint8 activations passed between quantized ops; a Relu after one is absorbed.\n"
      "fp16: Conv/MatMul/Gemm and the elementwise, pooling and data-movement ops around them run in float16;\n"
      "  Softmax, normalizations, reductions and Resize stay float32, with Casts only where the two meet.\n"
      "  Weights beyond float16's range are clamped to +-65504 (with a warning). Inputs and outputs stay\n"
      "  float32 unless --fp16-io.\n"
      "Input sets (--calibrate, --eval): a .npy/.pb file for a single-input model (one set, or a stack of\n"
      "  sets along a new first axis), a folder of such files, a folder with NAME.npy (or input_K.pb) per\n"
      "  input, or a folder of such folders.\n"
      "The report compares both models on the torch2onnx runtime on the --eval sets (default: generated\n"
      "sets, not the calibration ones): per output max |diff| and cosine similarity, top-1 agreement for\n"
      "outputs shaped [rows, classes]; file sizes; median latency (with --ort also in ONNX Runtime). --max-drop D exits 1 when the top-1\n"
      "agreement falls by more than D (classifier outputs) or 1 - cosine exceeds D (others); the model is\n"
      "written either way. The output passes the ONNX checker and is written atomically.\n"
      "Examples:\n"
      "  torch2onnx quantize bert.onnx -o bert.int8.onnx --mode dynamic --per-channel\n"
      "  torch2onnx quantize resnet.onnx -o resnet.int8.onnx --mode static --calibrate calib/ --eval held_out/ \\\n"
      "      --per-channel --report quant.json --max-drop 0.01");
  cmd->add_option("IN", a->input, "the float .onnx model")->required();
  cmd->add_option("-o,--output", a->output, "the .onnx file to write")->required();
  cmd->add_option("--mode", a->mode, "dynamic, static (int8) or fp16")->required()->check(CLI::IsMember({"dynamic", "static", "fp16"}));
  cmd->add_option("--calibrate", a->calibrate, "static: calibration input sets (.npy/.pb files or folders)");
  cmd->add_option("--method", a->method, "static: minmax (default), percentile or entropy (the range that loses least information)")
      ->check(CLI::IsMember({"minmax", "percentile", "entropy"}));
  cmd->add_option("--percentile", a->percentile, "percentile: share of values the range keeps (default 99.99)")
      ->check(CLI::Range(50.0, 100.0));
  cmd->add_flag("--per-channel", a->per_channel, "one weight scale per output channel (Conv) or column (MatMul/Gemm)");
  cmd->add_option("--format", a->format, "static: qdq (QuantizeLinear/DequantizeLinear pairs, default) or qoperator (QLinearConv, QLinearMatMul)")
      ->check(CLI::IsMember({"qdq", "qoperator"}));
  cmd->add_option("--exclude", a->exclude, "comma-separated node names or op types to leave in float");
  cmd->add_option("--samples", a->samples, "static without --calibrate: generated calibration sets (default 8)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--input", a->inputs, "NAME:DIMS: sizes of generated input sets (dynamic dims default to small sizes)");
  cmd->add_option("--eval", a->eval, "held-out input sets for the accuracy report (default: generated)");
  cmd->add_option("--eval-samples", a->eval_samples, "generated evaluation sets when --eval is not given (default 8)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--runs", a->runs, "timed runs per model for the latency median (default 5, 0: no timing)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--threads", a->threads, "runtime threads (default: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--report", a->report, "write the report as JSON to this file, or '-' for stdout");
  cmd->add_option("--max-drop", a->max_drop, "exit 1 when the accuracy drop exceeds this (e.g. 0.01)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--fp16-io", a->fp16_io, "fp16: the graph's float32 inputs and outputs become float16 too (default: they stay float32)");
  cmd->add_flag("--ort", a->ort, "also time both files in ONNX Runtime (needs node and onnxruntime-node, as scripts/setup.sh installs)");
  cmd->add_flag("--quiet", a->quiet, "print nothing on success (warnings still go to stderr)");
  return [a] { return quantize_cmd(*a); };
}

}  // namespace t2o::cli
