#pragma once
// Composite aten ops rewritten into the ops they are made of (decompose.cpp), before profiling.
#include <torch/script.h>

namespace t2o {

// Replaces every node with a known decomposition (in sub-blocks too); returns how many.
int decompose_ops(torch::jit::Graph& g);

}  // namespace t2o
