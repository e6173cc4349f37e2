#pragma once
// Shared by `verify` and `convert --verify`.
#ifdef T2O_WITH_TORCH
#include <string>

#include "report/report.h"
#include "verify/verify.h"

namespace t2o::cli {

// Runs verify, prints the table to stdout (and JSON to json_path when set); returns the exit code.
// With `page`, every node is compared and the results go onto the page (its model is set to `onnx`).
int run_verification(const std::string& pt, const std::string& onnx, VerifyOptions opts, const std::string& json_path,
                     HtmlReport* page = nullptr);

}  // namespace t2o::cli
#endif
