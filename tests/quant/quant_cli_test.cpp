// torch2onnx quantize on the command line: output and report, exit codes for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "onnx/check.h"
#include "onnx/model_io.h"
#include "onnx/tensor_io.h"
#include "quant_models.h"
#include "shell_support.h"

namespace fs = std::filesystem;
using namespace t2o;
using namespace t2o::test;

namespace {

using Result = t2o::test::ShellResult;

Result cli(const std::string& args) { return t2o::test::run_shell(std::string(T2O_CLI) + " " + args); }

class QuantizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("t2o_quantize_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    save_model(cnn(), path("cnn.onnx"));
    save_model(mlp(), path("mlp.onnx"));
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  fs::path dir_;
};

nlohmann::json read_json(const std::string& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return nlohmann::json::parse(s.str());
}

TEST_F(QuantizeCli, StaticWithCalibrationFilesAndReport) {
  std::mt19937 g(5);
  fs::create_directories(dir_ / "calib");
  for (int k = 0; k < 4; ++k) write_npy(path("calib/" + std::to_string(k) + ".npy"), random_normal(g, {1, 3, 16, 16}));
  write_npy(path("held.npy"), random_normal(g, {6, 1, 3, 16, 16}));
  Result r = cli("quantize " + path("cnn.onnx") + " -o " + path("q.onnx") + " --mode static --per-channel --calibrate " +
                 path("calib") + " --eval " + path("held.npy") + " --report " + path("r.json") + " --runs 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("GENERATED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("top-1 agreement"), std::string::npos) << r.out;
  EXPECT_NO_THROW(check_model_file(path("q.onnx")));
  nlohmann::json j = read_json(path("r.json"));
  EXPECT_EQ(j["mode"], "static");
  EXPECT_EQ(j["quantized_nodes"], 3);
  EXPECT_EQ(j["calibration"]["samples"], 4);
  EXPECT_EQ(j["calibration"]["generated"], false);
  EXPECT_EQ(j["accuracy"]["samples"], 6);
  EXPECT_EQ(j["accuracy"]["generated"], false);
  EXPECT_GT(j["accuracy"]["outputs"][0]["cosine"].get<double>(), 0.99);
  EXPECT_TRUE(j["accuracy"]["outputs"][0].contains("top1_agreement"));
  // Weights ~4x smaller; the file a little less, as it also holds the (now larger) graph.
  double wb = j["initializer_bytes"]["before"], wa = j["initializer_bytes"]["after"];
  EXPECT_GT(wb / wa, 3.5);
  double before = j["file_bytes"]["before"], after = j["file_bytes"]["after"];
  EXPECT_GT(before / after, 2.5);
  EXPECT_EQ(static_cast<double>(fs::file_size(path("q.onnx"))), after);
  EXPECT_GT(j["latency_ms"]["float"].get<double>(), 0);
  EXPECT_GT(j["latency_ms"]["quantized"].get<double>(), 0);
}

TEST_F(QuantizeCli, QOperatorWithEntropyCalibration) {
  std::mt19937 g(6);
  write_npy(path("calib.npy"), random_normal(g, {8, 1, 3, 16, 16}));
  Result r = cli("quantize " + path("cnn.onnx") + " -o " + path("q.onnx") + " --mode static --format qoperator " +
                 "--method entropy --per-channel --calibrate " + path("calib.npy") + " --report " + path("r.json") +
                 " --runs 0");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NO_THROW(check_model_file(path("q.onnx")));
  Model q = load_model(path("q.onnx"));
  EXPECT_EQ(count_op(q, "QLinearConv"), 2);
  EXPECT_EQ(count_op(q, "QLinearMatMul"), 1);
  EXPECT_EQ(count_op(q, "Conv") + count_op(q, "Gemm"), 0);
  nlohmann::json j = read_json(path("r.json"));
  EXPECT_EQ(j["format"], "qoperator");
  EXPECT_EQ(j["method"], "entropy");
  EXPECT_EQ(j["calibration"]["samples"], 8);
  EXPECT_GT(j["accuracy"]["outputs"][0]["cosine"].get<double>(), 0.99);
}

TEST_F(QuantizeCli, DynamicAndGeneratedCalibrationWarning) {
  Result d = cli("quantize " + path("mlp.onnx") + " -o " + path("d.onnx") + " --mode dynamic --runs 1 --input x:5x64 " +
                 "--report " + path("d.json"));
  ASSERT_EQ(d.code, 0) << d.out;
  Model q = load_model(path("d.onnx"));
  EXPECT_EQ(count_op(q, "MatMulInteger"), 2);
  nlohmann::json j = read_json(path("d.json"));
  EXPECT_EQ(j["accuracy"]["sizes"], "x 5x64");
  EXPECT_EQ(j["accuracy"]["outputs"][0]["top1_rows"], 8 * 5) << "8 generated sets of 5 rows";
  EXPECT_EQ(cli("quantize " + path("mlp.onnx") + " -o " + path("d2.onnx") + " --mode dynamic --input y:5x64").code, 2);
  Result s = cli("quantize " + path("mlp.onnx") + " -o " + path("s.onnx") + " --mode static --runs 0");
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("warning: calibrating on 8 GENERATED"), std::string::npos) << s.out;
}

TEST_F(QuantizeCli, MaxDropExitsOne) {
  // An output that is not logits is judged by 1 - cosine, which int8 rounding makes > 0.
  ModelBuilder b;
  std::mt19937 g(2);
  b.input("x", {4, 32}).init("w", random_normal(g, {32, 1}));
  b.node("MatMul", {"x", "w"}, {"y"}, {}, "fc").output("y", {4, 1});
  save_model(b.m, path("reg.onnx"));
  Result r = cli("quantize " + path("reg.onnx") + " -o " + path("reg.q.onnx") + " --mode dynamic --max-drop 0 --runs 0");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("exceeds --max-drop"), std::string::npos) << r.out;
  Result ok = cli("quantize " + path("reg.onnx") + " -o " + path("reg.q.onnx") + " --mode dynamic --max-drop 0.01 --runs 0");
  EXPECT_EQ(ok.code, 0) << ok.out;
}

TEST_F(QuantizeCli, BadInputAndUsage) {
  EXPECT_EQ(cli("quantize " + path("nope.onnx") + " -o " + path("o.onnx") + " --mode dynamic").code, 4);
  {
    std::ofstream f(path("junk.onnx"));
    f << "not a model";
  }
  EXPECT_EQ(cli("quantize " + path("junk.onnx") + " -o " + path("o.onnx") + " --mode dynamic").code, 4);
  EXPECT_EQ(cli("quantize " + path("cnn.onnx") + " -o " + path("o.onnx") + " --mode int4").code, 2);
  EXPECT_EQ(cli("quantize " + path("cnn.onnx") + " -o " + path("o.onnx")).code, 2);
  EXPECT_EQ(cli("quantize " + path("cnn.onnx") + " -o " + path("cnn.onnx") + " --mode dynamic").code, 2);
  Result cal = cli("quantize " + path("cnn.onnx") + " -o " + path("o.onnx") + " --mode static --calibrate " +
                   path("missing_dir"));
  EXPECT_EQ(cal.code, 4) << cal.out;
  std::mt19937 g(1);
  write_npy(path("small.npy"), random_normal(g, {1, 3, 8, 8}));
  Result shape = cli("quantize " + path("cnn.onnx") + " -o " + path("o.onnx") + " --mode static --calibrate " +
                     path("small.npy"));
  EXPECT_EQ(shape.code, 4) << shape.out;
  EXPECT_NE(shape.out.find("1x3x8x8"), std::string::npos) << shape.out;
  // Options of another mode are usage errors, not silently ignored.
  EXPECT_EQ(cli("quantize " + path("cnn.onnx") + " -o " + path("o.onnx") + " --mode dynamic --format qoperator").code, 2);
  EXPECT_EQ(cli("quantize " + path("cnn.onnx") + " -o " + path("o.onnx") + " --mode static --fp16-io").code, 2);
  EXPECT_EQ(cli("quantize " + path("cnn.onnx") + " -o " + path("o.onnx") + " --mode fp16 --calibrate " + path("small.npy")).code, 2);
  EXPECT_EQ(cli("quantize " + path("cnn.onnx") + " -o " + path("o.onnx") + " --mode static --method kl").code, 2);
  save_model(mlp(10), path("old.onnx"));
  Result old = cli("quantize " + path("old.onnx") + " -o " + path("o.onnx") + " --mode dynamic");
  EXPECT_EQ(old.code, 3) << old.out;
  EXPECT_NE(old.out.find("opset 11"), std::string::npos) << old.out;
  EXPECT_FALSE(fs::exists(path("o.onnx"))) << "no failed command leaves a model behind";
}

#ifdef T2O_WITH_TORCH
TEST_F(QuantizeCli, ConvertQuantize) {
  // A scripted 32 -> 64 -> `out` MLP saved as `name`.
  auto mlp_pt = [&](const std::string& name, int out) {
    std::string pt = path(name);
    std::string py = std::string(T2O_PYTHON) +
                     " -c \"import torch; torch.manual_seed(0); m = torch.nn.Sequential(torch.nn.Linear(32, 64), "
                     "torch.nn.ReLU(), torch.nn.Linear(64, " + std::to_string(out) + ")).eval(); "
                     "torch.jit.script(m).save('" + pt + "')\"";
    EXPECT_EQ(std::system(py.c_str()), 0) << py;
    return pt;
  };
  std::string pt = mlp_pt("mlp.pt", 10);
  Result d = cli("convert " + pt + " -o " + path("mlp.int8.onnx") + " --input input:4x32 --quantize dynamic --per-channel");
  ASSERT_EQ(d.code, 0) << d.out;
  EXPECT_NE(d.out.find("quantized 2 nodes to int8 (dynamic"), std::string::npos) << d.out;
  // The accuracy against the float model, as 'quantize' reports it (4 x 10 logits: a classifier).
  EXPECT_NE(d.out.find("accuracy  on 8 generated input sets (input 4x32), against the float model"), std::string::npos)
      << d.out;
  EXPECT_NE(d.out.find("top-1 agreement"), std::string::npos) << d.out;
  EXPECT_NO_THROW(check_model_file(path("mlp.int8.onnx")));
  Model q = load_model(path("mlp.int8.onnx"));
  EXPECT_EQ(count_op(q, "MatMulInteger"), 2);
  EXPECT_EQ(count_op(q, "Gemm") + count_op(q, "MatMul"), 0);
  Result s = cli("convert " + pt + " -o " + path("mlp.qdq.onnx") + " --input input:4x32 --quantize static");
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("GENERATED"), std::string::npos) << s.out;
  EXPECT_EQ(count_op(load_model(path("mlp.qdq.onnx")), "QuantizeLinear"), 2);
  EXPECT_EQ(cli("convert " + pt + " -o " + path("x.onnx") + " --input input:4x32 --quantize dynamic --verify").code, 2);
  EXPECT_EQ(cli("convert " + pt + " -o " + path("x.onnx") + " --input input:4x32 --per-channel").code, 2);
  EXPECT_EQ(cli("convert " + pt + " -o " + path("x.onnx") + " --input input:4x32 --max-drop 0.01").code, 2);
  EXPECT_FALSE(fs::exists(path("x.onnx")));
  // --max-drop: an output that is not logits is judged by 1 - cosine, which int8 rounding makes > 0:
  // exit 1, the model written anyway.
  std::string reg = mlp_pt("reg.pt", 1);
  Result over = cli("convert " + reg + " -o " + path("reg.int8.onnx") + " --input input:4x32 --quantize dynamic --max-drop 0");
  EXPECT_EQ(over.code, 1) << over.out;
  EXPECT_NE(over.out.find("exceeds --max-drop"), std::string::npos) << over.out;
  EXPECT_TRUE(fs::exists(path("reg.int8.onnx")));
  Result within = cli("convert " + reg + " -o " + path("reg.int8.onnx") + " --input input:4x32 --quantize dynamic --max-drop 0.01");
  EXPECT_EQ(within.code, 0) << within.out;
}
#endif

// --ort times both files in ONNX Runtime too; without it (no node, or no onnxruntime-node) the
// report says why and the command still succeeds.
TEST_F(QuantizeCli, OrtLatencyInTheReport) {
  std::string args = "quantize " + path("mlp.onnx") + " -o " + path("q.onnx") + " --mode dynamic --runs 3 --ort --report " +
                     path("r.json");
  if (t2o::test::run_shell("node -e \"require(require('path').join(require('os').homedir(), '.cache/torch2onnx/node_modules/onnxruntime-node'))\"").code == 0) {
    Result r = cli(args);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("ONNX Runtime"), std::string::npos) << r.out;
    nlohmann::json ort = read_json(path("r.json"))["latency_ms"]["onnxruntime"];
    EXPECT_GT(ort["float"].get<double>(), 0) << ort;
    EXPECT_GT(ort["quantized"].get<double>(), 0) << ort;
    EXPECT_FALSE(ort["version"].get<std::string>().empty()) << ort;
  }
  Result r = t2o::test::run_shell("env NODE_PATH= T2O_CACHE_DIR=" + path("none") + " HOME=" + path("none") + " " +
                                  std::string(T2O_CLI) + " " + args);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("--ort: no ONNX Runtime latency"), std::string::npos) << r.out;
  nlohmann::json j = read_json(path("r.json"));
  EXPECT_FALSE(j["latency_ms"]["onnxruntime"]["error"].get<std::string>().empty()) << j;
  EXPECT_GT(j["latency_ms"]["quantized"].get<double>(), 0);
}

}  // namespace
