#include "runtime/functions.h"

#include <map>

namespace t2o {

namespace {

struct Inliner {
  std::map<std::pair<std::string, std::string>, const Function*> table;
  int counter = 0;

  const Function* find(const Node& n) const {
    auto it = table.find({n.domain, n.op_type});
    return it == table.end() ? nullptr : it->second;
  }

  void expand_graph(Graph& g, int depth) {
    std::vector<Node> out;
    for (Node& n : g.nodes) {
      for (Attribute& a : n.attributes) {
        if (a.g) expand_graph(*a.g, depth);
        for (auto& sg : a.graphs) expand_graph(*sg, depth);
      }
      const Function* f = find(n);
      if (!f) {
        out.push_back(std::move(n));
        continue;
      }
      expand_call(n, *f, out, depth);
    }
    g.nodes = std::move(out);
  }

  void expand_call(const Node& call, const Function& f, std::vector<Node>& out, int depth) {
    if (depth > 32) throw Error("model-local function '" + f.name + "' calls itself too deeply");
    std::string prefix = call.name.empty() ? f.name + "_" + std::to_string(counter++) : call.name;
    prefix += "/";
    std::map<std::string, std::string> rename;
    for (size_t i = 0; i < f.inputs.size(); ++i) rename[f.inputs[i]] = i < call.inputs.size() ? call.inputs[i] : "";
    for (size_t i = 0; i < f.outputs.size(); ++i) rename[f.outputs[i]] = i < call.outputs.size() ? call.outputs[i] : "";
    auto map_name = [&](const std::string& s) -> std::string {
      if (s.empty()) return s;
      auto it = rename.find(s);
      if (it != rename.end()) return it->second;
      return rename[s] = prefix + s;
    };
    std::vector<Node> body;
    for (const Node& fn : f.nodes) {
      Node n = fn;
      n.name = prefix + fn.name;
      for (auto& i : n.inputs) i = map_name(i);
      for (auto& o : n.outputs) o = map_name(o);
      std::vector<Attribute> attrs;
      for (Attribute& a : n.attributes) {
        if (a.ref_attr_name.empty()) {
          attrs.push_back(std::move(a));
          continue;
        }
        // Bound from the caller; unbound references are dropped so the op's default applies.
        if (const Attribute* v = call.find_attr(a.ref_attr_name)) {
          Attribute b = *v;
          b.name = a.name;
          attrs.push_back(std::move(b));
        }
      }
      n.attributes = std::move(attrs);
      body.push_back(std::move(n));
    }
    Graph tmp;
    tmp.nodes = std::move(body);
    expand_graph(tmp, depth + 1);
    for (Node& n : tmp.nodes) out.push_back(std::move(n));
  }
};

}  // namespace

void inline_model_functions(Model& model) {
  if (model.functions.empty()) return;
  Inliner in;
  for (const Function& f : model.functions) in.table[{f.domain, f.name}] = &f;
  // Functions may import opsets the model does not; the main graph needs them after expansion.
  for (const Function& f : model.functions)
    for (const OpsetImport& o : f.opset_import) {
      bool have = false;
      for (const OpsetImport& m : model.opset_import) have = have || m.domain == o.domain;
      if (!have) model.opset_import.push_back(o);
    }
  in.expand_graph(model.graph, 0);
  model.functions.clear();
}

}  // namespace t2o
