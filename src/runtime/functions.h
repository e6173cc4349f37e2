#pragma once
// Model-local functions (ModelProto.functions) are expanded into their callers before execution.
#include "ir/graph.h"

namespace t2o {

// Replaces every call of a model-local function, in the main graph and in subgraphs, by the
// function's body. Intermediate names get a unique prefix; attributes referenced through
// ref_attr_name take the caller's values. Nested calls expand too.
void inline_model_functions(Model& model);

}  // namespace t2o
