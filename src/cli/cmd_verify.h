#pragma once
// Shared by `verify` and `convert --verify`.
#ifdef T2O_WITH_TORCH
#include <string>

#include "verify/verify.h"

namespace t2o::cli {

// Runs verify, prints the table to stdout (and JSON to json_path when set); returns the exit code.
int run_verification(const std::string& pt, const std::string& onnx, VerifyOptions opts, const std::string& json_path);

}  // namespace t2o::cli
#endif
