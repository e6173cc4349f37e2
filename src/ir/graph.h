#pragma once
// The model IR: a faithful image of ONNX's ModelProto with names as edges, as in ONNX.
// Nodes are kept in topological order; an empty input name means "optional input absent".
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/tensor.h"

namespace t2o {

// A dimension: static (value >= 0), symbolic (symbol non-empty) or unknown (neither).
struct Dim {
  int64_t value = -1;
  std::string symbol;
  std::string denotation;
  static Dim fixed(int64_t v) { return Dim{v, {}, {}}; }
  static Dim named(std::string s) { return Dim{-1, std::move(s), {}}; }
  bool is_static() const { return value >= 0; }
  bool is_symbolic() const { return value < 0 && !symbol.empty(); }
  bool operator==(const Dim&) const = default;
};

struct Shape {
  std::vector<Dim> dims;
  int rank() const { return static_cast<int>(dims.size()); }
  bool is_static() const;
  Dims static_dims() const;  // throws if any dim is not static
  std::string to_string() const;  // "batchx3x224x224", "?" for unknown dims
  static Shape of(const Dims& d);
  bool operator==(const Shape&) const = default;
};

// The type of a value: tensor, sparse tensor, sequence, map, optional.
struct Type {
  enum class Kind { Undefined, Tensor, SparseTensor, Sequence, Map, Optional };
  Kind kind = Kind::Undefined;
  DType elem = DType::Undefined;      // tensor / sparse element type; map key type
  std::optional<Shape> shape;         // tensor / sparse: nullopt when the rank is unknown
  std::shared_ptr<Type> inner;        // sequence / optional element; map value
  std::string denotation;
  static Type tensor(DType t, std::optional<Shape> s = std::nullopt) {
    Type r;
    r.kind = Kind::Tensor;
    r.elem = t;
    r.shape = std::move(s);
    return r;
  }
  std::string to_string() const;  // "f32[1x3x224x224]", "seq(f32[?])"
  bool operator==(const Type& o) const;
};

struct ValueInfo {
  std::string name;
  Type type;
  std::string doc_string;
  bool operator==(const ValueInfo&) const = default;
};

struct Graph;

struct SparseTensor {
  Tensor values;
  Tensor indices;
  Dims dims;
  std::string name;  // values' name, used for sparse initializers
};

enum class AttrType : int32_t {
  Undefined = 0, Float = 1, Int = 2, String = 3, Tensor = 4, Graph = 5, Floats = 6, Ints = 7,
  Strings = 8, Tensors = 9, Graphs = 10, SparseTensor = 11, SparseTensors = 12, TypeProto = 13,
  TypeProtos = 14,
};

struct Attribute {
  std::string name;
  AttrType type = AttrType::Undefined;
  std::string doc_string;
  std::string ref_attr_name;  // inside functions: refers to the caller's attribute
  float f = 0;
  int64_t i = 0;
  std::string s;  // bytes
  Tensor t;
  std::shared_ptr<Graph> g;
  SparseTensor sparse;
  Type tp;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
  std::vector<SparseTensor> sparse_tensors;
  std::vector<Type> type_protos;

  static Attribute make_int(std::string n, int64_t v);
  static Attribute make_float(std::string n, float v);
  static Attribute make_string(std::string n, std::string v);
  static Attribute make_ints(std::string n, std::vector<int64_t> v);
  static Attribute make_floats(std::string n, std::vector<float> v);
  static Attribute make_strings(std::string n, std::vector<std::string> v);
  static Attribute make_tensor(std::string n, Tensor v);
  static Attribute make_graph(std::string n, std::shared_ptr<Graph> v);
};

// Where a converted node came from, as the converter writes it in the node's doc_string:
// "SOURCE ATEN_OP[ in MODULE]", e.g. "resnet.py:148 aten::relu_ in layer3.1.relu" (SOURCE and
// MODULE may be absent: "aten::relu_", "model.py:7 aten::add").
struct NodeOrigin {
  std::string source;   // "resnet.py:148"
  std::string aten_op;  // "aten::relu_"
  std::string module;   // "layer3.1.relu": the submodule's path in the model; "" at top level
};
NodeOrigin parse_node_origin(const std::string& doc_string);
std::string node_origin_doc(const NodeOrigin& o);

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" is the default ONNX domain ("ai.onnx")
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<Attribute> attributes;
  std::string doc_string;

  const Attribute* find_attr(std::string_view n) const;
  bool has_attr(std::string_view n) const { return find_attr(n) != nullptr; }
  // Typed lookups; the defaulted forms return the default when absent, the others throw.
  int64_t attr_int(std::string_view n) const;
  int64_t attr_int(std::string_view n, int64_t dflt) const;
  float attr_float(std::string_view n, float dflt) const;
  std::string attr_string(std::string_view n, std::string dflt) const;
  std::vector<int64_t> attr_ints(std::string_view n, std::vector<int64_t> dflt = {}) const;
  std::vector<float> attr_floats(std::string_view n, std::vector<float> dflt = {}) const;
  std::vector<std::string> attr_strings(std::string_view n, std::vector<std::string> dflt = {}) const;
  const Tensor* attr_tensor(std::string_view n) const;
  const Graph* attr_graph(std::string_view n) const;
  void set_attr(Attribute a);  // replaces an attribute of the same name

  int num_inputs() const { return static_cast<int>(inputs.size()); }
  bool has_input(int i) const { return i < num_inputs() && !inputs[static_cast<size_t>(i)].empty(); }
  // "Conv 'conv1' (model.py:42)": how messages name a node.
  std::string describe() const;
};

struct Initializer {
  std::string name;
  Tensor tensor;
  std::string doc_string;
};

struct Graph {
  std::string name;
  std::string doc_string;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> value_info;
  std::vector<Initializer> initializers;
  std::vector<SparseTensor> sparse_initializers;

  const Initializer* find_initializer(std::string_view n) const;
  const ValueInfo* find_input(std::string_view n) const;
  // Graph inputs that are not initializers (what a caller must feed).
  std::vector<const ValueInfo*> runtime_inputs() const;
  // Number of parameters and bytes held by initializers, this graph and its subgraphs.
  int64_t parameter_count() const;
  int64_t parameter_bytes() const;
  // Calls f on every node, recursing into subgraph attributes.
  template <typename F>
  void for_each_node(F&& f) const;
};

struct OpsetImport {
  std::string domain;
  int64_t version = 0;
  bool operator==(const OpsetImport&) const = default;
};

struct Function {
  std::string name;
  std::string domain;
  std::string doc_string;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<std::string> attributes;
  std::vector<Node> nodes;
  std::vector<OpsetImport> opset_import;
};

struct Model {
  int64_t ir_version = 8;
  std::vector<OpsetImport> opset_import;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  std::vector<std::pair<std::string, std::string>> metadata_props;
  std::vector<Function> functions;
  std::vector<std::string> training_info_raw;  // kept as serialized bytes: carried, not interpreted
  Graph graph;

  // Version of the given domain's opset ("" and "ai.onnx" are the same); 0 when not imported.
  int64_t opset(std::string_view domain = "") const;
};

template <typename F>
void Graph::for_each_node(F&& f) const {
  for (const Node& n : nodes) {
    f(n);
    for (const Attribute& a : n.attributes) {
      if (a.g) a.g->for_each_node(f);
      for (const auto& g : a.graphs)
        if (g) g->for_each_node(f);
    }
  }
}

// Structural equality of models (tensors compared bytewise); for round-trip tests.
bool equal(const Model& a, const Model& b, std::string* why = nullptr);
bool equal(const Graph& a, const Graph& b, std::string* why = nullptr);

}  // namespace t2o
