#include "torch/builder.h"

#include <algorithm>
#include <cstring>

namespace t2o {

Builder::Builder(Model& model, int opset) : model_(model), opset_(opset) { graphs_.push_back(&model.graph); }

void Builder::set_origin(std::string source, std::string torch_op, std::string module) {
  source_ = std::move(source);
  torch_op_ = std::move(torch_op);
  module_ = std::move(module);
}

std::string Builder::fresh(const std::string& hint) { return hint + "_" + std::to_string(counters_[hint]++); }

void Builder::require(int min_opset, const std::string& what) const {
  if (opset_ < min_opset) throw OpsetError(what, min_opset);
}

std::vector<std::string> Builder::op(const std::string& type, const std::vector<std::string>& inputs,
                                     std::vector<Attribute> attrs, int n_out) {
  Node n;
  n.op_type = type;
  n.name = fresh(type);
  n.inputs = inputs;
  n.attributes = std::move(attrs);
  // The source line is what verification and error messages point people to.
  n.doc_string = node_origin_doc({source_, torch_op_, module_});
  for (int i = 0; i < n_out; ++i) n.outputs.push_back(n_out == 1 ? n.name : n.name + "_" + std::to_string(i));
  graph().nodes.push_back(n);
  return graph().nodes.back().outputs;
}

std::string Builder::constant(const Tensor& t, const std::string& hint) {
  std::string key;
  if (t.numel() <= 16 && t.dtype() != DType::String) {
    key = std::to_string(static_cast<int>(t.dtype())) + ":" + dims_to_string(t.dims()) + ":" +
          std::string(static_cast<const char*>(t.raw()), t.nbytes());
    auto it = small_consts_.find(key);
    if (it != small_consts_.end()) return it->second;
  }
  std::string name = fresh(hint);
  model_.graph.initializers.push_back(Initializer{name, t, {}});
  if (!key.empty()) small_consts_[key] = name;
  return name;
}

std::string Builder::i64s(const std::vector<int64_t>& v) {
  return constant(Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}), "ints");
}
std::string Builder::i64(int64_t v) { return constant(Tensor::scalar<int64_t>(v), "int"); }

static Tensor filled(const std::vector<double>& v, DType t, Dims dims) {
  Tensor r(t, std::move(dims));
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    T* p = r.data<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
        p[i] = T(static_cast<float>(v[i]));
      else
        p[i] = static_cast<T>(v[i]);
    }
  });
  return r;
}

std::string Builder::scalar(double v, DType t) { return constant(filled({v}, t, {}), "scalar"); }
std::string Builder::vec(const std::vector<double>& v, DType t) {
  return constant(filled(v, t, {static_cast<int64_t>(v.size())}), "vec");
}

std::string Builder::cast(const std::string& x, DType to) {
  return op1("Cast", {x}, {Attribute::make_int("to", static_cast<int64_t>(to))});
}

std::string Builder::unsqueeze(const std::string& x, const std::vector<int64_t>& axes) {
  if (opset_ >= 13) return op1("Unsqueeze", {x, i64s(axes)});
  return op1("Unsqueeze", {x}, {Attribute::make_ints("axes", axes)});
}

std::string Builder::squeeze(const std::string& x, const std::vector<int64_t>& axes) {
  if (axes.empty()) return op1("Squeeze", {x});
  if (opset_ >= 13) return op1("Squeeze", {x, i64s(axes)});
  return op1("Squeeze", {x}, {Attribute::make_ints("axes", axes)});
}

std::string Builder::reduce(const std::string& op, const std::string& x, const std::vector<int64_t>& axes,
                            bool keepdims) {
  std::vector<Attribute> attrs{Attribute::make_int("keepdims", keepdims ? 1 : 0)};
  if (op == "ReduceSum" && opset_ >= 13) {
    if (axes.empty()) return op1(op, {x}, attrs);
    return op1(op, {x, i64s(axes)}, attrs);
  }
  if (!axes.empty()) attrs.push_back(Attribute::make_ints("axes", axes));
  return op1(op, {x}, attrs);
}

std::vector<std::string> Builder::split(const std::string& x, const std::vector<int64_t>& sizes, int64_t axis) {
  int n = static_cast<int>(sizes.size());
  if (opset_ >= 13) return op("Split", {x, i64s(sizes)}, {Attribute::make_int("axis", axis)}, n);
  return op("Split", {x}, {Attribute::make_int("axis", axis), Attribute::make_ints("split", sizes)}, n);
}

std::string Builder::slice(const std::string& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                           const std::vector<int64_t>& axes, const std::vector<int64_t>& steps) {
  bool unit = true;
  for (int64_t s : steps) unit = unit && s == 1;
  if (opset_ < 10) {
    if (!unit) require(10, "Slice with steps");
    return op1("Slice", {x}, {Attribute::make_ints("starts", starts), Attribute::make_ints("ends", ends),
                              Attribute::make_ints("axes", axes)});
  }
  std::vector<std::string> in{x, i64s(starts), i64s(ends), i64s(axes)};
  if (!unit) in.push_back(i64s(steps));
  return op1("Slice", in);
}

std::string Builder::take(const std::string& x, int64_t len, int64_t start, int64_t end, int64_t step,
                          int64_t axis) {
  if (step == 0) throw Error("slice step cannot be zero");
  std::vector<int64_t> idx;
  if (start < 0) start += len;
  if (end < 0) end += len;
  start = step > 0 ? std::clamp<int64_t>(start, 0, len) : std::clamp<int64_t>(start, 0, std::max<int64_t>(len - 1, 0));
  end = step > 0 ? std::clamp<int64_t>(end, 0, len) : std::clamp<int64_t>(end, -1, len - 1);
  for (int64_t i = start; len > 0 && (step > 0 ? i < end : i > end); i += step) idx.push_back(i);
  return op1("Gather", {x, i64s(idx)}, {Attribute::make_int("axis", axis)});
}

std::string Builder::slice_dyn(const std::string& x, const std::string& starts, const std::string& ends,
                               const std::string& axes, const std::string& steps) {
  require(10, "Slice with computed bounds");
  std::vector<std::string> in{x, starts, ends, axes};
  if (!steps.empty()) in.push_back(steps);
  return op1("Slice", in);
}

std::string Builder::clip(const std::string& x, std::optional<double> lo, std::optional<double> hi, DType t) {
  if (opset_ >= 11 && (t == DType::Float || t == DType::Double || t == DType::Float16 || opset_ >= 12)) {
    std::vector<std::string> in{x, lo ? scalar(*lo, t) : std::string(), hi ? scalar(*hi, t) : std::string()};
    while (in.back().empty()) in.pop_back();
    return op1("Clip", in);
  }
  if (opset_ < 11 && (t == DType::Float || t == DType::Double || t == DType::Float16)) {
    std::vector<Attribute> attrs;
    if (lo) attrs.push_back(Attribute::make_float("min", static_cast<float>(*lo)));
    if (hi) attrs.push_back(Attribute::make_float("max", static_cast<float>(*hi)));
    return op1("Clip", {x}, attrs);
  }
  std::string y = x;
  if (lo) y = op1("Max", {y, scalar(*lo, t)});
  if (hi) y = op1("Min", {y, scalar(*hi, t)});
  return y;
}

std::string Builder::pad(const std::string& x, const std::vector<int64_t>& pads, const std::string& mode,
                         double value, DType t) {
  if (opset_ >= 11) {
    std::vector<std::string> in{x, i64s(pads)};
    if (mode == "constant") in.push_back(scalar(value, t));
    return op1("Pad", in, {Attribute::make_string("mode", mode)});
  }
  return op1("Pad", {x}, {Attribute::make_string("mode", mode), Attribute::make_ints("pads", pads),
                          Attribute::make_float("value", static_cast<float>(value))});
}

std::vector<std::string> Builder::topk(const std::string& x, int64_t k, int64_t axis, bool largest, bool sorted) {
  // Before opset 11 TopK always sorts, which sorted=False allows; before 10 k is an attribute.
  if (opset_ < 10) {
    if (!largest) {  // no `largest` attribute yet: the smallest of x are the largest of -x
      auto r = topk(op1("Neg", {x}), k, axis, true, sorted);
      r[0] = op1("Neg", {r[0]});
      return r;
    }
    return op("TopK", {x}, {Attribute::make_int("k", k), Attribute::make_int("axis", axis)}, 2);
  }
  return topk_dyn(x, i64s({k}), axis, largest, sorted);
}

std::vector<std::string> Builder::topk_dyn(const std::string& x, const std::string& k, int64_t axis, bool largest,
                                           bool sorted) {
  require(10, "TopK with a computed k");
  if (opset_ < 11 && !largest) {
    auto r = topk_dyn(op1("Neg", {x}), k, axis, true, sorted);
    r[0] = op1("Neg", {r[0]});
    return r;
  }
  std::vector<Attribute> attrs{Attribute::make_int("axis", axis)};
  if (opset_ >= 11) {
    attrs.push_back(Attribute::make_int("largest", largest));
    attrs.push_back(Attribute::make_int("sorted", sorted));
  }
  return op("TopK", {x, k}, attrs, 2);
}

std::string Builder::softmax(const std::string& op, const std::string& x, int64_t axis, int rank) {
  if (axis < 0) axis += rank;
  // Before opset 13 Softmax flattens to 2-D at `axis`; that only matches torch for the last axis.
  if (opset_ >= 13 || axis == rank - 1) return op1(op, {x}, {Attribute::make_int("axis", axis)});
  std::vector<int64_t> perm;
  for (int i = 0; i < rank; ++i) perm.push_back(i);
  std::swap(perm[static_cast<size_t>(axis)], perm.back());
  std::string t = transpose(x, perm);
  std::string s = op1(op, {t}, {Attribute::make_int("axis", rank - 1)});
  return transpose(s, perm);
}

std::string Builder::shape_of(const std::string& x) { return op1("Shape", {x}); }

std::string Builder::dim(const std::string& x, int64_t axis) {
  return op1("Gather", {shape_of(x), i64(axis)}, {Attribute::make_int("axis", 0)});
}

std::string Builder::concat(const std::vector<std::string>& xs, int64_t axis) {
  if (xs.size() == 1) return xs[0];
  return op1("Concat", xs, {Attribute::make_int("axis", axis)});
}

std::string Builder::reshape(const std::string& x, const std::vector<int64_t>& shape) {
  return op1("Reshape", {x, i64s(shape)});
}

std::string Builder::transpose(const std::string& x, const std::vector<int64_t>& perm) {
  return op1("Transpose", {x}, {Attribute::make_ints("perm", perm)});
}

std::string Builder::linear(const std::string& x, const std::string& w, const std::string& bias) {
  if (bias.empty() && opset_ < 11) return op1("MatMul", {x, transpose(w, {1, 0})});
  std::vector<std::string> in{x, w};
  if (!bias.empty()) in.push_back(bias);
  return op1("Gemm", in, {Attribute::make_int("transB", 1)});
}

}  // namespace t2o
