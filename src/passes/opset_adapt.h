#pragma once
// The adapter interface of opset conversion (opset.h): one function per op type rewrites a node
// from its form at the source opset into its form at the target, in place or as new nodes that
// end in the node's own outputs.
#include <map>
#include <string>
#include <vector>

#include "passes/graph_util.h"
#include "passes/op_args.h"
#include "passes/passes.h"

namespace t2o::passes {

class Adapt {
 public:
  Adapt(Graph& g, const Scope& s, PassContext& ctx, int64_t from, int64_t to, Node& n)
      : from(from), to(to), n(n), g_(g), s_(s), ctx_(ctx) {}
  const int64_t from, to;
  Node& n;  // edit in place, or call emit()/finish() to replace it

  bool down() const { return to < from; }
  // The change made at opset v lies between the two opsets.
  bool crosses(int64_t v) const { return std::min(from, to) < v && v <= std::max(from, to); }
  // Form at the target: true when the target has the version-v form.
  bool at_target(int64_t v) const { return to >= v; }

  const Tensor* constant(int input) const;  // constant input i, or nullptr
  IntsArg ints(const char* attr, int input) const { return ints_arg(n, s_, attr, input); }
  int rank(const std::string& v) const;      // -1 when unknown
  int rank_of_input(int i) const { return rank(n.inputs.at(static_cast<size_t>(i))); }
  int64_t dim_of(const std::string& v, int64_t axis) const;  // static size of dim `axis`, or -1
  DType dtype(const std::string& v) const;   // Undefined when unknown
  // Axis normalized into [0, rank) when the target (< 11) does not take negative axes.
  int64_t axis(int64_t a, int rank_hint) const;
  std::vector<int64_t> axes(std::vector<int64_t> a, int rank_hint) const;

  std::string fresh_value(const std::string& hint);
  std::string add_constant(const Tensor& t, const std::string& hint);
  std::string i64s(const std::vector<int64_t>& v) { return add_constant(Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}), "axes"); }
  // A new node before the replacement's end; returns its (fresh) outputs.
  std::vector<std::string> emit(const std::string& op, std::vector<std::string> ins, std::vector<Attribute> attrs = {},
                                int outputs = 1);
  std::string emit1(const std::string& op, std::vector<std::string> ins, std::vector<Attribute> attrs = {}) {
    return emit(op, std::move(ins), std::move(attrs))[0];
  }
  // A new node writing the given outputs (n's own, to finish the replacement with done()).
  void emit_to(const std::string& op, std::vector<std::string> ins, std::vector<Attribute> attrs,
               std::vector<std::string> outs);
  // The last new node: writes n's outputs. n is replaced by everything emitted.
  void finish(const std::string& op, std::vector<std::string> ins, std::vector<Attribute> attrs = {});
  // n's single output becomes `v` (an Identity ends the replacement).
  void finish_as(const std::string& v);
  void done() { replaced_ = true; }
  [[noreturn]] void fail(const std::string& why) const;

  bool replaced() const { return replaced_; }
  std::vector<Node>& nodes() { return nodes_; }
  void touch() { changed_ = true; }
  bool changed() const { return changed_ || replaced_; }

 private:
  Graph& g_;
  const Scope& s_;
  PassContext& ctx_;
  std::vector<Node> nodes_;
  bool replaced_ = false, changed_ = false;
};

// Removes attribute `name` from n (when it has one).
void drop_attr(Node& n, const char* name);

using Adapter = void (*)(Adapt&);
// Adapters by op type (opset_forms.cpp and opset_ops.cpp register theirs here).
void register_form_adapters(std::map<std::string, Adapter>& t);
void register_op_adapters(std::map<std::string, Adapter>& t);

}  // namespace t2o::passes
