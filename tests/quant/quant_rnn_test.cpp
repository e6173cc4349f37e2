// int8 recurrent layers: what the quantizer writes for LSTM / GRU / RNN (int8 W and R behind
// DequantizeLinear, the layer named in the metadata), and the runtime's Int8LSTM / Int8GRU /
// Int8RNN against the float model and against its own reference kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "onnx/check.h"
#include "quant/quant.h"
#include "quant_models.h"
#include "runtime/kernels/rnn_fast.h"
#include "runtime/optimize.h"
#include "runtime/session.h"

using namespace t2o;
using namespace t2o::test;

namespace {

std::string metadata(const Model& m) {
  for (const auto& [k, v] : m.metadata_props)
    if (k == kInt8RecurrentKey) return v;
  return "";
}

std::map<std::string, RValue> run(const Model& m, const Tensor& x, bool fast = true) {
  SessionOptions so;
  so.fast_paths = fast;
  so.threads = 2;
  return Session(m, so).run({{"x", x}});
}

Tensor input_for(const Layer& l, uint32_t seed) {
  std::mt19937 g(seed);
  return random_normal(g, {l.seq, l.batch, l.input}, 1.0f);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a.as_double(i) - b.as_double(i)));
  return m;
}

double cosine(const Tensor& a, const Tensor& b) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    ab += a.as_double(i) * b.as_double(i);
    aa += a.as_double(i) * a.as_double(i);
    bb += b.as_double(i) * b.as_double(i);
  }
  return ab / std::sqrt(aa * bb);
}

int count_after_runtime_rewrites(const Model& m, const std::string& op) {
  Model r = m;
  optimize_for_runtime(r);
  return count_op(r, op);
}

TEST(QuantRecurrent, WeightsBecomeInt8AndTheLayerIsNamed) {
  Layer l;
  l.direction = "bidirectional";
  for (QuantMode mode : {QuantMode::Dynamic, QuantMode::Static}) {
    for (bool per_channel : {false, true}) {
      SCOPED_TRACE(std::string(mode == QuantMode::Dynamic ? "dynamic" : "static") + (per_channel ? " per-channel" : ""));
      Model q = recurrent_model(l);
      QuantizeOptions o;
      o.mode = mode;
      o.per_channel = per_channel;
      std::vector<std::string> warnings;
      o.warn = [&](const std::string& w) { warnings.push_back(w); };
      QuantizeResult r = quantize(q, o);
      EXPECT_NO_THROW(check_model(q));
      EXPECT_EQ(r.quantized, 1);
      EXPECT_EQ(r.by_op["LSTM"], 1);
      EXPECT_EQ(r.calibration_samples, 0) << "nothing to calibrate";
      EXPECT_TRUE(warnings.empty()) << "no generated-calibration warning when nothing is calibrated";
      EXPECT_EQ(metadata(q), "rnn_layer");
      const Node* lstm = nullptr;
      for (const Node& n : q.graph.nodes)
        if (n.op_type == "LSTM") lstm = &n;
      ASSERT_NE(lstm, nullptr);
      for (int k : {1, 2}) {
        const Node* dq = nullptr;
        for (const Node& n : q.graph.nodes)
          if (n.op_type == "DequantizeLinear" && n.outputs[0] == lstm->inputs[static_cast<size_t>(k)]) dq = &n;
        ASSERT_NE(dq, nullptr) << "input " << k;
        const Initializer* w = q.graph.find_initializer(dq->inputs[0]);
        const Initializer* s = q.graph.find_initializer(dq->inputs[1]);
        ASSERT_TRUE(w && s);
        EXPECT_EQ(w->tensor.dtype(), DType::Int8);
        EXPECT_EQ(s->tensor.numel(), per_channel ? gates(l) * l.hidden : 1);
        EXPECT_EQ(dq->attr_int("axis", -1), per_channel ? 1 : -1);
      }
      EXPECT_EQ(q.graph.find_initializer("W"), nullptr) << "the float weights are gone";
      EXPECT_EQ(q.graph.find_initializer("R"), nullptr);
    }
  }
}

TEST(QuantRecurrent, ExcludedAndComputedWeightsStayFloat) {
  Model q = recurrent_model(Layer{});
  QuantizeOptions o;
  o.exclude = {"LSTM"};
  QuantizeResult r = quantize(q, o);
  EXPECT_EQ(r.quantized, 0);
  EXPECT_EQ(metadata(q), "");
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("excluded"), std::string::npos);
}

// The int8 layer in the runtime against the float model: the activations are quantized per row
// with 255 levels, so the outputs move by about a percent of a step's range, no more.
TEST(QuantRecurrent, Int8LayersStayCloseToFloat) {
  if (!kern::rnn_int8_supported()) GTEST_SKIP() << "no AVX-512 VNNI: the int8 layers run as written";
  std::vector<Layer> layers;
  layers.push_back(Layer{});
  Layer bi;
  bi.direction = "bidirectional";
  bi.seq_lens = true;
  layers.push_back(bi);
  Layer rev;
  rev.direction = "reverse";
  rev.batch = 10;  // more rows than one register block
  layers.push_back(rev);
  Layer big;
  big.hidden = 64, big.input = 48, big.batch = 1, big.seq = 30;
  layers.push_back(big);
  for (int64_t lbr : {0, 1}) {
    Layer gru;
    gru.op = "GRU";
    gru.linear_before_reset = lbr;
    gru.hidden = 35;
    layers.push_back(gru);
  }
  Layer rnn;
  rnn.op = "RNN";
  layers.push_back(rnn);
  Layer relu = rnn;
  relu.activation = "Relu";
  layers.push_back(relu);
  for (const Layer& l : layers) {
    SCOPED_TRACE(l.op + " " + l.direction + " lbr " + std::to_string(l.linear_before_reset) + " " + l.activation +
                 " H " + std::to_string(l.hidden) + " batch " + std::to_string(l.batch));
    for (bool per_channel : {false, true}) {
      Model f = recurrent_model(l);
      Model q = f;
      QuantizeOptions o;
      o.per_channel = per_channel;
      quantize(q, o);
      EXPECT_EQ(count_after_runtime_rewrites(q, "Int8" + l.op), 1);
      Tensor x = input_for(l, 3);
      auto want = run(f, x);
      uint64_t before = kern::rnn_int8_runs();
      auto got = run(q, x);
      EXPECT_EQ(kern::rnn_int8_runs(), before + 1) << "the int8 fast path ran";
      for (const char* out : {"y", "y_h"}) {
        const Tensor& a = want.at(out).tensor;
        const Tensor& b = got.at(out).tensor;
        ASSERT_EQ(a.dims(), b.dims());
        double d = max_abs_diff(a, b), c = cosine(a, b);
        EXPECT_LT(d, 0.06) << out;
        EXPECT_GT(c, 0.999) << out;
        EXPECT_GT(d, 0) << out << ": int8 products cannot be exact on these values";
      }
      if (l.seq_lens) {
        // Steps past a row's length stay zero, as in the float layer.
        const Tensor& y = got.at("y").tensor;
        const Tensor& y0 = want.at("y").tensor;
        for (int64_t i = 0; i < y.numel(); ++i)
          if (y0.as_double(i) == 0) ASSERT_EQ(y.as_double(i), 0) << i;
      }
    }
  }
}

// The runtime's int8 layer on its reference kernel (fast paths off, as on CPUs without VNNI)
// computes the float layer on the dequantized weights: what the file says, to float rounding.
TEST(QuantRecurrent, Int8ReferenceKernelRunsTheDequantizedWeights) {
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    SCOPED_TRACE(op);
    Layer l;
    l.op = op;
    l.direction = "bidirectional";
    Model q = recurrent_model(l);
    QuantizeOptions o;
    o.per_channel = true;
    quantize(q, o);
    // The rewrite as the runtime makes it (independent of this CPU): the int8 weights and their
    // scales read directly.
    Model r = q;
    Node& n = r.graph.nodes.back();
    ASSERT_EQ(n.op_type, op);
    std::map<std::string, const Node*> dq;
    for (const Node& d : r.graph.nodes)
      if (d.op_type == "DequantizeLinear") dq[d.outputs[0]] = &d;
    const Node* w = dq.at(n.inputs[1]);
    const Node* rr = dq.at(n.inputs[2]);
    n.domain = kInternalDomain;
    n.op_type = std::string("Int8") + op;
    n.inputs.resize(8);
    n.inputs[1] = w->inputs[0];
    n.inputs[2] = rr->inputs[0];
    n.inputs.push_back(w->inputs[1]);
    n.inputs.push_back(rr->inputs[1]);
    r.opset_import.push_back({kInternalDomain, 1});
    r.metadata_props.clear();
    Tensor x = input_for(l, 4);
    auto want = run(q, x, false);
    auto got = run(r, x, false);
    for (const char* out : {"y", "y_h"}) EXPECT_LT(max_abs_diff(want.at(out).tensor, got.at(out).tensor), 1e-6) << out;
  }
}

// Without the metadata a DequantizeLinear -> LSTM file runs in float on the dequantized weights.
TEST(QuantRecurrent, WithoutTheMetadataTheLayerRunsAsWritten) {
  Model q = recurrent_model(Layer{});
  quantize(q, QuantizeOptions{});
  Model plain = q;
  plain.metadata_props.clear();
  EXPECT_EQ(count_after_runtime_rewrites(plain, "Int8LSTM"), 0);
  Tensor x = input_for(Layer{}, 5);
  uint64_t before = kern::rnn_int8_runs();
  auto fast = run(plain, x);
  EXPECT_EQ(kern::rnn_int8_runs(), before);
  auto ref = run(plain, x, false);
  EXPECT_LT(max_abs_diff(fast.at("y").tensor, ref.at("y").tensor), 1e-5);
}

// A NaN in one row's input ends as it does in the float layer, and leaves the other rows alone.
TEST(QuantRecurrent, NanInputsPropagate) {
  if (!kern::rnn_int8_supported()) GTEST_SKIP() << "no AVX-512 VNNI";
  Layer l;
  l.batch = 2;
  Model f = recurrent_model(l);
  Model q = f;
  quantize(q, QuantizeOptions{});
  Tensor x = input_for(l, 6);
  x.data<float>()[l.input + 2] = std::numeric_limits<float>::quiet_NaN();  // step 0, row 1
  auto want = run(f, x);
  auto got = run(q, x);
  const Tensor& a = want.at("y_h").tensor;
  const Tensor& b = got.at("y_h").tensor;
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(std::isnan(a.as_double(i)), std::isnan(b.as_double(i))) << i;
  EXPECT_FALSE(std::isnan(b.as_double(0))) << "row 0 has no NaN";
}

}  // namespace
