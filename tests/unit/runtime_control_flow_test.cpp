// Control flow (If, Loop, Scan) and sequence/optional kernels: outer-scope reads from bodies,
// early exit, zero-trip loops, scan axes and directions, and bad input.
#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/session.h"
#include "test_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

Node node(std::string op, std::vector<std::string> ins, std::vector<std::string> outs, std::vector<Attribute> attrs = {}) {
  Node n;
  n.op_type = std::move(op);
  n.name = n.op_type;
  n.inputs = std::move(ins);
  n.outputs = std::move(outs);
  n.attributes = std::move(attrs);
  return n;
}

ValueInfo tvi(std::string name, DType dt, std::optional<Shape> s = std::nullopt) { return {std::move(name), Type::tensor(dt, s), {}}; }

ValueInfo seq_vi(std::string name, DType dt) {
  Type t;
  t.kind = Type::Kind::Sequence;
  t.inner = std::make_shared<Type>(Type::tensor(dt));
  return {std::move(name), t, {}};
}

Attribute graph_attr(std::string name, Graph g) { return Attribute::make_graph(std::move(name), std::make_shared<Graph>(std::move(g))); }

Model model_of(Graph g, int64_t opset = 17) {
  Model m;
  m.opset_import = {{"", opset}};
  m.graph = std::move(g);
  return m;
}

TEST(ControlFlow, IfBranchesReadOuterScope) {
  Graph then_g, else_g, g;
  then_g.nodes.push_back(node("Add", {"x", "x"}, {"t"}));
  then_g.outputs.push_back(tvi("t", DType::Float));
  else_g.outputs.push_back(tvi("x", DType::Float));  // an outer value straight through
  g.inputs = {tvi("c", DType::Bool, Shape::of({})), tvi("x", DType::Float, Shape::of({2}))};
  g.nodes.push_back(node("If", {"c"}, {"y"}, {graph_attr("then_branch", then_g), graph_attr("else_branch", else_g)}));
  g.outputs.push_back(tvi("y", DType::Float));
  Session s(model_of(g));
  Tensor x = Tensor::from_vector<float>({1.5f, -2.f}, {2});
  auto a = s.run({{"c", Tensor::scalar<bool>(true)}, {"x", x}});
  EXPECT_EQ(values<float>(a.at("y").tensor), (std::vector<float>{3.f, -4.f}));
  auto b = s.run({{"c", Tensor::scalar<bool>(false)}, {"x", x}});
  EXPECT_EQ(values<float>(b.at("y").tensor), (std::vector<float>{1.5f, -2.f}));
}

// Loop summing x into y until the body's cond (iter < limit) turns false; y_out is also scanned.
Model sum_loop() {
  Graph body, g;
  body.inputs = {tvi("i", DType::Int64, Shape::of({})), tvi("cin", DType::Bool, Shape::of({})), tvi("yin", DType::Float, Shape::of({2}))};
  body.nodes.push_back(node("Add", {"yin", "x"}, {"yout"}));
  body.nodes.push_back(node("Less", {"i", "limit"}, {"cout"}));
  body.nodes.push_back(node("Identity", {"yout"}, {"scan"}));
  body.outputs = {tvi("cout", DType::Bool), tvi("yout", DType::Float), tvi("scan", DType::Float, Shape::of({2}))};
  g.inputs = {tvi("M", DType::Int64, Shape::of({})), tvi("x", DType::Float, Shape::of({2})), tvi("y0", DType::Float, Shape::of({2}))};
  g.initializers.push_back({"limit", Tensor::scalar<int64_t>(2), {}});
  g.nodes.push_back(node("Loop", {"M", "", "y0"}, {"y", "ys"}, {graph_attr("body", body)}));
  g.outputs = {tvi("y", DType::Float), tvi("ys", DType::Float)};
  return model_of(g);
}

TEST(ControlFlow, LoopStopsOnConditionAndConcatenatesScans) {
  Session s(sum_loop());
  Tensor x = Tensor::from_vector<float>({1.f, 10.f}, {2}), y0 = Tensor::from_vector<float>({0.f, 0.f}, {2});
  auto r = s.run({{"M", Tensor::scalar<int64_t>(100)}, {"x", x}, {"y0", y0}});
  // Iterations 0, 1, 2 run; the third reports 2 < 2 == false.
  EXPECT_EQ(values<float>(r.at("y").tensor), (std::vector<float>{3.f, 30.f}));
  EXPECT_EQ(r.at("ys").tensor.dims(), (Dims{3, 2}));
  EXPECT_EQ(values<float>(r.at("ys").tensor), (std::vector<float>{1, 10, 2, 20, 3, 30}));
  // Trip count limits first.
  auto r1 = s.run({{"M", Tensor::scalar<int64_t>(1)}, {"x", x}, {"y0", y0}});
  EXPECT_EQ(values<float>(r1.at("y").tensor), (std::vector<float>{1.f, 10.f}));
}

// A Loop that would run 10^17 times (its cond never turns false) stops at the session's time
// limit with an input error naming the node, well before it would end.
TEST(ControlFlow, TimeLimitStopsALoopThatRunsOnAsItsDataSays) {
  Model m = sum_loop();
  m.graph.initializers[0].tensor = Tensor::scalar<int64_t>(std::numeric_limits<int64_t>::max());  // limit
  SessionOptions o;
  o.time_limit_s = 0.2;
  Session s(m, o);
  Tensor x = Tensor::from_vector<float>({1.f, 10.f}, {2}), y0 = Tensor::from_vector<float>({0.f, 0.f}, {2});
  auto t0 = std::chrono::steady_clock::now();
  try {
    s.run({{"M", Tensor::scalar<int64_t>(100000000000000000)}, {"x", x}, {"y0", y0}});
    ADD_FAILURE() << "the loop ran to its end";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitBadInput);
    EXPECT_NE(std::string(e.what()).find("time limit"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Loop"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  // Each run gets its own limit; a short run is not affected.
  auto r = s.run({{"M", Tensor::scalar<int64_t>(3)}, {"x", x}, {"y0", y0}});
  EXPECT_EQ(values<float>(r.at("y").tensor), (std::vector<float>{3.f, 30.f}));
}

TEST(ControlFlow, ZeroTripLoopKeepsInitialValues) {
  Session s(sum_loop());
  Tensor x = Tensor::from_vector<float>({1.f, 10.f}, {2}), y0 = Tensor::from_vector<float>({4.f, 5.f}, {2});
  auto r = s.run({{"M", Tensor::scalar<int64_t>(0)}, {"x", x}, {"y0", y0}});
  EXPECT_EQ(values<float>(r.at("y").tensor), (std::vector<float>{4.f, 5.f}));
  EXPECT_EQ(r.at("ys").tensor.dims(), (Dims{0, 2}));
}

// Scan: running sum over x along `in_axis`, in `in_dir`, scanned out on `out_axis`.
Model sum_scan(int64_t in_axis, int64_t in_dir, int64_t out_axis, Dims xd) {
  Graph body, g;
  body.inputs = {tvi("s", DType::Float, Shape::of({2})), tvi("xi", DType::Float, Shape::of({2}))};
  body.nodes.push_back(node("Add", {"s", "xi"}, {"so"}));
  body.nodes.push_back(node("Identity", {"so"}, {"o"}));
  body.outputs = {tvi("so", DType::Float), tvi("o", DType::Float)};
  g.inputs = {tvi("s0", DType::Float, Shape::of({2})), tvi("x", DType::Float, Shape::of(xd))};
  g.nodes.push_back(node("Scan", {"s0", "x"}, {"s", "ys"},
                         {graph_attr("body", body), Attribute::make_int("num_scan_inputs", 1),
                          Attribute::make_ints("scan_input_axes", {in_axis}), Attribute::make_ints("scan_input_directions", {in_dir}),
                          Attribute::make_ints("scan_output_axes", {out_axis})}));
  g.outputs = {tvi("s", DType::Float), tvi("ys", DType::Float)};
  return model_of(g);
}

TEST(ControlFlow, ScanAxesAndDirections) {
  Tensor s0 = Tensor::from_vector<float>({0.f, 0.f}, {2});
  {
    // x rows (1,2) (3,4) (5,6) scanned in reverse, outputs stacked on axis 1.
    Session s(sum_scan(0, 1, 1, {3, 2}));
    auto r = s.run({{"s0", s0}, {"x", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2})}});
    EXPECT_EQ(values<float>(r.at("s").tensor), (std::vector<float>{9.f, 12.f}));
    EXPECT_EQ(r.at("ys").tensor.dims(), (Dims{2, 3}));
    EXPECT_EQ(values<float>(r.at("ys").tensor), (std::vector<float>{5, 8, 9, 6, 10, 12}));
  }
  {
    // The same data transposed, scanned along axis 1 forward.
    Session s(sum_scan(1, 0, 0, {2, 3}));
    auto r = s.run({{"s0", s0}, {"x", Tensor::from_vector<float>({1, 3, 5, 2, 4, 6}, {2, 3})}});
    EXPECT_EQ(values<float>(r.at("ys").tensor), (std::vector<float>{1, 2, 4, 6, 9, 12}));
  }
}

TEST(ControlFlow, SequenceMapAndSplitConcatRoundTrip) {
  Graph body, g;
  body.inputs = {tvi("e", DType::Float)};
  body.nodes.push_back(node("Add", {"e", "e"}, {"d"}));
  body.outputs = {tvi("d", DType::Float)};
  g.inputs = {tvi("x", DType::Float, Shape::of({4, 2}))};
  g.initializers.push_back({"split", Tensor::from_vector<int64_t>({1, 3}, {2}), {}});
  g.nodes.push_back(node("SplitToSequence", {"x", "split"}, {"parts"}));
  g.nodes.push_back(node("SequenceMap", {"parts"}, {"doubled"}, {graph_attr("body", body)}));
  g.nodes.push_back(node("ConcatFromSequence", {"doubled"}, {"y"}, {Attribute::make_int("axis", 0)}));
  g.nodes.push_back(node("SequenceLength", {"doubled"}, {"n"}));
  g.outputs = {tvi("y", DType::Float), tvi("n", DType::Int64)};
  Session s(model_of(g));
  auto r = s.run({{"x", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2})}});
  EXPECT_EQ(values<float>(r.at("y").tensor), (std::vector<float>{2, 4, 6, 8, 10, 12, 14, 16}));
  EXPECT_EQ(r.at("n").tensor.as_int(0), 2);
}

TEST(ControlFlow, SequencePositionsAndErrors) {
  Graph g;
  g.inputs = {seq_vi("s", DType::Float), tvi("t", DType::Float), tvi("p", DType::Int64, Shape::of({}))};
  g.nodes.push_back(node("SequenceInsert", {"s", "t", "p"}, {"s2"}));
  g.nodes.push_back(node("SequenceAt", {"s2", "p"}, {"at"}));
  g.nodes.push_back(node("SequenceErase", {"s2"}, {"s3"}));
  g.outputs = {tvi("at", DType::Float), seq_vi("s3", DType::Float)};
  Session s(model_of(g));
  std::vector<Tensor> items{Tensor::scalar<float>(1.f), Tensor::scalar<float>(2.f)};
  RValue seq = RValue::make_sequence(items);
  auto r = s.run({{"s", seq}, {"t", Tensor::scalar<float>(9.f)}, {"p", Tensor::scalar<int64_t>(-1)}});
  // Insert at -1 puts 9 before the last element: [1, 9, 2]; element -1 is then 2.
  EXPECT_EQ(r.at("at").tensor.data<float>()[0], 2.f);
  ASSERT_EQ(r.at("s3").sequence.size(), 2u);
  EXPECT_EQ(r.at("s3").sequence[1].data<float>()[0], 9.f);
  EXPECT_THROW(s.run({{"s", seq}, {"t", Tensor::scalar<float>(9.f)}, {"p", Tensor::scalar<int64_t>(5)}}), Error);
  EXPECT_THROW(s.run({{"s", seq}, {"t", Tensor::scalar<float>(9.f)}, {"p", Tensor::scalar<int64_t>(-4)}}), Error);
}

TEST(ControlFlow, OptionalRoundTrip) {
  Graph g;
  g.inputs = {tvi("x", DType::Float)};
  g.nodes.push_back(node("Optional", {"x"}, {"o"}));
  g.nodes.push_back(node("OptionalHasElement", {"o"}, {"h"}));
  g.nodes.push_back(node("OptionalGetElement", {"o"}, {"y"}));
  g.nodes.push_back(node("Optional", {}, {"empty"}, {}));
  g.nodes.push_back(node("OptionalHasElement", {"empty"}, {"h2"}));
  g.outputs = {tvi("h", DType::Bool), tvi("y", DType::Float), tvi("h2", DType::Bool)};
  Session s(model_of(g, 16));
  auto r = s.run({{"x", Tensor::scalar<float>(3.f)}});
  EXPECT_TRUE(r.at("h").tensor.data<bool>()[0]);
  EXPECT_FALSE(r.at("h2").tensor.data<bool>()[0]);
  EXPECT_EQ(r.at("y").tensor.data<float>()[0], 3.f);
}

TEST(ControlFlow, BadInputThrows) {
  Graph then_g, else_g, g;
  then_g.outputs.push_back(tvi("x", DType::Float));
  else_g.outputs.push_back(tvi("x", DType::Float));
  g.inputs = {tvi("c", DType::Bool), tvi("x", DType::Float)};
  g.nodes.push_back(node("If", {"c"}, {"y"}, {graph_attr("then_branch", then_g), graph_attr("else_branch", else_g)}));
  g.outputs.push_back(tvi("y", DType::Float));
  Session s(model_of(g));
  EXPECT_THROW(s.run({{"c", Tensor(DType::Bool, {0})}, {"x", Tensor::scalar<float>(1.f)}}), Error);
  // Scan inputs that disagree on the sequence length.
  Graph body, g2;
  body.inputs = {tvi("a", DType::Float), tvi("b", DType::Float)};
  body.nodes.push_back(node("Add", {"a", "b"}, {"o"}));
  body.outputs = {tvi("o", DType::Float)};
  g2.inputs = {tvi("a", DType::Float, Shape::of({3})), tvi("b", DType::Float, Shape::of({2}))};
  g2.nodes.push_back(node("Scan", {"a", "b"}, {"y"}, {graph_attr("body", body), Attribute::make_int("num_scan_inputs", 2)}));
  g2.outputs = {tvi("y", DType::Float)};
  Session s2(model_of(g2));
  EXPECT_THROW(s2.run({{"a", Tensor(DType::Float, {3})}, {"b", Tensor(DType::Float, {2})}}), Error);
}

}  // namespace
