// The command line on hostile and broken files: exit 4 and one line naming the file and what is
// wrong, never a signal, a hang, a read outside the model folder or a silent wrong result.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "onnx/model_io.h"
#include "onnx/tensor_io.h"
#include "shell_support.h"

namespace fs = std::filesystem;
using namespace t2o;

namespace {

using Result = t2o::test::ShellResult;

// Runs the CLI under `timeout`, so a hang shows as exit 124 instead of stalling the suite.
Result cli(const std::string& args, int timeout_s = 60) {
  return t2o::test::run_shell("timeout " + std::to_string(timeout_s) + " " + std::string(T2O_CLI) + " " + args);
}

// Exit 4, one "error:" line (plus at most a "hint:" line) that contains `names`.
void expect_bad_input(const Result& r, const std::string& names = {}) {
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << r.out;
  size_t lines = std::count(r.out.begin(), r.out.end(), '\n');
  bool has_hint = r.out.find("\nhint: ") != std::string::npos;
  EXPECT_EQ(lines, has_hint ? 2u : 1u) << r.out;
  if (!names.empty()) {
    EXPECT_NE(r.out.find(names), std::string::npos) << r.out;
  }
}

class CliHardening : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("t2o_cli_hard_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "out");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string file(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return path(name);
  }
  std::string model(const std::string& name, const onnx::ModelProto& p) { return file(name, p.SerializeAsString()); }
  std::string run_args(const std::string& m) const { return "run " + m + " --quiet --out-dir " + path("out"); }
  fs::path dir_;
};

onnx::ModelProto base_model() {
  onnx::ModelProto p;
  p.set_ir_version(8);
  p.add_opset_import()->set_version(17);
  p.mutable_graph()->set_name("g");
  return p;
}

void add_node(onnx::ModelProto& p, const std::string& op, std::vector<std::string> in, const std::string& out) {
  auto* n = p.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(op + "_node");
  for (auto& i : in) n->add_input(i);
  n->add_output(out);
}

void add_output(onnx::ModelProto& p, const std::string& name, int elem = onnx::TensorProto::FLOAT) {
  auto* o = p.mutable_graph()->add_output();
  o->set_name(name);
  o->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
}

onnx::TensorProto& add_init(onnx::ModelProto& p, const std::string& name, int elem, std::vector<int64_t> dims) {
  auto* t = p.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(elem);
  for (int64_t d : dims) t->add_dims(d);
  return *t;
}

void external(onnx::TensorProto& t, const std::string& location) {
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = t.add_external_data();
  e->set_key("location");
  e->set_value(location);
}

}  // namespace

// 1. [2^62, 4] wrapped to an empty tensor that `check` called valid and `run` overran.
TEST_F(CliHardening, WrappingDimsAreInvalidForCheckAndRun) {
  onnx::ModelProto p = base_model();
  add_init(p, "w", onnx::TensorProto::FLOAT, {int64_t{1} << 62, 4});
  add_node(p, "Identity", {"w"}, "y");
  add_output(p, "y");
  std::string m = model("wrap.onnx", p);
  expect_bad_input(cli("check " + m), "wrap.onnx");
  expect_bad_input(cli(run_args(m)), "wrap.onnx");
}

TEST_F(CliHardening, TileThatWrapsIsAnErrorNotAnEmptyOutput) {
  onnx::ModelProto p = base_model();
  add_init(p, "x", onnx::TensorProto::FLOAT, {4}).set_raw_data(std::string(16, '\0'));
  add_init(p, "r", onnx::TensorProto::INT64, {1}).add_int64_data(int64_t{1} << 62);
  add_node(p, "Tile", {"x", "r"}, "y");
  add_output(p, "y");
  expect_bad_input(cli(run_args(model("tile.onnx", p))), "Tile_node");
  EXPECT_FALSE(fs::exists(dir_ / "out" / "output_0.npy"));
}

TEST_F(CliHardening, MaxMemoryCapsWhatAModelMayAllocate) {
  onnx::ModelProto p = base_model();
  add_init(p, "s", onnx::TensorProto::INT64, {1}).add_int64_data(int64_t{1} << 28);  // 1 GiB of floats
  add_node(p, "ConstantOfShape", {"s"}, "y");
  add_output(p, "y");
  std::string m = model("big.onnx", p);
  Result r = cli(run_args(m) + " --max-memory 64M");
  expect_bad_input(r, "memory limit");
  EXPECT_EQ(cli(run_args(m) + " --max-memory lots").code, 2);
}

// A Loop that runs for as long as its trip count says (10^17 iterations): `run --timeout` stops it
// with exit 4 naming the limit; a bad value is a usage error.
TEST_F(CliHardening, TimeoutStopsALoopThatRunsOnAndOn) {
  onnx::ModelProto p = base_model();
  add_init(p, "trips", onnx::TensorProto::INT64, {}).add_int64_data(100000000000000000);
  add_init(p, "v0", onnx::TensorProto::FLOAT, {1}).add_float_data(1.0f);
  add_node(p, "Loop", {"trips", "", "v0"}, "y");
  auto* body = p.mutable_graph()->mutable_node(0)->add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto& b = *body->mutable_g();
  b.set_name("body");
  auto value = [](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name, int elem) {
    auto* v = list->Add();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  };
  value(b.mutable_input(), "i", onnx::TensorProto::INT64);
  value(b.mutable_input(), "c", onnx::TensorProto::BOOL);
  value(b.mutable_input(), "v", onnx::TensorProto::FLOAT);
  for (auto [in, out] : {std::pair{"c", "c_out"}, std::pair{"v", "v_out"}}) {
    auto* n = b.add_node();
    n->set_op_type("Identity");
    n->add_input(in);
    n->add_output(out);
  }
  value(b.mutable_output(), "c_out", onnx::TensorProto::BOOL);
  value(b.mutable_output(), "v_out", onnx::TensorProto::FLOAT);
  add_output(p, "y");
  std::string m = model("loop.onnx", p);
  auto t0 = std::chrono::steady_clock::now();
  expect_bad_input(cli(run_args(m) + " --timeout 0.3"), "time limit");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
  EXPECT_FALSE(fs::exists(dir_ / "out" / "output_0.npy"));
  EXPECT_EQ(cli(run_args(m) + " --timeout -1").code, 2);
}

// 2. External data through symlinks, and FIFOs.
TEST_F(CliHardening, ExternalDataSymlinkOutOfTheFolderIsNotRead) {
  fs::create_directories(dir_ / "secret");
  file("secret/key.bin", std::string(16, 'K'));
  fs::create_directories(dir_ / "m");
  fs::create_symlink(dir_ / "secret" / "key.bin", dir_ / "m" / "w.bin");
  fs::create_directory_symlink(dir_ / "secret", dir_ / "m" / "linked");
  for (const char* loc : {"w.bin", "linked/key.bin"}) {
    onnx::ModelProto p = base_model();
    external(add_init(p, "w", onnx::TensorProto::FLOAT, {4}), loc);
    add_node(p, "Identity", {"w"}, "y");
    add_output(p, "y");
    std::string m = model("m/model.onnx", p);
    Result r = cli(run_args(m));
    expect_bad_input(r, "outside the model folder");
    EXPECT_FALSE(fs::exists(dir_ / "out" / "output_0.npy")) << loc;
    expect_bad_input(cli("check " + m), "model.onnx");
  }
}

TEST_F(CliHardening, FifoAsDataOrInputDoesNotHang) {
  fs::create_directories(dir_ / "m");
  ASSERT_EQ(::mkfifo((dir_ / "m" / "w.bin").c_str(), 0600), 0);
  onnx::ModelProto p = base_model();
  external(add_init(p, "w", onnx::TensorProto::FLOAT, {4}), "w.bin");
  add_node(p, "Identity", {"w"}, "y");
  add_output(p, "y");
  std::string m = model("m/model.onnx", p);
  expect_bad_input(cli("check " + m, 20), "not a regular file");
  expect_bad_input(cli(run_args(m), 20), "not a regular file");
  // A FIFO given as an input file.
  onnx::ModelProto q = base_model();
  auto* in = q.mutable_graph()->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  add_node(q, "Relu", {"x"}, "y");
  add_output(q, "y");
  std::string relu = model("relu.onnx", q);
  ASSERT_EQ(::mkfifo(path("x.npy").c_str(), 0600), 0);
  expect_bad_input(cli(run_args(relu) + " --input x=" + path("x.npy"), 20), "x.npy");
}

TEST_F(CliHardening, PbInputWithEscapingExternalDataIsNotRead) {
  onnx::ModelProto q = base_model();
  auto* in = q.mutable_graph()->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  add_node(q, "Identity", {"x"}, "y");
  add_output(q, "y");
  std::string m = model("id.onnx", q);
  fs::create_directories(dir_ / "secret");
  file("secret/key.bin", std::string(16, 'K'));
  fs::create_directories(dir_ / "data");
  fs::create_symlink(dir_ / "secret" / "key.bin", dir_ / "data" / "k.bin");
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(4);
  external(t, "k.bin");
  file("data/input_0.pb", t.SerializeAsString());
  expect_bad_input(cli(run_args(m) + " --input-dir " + path("data")), "input_0.pb");
  EXPECT_FALSE(fs::exists(dir_ / "out" / "output_0.npy"));
}

// 4. A GRAPH attribute without a graph crashed the ONNX writer in check and convert-version.
TEST_F(CliHardening, GraphAttributeWithoutAGraph) {
  onnx::ModelProto p = base_model();
  auto* in = p.mutable_graph()->add_input();
  in->set_name("c");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  add_node(p, "If", {"c"}, "y");
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = p.mutable_graph()->mutable_node(0)->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
  }
  add_output(p, "y");
  std::string m = model("if.onnx", p);
  expect_bad_input(cli("check " + m), "if.onnx");
  expect_bad_input(cli("convert-version " + m + " -o " + path("out.onnx") + " --opset 16"), "if.onnx");
  Result r = cli(run_args(m));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_LT(r.code, 128) << r.out;
}

// 8. Crashes of onnx's shape inference are contained: exit 4, not SIGSEGV.
TEST_F(CliHardening, OnnxShapeInferenceCrashIsExitFour) {
  onnx::ModelProto p = base_model();
  auto* in = p.mutable_graph()->add_input();
  in->set_name("s");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape();  // a scalar signal
  add_init(p, "step", onnx::TensorProto::INT64, {}).add_int64_data(8);
  add_init(p, "len", onnx::TensorProto::INT64, {}).add_int64_data(16);
  add_node(p, "STFT", {"s", "step", "", "len"}, "y");
  add_output(p, "y");
  expect_bad_input(cli("check " + model("stft.onnx", p)), "onnx");
}
