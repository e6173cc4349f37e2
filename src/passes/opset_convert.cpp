// Opset conversion (opset.h): the driver and the Adapt helpers. Ops whose schema did not change
// between the two opsets, or changed only in the types it accepts (the ONNX checker then judges
// the types), need no adapter.
#include <onnx/defs/schema.h>

#include "onnx/legalize.h"
#include "passes/internal.h"
#include "passes/opset.h"
#include "passes/opset_adapt.h"

namespace t2o {

namespace passes {

void drop_attr(Node& n, const char* name) {
  n.attributes.erase(std::remove_if(n.attributes.begin(), n.attributes.end(), [&](const Attribute& a) { return a.name == name; }),
                     n.attributes.end());
}

const Tensor* Adapt::constant(int input) const {
  return n.has_input(input) ? s_.constant(n.inputs[static_cast<size_t>(input)]) : nullptr;
}

int Adapt::rank(const std::string& v) const {
  if (const Tensor* t = s_.constant(v)) return t->rank();
  auto s = known_shape(ctx_.type(v));
  return s ? s->rank() : -1;
}

int64_t Adapt::dim_of(const std::string& v, int64_t axis) const {
  if (const Tensor* t = s_.constant(v)) return axis >= 0 && axis < t->rank() ? t->dim(static_cast<int>(axis)) : -1;
  auto s = known_shape(ctx_.type(v));
  if (!s || axis < 0 || axis >= s->rank()) return -1;
  const Dim& d = s->dims[static_cast<size_t>(axis)];
  return d.is_static() ? d.value : -1;
}

DType Adapt::dtype(const std::string& v) const {
  if (const Tensor* t = s_.constant(v)) return t->dtype();
  const Type* t = ctx_.type(v);
  return t && t->kind == Type::Kind::Tensor ? t->elem : DType::Undefined;
}

int64_t Adapt::axis(int64_t a, int rank_hint) const {
  if (a >= 0 || to >= 11) return a;
  if (rank_hint < 0) fail("a negative axis needs the input's rank, which is not known");
  return a + rank_hint;
}

std::vector<int64_t> Adapt::axes(std::vector<int64_t> a, int rank_hint) const {
  for (int64_t& x : a) x = axis(x, rank_hint);
  return a;
}

std::string Adapt::fresh_value(const std::string& hint) { return ctx_.fresh(n.name + "_" + hint); }

std::string Adapt::add_constant(const Tensor& t, const std::string& hint) {
  std::string name = ctx_.fresh(n.name + "_" + hint);
  add_initializer(g_, name, t);
  return name;
}

std::vector<std::string> Adapt::emit(const std::string& op, std::vector<std::string> ins, std::vector<Attribute> attrs,
                                     int outputs) {
  std::vector<std::string> outs;
  for (int k = 0; k < outputs; ++k) outs.push_back(ctx_.fresh(n.name + "_" + op));
  Node e = make_node(op, std::move(ins), outs, ctx_.fresh(n.name + "/" + op, true), n.doc_string);
  e.attributes = std::move(attrs);
  nodes_.push_back(std::move(e));
  return outs;
}

void Adapt::emit_to(const std::string& op, std::vector<std::string> ins, std::vector<Attribute> attrs,
                    std::vector<std::string> outs) {
  Node e = make_node(op, std::move(ins), std::move(outs), ctx_.fresh(n.name + "/" + op, true), n.doc_string);
  e.attributes = std::move(attrs);
  nodes_.push_back(std::move(e));
}

void Adapt::finish(const std::string& op, std::vector<std::string> ins, std::vector<Attribute> attrs) {
  Node e = make_node(op, std::move(ins), n.outputs, n.name, n.doc_string);
  e.attributes = std::move(attrs);
  nodes_.push_back(std::move(e));
  replaced_ = true;
}

void Adapt::finish_as(const std::string& v) {
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (!n.outputs[k].empty()) fail("it has more outputs than its rewrite");
  Node e = make_node("Identity", {v}, {n.outputs.at(0)}, n.name, n.doc_string);
  nodes_.push_back(std::move(e));
  replaced_ = true;
}

void Adapt::fail(const std::string& why) const {
  throw Error("cannot move " + n.describe() + " from opset " + std::to_string(from) + " to " + std::to_string(to) +
                  ": " + why,
              "re-convert from PyTorch with torch2onnx convert --opset " + std::to_string(to) +
                  ", which emits every opset from 9 to 17 directly",
              kExitUnsupported);
}

namespace {

const std::map<std::string, Adapter>& adapters() {
  static const std::map<std::string, Adapter> t = [] {
    std::map<std::string, Adapter> r;
    register_form_adapters(r);
    register_op_adapters(r);
    return r;
  }();
  return t;
}

int64_t ir_version_for(int64_t opset) {
  if (opset <= 9) return 4;
  if (opset == 10) return 5;
  if (opset == 11) return 6;
  if (opset <= 14) return 7;
  return 8;
}

int convert_graph(Scope& s, PassContext& ctx, int64_t from, int64_t to) {
  Graph& g = s.graph();
  std::vector<Node> nodes;
  int n = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node node = g.nodes[i];
    if (!is_onnx(node)) {
      nodes.push_back(std::move(node));
      continue;
    }
    auto it = adapters().find(node.op_type);
    Adapt a(g, s, ctx, from, to, node);
    if (it != adapters().end()) it->second(a);
    if (a.replaced()) {
      for (Node& e : a.nodes()) nodes.push_back(std::move(e));
    } else {
      nodes.push_back(std::move(node));
    }
    n += a.changed();
  }
  g.nodes = std::move(nodes);
  // Every node must now exist, and not be deprecated, at the target.
  for (const Node& node : g.nodes) {
    if (!is_onnx(node)) continue;
    const auto* schema = onnx::OpSchemaRegistry::Schema(node.op_type, static_cast<int>(to), "");
    Adapt a(g, s, ctx, from, to, const_cast<Node&>(node));
    if (!schema) {
      int first = 0;
      for (int v = static_cast<int>(to) + 1; v <= 17 && !first; ++v)
        if (onnx::OpSchemaRegistry::Schema(node.op_type, v, "")) first = v;
      a.fail(first ? "the op exists only from opset " + std::to_string(first) + ", and it has no rewrite into older ops"
                   : "the op is not in opsets up to 17");
    }
    if (schema->Deprecated()) a.fail("the op is deprecated at opset " + std::to_string(to));
  }
  return n;
}

}  // namespace

}  // namespace passes

OpsetConversion convert_opset(Model& m, int64_t target) {
  OpsetConversion r;
  r.from = m.opset("");
  r.to = target;
  if (r.from < 9 || r.from > 17 || target < 9 || target > 17)
    throw Error("opset conversion covers opsets 9 to 17 (model: " + std::to_string(r.from) + ", target: " +
                    std::to_string(target) + ")",
                {}, kExitUnsupported);
  if (r.from == target) return r;
  PassContext ctx(m);
  r.rewritten = passes::for_each_graph(m, [&](passes::Scope& s) { return passes::convert_graph(s, ctx, r.from, target); });
  for (auto& o : m.opset_import)
    if (o.domain.empty() || o.domain == "ai.onnx") o.version = target;
  m.ir_version = std::max(m.ir_version, passes::ir_version_for(target));
  // Types the op took at the source opset and not at the target (uint8 Add from 14 to 13, ...).
  r.legalized = legalize_types(m);
  // Constants the old forms used and the new ones do not.
  PassContext clean(m);
  passes::eliminate_dead(m, clean);
  return r;
}

}  // namespace t2o
