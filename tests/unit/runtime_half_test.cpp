// float16 on the runtime's fast paths: bulk conversions (F16C) against the scalar ones, float16
// elementwise ops on float blocks against the reference bit for bit, and float16 Conv / MatMul /
// Gemm with constant weights computed in float32 (runtime/optimize.h) against the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/optimize.h"
#include "runtime/session.h"
#include "runtime/value_io.h"
#include "test_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

Tensor to_half(const Tensor& f) {
  Tensor h(DType::Float16, f.dims());
  for (int64_t i = 0; i < f.numel(); ++i) h.data<Half>()[i] = Half(f.data<float>()[i]);
  return h;
}

// One float16 step at |v|: 2^(exponent - 10), at least the subnormal step.
float half_step(float v) { return std::ldexp(1.0f, std::max(std::ilogb(v == 0 ? 1e-8f : v), -14) - 10); }

// |want - got| within `ulps` float16 steps of want (both float16 tensors); with `of_scale`, steps
// at the tensor's largest magnitude (for values computed from inputs that already differ by a step).
void expect_within_half_ulps(const Tensor& want, const Tensor& got, int ulps, const std::string& what,
                             bool of_scale = false) {
  ASSERT_EQ(want.dtype(), DType::Float16) << what;
  ASSERT_EQ(got.dtype(), DType::Float16) << what;
  ASSERT_EQ(want.dims(), got.dims()) << what;
  float scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::fabs(static_cast<float>(want.data<Half>()[i])));
  for (int64_t i = 0; i < want.numel(); ++i) {
    float w = static_cast<float>(want.data<Half>()[i]), g = static_cast<float>(got.data<Half>()[i]);
    if (w == g || (std::isnan(w) && std::isnan(g))) continue;
    float step = half_step(of_scale ? scale : w);
    ASSERT_LE(std::fabs(w - g), ulps * step) << what << " at " << i << ": " << w << " vs " << g;
  }
}

}  // namespace

TEST(HalfConversion, BulkMatchesScalarForEveryHalf) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> bulk(all.size());
  halves_to_floats(all.data(), bulk.data(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    float one = half_to_float(all[i]);
    if (std::isnan(one)) ASSERT_TRUE(std::isnan(bulk[i])) << i;
    else ASSERT_EQ(bits_of(one), bits_of(bulk[i])) << i;
  }
}

TEST(HalfConversion, BulkMatchesScalarOnRoundingEdges) {
  std::vector<float> v;
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 200000; ++i) v.push_back(float_of(any(rng)));  // every exponent, NaNs, infinities
  for (uint32_t h = 0; h < 0x7c00; h += 7) {                          // ties and neighbours of each step
    float a = half_to_float(static_cast<uint16_t>(h)), b = half_to_float(static_cast<uint16_t>(h + 1));
    float mid = a + (b - a) / 2;
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
  for (float x : {65504.0f, 65519.0f, 65520.0f, 1e9f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 0.0f, -0.0f,
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min()})
    v.push_back(x);
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  std::vector<uint16_t> bulk(v.size());
  floats_to_halves(v.data(), bulk.data(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t one = float_to_half(v[i]);
    if (std::isnan(v[i])) ASSERT_TRUE((bulk[i] & 0x7c00) == 0x7c00 && (bulk[i] & 0x3ff)) << i;
    else ASSERT_EQ(one, bulk[i]) << "at " << v[i];
  }
}

TEST(RuntimeHalf, ElementwiseOnFloatBlocksMatchesReferenceBitForBit) {
  std::mt19937 rng(5);
  // Sizes around the block length, broadcast from a scalar and from a row.
  for (int64_t n : {1, 7, 511, 512, 513, 4099}) {
    Tensor a = to_half(random_normal(rng, {3, n}, 3.0f));
    Tensor b = to_half(random_normal(rng, {3, n}));
    Tensor row = to_half(random_normal(rng, {1, n}));
    Tensor s = to_half(random_normal(rng, {1}));
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Max"})
      for (const Tensor* rhs : {&b, &row, &s}) {
        Tensor want = run_op(op, {a, *rhs}, {}, kRef), got = run_op(op, {a, *rhs}, {}, kFast2);
        ASSERT_EQ(want.dtype(), DType::Float16);
        ASSERT_EQ(0, std::memcmp(want.raw(), got.raw(), want.nbytes())) << op << " n=" << n;
        Tensor want_l = run_op(op, {*rhs, a}, {}, kRef), got_l = run_op(op, {*rhs, a}, {}, kFast2);
        ASSERT_EQ(0, std::memcmp(want_l.raw(), got_l.raw(), want_l.nbytes())) << op << " (swapped) n=" << n;
      }
    for (const char* op : {"Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Sqrt"}) {
      Tensor x = std::string(op) == "Sqrt" ? run_op("Abs", {a}, {}, kRef) : a;
      Tensor want = run_op(op, {x}, {}, kRef), got = run_op(op, {x}, {}, kFast2);
      // Sigmoid, Tanh and Exp use approximations on the fast path: within a float16 step.
      expect_within_half_ulps(want, got, 1, std::string(op) + " n=" + std::to_string(n));
    }
    for (DType to : {DType::Float, DType::Float16}) {
      Tensor x = to == DType::Float ? a : random_normal(rng, {3, n}, 1e3f);
      std::vector<Attribute> attrs{Attribute::make_int("to", static_cast<int64_t>(to))};
      Tensor want = run_op("Cast", {x}, attrs, kRef), got = run_op("Cast", {x}, attrs, kFast2);
      ASSERT_EQ(0, std::memcmp(want.raw(), got.raw(), want.nbytes())) << "Cast n=" << n;
    }
  }
}

// x -> Conv(W, B) -> Relu -> Conv(W2) -> Flatten -> Gemm(Wg, C, transB) -> MatMul(Wm) -> y, all
// float16 with float16 initializers, as `quantize --mode fp16 --fp16-io` writes them.
TEST(RuntimeHalf, ProductsWithFloat16WeightsRunInFloat32AndMatchReference) {
  std::mt19937 rng(7);
  Model m;
  m.opset_import = {{"", 17}};
  auto init = [&](const std::string& name, const Dims& d, float scale) {
    m.graph.initializers.push_back({name, to_half(random_normal(rng, d, scale)), {}});
  };
  init("w", {8, 3, 3, 3}, 0.3f);
  init("b", {8}, 0.1f);
  init("w2", {4, 8, 3, 3}, 0.2f);
  init("wg", {16, 4 * 8 * 8}, 0.1f);
  init("c", {16}, 0.1f);
  init("wm", {16, 5}, 0.3f);
  m.graph.inputs.push_back({"x", Type::tensor(DType::Float16, Shape::of({2, 3, 10, 10})), {}});
  m.graph.nodes.push_back(make_node("Conv", {"x", "w", "b"}, {"c1"}, {Attribute::make_ints("pads", {1, 1, 1, 1})}));
  m.graph.nodes.push_back(make_node("Relu", {"c1"}, {"r1"}));
  m.graph.nodes.push_back(make_node("Conv", {"r1", "w2"}, {"c2"}, {Attribute::make_ints("strides", {1, 1})}));
  m.graph.nodes.push_back(make_node("Flatten", {"c2"}, {"f"}));
  m.graph.nodes.push_back(make_node("Gemm", {"f", "wg", "c"}, {"g"}, {Attribute::make_int("transB", 1)}));
  m.graph.nodes.push_back(make_node("MatMul", {"g", "wm"}, {"y"}));
  m.graph.outputs.push_back({"c1", Type::tensor(DType::Float16), {}});
  m.graph.outputs.push_back({"y", Type::tensor(DType::Float16), {}});

  // The rewrite: no product reads float16 any more, and the float16 weights are gone.
  Model opt = m;
  ASSERT_GE(optimize_for_runtime(opt), 4);
  for (const Initializer& i : opt.graph.initializers) EXPECT_EQ(i.tensor.dtype(), DType::Float) << i.name;
  int casts = 0, to_float = 0;
  for (const Node& n : opt.graph.nodes) {
    casts += n.op_type == "Cast";
    to_float += n.op_type == "HalfToFloat" && n.domain == kInternalDomain;
  }
  // One in and one out per product: the MatMul reads the Gemm's result as the file has it, rounded
  // to float16.
  EXPECT_EQ(casts, 4);
  EXPECT_EQ(to_float, 4);

  for (int threads : {1, 2}) {
    std::map<std::string, RValue> feeds{{"x", to_half(random_normal(rng, {2, 3, 10, 10}))}};
    SessionOptions ref_o, fast_o;
    ref_o.fast_paths = false;
    fast_o.threads = threads;
    auto want = Session(m, ref_o).run(feeds);
    auto got = Session(m, fast_o).run(feeds);
    // Each product is rounded to float16 once in both; the sums run in another order, so a value
    // can round to the neighbouring float16 and the next product sees it: after four products,
    // a few steps at the output's scale.
    expect_within_half_ulps(want.at("c1").tensor, got.at("c1").tensor, 1, "c1");
    expect_within_half_ulps(want.at("y").tensor, got.at("y").tensor, 4, "y", true);
  }
}

// A product with float16 weights and a float32 activation is an invalid file: the fast path
// refuses it as the reference kernels do, instead of computing something.
TEST(RuntimeHalf, MixedTypesFailOnTheFastPathToo) {
  std::mt19937 rng(11);
  Model m = one_node("MatMul", {{"a", random_normal(rng, {2, 3})}, {"b", to_half(random_normal(rng, {3, 4})), true}});
  std::vector<In> feeds{{"a", random_normal(rng, {2, 3})}};
  for (bool fast : {false, true}) {
    try {
      run(m, feeds, fast);
      ADD_FAILURE() << "ran with fast=" << fast;
    } catch (const Error& e) {
      // The one_node() product is named "n".
      EXPECT_NE(std::string(e.what()).find(fast ? "'n/a#as_f32'" : "MatMul 'n'"), std::string::npos) << e.what();
    }
  }
}

// A float16 product whose weight is a graph input (overridable) or of another type stays as written.
TEST(RuntimeHalf, ProductsWithoutConstantFloat16WeightsStay) {
  std::mt19937 rng(9);
  Model m = one_node("MatMul", {{"a", to_half(random_normal(rng, {2, 3}))}, {"b", to_half(random_normal(rng, {3, 4}))}});
  Model opt = m;
  EXPECT_EQ(optimize_for_runtime(opt), 0);
  Model f = one_node("MatMul", {{"a", random_normal(rng, {2, 3})}, {"b", random_normal(rng, {3, 4}), true}});
  opt = f;
  optimize_for_runtime(opt);
  for (const Node& n : opt.graph.nodes) EXPECT_NE(n.op_type, "Cast");
}

// numpy has no bfloat16: .npy files (and the ONNX test data's .pb files) hold its bits as uint16.
// Read for a bfloat16 input they become bfloat16, bit for bit; for other inputs they stay uint16.
TEST(RuntimeHalf, Bfloat16StoredAsUint16ReadsAsBfloat16) {
  Tensor u(DType::UInt16, {3});
  const uint16_t bits[3] = {0x3f80, 0xc040, 0x7fc0};  // 1, -3, NaN
  std::memcpy(u.raw(), bits, sizeof bits);
  std::string path = ::testing::TempDir() + "/bf16_as_u16.npy";
  write_npy(path, u);
  Type bf = Type::tensor(DType::BFloat16);
  RValue b = read_value_file(path, &bf);
  ASSERT_EQ(b.tensor.dtype(), DType::BFloat16);
  EXPECT_EQ(0, std::memcmp(b.tensor.raw(), bits, sizeof bits));
  EXPECT_EQ(static_cast<float>(b.tensor.data<BFloat16>()[1]), -3.0f);
  Type f = Type::tensor(DType::Float);
  EXPECT_EQ(read_value_file(path, &f).tensor.dtype(), DType::UInt16);
  EXPECT_EQ(read_value_file(path, nullptr).tensor.dtype(), DType::UInt16);
}
