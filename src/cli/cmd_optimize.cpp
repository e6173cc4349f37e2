// torch2onnx optimize: standard ONNX in, optimized standard ONNX out (passes/passes.h).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/specs.h"
#include "cli/report_content.h"
#include "onnx/model_io.h"
#include "passes/passes.h"

namespace fs = std::filesystem;

namespace t2o::cli {

namespace {

struct OptimizeArgs {
  std::string input, output, passes, json, report;
  int level = 2;
  bool verify = false, quiet = false;
  int samples = 2;
  int threads = 0;
};

std::string mib(int64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

nlohmann::json report_json(const OptimizeReport& r) {
  nlohmann::json j;
  j["nodes_before"] = r.nodes_before;
  j["nodes_after"] = r.nodes_after;
  j["initializer_bytes_before"] = r.initializer_bytes_before;
  j["initializer_bytes_after"] = r.initializer_bytes_after;
  j["verified"] = r.verified;
  if (!r.not_verified.empty()) j["not_verified"] = r.not_verified;
  j["samples"] = r.samples;
  j["total_ms"] = r.total_ms;
  j["verify_ms"] = r.verify_ms;
  j["passes"] = nlohmann::json::array();
  for (const PassStats& p : r.passes)
    j["passes"].push_back({{"name", p.name}, {"runs", p.runs}, {"rewrites", p.rewrites}, {"ms", p.ms},
                           {"rolled_back", p.rolled_back}});
  j["rollbacks"] = nlohmann::json::array();
  for (const Rollback& b : r.rollbacks)
    j["rollbacks"].push_back({{"pass", b.pass}, {"output", b.output}, {"max_abs", b.max_abs}, {"node", b.node},
                              {"message", b.message}});
  j["warnings"] = r.warnings;
  return j;
}

int optimize_cmd(const OptimizeArgs& a) {
  if (fs::absolute(a.output) == fs::absolute(a.input))
    throw Error("the output would overwrite the input model", "choose another name with -o", kExitUsage);
  OptimizeOptions o;
  o.level = a.level;
  o.passes = split_list(a.passes);
  if (!a.passes.empty() && o.passes.empty()) throw Error("--passes is empty", "e.g. --passes fold_constants,eliminate_dead", kExitUsage);
  for (const auto& p : o.passes)
    if (!find_pass(p)) throw Error("unknown pass '" + p + "'", "run 'torch2onnx optimize --help' for the list of passes", kExitUsage);
  o.verify = a.verify;
  o.samples = a.samples;
  o.threads = a.threads;
  o.warn = [](const std::string& w) { print_warning(w); };
  if (!a.quiet) o.progress = status_line();
  int64_t t0 = now_ns();
  Model m = load_model(a.input);
  double load_ms = ms_since(t0);
  OptimizeReport r = optimize(m, o);
  save_model(m, a.output);
  if (!a.report.empty()) {
    HtmlReport page("torch2onnx optimize " + a.input);
    page.add_fact("output", a.output);
    page.add_stage("load " + a.input, load_ms);
    add_optimize_content(page, r);
    page.set_model(m);
    write_report(page, a.report, a.quiet || a.json == "-");
  }
  if (!a.json.empty()) {
    std::string text = report_json(r).dump(2) + "\n";
    if (a.json == "-") std::fputs(text.c_str(), stdout);
    else write_file_atomic(a.json, text);
  }
  if (!a.quiet && a.json != "-") {
    std::string proof = r.verified ? fmt::format(", proven on {} samples", r.samples) : a.verify ? ", NOT proven" : "";
    std::printf("wrote %s (%lld -> %lld nodes, initializers %s -> %s%s)\n", a.output.c_str(),
                static_cast<long long>(r.nodes_before), static_cast<long long>(r.nodes_after),
                mib(r.initializer_bytes_before).c_str(), mib(r.initializer_bytes_after).c_str(), proof.c_str());
  }
  return 0;
}

}  // namespace

Runner add_optimize(CLI::App& app) {
  auto a = std::make_shared<OptimizeArgs>();
  auto* cmd = app.add_subcommand("optimize", "Optimize an ONNX model into fewer, fused standard ONNX ops.");
  std::string footer =
      "Passes run in this order, repeated until none changes the model (level 1: exact rewrites; level 2\n"
      "adds fusions, which may change float rounding):\n";
  for (const Pass& p : builtin_passes()) footer += fmt::format("  {:<32} [{}] {}\n", p.name, p.level, p.description);
  footer +=
      "Value names that remain keep their values (a fused chain's result takes its last name). With\n"
      "--verify the model runs on the torch2onnx runtime before and after, on generated inputs (dynamic\n"
      "axes at a different size in each sample, integer inputs inside what they index); a pass that\n"
      "changes any output beyond |after - before| <= 1e-4 * (|before| + max |before|) is rolled back for\n"
      "the whole model and named in a warning with the node its first bad rewrite touched. A model that\n"
      "cannot run on generated inputs is written unoptimized, with a warning. The output passes the ONNX\n"
      "checker when the input does, and is written atomically.\n"
      "Examples:\n"
      "  torch2onnx optimize model.onnx -o model.opt.onnx --verify\n"
      "  torch2onnx optimize model.onnx -o model.opt.onnx --level 1 --json summary.json\n"
      "  torch2onnx optimize model.onnx -o model.opt.onnx --passes fold_constants,fold_shapes,eliminate_dead";
  cmd->footer(footer);
  cmd->add_option("IN", a->input, "the .onnx model to optimize")->required();
  cmd->add_option("-o,--output", a->output, "the .onnx file to write")->required();
  cmd->add_option("--level", a->level, "0: no passes, 1: exact rewrites, 2: all (default)")->check(CLI::Range(0, 2));
  cmd->add_option("--passes", a->passes, "comma-separated passes to run (any level), instead of --level");
  cmd->add_flag("--verify", a->verify, "prove every pass on the runtime; roll back and name a pass that changes outputs");
  cmd->add_option("--samples", a->samples, "input sets per proof (default 2)")->check(CLI::Range(1, 16));
  cmd->add_option("--threads", a->threads, "runtime threads for the proof (default: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--json", a->json, "write a summary (nodes and initializer bytes before/after, per-pass counts and "
                                     "time, rollbacks) to this file, or '-' for stdout");
  cmd->add_option("--report", a->report,
                  "also write a self-contained HTML page: the optimized graph, each pass and its effect, rollbacks");
  cmd->add_flag("--quiet", a->quiet, "print nothing on success (warnings still go to stderr)");
  return [a] { return optimize_cmd(*a); };
}

}  // namespace t2o::cli
