#include "runtime/exec.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string_view>

#include <unistd.h>

namespace t2o {

namespace {

// T2O_PROFILE=1: time per op type, printed to stderr at exit. For finding slow kernels. A step's
// first run (primitive creation, weight packing) is left out.
// T2O_PROFILE=shapes: per op type and input dims.
struct OpProfile {
  bool shapes = std::string_view(std::getenv("T2O_PROFILE")) == "shapes";
  std::mutex mu;
  std::map<std::string, std::pair<double, int64_t>> ms;
  ~OpProfile() {
    if (ms.empty()) return;
    std::vector<std::pair<double, std::string>> v;
    double total = 0;
    for (auto& [op, t] : ms) {
      v.push_back({t.first, op});
      total += t.first;
    }
    std::sort(v.rbegin(), v.rend());
    std::fprintf(stderr, "op profile (total %.1f ms):\n", total);
    for (auto& [t, op] : v)
      std::fprintf(stderr, "  %-40s %10.2f ms %5.1f%%  %lld calls\n", op.c_str(), t, 100 * t / total,
                   static_cast<long long>(ms[op].second));
  }
};
OpProfile* op_profile() {
  static OpProfile* p = std::getenv("T2O_PROFILE") ? new OpProfile : nullptr;
  static struct Flush {
    ~Flush() { delete p; }
  } flush;
  return p;
}

std::string norm_domain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

}  // namespace

// Freed activation buffers by size, so that repeated runs of the same graph neither call the
// allocator nor fault in fresh pages: a buffer goes back here when its last tensor drops it.
// Shared by the buffers themselves, so it outlives a GraphExec whose outputs are still held.
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  ~BufferPool() { drop_cache(); }
  // A buffer of at least `bytes`, contents unspecified.
  std::shared_ptr<void> get(size_t bytes) {
    size_t n = round(bytes);
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Exact size first; a bigger one only if it wastes little, so large buffers stay for large needs.
      auto it = free_.lower_bound(n);
      if (it != free_.end() && it->first <= n + n / 4) {
        n = it->first;
        p = it->second;
        cached_ -= n;
        free_.erase(it);
      }
    }
    if (!p) {
      // Pooled buffers count against the memory limit while they exist, cached or in use; a
      // request over the limit first gives the cache back.
      try {
        reserve_memory(n);
      } catch (const Error&) {
        drop_cache();
        reserve_memory(n);
      }
      // More than the machine's memory cannot be filled: refused before the allocator sees it
      // (sanitizer allocators abort on such sizes instead of returning null).
      static const size_t physical = [] {
        long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGESIZE);
        return pages > 0 && size > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(size) : SIZE_MAX;
      }();
      p = n <= physical ? std::aligned_alloc(64, n) : nullptr;
      if (!p) {
        release_memory(n);
        throw InputError("out of memory allocating " + std::to_string(bytes) + " bytes" +
                         (n > physical ? " (more than this machine's " + std::to_string(physical) + ")" : ""));
      }
      fresh_.fetch_add(1, std::memory_order_relaxed);
    }
    std::weak_ptr<BufferPool> self = weak_from_this();
    return std::shared_ptr<void>(p, [self, n](void* q) {
      if (auto pool = self.lock()) {
        pool->put(q, n);
      } else {
        std::free(q);
        release_memory(n);
      }
    });
  }
  size_t fresh() const { return fresh_.load(std::memory_order_relaxed); }

 private:
  static size_t round(size_t bytes) { return std::max<size_t>(64, (bytes + 4095) / 4096 * 4096); }
  void drop_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [n, p] : free_) {
      std::free(p);
      release_memory(n);
    }
    free_.clear();
    cached_ = 0;
  }
  void put(void* p, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    // Shapes that keep changing must not make the pool grow without bound.
    if (cached_ + n > kMaxCached) {
      std::free(p);
      release_memory(n);
      return;
    }
    free_.emplace(n, p);
    cached_ += n;
  }
  static constexpr size_t kMaxCached = size_t{1} << 30;
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t cached_ = 0;
  std::atomic<size_t> fresh_{0};
};

namespace {

// Names a node reads from enclosing scopes, including those its own subgraphs read.
void collect_reads(const Graph& g, std::set<std::string>& reads) {
  std::set<std::string> defined;
  for (const auto& i : g.inputs) defined.insert(i.name);
  for (const auto& i : g.initializers) defined.insert(i.name);
  for (const Node& n : g.nodes) {
    for (const auto& in : n.inputs)
      if (!in.empty() && !defined.count(in)) reads.insert(in);
    for (const Attribute& a : n.attributes) {
      std::vector<const Graph*> subs;
      if (a.g) subs.push_back(a.g.get());
      for (const auto& s : a.graphs) subs.push_back(s.get());
      for (const Graph* s : subs) {
        std::set<std::string> inner;
        collect_reads(*s, inner);
        for (const auto& r : inner)
          if (!defined.count(r)) reads.insert(r);
      }
    }
    for (const auto& o : n.outputs) defined.insert(o);
  }
  for (const auto& o : g.outputs)
    if (!defined.count(o.name)) reads.insert(o.name);
}

// The outer names n's subgraphs (If/Loop/Scan bodies) read.
std::set<std::string> subgraph_reads(const Node& n) {
  std::set<std::string> reads;
  for (const Attribute& a : n.attributes) {
    if (a.g) collect_reads(*a.g, reads);
    for (const auto& sg : a.graphs) collect_reads(*sg, reads);
  }
  return reads;
}

// Whether a floating-point element of a value is NaN or infinite.
bool has_nonfinite(const RValue& v) {
  switch (v.kind) {
    case RValue::Kind::Tensor: return v.tensor.has_nonfinite();
    case RValue::Kind::Sequence:
      return std::any_of(v.sequence.begin(), v.sequence.end(), [](const Tensor& t) { return t.has_nonfinite(); });
    case RValue::Kind::Optional: return v.element && has_nonfinite(*v.element);
    case RValue::Kind::Map: return v.map_values.has_nonfinite();
    case RValue::Kind::None: return false;
  }
  return false;
}

// What one run of a graph was given, for KernelContext::nonfinite_inputs (scanned on first ask).
struct RunInputs {
  const std::vector<RValue>& inputs;
  const Graph& graph;
  const std::vector<bool>& is_const;
  const std::unordered_map<std::string, int>& slots;
  const KernelContext* outer;
  mutable int nonfinite = -1;  // -1: not scanned yet
  bool any_nonfinite() const {
    if (nonfinite < 0) {
      bool any = outer && outer->nonfinite_inputs();
      for (size_t i = 0; !any && i < inputs.size(); ++i) any = has_nonfinite(inputs[i]);
      for (size_t i = 0; !any && i < graph.initializers.size(); ++i) {
        const Initializer& init = graph.initializers[i];
        auto it = slots.find(init.name);
        if (it != slots.end() && !is_const[static_cast<size_t>(it->second)]) any = init.tensor.has_nonfinite();
      }
      nonfinite = any ? 1 : 0;
    }
    return nonfinite == 1;
  }
};

}  // namespace

class NodeContext : public KernelContext {
 public:
  NodeContext(const GraphExec::Step& step, std::vector<RValue>& values, const std::vector<RValue>& consts,
              const std::vector<bool>& is_const, const GraphExec& exec, const KernelContext* outer,
              int64_t opset, int threads, const std::vector<Tensor>* into = nullptr, const RunInputs* run = nullptr)
      : step_(step), values_(values), consts_(consts), is_const_(is_const), exec_(exec), outer_(outer),
        opset_(opset), threads_(threads), into_(into), run_(run) {}
  const Node& node() const override { return *step_.node; }
  int64_t opset() const override { return opset_; }
  int num_inputs() const override { return static_cast<int>(step_.in.size()); }
  int num_outputs() const override { return static_cast<int>(step_.out.size()); }
  bool has_input(int i) const override {
    if (i < 0 || i >= num_inputs() || step_.in[static_cast<size_t>(i)] < 0) return false;
    return value_at(step_.in[static_cast<size_t>(i)]).kind != RValue::Kind::None;
  }
  bool has_output(int i) const override { return i >= 0 && i < num_outputs() && step_.out[static_cast<size_t>(i)] >= 0; }
  const RValue& input_value(int i) const override {
    if (!has_input(i)) fail("input " + std::to_string(i) + " is absent");
    return value_at(step_.in[static_cast<size_t>(i)]);
  }
  Tensor& allocate_output(int i, DType dtype, const Dims& dims) override {
    Tensor& t = allocate_output_uninit(i, dtype, dims);
    if (dtype != DType::String && t.nbytes()) std::memset(t.raw(), 0, t.nbytes());
    return t;
  }
  Tensor& allocate_output_uninit(int i, DType dtype, const Dims& dims) override {
    Tensor t;
    if (const Tensor* bound = bound_buffer(i, dtype, dims)) {
      t = *bound;
    } else {
      for (int64_t d : dims)
        if (d < 0) fail("output dimension is negative: " + dims_to_string(dims));
      try {
        if (dtype == DType::String || dtype == DType::Undefined) {
          t = Tensor(dtype, dims);
        } else {
          std::shared_ptr<void> buf = exec_.pool_->get(nbytes_of(dtype, dims));
          void* p = buf.get();
          t = Tensor::share(dtype, dims, std::move(buf), p);
        }
      } catch (const Error& e) {
        // Sizes come from the model's data: say which node asked for them.
        throw Error(node().describe() + ": output " + std::to_string(i) + ": " + e.what(), e.hint(), e.exit_code());
      }
    }
    if (!has_output(i)) {
      scratch_ = std::move(t);
      return scratch_;
    }
    RValue& v = values_[static_cast<size_t>(step_.out[static_cast<size_t>(i)])];
    v = RValue(std::move(t));
    return v.tensor;
  }
  void set_output(int i, RValue v) override {
    if (!has_output(i)) return;
    values_[static_cast<size_t>(step_.out[static_cast<size_t>(i)])] = std::move(v);
  }
  bool input_reusable(int i) const override {
    if (!has_input(i)) return false;
    int s = step_.in[static_cast<size_t>(i)];
    size_t u = static_cast<size_t>(s);
    if (is_const_[u] || exec_.is_outer_[u]) return false;
    if (std::find(step_.release.begin(), step_.release.end(), s) == step_.release.end()) return false;
    for (size_t j = 0; j < step_.in.size(); ++j)
      if (static_cast<int>(j) != i && step_.in[j] == s) return false;
    const RValue& v = values_[u];
    return v.is_tensor() && v.tensor.sole_owner();
  }
  int threads() const override { return threads_; }
  bool nonfinite_inputs() const override { return run_ ? run_->any_nonfinite() : outer_ && outer_->nonfinite_inputs(); }
  const RValue* lookup(const std::string& name) const override {
    auto it = exec_.slots_.find(name);
    if (it != exec_.slots_.end()) {
      const RValue& v = value_at(it->second);
      if (v.kind != RValue::Kind::None) return &v;
    }
    return outer_ ? outer_->lookup(name) : nullptr;
  }

 private:
  // The caller's buffer for output i when it is a bound graph output of this dtype and these dims.
  const Tensor* bound_buffer(int i, DType dtype, const Dims& dims) const {
    if (!into_ || !has_output(i)) return nullptr;
    int slot = step_.out[static_cast<size_t>(i)];
    for (size_t k = 0; k < exec_.output_slots_.size() && k < into_->size(); ++k) {
      const Tensor& b = (*into_)[k];
      if (exec_.output_slots_[k] == slot && b.defined() && b.dtype() == dtype && b.dims() == dims) return &b;
    }
    return nullptr;
  }
  const RValue& value_at(int slot) const {
    size_t s = static_cast<size_t>(slot);
    if (is_const_[s]) return consts_[s];
    if (exec_.is_outer_[s] && values_[s].kind == RValue::Kind::None && outer_) {
      const RValue* v = outer_->lookup(exec_.slot_names_[s]);
      if (v) return *v;
    }
    return values_[s];
  }
  const GraphExec::Step& step_;
  std::vector<RValue>& values_;
  const std::vector<RValue>& consts_;
  const std::vector<bool>& is_const_;
  const GraphExec& exec_;
  const KernelContext* outer_;
  int64_t opset_;
  int threads_;
  const std::vector<Tensor>* into_;
  const RunInputs* run_;
  Tensor scratch_;
};

int GraphExec::slot_of(const std::string& name) {
  auto it = slots_.find(name);
  if (it != slots_.end()) return it->second;
  int s = static_cast<int>(slot_names_.size());
  slots_.emplace(name, s);
  slot_names_.push_back(name);
  constants_.emplace_back();
  is_const_.push_back(false);
  is_outer_.push_back(false);
  return s;
}

GraphExec::GraphExec(const Graph& g, const std::unordered_map<std::string, int64_t>& opsets, const ExecOptions& opts,
                     const std::vector<std::string>& outer_names)
    : graph_(g), opsets_(opsets), opts_(opts), pool_(std::make_shared<BufferPool>()) {
  std::set<std::string> init_names;
  for (const Initializer& init : g.initializers) {
    int s = slot_of(init.name);
    constants_[static_cast<size_t>(s)] = RValue(init.tensor);
    is_const_[static_cast<size_t>(s)] = true;
    init_names.insert(init.name);
  }
  std::set<std::string> input_names;
  for (const ValueInfo& vi : g.inputs) {
    input_names.insert(vi.name);
    // An initializer that is also a graph input is a default the caller may override.
    if (init_names.count(vi.name)) {
      is_const_[static_cast<size_t>(slot_of(vi.name))] = false;
      continue;
    }
    formal_inputs_.push_back(&vi);
    input_slots_.push_back(slot_of(vi.name));
  }
  for (const Initializer& init : g.initializers)
    if (input_names.count(init.name)) {
      // Not constant: seeded at run time unless fed.
    }
  std::set<std::string> outer(outer_names.begin(), outer_names.end());
  std::set<std::string> defined(input_names);
  defined.insert(init_names.begin(), init_names.end());

  // Readers per name, for releasing packed constants: a constant read by one node only, not a
  // graph output and not read by name inside a subgraph.
  std::unordered_map<std::string, int> readers;
  if (opts_.release_packed_min_bytes > 0) {
    for (const Node& n : g.nodes) {
      for (const auto& in : n.inputs) ++readers[in];
      for (const auto& r : subgraph_reads(n)) readers[r] += 2;
    }
    for (const ValueInfo& o : g.outputs) readers[o.name] += 2;
  }
  ExecOptions sub_opts = opts_;
  sub_opts.release_packed_min_bytes = 0;
  sub_opts.on_release = nullptr;

  KernelRegistry& reg = KernelRegistry::instance();
  std::map<std::string, std::pair<int, std::string>> unsupported;  // op -> count, first node
  std::vector<RValue> fold_values;
  for (const Node& n : g.nodes) {
    Step st;
    st.node = &n;
    for (const auto& in : n.inputs) {
      if (in.empty()) {
        st.in.push_back(-1);
        continue;
      }
      int s = slot_of(in);
      if (!defined.count(in)) {
        if (!outer.count(in))
          throw InputError(n.describe() + " reads '" + in + "', which no earlier node, input or initializer defines",
                           "the graph is not topologically sorted or an input name is dangling");
        is_outer_[static_cast<size_t>(s)] = true;
      }
      st.in.push_back(s);
    }
    for (const auto& out : n.outputs) {
      if (out.empty()) {
        st.out.push_back(-1);
        continue;
      }
      // Single assignment, as ONNX requires: a kernel writing the slot it reads would see its
      // input change under it.
      if (!defined.insert(out).second)
        throw InputError(n.describe() + " assigns '" + out + "', which is already defined",
                         "every value of an ONNX graph is produced once");
      st.out.push_back(slot_of(out));
    }
    std::string domain = norm_domain(n.domain);
    auto oit = opsets_.find(domain);
    int64_t opset = oit == opsets_.end() ? 0 : oit->second;
    const KernelFactory* f = reg.find(domain, n.op_type, opset);
    if (!f) {
      std::string key = (domain.empty() ? "" : domain + "::") + n.op_type + (reg.has_op(domain, n.op_type) ? " (opset " + std::to_string(opset) + ")" : "");
      auto& u = unsupported[key];
      if (u.first++ == 0) u.second = n.describe();
      steps_.push_back(std::move(st));
      continue;
    }
    // Subgraphs see everything defined so far plus our own outer scope. The list is made only
    // for nodes that have subgraphs (kernels compile them in their constructors, while `defined`
    // is as of this node): copying it for every node made building a long chain quadratic.
    auto visible = [&defined, &outer] {
      std::vector<std::string> v(defined.begin(), defined.end());
      v.insert(v.end(), outer.begin(), outer.end());
      return v;
    };
    const std::vector<bool>& is_const = is_const_;
    const std::vector<RValue>& consts = constants_;
    std::vector<int> in_slots = st.in;
    KernelInfo info{n, opset, opts_.fast_paths, opts_.threads,
                    [&, in_slots](int i) -> const Tensor* {
                      if (i < 0 || i >= static_cast<int>(in_slots.size()) || in_slots[static_cast<size_t>(i)] < 0) return nullptr;
                      size_t s = static_cast<size_t>(in_slots[static_cast<size_t>(i)]);
                      return is_const[s] && consts[s].is_tensor() ? &consts[s].tensor : nullptr;
                    },
                    [this, visible, &sub_opts](const Graph& sub) -> std::shared_ptr<SubgraphRunner> {
                      return std::make_shared<GraphExec>(sub, opsets_, sub_opts, visible());
                    },
                    &g};
    st.kernel = (*f)(info);
    // Constant nodes fold at build: their outputs become constants.
    if (n.op_type == "Constant" && domain.empty() && st.out.size() == 1 && st.out[0] >= 0) {
      // One scratch vector for all of them: a fresh one per Constant would be quadratic.
      fold_values.resize(slot_names_.size());
      NodeContext ctx(st, fold_values, constants_, is_const_, *this, nullptr, opset, opts_.threads);
      st.kernel->run(ctx);
      size_t s = static_cast<size_t>(st.out[0]);
      constants_.resize(slot_names_.size());
      constants_[s] = std::move(fold_values[s]);
      fold_values[s] = RValue();
      is_const_[s] = true;
      continue;
    }
    // The weights as given go as soon as their one reader holds them packed.
    for (size_t k = 0; opts_.release_packed_min_bytes > 0 && k < st.in.size(); ++k) {
      int s = st.in[k];
      if (s < 0 || !is_const_[static_cast<size_t>(s)] || !constants_[static_cast<size_t>(s)].is_tensor()) continue;
      const std::string& name = slot_names_[static_cast<size_t>(s)];
      const Tensor& t = constants_[static_cast<size_t>(s)].tensor;
      if (readers[name] != 1 || !t.raw() || t.nbytes() < opts_.release_packed_min_bytes ||
          !st.kernel->can_release_constant(static_cast<int>(k)))
        continue;
      // Same dtype and dims, no data, and storage of its own (same_storage tells it apart).
      Tensor placeholder = Tensor::share(t.dtype(), t.dims(), std::make_shared<char>(0), nullptr);
      st.kernel->release_constant(static_cast<int>(k), placeholder);
      constants_[static_cast<size_t>(s)] = RValue(placeholder);
      released_[name] = {steps_.size(), static_cast<int>(k)};
      if (opts_.on_release) opts_.on_release(name, placeholder);
    }
    steps_.push_back(std::move(st));
  }
  if (!unsupported.empty()) {
    std::string msg = "the runtime has no kernel for ";
    bool first = true;
    for (const auto& [op, u] : unsupported) {
      msg += (first ? "" : ", ") + op + " (" + std::to_string(u.first) + "x, first at " + u.second + ")";
      first = false;
    }
    throw Error(msg, "run the model in ONNX Runtime, or report the missing op");
  }
  for (const ValueInfo& o : g.outputs) {
    if (!defined.count(o.name) && !outer.count(o.name))
      throw InputError("graph output '" + o.name + "' is not produced by any node, input or initializer");
    int s = slot_of(o.name);
    if (!defined.count(o.name)) is_outer_[static_cast<size_t>(s)] = true;
    output_slots_.push_back(s);
  }
  constants_.resize(slot_names_.size());
  opts_.on_release = nullptr;  // it may point into the caller's frame
  // Liveness: free a value after its last reader, unless it is an output or constant.
  std::vector<int> last(slot_names_.size(), -1);
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (int s : steps_[i].in)
      if (s >= 0) last[static_cast<size_t>(s)] = static_cast<int>(i);
    // Values read inside subgraphs by name stay alive until this step.
    for (const auto& r : subgraph_reads(*steps_[i].node)) {
      auto it = slots_.find(r);
      if (it != slots_.end()) last[static_cast<size_t>(it->second)] = static_cast<int>(i);
    }
  }
  std::set<int> keep(output_slots_.begin(), output_slots_.end());
  for (size_t s = 0; s < last.size(); ++s)
    if (last[s] >= 0 && !keep.count(static_cast<int>(s)) && !is_const_[s])
      steps_[static_cast<size_t>(last[s])].release.push_back(static_cast<int>(s));
}

size_t GraphExec::fresh_buffers() const { return pool_->fresh(); }

Tensor GraphExec::restore_constant(const std::string& name) {
  auto it = released_.find(name);
  if (it == released_.end()) throw Error("restore_constant: '" + name + "' was not released");
  return steps_[it->second.first].kernel->restore_constant(it->second.second);
}

namespace {

// The deadline of the run on this thread (subgraphs run on their caller's thread); max: none.
thread_local std::chrono::steady_clock::time_point t_deadline = std::chrono::steady_clock::time_point::max();

struct DeadlineScope {
  std::chrono::steady_clock::time_point saved = t_deadline;
  explicit DeadlineScope(double seconds) {
    if (seconds > 0)
      t_deadline = std::min(t_deadline, std::chrono::steady_clock::now() +
                                            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                std::chrono::duration<double>(std::min(seconds, 1e9))));
  }
  ~DeadlineScope() { t_deadline = saved; }
};

}  // namespace

std::vector<RValue> GraphExec::run_graph(const std::vector<RValue>& inputs, const KernelContext* outer,
                                         std::unordered_map<std::string, RValue>* keep_all,
                                         const std::vector<Tensor>* into) {
  DeadlineScope deadline(outer ? 0.0 : opts_.time_limit_s);
  const bool timed = t_deadline != std::chrono::steady_clock::time_point::max();
  std::vector<RValue> values(slot_names_.size());
  // Overridable initializers start at their defaults.
  for (const Initializer& init : graph_.initializers) {
    int s = slots_.at(init.name);
    if (!is_const_[static_cast<size_t>(s)]) values[static_cast<size_t>(s)] = RValue(init.tensor);
  }
  for (size_t i = 0; i < input_slots_.size() && i < inputs.size(); ++i)
    values[static_cast<size_t>(input_slots_[i])] = inputs[i];
  const RunInputs run{inputs, graph_, is_const_, slots_, outer};
  for (Step& st : steps_) {
    if (timed && std::chrono::steady_clock::now() > t_deadline)
      throw InputError(st.node->describe() + ": the run exceeded its time limit",
                       "the model computes longer than allowed (a Loop running as long as its data says?); raise "
                       "--timeout if it is genuine");
    auto oit = opsets_.find(norm_domain(st.node->domain));
    NodeContext ctx(st, values, constants_, is_const_, *this, outer, oit == opsets_.end() ? 0 : oit->second,
                    opts_.threads, into, &run);
    try {
      if (OpProfile* prof = op_profile()) {
        auto t0 = std::chrono::steady_clock::now();
        st.kernel->run(ctx);
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::string key = st.node->op_type;
        if (prof->shapes) {
          for (int i = 0; i < ctx.num_inputs(); ++i) {
            key += i ? " " : "  ";
            if (ctx.has_input(i) && ctx.input_value(i).is_tensor()) key += dims_to_string(ctx.input_value(i).tensor.dims());
          }
        }
        std::lock_guard<std::mutex> lock(prof->mu);
        if (st.profiled++ > 0) {
          auto& e = prof->ms[key];
          e.first += ms;
          ++e.second;
        }
      } else {
        st.kernel->run(ctx);
      }
    } catch (const Error& e) {
      // Errors from shared helpers (size checks, the memory limit) do not know the node.
      std::string d = st.node->describe();
      if (std::string_view(e.what()).find(d) != std::string_view::npos) throw;
      throw Error(d + ": " + e.what(), e.hint(), e.exit_code());
    } catch (const std::exception& e) {
      throw Error(st.node->describe() + ": " + e.what());
    }
    if (keep_all) {
      for (int s : st.out)
        if (s >= 0) (*keep_all)[slot_names_[static_cast<size_t>(s)]] = values[static_cast<size_t>(s)];
    } else {
      for (int s : st.release) values[static_cast<size_t>(s)] = RValue();
    }
  }
  std::vector<RValue> outs;
  for (int s : output_slots_) {
    size_t u = static_cast<size_t>(s);
    if (is_const_[u]) outs.push_back(constants_[u]);
    else if (values[u].kind == RValue::Kind::None && is_outer_[u] && outer) {
      const RValue* v = outer->lookup(slot_names_[u]);
      outs.push_back(v ? *v : RValue());
    } else {
      outs.push_back(values[u]);
    }
  }
  return outs;
}

}  // namespace t2o
