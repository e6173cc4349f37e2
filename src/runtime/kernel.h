#pragma once
// The kernel API. A kernel is created once per node at session build (it may prepack weights that
// are initializers) and run many times. Each op family lives in runtime/kernels/<family>.cpp and
// ends with a `register_<family>_kernels(KernelRegistry&)` function, one line per op.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/value.h"

namespace t2o {

class KernelContext;
class SubgraphRunner;

// What a kernel may know at build time.
struct KernelInfo {
  const Node& node;
  int64_t opset;              // opset version of the node's domain in this model
  bool fast_paths;            // false: use plain reference code only
  int threads;                // thread budget of the session
  // Constant input i (an initializer or Constant output), or nullptr when it is computed at run time.
  std::function<const Tensor*(int)> constant_input;
  // Compiles a subgraph attribute into a runner (If/Loop/Scan bodies).
  std::function<std::shared_ptr<SubgraphRunner>(const Graph&)> compile_subgraph;
  // The graph the node belongs to, for ops that reason about other nodes (Gradient differentiates
  // the nodes producing its y). Last so that aggregate initializations without it still compile.
  const Graph* graph = nullptr;
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual void run(KernelContext& ctx) = 0;
  // Constant input i kept by the kernel in a form of its own (packed weights), so that its data
  // as given need not stay in memory. Asked of a constant's only reader (GraphExec).
  virtual bool can_release_constant(int) const { return false; }
  // From now on input i is bound to `placeholder` (same dtype and dims, no data): the kernel must
  // not read its data, and recognises it by Tensor::same_storage.
  virtual void release_constant(int, const Tensor&) {}
  // Released input i as given, rebuilt from the kernel's own copy.
  virtual Tensor restore_constant(int) { return {}; }
};

using KernelFactory = std::function<std::unique_ptr<OpKernel>(const KernelInfo&)>;

// A kernel written as a plain function of the context (for stateless ops).
class FnKernel : public OpKernel {
 public:
  using Fn = std::function<void(KernelContext&)>;
  explicit FnKernel(Fn f) : f_(std::move(f)) {}
  void run(KernelContext& ctx) override { f_(ctx); }

 private:
  Fn f_;
};

// Runs a compiled subgraph: inputs bind the subgraph's formal inputs in order; values of the
// enclosing scopes are visible by name through the context it runs under.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  virtual std::vector<RValue> run(KernelContext& outer, const std::vector<RValue>& inputs) = 0;
  virtual const Graph& graph() const = 0;
};

class KernelContext {
 public:
  virtual ~KernelContext() = default;
  virtual const Node& node() const = 0;
  virtual int64_t opset() const = 0;
  virtual int num_inputs() const = 0;   // as written on the node, absent optionals included
  virtual int num_outputs() const = 0;  // as written on the node
  virtual bool has_input(int i) const = 0;
  virtual bool has_output(int i) const = 0;  // the node names output i
  virtual const RValue& input_value(int i) const = 0;
  // Tensor input i; throws a clear error when absent or not a tensor.
  const Tensor& input(int i) const;
  // Allocates output i (zero-filled unless the plan reuses a buffer: do not rely on zeros).
  virtual Tensor& allocate_output(int i, DType dtype, const Dims& dims) = 0;
  // Like allocate_output, but the contents are unspecified: for kernels that write every element
  // (saves a pass over memory that the kernel is about to overwrite).
  virtual Tensor& allocate_output_uninit(int i, DType dtype, const Dims& dims) { return allocate_output(i, dtype, dims); }
  virtual void set_output(int i, RValue v) = 0;
  // Whether the kernel may overwrite input i's buffer (e.g. to compute an output in place): this
  // node is its last reader, reads it at no other input, and no other value or caller holds it.
  virtual bool input_reusable(int) const { return false; }
  // Threads this kernel may use.
  virtual int threads() const = 0;
  // Whether a floating-point input of this run (or an overridable initializer's default) holds a
  // NaN or an infinity. Fast paths that would turn a NaN into a number (oneDNN's fused Relu and
  // Clip compute max / min) take an exact route for such runs. Checked once per run, on first ask.
  virtual bool nonfinite_inputs() const { return false; }
  // Looks up a value of this or an enclosing scope by name (for subgraphs); nullptr if unknown.
  virtual const RValue* lookup(const std::string& name) const = 0;
  [[noreturn]] void fail(const std::string& what) const;  // throws Error naming the node
};

struct KernelKey {
  std::string domain;
  std::string op_type;
  int since_version;
};

class KernelRegistry {
 public:
  static KernelRegistry& instance();  // all built-in kernels, plus plugins once loaded
  // Registers a kernel for op versions [since_version, next registration of the same op).
  void add(const std::string& domain, const std::string& op_type, int since_version, KernelFactory f);
  // The factory for the highest since_version <= opset; nullptr when none.
  const KernelFactory* find(const std::string& domain, const std::string& op_type, int64_t opset) const;
  bool has_op(const std::string& domain, const std::string& op_type) const;
  std::vector<KernelKey> keys() const;

 private:
  struct Entry {
    int since;
    KernelFactory factory;
  };
  std::map<std::pair<std::string, std::string>, std::vector<Entry>> table_;
};

// Helper for stateless kernels: reg.add("", "Relu", 6, stateless(relu));
inline KernelFactory stateless(FnKernel::Fn f) {
  return [f](const KernelInfo&) { return std::make_unique<FnKernel>(f); };
}
template <typename K>
KernelFactory factory_of() {
  return [](const KernelInfo& info) { return std::make_unique<K>(info); };
}

}  // namespace t2o
