// Shape, indexing and tensor-creation kernels: differential tests of the fast paths (Transpose,
// Slice, Concat, Gather) against naive references on random shapes, semantics spot checks, and
// bad inputs that must raise t2o::Error rather than crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "runtime/session.h"
#include "test_support.h"

using namespace t2o;
using t2o::test::random_dims;

namespace {

struct Op {
  Op(std::string t, std::vector<Attribute> a = {}, int64_t o = 17, int n = 1)
      : type(std::move(t)), attrs(std::move(a)), opset(o), outputs(n) {}
  std::string type;
  std::vector<Attribute> attrs;
  int64_t opset;
  int outputs;
};

// Runs one node whose inputs are all fed at run time ("" entries are absent optional inputs).
std::vector<Tensor> run_op(const Op& op, const std::vector<Tensor>& ins, bool fast = true, int threads = 2) {
  Model m;
  m.opset_import = {{"", op.opset}};
  Node n;
  n.op_type = op.type;
  n.name = "n";
  n.attributes = op.attrs;
  std::vector<RValue> feeds;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i].defined()) {
      n.inputs.push_back("");
      continue;
    }
    std::string name = "in" + std::to_string(i);
    n.inputs.push_back(name);
    m.graph.inputs.push_back({name, Type::tensor(ins[i].dtype()), ""});
    feeds.push_back(RValue(ins[i]));
  }
  for (int i = 0; i < op.outputs; ++i) {
    n.outputs.push_back("out" + std::to_string(i));
    m.graph.outputs.push_back({"out" + std::to_string(i), Type::tensor(DType::Float), ""});
  }
  m.graph.nodes.push_back(n);
  Session s(std::move(m), {.threads = threads, .fast_paths = fast});
  std::vector<Tensor> outs;
  for (auto& v : s.run_ordered(feeds)) outs.push_back(v.tensor);
  return outs;
}

Tensor iota_tensor(DType dt, const Dims& d) {
  Tensor t(dt, d);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = static_cast<double>(i % 251);
    switch (dt) {
      case DType::Float: t.data<float>()[i] = static_cast<float>(i); break;
      case DType::UInt8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
      case DType::Int64: t.data<int64_t>()[i] = i * 7 - 3; break;
      case DType::Float16: t.data<Half>()[i] = Half(static_cast<float>(v)); break;
      default: throw Error("iota_tensor: dtype");
    }
  }
  return t;
}

Tensor ints(std::vector<int64_t> v) {
  int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<int64_t>(v, {n});
}

Dims unravel(int64_t i, const Dims& d) {
  Dims idx(d.size());
  for (size_t k = d.size(); k-- > 0;) {
    idx[k] = i % d[k];
    i /= d[k];
  }
  return idx;
}

int64_t ravel(const Dims& idx, const Dims& d) {
  int64_t off = 0;
  for (size_t k = 0; k < d.size(); ++k) off = off * d[k] + idx[k];
  return off;
}

Tensor naive_transpose(const Tensor& x, const std::vector<int64_t>& perm) {
  Dims od;
  for (int64_t p : perm) od.push_back(x.dims()[static_cast<size_t>(p)]);
  Tensor y(x.dtype(), od);
  size_t es = dtype_size(x.dtype());
  for (int64_t i = 0; i < y.numel(); ++i) {
    Dims oi = unravel(i, od), ii(oi.size());
    for (size_t k = 0; k < perm.size(); ++k) ii[static_cast<size_t>(perm[k])] = oi[k];
    std::memcpy(static_cast<char*>(y.raw()) + i * es, static_cast<const char*>(x.raw()) + ravel(ii, x.dims()) * es, es);
  }
  return y;
}

}  // namespace

TEST(RuntimeShape, TransposeFastMatchesReference) {
  std::mt19937 rng(7);
  const DType types[] = {DType::Float, DType::UInt8, DType::Int64, DType::Float16};
  for (int trial = 0; trial < 120; ++trial) {
    int rank = std::uniform_int_distribution<int>(1, 5)(rng);
    Dims d = random_dims(rng, rank, rank <= 2 ? 70 : 9);
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    Tensor x = iota_tensor(types[trial % 4], d);
    Tensor want = naive_transpose(x, perm);
    Op op{"Transpose", {Attribute::make_ints("perm", perm)}};
    for (bool fast : {false, true}) {
      Tensor got = run_op(op, {x}, fast)[0];
      ASSERT_TRUE(want.equals(got)) << dims_to_string(d) << " fast=" << fast;
    }
  }
  // Large enough to take the parallel tiled and run-copy paths.
  for (auto perm : std::vector<std::vector<int64_t>>{{1, 0}, {0, 2, 1, 3}, {0, 2, 1}, {2, 0, 1}}) {
    Dims d = perm.size() == 2 ? Dims{300, 257} : perm.size() == 3 ? Dims{16, 130, 65} : Dims{2, 64, 48, 32};
    Tensor x = iota_tensor(DType::Float, d);
    Tensor got = run_op({"Transpose", {Attribute::make_ints("perm", perm)}}, {x}, true, 2)[0];
    ASSERT_TRUE(naive_transpose(x, perm).equals(got));
  }
}

TEST(RuntimeShape, SliceFastMatchesReference) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 150; ++trial) {
    int rank = std::uniform_int_distribution<int>(1, 4)(rng);
    Dims d = random_dims(rng, rank, 8);
    std::vector<int64_t> starts, ends, axes, steps;
    std::vector<std::vector<int64_t>> picks(d.size());
    for (size_t k = 0; k < d.size(); ++k) {
      int64_t dim = d[k];
      for (int64_t i = 0; i < dim; ++i) picks[k].push_back(i);
    }
    for (int k = 0; k < rank; ++k) {
      if (rng() % 3 == 0) continue;
      int64_t dim = d[static_cast<size_t>(k)];
      int64_t s = std::uniform_int_distribution<int64_t>(-dim - 2, dim + 2)(rng);
      int64_t e = std::uniform_int_distribution<int64_t>(-dim - 2, dim + 2)(rng);
      int64_t st = std::uniform_int_distribution<int64_t>(-3, 3)(rng);
      if (st == 0) st = 1;
      starts.push_back(s);
      ends.push_back(e);
      axes.push_back(rng() % 2 ? k : k - rank);
      steps.push_back(st);
      // Spec semantics, written independently of the kernel.
      int64_t cs = s < 0 ? s + dim : s, ce = e < 0 ? e + dim : e;
      std::vector<int64_t>& p = picks[static_cast<size_t>(k)];
      p.clear();
      if (st > 0) {
        cs = std::clamp<int64_t>(cs, 0, dim);
        ce = std::clamp<int64_t>(ce, 0, dim);
        for (int64_t i = cs; i < ce; i += st) p.push_back(i);
      } else {
        cs = std::clamp<int64_t>(cs, 0, dim - 1);
        ce = std::clamp<int64_t>(ce, -1, dim - 1);
        for (int64_t i = cs; i > ce; i += st) p.push_back(i);
      }
    }
    Dims od;
    for (auto& p : picks) od.push_back(static_cast<int64_t>(p.size()));
    Tensor x = iota_tensor(DType::Float, d);
    Tensor want(DType::Float, od);
    for (int64_t i = 0; i < want.numel(); ++i) {
      Dims oi = unravel(i, od), ii(oi.size());
      for (size_t k = 0; k < oi.size(); ++k) ii[k] = picks[k][static_cast<size_t>(oi[k])];
      want.data<float>()[i] = x.data<float>()[ravel(ii, d)];
    }
    for (bool fast : {false, true}) {
      Tensor got = run_op({"Slice"}, {x, ints(starts), ints(ends), ints(axes), ints(steps)}, fast)[0];
      ASSERT_TRUE(want.equals(got)) << dims_to_string(d) << " -> " << dims_to_string(od) << " fast=" << fast;
    }
  }
}

TEST(RuntimeShape, ConcatAndGatherMatchReference) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    int rank = std::uniform_int_distribution<int>(1, 4)(rng);
    Dims d = random_dims(rng, rank, 6);
    int64_t axis = std::uniform_int_distribution<int64_t>(0, rank - 1)(rng);
    size_t a = static_cast<size_t>(axis);
    int n = std::uniform_int_distribution<int>(1, 4)(rng);
    std::vector<Tensor> ins;
    Dims od = d;
    od[a] = 0;
    for (int i = 0; i < n; ++i) {
      Dims di = d;
      di[a] = std::uniform_int_distribution<int64_t>(0, 5)(rng);
      Tensor t = iota_tensor(DType::Float, di);
      for (int64_t j = 0; j < t.numel(); ++j) t.data<float>()[j] += 1000.0f * static_cast<float>(i);
      od[a] += di[a];
      ins.push_back(t);
    }
    Tensor want(DType::Float, od);
    for (int64_t i = 0; i < want.numel(); ++i) {
      Dims oi = unravel(i, od);
      size_t src = 0;
      while (oi[a] >= ins[src].dims()[a]) oi[a] -= ins[src++].dims()[a];
      want.data<float>()[i] = ins[src].data<float>()[ravel(oi, ins[src].dims())];
    }
    Tensor got = run_op({"Concat", {Attribute::make_int("axis", axis - (trial % 2 ? rank : 0))}}, ins)[0];
    ASSERT_TRUE(want.equals(got)) << dims_to_string(od);

    // Gather along the same axis with random (also negative) indices.
    Tensor x = iota_tensor(DType::Float, d);
    std::vector<int64_t> idx;
    for (int i = 0; i < 5; ++i) idx.push_back(std::uniform_int_distribution<int64_t>(-d[a], d[a] - 1)(rng));
    Tensor it = Tensor::from_vector<int64_t>(idx, {5});
    Dims gd = d;
    gd[a] = 5;
    Tensor gw(DType::Float, gd);
    for (int64_t i = 0; i < gw.numel(); ++i) {
      Dims oi = unravel(i, gd);
      int64_t v = idx[static_cast<size_t>(oi[a])];
      oi[a] = v < 0 ? v + d[a] : v;
      gw.data<float>()[i] = x.data<float>()[ravel(oi, d)];
    }
    ASSERT_TRUE(gw.equals(run_op({"Gather", {Attribute::make_int("axis", axis)}}, {x, it})[0]));
  }
}

TEST(RuntimeShape, ExpandMatchesReference) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 80; ++trial) {
    int rank = std::uniform_int_distribution<int>(1, 4)(rng);
    Dims od = random_dims(rng, rank, 5);
    int in_rank = std::uniform_int_distribution<int>(0, rank)(rng);
    Dims id(od.end() - in_rank, od.end());
    for (auto& v : id)
      if (rng() % 2) v = 1;
    std::vector<int64_t> shape(od.begin(), od.end());
    for (size_t k = 0; k < shape.size(); ++k)
      if (rng() % 3 == 0 && k >= od.size() - id.size() && id[k - (od.size() - id.size())] != 1) shape[k] = 1;
    Tensor x = iota_tensor(DType::Float, id);
    Tensor want(DType::Float, od);
    for (int64_t i = 0; i < want.numel(); ++i) {
      Dims oi = unravel(i, od), ii(id.size());
      for (size_t k = 0; k < id.size(); ++k) ii[k] = id[k] == 1 ? 0 : oi[k + od.size() - id.size()];
      want.data<float>()[i] = x.data<float>()[ravel(ii, id)];
    }
    ASSERT_TRUE(want.equals(run_op({"Expand"}, {x, ints(shape)})[0])) << dims_to_string(id) << " -> " << dims_to_string(od);
  }
}

TEST(RuntimeShape, TileMatchesReference) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 120; ++trial) {
    int rank = std::uniform_int_distribution<int>(0, 4)(rng);
    Dims id = random_dims(rng, rank, 4);
    std::vector<int64_t> reps(static_cast<size_t>(rank));
    for (auto& v : reps) v = std::uniform_int_distribution<int>(0, 4)(rng);
    if (rank > 0 && trial % 10 == 0) reps.back() = 300;  // many repeats of a short row
    Dims od(id.size());
    for (size_t k = 0; k < id.size(); ++k) od[k] = id[k] * reps[k];
    for (DType dt : {DType::Float, DType::UInt8}) {
      Tensor x = iota_tensor(dt, id);
      Tensor want(dt, od);
      size_t es = dtype_size(dt);
      for (int64_t i = 0; i < want.numel(); ++i) {
        Dims oi = unravel(i, od), ii(id.size());
        for (size_t k = 0; k < id.size(); ++k) ii[k] = oi[k] % id[k];
        std::memcpy(static_cast<char*>(want.raw()) + i * es, static_cast<const char*>(x.raw()) + ravel(ii, id) * es, es);
      }
      ASSERT_TRUE(want.equals(run_op({"Tile"}, {x, ints(reps)})[0])) << dims_to_string(id) << " x " << ::testing::PrintToString(reps);
    }
  }
}

TEST(RuntimeShape, Semantics) {
  // TopK: ties keep the lower index first.
  Tensor x = Tensor::from_vector<float>({1, 3, 3, 2, 3}, {5});
  auto tk = run_op({"TopK", {}, 17, 2}, {x, ints({2})});
  EXPECT_EQ(tk[1].as_int(0), 1);
  EXPECT_EQ(tk[1].as_int(1), 2);
  // Unique, not sorted: order of first occurrence, all four outputs.
  auto u = run_op({"Unique", {Attribute::make_int("sorted", 0)}, 17, 4}, {Tensor::from_vector<float>({2, 1, 2, 3, 1}, {5})});
  EXPECT_TRUE(u[0].equals(Tensor::from_vector<float>({2, 1, 3}, {3})));
  EXPECT_TRUE(u[1].equals(ints({0, 1, 3})));
  EXPECT_TRUE(u[2].equals(ints({0, 1, 0, 2, 1})));
  EXPECT_TRUE(u[3].equals(ints({2, 2, 1})));
  // Split at opset 18: num_outputs with a smaller last part.
  auto sp = run_op({"Split", {Attribute::make_int("num_outputs", 3)}, 18, 3}, {Tensor::from_vector<float>({1, 2, 3, 4, 5}, {5})});
  EXPECT_EQ(sp[0].dims(), (Dims{2}));
  EXPECT_EQ(sp[2].dims(), (Dims{1}));
  // Pad reflect, and the opset-18 axes input.
  Tensor p = run_op({"Pad", {Attribute::make_string("mode", "reflect")}}, {Tensor::from_vector<float>({1, 2, 3}, {3}), ints({2, 1})})[0];
  EXPECT_TRUE(p.equals(Tensor::from_vector<float>({3, 2, 1, 2, 3, 2}, {6})));
  Tensor pa = run_op({"Pad", {}, 18}, {iota_tensor(DType::Float, {2, 2}), ints({1, 0}), Tensor(), ints({-1})})[0];
  EXPECT_EQ(pa.dims(), (Dims{2, 3}));
  // Reshape with 0 and -1.
  EXPECT_EQ(run_op({"Reshape"}, {iota_tensor(DType::Float, {2, 3, 4}), ints({0, -1})})[0].dims(), (Dims{2, 12}));
  // Squeeze/Unsqueeze attribute form before opset 13.
  EXPECT_EQ(run_op({"Unsqueeze", {Attribute::make_ints("axes", {0, -1})}, 11}, {iota_tensor(DType::Float, {3})})[0].dims(),
            (Dims{1, 3, 1}));
  // String tensors move through the copy ops.
  Tensor s = Tensor::from_strings({"a", "b", "c", "d"}, {2, 2});
  Tensor st = run_op({"Transpose"}, {s})[0];
  EXPECT_EQ(st.strings()[1], "c");
}

// Random shapes, index values and attributes: every op either succeeds or throws t2o::Error.
TEST(RuntimeShape, FuzzNeverCrashes) {
  std::mt19937 rng(1234);
  auto dim = [&] { return std::uniform_int_distribution<int64_t>(0, 3)(rng); };
  auto any_float = [&] {
    Dims d;
    for (int k = std::uniform_int_distribution<int>(0, 4)(rng); k > 0; --k) d.push_back(dim());
    return iota_tensor(DType::Float, d);
  };
  auto any_int = [&] {
    Dims d;
    for (int k = std::uniform_int_distribution<int>(0, 2)(rng); k > 0; --k) d.push_back(dim());
    Tensor t(DType::Int64, d);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = std::uniform_int_distribution<int64_t>(-4, 4)(rng);
    return t;
  };
  auto any_bool = [&] {
    Tensor t(DType::Bool, {dim()});
    for (int64_t i = 0; i < t.numel(); ++i) t.data<bool>()[i] = rng() % 2;
    return t;
  };
  struct Case {
    const char* op;
    const char* ins;  // f: float, i: int64, b: bool
    int outputs;
  };
  const Case cases[] = {
      {"Concat", "ff", 1}, {"Expand", "fi", 1}, {"Flatten", "f", 1}, {"Reshape", "fi", 1}, {"Shape", "f", 1},
      {"Slice", "fiiii", 1}, {"Split", "fi", 2}, {"Squeeze", "fi", 1}, {"Unsqueeze", "fi", 1}, {"Tile", "fi", 1},
      {"Transpose", "f", 1}, {"Pad", "fi", 1}, {"DepthToSpace", "f", 1}, {"SpaceToDepth", "f", 1},
      {"Gather", "fi", 1}, {"GatherElements", "fi", 1}, {"GatherND", "fi", 1}, {"ScatterElements", "fif", 1},
      {"ScatterND", "fif", 1}, {"Compress", "fb", 1}, {"NonZero", "f", 1}, {"OneHot", "iif", 1}, {"Trilu", "fi", 1},
      {"TopK", "fi", 2}, {"Unique", "f", 4}, {"ArgMax", "f", 1}, {"CumSum", "fi", 1}, {"ReverseSequence", "fi", 1},
      {"EyeLike", "f", 1}, {"ConstantOfShape", "i", 1}, {"Size", "f", 1}, {"Identity", "f", 1},
  };
  int ok = 0, errors = 0;
  for (int trial = 0; trial < 40; ++trial)
    for (const Case& c : cases) {
      std::vector<Tensor> ins;
      for (const char* p = c.ins; *p; ++p) ins.push_back(*p == 'f' ? any_float() : *p == 'i' ? any_int() : any_bool());
      std::vector<Attribute> attrs;
      int64_t a = std::uniform_int_distribution<int64_t>(-4, 4)(rng);
      if (rng() % 2) attrs.push_back(Attribute::make_int("axis", a));
      if (std::string(c.op) == "Transpose" && rng() % 2) attrs.push_back(Attribute::make_ints("perm", {a, 0, 1}));
      if (std::string(c.op) == "GatherND" || std::string(c.op) == "ScatterND") attrs.push_back(Attribute::make_int("batch_dims", a));
      if (std::string(c.op).find("Space") != std::string::npos) attrs.push_back(Attribute::make_int("blocksize", a));
      try {
        run_op({c.op, attrs, 17, c.outputs}, ins);
        ++ok;
      } catch (const Error&) {
        ++errors;
      }
    }
  EXPECT_GT(ok, 0);
  EXPECT_GT(errors, 0);
}

TEST(RuntimeShape, BadInputsRaiseErrors) {
  Tensor x = iota_tensor(DType::Float, {2, 3});
  EXPECT_THROW(run_op({"Gather"}, {x, ints({2})}), Error);
  EXPECT_THROW(run_op({"Gather", {Attribute::make_int("axis", 2)}}, {x, ints({0})}), Error);
  EXPECT_THROW(run_op({"Reshape"}, {x, ints({4, -1})}), Error);
  EXPECT_THROW(run_op({"Reshape"}, {x, ints({-1, -1})}), Error);
  EXPECT_THROW(run_op({"Transpose", {Attribute::make_ints("perm", {0, 0})}}, {x}), Error);
  EXPECT_THROW(run_op({"Transpose", {Attribute::make_ints("perm", {0})}}, {x}), Error);
  EXPECT_THROW(run_op({"Concat", {Attribute::make_int("axis", 0)}}, {x, iota_tensor(DType::Float, {2, 2})}), Error);
  EXPECT_THROW(run_op({"Slice"}, {x, ints({0}), ints({1}), ints({0}), ints({0})}), Error);
  EXPECT_THROW(run_op({"Squeeze"}, {x, ints({0})}), Error);
  EXPECT_THROW(run_op({"Expand"}, {x, ints({4, 3})}), Error);
  EXPECT_THROW(run_op({"GatherElements"}, {x, Tensor::from_vector<int64_t>({0, 5}, {1, 2})}), Error);
  EXPECT_THROW(run_op({"ScatterND"}, {x, Tensor::from_vector<int64_t>({7}, {1, 1}), iota_tensor(DType::Float, {1, 3})}), Error);
  EXPECT_THROW(run_op({"ScatterElements"}, {x, Tensor::from_vector<int64_t>({-9}, {1, 1}), iota_tensor(DType::Float, {1, 1})}), Error);
  EXPECT_THROW(run_op({"TopK", {}, 17, 2}, {x, ints({4})}), Error);
  EXPECT_THROW(run_op({"Tile"}, {x, ints({2})}), Error);
  EXPECT_THROW(run_op({"Split", {}, 17, 2}, {iota_tensor(DType::Float, {3})}), Error);
  EXPECT_THROW(run_op({"DepthToSpace", {Attribute::make_int("blocksize", 2)}}, {iota_tensor(DType::Float, {1, 3, 2, 2})}), Error);
  EXPECT_THROW(run_op({"Range"}, {Tensor::scalar<float>(0), Tensor::scalar<float>(3), Tensor::scalar<float>(0)}), Error);
  EXPECT_THROW(run_op({"ReverseSequence"}, {x, ints({3, 3, 3})}), Error);
}
