#pragma once
// Moving a model between opsets 9..17 of the default domain, in both directions: every node is
// rewritten into the form its op has at the target (attributes that became inputs and back,
// changed semantics such as Softmax's axis and Resize's coordinates, negative axes before 11),
// ops newer than the target are written out with older ops, deprecated ones replaced. Used by
// `torch2onnx convert-version`, which proves the result by running it against the input.
#include <string>
#include <vector>

#include "ir/graph.h"

namespace t2o {

struct OpsetConversion {
  int64_t from = 0, to = 0;
  int rewritten = 0;  // nodes whose form changed
  // Nodes whose element types the target rejects (uint8 Add below opset 14, ...), cast to types
  // it takes (onnx/legalize.h): one line each.
  std::vector<std::string> legalized;
};

// Throws Error (exit 3) naming the op, the node and why when a node cannot be moved.
OpsetConversion convert_opset(Model& m, int64_t target);

// Runs both models on the runtime on the same generated inputs (as the optimizer's proof does).
struct Comparison {
  bool proven = false;      // the reference ran and the candidate reproduced it
  std::string difference;   // what differs, when the candidate does not reproduce it
  std::string not_proven;   // why the reference could not be run on generated inputs
  int samples = 0;
};
Comparison compare_models(const Model& reference, const Model& candidate, int samples = 2);

}  // namespace t2o
