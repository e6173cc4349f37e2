// Broken TorchScript and torch.save files through `convert`: exit 4 with one line naming the file,
// never a signal and never a model whose weights hold bytes from beyond a truncated record.
// The files are made at test time by tests/fuzz/torch_inputs.py (Debian's torch).
#include <gtest/gtest.h>
#include "shell_support.h"
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>

namespace fs = std::filesystem;

namespace {

using Result = t2o::test::ShellResult;

Result sh(const std::string& cmd) { return t2o::test::run_shell(cmd); }

class TorchHardening : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("t2o_torch_hard_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    Result r = sh(std::string(T2O_PYTHON) + " " + T2O_SOURCE_DIR + "/tests/fuzz/torch_inputs.py fixtures " + dir_.string());
    ASSERT_EQ(r.code, 0) << r.out;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string f(const std::string& name) { return (dir_ / name).string(); }
  static Result convert(const std::string& pt, const std::string& extra = {}) {
    return sh("timeout 300 " + std::string(T2O_CLI) + " convert " + f(pt) + " -o " + f("out.onnx") + " --input x:2x4 " + extra);
  }
  static void expect_bad_input(const Result& r, const std::string& names) {
    EXPECT_EQ(r.code, 4) << r.out;
    EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << r.out;
    size_t lines = std::count(r.out.begin(), r.out.end(), '\n');
    EXPECT_EQ(lines, r.out.find("\nhint: ") != std::string::npos ? 2u : 1u) << r.out;
    EXPECT_NE(r.out.find(names), std::string::npos) << r.out;
  }
  static fs::path dir_;
};
fs::path TorchHardening::dir_;

}  // namespace

TEST_F(TorchHardening, GoodFileConverts) {
  Result r = convert("good.pt");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(convert("good.pt", "--weights " + f("state.pth")).code, 0);
}

// 7. A weight record shorter than its shape converted with exit 0 and heap bytes as weights.
TEST_F(TorchHardening, TruncatedWeightRecordIsRefused) {
  fs::remove(f("out.onnx"));
  expect_bad_input(convert("truncated.pt"), "reaches past its data");
  EXPECT_FALSE(fs::exists(f("out.onnx")));
}

TEST_F(TorchHardening, TruncatedStateDictIsRefused) {
  expect_bad_input(convert("good.pt", "--weights " + f("state_truncated.pth")), "truncated");
}

// 8. 10,000 nested parentheses overflowed libtorch's parser stack.
TEST_F(TorchHardening, DeeplyNestedCodeIsRefusedBeforeParsing) {
  expect_bad_input(convert("nested.pt"), "nested.pt");
}
