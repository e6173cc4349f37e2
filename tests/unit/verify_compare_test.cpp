// verify's comparison and input planning, without libtorch: NaN/Inf semantics, statistics, and
// integer inputs kept inside what they index.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "verify/compare.h"
#include "verify/inputs.h"

using namespace t2o;

namespace {

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

Tensor f32(std::vector<float> v) {
  Dims d{static_cast<int64_t>(v.size())};
  return Tensor::from_vector<float>(v, d);
}

}  // namespace

TEST(VerifyCompare, EqualTensorsAgree) {
  TensorStats s = compare_tensors(f32({1, 2, 3}), f32({1, 2, 3}), {});
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.max_abs, 0);
  EXPECT_DOUBLE_EQ(s.cosine, 1);
  EXPECT_EQ(s.verdict(), "ok");
}

TEST(VerifyCompare, StatisticsOfADifference) {
  TensorStats s = compare_tensors(f32({1, 2, 4, 0}), f32({1, 2, 3, 0}), {1e-3, 1e-4});
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.mismatches, 1);
  EXPECT_DOUBLE_EQ(s.mismatch_share(), 0.25);
  EXPECT_DOUBLE_EQ(s.max_abs, 1);
  EXPECT_DOUBLE_EQ(s.max_rel, 0.25);
  EXPECT_LT(s.cosine, 1);
  EXPECT_EQ(s.verdict(), "25% differ");
}

TEST(VerifyCompare, ToleranceIsAbsolutePlusRelative) {
  EXPECT_TRUE(compare_tensors(f32({1000}), f32({1000.5f}), {1e-3, 0}).ok());
  EXPECT_FALSE(compare_tensors(f32({1000}), f32({1002}), {1e-3, 0}).ok());
  EXPECT_TRUE(compare_tensors(f32({0}), f32({5e-5f}), {1e-3, 1e-4}).ok());
}

TEST(VerifyCompare, NanInTheSamePlacesAgrees) {
  TensorStats s = compare_tensors(f32({kNan, 1, kNan}), f32({kNan, 1, kNan}), {});
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ref_nan, 2);
  EXPECT_EQ(s.got_nan, 2);
  EXPECT_EQ(s.nan_only_one, 0);
}

TEST(VerifyCompare, NanOnOneSideIsAMismatch) {
  TensorStats s = compare_tensors(f32({kNan, 1, 2}), f32({0, 1, kNan}), {});
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.nan_only_one, 2);
  EXPECT_EQ(s.mismatches, 2);
  EXPECT_EQ(s.verdict(), "NaN on one side (2)");
}

TEST(VerifyCompare, InfMustMatchInSign) {
  EXPECT_TRUE(compare_tensors(f32({kInf, -kInf}), f32({kInf, -kInf}), {}).ok());
  EXPECT_FALSE(compare_tensors(f32({kInf}), f32({-kInf}), {}).ok());
  EXPECT_FALSE(compare_tensors(f32({kInf}), f32({1e30f}), {}).ok());
}

TEST(VerifyCompare, ShapeAndDtypeDifferencesFail) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  EXPECT_FALSE(compare_tensors(a, b, {}).ok());
  EXPECT_EQ(compare_tensors(a, b, {}).verdict(), "shape 2x2 vs 4");
  Tensor c = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2});
  EXPECT_FALSE(compare_tensors(a, c, {}).ok());
  EXPECT_EQ(compare_tensors(a, c, {}).verdict(), "dtype f32 vs f64");
}

TEST(VerifyInputs, IndicesStayInsideTheEmbedding) {
  Graph g;
  g.inputs.push_back({"tokens", Type::tensor(DType::Int64, Shape{{Dim::fixed(1), Dim::named("seq")}}), {}});
  g.initializers.push_back({"emb", Tensor(DType::Float, {5, 8}), {}});
  Node cast;
  cast.op_type = "Cast";
  cast.inputs = {"tokens"};
  cast.outputs = {"t32"};
  Node gather;
  gather.op_type = "Gather";
  gather.inputs = {"emb", "t32"};
  gather.outputs = {"out"};
  g.nodes = {cast, gather};
  g.outputs.push_back({"out", Type::tensor(DType::Float), {}});
  EXPECT_EQ(index_bound(g, "tokens", {}).value_or(-1), 5);

  InputPlan plan(g, {{"tokens", {1, 64}, DType::Int64}}, {}, {});
  for (int k = 0; k < 5; ++k) {
    Sample s = plan.make(k, 0);
    const Tensor& t = s.inputs.at(0).second;
    if (k > 0) {
      EXPECT_NE(t.dims()[1], 64) << "sample " << k << " keeps the dynamic size";
    }
    for (int64_t i = 0; i < t.numel(); ++i) {
      EXPECT_GE(t.as_int(i), 0);
      EXPECT_LT(t.as_int(i), 5);
    }
  }
}

TEST(VerifyInputs, DynamicLabelsShareSizesAcrossInputs) {
  Graph g;
  g.inputs.push_back({"a", Type::tensor(DType::Float, Shape{{Dim::named("n"), Dim::fixed(3)}}), {}});
  g.inputs.push_back({"b", Type::tensor(DType::Bool, Shape{{Dim::named("n")}}), {}});
  InputPlan plan(g, {}, {}, {});
  for (int k = 0; k < 4; ++k) {
    Sample s = plan.make(k, 7);
    EXPECT_EQ(s.inputs[0].second.dims()[0], s.inputs[1].second.dims()[0]);
    EXPECT_EQ(s.inputs[0].second.dims()[1], 3);
  }
  EXPECT_EQ(plan.make(0, 7).inputs[0].second.dims()[0], 2);  // unsized symbolic dims start at 2
  ASSERT_EQ(plan.convert_dynamic().size(), 2u);
  EXPECT_EQ(plan.convert_dynamic()[0].axes.at(0), "n");
}

TEST(VerifyInputs, UnknownInputIsAUsageError) {
  Graph g;
  g.inputs.push_back({"a", Type::tensor(DType::Float, Shape{{Dim::fixed(3)}}), {}});
  try {
    InputPlan plan(g, {{"b", {3}, DType::Float}}, {}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
  }
}
