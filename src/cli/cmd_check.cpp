#include <cstdio>

#include "cli/commands.h"
#include "onnx/check.h"

namespace t2o::cli {

Runner add_check(CLI::App& app) {
  auto* cmd = app.add_subcommand("check", "Validate an ONNX model: the onnx checker plus strict shape inference.");
  cmd->footer(
      "Exit 0 when the model is valid; 4 with a one-line reason (which node, what is wrong) when it is not.\n"
      "Example: torch2onnx check model.onnx");
  auto path = std::make_shared<std::string>();
  cmd->add_option("MODEL", *path, "the .onnx file to check")->required();
  return [path] {
    check_model_file(*path);
    std::printf("%s: valid\n", path->c_str());
    return 0;
  };
}

}  // namespace t2o::cli
