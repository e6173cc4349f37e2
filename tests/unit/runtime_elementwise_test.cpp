// Elementwise and activation kernels: semantics the ONNX tests leave open, bad input, and a
// differential test of the fast broadcast paths against the reference loops on random shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/session.h"
#include "test_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

// A shape and a partner that broadcasts against it (leading dims dropped, some dims set to 1).
std::pair<Dims, Dims> random_pair(std::mt19937& g, int64_t max_dim) {
  std::uniform_int_distribution<int> rank(0, 5), coin(0, 2);
  std::uniform_int_distribution<int64_t> dim(1, max_dim);
  Dims a(static_cast<size_t>(rank(g)));
  for (auto& x : a) x = dim(g);
  Dims b = a;
  for (auto& x : b)
    if (coin(g) == 0) x = 1;
  size_t drop = a.empty() ? 0 : static_cast<size_t>(std::uniform_int_distribution<int>(0, static_cast<int>(a.size()))(g));
  b.erase(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(drop));
  if (coin(g) == 0) std::swap(a, b);
  return {a, b};
}

// Whether `s` broadcasts onto `x` without growing it (PRelu's unidirectional rule).
bool broadcasts_onto(const Dims& s, const Dims& x) {
  if (s.size() > x.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    int64_t xd = x[x.size() - s.size() + i];
    if (s[i] != 1 && s[i] != xd) return false;
  }
  return true;
}

}  // namespace

TEST(RuntimeElementwise, FastMatchesReferenceOnRandomBroadcasts) {
  std::mt19937 g(42);
  const char* ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "PRelu", "Greater"};
  for (int iter = 0; iter < 200; ++iter) {
    auto [da, db] = random_pair(g, iter % 10 == 0 ? 40 : 6);
    Tensor a = random_uniform(g, da, -3.0f, 3.0f), b = random_uniform(g, db, -3.0f, 3.0f);
    for (const char* op : ops) {
      if (std::string(op) == "PRelu" && !broadcasts_onto(db, da)) continue;
      Tensor ref = run_op(op, {a, b}, {}, kRef);
      Tensor fast = run_op(op, {a, b}, {}, kFast2);
      ASSERT_TRUE(ref.equals(fast)) << op << " " << dims_to_string(da) << " vs " << dims_to_string(db);
    }
    Tensor c(DType::Bool, db);
    for (int64_t i = 0; i < c.numel(); ++i) c.data<bool>()[i] = (g() & 1) != 0;
    Tensor ref = run_op("Where", {c, a, b}, {}, kRef);
    Tensor fast = run_op("Where", {c, a, b}, {}, kFast2);
    ASSERT_TRUE(ref.equals(fast)) << "Where " << dims_to_string(da) << " vs " << dims_to_string(db);
  }
}

TEST(RuntimeElementwise, FastMatchesReferenceOnLargeCnnShapes) {
  std::mt19937 g(7);
  Tensor x = random_uniform(g, {2, 64, 33, 35}, -3.0f, 3.0f);
  std::vector<Dims> partners = {{1, 64, 1, 1}, {64, 1, 1}, {2, 64, 33, 35}, {}, {35}, {2, 1, 33, 1}};
  for (const Dims& d : partners) {
    Tensor b = random_uniform(g, d, -3.0f, 3.0f);
    for (const char* op : {"Add", "Mul", "Sub"}) {
      Tensor ref = run_op(op, {x, b}, {}, kRef);
      Tensor fast = run_op(op, {x, b}, {}, kFast2);
      ASSERT_TRUE(ref.equals(fast)) << op << " with " << dims_to_string(d);
      Tensor swapped = run_op(op, {b, x}, {}, kFast2);
      ASSERT_TRUE(run_op(op, {b, x}, {}, kRef).equals(swapped)) << op << " swapped " << dims_to_string(d);
    }
  }
  for (const char* op : {"Relu", "Exp", "HardSwish", "LeakyRelu"})
    ASSERT_TRUE(run_op(op, {x}, {}, kRef).equals(run_op(op, {x}, {}, kFast2))) << op;
}

// The fast path evaluates exp-based activations with a polynomial exp; it must stay within a
// few float ulps of libm over the whole range, and keep NaN and the saturated tails right.
TEST(RuntimeElementwise, FastActivationsAreAccurate) {
  std::vector<float> xs;
  for (float v = -100.0f; v <= 100.0f; v += 0.01f) xs.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-6f, -1e-6f, 0.29999f, 0.30001f, 88.5f, -88.5f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN})
    xs.push_back(v);
  Tensor x = Tensor::from_vector<float>(xs, {static_cast<int64_t>(xs.size())});
  struct Case {
    const char* op;
    int64_t opset;
    std::vector<Attribute> attrs;
  };
  std::vector<Case> cases = {{"Sigmoid", 17, {}}, {"Tanh", 17, {}}, {"Elu", 17, {}}, {"Selu", 17, {}},
                             {"Celu", 17, {Attribute::make_float("alpha", 2.0f)}}, {"Mish", 18, {}},
                             {"Gelu", 20, {Attribute::make_string("approximate", "tanh")}}};
  for (const Case& c : cases) {
    auto ref = values<float>(run_op(c.op, {x}, c.attrs, RunOpts{false, 1, c.opset, ""}));
    auto fast = values<float>(run_op(c.op, {x}, c.attrs, RunOpts{true, 2, c.opset, ""}));
    for (size_t i = 0; i < xs.size(); ++i) {
      if (std::isnan(xs[i])) {
        EXPECT_TRUE(std::isnan(fast[i])) << c.op << " at NaN";
        continue;
      }
      if (ref[i] == fast[i] || std::isnan(ref[i])) continue;  // NaN here: libm's inf * 0 at -inf

      EXPECT_NEAR(fast[i], ref[i], 1e-30 + 2e-6 * std::fabs(ref[i]) + 1e-7) << c.op << " at " << xs[i];
    }
  }
}

TEST(RuntimeElementwise, IntegerDivisionAndModSignRules) {
  Tensor a = Tensor::from_vector<int32_t>({7, -7, 7, -7, 5}, {5});
  Tensor b = Tensor::from_vector<int32_t>({2, 2, -2, -2, -1}, {5});
  EXPECT_EQ(values<int32_t>(run_op("Div", {a, b})), (std::vector<int32_t>{3, -3, -3, 3, -5}));
  EXPECT_EQ(values<int32_t>(run_op("Mod", {a, b})), (std::vector<int32_t>{1, 1, -1, -1, 0}));
  EXPECT_EQ(values<int32_t>(run_op("Mod", {a, b}, {Attribute::make_int("fmod", 1)})),
            (std::vector<int32_t>{1, -1, 1, -1, 0}));
  Tensor mn = Tensor::from_vector<int64_t>({INT64_MIN}, {1});
  Tensor m1 = Tensor::from_vector<int64_t>({-1}, {1});
  EXPECT_EQ(values<int64_t>(run_op("Div", {mn, m1}))[0], INT64_MIN);  // wraps, does not trap
  Tensor zero = Tensor::from_vector<int32_t>({1, 0, 1, 1, 1}, {5});
  EXPECT_THROW(run_op("Div", {a, zero}), Error);
  EXPECT_THROW(run_op("Mod", {a, zero}), Error);
}

TEST(RuntimeElementwise, IntegerOverflowWraps) {
  Tensor a = Tensor::from_vector<int32_t>({INT32_MAX, INT32_MIN}, {2});
  Tensor one = Tensor::from_vector<int32_t>({1, 1}, {2});
  EXPECT_EQ(values<int32_t>(run_op("Add", {a, one})), (std::vector<int32_t>{INT32_MIN, INT32_MIN + 1}));
  EXPECT_EQ(values<int32_t>(run_op("Neg", {a})), (std::vector<int32_t>{-INT32_MAX, INT32_MIN}));
  Tensor u = Tensor::from_vector<uint16_t>({65535}, {1});
  EXPECT_EQ(values<uint16_t>(run_op("Mul", {u, u}))[0], 1);
}

TEST(RuntimeElementwise, PowMixedTypes) {
  Tensor bi = Tensor::from_vector<int64_t>({2, 3, -2, 2}, {4});
  Tensor ei = Tensor::from_vector<int64_t>({62, 3, 3, -1}, {4});
  EXPECT_EQ(values<int64_t>(run_op("Pow", {bi, ei})), (std::vector<int64_t>{int64_t{1} << 62, 27, -8, 0}));
  Tensor bf = Tensor::from_vector<float>({2.0f, 4.0f}, {2});
  Tensor ef = Tensor::from_vector<int32_t>({3, -1}, {2});
  EXPECT_EQ(values<float>(run_op("Pow", {bf, ef})), (std::vector<float>{8.0f, 0.25f}));
  Tensor bi32 = Tensor::from_vector<int32_t>({2, 9}, {2});
  Tensor eh = Tensor::from_vector<float>({3.0f, 0.5f}, {2});
  EXPECT_EQ(values<int32_t>(run_op("Pow", {bi32, eh})), (std::vector<int32_t>{8, 3}));
}

TEST(RuntimeElementwise, RoundHalfToEvenAndSign) {
  Tensor x = Tensor::from_vector<float>({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f}, {6});
  EXPECT_EQ(values<float>(run_op("Round", {x})), (std::vector<float>{0, 2, 2, -0.0f, -2, 2}));
  Tensor s = Tensor::from_vector<int8_t>({-5, 0, 7}, {3});
  EXPECT_EQ(values<int8_t>(run_op("Sign", {s})), (std::vector<int8_t>{-1, 0, 1}));
}

TEST(RuntimeElementwise, BitShiftWidths) {
  Tensor a = Tensor::from_vector<uint8_t>({1, 255, 16}, {3});
  Tensor b = Tensor::from_vector<uint8_t>({7, 1, 9}, {3});
  EXPECT_EQ(values<uint8_t>(run_op("BitShift", {a, b}, {Attribute::make_string("direction", "LEFT")})),
            (std::vector<uint8_t>{128, 254, 0}));
  EXPECT_EQ(values<uint8_t>(run_op("BitShift", {a, b}, {Attribute::make_string("direction", "RIGHT")})),
            (std::vector<uint8_t>{0, 127, 0}));
}

TEST(RuntimeElementwise, CastStringsLikeNumpy) {
  Tensor f = Tensor::from_vector<float>({1.5f, 0.1f, 1e-5f, 100000000.0f, 1e16f, -2.0f, NAN, -INFINITY}, {8});
  Tensor s = run_op("Cast", {f}, {Attribute::make_int("to", 8)});
  std::vector<std::string> want = {"1.5", "0.1", "1e-05", "100000000.0", "1e+16", "-2.0", "nan", "-inf"};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(s.strings()[i], want[i]);
  Tensor in = Tensor::from_strings({"1.5", "NaN", "-INF", "+INF", "7"}, {5});
  auto back = values<float>(run_op("Cast", {in}, {Attribute::make_int("to", 1)}));
  EXPECT_EQ(back[0], 1.5f);
  EXPECT_TRUE(std::isnan(back[1]));
  EXPECT_EQ(back[2], -INFINITY);
  EXPECT_EQ(back[3], INFINITY);
  EXPECT_EQ(back[4], 7.0f);
  Tensor big = Tensor::from_strings({"9007199254740993"}, {1});
  EXPECT_EQ(values<int64_t>(run_op("Cast", {big}, {Attribute::make_int("to", 7)}))[0], 9007199254740993LL);
  EXPECT_THROW(run_op("Cast", {Tensor::from_strings({"abc"}, {1})}, {Attribute::make_int("to", 1)}), Error);
  Tensor h = Tensor::from_vector<float>({0.1f, 300.0f}, {2});
  Tensor hh = run_op("Cast", {h}, {Attribute::make_int("to", 10)});
  Tensor hs = run_op("Cast", {hh}, {Attribute::make_int("to", 8)});
  EXPECT_EQ(hs.strings()[0], "0.1");
  EXPECT_EQ(hs.strings()[1], "300.0");
}

TEST(RuntimeElementwise, EqualStrings) {
  Tensor a = Tensor::from_strings({"a", "b", "c"}, {3});
  Tensor b = Tensor::from_strings({"b"}, {1});
  EXPECT_EQ(values<bool>(run_op("Equal", {a, b}, {}, at_opset(19))), (std::vector<bool>{false, true, false}));
}

TEST(RuntimeElementwise, CastNumericSaturatesAndBools) {
  Tensor f = Tensor::from_vector<float>({300.0f, -1.0f, NAN, 2.7f}, {4});
  EXPECT_EQ(values<uint8_t>(run_op("Cast", {f}, {Attribute::make_int("to", 2)})), (std::vector<uint8_t>{255, 0, 0, 2}));
  EXPECT_EQ(values<bool>(run_op("Cast", {f}, {Attribute::make_int("to", 9)})), (std::vector<bool>{true, true, true, true}));
}

TEST(RuntimeElementwise, ClipBoundsAcrossOpsets) {
  Tensor x = Tensor::from_vector<float>({-2, 0.5f, 3}, {3});
  EXPECT_EQ(values<float>(run_op("Clip", {x}, {Attribute::make_float("min", -1), Attribute::make_float("max", 1)},
                                 at_opset(9))),
            (std::vector<float>{-1, 0.5f, 1}));
  Tensor lo = Tensor::scalar<float>(0.0f);
  EXPECT_EQ(values<float>(run_op("Clip", {x, lo})), (std::vector<float>{0, 0.5f, 3}));
  Tensor xi = Tensor::from_vector<int64_t>({INT64_MAX, -5}, {2});
  Tensor hi = Tensor::scalar<int64_t>(INT64_MAX - 1);
  Tensor lo64 = Tensor::scalar<int64_t>(-4);
  EXPECT_EQ(values<int64_t>(run_op("Clip", {xi, lo64, hi})), (std::vector<int64_t>{INT64_MAX - 1, -4}));
}

TEST(RuntimeElementwise, VariadicAndActivations) {
  Tensor a = Tensor::from_vector<float>({1, 5}, {2});
  Tensor b = Tensor::from_vector<float>({3}, {1});
  Tensor c = Tensor::from_vector<float>({2, 2, 2, 2}, {2, 2});
  EXPECT_EQ(values<float>(run_op("Sum", {a, b, c})), (std::vector<float>{6, 10, 6, 10}));
  EXPECT_EQ(values<float>(run_op("Mean", {a, b})), (std::vector<float>{2, 4}));
  EXPECT_EQ(values<float>(run_op("Max", {a})), (std::vector<float>{1, 5}));
  Tensor x = Tensor::from_vector<float>({-1, 0, 1}, {3});
  auto gelu = values<float>(run_op("Gelu", {x}, {}, at_opset(20)));
  EXPECT_NEAR(gelu[0], -0.158655f, 1e-5);
  EXPECT_NEAR(gelu[2], 0.841345f, 1e-5);
  auto mish = values<float>(run_op("Mish", {x}, {}, at_opset(18)));
  EXPECT_NEAR(mish[2], 0.865098f, 1e-5);
  auto sig = values<float>(run_op("Sigmoid", {Tensor::from_vector<float>({-100, 100}, {2})}, {}, kRef));
  EXPECT_EQ(sig[0], std::exp(-100.0f) / (1 + std::exp(-100.0f)));
  EXPECT_EQ(sig[1], 1.0f);
}

TEST(RuntimeElementwise, EmptyTensors) {
  Tensor e(DType::Float, {0, 3});
  Tensor b = Tensor::from_vector<float>({1, 2, 3}, {1, 3});
  for (RunOpts o : {kRef, kFast2}) {
    EXPECT_EQ(run_op("Add", {e, b}, {}, o).dims(), (Dims{0, 3}));
    EXPECT_EQ(run_op("Sigmoid", {e}, {}, o).dims(), (Dims{0, 3}));
    Tensor c(DType::Bool, {0, 1});
    EXPECT_EQ(run_op("Where", {c, e, b}, {}, o).dims(), (Dims{0, 3}));
    EXPECT_EQ(run_op("Sum", {e, b, e}, {}, o).dims(), (Dims{0, 3}));
  }
}

TEST(RuntimeElementwise, LegacyBroadcastAxis) {
  Tensor a(DType::Float, {2, 3, 4});
  Tensor b = Tensor::from_vector<float>({10, 20, 30}, {3});
  Tensor y = run_op("Add", {a, b}, {Attribute::make_int("broadcast", 1), Attribute::make_int("axis", 1)}, at_opset(6));
  EXPECT_EQ(y.dims(), (Dims{2, 3, 4}));
  EXPECT_EQ(y.data<float>()[4], 20.0f);
  EXPECT_THROW(run_op("Add", {a, b}, {Attribute::make_int("broadcast", 1), Attribute::make_int("axis", 2)}, at_opset(6)),
               Error);
}

TEST(RuntimeElementwise, BadInputIsAnError) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor b = Tensor::from_vector<float>({1, 2}, {2});
  EXPECT_THROW(run_op("Add", {a, b}), Error);
  EXPECT_THROW(run_op("Add", {a, Tensor::from_vector<int32_t>({1, 2, 3}, {3})}), Error);
  EXPECT_THROW(run_op("Sqrt", {Tensor::from_vector<int32_t>({4}, {1})}), Error);
  EXPECT_THROW(run_op("And", {a, a}), Error);
  EXPECT_THROW(run_op("Where", {a, a, a}), Error);
  EXPECT_THROW(run_op("PRelu", {b, a}), Error);
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  EXPECT_THROW(run_op("Clip", {x, Tensor::from_vector<float>({0, 1}, {2})}), Error);
}
