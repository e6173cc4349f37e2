// Conv family: oneDNN fast path against the reference loops on random shapes (groups, depthwise,
// strides, dilations, pads, auto_pad, 1d/3d, constant and run-time weights, shape changes between
// runs), plus bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/session.h"
#include "test_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

// One node; inputs listed in `consts` become initializers, the others symbolic-shaped graph inputs.
Session make_session(const std::string& op, const std::vector<Tensor>& ins, const std::vector<Attribute>& attrs,
                     const std::set<size_t>& consts, bool fast, int threads = 1, int64_t opset = 17) {
  Model m;
  m.opset_import = {{"", opset}};
  Node n;
  n.op_type = op;
  n.name = "n";
  n.attributes = attrs;
  for (size_t i = 0; i < ins.size(); ++i) {
    std::string name = "x" + std::to_string(i);
    n.inputs.push_back(name);
    if (consts.count(i)) {
      m.graph.initializers.push_back({name, ins[i], {}});
      continue;
    }
    Shape s;
    for (size_t d = 0; d < ins[i].dims().size(); ++d) s.dims.push_back(Dim::named(name + "_" + std::to_string(d)));
    m.graph.inputs.push_back({name, Type::tensor(ins[i].dtype(), s), {}});
  }
  n.outputs = {"y"};
  m.graph.nodes.push_back(n);
  m.graph.outputs.push_back({"y", Type::tensor(DType::Undefined), {}});
  SessionOptions so;
  so.fast_paths = fast;
  so.threads = threads;
  return Session(std::move(m), so);
}

Tensor run(Session& s, const std::vector<Tensor>& ins, const std::set<size_t>& consts) {
  std::map<std::string, RValue> feeds;
  for (size_t i = 0; i < ins.size(); ++i)
    if (!consts.count(i)) feeds["x" + std::to_string(i)] = ins[i];
  return s.run(feeds).at("y").tensor;
}

struct Case {
  std::vector<Tensor> ins;
  std::vector<Attribute> attrs;
  std::string what;
  Dims x2;  // a second input shape to run the same session with
};

// A random Conv or ConvTranspose configuration.
Case random_case(std::mt19937& g, bool transpose) {
  auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(g)); };
  int nsp = static_cast<int>(pick(1, 3));
  int64_t group = pick(0, 3) == 0 ? 1 : pick(1, 3);
  bool depthwise = !transpose && pick(0, 3) == 0;
  int64_t cg = depthwise ? 1 : pick(1, 4), mg = pick(1, 4);
  if (depthwise) group = pick(2, 6);
  int64_t c = cg * group, m = mg * group;
  Dims k, s, d, pads, in, op;
  for (int i = 0; i < nsp; ++i) {
    k.push_back(pick(1, nsp == 3 ? 3 : 5));
    s.push_back(pick(1, 3));
    d.push_back(pick(1, 2));
  }
  // Transposed convs keep pads below the kernel size so the output is never empty.
  for (int i = 0; i < 2 * nsp; ++i) pads.push_back(pick(0, transpose ? static_cast<int>(k[static_cast<size_t>(i % nsp)] - 1) : 2));
  for (int i = 0; i < nsp; ++i) {
    int64_t ext = (k[static_cast<size_t>(i)] - 1) * d[static_cast<size_t>(i)] + 1;
    in.push_back(ext + pick(0, nsp == 3 ? 4 : 9));
    op.push_back(transpose ? pick(0, static_cast<int>(std::min(s[static_cast<size_t>(i)], d[static_cast<size_t>(i)]) - 1)) : 0);
  }
  Case cs;
  Dims xd{pick(1, 2), c};
  xd.insert(xd.end(), in.begin(), in.end());
  Dims wd = transpose ? Dims{c, mg} : Dims{m, cg};
  wd.insert(wd.end(), k.begin(), k.end());
  cs.ins = {random_uniform(g, xd), random_uniform(g, wd)};
  if (pick(0, 2) > 0) cs.ins.push_back(random_uniform(g, {m}));
  cs.attrs = {Attribute::make_ints("strides", s), Attribute::make_ints("dilations", d),
              Attribute::make_int("group", group)};
  int pad_kind = static_cast<int>(pick(0, 3));
  std::string ap = "pads";
  if (pad_kind == 0 || transpose) cs.attrs.push_back(Attribute::make_ints("pads", pads));
  else if (pad_kind == 1) ap = "SAME_UPPER", cs.attrs.push_back(Attribute::make_string("auto_pad", ap));
  else if (pad_kind == 2) ap = "SAME_LOWER", cs.attrs.push_back(Attribute::make_string("auto_pad", ap));
  else ap = "VALID", cs.attrs.push_back(Attribute::make_string("auto_pad", ap));
  if (transpose) cs.attrs.push_back(Attribute::make_ints("output_padding", op));
  cs.x2 = xd;
  cs.x2[0] += 1;
  for (size_t i = 2; i < cs.x2.size(); ++i) cs.x2[i] += pick(0, 3);
  cs.what = std::string(transpose ? "ConvTranspose" : "Conv") + " x=" + dims_to_string(xd) + " w=" + dims_to_string(wd) +
            " group=" + std::to_string(group) + " strides=" + dims_to_string(s) + " dil=" + dims_to_string(d) + " " + ap +
            (ap == "pads" ? "=" + dims_to_string(pads) : "") + (transpose ? " op=" + dims_to_string(op) : "") +
            (cs.ins.size() > 2 ? " bias" : "");
  return cs;
}

void differential(bool transpose, int cases) {
  std::mt19937 g(transpose ? 7 : 3);
  const std::string op = transpose ? "ConvTranspose" : "Conv";
  for (int t = 0; t < cases; ++t) {
    Case cs = random_case(g, transpose);
    std::set<size_t> consts;
    if (t % 2 == 0) consts = {1, 2};  // prepacked initializer weights
    std::set<size_t> used;
    for (size_t i : consts)
      if (i < cs.ins.size()) used.insert(i);
    Session ref = make_session(op, cs.ins, cs.attrs, used, false);
    Session fast = make_session(op, cs.ins, cs.attrs, used, true, 2);
    std::string what = cs.what + (used.empty() ? "" : " const-w");
    expect_close_f32(run(ref, cs.ins, used), run(fast, cs.ins, used), what);
    // A new input shape on the same sessions, then the first shape again (cached primitive).
    std::vector<Tensor> ins2 = cs.ins;
    ins2[0] = random_uniform(g, cs.x2);
    expect_close_f32(run(ref, ins2, used), run(fast, ins2, used), what + " second shape " + dims_to_string(cs.x2));
    expect_close_f32(run(ref, cs.ins, used), run(fast, cs.ins, used), what + " first shape again");
  }
}

TEST(RuntimeConv, DnnlMatchesReference) { differential(false, 120); }
TEST(RuntimeConv, DnnlTransposeMatchesReference) { differential(true, 80); }

TEST(RuntimeConv, KnownValues) {
  // 1x1x3x3 input, 2x2 kernel of ones, pads 1 on the end only.
  std::vector<float> xv{1, 2, 3, 4, 5, 6, 7, 8, 9};
  Tensor x = Tensor::from_vector(xv, {1, 1, 3, 3});
  Tensor w = Tensor::from_vector<float>({1, 1, 1, 1}, {1, 1, 2, 2});
  for (bool fast : {false, true}) {
    std::vector<Attribute> attrs{Attribute::make_ints("pads", {0, 0, 1, 1})};
    Session s = make_session("Conv", {x, w}, attrs, {}, fast);
    Tensor y = run(s, {x, w}, {});
    ASSERT_EQ(y.dims(), (Dims{1, 1, 3, 3}));
    std::vector<float> want{12, 16, 9, 24, 28, 15, 15, 17, 9};
    for (int i = 0; i < 9; ++i) EXPECT_FLOAT_EQ(y.data<float>()[i], want[static_cast<size_t>(i)]) << fast;
  }
}

TEST(RuntimeConv, DoubleAndHalf) {
  std::mt19937 g(11);
  Tensor x = random_uniform(g, {1, 2, 5, 5}), w = random_uniform(g, {3, 2, 3, 3});
  Session s = make_session("Conv", {x, w}, {}, {}, false);
  Tensor want = run(s, {x, w}, {});
  for (DType dt : {DType::Double, DType::Float16}) {
    auto cast = [dt](const Tensor& t) {
      Tensor r(dt, t.dims());
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (dt == DType::Double) r.data<double>()[i] = t.data<float>()[i];
        else r.data<Half>()[i] = Half(t.data<float>()[i]);
      }
      return r;
    };
    std::vector<Tensor> ins{cast(x), cast(w)};
    Session sd = make_session("Conv", ins, {}, {}, true);
    Tensor y = run(sd, ins, {});
    ASSERT_EQ(y.dtype(), dt);
    for (int64_t i = 0; i < y.numel(); ++i) EXPECT_NEAR(y.as_double(i), want.data<float>()[i], 2e-2);
  }
}

TEST(RuntimeConv, BadInput) {
  std::mt19937 g(5);
  Tensor x = random_uniform(g, {1, 2, 5, 5}), w = random_uniform(g, {3, 2, 3, 3});
  for (bool fast : {false, true}) {
    Session s = make_session("Conv", {x, w}, {}, {}, fast);
    EXPECT_THROW(run(s, {random_uniform(g, {1, 2, 5}), w}, {}), Error);            // rank mismatch
    EXPECT_THROW(run(s, {random_uniform(g, {1, 4, 5, 5}), w}, {}), Error);         // channel mismatch
    EXPECT_THROW(run(s, {random_uniform(g, {1, 2, 2, 2}), w}, {}), Error);         // kernel larger than input
    Session sb = make_session("Conv", {x, w, random_uniform(g, {3})}, {}, {}, fast);
    EXPECT_THROW(run(sb, {x, w, random_uniform(g, {4})}, {}), Error);               // bias size
    Session st = make_session("ConvTranspose", {x, random_uniform(g, {2, 3, 3, 3})}, {}, {}, fast);
    EXPECT_THROW(run(st, {x, random_uniform(g, {3, 3, 3, 3})}, {}), Error);
  }
  Tensor xi(DType::UInt8, {1, 1, 3, 3}), wi(DType::Float, {1, 1, 2, 2});
  Session si = make_session("ConvInteger", {xi, wi}, {}, {}, true);
  EXPECT_THROW(run(si, {xi, wi}, {}), Error);  // float weight for ConvInteger
}

TEST(RuntimeConv, ConvIntegerPerChannelZeroPoint) {
  Tensor x = Tensor::from_vector<uint8_t>({2, 3, 4, 5}, {1, 1, 2, 2});
  Tensor w = Tensor::from_vector<uint8_t>({1, 2}, {2, 1, 1, 1});
  Tensor xz = Tensor::scalar<uint8_t>(1);
  Tensor wz = Tensor::from_vector<uint8_t>({0, 1}, {2});
  Session s = make_session("ConvInteger", {x, w, xz, wz}, {}, {}, true);
  Tensor y = run(s, {x, w, xz, wz}, {});
  ASSERT_EQ(y.dtype(), DType::Int32);
  std::vector<int32_t> want{1, 2, 3, 4, 1, 2, 3, 4};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y.data<int32_t>()[i], want[static_cast<size_t>(i)]);
}

}  // namespace


namespace {

// Float weights in +-1/sqrt(fan-in) (outputs of the input's scale), whose storage reports when it is freed.
Tensor watched_weights(std::mt19937& rng, const Dims& d, bool* freed) {
  const float r = 1.0f / std::sqrt(static_cast<float>(d[1] * d[2] * d[3]));
  return test::watched(test::random_uniform(rng, d, -r, r), freed);
}

}  // namespace

// Conv weights that oneDNN holds packed are not kept a second time as given: the session lets go
// of them, runs on the packed copies at other map sizes (new layouts are packed from a rebuilt
// copy), and model() gives them back exactly. A 3x3 conv that may go Winograd keeps its own.
TEST(RuntimeConv, PackedWeightsReplaceTheGivenOnes) {
  std::mt19937 rng(17);
  bool freed1 = false, freed2 = false, freed3 = false;
  // (The session lets go of weights of 16 KB or more.)
  Tensor w1 = watched_weights(rng, {512, 64, 1, 1}, &freed1), w2 = watched_weights(rng, {512, 1, 3, 3}, &freed2),
         w3 = watched_weights(rng, {32, 512, 3, 3}, &freed3);
  std::map<std::string, Tensor> given{{"w1", w1.clone()}, {"w2", w2.clone()}, {"w3", w3.clone()}};
  Model m;
  m.opset_import = {{"", 17}};
  m.graph.inputs.push_back({"x", Type::tensor(DType::Float), ""});
  m.graph.initializers = {{"w1", w1, ""}, {"w2", w2, ""}, {"w3", w3, ""}};
  auto pads = Attribute::make_ints("pads", {1, 1, 1, 1});
  m.graph.nodes.push_back(test::make_node("Conv", {"x", "w1"}, {"a"}));
  m.graph.nodes.push_back(test::make_node("Relu", {"a"}, {"r"}));
  m.graph.nodes.push_back(test::make_node("Conv", {"r", "w2"}, {"d"}, {Attribute::make_int("group", 512), pads}));
  m.graph.nodes.push_back(test::make_node("Conv", {"d", "w3"}, {"y"}, {pads}));
  m.graph.outputs.push_back({"y", Type::tensor(DType::Undefined), ""});
  Model ref_model = m;
  for (auto& init : ref_model.graph.initializers) init.tensor = init.tensor.clone();
  SessionOptions ro;
  ro.fast_paths = false;
  Session ref(ref_model, ro);
  w1 = w2 = w3 = Tensor();
  SessionOptions fo;
  fo.threads = 2;
  Session fast(std::move(m), fo);
  EXPECT_TRUE(freed1);
  EXPECT_TRUE(freed2);
  EXPECT_EQ(freed3, !__builtin_cpu_supports("avx512f"));  // kept for the Winograd transform
  for (Dims xd : {Dims{1, 64, 9, 9}, Dims{2, 64, 5, 7}, Dims{1, 64, 16, 16}}) {
    Tensor x = test::random_uniform(rng, xd);
    test::expect_close_f32(ref.run({{"x", x}}).at("y").tensor, fast.run({{"x", x}}).at("y").tensor,
                           dims_to_string(xd));
  }
  Tensor x = test::random_uniform(rng, {1, 64, 9, 9});
  Tensor want = ref.run({{"x", x}}).at("y").tensor;
  auto all = fast.run_all({{"x", x}});
  test::expect_close_f32(want, all.at("y").tensor, "run_all");
  for (const Initializer& init : fast.model().graph.initializers)
    if (given.count(init.name)) {
      EXPECT_TRUE(init.tensor.equals(given.at(init.name))) << init.name;
    }
  test::expect_close_f32(want, fast.run({{"x", x}}).at("y").tensor, "after model()");
}
