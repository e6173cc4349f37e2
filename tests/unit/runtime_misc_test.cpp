// Remaining and signal ops: random generators (shape, dtype, distribution — values cannot match
// other runtimes), DFT round trips, windows, NonMaxSuppression/TfIdf/StringNormalizer bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/session.h"
#include "test_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

TEST(MiscKernels, RandomUniformRangeShapeDtype) {
  Tensor y = run_op("RandomUniform", {},
                    {Attribute::make_ints("shape", {40, 50}), Attribute::make_float("low", 2.f), Attribute::make_float("high", 5.f),
                     Attribute::make_int("dtype", static_cast<int64_t>(DType::Double)), Attribute::make_float("seed", 3.f)});
  ASSERT_EQ(y.dtype(), DType::Double);
  ASSERT_EQ(y.dims(), (Dims{40, 50}));
  double sum = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    double v = y.data<double>()[i];
    ASSERT_GE(v, 2.0);
    ASSERT_LT(v, 5.0);
    sum += v;
  }
  EXPECT_NEAR(sum / static_cast<double>(y.numel()), 3.5, 0.1);
}

TEST(MiscKernels, RandomNormalLikeMoments) {
  Tensor x(DType::Float, {4000});
  Tensor y = run_op("RandomNormalLike", {x}, {Attribute::make_float("mean", 1.f), Attribute::make_float("scale", 2.f)});
  ASSERT_EQ(y.dtype(), DType::Float);
  double m = 0, m2 = 0;
  for (int64_t i = 0; i < y.numel(); ++i) m += y.data<float>()[i];
  m /= static_cast<double>(y.numel());
  for (int64_t i = 0; i < y.numel(); ++i) m2 += (y.data<float>()[i] - m) * (y.data<float>()[i] - m);
  EXPECT_NEAR(m, 1.0, 0.15);
  EXPECT_NEAR(std::sqrt(m2 / static_cast<double>(y.numel())), 2.0, 0.15);
}

TEST(MiscKernels, SeededGeneratorsAreReproducible) {
  std::vector<Attribute> a{Attribute::make_ints("shape", {16}), Attribute::make_float("seed", 7.f)};
  EXPECT_TRUE(run_op("RandomUniform", {}, a).equals(run_op("RandomUniform", {}, a)));
}

TEST(MiscKernels, BernoulliAndMultinomialDegenerateCases) {
  Tensor p = Tensor::from_vector<float>({0.f, 1.f, 1.f, 0.f}, {4});
  Tensor y = run_op("Bernoulli", {p});
  EXPECT_TRUE(y.equals(p));
  Tensor logits = Tensor::from_vector<float>({-std::numeric_limits<float>::infinity(), 0.f, -std::numeric_limits<float>::infinity()}, {1, 3});
  Tensor s = run_op("Multinomial", {logits}, {Attribute::make_int("sample_size", 5)});
  ASSERT_EQ(s.dtype(), DType::Int32);
  ASSERT_EQ(s.dims(), (Dims{1, 5}));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.data<int32_t>()[i], 1);
  EXPECT_THROW(run_op("Bernoulli", {Tensor::from_vector<float>({1.5f}, {1})}), Error);
}

TEST(MiscKernels, DftInverseRoundTripAndOnesided) {
  std::vector<float> sig{1.f, -2.f, 0.5f, 3.f, 0.f, 1.f};
  Tensor x = Tensor::from_vector<float>(sig, {1, 6, 1});
  Tensor f = run_op("DFT", {x});
  ASSERT_EQ(f.dims(), (Dims{1, 6, 2}));
  Tensor back = run_op("DFT", {f}, {Attribute::make_int("inverse", 1)});
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(back.data<float>()[2 * i], sig[static_cast<size_t>(i)], 1e-5);
    EXPECT_NEAR(back.data<float>()[2 * i + 1], 0.f, 1e-5);
  }
  Tensor half = run_op("DFT", {x}, {Attribute::make_int("onesided", 1)});
  ASSERT_EQ(half.dims(), (Dims{1, 4, 2}));
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(half.data<float>()[i], f.data<float>()[i], 1e-6);
  EXPECT_THROW(run_op("DFT", {Tensor(DType::Float, {1, 4, 3})}), Error);
  EXPECT_THROW(run_op("DFT", {x}, {Attribute::make_int("axis", 2)}), Error);
}

TEST(MiscKernels, FftFastPathMatchesDirectDft) {
  std::mt19937 g(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int trial = 0; trial < 12; ++trial) {
    int64_t n = int64_t{1} << (1 + trial % 8), batch = 1 + trial % 3, comps = 1 + trial % 2;
    Tensor x(DType::Float, {batch, n, 3, comps});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(g);
    std::vector<Attribute> a{Attribute::make_int("inverse", trial % 3 == 0), Attribute::make_int("onesided", trial % 4 == 1)};
    Tensor fast = run_op("DFT", {x}, a, at_opset(17)), ref = run_op("DFT", {x}, a, kRef);
    ASSERT_EQ(fast.dims(), ref.dims());
    for (int64_t i = 0; i < fast.numel(); ++i) ASSERT_NEAR(fast.data<float>()[i], ref.data<float>()[i], 1e-4) << "n=" << n;
  }
  Tensor sig(DType::Float, {2, 300, 1});
  for (int64_t i = 0; i < sig.numel(); ++i) sig.data<float>()[i] = u(g);
  std::vector<Tensor> ins{sig, Tensor::scalar<int64_t>(37), Tensor::from_vector<float>(std::vector<float>(64, 0.5f), {64})};
  Tensor fast = run_op("STFT", ins, {}, at_opset(17)), ref = run_op("STFT", ins, {}, kRef);
  ASSERT_EQ(fast.dims(), (Dims{2, 7, 33, 2}));
  for (int64_t i = 0; i < fast.numel(); ++i) ASSERT_NEAR(fast.data<float>()[i], ref.data<float>()[i], 1e-4);
}

TEST(MiscKernels, HannWindowPeriodicAndSymmetric) {
  Tensor p = run_op("HannWindow", {Tensor::scalar<int64_t>(4)});
  std::vector<float> want{0.f, 0.5f, 1.f, 0.5f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(p.data<float>()[i], want[static_cast<size_t>(i)], 1e-6);
  Tensor s = run_op("HannWindow", {Tensor::scalar<int64_t>(3)}, {Attribute::make_int("periodic", 0)});
  EXPECT_NEAR(s.data<float>()[1], 1.f, 1e-6);
  EXPECT_NEAR(s.data<float>()[2], 0.f, 1e-6);
}

TEST(MiscKernels, BadInputThrows) {
  EXPECT_THROW(run_op("NonMaxSuppression", {Tensor(DType::Float, {1, 3, 3}), Tensor(DType::Float, {1, 1, 3})}, {}, at_opset(11)), Error);
  EXPECT_THROW(run_op("NonMaxSuppression", {Tensor(DType::Float, {1, 3, 4}), Tensor(DType::Float, {1, 1, 2})}, {}, at_opset(11)), Error);
  EXPECT_THROW(run_op("StringNormalizer", {Tensor(DType::Float, {2})}, {}, at_opset(10)), Error);
  EXPECT_THROW(run_op("StringNormalizer", {Tensor::from_strings({"a", "b", "c", "d"}, {2, 2})}, {}, at_opset(10)), Error);
  EXPECT_THROW(run_op("TfIdfVectorizer", {Tensor(DType::Int64, {2, 2, 2})},
                      {Attribute::make_ints("ngram_counts", {0}), Attribute::make_ints("ngram_indexes", {0}),
                       Attribute::make_ints("pool_int64s", {1}), Attribute::make_string("mode", "TF"),
                       Attribute::make_int("min_gram_length", 1), Attribute::make_int("max_gram_length", 1),
                       Attribute::make_int("max_skip_count", 0)},
                      at_opset(9)),
               Error);
}

}  // namespace

// Tensor::has_nonfinite (the scan behind KernelContext::nonfinite_inputs) finds a NaN or an
// infinity at every position of a length that is no multiple of its 64-value steps, and nothing
// in the largest finite values, denormals and negative zero.
TEST(TensorScan, HasNonfiniteFindsEveryPosition) {
  const int64_t n = 64 * 3 + 13;
  std::vector<float> finite(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float pick[] = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(), -0.0f, 1.5f};
    finite[static_cast<size_t>(i)] = pick[i % 5];
  }
  EXPECT_FALSE(Tensor::from_vector<float>(finite, {n}).has_nonfinite());
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (int64_t at = 0; at < n; ++at) {
    std::vector<float> v = finite;
    v[static_cast<size_t>(at)] = bad[at % 3];
    EXPECT_TRUE(Tensor::from_vector<float>(v, {n}).has_nonfinite()) << at;
  }
  EXPECT_TRUE(Tensor::from_vector<double>({1.0, std::nan("")}, {2}).has_nonfinite());
  EXPECT_FALSE(Tensor::from_vector<double>({1.0, -0.0}, {2}).has_nonfinite());
}
