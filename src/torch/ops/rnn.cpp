// Recurrent layers (aten::lstm/gru/rnn_tanh/rnn_relu, input-first overloads) -> ONNX LSTM/GRU/RNN,
// one ONNX node per layer. The *_cell ops live in cells.cpp.
//
// Weights are frozen constants, so the gate reordering happens here, at conversion time:
// PyTorch LSTM gates i,f,g,o -> ONNX i,o,f,c; GRU r,z,n -> ONNX z,r,h (with linear_before_reset=1,
// which is PyTorch's formula for n).
#include "torch/ops/ops.h"

namespace t2o {
namespace {

enum class Cell { LSTM, GRU, RNNTanh, RNNRelu };

struct CellInfo {
  const char* onnx_op;
  int gates;
  std::vector<int64_t> order;  // ONNX gate k is PyTorch gate order[k]
};

CellInfo info(Cell k) {
  switch (k) {
    case Cell::LSTM: return {"LSTM", 4, {0, 3, 1, 2}};
    case Cell::GRU: return {"GRU", 3, {1, 0, 2}};
    default: return {"RNN", 1, {0}};
  }
}

std::vector<at::Tensor> const_tensors(Ctx& c, const TNode* n, size_t i, const char* what) {
  const TV& v = c.in(n, i);
  std::vector<at::Tensor> r;
  if (v.is_const() && v.c.isTensorList()) return v.c.toTensorVector();
  if (v.is_const() && v.c.isList()) {
    for (const auto& e : v.c.toListRef()) r.push_back(e.toTensor());
    return r;
  }
  if (v.kind == TV::Kind::List) {
    for (const TV& e : v.items) {
      if (!e.is_const() || !e.c.isTensor()) throw UnsupportedError(std::string("RNN with computed ") + what);
      r.push_back(e.c.toTensor());
    }
    return r;
  }
  throw UnsupportedError(std::string("RNN with computed ") + what);
}

// Weights [gates*hidden, ...] with gate chunks reordered for ONNX.
at::Tensor reorder(const at::Tensor& w, const CellInfo& ci) {
  auto chunks = w.chunk(ci.gates, 0);
  std::vector<at::Tensor> parts;
  for (int64_t k : ci.order) parts.push_back(chunks[static_cast<size_t>(k)]);
  return at::cat(parts, 0);
}

// The initial states of the layers, as a tensor name (empty: none, ONNX starts from zeros).
std::string state_name(Ctx& c, const TV& v) {
  if (v.is_none()) return {};
  if (v.is_const() && v.c.isTensor() && !v.c.toTensor().any().item<bool>()) return {};
  return c.tensor(v);
}

// aten::lstm.input(input, hx[], params[], has_biases, num_layers, dropout, train, bidirectional, batch_first)
// aten::gru.input / rnn_tanh.input / rnn_relu.input (input, hx, params[], ...same)
void rnn(Ctx& c, const TNode* n, Cell kind) {
  if (n->schema().overload_name() != "input")
    throw UnsupportedError("packed sequences (" + n->schema().overload_name() + " overload)");
  const CellInfo ci = info(kind);
  bool has_biases = c.flag(n, 3), bidir = c.flag(n, 7), batch_first = c.flag(n, 8);
  int64_t layers = c.i(n, 4);
  int64_t dirs = bidir ? 2 : 1;
  std::vector<at::Tensor> params = const_tensors(c, n, 2, "weights");
  size_t per_dir = has_biases ? 4 : 2;
  if (params.size() != per_dir * static_cast<size_t>(layers * dirs))
    throw UnsupportedError("LSTM with proj_size");  // the only layout with extra weights
  DType t = c.out_dtype(n);

  // Initial states: [layers*dirs, batch, hidden] each.
  std::string h0, c0;
  if (kind == Cell::LSTM) {
    const TV& hx = c.in(n, 1);
    std::vector<TV> parts;
    if (hx.kind == TV::Kind::List) parts = hx.items;
    else if (hx.is_const() && hx.c.isList())
      for (const auto& e : hx.c.toListRef()) parts.push_back(TV::constant(e));
    if (parts.size() != 2) throw UnsupportedError("LSTM hx that is not a pair (h0, c0)");
    h0 = state_name(c, parts[0]);
    c0 = state_name(c, parts[1]);
  } else {
    h0 = state_name(c, c.in(n, 1));
  }
  if (!h0.empty()) h0 = c.b.cast(h0, t);
  if (!c0.empty()) c0 = c.b.cast(c0, t);

  std::string x = c.t_as(n, 0, t);
  if (batch_first) x = c.b.transpose(x, {1, 0, 2});
  std::vector<std::string> hn, cn;
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<at::Tensor> w, r, bias;
    int64_t hidden = 0;
    for (int64_t d = 0; d < dirs; ++d) {
      const at::Tensor* p = &params[static_cast<size_t>((l * dirs + d)) * per_dir];
      hidden = p[1].size(1);
      w.push_back(reorder(p[0], ci));
      r.push_back(reorder(p[1], ci));
      if (has_biases) bias.push_back(at::cat({reorder(p[2], ci), reorder(p[3], ci)}, 0));
    }
    auto as_const = [&](const std::vector<at::Tensor>& v, const std::string& hint) {
      Tensor k = tensor_from_torch(at::stack(v, 0).to(scalar_type_from_dtype(t)));
      return c.b.constant(k, hint);
    };
    std::vector<std::string> ins{x, as_const(w, "rnn_W"), as_const(r, "rnn_R")};
    ins.push_back(has_biases ? as_const(bias, "rnn_B") : std::string());
    ins.push_back("");  // sequence_lens: every sequence is full length
    auto layer_state = [&](const std::string& s) {
      return s.empty() ? std::string() : c.b.slice(s, {l * dirs}, {(l + 1) * dirs}, {0});
    };
    ins.push_back(layer_state(h0));
    if (kind == Cell::LSTM) ins.push_back(layer_state(c0));
    while (!ins.empty() && ins.back().empty()) ins.pop_back();

    std::vector<Attribute> attrs{Attribute::make_int("hidden_size", hidden),
                                 Attribute::make_string("direction", bidir ? "bidirectional" : "forward")};
    if (kind == Cell::GRU) attrs.push_back(Attribute::make_int("linear_before_reset", 1));
    if (kind == Cell::RNNRelu)
      attrs.push_back(Attribute::make_strings("activations", std::vector<std::string>(dirs, "Relu")));
    auto outs = c.b.op(ci.onnx_op, ins, attrs, kind == Cell::LSTM ? 3 : 2);
    // Y [seq, dirs, batch, hidden] -> [seq, batch, dirs*hidden]
    if (dirs == 1)
      x = c.b.squeeze(outs[0], {1});
    else
      x = c.b.reshape(c.b.transpose(outs[0], {0, 2, 1, 3}), {0, 0, -1});
    hn.push_back(outs[1]);
    if (kind == Cell::LSTM) cn.push_back(outs[2]);
  }
  if (batch_first) x = c.b.transpose(x, {1, 0, 2});
  c.out(n, 0, x);
  c.out(n, 1, hn.size() == 1 ? hn[0] : c.b.concat(hn, 0));
  if (kind == Cell::LSTM) c.out(n, 2, cn.size() == 1 ? cn[0] : c.b.concat(cn, 0));
}

void lstm(Ctx& c, const TNode* n) { rnn(c, n, Cell::LSTM); }
void gru(Ctx& c, const TNode* n) { rnn(c, n, Cell::GRU); }
void rnn_tanh(Ctx& c, const TNode* n) { rnn(c, n, Cell::RNNTanh); }
void rnn_relu(Ctx& c, const TNode* n) { rnn(c, n, Cell::RNNRelu); }

}  // namespace

void register_rnn_ops(OpTable& t) {
  t["aten::lstm"] = {lstm};
  t["aten::gru"] = {gru};
  t["aten::rnn_tanh"] = {rnn_tanh};
  t["aten::rnn_relu"] = {rnn_relu};
}

}  // namespace t2o
