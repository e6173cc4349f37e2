#pragma once
// Loading custom-op kernels from plugin shared libraries (see plugin_abi.h for the ABI a plugin
// implements, and examples/custom_op/ for a complete plugin).
#include <string>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/plugin_abi.h"

namespace t2o {

struct PluginOp {
  std::string domain, op_type;
  int since_version = 1;
};

// dlopens `path`, calls its t2o_plugin_init and adds every op it registers to `reg`. Loading the
// same file twice is harmless. Throws InputError (exit 4) when the file cannot be loaded, does
// not export t2o_plugin_init, or was built for another ABI version.
std::vector<PluginOp> load_plugin(const std::string& path, KernelRegistry& reg = KernelRegistry::instance());

}  // namespace t2o
