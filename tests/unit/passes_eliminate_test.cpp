// Elimination, merging and sharing passes, and every pass together on random graphs.
#include <gtest/gtest.h>

#include "passes_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

std::vector<std::map<std::string, int64_t>> batches() { return {{{"batch", 1}}, {{"batch", 3}}}; }
Tensor i64s(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); }
Tensor scalar_bool(bool v) {
  Tensor t(DType::Bool, {});
  t.data<bool>()[0] = v;
  return t;
}

}  // namespace

TEST(PassesEliminate, IdentityBeforeAGraphOutputRenamesTheProducer) {
  std::mt19937 g(1);
  ModelBuilder b;
  b.input("x", {"batch", 4});
  b.node("Relu", {"x"}, {"r"}).node("Identity", {"r"}, {"i1"}).node("Identity", {"i1"}, {"out"}).output("out");
  b.node("Identity", {"x"}, {"passthrough"}).output("passthrough");  // input -> output: must stay
  Model opt = differential_passes(b.m, {"eliminate_identity"}, g, batches());
  EXPECT_EQ(count_op(opt, "Identity"), 1);
  EXPECT_EQ(opt.graph.nodes[0].outputs[0], "out");
}

TEST(PassesEliminate, DropoutOnlyInInferenceMode) {
  std::mt19937 g(2);
  ModelBuilder b(13);
  b.input("x", {"batch", 4}).init("ratio", Tensor::scalar<float>(0.5f)).init("off", scalar_bool(false));
  b.node("Dropout", {"x"}, {"d1"}).node("Dropout", {"d1", "ratio", "off"}, {"d2"}).node("Relu", {"d2"}, {"y"}).output("y");
  b.node("Dropout", {"x"}, {"d3", "mask"}).output("mask", DType::Bool);  // the mask is read: stays
  Model opt = differential_passes(b.m, {"eliminate_identity"}, g, batches());
  EXPECT_EQ(count_op(opt, "Dropout"), 1);
}

TEST(PassesEliminate, OpsThatReturnTheirInput) {
  std::mt19937 g(3);
  ModelBuilder b;
  b.input("x", {"batch", 4, 3});
  b.init("one", Tensor::scalar<float>(1)).init("zero", Tensor::from_vector<float>({0}, {1}));
  b.init("shape", i64s({0, 4, 3})).init("ones", i64s({1, 1})).init("st", i64s({0})).init("en", i64s({INT64_MAX}));
  b.init("ax", i64s({1})).init("rep", i64s({1, 1, 1}));
  b.node("Cast", {"x"}, {"a"}, {Attribute::make_int("to", 1)});
  b.node("Transpose", {"a"}, {"b"}, {Attribute::make_ints("perm", {0, 1, 2})});
  b.node("Reshape", {"b", "shape"}, {"c"}).node("Expand", {"c", "ones"}, {"d"}).node("Mul", {"d", "one"}, {"e"});
  b.node("Add", {"zero", "e"}, {"f"}).node("Slice", {"f", "st", "en", "ax"}, {"h"}).node("Tile", {"h", "rep"}, {"i"});
  b.node("Concat", {"i"}, {"j"}, {Attribute::make_int("axis", 0)}).node("Relu", {"j"}, {"y"}).output("y");
  // Not no-ops: a [1, 1, 1, 1] one broadcasts x to rank 4; Cast to f64 changes the type.
  b.init("one4", Tensor::from_vector<float>({1}, {1, 1, 1, 1})).node("Mul", {"x", "one4"}, {"y2"}).output("y2");
  b.node("Cast", {"x"}, {"y3"}, {Attribute::make_int("to", 11)}).output("y3", DType::Double);
  Model opt = differential_passes(b.m, {"eliminate_noop"}, g, batches());
  EXPECT_EQ(opt.graph.nodes.size(), 3u);
  EXPECT_EQ(count_op(opt, "Relu"), 1);
  EXPECT_EQ(count_op(opt, "Mul"), 1);
  EXPECT_EQ(count_op(opt, "Cast"), 1);
}

TEST(PassesEliminate, DeadNodesAndUnusedInitializers) {
  std::mt19937 g(4);
  ModelBuilder b;
  b.input("x", {"batch", 4}).init("w", random_uniform(g, {4})).init("unused", random_uniform(g, {4}));
  b.node("Add", {"x", "w"}, {"dead1"}).node("Sigmoid", {"dead1"}, {"dead2"}).node("Relu", {"x"}, {"y"}).output("y");
  Model opt = differential_passes(b.m, {"eliminate_dead"}, g, batches());
  EXPECT_EQ(opt.graph.nodes.size(), 1u);
  EXPECT_TRUE(opt.graph.initializers.empty());
}

TEST(PassesEliminate, SharedWeightsAndCommonSubexpressions) {
  std::mt19937 g(5);
  Tensor w = random_uniform(g, {4});
  ModelBuilder b;
  b.input("x", {"batch", 4}).init("w1", w).init("w2", w.clone());
  b.node("Mul", {"x", "w1"}, {"a"}).node("Mul", {"x", "w2"}, {"b"});
  b.node("Relu", {"a"}, {"ra"}).node("Relu", {"b"}, {"rb"}).node("Add", {"ra", "rb"}, {"y"}).output("y");
  Model opt = differential_passes(b.m, {"dedup_initializers", "eliminate_common_subexpressions", "eliminate_dead"}, g, batches());
  EXPECT_EQ(opt.graph.initializers.size(), 1u);
  EXPECT_EQ(count_op(opt, "Mul"), 1);
  EXPECT_EQ(count_op(opt, "Relu"), 1);
}

TEST(PassesEliminate, ConsecutiveLayoutOpsMerge) {
  std::mt19937 g(6);
  ModelBuilder b;
  b.input("x", {"batch", 2, 3}).init("ax", i64s({1})).init("flat", i64s({-1}));
  b.node("Transpose", {"x"}, {"t1"}, {Attribute::make_ints("perm", {0, 2, 1})});
  b.node("Transpose", {"t1"}, {"t2"}, {Attribute::make_ints("perm", {0, 2, 1})});  // identity together
  b.node("Transpose", {"t2"}, {"t3"}, {Attribute::make_ints("perm", {2, 0, 1})});
  b.node("Transpose", {"t3"}, {"t4"}, {Attribute::make_ints("perm", {1, 0, 2})});  // one Transpose
  b.node("Unsqueeze", {"t4", "ax"}, {"u"}).node("Squeeze", {"u", "ax"}, {"s"});
  b.node("Cast", {"s"}, {"c1"}, {Attribute::make_int("to", 11)}).node("Cast", {"c1"}, {"c2"}, {Attribute::make_int("to", 1)});
  b.node("Cast", {"c2"}, {"c3"}, {Attribute::make_int("to", 6)}).node("Cast", {"c3"}, {"c4"}, {Attribute::make_int("to", 1)});
  b.node("Flatten", {"c4"}, {"f"}).node("Reshape", {"f", "flat"}, {"y"}).output("y");
  Model opt = differential_passes(b.m, {"merge_consecutive", "eliminate_dead"}, g, batches());
  EXPECT_EQ(count_op(opt, "Transpose"), 1);
  EXPECT_EQ(count_op(opt, "Squeeze") + count_op(opt, "Unsqueeze"), 0);
  EXPECT_EQ(count_op(opt, "Cast"), 2) << "f32 -> i32 -> f32 truncates: both stay";
  EXPECT_EQ(count_op(opt, "Flatten"), 0) << "Reshape to [-1] reads only the element count";
}

namespace {

// A random graph over values of shape [batch, 4]: chains of ops that passes rewrite (identities,
// no-ops, shape arithmetic, duplicates, MatMul + Add, layout round trips) mixed with real math.
Model random_graph(std::mt19937& g, int nodes) {
  ModelBuilder b;
  b.input("x", {"batch", 4});
  b.init("w", random_uniform(g, {4, 4})).init("bias", random_uniform(g, {4})).init("one", Tensor::scalar<float>(1));
  b.init("zero", Tensor::scalar<float>(0)).init("i0", Tensor::scalar<int64_t>(0)).init("ax0", i64s({0}));
  b.init("m1", i64s({-1})).init("c4", Tensor::from_vector<float>({1, 2, 3, 4}, {4}));
  std::vector<std::string> vals{"x"};
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(g); };
  for (int k = 0; k < nodes; ++k) {
    std::string v = vals[static_cast<size_t>(pick(static_cast<int>(vals.size())))];
    std::string w = vals[static_cast<size_t>(pick(static_cast<int>(vals.size())))];
    std::string o = "v" + std::to_string(k), t = o + "_t", u = o + "_u";
    switch (pick(14)) {
      case 0: b.node("Identity", {v}, {o}); break;
      case 1: b.node("Relu", {v}, {o}); break;
      case 2: b.node("Mul", {v, "one"}, {o}); break;
      case 3: b.node("Add", {"zero", v}, {o}); break;
      case 4: b.node("Add", {v, w}, {o}); break;
      case 5: b.node("Mul", {v, "c4"}, {o}); break;
      case 6:
        b.node("Transpose", {v}, {t}, {Attribute::make_ints("perm", {1, 0})});
        b.node("Transpose", {t}, {o}, {Attribute::make_ints("perm", {1, 0})});
        break;
      case 7:
        b.node("MatMul", {v, "w"}, {t}).node("Add", {t, "bias"}, {o});
        break;
      case 8:  // Reshape(v, [v.shape[0], -1])
        b.node("Shape", {v}, {t}).node("Gather", {t, "i0"}, {u}).node("Unsqueeze", {u, "ax0"}, {o + "_n"});
        b.node("Concat", {o + "_n", "m1"}, {o + "_s"}, {Attribute::make_int("axis", 0)}).node("Reshape", {v, o + "_s"}, {o});
        break;
      case 9: b.node("Sigmoid", {v}, {t}).node("Sigmoid", {v}, {u}).node("Sub", {t, u}, {o}); break;
      case 10: b.node("Cast", {v}, {t}, {Attribute::make_int("to", 11)}).node("Cast", {t}, {o}, {Attribute::make_int("to", 1)}); break;
      case 11: b.node("Dropout", {v}, {o}); break;
      case 12: b.node("Flatten", {v}, {o}, {Attribute::make_int("axis", 1)}); break;
      default: b.node("Tanh", {v}, {o}); break;
    }
    vals.push_back(o);
  }
  // Outputs: the last value, and sometimes an intermediate one.
  b.output(vals.back());
  if (vals.size() > 3 && pick(2)) b.output(vals[vals.size() / 2]);
  return b.m;
}

}  // namespace

TEST(PassesEliminate, EveryPassOnRandomGraphs) {
  std::mt19937 g(7);
  std::vector<std::string> all;
  for (const Pass& p : builtin_passes()) all.push_back(p.name);
  int shrank = 0;
  for (int iter = 0; iter < 60; ++iter) {
    Model m = random_graph(g, 4 + iter % 12);
    std::string what = "graph " + std::to_string(iter);
    Model opt = differential_passes(m, all, g, batches(), what);
    shrank += opt.graph.nodes.size() < m.graph.nodes.size();
    // The proof agrees: run with verification, nothing is rolled back.
    Model proven = m;
    OptimizeOptions o;
    o.verify = true;
    o.threads = 1;
    OptimizeReport r = optimize(proven, o);
    EXPECT_TRUE(r.verified) << what << ": " << r.not_verified;
    EXPECT_TRUE(r.rollbacks.empty()) << what << ": " << (r.rollbacks.empty() ? "" : r.rollbacks[0].message);
  }
  EXPECT_GT(shrank, 40) << "most random graphs have something to remove";
}
