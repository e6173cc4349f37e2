// torch2onnx convert-version: move an existing ONNX model to another opset of the default domain.
#include <onnx/defs/schema.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "cli/commands.h"
#include "onnx/check.h"
#include "onnx/model_io.h"
#include "passes/opset.h"

namespace fs = std::filesystem;

namespace t2o::cli {

namespace {

struct ConvertVersionArgs {
  std::string input, output;
  int opset = 0;
  bool quiet = false;
  bool no_verify = false;
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
  // An invalid input is the input's fault (exit 4), not the converter's: say so before converting.
  try {
    check_model(m);
  } catch (const Error& e) {
    throw InputError("'" + a.input + "': " + e.what(), e.hint());
  }
  int64_t from = default_opset(m);
  if (from == 0) throw InputError("'" + a.input + "' imports no default-domain (ai.onnx) opset");
  Model out = m;
  bool ours = from >= 9 && a.opset >= 9;
  if (from != a.opset && ours) {
    // Opsets 9-17: torch2onnx's own adapters (passes/opset.h), in both directions.
    OpsetConversion conv = convert_opset(out, a.opset);
    if (!a.quiet)
      for (const std::string& line : conv.legalized) std::fprintf(stderr, "note: %s\n", line.c_str());
  } else if (from != a.opset) {
    if (from > a.opset) require_ops_exist(m, a.opset);
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
                ours ? std::string("this is a torch2onnx bug; please report it with the model")
                     : "onnx's version converter produced an invalid model; re-convert from PyTorch with --opset " +
                           std::to_string(a.opset),
                kExitUnsupported);
  }
  std::string proof;
  if (!a.no_verify && from != a.opset) {
    // The result must compute what the input computes.
    Comparison c = compare_models(m, out);
    if (!c.difference.empty())
      throw Error("the model converted to opset " + std::to_string(a.opset) + " does not compute what the input does: " +
                      c.difference,
                  "this is a torch2onnx bug; please report it with the model (nothing was written)", kExitUnsupported);
    if (c.proven) proof = ", outputs match on " + std::to_string(c.samples) + " samples";
    else print_warning("the conversion is not proven: " + c.not_proven);
  }
  save_model(out, a.output);
  if (!a.quiet)
    std::printf("wrote %s (opset %lld -> %d%s)\n", a.output.c_str(), static_cast<long long>(from), a.opset, proof.c_str());
  return 0;
}

}  // namespace

Runner add_convert_version(CLI::App& app) {
  auto a = std::make_shared<ConvertVersionArgs>();
  auto* cmd = app.add_subcommand("convert-version", "Convert an ONNX model to another opset (up or down).");
  cmd->footer(
      "Between opsets 9 and 17, in both directions, every node is rewritten into its op's form at the\n"
      "target: attributes that became inputs and back (Squeeze/Unsqueeze/ReduceSum/Split axes, Clip, Pad,\n"
      "Slice, TopK, Dropout), changed meanings (Softmax/LogSoftmax/Hardmax axis at 13, Resize/Upsample\n"
      "coordinates, negative axes before 11), and ops newer than the target written with older ones\n"
      "(LayerNormalization, HardSwish, GreaterOrEqual, Trilu, Round, ...). A node that cannot be moved\n"
      "is named with the reason (exit 3). The result must pass the ONNX checker and, unless\n"
      "--no-verify, compute the input's outputs on the torch2onnx runtime (generated inputs, dynamic\n"
      "axes at two sizes); it is written atomically. Opsets 7 and 8 go through onnx's version converter.\n"
      "Example:\n  torch2onnx convert-version model.onnx -o model_op11.onnx --opset 11");
  cmd->add_option("IN", a->input, "the .onnx model to convert")->required();
  cmd->add_option("-o,--output", a->output, "the .onnx file to write")->required();
  cmd->add_option("--opset", a->opset, "target opset of the default domain")->required()->check(CLI::Range(7, 17));
  cmd->add_flag("--quiet", a->quiet, "print nothing on success");
  cmd->add_flag("--no-verify", a->no_verify, "do not run the model before and after to check the conversion");
  return [a] { return convert_version_cmd(*a); };
}

}  // namespace t2o::cli
