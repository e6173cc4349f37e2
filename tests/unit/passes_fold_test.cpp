// Constant and shape folding: what folds, what must not (huge results, symbolic dims), and
// folding inside subgraphs that read outer-scope values.
#include <gtest/gtest.h>

#include "passes_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

std::vector<std::map<std::string, int64_t>> batches() { return {{{"batch", 1}}, {{"batch", 3}}}; }

Tensor i64s(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); }

}  // namespace

TEST(PassesFold, ConstantSubgraphsBecomeOneInitializer) {
  std::mt19937 g(1);
  ModelBuilder b;
  b.input("x", {"batch", 3, 2});
  b.init("a", random_uniform(g, {2, 3})).init("s", random_uniform(g, {3, 2}, 0.1f, 2));
  b.node("Transpose", {"a"}, {"at"}).node("Sqrt", {"s"}, {"ss"}).node("Mul", {"at", "ss"}, {"k"});
  b.node("Constant", {}, {"one"}, {Attribute::make_tensor("value", Tensor::scalar<float>(1.0f))});
  b.node("Add", {"k", "one"}, {"k1"}).node("Add", {"x", "k1"}, {"y"}).output("y");
  Model opt = differential_passes(b.m, {"fold_constants", "eliminate_dead"}, g, batches());
  ASSERT_EQ(opt.graph.nodes.size(), 1u);
  EXPECT_EQ(opt.graph.nodes[0].inputs[1], "k1") << "the folded value keeps its name";
  EXPECT_EQ(opt.graph.initializers.size(), 1u) << "inputs of folded nodes are dropped";
}

TEST(PassesFold, HugeResultsAreNotMaterialized) {
  ModelBuilder b;
  b.input("x", {1000, 1000});
  b.init("v", Tensor::scalar<float>(2.0f)).init("shape", i64s({1000, 1000}));
  b.node("Expand", {"v", "shape"}, {"big"}).node("ConstantOfShape", {"shape"}, {"zeros"});
  b.node("Add", {"x", "big"}, {"y0"}).node("Add", {"y0", "zeros"}, {"y"}).output("y");
  Model opt = b.m;
  apply(opt, {"fold_constants"});
  EXPECT_EQ(count_op(opt, "Expand"), 1) << "4 MB from 8 bytes stays computed";
  EXPECT_EQ(count_op(opt, "ConstantOfShape"), 1);
  EXPECT_LT(opt.graph.parameter_bytes(), 1024);
}

TEST(PassesFold, StaticShapeArithmeticFoldsAndFlattenIsRecognized) {
  std::mt19937 g(2);
  // y = Reshape(x, [x.shape[0], -1]): the flatten as converters write it.
  ModelBuilder b;
  b.input("x", {"batch", 3, 2, 2});
  b.init("zero", Tensor::scalar<int64_t>(0)).init("minus1", i64s({-1})).init("ax0", i64s({0}));
  b.node("Shape", {"x"}, {"s"}).node("Gather", {"s", "zero"}, {"n"}).node("Unsqueeze", {"n", "ax0"}, {"n1"});
  b.node("Concat", {"n1", "minus1"}, {"target"}, {Attribute::make_int("axis", 0)});
  b.node("Reshape", {"x", "target"}, {"y"}).output("y");
  Model opt = differential_passes(b.m, {"fold_shapes", "eliminate_dead", "canonicalize_reshape"}, g, batches());
  ASSERT_EQ(opt.graph.nodes.size(), 1u);
  EXPECT_EQ(opt.graph.nodes[0].op_type, "Flatten");
  EXPECT_EQ(opt.graph.nodes[0].attr_int("axis"), 1);
}

TEST(PassesFold, SymbolicDimsStaySymbolic) {
  std::mt19937 g(3);
  // n = x.shape[0] (symbolic) is an output; x.shape[1] (static) folds.
  ModelBuilder b;
  b.input("x", {"batch", 3});
  b.init("zero", Tensor::scalar<int64_t>(0)).init("one", Tensor::scalar<int64_t>(1)).init("two", Tensor::scalar<int64_t>(2));
  b.node("Shape", {"x"}, {"s"}).node("Gather", {"s", "zero"}, {"n"}).node("Gather", {"s", "one"}, {"c0"});
  b.node("Mul", {"c0", "two"}, {"c"}).output("n", DType::Int64).output("c", DType::Int64);
  Model opt = differential_passes(b.m, {"fold_shapes", "fold_constants", "eliminate_dead"}, g, batches());
  // Shape and the Gather of the symbolic dim remain; the static dim folds (the Mul producing a
  // graph output stays a node: outputs are not turned into initializers).
  EXPECT_EQ(count_op(opt, "Shape"), 1);
  EXPECT_EQ(count_op(opt, "Gather"), 1);
  ASSERT_EQ(count_op(opt, "Mul"), 1);
  EXPECT_NE(opt.graph.find_initializer(opt.graph.nodes.back().inputs[0]), nullptr);
}

TEST(PassesFold, PartlySymbolicReshapeTargetsCopyDims) {
  std::mt19937 g(4);
  // Reshape(x, Concat(Shape(x)[0:1], [6])) on x [batch, 2, 3]: target [0, 6].
  ModelBuilder b;
  b.input("x", {"batch", 2, 3});
  b.init("st", i64s({0})).init("en", i64s({1})).init("six", i64s({6}));
  b.node("Shape", {"x"}, {"s"}).node("Slice", {"s", "st", "en"}, {"head"});
  b.node("Concat", {"head", "six"}, {"target"}, {Attribute::make_int("axis", 0)});
  b.node("Reshape", {"x", "target"}, {"y"}).output("y");
  Model opt = differential_passes(b.m, {"fold_shapes", "eliminate_dead"}, g, batches());
  ASSERT_EQ(opt.graph.nodes.size(), 1u);
  const Initializer* t = opt.graph.find_initializer(opt.graph.nodes[0].inputs[1]);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(values<int64_t>(t->tensor), (std::vector<int64_t>{0, 6}));
}

namespace {

std::shared_ptr<Graph> branch(const std::string& name, std::vector<Node> nodes, const std::string& out) {
  auto g = std::make_shared<Graph>();
  g->name = name;
  g->nodes = std::move(nodes);
  g->outputs.push_back({out, Type::tensor(DType::Float, Shape::of({2})), {}});
  return g;
}

Node mk(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs) {
  Node n;
  n.op_type = op;
  n.name = outs[0] + "_node";
  n.inputs = std::move(ins);
  n.outputs = std::move(outs);
  return n;
}

}  // namespace

TEST(PassesFold, InsideIfBranchesReadingOuterScope) {
  std::mt19937 g(5);
  // then: x + (c1 * c2) with c1, c2 outer initializers (folds inside the branch);
  // else: Identity(Identity(x)) (removed, the branch output keeps its name).
  ModelBuilder b;
  b.input("cond", {}, DType::Bool).input("x", {2});
  b.init("c1", random_uniform(g, {2})).init("c2", random_uniform(g, {2}));
  auto then_g = branch("then", {mk("Mul", {"c1", "c2"}, {"k"}), mk("Add", {"x", "k"}, {"t_out"})}, "t_out");
  auto else_g = branch("else", {mk("Identity", {"x"}, {"e1"}), mk("Relu", {"e1"}, {"e2"}), mk("Identity", {"e2"}, {"e_out"})}, "e_out");
  b.node("If", {"cond"}, {"y"}, {Attribute::make_graph("then_branch", then_g), Attribute::make_graph("else_branch", else_g)});
  b.output("y");
  Model opt = b.m;
  apply(opt, {"fold_constants", "eliminate_identity", "eliminate_dead"});
  const Graph& t = *opt.graph.nodes[0].find_attr("then_branch")->g;
  const Graph& e = *opt.graph.nodes[0].find_attr("else_branch")->g;
  EXPECT_EQ(t.nodes.size(), 1u);
  EXPECT_EQ(e.nodes.size(), 1u);
  EXPECT_EQ(e.nodes[0].outputs[0], "e_out");
  for (bool c : {true, false}) {
    Tensor ct(DType::Bool, {});
    ct.data<bool>()[0] = c;
    std::map<std::string, RValue> f{{"cond", ct}, {"x", random_normal(g, {2})}};
    expect_same_outputs(run_ref(b.m, f), run_ref(opt, f), c ? "then" : "else");
  }
}

TEST(PassesFold, OuterValuesReadBySubgraphsStayAlive) {
  std::mt19937 g(6);
  // i = Identity(x) is read only inside the loop body: it is replaced there by x, and the dead
  // code pass must not remove what a body reads.
  ModelBuilder b;
  b.input("x", {2}).init("trip", Tensor::scalar<int64_t>(3)).init("cond0", [] {
    Tensor t(DType::Bool, {});
    t.data<bool>()[0] = true;
    return t;
  }());
  b.node("Identity", {"x"}, {"i"}).node("Relu", {"x"}, {"r"});
  auto body = std::make_shared<Graph>();
  body->name = "body";
  body->inputs = {{"iter", Type::tensor(DType::Int64, Shape::of({})), {}}, {"c_in", Type::tensor(DType::Bool, Shape::of({})), {}},
                  {"acc", Type::tensor(DType::Float, Shape::of({2})), {}}};
  body->nodes = {mk("Add", {"acc", "i"}, {"acc2"}), mk("Mul", {"acc2", "r"}, {"acc_out"}), mk("Identity", {"c_in"}, {"c_out"})};
  body->outputs = {{"c_out", Type::tensor(DType::Bool, Shape::of({})), {}}, {"acc_out", Type::tensor(DType::Float, Shape::of({2})), {}}};
  b.node("Loop", {"trip", "cond0", "x"}, {"y"}, {Attribute::make_graph("body", body)}).output("y");
  Model opt = differential_passes(b.m, {"eliminate_identity", "eliminate_dead"}, g, {{}});
  EXPECT_EQ(count_op(opt, "Relu"), 1);
  EXPECT_EQ(opt.graph.nodes.front().op_type, "Relu") << "the outer Identity is gone";
}
