// The accuracy report: quantized outputs against the float model's on the same input sets.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "quant/quant.h"
#include "runtime/session.h"

namespace t2o {

namespace {

struct Sums {
  double dot = 0, aa = 0, bb = 0, max_abs = 0;
  int64_t rows = 0, agree = 0;
  std::set<int64_t> classes;
  bool logits = true;
};

void accumulate(Sums& s, const Tensor& want, const Tensor& got) {
  if (want.dims() != got.dims())
    throw Error("the quantized model's output has shape " + dims_to_string(got.dims()) + ", the float one " +
                dims_to_string(want.dims()));
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = want.as_double(i), b = got.as_double(i);
    s.dot += a * b, s.aa += a * a, s.bb += b * b;
    s.max_abs = std::max(s.max_abs, std::fabs(a - b));
  }
  s.logits = s.logits && want.rank() == 2 && want.dim(1) > 1 && dtype_is_float(want.dtype());
  if (!s.logits) return;
  int64_t cols = want.dim(1);
  for (int64_t r = 0; r < want.dim(0); ++r) {
    int64_t wa = 0, ga = 0;
    for (int64_t c = 1; c < cols; ++c) {
      if (want.as_double(r * cols + c) > want.as_double(r * cols + wa)) wa = c;
      if (got.as_double(r * cols + c) > got.as_double(r * cols + ga)) ga = c;
    }
    ++s.rows;
    s.classes.insert(wa);
    s.agree += wa == ga;
  }
}

// A set as the session's model declares its inputs: an fp16 model with float16 inputs
// (--fp16-io) gets the float32 values of the set rounded to float16.
std::map<std::string, RValue> feed_for(const Session& s, const InputSet& set) {
  std::map<std::string, RValue> feed(set.begin(), set.end());
  for (const ValueInfo& in : s.inputs()) {
    auto it = feed.find(in.name);
    if (it == feed.end() || !it->second.is_tensor()) continue;
    const Tensor& t = it->second.tensor;
    DType want = in.type.elem;
    if (t.dtype() == want || !dtype_is_float(t.dtype()) || !dtype_is_float(want)) continue;
    Tensor c(want, t.dims());
    dispatch_dtype(want, [&](auto z) {
      using T = decltype(z);
      T* p = c.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = T(static_cast<float>(t.as_double(i)));
    });
    it->second = RValue(c);
  }
  return feed;
}

double median_ms(Session& s, const InputSet& set, int runs) {
  std::map<std::string, RValue> feed = feed_for(s, set);
  s.run(feed);  // warm-up: primitives and buffers are made on the first run
  std::vector<double> ms;
  for (int k = 0; k < runs; ++k) {
    auto t0 = std::chrono::steady_clock::now();
    s.run(feed);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms.empty() ? 0 : ms[ms.size() / 2];
}

}  // namespace

double AccuracyReport::drop() const {
  double d = 0;
  for (const OutputAccuracy& o : outputs) d = std::max(d, o.top1 ? 1.0 - *o.top1 : 1.0 - o.cosine);
  return d;
}

AccuracyReport compare_accuracy(const Model& float_model, const Model& quant_model, const std::vector<InputSet>& sets,
                                int runs, int threads) {
  SessionOptions so;
  so.threads = threads;
  Session fs(float_model, so), qs(quant_model, so);
  std::vector<Sums> sums(float_model.graph.outputs.size());
  AccuracyReport rep;
  for (const InputSet& set : sets) {
    auto want = fs.run(feed_for(fs, set));
    auto got = qs.run(feed_for(qs, set));
    for (size_t k = 0; k < sums.size(); ++k) {
      const std::string& name = float_model.graph.outputs[k].name;
      const RValue& w = want.at(name);
      auto g = got.find(name);
      if (g == got.end()) throw Error("the quantized model lacks output '" + name + "'");
      if (!w.is_tensor() || !dtype_is_float(w.tensor.dtype())) continue;
      accumulate(sums[k], w.tensor, g->second.tensor);
    }
  }
  for (size_t k = 0; k < sums.size(); ++k) {
    const Sums& s = sums[k];
    OutputAccuracy a;
    a.name = float_model.graph.outputs[k].name;
    a.max_abs = s.max_abs;
    a.cosine = s.aa == 0 && s.bb == 0 ? 1.0 : s.dot / std::sqrt(s.aa * s.bb + 1e-300);
    if (s.logits && s.rows > 0) {
      a.top1 = static_cast<double>(s.agree) / static_cast<double>(s.rows);
      a.rows = s.rows;
      a.classes = static_cast<int64_t>(s.classes.size());
    }
    rep.outputs.push_back(a);
  }
  rep.samples = static_cast<int>(sets.size());
  rep.runs = runs;
  if (!sets.empty() && runs > 0) {
    rep.float_ms = median_ms(fs, sets[0], runs);
    rep.quant_ms = median_ms(qs, sets[0], runs);
  }
  return rep;
}

}  // namespace t2o
