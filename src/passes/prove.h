#pragma once
// The proof of a rewrite: the model runs on the runtime before and after, on generated inputs
// (dynamic axes at a different size in each sample), and the outputs must agree.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/passes.h"
#include "runtime/value.h"

namespace t2o::passes {

struct Finding {
  std::string output;   // the output that differs most ("" when the model fails to run)
  double max_abs = 0;   // its largest |after - before|
  std::string problem;  // one line: what differs
};

class Prover {
 public:
  // Makes the samples and runs the reference (the model as given) on them.
  Prover(const Model& reference, const OptimizeOptions& o);
  // Why the model cannot be proven (no runnable samples, random ops, ...); "" when it can.
  const std::string& unusable() const { return unusable_; }
  int samples() const { return static_cast<int>(feeds_.size()); }
  // The generated input sets (quantization calibrates and evaluates on them).
  const std::vector<std::map<std::string, RValue>>& feeds() const { return feeds_; }
  // nullopt when `m` reproduces the reference's outputs on every sample.
  std::optional<Finding> check(const Model& m) const;

 private:
  OptimizeOptions opts_;
  std::vector<std::string> outputs_;
  std::vector<std::map<std::string, RValue>> feeds_;
  std::vector<std::vector<RValue>> want_;
  std::string unusable_;
};

}  // namespace t2o::passes
