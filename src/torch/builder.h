#pragma once
// Opset-aware ONNX graph builder: converters describe intent once, the builder picks the form
// (attribute vs input) that the target opset wants, so opsets 9-17 share one converter.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace t2o {

// Thrown when the target opset is older than what an op needs; the converter context adds the
// torch op and source line before reporting.
class OpsetError : public Error {
 public:
  OpsetError(std::string what, int min_opset)
      : Error(what + " needs opset " + std::to_string(min_opset)), min_opset(min_opset), what(std::move(what)) {}
  int min_opset;
  std::string what;
};

class Builder {
 public:
  Builder(Model& model, int opset);

  int opset() const { return opset_; }
  Graph& graph() { return *graphs_.back(); }
  Graph& root() { return model_.graph; }
  void push_graph(Graph* g) { graphs_.push_back(g); }
  void pop_graph() { graphs_.pop_back(); }

  // Source range ("model.py:42"), torch op and submodule path ("layer3.1.conv2") attached to
  // the nodes emitted next (their doc_string, see NodeOrigin).
  void set_origin(std::string source, std::string torch_op, std::string module = {});
  const std::string& source() const { return source_; }
  const std::string& module() const { return module_; }

  std::string fresh(const std::string& hint);
  void require(int min_opset, const std::string& what) const;

  std::vector<std::string> op(const std::string& type, const std::vector<std::string>& inputs,
                              std::vector<Attribute> attrs = {}, int n_out = 1);
  std::string op1(const std::string& type, const std::vector<std::string>& inputs,
                  std::vector<Attribute> attrs = {}) {
    return op(type, inputs, std::move(attrs), 1)[0];
  }

  // Constants live as initializers of the root graph, so subgraphs can read them too.
  std::string constant(const Tensor& t, const std::string& hint = "const");
  std::string i64s(const std::vector<int64_t>& v);  // 1-D int64
  std::string i64(int64_t v);                       // 0-d int64
  std::string scalar(double v, DType t);            // 0-d of dtype t
  std::string vec(const std::vector<double>& v, DType t);  // 1-D of dtype t

  // Opset-dependent forms.
  std::string cast(const std::string& x, DType to);
  std::string unsqueeze(const std::string& x, const std::vector<int64_t>& axes);
  std::string squeeze(const std::string& x, const std::vector<int64_t>& axes);  // empty: all 1-dims
  std::string reduce(const std::string& op, const std::string& x, const std::vector<int64_t>& axes,
                     bool keepdims);  // empty axes: all
  std::vector<std::string> split(const std::string& x, const std::vector<int64_t>& sizes, int64_t axis);
  std::string slice(const std::string& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                    const std::vector<int64_t>& axes, const std::vector<int64_t>& steps = {});
  // Elements start, start+step, ... before end (clamped as Slice does) of an axis of static length len,
  // as a Gather of constant indices: strided and reversed slices at opset 9, whose Slice has no steps.
  std::string take(const std::string& x, int64_t len, int64_t start, int64_t end, int64_t step, int64_t axis);
  // Tensor-valued bounds (1-D int64 names); needs opset 10.
  std::string slice_dyn(const std::string& x, const std::string& starts, const std::string& ends,
                        const std::string& axes, const std::string& steps = {});
  std::string clip(const std::string& x, std::optional<double> lo, std::optional<double> hi, DType t);
  std::string pad(const std::string& x, const std::vector<int64_t>& pads, const std::string& mode, double value,
                  DType t);
  std::vector<std::string> topk(const std::string& x, int64_t k, int64_t axis, bool largest, bool sorted);
  // k a 1-D int64 tensor name (computed); needs opset 10.
  std::vector<std::string> topk_dyn(const std::string& x, const std::string& k, int64_t axis, bool largest,
                                    bool sorted);
  std::string softmax(const std::string& op, const std::string& x, int64_t axis, int rank);
  std::string shape_of(const std::string& x);
  // 0-d int64 size of dimension `axis` of x.
  std::string dim(const std::string& x, int64_t axis);
  std::string concat(const std::vector<std::string>& xs, int64_t axis);
  std::string reshape(const std::string& x, const std::vector<int64_t>& shape);
  std::string transpose(const std::string& x, const std::vector<int64_t>& perm);
  // x @ w^T (+ bias when given): Gemm; without a bias before opset 11 (where Gemm's C is required)
  // MatMul of the transposed weight.
  std::string linear(const std::string& x, const std::string& w, const std::string& bias = {});

 private:
  Model& model_;
  int opset_;
  std::vector<Graph*> graphs_;
  std::string source_, torch_op_, module_;
  std::map<std::string, int> counters_;
  std::map<std::string, std::string> small_consts_;  // dedupe of small constants by content
};

}  // namespace t2o
