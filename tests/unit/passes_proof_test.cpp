// The proof of the optimizer: deliberately wrong passes are caught, rolled back and named with the
// node of their first bad rewrite; a model that cannot be proven is left alone.
#include <gtest/gtest.h>

#include "passes_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

bool is(const Node& n, const char* op) { return n.op_type == op; }

// x -> conv_a -> BN -> Relu -> conv_b -> BN -> logits
Model conv_bn_model(std::mt19937& g) {
  ModelBuilder b;
  b.input("x", {"batch", 3, 6, 6});
  auto bn = [&](const std::string& x, const std::string& y, int64_t c) {
    b.init(y + "_s", random_uniform(g, {c}, 0.5f, 2)).init(y + "_b", random_uniform(g, {c}, 1, 2));
    b.init(y + "_m", random_uniform(g, {c})).init(y + "_v", random_uniform(g, {c}, 0.5f, 2));
    b.node("BatchNormalization", {x, y + "_s", y + "_b", y + "_m", y + "_v"}, {y}, {}, y + "_node");
  };
  b.init("wa", random_uniform(g, {4, 3, 3, 3})).init("wb", random_uniform(g, {5, 4, 1, 1}));
  b.node("Conv", {"x", "wa"}, {"ca"}, {Attribute::make_ints("pads", {1, 1, 1, 1})}, "conv_a");
  bn("ca", "na", 4);
  b.node("Relu", {"na"}, {"ra"});
  b.node("Conv", {"ra", "wb"}, {"cb"}, {}, "conv_b");
  bn("cb", "logits", 5);
  b.output("logits", {"batch", 5, 6, 6});
  return b.m;
}

const Tensor* init_of(const Graph& g, const std::string& name) {
  const Initializer* i = g.find_initializer(name);
  return i ? &i->tensor : nullptr;
}

// The bug the issue names: BatchNormalization folded into the Conv, forgetting beta.
int fold_bn_without_beta(Model& m, PassContext& ctx) {
  Graph& g = m.graph;
  int n = 0;
  for (size_t j = 0; j < g.nodes.size(); ++j) {
    Node& bn = g.nodes[j];
    if (!is(bn, "BatchNormalization")) continue;
    for (size_t i = 0; i < j; ++i) {
      Node& conv = g.nodes[i];
      if (!is(conv, "Conv") || conv.outputs[0] != bn.inputs[0] || !ctx.allow(conv)) continue;
      const Tensor& w = *init_of(g, conv.inputs[1]);
      const Tensor &s = *init_of(g, bn.inputs[1]), &var = *init_of(g, bn.inputs[4]), &mean = *init_of(g, bn.inputs[3]);
      Tensor nw = w.clone(), nb(DType::Float, {w.dim(0)});
      int64_t per = w.numel() / w.dim(0);
      for (int64_t c = 0; c < w.dim(0); ++c) {
        float a = s.data<float>()[c] / std::sqrt(var.data<float>()[c] + 1e-5f);
        for (int64_t k = 0; k < per; ++k) nw.data<float>()[c * per + k] *= a;
        nb.data<float>()[c] = -mean.data<float>()[c] * a;  // + beta forgotten
      }
      std::string wn = ctx.fresh(conv.name + "_w"), bname = ctx.fresh(conv.name + "_b");
      g.initializers.push_back({wn, nw, {}});
      g.initializers.push_back({bname, nb, {}});
      conv.inputs = {conv.inputs[0], wn, bname};
      conv.outputs = bn.outputs;
      bn.op_type = "Identity";  // left for eliminate_identity, like a real pass would leave work
      bn.inputs = {conv.outputs[0]};
      bn.outputs = {conv.outputs[0] + "_dup"};
      bn.attributes.clear();
      ++n;
    }
  }
  return n;
}

OptimizeOptions proving(std::vector<std::string> passes, Pass extra) {
  OptimizeOptions o;
  o.passes = std::move(passes);
  o.extra_passes.push_back(std::move(extra));
  o.verify = true;
  o.threads = 1;
  return o;
}

}  // namespace

TEST(PassesProof, WrongBatchNormFoldIsCaughtRolledBackAndNamed) {
  std::mt19937 g(1);
  Model m = conv_bn_model(g);
  Model original = m;
  std::vector<std::string> warnings;
  OptimizeOptions o = proving({"eliminate_dead"}, {"fold_bn_without_beta", "test: drops BN's beta", 2, fold_bn_without_beta});
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  OptimizeReport r = optimize(m, o);
  ASSERT_EQ(r.rollbacks.size(), 1u);
  const Rollback& rb = r.rollbacks[0];
  EXPECT_EQ(rb.pass, "fold_bn_without_beta");
  EXPECT_EQ(rb.output, "logits");
  EXPECT_EQ(rb.node, "conv_a") << "the first rewrite is already wrong";
  EXPECT_GT(rb.max_abs, 0.1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind("pass fold_bn_without_beta changed output 'logits' (max abs ", 0), 0u) << warnings[0];
  EXPECT_NE(warnings[0].find(") at node conv_a; rolled back"), std::string::npos) << warnings[0];
  EXPECT_TRUE(r.verified);
  EXPECT_EQ(count_op(m, "BatchNormalization"), 2) << "the wrong pass is rolled back for the whole model";
  auto f = feeds_for(original, g, {{"batch", 2}});
  expect_same_outputs(run_ref(original, f), run_ref(m, f), "after rollback");
}

TEST(PassesProof, RightPassesSurviveBesideAWrongOne) {
  std::mt19937 g(2);
  Model m = conv_bn_model(g);
  Model original = m;
  OptimizeOptions o = proving({}, {"fold_bn_without_beta", "test", 2, fold_bn_without_beta});
  OptimizeReport r = optimize(m, o);
  // The built-in BN fold runs first and takes every BN, so the wrong pass never fires.
  EXPECT_TRUE(r.rollbacks.empty());
  EXPECT_EQ(count_op(m, "BatchNormalization"), 0);
  auto f = feeds_for(original, g, {{"batch", 3}});
  expect_same_outputs(run_ref(original, f), run_ref(m, f), "optimized");
}

namespace {

// Rewrites Add(x, c) as Sub(x, -c), except at node add_2, where it forgets the negation.
int adds_as_subs(Model& m, PassContext& ctx) {
  int n = 0;
  for (Node& node : m.graph.nodes) {
    if (!is(node, "Add") || !ctx.allow(node)) continue;
    Initializer* c = nullptr;
    for (auto& i : m.graph.initializers)
      if (i.name == node.inputs[1]) c = &i;
    Tensor neg = c->tensor.clone();
    if (node.name != "add_2")
      for (int64_t k = 0; k < neg.numel(); ++k) neg.data<float>()[k] = -neg.data<float>()[k];
    std::string name = ctx.fresh(c->name + "_neg");
    m.graph.initializers.push_back({name, neg, {}});
    node.op_type = "Sub";
    node.inputs[1] = name;
    ++n;
  }
  return n;
}

}  // namespace

TEST(PassesProof, BisectionNamesTheFirstBadRewrite) {
  std::mt19937 g(3);
  ModelBuilder b;
  b.input("x", {"batch", 4});
  std::string cur = "x";
  for (int i = 0; i < 6; ++i) {
    std::string c = "c" + std::to_string(i), y = "y" + std::to_string(i);
    b.init(c, random_uniform(g, {4}, 1, 2)).node("Add", {cur, c}, {y}, {}, "add_" + std::to_string(i));
    cur = y;
  }
  b.node("Relu", {cur}, {"out"}).output("out");
  Model m = b.m;
  OptimizeReport r = optimize(m, proving({"eliminate_dead"}, {"adds_as_subs", "test", 1, adds_as_subs}));
  ASSERT_EQ(r.rollbacks.size(), 1u);
  EXPECT_EQ(r.rollbacks[0].node, "add_2");
  EXPECT_EQ(r.rollbacks[0].output, "out");
  EXPECT_EQ(count_op(m, "Sub"), 0) << "rolled back entirely, not just at add_2";
  EXPECT_EQ(count_op(m, "Add"), 6);
}

namespace {

// Replaces Shape(x) by x's shape with every symbolic dim taken as 1: right at batch 1 only.
int shape_at_batch_one(Model& m, PassContext& ctx) {
  int n = 0;
  for (Node& node : m.graph.nodes) {
    if (!is(node, "Shape") || !ctx.allow(node)) continue;
    const ValueInfo* x = m.graph.find_input(node.inputs[0]);
    std::vector<int64_t> dims;
    for (const Dim& d : x->type.shape->dims) dims.push_back(d.is_static() ? d.value : 1);
    m.graph.initializers.push_back({node.outputs[0], Tensor::from_vector<int64_t>(dims, {static_cast<int64_t>(dims.size())}), {}});
    node = Node{};
    ++n;
  }
  std::erase_if(m.graph.nodes, [](const Node& x) { return x.op_type.empty(); });
  return n;
}

}  // namespace

TEST(PassesProof, AWrongFoldOfADynamicDimIsCaughtAtAnotherSize) {
  ModelBuilder b;
  b.input("x", {"batch", 4});
  b.node("Shape", {"x"}, {"s"}, {}, "shape_x").node("ConstantOfShape", {"s"}, {"ones"}).output("ones");
  Model m = b.m;
  OptimizeOptions o = proving({"eliminate_dead"}, {"shape_at_batch_one", "test", 1, shape_at_batch_one});
  o.input_sizes["x"] = {1, 4};  // sample 0 is exactly the size the wrong pass assumes
  OptimizeReport r = optimize(m, o);
  ASSERT_EQ(r.rollbacks.size(), 1u);
  EXPECT_EQ(r.rollbacks[0].node, "shape_x");
  EXPECT_NE(r.rollbacks[0].message.find("is f32[1x4], was f32[2x4]"), std::string::npos) << r.rollbacks[0].message;
  EXPECT_EQ(count_op(m, "Shape"), 1);
}

TEST(PassesProof, APassThatBreaksTheModelIsCaught) {
  std::mt19937 g(4);
  Model m = conv_bn_model(g);
  Pass drop_relu{"drop_relu", "test: deletes a node others read", 1, [](Model& mm, PassContext& ctx) {
                   for (Node& n : mm.graph.nodes)
                     if (is(n, "Relu") && ctx.allow(n)) {
                       n = Node{};
                       std::erase_if(mm.graph.nodes, [](const Node& x) { return x.op_type.empty(); });
                       return 1;
                     }
                   return 0;
                 }};
  OptimizeReport r = optimize(m, proving({"eliminate_dead"}, drop_relu));
  ASSERT_EQ(r.rollbacks.size(), 1u);
  EXPECT_EQ(r.rollbacks[0].pass, "drop_relu");
  EXPECT_NE(r.rollbacks[0].message.find("made the model fail"), std::string::npos) << r.rollbacks[0].message;
  EXPECT_EQ(count_op(m, "Relu"), 1);
}

TEST(PassesProof, APassThatWritesInvalidOnnxIsCaughtByTheChecker) {
  std::mt19937 g(5);
  Model m = conv_bn_model(g);
  // The runtime ignores an unknown attribute; the ONNX checker does not.
  Pass bad_attr{"bad_attr", "test", 1, [](Model& mm, PassContext& ctx) {
                  for (Node& n : mm.graph.nodes)
                    if (is(n, "Relu") && !n.has_attr("bogus") && ctx.allow(n)) {
                      n.set_attr(Attribute::make_int("bogus", 1));
                      return 1;
                    }
                  return 0;
                }};
  OptimizeReport r = optimize(m, proving({"eliminate_dead"}, bad_attr));
  ASSERT_EQ(r.rollbacks.size(), 1u);
  EXPECT_NE(r.rollbacks[0].message.find("ONNX checker"), std::string::npos) << r.rollbacks[0].message;
  for (const Node& n : m.graph.nodes) EXPECT_FALSE(n.has_attr("bogus"));
}

TEST(PassesProof, ARandomModelCannotBeProvenAndStaysAsItIs) {
  ModelBuilder b;
  b.input("x", {2, 3});
  b.node("Identity", {"x"}, {"i"}).node("RandomNormalLike", {"i"}, {"r"}).node("Add", {"i", "r"}, {"y"}).output("y");
  Model m = b.m;
  std::vector<std::string> warnings;
  OptimizeOptions o;
  o.verify = true;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  OptimizeReport r = optimize(m, o);
  EXPECT_FALSE(r.verified);
  EXPECT_NE(r.not_verified.find("random"), std::string::npos) << r.not_verified;
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(count_op(m, "Identity"), 1) << "left unoptimized";
}

TEST(PassesProof, UnknownPassNamesAreUsageErrors) {
  Model m;
  OptimizeOptions o;
  o.passes = {"fold_constants", "no_such_pass"};
  try {
    optimize(m, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find("no_such_pass"), std::string::npos);
  }
}
