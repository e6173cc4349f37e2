#pragma once
// Building blocks that several op families compose their results from.
#include <optional>
#include <string>
#include <vector>

#include "torch/ops/ops.h"

namespace t2o {

// 0, 1, ..., len - 1 (1-D int64) for a 0-d or 1-element int64 `len`: Range from opset 11, before
// that the positions NonZero finds in a tensor of `len` trues.
std::string arange_of(Ctx& c, const std::string& len);
// Size of dimension `axis` of x as a 0-d int64: a constant when the profiled shape has it.
std::string dim_size(Ctx& c, const std::string& x, const std::vector<int64_t>& shape, int64_t axis);
// Static size of dimension `axis`, or nullopt when dynamic (or the rank is unknown).
std::optional<int64_t> static_size(const std::vector<int64_t>& shape, int64_t axis);
// a == b elementwise (bool) for operands of type t: Equal takes floats only from opset 11.
std::string equal_to(Ctx& c, const std::string& a, const std::string& b, DType t);
// atan2(y, x) of float tensors of type t (0 where both are 0).
std::string atan2_of(Ctx& c, const std::string& y, const std::string& x, DType t);
// Loss reduction (torch's enum: 0 none, 1 mean, 2 sum) over all elements.
std::string reduce_loss(Ctx& c, const std::string& loss, int64_t reduction);
// x reshaped so that its (1-D) values lie along `axis` of a rank-`rank` tensor: [1, .., n, .., 1].
std::string along_axis(Ctx& c, const std::string& v, int64_t axis, int rank);

// Elementwise min / max of int64 tensors (ONNX Min/Max take integers only from opset 12).
std::string int_min(Ctx& c, const std::string& a, const std::string& b);
std::string int_max(Ctx& c, const std::string& a, const std::string& b);
bool all_static(const std::vector<int64_t>& shape);
// Elements [from, to) of a 1-D shape tensor; "" when the range is empty.
std::string shape_part(Ctx& c, const std::string& shape, int64_t from, int64_t to);
// Concatenation of 1-D int64 parts, skipping "" (empty) ones.
std::string concat_parts(Ctx& c, const std::vector<std::string>& parts);
// A tensor of the given (1-D int64) shape filled with `value` of type t (ConstantOfShape).
std::string filled(Ctx& c, const std::string& shape, double value, DType t);
// The constant 0, 1, ..., n - 1 (1-D int64).
std::string positions(Ctx& c, int64_t n);
// x (rank r) padded at the end of each dim d by pads_end[d] elements of `fill` (pads_end: 1-D int64
// [r], computed): Pad from opset 11, where it takes its pads as an input; before, a block of `fill`
// concatenated for each dim in `dims`, the only dims whose pads may be non-zero.
std::string pad_end(Ctx& c, const std::string& x, int r, const std::string& pads_end, double fill, DType t,
                    const std::vector<int>& dims);
// [rows, cols] bool mask of tril (col - row <= k) or, with `upper`, triu (col - row >= k), for 0-d
// int64 rows, cols and k: what Trilu (opset 14) keeps, from two position vectors.
std::string band_mask(Ctx& c, const std::string& rows, const std::string& cols, const std::string& k, bool upper);
// beta * self (input 0) + alpha * product for addmm-style ops: beta and alpha are numbers or computed
// scalars, integer results take them truncated (as torch converts them), and beta == 0 ignores self
// (its NaN and inf included), as torch documents.
std::string scaled_sum(Ctx& c, const TNode* n, std::string product, DType t);
// Sets a Tensor[] result (or each output of a node with several) to `parts`.
void set_tensor_list(Ctx& c, const TNode* n, const std::vector<std::string>& parts, DType t);

}  // namespace t2o
