#pragma once
// Element types that an op's schema rejects at the model's opset (uint8 Add before opset 14,
// int8 Relu, int16 Mul, ...) made legal: the inputs are cast to the narrowest type the op takes
// that holds their values, and the outputs cast back, so the graph computes what it did.
#include <string>
#include <vector>

#include "ir/graph.h"

namespace t2o {

// Rewrites `model` in place (subgraphs too); returns one line per rewritten node.
std::vector<std::string> legalize_types(Model& model);

}  // namespace t2o
