#pragma once
// Shared by the special-value tests (runtime_special_values_test.cpp and
// runtime_special_values_more_test.cpp): an in-memory model builder, the special values and where
// they go, and the comparison of the fast paths against the reference kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/optimize.h"
#include "runtime/session.h"
#include "test_support.h"

namespace t2o::test::special {

// An in-memory model: inputs, initializers, nodes, outputs.
struct Builder {
  Model m;
  explicit Builder(int64_t opset = 17) { m.opset_import = {{"", opset}}; }
  void input(const std::string& name, const Dims& d, DType t = DType::Float) {
    m.graph.inputs.push_back({name, Type::tensor(t, Shape::of(d)), {}});
  }
  void init(const std::string& name, Tensor t) { m.graph.initializers.push_back({name, std::move(t), {}}); }
  void add(Node n) { m.graph.nodes.push_back(std::move(n)); }
  void output(const std::string& name, DType t = DType::Float) {
    m.graph.outputs.push_back({name, Type::tensor(t), {}});
  }
};

using Feeds = std::map<std::string, RValue>;

// The special values, one kind per case so that a failure names its cause. Mid (+-1e15) serves
// where the larger ones overflow float by design (LayerNorm's variance, ReduceL2's squares).
enum class Special { NaN, NegNaN, Inf, NegInf, Big, NegBig, Huge, NegHuge, Mid, NegMid };
using Kinds = std::vector<Special>;
const Kinds kAll = {Special::NaN, Special::NegNaN, Special::Inf,  Special::NegInf,
                    Special::Big, Special::NegBig, Special::Huge, Special::NegHuge};
const Kinds kNoHuge = {Special::NaN, Special::NegNaN, Special::Inf, Special::NegInf, Special::Big, Special::NegBig};
const Kinds kNonFinite = {Special::NaN, Special::NegNaN, Special::Inf, Special::NegInf};

inline float value_of(Special s) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  switch (s) {
    case Special::NaN: return nan;
    case Special::NegNaN: return -nan;  // the sign bit set, as x86 makes NaN (inf - inf, 0 * inf)
    case Special::Inf: return inf;
    case Special::NegInf: return -inf;
    case Special::Big: return 1e30f;
    case Special::NegBig: return -1e30f;
    case Special::Huge: return 3e38f;
    case Special::NegHuge: return -3e38f;
    case Special::Mid: return 1e15f;
    case Special::NegMid: return -1e15f;
  }
  return 0.0f;
}

inline std::string name_of(Special s) {
  const char* names[] = {"NaN", "-NaN", "inf", "-inf", "1e30", "-1e30", "3e38", "-3e38", "1e15", "-1e15"};
  return names[static_cast<int>(s)];
}

inline bool is_huge(Special s) { return s == Special::Huge || s == Special::NegHuge; }
inline bool is_nan(Special s) { return s == Special::NaN || s == Special::NegNaN; }

// Special values in turn: next(n) gives the n after those it gave last, so consecutive models
// cover every kind.
class InTurn {
 public:
  explicit InTurn(Kinds kinds) : kinds_(std::move(kinds)) {}
  Kinds next(int n) {
    Kinds r;
    for (int j = 0; j < n && !kinds_.empty(); ++j) r.push_back(kinds_[at_++ % kinds_.size()]);
    return r;
  }

 private:
  Kinds kinds_;
  size_t at_ = 0;
};

// `s` at `count` random positions of t; a huge value at one position only (two in one sum would
// overflow or not depending on the order of the additions).
inline void sprinkle(Tensor& t, std::mt19937& g, Special s, int count = 2) {
  std::uniform_int_distribution<int64_t> at(0, t.numel() - 1);
  for (int i = 0; i < (is_huge(s) ? 1 : count); ++i) t.data<float>()[at(g)] = value_of(s);
}

// Every kind of `kinds` at `each` random positions (elementwise ops: the values do not meet).
inline void sprinkle_all(Tensor& t, std::mt19937& g, int each, const Kinds& kinds = kAll) {
  std::uniform_int_distribution<int64_t> at(0, t.numel() - 1);
  for (Special s : kinds)
    for (int i = 0; i < each; ++i) t.data<float>()[at(g)] = value_of(s);
}

// NaN where the reference has NaN (and only there), the same infinity, finite values within
// 1e-4 * (1 + |want|) + abs_tol. Reports the first mismatches and how many there are.
inline void expect_match(const Tensor& want, const Tensor& got, const std::string& what, double abs_tol = 0) {
  ASSERT_EQ(want.dims(), got.dims()) << what;
  const float* w = want.data<float>();
  const float* g = got.data<float>();
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    bool ok;
    if (std::isnan(w[i])) ok = std::isnan(g[i]);
    else if (std::isinf(w[i])) ok = g[i] == w[i];
    else ok = std::isfinite(g[i]) && std::fabs(w[i] - g[i]) <= 1e-4 * (1 + std::fabs(w[i])) + abs_tol;
    if (!ok && bad++ < 3) ADD_FAILURE() << what << " at " << i << ": reference " << w[i] << ", fast " << g[i];
  }
  if (bad > 3) ADD_FAILURE() << what << ": " << bad << " of " << want.numel() << " values differ";
}

// Integer outputs: equal. `ambiguous`: the ONNX result is not defined there (a NaN among the
// values an ArgMax or TopK orders): differences are printed as a note, not failed.
inline void expect_equal_ints(const Tensor& want, const Tensor& got, const std::string& what, bool ambiguous) {
  ASSERT_EQ(want.dtype(), got.dtype()) << what;
  ASSERT_EQ(want.dims(), got.dims()) << what;
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (want.as_int(i) == got.as_int(i)) continue;
    if (ambiguous) {
      if (bad++ == 0)
        std::cout << "note (NaN: ONNX leaves the order open): " << what << " at " << i << ": reference "
                  << want.as_int(i) << ", fast " << got.as_int(i) << "\n";
      continue;
    }
    if (bad++ < 3) ADD_FAILURE() << what << " at " << i << ": reference " << want.as_int(i) << ", fast " << got.as_int(i);
  }
  if (bad > 3 && !ambiguous) ADD_FAILURE() << what << ": " << bad << " of " << want.numel() << " values differ";
}

// The largest finite magnitude in t.
inline double max_finite(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::isfinite(t.data<float>()[i])) m = std::max(m, std::fabs(static_cast<double>(t.data<float>()[i])));
  return m;
}

// One run of a model: its inputs, and what they hold for the failure messages. `ambiguous`:
// integer outputs may differ (see expect_equal_ints).
struct Case {
  std::string what;
  Feeds feeds;
  bool ambiguous = false;
};

// Runs every case on the reference kernels and on the fast paths at 1 and 2 threads (one session
// each, built one after the other: the thread count is process-wide) and compares every graph
// output. `scale_tol`: finite values may also differ by this fraction of the output's largest
// finite magnitude (for sums of several large values of both signs, which cancel differently in
// another order). Returns the number of cases.
inline int check(const Model& m, const std::string& model, const std::vector<Case>& cases, double scale_tol = 0) {
  std::vector<std::map<std::string, RValue>> want;
  {
    SessionOptions so;
    so.fast_paths = false;
    so.threads = 1;
    Session s(m, so);
    for (const Case& c : cases) want.push_back(s.run_all(c.feeds));
  }
  for (int threads : {1, 2}) {
    SessionOptions so;
    so.threads = threads;
    Session s(m, so);
    for (size_t i = 0; i < cases.size(); ++i) {
      auto got = s.run(cases[i].feeds);
      for (const ValueInfo& o : m.graph.outputs) {
        const Tensor& w = want[i].at(o.name).tensor;
        const Tensor& g = got.at(o.name).tensor;
        const std::string what =
            model + ", " + cases[i].what + " [" + o.name + ", threads " + std::to_string(threads) + "]";
        if (w.dtype() == DType::Float) {
          if (g.dtype() != DType::Float) {
            ADD_FAILURE() << what << ": fast output is not float";
            continue;
          }
          expect_match(w, g, what, scale_tol * max_finite(w));
        } else {
          expect_equal_ints(w, g, what, cases[i].ambiguous);
        }
      }
    }
  }
  return static_cast<int>(cases.size());
}

inline Attribute ints(const char* name, std::vector<int64_t> v) { return Attribute::make_ints(name, std::move(v)); }
inline Attribute int_attr(const char* name, int64_t v) { return Attribute::make_int(name, v); }
inline Attribute str_attr(const char* name, const std::string& v) { return Attribute::make_string(name, v); }

inline Tensor i64(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<int64_t>(v, {n});
}

inline std::string kinds_text(const Kinds& kinds) {
  std::string s;
  for (Special k : kinds) s += (s.empty() ? "" : " ") + name_of(k);
  return s;
}

// Nodes of type `op` in the graph the fast session runs (to see the fast path is taken).
inline int count_fused(const Model& m, const std::string& op) {
  Model r = m;
  optimize_for_runtime(r);
  int k = 0;
  for (const Node& n : r.graph.nodes) k += n.op_type == op;
  return k;
}

}  // namespace t2o::test::special
