#ifdef T2O_WITH_TORCH
#include "cli/cmd_verify.h"

#include <cstdio>

#include <dlfcn.h>

#include "cli/commands.h"
#include "cli/report_content.h"
#include "runtime/plugin.h"
#include "cli/specs.h"
#include "onnx/model_io.h"

namespace t2o::cli {

namespace {

struct VerifyArgs {
  std::string model, onnx, json, report, backend = "t2o";
  std::vector<std::string> inputs, dynamic, data;
  int samples = 1;
  double rtol = 1e-3, atol = 1e-4;
  bool locate = false;
  uint64_t seed = 0;
  std::vector<std::string> plugins, torch_libraries;
};

int verify(const VerifyArgs& a) {
  VerifyOptions o;
  for (const auto& s : a.inputs) {
    InputArg in = parse_input_spec(s);
    o.inputs.push_back({in.name, in.dims, in.dtype});
  }
  for (const auto& s : a.dynamic) {
    DynamicArg d = parse_dynamic_spec(s);
    DynamicSpec ds{d.input, {}};
    for (auto& [axis, label] : d.axes) ds.axes[axis] = label;
    o.dynamic.push_back(ds);
  }
  for (const auto& s : a.data) {
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
      throw Error("--data '" + s + "' is not NAME=FILE", "e.g. --data image=cat.npy", kExitUsage);
    o.data[s.substr(0, eq)] = s.substr(eq + 1);
  }
  o.samples = a.samples;
  o.tol = {a.rtol, a.atol};
  o.locate = a.locate;
  o.backend = a.backend;
  o.seed = a.seed;
  for (const auto& p : a.plugins) load_plugin(p);
  for (const auto& lib : a.torch_libraries) {
    // Loading registers the library's ops with the PyTorch dispatcher (as torch.ops.load_library does).
    if (!dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL))
      throw InputError("cannot load torch library '" + lib + "': " + std::string(dlerror()));
  }
  if (a.report.empty()) return run_verification(a.model, a.onnx, std::move(o), a.json);
  HtmlReport page("torch2onnx verify " + a.model + " " + a.onnx);
  int rc = 0;
  try {
    rc = run_verification(a.model, a.onnx, std::move(o), a.json, &page);
  } catch (const Error& e) {
    // Verification that cannot run still gets its page: the reason, and the model when it loads.
    page.add_fact("result", "verification did not run");
    page.add_note("error", std::string(e.what()) + (e.hint().empty() ? "" : " (hint: " + e.hint() + ")"));
    try {
      page.set_model(load_model(a.onnx));
    } catch (const Error&) {
      // An unreadable ONNX file: the error above says so.
    }
    write_report(page, a.report, false);
    throw;
  }
  write_report(page, a.report, false);
  return rc;
}

}  // namespace

int run_verification(const std::string& pt, const std::string& onnx, VerifyOptions opts, const std::string& json_path,
                     HtmlReport* page) {
  if (!opts.warn) opts.warn = [](const std::string& w) { print_warning(w); };
  if (auto status = status_line())
    opts.progress = [status](int done, int total) {
      status(done < total ? "verifying: sample " + std::to_string(done + 1) + " of " + std::to_string(total) : "");
    };
  if (page) opts.locate = opts.all_nodes = true;
  int64_t t0 = now_ns();
  VerifyReport r = verify_model(pt, onnx, opts);
  double ms = ms_since(t0);
  std::fputs(format_report(r).c_str(), stdout);
  std::fflush(stdout);
  if (!json_path.empty()) write_file_atomic(json_path, report_json(r));
  if (page) {
    Model m = load_model(onnx);
    page->add_stage("verify (" + std::to_string(r.samples.size()) + " sample(s) and per-node comparison)", ms);
    add_verify_content(*page, r, m);
    page->set_model(m);
  }
  return r.ok() ? kExitOk : kExitMismatch;
}

Runner add_verify(CLI::App& app) {
  auto a = std::make_shared<VerifyArgs>();
  auto* cmd = app.add_subcommand("verify", "Compare an ONNX model with the PyTorch model it came from.");
  cmd->footer(
      "Runs the TorchScript model (eval mode, no autograd) and the ONNX model on the same inputs and\n"
      "compares every output: shape, dtype, max abs/rel error, share of elements outside\n"
      "atol + rtol*|torch|, cosine similarity, NaN/Inf (NaN on both sides at the same place agrees).\n"
      "Inputs are random (floats normal; integers inside what they index, e.g. the rows of an\n"
      "embedding; packed-sequence lengths positive and sorted, EmbeddingBag offsets from 0; bools\n"
      "both ways); each extra --samples set also moves the dynamic sizes.\n"
      "Sizes default to the ONNX model's (2 for symbolic dims). When outputs disagree, or always with\n"
      "--locate, intermediate values are compared too and the first diverging ONNX node is named with\n"
      "the aten op and source line it came from.\n"
      "Exit 0 when all agree, 1 on a mismatch.\n"
      "Examples:\n"
      "  torch2onnx verify resnet.pt resnet.onnx --samples 3\n"
      "  torch2onnx verify lm.pt lm.onnx --input tokens:1x16:i64 --locate --json report.json\n"
      "  torch2onnx verify net.pt net.onnx --data image=cat.npy --backend ort");
  cmd->add_option("MODEL", a->model, "TorchScript file (.pt)")->required();
  cmd->add_option("ONNX", a->onnx, "ONNX file converted from it")->required();
  cmd->add_option("--input", a->inputs, "NAME:DIMS[:DTYPE] input size for the first sample, e.g. image:1x3x224x224");
  cmd->add_option("--dynamic", a->dynamic, "NAME:AXIS=LABEL[,AXIS=LABEL] axes to vary between samples");
  cmd->add_option("--data", a->data, "NAME=FILE.npy (or .pb) fixed input values, used in every sample");
  cmd->add_option("--samples", a->samples, "number of input sets (default 1)")->check(CLI::PositiveNumber);
  cmd->add_option("--rtol", a->rtol, "relative tolerance (default 1e-3)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--atol", a->atol, "absolute tolerance (default 1e-4)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--locate", a->locate, "compare intermediate values even when the outputs agree");
  cmd->add_option("--backend", a->backend, "t2o (our runtime, default) or ort (ONNX Runtime via Node)")
      ->check(CLI::IsMember({"t2o", "ort"}));
  cmd->add_option("--seed", a->seed, "seed of the random inputs (default 0)");
  cmd->add_option("--json", a->json, "also write the whole report as JSON to this file");
  cmd->add_option("--report", a->report,
                  "also write a self-contained HTML page: the graph with every node colored by its error against "
                  "PyTorch (implies --locate), the first diverging node marked, |diff| histograms");
  cmd->add_option("--plugin", a->plugins, "runtime plugin (.so) with kernels for custom ops (runtime/plugin_abi.h), repeatable");
  cmd->add_option("--torch-library", a->torch_libraries,
                  "shared library registering custom torch ops (TORCH_LIBRARY), loaded so PyTorch can run them");
  return [a] { return verify(*a); };
}

}  // namespace t2o::cli
#endif
