#pragma once
// GraphExec: a compiled graph (the main graph or a subgraph) and how to run it.
#include <memory>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/kernel.h"

namespace t2o {

struct ExecOptions {
  int threads = 1;
  bool fast_paths = true;
  double time_limit_s = 0;  // a top-level run stops at the first node after this long (0: none)
  // Constants of at least this many bytes (0: none) whose one reader keeps a copy of its own
  // (packed weights, OpKernel::can_release_constant) are let go as soon as that reader is built,
  // so the two copies never coexist for more than one weight. `on_release` is told the name and
  // the data-less placeholder that now stands for it, so that other holders (the graph's
  // initializer) can let go too. The top-level graph only.
  size_t release_packed_min_bytes = 0;
  std::function<void(const std::string&, const Tensor&)> on_release;
};

class BufferPool;

class GraphExec : public SubgraphRunner {
 public:
  // `opsets` maps domain ("" for default) to version. `outer_names` are names visible from
  // enclosing scopes; anything else a node reads must be produced inside this graph.
  GraphExec(const Graph& g, const std::unordered_map<std::string, int64_t>& opsets, const ExecOptions& opts,
            const std::vector<std::string>& outer_names = {});

  // Binds inputs in order of the graph's runtime inputs; `outer` resolves outer-scope names.
  // `into` (by graph output, undefined where unbound) are caller buffers: the node producing an
  // output allocates it there when the dtype and dims match. Safe to call from several threads.
  std::vector<RValue> run_graph(const std::vector<RValue>& inputs, const KernelContext* outer,
                                std::unordered_map<std::string, RValue>* keep_all = nullptr,
                                const std::vector<Tensor>* into = nullptr);
  std::vector<RValue> run(KernelContext& outer, const std::vector<RValue>& inputs) override {
    return run_graph(inputs, &outer);
  }
  const Graph& graph() const override { return graph_; }
  const std::vector<const ValueInfo*>& formal_inputs() const { return formal_inputs_; }
  // Activation buffers this graph took from the allocator rather than from its free list: a
  // steady workload stops adding to it after the first run.
  size_t fresh_buffers() const;
  // A constant released under ExecOptions::release_packed_min_bytes, rebuilt from its reader's copy.
  Tensor restore_constant(const std::string& name);

 private:
  friend class NodeContext;
  struct Step {
    const Node* node;
    std::unique_ptr<OpKernel> kernel;
    std::vector<int> in;   // value slot per input (-1 absent)
    std::vector<int> out;  // value slot per output (-1 absent)
    std::vector<int> release;  // slots whose last reader is this step
    int64_t profiled = 0;      // runs seen by T2O_PROFILE (the first, which packs weights, is not counted)
  };
  int slot_of(const std::string& name);
  const Graph& graph_;
  std::unordered_map<std::string, int64_t> opsets_;
  ExecOptions opts_;
  std::unordered_map<std::string, int> slots_;
  std::vector<std::string> slot_names_;
  std::vector<RValue> constants_;  // by slot; undefined where not constant
  std::vector<bool> is_const_;
  std::vector<bool> is_outer_;
  std::vector<const ValueInfo*> formal_inputs_;
  std::vector<int> input_slots_;
  std::vector<int> output_slots_;
  std::vector<Step> steps_;
  std::unordered_map<std::string, std::pair<size_t, int>> released_;  // name -> a reader (step, input)
  std::shared_ptr<BufferPool> pool_;
};

}  // namespace t2o
