#pragma once
// Composite aten ops rewritten into the ops they are made of (decompose.cpp), before profiling.
#include <torch/script.h>

#include <string>
#include <vector>

namespace t2o {

// Replaces every node with a known decomposition (in sub-blocks too); returns how many.
int decompose_ops(torch::jit::Graph& g);
// The ops (qualified names, e.g. "aten::linalg_inv") that decompose_ops rewrites, sorted.
std::vector<std::string> decomposed_ops();

}  // namespace t2o
