// Recurrent layers (aten::lstm/gru/rnn_tanh/rnn_relu) -> ONNX LSTM/GRU/RNN, one ONNX node per layer;
// packed sequences (pack_padded_sequence -> rnn.data -> pad_packed_sequence) as padded tensors
// with ONNX's sequence_lens. The *_cell ops live in cells.cpp.
//
// Weights are frozen constants, so the gate reordering happens here, at conversion time:
// PyTorch LSTM gates i,f,g,o -> ONNX i,o,f,c; GRU r,z,n -> ONNX z,r,h (with linear_before_reset=1,
// which is PyTorch's formula for n).
#include "torch/ops/compose.h"
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

size_t arg(const TNode* n, const char* name) {
  auto k = Ctx::arg_index(n, name);
  if (!k) throw UnsupportedError(std::string(n->kind().toQualString()) + " without argument '" + name + "'");
  return *k;
}

// [T, B] mask of the valid steps: step t < lengths[b], for T = max(lengths).
std::string valid_steps(Ctx& c, const std::string& lengths) {
  std::string maxlen = c.b.reduce("ReduceMax", lengths, {0}, false);
  std::string steps = arange_of(c, maxlen);
  return c.b.op1("Less", {c.b.unsqueeze(steps, {1}), c.b.unsqueeze(lengths, {0})});
}

// aten::_pack_padded_sequence(input, lengths, batch_first) -> (data, batch_sizes)
void pack_padded(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  std::vector<int64_t> shape = c.shape(n, 0);
  std::string x = c.t(n, 0);
  if (c.flag(n, 2)) {
    std::vector<int64_t> perm;
    for (int i = 0; i < r; ++i) perm.push_back(i);
    std::swap(perm[0], perm[1]);
    x = c.b.transpose(x, perm);
    std::swap(shape[0], shape[1]);
  }
  std::string lengths = c.t_as(n, 1, DType::Int64);
  TV data = TV::tensor(x, c.dtype(n, 0));
  data.shape = shape;
  data.rank_known = true;
  data.packed = true;
  data.lengths = lengths;
  c.set(n->output(0), data);
  // torch's batch_sizes: how many sequences are longer than t, for each step t.
  std::string bs = c.b.reduce("ReduceSum", c.b.cast(valid_steps(c, lengths), DType::Int64), {1}, false);
  TV sizes = TV::tensor(bs, DType::Int64);
  sizes.lengths = lengths;
  // Its length is max(lengths): a value, so never a constant, whatever the profiling runs saw.
  sizes.shape = {-1};
  sizes.rank_known = true;
  c.set(n->output(1), sizes);
}

// aten::_pad_packed_sequence(data, batch_sizes, batch_first, padding_value, total_length) -> (padded, lengths)
void pad_packed(Ctx& c, const TNode* n) {
  const TV& data = c.in(n, 0);
  if (!data.packed) throw UnsupportedError("pad_packed_sequence of data that is not a packed sequence");
  DType t = data.dtype;
  int r = static_cast<int>(data.shape.size());
  std::string lengths = data.lengths;
  std::string maxlen = c.b.reduce("ReduceMax", lengths, {0}, true);
  // The first max(lengths) steps (a Gather of those steps before Slice takes computed bounds).
  std::string y = c.b.opset() >= 10 ? c.b.slice_dyn(data.name, c.b.i64s({0}), maxlen, c.b.i64s({0}))
                                    : c.b.op1("Gather", {data.name, arange_of(c, maxlen)}, {Attribute::make_int("axis", 0)});
  // Steps past a sequence's length hold the padding value (ONNX RNNs leave zeros, the input of a
  // pack that no RNN ran on still holds its values).
  std::string mask = valid_steps(c, lengths);
  std::vector<int64_t> tail;
  for (int i = 2; i < r; ++i) tail.push_back(i);
  if (!tail.empty()) mask = c.b.unsqueeze(mask, tail);
  double pad = c.f(n, 3);
  y = c.b.op1("Where", {mask, y, c.b.scalar(pad, t)});
  // pad_packed_sequence passes the time length it wants: max(lengths), or the caller's total_length.
  const TV& total = c.in(n, 4);
  if (!(total.is_const() && total.c.isInt() && total.c.toInt() <= 0)) {
    std::string extra = c.b.op1("Sub", {c.b.unsqueeze(c.int_tensor(total), {0}), maxlen});
    std::string pads_end = c.b.concat({extra, c.b.i64s(std::vector<int64_t>(static_cast<size_t>(r - 1), 0))}, 0);
    y = pad_end(c, y, r, pads_end, pad, t, {0});
  }
  if (c.flag(n, 2)) {
    std::vector<int64_t> perm;
    for (int i = 0; i < r; ++i) perm.push_back(i);
    std::swap(perm[0], perm[1]);
    y = c.b.transpose(y, perm);
  }
  c.out(n, 0, y);
  c.out(n, 1, lengths);
}

// aten::lstm.input(input, hx[], params[], has_biases, num_layers, dropout, train, bidirectional, batch_first)
// aten::gru.input / rnn_tanh.input / rnn_relu.input (input, hx, params[], ...same)
// aten::lstm.data(data, batch_sizes, hx[], params[], ...), gru.data, ...: a packed input (time-major).
// One direction of an LSTM layer with a projection (proj_size): ONNX's LSTM has none, so a Loop over
// the steps with PyTorch's equations, h = W_hr (o * tanh(c)). x [T, B, In]; h0 [B, P] and c0 [B, H]
// (empty: zeros); p: w_ih, w_hh, [b_ih, b_hh,] w_hr. Returns Y [T, B, P] and the last h and c.
struct ProjDir {
  std::string y, h, c;
};
ProjDir proj_lstm_dir(Ctx& c, const std::string& x, const at::Tensor* p, bool has_biases, bool reverse,
                      const std::string& h0, const std::string& c0, DType t) {
  auto st = scalar_type_from_dtype(t);
  const at::Tensor& w_hr = p[has_biases ? 4 : 2];
  int64_t hidden = p[1].size(0) / 4, proj = w_hr.size(0);
  auto k = [&](const at::Tensor& a, const char* hint) {
    return c.b.constant(tensor_from_torch(a.contiguous().to(st)), hint);
  };
  std::string xw = c.b.op1("MatMul", {x, k(p[0].t(), "lstm_Wih_t")});
  if (has_biases) xw = c.b.op1("Add", {xw, k(p[2] + p[3], "lstm_b")});
  std::string whh = k(p[1].t(), "lstm_Whh_t"), whr = k(w_hr.t(), "lstm_Whr_t");
  std::string steps = c.b.dim(x, 0);
  std::string batch = c.b.slice(c.b.shape_of(x), {1}, {2}, {0});
  auto zeros = [&](int64_t width) {
    return c.b.op1("Expand", {c.b.scalar(0, t), c.b.concat({batch, c.b.i64s({width})}, 0)});
  };
  std::string hi = h0.empty() ? zeros(proj) : h0, ci = c0.empty() ? zeros(hidden) : c0;
  std::string last = reverse ? c.b.op1("Sub", {steps, c.b.i64(1)}) : std::string();

  auto g = std::make_shared<Graph>();
  g->name = c.b.fresh("lstm_proj_body");
  std::string iter = c.b.fresh("iter"), cond = c.b.fresh("cond"), h_in = c.b.fresh("h"), c_in = c.b.fresh("c");
  g->inputs.push_back({iter, Type::tensor(DType::Int64, Shape{}), {}});
  g->inputs.push_back({cond, Type::tensor(DType::Bool, Shape{}), {}});
  g->inputs.push_back({h_in, Type::tensor(t, Shape{{Dim::named("batch"), Dim::fixed(proj)}}), {}});
  g->inputs.push_back({c_in, Type::tensor(t, Shape{{Dim::named("batch"), Dim::fixed(hidden)}}), {}});
  c.b.push_graph(g.get());
  std::string step = reverse ? c.b.op1("Sub", {last, iter}) : iter;
  std::string gates = c.b.op1("Add", {c.b.op1("Gather", {xw, step}, {Attribute::make_int("axis", 0)}),
                                      c.b.op1("MatMul", {h_in, whh})});
  auto q = c.b.split(gates, {hidden, hidden, hidden, hidden}, 1);  // PyTorch's order: i, f, g, o
  std::string ig = c.b.op1("Sigmoid", {q[0]}), fg = c.b.op1("Sigmoid", {q[1]});
  std::string gg = c.b.op1("Tanh", {q[2]}), og = c.b.op1("Sigmoid", {q[3]});
  std::string c_out = c.b.op1("Add", {c.b.op1("Mul", {fg, c_in}), c.b.op1("Mul", {ig, gg})});
  std::string h_out = c.b.op1("MatMul", {c.b.op1("Mul", {og, c.b.op1("Tanh", {c_out})}), whr});
  g->outputs.push_back({c.b.op1("Identity", {cond}), Type::tensor(DType::Bool, Shape{}), {}});
  g->outputs.push_back({h_out, Type::tensor(t), {}});
  g->outputs.push_back({c_out, Type::tensor(t), {}});
  g->outputs.push_back({c.b.op1("Identity", {h_out}), Type::tensor(t), {}});
  c.b.pop_graph();
  auto outs = c.b.op("Loop", {steps, "", hi, ci}, {Attribute::make_graph("body", g)}, 3);
  std::string y = outs[2];
  if (reverse) {
    c.b.require(10, "a reverse LSTM direction with proj_size");
    y = c.b.slice(y, {-1}, {INT64_MIN}, {0}, {-1});
  }
  return {y, outs[0], outs[1]};
}

void rnn(Ctx& c, const TNode* n, Cell kind) {
  bool packed = n->schema().overload_name() == "data";
  if (!packed && n->schema().overload_name() != "input")
    throw UnsupportedError("recurrent op overload '" + n->schema().overload_name() + "'");
  const CellInfo ci = info(kind);
  bool has_biases = c.flag(n, arg(n, "has_biases")), bidir = c.flag(n, arg(n, "bidirectional"));
  bool batch_first = !packed && c.flag(n, arg(n, "batch_first"));
  int64_t layers = c.i(n, arg(n, "num_layers"));
  int64_t dirs = bidir ? 2 : 1;
  size_t hx_i = arg(n, "hx");
  std::vector<at::Tensor> params = const_tensors(c, n, arg(n, "params"), "weights");
  size_t per_dir = has_biases ? 4 : 2;
  // LSTM with proj_size: one more weight per direction (w_hr), the only layout with extra weights.
  bool proj = kind == Cell::LSTM && params.size() == (per_dir + 1) * static_cast<size_t>(layers * dirs);
  if (proj) per_dir += 1;
  if (params.size() != per_dir * static_cast<size_t>(layers * dirs))
    throw UnsupportedError("recurrent op with an unexpected number of weights");
  if (proj && packed) throw UnsupportedError("LSTM with proj_size on a packed sequence");
  DType t = c.out_dtype(n);

  // Initial states: [layers*dirs, batch, hidden] each.
  std::string h0, c0;
  if (kind == Cell::LSTM) {
    const TV& hx = c.in(n, hx_i);
    std::vector<TV> parts;
    if (hx.kind == TV::Kind::List) parts = hx.items;
    else if (hx.is_const() && hx.c.isList())
      for (const auto& e : hx.c.toListRef()) parts.push_back(TV::constant(e));
    if (parts.size() != 2) throw UnsupportedError("LSTM hx that is not a pair (h0, c0)");
    h0 = state_name(c, parts[0]);
    c0 = state_name(c, parts[1]);
  } else {
    h0 = state_name(c, c.in(n, hx_i));
  }
  if (!h0.empty()) h0 = c.b.cast(h0, t);
  if (!c0.empty()) c0 = c.b.cast(c0, t);

  std::string x, seq_lens;
  const TV& in0 = c.in(n, 0);
  if (packed) {
    if (!in0.packed) throw UnsupportedError("an RNN on packed data that pack_padded_sequence did not make");
    x = in0.dtype == t ? in0.name : c.b.cast(in0.name, t);
    seq_lens = c.b.cast(in0.lengths, DType::Int32);
  } else {
    x = c.t_as(n, 0, t);
  }
  if (batch_first) x = c.b.transpose(x, {1, 0, 2});
  std::vector<std::string> hn, cn;
  for (int64_t l = 0; l < layers && proj; ++l) {
    std::vector<std::string> ys;
    for (int64_t d = 0; d < dirs; ++d) {
      int64_t s_i = l * dirs + d;
      auto state = [&](const std::string& v) {
        return v.empty() ? std::string() : c.b.squeeze(c.b.slice(v, {s_i}, {s_i + 1}, {0}), {0});
      };
      ProjDir r = proj_lstm_dir(c, x, &params[static_cast<size_t>(s_i) * per_dir], has_biases, d == 1, state(h0),
                                state(c0), t);
      ys.push_back(r.y);
      hn.push_back(c.b.unsqueeze(r.h, {0}));
      cn.push_back(c.b.unsqueeze(r.c, {0}));
    }
    x = ys.size() == 1 ? ys[0] : c.b.concat(ys, 2);
  }
  for (int64_t l = 0; l < layers && !proj; ++l) {
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
    ins.push_back(seq_lens);  // empty: every sequence is full length
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
  if (packed) {
    TV out = TV::tensor(x, t);
    out.shape = {in0.shape.at(0), in0.shape.at(1), -1};
    out.rank_known = true;
    out.packed = true;
    out.lengths = in0.lengths;
    c.set(n->output(0), out);
  } else {
    c.out(n, 0, x);
  }
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
  t["aten::_pack_padded_sequence"] = {pack_padded};
  t["aten::_pad_packed_sequence"] = {pad_packed};
}

}  // namespace t2o
