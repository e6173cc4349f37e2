#pragma once
// What every pass needs to read and edit a graph: who reads a value (subgraphs included, which
// see outer-scope names), which values are constant in a scope, and edits that keep names
// meaning what they meant.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace t2o::passes {

bool is_onnx(const Node& n);  // default domain ("" or "ai.onnx")

// Names read by a subgraph (or its own subgraphs) that it does not define itself.
void outer_reads(const Graph& g, std::set<std::string>& reads);

// Readers of the values of one graph.
class Uses {
 public:
  explicit Uses(const Graph& g);
  // Every read: node inputs (each occurrence), the graph's outputs, and one per node whose
  // subgraphs read the name.
  int count(const std::string& name) const;
  // Nodes that read the name as an input, in graph order, once per input slot.
  const std::vector<size_t>& readers(const std::string& name) const;
  bool is_output(const std::string& name) const { return outputs_.count(name) > 0; }
  // Read inside a subgraph of some node of this graph.
  bool captured(const std::string& name) const { return captured_.count(name) > 0; }
  // The node of this graph that produces the name, or -1.
  int producer(const std::string& name) const;
  // The value is read only by node `node` (through any of its inputs): not an output, not captured.
  bool only_reader(const std::string& name, size_t node) const;

 private:
  std::unordered_map<std::string, std::vector<size_t>> readers_;
  std::unordered_map<std::string, int> producer_;
  std::unordered_map<std::string, int> captured_;
  std::set<std::string> outputs_;
};

// The chain of graphs from the main graph to the one being rewritten, for finding constants.
class Scope {
 public:
  explicit Scope(Graph& root) { push(root); }
  void push(Graph& g);
  void pop();
  Graph& graph() const { return *chain_.back().g; }
  bool nested() const { return chain_.size() > 1; }
  // The constant tensor visible under `name` here: an initializer that no graph input overrides,
  // or the value of a Constant node; inner scopes shadow outer ones. nullptr when not constant.
  const Tensor* constant(const std::string& name) const;
  // Recomputes the current graph's table after it changed.
  void refresh();
  // Records that `name` now holds constant `t` in the current graph (t is copied, sharing storage).
  void define_constant(const std::string& name, const Tensor& t);

 private:
  struct Level {
    Graph* g;
    std::unordered_map<std::string, const Tensor*> consts;
    std::set<std::string> defined;
  };
  void build(Level& l);
  std::vector<Level> chain_;
  std::vector<std::unique_ptr<Tensor>> owned_;  // values of Constant nodes
};

// The value of a Constant node (value, value_float(s), value_int(s), value_string(s)); undefined
// for sparse_value or a malformed node.
Tensor constant_node_value(const Node& n);

// Runs f on the main graph and then on every subgraph, outer graphs first; returns the sum of
// what f returns. f may rewrite the graph it gets but no other.
int for_each_graph(Model& m, const std::function<int(Scope&)>& f);

// Names are taken by value: callers pass names that live in the nodes being edited.
// Readers of `from` in graph `g` (and in subgraphs, where not shadowed) read `to` instead.
// `from` must not be an output of g. Returns false, changing nothing, when a subgraph that reads
// `from` defines its own `to`.
bool replace_uses(Graph& g, std::string from, std::string to);

// Makes node `node` of g removable by having its output `out` read as `in` (the node computes
// the identity of `in`). When `out` is a graph output, `in`'s producer is renamed to `out`
// instead, if `in` is a plain intermediate of g. Returns false when neither is possible.
bool bypass(Graph& g, const Uses& uses, size_t node, std::string out, std::string in);

// Renames the value `from`, produced in g by a node, to `to` everywhere it is read.
void rename_value(Graph& g, std::string from, std::string to);

// A removed node is cleared in place (so indices stay valid while a pass sweeps, and Uses built
// meanwhile do not see it); drop_removed() compacts the graph afterwards.
inline void remove_node(Node& n) { n = Node{}; }
inline bool removed(const Node& n) { return n.op_type.empty(); }
void drop_removed(Graph& g);

// Drops nodes flagged in `dead` and inserts `insert[i]` before position i (for i == size: at the end).
void compact(Graph& g, const std::vector<bool>& dead, std::map<size_t, std::vector<Node>> insert = {});

// Values as double / int64 (any numeric dtype), and back.
std::vector<double> to_doubles(const Tensor& t);
std::vector<int64_t> to_ints(const Tensor& t);
Tensor from_doubles(const std::vector<double>& v, const Dims& dims, DType t);
// Every element equals v (numeric dtypes; false for empty tensors).
bool all_equal(const Tensor& t, double v);

// The shape of a value when known (rank and possibly symbolic dims).
std::optional<Shape> known_shape(const Type* t);
// numpy-style broadcast of two shapes; nullopt when dims conflict or are not comparable.
std::optional<Shape> broadcast(const Shape& a, const Shape& b);
// Two dims are the same size for every input: equal static values or the same symbol.
bool same_dim(const Dim& a, const Dim& b);

// A copy whose subgraphs are copies too (a Model copy shares them); tensors stay shared, and no
// pass writes into a tensor it did not create.
Model deep_copy(const Model& m);
Graph deep_copy(const Graph& g);

Node make_node(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
               const std::string& name, const std::string& doc = {});
void add_initializer(Graph& g, const std::string& name, Tensor t);

}  // namespace t2o::passes
