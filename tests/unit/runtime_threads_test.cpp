// One Session run from many threads at once: the results must equal a single-threaded run, bit
// for bit. The model takes the paths with state shared between runs: oneDNN convs (primitive
// caches keyed by shape, prepacked and run-time weights, a fused residual sum), pooling,
// Gemm/MatMul and the buffer pool; every thread moves through more batch sizes than the
// primitive caches hold, so entries are evicted while other threads use them. The first test is
// also built with ThreadSanitizer (-DT2O_TSAN=ON, run by scripts/test.sh; the second one's
// sessions use OpenMP threads, which ThreadSanitizer does not see).
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "runtime/kernels/conv_dnnl.h"
#include "runtime/kernels/util.h"
#include "runtime/session.h"
#include "test_support.h"

using namespace t2o;

namespace {

// x f32[batch,3,8,8], w f32[6,4,3,3] (a run-time conv weight) ->
//   c1 = Relu(Conv(x, W1, B1)); c2 = Conv(c1, W2) + c1 (fused sum); p = MaxPool(c2);
//   c3 = Conv(p, w); g = Flatten(GlobalAveragePool(c3));
//   y = Softmax(Gemm(g, W3, B3)); z = MatMul(g, W4)
Model shared_state_model() {
  std::mt19937 rng(7);
  Model m;
  m.opset_import = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back({"x", Type::tensor(DType::Float, Shape{{Dim::named("batch"), Dim::fixed(3), Dim::fixed(8), Dim::fixed(8)}}), ""});
  g.inputs.push_back({"w", Type::tensor(DType::Float, Shape::of({6, 4, 3, 3})), ""});
  auto init = [&](const std::string& name, const Dims& d) { g.initializers.push_back({name, test::random_normal(rng, d, 0.3f), ""}); };
  init("W1", {4, 3, 3, 3});
  init("B1", {4});
  init("W2", {4, 4, 3, 3});
  init("W3", {5, 6});
  init("B3", {5});
  init("W4", {6, 4});
  Attribute pads = Attribute::make_ints("pads", {1, 1, 1, 1});
  g.nodes.push_back(test::make_node("Conv", {"x", "W1", "B1"}, {"a1"}, {pads}));
  g.nodes.push_back(test::make_node("Relu", {"a1"}, {"c1"}));
  g.nodes.push_back(test::make_node("Conv", {"c1", "W2"}, {"a2"}, {pads}));
  g.nodes.push_back(test::make_node("Add", {"a2", "c1"}, {"c2"}));
  g.nodes.push_back(test::make_node("MaxPool", {"c2"}, {"p"}, {Attribute::make_ints("kernel_shape", {2, 2}), Attribute::make_ints("strides", {2, 2})}));
  g.nodes.push_back(test::make_node("Conv", {"p", "w"}, {"c3"}));
  g.nodes.push_back(test::make_node("GlobalAveragePool", {"c3"}, {"gp"}));
  g.nodes.push_back(test::make_node("Flatten", {"gp"}, {"f"}));
  g.nodes.push_back(test::make_node("Gemm", {"f", "W3", "B3"}, {"l"}, {Attribute::make_int("transB", 1)}));
  g.nodes.push_back(test::make_node("Softmax", {"l"}, {"y"}));
  g.nodes.push_back(test::make_node("MatMul", {"f", "W4"}, {"z"}));
  g.outputs.push_back({"y", Type::tensor(DType::Float, Shape{{Dim::named("batch"), Dim::fixed(5)}}), ""});
  g.outputs.push_back({"z", Type::tensor(DType::Float, Shape{{Dim::named("batch"), Dim::fixed(4)}}), ""});
  return m;
}

constexpr int kThreads = 8;
constexpr int kRuns = 200;
constexpr int kBatches = 18;  // more shapes than the conv primitive caches keep (16)

struct Feed {
  Tensor x, w;
  Tensor y, z;  // expected outputs
};

}  // namespace

TEST(SessionThreads, ConcurrentRunsMatchASingleThreadedRun) {
  SessionOptions so;
  so.threads = 1;  // one Session, many callers: each run uses one thread of its own
  Session s(shared_state_model(), so);
  std::mt19937 rng(11);
  Tensor w = test::random_normal(rng, {6, 4, 3, 3}, 0.3f);
  std::vector<Feed> feeds;
  for (int b = 1; b <= kBatches; ++b) {
    Feed f{test::random_normal(rng, {b, 3, 8, 8}), w, {}, {}};
    auto out = s.run({{"x", f.x}, {"w", f.w}});
    f.y = out.at("y").tensor.clone();
    f.z = out.at("z").tensor.clone();
    feeds.push_back(std::move(f));
  }
  // The answers do not depend on what the caches hold: a fresh Session gives the same bits.
  Session fresh(shared_state_model(), so);
  auto check = fresh.run({{"x", feeds[3].x}, {"w", w}});
  ASSERT_TRUE(check.at("y").tensor.equals(feeds[3].y));

  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      // Half the threads let the runtime allocate outputs, half write into their own buffers.
      std::vector<float> ybuf, zbuf;
      for (int i = 0; i < kRuns; ++i) {
        const Feed& f = feeds[static_cast<size_t>((t * 7 + i) % kBatches)];
        try {
          Tensor y, z;
          if (t % 2 == 0) {
            auto out = s.run({{"x", f.x}, {"w", f.w}});
            y = out.at("y").tensor;
            z = out.at("z").tensor;
          } else {
            ybuf.assign(static_cast<size_t>(f.y.numel()), -1.0f);
            zbuf.assign(static_cast<size_t>(f.z.numel()), -1.0f);
            y = Tensor::borrow(DType::Float, f.y.dims(), ybuf.data());
            z = Tensor::borrow(DType::Float, f.z.dims(), zbuf.data());
            s.run({{"x", f.x}, {"w", f.w}}, {{"y", y}, {"z", z}});
          }
          if (!y.equals(f.y) || !z.equals(f.z)) ++mismatches;
        } catch (const std::exception&) {
          ++errors;
        }
      }
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0) << "of " << kThreads * kRuns << " runs";
}

// A session of two threads run from several callers at once. With idle threads sleeping (the
// runtime_threads_passive_wait run of this file) its blocked convs are cut into tasks
// (task_pool.h): one caller's tasks go to the pool, the others', finding it busy, run on their own
// thread, through the same shared primitives. Every result must equal the first run's, bit for bit.
TEST(SessionThreads, TwoThreadSessionsFromManyCallers) {
  std::mt19937 rng(5);
  Model m;
  m.opset_import = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back({"x", Type::tensor(DType::Float, Shape::of({1, 32, 28, 28})), ""});
  auto init = [&](const std::string& name, const Dims& d, float s) { g.initializers.push_back({name, test::random_normal(rng, d, s), ""}); };
  init("W0", {64, 32, 1, 1}, 0.2f);
  init("W1", {96, 64, 1, 1}, 0.15f);
  init("B1", {96}, 0.1f);
  init("W2", {48, 96, 1, 1}, 0.1f);
  init("W3", {24, 48, 3, 3}, 0.05f);
  // c0, c1 and c2 stay blocked (1x1 convs, and a 3x3 conv reading whole channel blocks).
  g.nodes.push_back(test::make_node("Conv", {"x", "W0"}, {"a0"}));
  g.nodes.push_back(test::make_node("Relu", {"a0"}, {"c0"}));
  g.nodes.push_back(test::make_node("Conv", {"c0", "W1", "B1"}, {"a1"}));
  g.nodes.push_back(test::make_node("Relu", {"a1"}, {"c1"}));
  g.nodes.push_back(test::make_node("Conv", {"c1", "W2"}, {"a2"}));
  g.nodes.push_back(test::make_node("Relu", {"a2"}, {"c2"}));
  g.nodes.push_back(test::make_node("Conv", {"c2", "W3"}, {"y"}, {Attribute::make_ints("pads", {1, 1, 1, 1})}));
  g.outputs.push_back({"y", Type::tensor(DType::Float, Shape::of({1, 24, 28, 28})), ""});
  SessionOptions so;
  so.threads = 2;
  Session s(m, so);
  std::vector<Tensor> xs, want;
  for (int i = 0; i < 4; ++i) {
    xs.push_back(test::random_normal(rng, {1, 32, 28, 28}));
    want.push_back(s.run({{"x", xs.back()}}).at("y").tensor.clone());
  }
  const uint64_t parts_before = kern::DnnlConv::runs_in_parts_so_far();
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        const size_t k = static_cast<size_t>((t + i) % 4);
        try {
          if (!s.run({{"x", xs[k]}}).at("y").tensor.equals(want[k])) ++mismatches;
        } catch (const std::exception&) {
          ++errors;
        }
      }
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0) << "of 400 runs";
  // Sleeping threads, AVX-512: the 64 -> 96 and 96 -> 48 convs ran in parts, 400 times each.
  if (kern::omp_waits_passively() && kern::channel_block() == 16)
    EXPECT_GE(kern::DnnlConv::runs_in_parts_so_far() - parts_before, 800u);
}
