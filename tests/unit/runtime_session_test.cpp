// Session: input validation, NaN propagation, model-local functions, subgraph scoping.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/session.h"

using namespace t2o;

namespace {

Node node(std::string op, std::vector<std::string> in, std::vector<std::string> out, std::string name = {}) {
  Node n;
  n.op_type = std::move(op);
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.name = std::move(name);
  return n;
}

// y = Relu(x) + b, x: f32[batch x 3]
Model relu_add() {
  Model m;
  m.opset_import = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back({"x", Type::tensor(DType::Float, Shape{{Dim::named("batch"), Dim::fixed(3)}}), ""});
  g.outputs.push_back({"y", Type::tensor(DType::Float, std::nullopt), ""});
  g.initializers.push_back({"b", Tensor::from_vector<float>({1, 2, 3}, {3}), ""});
  g.nodes.push_back(node("Relu", {"x"}, {"r"}, "relu"));
  g.nodes.push_back(node("Add", {"r", "b"}, {"y"}, "add"));
  return m;
}

}  // namespace

TEST(Session, RunsAndBorrowsInputs) {
  Session s(relu_add());
  ASSERT_EQ(s.inputs().size(), 1u);
  std::vector<float> data = {-1, 0, 1, 2, -3, 4};
  auto out = s.run({{"x", Tensor::borrow(DType::Float, {2, 3}, data.data())}});
  const Tensor& y = out.at("y").tensor;
  std::vector<float> want = {1, 2, 4, 3, 2, 7};
  ASSERT_EQ(y.dims(), (Dims{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y.data<float>()[i], want[static_cast<size_t>(i)]);
}

TEST(Session, WrongDtypeIsAClearError) {
  Session s(relu_add());
  try {
    s.run({{"x", Tensor(DType::Double, {2, 3})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("element type f64"), std::string::npos) << e.what();
  }
}

TEST(Session, WrongRankIsAClearError) {
  Session s(relu_add());
  try {
    s.run({{"x", Tensor(DType::Float, {6})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
}

TEST(Session, WrongStaticSizeIsAClearError) {
  Session s(relu_add());
  EXPECT_THROW(s.run({{"x", Tensor(DType::Float, {2, 4})}}), Error);
}

TEST(Session, MissingAndUnknownInputs) {
  Session s(relu_add());
  try {
    s.run({});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }
  try {
    s.run({{"x", Tensor(DType::Float, {1, 3})}, {"z", Tensor(DType::Float, {1})}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no input named 'z'"), std::string::npos);
  }
}

TEST(Session, NaNPropagates) {
  Session s(relu_add());
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> data(6, nan);
  auto out = s.run({{"x", Tensor::borrow(DType::Float, {2, 3}, data.data())}});
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(std::isnan(out.at("y").tensor.data<float>()[i])) << i;
}

TEST(Session, DanglingNameIsAnInputError) {
  Model m = relu_add();
  m.graph.nodes[1].inputs[0] = "nowhere";
  EXPECT_THROW(Session{m}, InputError);
}

TEST(Session, ModelLocalFunctionsExpand) {
  Model m;
  m.opset_import = {{"", 17}, {"custom", 1}};
  Function f;
  f.name = "ReluPlusOne";
  f.domain = "custom";
  f.inputs = {"a"};
  f.outputs = {"b"};
  f.opset_import = {{"", 17}};
  Node one = node("Constant", {}, {"one"});
  one.attributes.push_back(Attribute::make_tensor("value", Tensor::scalar<float>(1.0f)));
  f.nodes = {node("Relu", {"a"}, {"r"}), one, node("Add", {"r", "one"}, {"b"})};
  m.functions.push_back(f);
  m.graph.inputs.push_back({"x", Type::tensor(DType::Float, Shape::of({3})), ""});
  m.graph.outputs.push_back({"y", Type::tensor(DType::Float, Shape::of({3})), ""});
  Node call = node("ReluPlusOne", {"x"}, {"mid"}, "call1");
  call.domain = "custom";
  Node call2 = node("ReluPlusOne", {"mid"}, {"y"}, "call2");
  call2.domain = "custom";
  m.graph.nodes = {call, call2};
  Session s(m);
  auto out = s.run({{"x", Tensor::from_vector<float>({-2, 0, 3}, {3})}});
  const float* y = out.at("y").tensor.data<float>();
  EXPECT_FLOAT_EQ(y[0], 2);
  EXPECT_FLOAT_EQ(y[1], 2);
  EXPECT_FLOAT_EQ(y[2], 5);
}
