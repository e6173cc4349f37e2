#ifdef T2O_WITH_TORCH
#include <fmt/format.h>

#include <filesystem>

#include "cli/cmd_verify.h"
#include "cli/commands.h"
#include "cli/specs.h"
#include "onnx/check.h"
#include "onnx/model_io.h"
#include "torch/convert.h"

namespace fs = std::filesystem;

namespace t2o::cli {

namespace {

struct ConvertArgs {
  std::string model;
  std::string output;
  int opset = 17;
  std::vector<std::string> inputs;
  std::vector<std::string> dynamic;
  std::string output_names;
  bool quiet = false;
  bool verify = false;
  std::string weights;
  std::vector<std::string> custom_ops;
  std::vector<std::string> plugins;
};

int convert(const ConvertArgs& a) {
  ConvertOptions o;
  o.opset = a.opset;
  for (const auto& s : a.inputs) {
    InputArg in = parse_input_spec(s);
    o.inputs.push_back({in.name, in.dims, in.dtype});
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
  o.weights = a.weights;
  o.custom_ops = a.custom_ops;
  o.plugins = a.plugins;
  std::string out = a.output.empty() ? fs::path(a.model).replace_extension(".onnx").string() : a.output;
  if (fs::absolute(out) == fs::absolute(a.model))
    throw Error("the output would overwrite the input model", "choose another name with -o", kExitUsage);
  ConvertResult r = convert_torchscript(a.model, o);
  // A model that fails the checker is never written.
  try {
    check_model(r.model);
  } catch (const Error& e) {
    throw Error(std::string("the converted model does not pass the ONNX checker: ") + e.what(),
                "this is a torch2onnx bug; please report it with the model", kExitUnsupported);
  }
  save_model(r.model, out);
  if (!a.quiet) {
    int64_t nodes = static_cast<int64_t>(r.model.graph.nodes.size());
    std::printf("wrote %s (opset %d, %lld nodes, %lld parameters)\n", out.c_str(), a.opset,
                static_cast<long long>(nodes), static_cast<long long>(r.model.graph.parameter_count()));
  }
  if (a.verify) {
    VerifyOptions v;
    v.inputs = o.inputs;
    v.links = r.links;  // this conversion's value links: no need to convert again for --locate
    v.warn = [](const std::string&) {};  // the conversion above already printed the model's warnings
    int rc = run_verification(a.model, out, v, {});
    if (rc != 0) print_error("the converted model does not match PyTorch (" + out + " was still written)");
    return rc;
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
      "hidden.0, hidden.1. Shapes come from running the model on example inputs of the --input sizes\n"
      "(inputs the model rejects give PyTorch's error and your source line, exit 2). --dynamic axes\n"
      "stay symbolic: a second run with those axes one larger (or doubled, for models that need even\n"
      "sizes) shows which dims follow them. The output passes the ONNX checker and is written\n"
      "atomically: on failure nothing is written.\n"
      "Examples:\n"
      "  torch2onnx convert resnet.pt -o resnet.onnx --input image:1x3x224x224 --dynamic image:0=batch\n"
      "  torch2onnx convert lm.pt -o lm.onnx --input tokens:1x16:i64 --dynamic tokens:0=batch,1=seq --opset 13");
  cmd->add_option("MODEL", a->model, "TorchScript file (torch.jit.script or torch.jit.trace, then .save)")->required();
  cmd->add_option("-o,--output", a->output, "the .onnx file to write (default: MODEL with .onnx)");
  cmd->add_option("--opset", a->opset, "ONNX opset to target, 9 to 17 (default 17)")->check(CLI::Range(9, 17));
  cmd->add_option("--input", a->inputs, "NAME:DIMS[:DTYPE] example input, e.g. image:1x3x224x224 (dtype f32 f64 f16 i64 i32 i8 u8 bool)");
  cmd->add_option("--dynamic", a->dynamic, "NAME:AXIS=LABEL[,AXIS=LABEL] axes that stay symbolic, e.g. image:0=batch");
  cmd->add_option("--output-names", a->output_names, "comma-separated names for the outputs");
  cmd->add_flag("--quiet", a->quiet, "print nothing on success");
  cmd->add_option("--weights", a->weights,
                  "a torch.save(model.state_dict()) file to load into MODEL first (strict: missing, unexpected "
                  "and mis-shaped keys are errors)");
  cmd->add_option("--custom-op", a->custom_ops,
                  "'SCHEMA=DOMAIN::OP': declare a custom torch op (so MODEL loads without its library) and emit "
                  "it as the ONNX node DOMAIN::OP, e.g. 'mylib::cbr(Tensor x, Tensor w) -> Tensor=mylib::Cbr'");
  cmd->add_option("--plugin", a->plugins,
                  "runtime plugin (.so) whose kernels run custom ops while shapes are learned (see docs/pitfalls.md)");
  cmd->add_flag("--verify", a->verify, "compare the ONNX model with PyTorch right after converting (exit 1 on mismatch)");
  return [a] { return convert(*a); };
}

}  // namespace t2o::cli
#endif
