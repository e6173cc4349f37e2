#ifdef T2O_WITH_TORCH
#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "cli/cmd_verify.h"
#include "cli/commands.h"
#include "cli/quant_report.h"
#include "cli/report_content.h"
#include "cli/specs.h"
#include "cli/triton.h"
#include "onnx/check.h"
#include "onnx/model_io.h"
#include "onnx/tensor_io.h"
#include "passes/graph_util.h"
#include "passes/passes.h"
#include "quant/quant.h"
#include "torch/convert.h"
#include "torch/inspect_torch.h"

namespace fs = std::filesystem;

namespace t2o::cli {

namespace {

struct ConvertArgs {
  std::string model;
  std::string output;
  int opset = 17;
  std::vector<std::string> inputs;
  std::vector<std::string> dynamic;
  std::vector<std::string> data;
  std::string output_names;
  bool quiet = false;
  bool verify = false;
  bool no_optimize = false;
  bool training = false;
  std::string weights;
  std::vector<std::string> custom_ops;
  std::vector<std::string> plugins;
  std::string triton_repo;
  std::string report;
  int max_batch = -1;
  std::string quantize;
  std::vector<std::string> calibrate;
  bool per_channel = false;
  std::optional<double> max_drop;
};

// What a reader of the report should know about the conversion beyond the converter's warnings:
// which dims stayed symbolic and which nodes are custom ops.
void add_conversion_notes(HtmlReport& page, const std::string& pt, const ConvertResult& r, const ConvertOptions& o) {
  for (const std::string& w : r.warnings) page.add_note("warning", w);
  for (const std::string& n : r.notes) page.add_note("repair", n);
  std::string sn;
  for (const std::string& l : inspect_torch_file(pt).spectral_norm_layers) sn += (sn.empty() ? "" : ", ") + l;
  if (!sn.empty())
    page.add_note("repair", "spectral norm: layers " + sn + " carry spectral-norm parametrizations (weight_orig, "
                            "weight_u, weight_v); the conversion folds each into one plain weight, the one eval() uses");
  for (const DynamicSpec& d : o.dynamic)
    for (const auto& [axis, label] : d.axes)
      page.add_note("note", "dynamic axis: input " + d.input + " dim " + std::to_string(axis) + " is the symbolic dim '" +
                                label + "' (--dynamic)");
  add_model_notes(page, r.model);
}

// convert --quantize: the shortcut for convert then quantize, with the quantize command's accuracy
// report on generated inputs (its latency and --eval need 'torch2onnx quantize' on the float
// model). Returns the accuracy drop (AccuracyReport::drop), or nothing when no node was
// quantized or the model could not be evaluated on generated inputs (a warning says why; an
// error with --max-drop).
std::optional<double> quantize_converted(Model& m, const ConvertArgs& a, const ConvertOptions& o, HtmlReport* page) {
  QuantizeOptions q;
  q.mode = a.quantize == "static" ? QuantMode::Static : QuantMode::Dynamic;
  q.per_channel = a.per_channel;
  q.warn = o.warn;
  q.progress = o.progress;
  for (const auto& in : o.inputs) q.input_sizes[in.name] = in.dims;
  for (const auto& [name, t] : o.data) q.input_sizes[name] = t.dims();
  if (!a.calibrate.empty()) q.calibration = load_input_sets(m, a.calibrate);
  int64_t t0 = now_ns();
  const Model float_model = passes::deep_copy(m);  // passes may edit subgraphs, which plain copies share
  QuantizeResult r = quantize(m, q);
  if (page) {
    page->add_stage(std::string("quantize (") + (q.mode == QuantMode::Static ? "calibrate, " : "") + "rewrite)", ms_since(t0));
    add_quantize_content(*page, r, m);
  }
  if (r.quantized == 0) print_warning("--quantize: no node was quantized (no Conv/MatMul/Gemm/LSTM/GRU/RNN this mode handles)");
  if (!a.quiet) {
    std::string ops;
    for (const auto& [op, n] : r.by_op) ops += fmt::format("{}{} {}", ops.empty() ? "" : ", ", n, op);
    std::printf("quantized %d nodes to int8 (%s%s%s)\n", r.quantized, a.quantize.c_str(), ops.empty() ? "" : ": ",
                ops.c_str());
  }
  if (r.quantized == 0) return std::nullopt;
  // Held out from calibration, as in 'quantize': another seed than the generated calibration sets.
  int64_t t1 = now_ns();
  std::vector<InputSet> eval;
  AccuracyReport acc;
  try {
    eval = generate_input_sets(float_model, 8, q.seed + 1000, 0, q.input_sizes);
    acc = compare_accuracy(float_model, m, eval, 0);
  } catch (const Error& e) {
    if (a.max_drop)
      throw Error(std::string("--max-drop: the quantized model could not be evaluated on generated inputs: ") + e.what(),
                  "run 'torch2onnx quantize' on the float model with --eval and real inputs", e.exit_code());
    print_warning(std::string("--quantize: no accuracy report (the model did not run on generated inputs: ") + e.what() +
                  "); 'torch2onnx quantize --eval' takes real inputs");
    return std::nullopt;
  }
  if (!a.quiet) print_quant_accuracy(acc, eval, true);
  if (page) {
    page->add_stage("quantize: accuracy against the float model", ms_since(t1));
    for (const OutputAccuracy& out : acc.outputs)
      page->add_note("accuracy", fmt::format("output {}: max abs difference {:.4g}, cosine {:.6f}{} against the float "
                                             "model on {} generated input sets", out.name, out.max_abs, out.cosine,
                                             out.top1 ? fmt::format(", top-1 agreement {:.2f}%", 100.0 * *out.top1) : "",
                                             acc.samples));
  }
  return acc.drop();
}

int convert(const ConvertArgs& a) {
  ConvertOptions o;
  o.opset = a.opset;
  for (const auto& s : a.inputs) {
    InputArg in = parse_input_spec(s);
    o.inputs.push_back({in.name, in.dims, in.dtype});
  }
  for (const auto& s : a.data) {
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
      throw Error("--data '" + s + "' is not NAME=FILE", "e.g. --data tokens=tokens.npy", kExitUsage);
    o.data[s.substr(0, eq)] = read_tensor_file(s.substr(eq + 1));
  }
  for (const auto& s : a.dynamic) {
    DynamicArg d = parse_dynamic_spec(s);
    DynamicSpec ds;
    ds.input = d.input;
    for (auto& [axis, label] : d.axes) ds.axes[axis] = label;
    o.dynamic.push_back(ds);
  }
  if (!a.output_names.empty()) o.output_names = split(a.output_names, ',');
  o.warn = [](const std::string& w) { print_warning(w); };
  if (!a.quiet) o.progress = status_line();
  o.weights = a.weights;
  o.custom_ops = a.custom_ops;
  o.plugins = a.plugins;
  o.training = a.training;
  if (a.training && a.verify)
    throw Error("--verify compares with PyTorch in eval mode; a training-mode export is random",
                "leave --verify out, or convert without --training", kExitUsage);
  std::string out = a.output.empty() ? fs::path(a.model).replace_extension(".onnx").string() : a.output;
  if (fs::absolute(out) == fs::absolute(a.model))
    throw Error("the output would overwrite the input model", "choose another name with -o", kExitUsage);
  if (!a.quantize.empty() && a.verify)
    throw Error("--verify compares with PyTorch at float tolerances, which an int8 model does not meet",
                "convert --verify first, then run 'torch2onnx quantize' (it reports the accuracy against the float model)",
                kExitUsage);
  if (a.quantize.empty() && (!a.calibrate.empty() || a.per_channel || a.max_drop))
    throw Error("--calibrate, --per-channel and --max-drop go with --quantize", "add --quantize static (or dynamic)",
                kExitUsage);
  std::optional<HtmlReport> page;
  if (!a.report.empty()) page.emplace("torch2onnx convert " + a.model);
  auto warned = std::make_shared<std::vector<std::string>>();
  if (page)
    o.warn = [warned](const std::string& w) {
      print_warning(w);
      warned->push_back(w);
    };
  int64_t t0 = now_ns();
  ConvertResult r;
  try {
    r = convert_torchscript(a.model, o);
  } catch (const Error& e) {
    // A failed conversion's page says why, after the warnings that came before the failure.
    if (page) {
      page->add_fact("result", "conversion failed: nothing was written");
      for (const std::string& w : *warned) page->add_note("warning", w);
      page->add_note("error", std::string(e.what()) + (e.hint().empty() ? "" : " (hint: " + e.hint() + ")"));
      page->add_stage("convert (until the error)", ms_since(t0));
      write_report(*page, a.report, a.quiet);
    }
    throw;
  }
  if (page) page->add_stage("convert (load, learn shapes, convert)", ms_since(t0));
  if (!a.no_optimize && !a.training) {  // a training-mode export is random: nothing to prove passes on
    std::map<std::string, Dims> sizes;
    for (const auto& in : o.inputs) sizes[in.name] = in.dims;
    OptimizeReport opt = optimize_converted(r.model, sizes, o.data, o.warn, o.progress);
    if (page) add_optimize_content(*page, opt);
    for (const RemovedInput& gone : remove_unused_inputs(r.model, r.keep_inputs)) {
      std::string note = unused_input_note(gone.info.name);
      if (!a.quiet) std::fprintf(stderr, "note: %s\n", note.c_str());
      r.notes.push_back(note);
    }
  }
  std::optional<double> drop;
  if (!a.quantize.empty()) drop = quantize_converted(r.model, a, o, page ? &*page : nullptr);
  if (page) {
    page->add_fact("output", out);
    add_conversion_notes(*page, a.model, r, o);
    page->set_model(r.model);
  }
  int64_t t_save = now_ns();
  // A model that fails the checker is never written.
  try {
    check_model(r.model);
  } catch (const Error& e) {
    throw Error(std::string("the converted model does not pass the ONNX checker: ") + e.what(),
                "this is a torch2onnx bug; please report it with the model", kExitUnsupported);
  }
  save_model(r.model, out);
  if (page) page->add_stage("check and save", ms_since(t_save));
  if (!a.quiet) {
    int64_t nodes = static_cast<int64_t>(r.model.graph.nodes.size());
    std::printf("wrote %s (opset %d, %lld nodes, %lld parameters)\n", out.c_str(), a.opset,
                static_cast<long long>(nodes), static_cast<long long>(r.model.graph.parameter_count()));
  }
  if (!a.triton_repo.empty()) write_triton_bundle(r.model, a.triton_repo, out, a.max_batch, a.quiet);
  if (a.verify) {
    VerifyOptions v;
    v.inputs = o.inputs;
    for (const auto& s : a.data) {
      auto eq = s.find('=');
      v.data[s.substr(0, eq)] = s.substr(eq + 1);
    }
    v.links = r.links;  // this conversion's value links: no need to convert again for --locate
    v.warn = [](const std::string&) {};  // the conversion above already printed the model's warnings
    int rc = run_verification(a.model, out, v, {}, page ? &*page : nullptr);
    if (page) write_report(*page, a.report, a.quiet);
    if (rc != 0) print_error("the converted model does not match PyTorch (" + out + " was still written)");
    return rc;
  }
  if (page) write_report(*page, a.report, a.quiet);
  if (a.max_drop && drop && *drop > *a.max_drop) {
    print_error(fmt::format("accuracy drop {:.4g} exceeds --max-drop {:.4g} (written anyway: {})", *drop, *a.max_drop, out),
                "run 'torch2onnx quantize' on the float model to exclude sensitive nodes (--exclude) or calibrate on "
                "real data");
    return kExitMismatch;
  }
  return 0;
}

}  // namespace

Runner add_convert(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  auto* cmd = app.add_subcommand("convert", "Convert a TorchScript model (.pt) to ONNX.");
  cmd->footer(
      "The model is loaded on the CPU (device constants of GPU-saved models become CPU), switched to\n"
      "eval mode (submodules saved in train() mode are named in a warning), frozen and converted.\n"
      "Input names default to forward()'s argument names; a tuple argument `hidden` becomes inputs\n"
      "hidden.0, hidden.1. Shapes come from running the model on example inputs: random values of the\n"
      "--input sizes, or the real values that --data gives (inputs the model rejects give PyTorch's\n"
      "error and your source line, exit 2). --dynamic axes stay symbolic: a second run with those axes\n"
      "one larger (or doubled, for models that need even sizes; --data values are cropped or tiled)\n"
      "shows which dims follow them. The output passes the ONNX checker and is written atomically: on\n"
      "failure nothing is written.\n"
      "Examples:\n"
      "  torch2onnx convert resnet.pt -o resnet.onnx --input image:1x3x224x224 --dynamic image:0=batch\n"
      "  torch2onnx convert lm.pt -o lm.onnx --input tokens:1x16:i64 --dynamic tokens:0=batch,1=seq --opset 13\n"
      "  torch2onnx convert asr.pt -o asr.onnx --data audio=audio.npy --data lengths=lengths.npy --dynamic audio:1=time");
  cmd->add_option("MODEL", a->model, "TorchScript file (torch.jit.script or torch.jit.trace, then .save)")->required();
  cmd->add_option("-o,--output", a->output, "the .onnx file to write (default: MODEL with .onnx)");
  cmd->add_option("--opset", a->opset, "ONNX opset to target, 9 to 17 (default 17)")->check(CLI::Range(9, 17));
  cmd->add_option("--input", a->inputs, "NAME:DIMS[:DTYPE] example input, e.g. image:1x3x224x224 (dtype f32 f64 f16 i64 i32 i8 u8 bool)");
  cmd->add_option("--data", a->data,
                  "NAME=FILE.npy (or .pb) a real example value for an input, used to learn shapes (its dims and dtype "
                  "stand in for --input); give it when the model needs valid values (lengths, indices, offsets)");
  cmd->add_option("--dynamic", a->dynamic, "NAME:AXIS=LABEL[,AXIS=LABEL] axes that stay symbolic, e.g. image:0=batch");
  cmd->add_option("--output-names", a->output_names, "comma-separated names for the flattened outputs, the first ones when fewer (default: dict keys, else output / output.K; see docs/convert.md)");
  cmd->add_flag("--quiet", a->quiet, "print nothing on success");
  cmd->add_option("--weights", a->weights,
                  "a torch.save(model.state_dict()) file to load into MODEL first (strict: missing, unexpected "
                  "and mis-shaped keys are errors)");
  cmd->add_option("--custom-op", a->custom_ops,
                  "'SCHEMA=DOMAIN::OP': declare a custom torch op (so MODEL loads without its library) and emit "
                  "it as the ONNX node DOMAIN::OP, e.g. 'mylib::cbr(Tensor x, Tensor w) -> Tensor=mylib::Cbr'");
  cmd->add_option("--plugin", a->plugins,
                  "runtime plugin (.so) whose kernels run custom ops while shapes are learned (see docs/pitfalls.md)");
  auto* triton = cmd->add_option("--triton-repo", a->triton_repo,
                                 "also write a Triton model repository entry DIR/NAME (config.pbtxt, 1/model.onnx) and a "
                                 "KServe manifest; NAME comes from the output file name (resnet_50.onnx: resnet-50)");
  cmd->add_option("--max-batch", a->max_batch,
                  "max_batch_size for --triton-repo (default 8 when axis 0 of every input and output is one "
                  "symbolic dim, else no batching; 0 turns batching off)")
      ->check(CLI::Range(0, 1 << 30))
      ->needs(triton);
  cmd->add_flag("--no-optimize", a->no_optimize,
                "write the converter's output as it is: no optimizer passes (by default the passes of 'torch2onnx "
                "optimize' run, each proven on the runtime and rolled back if it changes outputs)");
  cmd->add_flag("--verify", a->verify, "compare the ONNX model with PyTorch right after converting (exit 1 on mismatch)");
  cmd->add_flag("--training", a->training,
                "export training-mode behaviour, as torch.onnx's training=TrainingMode.TRAINING: dropout stays (ONNX "
                "Dropout in training mode, random) and batch norm uses the batch's statistics; no optimizer passes "
                "(default: inference semantics)");
  cmd->add_option("--report", a->report,
                  "also write a self-contained HTML page: the graph, warnings and what was changed and why, optimizer "
                  "passes, and with --verify every node colored by its error against PyTorch");
  cmd->add_option("--quantize", a->quantize,
                  "dynamic or static: quantize to int8 after converting, as 'torch2onnx quantize' does (see its --help; "
                  "static without --calibrate calibrates on generated inputs and warns)")
      ->check(CLI::IsMember({"dynamic", "static"}));
  cmd->add_option("--calibrate", a->calibrate, "with --quantize static: calibration input sets (.npy/.pb files or folders)");
  cmd->add_flag("--per-channel", a->per_channel, "with --quantize: one weight scale per output channel or column");
  cmd->add_option("--max-drop", a->max_drop,
                  "with --quantize: exit 1 (after writing) when the accuracy drop on generated inputs exceeds this "
                  "(top-1 agreement lost for classifiers, else 1 - cosine; e.g. 0.01)");
  return [a] { return convert(*a); };
}

}  // namespace t2o::cli
#endif
