#include "ir/graph.h"

#include <algorithm>
#include <set>

namespace t2o {

bool Shape::is_static() const {
  return std::all_of(dims.begin(), dims.end(), [](const Dim& d) { return d.is_static(); });
}

Dims Shape::static_dims() const {
  Dims r;
  for (const Dim& d : dims) {
    if (!d.is_static()) throw Error("shape " + to_string() + " is not static");
    r.push_back(d.value);
  }
  return r;
}

std::string Shape::to_string() const {
  if (dims.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += 'x';
    const Dim& d = dims[i];
    s += d.is_static() ? std::to_string(d.value) : d.is_symbolic() ? d.symbol : "?";
  }
  return s;
}

Shape Shape::of(const Dims& d) {
  Shape s;
  for (int64_t v : d) s.dims.push_back(Dim::fixed(v));
  return s;
}

std::string Type::to_string() const {
  switch (kind) {
    case Kind::Tensor:
    case Kind::SparseTensor: {
      std::string s = kind == Kind::SparseTensor ? "sparse " : "";
      s += std::string(dtype_name(elem)) + "[" + (shape ? shape->to_string() : std::string("*")) + "]";
      return s;
    }
    case Kind::Sequence: return "seq(" + (inner ? inner->to_string() : std::string("?")) + ")";
    case Kind::Optional: return "optional(" + (inner ? inner->to_string() : std::string("?")) + ")";
    case Kind::Map:
      return "map(" + std::string(dtype_name(elem)) + "," + (inner ? inner->to_string() : std::string("?")) + ")";
    default: return "?";
  }
}

bool Type::operator==(const Type& o) const {
  if (kind != o.kind || elem != o.elem || shape != o.shape || denotation != o.denotation) return false;
  if (!inner || !o.inner) return !inner && !o.inner;
  return *inner == *o.inner;
}

Attribute Attribute::make_int(std::string n, int64_t v) {
  Attribute a;
  a.name = std::move(n);
  a.type = AttrType::Int;
  a.i = v;
  return a;
}
Attribute Attribute::make_float(std::string n, float v) {
  Attribute a;
  a.name = std::move(n);
  a.type = AttrType::Float;
  a.f = v;
  return a;
}
Attribute Attribute::make_string(std::string n, std::string v) {
  Attribute a;
  a.name = std::move(n);
  a.type = AttrType::String;
  a.s = std::move(v);
  return a;
}
Attribute Attribute::make_ints(std::string n, std::vector<int64_t> v) {
  Attribute a;
  a.name = std::move(n);
  a.type = AttrType::Ints;
  a.ints = std::move(v);
  return a;
}
Attribute Attribute::make_floats(std::string n, std::vector<float> v) {
  Attribute a;
  a.name = std::move(n);
  a.type = AttrType::Floats;
  a.floats = std::move(v);
  return a;
}
Attribute Attribute::make_strings(std::string n, std::vector<std::string> v) {
  Attribute a;
  a.name = std::move(n);
  a.type = AttrType::Strings;
  a.strings = std::move(v);
  return a;
}
Attribute Attribute::make_tensor(std::string n, Tensor v) {
  Attribute a;
  a.name = std::move(n);
  a.type = AttrType::Tensor;
  a.t = std::move(v);
  return a;
}
Attribute Attribute::make_graph(std::string n, std::shared_ptr<Graph> v) {
  Attribute a;
  a.name = std::move(n);
  a.type = AttrType::Graph;
  a.g = std::move(v);
  return a;
}

const Attribute* Node::find_attr(std::string_view n) const {
  for (const Attribute& a : attributes)
    if (a.name == n) return &a;
  return nullptr;
}

namespace {
[[noreturn]] void attr_type_error(const Node& node, std::string_view n, const char* want) {
  throw Error(node.describe() + ": attribute '" + std::string(n) + "' is not " + want);
}
}  // namespace

int64_t Node::attr_int(std::string_view n) const {
  const Attribute* a = find_attr(n);
  if (!a) throw Error(describe() + ": required attribute '" + std::string(n) + "' is missing");
  if (a->type != AttrType::Int) attr_type_error(*this, n, "an int");
  return a->i;
}
int64_t Node::attr_int(std::string_view n, int64_t dflt) const {
  const Attribute* a = find_attr(n);
  if (!a) return dflt;
  if (a->type != AttrType::Int) attr_type_error(*this, n, "an int");
  return a->i;
}
float Node::attr_float(std::string_view n, float dflt) const {
  const Attribute* a = find_attr(n);
  if (!a) return dflt;
  if (a->type == AttrType::Int) return static_cast<float>(a->i);
  if (a->type != AttrType::Float) attr_type_error(*this, n, "a float");
  return a->f;
}
std::string Node::attr_string(std::string_view n, std::string dflt) const {
  const Attribute* a = find_attr(n);
  if (!a) return dflt;
  if (a->type != AttrType::String) attr_type_error(*this, n, "a string");
  return a->s;
}
std::vector<int64_t> Node::attr_ints(std::string_view n, std::vector<int64_t> dflt) const {
  const Attribute* a = find_attr(n);
  if (!a) return dflt;
  if (a->type != AttrType::Ints) attr_type_error(*this, n, "a list of ints");
  return a->ints;
}
std::vector<float> Node::attr_floats(std::string_view n, std::vector<float> dflt) const {
  const Attribute* a = find_attr(n);
  if (!a) return dflt;
  if (a->type != AttrType::Floats) attr_type_error(*this, n, "a list of floats");
  return a->floats;
}
std::vector<std::string> Node::attr_strings(std::string_view n, std::vector<std::string> dflt) const {
  const Attribute* a = find_attr(n);
  if (!a) return dflt;
  if (a->type != AttrType::Strings) attr_type_error(*this, n, "a list of strings");
  return a->strings;
}
const Tensor* Node::attr_tensor(std::string_view n) const {
  const Attribute* a = find_attr(n);
  return a && a->type == AttrType::Tensor ? &a->t : nullptr;
}
const Graph* Node::attr_graph(std::string_view n) const {
  const Attribute* a = find_attr(n);
  return a && a->type == AttrType::Graph ? a->g.get() : nullptr;
}
void Node::set_attr(Attribute a) {
  for (Attribute& x : attributes)
    if (x.name == a.name) {
      x = std::move(a);
      return;
    }
  attributes.push_back(std::move(a));
}

NodeOrigin parse_node_origin(const std::string& doc) {
  NodeOrigin o;
  std::string rest = doc;
  auto in = rest.rfind(" in ");
  if (in != std::string::npos && rest.find(' ', in + 4) == std::string::npos) {
    o.module = rest.substr(in + 4);
    rest.resize(in);
  }
  auto sp = rest.rfind(' ');
  if (sp == std::string::npos) {
    o.aten_op = rest;
  } else {
    o.source = rest.substr(0, sp);
    o.aten_op = rest.substr(sp + 1);
  }
  return o;
}

std::string node_origin_doc(const NodeOrigin& o) {
  std::string s = o.source.empty() ? o.aten_op : o.source + " " + o.aten_op;
  if (!o.module.empty()) s += " in " + o.module;
  return s;
}

std::string Node::describe() const {
  std::string s = op_type;
  if (!domain.empty() && domain != "ai.onnx") s = domain + "::" + op_type;
  if (!name.empty()) s += " '" + name + "'";
  if (!doc_string.empty() && doc_string.size() < 200 && doc_string.find('\n') == std::string::npos)
    s += " (" + doc_string + ")";
  return s;
}

const Initializer* Graph::find_initializer(std::string_view n) const {
  for (const Initializer& i : initializers)
    if (i.name == n) return &i;
  return nullptr;
}

const ValueInfo* Graph::find_input(std::string_view n) const {
  for (const ValueInfo& v : inputs)
    if (v.name == n) return &v;
  return nullptr;
}

std::vector<const ValueInfo*> Graph::runtime_inputs() const {
  std::set<std::string_view> inits;
  for (const Initializer& i : initializers) inits.insert(i.name);
  std::vector<const ValueInfo*> r;
  for (const ValueInfo& v : inputs)
    if (!inits.count(v.name)) r.push_back(&v);
  return r;
}

namespace {
template <typename F>
void for_each_graph(const Graph& g, F&& f) {
  f(g);
  for (const Node& n : g.nodes)
    for (const Attribute& a : n.attributes) {
      if (a.g) for_each_graph(*a.g, f);
      for (const auto& s : a.graphs)
        if (s) for_each_graph(*s, f);
    }
}
}  // namespace

int64_t Graph::parameter_count() const {
  int64_t n = 0;
  for_each_graph(*this, [&](const Graph& g) {
    for (const Initializer& i : g.initializers) n += i.tensor.numel();
    for (const SparseTensor& s : g.sparse_initializers) n += s.values.numel();
  });
  return n;
}

int64_t Graph::parameter_bytes() const {
  int64_t n = 0;
  for_each_graph(*this, [&](const Graph& g) {
    for (const Initializer& i : g.initializers) {
      if (i.tensor.dtype() == DType::String) {
        for (int64_t k = 0; k < i.tensor.numel(); ++k) n += static_cast<int64_t>(i.tensor.strings()[k].size());
      } else {
        n += static_cast<int64_t>(i.tensor.nbytes());
      }
    }
    for (const SparseTensor& s : g.sparse_initializers)
      n += static_cast<int64_t>(s.values.nbytes() + s.indices.nbytes());
  });
  return n;
}

int64_t Model::opset(std::string_view domain) const {
  bool want_default = domain.empty() || domain == "ai.onnx";
  for (const OpsetImport& o : opset_import) {
    bool is_default = o.domain.empty() || o.domain == "ai.onnx";
    if (want_default ? is_default : o.domain == domain) return o.version;
  }
  return 0;
}

// ---- structural equality ----
namespace {
struct Eq {
  std::string* why;
  bool fail(const std::string& w) {
    if (why && why->empty()) *why = w;
    return false;
  }
  bool tensor(const Tensor& a, const Tensor& b, const std::string& where) {
    if (a.defined() != b.defined()) return fail(where + ": tensor presence differs");
    if (a.defined() && !a.equals(b)) return fail(where + ": tensor differs");
    return true;
  }
  bool sparse(const SparseTensor& a, const SparseTensor& b, const std::string& where) {
    if (a.dims != b.dims || a.name != b.name) return fail(where + ": sparse tensor header differs");
    return tensor(a.values, b.values, where + ".values") && tensor(a.indices, b.indices, where + ".indices");
  }
  bool attr(const Attribute& a, const Attribute& b, const std::string& where) {
    std::string w = where + " attr " + a.name;
    if (a.name != b.name || a.type != b.type || a.doc_string != b.doc_string || a.ref_attr_name != b.ref_attr_name)
      return fail(w + ": header differs");
    bool same_f = a.f == b.f || (a.f != a.f && b.f != b.f);
    if (!same_f || a.i != b.i || a.s != b.s || a.ints != b.ints || a.strings != b.strings || !(a.tp == b.tp))
      return fail(w + ": value differs");
    if (a.floats.size() != b.floats.size()) return fail(w + ": floats differ");
    for (size_t k = 0; k < a.floats.size(); ++k)
      if (std::memcmp(&a.floats[k], &b.floats[k], 4) != 0) return fail(w + ": floats differ");
    if (!tensor(a.t, b.t, w) || !sparse(a.sparse, b.sparse, w)) return false;
    if ((a.g == nullptr) != (b.g == nullptr)) return fail(w + ": graph presence differs");
    if (a.g && !graph(*a.g, *b.g)) return false;
    if (a.tensors.size() != b.tensors.size() || a.graphs.size() != b.graphs.size() ||
        a.sparse_tensors.size() != b.sparse_tensors.size() || a.type_protos.size() != b.type_protos.size())
      return fail(w + ": list sizes differ");
    for (size_t k = 0; k < a.tensors.size(); ++k)
      if (!tensor(a.tensors[k], b.tensors[k], w)) return false;
    for (size_t k = 0; k < a.graphs.size(); ++k)
      if (!graph(*a.graphs[k], *b.graphs[k])) return false;
    for (size_t k = 0; k < a.sparse_tensors.size(); ++k)
      if (!sparse(a.sparse_tensors[k], b.sparse_tensors[k], w)) return false;
    for (size_t k = 0; k < a.type_protos.size(); ++k)
      if (!(a.type_protos[k] == b.type_protos[k])) return fail(w + ": type_protos differ");
    return true;
  }
  bool node(const Node& a, const Node& b, const std::string& where) {
    std::string w = where + " node " + a.describe();
    if (a.name != b.name || a.op_type != b.op_type || a.domain != b.domain || a.inputs != b.inputs ||
        a.outputs != b.outputs || a.doc_string != b.doc_string || a.attributes.size() != b.attributes.size())
      return fail(w + ": differs");
    for (size_t k = 0; k < a.attributes.size(); ++k)
      if (!attr(a.attributes[k], b.attributes[k], w)) return false;
    return true;
  }
  bool graph(const Graph& a, const Graph& b) {
    std::string w = "graph '" + a.name + "'";
    if (a.name != b.name || a.doc_string != b.doc_string) return fail(w + ": header differs");
    if (a.inputs != b.inputs) return fail(w + ": inputs differ");
    if (a.outputs != b.outputs) return fail(w + ": outputs differ");
    if (a.value_info != b.value_info) return fail(w + ": value_info differs");
    if (a.nodes.size() != b.nodes.size()) return fail(w + ": node count differs");
    for (size_t k = 0; k < a.nodes.size(); ++k)
      if (!node(a.nodes[k], b.nodes[k], w)) return false;
    if (a.initializers.size() != b.initializers.size()) return fail(w + ": initializer count differs");
    for (size_t k = 0; k < a.initializers.size(); ++k) {
      const auto& x = a.initializers[k];
      const auto& y = b.initializers[k];
      if (x.name != y.name || x.doc_string != y.doc_string) return fail(w + ": initializer header differs");
      if (!tensor(x.tensor, y.tensor, w + " initializer " + x.name)) return false;
    }
    if (a.sparse_initializers.size() != b.sparse_initializers.size()) return fail(w + ": sparse initializers differ");
    for (size_t k = 0; k < a.sparse_initializers.size(); ++k)
      if (!sparse(a.sparse_initializers[k], b.sparse_initializers[k], w)) return false;
    return true;
  }
};
}  // namespace

bool equal(const Graph& a, const Graph& b, std::string* why) { return Eq{why}.graph(a, b); }

bool equal(const Model& a, const Model& b, std::string* why) {
  Eq eq{why};
  if (a.ir_version != b.ir_version || !(a.opset_import == b.opset_import) || a.producer_name != b.producer_name ||
      a.producer_version != b.producer_version || a.domain != b.domain || a.model_version != b.model_version ||
      a.doc_string != b.doc_string || a.metadata_props != b.metadata_props ||
      a.training_info_raw != b.training_info_raw || a.functions.size() != b.functions.size())
    return eq.fail("model header differs");
  for (size_t k = 0; k < a.functions.size(); ++k) {
    const Function& f = a.functions[k];
    const Function& g = b.functions[k];
    if (f.name != g.name || f.domain != g.domain || f.inputs != g.inputs || f.outputs != g.outputs ||
        f.attributes != g.attributes || f.doc_string != g.doc_string || !(f.opset_import == g.opset_import) ||
        f.nodes.size() != g.nodes.size())
      return eq.fail("function " + f.name + " differs");
    for (size_t n = 0; n < f.nodes.size(); ++n)
      if (!eq.node(f.nodes[n], g.nodes[n], "function " + f.name)) return false;
  }
  return eq.graph(a.graph, b.graph);
}

}  // namespace t2o
