#include "runtime/session.h"

#include <omp.h>
#include <unistd.h>

#include <cstdlib>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "onnx/model_io.h"
#include "runtime/exec.h"
#include "runtime/functions.h"
#include "runtime/optimize.h"

namespace t2o {

namespace {

// Runnable tasks other than this one (/proc/loadavg's "running/total" counts the reader): the
// fewest of five looks a millisecond apart, so that a task passing through is not counted.
int other_runnable_tasks() {
  int fewest = 1 << 30;
  for (int i = 0; i < 5; ++i) {
    if (i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::FILE* f = std::fopen("/proc/loadavg", "r");
    if (!f) return 0;
    double l1, l5, l15;
    int running = 0, total = 0;
    int got = std::fscanf(f, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total);
    std::fclose(f);
    if (got != 5) return 0;
    fewest = std::min(fewest, std::max(0, running - 1));
  }
  return fewest;
}

}  // namespace

void choose_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  if (other_runnable_tasks() > 0) setenv("OMP_WAIT_POLICY", "passive", 1);
  else setenv("GOMP_SPINCOUNT", "10000", 1);
  execv("/proc/self/exe", argv);
}

void set_runtime_threads(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  omp_set_num_threads(threads);
}

struct Session::Impl {
  Model model;
  SessionOptions opts;
  std::vector<ValueInfo> inputs;
  Graph exec_graph;  // the graph GraphExec runs: model.graph rewritten by optimize.h when fast
  std::unique_ptr<GraphExec> exec;
  // run_all promises every value of the graph as written, which fusion removes: it runs this
  // unrewritten plan (same kernels and options, built at the first run_all) instead.
  bool rewritten = false;
  std::unordered_map<std::string, int64_t> opsets;
  ExecOptions exec_opts;
  std::once_flag full_once;
  std::unique_ptr<GraphExec> full_exec;
  // Weights whose readers keep packed copies: the plan holds no copy as given (the model's and
  // exec_graph's initializers are data-less placeholders) until something asks for the model.
  std::set<std::string> released;
  std::once_flag restore_once;

  void restore_model() {
    std::call_once(restore_once, [this] {
      for (Initializer& init : model.graph.initializers)
        if (released.count(init.name) && !init.tensor.raw()) init.tensor = exec->restore_constant(init.name);
    });
  }

  void check_input(const ValueInfo& vi, const RValue& v, std::map<std::string, int64_t>& symbols) const {
    const Type& t = vi.type;
    if (t.kind == Type::Kind::Tensor) {
      if (!v.is_tensor()) throw Error("input '" + vi.name + "' must be a tensor", {}, kExitUsage);
      const Tensor& x = v.tensor;
      if (t.elem != DType::Undefined && x.dtype() != t.elem)
        throw Error("input '" + vi.name + "' has element type " + std::string(dtype_name(x.dtype())) +
                        ", the model expects " + std::string(dtype_name(t.elem)),
                    {}, kExitUsage);
      if (!t.shape) return;
      const Shape& s = *t.shape;
      if (x.rank() != s.rank())
        throw Error("input '" + vi.name + "' has rank " + std::to_string(x.rank()) + " (" + dims_to_string(x.dims()) +
                        "), the model expects rank " + std::to_string(s.rank()) + " (" + s.to_string() + ")",
                    {}, kExitUsage);
      for (int i = 0; i < s.rank(); ++i) {
        const Dim& d = s.dims[static_cast<size_t>(i)];
        int64_t got = x.dims()[static_cast<size_t>(i)];
        if (d.is_static() && d.value != got)
          throw Error("input '" + vi.name + "' has size " + std::to_string(got) + " on axis " + std::to_string(i) +
                          ", the model expects " + std::to_string(d.value) + " (" + s.to_string() + ")",
                      {}, kExitUsage);
        if (d.is_symbolic()) {
          auto [it, fresh] = symbols.emplace(d.symbol, got);
          if (!fresh && it->second != got)
            throw Error("input '" + vi.name + "' has " + d.symbol + "=" + std::to_string(got) + " on axis " +
                            std::to_string(i) + ", but another input set " + d.symbol + "=" +
                            std::to_string(it->second),
                        {}, kExitUsage);
        }
      }
    } else if (t.kind == Type::Kind::Sequence && !v.is_sequence()) {
      throw Error("input '" + vi.name + "' must be a sequence of tensors", {}, kExitUsage);
    }
  }

  std::vector<RValue> bind(const std::map<std::string, RValue>& given) const {
    for (const auto& [name, v] : given) {
      bool known = false;
      for (const auto& vi : model.graph.inputs) known = known || vi.name == name;
      if (!known) {
        std::string names;
        for (const auto& vi : inputs) names += (names.empty() ? "" : ", ") + vi.name;
        throw Error("the model has no input named '" + name + "'", "its inputs are: " + names, kExitUsage);
      }
    }
    std::vector<RValue> ordered;
    std::map<std::string, int64_t> symbols;
    for (const ValueInfo& vi : inputs) {
      auto it = given.find(vi.name);
      if (it == given.end()) {
        if (vi.type.kind == Type::Kind::Optional) {
          ordered.push_back(RValue());
          continue;
        }
        throw Error("input '" + vi.name + "' (" + vi.type.to_string() + ") is missing", {}, kExitUsage);
      }
      check_input(vi, it->second, symbols);
      ordered.push_back(it->second);
    }
    return ordered;
  }
};

Session::Session(Model model, SessionOptions opts) : impl_(std::make_unique<Impl>()) {
  impl_->model = std::move(model);
  impl_->opts = opts;
  inline_model_functions(impl_->model);
  set_runtime_threads(opts.threads);
  // model() stays as loaded; fusion rewrites a copy (tensors share storage, so it is cheap).
  Model run_model = impl_->model;
  if (opts.fast_paths) impl_->rewritten = optimize_for_runtime(run_model) > 0;
  impl_->exec_graph = std::move(run_model.graph);
  for (const auto& o : impl_->model.opset_import) impl_->opsets[o.domain == "ai.onnx" ? "" : o.domain] = o.version;
  std::unordered_map<std::string, int64_t> opsets = impl_->opsets;
  for (const auto& o : run_model.opset_import) opsets[o.domain == "ai.onnx" ? "" : o.domain] = o.version;
  ExecOptions& eo = impl_->exec_opts;
  eo.threads = opts.threads > 0 ? opts.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  eo.fast_paths = opts.fast_paths;
  eo.time_limit_s = opts.time_limit_s;
  // Packed weights replace the weights as given (as ONNX Runtime's prepacking does): without this
  // a transformer's matrices would sit in memory twice. A released initializer becomes a data-less
  // placeholder in both graphs until model() or run_all needs it (restore_model).
  std::unordered_map<std::string, size_t> run_index, model_index;
  if (opts.fast_paths) {
    for (size_t i = 0; i < impl_->exec_graph.initializers.size(); ++i) run_index[impl_->exec_graph.initializers[i].name] = i;
    for (size_t i = 0; i < impl_->model.graph.initializers.size(); ++i) model_index[impl_->model.graph.initializers[i].name] = i;
    eo.release_packed_min_bytes = 16 * 1024;
    eo.on_release = [this, &run_index, &model_index](const std::string& name, const Tensor& placeholder) {
      auto r = run_index.find(name);
      if (r == run_index.end()) return;  // a folded Constant's value: the node keeps it
      Tensor& given = impl_->exec_graph.initializers[r->second].tensor;
      // The model as loaded shares the tensor unless fusion replaced it under the same name.
      auto m = model_index.find(name);
      if (m != model_index.end() && impl_->model.graph.initializers[m->second].tensor.same_storage(given))
        impl_->model.graph.initializers[m->second].tensor = placeholder;
      given = placeholder;
      impl_->released.insert(name);
    };
  }
  impl_->exec = std::make_unique<GraphExec>(impl_->exec_graph, opsets, eo);
  eo.on_release = nullptr;
  eo.release_packed_min_bytes = 0;
  for (const ValueInfo* vi : impl_->exec->formal_inputs()) impl_->inputs.push_back(*vi);
}

Session Session::from_file(const std::string& path, SessionOptions opts) { return Session(load_model(path), opts); }
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

const std::vector<ValueInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<ValueInfo>& Session::outputs() const { return impl_->model.graph.outputs; }
const Model& Session::model() const {
  impl_->restore_model();
  return impl_->model;
}

std::map<std::string, RValue> Session::run(const std::map<std::string, RValue>& inputs) {
  std::vector<RValue> outs = impl_->exec->run_graph(impl_->bind(inputs), nullptr);
  std::map<std::string, RValue> r;
  for (size_t i = 0; i < outs.size(); ++i) r[impl_->model.graph.outputs[i].name] = std::move(outs[i]);
  return r;
}

namespace {

bool overlaps(const Tensor& a, const Tensor& b) {
  if (!a.nbytes() || !b.nbytes()) return false;
  auto pa = static_cast<const char*>(a.raw()), pb = static_cast<const char*>(b.raw());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

std::string describe(DType t, const Dims& d) { return std::string(dtype_name(t)) + "[" + dims_to_string(d) + "]"; }

}  // namespace

std::map<std::string, RValue> Session::run(const std::map<std::string, RValue>& inputs,
                                           const std::map<std::string, Tensor>& outputs) {
  const std::vector<ValueInfo>& outs_info = impl_->model.graph.outputs;
  std::vector<Tensor> into(outs_info.size());
  for (const auto& [name, buf] : outputs) {
    size_t k = 0;
    while (k < outs_info.size() && outs_info[k].name != name) ++k;
    if (k == outs_info.size()) {
      std::string names;
      for (const auto& o : outs_info) names += (names.empty() ? "" : ", ") + o.name;
      throw Error("the model has no output named '" + name + "'", "its outputs are: " + names, kExitUsage);
    }
    const Type& t = outs_info[k].type;
    if (t.kind == Type::Kind::Tensor) {
      bool fits = t.elem == DType::Undefined || t.elem == buf.dtype();
      if (fits && t.shape && t.shape->is_static()) fits = t.shape->static_dims() == buf.dims();
      if (!fits)
        throw Error("the buffer bound to output '" + name + "' is " + describe(buf.dtype(), buf.dims()) +
                        ", the model's output is " + t.to_string(),
                    {}, kExitUsage);
    }
    for (const auto& [in_name, v] : inputs)
      if (v.is_tensor() && overlaps(v.tensor, buf))
        throw Error("the buffer bound to output '" + name + "' overlaps input '" + in_name + "'",
                    "give each output its own memory", kExitUsage);
    into[k] = buf;
  }
  std::vector<RValue> outs = impl_->exec->run_graph(impl_->bind(inputs), nullptr, nullptr, &into);
  std::map<std::string, RValue> r;
  for (size_t k = 0; k < outs.size(); ++k) {
    Tensor& buf = into[k];
    if (buf.defined()) {
      if (!outs[k].is_tensor() || outs[k].tensor.dtype() != buf.dtype() || outs[k].tensor.dims() != buf.dims())
        throw Error("output '" + outs_info[k].name + "' is " +
                        (outs[k].is_tensor() ? describe(outs[k].tensor.dtype(), outs[k].tensor.dims()) : "not a tensor") +
                        " but its bound buffer is " + describe(buf.dtype(), buf.dims()),
                    "bind a buffer of the output's size for these inputs", kExitUsage);
      if (outs[k].tensor.raw() != buf.raw()) {
        if (buf.dtype() == DType::String) std::copy_n(outs[k].tensor.strings(), buf.numel(), buf.strings());
        else if (buf.nbytes()) std::memcpy(buf.raw(), outs[k].tensor.raw(), buf.nbytes());
      }
      outs[k] = RValue(buf);
    }
    r[outs_info[k].name] = std::move(outs[k]);
  }
  return r;
}

size_t Session::fresh_buffers() const { return impl_->exec->fresh_buffers(); }

std::vector<RValue> Session::run_ordered(const std::vector<RValue>& inputs) {
  if (inputs.size() != impl_->inputs.size())
    throw Error("the model takes " + std::to_string(impl_->inputs.size()) + " inputs, " +
                    std::to_string(inputs.size()) + " were given",
                {}, kExitUsage);
  std::map<std::string, RValue> named;
  for (size_t i = 0; i < inputs.size(); ++i) named[impl_->inputs[i].name] = inputs[i];
  return impl_->exec->run_graph(impl_->bind(named), nullptr);
}

std::map<std::string, RValue> Session::run_all(const std::map<std::string, RValue>& inputs) {
  std::unordered_map<std::string, RValue> all;
  GraphExec* exec = impl_->exec.get();
  if (impl_->rewritten) {
    Impl& m = *impl_;
    m.restore_model();
    std::call_once(m.full_once, [&m] { m.full_exec = std::make_unique<GraphExec>(m.model.graph, m.opsets, m.exec_opts); });
    exec = m.full_exec.get();
  }
  std::vector<RValue> outs = exec->run_graph(impl_->bind(inputs), nullptr, &all);
  std::map<std::string, RValue> r(all.begin(), all.end());
  for (size_t i = 0; i < outs.size(); ++i) r[impl_->model.graph.outputs[i].name] = std::move(outs[i]);
  return r;
}

}  // namespace t2o
