#pragma once
// Arguments that moved from attributes to inputs across opsets (axes, pads, Slice bounds), read
// the same way whichever form a node uses.
#include <optional>
#include <vector>

#include "passes/graph_util.h"

namespace t2o::passes {

// An int list given as attribute `attr` or as constant input `input`.
struct IntsArg {
  bool known = false;    // false: given as a computed input (not constant)
  bool present = false;  // false: absent (the op's default applies)
  std::vector<int64_t> v;
};

inline IntsArg ints_arg(const Node& n, const Scope& s, const char* attr, int input) {
  IntsArg r;
  if (const Attribute* a = n.find_attr(attr)) {
    r.known = r.present = true;
    r.v = a->ints;
    return r;
  }
  if (input >= 0 && n.has_input(input)) {
    r.present = true;
    if (const Tensor* t = s.constant(n.inputs[static_cast<size_t>(input)])) {
      r.known = true;
      r.v = to_ints(*t);
    }
    return r;
  }
  r.known = true;
  return r;
}

// Axes normalized to [0, rank); nullopt when one is out of range or repeated.
inline std::optional<std::vector<int64_t>> normalize_axes(std::vector<int64_t> axes, int64_t rank) {
  for (int64_t& a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return std::nullopt;
  }
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return std::nullopt;
  return axes;
}

// Input index of Squeeze/Unsqueeze/Reduce*'s axes from the opset on which it is an input.
inline int axes_input(const std::string& op, int64_t opset) {
  if (op == "Squeeze" || op == "Unsqueeze" || op == "ReduceSum") return opset >= 13 ? 1 : -1;
  if (op.rfind("Reduce", 0) == 0) return opset >= 18 ? 1 : -1;
  if (op == "Split") return opset >= 13 ? 1 : -1;
  return -1;
}

}  // namespace t2o::passes
