// PassContext: the rewrite gate, inferred types and fresh names that passes share.
#include <cctype>
#include <set>
#include <unordered_map>

#include "onnx/check.h"
#include "passes/internal.h"
#include "passes/passes.h"

namespace t2o {

namespace {

void collect_names(const Graph& g, std::set<std::string>& values, std::set<std::string>& nodes) {
  for (const auto& i : g.inputs) values.insert(i.name);
  for (const auto& i : g.initializers) values.insert(i.name);
  for (const auto& o : g.outputs) values.insert(o.name);
  for (const auto& v : g.value_info) values.insert(v.name);
  for (const Node& n : g.nodes) {
    nodes.insert(n.name);
    for (const auto& s : n.outputs) values.insert(s);
    for (const auto& s : n.inputs) values.insert(s);
    for (const Attribute& a : n.attributes) {
      if (a.g) collect_names(*a.g, values, nodes);
      for (const auto& sg : a.graphs)
        if (sg) collect_names(*sg, values, nodes);
    }
  }
}

void collect_types(const Graph& g, std::unordered_map<std::string, Type>& types) {
  auto put = [&](const ValueInfo& v) {
    if (v.type.kind != Type::Kind::Undefined) types[v.name] = v.type;
  };
  for (const auto& v : g.inputs) put(v);
  for (const auto& v : g.value_info) put(v);
  for (const auto& v : g.outputs) put(v);
  for (const Node& n : g.nodes)
    for (const Attribute& a : n.attributes) {
      if (a.g) collect_types(*a.g, types);
      for (const auto& sg : a.graphs)
        if (sg) collect_types(*sg, types);
    }
}

void initializer_types(const Graph& g, std::unordered_map<std::string, Type>& types) {
  for (const auto& i : g.initializers) types[i.name] = Type::tensor(i.tensor.dtype(), Shape::of(i.tensor.dims()));
  for (const Node& n : g.nodes)
    for (const Attribute& a : n.attributes) {
      if (a.g) initializer_types(*a.g, types);
      for (const auto& sg : a.graphs)
        if (sg) initializer_types(*sg, types);
    }
}

}  // namespace

namespace passes {

Model strip_large_initializers(const Model& m) {
  Model s = m;
  std::set<std::string> inputs;
  for (const auto& i : s.graph.inputs) inputs.insert(i.name);
  std::vector<Initializer> kept;
  for (Initializer& init : s.graph.initializers) {
    if (init.tensor.nbytes() <= kSmallConstantBytes || init.tensor.dtype() == DType::String) {
      kept.push_back(std::move(init));
      continue;
    }
    if (!inputs.count(init.name))
      s.graph.inputs.push_back({init.name, Type::tensor(init.tensor.dtype(), Shape::of(init.tensor.dims())), {}});
  }
  s.graph.initializers = std::move(kept);
  return s;
}

std::unordered_map<std::string, Type> infer_types(const Model& m) {
  std::unordered_map<std::string, Type> types;
  Model inferred;
  try {
    inferred = infer_shapes(strip_large_initializers(m), false);
  } catch (const std::exception&) {
    inferred = m;  // what the model declares is all we know
  }
  collect_types(inferred.graph, types);
  initializer_types(m.graph, types);
  return types;
}

}  // namespace passes

struct PassContext::Impl {
  bool typed = false;
  std::unordered_map<std::string, Type> types;
  bool named = false;
  std::set<std::string> values, nodes;
};

PassContext::PassContext(Model& m, int64_t limit) : model_(m), opset_(m.opset("")), limit_(limit), impl_(std::make_unique<Impl>()) {}
PassContext::~PassContext() = default;

bool PassContext::allow(const Node& anchor) {
  if (limit_ >= 0 && count_ >= limit_) return false;
  ++count_;
  anchors_.push_back(anchor.name.empty() ? anchor.describe() : anchor.name);
  return true;
}

const Type* PassContext::type(const std::string& name) {
  if (!impl_->typed) {
    impl_->types = passes::infer_types(model_);
    impl_->typed = true;
  }
  auto it = impl_->types.find(name);
  return it == impl_->types.end() ? nullptr : &it->second;
}

const std::unordered_map<std::string, Type>* PassContext::inferred_types() const {
  return impl_->typed ? &impl_->types : nullptr;
}

void PassContext::start_from_types(const std::unordered_map<std::string, Type>& types) {
  impl_->types = types;
  impl_->typed = true;
}

void PassContext::set_type(const std::string& name, const Type& t) {
  if (!impl_->typed) type(name);
  impl_->types[name] = t;
}

std::string PassContext::fresh(const std::string& hint, bool node) {
  if (!impl_->named) {
    collect_names(model_.graph, impl_->values, impl_->nodes);
    impl_->named = true;
  }
  std::set<std::string>& used = node ? impl_->nodes : impl_->values;
  std::string base = hint.empty() ? std::string("v") : hint;
  std::string name = base;
  for (int k = 1; used.count(name) || (!node && impl_->values.count(name)); ++k) name = base + "_" + std::to_string(k);
  used.insert(name);
  return name;
}

}  // namespace t2o
