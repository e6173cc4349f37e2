// Small float models for the quantizer tests, built in C++: an MLP (MatMul + Gemm) and a CNN
// (two Conv, pooling, Gemm), both ending in class logits.
#pragma once

#include <cmath>

#include "passes_support.h"

namespace t2o::test {

// x[batch, 64] -> MatMul 64x128 -> Add -> Relu -> Gemm (transB, 10x128, bias) -> logits[batch, 10]
inline Model mlp(int64_t opset = 17) {
  std::mt19937 g(7);
  ModelBuilder b(opset);
  b.input("x", {"batch", 64});
  b.init("w1", random_normal(g, {64, 128}, 0.125f)).init("b1", random_normal(g, {128}, 0.1f));
  b.init("w2", random_normal(g, {10, 128}, 0.09f)).init("b2", random_normal(g, {10}, 0.1f));
  b.node("MatMul", {"x", "w1"}, {"h"}, {}, "fc1").node("Add", {"h", "b1"}, {"hb"}, {}, "fc1_bias");
  b.node("Relu", {"hb"}, {"r"}, {}, "relu1");
  b.node("Gemm", {"r", "w2", "b2"}, {"logits"}, {Attribute::make_int("transB", 1)}, "fc2");
  b.output("logits", {"batch", 10});
  return b.m;
}

// x[1, C, S, S] -> Conv C1xCx3x3 (pad 1) -> Relu -> Conv C2xC1x3x3 (stride s) -> Relu
//   -> GlobalAveragePool -> Flatten -> Gemm (transB, 10xC2) -> logits[1, 10]
struct CnnShape {
  unsigned seed;
  int64_t c, size, c1, c2, stride;
  float w1, w2, w3;  // weight scales (about 1 / sqrt(fan-in))
};
inline Model two_conv_cnn(const CnnShape& k, int64_t opset) {
  std::mt19937 g(k.seed);
  ModelBuilder b(opset);
  b.input("x", {1, k.c, k.size, k.size});
  b.init("w1", random_normal(g, {k.c1, k.c, 3, 3}, k.w1)).init("b1", random_normal(g, {k.c1}, 0.1f));
  b.init("w2", random_normal(g, {k.c2, k.c1, 3, 3}, k.w2)).init("b2", random_normal(g, {k.c2}, 0.1f));
  b.init("w3", random_normal(g, {10, k.c2}, k.w3)).init("b3", random_normal(g, {10}, 0.1f));
  b.node("Conv", {"x", "w1", "b1"}, {"c1"}, {Attribute::make_ints("pads", {1, 1, 1, 1})}, "conv1");
  b.node("Relu", {"c1"}, {"r1"}, {}, "relu1");
  std::vector<Attribute> a2;
  if (k.stride != 1) a2.push_back(Attribute::make_ints("strides", {k.stride, k.stride}));
  b.node("Conv", {"r1", "w2", "b2"}, {"c2"}, a2, "conv2");
  b.node("Relu", {"c2"}, {"r2"}, {}, "relu2");
  b.node("GlobalAveragePool", {"r2"}, {"p"}, {}, "pool").node("Flatten", {"p"}, {"f"}, {}, "flatten");
  b.node("Gemm", {"f", "w3", "b3"}, {"logits"}, {Attribute::make_int("transB", 1)}, "fc");
  b.output("logits", {1, 10});
  return b.m;
}

// 3 -> 16 -> 32 channels (stride 2) on 16 x 16.
inline Model cnn(int64_t opset = 17) { return two_conv_cnn({11, 3, 16, 16, 32, 2, 0.27f, 0.12f, 0.25f}, opset); }

// 16 -> 32 -> 64 channels on 12 x 12: convs with enough multiply-adds per activation value for
// dynamic mode to quantize them (cnn()'s thin ones stay float there).
inline Model wide_cnn(int64_t opset = 17) { return two_conv_cnn({12, 16, 12, 32, 64, 1, 0.1f, 0.07f, 0.2f}, opset); }

// A recurrent layer for the int8 recurrent tests.
struct Layer {
  std::string op = "LSTM";
  std::string direction = "forward";
  int64_t hidden = 20, input = 7, seq = 9, batch = 3;
  int64_t linear_before_reset = 0;
  std::string activation;  // RNN: its activation ("" = Tanh)
  bool seq_lens = false;
};

inline int64_t gates(const Layer& l) { return l.op == "LSTM" ? 4 : l.op == "GRU" ? 3 : 1; }

// x[seq, batch, input] -> the layer (with bias, and sequence lengths when asked) -> Y and Y_h.
// Weights are scaled so that the gates see pre-activations of order 1, as trained layers do.
inline Model recurrent_model(const Layer& l, int64_t opset = 17) {
  std::mt19937 g(31);
  const int64_t D = l.direction == "bidirectional" ? 2 : 1, GH = gates(l) * l.hidden;
  ModelBuilder b(opset);
  b.input("x", {l.seq, l.batch, l.input});
  b.init("W", random_normal(g, {D, GH, l.input}, 1.0f / std::sqrt(static_cast<float>(l.input))));
  b.init("R", random_normal(g, {D, GH, l.hidden}, 1.0f / std::sqrt(static_cast<float>(l.hidden))));
  b.init("B", random_normal(g, {D, 2 * GH}, 0.1f));
  std::vector<std::string> ins = {"x", "W", "R", "B"};
  if (l.seq_lens) {
    Tensor lens(DType::Int32, {l.batch});
    for (int64_t i = 0; i < l.batch; ++i) lens.data<int32_t>()[i] = static_cast<int32_t>(l.seq - (i * 3) % l.seq);
    b.init("lens", lens);
    ins.push_back("lens");
  }
  std::vector<Attribute> attrs = {Attribute::make_int("hidden_size", l.hidden), Attribute::make_string("direction", l.direction)};
  if (l.op == "GRU") attrs.push_back(Attribute::make_int("linear_before_reset", l.linear_before_reset));
  if (!l.activation.empty()) attrs.push_back(Attribute::make_strings("activations", std::vector<std::string>(D, l.activation)));
  b.node(l.op, ins, {"y", "y_h"}, attrs, "rnn_layer");
  b.output("y", {l.seq, D, l.batch, l.hidden}).output("y_h", {D, l.batch, l.hidden});
  return b.m;
}

}  // namespace t2o::test
