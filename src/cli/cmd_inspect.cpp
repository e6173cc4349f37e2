#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "onnx/model_io.h"

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

int inspect_onnx(const std::string& path, bool json) {
  Model m = load_model(path);
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

}  // namespace

Runner add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Describe a model: inputs, outputs, opsets, parameters, ops.");
  cmd->footer(
      "Shows producer, IR version, opsets, inputs and outputs with types and symbolic dims, parameter\n"
      "count and bytes, and a histogram of ops (subgraphs included).\n"
      "Examples:\n  torch2onnx inspect model.onnx\n  torch2onnx inspect model.onnx --json");
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("FILE", *path, "the .onnx model to describe")->required();
  cmd->add_flag("--json", *json, "print the description as JSON");
  return [path, json] { return inspect_onnx(*path, *json); };
}

}  // namespace t2o::cli
