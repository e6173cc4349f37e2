// Opset conversion: each adapter moves a small model across the opset where its op changed, in
// both directions, and the result passes the ONNX checker and computes the same outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "onnx/check.h"
#include "passes/opset.h"
#include "passes_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

Tensor i64s(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); }

// Moves m to `to` and checks validity and outputs (same inputs at each size).
Model moved(const Model& m, int64_t to, const std::string& what) {
  Model out = m;
  convert_opset(out, to);
  EXPECT_EQ(out.opset(""), to) << what;
  try {
    check_model(out);
  } catch (const Error& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
  Comparison c = compare_models(m, out);
  EXPECT_TRUE(c.proven) << what << ": " << c.difference << c.not_proven;
  return out;
}

// Up from `low` to `high` and back down, both checked.
void round_trip(const Model& m_low, int64_t high, const std::string& what) {
  Model up = moved(m_low, high, what + " up");
  moved(up, m_low.opset(""), what + " down again");
}

}  // namespace

TEST(PassesOpset, SoftmaxFamilyAxisMeaningAt13) {
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"})
    for (int64_t axis : {0, 1, 2, -1}) {
      ModelBuilder b(11);
      b.input("x", {"batch", 3, 4}).node(op, {"x"}, {"y"}, {Attribute::make_int("axis", axis)});
      b.output("y", {"batch", 3, 4});
      round_trip(b.m, 13, std::string(op) + " axis " + std::to_string(axis));
      ModelBuilder c(13);
      c.input("x", {"batch", 3, 4}).node(op, {"x"}, {"y"}, {Attribute::make_int("axis", axis)});
      c.output("y", {"batch", 3, 4});
      moved(c.m, 9, std::string(op) + " from 13 to 9, axis " + std::to_string(axis));
    }
}

TEST(PassesOpset, AxesAttributesBecomeInputsAndBack) {
  ModelBuilder b(9);
  b.input("x", {"batch", 1, 6});
  b.node("Squeeze", {"x"}, {"s"}, {Attribute::make_ints("axes", {1})});
  b.node("Unsqueeze", {"s"}, {"u"}, {Attribute::make_ints("axes", {2})});
  b.node("ReduceSum", {"u"}, {"r"}, {Attribute::make_ints("axes", {2}), Attribute::make_int("keepdims", 0)});
  b.node("Split", {"r"}, {"p", "q"}, {Attribute::make_int("axis", 1), Attribute::make_ints("split", {2, 4})});
  b.node("Clip", {"p"}, {"c"}, {Attribute::make_float("min", -0.5f), Attribute::make_float("max", 0.5f)});
  b.node("Pad", {"q"}, {"d"}, {Attribute::make_ints("pads", {0, 1, 0, 2}), Attribute::make_float("value", 1.5f)});
  b.node("Slice", {"d"}, {"e"}, {Attribute::make_ints("starts", {1}), Attribute::make_ints("ends", {5}), Attribute::make_ints("axes", {1})});
  b.node("TopK", {"e"}, {"v", "i"}, {Attribute::make_int("k", 2), Attribute::make_int("axis", 1)});
  b.node("Dropout", {"v"}, {"dv"}, {Attribute::make_float("ratio", 0.3f)});
  b.output("c", {"batch", 2}).output("dv", {"batch", 2}).output("i", {"batch", 2}, DType::Int64);
  round_trip(b.m, 17, "attribute forms");
}

TEST(PassesOpset, NegativeAxesAndSmallestTopKBelow11) {
  ModelBuilder b(13);
  b.input("x", {"batch", 3, 5}).init("ax", i64s({-2}));
  b.init("st", i64s({0})).init("en", i64s({5})).init("sa", i64s({-1})).init("step", i64s({2})).init("k", i64s({2}));
  b.node("Unsqueeze", {"x", "ax"}, {"u"}).node("Squeeze", {"u", "ax"}, {"s"});
  b.node("Concat", {"s", "x"}, {"c"}, {Attribute::make_int("axis", -1)});
  b.node("Slice", {"c", "st", "en", "sa", "step"}, {"sl"});  // a stepped slice: Gather at opset 9
  b.node("TopK", {"sl", "k"}, {"v", "i"}, {Attribute::make_int("axis", -1), Attribute::make_int("largest", 0)});
  b.node("Flatten", {"v"}, {"f"}, {Attribute::make_int("axis", -1)});
  b.output("f", {"batch", 2}).output("i", {"batch", 3, 2}, DType::Int64);
  moved(b.m, 9, "negative axes 13 -> 9");
  moved(b.m, 10, "negative axes 13 -> 10");
}

TEST(PassesOpset, ResizeAcrossItsOpsets) {
  std::mt19937 g(1);
  // Opset 9's Upsample up to Resize 10, 11 (asymmetric, floor) and 13, and back.
  for (const char* mode : {"nearest", "linear"}) {
    ModelBuilder b(9);
    b.input("x", {"batch", 2, 3, 4}).init("scales", Tensor::from_vector<float>({1, 1, 2, 3}, {4}));
    b.node("Upsample", {"x", "scales"}, {"y"}, {Attribute::make_string("mode", mode)}).output("y", {"batch", 2, 6, 12});
    for (int64_t to : {10, 11, 13}) round_trip(b.m, to, std::string("Upsample ") + mode + " to " + std::to_string(to));
  }
  // Opset 13's modes with no opset-10 form: per-axis Gather or MatMul maps.
  struct Case {
    const char* mode;
    const char* coord;
    std::vector<int64_t> out;
  } cases[] = {{"linear", "half_pixel", {5, 7}}, {"linear", "align_corners", {6, 8}}, {"cubic", "pytorch_half_pixel", {5, 2}},
               {"nearest", "half_pixel", {5, 7}}, {"nearest", "asymmetric", {6, 8}}};
  for (const Case& c : cases) {
    ModelBuilder b(13);
    b.input("x", {"batch", 2, 3, 4}).init("sizes", i64s({1, 2, c.out[0], c.out[1]}));
    std::vector<Attribute> attrs{Attribute::make_string("mode", c.mode), Attribute::make_string("coordinate_transformation_mode", c.coord)};
    b.m.graph.inputs[0].type.shape->dims[0] = Dim::fixed(1);
    b.node("Resize", {"x", "", "", "sizes"}, {"y"}, attrs).output("y", {1, 2, c.out[0], c.out[1]});
    for (int64_t to : {12, 10, 9})
      moved(b.m, to, std::string("Resize ") + c.mode + " " + c.coord + " to " + std::to_string(to));
  }
}

TEST(PassesOpset, NewerOpsWrittenWithOlderOnes) {
  ModelBuilder b(17);
  b.input("x", {"batch", 4, 4}).init("gamma", Tensor::from_vector<float>({1, 2, 3, 4}, {4}));
  b.init("beta", Tensor::from_vector<float>({0, 1, 0, 1}, {4})).init("k", Tensor::scalar<int64_t>(1));
  b.init("half", Tensor::scalar<float>(0.5f)).init("lo", Tensor::from_vector<int64_t>({0}, {}));
  b.init("hi", Tensor::from_vector<int64_t>({5}, {})).init("one", Tensor::from_vector<int64_t>({1}, {}));
  b.node("LayerNormalization", {"x", "gamma", "beta"}, {"ln"}, {Attribute::make_float("epsilon", 1e-3f)});
  b.node("HardSwish", {"ln"}, {"hs"});
  b.node("Trilu", {"hs", "k"}, {"tr"}, {Attribute::make_int("upper", 0)});
  b.node("GreaterOrEqual", {"tr", "half"}, {"ge"}).node("LessOrEqual", {"tr", "half"}, {"le"});
  b.node("Equal", {"tr", "half"}, {"eq"});
  b.node("Mul", {"x", "half"}, {"xh"}).node("Round", {"xh"}, {"rd"});
  b.node("IsInf", {"rd"}, {"inf"}).node("CastLike", {"ge", "x"}, {"cl"});
  b.node("Range", {"lo", "hi", "one"}, {"rg"});
  b.output("tr", {"batch", 4, 4}).output("ge", {"batch", 4, 4}, DType::Bool).output("le", {"batch", 4, 4}, DType::Bool);
  b.output("eq", {"batch", 4, 4}, DType::Bool).output("rd", {"batch", 4, 4}).output("inf", {"batch", 4, 4}, DType::Bool);
  b.output("cl", {"batch", 4, 4}).output("rg", {5}, DType::Int64);
  for (int64_t to : {16, 13, 11, 10, 9}) {
    Model m = moved(b.m, to, "newer ops to " + std::to_string(to));
    EXPECT_EQ(count_op(m, "LayerNormalization"), 0);
  }
}

TEST(PassesOpset, ExactTiesAndNaNsSurviveTheRewrites) {
  // Round half to even and NaN comparisons, with the values that tell the forms apart.
  ModelBuilder b(17);
  b.input("x", {8}).init("half", Tensor::scalar<float>(0.5f));
  b.node("Round", {"x"}, {"r"}).node("GreaterOrEqual", {"x", "half"}, {"ge"}).node("Equal", {"x", "x"}, {"eq"});
  b.output("r", {8}).output("ge", {8}, DType::Bool).output("eq", {8}, DType::Bool);
  Model low = b.m;
  convert_opset(low, 9);
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = Tensor::from_vector<float>({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, nan, 0.49999997f, 2.5000002f}, {8});
  auto want = run_ref(b.m, {{"x", x}});
  auto got = run_ref(low, {{"x", x}});
  expect_same_outputs(want, got, "ties and NaN at opset 9");
}

TEST(PassesOpset, GatherElementsBelow11AsAFlatGather) {
  ModelBuilder b(13);
  b.input("x", {3, 4}).init("idx", Tensor::from_vector<int64_t>({0, -1, 2, 1, -3, 0}, {3, 2}));
  b.node("GatherElements", {"x", "idx"}, {"y"}, {Attribute::make_int("axis", 1)}).output("y", {3, 2});
  Model m = moved(b.m, 9, "GatherElements 13 -> 9");
  EXPECT_EQ(count_op(m, "GatherElements"), 0);
  ModelBuilder c(13);
  c.input("x", {3, 4}).input("idx", {2, 4}, DType::Int64);
  c.node("GatherElements", {"x", "idx"}, {"y"}, {Attribute::make_int("axis", 0)}).output("y", {2, 4});
  moved(c.m, 10, "GatherElements on axis 0, computed indices");
}

TEST(PassesOpset, WhatCannotMoveIsNamed) {
  ModelBuilder b(17);
  b.input("x", {2, 3}).node("Celu", {"x"}, {"y"}, {}, "celu_node").output("y", {2, 3});
  Model m = b.m;
  try {
    convert_opset(m, 11);
    FAIL() << "Celu has no form before opset 12";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.exit_code(), kExitUnsupported);
    EXPECT_NE(msg.find("Celu 'celu_node'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("opset 12"), std::string::npos) << msg;
  }
  // A Softmax whose rank is unknown cannot be moved down across 13 (the axis meaning depends on it).
  ModelBuilder c(13);
  c.m.graph.inputs.push_back({"x", Type::tensor(DType::Float), {}});
  c.node("Softmax", {"x"}, {"y"}, {Attribute::make_int("axis", 0)}).output("y");
  Model n = c.m;
  EXPECT_THROW(convert_opset(n, 12), Error);
}

// RoiAlign's default mode changed at 16 (half_pixel); the pre-16 op is output_half_pixel.
TEST(PassesOpset, RoiAlignKeepsItsCoordinatesAcross16) {
  auto roi_model = [](int64_t opset, const char* mode) {
    ModelBuilder b(opset);
    b.input("x", {1, 2, 8, 8});
    b.init("rois", Tensor::from_vector<float>({0.3f, 0.7f, 5.2f, 6.1f, 1.0f, 1.5f, 2.0f, 2.2f}, {2, 4}));
    b.init("batch", Tensor::from_vector<int64_t>({0, 0}, {2}));
    std::vector<Attribute> attrs{Attribute::make_int("output_height", 2), Attribute::make_int("output_width", 2),
                                 Attribute::make_float("spatial_scale", 0.5f)};
    if (mode) attrs.push_back(Attribute::make_string("coordinate_transformation_mode", mode));
    b.node("RoiAlign", {"x", "rois", "batch"}, {"y"}, attrs).output("y", {2, 2, 2, 2});
    return b.m;
  };
  Model up = moved(roi_model(10, nullptr), 16, "RoiAlign 10 -> 16");
  bool found = false;
  up.graph.for_each_node([&](const Node& n) {
    if (n.op_type != "RoiAlign") return;
    found = true;
    EXPECT_EQ(n.attr_string("coordinate_transformation_mode", ""), "output_half_pixel");
  });
  EXPECT_TRUE(found);
  moved(roi_model(16, "output_half_pixel"), 13, "RoiAlign output_half_pixel 16 -> 13");
  Model half = roi_model(16, nullptr);  // half_pixel by default: no form before 16
  try {
    convert_opset(half, 13);
    FAIL() << "half_pixel RoiAlign has no form before opset 16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("half_pixel"), std::string::npos) << e.what();
  }
}

// Types a later opset added (uint8 Add at 14) are cast to ones the target takes.
TEST(PassesOpset, TypesTheTargetRejectsAreLegalized) {
  ModelBuilder b(17);
  b.input("a", {2, 3}, DType::UInt8).input("c", {2, 3}, DType::UInt8);
  b.node("Add", {"a", "c"}, {"y"}).output("y", {2, 3}, DType::UInt8);
  Model out = b.m;
  OpsetConversion r = convert_opset(out, 13);
  EXPECT_EQ(r.legalized.size(), 1u);
  check_model(out);
  Comparison c = compare_models(b.m, out);
  EXPECT_TRUE(c.proven) << c.difference << c.not_proven;
}

// Per-channel QuantizeLinear exists from opset 13; a per-tensor one moves down without its axis.
TEST(PassesOpset, PerChannelQuantizationNeeds13) {
  auto qdq = [](std::vector<float> scale) {
    ModelBuilder b(13);
    int64_t k = static_cast<int64_t>(scale.size());
    b.input("x", {2, 3});
    if (k == 1) b.init("s", Tensor::from_vector<float>(scale, {}));
    else b.init("s", Tensor::from_vector<float>(scale, {k}));
    b.init("z", k == 1 ? Tensor(DType::UInt8, {}) : Tensor(DType::UInt8, {k}));
    b.node("QuantizeLinear", {"x", "s", "z"}, {"q"}, {Attribute::make_int("axis", 1)});
    b.node("DequantizeLinear", {"q", "s", "z"}, {"y"}, {Attribute::make_int("axis", 1)}).output("y", {2, 3});
    return b.m;
  };
  Model down = moved(qdq({0.1f}), 11, "per-tensor QDQ 13 -> 11");
  down.graph.for_each_node([](const Node& n) { EXPECT_FALSE(n.has_attr("axis")) << n.op_type; });
  Model per_channel = qdq({0.1f, 0.2f, 0.05f});
  try {
    convert_opset(per_channel, 11);
    FAIL() << "per-channel QDQ has no form before opset 13";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("per-axis"), std::string::npos) << e.what();
  }
}
