#include "passes/graph_util.h"

#include <algorithm>

namespace t2o::passes {

bool is_onnx(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

namespace {

template <typename F>
void for_each_subgraph(const Node& n, F&& f) {
  for (const Attribute& a : n.attributes) {
    if (a.g) f(*a.g);
    for (const auto& g : a.graphs)
      if (g) f(*g);
  }
}
template <typename F>
void for_each_subgraph_mut(Node& n, F&& f) {
  for (Attribute& a : n.attributes) {
    if (a.g) f(*a.g);
    for (auto& g : a.graphs)
      if (g) f(*g);
  }
}

std::set<std::string> defined_in(const Graph& g) {
  std::set<std::string> d;
  for (const auto& i : g.inputs) d.insert(i.name);
  for (const auto& i : g.initializers) d.insert(i.name);
  for (const Node& n : g.nodes)
    for (const auto& o : n.outputs)
      if (!o.empty()) d.insert(o);
  return d;
}

bool reads(const Graph& g, const std::string& name) {
  std::set<std::string> r;
  outer_reads(g, r);
  return r.count(name) > 0;
}

}  // namespace

void outer_reads(const Graph& g, std::set<std::string>& reads) {
  std::set<std::string> defined;
  for (const auto& i : g.inputs) defined.insert(i.name);
  for (const auto& i : g.initializers) defined.insert(i.name);
  for (const Node& n : g.nodes) {
    for (const auto& in : n.inputs)
      if (!in.empty() && !defined.count(in)) reads.insert(in);
    for_each_subgraph(n, [&](const Graph& s) {
      std::set<std::string> inner;
      outer_reads(s, inner);
      for (const auto& r : inner)
        if (!defined.count(r)) reads.insert(r);
    });
    for (const auto& o : n.outputs)
      if (!o.empty()) defined.insert(o);
  }
  for (const auto& o : g.outputs)
    if (!defined.count(o.name)) reads.insert(o.name);
}

Uses::Uses(const Graph& g) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (const auto& in : n.inputs)
      if (!in.empty()) readers_[in].push_back(i);
    for (const auto& o : n.outputs)
      if (!o.empty()) producer_[o] = static_cast<int>(i);
    std::set<std::string> inner;
    for_each_subgraph(n, [&](const Graph& s) { outer_reads(s, inner); });
    for (const auto& r : inner) ++captured_[r];
  }
  for (const auto& o : g.outputs) outputs_.insert(o.name);
}

int Uses::count(const std::string& name) const {
  int c = is_output(name) ? 1 : 0;
  if (auto it = readers_.find(name); it != readers_.end()) c += static_cast<int>(it->second.size());
  if (auto it = captured_.find(name); it != captured_.end()) c += it->second;
  return c;
}

const std::vector<size_t>& Uses::readers(const std::string& name) const {
  static const std::vector<size_t> none;
  auto it = readers_.find(name);
  return it == readers_.end() ? none : it->second;
}

int Uses::producer(const std::string& name) const {
  auto it = producer_.find(name);
  return it == producer_.end() ? -1 : it->second;
}

bool Uses::only_reader(const std::string& name, size_t node) const {
  if (is_output(name) || captured(name)) return false;
  const auto& r = readers(name);
  return !r.empty() && std::all_of(r.begin(), r.end(), [&](size_t i) { return i == node; });
}

Tensor constant_node_value(const Node& n) {
  if (n.op_type != "Constant" || !is_onnx(n) || n.attributes.size() != 1) return {};
  const Attribute& a = n.attributes[0];
  if (a.name == "value" && a.type == AttrType::Tensor) return a.t;
  if (a.name == "value_float") return Tensor::scalar<float>(a.f);
  if (a.name == "value_int") return Tensor::scalar<int64_t>(a.i);
  if (a.name == "value_floats") return Tensor::from_vector<float>(a.floats, {static_cast<int64_t>(a.floats.size())});
  if (a.name == "value_ints") return Tensor::from_vector<int64_t>(a.ints, {static_cast<int64_t>(a.ints.size())});
  if (a.name == "value_string") return Tensor::from_strings({a.s}, {});
  if (a.name == "value_strings") return Tensor::from_strings(a.strings, {static_cast<int64_t>(a.strings.size())});
  return {};
}

void Scope::build(Level& l) {
  l.consts.clear();
  l.defined = defined_in(*l.g);
  std::set<std::string> inputs;
  for (const auto& i : l.g->inputs) inputs.insert(i.name);
  // Copies (sharing storage): passes add initializers, which moves the vector's elements.
  for (const auto& init : l.g->initializers)
    if (!inputs.count(init.name)) {
      owned_.push_back(std::make_unique<Tensor>(init.tensor));
      l.consts.emplace(init.name, owned_.back().get());
    }
  for (const Node& n : l.g->nodes) {
    if (n.op_type != "Constant" || !is_onnx(n) || n.outputs.size() != 1) continue;
    Tensor t = constant_node_value(n);
    if (t.defined()) {
      owned_.push_back(std::make_unique<Tensor>(std::move(t)));
      l.consts[n.outputs[0]] = owned_.back().get();
    }
  }
}

void Scope::push(Graph& g) {
  chain_.push_back({&g, {}, {}});
  build(chain_.back());
}

void Scope::pop() { chain_.pop_back(); }

void Scope::refresh() { build(chain_.back()); }

void Scope::define_constant(const std::string& name, const Tensor& t) {
  owned_.push_back(std::make_unique<Tensor>(t));
  chain_.back().consts[name] = owned_.back().get();
  chain_.back().defined.insert(name);
}

const Tensor* Scope::constant(const std::string& name) const {
  for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
    auto c = it->consts.find(name);
    if (c != it->consts.end()) return c->second;
    if (it->defined.count(name)) return nullptr;
  }
  return nullptr;
}

namespace {

int visit(Scope& s, const std::function<int(Scope&)>& f) {
  int n = f(s);
  if (n) s.refresh();
  for (Node& node : s.graph().nodes) {
    for_each_subgraph_mut(node, [&](Graph& sub) {
      s.push(sub);
      n += visit(s, f);
      s.pop();
    });
  }
  return n;
}

bool check_nested(const Graph& g, const std::string& from, const std::string& to) {
  bool ok = true;
  for (const Node& n : g.nodes)
    for_each_subgraph(n, [&](const Graph& sub) {
      std::set<std::string> d = defined_in(sub);
      if (d.count(from) || !reads(sub, from)) return;
      if (d.count(to)) ok = false;
      else if (!check_nested(sub, from, to)) ok = false;
    });
  return ok;
}

void apply_nested(Graph& g, const std::string& from, const std::string& to) {
  for (Node& n : g.nodes) {
    for (auto& in : n.inputs)
      if (in == from) in = to;
    for_each_subgraph_mut(n, [&](Graph& sub) {
      if (defined_in(sub).count(from)) return;
      for (auto& o : sub.outputs)
        if (o.name == from) o.name = to;
      apply_nested(sub, from, to);
    });
  }
}

}  // namespace

int for_each_graph(Model& m, const std::function<int(Scope&)>& f) {
  Scope s(m.graph);
  return visit(s, f);
}

bool replace_uses(Graph& g, std::string from, std::string to) {
  if (from == to) return true;
  if (!check_nested(g, from, to)) return false;
  apply_nested(g, from, to);
  return true;
}

void rename_value(Graph& g, std::string from, std::string to) {
  replace_uses(g, from, to);
  for (Node& n : g.nodes)
    for (auto& o : n.outputs)
      if (o == from) o = to;
  for (auto& o : g.outputs)
    if (o.name == from) o.name = to;
  g.value_info.erase(std::remove_if(g.value_info.begin(), g.value_info.end(),
                                    [&](const ValueInfo& v) { return v.name == from; }),
                     g.value_info.end());
}

bool bypass(Graph& g, const Uses& uses, size_t node, std::string out, std::string in) {
  if (!uses.is_output(out)) return replace_uses(g, out, in);
  int p = uses.producer(in);
  if (p < 0 || uses.is_output(in) || static_cast<size_t>(p) == node) return false;
  if (!check_nested(g, in, out)) return false;
  // `in` becomes `out` from its producer on; the bypassed node then reads and writes `out`.
  for (size_t i = static_cast<size_t>(p) + 1; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (i == node) continue;
    for (auto& x : n.inputs)
      if (x == in) x = out;
  }
  for (Node& n : g.nodes)
    for_each_subgraph_mut(n, [&](Graph& sub) {
      if (defined_in(sub).count(in)) return;
      for (auto& o : sub.outputs)
        if (o.name == in) o.name = out;
      apply_nested(sub, in, out);
    });
  for (auto& o : g.nodes[static_cast<size_t>(p)].outputs)
    if (o == in) o = out;
  g.value_info.erase(std::remove_if(g.value_info.begin(), g.value_info.end(),
                                    [&](const ValueInfo& v) { return v.name == in; }),
                     g.value_info.end());
  return true;
}

void compact(Graph& g, const std::vector<bool>& dead, std::map<size_t, std::vector<Node>> insert) {
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  for (size_t i = 0; i <= g.nodes.size(); ++i) {
    if (auto it = insert.find(i); it != insert.end())
      for (Node& n : it->second) nodes.push_back(std::move(n));
    if (i < g.nodes.size() && !(i < dead.size() && dead[i])) nodes.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(nodes);
}

void drop_removed(Graph& g) {
  g.nodes.erase(std::remove_if(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return removed(n); }), g.nodes.end());
}

std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> r(static_cast<size_t>(t.numel()));
  dispatch_dtype(t.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* p = t.data<T>();
    for (size_t i = 0; i < r.size(); ++i) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) r[i] = static_cast<float>(p[i]);
      else r[i] = static_cast<double>(p[i]);
    }
  });
  return r;
}

std::vector<int64_t> to_ints(const Tensor& t) {
  std::vector<int64_t> r(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < r.size(); ++i) r[i] = t.as_int(static_cast<int64_t>(i));
  return r;
}

Tensor from_doubles(const std::vector<double>& v, const Dims& dims, DType dt) {
  Tensor t(dt, dims);
  if (static_cast<size_t>(t.numel()) != v.size()) throw Error("from_doubles: size does not match dims");
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) p[i] = T(static_cast<float>(v[i]));
      else p[i] = static_cast<T>(v[i]);
    }
  });
  return t;
}

bool all_equal(const Tensor& t, double v) {
  if (!t.defined() || t.numel() == 0 || t.dtype() == DType::String || t.dtype() == DType::Complex64 ||
      t.dtype() == DType::Complex128)
    return false;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.as_double(i) != v) return false;
  return true;
}

std::optional<Shape> known_shape(const Type* t) {
  if (!t || t->kind != Type::Kind::Tensor || !t->shape) return std::nullopt;
  return t->shape;
}

bool same_dim(const Dim& a, const Dim& b) {
  if (a.is_static() || b.is_static()) return a.is_static() && b.is_static() && a.value == b.value;
  return a.is_symbolic() && b.is_symbolic() && a.symbol == b.symbol;
}

std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  Shape r;
  int n = std::max(a.rank(), b.rank());
  r.dims.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    int ia = i - (n - a.rank()), ib = i - (n - b.rank());
    Dim da = ia >= 0 ? a.dims[static_cast<size_t>(ia)] : Dim::fixed(1);
    Dim db = ib >= 0 ? b.dims[static_cast<size_t>(ib)] : Dim::fixed(1);
    Dim& out = r.dims[static_cast<size_t>(i)];
    if (da.is_static() && da.value == 1) out = db;
    else if (db.is_static() && db.value == 1) out = da;
    else if (same_dim(da, db)) out = da;
    else if (da.is_static() && db.is_static()) return std::nullopt;
    // A static size other than 1 wins: the other side can only be 1 or equal for a valid model.
    else if (da.is_static()) out = da;
    else if (db.is_static()) out = db;
    else out = Dim{};
    out.denotation.clear();
  }
  return r;
}

Graph deep_copy(const Graph& g) {
  Graph r = g;
  for (Node& n : r.nodes)
    for (Attribute& a : n.attributes) {
      if (a.g) a.g = std::make_shared<Graph>(deep_copy(*a.g));
      for (auto& sg : a.graphs)
        if (sg) sg = std::make_shared<Graph>(deep_copy(*sg));
    }
  return r;
}

Model deep_copy(const Model& m) {
  Model r = m;
  r.graph = deep_copy(m.graph);
  return r;
}

Node make_node(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
               const std::string& name, const std::string& doc) {
  Node n;
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  n.name = name;
  n.doc_string = doc;
  return n;
}

void add_initializer(Graph& g, const std::string& name, Tensor t) { g.initializers.push_back({name, std::move(t), {}}); }

}  // namespace t2o::passes
