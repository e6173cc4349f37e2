// MatMul, Gemm, Einsum, MatMulInteger, QLinearMatMul, Det: known values, bad input, and the
// oneDNN fast path against the reference kernels on random shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>

#include "runtime/session.h"
#include "test_support.h"

using namespace t2o;
using namespace t2o::test;

namespace {

TEST(RuntimeMatmul, MatMulKnownValues) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2});
  std::vector<In> ins{{"a", a}, {"b", b}};
  for (bool fast : {false, true}) {
    auto y = run(one_node("MatMul", ins), ins, fast)[0];
    expect_close(Tensor::from_vector<float>({4, 5, 10, 11}, {2, 2}), y);
  }
  // 1-D operands are promoted and the added dims removed again.
  Tensor v = Tensor::from_vector<float>({1, 1, 1}, {3});
  std::vector<In> vi{{"a", v}, {"b", b}};
  expect_close(Tensor::from_vector<float>({2, 2}, {2}), run(one_node("MatMul", vi), vi, true)[0]);
  std::vector<In> iv{{"a", a}, {"b", v}};
  expect_close(Tensor::from_vector<float>({6, 15}, {2}), run(one_node("MatMul", iv), iv, true)[0]);
  Tensor ai = Tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  std::vector<In> ii{{"a", ai}, {"b", ai}};
  EXPECT_TRUE(run(one_node("MatMul", ii), ii, true)[0].equals(Tensor::from_vector<int64_t>({7, 10, 15, 22}, {2, 2})));
}

TEST(RuntimeMatmul, MatMulDifferentialRandomShapes) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> sz(1, 40);
  for (int it = 0; it < 30; ++it) {
    int64_t M = sz(rng), K = sz(rng), N = sz(rng);
    Dims ad, bd;
    switch (it % 5) {
      case 0: ad = {M, K}; bd = {K, N}; break;
      case 1: ad = {3, M, K}; bd = {3, K, N}; break;
      case 2: ad = {2, 3, M, K}; bd = {K, N}; break;
      case 3: ad = {2, 1, M, K}; bd = {3, K, N}; break;  // both sides broadcast: reference
      case 4: ad = {M, K}; bd = {4, K, N}; break;
    }
    bool const_b = it % 2 == 0;
    std::vector<In> ins{{"a", random_normal(rng, ad)}, {"b", random_normal(rng, bd), const_b}};
    differential(one_node("MatMul", ins), ins);
  }
}

TEST(RuntimeMatmul, GemmDifferentialRandomShapes) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> sz(1, 33);
  for (int it = 0; it < 32; ++it) {
    int64_t M = sz(rng), K = sz(rng), N = sz(rng);
    bool ta = it & 1, tb = it & 2, const_b = it & 4;
    int c_kind = (it / 8) % 4;  // none, (N), (M,N), (1,1)
    float alpha = it % 3 == 0 ? 1.0f : 0.5f, beta = it % 5 == 0 ? 1.0f : 2.0f;
    std::vector<In> ins{{"a", random_normal(rng, ta ? Dims{K, M} : Dims{M, K})},
                        {"b", random_normal(rng, tb ? Dims{N, K} : Dims{K, N}), const_b}};
    if (c_kind == 1) ins.push_back({"c", random_normal(rng, {N}), const_b});
    if (c_kind == 2) ins.push_back({"c", random_normal(rng, {M, N})});
    if (c_kind == 3) ins.push_back({"c", random_normal(rng, {1, 1})});
    Model m = one_node("Gemm", ins,
                       {Attribute::make_int("transA", ta), Attribute::make_int("transB", tb),
                        Attribute::make_float("alpha", alpha), Attribute::make_float("beta", beta)});
    differential(m, ins);
  }
}

// Up to four rows times constant weights take a panel loop over oneDNN's packed copy: every
// row count, K odd and even, N within one 64-column panel, across several and with a partial
// last one, each of Gemm's epilogues (alpha, beta with C as a row or a full matrix), transposed A.
TEST(RuntimeMatmul, FewRowsTimesConstantWeights) {
  std::mt19937 rng(13);
  int it = 0;
  for (int64_t M : {1, 2, 3, 4, 5})
    for (int64_t K : {1, 7, 300})
      for (int64_t N : {3, 64, 130, 1000}) {
        ++it;
        bool ta = it % 3 == 0, tb = it % 2 == 0;
        int c_kind = it % 3;  // none, (N), (M,N)
        float alpha = it % 4 == 0 ? 0.5f : 1.0f, beta = it % 5 == 0 ? 1.0f : 2.0f;
        std::vector<In> ins{{"a", random_normal(rng, ta ? Dims{K, M} : Dims{M, K})},
                            {"b", random_normal(rng, tb ? Dims{N, K} : Dims{K, N}), true}};
        if (c_kind == 1) ins.push_back({"c", random_normal(rng, {N}), true});
        if (c_kind == 2) ins.push_back({"c", random_normal(rng, {M, N})});
        SCOPED_TRACE("M " + std::to_string(M) + " K " + std::to_string(K) + " N " + std::to_string(N));
        differential(one_node("Gemm", ins,
                              {Attribute::make_int("transA", ta), Attribute::make_int("transB", tb),
                               Attribute::make_float("alpha", alpha), Attribute::make_float("beta", beta)}),
                     ins);
        std::vector<In> mins{{"a", random_normal(rng, {1, M, K})}, {"b", random_normal(rng, {K, N}), true}};
        differential(one_node("MatMul", mins), mins);
      }
}

TEST(RuntimeMatmul, BadShapesThrow) {
  std::mt19937 rng(1);
  std::vector<In> ins{{"a", random_normal(rng, {2, 3})}, {"b", random_normal(rng, {4, 2})}};
  EXPECT_THROW(run(one_node("MatMul", ins), ins, true), Error);
  std::vector<In> g{{"a", random_normal(rng, {2, 3, 1})}, {"b", random_normal(rng, {3, 2})}};
  EXPECT_THROW(run(one_node("Gemm", g), g, true), Error);
  std::vector<In> gc{{"a", random_normal(rng, {2, 3})}, {"b", random_normal(rng, {3, 2})}, {"c", random_normal(rng, {3})}};
  EXPECT_THROW(run(one_node("Gemm", gc), gc, true), Error);
  std::vector<In> d{{"x", random_normal(rng, {2, 3})}};
  EXPECT_THROW(run(one_node("Det", d), d, true), Error);
  std::vector<In> e{{"x", random_normal(rng, {2, 3})}};
  EXPECT_THROW(run(one_node("Einsum", e, {Attribute::make_string("equation", "ijk->i")}), e, true), Error);
  EXPECT_THROW(run(one_node("Einsum", e, {Attribute::make_string("equation", "ij,jk->i")}), e, true), Error);
  EXPECT_THROW(run(one_node("Einsum", e, {Attribute::make_string("equation", "i1->i")}), e, true), Error);
}

TEST(RuntimeMatmul, EinsumForms) {
  Tensor sq = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  auto ein = [&](const std::string& eq, std::vector<In> ins) {
    return run(one_node("Einsum", ins, {Attribute::make_string("equation", eq)}), ins, true)[0];
  };
  expect_close(Tensor::from_vector<float>({5}, {}), ein("ii", {{"x", sq}}));
  expect_close(Tensor::from_vector<float>({1, 4}, {2}), ein("ii->i", {{"x", sq}}));
  expect_close(Tensor::from_vector<float>({1, 3, 2, 4}, {2, 2}), ein("ij->ji", {{"x", sq}}));
  expect_close(Tensor::from_vector<float>({7, 10, 15, 22}, {2, 2}), ein("ij,jk", {{"x", sq}, {"z", sq}}));
  expect_close(Tensor::from_vector<float>({10}, {}), ein("ij->", {{"x", sq}}));
  Tensor b3 = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  expect_close(Tensor::from_vector<float>({1, 3, 2, 4, 5, 7, 6, 8}, {2, 2, 2}), ein("...ij->...ji", {{"x", b3}}));
  expect_close(Tensor::from_vector<float>({1, 4, 5, 8}, {2, 2}), ein("bii->bi", {{"x", b3}}));
  // Ellipsis broadcasting: (2,2,2) with (2,2) on the batch-free side.
  expect_close(Tensor::from_vector<float>({7, 10, 15, 22, 23, 34, 31, 46}, {2, 2, 2}),
               ein("...ij,jk->...ik", {{"x", b3}, {"z", sq}}));
}

TEST(RuntimeMatmul, EinsumDifferentialRandomShapes) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int64_t> sz(1, 7);
  struct Case {
    const char* eq;
    const char* a;
    const char* b;
  };
  // Label strings give each operand's dims; sizes are drawn per label.
  for (Case c : {Case{"bij,bjk->bik", "bij", "bjk"}, Case{"bhqd,bhkd->bhqk", "bhqd", "bhkd"}, Case{"ij,kj->ik", "ij", "kj"},
                 Case{"i,i->", "i", "i"}, Case{"i,j->ij", "i", "j"}, Case{"abc,cd->dba", "abc", "cd"},
                 Case{"ij,jk", "ij", "jk"}, Case{"ii,ij->j", "ii", "ij"}, Case{"ij,j->i", "ij", "j"},
                 Case{"ab,ab->b", "ab", "ab"}, Case{"ab,cd->", "ab", "cd"}}) {
    for (int rep = 0; rep < 3; ++rep) {
      std::map<char, int64_t> size;
      for (char l : std::string("abcdhijkq")) size[l] = sz(rng);
      auto dims = [&](const char* s) {
        Dims d;
        for (const char* q = s; *q; ++q) d.push_back(size[*q]);
        return d;
      };
      std::vector<In> ins{{"a", random_normal(rng, dims(c.a))}, {"b", random_normal(rng, dims(c.b))}};
      differential(one_node("Einsum", ins, {Attribute::make_string("equation", c.eq)}), ins);
    }
  }
}

TEST(RuntimeMatmul, DetAndIntegerProducts) {
  Tensor a = Tensor::from_vector<float>({2, 1, 0, 1, 3, 0, 0, 0, 4, 0, 1, 1, 0, 0, 0, 0, 0, 0}, {2, 3, 3});
  std::vector<In> ins{{"x", a}};
  auto y = run(one_node("Det", ins), ins, true)[0];
  expect_close(Tensor::from_vector<float>({20, 0}, {2}), y);
  Tensor qa = Tensor::from_vector<uint8_t>({11, 7, 3, 10, 6, 2}, {2, 3});
  Tensor qb = Tensor::from_vector<uint8_t>({1, 4, 2, 5, 3, 6}, {3, 2});
  std::vector<In> qi{{"a", qa}, {"b", qb}, {"az", Tensor::from_vector<uint8_t>({1}, {})}};
  auto yi = run(one_node("MatMulInteger", qi), qi, true)[0];
  EXPECT_TRUE(yi.equals(Tensor::from_vector<int32_t>({10 * 1 + 6 * 2 + 2 * 3, 10 * 4 + 6 * 5 + 2 * 6,
                                                      9 * 1 + 5 * 2 + 1 * 3, 9 * 4 + 5 * 5 + 1 * 6},
                                                     {2, 2})));
}

}  // namespace

namespace {

// Random shapes, ranks (including 0 and empty dims) and attributes: every kernel of the family
// either runs or throws t2o::Error, never crashes.
TEST(RuntimeMatmul, FuzzNeverCrashes) {
  std::mt19937 rng(23);
  std::uniform_int_distribution<int> rank_d(0, 4), dim_d(0, 3), pick(0, 1000);
  auto rdims = [&] {
    Dims d;
    int r = rank_d(rng);
    for (int i = 0; i < r; ++i) d.push_back(dim_d(rng));
    return d;
  };
  const char* eqs[] = {"ij,jk->ik", "ii->i", "...i,...i->...", "ab,bc", "i->", "ij->ji", "bij,bjk->bik", "i,i"};
  const char* ops[] = {"MatMul", "Gemm", "MatMulInteger", "Det", "Einsum", "Softmax", "ReduceMean", "LayerNormalization",
                       "BatchNormalization", "QuantizeLinear", "NegativeLogLikelihoodLoss", "Hardmax", "InstanceNormalization"};
  int ran = 0;
  for (int it = 0; it < 400; ++it) {
    std::string op = ops[it % 13];
    bool q8 = op == "MatMulInteger";
    int n_in = op == "BatchNormalization" ? 5 : op == "InstanceNormalization" || op == "Gemm" ? 3
               : op == "Det" || op == "Softmax" || op == "Hardmax" || op == "ReduceMean" ? 1 : 2;
    std::vector<In> ins;
    for (int i = 0; i < n_in; ++i) {
      Dims d = rdims();
      Tensor t = q8 ? Tensor(DType::UInt8, d)
                 : (op == "NegativeLogLikelihoodLoss" && i == 1) ? Tensor(DType::Int64, d) : random_normal(rng, d);
      if (op == "NegativeLogLikelihoodLoss" && i == 1)
        for (int64_t k = 0; k < t.numel(); ++k) t.data<int64_t>()[k] = pick(rng) % 5 - 1;
      const char* names[] = {"x0", "x1", "x2", "x3", "x4"};  // (string + to_string trips a GCC 12 -Wrestrict false positive)
      ins.push_back({names[i], t, pick(rng) % 2 == 0});
    }
    std::vector<Attribute> attrs;
    if (op == "Einsum") attrs.push_back(Attribute::make_string("equation", eqs[pick(rng) % 8]));
    if (op == "Softmax" || op == "Hardmax" || op == "LayerNormalization") attrs.push_back(Attribute::make_int("axis", pick(rng) % 7 - 3));
    if (op == "ReduceMean") attrs.push_back(Attribute::make_ints("axes", {pick(rng) % 7 - 3}));
    if (op == "Gemm") attrs.push_back(Attribute::make_int("transA", pick(rng) % 2));
    for (bool fast : {false, true}) {
      try {
        run(one_node(op, ins, attrs), ins, fast);
        ++ran;
      } catch (const Error&) {
      }
    }
  }
  EXPECT_GT(ran, 0);
}

}  // namespace

// Weights that every reader keeps packed are not kept a second time as given: the session lets
// go of them (the storage is freed), runs on the packed copies at any batch, and rebuilds the
// weights exactly when model() or run_all asks. A weight that another op reads stays.
TEST(RuntimeMatmul, PackedWeightsReplaceTheGivenOnes) {
  std::mt19937 rng(5);
  bool freed1 = false, freed2 = false, freed3 = false;
  Tensor w1 = watched(random_normal(rng, {96, 128}), &freed1), w2 = watched(random_normal(rng, {64, 128}), &freed2),
         w3 = watched(random_normal(rng, {64, 64}), &freed3);
  Tensor w1_copy = w1.clone(), w2_copy = w2.clone(), w3_copy = w3.clone();
  Model m;
  m.opset_import = {{"", 17}};
  m.graph.inputs.push_back({"x", Type::tensor(DType::Float), ""});
  m.graph.initializers = {{"w1", w1, ""}, {"w2", w2, ""}, {"w3", w3, ""}};
  m.graph.nodes.push_back(make_node("MatMul", {"x", "w1"}, {"h"}));
  m.graph.nodes.push_back(make_node("Gemm", {"h2d", "w2"}, {"g"}, {Attribute::make_int("transB", 1)}));
  m.graph.nodes.insert(m.graph.nodes.begin() + 1,
                       make_node("Reshape", {"h", "shape"}, {"h2d"}));
  m.graph.initializers.push_back({"shape", Tensor::from_vector<int64_t>({-1, 128}, {2}), ""});
  m.graph.nodes.push_back(make_node("MatMul", {"g", "w3"}, {"y"}));
  m.graph.nodes.push_back(make_node("Add", {"w3", "w3"}, {"y2"}));
  m.graph.outputs.push_back({"y", Type::tensor(DType::Undefined), ""});
  m.graph.outputs.push_back({"y2", Type::tensor(DType::Undefined), ""});
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
  EXPECT_FALSE(freed3);  // Add reads it as given
  for (Dims xd : {Dims{64, 96}, Dims{2, 7, 96}, Dims{1, 96}, Dims{3, 100, 96}}) {
    Tensor x = random_normal(rng, xd);
    Tensor want = ref.run({{"x", x}}).at("y").tensor;
    Tensor got = fast.run({{"x", x}}).at("y").tensor;
    expect_close(want, got, 1e-3);
  }
  Tensor x = random_normal(rng, {64, 96});
  Tensor want = ref.run({{"x", x}}).at("y").tensor;
  auto all = fast.run_all({{"x", x}});
  expect_close(want, all.at("y").tensor, 1e-3);
  ASSERT_TRUE(all.count("h"));
  std::map<std::string, Tensor> given{{"w1", w1_copy}, {"w2", w2_copy}, {"w3", w3_copy}};
  for (const Initializer& init : fast.model().graph.initializers)
    if (given.count(init.name)) {
      EXPECT_TRUE(init.tensor.equals(given.at(init.name))) << init.name;
    }
  expect_close(want, fast.run({{"x", x}}).at("y").tensor, 1e-3);
}
