#include "passes/prove.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "passes/graph_util.h"
#include "passes/internal.h"
#include "passes/opset.h"
#include "runtime/session.h"

namespace t2o::passes {

namespace {

const std::set<std::string> kRandomOps{"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                                       "Multinomial", "Bernoulli"};

std::string random_node(const Graph& g) {
  std::string found;
  g.for_each_node([&](const Node& n) {
    if (found.empty() && is_onnx(n) && kRandomOps.count(n.op_type)) found = n.describe();
  });
  return found;
}

// Exclusive upper bounds of integer inputs used as indices (Gather data dims, OneHot depth):
// values beyond them would make the model fail rather than test it.
std::map<std::string, int64_t> index_bounds(const Model& m, const std::unordered_map<std::string, Type>& types) {
  static const std::set<std::string> carriers{"Cast", "Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten",
                                              "Expand", "Slice", "Transpose", "Tile", "Concat", "Split"};
  std::map<std::string, int64_t> bounds;
  for (const ValueInfo* vi : m.graph.runtime_inputs()) {
    if (!dtype_is_integer(vi->type.elem)) continue;
    std::set<std::string> same{vi->name};
    std::optional<int64_t> bound;
    auto tighten = [&](int64_t b) {
      if (b > 0) bound = bound ? std::min(*bound, b) : b;
    };
    m.graph.for_each_node([&](const Node& n) {
      auto in = [&](int i) { return n.has_input(i) && same.count(n.inputs[static_cast<size_t>(i)]); };
      if (carriers.count(n.op_type) && in(0)) {
        same.insert(n.outputs.begin(), n.outputs.end());
      } else if ((n.op_type == "Gather" || n.op_type == "GatherElements") && in(1)) {
        auto it = types.find(n.inputs[0]);
        auto s = it == types.end() ? std::nullopt : known_shape(&it->second);
        int64_t axis = n.attr_int("axis", 0);
        if (s && s->rank() > 0) {
          if (axis < 0) axis += s->rank();
          if (axis >= 0 && axis < s->rank() && s->dims[static_cast<size_t>(axis)].is_static())
            tighten(s->dims[static_cast<size_t>(axis)].value);
        }
      } else if (n.op_type == "OneHot" && in(0) && n.has_input(1)) {
        if (const Initializer* d = m.graph.find_initializer(n.inputs[1]))
          if (d->tensor.numel() == 1) tighten(d->tensor.as_int(0));
      }
    });
    if (bound) bounds[vi->name] = *bound;
  }
  return bounds;
}

Tensor generate(DType t, const Dims& dims, std::mt19937_64& rng, std::optional<int64_t> bound) {
  if (t == DType::String) return Tensor::from_strings(std::vector<std::string>(static_cast<size_t>(numel_of(dims)), "a"), dims);
  std::vector<double> v(static_cast<size_t>(numel_of(dims)));
  if (dtype_is_float(t)) {
    std::normal_distribution<double> g(0.0, 1.0);
    for (double& x : v) x = g(rng);
  } else if (t == DType::Bool) {
    std::uniform_int_distribution<int> b(0, 1);
    for (double& x : v) x = b(rng);
  } else {
    // Indices stay inside what they index; other integers are small and positive (valid as
    // lengths, counts and indices of any axis longer than 2).
    std::uniform_int_distribution<int64_t> d(bound ? 0 : 1, bound ? *bound - 1 : 2);
    for (double& x : v) x = static_cast<double>(d(rng));
  }
  return from_doubles(v, dims, t);
}

std::string kind_name(const RValue& v) {
  switch (v.kind) {
    case RValue::Kind::Tensor: return "a tensor";
    case RValue::Kind::Sequence: return "a sequence";
    case RValue::Kind::Optional: return "an optional";
    case RValue::Kind::Map: return "a map";
    default: return "nothing";
  }
}

struct Diff {
  bool bad = false;
  double max_abs = 0, excess = 0;  // excess: worst |diff| / allowed
  std::string problem;
};

Diff compare(const Tensor& want, const Tensor& got, double rtol) {
  Diff d;
  if (want.dtype() != got.dtype() || want.dims() != got.dims()) {
    d.bad = true;
    d.problem = "is " + std::string(dtype_name(got.dtype())) + "[" + dims_to_string(got.dims()) + "], was " +
                std::string(dtype_name(want.dtype())) + "[" + dims_to_string(want.dims()) + "]";
    d.excess = INFINITY;
    return d;
  }
  if (want.dtype() == DType::String) {
    for (int64_t i = 0; i < want.numel(); ++i)
      if (want.strings()[i] != got.strings()[i]) {
        d.bad = true;
        d.excess = INFINITY;
        d.problem = "string " + std::to_string(i) + " differs";
        return d;
      }
    return d;
  }
  if (want.dtype() == DType::Complex64 || want.dtype() == DType::Complex128) {
    if (std::memcmp(want.raw(), got.raw(), want.nbytes()) != 0) d.bad = true, d.excess = INFINITY, d.problem = "differs";
    return d;
  }
  bool is_float = dtype_is_float(want.dtype());
  double scale = 0;
  if (is_float)
    for (int64_t i = 0; i < want.numel(); ++i) {
      double w = want.as_double(i);
      if (std::isfinite(w)) scale = std::max(scale, std::fabs(w));
    }
  for (int64_t i = 0; i < want.numel(); ++i) {
    double w = want.as_double(i), g = got.as_double(i);
    double err = 0, allowed = 0;
    if (is_float) {
      if (std::isnan(w) && std::isnan(g)) continue;
      if (!std::isfinite(w) || !std::isfinite(g)) {
        if (w == g) continue;
        err = INFINITY;
      } else {
        err = std::fabs(g - w);
        allowed = rtol * (std::fabs(w) + scale) + 1e-7;
      }
    } else {
      if (want.as_int(i) == got.as_int(i)) continue;
      err = std::fabs(g - w);
    }
    d.max_abs = std::max(d.max_abs, err);
    if (err > allowed) {
      d.bad = true;
      d.excess = std::max(d.excess, allowed > 0 ? err / allowed : INFINITY);
    }
  }
  return d;
}

Diff compare(const RValue& want, const RValue& got, double rtol) {
  if (want.kind != got.kind) {
    Diff d;
    d.bad = true;
    d.excess = INFINITY;
    d.problem = "is " + kind_name(got) + ", was " + kind_name(want);
    return d;
  }
  if (want.is_tensor()) return compare(want.tensor, got.tensor, rtol);
  if (want.is_sequence()) {
    Diff d;
    if (want.sequence.size() != got.sequence.size()) {
      d.bad = true;
      d.excess = INFINITY;
      d.problem = "has " + std::to_string(got.sequence.size()) + " elements, had " + std::to_string(want.sequence.size());
      return d;
    }
    for (size_t i = 0; i < want.sequence.size(); ++i) {
      Diff e = compare(want.sequence[i], got.sequence[i], rtol);
      d.max_abs = std::max(d.max_abs, e.max_abs);
      if (e.bad && e.excess >= d.excess) d.bad = true, d.excess = e.excess, d.problem = e.problem;
    }
    return d;
  }
  if (want.is_optional()) {
    if (!want.element || !got.element) {
      Diff d;
      d.bad = !want.element != !got.element;
      if (d.bad) d.excess = INFINITY, d.problem = "optional presence differs";
      return d;
    }
    return compare(*want.element, *got.element, rtol);
  }
  return {};
}

}  // namespace


Prover::Prover(const Model& ref, const OptimizeOptions& o) : opts_(o) {
  for (const ValueInfo& v : ref.graph.outputs) outputs_.push_back(v.name);
  if (std::string r = random_node(ref.graph); !r.empty()) {
    unusable_ = "the model draws random numbers (" + r + "), so runs cannot be compared";
    return;
  }
  auto types = infer_types(ref);
  auto bounds = index_bounds(ref, types);
  // Sizes of dynamic dims, by symbol (an unnamed dim is its own symbol).
  std::map<std::string, int64_t> hint;
  std::set<std::string> pinned;
  struct In {
    const ValueInfo* vi;
    std::vector<std::string> syms;  // per axis; "" for static
  };
  std::vector<In> ins;
  for (const ValueInfo* vi : ref.graph.runtime_inputs()) {
    if (vi->type.kind != Type::Kind::Tensor) {
      unusable_ = "input '" + vi->name + "' is not a tensor (" + vi->type.to_string() + ")";
      return;
    }
    auto data = o.input_data.find(vi->name);
    auto sizes = o.input_sizes.find(vi->name);
    if (!vi->type.shape && data == o.input_data.end() && sizes == o.input_sizes.end()) {
      unusable_ = "input '" + vi->name + "' has no shape";
      return;
    }
    In in{vi, {}};
    int rank = vi->type.shape ? vi->type.shape->rank()
                              : static_cast<int>(data != o.input_data.end() ? data->second.rank() : sizes->second.size());
    for (int a = 0; a < rank; ++a) {
      Dim d = vi->type.shape ? vi->type.shape->dims[static_cast<size_t>(a)] : Dim{};
      if (d.is_static()) {
        in.syms.push_back("");
        continue;
      }
      std::string sym = d.is_symbolic() ? d.symbol : vi->name + ":" + std::to_string(a);
      in.syms.push_back(sym);
      if (data != o.input_data.end() && a < data->second.rank()) {
        hint[sym] = data->second.dims()[static_cast<size_t>(a)];
        pinned.insert(sym);
      } else if (sizes != o.input_sizes.end() && static_cast<size_t>(a) < sizes->second.size() && !hint.count(sym)) {
        hint[sym] = sizes->second[static_cast<size_t>(a)];
      }
    }
    ins.push_back(std::move(in));
  }
  auto make = [&](const std::map<std::string, int64_t>& sizes, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::map<std::string, RValue> feed;
    for (const In& in : ins) {
      if (auto d = o.input_data.find(in.vi->name); d != o.input_data.end()) {
        feed[in.vi->name] = d->second;
        continue;
      }
      Dims dims;
      for (size_t a = 0; a < in.syms.size(); ++a)
        dims.push_back(in.syms[a].empty() ? in.vi->type.shape->dims[a].value : sizes.at(in.syms[a]));
      auto b = bounds.find(in.vi->name);
      feed[in.vi->name] = generate(in.vi->type.elem, dims, rng, b == bounds.end() ? std::nullopt : std::optional(b->second));
    }
    return feed;
  };
  std::set<std::string> syms;
  for (const In& in : ins)
    for (const auto& s : in.syms)
      if (!s.empty()) syms.insert(s);
  auto sizes_with = [&](int64_t fill, const std::map<std::string, int64_t>& base, int64_t add, int64_t mul) {
    std::map<std::string, int64_t> r;
    for (const auto& s : syms) {
      auto h = base.find(s);
      int64_t v = h != base.end() ? h->second : fill;
      r[s] = pinned.count(s) ? v : v * mul + add;
    }
    return r;
  };
  std::string first_error;
  std::optional<Session> session;
  try {
    SessionOptions so;
    so.threads = o.threads;
    session.emplace(ref, so);
  } catch (const std::exception& e) {
    unusable_ = std::string("the runtime cannot run the model: ") + e.what();
    return;
  }
  auto attempt = [&](const std::map<std::string, int64_t>& sizes, uint64_t seed) {
    auto feed = make(sizes, seed);
    try {
      auto out = session->run(feed);
      std::vector<RValue> r;
      for (const auto& name : outputs_) r.push_back(out.at(name));
      want_.push_back(std::move(r));
      feeds_.push_back(std::move(feed));
      return true;
    } catch (const std::exception& e) {
      if (first_error.empty()) first_error = e.what();
      return false;
    }
  };
  // Sample 0 at the given sizes (unknown ones from small to larger until the model runs), then
  // each further sample moves every dynamic size not pinned by real data.
  std::map<std::string, int64_t> base;
  bool ok = false;
  for (int64_t fill : {2, 8, 32}) {
    base = sizes_with(fill, hint, 0, 1);
    if ((ok = attempt(base, o.seed))) break;
    if (std::all_of(syms.begin(), syms.end(), [&](const std::string& s) { return hint.count(s); })) break;
  }
  if (!ok) {
    unusable_ = "the model does not run on generated inputs: " + first_error;
    return;
  }
  for (int k = 1; k < std::max(1, o.samples); ++k) {
    uint64_t seed = o.seed + static_cast<uint64_t>(k);
    if (!syms.empty() && (attempt(sizes_with(0, base, k, 1), seed) || attempt(sizes_with(0, base, 0, k + 1), seed)))
      continue;
    attempt(base, seed);
  }
}

std::optional<Finding> Prover::check(const Model& m) const {
  Finding worst;
  double excess = 0;
  try {
    SessionOptions so;
    so.threads = opts_.threads;
    Session s(m, so);
    for (size_t k = 0; k < feeds_.size(); ++k) {
      auto out = s.run(feeds_[k]);
      for (size_t i = 0; i < outputs_.size(); ++i) {
        auto it = out.find(outputs_[i]);
        if (it == out.end()) return Finding{outputs_[i], 0, "output '" + outputs_[i] + "' is missing"};
        Diff d = compare(want_[k][i], it->second, opts_.rtol);
        if (d.bad && (worst.output.empty() || d.excess > excess)) {
          excess = d.excess;
          worst.output = outputs_[i];
          worst.max_abs = d.max_abs;
          worst.problem = d.problem;
        }
      }
    }
  } catch (const std::exception& e) {
    std::string w = e.what();
    for (char& c : w)
      if (c == '\n') c = ' ';
    return Finding{"", 0, "made the model fail to run: " + w};
  }
  if (worst.output.empty()) return std::nullopt;
  return worst;
}

}  // namespace t2o::passes

namespace t2o {

Comparison compare_models(const Model& reference, const Model& candidate, int samples) {
  OptimizeOptions o;
  o.samples = samples;
  passes::Prover p(reference, o);
  Comparison c;
  c.not_proven = p.unusable();
  c.samples = p.samples();
  if (!c.not_proven.empty()) return c;
  if (auto f = p.check(candidate)) {
    c.difference = f->output.empty() ? f->problem
                                     : "output '" + f->output + "' differs (max abs " + std::to_string(f->max_abs) +
                                           (f->problem.empty() ? "" : ", " + f->problem) + ")";
    return c;
  }
  c.proven = true;
  return c;
}

}  // namespace t2o
