#pragma once
// Declarations shared by the files of t2o_passes (not part of its public API).
#include <optional>
#include <string>
#include <vector>
#include <unordered_map>

#include "ir/graph.h"
#include "passes/passes.h"

namespace t2o::passes {

// Initializers up to this size stay in the model given to onnx shape inference (shape-like
// constants must be readable there); larger ones become typed graph inputs, which keeps the
// protobuf copy small.
inline constexpr size_t kSmallConstantBytes = 4096;

Model strip_large_initializers(const Model& m);
// Types of every value: declared ones, initializers, and what onnx shape inference derives.
std::unordered_map<std::string, Type> infer_types(const Model& m);

// The built-in passes (one function each; see registry.cpp for what they do).
int fold_constants(Model& m, PassContext& ctx);
int fold_shapes(Model& m, PassContext& ctx);
int eliminate_identity(Model& m, PassContext& ctx);
int eliminate_noop(Model& m, PassContext& ctx);
int eliminate_dead(Model& m, PassContext& ctx);
int merge_consecutive(Model& m, PassContext& ctx);
int canonicalize_reshape(Model& m, PassContext& ctx);
int dedup_initializers(Model& m, PassContext& ctx);
int eliminate_common_subexpressions(Model& m, PassContext& ctx);
int fuse_pad_into_conv(Model& m, PassContext& ctx);
int fuse_bn_into_conv(Model& m, PassContext& ctx);
int fuse_bn_into_gemm(Model& m, PassContext& ctx);
int fuse_mul_add_into_conv(Model& m, PassContext& ctx);
int fuse_matmul_add_into_gemm(Model& m, PassContext& ctx);
int fuse_layer_norm(Model& m, PassContext& ctx);

// Runs one node on constant inputs (nullptr for absent ones) with the runtime's reference
// kernels; nullopt when it cannot (no kernel, a failure, a non-tensor output).
std::optional<std::vector<Tensor>> evaluate_node(const Node& n, const std::vector<const Tensor*>& ins,
                                                 const std::unordered_map<std::string, int64_t>& opsets);

int64_t count_nodes(const Graph& g);  // subgraphs included
int64_t initializer_bytes(const Graph& g);

}  // namespace t2o::passes
