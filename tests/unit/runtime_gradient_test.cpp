// ai.onnx.preview.training::Gradient: gradients of small hand-built graphs (MatMul, broadcast Add,
// Relu, Mul, and the other supported ops) against central finite differences of sum(y), which is
// what Gradient computes since it seeds dY with ones.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/session.h"

using namespace t2o;

namespace {

Node make_node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs) {
  Node n;
  n.op_type = op;
  n.name = outs[0] + "_node";
  n.inputs = std::move(ins);
  n.outputs = std::move(outs);
  return n;
}

struct Case {
  std::vector<Node> forward;                      // computes "y"
  std::vector<std::pair<std::string, Tensor>> xs;  // differentiated
  std::vector<std::pair<std::string, Tensor>> zs;  // held constant
};

// The model: the forward nodes, then Gradient(xs; y) with outputs "g_<x>"; y is an output too so
// that finite differences can run the same model.
Model build(const Case& c) {
  Model m;
  m.opset_import = {{"", 17}, {"ai.onnx.preview.training", 1}};
  Node g;
  g.op_type = "Gradient";
  g.domain = "ai.onnx.preview.training";
  g.name = "grad";
  std::vector<std::string> xs, zs;
  for (const auto& [name, t] : c.xs) xs.push_back(name);
  for (const auto& [name, t] : c.zs) zs.push_back(name);
  for (const auto* group : {&c.xs, &c.zs})
    for (const auto& [name, t] : *group) {
      m.graph.inputs.push_back({name, Type::tensor(t.dtype(), Shape::of(t.dims())), {}});
      g.inputs.push_back(name);
    }
  for (const std::string& x : xs) g.outputs.push_back("g_" + x);
  g.attributes = {Attribute::make_strings("xs", xs), Attribute::make_string("y", "y")};
  if (!zs.empty()) g.attributes.push_back(Attribute::make_strings("zs", zs));
  m.graph.nodes = c.forward;
  m.graph.nodes.push_back(g);
  m.graph.outputs.push_back({"y", Type::tensor(DType::Undefined), {}});
  for (const std::string& x : xs) m.graph.outputs.push_back({"g_" + x, Type::tensor(DType::Undefined), {}});
  return m;
}

std::map<std::string, RValue> feeds_of(const Case& c) {
  std::map<std::string, RValue> f;
  for (const auto* group : {&c.xs, &c.zs})
    for (const auto& [name, t] : *group) f[name] = t;
  return f;
}

double sum_of(const Tensor& t) {
  double s = 0;
  for (int64_t i = 0; i < t.numel(); ++i) s += t.as_double(i);
  return s;
}

void set(Tensor& t, int64_t i, double v) {
  if (t.dtype() == DType::Float) t.data<float>()[i] = static_cast<float>(v);
  else t.data<double>()[i] = v;
}

Tensor random_tensor(DType dt, Dims dims, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Tensor t(dt, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, u(rng));
  return t;
}

// Checks each analytic gradient element against (f(x+h) - f(x-h)) / 2h with f = sum(y).
void check_against_finite_differences(const Case& c, double h, double tol) {
  Session s(build(c), {.threads = 1});
  auto feeds = feeds_of(c);
  auto out = s.run(feeds);
  for (const auto& [name, x] : c.xs) {
    const Tensor& g = out.at("g_" + name).tensor;
    ASSERT_EQ(g.dtype(), x.dtype()) << name;
    ASSERT_EQ(g.dims(), x.dims()) << name;
    for (int64_t i = 0; i < x.numel(); ++i) {
      Tensor xp = x.clone(), xm = x.clone();
      set(xp, i, x.as_double(i) + h);
      set(xm, i, x.as_double(i) - h);
      auto fp = feeds, fm = feeds;
      fp[name] = xp;
      fm[name] = xm;
      double numeric = (sum_of(s.run(fp).at("y").tensor) - sum_of(s.run(fm).at("y").tensor)) / (2 * h);
      EXPECT_NEAR(g.as_double(i), numeric, tol * (1 + std::fabs(numeric))) << name << "[" << i << "]";
    }
  }
}

// y = Mul(Relu(MatMul(A, B) + c), W): MatMul, broadcast Add (c is [4] against [2,4]), Relu, Mul.
Case mlp_case(DType dt) {
  std::mt19937 rng(7);
  Case c;
  c.forward = {make_node("MatMul", {"A", "B"}, {"M"}), make_node("Add", {"M", "c"}, {"S"}),
               make_node("Relu", {"S"}, {"R"}), make_node("Mul", {"R", "W"}, {"y"})};
  c.xs = {{"A", random_tensor(dt, {2, 3}, rng)}, {"B", random_tensor(dt, {3, 4}, rng)}, {"c", random_tensor(dt, {4}, rng)}};
  c.zs = {{"W", random_tensor(dt, {2, 4}, rng)}};
  return c;
}

TEST(Gradient, MatMulAddReluMulDouble) { check_against_finite_differences(mlp_case(DType::Double), 1e-6, 1e-6); }

TEST(Gradient, MatMulAddReluMulFloat) { check_against_finite_differences(mlp_case(DType::Float), 1e-2, 2e-2); }

// The remaining rules, with broadcasting on both sides of Sub and Div and a value used twice.
TEST(Gradient, ElementwiseChainDouble) {
  std::mt19937 rng(11);
  Case c;
  c.forward = {make_node("Sub", {"a", "b"}, {"d"}), make_node("Sigmoid", {"d"}, {"s"}),
               make_node("Tanh", {"a"}, {"t"}), make_node("Exp", {"t"}, {"e"}),
               make_node("Neg", {"e"}, {"n"}), make_node("Identity", {"n"}, {"i"}),
               make_node("Add", {"k", "s"}, {"k2"}), make_node("Div", {"i", "k2"}, {"q"}),
               make_node("Mul", {"q", "a"}, {"y"})};
  c.xs = {{"a", random_tensor(DType::Double, {3, 1}, rng)}, {"b", random_tensor(DType::Double, {1, 4}, rng)}};
  c.zs = {};
  // k is a constant to differentiation: an initializer-free way is a Constant node.
  Node k = make_node("Constant", {}, {"k"});
  k.attributes = {Attribute::make_tensor("value", Tensor::from_vector<double>({2.0, 3.0, 4.0, 5.0}, {4}))};
  c.forward.insert(c.forward.begin(), k);
  check_against_finite_differences(c, 1e-6, 1e-6);
}

// An x that y does not depend on gets zeros; an op without a backward rule is named in the error.
TEST(Gradient, UnusedInputIsZeroAndUnsupportedOpIsNamed) {
  Case c;
  c.forward = {make_node("Exp", {"a"}, {"y"})};
  c.xs = {{"a", Tensor::from_vector<float>({0.f, 1.f}, {2})}, {"b", Tensor::from_vector<float>({5.f}, {1})}};
  Session s(build(c), {.threads = 1});
  auto out = s.run(feeds_of(c));
  EXPECT_NEAR(out.at("g_a").tensor.data<float>()[1], std::exp(1.f), 1e-5);
  EXPECT_EQ(out.at("g_b").tensor.data<float>()[0], 0.f);

  Case bad;
  bad.forward = {make_node("Sin", {"a"}, {"y"})};
  bad.xs = {{"a", Tensor::from_vector<float>({0.5f}, {1})}};
  Session sb(build(bad), {.threads = 1});
  try {
    sb.run(feeds_of(bad));
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("Sin"), std::string::npos) << e.what();
  }
}

}  // namespace
