// Attention kernels that traced models capture as one op (nn.MultiheadAttention's fast path).
#include <cmath>

#include "torch/ops/ops.h"

namespace t2o {
namespace {

// aten::_native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
//   proj_weight, proj_bias, mask, need_weights, average_attn_weights, mask_type), batch-first.
void native_mha(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int64_t e = c.i(n, 3), h = c.i(n, 4), d = e / h;
  if (!c.is_none(n, 9)) throw UnsupportedError("aten::_native_multi_head_attention with a mask");
  const TV& w = c.in(n, 5);
  const TV& bias = c.in(n, 6);
  if (!w.is_const() || !bias.is_const()) throw UnsupportedError("aten::_native_multi_head_attention with computed weights");
  auto ws = w.c.toTensor().chunk(3, 0);
  auto bs = bias.c.toTensor().chunk(3, 0);
  auto st = scalar_type_from_dtype(t);
  auto project = [&](size_t i, int k) {
    std::string wt = c.b.constant(tensor_from_torch(ws[static_cast<size_t>(k)].t().contiguous().to(st)), "weight_t");
    std::string y = c.b.op1("MatMul", {c.t_as(n, i, t), wt});
    y = c.b.op1("Add", {y, c.b.constant(tensor_from_torch(bs[static_cast<size_t>(k)].contiguous().to(st)), "bias")});
    // (B, L, E) -> (B, H, L, D)
    return c.b.transpose(c.b.reshape(y, {0, 0, h, d}), {0, 2, 1, 3});
  };
  std::string q = project(0, 0), k = project(1, 1), v = project(2, 2);
  std::string scores = c.b.op1("MatMul", {q, c.b.transpose(k, {0, 1, 3, 2})});
  scores = c.b.op1("Div", {scores, c.b.scalar(std::sqrt(static_cast<double>(d)), t)});
  std::string p = c.b.softmax("Softmax", scores, -1, 4);
  std::string o = c.b.transpose(c.b.op1("MatMul", {p, v}), {0, 2, 1, 3});
  o = c.b.reshape(o, {0, 0, e});
  std::string pw = c.b.constant(tensor_from_torch(c.in(n, 7).c.toTensor().t().contiguous().to(st)), "weight_t");
  o = c.b.op1("Add", {c.b.op1("MatMul", {o, pw}), c.t_as(n, 8, t)});
  c.out(n, 0, o);
  bool need = c.flag(n, 10), avg = n->inputs().size() > 11 && c.flag(n, 11);
  if (!need || !n->output(1)->hasUses()) return c.set(n->output(1), TV::constant(c10::IValue()));
  c.out(n, 1, avg ? c.b.reduce("ReduceMean", p, {1}, false) : p);
}

}  // namespace

void register_attention_ops(OpTable& t) { t["aten::_native_multi_head_attention"] = {native_mha}; }

}  // namespace t2o
