// Conv fusion (runtime/optimize.h): a fused session (fast paths) against the unfused reference
// session on random conv shapes and every post-op chain the fuser knows, plus the cases it must
// leave alone (shared intermediates, graph outputs, broadcasting residuals).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/kernels/avx512_math.h"
#include "runtime/kernels/conv_depthwise.h"
#include "runtime/kernels/conv_dnnl.h"
#include "runtime/kernels/conv_winograd.h"
#include "runtime/kernels/util.h"
#include "runtime/optimize.h"
#include "runtime/session.h"
#include "test_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

// A conv model: x -> Conv -> `tail` nodes. The conv output is "c"; inputs "x" and "r" (residual).
struct Builder {
  Model m;
  Builder() { m.opset_import = {{"", 13}}; }
  void input(const std::string& name, const Dims& d) { m.graph.inputs.push_back({name, Type::tensor(DType::Float, Shape::of(d)), {}}); }
  void init(const std::string& name, Tensor t) { m.graph.initializers.push_back({name, std::move(t), {}}); }
  void add(Node n) { m.graph.nodes.push_back(std::move(n)); }
  void output(const std::string& name) { m.graph.outputs.push_back({name, Type::tensor(DType::Float), {}}); }
};

struct ConvCase {
  Dims x, w;
  std::vector<Attribute> attrs;
  Dims y;
};

ConvCase random_conv(std::mt19937& g) {
  auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(g)); };
  ConvCase c;
  int64_t n = pick(1, 2), ch = pick(1, 20), h = pick(3, 12), wd = pick(3, 12);
  bool depthwise = pick(0, 3) == 0;
  int64_t group = depthwise ? ch : 1;
  int64_t m = depthwise ? ch : pick(1, 24);
  int64_t k = pick(0, 1) ? 3 : 1, s = pick(1, 2), p = k == 3 ? pick(0, 1) : 0;
  c.x = {n, ch, h, wd};
  c.w = {m, ch / group, k, k};
  c.attrs = {Attribute::make_int("group", group), Attribute::make_ints("strides", {s, s}),
             Attribute::make_ints("pads", {p, p, p, p}), Attribute::make_ints("kernel_shape", {k, k})};
  c.y = {n, m, (h + 2 * p - k) / s + 1, (wd + 2 * p - k) / s + 1};
  return c;
}

// Reference: every value of the unfused graph. Fast: the outputs of the fused plan.
std::map<std::string, RValue> run(const Model& m, bool fast, const std::map<std::string, RValue>& feeds, int threads) {
  SessionOptions so;
  so.fast_paths = fast;
  so.threads = threads;
  Session s(m, so);
  return fast ? s.run(feeds) : s.run_all(feeds);
}

// The graph the fast session runs, and whether a node in it produces `name`.
Graph rewritten(const Model& m) {
  Model r = m;
  optimize_for_runtime(r);
  return r.graph;
}
bool produces(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes)
    for (const auto& o : n.outputs)
      if (o == name) return true;
  return false;
}
int count_op(const Graph& g, const std::string& op) {
  int k = 0;
  for (const Node& n : g.nodes) k += n.op_type == op;
  return k;
}

// The activation chains appended after the conv output "c"; each ends in value "out".
enum class Tail { Relu, Leaky, Clip, ClipAttr, Swish, SwishSwapped, HardSwish, AddRelu, AddFirst, AddClip, ReluAdd };
constexpr Tail kTails[] = {Tail::Relu, Tail::Leaky, Tail::Clip, Tail::ClipAttr, Tail::Swish, Tail::SwishSwapped,
                           Tail::HardSwish, Tail::AddRelu, Tail::AddFirst, Tail::AddClip, Tail::ReluAdd};

void add_tail(Builder& b, Tail t) {
  switch (t) {
    case Tail::Relu: b.add(test::make_node("Relu", {"c"}, {"out"})); break;
    case Tail::Leaky: b.add(test::make_node("LeakyRelu", {"c"}, {"out"}, {Attribute::make_float("alpha", 0.2f)})); break;
    case Tail::Clip:
      b.init("lo", Tensor::scalar<float>(0.0f));
      b.init("hi", Tensor::scalar<float>(0.5f));
      b.add(test::make_node("Clip", {"c", "lo", "hi"}, {"out"}));
      break;
    case Tail::ClipAttr:
      b.m.opset_import = {{"", 6}};
      b.add(test::make_node("Clip", {"c"}, {"out"}, {Attribute::make_float("min", -0.3f), Attribute::make_float("max", 0.4f)}));
      break;
    case Tail::Swish:
      b.add(test::make_node("Sigmoid", {"c"}, {"s"}));
      b.add(test::make_node("Mul", {"c", "s"}, {"out"}));
      break;
    case Tail::SwishSwapped:
      b.add(test::make_node("Sigmoid", {"c"}, {"s"}));
      b.add(test::make_node("Mul", {"s", "c"}, {"out"}));
      break;
    case Tail::HardSwish:
      b.m.opset_import = {{"", 14}};
      b.add(test::make_node("HardSwish", {"c"}, {"out"}));
      break;
    case Tail::AddRelu:
      b.add(test::make_node("Add", {"c", "r"}, {"a"}));
      b.add(test::make_node("Relu", {"a"}, {"out"}));
      break;
    case Tail::AddFirst: b.add(test::make_node("Add", {"r", "c"}, {"out"})); break;
    case Tail::AddClip:
      b.init("lo", Tensor::scalar<float>(0.0f));
      b.init("hi", Tensor::scalar<float>(6.0f));
      b.add(test::make_node("Add", {"c", "r"}, {"a"}));
      b.add(test::make_node("Clip", {"a", "lo", "hi"}, {"out"}));
      break;
    case Tail::ReluAdd:
      b.add(test::make_node("Relu", {"c"}, {"a"}));
      b.add(test::make_node("Add", {"a", "r"}, {"out"}));
      break;
  }
}

bool uses_residual(Tail t) { return t == Tail::AddRelu || t == Tail::AddFirst || t == Tail::AddClip || t == Tail::ReluAdd; }

// Element by element within 1e-4 relative (plus 1e-4 absolute), NaN where the reference has NaN
// and the same infinity where it has one.
void expect_nan_close(const Tensor& want, const Tensor& got, const std::string& what) {
  ASSERT_EQ(want.dims(), got.dims()) << what;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float wv = want.data<float>()[i], gv = got.data<float>()[i];
    ASSERT_EQ(std::isnan(wv), std::isnan(gv)) << what << " at " << i;
    if (std::isnan(wv)) continue;
    if (std::isinf(wv)) {  // an infinite input can reach the output through a Relu
      ASSERT_EQ(wv, gv) << what << " at " << i;
      continue;
    }
    ASSERT_NEAR(wv, gv, 1e-4 * (1 + std::fabs(wv))) << what << " at " << i;
  }
}

TEST(RuntimeFusion, FusedMatchesReferenceOnRandomShapes) {
  std::mt19937 g(7);
  for (int iter = 0; iter < 60; ++iter) {
    ConvCase c = random_conv(g);
    Tail tail = kTails[static_cast<size_t>(iter) % std::size(kTails)];
    // Residuals: same shape as the conv output (oneDNN sum), or broadcast per channel (reference).
    bool bcast = uses_residual(tail) && iter % 3 == 2;
    Builder b;
    b.input("x", c.x);
    b.init("w", random_uniform(g, c.w));
    bool bias = iter % 2 == 0;
    if (bias) b.init("b", random_uniform(g, {c.w[0]}));
    std::map<std::string, RValue> feeds{{"x", random_uniform(g, c.x)}};
    if (iter % 4 == 1) {  // a NaN in the input stays NaN through every fused post-op, as unfused
      Tensor& x = feeds["x"].tensor;
      x.data<float>()[std::uniform_int_distribution<int64_t>(0, x.numel() - 1)(g)] = std::nanf("");
    }
    if (iter % 4 == 3) {  // so does an infinity: Relu(-inf) = 0, -inf - inf = NaN, ...
      Tensor& x = feeds["x"].tensor;
      const float inf = std::numeric_limits<float>::infinity();
      x.data<float>()[std::uniform_int_distribution<int64_t>(0, x.numel() - 1)(g)] = iter % 8 == 3 ? -inf : inf;
    }
    Dims rd = bcast ? Dims{1, c.y[1], 1, 1} : c.y;
    if (uses_residual(tail)) {
      b.input("r", rd);
      feeds["r"] = random_uniform(g, rd);
    }
    b.add(test::make_node("Conv", bias ? std::vector<std::string>{"x", "w", "b"} : std::vector<std::string>{"x", "w"}, {"c"}, c.attrs));
    add_tail(b, tail);
    b.output("out");
    std::string what = "iter " + std::to_string(iter) + " x " + dims_to_string(c.x) + " w " + dims_to_string(c.w);
    auto want = run(b.m, false, feeds, 1);
    for (int threads : {1, 2}) {
      auto got = run(b.m, true, feeds, threads);
      expect_close_f32(want.at("out").tensor, got.at("out").tensor, what);
    }
    // The whole chain became one node; the conv output is no longer a value of the fused plan.
    Graph g2 = rewritten(b.m);
    EXPECT_EQ(g2.nodes.size(), 1u) << what;
    EXPECT_EQ(count_op(g2, "FusedConv"), 1) << what;
    EXPECT_FALSE(produces(g2, "c")) << what;
  }
}

// A NaN made inside the model (Sqrt of a negative value, a NaN weight) reaches a conv whose Relu
// or Clip oneDNN would compute with max / min: the fused conv is marked keep_nan and the NaN stays
// NaN, at 1 and 2 threads, through plain and blocked neighbours. A conv fed only by ops that pass
// NaN on is not marked (its runs check their inputs instead).
TEST(RuntimeFusion, NaNMadeInsideTheModelStaysNaN) {
  std::mt19937 g(17);
  for (int variant = 0; variant < 6; ++variant) {
    // 0-3: Relu or Clip after Sqrt or a NaN weight; 4, 5: Relu then a residual Add, and the Add
    // then Relu (oneDNN computes the part of the chain before the Relu, the rest runs after it).
    const bool weight_nan = variant == 2 || variant == 3, clip = variant == 1 || variant == 3;
    Builder b;
    b.input("x", {1, 16, 9, 9});
    b.add(test::make_node(weight_nan ? "Neg" : "Sqrt", {"x"}, {"s"}));
    Tensor w = random_uniform(g, {16, 16, 3, 3});
    if (weight_nan) w.data<float>()[5 * 144 + 7] = std::nanf("");
    b.init("w", w);
    b.add(test::make_node("Conv", {"s", "w"}, {"c"}, {Attribute::make_ints("pads", {1, 1, 1, 1})}));
    add_tail(b, variant == 4 ? Tail::ReluAdd : variant == 5 ? Tail::AddRelu : clip ? Tail::Clip : Tail::Relu);
    if (variant >= 4) b.input("r", {1, 16, 9, 9});
    b.init("w2", random_uniform(g, {16, 16, 1, 1}));
    b.add(test::make_node("Conv", {"out", "w2"}, {"y"}));
    b.output("y");
    Tensor x = random_uniform(g, {1, 16, 9, 9});  // values of both signs: Sqrt makes NaNs
    std::map<std::string, RValue> feeds{{"x", x}};
    if (variant >= 4) feeds["r"] = random_uniform(g, {1, 16, 9, 9});
    auto want = run(b.m, false, feeds, 1);
    int nans = 0;
    for (int64_t i = 0; i < want.at("y").tensor.numel(); ++i) nans += std::isnan(want.at("y").tensor.data<float>()[i]);
    EXPECT_GT(nans, 0) << variant;
    for (int threads : {1, 2})
      expect_close_f32(want.at("y").tensor, run(b.m, true, feeds, threads).at("y").tensor,
                       "variant " + std::to_string(variant) + " threads " + std::to_string(threads));
    Graph g2 = rewritten(b.m);
    for (const Node& n : g2.nodes) {
      if (n.op_type != "FusedConv" || !n.has_attr("post_ops")) continue;
      EXPECT_EQ(n.attr_int("keep_nan", 0), 1) << variant;
    }
  }
  // Neg passes NaN on and makes none, nor does a Div by a constant of non-zero values (an input
  // scaled by 1/255): no mark, the conv stays on the fused path.
  Builder b;
  b.input("x", {1, 16, 9, 9});
  b.init("scale", Tensor::scalar<float>(255.0f));
  b.add(test::make_node("Div", {"x", "scale"}, {"d"}));
  b.add(test::make_node("Neg", {"d"}, {"s"}));
  b.init("w", random_uniform(g, {16, 16, 3, 3}));
  b.add(test::make_node("Conv", {"s", "w"}, {"c"}));
  add_tail(b, Tail::Relu);
  b.output("out");
  Graph g2 = rewritten(b.m);
  ASSERT_EQ(count_op(g2, "FusedConv"), 1);
  for (const Node& n : g2.nodes) {
    if (n.op_type != "FusedConv") continue;
    EXPECT_FALSE(n.has_attr("keep_nan"));
  }
  // A Div by a computed value (x / x is NaN at 0) does mark it.
  b.m.graph.nodes[0].inputs[1] = "x";
  for (const Node& n : rewritten(b.m).nodes) {
    if (n.op_type != "FusedConv") continue;
    EXPECT_EQ(n.attr_int("keep_nan", 0), 1);
  }
}

TEST(RuntimeFusion, SharedOrOutputIntermediatesStay) {
  std::mt19937 g(11);
  ConvCase c{{1, 4, 6, 6}, {8, 4, 3, 3}, {Attribute::make_ints("pads", {1, 1, 1, 1})}, {1, 8, 6, 6}};
  std::map<std::string, RValue> feeds{{"x", random_uniform(g, c.x)}};
  for (int variant = 0; variant < 2; ++variant) {
    Builder b;
    b.input("x", c.x);
    b.init("w", random_uniform(g, c.w));
    b.add(test::make_node("Conv", {"x", "w"}, {"c"}, c.attrs));
    b.add(test::make_node("Relu", {"c"}, {"out"}));
    b.output("out");
    if (variant == 0) b.output("c");  // a graph output is never fused away
    else b.add(test::make_node("Neg", {"c"}, {"n"})), b.output("n");  // nor a value with another reader
    auto want = run(b.m, false, feeds, 1);
    auto got = run(b.m, true, feeds, 1);
    if (variant == 1) got["c"] = Session(b.m).run_all(feeds).at("c");
    EXPECT_TRUE(produces(rewritten(b.m), "c"));
    EXPECT_EQ(count_op(rewritten(b.m), "FusedConv"), 0);
    expect_close_f32(want.at("c").tensor, got.at("c").tensor, "c");
    expect_close_f32(want.at("out").tensor, got.at("out").tensor, "out");
  }
}

TEST(RuntimeFusion, ChainsOfFusedConvs) {
  // conv -> relu -> conv -> add(first relu) -> relu: the residual block shape of ResNet.
  std::mt19937 g(5);
  Builder b;
  b.input("x", {1, 16, 10, 10});
  auto pads = Attribute::make_ints("pads", {1, 1, 1, 1});
  b.init("w1", random_uniform(g, {16, 16, 3, 3}));
  b.init("w2", random_uniform(g, {16, 16, 3, 3}));
  b.init("b2", random_uniform(g, {16}));
  b.add(test::make_node("Conv", {"x", "w1"}, {"c1"}, {pads}));
  b.add(test::make_node("Relu", {"c1"}, {"r1"}));
  b.add(test::make_node("Conv", {"r1", "w2", "b2"}, {"c2"}, {pads}));
  b.add(test::make_node("Add", {"c2", "r1"}, {"a"}));
  b.add(test::make_node("Relu", {"a"}, {"out"}));
  b.output("out");
  std::map<std::string, RValue> feeds{{"x", random_uniform(g, {1, 16, 10, 10})}};
  auto want = run(b.m, false, feeds, 1);
  SessionOptions so;
  so.threads = 2;
  Session s(b.m, so);
  for (int i = 0; i < 3; ++i) {  // repeated runs reuse pooled buffers
    auto got = s.run(feeds);
    expect_close_f32(want.at("out").tensor, got.at("out").tensor, "run " + std::to_string(i));
  }
  Graph g2 = rewritten(b.m);
  EXPECT_EQ(count_op(g2, "FusedConv"), 2);
  for (const char* gone : {"c1", "c2", "a"}) EXPECT_FALSE(produces(g2, gone)) << gone;
  // r1 is read only by the second conv (as X and residual): it travels channel-blocked instead.
  EXPECT_FALSE(produces(g2, "r1"));
  EXPECT_TRUE(produces(g2, "r1#blocked"));
  // run_all still shows every value of the graph as written, equal to the reference.
  auto all = s.run_all(feeds);
  for (const char* name : {"c1", "r1", "c2", "a", "out"}) {
    ASSERT_EQ(all.count(name), 1u) << name;
    expect_close_f32(want.at(name).tensor, all.at(name).tensor, name);
  }
}

TEST(RuntimeFusion, ResidualThatDiesIsOverwrittenInPlace) {
  // h = Relu(conv0(x)); out = Relu(conv2(Relu(conv1(h))) + h): the Add is h's last reader, so the
  // fused conv2 writes its output over h. Plain and blocked channel counts; repeated runs.
  std::mt19937 g(31);
  for (int64_t c : {16, 12}) {
    Builder b;
    b.input("x", {1, 3, 9, 9});
    auto pads = Attribute::make_ints("pads", {1, 1, 1, 1});
    b.init("w0", random_uniform(g, {c, 3, 3, 3}));
    b.init("w1", random_uniform(g, {c, c, 3, 3}));
    b.init("w2", random_uniform(g, {c, c, 1, 1}));
    b.add(test::make_node("Conv", {"x", "w0"}, {"c0"}, {pads}));
    b.add(test::make_node("Relu", {"c0"}, {"h"}));
    b.add(test::make_node("Conv", {"h", "w1"}, {"c1"}, {pads}));
    b.add(test::make_node("Relu", {"c1"}, {"r1"}));
    b.add(test::make_node("Conv", {"r1", "w2"}, {"c2"}));
    b.add(test::make_node("Add", {"h", "c2"}, {"a"}));
    b.add(test::make_node("Relu", {"a"}, {"out"}));
    b.output("out");
    std::map<std::string, RValue> feeds{{"x", random_uniform(g, {1, 3, 9, 9})}};
    auto want = run(b.m, false, feeds, 1);
    Session s(b.m);
    for (int i = 0; i < 3; ++i) expect_close_f32(want.at("out").tensor, s.run(feeds).at("out").tensor, "c " + std::to_string(c));
  }
}

TEST(RuntimeFusion, BlockedChainsMatchReference) {
  // m = Relu(convA(x)); out = Relu(convB(m) + m), with m sometimes also a graph output (so it is
  // converted back to NCHW) and channel counts that do not fill a block.
  std::mt19937 g(23);
  for (int iter = 0; iter < 24; ++iter) {
    ConvCase a = random_conv(g);
    int64_t m = a.y[1];
    bool depthwise = iter % 3 == 0;
    int64_t k = iter % 2 ? 3 : 1;
    Dims wb{m, depthwise ? 1 : m, k, k};
    Builder b;
    b.input("x", a.x);
    b.init("wa", random_uniform(g, a.w));
    b.init("wb", random_uniform(g, wb));
    b.init("bb", random_uniform(g, {m}));
    b.add(test::make_node("Conv", {"x", "wa"}, {"ca"}, a.attrs));
    b.add(test::make_node("Relu", {"ca"}, {"m"}));
    b.add(test::make_node("Conv", {"m", "wb", "bb"}, {"cb"},
               {Attribute::make_int("group", depthwise ? m : 1), Attribute::make_ints("pads", {k / 2, k / 2, k / 2, k / 2})}));
    b.add(test::make_node("Add", {"cb", "m"}, {"s"}));
    b.add(test::make_node("Relu", {"s"}, {"out"}));
    b.output("out");
    bool m_out = iter % 4 == 1;
    if (m_out) b.output("m");
    std::map<std::string, RValue> feeds{{"x", random_uniform(g, a.x)}};
    std::string what = "iter " + std::to_string(iter) + " x " + dims_to_string(a.x) + " wa " + dims_to_string(a.w) +
                       " wb " + dims_to_string(wb);
    auto want = run(b.m, false, feeds, 1);
    auto got = run(b.m, true, feeds, 2);
    expect_close_f32(want.at("out").tensor, got.at("out").tensor, what);
    if (m_out) expect_close_f32(want.at("m").tensor, got.at("m").tensor, what + " m");
    // m goes blocked where oneDNN has jit kernels for both convs (whole channel blocks, or 1x1 and
    // depthwise convs); as a graph output it also comes back to NCHW under its own name.
    int64_t blk = kern::channel_block(), group_a = a.x[1] / a.w[1];
    auto fits = [&](const Dims& w, int64_t group) {
      bool dw = group > 1 && w[1] == 1 && w[0] == group;
      return m % blk == 0 || (w[2] == 1 && w[3] == 1) || dw;
    };
    bool blocked = fits(a.w, group_a) && fits(wb, depthwise ? m : 1);
    Graph g2 = rewritten(b.m);
    EXPECT_EQ(produces(g2, "m#blocked"), blocked) << what;
    EXPECT_EQ(produces(g2, "m"), m_out || !blocked) << what;
    EXPECT_EQ(count_op(g2, "FromBlocked"), blocked && m_out ? 1 : 0) << what;
  }
}

// When idle threads sleep (the runtime_fusion_passive_wait run of this file), a conv of one image
// between blocked activations is cut into single-threaded convs over ranges of output channel
// blocks, run as tasks (DnnlConv::runs_in_parts_so_far). m = Relu(convA(x)); n = Clip(convB(m)
// [+ m]); out = convC(n), convB the one cut: 3 to 13 output blocks (fewer blocks than parts, and
// more), channel counts that do not fill a block, 1x1 and 3x3 kernels (3x3 also of stride 2, which
// then keeps oneDNN's blocked conv rather than its channels-last one so as to be cut), with and without
// bias, the residual's buffer reused for the output or not (m also a graph output).
TEST(RuntimeFusion, ConvsCutIntoTasksMatchReference) {
  std::mt19937 g(41);
  const uint64_t before = kern::DnnlConv::runs_in_parts_so_far();
  const int64_t blk = kern::channel_block();
  for (int iter = 0; iter < 12; ++iter) {
    const int64_t ka = iter % 3 == 1 ? 3 : 1, kb = iter % 4 >= 2 ? 3 : 1;
    const bool residual = iter % 2 == 0, bias = iter % 5 != 3, m_out = iter % 6 == 4;
    const int64_t stride = kb == 3 && !residual ? 2 : 1;
    // A 3x3 conv writes blocked activations for whole channel blocks only: one stride-2 case has them.
    const int64_t cin = 8 + 13 * iter % 40, m = iter == 7 ? 160 : 40 + 17 * iter % 170, hw = 28 + 4 * (iter % 4);
    Builder b;
    b.input("x", {1, cin, hw, hw});
    // Weights scaled by fan-in as trained nets keep them, so that sums stay near 1.
    const float sa = 1.0f / std::sqrt(static_cast<float>(cin * ka * ka)), sb = 1.0f / std::sqrt(static_cast<float>(m * kb * kb));
    b.init("wa", random_uniform(g, {m, cin, ka, ka}, -sa, sa));
    b.init("ba", random_uniform(g, {m}));
    b.init("wb", random_uniform(g, {m, m, kb, kb}, -sb, sb));
    b.init("bb", random_uniform(g, {m}));
    b.init("lo", Tensor::scalar<float>(-0.5f));
    b.init("hi", Tensor::scalar<float>(2.0f));
    b.add(test::make_node("Conv", {"x", "wa", "ba"}, {"ca"}, {Attribute::make_ints("pads", {ka / 2, ka / 2, ka / 2, ka / 2})}));
    b.add(test::make_node("Relu", {"ca"}, {"m"}));
    std::vector<std::string> in_b{"m", "wb"};
    if (bias) in_b.push_back("bb");
    b.add(test::make_node("Conv", in_b, {"cb"},
                          {Attribute::make_ints("pads", {kb / 2, kb / 2, kb / 2, kb / 2}),
                           Attribute::make_ints("strides", {stride, stride})}));
    if (residual) b.add(test::make_node("Add", {"cb", "m"}, {"s"}));
    if (iter % 3 == 2) {  // SiLU: applied to each part's output blocks after its conv
      b.add(test::make_node("Sigmoid", {residual ? "s" : "cb"}, {"sg"}));
      b.add(test::make_node("Mul", {residual ? "s" : "cb", "sg"}, {"n"}));
    } else {
      b.add(test::make_node("Clip", {residual ? "s" : "cb", "lo", "hi"}, {"n"}));
    }
    b.init("wc", random_uniform(g, {5, m, 1, 1}, -sb, sb));
    b.add(test::make_node("Conv", {"n", "wc"}, {"out"}));
    b.output("out");
    if (m_out) b.output("m");
    std::map<std::string, RValue> feeds{{"x", random_uniform(g, {1, cin, hw, hw})}};
    const std::string what = "iter " + std::to_string(iter) + " cin " + std::to_string(cin) + " m " + std::to_string(m) +
                             " hw " + std::to_string(hw) + " kernels " + std::to_string(ka) + "/" + std::to_string(kb) +
                             " stride " + std::to_string(stride);
    auto want = run(b.m, false, feeds, 1);
    const uint64_t runs = kern::DnnlConv::runs_in_parts_so_far();
    auto got = run(b.m, true, feeds, 2);
    expect_close_f32(want.at("out").tensor, got.at("out").tensor, what);
    if (m_out) expect_close_f32(want.at("m").tensor, got.at("m").tensor, what + " m");
    // m is blocked when conv A has a jit kernel that writes it so (1x1, or whole channel blocks);
    // then conv B runs on oneDNN's blocked kernel, cut when threads sleep, if it writes blocked
    // activations too (1x1, or a 3x3 of whole blocks) and is no Winograd conv (stride 1 3x3).
    if (blk == 16 && (ka == 1 || m % blk == 0) && (kb == 1 || (stride == 2 && m % blk == 0)) &&
        kern::omp_waits_passively())
      EXPECT_GT(kern::DnnlConv::runs_in_parts_so_far(), runs) << what;
  }
  if (!kern::omp_waits_passively()) EXPECT_EQ(kern::DnnlConv::runs_in_parts_so_far(), before);
}

// One session run at batch 1, 2, then 1 again (the input's shape left open) keeps one packed copy
// of each conv's weights: with idle threads sleeping, a 3x3 stride-2 conv packs its weights at
// build for the kernel cut into tasks (one image), and its batch-2 runs take that kernel too
// rather than the channels-last one, which would add a second copy (plain and packed weights).
TEST(RuntimeFusion, ConvWeightsPackedOnceAcrossBatchSizes) {
  std::mt19937 g(43);
  Builder b;
  b.m.graph.inputs.push_back({"x", Type::tensor(DType::Float), {}});
  b.init("w0", random_uniform(g, {48, 8, 1, 1}, -0.3f, 0.3f));
  b.init("w1", random_uniform(g, {64, 48, 3, 3}, -0.05f, 0.05f));
  b.init("b1", random_uniform(g, {64}));
  b.init("w2", random_uniform(g, {16, 64, 1, 1}, -0.1f, 0.1f));
  b.add(test::make_node("Conv", {"x", "w0"}, {"c0"}));
  b.add(test::make_node("Relu", {"c0"}, {"r0"}));
  b.add(test::make_node("Conv", {"r0", "w1", "b1"}, {"c1"},
                        {Attribute::make_ints("pads", {1, 1, 1, 1}), Attribute::make_ints("strides", {2, 2})}));
  b.add(test::make_node("Relu", {"c1"}, {"r1"}));
  b.add(test::make_node("Conv", {"r1", "w2"}, {"out"}));
  b.output("out");
  SessionOptions so;
  so.threads = 2;
  Session sess(b.m, so);
  const uint64_t before = kern::DnnlConv::extra_layouts_so_far();
  for (int64_t n : {1, 2, 1}) {
    std::map<std::string, RValue> feeds{{"x", random_uniform(g, {n, 8, 30, 30})}};
    auto want = run(b.m, false, feeds, 1);
    expect_close_f32(want.at("out").tensor, sess.run(feeds).at("out").tensor, "batch " + std::to_string(n));
  }
  EXPECT_EQ(kern::DnnlConv::extra_layouts_so_far(), before);
}

// A 2-d MaxPool / AveragePool between convs passes the blocked layout through (BlockedPool):
// conv -> pool -> conv, over pads, strides, ceil mode, count_include_pad, dilations, channel
// counts that do not fill a block, the pool output also a graph output (back to NCHW) or also read
// by a non-conv, a second pool in a row, and a pool whose input stays NCHW (its producer is no conv).
TEST(RuntimeFusion, PoolsBetweenConvsStayBlocked) {
  std::mt19937 g(41);
  for (int iter = 0; iter < 20; ++iter) {
    auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(g)); };
    int64_t c = iter % 3 == 0 ? 12 : iter % 3 == 1 ? 16 : 20, hw = pick(5, 13), k = pick(2, 3), s = pick(1, 2);
    int64_t p = pick(0, 1), ceil = pick(0, 1), dil = iter % 5 == 4 ? 2 : 1;
    bool max = iter % 2 == 0, include_pad = !max && pick(0, 1), out_too = iter % 4 == 3, plain_reader = iter % 6 == 5,
         second = iter % 7 == 2, no_conv = iter % 9 == 8;
    if (!max) dil = 1;  // AveragePool takes dilations from opset 19 only
    Builder b;
    b.input("x", {1, 3, hw, hw});
    // Channel counts that do not fill a block go blocked from 1x1 convs only.
    int64_t k1 = c % 16 ? 1 : 3;
    b.init("w1", random_uniform(g, {c, 3, k1, k1}));
    b.init("w2", random_uniform(g, {8, no_conv ? 3 : c, 1, 1}));
    b.add(test::make_node("Conv", {"x", "w1"}, {"c1"}, {Attribute::make_ints("pads", {k1 / 2, k1 / 2, k1 / 2, k1 / 2})}));
    b.add(test::make_node("Relu", {"c1"}, {"r1"}));
    std::vector<Attribute> pa{Attribute::make_ints("kernel_shape", {k, k}), Attribute::make_ints("strides", {s, s}),
                              Attribute::make_ints("pads", {p, p, p, p}), Attribute::make_int("ceil_mode", ceil)};
    if (dil > 1) pa.push_back(Attribute::make_ints("dilations", {dil, dil}));
    if (include_pad) pa.push_back(Attribute::make_int("count_include_pad", 1));
    std::string src = no_conv ? "x" : "r1";
    b.add(test::make_node(max ? "MaxPool" : "AveragePool", {src}, {"pl"}, pa));
    std::string into = "pl";
    if (second) {
      b.add(test::make_node("MaxPool", {"pl"}, {"pl2"}, {Attribute::make_ints("kernel_shape", {2, 2}),
                                                         Attribute::make_ints("pads", {1, 1, 1, 1})}));
      into = "pl2";
    }
    b.add(test::make_node("Conv", {into, "w2"}, {"out"}));
    b.output("out");
    if (no_conv) b.output("r1");
    if (out_too) b.output("pl");
    if (plain_reader) {
      b.add(test::make_node("Sigmoid", {"pl"}, {"sg"}));
      b.output("sg");
    }
    std::map<std::string, RValue> feeds{{"x", random_uniform(g, {1, 3, hw, hw})}};
    if (iter % 3 == 1) {  // a NaN in the input reaches the output through Relu and the pools
      Tensor& x = feeds["x"].tensor;
      x.data<float>()[pick(0, static_cast<int>(x.numel()) - 1)] = std::nanf("");
    }
    std::string what = "iter " + std::to_string(iter) + (max ? " max" : " avg") + " c " + std::to_string(c) + " hw " +
                       std::to_string(hw) + " k " + std::to_string(k) + " s " + std::to_string(s) + " p " +
                       std::to_string(p) + " ceil " + std::to_string(ceil) + " dil " + std::to_string(dil);
    auto want = run(b.m, false, feeds, 1);
    SessionOptions so;
    so.threads = 2;
    Session sess(b.m, so);
    for (int rep = 0; rep < 2; ++rep) {
      auto got = sess.run(feeds);
      expect_close_f32(want.at("out").tensor, got.at("out").tensor, what);
      if (out_too) expect_close_f32(want.at("pl").tensor, got.at("pl").tensor, what + " pl");
      if (plain_reader) expect_close_f32(want.at("sg").tensor, got.at("sg").tensor, what + " sg");
    }
    Graph g2 = rewritten(b.m);
    EXPECT_EQ(count_op(g2, "BlockedPool"), no_conv ? 0 : second ? 2 : 1) << what;
    EXPECT_EQ(produces(g2, "pl#blocked"), !no_conv) << what;
    EXPECT_EQ(produces(g2, "pl"), no_conv || out_too || plain_reader) << what;
    EXPECT_EQ(count_op(g2, "FromBlocked"), !no_conv && (out_too || plain_reader) ? 1 : 0) << what;
  }
}

// A GlobalAveragePool / GlobalMaxPool after a conv reads its blocked output directly
// (BlockedGlobalPool) and writes plain [N, C, 1, 1]: against the reference over channel counts that
// do not fill a block, 1 x 1 to 9 x 9 maps, two images, a NaN or -inf in the input, the conv output
// also a graph output (then one FromBlocked remains) or also read by a second conv.
TEST(RuntimeFusion, GlobalPoolsReadBlockedActivations) {
  std::mt19937 g(47);
  for (int iter = 0; iter < 24; ++iter) {
    auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(g)); };
    const int64_t c = iter % 4 == 0 ? 12 : iter % 4 == 1 ? 16 : iter % 4 == 2 ? 20 : 40;
    const int64_t n = pick(1, 2), h = pick(1, 9), w = pick(1, 9);
    const bool max = iter % 2 == 0, out_too = iter % 5 == 3, conv_too = iter % 3 == 1;
    Builder b;
    b.input("x", {n, 3, h, w});
    b.init("w1", random_uniform(g, {c, 3, 1, 1}));
    b.add(test::make_node("Conv", {"x", "w1"}, {"c1"}));
    b.add(test::make_node("Relu", {"c1"}, {"r1"}));
    b.add(test::make_node(max ? "GlobalMaxPool" : "GlobalAveragePool", {"r1"}, {"gp"}));
    b.output("gp");
    if (out_too) b.output("r1");
    if (conv_too) {
      b.init("w2", random_uniform(g, {8, c, 1, 1}));
      b.add(test::make_node("Conv", {"r1", "w2"}, {"c2"}));
      b.output("c2");
    }
    std::map<std::string, RValue> feeds{{"x", random_uniform(g, {n, 3, h, w})}};
    Tensor& x = feeds["x"].tensor;
    if (iter % 6 == 1) x.data<float>()[pick(0, static_cast<int>(x.numel()) - 1)] = std::nanf("");
    if (iter % 6 == 4) x.data<float>()[pick(0, static_cast<int>(x.numel()) - 1)] = -std::numeric_limits<float>::infinity();
    const std::string what = "iter " + std::to_string(iter) + (max ? " max" : " avg") + " c " + std::to_string(c) +
                             " x " + dims_to_string(x.dims());
    auto want = run(b.m, false, feeds, 1);
    for (int threads : {1, 2}) {
      auto got = run(b.m, true, feeds, threads);
      expect_close_f32(want.at("gp").tensor, got.at("gp").tensor, what);
      if (out_too) expect_close_f32(want.at("r1").tensor, got.at("r1").tensor, what + " r1");
      if (conv_too) expect_close_f32(want.at("c2").tensor, got.at("c2").tensor, what + " c2");
    }
    Graph g2 = rewritten(b.m);
    EXPECT_EQ(count_op(g2, "BlockedGlobalPool"), 1) << what;
    EXPECT_EQ(count_op(g2, "FromBlocked"), out_too ? 1 : 0) << what;
  }
}

// A squeeze-and-excitation block (EfficientNet's, MobileNetV3's): conv -> X, global pool, 1x1
// conv, activation, 1x1 conv, Sigmoid or HardSigmoid -> S, Mul(X, S) in either order, 1x1 conv.
// X stays blocked through the Mul (BlockedScale) and no FromBlocked remains: against the reference
// over channel counts that do not fill a block, two images, a NaN in the input, at 1 and 2
// threads. An S that is not one value per channel (the Mul then reads X against a [N, C, H, W]
// S computed from the map itself) takes BlockedScale's general path, and still matches.
TEST(RuntimeFusion, SqueezeExcitationScaleStaysBlocked) {
  std::mt19937 g(53);
  for (int iter = 0; iter < 16; ++iter) {
    auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(g)); };
    const int64_t c = iter % 4 == 0 ? 24 : iter % 4 == 1 ? 32 : iter % 4 == 2 ? 40 : 72, r = 8;
    const int64_t n = pick(1, 2), h = pick(1, 12), w = pick(1, 12);
    const bool hard = iter % 2 == 1, swapped = iter % 3 == 1, spatial = iter % 8 == 5;
    Builder b;
    b.input("x", {n, 3, h, w});
    b.init("w1", random_uniform(g, {c, 3, 1, 1}));
    b.add(test::make_node("Conv", {"x", "w1"}, {"c1"}));
    b.add(test::make_node("Relu", {"c1"}, {"a"}));
    if (!spatial) b.add(test::make_node("GlobalAveragePool", {"a"}, {"gp"}));
    b.init("wr", random_uniform(g, {r, c, 1, 1}));
    b.init("br", random_uniform(g, {r}));
    b.add(test::make_node("Conv", {spatial ? "a" : "gp", "wr", "br"}, {"cr"}));
    b.add(test::make_node("Relu", {"cr"}, {"rr"}));
    b.init("we", random_uniform(g, {c, r, 1, 1}));
    b.init("be", random_uniform(g, {c}));
    b.add(test::make_node("Conv", {"rr", "we", "be"}, {"ce"}));
    b.add(test::make_node(hard ? "HardSigmoid" : "Sigmoid", {"ce"}, {"s"}));
    b.add(test::make_node("Mul", swapped ? std::vector<std::string>{"s", "a"} : std::vector<std::string>{"a", "s"}, {"m"}));
    b.init("w2", random_uniform(g, {16, c, 1, 1}));
    b.add(test::make_node("Conv", {"m", "w2"}, {"y"}));
    b.output("y");
    std::map<std::string, RValue> feeds{{"x", random_uniform(g, {n, 3, h, w})}};
    Tensor& x = feeds["x"].tensor;
    if (iter % 5 == 2) x.data<float>()[pick(0, static_cast<int>(x.numel()) - 1)] = std::nanf("");
    const std::string what = "iter " + std::to_string(iter) + " c " + std::to_string(c) + " x " + dims_to_string(x.dims()) +
                             (hard ? " hard" : "") + (swapped ? " swapped" : "") + (spatial ? " spatial" : "");
    auto want = run(b.m, false, feeds, 1);
    for (int threads : {1, 2}) {
      auto got = run(b.m, true, feeds, threads);
      expect_nan_close(want.at("y").tensor, got.at("y").tensor, what + " threads " + std::to_string(threads));
    }
    Graph g2 = rewritten(b.m);
    EXPECT_EQ(count_op(g2, "BlockedScale"), 1) << what;
    EXPECT_EQ(count_op(g2, "FromBlocked"), 0) << what;
  }
}

// Concat on the channel axis of conv outputs (SqueezeNet's fire modules, GoogLeNet's branches)
// concatenates blocked activations (BlockedConcat) when every input but the last has whole
// blocks of channels, so the conv after reads them with no reorder: against the reference over
// two to three inputs, a last input of a partial block, two images, axis 1 and -3, at 1 and 2
// threads. A first input of a partial block, or an input that is not a conv's output, leaves the
// Concat as it is.
TEST(RuntimeFusion, ConcatOfConvOutputsStaysBlocked) {
  std::mt19937 g(59);
  const int64_t blk = kern::channel_block();
  for (int iter = 0; iter < 12; ++iter) {
    auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(g)); };
    const int64_t n = pick(1, 2), h = pick(3, 12), w = pick(3, 12);
    const int inputs = iter % 2 == 0 ? 2 : 3;
    const bool partial_first = iter % 6 == 4, plain_input = iter % 6 == 5;
    std::vector<int64_t> ch;
    for (int k = 0; k < inputs; ++k) ch.push_back(k + 1 < inputs ? (partial_first && k == 0 ? 24 : 16 * pick(1, 3)) : 8 * pick(1, 5));
    Builder b;
    b.input("x", {n, 8, h, w});
    b.init("ws", random_uniform(g, {16, 8, 1, 1}));
    b.add(test::make_node("Conv", {"x", "ws"}, {"sq"}));
    b.add(test::make_node("Relu", {"sq"}, {"s"}));
    std::vector<std::string> cat;
    for (int k = 0; k < inputs; ++k) {
      const std::string id = std::to_string(k);
      const int64_t kk = k + 1 == inputs ? 1 : k == 0 ? 3 : 1;  // a 3x3 conv writes blocked for whole blocks only
      if (plain_input && k == inputs - 1) {  // a Relu of the input: not a conv's output
        b.add(test::make_node("Relu", {"x"}, {"e" + id}));
        ch[static_cast<size_t>(k)] = 8;
      } else {
        b.init("we" + id, random_uniform(g, {ch[static_cast<size_t>(k)], 16, kk, kk}));
        b.add(test::make_node("Conv", {"s", "we" + id}, {"c" + id}, {Attribute::make_ints("pads", {kk / 2, kk / 2, kk / 2, kk / 2})}));
        b.add(test::make_node("Relu", {"c" + id}, {"e" + id}));
      }
      cat.push_back("e" + id);
    }
    b.add(test::make_node("Concat", cat, {"cat"}, {Attribute::make_int("axis", iter % 3 == 1 ? -3 : 1)}));
    int64_t total = 0;
    for (int64_t c : ch) total += c;
    b.init("w2", random_uniform(g, {16, total, 1, 1}));
    b.add(test::make_node("Conv", {"cat", "w2"}, {"y"}));
    b.output("y");
    std::map<std::string, RValue> feeds{{"x", random_uniform(g, {n, 8, h, w})}};
    std::string what = "iter " + std::to_string(iter) + " channels";
    for (int64_t c : ch) what += " " + std::to_string(c);
    auto want = run(b.m, false, feeds, 1);
    for (int threads : {1, 2}) {
      auto got = run(b.m, true, feeds, threads);
      expect_close_f32(want.at("y").tensor, got.at("y").tensor, what + " threads " + std::to_string(threads));
    }
    const bool blocked = blk == 16 && !partial_first && !plain_input;
    Graph g2 = rewritten(b.m);
    EXPECT_EQ(count_op(g2, "BlockedConcat"), blocked ? 1 : 0) << what;
    if (blocked) EXPECT_EQ(count_op(g2, "FromBlocked"), 0) << what;
  }
}

// Attention as PyTorch exports multi-head attention (Transposes of q, k, v, MatMul, scale,
// mask, Softmax, MatMul, Transpose back) runs as one internal::Attention: against the reference
// over sequence lengths and head sizes that do not fill a vector (and exceed one block of 64),
// Div, Mul or no scale, a causal bool mask through Where, a float mask through Add, broadcast
// masks, a NaN in V behind the causal mask, and a chain it must leave alone (the scores also a
// graph output).
TEST(RuntimeFusion, AttentionMatchesReference) {
  std::mt19937 g(43);
  for (int iter = 0; iter < 16; ++iter) {
    auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(g)); };
    int64_t B = pick(1, 2), H = pick(1, 3), Sq = iter % 4 == 1 ? pick(30, 70) : pick(1, 23),
            Skv = iter % 4 == 0 ? Sq : pick(1, 90), D = pick(1, 20),
            Dv = iter % 5 == 0 ? 70 : pick(1, 20);
    int scale = iter % 3, mask = iter % 4;  // scale: none, Div, Mul; mask: none, where, add, add [Sq, Skv]
    bool scores_out = iter == 7;
    Builder b;
    b.input("q", {B, Sq, H, D});
    b.input("k", {B, Skv, H, D});
    b.input("v", {B, Skv, H, Dv});
    b.add(test::make_node("Transpose", {"q"}, {"tq"}, {Attribute::make_ints("perm", {0, 2, 1, 3})}));
    b.add(test::make_node("Transpose", {"k"}, {"tk"}, {Attribute::make_ints("perm", {0, 2, 3, 1})}));
    b.add(test::make_node("Transpose", {"v"}, {"tv"}, {Attribute::make_ints("perm", {0, 2, 1, 3})}));
    b.add(test::make_node("MatMul", {"tq", "tk"}, {"s0"}));
    std::string cur = "s0";
    if (scale) {
      b.init("c", Tensor::scalar(scale == 1 ? 8.0f : 0.3f));
      b.add(test::make_node(scale == 1 ? "Div" : "Mul", scale == 1 ? std::vector<std::string>{cur, "c"}
                                                                   : std::vector<std::string>{"c", cur}, {"s1"}));
      cur = "s1";
    }
    std::map<std::string, RValue> feeds{{"q", random_uniform(g, {B, Sq, H, D})},
                                        {"k", random_uniform(g, {B, Skv, H, D})},
                                        {"v", random_uniform(g, {B, Skv, H, Dv})}};
    if (mask == 1) {
      // Causal: key j > query i is masked. The keys no row of a block sees are left out when the
      // fill is far below the scores (-1e4, -1e30), kept when it is not (-0.5) or when a row sees
      // no key. Iteration 13: row i sees keys below 1 + 16 (i mod 4) of 80 (a block's last visible
      // key opens a block of 16 keys: one key too few would drop it), row 2 none (its weights
      // spread evenly over the fills).
      if (iter == 13) {
        Skv = 80;
        feeds["k"] = random_uniform(g, {B, Skv, H, D});
        feeds["v"] = random_uniform(g, {B, Skv, H, Dv});
        b.m.graph.inputs[1] = {"k", Type::tensor(DType::Float, Shape::of({B, Skv, H, D})), {}};
        b.m.graph.inputs[2] = {"v", Type::tensor(DType::Float, Shape::of({B, Skv, H, Dv})), {}};
      }
      Tensor m(DType::Bool, {Sq, Skv});
      for (int64_t i = 0; i < Sq; ++i)
        for (int64_t j = 0; j < Skv; ++j)
          m.data<bool>()[i * Skv + j] = iter == 13 ? i == 2 || j >= 1 + 16 * (i % 4) : j > i;
      b.init("m", m);
      // Iteration 9: a NaN in V's last key, which every row but the last ones hides: its weight is
      // 0 there, and 0 x NaN is NaN (PyTorch's and the reference's result) where a skipped key
      // would give a number.
      if (iter == 9) feeds["v"].tensor.data<float>()[feeds["v"].tensor.numel() - 1] = std::nanf("");
      b.init("fill", Tensor::scalar(iter == 5 ? -0.5f : iter == 9 ? -1e30f : -1e4f));
      b.add(test::make_node("Where", {"m", "fill", cur}, {"s2"}));
      cur = "s2";
    } else if (mask >= 2) {
      Dims md = mask == 2 ? Dims{B, 1, 1, Skv} : Dims{Sq, Skv};
      b.input("m", md);
      feeds["m"] = random_uniform(g, md, -3.0f, 0.0f);
      b.add(test::make_node("Add", {cur, "m"}, {"s2"}));
      cur = "s2";
    }
    b.add(test::make_node("Softmax", {cur}, {"p"}, {Attribute::make_int("axis", -1)}));
    b.add(test::make_node("MatMul", {"p", "tv"}, {"o"}));
    b.add(test::make_node("Transpose", {"o"}, {"out"}, {Attribute::make_ints("perm", {0, 2, 1, 3})}));
    b.output("out");
    if (scores_out) b.output("p");
    std::string what = "iter " + std::to_string(iter) + " B " + std::to_string(B) + " H " + std::to_string(H) + " Sq " +
                       std::to_string(Sq) + " Skv " + std::to_string(Skv) + " D " + std::to_string(D) + " Dv " +
                       std::to_string(Dv);
    auto want = run(b.m, false, feeds, 1);
    for (int threads : {1, 2}) {
      auto got = run(b.m, true, feeds, threads);
      expect_close_f32(want.at("out").tensor, got.at("out").tensor, what);
    }
    Graph g2 = rewritten(b.m);
    EXPECT_EQ(count_op(g2, "Attention"), scores_out ? 0 : 1) << what;
    EXPECT_EQ(count_op(g2, "Softmax"), scores_out ? 1 : 0) << what;
  }
}

// 3x3 stride-1 convolutions with 32 or more channels on maps of more than 16 2x2 tiles (9 x 9
// outputs) run as Winograd F(2x2, 3x3), from 21 x 21 as F(4x4, 3x3) (runtime/kernels/conv_winograd.h), with the
// products batched or not (by tile count): against the reference on odd and even
// sizes, every pad combination of 0 and 1, channel counts that do not fill a block, with and
// without bias, the post-op chains it takes (and one it leaves to the direct convolution), input,
// residual and output plain or channel-blocked (a 1x1 conv before and after keeps them blocked).
TEST(RuntimeFusion, WinogradMatchesReference) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "Winograd runs on AVX-512 only";
  std::mt19937 g(29);
  const Tail tails[] = {Tail::Relu, Tail::Leaky, Tail::Clip, Tail::AddRelu, Tail::AddFirst, Tail::AddClip,
                        Tail::ReluAdd, Tail::HardSwish};
  int expected = 0;
  const uint64_t before = kern::WinogradConv::runs_so_far(), before4 = kern::WinogradConv::runs_so_far(4);
  int expected4 = 0;
  for (int iter = 0; iter < 40; ++iter) {
    auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(g)); };
    const int64_t n = pick(1, 2), c = iter % 3 == 0 ? 36 : 32 * pick(1, 2), m = iter % 4 == 1 ? 40 : 16 * pick(2, 4);
    // Maps from 3 x 3 outputs (too few tiles: direct) up; at 2 threads, fewer than 64 tiles split
    // each product between the threads rather than the tiles.
    const int64_t h = pick(5, 30), w = pick(5, 30);
    const int64_t pt = pick(0, 1), pl = pick(0, 1), pb = pick(0, 1), pr = pick(0, 1);
    const Tail tail = tails[iter % 8];
    const bool blocked_in = iter % 2 == 1, blocked_out = iter % 5 < 2, bias = iter % 3 != 2;
    const Dims yd{n, m, h + pt + pb - 2, w + pl + pr - 2};
    Builder b;
    b.input("x", {n, c, h, w});
    b.init("w", random_uniform(g, {m, c, 3, 3}));
    if (bias) b.init("bias", random_uniform(g, {m}));
    std::string conv_in = "x";
    if (blocked_in) {  // a 1x1 conv in front: the 3x3 conv reads a blocked activation
      b.init("w0", random_uniform(g, {c, c, 1, 1}));
      b.add(test::make_node("Conv", {"x", "w0"}, {"x0"}));
      conv_in = "x0";
    }
    std::vector<std::string> ins{conv_in, "w"};
    if (bias) ins.push_back("bias");
    b.add(test::make_node("Conv", ins, {"c"}, {Attribute::make_ints("pads", {pt, pl, pb, pr})}));
    if (uses_residual(tail)) {
      b.input("r", yd);
      if (blocked_in) {  // the residual blocked too: a conv's output
        b.init("wr", random_uniform(g, {m, m, 1, 1}));
        b.add(test::make_node("Conv", {"r", "wr"}, {"r0"}));
      }
    }
    add_tail(b, tail);
    if (uses_residual(tail) && blocked_in)
      for (Node& node : b.m.graph.nodes)
        for (std::string& in : node.inputs)
          if (in == "r" && node.op_type == "Add") in = "r0";
    std::string out = "out";
    if (blocked_out) {  // a 1x1 conv after: the 3x3 conv writes a blocked activation
      b.init("w2", random_uniform(g, {16, m, 1, 1}));
      b.add(test::make_node("Conv", {"out", "w2"}, {"y"}));
      out = "y";
    }
    b.output(out);
    std::map<std::string, RValue> feeds{{"x", random_uniform(g, {n, c, h, w})}};
    if (uses_residual(tail)) feeds["r"] = random_uniform(g, yd);
    const std::string what = "iter " + std::to_string(iter) + " x " + dims_to_string({n, c, h, w}) + " m " +
                             std::to_string(m) + " pads " + std::to_string(pt) + std::to_string(pl) +
                             std::to_string(pb) + std::to_string(pr);
    const bool takes = tail != Tail::HardSwish && ((yd[2] + 1) / 2) * ((yd[3] + 1) / 2) > 16;
    const bool f4 = takes && ((yd[2] + 3) / 4) * ((yd[3] + 3) / 4) >= 36;
    expected += takes ? 2 : 0;
    expected4 += f4 ? 2 : 0;
    // F(4x4, 3x3) rounds to about 1e-5 of the conv's values (conv_winograd.h): besides the usual
    // 1e-4 relative, 3e-5 of sqrt(9 C), the spread of a sum of 9 C products of values in [-1, 1]
    // (a wrong transform is off by whole units).
    const double extra = f4 ? 3e-5 * std::sqrt(9.0 * static_cast<double>(c)) : 0.0;
    auto want = run(b.m, false, feeds, 1);
    for (int threads : {1, 2}) {
      auto got = run(b.m, true, feeds, threads);
      const Tensor& wt = want.at(out).tensor;
      const Tensor& gt = got.at(out).tensor;
      ASSERT_EQ(wt.dims(), gt.dims()) << what;
      for (int64_t i = 0; i < wt.numel(); ++i) {
        const float wv = wt.data<float>()[i], gv = gt.data<float>()[i];
        ASSERT_NEAR(wv, gv, 1e-4 * (1 + std::fabs(wv)) + extra) << what << " threads " << threads << " at " << i;
      }
    }
  }
  EXPECT_GT(expected, 20);
  EXPECT_GT(expected4, 6);
  EXPECT_EQ(kern::WinogradConv::runs_so_far() - before, static_cast<uint64_t>(expected));
  EXPECT_EQ(kern::WinogradConv::runs_so_far(4) - before4, static_cast<uint64_t>(expected4));
}

// Depthwise 3x3 and 5x5 convolutions between blocked neighbours (a 1x1 conv before and after, as
// in MobileNet and EfficientNet blocks) run on their own kernel (runtime/kernels/conv_depthwise.h):
// against the reference on maps from 1 x 1 up, odd and even, stride 1 and 2, end pads from 0 to
// K / 2, channel counts that do not fill a block, with and without bias, each post-op it takes;
// NaNs in the output where the reference has them (from a NaN or an infinity in the input), at 1
// and 2 threads.
TEST(RuntimeFusion, DepthwiseMatchesReference) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "the depthwise kernel runs on AVX-512 only";
  std::mt19937 g(31);
  const Tail tails[] = {Tail::Relu, Tail::Clip, Tail::Leaky, Tail::ClipAttr, Tail::Swish, Tail::HardSwish};
  int expected = 0;
  const uint64_t before = kern::DepthwiseConv::runs_so_far();
  for (int iter = 0; iter < 64; ++iter) {
    auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(g)); };
    const int64_t k = iter % 2 == 0 ? 3 : 5, p = k / 2;
    const int64_t n = pick(1, 2), c = iter % 4 == 0 ? 20 : iter % 4 == 1 ? 40 : 16 * pick(1, 9);
    const int64_t h = iter < 8 ? iter / 2 + 1 : pick(1, 40), w = iter < 8 ? 4 - iter / 2 : pick(1, 40);
    // The first maps are 1 x 4 .. 4 x 1: end pads of K / 2 so that the window fits.
    const int64_t s = pick(1, 2), pb = iter < 8 ? p : pick(0, static_cast<int>(p)), pr = iter < 8 ? p : pick(0, static_cast<int>(p));
    const Tail tail = tails[iter % 6];
    const bool bias = iter % 3 != 2, nan = iter % 7 == 3, minus_inf = iter % 7 == 5;
    if (h + p + pb < k || w + p + pr < k) continue;  // the window does not fit
    Builder b;
    b.input("x", {n, c, h, w});
    b.init("w0", random_uniform(g, {c, c, 1, 1}));
    b.add(test::make_node("Conv", {"x", "w0"}, {"x0"}));
    b.init("w", random_uniform(g, {c, 1, k, k}));
    std::vector<std::string> ins{"x0", "w"};
    if (bias) {
      b.init("bias", random_uniform(g, {c}));
      ins.push_back("bias");
    }
    b.add(test::make_node("Conv", ins, {"c"},
                          {Attribute::make_int("group", c), Attribute::make_ints("strides", {s, s}),
                           Attribute::make_ints("pads", {p, p, pb, pr}), Attribute::make_ints("kernel_shape", {k, k})}));
    add_tail(b, tail);
    b.init("w2", random_uniform(g, {16, c, 1, 1}));
    b.add(test::make_node("Conv", {"out", "w2"}, {"y"}));
    b.output("y");
    Tensor x = random_uniform(g, {n, c, h, w});
    if (nan) x.data<float>()[pick(0, static_cast<int>(x.numel()) - 1)] = std::nanf("");
    if (minus_inf) x.data<float>()[pick(0, static_cast<int>(x.numel()) - 1)] = -std::numeric_limits<float>::infinity();
    std::map<std::string, RValue> feeds{{"x", x}};
    const std::string what = "iter " + std::to_string(iter) + " x " + dims_to_string({n, c, h, w}) + " kernel " +
                             std::to_string(k) + " stride " + std::to_string(s) + " end pads " + std::to_string(pb) +
                             std::to_string(pr);
    expected += 2;
    auto want = run(b.m, false, feeds, 1);
    for (int threads : {1, 2}) {
      auto got = run(b.m, true, feeds, threads);
      expect_nan_close(want.at("y").tensor, got.at("y").tensor, what + " threads " + std::to_string(threads));
    }
  }
  EXPECT_GT(expected, 100);
  EXPECT_EQ(kern::DepthwiseConv::runs_so_far() - before, static_cast<uint64_t>(expected));
}

}  // namespace

// MatMul + bias Add (+ the erf GELU in each exported form) becomes one FusedMatMul whose result
// matches the unfused reference; a GELU chain that is not exactly GELU, or a bias that is not a
// vector of N values (a [1, N] one would turn a 1-D result 2-D), stays as it is.
namespace {

Model matmul_model(const Dims& a, int64_t n, int gelu_form, std::mt19937& g, bool row_bias = true) {
  Builder b;
  b.input("a", a);
  b.init("w", random_uniform(g, {a.back(), n}));
  b.init("bias", row_bias ? random_uniform(g, {n}) : random_uniform(g, {1, n}));
  b.init("sqrt2", Tensor::from_vector<float>({1.4142135f}, {}));
  b.init("rsqrt2", Tensor::from_vector<float>({0.70710678f}, {}));
  b.init("one", Tensor::from_vector<float>({1.0f}, {}));
  b.init("half", Tensor::from_vector<float>({0.5f}, {}));
  b.init("third", Tensor::from_vector<float>({0.33f}, {}));
  auto node = [&](const std::string& op, std::vector<std::string> in, const std::string& out) {
    Node n;
    n.op_type = op;
    n.name = out;
    n.inputs = std::move(in);
    n.outputs = {out};
    b.add(n);
  };
  node("MatMul", {"a", "w"}, "mm");
  node("Add", {"bias", "mm"}, "x");
  std::string y = "x";
  if (gelu_form > 0) {
    if (gelu_form == 1 || gelu_form == 3) node("Div", {"x", "sqrt2"}, "d");
    else node("Mul", {"rsqrt2", "x"}, "d");
    node("Erf", {"d"}, "e");
    node("Add", {"e", "one"}, "t");
    if (gelu_form == 1) {  // x * t * 0.5
      node("Mul", {"x", "t"}, "m1");
      node("Mul", {"m1", "half"}, "y");
    } else if (gelu_form == 2) {  // (0.5 * x) * t
      node("Mul", {"half", "x"}, "m1");
      node("Mul", {"t", "m1"}, "y");
    } else {  // not GELU: 0.33 instead of 0.5
      node("Mul", {"x", "t"}, "m1");
      node("Mul", {"m1", "third"}, "y");
    }
    y = "y";
  }
  b.output(y);
  return b.m;
}

}  // namespace

TEST(RuntimeFusion, MatMulBiasGeluMatchesReference) {
  std::mt19937 g(21);
  for (int form = 0; form < 4; ++form)
    for (const Dims& a : {Dims{5, 7}, Dims{2, 3, 16}, Dims{1, 33, 40}, Dims{1, 1, 75}, Dims{3, 75}}) {
      int64_t n = a.back() == 75 ? 130 : 1 + g() % 50;  // 75: few rows, N over two 64-column panels
      Model m = matmul_model(a, n, form, g);
      Graph r = rewritten(m);
      SCOPED_TRACE("form " + std::to_string(form) + " a " + dims_to_string(a));
      EXPECT_EQ(count_op(r, "FusedMatMul"), 1);
      EXPECT_EQ(count_op(r, "Erf"), form == 3 ? 1 : 0);  // the not-GELU chain stays
      EXPECT_EQ(count_op(r, "MatMul"), 0);
      std::map<std::string, RValue> feeds{{"a", random_uniform(g, a, -2.0f, 2.0f)}};
      std::string y = form == 0 ? "x" : "y";
      Tensor ref = run(m, false, feeds, 1).at(y).tensor, fast = run(m, true, feeds, 2).at(y).tensor;
      ASSERT_EQ(ref.dims(), fast.dims());
      for (int64_t i = 0; i < ref.numel(); ++i)
        EXPECT_NEAR(ref.data<float>()[i], fast.data<float>()[i], 1e-4 * std::max(1.0f, std::fabs(ref.data<float>()[i])));
    }
}

// The AVX-512 GELU that FusedMatMul applies after oneDNN's product: within 1e-6 (times |x| past 1)
// of the erf formula in double from -40 to 40, and the formula's own answers at the edges: NaN
// stays NaN, +inf stays +inf, -inf gives NaN (-inf * 0), large negative values give 0.
namespace {
T2O_AVX512 void gelu16(const float* x, float* y) {
  _mm512_storeu_ps(y, t2o::kern::gelu_erf512(_mm512_loadu_ps(x)));
}
}  // namespace

TEST(RuntimeFusion, AvxGeluFollowsTheErfFormula) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512";
  std::vector<float> xs;
  for (float v = -40.0f; v <= 40.0f; v += 0.0137f) xs.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-45f, 3.0e38f, -3.0e38f}) xs.push_back(v);
  while (xs.size() % 16) xs.push_back(0.5f);
  std::vector<float> ys(xs.size());
  for (size_t i = 0; i < xs.size(); i += 16) gelu16(&xs[i], &ys[i]);
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], want = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    EXPECT_NEAR(ys[i], want, 1e-6 * std::max(1.0, std::fabs(x))) << "x = " << x;
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  float edge[16] = {nan, inf, -inf, -20.0f, -100.0f, 20.0f, 100.0f};
  float out[16];
  gelu16(edge, out);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], inf);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_EQ(out[4], 0.0f);
  EXPECT_EQ(out[5], 20.0f);
  EXPECT_EQ(out[6], 100.0f);
}

TEST(RuntimeFusion, MatMulWithFullBiasStays) {
  std::mt19937 g(22);
  Model m = matmul_model({4, 6}, 5, 1, g, false);
  Graph r = rewritten(m);
  EXPECT_EQ(count_op(r, "FusedMatMul"), 0);
  EXPECT_EQ(count_op(r, "MatMul"), 1);
}
