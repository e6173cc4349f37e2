// torch2onnx optimize on the command line: output, --json summary, --help, and bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "onnx/model_io.h"
#include "passes_support.h"
#include "shell_support.h"

namespace fs = std::filesystem;
using namespace t2o;
using namespace t2o::test;

namespace {

using Result = t2o::test::ShellResult;

Result cli(const std::string& args) { return t2o::test::run_shell(std::string(T2O_CLI) + " " + args); }

class OptimizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("t2o_optimize_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::mt19937 g(1);
    ModelBuilder b;
    b.input("x", {"batch", 2, 5, 5}).init("w", random_uniform(g, {3, 2, 3, 3}));
    b.init("s", random_uniform(g, {3}, 0.5f, 2)).init("b", random_uniform(g, {3})).init("m", random_uniform(g, {3}));
    b.init("v", random_uniform(g, {3}, 0.5f, 2));
    b.node("Conv", {"x", "w"}, {"c"}).node("BatchNormalization", {"c", "s", "b", "m", "v"}, {"n"});
    b.node("Identity", {"n"}, {"i"}).node("Relu", {"i"}, {"y"}).output("y", {"batch", 3, 3, 3});
    in_ = (dir_ / "in.onnx").string();
    save_model(b.m, in_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  fs::path dir_;
  std::string in_;
};

std::string read(const std::string& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_F(OptimizeCli, WritesTheOptimizedModelAndASummary) {
  Result r = cli("optimize " + in_ + " -o " + path("out.onnx") + " --verify --json " + path("s.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("4 -> 2 nodes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("proven on 2 samples"), std::string::npos) << r.out;
  Model m = load_model(path("out.onnx"));
  EXPECT_EQ(count_op(m, "BatchNormalization"), 0);
  EXPECT_EQ(count_op(m, "Identity"), 0);
  std::string j = read(path("s.json"));
  for (const char* key : {"\"nodes_before\": 4", "\"nodes_after\": 2", "\"initializer_bytes_before\"",
                          "\"initializer_bytes_after\"", "\"name\": \"fuse_bn_into_conv\"", "\"rewrites\": 1",
                          "\"verified\": true", "\"ms\""})
    EXPECT_NE(j.find(key), std::string::npos) << key << " in\n" << j;
}

TEST_F(OptimizeCli, LevelsAndPassLists) {
  ASSERT_EQ(cli("optimize " + in_ + " -o " + path("l0.onnx") + " --level 0 --quiet").code, 0);
  EXPECT_EQ(load_model(path("l0.onnx")).graph.nodes.size(), 4u);
  ASSERT_EQ(cli("optimize " + in_ + " -o " + path("l1.onnx") + " --level 1 --quiet").code, 0);
  EXPECT_EQ(count_op(load_model(path("l1.onnx")), "BatchNormalization"), 1) << "folding BN is a level-2 fusion";
  ASSERT_EQ(cli("optimize " + in_ + " -o " + path("p.onnx") + " --passes eliminate_identity --quiet").code, 0);
  EXPECT_EQ(load_model(path("p.onnx")).graph.nodes.size(), 3u);
}

TEST_F(OptimizeCli, HelpListsEveryPass) {
  Result r = cli("optimize --help");
  ASSERT_EQ(r.code, 0);
  for (const Pass& p : builtin_passes()) EXPECT_NE(r.out.find(p.name), std::string::npos) << p.name;
}

TEST_F(OptimizeCli, BadInputGetsOneClearLine) {
  struct Case {
    std::string args;
    int code;
    std::string text;
  } cases[] = {
      {"optimize " + in_ + " -o " + path("o.onnx") + " --passes fold_constants,nope", 2, "unknown pass 'nope'"},
      {"optimize " + in_ + " -o " + in_, 2, "overwrite the input"},
      {"optimize " + path("missing.onnx") + " -o " + path("o.onnx"), 4, "missing.onnx"},
      {"optimize " + in_ + " -o " + path("o.onnx") + " --level 3", 2, "--level"},
  };
  for (const Case& c : cases) {
    Result r = cli(c.args);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(c.text), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(path("o.onnx"))) << "nothing is written on failure";
  }
}
