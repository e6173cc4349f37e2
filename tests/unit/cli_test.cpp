// The CLI on bad input: a clear one-line error and the documented exit code, never a crash.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <cmath>

#include "onnx/model_io.h"
#include "onnx/tensor_io.h"
#include "shell_support.h"

namespace fs = std::filesystem;
using namespace t2o;

namespace {

using Result = t2o::test::ShellResult;

Result run(const std::string& args) { return t2o::test::run_shell(std::string(T2O_CLI) + " " + args); }

class CliBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("t2o_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name, const std::string& bytes) {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  fs::path dir_;
};

// One "error:" line, optionally followed by one "hint:" line.
void expect_one_clear_line(const Result& r) {
  EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << r.out;
  size_t lines = std::count(r.out.begin(), r.out.end(), '\n');
  bool has_hint = r.out.find("\nhint: ") != std::string::npos;
  EXPECT_EQ(lines, has_hint ? 2u : 1u) << r.out;
}

Model tiny_relu() {
  Model m;
  m.opset_import = {{"", 13}};
  m.graph.name = "g";
  m.graph.inputs.push_back({"x", Type::tensor(DType::Float, Shape::of({2, 3})), ""});
  m.graph.outputs.push_back({"y", Type::tensor(DType::Float, Shape::of({2, 3})), ""});
  Node n;
  n.op_type = "Relu";
  n.name = "relu1";
  n.inputs = {"x"};
  n.outputs = {"y"};
  m.graph.nodes.push_back(n);
  return m;
}

}  // namespace

TEST_F(CliBadInput, MissingFile) {
  for (const char* cmd : {"check", "inspect"}) {
    Result r = run(std::string(cmd) + " " + (dir_ / "nope.onnx").string());
    EXPECT_EQ(r.code, 4);
    expect_one_clear_line(r);
    EXPECT_NE(r.out.find("does not exist"), std::string::npos);
  }
}

TEST_F(CliBadInput, RandomBytes) {
  std::mt19937 rng(7);
  std::string bytes(4096, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  std::string p = file("random.onnx", bytes);
  for (const char* cmd : {"check", "inspect"}) {
    Result r = run(std::string(cmd) + " " + p);
    EXPECT_EQ(r.code, 4) << r.out;
    expect_one_clear_line(r);
  }
}

TEST_F(CliBadInput, JsonRenamedOnnx) {
  std::string p = file("model.onnx", "{\"graph\": {\"node\": []}}\n");
  Result r = run("check " + p);
  EXPECT_EQ(r.code, 4);
  expect_one_clear_line(r);
  EXPECT_NE(r.out.find("JSON"), std::string::npos) << r.out;
}

TEST_F(CliBadInput, TruncatedModel) {
  std::string good = save_model_to_bytes(tiny_relu());
  std::string p = file("good.onnx", good);
  EXPECT_EQ(run("check " + p).code, 0);
  for (size_t cut : {good.size() / 2, good.size() - 3, size_t{5}}) {
    std::string t = file("truncated.onnx", good.substr(0, cut));
    Result r = run("check " + t);
    EXPECT_EQ(r.code, 4) << "cut at " << cut << ": " << r.out;
    expect_one_clear_line(r);
  }
}

TEST_F(CliBadInput, EmptyFile) {
  Result r = run("check " + file("empty.onnx", ""));
  EXPECT_EQ(r.code, 4);
  expect_one_clear_line(r);
}

TEST_F(CliBadInput, DanglingInputName) {
  Model m = tiny_relu();
  m.graph.nodes[0].inputs = {"not_defined_anywhere"};
  std::string p = file("dangling.onnx", save_model_to_bytes(m));
  Result r = run("check " + p);
  EXPECT_EQ(r.code, 4);
  expect_one_clear_line(r);
  EXPECT_NE(r.out.find("not_defined_anywhere"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("relu1"), std::string::npos) << "names the node: " << r.out;
}

TEST_F(CliBadInput, DirectoryInsteadOfFile) {
  Result r = run("check " + dir_.string());
  EXPECT_EQ(r.code, 4);
  expect_one_clear_line(r);
}

TEST(Cli, HelpOnToolAndEveryCommand) {
  Result r = run("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("Exit codes"), std::string::npos);
  for (const char* cmd : {"inspect", "check", "run"}) {
    Result c = run(std::string(cmd) + " --help");
    EXPECT_EQ(c.code, 0) << cmd;
    EXPECT_NE(c.out.find("Example"), std::string::npos) << cmd << " --help has no example";
  }
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run("").code, 2);
  EXPECT_EQ(run("no-such-command").code, 2);
  EXPECT_EQ(run("check").code, 2);
  EXPECT_EQ(run("check a.onnx --no-such-flag").code, 2);
}

TEST_F(CliBadInput, ValidModelInspectAndCheck) {
  std::string p = file("relu.onnx", save_model_to_bytes(tiny_relu()));
  Result c = run("check " + p);
  EXPECT_EQ(c.code, 0) << c.out;
  Result i = run("inspect " + p + " --json");
  EXPECT_EQ(i.code, 0);
  EXPECT_NE(i.out.find("\"Relu\": 1"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("\"ai.onnx\": 13"), std::string::npos) << i.out;
}

// `run --input-dir` on backend test folders writes outputs equal to the expected output_K.pb.
TEST(Cli, RunInputDirMatchesBackendTestData) {
  std::vector<fs::path> dirs;
  for (const char* folder : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    std::vector<fs::path> all;
    for (const auto& e : fs::directory_iterator(fs::path(T2O_TESTDATA) / folder))
      if (e.is_directory()) all.push_back(e.path());
    std::sort(all.begin(), all.end());
    for (size_t i = 0; i < all.size(); i += 40) dirs.push_back(all[i]);
  }
  dirs.push_back(fs::path(T2O_TESTDATA) / "node" / "test_sequence_insert_at_back");
  fs::path out = fs::temp_directory_path() / ("t2o_run_dir_" + std::to_string(::getpid()));
  int compared = 0;
  for (const fs::path& d : dirs) {
    SCOPED_TRACE(d.string());
    fs::path set = d / "test_data_set_0";
    fs::remove_all(out);
    Result r = run("run " + (d / "model.onnx").string() + " --input-dir " + set.string() + " --out-dir " +
                   out.string() + " --quiet");
    std::string name = d.filename().string();
    if (name.find("bernoulli") != std::string::npos || name.find("castlike_") != std::string::npos) continue;
    ASSERT_EQ(r.code, 0) << r.out;
    for (int k = 0; fs::exists(set / ("output_" + std::to_string(k) + ".pb")); ++k) {
      std::string f = "output_" + std::to_string(k) + ".pb";
      ASSERT_TRUE(fs::exists(out / f));
      for (const char* kind : {"tensor", "sequence"}) {
        PbValue want, got;
        try {
          want = read_value_pb((set / f).string(), kind);
          got = read_value_pb((out / f).string(), kind);
        } catch (const Error&) {
          continue;
        }
        if (want.kind == PbValue::Kind::Tensor) {
          if (!want.tensor.defined() || want.tensor.dtype() == DType::Undefined) continue;
          ASSERT_EQ(want.tensor.dims(), got.tensor.dims());
          ASSERT_EQ(want.tensor.dtype(), got.tensor.dtype());
          if (want.tensor.dtype() == DType::String) continue;
          for (int64_t i = 0; i < want.tensor.numel(); ++i) {
            double w = want.tensor.as_double(i), g = got.tensor.as_double(i);
            if (std::isnan(w) && std::isnan(g)) continue;
            ASSERT_LE(std::fabs(w - g), 1e-7 + 1e-3 * std::fabs(w)) << f << " element " << i;
          }
        } else {
          ASSERT_EQ(want.sequence.size(), got.sequence.size());
        }
        ++compared;
        break;
      }
    }
  }
  fs::remove_all(out);
  EXPECT_GT(compared, 20);
}
