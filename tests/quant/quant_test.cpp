// t2o_quant: dynamic and static (QDQ) int8 quantization of a small MLP and CNN, calibration,
// and the accuracy report.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "onnx/check.h"
#include "onnx/tensor_io.h"
#include "passes/graph_util.h"
#include "quant/quant.h"
#include "quant_models.h"
#include "runtime/kernels/conv_dnnl.h"
#include "runtime/kernels/int8.h"
#include "runtime/optimize.h"

namespace fs = std::filesystem;
using namespace t2o;
using namespace t2o::test;

namespace {

const Initializer* init_named(const Model& m, const std::string& name) { return m.graph.find_initializer(name); }

const Node* first(const Model& m, const std::string& op) {
  for (const Node& n : m.graph.nodes)
    if (n.op_type == op) return &n;
  return nullptr;
}

// Quantizes a copy and checks what every quantized model must be: valid ONNX, close to the float
// model on held-out inputs, weights about 4x smaller.
Model quantized(const Model& m, const QuantizeOptions& o, QuantizeResult* out = nullptr) {
  Model q = m;
  QuantizeResult r = quantize(q, o);
  EXPECT_NO_THROW(check_model(q));
  EXPECT_GT(r.quantized, 0);
  EXPECT_GT(static_cast<double>(r.initializer_bytes_before) / static_cast<double>(r.initializer_bytes_after), 3.5)
      << r.initializer_bytes_before << " -> " << r.initializer_bytes_after;
  if (out) *out = r;
  return q;
}

void expect_close_to_float(const Model& f, const Model& q, double min_cosine = 0.99) {
  auto held_out = generate_input_sets(f, 6, 500);
  AccuracyReport a = compare_accuracy(f, q, held_out, 0);
  ASSERT_EQ(a.outputs.size(), f.graph.outputs.size());
  for (const OutputAccuracy& o : a.outputs) {
    EXPECT_GT(o.cosine, min_cosine) << o.name;
    EXPECT_GT(o.max_abs, 0) << o.name << ": int8 arithmetic cannot be exact on these values";
    ASSERT_TRUE(o.top1.has_value()) << o.name << " is shaped like logits";
  }
}

// How many elements of c are within tol * (1 + |a|) of a's (same dims).
int64_t count_close(const Tensor& a, const Tensor& c, double tol) {
  int64_t close = 0;
  for (int64_t i = 0; i < a.numel(); ++i) close += std::fabs(a.as_double(i) - c.as_double(i)) <= tol * (1 + std::fabs(a.as_double(i)));
  return close;
}

TEST(QuantDynamic, MlpBecomesIntegerMatMuls) {
  Model f = mlp();
  QuantizeOptions o;
  QuantizeResult r;
  Model q = quantized(f, o, &r);
  EXPECT_EQ(r.quantized, 2);
  EXPECT_EQ(r.by_op["MatMul"], 1);
  EXPECT_EQ(r.by_op["Gemm"], 1);
  EXPECT_EQ(count_op(q, "MatMul") + count_op(q, "Gemm"), 0);
  EXPECT_EQ(count_op(q, "MatMulInteger"), 2);
  EXPECT_EQ(count_op(q, "DynamicQuantizeLinear"), 2);
  EXPECT_EQ(init_named(q, "w1"), nullptr) << "the float weight is gone";
  // Gemm's transB=1 weight is stored transposed, [K, N], as MatMulInteger reads it.
  const Node* mi = nullptr;
  for (const Node& n : q.graph.nodes)
    if (n.op_type == "MatMulInteger" && n.name.find("fc2") != std::string::npos) mi = &n;
  ASSERT_NE(mi, nullptr);
  const Initializer* w = init_named(q, mi->inputs[1]);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->tensor.dtype(), DType::Int8);
  EXPECT_EQ(w->tensor.dims(), (Dims{128, 10}));
  expect_close_to_float(f, q);
}

TEST(QuantDynamic, PerChannelScalesPerColumn) {
  Model f = mlp();
  QuantizeOptions o;
  o.per_channel = true;
  Model q = quantized(f, o);
  const Node* mi = first(q, "MatMulInteger");
  ASSERT_NE(mi, nullptr);
  // The scale Mul reads the weight's per-column scales.
  bool found = false;
  for (const Initializer& i : q.graph.initializers)
    if (i.name.find("w1_scale") != std::string::npos) {
      found = true;
      EXPECT_EQ(i.tensor.dims(), (Dims{128}));
    }
  EXPECT_TRUE(found);
  expect_close_to_float(f, q);
}

TEST(QuantDynamic, WeightsRoundTripWithinHalfAStep) {
  Model f = mlp();
  Model q = quantized(f, {});
  const Tensor& w = init_named(f, "w1")->tensor;
  const Tensor& wq = init_named(q, first(q, "MatMulInteger")->inputs[1])->tensor;
  float scale = 0;
  for (const Initializer& i : q.graph.initializers)
    if (i.name.find("w1_scale") != std::string::npos) scale = i.tensor.data<float>()[0];
  ASSERT_GT(scale, 0);
  float absmax = 0;
  for (int64_t i = 0; i < w.numel(); ++i) absmax = std::max(absmax, std::fabs(w.data<float>()[i]));
  EXPECT_FLOAT_EQ(scale, absmax / 127.0f);
  for (int64_t i = 0; i < w.numel(); ++i)
    ASSERT_LE(std::fabs(wq.data<int8_t>()[i] * scale - w.data<float>()[i]), 0.5f * scale * 1.0001f) << i;
}

TEST(QuantDynamic, ExcludeByOpTypeAndName) {
  Model f = mlp();
  QuantizeOptions o;
  o.exclude = {"Gemm"};
  Model q = f;
  QuantizeResult r = quantize(q, o);
  EXPECT_EQ(r.quantized, 1);
  EXPECT_EQ(count_op(q, "Gemm"), 1);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("fc2"), std::string::npos);
  o.exclude = {"fc1"};
  q = f;
  r = quantize(q, o);
  EXPECT_EQ(r.quantized, 1);
  EXPECT_EQ(count_op(q, "MatMul"), 1);
}

// Dynamic mode quantizes 2-d convolutions too (ConvInteger, scales and bias per output channel as
// [M, 1, 1]) where that pays; thin convs, and 1-d ones, stay float with the reason in the skip list.
TEST(QuantDynamic, CnnConvsBecomeConvInteger) {
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per-channel" : "per-tensor");
    Model f = wide_cnn();
    QuantizeOptions o;
    o.per_channel = per_channel;
    QuantizeResult r;
    Model q = quantized(f, o, &r);
    EXPECT_EQ(r.quantized, 3);
    EXPECT_EQ(r.by_op["Conv"], 2);
    EXPECT_EQ(count_op(q, "Conv"), 0);
    EXPECT_EQ(count_op(q, "ConvInteger"), 2);
    EXPECT_EQ(count_op(q, "MatMulInteger"), 1);
    const Node* ci = first(q, "ConvInteger");
    ASSERT_NE(ci, nullptr);
    EXPECT_EQ(ci->attr_ints("pads", {}), (std::vector<int64_t>{1, 1, 1, 1}));
    EXPECT_EQ(init_named(q, ci->inputs[1])->tensor.dtype(), DType::Int8);
    // The biases and (per channel) the weight scales broadcast over [N, M, H, W] as [M, 1, 1].
    int channel_biases = 0;
    for (const Node& n : q.graph.nodes)
      if (const Initializer* b = n.op_type == "Add" ? init_named(q, n.inputs[1]) : nullptr; b && b->tensor.rank() == 3) {
        EXPECT_EQ(b->tensor.dim(1) * b->tensor.dim(2), 1) << n.name;
        ++channel_biases;
      }
    EXPECT_EQ(channel_biases, 2);
    const Initializer* ws = init_named(q, "w1_scale");
    ASSERT_NE(ws, nullptr);
    EXPECT_EQ(ws->tensor.dims(), per_channel ? (Dims{32, 1, 1}) : Dims{});
    expect_close_to_float(f, q);
  }
  // --exclude Conv keeps them float.
  Model q = wide_cnn();
  QuantizeOptions o;
  o.exclude = {"Conv"};
  EXPECT_EQ(quantize(q, o).quantized, 1);
  EXPECT_EQ(count_op(q, "Conv"), 2);
  // cnn()'s convs (3 -> 16 channels, and 16 -> 32 at stride 2) move more activation values than
  // they multiply: int8 with run-time quantization would be slower, so they stay float.
  Model thin = cnn();
  QuantizeResult rt = quantize(thin, {});
  EXPECT_EQ(rt.quantized, 1);
  EXPECT_EQ(count_op(thin, "Conv"), 2);
  ASSERT_EQ(rt.skipped.size(), 2u);
  for (const std::string& why : rt.skipped) EXPECT_NE(why.find("does not pay"), std::string::npos) << why;
  // A 1-d conv is skipped with its reason.
  std::mt19937 g(3);
  ModelBuilder b;
  b.input("x", {1, 32, 20});
  b.init("w", random_normal(g, {64, 32, 3}, 0.1f));
  b.node("Conv", {"x", "w"}, {"y"}, {}, "conv1d");
  b.output("y", {1, 64, 18});
  QuantizeResult r1 = quantize(b.m, {});
  EXPECT_EQ(r1.quantized, 0);
  ASSERT_EQ(r1.skipped.size(), 1u);
  EXPECT_NE(r1.skipped[0].find("2-d"), std::string::npos) << r1.skipped[0];
}

TEST(QuantDynamic, OldOpsetIsRefused) {
  Model f = mlp(10);
  try {
    quantize(f, {});
    FAIL() << "opset 10 has no DynamicQuantizeLinear";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUnsupported);
    EXPECT_NE(std::string(e.what()).find("opset 11"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("convert-version"), std::string::npos);
  }
}

TEST(QuantStatic, CnnGetsQdqPairsAndInt8Weights) {
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per-channel" : "per-tensor");
    Model f = cnn();
    QuantizeOptions o;
    o.mode = QuantMode::Static;
    o.per_channel = per_channel;
    o.calibration = generate_input_sets(f, 8, 1);
    QuantizeResult r;
    Model q = quantized(f, o, &r);
    EXPECT_EQ(r.quantized, 3);
    EXPECT_EQ(r.calibration_samples, 8);
    EXPECT_FALSE(r.generated_calibration);
    // Activations x, r1 and f; weights w1, w2, w3.
    EXPECT_EQ(count_op(q, "QuantizeLinear"), 3);
    EXPECT_EQ(count_op(q, "DequantizeLinear"), 6);
    for (const Node& n : q.graph.nodes) {
      if (n.op_type != "Conv" && n.op_type != "Gemm") continue;
      for (int k = 0; k < 2; ++k) {
        int producer = -1;
        for (size_t i = 0; i < q.graph.nodes.size(); ++i)
          for (const auto& out : q.graph.nodes[i].outputs)
            if (out == n.inputs[static_cast<size_t>(k)]) producer = static_cast<int>(i);
        ASSERT_GE(producer, 0) << n.name << " input " << k;
        EXPECT_EQ(q.graph.nodes[static_cast<size_t>(producer)].op_type, "DequantizeLinear") << n.name << " input " << k;
      }
      const Node* dq = nullptr;
      for (const Node& d : q.graph.nodes)
        if (d.outputs[0] == n.inputs[1]) dq = &d;
      const Tensor& wq = init_named(q, dq->inputs[0])->tensor;
      EXPECT_EQ(wq.dtype(), DType::Int8);
      const Tensor& s = init_named(q, dq->inputs[1])->tensor;
      if (per_channel) {
        EXPECT_EQ(s.numel(), wq.dim(0));  // Conv [M, C, kh, kw]; Gemm with transB=1 [N, K]
        EXPECT_EQ(dq->attr_int("axis", -1), 0);
      } else {
        EXPECT_EQ(s.numel(), 1);
      }
    }
    expect_close_to_float(f, q);
  }
}

TEST(QuantStatic, MlpActivationScaleCoversCalibratedRange) {
  Model f = mlp();
  QuantizeOptions o;
  o.mode = QuantMode::Static;
  o.calibration = generate_input_sets(f, 4, 3);
  Model q = quantized(f, o);
  float lo = 0, hi = 0;
  for (const InputSet& s : o.calibration) {
    const Tensor& x = s.at("x");
    for (int64_t i = 0; i < x.numel(); ++i) lo = std::min(lo, x.data<float>()[i]), hi = std::max(hi, x.data<float>()[i]);
  }
  const Node* ql = nullptr;
  for (const Node& n : q.graph.nodes)
    if (n.op_type == "QuantizeLinear" && n.inputs[0] == "x") ql = &n;
  ASSERT_NE(ql, nullptr);
  float scale = init_named(q, ql->inputs[1])->tensor.data<float>()[0];
  int zp = init_named(q, ql->inputs[2])->tensor.data<uint8_t>()[0];
  EXPECT_FLOAT_EQ(scale, (hi - lo) / 255.0f);
  EXPECT_EQ(zp, static_cast<int>(std::nearbyint(-lo / scale)));
  expect_close_to_float(f, q);
}

TEST(QuantStatic, PercentileNarrowsTheRange) {
  Model f = mlp();
  auto scale_of_x = [&](CalibMethod m) {
    QuantizeOptions o;
    o.mode = QuantMode::Static;
    o.method = m;
    o.percentile = 99.0;
    o.calibration = generate_input_sets(f, 16, 3);  // 16 sets of 2 rows: 2048 values of x
    Model q = f;
    quantize(q, o);
    for (const Node& n : q.graph.nodes)
      if (n.op_type == "QuantizeLinear" && n.inputs[0] == "x") return init_named(q, n.inputs[1])->tensor.data<float>()[0];
    return 0.0f;
  };
  float minmax = scale_of_x(CalibMethod::MinMax), pct = scale_of_x(CalibMethod::Percentile);
  ASSERT_GT(pct, 0);
  // Normal inputs: the 1%/99% quantiles sit near +-2.3 sigma, well inside the extremes of 2048 draws (~+-3.4).
  EXPECT_LT(pct, 0.8f * minmax);
}

// Entropy calibration clips a range that a few outliers stretch: normal inputs with one value
// at 40 keep nearly all their mass within +-4, and the chosen range covers that, not the outlier.
TEST(QuantStatic, EntropyClipsOutliersButKeepsTheBulk) {
  Model f = mlp();
  std::vector<InputSet> sets = generate_input_sets(f, 16, 3);  // 2048 values of x ~ N(0, 1)
  Tensor x0 = sets[0].at("x").clone();
  x0.data<float>()[5] = 40.0f;
  sets[0]["x"] = x0;
  auto range_of_x = [&](CalibMethod m) {
    QuantizeOptions o;
    o.mode = QuantMode::Static;
    o.method = m;
    o.calibration = sets;
    Model q = f;
    quantize(q, o);
    for (const Node& n : q.graph.nodes)
      if (n.op_type == "QuantizeLinear" && n.inputs[0] == "x") {
        float s = init_named(q, n.inputs[1])->tensor.data<float>()[0];
        int z = init_named(q, n.inputs[2])->tensor.data<uint8_t>()[0];
        return std::make_pair(-s * static_cast<float>(z), s * static_cast<float>(255 - z));
      }
    return std::make_pair(0.0f, 0.0f);
  };
  auto [mlo, mhi] = range_of_x(CalibMethod::MinMax);
  auto [elo, ehi] = range_of_x(CalibMethod::Entropy);
  EXPECT_GT(mhi, 39.0f);
  EXPECT_LT(ehi, 10.0f) << "the outlier decided the range";
  EXPECT_GT(ehi, 2.5f) << "the bulk of the distribution is clipped";
  EXPECT_LT(elo, -2.5f);
  EXPECT_GE(elo, mlo);
  // And the model stays close to the float one on held-out inputs.
  QuantizeOptions o;
  o.mode = QuantMode::Static;
  o.method = CalibMethod::Entropy;
  o.calibration = sets;
  expect_close_to_float(f, quantized(f, o));
}

// QOperator: Conv -> QLinearConv (int32 bias), Gemm -> QLinearMatMul + Add, the Relus absorbed
// into the uint8 outputs, and one QuantizeLinear for the whole chain.
TEST(QuantStatic, QOperatorCnnChainsInInt8) {
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per-channel" : "per-tensor");
    Model f = cnn();
    QuantizeOptions o;
    o.mode = QuantMode::Static;
    o.format = QuantFormat::QOperator;
    o.per_channel = per_channel;
    o.calibration = generate_input_sets(f, 8, 1);
    QuantizeResult r;
    Model q = quantized(f, o, &r);
    EXPECT_EQ(r.quantized, 3);
    EXPECT_EQ(count_op(q, "QLinearConv"), 2);
    EXPECT_EQ(count_op(q, "QLinearMatMul"), 1);
    for (const char* op : {"Conv", "Gemm", "MatMul", "Relu"}) EXPECT_EQ(count_op(q, op), 0) << op;
    EXPECT_EQ(count_op(q, "QuantizeLinear"), 2);  // x, and the pooled features
    const Node* c1 = first(q, "QLinearConv");
    const Node* c2 = nullptr;
    for (const Node& n : q.graph.nodes)
      if (n.op_type == "QLinearConv" && &n != c1) c2 = &n;
    ASSERT_TRUE(c1 && c2);
    EXPECT_EQ(c2->inputs[0], c1->outputs[0]) << "conv2 reads conv1's uint8 output directly";
    // The absorbed Relu: conv1's output zero point is 0.
    EXPECT_EQ(init_named(q, c1->inputs[7])->tensor.data<uint8_t>()[0], 0);
    const Tensor& bias = init_named(q, c1->inputs[8])->tensor;
    EXPECT_EQ(bias.dtype(), DType::Int32);
    EXPECT_EQ(init_named(q, c1->inputs[4])->tensor.numel(), per_channel ? 16 : 1);
    EXPECT_EQ(c1->attr_ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
    expect_close_to_float(f, q);
    // The runtime's int8 path (QLinearConv as Int8Conv) against the reference kernels.
    std::mt19937 g(9);
    auto feeds = feeds_for(q, g, {});
    Session fast(q);
    auto want = run_ref(q, feeds);
    auto got = fast.run(feeds);
    const Tensor& a = want.at("logits").tensor;
    EXPECT_GE(count_close(a, got.at("logits").tensor, 1e-4), a.numel() - 1);
  }
}

// MatMul -> Add -> Relu -> Gemm: the MatMul's output feeds an Add, so it is dequantized; the Gemm
// splits into QLinearMatMul + Add with beta and alpha folded into constants.
TEST(QuantStatic, QOperatorMlpSplitsTheGemm) {
  Model f = mlp();
  for (Node& n : f.graph.nodes)
    if (n.op_type == "Gemm") n.set_attr(Attribute::make_float("alpha", 0.5f)), n.set_attr(Attribute::make_float("beta", 2.0f));
  QuantizeOptions o;
  o.mode = QuantMode::Static;
  o.format = QuantFormat::QOperator;
  o.calibration = generate_input_sets(f, 8, 1);
  Model q = quantized(f, o);
  EXPECT_EQ(count_op(q, "QLinearMatMul"), 2);
  EXPECT_EQ(count_op(q, "Gemm"), 0);
  EXPECT_EQ(count_op(q, "Add"), 2);
  expect_close_to_float(f, q);
}

TEST(QuantStatic, GeneratedCalibrationWarns) {
  Model f = cnn();
  QuantizeOptions o;
  o.mode = QuantMode::Static;
  std::vector<std::string> warnings;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  Model q = quantized(f, o);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("GENERATED"), std::string::npos);
  EXPECT_NE(warnings[0].find("not for production"), std::string::npos);
}

TEST(QuantStatic, PerChannelNeedsOpset13) {
  Model f = cnn(12);
  QuantizeOptions o;
  o.mode = QuantMode::Static;
  o.per_channel = true;
  EXPECT_THROW(quantize(f, o), Error);
  o.per_channel = false;
  Model q = f;
  quantize(q, o);  // per-tensor QDQ is fine at opset 12
  EXPECT_NO_THROW(check_model(q));
}

class InputSets : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("t2o_quant_sets_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(InputSets, FilesFoldersAndStacks) {
  Model f = cnn();
  std::mt19937 g(3);
  write_npy((dir_ / "a.npy").string(), random_normal(g, {1, 3, 16, 16}));
  write_npy((dir_ / "b.npy").string(), random_normal(g, {1, 3, 16, 16}));
  write_npy((dir_ / "stack.npy").string(), random_normal(g, {5, 1, 3, 16, 16}));
  EXPECT_EQ(load_input_sets(f, {(dir_ / "a.npy").string()}).size(), 1u);
  EXPECT_EQ(load_input_sets(f, {(dir_ / "stack.npy").string()}).size(), 5u);
  EXPECT_EQ(load_input_sets(f, {dir_.string()}).size(), 7u);
  fs::create_directories(dir_ / "sets" / "0");
  fs::create_directories(dir_ / "sets" / "1");
  write_npy((dir_ / "sets" / "0" / "x.npy").string(), random_normal(g, {1, 3, 16, 16}));
  write_npy((dir_ / "sets" / "1" / "x.npy").string(), random_normal(g, {1, 3, 16, 16}));
  auto sets = load_input_sets(f, {(dir_ / "sets").string()});
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(sets[0].at("x").dims(), (Dims{1, 3, 16, 16}));
  // Calibrating on them works end to end.
  QuantizeOptions o;
  o.mode = QuantMode::Static;
  o.calibration = sets;
  Model q = quantized(f, o);
  EXPECT_EQ(count_op(q, "QuantizeLinear"), 3);
}

TEST_F(InputSets, BadDataIsAnInputError) {
  Model f = cnn();
  std::mt19937 g(3);
  write_npy((dir_ / "wrong.npy").string(), random_normal(g, {1, 3, 8, 8}));
  Tensor ints(DType::Int64, {1, 3, 16, 16});
  write_npy((dir_ / "ints.npy").string(), ints);
  for (const std::string& p : {(dir_ / "wrong.npy").string(), (dir_ / "ints.npy").string(),
                               (dir_ / "missing.npy").string()}) {
    try {
      load_input_sets(f, {p});
      FAIL() << p;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), kExitBadInput) << p << ": " << e.what();
    }
  }
  fs::create_directories(dir_ / "empty");
  EXPECT_THROW(load_input_sets(f, {(dir_ / "empty").string()}), InputError);
}

TEST(QuantAccuracy, ReportsDifferencesAndTop1) {
  Model f = mlp();
  Model same = f;
  auto sets = generate_input_sets(f, 3, 9);
  AccuracyReport a = compare_accuracy(f, same, sets, 1);
  ASSERT_EQ(a.outputs.size(), 1u);
  EXPECT_EQ(a.outputs[0].max_abs, 0);
  EXPECT_NEAR(a.outputs[0].cosine, 1.0, 1e-12);
  ASSERT_TRUE(a.outputs[0].top1);
  EXPECT_EQ(*a.outputs[0].top1, 1.0);
  EXPECT_EQ(a.outputs[0].rows, 3 * sets[0].at("x").dim(0));
  EXPECT_GE(a.outputs[0].classes, 1);
  EXPECT_EQ(a.drop(), 0);
  EXPECT_GT(a.float_ms, 0);
  // Negated logits: argmax becomes argmin, cosine -1.
  Model neg = f;
  neg.graph.nodes.back().outputs[0] = "pre";
  neg.graph.nodes.push_back(passes::make_node("Neg", {"pre"}, {"logits"}, "neg"));
  AccuracyReport b = compare_accuracy(f, neg, sets, 0);
  EXPECT_NEAR(b.outputs[0].cosine, -1.0, 1e-9);
  EXPECT_LT(*b.outputs[0].top1, 0.5);
  EXPECT_GT(b.drop(), 0.5);
}

}  // namespace

namespace {

// The runtime folds DequantizeLinear of constant weights at session build (fast paths only): the
// result must be what the graph as written computes.
TEST(QuantRuntime, FoldedWeightDequantizeMatchesReference) {
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per-channel" : "per-tensor");
    std::mt19937 g(4);
    ModelBuilder b;
    b.input("x", {"batch", 64});
    Tensor wq(DType::Int8, {64, 16});
    std::uniform_int_distribution<int> u(-127, 127);
    for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(u(g));
    b.init("wq", wq).init("ws", per_channel ? random_uniform(g, {16}, 0.01f, 0.02f) : Tensor::scalar<float>(0.015f));
    b.init("wz", per_channel ? Tensor(DType::Int8, {16}) : Tensor::scalar<int8_t>(0));
    std::vector<Attribute> axis;
    if (per_channel) axis.push_back(Attribute::make_int("axis", 1));
    b.node("DequantizeLinear", {"wq", "ws", "wz"}, {"w"}, axis).node("MatMul", {"x", "w"}, {"y"});
    b.output("y", {"batch", 16});
    auto feeds = feeds_for(b.m, g, {{"batch", 3}});
    Session fast(b.m);
    expect_same_outputs(run_ref(b.m, feeds), fast.run(feeds), "folded DequantizeLinear");
  }
}

// The fused QuantizeLinear -> DequantizeLinear pair gives the reference's values bit for bit,
// extremes included (saturation both ways, NaN to the zero point, halves rounded to even).
TEST(QuantRuntime, FusedQuantDequantIsExact) {
  for (DType zt : {DType::UInt8, DType::Int8}) {
    SCOPED_TRACE(dtype_name(zt));
    std::mt19937 g(8);
    ModelBuilder b;
    b.input("x", {"n"});
    Tensor z(zt, {});
    if (zt == DType::UInt8) z.data<uint8_t>()[0] = 131;
    else z.data<int8_t>()[0] = -7;
    b.init("s", Tensor::scalar<float>(0.05f)).init("z", z);
    b.node("QuantizeLinear", {"x", "s", "z"}, {"q"}).node("DequantizeLinear", {"q", "s", "z"}, {"y"});
    b.output("y", {"n"});
    Tensor x = random_normal(g, {100000}, 4.0f);
    float* p = x.data<float>();
    const float special[] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 0.025f, 0.075f, -0.025f, 0.0f, -0.0f};
    for (size_t i = 0; i < std::size(special); ++i) p[i] = special[i];
    std::map<std::string, RValue> feeds{{"x", x}};
    SessionOptions so;
    so.threads = 2;
    Session fast(b.m, so);
    Tensor want = run_ref(b.m, feeds).at("y").tensor, got = fast.run(feeds).at("y").tensor;
    ASSERT_EQ(want.dims(), got.dims());
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_EQ(want.data<float>()[i], got.data<float>()[i]) << "x = " << p[i];
  }
}

// cnn() quantized static, per-channel, calibrated on 4 generated sets.
Model static_cnn() {
  Model q = cnn();
  QuantizeOptions o;
  o.mode = QuantMode::Static;
  o.per_channel = true;
  o.calibration = generate_input_sets(q, 4, 1);
  quantize(q, o);
  return q;
}

TEST(QuantRuntime, StaticCnnFastPathsMatchReference) {
  Model q = static_cnn();
  std::mt19937 g(9);
  auto feeds = feeds_for(q, g, {});
  Session fast(q);
  auto want = run_ref(q, feeds);
  auto got = fast.run(feeds);
  // oneDNN's Conv may round differently from the reference one; where a value sits at a rounding
  // boundary of the next QuantizeLinear it moves one step. So: nearly all logits agree tightly.
  const Tensor& a = want.at("logits").tensor;
  const Tensor& c = got.at("logits").tensor;
  int64_t close = count_close(a, c, 1e-4);
  EXPECT_GE(close, a.numel() - 1);
}

// Three products of a [batch, seq, 64] activation: two share it (attention's Q and K projections),
// one has a bias; the third reads a ReLU. Quantized dynamic or static, every product becomes the
// runtime's Int8MatMul.
Model projections() {
  std::mt19937 g(21);
  ModelBuilder b;
  b.input("x", {"batch", "seq", 64});
  b.init("wq", random_normal(g, {64, 48}, 0.125f)).init("wk", random_normal(g, {64, 48}, 0.125f));
  b.init("bk", random_normal(g, {48}, 0.1f)).init("wo", random_normal(g, {48, 16}, 0.14f));
  b.node("MatMul", {"x", "wq"}, {"q"}, {}, "q_proj").node("MatMul", {"x", "wk"}, {"k0"}, {}, "k_proj");
  b.node("Add", {"k0", "bk"}, {"k"}, {}, "k_bias").node("Relu", {"k"}, {"kr"});
  b.node("MatMul", {"kr", "wo"}, {"o"}, {}, "out_proj");
  b.output("q", {"batch", "seq", 48}).output("o", {"batch", "seq", 16});
  return b.m;
}

int count_after_runtime_rewrites(const Model& m, const std::string& op) {
  Model r = m;
  optimize_for_runtime(r);
  return count_op(r, op);
}

// Runs q as written (reference kernels), on the fast paths (2 threads) and, with `own`, as
// rewritten for the runtime but without fast paths (the int8 kernels' own loops); every output of
// the last two must be within tol of the first's (0: the same bits).
void expect_rewrites_match(const Model& q, const std::map<std::string, RValue>& feeds, double tol, bool own,
                           const std::string& what) {
  SessionOptions so;
  so.threads = 2;
  Session fast(q, so);
  auto want = run_ref(q, feeds);
  auto got = fast.run(feeds);
  Model rewritten = q;
  optimize_for_runtime(rewritten);
  auto mine = own ? run_ref(rewritten, feeds) : got;
  for (const auto& [name, w] : want) {
    const Tensor& a = w.tensor;
    const Tensor& c = got.at(name).tensor;
    const Tensor& r = mine.at(name).tensor;
    ASSERT_EQ(a.dims(), c.dims());
    for (int64_t i = 0; i < a.numel(); ++i) {
      ASSERT_NEAR(a.data<float>()[i], c.data<float>()[i], tol) << name << " at " << i << " " << what;
      ASSERT_NEAR(a.data<float>()[i], r.data<float>()[i], tol) << name << " at " << i << " " << what;
    }
  }
}

// The dynamic chain (DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul [-> Add]) runs as one
// int8 product with the same values bit for bit: the products are exact integers and the scaling
// is the same float arithmetic.
TEST(QuantRuntime, DynamicInt8MatMulIsExact) {
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per-channel" : "per-tensor");
    QuantizeOptions o;
    o.per_channel = per_channel;
    for (const Model& f : {projections(), mlp()}) {
      Model q = quantized(f, o);
      int products = count_op(q, "MatMulInteger");
      EXPECT_EQ(count_after_runtime_rewrites(q, "Int8MatMul"), products);
      EXPECT_EQ(count_after_runtime_rewrites(q, "DynamicQuantizeLinear"), 0);
      std::mt19937 g(5);
      for (int64_t batch : {1, 3}) {
        auto feeds = feeds_for(q, g, {{"batch", batch}, {"seq", 7}});
        // Outliers and exact zeros: the range, the zero point and the rounding all move.
        Tensor& x = feeds.at("x").tensor;
        x.data<float>()[0] = 40.0f;
        x.data<float>()[1] = 0.0f;
        x.data<float>()[2] = -0.0f;
        // And Int8MatMul's own loops (no oneDNN): the rewritten graph without fast paths.
        expect_rewrites_match(q, feeds, 0.0, true, "");
      }
    }
  }
}

// A value the chain would drop (the int32 product, read by another node too) keeps the chain as
// written; an all-zero activation gives the bias alone.
TEST(QuantRuntime, DynamicInt8MatMulKeepsReadValuesAndZeroInputs) {
  QuantizeOptions o;
  Model q = quantized(mlp(), o);
  Model shared = q;
  for (const Node& n : q.graph.nodes)
    if (n.op_type == "MatMulInteger") {
      shared.graph.outputs.push_back({n.outputs[0], Type::tensor(DType::Int32), {}});
      break;
    }
  EXPECT_EQ(count_after_runtime_rewrites(shared, "Int8MatMul"), 1);
  std::map<std::string, RValue> feeds{{"x", Tensor(DType::Float, {2, 64})}};
  Session fast(shared);
  expect_same_outputs(run_ref(shared, feeds), fast.run(feeds), "zero input", 0.0);
}

// conv a (pad 1) -> Relu -> conv b (pad 1) -> Add(., relu a) -> Relu -> conv c (stride 2): a
// residual block whose convs all become dynamic Int8Convs, the second taking the Add and Relu.
Model residual_block() {
  std::mt19937 g(31);
  ModelBuilder b;
  b.input("x", {"batch", 16, 12, 12});
  b.init("wa", random_normal(g, {16, 16, 3, 3}, 0.1f)).init("ba", random_normal(g, {16}, 0.1f));
  b.init("wb", random_normal(g, {16, 16, 3, 3}, 0.1f)).init("bb", random_normal(g, {16}, 0.1f));
  b.init("wc", random_normal(g, {96, 16, 3, 3}, 0.1f));
  auto pad1 = Attribute::make_ints("pads", {1, 1, 1, 1});
  b.node("Conv", {"x", "wa", "ba"}, {"a"}, {pad1}, "conv_a").node("Relu", {"a"}, {"ar"}, {}, "relu_a");
  b.node("Conv", {"ar", "wb", "bb"}, {"c"}, {pad1}, "conv_b").node("Add", {"c", "ar"}, {"s"}, {}, "residual");
  b.node("Relu", {"s"}, {"sr"}, {}, "relu_s");
  b.node("Conv", {"sr", "wc"}, {"y"}, {pad1, Attribute::make_ints("strides", {2, 2})}, "conv_c");
  b.output("y", {"batch", 96, 6, 6});
  return b.m;
}

// The dynamic conv chain (DynamicQuantizeLinear -> ConvInteger -> Cast -> Mul [-> Add]) runs as
// Int8Conv with the chain's values bit for bit: on oneDNN (VNNI CPUs) and on Int8Conv's own loops,
// with the residual Add and the Relus fused, outliers, exact zeros and an all-zero input (a zero
// scale) included. Without VNNI the convs run in float on the dequantized values instead, within
// float rounding of the chain's.
TEST(QuantRuntime, DynamicInt8ConvIsExact) {
  const bool vnni = kern::int8_products_exact();
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per-channel" : "per-tensor");
    QuantizeOptions o;
    o.per_channel = per_channel;
    for (const Model& f : {residual_block(), wide_cnn()}) {
      Model q = quantized(f, o);
      int convs = count_op(q, "ConvInteger");
      EXPECT_EQ(convs, count_op(f, "Conv")) << "every conv is quantized";
      EXPECT_EQ(count_after_runtime_rewrites(q, "Int8Conv"), vnni ? convs : 0);
      EXPECT_EQ(count_after_runtime_rewrites(q, "ConvInteger"), 0);
      if (vnni) {
        EXPECT_EQ(count_after_runtime_rewrites(q, "DynamicQuantizeLinear"), 0);
      }
      EXPECT_EQ(count_after_runtime_rewrites(q, "Relu"), 0);
      std::mt19937 g(6);
      for (int64_t batch : {1, 2}) {
        for (bool zero : {false, true}) {
          auto feeds = feeds_for(q, g, {{"batch", batch}});
          Tensor& x = feeds.at("x").tensor;
          if (zero) {
            std::fill(x.data<float>(), x.data<float>() + x.numel(), 0.0f);
          } else {
            x.data<float>()[0] = 30.0f;
            x.data<float>()[5] = 0.0f;
            x.data<float>()[7] = -0.0f;
          }
          // Int8Conv's own loops too, with VNNI (without it the float convs of the rewritten graph
          // run in blocked layouts, which need the fast paths). Without VNNI float sums may move a
          // value across a rounding boundary of the next conv's run-time quantization: a step of
          // its input range.
          double scale = 0;
          for (const auto& [name, w] : run_ref(q, feeds))
            for (int64_t i = 0; i < w.tensor.numel(); ++i) scale = std::max(scale, std::fabs(w.tensor.as_double(i)));
          expect_rewrites_match(q, feeds, vnni ? 0.0 : 2e-3 * (1 + scale), vnni, zero ? "(zero input)" : "");
        }
      }
    }
  }
}

// Dynamic mode leaves thin convs float: here a depthwise conv between two int8 ones and a 1x1
// projection after them. The float convs keep their channel-blocked layout and the int8 ones read
// and write it (40 output channels: a partly filled block).
TEST(QuantRuntime, DynamicInt8ConvsBesideFloatConvsShareTheBlockedLayout) {
  if (!kern::int8_products_exact()) GTEST_SKIP() << "no VNNI here: dynamic convs run as float convs";
  std::mt19937 g(41);
  ModelBuilder b;
  b.input("x", {1, 16, 14, 14});
  b.init("wa", random_normal(g, {64, 16, 3, 3}, 0.1f)).init("ba", random_normal(g, {64}, 0.1f));
  b.init("wd", random_normal(g, {64, 1, 3, 3}, 0.3f)).init("wc", random_normal(g, {40, 64, 3, 3}, 0.05f));
  b.init("wp", random_normal(g, {8, 40, 1, 1}, 0.2f));
  auto pad1 = Attribute::make_ints("pads", {1, 1, 1, 1});
  b.node("Conv", {"x", "wa", "ba"}, {"a"}, {pad1}, "conv_a").node("Relu", {"a"}, {"ar"}, {}, "relu_a");
  b.node("Conv", {"ar", "wd"}, {"d"}, {pad1, Attribute::make_int("group", 64)}, "conv_dw");
  b.node("Relu", {"d"}, {"dr"}, {}, "relu_dw");
  b.node("Conv", {"dr", "wc"}, {"c"}, {pad1}, "conv_c").node("Relu", {"c"}, {"cr"}, {}, "relu_c");
  b.node("Conv", {"cr", "wp"}, {"y"}, {}, "conv_p");
  b.output("y", {1, 8, 14, 14});
  QuantizeResult r;
  Model q = quantized(b.m, {}, &r);
  ASSERT_EQ(count_op(q, "ConvInteger"), 2);
  ASSERT_EQ(count_op(q, "Conv"), 2);
  Model rt = q;
  optimize_for_runtime(rt);
  std::map<std::string, std::pair<int64_t, int64_t>> blocks;  // Int8Conv name -> (src_block, dst_block)
  for (const Node& n : rt.graph.nodes)
    if (n.op_type == "Int8Conv") blocks[n.name] = {n.attr_int("src_block", 0), n.attr_int("dst_block", 0)};
  ASSERT_EQ(blocks.size(), 2u);
  const int64_t blk = kern::channel_block();
  for (const auto& [name, sd] : blocks) {
    const bool first = name.find("conv_a") == 0;
    EXPECT_EQ(sd.first, first ? 0 : blk) << name;  // the model's input stays NCHW
    EXPECT_EQ(sd.second, blk) << name;
  }
  EXPECT_EQ(count_op(rt, "FromBlocked"), 0);
  // Against the graph as written: the float convs' sums round differently on oneDNN, which can move
  // a value of the next conv's run-time quantization by one step (1/255 of its range).
  for (unsigned seed : {1u, 2u, 3u}) {
    std::mt19937 gi(seed);
    auto feeds = feeds_for(q, gi, {});
    Session fast(q);
    auto want = run_ref(q, feeds);
    auto got = fast.run(feeds);
    const Tensor& a = want.at("y").tensor;
    const Tensor& c = got.at("y").tensor;
    double scale = 0;
    for (int64_t i = 0; i < a.numel(); ++i) scale = std::max(scale, std::fabs(a.as_double(i)));
    EXPECT_GE(count_close(a, c, 1e-5), a.numel() * 95 / 100);
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_NEAR(a.as_double(i), c.as_double(i), 5e-3 * scale) << i;
  }
}

// Static QDQ products run in int8 too; they differ from the float graph only by the float
// rounding of its sums (the int8 sums are exact), so the outputs agree to float precision except
// where a value sits on a rounding boundary of the next QuantizeLinear.
TEST(QuantRuntime, StaticInt8MatMulMatchesReference) {
  if (!kern::int8_products_exact()) GTEST_SKIP() << "no VNNI here: static QDQ products stay float products";
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per-channel" : "per-tensor");
    for (const Model& f : {projections(), mlp()}) {
      QuantizeOptions o;
      o.mode = QuantMode::Static;
      o.per_channel = per_channel;
      o.calibration = generate_input_sets(f, 4, 1);
      Model q = quantized(f, o);
      int products = count_op(q, "MatMul") + count_op(q, "Gemm");
      ASSERT_GT(products, 0);
      EXPECT_EQ(count_after_runtime_rewrites(q, "Int8MatMul"), products);
      EXPECT_EQ(count_after_runtime_rewrites(q, "QuantizeLinear"), 0);
      std::mt19937 g(6);
      auto feeds = feeds_for(q, g, {{"batch", 2}, {"seq", 5}});
      Session fast(q);
      auto want = run_ref(q, feeds);
      auto got = fast.run(feeds);
      for (const auto& [name, w] : want) {
        const Tensor& a = w.tensor;
        const Tensor& c = got.at(name).tensor;
        ASSERT_EQ(a.dims(), c.dims());
        int64_t close = count_close(a, c, 1e-5);
        EXPECT_GE(close, a.numel() - a.numel() / 50) << name;
      }
    }
  }
}

// Int8Conv against the QDQ graph as written, over the geometry oneDNN's int8 kernels must get
// right: padding with a nonzero zero point (padded values are real zeros, not quantized zeros),
// strides, dilations, groups (depthwise), int8 and uint8 activations, per-tensor and
// per-channel weight scales, with and without a bias.
TEST(QuantRuntime, Int8ConvMatchesReference) {
  if (!kern::int8_products_exact()) GTEST_SKIP() << "no VNNI here: static QDQ products stay float products";
  struct Case {
    int64_t c, m, k, group, stride, dil, pad;
    bool per_channel, bias, signed_x;
    const char* post;  // the op after the conv, fused into it: "", Relu, Clip, LeakyRelu
  };
  const Case cases[] = {
      {3, 16, 3, 1, 1, 1, 1, true, true, false, "Relu"},  {16, 32, 3, 1, 2, 1, 1, false, true, false, ""},
      {32, 32, 3, 32, 1, 1, 1, true, true, false, "Clip"}, {24, 48, 1, 1, 1, 1, 0, true, false, false, ""},
      {8, 16, 3, 2, 1, 2, 2, true, true, true, "LeakyRelu"}, {16, 16, 5, 16, 2, 1, 2, false, false, true, ""},
  };
  std::mt19937 g(31);
  for (const Case& t : cases) {
    SCOPED_TRACE("c=" + std::to_string(t.c) + " m=" + std::to_string(t.m) + " k=" + std::to_string(t.k) +
                 " group=" + std::to_string(t.group));
    ModelBuilder b;
    b.input("x", {2, t.c, 13, 11});
    Tensor wq(DType::Int8, {t.m, t.c / t.group, t.k, t.k});
    std::uniform_int_distribution<int> u(-127, 127);
    for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(u(g));
    b.init("wq", wq).init("ws", t.per_channel ? random_uniform(g, {t.m}, 0.002f, 0.01f) : Tensor::scalar<float>(0.005f));
    b.init("wz", t.per_channel ? Tensor(DType::Int8, {t.m}) : Tensor::scalar<int8_t>(0));
    Tensor z(t.signed_x ? DType::Int8 : DType::UInt8, {});
    if (t.signed_x) z.data<int8_t>()[0] = -9;
    else z.data<uint8_t>()[0] = 117;
    b.init("xs", Tensor::scalar<float>(0.03f)).init("xz", z).init("bias", random_normal(g, {t.m}, 0.5f));
    std::vector<Attribute> wa;
    if (t.per_channel) wa.push_back(Attribute::make_int("axis", 0));
    b.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"}).node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"});
    b.node("DequantizeLinear", {"wq", "ws", "wz"}, {"w"}, wa);
    std::vector<std::string> in{"xd", "w"};
    if (t.bias) in.push_back("bias");
    std::string post = t.post;
    b.node("Conv", in, {post.empty() ? "y" : "c"},
           {Attribute::make_int("group", t.group), Attribute::make_ints("strides", {t.stride, t.stride}),
            Attribute::make_ints("dilations", {t.dil, t.dil}), Attribute::make_ints("pads", {t.pad, t.pad, t.pad, t.pad})});
    if (post == "Clip") b.init("lo", Tensor::scalar<float>(0.0f)).init("hi", Tensor::scalar<float>(6.0f));
    if (post == "Clip") b.node("Clip", {"c", "lo", "hi"}, {"y"});
    else if (!post.empty()) b.node(post, {"c"}, {"y"});
    b.output("y", {});
    EXPECT_EQ(count_after_runtime_rewrites(b.m, "Int8Conv"), 1);
    if (!post.empty()) {
      EXPECT_EQ(count_after_runtime_rewrites(b.m, post), 0) << post << " is fused";
    }
    // Inputs past the quantization range both ways: saturation is part of what is compared.
    std::map<std::string, RValue> feeds{{"x", random_normal(g, {2, t.c, 13, 11}, 2.5f)}};
    Session fast(b.m);
    auto want = run_ref(b.m, feeds);
    auto got = fast.run(feeds);
    const Tensor& a = want.at("y").tensor;
    const Tensor& c = got.at("y").tensor;
    ASSERT_EQ(a.dims(), c.dims());
    // Exact int32 sums against float sums of the same products: float rounding only.
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_NEAR(a.as_double(i), c.as_double(i), 1e-5 * (1 + std::fabs(a.as_double(i)))) << i;
    // Int8Conv's own loops (what runs where oneDNN has no int8 kernel): the rewritten graph
    // without fast paths.
    Model rewritten = b.m;
    optimize_for_runtime(rewritten);
    auto own = run_ref(rewritten, feeds);
    const Tensor& r = own.at("y").tensor;
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_NEAR(a.as_double(i), r.as_double(i), 1e-5 * (1 + std::fabs(a.as_double(i)))) << i;
  }
}

// Between two int8 convolutions the activation stays channels-last and 8-bit: the first writes
// what the second's QuantizeLinear would make of it; the graph's outputs are what the reference
// computes (up to a rounding step of that requantization), on the fast path and on Int8Conv's own
// loops.
TEST(QuantRuntime, Int8ConvChainStaysChannelsLast) {
  if (!kern::int8_products_exact()) GTEST_SKIP() << "no VNNI here: static QDQ products stay float products";
  Model q = static_cnn();
  Model rewritten = q;
  optimize_for_runtime(rewritten);
  int writers = 0, readers = 0;
  for (const Node& n : rewritten.graph.nodes) {
    writers += n.has_input(6);  // y_scale: the output is the next conv's quantized input
    readers += n.attr_int("src_quantized", 0) != 0;
  }
  EXPECT_EQ(count_op(rewritten, "Int8Conv"), 2);
  EXPECT_EQ(writers, 1);
  EXPECT_EQ(readers, 1);
  std::mt19937 g(12);
  for (int rep = 0; rep < 3; ++rep) {
    auto feeds = feeds_for(q, g, {});
    auto want = run_ref(q, feeds);
    Session fast(q);
    auto got = fast.run(feeds);
    auto own = run_ref(rewritten, feeds);
    const Tensor& a = want.at("logits").tensor;
    for (const Tensor* c : {&got.at("logits").tensor, &own.at("logits").tensor}) {
      ASSERT_EQ(a.dims(), c->dims());
      int64_t close = count_close(a, *c, 1e-4);
      EXPECT_GE(close, a.numel() - 1);
    }
  }
}

// The start of a small static QDQ conv net: x quantized with scale s0 and zero point 128 into
// "xd", activation scales s1 and s2 (zero point z = 128), and random int8 weights wa, wb, wc
// (scale 0.004, zero point 0) dequantized into wa_f, wb_f, wc_f.
void qdq_conv_start(ModelBuilder& b, std::mt19937& g, const Dims& wa, const Dims& wb, const Dims& wc, float s2) {
  std::uniform_int_distribution<int> u(-127, 127);
  auto int8_weight = [&](const Dims& d) {
    Tensor w(DType::Int8, d);
    for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(u(g));
    return w;
  };
  Tensor z(DType::UInt8, {});
  z.data<uint8_t>()[0] = 128;
  b.init("s0", Tensor::scalar<float>(0.02f)).init("s1", Tensor::scalar<float>(0.05f)).init("s2", Tensor::scalar<float>(s2));
  b.init("z", z).init("wz", Tensor::scalar<int8_t>(0)).init("ws", Tensor::scalar<float>(0.004f));
  b.init("wa", int8_weight(wa)).init("wb", int8_weight(wb)).init("wc", int8_weight(wc));
  b.node("QuantizeLinear", {"x", "s0", "z"}, {"xq"}).node("DequantizeLinear", {"xq", "s0", "z"}, {"xd"});
  for (const char* w : {"wa", "wb", "wc"}) b.node("DequantizeLinear", {w, "ws", "wz"}, {std::string(w) + "_f"});
}

// One conv output read by two int8 convs that quantize it differently: it stays float, channels-last.
TEST(QuantRuntime, Int8ConvFloatChannelsLastEdge) {
  if (!kern::int8_products_exact()) GTEST_SKIP() << "no VNNI here: static QDQ products stay float products";
  std::mt19937 g(13);
  ModelBuilder b;
  b.input("x", {1, 8, 9, 9});
  qdq_conv_start(b, g, {16, 8, 3, 3}, {4, 16, 1, 1}, {4, 16, 3, 3}, 0.08f);
  std::vector<Attribute> pad{Attribute::make_ints("pads", {1, 1, 1, 1})};
  b.node("Conv", {"xd", "wa_f"}, {"a"}, pad);
  b.node("QuantizeLinear", {"a", "s1", "z"}, {"aq1"}).node("DequantizeLinear", {"aq1", "s1", "z"}, {"ad1"});
  b.node("QuantizeLinear", {"a", "s2", "z"}, {"aq2"}).node("DequantizeLinear", {"aq2", "s2", "z"}, {"ad2"});
  b.node("Conv", {"ad1", "wb_f"}, {"yb"}).node("Conv", {"ad2", "wc_f"}, {"yc"}, pad);
  b.output("yb", {}).output("yc", {});
  Model rewritten = b.m;
  optimize_for_runtime(rewritten);
  EXPECT_EQ(count_op(rewritten, "Int8Conv"), 3);
  int writers = 0, readers = 0;
  for (const Node& n : rewritten.graph.nodes) {
    writers += n.attr_int("dst_nhwc", 0) != 0;
    readers += n.attr_int("src_nhwc", 0) != 0;
  }
  EXPECT_EQ(writers, 1);
  EXPECT_EQ(readers, 2);
  std::map<std::string, RValue> feeds{{"x", random_normal(g, {1, 8, 9, 9}, 1.5f)}};
  auto want = run_ref(b.m, feeds);
  Session fast(b.m);
  auto got = fast.run(feeds);
  auto own = run_ref(rewritten, feeds);
  for (const char* name : {"yb", "yc"}) {
    const Tensor& a = want.at(name).tensor;
    for (const Tensor* c : {&got.at(name).tensor, &own.at(name).tensor}) {
      ASSERT_EQ(a.dims(), c->dims());
      int64_t close = count_close(a, *c, 1e-4);
      EXPECT_GE(close, a.numel() - a.numel() / 100) << name;
    }
  }
}

// A residual block in QDQ: the Add (and the Relu after it) fuse into the second int8 conv as a
// sum post-op reading the block's input channels-last; an Add of a bias-like constant that
// broadcasts takes the conv's own loops. Outputs agree with the graph as written, fast and not.
TEST(QuantRuntime, Int8ConvTakesTheResidualAdd) {
  if (!kern::int8_products_exact()) GTEST_SKIP() << "no VNNI here: static QDQ products stay float products";
  std::mt19937 g(14);
  ModelBuilder b;
  b.input("x", {2, 8, 9, 9});
  qdq_conv_start(b, g, {8, 8, 3, 3}, {8, 8, 3, 3}, {8, 8, 1, 1}, 0.1f);
  b.init("shift", random_normal(g, {1, 8, 1, 1}));
  std::vector<Attribute> pad{Attribute::make_ints("pads", {1, 1, 1, 1})};
  b.node("Conv", {"xd", "wa_f"}, {"a"}, pad).node("Relu", {"a"}, {"h"});
  b.node("QuantizeLinear", {"h", "s1", "z"}, {"hq"}).node("DequantizeLinear", {"hq", "s1", "z"}, {"hd"});
  b.node("Conv", {"hd", "wb_f"}, {"c"}, pad).node("Add", {"c", "h"}, {"sum"}).node("Relu", {"sum"}, {"y"});
  b.node("QuantizeLinear", {"y", "s2", "z"}, {"yq"}).node("DequantizeLinear", {"yq", "s2", "z"}, {"yd"});
  b.node("Conv", {"yd", "wc_f"}, {"e"}).node("Add", {"shift", "e"}, {"out"});
  b.output("out", {});
  Model rewritten = b.m;
  optimize_for_runtime(rewritten);
  EXPECT_EQ(count_op(rewritten, "Int8Conv"), 3);
  EXPECT_EQ(count_op(rewritten, "Add"), 0);
  EXPECT_EQ(count_op(rewritten, "Relu"), 0);
  int residuals = 0, nhwc_residuals = 0;
  for (const Node& n : rewritten.graph.nodes) {
    residuals += n.has_input(8);
    nhwc_residuals += n.attr_int("res_nhwc", 0) != 0;
  }
  EXPECT_EQ(residuals, 2);
  EXPECT_EQ(nhwc_residuals, 1);
  for (int rep = 0; rep < 3; ++rep) {
    std::map<std::string, RValue> feeds{{"x", random_normal(g, {2, 8, 9, 9}, 1.5f)}};
    auto want = run_ref(b.m, feeds);
    Session fast(b.m);
    auto got = fast.run(feeds);
    auto own = run_ref(rewritten, feeds);
    const Tensor& a = want.at("out").tensor;
    for (const Tensor* c : {&got.at("out").tensor, &own.at("out").tensor}) {
      ASSERT_EQ(a.dims(), c->dims());
      int64_t close = count_close(a, *c, 1e-4);
      EXPECT_GE(close, a.numel() - a.numel() / 100);
    }
  }
}

// The vectorized quantization the int8 kernels use gives QuantizeLinear's values bit for bit:
// halves to even, saturation both ways, NaN to the zero point, infinities, tails past 16 lanes.
TEST(QuantRuntime, QuantizeBytesMatchesQuantizeLinear) {
  std::mt19937 g(17);
  Tensor x = random_normal(g, {1003}, 6.0f);
  float* p = x.data<float>();
  const float special[] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 0.025f, 0.075f, -0.025f, 0.0f, -0.0f, 12.775f, -6.425f};
  for (size_t i = 0; i < std::size(special); ++i) p[i * 7] = special[i];
  for (DType zt : {DType::UInt8, DType::Int8}) {
    SCOPED_TRACE(dtype_name(zt));
    Tensor z(zt, {});
    if (zt == DType::UInt8) z.data<uint8_t>()[0] = 131;
    else z.data<int8_t>()[0] = -7;
    Tensor want = run_op("QuantizeLinear", {x, Tensor::scalar<float>(0.05f), z}, {}, kRef);
    std::vector<uint8_t> got(1003);
    bool u8 = zt == DType::UInt8;
    kern::quantize_bytes(p, 1003, 0.05f, static_cast<float>(z.as_int(0)), u8 ? 0.0f : -128.0f, u8 ? 255.0f : 127.0f,
                         got.data(), 2);
    for (int64_t i = 0; i < 1003; ++i)
      ASSERT_EQ(static_cast<uint8_t*>(want.raw())[i], got[static_cast<size_t>(i)]) << "x = " << p[i];
  }
}

// A transformer's feed-forward input: product, bias, then the erf GELU as exported (x/sqrt2 ->
// Erf -> +1 -> *x -> *0.5). The int8 product takes the GELU too; values to float rounding.
TEST(QuantRuntime, Int8MatMulTakesTheGelu) {
  std::mt19937 g(23);
  ModelBuilder b;
  b.input("x", {"batch", "seq", 64});
  b.init("w", random_normal(g, {64, 96}, 0.125f)).init("b", random_normal(g, {96}, 0.1f));
  b.init("sqrt2", Tensor::scalar<float>(1.41421356f)).init("one", Tensor::scalar<float>(1.0f)).init("half", Tensor::scalar<float>(0.5f));
  b.node("MatMul", {"x", "w"}, {"h"}).node("Add", {"h", "b"}, {"hb"});
  b.node("Div", {"hb", "sqrt2"}, {"d"}).node("Erf", {"d"}, {"e"}).node("Add", {"e", "one"}, {"e1"});
  b.node("Mul", {"hb", "e1"}, {"m"}).node("Mul", {"m", "half"}, {"y"});
  b.output("y", {"batch", "seq", 96});
  for (QuantMode mode : {QuantMode::Dynamic, QuantMode::Static}) {
    SCOPED_TRACE(mode == QuantMode::Dynamic ? "dynamic" : "static");
    if (mode == QuantMode::Static && !kern::int8_products_exact()) continue;
    QuantizeOptions o;
    o.mode = mode;
    o.per_channel = true;
    if (mode == QuantMode::Static) o.calibration = generate_input_sets(b.m, 4, 1);
    Model q = b.m;
    quantize(q, o);
    EXPECT_EQ(count_after_runtime_rewrites(q, "Int8MatMul"), 1);
    EXPECT_EQ(count_after_runtime_rewrites(q, "Erf"), 0);
    Model rewritten = q;
    optimize_for_runtime(rewritten);
    auto feeds = feeds_for(q, g, {{"batch", 2}, {"seq", 9}});
    Session fast(q);
    expect_same_outputs(run_ref(q, feeds), fast.run(feeds), "fast path", 1e-5);
    expect_same_outputs(run_ref(q, feeds), run_ref(rewritten, feeds), "Int8MatMul's loops", 1e-5);
  }
}

// Other quantizers (ONNX Runtime's among them) store a conv's bias as int32 behind a
// DequantizeLinear with scale x_scale * w_scale: the int8 conv takes it as a float bias.
TEST(QuantRuntime, Int8ConvTakesAnInt32QuantizedBias) {
  if (!kern::int8_products_exact()) GTEST_SKIP() << "no VNNI here: static QDQ products stay float products";
  std::mt19937 g(29);
  ModelBuilder b;
  b.input("x", {1, 8, 10, 10});
  Tensor wq(DType::Int8, {16, 8, 3, 3});
  std::uniform_int_distribution<int> u(-127, 127);
  for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(u(g));
  Tensor ws = random_uniform(g, {16}, 0.002f, 0.01f), bs(DType::Float, {16});
  Tensor bq(DType::Int32, {16});
  for (int64_t m = 0; m < 16; ++m) {
    bs.data<float>()[m] = 0.04f * ws.data<float>()[m];
    bq.data<int32_t>()[m] = u(g) * 40;
  }
  Tensor z(DType::UInt8, {});
  z.data<uint8_t>()[0] = 120;
  b.init("wq", wq).init("ws", ws).init("wz", Tensor(DType::Int8, {16})).init("bq", bq).init("bs", bs);
  b.init("xs", Tensor::scalar<float>(0.04f)).init("xz", z);
  b.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"}).node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"});
  b.node("DequantizeLinear", {"wq", "ws", "wz"}, {"w"}, {Attribute::make_int("axis", 0)});
  b.node("DequantizeLinear", {"bq", "bs"}, {"bias"}, {Attribute::make_int("axis", 0)});
  b.node("Conv", {"xd", "w", "bias"}, {"y"}, {Attribute::make_ints("pads", {1, 1, 1, 1})});
  b.output("y", {});
  EXPECT_EQ(count_after_runtime_rewrites(b.m, "Int8Conv"), 1);
  std::map<std::string, RValue> feeds{{"x", random_normal(g, {1, 8, 10, 10}, 2.0f)}};
  Session fast(b.m);
  expect_same_outputs(run_ref(b.m, feeds), fast.run(feeds), "int32 bias", 1e-5);
}

// QOperator models: QLinearConv -> QLinearConv (uint8 NCHW between them as written) runs as int8
// convs with the value between them channels-last; the outputs are the reference kernels' up to
// one quantization step (requantizing multiplies by 1 / y_scale where QLinearConv's reference
// divides), in few elements.
TEST(QuantRuntime, QLinearConvRunsAsInt8Conv) {
  if (!kern::int8_products_exact()) GTEST_SKIP() << "no VNNI here: QLinearConv keeps its reference kernel";
  std::mt19937 g(37);
  std::uniform_int_distribution<int> u(-127, 127), ub(0, 255);
  ModelBuilder b;
  b.input("x", {2, 8, 12, 12}, DType::UInt8);
  auto weights = [&](const Dims& d) {
    Tensor w(DType::Int8, d);
    for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(u(g));
    return w;
  };
  auto zp = [](uint8_t v) {
    Tensor z(DType::UInt8, {});
    z.data<uint8_t>()[0] = v;
    return z;
  };
  Tensor b1(DType::Int32, {16});
  for (int64_t i = 0; i < 16; ++i) b1.data<int32_t>()[i] = u(g) * 50;
  b.init("xs", Tensor::scalar<float>(0.05f)).init("xz", zp(128)).init("ys", Tensor::scalar<float>(0.4f)).init("yz", zp(100));
  b.init("zs", Tensor::scalar<float>(0.9f)).init("zz", zp(90));
  b.init("w1", weights({16, 8, 3, 3})).init("w1s", random_uniform(g, {16}, 0.002f, 0.006f)).init("w1z", Tensor(DType::Int8, {16}));
  b.init("w2", weights({4, 16, 1, 1})).init("w2s", Tensor::scalar<float>(0.004f)).init("w2z", Tensor::scalar<int8_t>(0));
  b.init("b1", b1);
  b.node("QLinearConv", {"x", "xs", "xz", "w1", "w1s", "w1z", "ys", "yz", "b1"}, {"h"},
         {Attribute::make_ints("pads", {1, 1, 1, 1}), Attribute::make_ints("strides", {2, 2})});
  b.node("QLinearConv", {"h", "ys", "yz", "w2", "w2s", "w2z", "zs", "zz"}, {"y"});
  b.output("y", {}, DType::UInt8);
  Model rewritten = b.m;
  optimize_for_runtime(rewritten);
  EXPECT_EQ(count_op(rewritten, "Int8Conv"), 2);
  EXPECT_EQ(count_op(rewritten, "QLinearConv"), 0);
  int nhwc = 0;
  for (const Node& n : rewritten.graph.nodes) nhwc += n.attr_int("dst_nhwc", 0) + n.attr_int("src_nhwc", 0);
  EXPECT_EQ(nhwc, 2) << "the value between the convs is channels-last";
  Tensor x(DType::UInt8, {2, 8, 12, 12});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(ub(g));
  std::map<std::string, RValue> feeds{{"x", x}};
  auto want = run_ref(b.m, feeds);
  Session fast(b.m);
  auto got = fast.run(feeds);
  auto own = run_ref(rewritten, feeds);
  const Tensor& a = want.at("y").tensor;
  for (const Tensor* c : {&got.at("y").tensor, &own.at("y").tensor}) {
    ASSERT_EQ(a.dims(), c->dims());
    ASSERT_EQ(c->dtype(), DType::UInt8);
    int64_t off = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      int d = std::abs(int(a.data<uint8_t>()[i]) - int(c->data<uint8_t>()[i]));
      ASSERT_LE(d, 1) << i;
      off += d;
    }
    EXPECT_LE(off, a.numel() / 50);
  }
}

// QLinearMatMul with constant int8 weights (zero point 0, a scale per column) runs as Int8MatMul
// on 8-bit A and Y: within one step of the graph as written (y_scale divides the float result
// where the op multiplies by a_scale * b_scale / y_scale), uint8 and int8 activations, batched A,
// on oneDNN and on Int8MatMul's own loops. Weights with a zero point keep the op as it is.
TEST(QuantRuntime, QLinearMatMulRunsAsInt8MatMul) {
  if (!kern::int8_products_exact()) GTEST_SKIP() << "no VNNI here: QLinearMatMul keeps its reference kernel";
  std::mt19937 g(41);
  std::uniform_int_distribution<int> u(-127, 127), ub(0, 255);
  for (DType at : {DType::UInt8, DType::Int8}) {
    ModelBuilder b;
    b.input("a", {2, 7, 48}, at);
    Tensor w(DType::Int8, {48, 24}), wz(DType::Int8, {24}), w2(DType::Int8, {24, 8});
    for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(u(g));
    for (int64_t i = 0; i < w2.numel(); ++i) w2.data<int8_t>()[i] = static_cast<int8_t>(u(g));
    auto zp = [&](int v) {
      Tensor z(at, {});
      if (at == DType::UInt8) z.data<uint8_t>()[0] = static_cast<uint8_t>(v);
      else z.data<int8_t>()[0] = static_cast<int8_t>(v - 128);
      return z;
    };
    b.init("as", Tensor::scalar<float>(0.05f)).init("az", zp(128)).init("ys", Tensor::scalar<float>(0.3f)).init("yz", zp(120));
    b.init("w", w).init("ws", random_uniform(g, {24}, 0.002f, 0.006f)).init("wz", wz);
    b.init("w2", w2).init("w2s", Tensor::scalar<float>(0.004f)).init("w2z", Tensor::scalar<int8_t>(3));
    b.init("zs", Tensor::scalar<float>(0.2f)).init("zz", zp(100));
    b.node("QLinearMatMul", {"a", "as", "az", "w", "ws", "wz", "ys", "yz"}, {"h"});
    b.node("QLinearMatMul", {"h", "ys", "yz", "w2", "w2s", "w2z", "zs", "zz"}, {"y"});
    b.output("h", {}, at).output("y", {}, at);
    Model rewritten = b.m;
    optimize_for_runtime(rewritten);
    EXPECT_EQ(count_op(rewritten, "Int8MatMul"), 1);
    EXPECT_EQ(count_op(rewritten, "QLinearMatMul"), 1) << "weights with a zero point stay";
    Tensor x(at, {2, 7, 48});
    for (int64_t i = 0; i < x.numel(); ++i) static_cast<uint8_t*>(x.raw())[i] = static_cast<uint8_t>(ub(g));
    std::map<std::string, RValue> feeds{{"a", x}};
    auto want = run_ref(b.m, feeds);
    Session fast(b.m);
    auto got = fast.run(feeds);
    auto own = run_ref(rewritten, feeds);
    const Tensor& a = want.at("h").tensor;
    auto value = [&](const Tensor& t, int64_t i) {
      return at == DType::UInt8 ? int(t.data<uint8_t>()[i]) : int(t.data<int8_t>()[i]);
    };
    for (const Tensor* c : {&got.at("h").tensor, &own.at("h").tensor}) {
      ASSERT_EQ(a.dims(), c->dims());
      ASSERT_EQ(c->dtype(), at);
      int64_t off = 0, spread = 0;
      for (int64_t i = 0; i < a.numel(); ++i) {
        int d = std::abs(value(a, i) - value(*c, i));
        ASSERT_LE(d, 1) << i;
        off += d;
        spread += value(a, i) != value(a, 0);
      }
      EXPECT_LE(off, a.numel() / 50);
      EXPECT_GT(spread, a.numel() / 2) << "the test values span the range";
    }
  }
}

}  // namespace
