// Quantized files run in ONNX Runtime (onnxruntime-node) as they run in the torch2onnx runtime.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "onnx/model_io.h"
#include "onnx/tensor_io.h"
#include "quant/quant.h"
#include "quant_models.h"

namespace fs = std::filesystem;
using namespace t2o;
using namespace t2o::test;

namespace {

class QuantOrt : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("node -e \"require('onnxruntime-node')\" >/dev/null 2>&1") != 0)
      GTEST_SKIP() << "onnxruntime-node is not installed (NODE_PATH)";
    dir_ = fs::temp_directory_path() / ("t2o_quant_ort_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "in");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `q` in ORT and in our runtime on `set` and compares every output.
  void same_in_ort(const Model& q, const InputSet& set, double tol, bool fast_paths = true) {
    std::string model = (dir_ / "q.onnx").string();
    save_model(q, model);
    std::map<std::string, RValue> feed;
    int k = 0;
    for (const ValueInfo* vi : q.graph.runtime_inputs()) {
      write_npy((dir_ / "in" / ("input_" + std::to_string(k++) + ".npy")).string(), set.at(vi->name));
      feed[vi->name] = set.at(vi->name);
    }
    std::string cmd = "node " + std::string(T2O_ORT_RUN) + " " + model + " " + (dir_ / "in").string() + " " +
                      (dir_ / "out").string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    SessionOptions so;
    so.fast_paths = fast_paths;
    Session s(q, so);
    auto ours = s.run(feed);
    for (size_t o = 0; o < q.graph.outputs.size(); ++o) {
      Tensor ort = read_npy((dir_ / "out" / ("output_" + std::to_string(o) + ".npy")).string());
      const Tensor& mine = ours.at(q.graph.outputs[o].name).tensor;
      ASSERT_EQ(ort.dims(), mine.dims());
      double scale = 0;
      for (int64_t i = 0; i < ort.numel(); ++i) scale = std::max(scale, std::fabs(ort.as_double(i)));
      for (int64_t i = 0; i < ort.numel(); ++i)
        ASSERT_NEAR(ort.as_double(i), mine.as_double(i), tol * (1 + scale)) << q.graph.outputs[o].name << " at " << i;
    }
  }
  fs::path dir_;
};

TEST_F(QuantOrt, DynamicMlp) {
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per-channel" : "per-tensor");
    Model q = mlp();
    QuantizeOptions o;
    o.per_channel = per_channel;
    quantize(q, o);
    // Integer products are exact on both sides; only the float rescale may round differently.
    same_in_ort(q, generate_input_sets(mlp(), 1, 77)[0], 1e-5);
  }
}

// Dynamic convolutions (ConvInteger with int8 weights): ORT's result against ours, with and
// without our int8 fast path.
TEST_F(QuantOrt, DynamicCnn) {
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per-channel" : "per-tensor");
    Model q = wide_cnn();
    QuantizeOptions o;
    o.per_channel = per_channel;
    ASSERT_EQ(quantize(q, o).quantized, 3);
    // Exact integer products; the second conv's run-time quantization sees the first's float
    // output, whose rounding may differ, so a value at a rounding boundary may move one step.
    for (bool fast : {true, false}) same_in_ort(q, generate_input_sets(wide_cnn(), 1, 79)[0], 1e-3, fast);
  }
}

TEST_F(QuantOrt, StaticCnn) {
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per-channel" : "per-tensor");
    Model f = cnn();
    QuantizeOptions o;
    o.mode = QuantMode::Static;
    o.per_channel = per_channel;
    o.calibration = generate_input_sets(f, 4, 1);
    Model q = f;
    quantize(q, o);
    // The dequantized values are the same on both sides; the float Conv/Gemm after them may round
    // differently, and a value at a rounding boundary of the next QuantizeLinear may move one step.
    same_in_ort(q, generate_input_sets(f, 1, 78)[0], 1e-3);
  }
}

TEST_F(QuantOrt, QOperatorCnnAndMlp) {
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per-channel" : "per-tensor");
    for (const Model& f : {cnn(), mlp()}) {
      QuantizeOptions o;
      o.mode = QuantMode::Static;
      o.format = QuantFormat::QOperator;
      o.per_channel = per_channel;
      o.calibration = generate_input_sets(f, 4, 1);
      Model q = f;
      ASSERT_GT(quantize(q, o).quantized, 0);
      // Integer products agree; requantizing an output may round one step apart at a boundary.
      same_in_ort(q, generate_input_sets(f, 1, 78)[0], 1e-2);
    }
  }
}

// Recurrent layers with int8 weights: ORT runs them in float on the dequantized weights, as our
// reference kernels do; our fast path quantizes the activations too (the metadata asks for it),
// which moves the outputs by about a percent of their range.
TEST_F(QuantOrt, RecurrentLayers) {
  for (const char* op : {"LSTM", "GRU"}) {
    SCOPED_TRACE(op);
    Layer l;
    l.op = op;
    l.direction = "bidirectional";
    Model f = recurrent_model(l);
    QuantizeOptions o;
    o.per_channel = true;
    Model q = f;
    ASSERT_EQ(quantize(q, o).quantized, 1);
    InputSet set = generate_input_sets(f, 1, 79)[0];
    same_in_ort(q, set, 1e-5, false);
    same_in_ort(q, set, 0.03, true);
  }
}

}  // namespace
