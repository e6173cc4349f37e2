#pragma once
// The ONNX -> ONNX optimizer: standard ONNX in, standard ONNX out. Passes fold constants and
// shapes, remove what does nothing, and fuse op chains into the standard ops of the model's
// opset. With verification on, the model runs before and after on generated inputs; a pass that
// changes an output beyond tolerance is rolled back and named with the node it touched.
//
//   t2o::OptimizeOptions o;
//   o.verify = true;
//   t2o::OptimizeReport r = t2o::optimize(model, o);  // rewrites `model` in place
//
// Invariant kept by every pass: a value name that survives a rewrite carries the same value as
// before (a fused chain's result takes the name of the chain's last value). So shapes, value
// links of `verify --locate` and names in messages stay valid across passes.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace t2o {

class PassContext;

// A pass rewrites the model in place and returns how many rewrites it made (0: unchanged).
using PassFn = std::function<int(Model&, PassContext&)>;

struct Pass {
  std::string name;
  std::string description;  // one line, for --help
  int level = 1;            // 1: exact rewrites (no numeric change); 2: fusions (rounding may differ)
  PassFn run;
};

// Every built-in pass, in pipeline order.
const std::vector<Pass>& builtin_passes();
const Pass* find_pass(const std::string& name);

struct OptimizeOptions {
  int level = 2;                     // 0: nothing, 1: exact rewrites only, 2: all
  std::vector<std::string> passes;   // when not empty: exactly these (any level), in pipeline order
  std::vector<Pass> extra_passes;    // appended to the pipeline (tests inject passes here)
  bool verify = false;               // prove each pass on the runtime (rolled back when it changes outputs)
  int samples = 2;                   // input sets per proof; dynamic axes get a different size in each
  std::map<std::string, Dims> input_sizes;    // sizes of sample 0 per input (e.g. convert's --input)
  std::map<std::string, Tensor> input_data;   // real values for some inputs (e.g. convert's --data)
  double rtol = 1e-4;                // |after - before| <= rtol * (|before| + max |before|) + 1e-7
  uint64_t seed = 0;
  int threads = 0;                   // runtime threads for the proof runs (0: all cores)
  std::function<void(const std::string&)> warn;  // each warning as it happens
  std::function<void(const std::string&)> progress;  // a status line per pass run and proof ("" when done)
};

struct PassStats {
  std::string name;
  int runs = 0;          // applications that changed the model
  int rewrites = 0;
  double ms = 0;
  bool rolled_back = false;
};

struct Rollback {
  std::string pass;
  std::string output;    // the output that changed ("" when the model stopped running or checking)
  double max_abs = 0;
  std::string node;      // the node the first bad rewrite touched, as Node::describe() names it
  std::string message;   // the warning as printed
};

struct OptimizeReport {
  int64_t nodes_before = 0, nodes_after = 0;  // all nodes, subgraphs included
  int64_t initializer_bytes_before = 0, initializer_bytes_after = 0;
  std::vector<PassStats> passes;              // in pipeline order
  std::vector<Rollback> rollbacks;
  bool verified = false;        // the result was proven against the input model
  std::string not_verified;     // why not, when verification was asked for and could not run
  int samples = 0;              // input sets the proof ran
  double total_ms = 0, verify_ms = 0;
  std::vector<std::string> warnings;
};

// Runs the selected passes (to a fixed point) on `m`. Throws Error for unknown pass names.
OptimizeReport optimize(Model& m, const OptimizeOptions& opts);

// What `convert` runs on a fresh conversion: every pass, proven on generated inputs of the
// converted sizes (and the --data values); a model that cannot be proven stays unoptimized.
OptimizeReport optimize_converted(Model& m, const std::map<std::string, Dims>& input_sizes,
                                  const std::map<std::string, Tensor>& input_data,
                                  const std::function<void(const std::string&)>& warn,
                                  const std::function<void(const std::string&)>& progress = {});

// Graph inputs of static shape that nothing reads once the graph is optimized (an input only
// read for its shape, now folded, or one the model ignores) are removed, as torch.onnx removes
// them. Each one is recorded in the model's metadata (`torch2onnx.removed_inputs`) with its place
// among the inputs, so that verify can still give it to PyTorch. Returns the inputs removed now.
struct RemovedInput {
  ValueInfo info;
  int position = 0;  // index among the model's inputs before any was removed
};
// `keep` names inputs to leave in place although unread.
std::vector<RemovedInput> remove_unused_inputs(Model& m, const std::vector<std::string>& keep = {});
// What convert says of a removed input.
std::string unused_input_note(const std::string& name);
// The inputs recorded by remove_unused_inputs, and rewriting that record (after renaming).
std::vector<RemovedInput> removed_inputs(const Model& m);
void set_removed_inputs(Model& m, const std::vector<RemovedInput>& removed);

// The context a pass runs in: the rewrite gate (which the proof uses to find the first bad
// rewrite of a pass), the model's inferred types, and fresh names.
class PassContext {
 public:
  explicit PassContext(Model& m, int64_t limit = -1);
  ~PassContext();
  // Asks to make one rewrite anchored at `anchor` (the node named if it proves wrong). Returns
  // false when the rewrite gate is closed; the pass must then leave that site alone.
  bool allow(const Node& anchor);
  int rewrites() const { return count_; }
  const std::vector<std::string>& anchors() const { return anchors_; }
  int64_t opset() const { return opset_; }

  // Types of values (from the model and onnx shape inference), computed on first use. Rewrites
  // keep names' values, so a type stays true while its name exists.
  const Type* type(const std::string& name);
  void set_type(const std::string& name, const Type& t);
  // The types this context inferred (null before the first type()), and a way to start a later
  // context from them: valid only while the model is unchanged since (the pipeline hands them
  // from a pass that rewrote nothing to the next, sparing a shape inference).
  const std::unordered_map<std::string, Type>* inferred_types() const;
  void start_from_types(const std::unordered_map<std::string, Type>& types);
  // A value name (or node name, with `node`) that exists nowhere in the model yet.
  std::string fresh(const std::string& hint, bool node = false);

 private:
  struct Impl;
  Model& model_;
  int64_t opset_;
  int64_t limit_;
  int count_ = 0;
  std::vector<std::string> anchors_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace t2o
