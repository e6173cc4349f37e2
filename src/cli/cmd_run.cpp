#include <fmt/format.h>

#include <unistd.h>

#include <filesystem>

#include "cli/commands.h"
#include "onnx/model_io.h"
#include "onnx/tensor_io.h"
#include "runtime/plugin.h"
#include "runtime/session.h"
#include "runtime/value_io.h"

namespace fs = std::filesystem;

namespace t2o::cli {

namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string input_dir;
  std::string out_dir = ".";
  int threads = 0;
  bool reference = false;
  bool quiet = false;
  double timeout = 0;
  std::vector<std::string> plugins;
  std::string max_memory;
};

// "4G", "512M", "100K", a plain byte count, or "0" for no limit.
size_t parse_memory(const std::string& s) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(s, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = s.substr(end);
  double mul = unit.empty() || unit == "B" ? 1 : unit == "K" || unit == "KB" ? 1024.0 : unit == "M" || unit == "MB" ? 1048576.0
               : unit == "G" || unit == "GB" ? 1073741824.0 : unit == "T" || unit == "TB" ? 1099511627776.0 : -1;
  if (end == 0 || mul < 0 || !(v >= 0) || v * mul > 1.8e19)
    throw Error("--max-memory '" + s + "' is not a size", "e.g. --max-memory 4G, 512M or 0 for no limit", kExitUsage);
  return static_cast<size_t>(v * mul);
}

// Three quarters of physical memory: a model that asks for more fails with a clear error instead
// of being killed by the kernel's OOM killer.
size_t default_memory_limit() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<size_t>(pages) / 4 * 3 * static_cast<size_t>(page);
}

std::string describe(const RValue& v) {
  if (v.is_tensor()) return fmt::format("{}[{}]", dtype_name(v.tensor.dtype()), dims_to_string(v.tensor.dims()));
  if (v.is_sequence()) return fmt::format("sequence of {}", v.sequence.size());
  if (v.is_optional()) return v.element ? "optional(" + describe(*v.element) + ")" : "optional(none)";
  return "none";
}

int run_model(const RunArgs& a) {
  set_memory_limit(a.max_memory.empty() ? default_memory_limit() : parse_memory(a.max_memory));
  SessionOptions so;
  so.threads = a.threads;
  so.fast_paths = !a.reference;
  so.time_limit_s = a.timeout;
  for (const auto& p : a.plugins) load_plugin(p);
  Session s = Session::from_file(a.model, so);
  std::map<std::string, RValue> feeds;
  auto find_vi = [&](const std::string& name) -> const ValueInfo* {
    for (const auto& vi : s.inputs())
      if (vi.name == name) return &vi;
    return nullptr;
  };
  if (!a.input_dir.empty()) {
    if (!fs::is_directory(a.input_dir)) throw InputError("input folder '" + a.input_dir + "' does not exist");
    for (size_t i = 0; i < s.inputs().size(); ++i) {
      fs::path f = fs::path(a.input_dir) / fmt::format("input_{}.pb", i);
      if (!fs::exists(f)) {
        if (s.inputs()[i].type.kind == Type::Kind::Optional) continue;
        throw InputError(fmt::format("'{}' is missing: input {} ('{}') needs it", f.string(), i, s.inputs()[i].name));
      }
      feeds[s.inputs()[i].name] = read_value_file(f.string(), &s.inputs()[i].type);
    }
  }
  for (const std::string& spec : a.inputs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("--input '" + spec + "' is not NAME=FILE", "e.g. --input x=x.npy", kExitUsage);
    std::string name = spec.substr(0, eq);
    feeds[name] = read_value_file(spec.substr(eq + 1), find_vi(name) ? &find_vi(name)->type : nullptr);
  }
  auto outs = s.run(feeds);
  if (!fs::is_directory(a.out_dir)) fs::create_directories(a.out_dir);
  for (size_t k = 0; k < s.outputs().size(); ++k) {
    const std::string& name = s.outputs()[k].name;
    const RValue& v = outs.at(name);
    fs::path base = fs::path(a.out_dir) / fmt::format("output_{}", k);
    if (v.is_tensor() && v.tensor.dtype() != DType::String && v.tensor.dtype() != DType::BFloat16)
      write_npy(base.string() + ".npy", v.tensor);
    write_value_pb(base.string() + ".pb", pb_from_rvalue(v), name);
    if (!a.quiet) std::printf("output_%zu  %-24s %s\n", k, name.c_str(), describe(v).c_str());
  }
  return 0;
}

}  // namespace

Runner add_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Run an ONNX model on the torch2onnx CPU runtime.");
  cmd->footer(
      "Inputs come from .npy or ONNX TensorProto .pb files. --input-dir reads input_0.pb, input_1.pb, ...\n"
      "(the layout of the ONNX backend test data) in graph-input order. Each output K is written to\n"
      "OUT_DIR as output_K.pb and output_K.npy.\n"
      "Examples:\n  torch2onnx run model.onnx --input x=x.npy --out-dir out\n"
      "  torch2onnx run test_relu/model.onnx --input-dir test_relu/test_data_set_0 --out-dir out");
  cmd->add_option("MODEL", a->model, "the .onnx model to run")->required();
  cmd->add_option("--input", a->inputs, "NAME=FILE.npy|FILE.pb, repeatable");
  cmd->add_option("--input-dir", a->input_dir, "folder with input_0.pb, input_1.pb, ...");
  cmd->add_option("--out-dir", a->out_dir, "where outputs are written (default: current folder)");
  cmd->add_option("--threads", a->threads, "threads to use (default: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--reference", a->reference, "use the plain reference kernels only (no fast paths)");
  cmd->add_flag("--quiet", a->quiet, "do not list the outputs");
  cmd->add_option("--max-memory", a->max_memory,
                  "cap on the memory tensors may hold, e.g. 4G or 512M; 0 for none (default: 3/4 of physical memory)");
  cmd->add_option("--timeout", a->timeout,
                  "stop the run with exit 4 when it takes longer than this many seconds (default 0: no limit)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--plugin", a->plugins, "shared library with kernels for custom ops (runtime/plugin_abi.h), repeatable");
  return [a] { return run_model(*a); };
}

}  // namespace t2o::cli
