#pragma once
// Complex tensors. ONNX has no complex type: a complex tensor of shape S is held as a real tensor
// of shape S + [2] (real, imaginary), the layout of ONNX's STFT/DFT outputs and of
// torch.view_as_real. Its TV keeps the logical (complex) shape and a Complex64/Complex128 dtype, so
// aten::size reads the complex dims. Only the ops in complex_op_table() see such values; any other
// op given one is reported unsupported, so an op that does not know the layout can never compute on
// it as if it were real.
#include <string>
#include <vector>

#include "torch/ops/compose.h"

namespace t2o::cplx {

inline bool is_complex(DType t) { return t == DType::Complex64 || t == DType::Complex128; }
inline bool is_complex(const TV& v) { return v.kind == TV::Kind::Tensor && is_complex(v.dtype); }
inline DType real_of(DType t) { return t == DType::Complex128 ? DType::Double : DType::Float; }
inline DType complex_of(DType real) { return real == DType::Double ? DType::Complex128 : DType::Complex64; }

// A complex value's pair tensor and its real element type; throws unless input i is complex.
std::string pair_of(Ctx& c, const TNode* n, size_t i, DType& real);
// The index of the (real, imaginary) dim of the pair tensor of a complex value of logical rank
// `rank`: -1 from opset 11, where Squeeze/Unsqueeze/Gather take negative axes; before, `rank`
// (which must then be known: rank < 0 throws).
int64_t pair_axis(Ctx& c, int rank);
int64_t pair_axis(Ctx& c, const TV& z);
// Sets n's output to the complex value held by `pair`.
void set_complex(Ctx& c, const TNode* n, const std::string& pair, DType complex, std::vector<int64_t> shape);
// Part k (0 real, 1 imaginary) of a pair tensor of logical rank `rank`, as a tensor of that rank.
std::string part_of(Ctx& c, const std::string& pair, int rank, int k);
// The pair tensor of re + i im, two real tensors of logical rank `rank` and the same shape.
std::string pair_from(Ctx& c, const std::string& re, const std::string& im, int rank);
// A real tensor of logical rank `rank` as a pair tensor with zero imaginary parts (zeros, not
// x * 0, so an infinite real part keeps a 0 imaginary one as torch does).
std::string real_pair(Ctx& c, const std::string& x, int rank, DType t);
// A constant complex tensor as a complex TV (its pair tensor an initializer).
TV constant_pair(Ctx& c, const at::Tensor& t);

// The constant [n, 2 bins] matrix taking n real samples to the (real, imaginary) pairs of their
// first `bins` DFT bins (cos and -sin, computed in double).
std::string real_dft_basis(Ctx& c, int64_t n, int64_t bins, DType t);

// Registration: `complex_table` selects the entries for ops given complex tensors (complex_op_table)
// or for ops given real ones that make complex results (op_table).
void add_complex_arith_ops(OpTable& t, bool complex_table);
void add_fft_ops(OpTable& t, bool complex_table);

}  // namespace t2o::cplx
