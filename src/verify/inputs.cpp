#include "verify/inputs.h"

#include <algorithm>
#include <random>
#include <set>

#include "onnx/tensor_io.h"

namespace t2o {

namespace {

const InputSpec* find_spec(const std::vector<InputSpec>& specs, const std::string& name) {
  for (const InputSpec& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

// Dim `axis` of value `name` when the graph tells it (initializer, input or value_info).
std::optional<int64_t> known_dim(const Graph& g, const std::string& name, int64_t axis,
                                 const std::map<std::string, int64_t>& sizes) {
  if (const Initializer* init = g.find_initializer(name)) {
    int64_t a = axis < 0 ? axis + init->tensor.rank() : axis;
    if (a >= 0 && a < init->tensor.rank()) return init->tensor.dims()[static_cast<size_t>(a)];
    return std::nullopt;
  }
  auto from = [&](const ValueInfo& vi) -> std::optional<int64_t> {
    if (vi.name != name || !vi.type.shape) return std::nullopt;
    const auto& dims = vi.type.shape->dims;
    int64_t a = axis < 0 ? axis + static_cast<int64_t>(dims.size()) : axis;
    if (a < 0 || a >= static_cast<int64_t>(dims.size())) return std::nullopt;
    const Dim& d = dims[static_cast<size_t>(a)];
    if (d.is_static()) return d.value;
    auto it = sizes.find(d.symbol);
    if (it != sizes.end()) return it->second;
    return std::nullopt;
  };
  for (const ValueInfo& vi : g.inputs)
    if (auto r = from(vi)) return r;
  for (const ValueInfo& vi : g.value_info)
    if (auto r = from(vi)) return r;
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> index_bound(const Graph& g, const std::string& name, const std::map<std::string, int64_t>& sizes) {
  // Values that carry the input's elements unchanged (only rearranged or cast).
  static const std::set<std::string> carriers{"Cast", "Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten",
                                              "Expand", "Slice", "Transpose", "Tile", "Concat", "Split"};
  std::set<std::string> same{name};
  std::optional<int64_t> bound;
  auto tighten = [&](std::optional<int64_t> b) {
    if (b && *b > 0) bound = bound ? std::min(*bound, *b) : *b;
  };
  for (const Node& n : g.nodes) {  // topological order: carriers are seen before their users
    auto in = [&](int i) { return n.has_input(i) && same.count(n.inputs[static_cast<size_t>(i)]); };
    if (carriers.count(n.op_type) && in(0)) {
      same.insert(n.outputs.begin(), n.outputs.end());
    } else if ((n.op_type == "Gather" || n.op_type == "GatherElements") && in(1)) {
      tighten(known_dim(g, n.inputs[0], n.attr_int("axis", 0), sizes));
    } else if (n.op_type == "OneHot" && in(0) && n.has_input(1)) {
      if (const Initializer* d = g.find_initializer(n.inputs[1]))
        if (d->tensor.numel() == 1) tighten(d->tensor.as_int(0));
    }
  }
  return bound;
}

InputPlan::InputPlan(const Graph& graph, const std::vector<InputSpec>& specs,
                     const std::vector<DynamicSpec>& dynamic, const std::map<std::string, std::string>& data_files,
                     const std::vector<ValueInfo>& removed)
    : graph_(graph) {
  std::set<std::string> known;
  std::vector<std::pair<const ValueInfo*, bool>> all;
  for (const ValueInfo* vi : graph.runtime_inputs()) all.emplace_back(vi, true);
  for (const ValueInfo& vi : removed) all.emplace_back(&vi, false);
  for (const auto& [vi, in_onnx] : all) {
    known.insert(vi->name);
    PlannedInput p;
    p.onnx = in_onnx;
    p.name = vi->name;
    p.dtype = vi->type.elem;
    if (!vi->type.shape && !find_spec(specs, p.name) && !data_files.count(p.name))
      throw Error("input '" + p.name + "' has no shape in the ONNX model", "give it with --input " + p.name + ":DIMS",
                  kExitUsage);
    if (vi->type.shape)
      for (const Dim& d : vi->type.shape->dims) {
        p.base.push_back(d.is_static() ? d.value : -1);
        p.labels.push_back(d.is_static() ? "" : d.symbol.empty() ? p.name + "_dim" + std::to_string(p.labels.size()) : d.symbol);
      }
    if (auto f = data_files.find(p.name); f != data_files.end()) {
      p.data = read_tensor_file(f->second);
      if (p.data->dtype() != p.dtype)
        throw Error("--data " + p.name + ": the file holds " + std::string(dtype_name(p.data->dtype())) +
                    " but the model input is " + std::string(dtype_name(p.dtype)), {}, kExitUsage);
      p.base = p.data->dims();
    } else if (const InputSpec* s = find_spec(specs, p.name)) {
      p.base = s->dims;
      if (s->dtype != p.dtype)
        throw Error("--input " + p.name + ": the ONNX model declares " + std::string(dtype_name(p.dtype)), {},
                    kExitUsage);
    }
    if (p.labels.size() != p.base.size()) p.labels.assign(p.base.size(), "");
    for (const DynamicSpec& d : dynamic)
      if (d.input == p.name)
        for (const auto& [axis, label] : d.axes) {
          int a = axis < 0 ? axis + static_cast<int>(p.base.size()) : axis;
          if (a < 0 || a >= static_cast<int>(p.base.size()))
            throw Error("--dynamic " + d.input + ": axis " + std::to_string(axis) + " out of range", {}, kExitUsage);
          if (p.labels[static_cast<size_t>(a)].empty())
            throw Error("--dynamic " + d.input + ": axis " + std::to_string(axis) + " is fixed in the ONNX model",
                        "convert with --dynamic to make it symbolic", kExitUsage);
          p.labels[static_cast<size_t>(a)] = label;
        }
    for (size_t a = 0; a < p.base.size(); ++a) {
      const std::string& l = p.labels[a];
      if (l.empty()) continue;
      if (p.base[a] < 0) continue;
      if (!base_sizes_.count(l) || p.data) base_sizes_[l] = p.base[a];
      if (p.data) pinned_[l] = true;
    }
    inputs_.push_back(std::move(p));
  }
  for (const InputSpec& s : specs)
    if (!known.count(s.name))
      throw Error("--input " + s.name + " is not an input of the ONNX model", {}, kExitUsage);
  for (const auto& [n, f] : data_files)
    if (!known.count(n)) throw Error("--data " + n + " is not an input of the ONNX model", {}, kExitUsage);
  // Symbolic dims nobody gave a size for: 2 keeps batch-like axes honest (1 would broadcast).
  for (PlannedInput& p : inputs_)
    for (size_t a = 0; a < p.base.size(); ++a)
      if (p.base[a] < 0) {
        const std::string& l = p.labels[a];
        if (!base_sizes_.count(l)) base_sizes_[l] = 2;
        p.base[a] = base_sizes_[l];
      }
}

std::map<std::string, int64_t> InputPlan::sizes_for(int index) const {
  std::map<std::string, int64_t> sizes = base_sizes_;
  if (index == 0) return sizes;
  // Sample k moves sizes by -1, +1, -2, +2, ... (upwards only from 1), so that both smaller
  // and larger sizes than the converter saw get exercised.
  for (auto& [label, size] : sizes) {
    if (pinned_.count(label)) continue;
    int64_t step = (index + 1) / 2;
    int64_t moved = index % 2 ? size - step : size + step;
    size = size <= 1 || moved < 1 ? size + index : moved;
  }
  return sizes;
}

std::vector<std::pair<std::string, Tensor>> Sample::torch_inputs() const {
  auto all = inputs;
  all.insert(all.end(), torch_only.begin(), torch_only.end());
  return all;
}

Sample InputPlan::make(int index, uint64_t seed) const {
  Sample s;
  s.sizes = sizes_for(index);
  std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(index));
  auto dims_in_sample = [&](const PlannedInput& p) {
    if (p.data) return p.data->dims();
    Dims dims = p.base;
    for (size_t a = 0; a < dims.size(); ++a)
      if (!p.labels[a].empty()) dims[a] = s.sizes.at(p.labels[a]);
    return dims;
  };
  for (const PlannedInput& p : inputs_) {
    if (p.data) {
      (p.onnx ? s.inputs : s.torch_only).emplace_back(p.name, *p.data);
      continue;
    }
    Dims dims = dims_in_sample(p);
    // Packed-sequence lengths and EmbeddingBag offsets follow the roles read from the TorchScript
    // graph (indices are bounded from the ONNX graph below).
    if (role_values_ && dtype_is_integer(p.dtype)) {
      auto v = role_values_(p.name, dims, p.dtype, seed * 1000003 + static_cast<uint64_t>(index),
                            [&](const std::string& name) -> std::optional<Dims> {
                              for (const PlannedInput& q : inputs_)
                                if (q.name == name) return dims_in_sample(q);
                              return std::nullopt;
                            });
      if (v) {
        (p.onnx ? s.inputs : s.torch_only).emplace_back(p.name, std::move(*v));
        continue;
      }
    }
    Tensor t(p.dtype, dims);
    std::optional<int64_t> bound;
    if (dtype_is_integer(p.dtype)) bound = index_bound(graph_, p.name, s.sizes);
    dispatch_dtype(p.dtype, [&](auto tag) {
      using T = decltype(tag);
      T* d = t.data<T>();
      std::normal_distribution<float> normal;
      // Without a known bound, small non-negative ints: valid as counts, indices into any
      // non-empty axis of length 10, and exact in every dtype.
      std::uniform_int_distribution<int64_t> ints(0, bound ? *bound - 1 : 9);
      std::bernoulli_distribution coin;
      for (int64_t i = 0; i < t.numel(); ++i) {
        if constexpr (std::is_same_v<T, bool>) d[i] = coin(rng);
        else if constexpr (std::is_integral_v<T>) d[i] = static_cast<T>(ints(rng));
        else d[i] = T(normal(rng));
      }
    });
    (p.onnx ? s.inputs : s.torch_only).emplace_back(p.name, std::move(t));
  }
  return s;
}

std::vector<InputSpec> InputPlan::convert_inputs() const {
  std::vector<InputSpec> r;
  for (const PlannedInput& p : inputs_) r.push_back({p.name, p.base, p.dtype});
  return r;
}

std::vector<DynamicSpec> InputPlan::convert_dynamic() const {
  std::vector<DynamicSpec> r;
  for (const PlannedInput& p : inputs_) {
    DynamicSpec d{p.name, {}};
    for (size_t a = 0; a < p.labels.size(); ++a)
      if (!p.labels[a].empty()) d.axes[static_cast<int>(a)] = p.labels[a];
    if (!d.axes.empty()) r.push_back(d);
  }
  return r;
}

}  // namespace t2o
