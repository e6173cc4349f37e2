#include "torch/input_roles.h"

#include <set>

namespace t2o {

namespace tj = torch::jit;

namespace {

// Ops through which an input keeps its values (casts, copies, device moves), for following uses.
bool keeps_values(const tj::Node* n) {
  static const std::set<std::string> ops{"aten::to",     "aten::cpu",    "aten::contiguous", "aten::long",
                                         "aten::int",    "aten::clone",  "aten::detach",     "aten::type_as",
                                         "aten::as_tensor", "prim::unchecked_cast", "aten::sort"};
  return ops.count(n->kind().toQualString()) > 0;
}

// The graph input that `v` is a copy (or a reordering along other dims) of, if any.
const tj::Value* source_input(const tj::Value* v, const std::map<const tj::Value*, std::string>& inputs) {
  for (int depth = 0; v && depth < 16; ++depth) {
    if (inputs.count(v)) return v;
    const tj::Node* n = v->node();
    std::string k = n->kind().toQualString();
    if (n->inputs().empty() || !(keeps_values(n) || k == "aten::index_select")) return nullptr;
    v = n->input(0);
  }
  return nullptr;
}

std::optional<int64_t> const_int(const tj::Value* v) {
  auto iv = tj::toIValue(v);
  if (iv && iv->isInt()) return iv->toInt();
  if (iv && iv->isBool()) return iv->toBool() ? 1 : 0;
  return std::nullopt;
}

void collect_uses(const tj::Value* v, std::vector<std::pair<const tj::Node*, size_t>>& out, int depth = 0) {
  if (depth > 12) return;
  for (const tj::Use& u : v->uses()) {
    const tj::Node* n = u.user;
    // A branch's result: the value leaves the If as its output (F.embedding_bag's checks wrap offsets so).
    if (n->kind() == c10::prim::Return && n->owningBlock()->owningNode() &&
        n->owningBlock()->owningNode()->kind() == c10::prim::If) {
      const tj::Node* the_if = n->owningBlock()->owningNode();
      if (u.offset < the_if->outputs().size()) collect_uses(the_if->output(u.offset), out, depth + 1);
      continue;
    }
    if (keeps_values(n) && u.offset == 0) {
      if (!n->outputs().empty()) collect_uses(n->output(0), out, depth + 1);
      continue;
    }
    out.push_back({n, u.offset});
  }
}

}  // namespace

std::string InputRole::what() const {
  switch (kind) {
    case Kind::Lengths: return "packed-sequence lengths";
    case Kind::Offsets: return "EmbeddingBag offsets";
    case Kind::Index: return "indices";
    case Kind::Divisor: return "a divisor";
    default: return "values";
  }
}

std::map<std::string, InputRole> input_roles(const tj::Graph& g, const std::vector<std::string>& names) {
  std::map<const tj::Value*, std::string> inputs;
  for (size_t i = 0; i < g.inputs().size() && i < names.size(); ++i)
    if (!names[i].empty()) inputs[g.inputs()[i]] = names[i];
  std::map<std::string, InputRole> roles;
  for (const auto& [v, name] : inputs) {
    auto opt = v->type()->cast<c10::OptionalType>();
    if (!v->type()->cast<c10::TensorType>() && !(opt && opt->getElementType()->cast<c10::TensorType>())) continue;
    std::vector<std::pair<const tj::Node*, size_t>> uses;
    collect_uses(v, uses);
    InputRole r;
    for (const auto& [n, at] : uses) {
      std::string k = n->kind().toQualString();
      if (k == "aten::_pack_padded_sequence" && at == 1) {
        r.kind = InputRole::Kind::Lengths;
        const tj::Value* data = source_input(n->input(0), inputs);
        r.source = data ? inputs.at(data) : std::string();
        r.axis = const_int(n->input(2)).value_or(0) ? 1 : 0;
        break;
      }
      if (k == "aten::embedding_bag" && at == 2) {
        r.kind = InputRole::Kind::Offsets;
        const tj::Value* idx = source_input(n->input(1), inputs);
        r.source = idx ? inputs.at(idx) : std::string();
        break;
      }
      // Indices: every table or dim they index bounds them (the smallest wins).
      auto bound_by = [&](int64_t b) {
        if (r.kind != InputRole::Kind::None && r.kind != InputRole::Kind::Index) return;
        r.bound = r.kind == InputRole::Kind::Index && r.bound > 0 ? std::min(r.bound, b) : b;
        r.kind = InputRole::Kind::Index;
      };
      auto dim_of = [&](const std::string& src, int64_t axis) {
        if (r.kind != InputRole::Kind::None && r.kind != InputRole::Kind::Index) return;
        r.kind = InputRole::Kind::Index;
        r.more.push_back({src, axis});
      };
      if ((k == "aten::embedding" && at == 1) || (k == "aten::embedding_bag" && at == 1)) {
        auto w = tj::toIValue(n->input(0));
        if (w && w->isTensor() && w->toTensor().dim() >= 1) bound_by(w->toTensor().size(0));
        continue;
      }
      if ((k == "aten::index_select" || k == "aten::gather") && at == 2) {
        const tj::Value* x = source_input(n->input(0), inputs);
        auto dim = const_int(n->input(1));
        auto w = tj::toIValue(n->input(0));
        if (dim && w && w->isTensor() && *dim >= 0 && *dim < w->toTensor().dim()) bound_by(w->toTensor().size(*dim));
        else if (dim && x) dim_of(inputs.at(x), *dim);
        continue;
      }
      static const std::set<std::string> divisions{"aten::div", "aten::div_", "aten::floor_divide",
                                                   "aten::remainder", "aten::fmod", "aten::true_divide"};
      if (divisions.count(k) && at == 1 && r.kind == InputRole::Kind::None) r.kind = InputRole::Kind::Divisor;
    }
    if (r.kind != InputRole::Kind::None) roles[name] = r;
  }
  return roles;
}

std::map<std::string, InputRole> input_roles(const tj::Graph& g) {
  std::vector<std::string> names;
  for (const tj::Value* v : g.inputs()) {
    const std::string& nm = v->debugName();
    names.push_back(nm.substr(0, nm.find('.')));
  }
  return input_roles(g, names);
}

std::optional<at::Tensor> role_value(const InputRole& r, const Dims& dims, at::ScalarType dtype,
                                     const std::function<std::optional<Dims>(const std::string&)>& dims_of) {
  bool integer = at::isIntegralType(dtype, /*includeBool=*/false);
  auto opts = at::TensorOptions().dtype(at::kLong);
  int64_t numel = 1;
  for (int64_t d : dims) numel *= d;
  switch (r.kind) {
    case InputRole::Kind::Lengths: {
      if (!integer || dims.size() != 1 || numel == 0) return std::nullopt;
      int64_t t = 1;
      if (auto d = r.source.empty() ? std::nullopt : dims_of(r.source); d && r.axis < static_cast<int64_t>(d->size()))
        t = std::max<int64_t>(1, (*d)[static_cast<size_t>(r.axis)]);
      // Sorted from the full length down, every one positive (enforce_sorted models need the order).
      at::Tensor v = at::empty({numel}, opts);
      for (int64_t i = 0; i < numel; ++i)
        v[i] = std::max<int64_t>(1, t - (numel > 1 ? i * (t - 1) / (numel - 1) : 0));
      return v.to(dtype);
    }
    case InputRole::Kind::Offsets: {
      if (!integer || dims.size() != 1 || numel == 0) return std::nullopt;
      int64_t n = 0;
      if (auto d = r.source.empty() ? std::nullopt : dims_of(r.source); d && d->size() == 1) n = (*d)[0];
      at::Tensor v = at::empty({numel}, opts);
      for (int64_t i = 0; i < numel; ++i) v[i] = i * n / numel;
      return v.to(dtype);
    }
    case InputRole::Kind::Index: {
      if (!integer) return std::nullopt;
      // Small values, as for any random integer input, and inside everything the input indexes
      // (an index used elsewhere too, e.g. x[idx], is safest small).
      int64_t bound = 4;
      if (r.bound > 0) bound = std::min(bound, r.bound);
      for (const auto& [src, axis] : r.more)
        if (auto d = dims_of(src); d && axis >= 0 && axis < static_cast<int64_t>(d->size()))
          bound = std::min(bound, (*d)[static_cast<size_t>(axis)]);
      if (bound <= 0) return std::nullopt;
      return at::randint(0, bound, dims, opts).to(dtype);
    }
    case InputRole::Kind::Divisor: {
      if (!integer) return std::nullopt;
      return at::randint(1, 4, dims, opts).to(dtype);
    }
    default: return std::nullopt;
  }
}

}  // namespace t2o
