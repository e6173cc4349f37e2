#include "onnx/legalize.h"

#include <onnx/defs/data_type_utils.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <map>
#include <set>

#include "onnx/model_io.h"

namespace t2o {

namespace {

using TypeMap = std::map<std::string, DType>;

void collect_types(const onnx::GraphProto& g, TypeMap& types) {
  auto add = [&](const onnx::ValueInfoProto& v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().elem_type() != 0)
      types[v.name()] = static_cast<DType>(v.type().tensor_type().elem_type());
  };
  for (const auto& v : g.input()) add(v);
  for (const auto& v : g.output()) add(v);
  for (const auto& v : g.value_info()) add(v);
  for (const auto& t : g.initializer()) types[t.name()] = static_cast<DType>(t.data_type());
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_types(a.g(), types);
      for (const auto& sg : a.graphs()) collect_types(sg, types);
    }
}

std::string type_string(DType t) {
  onnx::TypeProto tp;
  tp.mutable_tensor_type()->set_elem_type(static_cast<int32_t>(t));
  return *onnx::Utils::DataTypeUtils::ToType(tp);
}

// Types tried, in order, when an op does not accept `t`: the narrowest that holds every value
// exactly, then wider ones.
std::vector<DType> wider_types(DType t) {
  switch (t) {
    case DType::Int8: case DType::Int16: case DType::UInt8: case DType::UInt16:
      return {DType::Int32, DType::Int64, DType::Float, DType::Double};
    case DType::Int32: return {DType::Int64, DType::Double, DType::Float};
    case DType::UInt32: case DType::UInt64: return {DType::Int64, DType::Double};
    case DType::Int64: return {DType::Double, DType::Float};
    case DType::Bool: return {DType::Int32, DType::Int64, DType::Float};
    case DType::Float16: case DType::BFloat16: return {DType::Float, DType::Double};
    case DType::Double: return {DType::Float};
    case DType::Float: return {DType::Double};
    default: return {};
  }
}

// Element types ONNX Runtime's CPU provider lacks although the schema allows them (measured by
// tests/interop/ort_types_probe.py). A converted model must load there, so these count as illegal.
struct OrtGap {
  const char* op;
  int opset;
  const char* types;
};
const OrtGap kOrtGaps[] = {
#include "onnx/ort_cpu_types.inc"
};

bool ort_lacks(const std::string& op, int64_t opset, DType t) {
  static const auto table = [] {
    std::map<std::pair<std::string, int>, std::set<std::string>> m;
    for (const OrtGap& g : kOrtGaps) {
      std::set<std::string>& s = m[{g.op, g.opset}];
      std::string types = g.types;
      for (size_t at = 0; at < types.size();) {
        size_t sp = types.find(' ', at);
        if (sp == std::string::npos) sp = types.size();
        s.insert(types.substr(at, sp - at));
        at = sp + 1;
      }
    }
    return m;
  }();
  auto it = table.find({op, static_cast<int>(opset)});
  return it != table.end() && it->second.count(std::string(dtype_name(t)));
}

struct Counter {
  int n = 0;
  std::string fresh(const std::string& base) { return base + "_legal" + std::to_string(n++); }
};

// One pass over a graph: rewrites nodes whose input types their schema rejects. Returns how many.
int legalize_graph(Graph& g, const TypeMap& types, int64_t opset, Counter& counter,
                   std::vector<std::string>& changes) {
  int fixed = 0;
  std::vector<Node> out;
  out.reserve(g.nodes.size());
  for (Node& n : g.nodes) {
    for (Attribute& a : n.attributes) {
      if (a.g) fixed += legalize_graph(*a.g, types, opset, counter, changes);
      for (auto& sg : a.graphs)
        if (sg) fixed += legalize_graph(*sg, types, opset, counter, changes);
    }
    const onnx::OpSchema* schema =
        n.domain.empty() || n.domain == "ai.onnx"
            ? onnx::OpSchemaRegistry::Schema(n.op_type, static_cast<int>(opset), "")
            : nullptr;
    if (!schema || schema->inputs().empty()) {
      out.push_back(std::move(n));
      continue;
    }
    const auto& formals = schema->inputs();
    auto allowed_of = [&](const std::string& ts) -> const onnx::DataTypeSet& {
      for (const auto& f : formals)
        if (f.GetTypeStr() == ts) return f.GetTypes();
      for (const auto& f : schema->outputs())
        if (f.GetTypeStr() == ts) return f.GetTypes();
      static const onnx::DataTypeSet none;
      return none;
    };
    // ORT lacks a kernel for input i of type t: for the op, or for that input alone ("Pow.1").
    auto ort_gap = [&](int i, DType t) {
      return ort_lacks(n.op_type, opset, t) || (i > 0 && ort_lacks(n.op_type + "." + std::to_string(i), opset, t));
    };
    // Constraint name -> the type its inputs have (when rejected) and which inputs carry it.
    std::map<std::string, std::pair<DType, std::vector<int>>> bad;
    for (int i = 0; i < n.num_inputs(); ++i) {
      if (!n.has_input(i)) continue;
      auto t = types.find(n.inputs[static_cast<size_t>(i)]);
      if (t == types.end()) continue;
      size_t f = std::min(static_cast<size_t>(i), formals.size() - 1);
      if (static_cast<size_t>(i) >= formals.size() &&
          formals.back().GetOption() != onnx::OpSchema::FormalParameterOption::Variadic)
        continue;
      const std::string& ts = formals[f].GetTypeStr();
      const auto& allowed = formals[f].GetTypes();
      if (allowed.empty()) continue;
      // ORT's gaps concern an op's type parameters; a formal of one fixed type (Where's bool
      // condition, Reshape's int64 shape) has nothing else to become.
      if (allowed.count(onnx::Utils::DataTypeUtils::ToType(type_string(t->second))) &&
          (allowed.size() == 1 || !ort_gap(i, t->second)))
        continue;
      auto& entry = bad[ts];
      entry.first = t->second;
      entry.second.push_back(i);
    }
    if (bad.empty()) {
      out.push_back(std::move(n));
      continue;
    }
    bool ok = true;
    std::map<std::string, DType> chosen;
    for (const auto& [ts, what] : bad) {
      const auto& allowed = allowed_of(ts);
      DType pick = DType::Undefined;
      // A fixed type (Reshape's int64 shape): that one. A type parameter: the first wider type it takes.
      if (allowed.size() == 1) {
        onnx::TypeProto tp = onnx::Utils::DataTypeUtils::ToTypeProto(*allowed.begin());
        if (tp.has_tensor_type()) pick = static_cast<DType>(tp.tensor_type().elem_type());
      }
      for (DType w : wider_types(what.first))
        if (pick == DType::Undefined && allowed.count(onnx::Utils::DataTypeUtils::ToType(type_string(w))) &&
            std::none_of(what.second.begin(), what.second.end(), [&](int i) { return ort_gap(i, w); })) {
          pick = w;
          break;
        }
      if (pick == DType::Undefined) ok = false;
      chosen[ts] = pick;
    }
    if (!ok) {  // nothing legal to compute in: leave it for the checker to report
      out.push_back(std::move(n));
      continue;
    }
    for (const auto& [ts, what] : bad) {
      for (int i : what.second) {
        std::string& in = n.inputs[static_cast<size_t>(i)];
        Node cast;
        cast.op_type = "Cast";
        cast.name = counter.fresh(n.name.empty() ? "cast" : n.name);
        cast.doc_string = n.doc_string;
        cast.inputs = {in};
        cast.outputs = {counter.fresh(in)};
        cast.attributes.push_back(Attribute::make_int("to", static_cast<int64_t>(chosen[ts])));
        in = cast.outputs[0];
        out.push_back(std::move(cast));
      }
    }
    // Outputs of a rewritten constraint go back to the type the rest of the graph expects.
    std::vector<Node> after;
    const auto& oformals = schema->outputs();
    for (size_t k = 0; k < n.outputs.size() && !oformals.empty(); ++k) {
      if (n.outputs[k].empty()) continue;
      const std::string& ts = oformals[std::min(k, oformals.size() - 1)].GetTypeStr();
      auto b = bad.find(ts);
      if (b == bad.end()) continue;
      Node cast;
      cast.op_type = "Cast";
      cast.name = counter.fresh(n.name.empty() ? "cast" : n.name);
      cast.doc_string = n.doc_string;
      cast.outputs = {n.outputs[k]};
      n.outputs[k] = counter.fresh(n.outputs[k]);
      cast.inputs = {n.outputs[k]};
      cast.attributes.push_back(Attribute::make_int("to", static_cast<int64_t>(b->second.first)));
      after.push_back(std::move(cast));
    }
    for (const auto& [ts, what] : bad)
      changes.push_back(n.op_type + " '" + n.name + "': " + std::string(dtype_name(what.first)) + " computed as " +
                        std::string(dtype_name(chosen[ts])) + " (no " + std::string(dtype_name(what.first)) + " " +
                        n.op_type + " at opset " + std::to_string(opset) + " in ONNX or ONNX Runtime)");
    out.push_back(std::move(n));
    for (Node& c : after) out.push_back(std::move(c));
    ++fixed;
  }
  g.nodes = std::move(out);
  return fixed;
}

}  // namespace

std::vector<std::string> legalize_types(Model& model) {
  std::vector<std::string> changes;
  int64_t opset = model.opset("");
  if (opset <= 0) return changes;
  Counter counter;
  // Each round fixes at least the first rejected node whose input types inference knows; types
  // downstream of it become known in the next round.
  for (int round = 0; round < 64; ++round) {
    onnx::ModelProto proto;
    model_to_proto(model, proto);
    try {
      onnx::ShapeInferenceOptions opts{/*check_type=*/false, /*error_mode=*/0, /*enable_data_propagation=*/false};
      onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), opts);
    } catch (const std::exception&) {
      return changes;  // the checker will say what is wrong
    }
    TypeMap types;
    collect_types(proto.graph(), types);
    if (legalize_graph(model.graph, types, opset, counter, changes) == 0) break;
  }
  return changes;
}

}  // namespace t2o
