#pragma once
// Registration hooks of the op files; op_table() calls each once.
#include <string>
#include <unordered_map>

#include "torch/context.h"

namespace t2o {
using OpTable = std::unordered_map<std::string, OpEntry>;
void register_prim_ops(OpTable& t);
void register_control_ops(OpTable& t);
void register_elementwise_ops(OpTable& t);
void register_activation_ops(OpTable& t);
void register_conv_ops(OpTable& t);
void register_norm_ops(OpTable& t);
void register_matmul_ops(OpTable& t);
void register_shape_ops(OpTable& t);
void register_reduce_ops(OpTable& t);
void register_index_ops(OpTable& t);
void register_creation_ops(OpTable& t);
void register_resize_ops(OpTable& t);
void register_rnn_ops(OpTable& t);
void register_cell_ops(OpTable& t);
void register_pitfall_ops(OpTable& t);  // wraps entries of the others: call last
void register_attention_ops(OpTable& t);
void register_sampling_ops(OpTable& t);
void register_loss_ops(OpTable& t);
void register_stats_ops(OpTable& t);
void register_order_stat_ops(OpTable& t);
void register_cumulative_ops(OpTable& t);
void register_layout_ops(OpTable& t);
void register_window_ops(OpTable& t);
void register_linalg_ops(OpTable& t);
void register_index_update_ops(OpTable& t);
void register_selection_ops(OpTable& t);
void register_math_fn_ops(OpTable& t);
void register_nn_form_ops(OpTable& t);
void register_range_ops(OpTable& t);
void register_dict_ops(OpTable& t);  // wraps list forms of __getitem__, len, __contains__: after prim
void register_detection_ops(OpTable& t);
void register_deform_ops(OpTable& t);
void register_assorted_ops(OpTable& t);
void register_spectral_ops(OpTable& t);
void register_quantized_ops(OpTable& t);
// Quantized tensors (ops/quantized.cpp): whether v is one (a quantized TV or a constant quantized
// tensor), v as a quantized TV, its float values, and float x quantized.
bool is_quantized(const TV& v);
TV quantized_tv(Ctx& c, const TV& v);
// A 0-d zero point of the storage type `repr`.
std::string quantized_zero(Ctx& c, int64_t z, DType repr);
TV dequantized(Ctx& c, const TV& v);
TV quantize_to(Ctx& c, const TV& like_shape, const std::string& x, const std::string& scale, const std::string& zero,
               DType repr);
// Float `x` (shaped like `like_shape`) quantized as profiling saw graph value `out`: with the
// scale and zero point of the quantized input `like` when they are the same, else with the ones seen.
TV requantized(Ctx& c, const TValue* out, const std::string& x, const TV& like, const TV& like_shape);
// Converters of ops given complex tensors (ops/spectral.cpp); no other op may take one.
const OpTable& complex_op_table();
// List forms of ops that share a name with tensor ops (aten::add, aten::slice).
void list_add(Ctx& c, const TNode* n);
// A list repeated a number of times (aten::mul with a list operand).
void list_mul(Ctx& c, const TNode* n);
void list_slice(Ctx& c, const TNode* n);
bool is_list_value(const TNode* n, size_t i);
bool list_sort(Ctx& c, const TNode* n);  // false when input 0 is not a list
// The elements of a list-of-tensors argument (built in the graph or constant); exit 3 otherwise.
std::vector<TV> tensor_list(Ctx& c, const TNode* n, size_t i);
// Lists of tensors built in control flow become ONNX sequences (carried by If/Loop from opset 13).
TV to_sequence(Ctx& c, const TV& list, DType elem);
void sequence_concat(Ctx& c, const TNode* n, bool new_axis);  // aten::cat / aten::stack on a sequence
// Element type both operands of a comparison are cast to (torch's promotion with weak scalars).
DType compare_dtype(Ctx& c, const TNode* n);
}  // namespace t2o
