// Recurrent cells: lstm_cell/gru_cell/rnn_tanh_cell/rnn_relu_cell, and the fused forms a model
// traced on a GPU records (_thnn_fused_lstm_cell/_thnn_fused_gru_cell), which torch.onnx rejects.
// All become Gemm + elementwise nodes, valid in every opset from 9.
#include "torch/ops/ops.h"

namespace t2o {
namespace {

// x @ w^T + b, with an absent bias skipped.
std::string affine(Ctx& c, const TNode* n, size_t x, size_t w, size_t b, DType t) {
  return c.b.linear(c.t_as(n, x, t), c.t_as(n, w, t), c.is_none(n, b) ? std::string() : c.t_as(n, b, t));
}

std::string add(Ctx& c, const std::string& a, const std::string& b) { return c.b.op1("Add", {a, b}); }
std::string mul(Ctx& c, const std::string& a, const std::string& b) { return c.b.op1("Mul", {a, b}); }
std::string un(Ctx& c, const char* op, const std::string& a) { return c.b.op1(op, {a}); }

int64_t hidden_size(Ctx& c, const TNode* n) {
  auto s = c.out_shape(n, 0);
  if (s.size() != 2 || s[1] < 0) throw UnsupportedError("cell with a hidden size that is not static");
  return s[1];
}

// c' = f*c + i*g, h' = o*tanh(c'); gates are i, f, g, o along axis 1.
void lstm_tail(Ctx& c, const TNode* n, const std::string& gates, const std::string& cx, bool workspace) {
  int64_t h = hidden_size(c, n);
  auto g = c.b.split(gates, {h, h, h, h}, 1);
  std::string i = un(c, "Sigmoid", g[0]), f = un(c, "Sigmoid", g[1]), gg = un(c, "Tanh", g[2]),
              o = un(c, "Sigmoid", g[3]);
  std::string cy = add(c, mul(c, f, cx), mul(c, i, gg));
  c.out(n, 0, mul(c, o, un(c, "Tanh", cy)));
  c.out(n, 1, cy);
  if (workspace) c.out(n, 2, c.b.concat({i, f, gg, o}, 1));
}

// r = σ(gi_r + gh_r), z = σ(gi_z + gh_z), n = tanh(gi_n + r*gh_n), h' = (1-z)*n + z*h.
std::string gru_tail(Ctx& c, const TNode* n, const std::string& gi, const std::string& gh, const std::string& hx,
                     DType t, std::string* ws) {
  int64_t h = hidden_size(c, n);
  auto a = c.b.split(gi, {h, h, h}, 1), b = c.b.split(gh, {h, h, h}, 1);
  std::string r = un(c, "Sigmoid", add(c, a[0], b[0])), z = un(c, "Sigmoid", add(c, a[1], b[1]));
  std::string nn = un(c, "Tanh", add(c, a[2], mul(c, r, b[2])));
  std::string one_minus_z = c.b.op1("Sub", {c.b.scalar(1.0, t), z});
  if (ws) *ws = c.b.concat({r, z, nn, hx, b[2]}, 1);
  return add(c, mul(c, one_minus_z, nn), mul(c, z, hx));
}

// aten::lstm_cell(input, hx[h, c], w_ih, w_hh, b_ih?, b_hh?) -> (hy, cy)
void lstm_cell(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  auto hx = tensor_list(c, n, 1);
  if (hx.size() != 2) throw UnsupportedError("lstm_cell hidden state must be (h, c)");
  std::string hh = c.tensor_as(hx[0], t), cx = c.tensor_as(hx[1], t);
  std::string gh = c.b.linear(hh, c.t_as(n, 3, t), c.is_none(n, 5) ? std::string() : c.t_as(n, 5, t));
  lstm_tail(c, n, add(c, affine(c, n, 0, 2, 4, t), gh), cx, false);
}

// aten::gru_cell(input, hx, w_ih, w_hh, b_ih?, b_hh?) -> hy
void gru_cell(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  c.out(n, gru_tail(c, n, affine(c, n, 0, 2, 4, t), affine(c, n, 1, 3, 5, t), c.t_as(n, 1, t), t, nullptr));
}

// aten::rnn_tanh_cell / rnn_relu_cell(input, hx, w_ih, w_hh, b_ih?, b_hh?) -> hy
void rnn_cell(Ctx& c, const TNode* n, const char* act) {
  DType t = c.out_dtype(n);
  c.out(n, un(c, act, add(c, affine(c, n, 0, 2, 4, t), affine(c, n, 1, 3, 5, t))));
}

std::string gates_with_bias(Ctx& c, const TNode* n, size_t g, size_t b, DType t) {
  std::string x = c.t_as(n, g, t);
  return c.is_none(n, b) ? x : add(c, x, c.t_as(n, b, t));
}

// aten::_thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?, hidden_bias?) -> (hy, cy, workspace)
void fused_lstm_cell(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string gates = add(c, gates_with_bias(c, n, 0, 3, t), gates_with_bias(c, n, 1, 4, t));
  lstm_tail(c, n, gates, c.t_as(n, 2, t), true);
}

// aten::_thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?, hidden_bias?) -> (hy, workspace)
void fused_gru_cell(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string ws;
  c.out(n, 0, gru_tail(c, n, gates_with_bias(c, n, 0, 3, t), gates_with_bias(c, n, 1, 4, t), c.t_as(n, 2, t), t, &ws));
  c.out(n, 1, ws);
}

}  // namespace

void register_cell_ops(OpTable& t) {
  t["aten::lstm_cell"] = {lstm_cell};
  t["aten::gru_cell"] = {gru_cell};
  t["aten::rnn_tanh_cell"] = {[](Ctx& c, const TNode* n) { rnn_cell(c, n, "Tanh"); }};
  t["aten::rnn_relu_cell"] = {[](Ctx& c, const TNode* n) { rnn_cell(c, n, "Relu"); }};
  t["aten::_thnn_fused_lstm_cell"] = {fused_lstm_cell};
  t["aten::_thnn_fused_gru_cell"] = {fused_gru_cell};
}

}  // namespace t2o
