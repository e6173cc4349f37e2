// Ops that models carry from quantization-aware training and from NumPy-style code: fake
// quantization (QuantizeLinear + DequantizeLinear, or the same arithmetic for other ranges),
// unique (ONNX Unique), as_strided over a contiguous input, numpy_T, nonzero_numpy, set_, and
// the prim ops that only print or unwrap (prim::Print, prim::data).
#include "torch/ops/compose.h"

namespace t2o {
namespace {

void identity_of(Ctx& c, const TNode* n, size_t i) { c.set(n->output(), c.in(n, i)); }

// Scale and zero point as tensors of the given types, scalars or 1-D (per channel).
std::string qparam(Ctx& c, const TNode* n, size_t i, DType t) {
  const TV& v = c.in(n, i);
  if (v.is_const() && !v.c.isTensor()) return c.b.scalar(v.c.toScalar().toDouble(), t);
  return c.t_as(n, i, t);
}

// torch: (clamp(round(x / scale) + zp, qmin, qmax) - zp) * scale, rounding half to even.
// (0, 255) and (-128, 127) are QuantizeLinear/DequantizeLinear to uint8/int8; other ranges (7-bit,
// 4-bit, ...) the same arithmetic with Round and Clip (opset 11).
void fake_quantize(Ctx& c, const TNode* n, bool per_channel) {
  size_t k = per_channel ? 4 : 3;
  int64_t axis = per_channel ? c.i(n, 3) : 0;
  int64_t qmin = c.i(n, k), qmax = c.i(n, k + 1);
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  if (axis < 0 && r >= 0) axis += r;
  std::string x = c.t_as(n, 0, t);
  DType q = qmin == 0 && qmax == 255 ? DType::UInt8 : qmin == -128 && qmax == 127 ? DType::Int8 : DType::Undefined;
  if (q != DType::Undefined && t == DType::Float && (!per_channel || c.b.opset() >= 13)) {
    c.b.require(10, "fake quantization (QuantizeLinear)");
    std::string scale = qparam(c, n, 1, DType::Float), zp = qparam(c, n, 2, q);
    std::vector<Attribute> attrs;
    if (per_channel) attrs.push_back(Attribute::make_int("axis", axis));
    std::string y = c.b.op1("QuantizeLinear", {x, scale, zp}, attrs);
    return c.out(n, c.b.op1("DequantizeLinear", {y, scale, zp}, attrs));
  }
  c.b.require(11, "fake quantization to a range other than uint8/int8 (Round)");
  std::string scale = qparam(c, n, 1, t), zp = qparam(c, n, 2, t);
  if (per_channel) {
    if (r < 0) throw UnsupportedError("per-channel fake quantization of a tensor of unknown rank");
    scale = along_axis(c, scale, axis, r);
    zp = along_axis(c, zp, axis, r);
  }
  std::string v = c.b.op1("Add", {c.b.op1("Round", {c.b.op1("Div", {x, scale})}), zp});
  v = c.b.op1("Clip", {v, c.b.scalar(static_cast<double>(qmin), t), c.b.scalar(static_cast<double>(qmax), t)});
  c.out(n, c.b.op1("Mul", {c.b.op1("Sub", {v, zp}), scale}));
}
void fake_quantize_per_tensor(Ctx& c, const TNode* n) { fake_quantize(c, n, false); }
void fake_quantize_per_channel(Ctx& c, const TNode* n) { fake_quantize(c, n, true); }

// An empty int64 tensor: what unique returns for inverse / counts that were not asked for.
std::string empty_i64(Ctx& c) { return c.b.constant(Tensor(DType::Int64, {0}), "empty"); }

// aten::_unique2(x, sorted, return_inverse, return_counts) -> (values, inverse, counts): ONNX Unique
// over the flattened tensor, sorted (torch's CPU kernel sorts; unsorted order is unspecified).
void unique2(Ctx& c, const TNode* n) {
  c.b.require(11, "unique (Unique)");
  std::string x = c.t(n, 0);
  auto outs = c.b.op("Unique", {x}, {Attribute::make_int("sorted", 1)}, 4);
  c.out(n, 0, outs[0]);
  c.out(n, 1, c.flag(n, 2) ? c.b.op1("Reshape", {outs[2], c.b.shape_of(x)}) : empty_i64(c));
  c.out(n, 2, c.flag(n, 3) ? outs[3] : empty_i64(c));
}

// aten::unique_dim(x, dim, sorted, return_inverse, return_counts): unique slices along dim.
void unique_dim(Ctx& c, const TNode* n) {
  c.b.require(11, "unique along a dimension (Unique)");
  int64_t dim = c.i(n, 1);
  int r = c.rank(n, 0);
  if (dim < 0 && r >= 0) dim += r;
  auto outs = c.b.op("Unique", {c.t(n, 0)}, {Attribute::make_int("axis", dim), Attribute::make_int("sorted", 1)}, 4);
  c.out(n, 0, outs[0]);
  c.out(n, 1, c.flag(n, 3) ? outs[2] : empty_i64(c));
  c.out(n, 2, c.flag(n, 4) ? outs[3] : empty_i64(c));
}

// aten::as_strided(x, size, stride, storage_offset): elements offset + sum(i_k * stride_k) of the
// flattened input. ONNX tensors are contiguous, so this is torch's result for a contiguous x (what
// models pass; a view's own storage strides are not in the graph).
void as_strided(Ctx& c, const TNode* n) {
  std::vector<int64_t> size = c.ints(n, 1), stride = c.ints(n, 2);
  int64_t offset = c.is_none(n, 3) ? 0 : c.i(n, 3);
  if (size.size() != stride.size()) throw Error("as_strided: size and stride differ in length");
  int64_t count = 1;
  for (int64_t s : size) count *= s;
  if (count > (int64_t{1} << 24)) throw UnsupportedError("aten::as_strided with more than 2^24 elements");
  std::vector<int64_t> idx(static_cast<size_t>(count), offset);
  for (int64_t e = 0; e < count; ++e) {
    int64_t rest = e;
    for (size_t d = size.size(); d-- > 0;) {
      idx[static_cast<size_t>(e)] += (rest % size[d]) * stride[d];
      rest /= size[d];
    }
  }
  std::string flat = c.b.reshape(c.t(n, 0), {-1});
  Tensor it = Tensor::from_vector<int64_t>(idx, size);
  c.out(n, c.b.op1("Gather", {flat, c.b.constant(it, "strided_indices")}, {Attribute::make_int("axis", 0)}));
}

// x.T in NumPy's meaning: every dim reversed (Transpose's default perm).
void numpy_t(Ctx& c, const TNode* n) { c.out(n, c.b.op1("Transpose", {c.t(n, 0)})); }

// torch.nonzero(x, as_tuple=True): one 1-D index tensor per dim.
void nonzero_numpy(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  if (r < 0) throw UnsupportedError("aten::nonzero_numpy of a tensor of unknown rank");
  std::string x = c.t(n, 0);
  if (r == 0) {  // a 0-d tensor counts as one element: one index tensor, [0] or []
    x = c.b.reshape(x, {1});
    r = 1;
  }
  std::string nz = c.b.op1("NonZero", {x});
  std::vector<std::string> parts;
  for (int d = 0; d < r; ++d) parts.push_back(c.b.squeeze(c.b.slice(nz, {d}, {d + 1}, {0}), {0}));
  set_tensor_list(c, n, parts, DType::Int64);
}

// x.set_(src): x becomes src (the in-place fallback makes later readers of x see it).
void set_source(Ctx& c, const TNode* n) {
  if (n->inputs().size() < 2) throw UnsupportedError("aten::set_ without a source tensor");
  identity_of(c, n, 1);
}

// x.stride(): the strides of a contiguous tensor (what every ONNX tensor is), products of the
// trailing sizes; constants when the sizes are known, computed from Shape otherwise.
TV stride_of(Ctx& c, const TV& x, int64_t d, int rank) {
  int64_t p = 1;
  for (int64_t k = d + 1; k < rank; ++k) {
    int64_t s = x.shape[static_cast<size_t>(k)];
    p = s < 0 || p < 0 ? -1 : p * s;
  }
  if (p >= 0) return TV::constant(p);
  std::string tail = c.b.slice(c.b.shape_of(c.tensor(x)), {d + 1}, {rank}, {0});
  return TV::tensor(c.b.reduce("ReduceProd", tail, {}, false), DType::Int64);
}

void stride(Ctx& c, const TNode* n) {
  const TV& x = c.in(n, 0);
  int rank = c.rank(n, 0);
  if (rank < 0) throw UnsupportedError("aten::stride of a tensor of unknown rank");
  if (n->inputs().size() > 1) {
    int64_t d = c.i(n, 1);
    if (d < 0) d += rank;
    return c.set(n->output(), stride_of(c, x, d, rank));
  }
  std::vector<TV> items;
  for (int d = 0; d < rank; ++d) items.push_back(stride_of(c, x, d, rank));
  c.set(n->output(), TV::list(items));
}

// aten::embedding_renorm_(weight, indices, max_norm, norm_type) (nn.Embedding(max_norm=...)): the
// rows that indices name and whose p-norm exceeds max_norm are scaled to max_norm / (norm + 1e-7);
// the in-place fallback makes the embedding lookup that follows read the new weight.
void embedding_renorm(Ctx& c, const TNode* n) {
  c.b.require(11, "embedding renorm (ScatterElements)");
  DType t = c.dtype(n, 0);
  std::string w = c.t(n, 0);
  std::string idx = c.b.reshape(c.t_as(n, 1, DType::Int64), {-1});
  double max_norm = c.f(n, 2), p = c.f(n, 3);
  std::string norm;
  if (p == 2.0) {
    norm = c.b.reduce("ReduceL2", w, {1}, true);
  } else if (p == 1.0) {
    norm = c.b.reduce("ReduceL1", w, {1}, true);
  } else {
    std::string pw = c.b.op1("Pow", {c.b.op1("Abs", {w}), c.b.scalar(p, t)});
    norm = c.b.op1("Pow", {c.b.reduce("ReduceSum", pw, {1}, true), c.b.scalar(1.0 / p, t)});
  }
  std::string one = c.b.scalar(1.0, t);
  std::string scale = c.b.op1("Where", {c.b.op1("Greater", {norm, c.b.scalar(max_norm, t)}),
                                        c.b.op1("Div", {c.b.scalar(max_norm, t), c.b.op1("Add", {norm, c.b.scalar(1e-7, t)})}),
                                        one});
  std::string rows = c.b.slice(c.b.shape_of(w), {0}, {1}, {0});
  std::string zeros = c.b.op1("ConstantOfShape", {rows}, {Attribute::make_tensor("value", Tensor(DType::Float, {1}))});
  std::string ones = c.b.op1("Expand", {c.b.scalar(1.0, DType::Float), c.b.shape_of(idx)});
  std::string hit = c.b.op1("ScatterElements", {zeros, idx, ones}, {Attribute::make_int("axis", 0)});
  hit = c.b.unsqueeze(c.b.op1("Greater", {hit, c.b.scalar(0.0, DType::Float)}), {1});
  c.out(n, c.b.op1("Mul", {w, c.b.op1("Where", {hit, scale, one})}));
}

void data(Ctx& c, const TNode* n) { identity_of(c, n, 0); }
void print(Ctx&, const TNode*) {}  // output only; the ONNX model has none

}  // namespace

void register_assorted_ops(OpTable& t) {
  t["aten::fake_quantize_per_tensor_affine"] = {fake_quantize_per_tensor};
  t["aten::fake_quantize_per_channel_affine"] = {fake_quantize_per_channel};
  t["aten::_unique2"] = {unique2};
  t["aten::unique_dim"] = {unique_dim};
  t["aten::as_strided"] = {as_strided};
  t["aten::numpy_T"] = {numpy_t};
  t["aten::nonzero_numpy"] = {nonzero_numpy};
  t["aten::set"] = {set_source};
  t["aten::stride"] = {stride};
  t["aten::embedding_renorm"] = {embedding_renorm};
  t["prim::data"] = {data};
  t["prim::Print"] = {print};
}

}  // namespace t2o
