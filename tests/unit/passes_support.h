// Helpers for the optimizer tests: build small models (symbolic dims allowed), run a chosen set of
// passes, run models on the reference kernels, and compare every output before and after.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/passes.h"
#include "runtime/session.h"
#include "test_support.h"

namespace t2o::test {

// A dim spec: a number, or a symbol ("batch").
struct D {
  int64_t v = -1;
  std::string sym;
  D(int64_t x) : v(x) {}                     // NOLINT: implicit by design
  D(const char* s) : sym(s) {}               // NOLINT
};

struct ModelBuilder {
  Model m;
  explicit ModelBuilder(int64_t opset = 17) {
    m.opset_import = {{"", opset}};
    m.graph.name = "test";
  }
  ModelBuilder& input(const std::string& name, const std::vector<D>& dims, DType t = DType::Float) {
    Shape s;
    for (const D& d : dims) s.dims.push_back(d.sym.empty() ? Dim::fixed(d.v) : Dim::named(d.sym));
    m.graph.inputs.push_back({name, Type::tensor(t, s), {}});
    return *this;
  }
  ModelBuilder& init(const std::string& name, Tensor t) {
    m.graph.initializers.push_back({name, std::move(t), {}});
    return *this;
  }
  ModelBuilder& node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
                     std::vector<Attribute> attrs = {}, const std::string& name = {}) {
    Node n;
    n.op_type = op;
    n.inputs = std::move(ins);
    n.outputs = std::move(outs);
    n.attributes = std::move(attrs);
    n.name = name.empty() ? op + "_" + std::to_string(m.graph.nodes.size()) : name;
    m.graph.nodes.push_back(std::move(n));
    return *this;
  }
  ModelBuilder& output(const std::string& name, DType t = DType::Float) {
    m.graph.outputs.push_back({name, Type::tensor(t), {}});
    return *this;
  }
  // With a shape, as the ONNX checker wants graph outputs.
  ModelBuilder& output(const std::string& name, const std::vector<D>& dims, DType t = DType::Float) {
    Shape s;
    for (const D& d : dims) s.dims.push_back(d.sym.empty() ? Dim::fixed(d.v) : Dim::named(d.sym));
    m.graph.outputs.push_back({name, Type::tensor(t, s), {}});
    return *this;
  }
};

inline int count_op(const Model& m, const std::string& op) {
  int n = 0;
  m.graph.for_each_node([&](const Node& x) { n += x.op_type == op; });
  return n;
}

// Runs exactly the given passes (no proof) and returns the report.
inline OptimizeReport apply(Model& m, const std::vector<std::string>& passes) {
  OptimizeOptions o;
  o.passes = passes;
  return optimize(m, o);
}

inline std::map<std::string, RValue> run_ref(const Model& m, const std::map<std::string, RValue>& feeds) {
  SessionOptions so;
  so.fast_paths = false;
  so.threads = 1;
  Session s(m, so);
  return s.run(feeds);
}

inline Tensor random_of(std::mt19937& g, DType t, const Dims& d) {
  if (t == DType::Float) return random_normal(g, d);
  Tensor r(t, d);
  std::uniform_int_distribution<int> u(0, 3);
  for (int64_t i = 0; i < r.numel(); ++i) {
    if (t == DType::Int64) r.data<int64_t>()[i] = u(g);
    else if (t == DType::Int32) r.data<int32_t>()[i] = u(g);
    else if (t == DType::Bool) r.data<bool>()[i] = u(g) & 1;
  }
  return r;
}

// Feeds for the model's inputs with symbols bound to `sizes`.
inline std::map<std::string, RValue> feeds_for(const Model& m, std::mt19937& g, const std::map<std::string, int64_t>& sizes) {
  std::map<std::string, RValue> f;
  for (const ValueInfo* vi : m.graph.runtime_inputs()) {
    Dims d;
    for (const Dim& x : vi->type.shape->dims) d.push_back(x.is_static() ? x.value : sizes.at(x.symbol));
    f[vi->name] = random_of(g, vi->type.elem, d);
  }
  return f;
}

// Outputs agree: same dtype and dims, |a - b| <= tol * (1 + |a|).
inline void expect_same_outputs(const std::map<std::string, RValue>& want, const std::map<std::string, RValue>& got,
                                const std::string& what, double tol = 1e-4) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << what << ": output " << name << " missing";
    ASSERT_TRUE(w.is_tensor() && it->second.is_tensor()) << what;
    const Tensor& a = w.tensor;
    const Tensor& b = it->second.tensor;
    ASSERT_EQ(a.dtype(), b.dtype()) << what << " " << name;
    ASSERT_EQ(a.dims(), b.dims()) << what << " " << name;
    for (int64_t i = 0; i < a.numel(); ++i) {
      double x = a.as_double(i), y = b.as_double(i);
      if (std::isnan(x) && std::isnan(y)) continue;
      ASSERT_NEAR(x, y, tol * (1 + std::fabs(x))) << what << " " << name << " at " << i;
    }
  }
}

// Runs `passes` on a copy of m and checks the outputs on random inputs at each of `sizes`.
// Returns the optimized model.
inline Model differential_passes(const Model& m, const std::vector<std::string>& passes, std::mt19937& g,
                                 const std::vector<std::map<std::string, int64_t>>& sizes = {{}},
                                 const std::string& what = {}, double tol = 1e-4) {
  Model opt = m;
  apply(opt, passes);
  for (const auto& s : sizes) {
    auto f = feeds_for(m, g, s);
    std::ostringstream w;
    w << what;
    for (const auto& [k, v] : s) w << " " << k << "=" << v;
    expect_same_outputs(run_ref(m, f), run_ref(opt, f), w.str(), tol);
  }
  return opt;
}

}  // namespace t2o::test
