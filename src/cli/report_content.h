#pragma once
// What each command puts into its --report page (report/report.h draws it).
#include <string>
#include <vector>

#include "passes/passes.h"
#include "quant/quant.h"
#include "report/report.h"
#ifdef T2O_WITH_TORCH
#include "verify/verify.h"
#endif

namespace t2o::cli {

// Milliseconds since `start` (a steady_clock time point in ns), for the stage table.
double ms_since(int64_t start_ns);
int64_t now_ns();

void add_optimize_content(HtmlReport& r, const OptimizeReport& o);
// What quantization did to `m` (its result): the nodes rewritten, those left in float and why,
// and the range each QuantizeLinear represents (from its scale and zero point).
void add_quantize_content(HtmlReport& r, const QuantizeResult& q, const Model& m);
// Notes on what the converted model itself shows: output dims that stayed symbolic and custom ops
// a runtime needs kernels for.
void add_model_notes(HtmlReport& r, const Model& m);
#ifdef T2O_WITH_TORCH
// Outputs per sample, |diff| histograms, and every node of `m` colored by its error.
void add_verify_content(HtmlReport& r, const VerifyReport& v, const Model& m);
#endif

// Writes the page, printing where it went unless quiet.
void write_report(const HtmlReport& r, const std::string& path, bool quiet);

}  // namespace t2o::cli
