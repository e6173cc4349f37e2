// The model's graphs in Graphviz's DOT language, one drawing per graph: the main graph, then each
// If/Loop/Scan body (the page switches between them; a node holding a body links to it). Nodes
// are labeled with their op type and output shape; initializers are not drawn (a ResNet would be
// mostly weight boxes) but are listed in the node's details.
#include "report/graph_draw.h"

#include <chrono>
#include <cstdio>
#include <cstring>

#include "onnx/check.h"

namespace t2o {

namespace {

std::string dot_quote(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    r += c;
  }
  return r + "\"";
}

// Value name -> type, from every graph's inputs, outputs and value_info.
void collect_types(const Graph& g, std::map<std::string, Type>& types) {
  for (const auto* list : {&g.inputs, &g.outputs, &g.value_info})
    for (const ValueInfo& v : *list)
      if (v.type.kind != Type::Kind::Undefined) types[v.name] = v.type;
  for (const Initializer& i : g.initializers) types.emplace(i.name, Type::tensor(i.tensor.dtype(), Shape::of(i.tensor.dims())));
  for (const Node& n : g.nodes)
    for (const Attribute& a : n.attributes) {
      if (a.g) collect_types(*a.g, types);
      for (const auto& sg : a.graphs)
        if (sg) collect_types(*sg, types);
    }
}

bool all_outputs_typed(const Graph& g, const std::map<std::string, Type>& types) {
  for (const Node& n : g.nodes)
    for (const std::string& o : n.outputs)
      if (!o.empty() && !types.count(o)) return false;
  return true;
}

std::string fmt_one(int64_t v) { return std::to_string(v); }
std::string fmt_one(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", static_cast<double>(v));
  return b;
}
std::string fmt_one(const std::string& s) { return s; }

std::string attr_text(const Attribute& a) {
  auto list = [](const auto& v) {
    std::string r = "[";
    for (size_t i = 0; i < v.size() && i < 16; ++i) r += (i ? ", " : "") + fmt_one(v[i]);
    return r + (v.size() > 16 ? ", ...]" : "]");
  };
  switch (a.type) {
    case AttrType::Float: return fmt_one(a.f);
    case AttrType::Int: return std::to_string(a.i);
    case AttrType::String: return a.s.size() > 64 ? a.s.substr(0, 64) + "..." : a.s;
    case AttrType::Ints: return list(a.ints);
    case AttrType::Floats: return list(a.floats);
    case AttrType::Strings: return list(a.strings);
    case AttrType::Tensor: return "tensor " + std::string(dtype_name(a.t.dtype())) + "[" + dims_to_string(a.t.dims()) + "]";
    case AttrType::Graph: return "graph";
    case AttrType::Graphs: return std::to_string(a.graphs.size()) + " graphs";
    default: return "(" + std::to_string(static_cast<int>(a.type)) + ")";
  }
}

std::string graph_id(size_t index) {
  std::string id = "g";
  id += std::to_string(index);
  return id;
}

const char* level_name(NodeMark::Level l) {
  switch (l) {
    case NodeMark::Level::Agrees: return "agrees";
    case NodeMark::Level::SlightlyOff: return "slight";
    case NodeMark::Level::Differs: return "differs";
    case NodeMark::Level::NotCompared: return "uncompared";
  }
  return "uncompared";
}

class Drawer {
 public:
  Drawer(const Model& m, const std::map<std::string, NodeMark>& marks, GraphDrawing& out)
      : marks_(marks), out_(out) {
    collect_types(m.graph, types_);
    bool typed = all_outputs_typed(m.graph, types_);
    if (!typed) {
      try {
        Model inferred = infer_shapes(m, false);
        collect_types(inferred.graph, types_);
      } catch (const Error&) {
        // Shapes are a convenience of the drawing; nodes without them show their op type only.
      }
    }
  }

  void add(const Graph& g, const std::string& title) {
    std::string gid = graph_id(out_.graphs.size());
    out_.graphs.push_back({gid, title, g.nodes.size(), {}});
    size_t slot = out_.graphs.size() - 1;
    std::map<std::string, std::string> producer;  // value -> dot node id
    std::string dot =
        "digraph G {\n"
        "graph [rankdir=TB, nodesep=0.25, ranksep=0.35, fontname=\"Helvetica\"];\n"
        "node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10, height=0.3, "
        "fillcolor=\"#e3ecfa\", color=\"#5b7db1\"];\n"
        "edge [color=\"#7a869a\", arrowsize=0.6];\n";
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const ValueInfo& v = g.inputs[i];
      if (g.find_initializer(v.name)) continue;
      std::string id = gid + "i" + std::to_string(i);
      producer[v.name] = id;
      dot += id + " [id=" + dot_quote(id) + ", class=\"io\", shape=ellipse, fillcolor=\"#fff3c4\", color=\"#b08900\", label=" +
             dot_quote(v.name + "\n" + v.type.to_string()) + ", tooltip=" + dot_quote("input " + v.name) + "];\n";
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      std::string id = gid + "n" + std::to_string(i);
      dot += id + " [id=" + dot_quote(id) + node_style(n) + ", label=" + dot_quote(label(n)) +
             ", tooltip=" + dot_quote(n.name.empty() ? n.op_type : n.name) + "];\n";
      // Values a body reads from the enclosing graph have no producer here: no edge, but they
      // are listed in the node's details.
      for (const std::string& in : n.inputs) {
        auto p = producer.find(in);
        if (p != producer.end()) dot += p->second + " -> " + id + ";\n";
      }
      for (const std::string& o : n.outputs)
        if (!o.empty()) producer[o] = id;
      nlohmann::json info = node_json(n, gid);
      for (const Attribute& a : n.attributes)
        for (const Graph* sg : sub_graphs(a)) {
          std::string sub_id = graph_id(out_.graphs.size() + pending_);
          ++pending_;
          info["subgraphs"].push_back({{"attr", a.name}, {"graph", sub_id}});
          pending_graphs_.push_back({sg, n.op_type + " '" + n.name + "' " + a.name});
        }
      out_.nodes[id] = info;
    }
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      const ValueInfo& v = g.outputs[i];
      std::string id = gid + "o" + std::to_string(i);
      dot += id + " [id=" + dot_quote(id) + ", class=\"io\", shape=ellipse, fillcolor=\"#e6f4ea\", color=\"#3d7d4f\", label=" +
             dot_quote(v.name + "\n" + v.type.to_string()) + ", tooltip=" + dot_quote("output " + v.name) + "];\n";
      auto p = producer.find(v.name);
      if (p != producer.end()) dot += p->second + " -> " + id + ";\n";
    }
    dot += "}\n";
    dots_.push_back({slot, dot});
  }

  // Draws the queued bodies breadth first, so ids given out in add() match their slots.
  void add_pending() {
    for (size_t k = 0; k < pending_graphs_.size(); ++k) {
      --pending_;
      auto [g, title] = pending_graphs_[k];  // a copy: add() appends to the queue
      add(*g, title);
    }
  }

  void layout(const RenderOptions& o) {
    auto t0 = std::chrono::steady_clock::now();
    for (auto& [slot, dot] : dots_) {
      if (!out_.problem.empty()) break;
      std::string svg = run_dot(dot, o, out_.problem);
      out_.graphs[slot].svg = clean_svg(svg);
    }
    out_.layout_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  static std::vector<const Graph*> sub_graphs(const Attribute& a) {
    std::vector<const Graph*> r;
    if (a.g) r.push_back(a.g.get());
    for (const auto& g : a.graphs)
      if (g) r.push_back(g.get());
    return r;
  }

  std::string shape_of(const std::string& value) const {
    auto t = types_.find(value);
    if (t == types_.end()) return "";
    if (t->second.kind == Type::Kind::Tensor) return t->second.shape ? t->second.shape->to_string() : "*";
    return t->second.to_string();
  }

  std::string label(const Node& n) const {
    std::string op = n.domain.empty() || n.domain == "ai.onnx" ? n.op_type : n.domain + "::" + n.op_type;
    std::string shape;
    for (const std::string& o : n.outputs)
      if (!o.empty()) {
        shape = shape_of(o);
        break;
      }
    size_t outs = 0;
    for (const std::string& o : n.outputs) outs += !o.empty();
    if (outs > 1) shape += " +" + std::to_string(outs - 1);
    return shape.empty() ? op : op + "\n" + shape;
  }

  std::string node_style(const Node& n) const {
    auto m = marks_.find(n.name);
    if (m == marks_.end() || n.name.empty()) return marks_.empty() ? ", class=\"op\"" : ", class=\"op uncompared\", fillcolor=\"#eeeeee\", color=\"#9e9e9e\"";
    const NodeMark& k = m->second;
    std::string s = ", class=\"op " + std::string(level_name(k.level)) + (k.first ? " diverging\"" : "\"");
    switch (k.level) {
      case NodeMark::Level::Agrees: s += ", fillcolor=\"#c8e6c9\", color=\"#2e7d32\""; break;
      case NodeMark::Level::SlightlyOff: s += ", fillcolor=\"#fff59d\", color=\"#a68b00\""; break;
      case NodeMark::Level::Differs: s += ", fillcolor=\"#ef9a9a\", color=\"#c62828\""; break;
      case NodeMark::Level::NotCompared: s += ", fillcolor=\"#eeeeee\", color=\"#9e9e9e\""; break;
    }
    if (k.first) s += ", penwidth=4, color=\"#b71c1c\"";
    return s;
  }

  nlohmann::json node_json(const Node& n, const std::string& gid) const {
    nlohmann::json j = {{"name", n.name}, {"op", n.op_type}, {"graph", gid}};
    if (!n.domain.empty()) j["domain"] = n.domain;
    if (!n.doc_string.empty()) j["doc"] = n.doc_string;
    j["inputs"] = nlohmann::json::array();
    for (const std::string& in : n.inputs) {
      auto t = types_.find(in);
      j["inputs"].push_back({in, t == types_.end() ? "" : t->second.to_string()});
    }
    j["outputs"] = nlohmann::json::array();
    for (const std::string& o : n.outputs) {
      auto t = types_.find(o);
      j["outputs"].push_back({o, t == types_.end() ? "" : t->second.to_string()});
    }
    nlohmann::json attrs = nlohmann::json::object();
    for (const Attribute& a : n.attributes) attrs[a.name] = attr_text(a);
    j["attrs"] = attrs;
    auto m = marks_.find(n.name);
    if (m != marks_.end() && !n.name.empty())
      j["mark"] = {{"level", level_name(m->second.level)}, {"detail", m->second.detail}, {"first", m->second.first},
                   {"aten", m->second.aten_op}, {"source", m->second.source}};
    if (m != marks_.end() && !n.name.empty() && !m->second.module.empty()) j["mark"]["module"] = m->second.module;
    return j;
  }

  // dot's SVG document without the XML prolog and DOCTYPE, sized by the page (the viewBox stays).
  static std::string clean_svg(const std::string& svg) {
    auto start = svg.find("<svg");
    if (start == std::string::npos) return "";
    std::string s = svg.substr(start);
    auto tag_end = s.find('>');
    std::string tag = s.substr(0, tag_end);
    for (const char* attr : {" width=\"", " height=\""}) {
      auto a = tag.find(attr);
      if (a == std::string::npos) continue;
      auto e = tag.find('"', a + std::strlen(attr));
      tag.erase(a, e + 1 - a);
    }
    return tag + " class=\"graph-svg\" preserveAspectRatio=\"xMidYMid meet\"" + s.substr(tag_end);
  }

  const std::map<std::string, NodeMark>& marks_;
  GraphDrawing& out_;
  std::map<std::string, Type> types_;
  std::vector<std::pair<size_t, std::string>> dots_;
  std::vector<std::pair<const Graph*, std::string>> pending_graphs_;
  size_t pending_ = 0;
};

}  // namespace

GraphDrawing draw_model(const Model& m, const std::map<std::string, NodeMark>& marks, const RenderOptions& o) {
  GraphDrawing d;
  Drawer dr(m, marks, d);
  dr.add(m.graph, "main graph");
  dr.add_pending();
  dr.layout(o);
  return d;
}

}  // namespace t2o
