// Models saved in train(), or traced while in train(): the graph carries training flags as
// constants (traced) or still reads module state through `self` (buffers that ops update in
// place, such as InstanceNorm's running stats, are not frozen). Both are rewritten here so the
// model converts with inference semantics, and each change is named in a warning.
#include <torch/csrc/jit/ir/ir.h>

#include <map>
#include <optional>
#include <set>

#include "torch/context.h"
#include "torch/pitfalls.h"

namespace t2o {

namespace tj = torch::jit;

namespace {

bool const_true(const tj::Value* v) {
  auto iv = tj::toIValue(v);
  return iv && iv->isBool() && iv->toBool();
}

// A constant dropout probability of 0: the op is an identity in training mode too.
bool const_zero_p(const tj::Value* v) {
  auto iv = tj::toIValue(v);
  return iv && iv->isDouble() && iv->toDouble() == 0.0;
}

bool is_tensor_const(const tj::Value* v) {
  auto iv = tj::toIValue(v);
  return iv && iv->isTensor();
}

void collect_nodes(tj::Block* b, std::vector<tj::Node*>& out) {
  for (tj::Node* n : b->nodes()) {
    out.push_back(n);
    for (tj::Block* sb : n->blocks()) collect_nodes(sb, out);
  }
}

}  // namespace

int resolve_module_attributes(tj::Graph& g, const c10::IValue& self) {
  if (g.inputs().empty() || !g.inputs()[0]->type()->cast<c10::ClassType>()) return 0;
  tj::Value* self_v = g.inputs()[0];
  int changed = 0;
  // GetAttr chains from self: each resolves on the module object to a value that becomes a constant.
  std::map<const tj::Value*, c10::IValue> objects{{self_v, self}};
  std::vector<tj::Node*> nodes;
  collect_nodes(g.block(), nodes);
  for (tj::Node* n : nodes) {
    if (n->kind() != c10::prim::GetAttr) continue;
    auto it = objects.find(n->input(0));
    if (it == objects.end() || !it->second.isObject()) continue;
    c10::IValue attr = it->second.toObjectRef().getAttr(n->s(c10::attr::name));
    if (attr.isObject()) {
      objects[n->output()] = attr;
      continue;
    }
    // Parameters of modules freezing left alone (traced packed RNNs) still require grad, which
    // constants may not.
    if (attr.isTensor() && attr.toTensor().requires_grad()) attr = attr.toTensor().detach();
    tj::WithInsertPoint guard(n);
    tj::Value* c = nullptr;
    try {
      c = g.insertConstant(attr);
    } catch (const c10::Error&) {
      continue;  // not a constant kind (e.g. a list of tensors): left as module state
    }
    c->copyMetadata(n->output());
    // An Optional attribute that holds a value: the constant has the value's type (the
    // interpreter has no literal of an Optional type).
    if (!attr.isNone())
      if (auto opt = n->output()->type()->cast<c10::OptionalType>()) c->setType(opt->getElementType());
    n->output()->replaceAllUsesWith(c);
    ++changed;
  }
  // Attribute reads are gone; drop the object-valued ones (innermost first).
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if ((*it)->kind() == c10::prim::GetAttr && !(*it)->output()->hasUses()) (*it)->destroy();
  return changed;
}

namespace {

struct ModuleState {
  std::map<const tj::Value*, std::pair<c10::IValue, std::string>> objects;  // module value -> (object, path)
  std::map<std::string, c10::TypePtr> types;                                // assigned attribute -> type
  std::map<std::string, tj::Value*> initial;

  // The assigned attribute a GetAttr/SetAttr names, if it is one.
  std::optional<std::string> key(const tj::Node* n) const {
    if (n->inputs().empty()) return std::nullopt;
    auto it = objects.find(n->input(0));
    if (it == objects.end()) return std::nullopt;
    std::string k = it->second.second + "." + n->s(c10::attr::name);
    if (!types.count(k)) return std::nullopt;
    return k;
  }
};

// Assigned attributes (keys of st.types) that a node or what it holds assigns.
void assigned_in(const tj::Node* n, ModuleState& st, std::set<std::string>& out) {
  for (const tj::Block* b : n->blocks())
    for (const tj::Node* m : b->nodes()) {
      if (m->kind() == c10::prim::SetAttr)
        if (auto k = st.key(m)) out.insert(*k);
      assigned_in(m, st, out);
    }
}

// Replaces reads and assignments of assigned attributes in b by values; `env` holds each one's
// current value and is left at the values after b.
void thread_block(tj::Block* b, ModuleState& st, std::map<std::string, tj::Value*>& env) {
  for (auto it = b->nodes().begin(); it != b->nodes().end();) {
    tj::Node* n = *it;
    ++it;
    if (n->kind() == c10::prim::GetAttr || n->kind() == c10::prim::SetAttr) {
      auto k = st.key(n);
      if (!k) continue;
      if (n->kind() == c10::prim::GetAttr) n->output()->replaceAllUsesWith(env.at(*k));
      else env[*k] = n->input(1);
      n->destroy();
      continue;
    }
    if (n->blocks().empty()) continue;
    std::set<std::string> keys;
    assigned_in(n, st, keys);
    if (keys.empty() || (n->kind() != c10::prim::Loop && n->kind() != c10::prim::If)) {
      for (tj::Block* sb : n->blocks()) {
        std::map<std::string, tj::Value*> inner = env;
        thread_block(sb, st, inner);
      }
      continue;
    }
    // Each assigned attribute leaves the If (one more output per branch) or is carried by the
    // Loop (an input, a body input and output, an output), appended after the existing ones.
    if (n->kind() == c10::prim::Loop) {
      tj::Block* body = n->blocks()[0];
      std::map<std::string, tj::Value*> inner = env;
      for (const auto& k : keys) {
        n->addInput(env.at(k));
        inner[k] = body->addInput()->setType(st.types[k]);
      }
      thread_block(body, st, inner);
      for (const auto& k : keys) body->registerOutput(inner.at(k));
    } else {
      for (tj::Block* sb : n->blocks()) {
        std::map<std::string, tj::Value*> inner = env;
        thread_block(sb, st, inner);
        for (const auto& k : keys) sb->registerOutput(inner.at(k));
      }
    }
    for (const auto& k : keys) env[k] = n->addOutput()->setType(st.types[k]);
  }
}

}  // namespace

std::vector<std::string> thread_module_state(tj::Graph& g, const c10::IValue& self) {
  if (g.inputs().empty() || !g.inputs()[0]->type()->cast<c10::ClassType>() || !self.isObject()) return {};
  ModuleState st;
  st.objects[g.inputs()[0]] = {self, ""};
  std::vector<tj::Node*> nodes;
  collect_nodes(g.block(), nodes);
  std::vector<tj::Node*> sets;
  for (tj::Node* n : nodes) {
    if (n->kind() != c10::prim::GetAttr && n->kind() != c10::prim::SetAttr) continue;
    auto it = st.objects.find(n->input(0));
    if (it == st.objects.end() || !it->second.first.isObject()) continue;
    const std::string name = n->s(c10::attr::name);
    if (n->kind() == c10::prim::GetAttr) {
      c10::IValue attr = it->second.first.toObjectRef().getAttr(name);
      if (attr.isObject()) st.objects[n->output()] = {attr, it->second.second + "." + name};
    } else if (n->kind() == c10::prim::SetAttr) {
      sets.push_back(n);
    }
  }
  if (sets.empty()) return {};
  std::vector<std::string> names;
  tj::WithInsertPoint guard(g.block()->nodes().front());
  for (tj::Node* n : sets) {
    const auto& [obj, path] = st.objects[n->input(0)];
    const std::string name = n->s(c10::attr::name);
    std::string key = path + "." + name;
    if (st.types.count(key)) continue;
    c10::IValue v = obj.toObjectRef().getAttr(name);
    if (v.isTensor() && v.toTensor().requires_grad()) v = v.toTensor().detach();
    tj::Value* c = nullptr;
    try {
      c = g.insertConstant(v);
    } catch (const c10::Error&) {
      continue;  // not a constant kind: left as module state (reported as such later)
    }
    c10::TypePtr t = obj.type()->expectRef<c10::ClassType>().getAttribute(name);
    st.types[key] = t->cast<c10::TensorType>() ? c10::TensorType::get() : t;
    st.initial[key] = c;
    names.push_back(key.substr(1));
  }
  if (names.empty()) return {};
  std::map<std::string, tj::Value*> env = st.initial;
  thread_block(g.block(), st, env);
  return names;
}

std::vector<std::string> to_inference_semantics(tj::Graph& g) {
  std::vector<std::string> changes;
  std::vector<tj::Node*> nodes;
  collect_nodes(g.block(), nodes);
  std::map<std::string, std::set<std::string>> by_kind;
  auto note = [&](const tj::Node* n, const std::string& what) {
    std::string m = Ctx::module_of(n);
    by_kind[what].insert(m.empty() ? "" : m);
  };
  for (tj::Node* n : nodes) {
    const std::string kind = n->kind().toQualString();
    // dropout(x, p, train) and its variants: identity at inference.
    static const std::set<std::string> dropouts{"aten::dropout", "aten::feature_dropout", "aten::alpha_dropout",
                                                "aten::feature_alpha_dropout", "aten::dropout_",
                                                "aten::feature_dropout_", "aten::alpha_dropout_",
                                                "aten::feature_alpha_dropout_"};
    if (dropouts.count(kind) && n->inputs().size() == 3 && const_true(n->input(2))) {
      n->output()->replaceAllUsesWith(n->input(0));
      // p = 0 (torchvision's Swin calls F.dropout(attn, p=0.0) with training left at True) changes
      // nothing in either mode: not a training-mode behaviour to report.
      if (!const_zero_p(n->input(1))) note(n, "dropout");
      continue;
    }
    // batch_norm(x, w, b, running_mean, running_var, training, momentum, eps, cudnn): with running
    // statistics, inference normalizes by them. Without, batch statistics are the only ones there are.
    if (kind == "aten::batch_norm" && n->inputs().size() >= 6 && const_true(n->input(5)) &&
        is_tensor_const(n->input(3)) && is_tensor_const(n->input(4))) {
      tj::WithInsertPoint guard(n);
      n->replaceInput(5, g.insertConstant(false));
      note(n, "batch_norm");
      continue;
    }
    // instance_norm(x, w, b, running_mean, running_var, use_input_stats, ...): same rule.
    if (kind == "aten::instance_norm" && n->inputs().size() >= 6 && const_true(n->input(5)) &&
        is_tensor_const(n->input(3)) && is_tensor_const(n->input(4))) {
      tj::WithInsertPoint guard(n);
      n->replaceInput(5, g.insertConstant(false));
      note(n, "instance_norm");
    }
  }
  for (const auto& [what, mods] : by_kind) {
    std::string list;
    size_t k = 0;
    for (const auto& m : mods) {
      if (m.empty()) continue;
      if (k == 6) {
        list += ", ...";
        break;
      }
      list += (k++ ? ", " : "") + m;
    }
    changes.push_back(what + (list.empty() ? "" : " in " + list));
  }
  return changes;
}

}  // namespace t2o
