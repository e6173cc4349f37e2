// RNN/GRU/LSTM kernels: cases the ONNX tests leave open (reverse and bidirectional runs, layout 1,
// sequence_lens, a hand-computed GRU step, activations with parameters) and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/kernels/rnn_fast.h"
#include "runtime/session.h"
#include "test_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

// Runs one recurrent node; undefined inputs are left absent, inputs listed in `consts` become
// initializers. Returns all node outputs.
std::vector<Tensor> run_rnn(const std::string& op, const std::vector<Tensor>& ins, const std::vector<Attribute>& attrs,
                            int n_out, int threads = 1, bool fast = true, const std::set<size_t>& consts = {}) {
  Model m;
  m.opset_import = {{"", 14}};
  Node n;
  n.op_type = op;
  n.name = "rnn";
  n.attributes = attrs;
  std::map<std::string, RValue> feeds;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i].defined()) {
      n.inputs.push_back("");
      continue;
    }
    std::string name = "x" + std::to_string(i);
    if (consts.count(i)) {
      m.graph.initializers.push_back({name, ins[i], {}});
      n.inputs.push_back(name);
      continue;
    }
    m.graph.inputs.push_back({name, Type::tensor(ins[i].dtype(), Shape::of(ins[i].dims())), {}});
    n.inputs.push_back(name);
    feeds[name] = ins[i];
  }
  for (int k = 0; k < n_out; ++k) {
    n.outputs.push_back("y" + std::to_string(k));
    m.graph.outputs.push_back({"y" + std::to_string(k), Type::tensor(ins[0].dtype()), {}});
  }
  m.graph.nodes.push_back(n);
  Session s(std::move(m), {.threads = threads, .fast_paths = fast});
  auto out = s.run(feeds);
  std::vector<Tensor> r;
  for (int k = 0; k < n_out; ++k) r.push_back(out.at("y" + std::to_string(k)).tensor);
  return r;
}

void expect_near(const Tensor& a, const Tensor& b, double tol = 1e-5) {
  ASSERT_EQ(a.dims(), b.dims());
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.as_double(i), b.as_double(i), tol) << "at " << i;
}

// Picks direction d of a [D, ...] tensor.
Tensor dir(const Tensor& t, int64_t d) {
  Dims sub(t.dims().begin() + 1, t.dims().end());
  Tensor r(t.dtype(), sub);
  int64_t n = r.numel();
  for (int64_t i = 0; i < n; ++i) r.data<float>()[i] = t.data<float>()[d * n + i];
  Dims one = sub;
  one.insert(one.begin(), 1);
  return r.reshaped(one);
}

// Y [S, D, B, H] direction d as [S, 1, B, H].
Tensor y_dir(const Tensor& y, int64_t d) {
  int64_t S = y.dim(0), D = y.dim(1), BH = y.dim(2) * y.dim(3);
  Tensor r(DType::Float, {S, 1, y.dim(2), y.dim(3)});
  for (int64_t t = 0; t < S; ++t)
    for (int64_t i = 0; i < BH; ++i) r.data<float>()[t * BH + i] = y.data<float>()[(t * D + d) * BH + i];
  return r;
}

TEST(RnnKernels, BidirectionalLstmEqualsForwardPlusReverse) {
  std::mt19937 g(1);
  int64_t S = 5, B = 3, I = 4, H = 6;
  Tensor X = random_uniform(g, {S, B, I}), W = random_uniform(g, {2, 4 * H, I}), R = random_uniform(g, {2, 4 * H, H});
  Tensor Bs = random_uniform(g, {2, 8 * H}), P = random_uniform(g, {2, 3 * H});
  Tensor h0 = random_uniform(g, {2, B, H}), c0 = random_uniform(g, {2, B, H});
  auto hs = Attribute::make_int("hidden_size", H);
  auto bi = run_rnn("LSTM", {X, W, R, Bs, Tensor(), h0, c0, P}, {hs, Attribute::make_string("direction", "bidirectional")}, 3);
  auto fw = run_rnn("LSTM", {X, dir(W, 0), dir(R, 0), dir(Bs, 0), Tensor(), dir(h0, 0), dir(c0, 0), dir(P, 0)}, {hs}, 3);
  auto rv = run_rnn("LSTM", {X, dir(W, 1), dir(R, 1), dir(Bs, 1), Tensor(), dir(h0, 1), dir(c0, 1), dir(P, 1)},
                    {hs, Attribute::make_string("direction", "reverse")}, 3);
  expect_near(y_dir(bi[0], 0), fw[0]);
  expect_near(y_dir(bi[0], 1), rv[0]);
  expect_near(dir(bi[1], 0), fw[1]);
  expect_near(dir(bi[2], 1), rv[2]);
}

TEST(RnnKernels, ReverseEqualsForwardOnReversedSequence) {
  std::mt19937 g(2);
  int64_t S = 4, B = 2, I = 3, H = 5;
  Tensor X = random_uniform(g, {S, B, I}), W = random_uniform(g, {1, 3 * H, I}), R = random_uniform(g, {1, 3 * H, H});
  Tensor Xr(DType::Float, X.dims());
  for (int64_t t = 0; t < S; ++t)
    for (int64_t i = 0; i < B * I; ++i) Xr.data<float>()[t * B * I + i] = X.data<float>()[(S - 1 - t) * B * I + i];
  for (int lbr = 0; lbr < 2; ++lbr) {
    std::vector<Attribute> a{Attribute::make_int("hidden_size", H), Attribute::make_int("linear_before_reset", lbr)};
    auto fw = run_rnn("GRU", {Xr, W, R}, a, 2);
    a.push_back(Attribute::make_string("direction", "reverse"));
    auto rv = run_rnn("GRU", {X, W, R}, a, 2);
    expect_near(fw[1], rv[1]);
    for (int64_t t = 0; t < S; ++t)
      for (int64_t i = 0; i < B * H; ++i)
        EXPECT_NEAR(rv[0].data<float>()[t * B * H + i], fw[0].data<float>()[(S - 1 - t) * B * H + i], 1e-5);
  }
}

TEST(RnnKernels, Layout1IsTransposedLayout0) {
  std::mt19937 g(3);
  int64_t S = 3, B = 2, I = 2, H = 3;
  Tensor X = random_uniform(g, {S, B, I}), W = random_uniform(g, {1, H, I}), R = random_uniform(g, {1, H, H});
  Tensor Xt(DType::Float, {B, S, I});
  for (int64_t t = 0; t < S; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < I; ++i) Xt.data<float>()[(b * S + t) * I + i] = X.data<float>()[(t * B + b) * I + i];
  auto hs = Attribute::make_int("hidden_size", H);
  auto l0 = run_rnn("RNN", {X, W, R}, {hs}, 2);
  auto l1 = run_rnn("RNN", {Xt, W, R}, {hs, Attribute::make_int("layout", 1)}, 2);
  ASSERT_EQ(l1[0].dims(), (Dims{B, S, 1, H}));
  ASSERT_EQ(l1[1].dims(), (Dims{B, 1, H}));
  for (int64_t t = 0; t < S; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        EXPECT_NEAR(l1[0].data<float>()[(b * S + t) * H + h], l0[0].data<float>()[(t * B + b) * H + h], 1e-6);
}

TEST(RnnKernels, SequenceLensStopEachBatchRow) {
  std::mt19937 g(4);
  int64_t S = 4, B = 2, I = 2, H = 3;
  Tensor X = random_uniform(g, {S, B, I}), W = random_uniform(g, {1, 4 * H, I}), R = random_uniform(g, {1, 4 * H, H});
  Tensor lens = Tensor::from_vector<int32_t>({4, 2}, {2});
  auto out = run_rnn("LSTM", {X, W, R, Tensor(), lens}, {Attribute::make_int("hidden_size", H)}, 2);
  const float* y = out[0].data<float>();
  for (int64_t h = 0; h < H; ++h) {
    EXPECT_EQ(y[(2 * B + 1) * H + h], 0.f);  // row 1 past its length is zero
    EXPECT_EQ(y[(3 * B + 1) * H + h], 0.f);
    EXPECT_FLOAT_EQ(out[1].data<float>()[1 * H + h], y[(1 * B + 1) * H + h]);  // Y_h = last valid step
    EXPECT_FLOAT_EQ(out[1].data<float>()[h], y[(3 * B + 0) * H + h]);
  }
}

TEST(RnnKernels, GruStepByHand) {
  // One step, one unit: z = σ(wz x), r = σ(wr x), h~ = tanh(wh x + rh (r·h0)), h = (1-z) h~ + z h0.
  float x = 0.5f, h0 = -0.3f, wz = 0.2f, wr = -0.4f, wh = 0.7f, rz = 0.1f, rr = 0.3f, rh = -0.6f;
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  double z = sig(wz * x + rz * h0), r = sig(wr * x + rr * h0);
  double ht = std::tanh(wh * x + rh * (r * h0));
  double want = (1 - z) * ht + z * h0;
  auto out = run_rnn("GRU",
                     {Tensor::from_vector<float>({x}, {1, 1, 1}), Tensor::from_vector<float>({wz, wr, wh}, {1, 3, 1}),
                      Tensor::from_vector<float>({rz, rr, rh}, {1, 3, 1}), Tensor(), Tensor(),
                      Tensor::from_vector<float>({h0}, {1, 1, 1})},
                     {Attribute::make_int("hidden_size", 1)}, 2);
  EXPECT_NEAR(out[1].data<float>()[0], want, 1e-6);
}

TEST(RnnKernels, ParameterisedActivation) {
  // RNN with Affine(α=2, β=1) and no recurrence input: h = 2 (w x) + 1.
  auto out = run_rnn("RNN",
                     {Tensor::from_vector<float>({1.5f}, {1, 1, 1}), Tensor::from_vector<float>({0.5f}, {1, 1, 1}),
                      Tensor::from_vector<float>({0.f}, {1, 1, 1})},
                     {Attribute::make_int("hidden_size", 1), Attribute::make_strings("activations", {"Affine"}),
                      Attribute::make_floats("activation_alpha", {2.f}), Attribute::make_floats("activation_beta", {1.f})},
                     1);
  EXPECT_NEAR(out[0].data<float>()[0], 2 * 0.75 + 1, 1e-6);
}

TEST(RnnKernels, ThreadedBatchMatchesSerial) {
  std::mt19937 g(6);
  int64_t S = 7, B = 5, I = 9, H = 11;
  Tensor X = random_uniform(g, {S, B, I}), W = random_uniform(g, {2, 3 * H, I}), R = random_uniform(g, {2, 3 * H, H});
  Tensor Bs = random_uniform(g, {2, 6 * H});
  Tensor lens = Tensor::from_vector<int32_t>({7, 3, 5, 0, 6}, {5});
  std::vector<Attribute> a{Attribute::make_int("hidden_size", H), Attribute::make_string("direction", "bidirectional")};
  auto one = run_rnn("GRU", {X, W, R, Bs, lens}, a, 2, 1);
  auto two = run_rnn("GRU", {X, W, R, Bs, lens}, a, 2, 2);
  EXPECT_TRUE(one[0].equals(two[0]));
  EXPECT_TRUE(one[1].equals(two[1]));
}

// The fast path against the reference kernel: every cell it takes (RNN with each activation it
// supports, GRU both ways, LSTM with and without peepholes and initial states), each direction,
// both layouts, clip, sequence lengths, weights as inputs and as initializers, random sizes.
TEST(RnnKernels, FastPathMatchesReference) {
  for (unsigned seed : {11u, 12u, 13u, 14u}) {
  std::mt19937 g(seed);
  struct Cfg {
    std::string op;
    std::vector<std::string> acts;
    bool lbr = false;
  };
  std::vector<Cfg> cells = {{"RNN", {"Tanh"}}, {"RNN", {"Relu"}},     {"RNN", {"Sigmoid"}}, {"GRU", {}},
                            {"GRU", {}, true}, {"LSTM", {}},         {"LSTM", {"sigmoid", "tanh", "tanh"}}};
  int n = 0;
  for (const Cfg& cell : cells)
    for (std::string dirn : {"forward", "reverse", "bidirectional"})
      for (int64_t layout : {0, 1}) {
        if (layout == 1 && dirn == "bidirectional") continue;  // reference kernel only
        ++n;
        int64_t G = cell.op == "RNN" ? 1 : cell.op == "GRU" ? 3 : 4, D = dirn == "bidirectional" ? 2 : 1;
        int64_t S = 1 + g() % 9, B = 1 + g() % 4, I = 1 + g() % 23, H = 1 + g() % 37;
        bool lstm = cell.op == "LSTM";
        Tensor X = random_uniform(g, layout == 0 ? Dims{S, B, I} : Dims{B, S, I});
        // Weights scaled as PyTorch initialises them (±1/sqrt(fan-in)): with ±1 a recurrence of
        // 20 units is chaotic and float rounding alone grows step by step.
        float ws = 1.0f / std::sqrt(float(I)), rs = 1.0f / std::sqrt(float(H));
        Tensor W = random_uniform(g, {D, G * H, I}, -ws, ws), R = random_uniform(g, {D, G * H, H}, -rs, rs);
        Tensor Bs = random_uniform(g, {D, 2 * G * H});
        Dims sd = layout == 0 ? Dims{D, B, H} : Dims{B, D, H};
        Tensor h0 = random_uniform(g, sd), c0 = random_uniform(g, sd), P = random_uniform(g, {D, 3 * H});
        // Every row at full length, or rows of random lengths (0 included).
        std::vector<int32_t> lv(static_cast<size_t>(B), static_cast<int32_t>(S));
        if (n % 4 == 3)
          for (auto& l : lv) l = static_cast<int32_t>(g() % (S + 1));
        Tensor lens = Tensor::from_vector<int32_t>(lv, {B});
        std::vector<Attribute> a{Attribute::make_int("hidden_size", H), Attribute::make_string("direction", dirn),
                                 Attribute::make_int("layout", layout)};
        if (cell.lbr) a.push_back(Attribute::make_int("linear_before_reset", 1));
        if (n % 5 == 2) a.push_back(Attribute::make_float("clip", 0.7f));
        if (!cell.acts.empty()) {
          std::vector<std::string> acts;
          for (int64_t d = 0; d < D; ++d) acts.insert(acts.end(), cell.acts.begin(), cell.acts.end());
          a.push_back(Attribute::make_strings("activations", acts));
        }
        std::vector<Tensor> ins{X, W, R};
        // Alternate what is given: bias, full sequence_lens, initial states, peepholes.
        if (n % 3 != 0) ins.push_back(Bs);
        else ins.push_back(Tensor());
        ins.push_back(n % 2 == 1 ? lens : Tensor());
        if (n % 2 == 0) {
          ins.push_back(h0);
          if (lstm) ins.push_back(n % 4 == 0 ? c0 : Tensor());
        }
        if (lstm && n % 3 == 1) {
          while (ins.size() < 7) ins.push_back(Tensor());
          ins.push_back(P);
        }
        std::set<size_t> consts;
        if (n % 2 == 1) consts = {1, 2, 3, 7};
        for (size_t i = 0; i < ins.size(); ++i)
          if (!ins[i].defined()) consts.erase(i);
        int outs = lstm ? 3 : 2;
        auto ref = run_rnn(cell.op, ins, a, outs, 1, false, consts);
        uint64_t before = kern::rnn_fast_runs();
        auto fast = run_rnn(cell.op, ins, a, outs, 2, true, consts);
        EXPECT_EQ(kern::rnn_fast_runs(), before + 1) << "the fast path was not taken";
        SCOPED_TRACE(cell.op + " " + dirn + " layout " + std::to_string(layout) + " S" + std::to_string(S) + " B" +
                     std::to_string(B) + " I" + std::to_string(I) + " H" + std::to_string(H));
        // Relu RNNs grow large values: the tolerance is relative to each reference value past 1.
        for (int k = 0; k < outs; ++k) {
          const Tensor &r = ref[static_cast<size_t>(k)], &f = fast[static_cast<size_t>(k)];
          ASSERT_EQ(r.dims(), f.dims());
          for (int64_t i = 0; i < r.numel(); ++i)
            EXPECT_NEAR(r.as_double(i), f.as_double(i), 2e-5 * std::max(1.0, std::fabs(r.as_double(i)))) << "output " << k << " at " << i;
        }
      }
  }
}

// A NaN in one batch row's input poisons that row's states from its step on, in the fast path as in
// the reference (clamps inside exp / clip / relu must not turn it into a number); other rows stay
// finite and equal.
TEST(RnnKernels, FastPathKeepsNaN) {
  std::mt19937 g(21);
  for (std::string op : {"LSTM", "GRU", "RNN"})
    for (bool clip : {false, true}) {
      SCOPED_TRACE(op + (clip ? " clip" : ""));
      int64_t G = op == "RNN" ? 1 : op == "GRU" ? 3 : 4, S = 5, B = 3, I = 7, H = 19;
      Tensor X = random_uniform(g, {S, B, I});
      X.data<float>()[(2 * B + 1) * I + 3] = std::numeric_limits<float>::quiet_NaN();  // step 2, row 1
      Tensor W = random_uniform(g, {1, G * H, I}, -0.3f, 0.3f), R = random_uniform(g, {1, G * H, H}, -0.2f, 0.2f);
      std::vector<Attribute> a{Attribute::make_int("hidden_size", H)};
      if (clip) a.push_back(Attribute::make_float("clip", 0.7f));
      if (op == "RNN") a.push_back(Attribute::make_strings("activations", {"Relu"}));
      int outs = op == "LSTM" ? 3 : 2;
      auto ref = run_rnn(op, {X, W, R}, a, outs, 1, false);
      uint64_t before = kern::rnn_fast_runs();
      auto fast = run_rnn(op, {X, W, R}, a, outs, 1, true);
      ASSERT_EQ(kern::rnn_fast_runs(), before + 1) << "the fast path was not taken";
      const Tensor &yr = ref[0], &yf = fast[0];  // [S, 1, B, H]
      int nan_rows = 0;
      for (int64_t t = 0; t < S; ++t)
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < H; ++h) {
            int64_t i = (t * B + b) * H + h;
            double r = yr.as_double(i), f = yf.as_double(i);
            bool poisoned = b == 1 && t >= 2;
            if (std::isnan(r)) ++nan_rows;
            EXPECT_EQ(std::isnan(r), std::isnan(f)) << "t " << t << " b " << b << " h " << h;
            if (!poisoned) {
              EXPECT_FALSE(std::isnan(f)) << "t " << t << " b " << b << " h " << h;
              EXPECT_NEAR(r, f, 2e-5 * std::max(1.0, std::fabs(r)));
            }
          }
      EXPECT_GT(nan_rows, 0) << "the reference kept no NaN";
      for (int k = 1; k < outs; ++k)  // final states: row 1 NaN somewhere, others finite
        for (int64_t i = 0; i < ref[static_cast<size_t>(k)].numel(); ++i)
          EXPECT_EQ(std::isnan(ref[static_cast<size_t>(k)].as_double(i)), std::isnan(fast[static_cast<size_t>(k)].as_double(i)))
              << "output " << k << " at " << i;
    }
}

TEST(RnnKernels, BadInputThrows) {
  std::mt19937 g(5);
  auto hs = Attribute::make_int("hidden_size", 3);
  Tensor X = random_uniform(g, {2, 1, 2});
  EXPECT_THROW(run_rnn("LSTM", {X, random_uniform(g, {1, 11, 2}), random_uniform(g, {1, 12, 3})}, {hs}, 1), Error);
  EXPECT_THROW(run_rnn("GRU", {random_uniform(g, {2, 2}), random_uniform(g, {1, 9, 2}), random_uniform(g, {1, 9, 3})}, {hs}, 1), Error);
  EXPECT_THROW(run_rnn("RNN", {X, random_uniform(g, {1, 3, 2}), random_uniform(g, {1, 3, 3}), Tensor(),
                               Tensor::from_vector<int32_t>({5}, {1})}, {hs}, 1),
               Error);
  EXPECT_THROW(run_rnn("RNN", {X, random_uniform(g, {1, 3, 2}), random_uniform(g, {1, 3, 3})},
                       {hs, Attribute::make_strings("activations", {"Bogus"})}, 1),
               Error);
}

}  // namespace
