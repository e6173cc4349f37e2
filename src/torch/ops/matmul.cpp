// Matrix products: mm/bmm/matmul/linear/addmm/baddbmm/mv/dot/outer/einsum.
#include "torch/ops/compose.h"

namespace t2o {
namespace {

void matmul(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, c.b.op1("MatMul", {c.t_as(n, 0, t), c.t_as(n, 1, t)}));
}

// Constant weights are transposed once at conversion time rather than by a Transpose node.
std::string transposed_weight(Ctx& c, const TNode* n, size_t i, DType t) {
  const TV& w = c.in(n, i);
  if (w.is_const() && w.c.isTensor() && w.c.toTensor().dim() == 2)
    return c.b.constant(tensor_from_torch(w.c.toTensor().t().contiguous().to(scalar_type_from_dtype(t))), "weight_t");
  return c.b.transpose(c.t_as(n, i, t), {1, 0});
}

// aten::linear(input, weight, bias)
void linear(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t);
  int wr = c.rank(n, 1);
  if (wr == 1) {
    std::string y = c.b.op1("MatMul", {x, c.t_as(n, 1, t)});
    if (!c.is_none(n, 2)) y = c.b.op1("Add", {y, c.t_as(n, 2, t)});
    return c.out(n, y);
  }
  if (c.rank(n, 0) == 2) {
    return c.out(n, c.b.linear(x, c.t_as(n, 1, t), c.is_none(n, 2) ? std::string() : c.t_as(n, 2, t)));
  }
  std::string y = c.b.op1("MatMul", {x, transposed_weight(c, n, 1, t)});
  if (!c.is_none(n, 2)) y = c.b.op1("Add", {y, c.t_as(n, 2, t)});
  c.out(n, y);
}

// aten::addmm(self, mat1, mat2, beta, alpha): Gemm when both factors are numbers.
void addmm(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  const TV* beta = c.arg(n, "beta");
  const TV* alpha = c.arg(n, "alpha");
  bool numbers = (!beta || beta->is_const()) && (!alpha || alpha->is_const());
  if (!numbers || !dtype_is_float(t))
    return c.out(n, scaled_sum(c, n, c.b.op1("MatMul", {c.t_as(n, 1, t), c.t_as(n, 2, t)}), t));
  double b = beta && !beta->is_none() ? beta->c.toScalar().toDouble() : 1.0;
  double a = alpha && !alpha->is_none() ? alpha->c.toScalar().toDouble() : 1.0;
  c.out(n, c.b.op1("Gemm", {c.t_as(n, 1, t), c.t_as(n, 2, t), c.t_as(n, 0, t)},
                   {Attribute::make_float("alpha", static_cast<float>(a)),
                    Attribute::make_float("beta", static_cast<float>(b))}));
}

// aten::baddbmm(self, batch1, batch2, beta, alpha)
void baddbmm(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, scaled_sum(c, n, c.b.op1("MatMul", {c.t_as(n, 1, t), c.t_as(n, 2, t)}), t));
}

// aten::addbmm(self, batch1, batch2, beta, alpha): the batch's products summed.
void addbmm(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string p = c.b.op1("MatMul", {c.t_as(n, 1, t), c.t_as(n, 2, t)});
  c.out(n, scaled_sum(c, n, c.b.reduce("ReduceSum", p, {0}, false), t));
}

// aten::bilinear(x1, x2, weight[out, in1, in2], bias): y[..., o] = x1[..., i] W[o, i, j] x2[..., j] + b[o].
void bilinear(Ctx& c, const TNode* n) {
  c.b.require(12, "bilinear (Einsum)");
  DType t = c.out_dtype(n);
  std::string y = c.b.op1("Einsum", {c.t_as(n, 0, t), c.t_as(n, 2, t), c.t_as(n, 1, t)},
                          {Attribute::make_string("equation", "...i,oij,...j->...o")});
  if (!c.is_none(n, 3)) y = c.b.op1("Add", {y, c.t_as(n, 3, t)});
  c.out(n, y);
}

void dot(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, c.b.reduce("ReduceSum", c.b.op1("Mul", {c.t_as(n, 0, t), c.t_as(n, 1, t)}), {0}, false));
}

void outer(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, c.b.op1("Mul", {c.b.unsqueeze(c.t_as(n, 0, t), {1}), c.t_as(n, 1, t)}));
}

void einsum(Ctx& c, const TNode* n) {
  c.b.require(12, "Einsum");
  DType t = c.out_dtype(n);
  const TV& list = c.in(n, 1);
  std::vector<std::string> in;
  if (list.kind == TV::Kind::List)
    for (const TV& e : list.items) in.push_back(c.tensor_as(e, t));
  else
    throw UnsupportedError("aten::einsum with a constant operand list");
  std::string eq = c.str(n, 0);
  std::string clean;
  for (char ch : eq)
    if (ch != ' ') clean += ch;
  c.out(n, c.b.op1("Einsum", in, {Attribute::make_string("equation", clean)}));
}

// aten::t: transpose of a matrix; vectors pass through.
void t_(Ctx& c, const TNode* n) {
  if (c.rank(n, 0) < 2) return c.out(n, c.t(n, 0));
  c.out(n, c.b.transpose(c.t(n, 0), {1, 0}));
}

}  // namespace

void register_matmul_ops(OpTable& t) {
  t["aten::matmul"] = {matmul};
  t["aten::mm"] = {matmul};
  t["aten::bmm"] = {matmul};
  t["aten::mv"] = {matmul};
  t["aten::linear"] = {linear};
  t["aten::bilinear"] = {bilinear};
  t["aten::addmm"] = {addmm};
  t["aten::baddbmm"] = {baddbmm};
  t["aten::addbmm"] = {addbmm};
  t["aten::dot"] = {dot};
  t["aten::outer"] = {outer};
  t["aten::ger"] = {outer};
  t["aten::einsum"] = {einsum};
  t["aten::t"] = {t_};
}

}  // namespace t2o
