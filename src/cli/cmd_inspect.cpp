#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/report_content.h"
#include "onnx/model_io.h"
#ifdef T2O_WITH_TORCH
#include "torch/inspect_torch.h"
#endif

namespace t2o::cli {

namespace {

std::string human_bytes(int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.1f} {}", v, units[u]);
}

nlohmann::json value_json(const ValueInfo& v) {
  nlohmann::json j;
  j["name"] = v.name;
  j["type"] = v.type.to_string();
  if (v.type.kind == Type::Kind::Tensor) {
    j["dtype"] = dtype_name(v.type.elem);
    if (v.type.shape) {
      nlohmann::json dims = nlohmann::json::array();
      for (const Dim& d : v.type.shape->dims) {
        if (d.is_static()) dims.push_back(d.value);
        else if (d.is_symbolic()) dims.push_back(d.symbol);
        else dims.push_back(nullptr);
      }
      j["shape"] = dims;
    } else {
      j["shape"] = nullptr;
    }
  }
  return j;
}

int inspect_onnx(const std::string& path, bool json, const std::string& report) {
  int64_t t0 = now_ns();
  Model m = load_model(path);
  if (!report.empty()) {
    HtmlReport r("torch2onnx inspect " + path);
    r.add_stage("load " + path, ms_since(t0));
    r.set_model(m);
    write_report(r, report, json);
  }
  std::map<std::string, int> hist;
  m.graph.for_each_node([&](const Node& n) {
    hist[(n.domain.empty() || n.domain == "ai.onnx") ? n.op_type : n.domain + "::" + n.op_type]++;
  });
  std::vector<const ValueInfo*> ins = m.graph.runtime_inputs();
  int64_t params = m.graph.parameter_count();
  int64_t bytes = m.graph.parameter_bytes();
  size_t node_count = 0;
  m.graph.for_each_node([&](const Node&) { ++node_count; });
  if (json) {
    nlohmann::json j;
    j["file"] = path;
    j["format"] = "onnx";
    j["producer"] = {{"name", m.producer_name}, {"version", m.producer_version}};
    j["ir_version"] = m.ir_version;
    nlohmann::json ops = nlohmann::json::object();
    for (const auto& o : m.opset_import) ops[o.domain.empty() ? "ai.onnx" : o.domain] = o.version;
    j["opsets"] = ops;
    j["inputs"] = nlohmann::json::array();
    for (const auto* v : ins) j["inputs"].push_back(value_json(*v));
    j["outputs"] = nlohmann::json::array();
    for (const auto& v : m.graph.outputs) j["outputs"].push_back(value_json(v));
    j["parameters"] = params;
    j["parameter_bytes"] = bytes;
    j["initializers"] = m.graph.initializers.size();
    j["nodes"] = node_count;
    j["ops"] = hist;
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& [k, v] : m.metadata_props) meta[k] = v;
    j["metadata"] = meta;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::string out;
  out += fmt::format("{}: ONNX model\n", path);
  out += fmt::format("  producer     {} {}\n", m.producer_name.empty() ? "(unknown)" : m.producer_name, m.producer_version);
  out += fmt::format("  IR version   {}\n", m.ir_version);
  std::string opsets;
  for (const auto& o : m.opset_import)
    opsets += fmt::format("{}{} {}", opsets.empty() ? "" : ", ", o.domain.empty() ? "ai.onnx" : o.domain, o.version);
  out += fmt::format("  opsets       {}\n", opsets);
  out += fmt::format("  parameters   {} ({} in {} initializers)\n", params, human_bytes(bytes), m.graph.initializers.size());
  out += fmt::format("  nodes        {}\n", node_count);
  out += "inputs:\n";
  for (const auto* v : ins) out += fmt::format("  {:<24} {}\n", v->name, v->type.to_string());
  out += "outputs:\n";
  for (const auto& v : m.graph.outputs) out += fmt::format("  {:<24} {}\n", v.name, v.type.to_string());
  std::vector<std::pair<std::string, int>> sorted(hist.begin(), hist.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.second > b.second; });
  out += "ops:\n";
  for (const auto& [op, n] : sorted) out += fmt::format("  {:<24} {}\n", op, n);
  if (!m.metadata_props.empty()) {
    out += "metadata:\n";
    for (const auto& [k, v] : m.metadata_props) out += fmt::format("  {:<24} {}\n", k, v);
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

#ifdef T2O_WITH_TORCH
std::string shape_text(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// TorchScript .pt and torch.save files (both are zip archives).
int inspect_torch(const std::string& path, bool json) {
  TorchFileReport r = inspect_torch_file(path);
  using K = SavedFile::Kind;
  const char* kinds[] = {"torchscript", "state_dict", "pickled_module", "unknown"};
  int64_t values = 0;
  for (const auto& t : r.tensors) values += t.numel;
  std::string sn;
  for (const auto& l : r.spectral_norm_layers) sn += (sn.empty() ? "" : ", ") + l;
  if (json) {
    nlohmann::json j;
    j["file"] = path;
    j["format"] = kinds[static_cast<int>(r.file.kind)];
    if (!r.file.main_class.empty()) j["class"] = r.file.main_class;
    j["tensors"] = nlohmann::json::array();
    for (const auto& t : r.tensors) j["tensors"].push_back({{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}});
    j["values"] = values;
    j["spectral_norm_layers"] = r.spectral_norm_layers;
    j["training_modules"] = r.training_modules;
    j["forward_args"] = r.forward_args;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::string out;
  switch (r.file.kind) {
    case K::TorchScript:
      out += fmt::format("{}: TorchScript model ({} tensors, {} values)\n", path, r.tensors.size(), values);
      if (!r.forward_args.empty()) {
        out += "forward arguments:\n";
        for (const auto& a : r.forward_args) out += "  " + a + "\n";
      }
      if (!r.training_modules.empty())
        out += fmt::format("saved in train() mode: {} submodule(s) ({}{}); convert exports eval (inference) "
                           "semantics\n", r.training_modules.size(), r.training_modules[0],
                           r.training_modules.size() > 1 ? ", ..." : "");
      break;
    case K::StateDict:
      out += fmt::format("{}: state_dict (torch.save(model.state_dict())): {} tensors, {} values\n", path,
                         r.tensors.size(), values);
      out += "  A state_dict holds weights only, no architecture: it cannot be converted by itself.\n"
             "  Load it into a TorchScript model of the same architecture:\n"
             "    torch2onnx convert ARCH.pt --weights " + path + " -o model.onnx --input ...\n";
      break;
    case K::PickledModule:
      out += fmt::format("{}: pickled Python module (torch.save(model)) of class {}\n", path, r.file.main_class);
      out += "  It references the Python class by name, so only Python with that class can load it.\n"
             "  Way out: in Python, torch.jit.script(model).save('model.pt') (or torch.jit.trace), or\n"
             "  torch.save(model.state_dict(), 'weights.pth') and convert a TorchScript ARCH.pt --weights weights.pth\n";
      break;
    case K::Unknown: out += fmt::format("{}: zip archive, but not a PyTorch file torch2onnx knows\n", path); break;
  }
  if (!sn.empty())
    out += fmt::format("spectral norm: layers {} carry spectral-norm parametrizations (weight_orig/weight_u/weight_v);\n"
                       "  conversion folds them into one plain weight per layer\n", sn);
  if (!r.tensors.empty()) {
    out += "tensors:\n";
    for (const auto& t : r.tensors) out += fmt::format("  {:<40} {:<5} {}\n", t.name, t.dtype, shape_text(t.shape));
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}
#endif

}  // namespace

Runner add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Describe a model: inputs, outputs, opsets, parameters, ops.");
  cmd->footer(
      "Shows producer, IR version, opsets, inputs and outputs with types and symbolic dims, parameter\n"
      "count and bytes, and a histogram of ops (subgraphs included).\n"
      "PyTorch files: a TorchScript .pt lists its tensors, forward() arguments and train-mode submodules;\n"
      "a torch.save(state_dict) file lists its tensors; a torch.save(model) file names its Python class.\n"
      "Spectral-norm layers (weight_orig/weight_u/weight_v) are pointed out.\n"
      "--report writes one HTML file (styles, scripts and the SVG graph inline) with the graph laid out\n"
      "by Graphviz's dot (zoom, pan, search by node name, If/Loop bodies), see docs/report.md.\n"
      "Examples:\n  torch2onnx inspect model.onnx\n  torch2onnx inspect model.onnx --json\n"
      "  torch2onnx inspect model.onnx --report model.html\n"
      "  torch2onnx inspect weights.pth");
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto report = std::make_shared<std::string>();
  cmd->add_option("FILE", *path, "an .onnx model, a TorchScript .pt, or a torch.save file (.pth state_dict)")->required();
  cmd->add_flag("--json", *json, "print the description as JSON");
  cmd->add_option("--report", *report,
                  "also write a self-contained HTML page: the graph drawn (Graphviz dot), inputs, outputs, ops, "
                  "parameters (ONNX models)");
  return [path, json, report] {
#ifdef T2O_WITH_TORCH
    // ONNX files are protobuf; TorchScript and torch.save files are zip archives.
    if (is_zip_file(*path)) {
      if (!report->empty())
        throw Error("--report draws ONNX models; " + *path + " is a PyTorch file",
                    "convert it with 'torch2onnx convert MODEL.pt --report FILE.html'", kExitUsage);
      return inspect_torch(*path, *json);
    }
#endif
    return inspect_onnx(*path, *json, *report);
  };
}

}  // namespace t2o::cli
