// Fused attention kernels of nn.MultiheadAttention's and nn.TransformerEncoderLayer's inference fast paths,
// and scaled dot-product attention.
#include <cmath>
#include <optional>

#include "torch/ops/compose.h"
#include "torch/ops/ops.h"

namespace t2o {
namespace {

// The mask of the fused attention kernels marks keys to leave out (nonzero: masked). torch's CPU
// kernels take a key padding mask (mask_type 1, (B, S)); they fail on the other mask types.
std::string padding_mask(Ctx& c, const TNode* n, size_t mask_i, size_t type_i) {
  if (c.is_none(n, mask_i)) return {};
  int64_t mask_type = c.is_none(n, type_i) ? -1 : c.i(n, type_i);
  if (mask_type != 1 || c.rank(n, mask_i) != 2)
    throw UnsupportedError(std::string(n->kind().toQualString()) + " with a mask other than a key padding mask");
  return c.b.unsqueeze(c.t_as(n, mask_i, DType::Bool), {1, 2});
}

at::Tensor weight_of(Ctx& c, const TNode* n, size_t i) {
  const TV& w = c.in(n, i);
  if (!w.is_const() || !w.c.isTensor())
    throw UnsupportedError(std::string(n->kind().toQualString()) + " with computed weights");
  return w.c.toTensor();
}

// y = x @ w.T + b with constant w, b.
std::string linear(Ctx& c, const std::string& x, const at::Tensor& w, const at::Tensor& b, DType t) {
  auto st = scalar_type_from_dtype(t);
  std::string y = c.b.op1("MatMul", {x, c.b.constant(tensor_from_torch(w.t().contiguous().to(st)), "weight_t")});
  return c.b.op1("Add", {y, c.b.constant(tensor_from_torch(b.contiguous().to(st)), "bias")});
}

void set_nested(Ctx& c, const TValue* out, const std::string& padded, const std::string& valid) {
  c.set(out, TV::tensor(padded));
  TV v = c.get(out);
  v.nested = valid;
  c.set(out, v);
}

struct Attn {
  std::string out, probs;  // (B, L, E) and (B, H, L, S)
};

// Batch-first multi-head attention with packed in-projection (qkv_w: (3E, E)).
Attn attention(Ctx& c, const std::string& query, const std::string& key, const std::string& value, int64_t e,
               int64_t h, const at::Tensor& qkv_w, const at::Tensor& qkv_b, const at::Tensor& proj_w,
               const at::Tensor& proj_b, const std::string& mask, DType t) {
  int64_t d = e / h;
  auto ws = qkv_w.chunk(3, 0);
  auto bs = qkv_b.chunk(3, 0);
  auto project = [&](const std::string& x, size_t k) {
    // (B, L, E) -> (B, H, L, D)
    return c.b.transpose(c.b.reshape(linear(c, x, ws[k], bs[k], t), {0, 0, h, d}), {0, 2, 1, 3});
  };
  std::string q = project(query, 0), k = project(key, 1), v = project(value, 2);
  std::string scores = c.b.op1("MatMul", {q, c.b.transpose(k, {0, 1, 3, 2})});
  scores = c.b.op1("Div", {scores, c.b.scalar(std::sqrt(static_cast<double>(d)), t)});
  if (!mask.empty()) scores = c.b.op1("Where", {mask, c.b.scalar(-INFINITY, t), scores});
  std::string p = c.b.softmax("Softmax", scores, -1, 4);
  // Rows with every key masked give zeros, as torch's masked softmax does, not NaN.
  if (!mask.empty()) p = c.b.op1("Where", {mask, c.b.scalar(0, t), p});
  std::string o = c.b.transpose(c.b.op1("MatMul", {p, v}), {0, 2, 1, 3});
  o = c.b.reshape(o, {0, 0, e});
  return {linear(c, o, proj_w, proj_b, t), p};
}

// aten::_native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
//   proj_weight, proj_bias, mask, need_weights, average_attn_weights, mask_type), batch-first.
void native_mha(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string mask = padding_mask(c, n, 9, 12);
  Attn a = attention(c, c.t_as(n, 0, t), c.t_as(n, 1, t), c.t_as(n, 2, t), c.i(n, 3), c.i(n, 4), weight_of(c, n, 5),
                     weight_of(c, n, 6), weight_of(c, n, 7), weight_of(c, n, 8), mask, t);
  c.out(n, 0, a.out);
  bool need = c.flag(n, 10), avg = n->inputs().size() > 11 && c.flag(n, 11);
  if (!need || !n->output(1)->hasUses()) return c.set(n->output(1), TV::constant(c10::IValue()));
  c.out(n, 1, avg ? c.b.reduce("ReduceMean", a.probs, {1}, false) : a.probs);
}

std::string layer_norm_last(Ctx& c, const std::string& x, double eps, const at::Tensor& w, const at::Tensor& b,
                            DType t) {
  auto st = scalar_type_from_dtype(t);
  std::string mu = c.b.reduce("ReduceMean", x, {-1}, true);
  std::string dx = c.b.op1("Sub", {x, mu});
  std::string var = c.b.reduce("ReduceMean", c.b.op1("Mul", {dx, dx}), {-1}, true);
  std::string y = c.b.op1("Div", {dx, c.b.op1("Sqrt", {c.b.op1("Add", {var, c.b.scalar(eps, t)})})});
  y = c.b.op1("Mul", {y, c.b.constant(tensor_from_torch(w.contiguous().to(st)), "weight")});
  return c.b.op1("Add", {y, c.b.constant(tensor_from_torch(b.contiguous().to(st)), "bias")});
}

// aten::_transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
//   proj_bias, use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2,
//   ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask, mask_type): nn.TransformerEncoderLayer's
//   fast path, batch-first.
void encoder_layer(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  const std::string nested = c.in(n, 0).nested;
  // A nested input attends within each sequence's valid positions: the key padding mask is the
  // padding of the nested tensor.
  std::string mask = !nested.empty() ? c.b.unsqueeze(c.b.op1("Not", {nested}), {1, 2}) : padding_mask(c, n, 18, 19);
  bool gelu = c.flag(n, 7), norm_first = c.flag(n, 8);
  double eps = c.f(n, 9);
  auto norm = [&](const std::string& x, size_t w) { return layer_norm_last(c, x, eps, weight_of(c, n, w),
                                                                          weight_of(c, n, w + 1), t); };
  auto self_attn = [&](const std::string& x) {
    return attention(c, x, x, x, c.i(n, 1), c.i(n, 2), weight_of(c, n, 3), weight_of(c, n, 4), weight_of(c, n, 5),
                     weight_of(c, n, 6), mask, t).out;
  };
  auto ffn = [&](const std::string& x) {
    std::string y = linear(c, x, weight_of(c, n, 14), weight_of(c, n, 15), t);
    if (gelu) {
      std::string e = c.b.op1("Erf", {c.b.op1("Div", {y, c.b.scalar(std::sqrt(2.0), t)})});
      y = c.b.op1("Mul", {c.b.op1("Mul", {y, c.b.scalar(0.5, t)}), c.b.op1("Add", {e, c.b.scalar(1, t)})});
    } else {
      y = c.b.op1("Relu", {y});
    }
    return linear(c, y, weight_of(c, n, 16), weight_of(c, n, 17), t);
  };
  std::string x = c.t_as(n, 0, t);
  if (norm_first) {
    x = c.b.op1("Add", {x, self_attn(norm(x, 10))});
    x = c.b.op1("Add", {x, ffn(norm(x, 12))});
  } else {
    x = norm(c.b.op1("Add", {x, self_attn(x)}), 10);
    x = norm(c.b.op1("Add", {x, ffn(x)}), 12);
  }
  if (nested.empty()) return c.out(n, x);
  set_nested(c, n->output(), c.b.op1("Where", {c.b.unsqueeze(nested, {-1}), x, c.b.scalar(0, t)}), nested);
}

// aten::_nested_tensor_from_mask(t, mask, mask_check): the rows of t where mask (B, T) is true, as a
// nested tensor; held padded with zeros elsewhere.
void nested_from_mask(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string valid = c.t_as(n, 1, DType::Bool);
  set_nested(c, n->output(), c.b.op1("Where", {c.b.unsqueeze(valid, {-1}), c.t_as(n, 0, t), c.b.scalar(0, t)}),
             valid);
}

// aten::_nested_tensor_from_mask_left_aligned(t, mask): whether every row of mask is trues then
// falses; nn.TransformerEncoder takes its nested fast path when it is. The answer profiling saw
// decides the path, as a constant: the held-padded nested form attends only to valid positions for
// any mask, so the paths differ only at padded positions (zeros on the fast path, where an
// end-padded mask, the usual one, takes it).
void nested_left_aligned(Ctx& c, const TNode* n) {
  const Observed* o = c.observed(n->output());
  if (!o || o->kind != Observed::Kind::Bool || !o->first.isBool())
    throw UnsupportedError("aten::_nested_tensor_from_mask_left_aligned that profiling did not see");
  bool aligned = o->first.toBool() && !o->varies;
  c.set(n->output(), TV::constant(aligned));
}

// Tensor.to_padded_tensor(padding, output_size=None): the nested tensor with `padding` where it has no rows.
void to_padded(Ctx& c, const TNode* n) {
  const TV& x = c.in(n, 0);
  if (x.nested.empty()) throw UnsupportedError("aten::to_padded_tensor of a tensor that is not nested");
  if (n->inputs().size() > 2 && !c.is_none(n, 2)) throw UnsupportedError("aten::to_padded_tensor with an output_size");
  DType t = c.out_dtype(n);
  c.out(n, c.b.op1("Where", {c.b.unsqueeze(x.nested, {-1}), c.tensor_as(x, t), c.t_as(n, 1, t)}));
}

void is_nested(Ctx& c, const TNode* n) { c.set(n->output(), TV::constant(!c.in(n, 0).nested.empty())); }

// softmax(q @ k^T * scale + mask) @ v over the last two dims, any leading dims. A bool mask marks
// the keys that take part (True: attend); a float mask is added; is_causal keeps keys j <= i.
// Returns the output and the attention weights.
std::pair<std::string, std::string> sdpa(Ctx& c, const TNode* n, size_t mask_i, bool causal,
                                         std::optional<double> scale_arg) {
  DType t = c.out_dtype(n);
  std::string q = c.t_as(n, 0, t), k = c.t_as(n, 1, t), v = c.t_as(n, 2, t);
  int rk = c.rank(n, 1);
  std::vector<int64_t> perm(static_cast<size_t>(rk));
  for (int i = 0; i < rk; ++i) perm[static_cast<size_t>(i)] = i;
  std::swap(perm[static_cast<size_t>(rk - 1)], perm[static_cast<size_t>(rk - 2)]);
  std::string scores = c.b.op1("MatMul", {q, c.b.transpose(k, perm)});
  std::vector<int64_t> qs = c.shape(n, 0), ks = c.shape(n, 1);
  int64_t e = qs.empty() ? -1 : qs.back();
  if (scale_arg) {
    scores = c.b.op1("Mul", {scores, c.b.scalar(*scale_arg, t)});
  } else if (e > 0) {
    scores = c.b.op1("Div", {scores, c.b.scalar(std::sqrt(static_cast<double>(e)), t)});
  } else {
    std::string d = c.b.cast(c.b.dim(q, -1), t);
    scores = c.b.op1("Div", {scores, c.b.op1("Sqrt", {d})});
  }
  std::string keep;  // bool, broadcastable to the scores
  if (causal) {
    int64_t l = qs.size() >= 2 ? qs[qs.size() - 2] : -1, sl = ks.size() >= 2 ? ks[ks.size() - 2] : -1;
    if (l > 0 && sl > 0) {
      keep = c.b.constant(tensor_from_torch(at::ones({l, sl}, at::kBool).tril()), "causal");
    } else {
      keep = band_mask(c, c.b.dim(q, static_cast<int64_t>(qs.size()) - 2), c.b.dim(k, static_cast<int64_t>(ks.size()) - 2),
                       c.b.i64(0), false);
    }
  } else if (!c.is_none(n, mask_i)) {
    if (c.dtype(n, mask_i) == DType::Bool)
      keep = c.t(n, mask_i);
    else
      scores = c.b.op1("Add", {scores, c.t_as(n, mask_i, t)});
  }
  if (!keep.empty()) scores = c.b.op1("Where", {keep, scores, c.b.scalar(-INFINITY, t)});
  int rs = std::max(c.rank(n, 0), rk);
  std::string p = c.b.softmax("Softmax", scores, -1, rs);
  return {c.b.op1("MatMul", {p, v}), p};
}

void warn_dropout(Ctx& c, const TNode* n, size_t i) {
  if (!c.is_none(n, i) && c.is_const(n, i) && c.f(n, i) > 0 && c.warn)
    c.warn(std::string(n->kind().toQualString()) + " at " + Ctx::source_of(n) + " has dropout_p=" +
           std::to_string(c.f(n, i)) + "; the ONNX model computes inference attention without dropout");
}

// aten::_scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, need_attn_weights,
//   is_causal) -> (out, weights): PyTorch 1.13's F._scaled_dot_product_attention.
void sdpa_113(Ctx& c, const TNode* n) {
  warn_dropout(c, n, 4);
  auto [out, w] = sdpa(c, n, 3, c.flag(n, 6), std::nullopt);
  c.out(n, 0, out);
  c.out(n, 1, w);  // torch 1.13 returns the weights whatever need_attn_weights says
}

// aten::scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, *, scale)
//   -> out: F.scaled_dot_product_attention of PyTorch 2 (files saved by it load here, see
//   register_newer_torch_ops).
void sdpa_2(Ctx& c, const TNode* n) {
  warn_dropout(c, n, 4);
  std::optional<double> scale;
  if (!c.is_none(n, 6)) scale = c.f(n, 6);
  c.out(n, 0, sdpa(c, n, 3, c.flag(n, 5), scale).first);
}

}  // namespace

void register_attention_ops(OpTable& t) {
  t["aten::_native_multi_head_attention"] = {native_mha};
  t["aten::_transformer_encoder_layer_fwd"] = {encoder_layer};
  t["aten::_nested_tensor_from_mask"] = {nested_from_mask};
  t["aten::_nested_tensor_from_mask_left_aligned"] = {nested_left_aligned};
  t["aten::to_padded_tensor"] = {to_padded};
  t["prim::is_nested"] = {is_nested};
  t["aten::_scaled_dot_product_attention"] = {sdpa_113};
  t["aten::scaled_dot_product_attention"] = {sdpa_2};
}

}  // namespace t2o
