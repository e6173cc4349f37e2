// Shared helpers for the runtime unit tests: build a model of one node, run it through
// t2o::Session, fill random tensors, and compare outputs. Header-only; include from test files.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/session.h"

namespace t2o::test {

// An input of a one-node model: a graph input (fed at run time) or an initializer. An empty name
// is an absent optional input.
struct In {
  std::string name;
  Tensor value;
  bool initializer = false;
};

// One node named after its op and first output.
inline Node make_node(std::string op, std::vector<std::string> in, std::vector<std::string> out,
                      std::vector<Attribute> attrs = {}) {
  Node n;
  n.op_type = std::move(op);
  n.name = n.op_type + "_" + out[0];
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attributes = std::move(attrs);
  return n;
}

// A model of one node whose inputs are graph inputs or initializers; outputs are "y0", "y1", ...
inline Model one_node(const std::string& op, const std::vector<In>& ins, std::vector<Attribute> attrs = {},
                      int outputs = 1, int64_t opset = 17) {
  Model m;
  m.opset_import = {{"", opset}};
  Node n;
  n.op_type = op;
  n.name = "n";
  for (const In& i : ins) {
    n.inputs.push_back(i.name);
    if (i.name.empty()) continue;
    if (i.initializer) m.graph.initializers.push_back({i.name, i.value, ""});
    else m.graph.inputs.push_back({i.name, Type::tensor(i.value.dtype()), ""});
  }
  for (int o = 0; o < outputs; ++o) {
    n.outputs.push_back("y" + std::to_string(o));
    m.graph.outputs.push_back({"y" + std::to_string(o), Type::tensor(DType::Undefined), ""});
  }
  n.attributes = std::move(attrs);
  m.graph.nodes.push_back(n);
  return m;
}

// Runs a one_node() model, feeding the non-initializer inputs; returns the outputs in order.
inline std::vector<Tensor> run(const Model& m, const std::vector<In>& ins, bool fast, int threads = 1) {
  SessionOptions o;
  o.fast_paths = fast;
  o.threads = threads;
  Session s(m, o);
  std::map<std::string, RValue> feeds;
  for (const In& i : ins)
    if (!i.initializer && !i.name.empty()) feeds[i.name] = i.value;
  auto out = s.run(feeds);
  std::vector<Tensor> r;
  for (size_t k = 0; k < m.graph.outputs.size(); ++k) r.push_back(out.at("y" + std::to_string(k)).tensor);
  return r;
}

struct RunOpts {
  bool fast = true;
  int threads = 1;
  int64_t opset = 17;
  std::string domain;
};

inline const RunOpts kRef{false, 1, 17, ""};    // reference kernels
inline const RunOpts kFast2{true, 2, 17, ""};   // fast paths, two threads
inline RunOpts at_opset(int64_t v) { return RunOpts{true, 1, v, ""}; }

// Runs one node over the given inputs (all fed at run time, inputs "x0", "x1", ... with their
// static shapes) and returns its single output.
inline Tensor run_op(const std::string& op, const std::vector<Tensor>& ins, const std::vector<Attribute>& attrs = {},
                     RunOpts o = {}) {
  Model m;
  m.opset_import = {{"", o.opset}};
  if (!o.domain.empty()) m.opset_import.push_back({o.domain, 1});
  Node n;
  n.op_type = op;
  n.domain = o.domain;
  n.name = "n";
  n.attributes = attrs;
  std::map<std::string, RValue> feeds;
  for (size_t i = 0; i < ins.size(); ++i) {
    std::string name = "x" + std::to_string(i);
    m.graph.inputs.push_back({name, Type::tensor(ins[i].dtype(), Shape::of(ins[i].dims())), {}});
    n.inputs.push_back(name);
    feeds[name] = ins[i];
  }
  n.outputs = {"y"};
  m.graph.nodes.push_back(n);
  m.graph.outputs.push_back({"y", Type::tensor(DType::Undefined), {}});
  SessionOptions so;
  so.fast_paths = o.fast;
  so.threads = o.threads;
  Session s(std::move(m), so);
  return s.run(feeds).at("y").tensor;
}

// A float tensor of N(0, scale) values.
inline Tensor random_normal(std::mt19937& rng, const Dims& d, float scale = 1.0f) {
  Tensor t(DType::Float, d);
  std::normal_distribution<float> g(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = g(rng);
  return t;
}

// A float tensor of U(lo, hi) values.
inline Tensor random_uniform(std::mt19937& rng, const Dims& d, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(DType::Float, d);
  std::uniform_real_distribution<float> u(lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = u(rng);
  return t;
}

// `rank` dims, each in [1, max_dim].
inline Dims random_dims(std::mt19937& rng, int rank, int64_t max_dim = 9) {
  std::uniform_int_distribution<int64_t> sz(1, max_dim);
  Dims d;
  for (int i = 0; i < rank; ++i) d.push_back(sz(rng));
  return d;
}

template <typename T>
std::vector<T> values(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.numel());
}

// Same dims (and dtype when check_dtype), and |want - got| <= tol * (1 + |want|) elementwise.
inline void expect_close(const Tensor& want, const Tensor& got, double tol = 1e-4, bool check_dtype = false) {
  if (check_dtype) {
    ASSERT_EQ(want.dtype(), got.dtype());
  }
  ASSERT_EQ(want.dims(), got.dims());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(want.as_double(i), got.as_double(i), tol * (1 + std::fabs(want.as_double(i)))) << "at " << i;
}

// Float tensors: same dims and |want - got| <= 1e-4 * (1 + |want|) elementwise; `what` names the case.
inline void expect_close_f32(const Tensor& want, const Tensor& got, const std::string& what) {
  ASSERT_EQ(want.dims(), got.dims()) << what;
  const float* w = want.data<float>();
  const float* g = got.data<float>();
  for (int64_t i = 0; i < want.numel(); ++i) {
    ASSERT_EQ(std::isnan(w[i]), std::isnan(g[i])) << what << " at " << i << ": " << w[i] << " vs " << g[i];
    if (std::isnan(w[i]) || w[i] == g[i]) continue;  // equal infinities too
    ASSERT_NEAR(w[i], g[i], 1e-4 * (1 + std::fabs(w[i]))) << what << " at " << i;
  }
}

// Runs a one_node() model on the reference kernels, on the fast paths, and on the fast paths with
// two threads, and compares the outputs.
inline void differential(const Model& m, const std::vector<In>& ins, bool check_dtype = false) {
  auto ref = run(m, ins, false);
  auto fast = run(m, ins, true);
  auto fast2 = run(m, ins, true, 2);
  for (size_t k = 0; k < ref.size(); ++k) {
    expect_close(ref[k], fast[k], 1e-4, check_dtype);
    expect_close(ref[k], fast2[k], 1e-4, check_dtype);
  }
}

// A copy of `src` in storage that sets *freed when it is freed (to see a session let go of it).
inline Tensor watched(const Tensor& src, bool* freed) {
  size_t n = src.nbytes();
  void* p = std::malloc(n);
  std::memcpy(p, src.raw(), n);
  std::shared_ptr<void> owner(p, [freed](void* q) {
    std::free(q);
    *freed = true;
  });
  return Tensor::share(src.dtype(), src.dims(), owner, p);
}

}  // namespace t2o::test
