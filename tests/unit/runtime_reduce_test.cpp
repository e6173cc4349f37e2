// Reductions, softmax family, normalization, losses and quantization: known values, bad input,
// and the vectorized fast paths against the reference kernels on random shapes.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <cstdio>
#include <random>

#include "runtime/session.h"
#include "test_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

// This file's comparisons also assert matching dtypes (its differential() calls pass check_dtype).
void expect_close(const Tensor& want, const Tensor& got, double tol = 1e-4) { test::expect_close(want, got, tol, true); }

TEST(RuntimeReduce, KnownValues) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  std::vector<In> ins{{"x", x}};
  auto red = [&](const std::string& op, std::vector<int64_t> axes, int keep) {
    return run(one_node(op, ins, {Attribute::make_ints("axes", axes), Attribute::make_int("keepdims", keep)}, 1, 13),
               ins, true)[0];
  };
  expect_close(Tensor::from_vector<float>({6, 15}, {2, 1}), red("ReduceSum", {1}, 1));
  expect_close(Tensor::from_vector<float>({2.5f, 3.5f, 4.5f}, {3}), red("ReduceMean", {0}, 0));
  expect_close(Tensor::from_vector<float>({720}, {1, 1}), red("ReduceProd", {}, 1));
  expect_close(Tensor::from_vector<float>({3, 6}, {2}), red("ReduceMax", {-1}, 0));
  expect_close(Tensor::from_vector<float>({91}, {}), red("ReduceSumSquare", {0, 1}, 0));
  // ReduceSum-13: axes as an input; empty axes with noop_with_empty_axes returns the input.
  std::vector<In> ai{{"x", x}, {"axes", Tensor::from_vector<int64_t>({}, {0})}};
  auto y = run(one_node("ReduceSum", ai, {Attribute::make_int("noop_with_empty_axes", 1)}), ai, true)[0];
  expect_close(x, y);
  auto all = run(one_node("ReduceSum", ai, {Attribute::make_int("keepdims", 0)}), ai, true)[0];
  expect_close(Tensor::from_vector<float>({21}, {}), all);
  Tensor xi = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  std::vector<In> ii{{"x", xi}};
  auto yi = run(one_node("ReduceMin", ii, {Attribute::make_ints("axes", {1})}), ii, true)[0];
  EXPECT_TRUE(yi.equals(Tensor::from_vector<int32_t>({1, 4}, {2, 1})));
}

TEST(RuntimeReduce, BadAxesThrow) {
  std::vector<In> ins{{"x", Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2})}};
  EXPECT_THROW(run(one_node("ReduceMean", ins, {Attribute::make_ints("axes", {2})}), ins, true), Error);
  EXPECT_THROW(run(one_node("ReduceMean", ins, {Attribute::make_ints("axes", {1, -1})}), ins, true), Error);
  EXPECT_THROW(run(one_node("Softmax", ins, {Attribute::make_int("axis", 3)}), ins, true), Error);
  EXPECT_THROW(run(one_node("LayerNormalization", {{"x", ins[0].value}, {"s", Tensor::from_vector<float>({1, 1, 1}, {3})}}),
                   {{"x", ins[0].value}, {"s", Tensor::from_vector<float>({1, 1, 1}, {3})}}, true),
               Error);
}

TEST(RuntimeReduce, ReduceDifferentialRandomShapes) {
  std::mt19937 rng(3);
  const char* ops[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL1", "ReduceL2"};
  for (int it = 0; it < 42; ++it) {
    int rank = 1 + it % 4;
    Dims d = random_dims(rng, rank);
    std::vector<int64_t> axes;
    int first = std::uniform_int_distribution<int>(0, rank - 1)(rng);
    for (int a = first; a < rank; ++a) axes.push_back(a);
    if (it % 7 == 6) axes = {0};  // a leading block: (1, len, inner)
    if (it % 5 == 4 && rank >= 3) axes = {1};  // a middle block
    if (it % 11 == 10 && rank >= 3) axes = {0, 2};  // not one block: reference on both sides
    std::vector<In> ins{{"x", random_normal(rng, d)}};
    differential(one_node(ops[it % 7], ins, {Attribute::make_ints("axes", axes)}, 1, 13), ins, true);
  }
}

TEST(RuntimeReduce, SoftmaxFamily) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 1000, 1000, 1000}, {2, 3});
  std::vector<In> ins{{"x", x}};
  for (bool fast : {false, true}) {
    auto y = run(one_node("Softmax", ins), ins, fast)[0];
    float e1 = std::exp(-2.0f), e2 = std::exp(-1.0f), s = e1 + e2 + 1;
    expect_close(Tensor::from_vector<float>({e1 / s, e2 / s, 1 / s, 1 / 3.f, 1 / 3.f, 1 / 3.f}, {2, 3}), y);
    auto h = run(one_node("Hardmax", ins), ins, fast)[0];
    expect_close(Tensor::from_vector<float>({0, 0, 1, 1, 0, 0}, {2, 3}), h);
  }
  // Opset 11 coerces to 2-D at axis: axis 0 normalizes over everything.
  auto y11 = run(one_node("Softmax", ins, {Attribute::make_int("axis", 0)}, 1, 11), ins, true)[0];
  double sum = 0;
  for (int i = 0; i < 6; ++i) sum += y11.as_double(i);
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

// Masked scores (-inf, -1e30) and scores far below the row's max give exact zeros, never
// subnormal probabilities (which make a following matmul many times slower), on rows long
// enough for the vector loops and along a strided axis.
TEST(RuntimeReduce, SoftmaxMaskedScoresAreExactZeros) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> row;
  for (int j = 0; j < 40; ++j) row.push_back(j % 4 == 0 ? -inf : j % 4 == 1 ? -1e30f : -0.5f * j * j / 8);
  row[2] = 3.0f;
  for (int64_t axis : {1, 0}) {
    Tensor x = Tensor::from_vector<float>(row, axis == 1 ? Dims{1, 40} : Dims{40, 1});
    std::vector<In> ins{{"x", x}};
    auto ref = run(one_node("Softmax", ins, {Attribute::make_int("axis", axis)}), ins, false)[0];
    auto y = run(one_node("Softmax", ins, {Attribute::make_int("axis", axis)}), ins, true)[0];
    double sum = 0;
    for (int j = 0; j < 40; ++j) {
      float v = y.data<float>()[j];
      sum += v;
      EXPECT_TRUE(v == 0.0f || v >= std::numeric_limits<float>::min()) << "subnormal at " << j << ": " << v;
      if (j % 4 < 2) EXPECT_EQ(v, 0.0f) << "masked score at " << j;
      EXPECT_NEAR(v, ref.data<float>()[j], 1e-6) << "at " << j;
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
}

// The row paths (16-wide with a masked tail where the CPU has AVX-512) against the reference on
// every row length up to 40 and a long one, with rows holding -inf masks, +inf, NaN, nothing but
// -inf, and values spread wide: same NaNs, same exact zeros, values within 1e-6 of the row's sum.
TEST(RuntimeReduce, SoftmaxRowsOfEveryLengthAndOddValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(21);
  std::normal_distribution<float> nd(0.0f, 30.0f);
  for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 40, 1000}) {
    const int64_t rows = 6;
    std::vector<float> v(static_cast<size_t>(rows * n));
    for (auto& x : v) x = nd(rng);
    for (int64_t j = 0; j < n; ++j) {
      if (j % 3 == 0) v[static_cast<size_t>(n + j)] = -inf;  // row 1: masked scores
      v[static_cast<size_t>(4 * n + j)] = -inf;                 // row 4: nothing but -inf
    }
    v[static_cast<size_t>(2 * n + n / 2)] = nan;  // row 2
    v[static_cast<size_t>(3 * n + n - 1)] = inf;  // row 3
    std::vector<In> ins{{"x", Tensor::from_vector<float>(v, {rows, n})}};
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      auto ref = run(one_node(op, ins), ins, false)[0];
      for (int threads : {1, 2}) {
        auto y = run(one_node(op, ins), ins, true, threads)[0];
        for (int64_t i = 0; i < rows * n; ++i) {
          float w = ref.data<float>()[i], g = y.data<float>()[i];
          if (std::isnan(w) || std::isinf(w)) {
            EXPECT_TRUE(std::isnan(w) ? std::isnan(g) : g == w) << op << " n=" << n << " at " << i << ": " << w << " vs " << g;
            continue;
          }
          if (w == 0.0f) EXPECT_EQ(g, 0.0f) << op << " n=" << n << " at " << i;
          EXPECT_NEAR(g, w, 1e-6 * std::max(1.0f, std::fabs(w))) << op << " n=" << n << " at " << i;
        }
      }
    }
  }
}

TEST(RuntimeReduce, SoftmaxDifferentialRandomShapes) {
  std::mt19937 rng(5);
  for (int it = 0; it < 24; ++it) {
    int rank = 1 + it % 4;
    Dims d = random_dims(rng, rank);
    if (it % 3 == 0) d.back() = 37 + it;  // longer rows exercise the 8-wide loops
    std::vector<In> ins{{"x", random_normal(rng, d, it % 2 ? 20.0f : 1.0f)}};
    int64_t axis = it % 3 == 0 ? 0 : (it % 3 == 1 || rank < 2 ? -1 : 1);
    differential(one_node(it % 2 ? "LogSoftmax" : "Softmax", ins, {Attribute::make_int("axis", axis)}, 1,
                          it % 4 == 0 ? 11 : 13),
                 ins, true);
  }
}

TEST(RuntimeReduce, LayerNormDifferentialRandomShapes) {
  std::mt19937 rng(9);
  for (int it = 0; it < 16; ++it) {
    int rank = 2 + it % 3;
    Dims d = random_dims(rng, rank);
    if (it % 2) d.back() = 20 + it;
    int64_t axis = it % 4 == 0 ? 1 : -1;
    Dims row(d.begin() + (axis < 0 ? rank - 1 : 1), d.end());
    std::vector<In> ins{{"x", random_normal(rng, d)}, {"s", random_normal(rng, row), true}};
    if (it % 3) ins.push_back({"b", random_normal(rng, row), true});
    differential(one_node("LayerNormalization", ins, {Attribute::make_int("axis", axis)}, 3), ins, true);
  }
}

TEST(RuntimeReduce, BatchNormFastPathMatchesReference) {
  std::mt19937 rng(13);
  for (int it = 0; it < 8; ++it) {
    Dims d = random_dims(rng, 2 + it % 3);
    int64_t C = d[1];
    Tensor var = random_normal(rng, {C});
    for (int64_t c = 0; c < C; ++c) var.data<float>()[c] = std::fabs(var.data<float>()[c]) + 0.1f;
    bool k = it % 2 == 0;  // constant parameters (folded at build) or run-time inputs
    std::vector<In> ins{{"x", random_normal(rng, d)}, {"s", random_normal(rng, {C}), k}, {"b", random_normal(rng, {C}), k},
                        {"m", random_normal(rng, {C}), k}, {"v", var, k}};
    differential(one_node("BatchNormalization", ins, {Attribute::make_float("epsilon", 1e-3f)}), ins, true);
  }
}

TEST(RuntimeReduce, LossesAndQuantization) {
  Tensor x = Tensor::from_vector<float>({-1, -2, -3, -4, -5, -6}, {2, 3});
  std::vector<In> ins{{"x", x}, {"t", Tensor::from_vector<int64_t>({2, 0}, {2})}};
  auto y = run(one_node("NegativeLogLikelihoodLoss", ins), ins, true)[0];
  expect_close(Tensor::from_vector<float>({3.5f}, {}), y);
  std::vector<In> bad{{"x", x}, {"t", Tensor::from_vector<int64_t>({3, 0}, {2})}};
  EXPECT_THROW(run(one_node("NegativeLogLikelihoodLoss", bad), bad, true), Error);
  std::vector<In> badshape{{"x", x}, {"t", Tensor::from_vector<int64_t>({0, 0, 0}, {3})}};
  EXPECT_THROW(run(one_node("SoftmaxCrossEntropyLoss", badshape), badshape, true), Error);

  Tensor f = Tensor::from_vector<float>({0, 1.5f, 2.5f, -300, 300, 3}, {2, 3});
  std::vector<In> q{{"x", f}, {"s", Tensor::from_vector<float>({1}, {})}, {"z", Tensor::from_vector<uint8_t>({10}, {})}};
  auto yq = run(one_node("QuantizeLinear", q), q, true)[0];
  EXPECT_TRUE(yq.equals(Tensor::from_vector<uint8_t>({10, 12, 12, 0, 255, 13}, {2, 3})));
  std::vector<In> qa{{"x", f}, {"s", Tensor::from_vector<float>({1, 2}, {2})}, {"z", Tensor::from_vector<int8_t>({0, 0}, {2})}};
  auto ya = run(one_node("QuantizeLinear", qa, {Attribute::make_int("axis", 0)}), qa, true)[0];
  EXPECT_TRUE(ya.equals(Tensor::from_vector<int8_t>({0, 2, 2, -128, 127, 2}, {2, 3})));
  std::vector<In> qbad{{"x", f}, {"s", Tensor::from_vector<float>({1, 2, 3, 4}, {4})}};
  EXPECT_THROW(run(one_node("QuantizeLinear", qbad), qbad, true), Error);
  std::vector<In> dq{{"x", Tensor::from_vector<int8_t>({-3, 0, 5}, {3})}, {"s", Tensor::from_vector<float>({0.5f}, {})},
                     {"z", Tensor::from_vector<int8_t>({1}, {})}};
  expect_close(Tensor::from_vector<float>({-2, -0.5f, 2}, {3}), run(one_node("DequantizeLinear", dq), dq, true)[0]);
  std::vector<In> dqbad{{"x", Tensor::from_vector<int8_t>({-3, 0, 5}, {3})}, {"s", Tensor::from_vector<float>({0.5f}, {})},
                        {"z", Tensor::from_vector<uint8_t>({1}, {})}};
  EXPECT_THROW(run(one_node("DequantizeLinear", dqbad), dqbad, true), Error);
}

TEST(RuntimeReduce, GroupNormMatchesInstanceNormWithOneChannelPerGroup) {
  std::mt19937 rng(4);
  Tensor x = random_normal(rng, {2, 4, 3, 5});
  Tensor s = random_normal(rng, {4}), b = random_normal(rng, {4});
  std::vector<In> gi{{"x", x}, {"s", s}, {"b", b}};
  auto inst = run(one_node("InstanceNormalization", gi), gi, true)[0];
  auto grp = run(one_node("GroupNormalization", gi, {Attribute::make_int("num_groups", 4)}, 1, 18), gi, true)[0];
  expect_close(inst, grp);
  EXPECT_THROW(run(one_node("GroupNormalization", gi, {Attribute::make_int("num_groups", 3)}, 1, 18), gi, true), Error);
  // Two groups with per-group scale 1 and bias 0: each half of the channels is standardized.
  std::vector<In> g2{{"x", x}, {"s", Tensor::from_vector<float>({1, 1}, {2})}, {"b", Tensor::from_vector<float>({0, 0}, {2})}};
  auto y = run(one_node("GroupNormalization", g2, {Attribute::make_int("num_groups", 2)}, 1, 18), g2, true)[0];
  double sum = 0;
  for (int64_t i = 0; i < 30; ++i) sum += y.as_double(i);
  EXPECT_NEAR(sum, 0.0, 1e-4);
}

TEST(RuntimeReduce, WrongTypesAndShapesThrow) {
  std::vector<In> xi{{"x", Tensor::from_vector<int32_t>({1, 2}, {2})}};
  EXPECT_THROW(run(one_node("Softmax", xi), xi, true), Error);
  EXPECT_THROW(run(one_node("InstanceNormalization", {{"x", xi[0].value}, {"s", xi[0].value}, {"b", xi[0].value}}),
                   {{"x", xi[0].value}, {"s", xi[0].value}, {"b", xi[0].value}}, true),
               Error);
  std::mt19937 rng(2);
  Tensor x = random_normal(rng, {2, 3, 4});
  std::vector<In> bn{{"x", x}, {"s", random_normal(rng, {2})}, {"b", random_normal(rng, {3})}, {"m", random_normal(rng, {3})},
                     {"v", random_normal(rng, {3})}};
  EXPECT_THROW(run(one_node("BatchNormalization", bn), bn, true), Error);
  std::vector<In> bn1{{"x", random_normal(rng, {3})}, {"s", random_normal(rng, {3})}, {"b", random_normal(rng, {3})},
                      {"m", random_normal(rng, {3})}, {"v", random_normal(rng, {3})}};
  EXPECT_THROW(run(one_node("BatchNormalization", bn1), bn1, true), Error);
  std::vector<In> nll{{"x", x}, {"t", Tensor::from_vector<int64_t>({0, 1}, {2})}};
  EXPECT_THROW(run(one_node("NegativeLogLikelihoodLoss", nll), nll, true), Error);
  std::vector<In> sce{{"x", x}, {"t", Tensor::from_vector<int64_t>({0, 1, 2, 1, 1, 1, 1, 5}, {2, 4})}};
  EXPECT_THROW(run(one_node("SoftmaxCrossEntropyLoss", sce), sce, true), Error);
  std::vector<In> red{{"x", x}, {"axes", Tensor::from_vector<int64_t>({0, 7}, {2})}};
  EXPECT_THROW(run(one_node("ReduceSum", red), red, true), Error);
  std::vector<In> ln{{"x", x}, {"s", random_normal(rng, {4})}};
  EXPECT_THROW(run(one_node("LayerNormalization", ln, {Attribute::make_int("axis", 3)}), ln, true), Error);
}

}  // namespace

namespace {

// Manual timing of fast vs reference paths: --gtest_also_run_disabled_tests --gtest_filter=*Bench*
TEST(RuntimeReduce, DISABLED_BenchFastPaths) {
  std::mt19937 rng(1);
  Tensor x = random_normal(rng, {256, 1024});
  Tensor s = random_normal(rng, {1024});
  struct C {
    const char* op;
    std::vector<In> ins;
    std::vector<Attribute> attrs;
  };
  for (C c : {C{"Softmax", {{"x", x}}, {}}, C{"LogSoftmax", {{"x", x}}, {}},
              C{"LayerNormalization", {{"x", x}, {"s", s, true}, {"b", s, true}}, {}},
              C{"ReduceMean", {{"x", x}}, {Attribute::make_ints("axes", {1})}},
              C{"ReduceSum", {{"x", x}}, {Attribute::make_ints("axes", {0})}}}) {
    Model m = one_node(c.op, c.ins, c.attrs, 1, 13 + 4 * (std::string(c.op) == "LayerNormalization"));
    for (bool fast : {false, true}) {
      SessionOptions o;
      o.fast_paths = fast;
      o.threads = 1;
      Session sess(m, o);
      std::map<std::string, RValue> feeds{{"x", x}};
      sess.run(feeds);
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 50; ++i) sess.run(feeds);
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 50;
      std::printf("%-20s %-4s %8.1f us\n", c.op, fast ? "fast" : "ref", us);
    }
  }
}

}  // namespace
