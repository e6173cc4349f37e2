#pragma once
// What an integer model input feeds, read from the TorchScript graph, so that random example values
// (shape learning without --data) are values the model accepts: packed-sequence lengths (positive,
// sorted, at most the sequence's length), EmbeddingBag offsets (from 0, non-decreasing, inside the
// indices), indices (inside the dim they index) and divisors (non-zero).
#include <torch/script.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace t2o {

struct InputRole {
  enum class Kind { None, Lengths, Offsets, Index, Divisor } kind = Kind::None;
  std::string source;  // Lengths: the padded data input; Offsets: the indices input; Index: the indexed input
  int64_t axis = 0;    // Lengths: the time axis of source; Index: the indexed dim of source
  int64_t bound = 0;   // Index into a constant (an embedding table): values in [0, bound)
  // Index: every (input, dim) it indexes besides `source`/`axis`; values stay inside all of them.
  std::vector<std::pair<std::string, int64_t>> more;
  std::string what() const;  // "packed-sequence lengths", ...
};

// Roles of the graph inputs, by input name; `names[i]` names graph input i (empty: not an input of
// its own, e.g. a list part).
std::map<std::string, InputRole> input_roles(const torch::jit::Graph& g, const std::vector<std::string>& names);
// The same, naming each graph input after its debug name up to the first '.' (`lengths.1` -> lengths),
// as forward()'s arguments are named.
std::map<std::string, InputRole> input_roles(const torch::jit::Graph& g);

// A random value of `dims` and `dtype` that fits the role; `dims_of` gives the dims other inputs
// have in the same run. Empty when the role does not apply (then plain random values are used).
std::optional<at::Tensor> role_value(const InputRole& r, const Dims& dims, at::ScalarType dtype,
                                     const std::function<std::optional<Dims>(const std::string&)>& dims_of);

}  // namespace t2o
