// Fusion passes, differentially: random layers and parameters, outputs before and after on the
// reference kernels, and the structure that must (or must not) result.
#include <gtest/gtest.h>

#include "passes_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

int64_t pick(std::mt19937& g, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); }

Tensor positive(std::mt19937& g, const Dims& d) { return random_uniform(g, d, 0.5f, 2.0f); }

void add_bn(ModelBuilder& b, std::mt19937& g, const std::string& x, const std::string& y, int64_t c, float eps) {
  b.init(y + "_s", random_uniform(g, {c}, -2, 2)).init(y + "_b", random_uniform(g, {c}, -1, 1));
  b.init(y + "_m", random_uniform(g, {c}, -1, 1)).init(y + "_v", positive(g, {c}));
  b.node("BatchNormalization", {x, y + "_s", y + "_b", y + "_m", y + "_v"}, {y}, {Attribute::make_float("epsilon", eps)});
}

struct ConvSpec {
  bool transpose;
  int spatial;
  int64_t group, cin, cout;
  bool bias;
};

ConvSpec random_conv(std::mt19937& g, int iter) {
  ConvSpec s;
  s.transpose = iter % 3 == 2;
  s.spatial = 1 + static_cast<int>(iter % 3);
  int64_t gsel = pick(g, 0, 2);
  s.group = gsel == 0 ? 1 : gsel == 1 ? 2 : 3;
  s.cin = s.group * pick(g, 1, 3);
  s.cout = s.group * pick(g, 1, 3);
  if (iter % 4 == 3) s.group = s.cin = s.cout = 4;  // depthwise
  s.bias = iter % 2 == 0;
  return s;
}

// x -> Conv/ConvTranspose -> y, weights random; X is [batch, cin, 5...].
ModelBuilder conv_model(std::mt19937& g, const ConvSpec& s, const std::string& y) {
  ModelBuilder b;
  std::vector<D> xd{"batch", s.cin};
  Dims wd = s.transpose ? Dims{s.cin, s.cout / s.group} : Dims{s.cout, s.cin / s.group};
  std::vector<int64_t> k;
  for (int i = 0; i < s.spatial; ++i) {
    xd.push_back(5 + i);
    wd.push_back(i == 0 ? 3 : 2);
    k.push_back(wd.back());
  }
  b.input("x", xd).init("w", random_uniform(g, wd));
  std::vector<std::string> ins{"x", "w"};
  if (s.bias) {
    b.init("bias", random_uniform(g, {s.cout}));
    ins.push_back("bias");
  }
  std::vector<Attribute> attrs{Attribute::make_int("group", s.group), Attribute::make_ints("kernel_shape", k)};
  if (s.transpose) attrs.push_back(Attribute::make_ints("strides", std::vector<int64_t>(static_cast<size_t>(s.spatial), 2)));
  b.node(s.transpose ? "ConvTranspose" : "Conv", ins, {y}, attrs, "layer");
  return b;
}

std::vector<std::map<std::string, int64_t>> batches() { return {{{"batch", 1}}, {{"batch", 3}}}; }

}  // namespace

TEST(PassesFusion, BatchNormIntoConvAndConvTranspose) {
  std::mt19937 g(1);
  for (int iter = 0; iter < 24; ++iter) {
    ConvSpec s = random_conv(g, iter);
    ModelBuilder b = conv_model(g, s, "c");
    add_bn(b, g, "c", "y", s.cout, iter % 2 ? 1e-5f : 0.1f);
    b.output("y");
    std::string what = "iter " + std::to_string(iter) + (s.transpose ? " ConvTranspose" : " Conv") + " group " +
                       std::to_string(s.group) + " spatial " + std::to_string(s.spatial);
    Model opt = differential_passes(b.m, {"fuse_bn_into_conv"}, g, batches(), what);
    EXPECT_EQ(count_op(opt, "BatchNormalization"), 0) << what;
    ASSERT_EQ(opt.graph.nodes.size(), 1u) << what;
    EXPECT_EQ(opt.graph.nodes[0].outputs[0], "y") << "the fused layer writes the BN's output name";
  }
}

TEST(PassesFusion, BatchNormStaysWhenTheConvOutputIsNeededElsewhere) {
  std::mt19937 g(2);
  ConvSpec s{false, 2, 1, 2, 3, true};
  for (int variant = 0; variant < 3; ++variant) {
    ModelBuilder b = conv_model(g, s, "c");
    add_bn(b, g, "c", "y", s.cout, 1e-5f);
    b.output("y");
    if (variant == 0) b.output("c");                        // the conv output is a graph output
    if (variant == 1) b.node("Relu", {"c"}, {"r"}).output("r");  // another reader
    if (variant == 2) {                                     // BN statistics are not constant
      b.m.graph.initializers.erase(b.m.graph.initializers.end() - 1);
      b.input("y_v", {s.cout});
    }
    Model opt = b.m;
    apply(opt, {"fuse_bn_into_conv"});
    EXPECT_EQ(count_op(opt, "BatchNormalization"), 1) << "variant " << variant;
  }
}

TEST(PassesFusion, BatchNormIntoGemm) {
  std::mt19937 g(3);
  for (int iter = 0; iter < 16; ++iter) {
    int64_t k = pick(g, 1, 5), n = pick(g, 1, 6);
    bool trans_b = iter % 2;
    ModelBuilder b;
    b.input("a", {"batch", k}).init("bw", random_uniform(g, trans_b ? Dims{n, k} : Dims{k, n}));
    std::vector<std::string> ins{"a", "bw"};
    int csel = iter / 2 % 4;  // none, [N], [1, N], scalar
    if (csel) {
      b.init("c", random_uniform(g, csel == 1 ? Dims{n} : csel == 2 ? Dims{1, n} : Dims{}));
      ins.push_back("c");
    }
    float alpha = iter % 3 ? 1.0f : 0.5f, beta = iter % 5 ? 1.0f : -2.0f;
    b.node("Gemm", ins, {"gy"},
           {Attribute::make_int("transB", trans_b), Attribute::make_float("alpha", alpha), Attribute::make_float("beta", beta)});
    add_bn(b, g, "gy", "y", n, 1e-3f);
    b.output("y");
    std::string what = "iter " + std::to_string(iter);
    Model opt = differential_passes(b.m, {"fuse_bn_into_gemm"}, g, batches(), what);
    EXPECT_EQ(count_op(opt, "BatchNormalization"), 0) << what;
    EXPECT_EQ(count_op(opt, "Gemm"), 1) << what;
  }
}

TEST(PassesFusion, PerChannelMulAddIntoConvOnlyWhenTrulyPerChannel) {
  std::mt19937 g(4);
  // X [batch, 4, 4, 4]: a [4] constant broadcasts along the width, not the channels.
  struct Case {
    const char* op;
    Dims c;
    bool folds;
  } cases[] = {
      {"Mul", {4, 1, 1}, true},     {"Mul", {1, 4, 1, 1}, true}, {"Add", {4, 1, 1}, true}, {"Sub", {4, 1, 1}, true},
      {"Div", {4, 1, 1}, true},     {"Mul", {}, true},           {"Add", {1}, true},       {"Mul", {4}, false},
      {"Add", {4}, false},          {"Mul", {2, 4, 1, 1}, false}, {"Add", {1, 4, 4, 1}, false},
      {"Mul", {1, 1, 4, 4, 1}, false},
  };
  for (const Case& c : cases) {
    for (int transpose = 0; transpose < 2; ++transpose) {
      ModelBuilder b;
      b.input("x", {"batch", 4, 4, 4});
      b.init("w", random_uniform(g, transpose ? Dims{4, 2, 1, 1} : Dims{4, 2, 1, 1})).init("b", random_uniform(g, {4}));
      b.m.graph.inputs[0].type.shape->dims[1] = Dim::fixed(transpose ? 4 : 2);
      std::vector<Attribute> attrs{Attribute::make_ints("kernel_shape", {1, 1})};
      if (transpose) attrs.push_back(Attribute::make_int("group", 2));
      b.node(transpose ? "ConvTranspose" : "Conv", {"x", "w", "b"}, {"y0"}, attrs);
      Tensor k = std::string(c.op) == "Div" ? positive(g, c.c) : random_uniform(g, c.c);
      b.init("k", k).node(c.op, {"y0", "k"}, {"y"}).output("y");
      std::string what = std::string(c.op) + " by [" + dims_to_string(c.c) + "]" + (transpose ? " after ConvTranspose" : "");
      // Batch 1 and 2: the [2, 4, 1, 1] constant broadcasts against both.
      Model opt = differential_passes(b.m, {"fuse_mul_add_into_conv"}, g, {{{"batch", 1}}, {{"batch", 2}}}, what);
      EXPECT_EQ(count_op(opt, c.op), c.folds ? 0 : 1) << what;
    }
  }
}

TEST(PassesFusion, MulAddIntoGemmPerColumnOnly) {
  std::mt19937 g(5);
  struct Case {
    const char* op;
    Dims c;
    bool folds;
  } cases[] = {{"Mul", {3}, true}, {"Add", {1, 3}, true}, {"Sub", {}, true}, {"Mul", {2, 1}, false}, {"Add", {2, 3}, false}};
  for (const Case& c : cases) {
    ModelBuilder b;
    b.input("a", {2, 4}).init("bw", random_uniform(g, {3, 4})).init("bc", random_uniform(g, {3}));
    b.node("Gemm", {"a", "bw", "bc"}, {"gy"}, {Attribute::make_int("transB", 1), Attribute::make_float("beta", 0.5f)});
    b.init("k", random_uniform(g, c.c)).node(c.op, {"gy", "k"}, {"y"}).output("y");
    std::string what = std::string(c.op) + " by [" + dims_to_string(c.c) + "]";
    Model opt = differential_passes(b.m, {"fuse_mul_add_into_conv"}, g, {{}}, what);
    EXPECT_EQ(count_op(opt, c.op), c.folds ? 0 : 1) << what;
  }
}

TEST(PassesFusion, MatMulAddBecomesGemmWhereLegal) {
  std::mt19937 g(6);
  struct Case {
    std::vector<D> a;
    Dims bias;
    bool fuses;
  } cases[] = {
      {{"batch", 4}, {3}, true},   {{"batch", 4}, {1, 3}, true}, {{2, 4}, {2, 1}, true}, {{2, 4}, {2, 3}, true},
      {{"batch", 4}, {}, true},    {{2, 5, 4}, {3}, false},      {{2, 4}, {5, 2, 3}, false},
  };
  for (const Case& c : cases) {
    ModelBuilder b;
    b.input("a", c.a).init("w", random_uniform(g, {4, 3})).init("bias", random_uniform(g, c.bias));
    b.node("MatMul", {"a", "w"}, {"mm"}).node("Add", {"bias", "mm"}, {"y"}).output("y");
    Model opt = differential_passes(b.m, {"fuse_matmul_add_into_gemm"}, g, batches(), "bias " + dims_to_string(c.bias));
    EXPECT_EQ(count_op(opt, "Gemm"), c.fuses ? 1 : 0) << dims_to_string(c.bias);
  }
}

namespace {

// The chain layer_norm is written as by converters that lack the op.
ModelBuilder layer_norm_chain(std::mt19937& g, int64_t opset, std::vector<int64_t> axes, bool pow, bool affine) {
  ModelBuilder b(opset);
  b.input("x", {"batch", "seq", 6});
  b.init("eps", Tensor::scalar<float>(1e-5f)).init("two", Tensor::scalar<float>(2.0f));
  b.node("ReduceMean", {"x"}, {"mean"}, {Attribute::make_ints("axes", axes)});
  b.node("Sub", {"x", "mean"}, {"d"});
  if (pow) b.node("Pow", {"d", "two"}, {"sq"});
  else b.node("Mul", {"d", "d"}, {"sq"});
  b.node("ReduceMean", {"sq"}, {"var"}, {Attribute::make_ints("axes", axes)});
  b.node("Add", {"var", "eps"}, {"ve"}).node("Sqrt", {"ve"}, {"sd"}).node("Div", {"d", "sd"}, {"n"});
  if (!affine) return b.output("n");
  b.init("gamma", random_uniform(g, {6})).init("beta", random_uniform(g, {6}));
  b.node("Mul", {"n", "gamma"}, {"scaled"}).node("Add", {"scaled", "beta"}, {"y"});
  return b.output("y");
}

}  // namespace

TEST(PassesFusion, LayerNormChainBecomesLayerNormalization) {
  std::mt19937 g(7);
  std::vector<std::map<std::string, int64_t>> sizes{{{"batch", 1}, {"seq", 3}}, {{"batch", 2}, {"seq", 5}}};
  for (bool pow : {false, true})
    for (bool affine : {false, true}) {
      std::string what = std::string(pow ? "Pow" : "Mul") + (affine ? " affine" : "");
      Model opt = differential_passes(layer_norm_chain(g, 17, {-1}, pow, affine).m, {"fuse_layer_norm"}, g, sizes, what);
      EXPECT_EQ(count_op(opt, "LayerNormalization"), 1) << what;
      EXPECT_EQ(opt.graph.nodes.size(), 1u) << what;
    }
  // Not a layer norm over trailing axes, or an opset without the op: unchanged.
  Model a = differential_passes(layer_norm_chain(g, 17, {1}, false, true).m, {"fuse_layer_norm"}, g, sizes);
  EXPECT_EQ(count_op(a, "LayerNormalization"), 0);
  Model b = layer_norm_chain(g, 13, {-1}, false, true).m;
  apply(b, {"fuse_layer_norm"});
  EXPECT_EQ(count_op(b, "LayerNormalization"), 0);
}

TEST(PassesFusion, ZeroPadIntoConv) {
  std::mt19937 g(8);
  for (int64_t opset : {9, 13}) {
    ModelBuilder b(opset);
    b.input("x", {"batch", 2, 5, 6}).init("w", random_uniform(g, {3, 2, 3, 3}));
    std::vector<int64_t> pads{0, 0, 1, 2, 0, 0, 2, 0};
    if (opset < 11) {
      b.node("Pad", {"x"}, {"p"}, {Attribute::make_ints("pads", pads)});
    } else {
      b.init("pads", Tensor::from_vector<int64_t>(pads, {8}));
      b.node("Pad", {"x", "pads"}, {"p"});
    }
    b.node("Conv", {"p", "w"}, {"y"}, {Attribute::make_ints("pads", {1, 0, 1, 1})}).output("y");
    Model opt = differential_passes(b.m, {"fuse_pad_into_conv", "eliminate_dead"}, g, batches());
    EXPECT_EQ(count_op(opt, "Pad"), 0) << "opset " << opset;
  }
}
