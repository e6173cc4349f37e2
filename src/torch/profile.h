#pragma once
// Learns the dtype and shape of every TorchScript value by running the graph on example inputs.
// Dims that differ between runs (or between loop iterations) are marked -1: they are dynamic.
#include <torch/script.h>

#include <map>
#include <unordered_map>
#include <vector>

#include "ir/dtype.h"

namespace t2o {

struct Observed {
  enum class Kind { None, Tensor, Int, Float, Bool, List, Tuple, Other } kind = Kind::None;
  DType dtype = DType::Undefined;
  bool rank_known = true;
  std::vector<int64_t> sizes;  // tensors; -1 where the size varies
  c10::IValue first;           // numbers: the first value seen
  bool varies = false;         // numbers: a later value differed
  std::vector<Observed> elems; // lists and tuples
  // Quantized tensors (dtype is then Float, the values they stand for): the integer type they are
  // stored in and, per tensor, their scale and zero point (first run; qvaries when runs differ).
  bool quantized = false;
  DType qdtype = DType::Undefined;
  bool per_channel = false;
  double qscale = 0;
  int64_t qzero = 0;
  bool qvaries = false;
  void merge(const Observed& o);
};

Observed observe(const c10::IValue& v);
// Inserts before each RNN op of g a check that its hidden states fit its input (libtorch's RNN
// kernels read out of bounds on a mismatched one, e.g. a traced model run at another batch).
void guard_rnns(torch::jit::Graph& g);
DType dtype_from_scalar_type(c10::ScalarType t);
c10::ScalarType scalar_type_from_dtype(DType t);

class Profile {
 public:
  // Runs `graph` once per input stack, observing every node output and block input.
  // Returns the outputs of the first run.
  std::vector<c10::IValue> run(const std::shared_ptr<torch::jit::Graph>& graph,
                               const std::vector<torch::jit::Stack>& runs);
  const Observed* get(const torch::jit::Value* v) const;
  // Branches of If nodes that no run took (a scripted `if boxes.numel() > 4000:`) leave their
  // values unobserved, and ops whose conversion needs a rank or dtype cannot convert. One more
  // run with each such If forced into its other branch (not into a branch that raises) observes
  // them; only values no real run observed take these observations, with every size dynamic and
  // every number computed (the forced run's values are not the model's). A forced run that fails
  // keeps what it observed before failing. Returns the number of Ifs forced.
  int observe_untaken_branches(const std::shared_ptr<torch::jit::Graph>& graph, const torch::jit::Stack& run);

 private:
  // One run with the Ifs of `force` taking the given branch; false when it failed part way.
  bool forced_run(const std::shared_ptr<torch::jit::Graph>& graph, const torch::jit::Stack& run,
                  const std::vector<std::pair<torch::jit::Node*, bool>>& force);
  std::unordered_map<const torch::jit::Value*, Observed> obs_;
  std::map<torch::jit::Node*, bool> forced_before_;  // Ifs forced so far, and the branch
};

}  // namespace t2o
