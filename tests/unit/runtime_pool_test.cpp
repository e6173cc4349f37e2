// Pool and resize families: oneDNN pooling against the reference loops on random shapes, MaxPool
// indices, MaxUnpool, Resize corner cases, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/optimize.h"
#include "runtime/session.h"
#include "test_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

Session make_session(const std::string& op, const std::vector<Tensor>& ins, const std::vector<Attribute>& attrs,
                     bool fast, int n_out = 1, int64_t opset = 17, int threads = 1) {
  Model m;
  m.opset_import = {{"", opset}};
  Node n;
  n.op_type = op;
  n.name = "n";
  n.attributes = attrs;
  for (size_t i = 0; i < ins.size(); ++i) {
    std::string name = "x" + std::to_string(i);
    n.inputs.push_back(name);
    Shape s;
    for (size_t d = 0; d < ins[i].dims().size(); ++d) s.dims.push_back(Dim::named(name + "_" + std::to_string(d)));
    m.graph.inputs.push_back({name, Type::tensor(ins[i].dtype(), s), {}});
  }
  for (int i = 0; i < n_out; ++i) {
    n.outputs.push_back("y" + std::to_string(i));
    m.graph.outputs.push_back({"y" + std::to_string(i), Type::tensor(DType::Undefined), {}});
  }
  m.graph.nodes.push_back(n);
  SessionOptions so;
  so.fast_paths = fast;
  so.threads = threads;
  return Session(std::move(m), so);
}

std::vector<Tensor> run(Session& s, const std::vector<Tensor>& ins) {
  std::map<std::string, RValue> feeds;
  for (size_t i = 0; i < ins.size(); ++i) feeds["x" + std::to_string(i)] = ins[i];
  auto outs = s.run(feeds);
  std::vector<Tensor> r;
  for (size_t i = 0; i < outs.size(); ++i) r.push_back(outs.at("y" + std::to_string(i)).tensor);
  return r;
}

void expect_close(const Tensor& want, const Tensor& got, const std::string& what) {
  ASSERT_EQ(want.dims(), got.dims()) << what;
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(want.as_double(i), got.as_double(i), 1e-5 * (1 + std::fabs(want.as_double(i)))) << what << " at " << i;
}

TEST(RuntimePool, DnnlMatchesReference) {
  std::mt19937 g(17);
  auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(g)); };
  for (int t = 0; t < 150; ++t) {
    std::string op = t % 2 ? "MaxPool" : "AveragePool";
    int nsp = static_cast<int>(pick(1, 3));
    Dims k, s, d, pads, xd{pick(1, 2), pick(1, 5)};
    for (int i = 0; i < nsp; ++i) k.push_back(pick(1, 3)), s.push_back(pick(1, 3)), d.push_back(op == "MaxPool" ? pick(1, 2) : 1);
    for (int i = 0; i < 2 * nsp; ++i) pads.push_back(pick(0, static_cast<int>(k[static_cast<size_t>(i % nsp)] - 1)));
    for (int i = 0; i < nsp; ++i) xd.push_back((k[static_cast<size_t>(i)] - 1) * d[static_cast<size_t>(i)] + 1 + pick(0, 8));
    std::vector<Attribute> attrs{Attribute::make_ints("kernel_shape", k), Attribute::make_ints("strides", s)};
    if (op == "MaxPool") attrs.push_back(Attribute::make_ints("dilations", d));
    int pk = static_cast<int>(pick(0, 2));
    if (pk == 0) attrs.push_back(Attribute::make_ints("pads", pads));
    else if (pk == 1) attrs.push_back(Attribute::make_string("auto_pad", t % 3 ? "SAME_UPPER" : "SAME_LOWER"));
    bool ceil = pick(0, 1) == 1 && pk == 0;
    if (ceil) attrs.push_back(Attribute::make_int("ceil_mode", 1));
    bool include = op == "AveragePool" && pick(0, 1) == 1;
    if (include) attrs.push_back(Attribute::make_int("count_include_pad", 1));
    std::string what = op + " x=" + dims_to_string(xd) + " k=" + dims_to_string(k) + " s=" + dims_to_string(s) +
                       " d=" + dims_to_string(d) + " pad-kind=" + std::to_string(pk) + " pads=" + dims_to_string(pads) +
                       (ceil ? " ceil" : "") + (include ? " include-pad" : "");
    Tensor x = random_uniform(g, xd);
    Session ref = make_session(op, {x}, attrs, false);
    Session fast = make_session(op, {x}, attrs, true, 1, 17, 2);
    expect_close(run(ref, {x})[0], run(fast, {x})[0], what);
    Dims x2 = xd;
    x2[0] += 1;
    x2.back() += 2;
    Tensor xb = random_uniform(g, x2);
    expect_close(run(ref, {xb})[0], run(fast, {xb})[0], what + " second shape");
  }
}

TEST(RuntimePool, MaxPoolIndicesAndUnpool) {
  Tensor x = Tensor::from_vector<float>({1, 9, 3, 4, 2, 8, 7, 5, 6, 0, 11, 10, 12, 13, 15, 14}, {1, 1, 4, 4});
  std::vector<Attribute> attrs{Attribute::make_ints("kernel_shape", {2, 2}), Attribute::make_ints("strides", {2, 2})};
  for (int order : {0, 1}) {
    auto a = attrs;
    a.push_back(Attribute::make_int("storage_order", order));
    Session s = make_session("MaxPool", {x}, a, true, 2);
    auto out = run(s, {x});
    std::vector<float> want{9, 7, 13, 15};
    std::vector<int64_t> idx = order == 0 ? std::vector<int64_t>{1, 6, 13, 14} : std::vector<int64_t>{4, 9, 7, 11};
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(out[0].data<float>()[i], want[static_cast<size_t>(i)]);
      EXPECT_EQ(out[1].data<int64_t>()[i], idx[static_cast<size_t>(i)]) << "storage_order " << order << " at " << i;
    }
    if (order == 1) continue;
    Session u = make_session("MaxUnpool", {out[0], out[1]}, attrs, true);
    Tensor y = run(u, {out[0], out[1]})[0];
    ASSERT_EQ(y.dims(), (Dims{1, 1, 4, 4}));
    for (int64_t i = 0; i < 16; ++i) {
      bool kept = i == 1 || i == 6 || i == 13 || i == 14;
      EXPECT_EQ(y.data<float>()[i], kept ? x.data<float>()[i] : 0.0f);
    }
    Tensor bad = Tensor::from_vector<int64_t>({1, 6, 10, 99}, {1, 1, 2, 2});
    EXPECT_THROW(run(u, {out[0], bad}), Error);
  }
}

TEST(RuntimePool, MaxPoolInt8) {
  Tensor x = Tensor::from_vector<int8_t>({-5, -3, -128, 7, 1, 2}, {1, 1, 6});
  Session s = make_session("MaxPool", {x}, {Attribute::make_ints("kernel_shape", {2}), Attribute::make_ints("strides", {2})}, true);
  Tensor y = run(s, {x})[0];
  ASSERT_EQ(y.dtype(), DType::Int8);
  EXPECT_EQ(y.data<int8_t>()[0], -3);
  EXPECT_EQ(y.data<int8_t>()[1], 7);
  EXPECT_EQ(y.data<int8_t>()[2], 2);
}

TEST(RuntimePool, GlobalAndLp) {
  Tensor x = Tensor::from_vector<float>({3, 4, -1, 1}, {1, 1, 2, 2});
  Session a = make_session("GlobalAveragePool", {x}, {}, true);
  EXPECT_FLOAT_EQ(run(a, {x})[0].data<float>()[0], 1.75f);
  Session m = make_session("GlobalMaxPool", {x}, {}, true);
  EXPECT_FLOAT_EQ(run(m, {x})[0].data<float>()[0], 4.0f);
  Session l = make_session("GlobalLpPool", {x}, {}, true);
  EXPECT_NEAR(run(l, {x})[0].data<float>()[0], std::sqrt(27.0f), 1e-5);
  Session lp = make_session("LpPool", {x}, {Attribute::make_ints("kernel_shape", {1, 2}), Attribute::make_int("p", 1)}, true);
  Tensor y = run(lp, {x})[0];
  ASSERT_EQ(y.dims(), (Dims{1, 1, 2, 1}));
  EXPECT_FLOAT_EQ(y.data<float>()[0], 7.0f);
  EXPECT_FLOAT_EQ(y.data<float>()[1], 2.0f);
}

TEST(RuntimePool, ResizeShapesAndModes) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor none;
  Tensor scales = Tensor::from_vector<float>({1, 1, 2, 2}, {4});
  Tensor roi = Tensor::from_vector<float>({}, {0});
  Session s = make_session("Resize", {x, roi, scales}, {Attribute::make_string("mode", "nearest")}, true);
  Tensor y = run(s, {x, roi, scales})[0];
  ASSERT_EQ(y.dims(), (Dims{1, 1, 4, 4}));
  std::vector<float> want{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
  for (int i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(y.data<float>()[i], want[static_cast<size_t>(i)]);
  // Linear, align_corners, sizes: corners are preserved exactly.
  Tensor sizes = Tensor::from_vector<int64_t>({1, 1, 3, 3}, {4});
  Session l = make_session("Resize", {x, roi, scales, sizes},
                           {Attribute::make_string("mode", "linear"),
                            Attribute::make_string("coordinate_transformation_mode", "align_corners")},
                           true);
  Tensor empty_scales = Tensor::from_vector<float>({}, {0});
  Tensor yl = run(l, {x, roi, empty_scales, sizes})[0];
  ASSERT_EQ(yl.dims(), (Dims{1, 1, 3, 3}));
  std::vector<float> wl{1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4};
  for (int i = 0; i < 9; ++i) EXPECT_FLOAT_EQ(yl.data<float>()[i], wl[static_cast<size_t>(i)]);
  // Integer nearest keeps exact values.
  Tensor xi = Tensor::from_vector<int64_t>({(int64_t{1} << 60) + 1, 2}, {1, 2});
  Tensor si = Tensor::from_vector<float>({1, 2}, {2});
  Session ni = make_session("Resize", {xi, roi, si}, {}, true);
  Tensor yi = run(ni, {xi, roi, si})[0];
  EXPECT_EQ(yi.data<int64_t>()[0], (int64_t{1} << 60) + 1);
  // Bad input: wrong number of scales, both scales and sizes.
  Tensor bad_scales = Tensor::from_vector<float>({2, 2}, {2});
  EXPECT_THROW(run(s, {x, roi, bad_scales}), Error);
  EXPECT_THROW(run(l, {x, roi, scales, sizes}), Error);
}

TEST(RuntimePool, BadInput) {
  std::mt19937 g(3);
  Tensor x = random_uniform(g, {1, 2, 5, 5});
  for (bool fast : {false, true}) {
    Session s = make_session("MaxPool", {x}, {Attribute::make_ints("kernel_shape", {3, 3})}, fast);
    EXPECT_THROW(run(s, {random_uniform(g, {1, 2, 5})}), Error);      // kernel rank vs input rank
    EXPECT_THROW(run(s, {random_uniform(g, {1, 2, 2, 2})}), Error);   // kernel larger than input
    EXPECT_THROW(run(s, {random_uniform(g, {5, 5})}), Error);         // rank < 3
  }
  Tensor rois = Tensor::from_vector<float>({0, 0, 2, 2}, {1, 4});
  Tensor bi = Tensor::from_vector<int64_t>({3}, {1});
  Session ra = make_session("RoiAlign", {x, rois, bi}, {}, true, 1, 16);
  EXPECT_THROW(run(ra, {x, rois, bi}), Error);  // batch index out of range
  Tensor grid = random_uniform(g, {1, 3, 3, 3});
  Session gs = make_session("GridSample", {x, grid}, {}, true, 1, 16);
  EXPECT_THROW(run(gs, {x, grid}), Error);  // grid's last dim must be 2
}

}  // namespace

namespace {

// ai.torch2onnx.internal::BlockedGlobalPool on its own, at every block size the runtime uses (16
// with AVX-512, 8 on AVX2 machines; 1 takes the portable loop too): against the pooled logical
// channels, lanes past the channel count holding garbage that must not leak, a NaN that must win
// a max, two images, 1 and 2 threads.
TEST(RuntimePool, BlockedGlobalPoolEveryBlockSize) {
  std::mt19937 g(53);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (int64_t blk : {1, 8, 16})
    for (int64_t c : {5, 16, 20})
      for (bool max : {false, true}) {
        const int64_t n = 2, h = 3, w = 4, cb = (c + blk - 1) / blk;
        Tensor x(DType::Float, {n, cb, h, w, blk});
        for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(g);
        // Padded lanes: a huge value that would show in both a sum and a max.
        for (int64_t i = 0; i < x.numel(); ++i)
          if ((i / (h * w * blk)) % cb * blk + i % blk >= c) x.data<float>()[i] = 1e30f;
        const int64_t nan_at = ((1 * cb + 0) * h * w + 5) * blk + 1 % blk;  // image 1, channel 1 % blk
        x.data<float>()[nan_at] = std::nanf("");
        Model m = one_node("BlockedGlobalPool", {{"x", x}},
                           {Attribute::make_string("kind", max ? "max" : "avg"), Attribute::make_int("block", blk),
                            Attribute::make_int("channels", c)});
        m.graph.nodes[0].domain = kInternalDomain;
        m.opset_import.push_back({kInternalDomain, 1});
        const std::string what = "block " + std::to_string(blk) + " channels " + std::to_string(c) + (max ? " max" : " avg");
        for (int threads : {1, 2}) {
          Tensor y = t2o::test::run(m, {{"x", x}}, true, threads)[0];
          ASSERT_EQ(y.dims(), (Dims{n, c, 1, 1})) << what;
          for (int64_t img = 0; img < n; ++img)
            for (int64_t ch = 0; ch < c; ++ch) {
              float acc = max ? -std::numeric_limits<float>::infinity() : 0.0f;
              bool nan = false;
              for (int64_t p = 0; p < h * w; ++p) {
                const float v = x.data<float>()[((img * cb + ch / blk) * h * w + p) * blk + ch % blk];
                nan |= std::isnan(v);
                acc = max ? std::max(acc, v) : acc + v;
              }
              const float got = y.data<float>()[img * c + ch];
              if (nan) {
                EXPECT_TRUE(std::isnan(got)) << what << " image " << img << " channel " << ch;
              } else {
                EXPECT_NEAR(got, max ? acc : acc / static_cast<float>(h * w), 1e-5) << what << " image " << img << " channel " << ch;
              }
            }
        }
      }
}

}  // namespace
