// torch2onnx convert-version: move an existing ONNX model to another opset of the default domain.
#include <onnx/defs/schema.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "cli/commands.h"
#include "onnx/check.h"
#include "onnx/model_io.h"

namespace fs = std::filesystem;

namespace t2o::cli {

namespace {

struct ConvertVersionArgs {
  std::string input, output;
  int opset = 0;
  bool quiet = false;
};

int64_t default_opset(const Model& m) {
  for (const auto& o : m.opset_import)
    if (o.domain.empty() || o.domain == "ai.onnx") return o.version;
  return 0;
}

// onnx's converter reports a missing op deep in its adapters (or not at all); checking first that
// every op exists at the target gives a message that names the op and the node.
void require_ops_exist(const Model& m, int target) {
  std::set<std::string> reported;
  std::string missing;
  m.graph.for_each_node([&](const Node& n) {
    if (!(n.domain.empty() || n.domain == "ai.onnx")) return;
    if (onnx::OpSchemaRegistry::Schema(n.op_type, target, "") || !reported.insert(n.op_type).second) return;
    const auto* latest = onnx::OpSchemaRegistry::Schema(n.op_type, 17, "");
    missing += "\n  " + n.op_type + " (node '" + n.name + "')" +
               (latest ? " exists only from opset " + std::to_string(latest->since_version()) : "");
  });
  if (!missing.empty())
    throw Error("cannot convert to opset " + std::to_string(target) + ": ops that do not exist there:" + missing,
                "choose an opset at least as new as the listed ones, or re-convert from PyTorch with --opset",
                kExitUnsupported);
}

// onnx says "No Adapter To Version $12 for Relu" for a step it has no adapter for.
std::string explain_converter_error(const std::string& msg, int target) {
  for (const char* key : {"No Adapter To Version $", "No Adapter From Version $"}) {
    auto k = msg.find(key);
    if (k == std::string::npos) continue;
    auto num_end = msg.find(' ', k + std::strlen(key));
    auto op_at = msg.find(" for ", k);
    if (num_end == std::string::npos || op_at == std::string::npos) break;
    std::string version = msg.substr(k + std::strlen(key), num_end - k - std::strlen(key));
    std::string op = msg.substr(op_at + 5);
    op = op.substr(0, op.find_first_of(" \n"));
    return "cannot convert to opset " + std::to_string(target) + ": onnx's version converter cannot move op " + op +
           " across opset " + version + " (it has no adapter for that step)";
  }
  return msg;
}

int convert_version_cmd(const ConvertVersionArgs& a) {
  if (fs::absolute(a.output) == fs::absolute(a.input))
    throw Error("the output would overwrite the input model", "choose another name with -o", kExitUsage);
  Model m = load_model(a.input);
  int64_t from = default_opset(m);
  if (from == 0) throw InputError("'" + a.input + "' imports no default-domain (ai.onnx) opset");
  if (from > a.opset) require_ops_exist(m, a.opset);
  Model out = m;
  if (from != a.opset) {
    try {
      // Some adapters (Softmax 12 -> 13) need the input shapes.
      out = convert_version(infer_shapes(m), a.opset);
    } catch (const Error& e) {
      throw Error(explain_converter_error(e.what(), a.opset),
                  "re-convert from PyTorch with torch2onnx convert --opset " + std::to_string(a.opset) +
                      ", which emits every opset from 9 to 17 directly",
                  kExitUnsupported);
    }
  }
  try {
    check_model(out);
  } catch (const Error& e) {
    throw Error(std::string("the converted model does not pass the ONNX checker: ") + e.what(),
                "onnx's version converter produced an invalid model; re-convert from PyTorch with --opset " +
                    std::to_string(a.opset),
                kExitUnsupported);
  }
  save_model(out, a.output);
  if (!a.quiet) std::printf("wrote %s (opset %lld -> %d)\n", a.output.c_str(), static_cast<long long>(from), a.opset);
  return 0;
}

}  // namespace

Runner add_convert_version(CLI::App& app) {
  auto a = std::make_shared<ConvertVersionArgs>();
  auto* cmd = app.add_subcommand("convert-version", "Convert an ONNX model to another opset (up or down).");
  cmd->footer(
      "Uses onnx's version converter, after checking that every op exists in the target opset (an op\n"
      "that does not is named with its node, exit 3). The result must pass the ONNX checker; it is\n"
      "written atomically. Opsets 7 to 17 (what onnx 1.12 and the torch2onnx runtime know).\n"
      "Example:\n  torch2onnx convert-version model.onnx -o model_op11.onnx --opset 11");
  cmd->add_option("IN", a->input, "the .onnx model to convert")->required();
  cmd->add_option("-o,--output", a->output, "the .onnx file to write")->required();
  cmd->add_option("--opset", a->opset, "target opset of the default domain")->required()->check(CLI::Range(7, 17));
  cmd->add_flag("--quiet", a->quiet, "print nothing on success");
  return [a] { return convert_version_cmd(*a); };
}

}  // namespace t2o::cli
