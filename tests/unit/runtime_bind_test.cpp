// Session::run into caller buffers (the C++ side of I/O binding): results land in the caller's
// memory, repeated runs take no new buffers from the allocator, and bad bindings are clear errors.
#include <gtest/gtest.h>

#include <random>

#include "runtime/session.h"
#include "test_support.h"

using namespace t2o;

namespace {

// x f32[batch,4] -> h = Relu(Gemm(x, W, B)) -> y = h * 2 (f32[batch,3]); also
// `same` = Identity(x), an output computed without allocating.
Model mlp() {
  std::mt19937 rng(3);
  Model m;
  m.opset_import = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back({"x", Type::tensor(DType::Float, Shape{{Dim::named("batch"), Dim::fixed(4)}}), ""});
  g.initializers.push_back({"W", test::random_normal(rng, {4, 3}), ""});
  g.initializers.push_back({"B", test::random_normal(rng, {3}), ""});
  g.initializers.push_back({"two", Tensor::scalar<float>(2.0f), ""});
  g.nodes.push_back(test::make_node("Gemm", {"x", "W", "B"}, {"g"}));
  g.nodes.push_back(test::make_node("Relu", {"g"}, {"h"}));
  g.nodes.push_back(test::make_node("Mul", {"h", "two"}, {"y"}));
  g.nodes.push_back(test::make_node("Identity", {"x"}, {"same"}));
  g.outputs.push_back({"y", Type::tensor(DType::Float, Shape{{Dim::named("batch"), Dim::fixed(3)}}), ""});
  g.outputs.push_back({"same", Type::tensor(DType::Float, Shape{{Dim::named("batch"), Dim::fixed(4)}}), ""});
  return m;
}

}  // namespace

TEST(SessionBind, OutputsLandInTheCallersBuffers) {
  Session s(mlp(), {.threads = 1});
  std::mt19937 rng(5);
  Tensor x = test::random_normal(rng, {2, 4});
  auto want = s.run({{"x", x}});
  std::vector<float> y(6, -7.0f), same(8, -7.0f);
  Tensor yb = Tensor::borrow(DType::Float, {2, 3}, y.data());
  Tensor sb = Tensor::borrow(DType::Float, {2, 4}, same.data());
  auto got = s.run({{"x", x}}, {{"y", yb}, {"same", sb}});
  EXPECT_EQ(got.at("y").tensor.raw(), y.data());
  EXPECT_EQ(got.at("same").tensor.raw(), same.data());
  EXPECT_TRUE(yb.equals(want.at("y").tensor));
  EXPECT_TRUE(sb.equals(x));  // copied: Identity returns its input without allocating
}

TEST(SessionBind, RepeatedBoundRunsAllocateNothing) {
  Session s(mlp(), {.threads = 1});
  std::mt19937 rng(6);
  Tensor x = test::random_normal(rng, {5, 4});
  std::vector<float> y(15);
  Tensor yb = Tensor::borrow(DType::Float, {5, 3}, y.data());
  s.run({{"x", x}}, {{"y", yb}});
  size_t after_first = s.fresh_buffers();
  EXPECT_GT(after_first, 0u);
  for (int i = 0; i < 50; ++i) s.run({{"x", x}}, {{"y", yb}});
  EXPECT_EQ(s.fresh_buffers(), after_first);
  // The counter does move when outputs are kept without binding: each kept result holds a buffer.
  std::vector<std::map<std::string, RValue>> kept;
  for (int i = 0; i < 3; ++i) kept.push_back(s.run({{"x", x}}));
  EXPECT_GT(s.fresh_buffers(), after_first);
}

TEST(SessionBind, BadBindingsAreClearErrors) {
  Session s(mlp(), {.threads = 1});
  Tensor x(DType::Float, {2, 4});
  std::vector<float> buf(64);
  auto message = [&](const std::map<std::string, Tensor>& outs) {
    try {
      s.run({{"x", x}}, outs);
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), kExitUsage);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"nope", Tensor::borrow(DType::Float, {2, 3}, buf.data())}}).find("no output named 'nope'"),
            std::string::npos);
  EXPECT_NE(message({{"y", Tensor::borrow(DType::Float, {2, 5}, buf.data())}}).find("output 'y' is f32[2x3]"),
            std::string::npos);
  std::vector<double> d(6);
  EXPECT_NE(message({{"y", Tensor::borrow(DType::Double, {2, 3}, d.data())}}).find("is f64[2x3]"), std::string::npos);
  EXPECT_NE(message({{"y", Tensor::borrow(DType::Float, {2, 3}, x.raw())}}).find("overlaps input 'x'"),
            std::string::npos);
}
