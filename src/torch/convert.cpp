#include "torch/convert.h"

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>
#include <filesystem>

#include "onnx/legalize.h"
#include "torch/context.h"
#include "torch/custom_op.h"
#include "torch/input_roles.h"
#include "torch/ops/ops.h"
#include "torch/pitfalls.h"
#include "torch/frontend.h"
#include "torch/profile.h"

namespace t2o {

namespace tj = torch::jit;

namespace {

// One graph input after flattening tuple/list arguments depth-first.
struct FlatInput {
  std::string name;
  const InputSpec* spec = nullptr;
  bool number = false;    // an int/float/bool argument given with --input NAME:scalar:DTYPE or --data
  size_t arg_index = 0;   // which forward() argument it belongs to
};

const InputSpec* find_spec(const ConvertOptions& o, const std::string& name) {
  for (const InputSpec& s : o.inputs)
    if (s.name == name) return &s;
  return nullptr;
}

// An argument's default value. (Not an implicit conversion: std::optional<IValue> made from an empty
// c10::optional holds a None IValue.)
std::optional<c10::IValue> default_of(const c10::Argument& a) {
  if (!a.default_value()) return std::nullopt;
  return *a.default_value();
}

// The --input dtype code of a number argument's 0-d input.
const char* number_dtype_code(const c10::TypePtr& t) {
  return t->kind() == c10::TypeKind::IntType ? "i64" : t->kind() == c10::TypeKind::FloatType ? "f64" : "bool";
}

// Builds one argument's example value and its graph-input names.
c10::IValue example_arg(const c10::TypePtr& type, const std::string& name, const ConvertOptions& o,
                        const std::optional<c10::IValue>& dflt, std::vector<FlatInput>& flat,
                        const std::function<at::Tensor(const InputSpec&)>& make) {
  using K = c10::TypeKind;
  if (type->kind() == K::TupleType) {
    std::vector<c10::IValue> elems;
    auto tt = type->expect<c10::TupleType>();
    for (size_t i = 0; i < tt->elements().size(); ++i)
      elems.push_back(example_arg(tt->elements()[i], name + "." + std::to_string(i), o, {}, flat, make));
    return c10::ivalue::Tuple::create(std::move(elems));
  }
  if (type->kind() == K::ListType && type->expect<c10::ListType>()->getElementType()->kind() == K::TensorType) {
    c10::List<at::Tensor> list;
    for (size_t i = 0;; ++i) {
      const InputSpec* s = find_spec(o, name + "." + std::to_string(i));
      if (!s) break;
      flat.push_back({s->name, s});
      list.push_back(make(*s));
    }
    if (list.empty())
      throw Error("argument '" + name + "' is a list of tensors: give its parts with --input " + name +
                      ".0:DIMS --input " + name + ".1:DIMS ...", {}, kExitUsage);
    return list;
  }
  const InputSpec* s = find_spec(o, name);
  if (type->kind() == K::TensorType || (type->kind() == K::OptionalType && s)) {
    if (!s)
      throw Error("no shape for input '" + name + "'", "give it with --input " + name + ":DIMS[:DTYPE], e.g. " +
                  name + ":1x3x224x224", kExitUsage);
    flat.push_back({name, s});
    at::Tensor t = make(*s);
    if (auto q = o.quantized.find(name); q != o.quantized.end()) {
      if (t.scalar_type() != at::kByte && t.scalar_type() != at::kChar && t.scalar_type() != at::kInt)
        throw Error("quantized input '" + name + "' needs its integers as uint8, int8 or int32", {}, kExitUsage);
      t = at::_make_per_tensor_quantized_tensor(t, q->second.first, q->second.second);
    }
    return t;
  }
  if (s && (type->kind() == K::IntType || type->kind() == K::FloatType || type->kind() == K::BoolType)) {
    // A number argument given as an input: a 0-d ONNX input of int64 / double / bool.
    at::Tensor t = make(*s);
    if (t.numel() != 1)
      throw Error("input '" + name + "' is a number (" + type->str() + "): give it as " + name + ":scalar:" +
                      number_dtype_code(type), {}, kExitUsage);
    flat.push_back({name, s, true});
    if (type->kind() == K::IntType) return t.item<int64_t>();
    if (type->kind() == K::FloatType) return t.item<double>();
    return t.item<bool>();
  }
  if (dflt) return *dflt;
  if (type->kind() == K::OptionalType) return c10::IValue();
  throw Error("forward() argument '" + name + "' of type " + type->str() + " has no default",
              "give it as an input: --input " + name + ":scalar:" + number_dtype_code(type) + " (or --data " + name + "=FILE.npy); tensors, tuples/lists of tensors and numbers can be inputs",
              kExitUsage);
}

// Binds the TorchScript graph inputs (already flattened by tuple lowering) to ONNX inputs.
void bind_inputs(tj::Graph& g, const std::vector<c10::IValue>& example, const std::vector<FlatInput>& flat,
                 const ConvertOptions& o, Ctx& ctx, Graph& out) {
  size_t flat_i = 0;
  auto onnx_input = [&](const at::Tensor& t) {
    const FlatInput& f = flat.at(flat_i++);
    Shape shape = Shape::of(t.sizes().vec());
    std::vector<int64_t> dims = t.sizes().vec();
    for (const DynamicSpec& d : o.dynamic)
      if (d.input == f.name)
        for (const auto& [axis, label] : d.axes) {
          int a = axis < 0 ? axis + static_cast<int>(dims.size()) : axis;
          if (a < 0 || a >= static_cast<int>(dims.size()))
            throw Error("--dynamic " + d.input + ": axis " + std::to_string(axis) + " out of range", {}, kExitUsage);
          shape.dims[static_cast<size_t>(a)] = Dim::named(label);
          dims[static_cast<size_t>(a)] = -1;
        }
    out.inputs.push_back({f.name, Type::tensor(f.spec->dtype, shape), {}});
    TV tv = TV::tensor(f.name, f.spec->dtype);
    tv.shape = dims;
    tv.rank_known = true;
    if (t.is_quantized()) {  // the integers, then the scale and zero point (ops/quantized.cpp)
      out.inputs.push_back({f.name + "_scale", Type::tensor(DType::Double, Shape{}), {}});
      out.inputs.push_back({f.name + "_zero_point", Type::tensor(DType::Int64, Shape{}), {}});
      tv.qscale = ctx.b.cast(f.name + "_scale", DType::Float);
      tv.qzero = ctx.b.cast(f.name + "_zero_point", f.spec->dtype);
    }
    return tv;
  };
  size_t arg = 0;  // the forward() argument being bound
  // Whether the next flattened input belongs to the argument being bound (a default value does not).
  auto given = [&] { return flat_i < flat.size() && flat[flat_i].arg_index == arg; };
  std::function<TV(const c10::IValue&)> bind = [&](const c10::IValue& v) -> TV {
    if (v.isTensor()) return given() ? onnx_input(v.toTensor()) : TV::constant(v);
    if ((v.isInt() || v.isDouble() || v.isBool()) && flat_i < flat.size() && flat[flat_i].number &&
        flat[flat_i].arg_index == arg) {
      const FlatInput& f = flat.at(flat_i++);
      DType t = v.isInt() ? DType::Int64 : v.isDouble() ? DType::Double : DType::Bool;
      out.inputs.push_back({f.name, Type::tensor(t, Shape{}), {}});
      TV tv = TV::tensor(f.name, t);
      tv.rank_known = true;
      tv.number = true;
      return tv;
    }
    if (v.isTensorList() && given()) {
      std::vector<TV> items;
      for (const at::Tensor& t : v.toTensorVector()) items.push_back(onnx_input(t));
      return TV::list(items);
    }
    if (v.isTuple()) {
      std::vector<TV> items;
      for (const auto& e : v.toTupleRef().elements()) items.push_back(bind(e));
      return TV::list(items);
    }
    return TV::constant(v);
  };
  // Tuple lowering split tuple arguments into their leaves; match leaves in order.
  std::vector<c10::IValue> leaves;
  std::vector<size_t> leaf_arg;
  size_t top = 0;
  std::function<void(const c10::IValue&)> collect = [&](const c10::IValue& v) {
    if (v.isTuple() && g.inputs().size() != example.size()) {
      for (const auto& e : v.toTupleRef().elements()) collect(e);
    } else {
      leaves.push_back(v);
      leaf_arg.push_back(top);
    }
  };
  for (; top < example.size(); ++top) collect(example[top]);
  if (leaves.size() != g.inputs().size())
    throw Error("internal: " + std::to_string(g.inputs().size()) + " graph inputs for " +
                std::to_string(leaves.size()) + " argument parts");
  for (size_t i = 0; i < leaves.size(); ++i) {
    arg = leaf_arg[i];
    ctx.set(g.inputs()[i], bind(leaves[i]));
  }
}

// The user's example value moved to other sizes along the dynamic axes: cropped when smaller,
// each element repeated when larger, so values stay ones the model accepts (token ids, indices,
// and lengths that must stay sorted).
at::Tensor resized_data(const at::Tensor& t, const Dims& dims) {
  at::Tensor r = t;
  for (int64_t a = 0; a < r.dim() && a < static_cast<int64_t>(dims.size()); ++a) {
    int64_t want = dims[static_cast<size_t>(a)], have = r.size(a);
    if (want == have || have == 0) continue;
    if (want > have) r = r.repeat_interleave((want + have - 1) / have, a);
    r = r.narrow(a, 0, want);
  }
  return r.contiguous();
}

at::Tensor random_input(const InputSpec& s, const Dims& dims) {
  auto opts = at::TensorOptions().dtype(scalar_type_from_dtype(s.dtype));
  if (dtype_is_float(s.dtype)) return at::randn(dims, at::TensorOptions().dtype(at::kFloat)).to(opts);
  if (s.dtype == DType::Bool) return at::randint(0, 2, dims, opts.dtype(at::kLong)).to(at::kBool);
  // Small non-negative ints are safe as indices, token ids and counts.
  return at::randint(0, 4, dims, opts);
}

// The resized profiling runs move every dynamic axis so that dims which follow it show up: one
// larger (2 for 1); doubled, for models that need multiples (strided encoders); and, where an input
// has several dynamic axes, every other axis doubled, each way round, for dims that follow their
// ratio (detectors scale each image to fit a box: proportional sizes all give the same feature maps,
// and a box that binds on the width hides the width until the height is the longer side).
enum class Resize { PlusOne, Doubled, Skewed, SkewedBack };

// Axes that share a label move together (x:1=batch with lengths:0=batch stay equal): which axes a
// skewed run doubles follows the labels, every other one in order of first appearance.
Dims alternate_dims(const InputSpec& s, const ConvertOptions& o, Resize how) {
  std::map<std::string, size_t> label_index;
  for (const DynamicSpec& ds : o.dynamic)
    for (const auto& axis_label : ds.axes) label_index.emplace(axis_label.second, label_index.size());
  Dims d = s.dims;
  for (const DynamicSpec& ds : o.dynamic)
    if (ds.input == s.name) {
      for (const auto& [axis, label] : ds.axes) {
        int a = axis < 0 ? axis + static_cast<int>(d.size()) : axis;
        if (a < 0 || a >= static_cast<int>(d.size())) continue;
        int64_t& v = d[static_cast<size_t>(a)];
        bool odd = label_index.at(label) % 2;
        if (how == Resize::Skewed || how == Resize::SkewedBack) v *= odd == (how == Resize::Skewed) ? 2 : 1;
        else v = how == Resize::Doubled || v == 1 ? 2 * v : v + 1;
      }
    }
  return d;
}

// Whether a TorchScript value's elements reach the model's results, a control-flow decision or an
// in-place write, rather than only its shape, dtype or device (x.size(), x.new_zeros(),
// ones_like(x), y.type_as(x), (x + 2).shape[0]): what torch.onnx keeps an input for.
bool reads_values(const TValue* v, const std::map<const TNode*, int>& constant_ifs,
                  std::map<const TValue*, bool>& memo) {
  static const std::set<std::string> metadata = {
      "aten::size", "aten::dim", "aten::len", "aten::numel", "aten::is_floating_point", "aten::is_complex",
      "prim::shape", "prim::device", "prim::dtype", "prim::layout", "prim::is_cuda", "aten::_shape_as_tensor",
      "aten::zeros_like", "aten::ones_like", "aten::empty_like", "aten::full_like", "aten::rand_like",
      "aten::randn_like", "aten::randint_like", "aten::new_zeros", "aten::new_ones", "aten::new_empty",
      "aten::new_full", "aten::_dim_arange", "aten::__is__", "aten::__isnot__"};
  // The second argument of these is read for its shape or dtype only.
  static const std::set<std::string> metadata_second = {"aten::type_as", "aten::expand_as", "aten::view_as",
                                                        "aten::reshape_as", "aten::to"};
  auto found = memo.find(v);
  if (found != memo.end()) return found->second;
  memo[v] = false;  // graphs are acyclic; a value met again on the way is not a read by itself
  bool live = false;
  for (const torch::jit::Use& u : v->uses()) {
    const TNode* n = u.user;
    std::string kind = n->kind().toQualString();
    if (metadata.count(kind) || (metadata_second.count(kind) && u.offset == 1)) continue;
    // A branch a constant condition did not take is gone from the ONNX model, with all it reads.
    bool untaken = false;
    for (const torch::jit::Block* b = n->owningBlock(); b != nullptr && b->owningNode() != nullptr && !untaken;
         b = b->owningNode()->owningBlock()) {
      auto decided = constant_ifs.find(b->owningNode());
      untaken = decided != constant_ifs.end() && b->owningNode()->blocks()[static_cast<size_t>(decided->second)] != b;
    }
    if (untaken) continue;
    // In-place ops end in one underscore (add_, copy_); dunder ops (__getitem__) are not in place.
    bool in_place = kind.size() > 2 && kind.back() == '_' && kind[kind.size() - 2] != '_';
    if (kind == "prim::Return") {
      // The graph's results; a loop's next iteration; an If's result as far as that is read.
      const TNode* owner = n->owningBlock()->owningNode();
      live = owner == nullptr || owner->kind() == c10::prim::Loop ||
             reads_values(owner->output(u.offset), constant_ifs, memo);
    } else if (kind == "prim::If" && constant_ifs.count(n)) {
      continue;  // its condition was a constant
    } else if (kind == "prim::If" || kind == "prim::Loop" || kind == "prim::RaiseException" || in_place ||
               n->outputs().empty()) {
      live = true;  // a decision, an in-place write or a side effect
    } else {
      live = std::any_of(n->outputs().begin(), n->outputs().end(),
                         [&](const TValue* o) { return reads_values(o, constant_ifs, memo); });
    }
    if (live) break;
  }
  memo[v] = live;
  return live;
}

// The inputs that torch.onnx keeps although their values are never read (ConvertResult::
// keep_inputs). torch.onnx folds the shape of a static-shaped input where the nodes reading that
// shape become constant: an input read by Shape alone (zeros(x.shape), arange(x.size(0))), or by
// nothing, disappears; one whose shape is read together with a run-time value (x.fill_(v):
// Expand(v, Shape(x))) stays, as does a 0-d one read at all.
std::vector<std::string> inputs_torch_onnx_keeps(const Graph& g) {
  std::set<std::string> constant;
  for (const Initializer& i : g.initializers) constant.insert(i.name);
  // Only nodes the outputs depend on count (torch.onnx removes dead code first).
  std::set<std::string> needed;
  for (const ValueInfo& o : g.outputs) needed.insert(o.name);
  std::vector<bool> live(g.nodes.size(), false);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const Node& n = g.nodes[k];
    if (!std::any_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& o) { return needed.count(o) > 0; }))
      continue;
    live[k] = true;
    needed.insert(n.inputs.begin(), n.inputs.end());
    for (const Attribute& a : n.attributes) {
      std::set<std::string> outer;
      if (a.g) a.g->for_each_node([&](const Node& m) { outer.insert(m.inputs.begin(), m.inputs.end()); });
      for (const auto& sg : a.graphs) sg->for_each_node([&](const Node& m) { outer.insert(m.inputs.begin(), m.inputs.end()); });
      needed.insert(outer.begin(), outer.end());
    }
  }
  std::map<std::string, std::vector<const Node*>> readers;
  std::set<std::string> read_in_subgraphs;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (!live[k]) continue;
    const Node& n = g.nodes[k];
    for (const std::string& in : n.inputs) readers[in].push_back(&n);
    for (const Attribute& a : n.attributes) {
      std::vector<const Graph*> subs;
      if (a.g) subs.push_back(a.g.get());
      for (const auto& sg : a.graphs) subs.push_back(sg.get());
      for (const Graph* sg : subs) sg->for_each_node([&](const Node& m) {
        read_in_subgraphs.insert(m.inputs.begin(), m.inputs.end());
      });
    }
  }
  // Values computed from constants and from the shapes of static-shaped inputs.
  std::set<std::string> static_inputs;
  for (const ValueInfo& in : g.inputs)
    if (in.type.shape && in.type.shape->is_static()) static_inputs.insert(in.name);
  auto is_const = [&](const std::string& v) { return v.empty() || constant.count(v) > 0; };
  for (const Node& n : g.nodes) {
    bool has_sub = std::any_of(n.attributes.begin(), n.attributes.end(), [](const Attribute& a) { return a.g || !a.graphs.empty(); });
    bool random = n.op_type.rfind("Random", 0) == 0 || n.op_type == "Multinomial" || n.op_type == "Bernoulli";
    bool c = !has_sub && !random &&
             (n.op_type == "Shape" && n.inputs.size() == 1 ? static_inputs.count(n.inputs[0]) || is_const(n.inputs[0])
                                                           : std::all_of(n.inputs.begin(), n.inputs.end(), is_const));
    if (c) constant.insert(n.outputs.begin(), n.outputs.end());
  }
  std::vector<std::string> keep;
  for (const ValueInfo& in : g.inputs) {
    if (constant.count(in.name)) continue;  // an initializer
    auto r = readers.find(in.name);
    if (read_in_subgraphs.count(in.name)) {
      keep.push_back(in.name);
      continue;
    }
    if (r == readers.end()) continue;  // read by nothing: torch.onnx drops it
    bool scalar = in.type.shape && in.type.shape->dims.empty();
    bool shape_only = std::all_of(r->second.begin(), r->second.end(), [](const Node* n) { return n->op_type == "Shape"; });
    if (scalar || !shape_only) {
      keep.push_back(in.name);
      continue;
    }
    // Its Shape nodes fold away when every node reading them is then constant; a node that also
    // reads a run-time value keeps the Shape, and so the input.
    std::set<std::string> shapes;
    for (const Node* sh : r->second) shapes.insert(sh->outputs.begin(), sh->outputs.end());
    bool meets_runtime = false;
    for (const Node& n : g.nodes)
      if (std::any_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& v) { return shapes.count(v) > 0; }) &&
          !std::all_of(n.inputs.begin(), n.inputs.end(), is_const))
        meets_runtime = true;
    if (meets_runtime) keep.push_back(in.name);
  }
  return keep;
}

// Dict values flatten in insertion order; `keys` gets the key of each output that is a dict value
// with a string key ("out", "aux"), else "".
// `type` is the TorchScript type of v where known: a value that control flow carries as (has,
// tensor) but that TorchScript types as Tensor is never None where it is returned (the None side
// is an early return's placeholder, prim::Uninitialized), so it is output as a plain tensor.
void flatten_outputs(Ctx& ctx, const TV& v, std::vector<TV>& out, std::vector<std::string>& keys,
                     const std::string& key = {}, const c10::TypePtr& type = nullptr) {
  auto item_type = [&](size_t i) -> c10::TypePtr {
    if (!type) return nullptr;
    if (auto t = type->cast<c10::TupleType>()) return i < t->elements().size() ? t->elements()[i] : nullptr;
    if (auto l = type->cast<c10::ListType>()) return l->getElementType();
    if (auto d = type->cast<c10::DictType>()) return d->getValueType();
    return nullptr;
  };
  if (v.ref) {  // a dict: its current state (TV::ref)
    TV s = ctx.current_state(v);
    s.ref = 0;
    return flatten_outputs(ctx, s, out, keys, key, type);
  }
  if (v.kind == TV::Kind::List)
    for (size_t i = 0; i < v.items.size(); ++i)
      flatten_outputs(ctx, v.items[i], out, keys,
                      v.dict && v.keys[i].isString() ? v.keys[i].toStringRef() : std::string(), item_type(i));
  else if (v.is_const() && v.c.isGenericDict())  // a dict the model never changes (an empty `losses`)
    for (const auto& e : v.c.toGenericDict())
      flatten_outputs(ctx, TV::constant(e.value()), out, keys, e.key().isString() ? e.key().toStringRef() : std::string(),
                      item_type(0));
  else if (v.is_const() && (v.c.isList() || v.c.isTuple()))
    for (const auto& e : v.c.isList() ? v.c.toListRef().vec() : v.c.toTupleRef().elements().vec())
      flatten_outputs(ctx, TV::constant(e), out, keys);
  else if (!v.qscale.empty() || (v.is_const() && v.c.isTensor() && v.c.toTensor().is_quantized())) {
    // A quantized tensor: its integers, scale (float) and zero point, as torch.onnx returns them.
    TV q = quantized_tv(ctx, v);
    if (q.qaxis >= 0) throw UnsupportedError("a per-channel quantized model output");
    TV scale = TV::tensor(ctx.b.cast(q.qscale, DType::Float), DType::Float);
    TV zero = TV::tensor(ctx.b.op1("Identity", {q.qzero}), q.dtype);
    for (TV* p : {&scale, &zero}) p->rank_known = true;
    q.qscale.clear();
    for (const TV& part : {q, scale, zero}) {
      out.push_back(part);
      keys.push_back(key);
    }
  } else if (!v.is_none()) {  // ONNX has no None outputs (e.g. absent aux logits); drop them
    out.push_back(v);
    if (!v.has.empty() && type && type->kind() == c10::TypeKind::TensorType) out.back().has.clear();
    keys.push_back(key);
  }
}

void rename_value(Graph& g, const std::string& from, const std::string& to) {
  for (Node& n : g.nodes) {
    for (auto& i : n.inputs)
      if (i == from) i = to;
    for (auto& o : n.outputs)
      if (o == from) o = to;
    for (Attribute& a : n.attributes)
      if (a.g) rename_value(*a.g, from, to);
  }
  for (ValueInfo& o : g.outputs)
    if (o.name == from) o.name = to;
}

void collect_tensors(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) collect_tensors(e, out);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) collect_tensors(e, out);
  }
}

// "image:1x5x32x32 float32, ..." for the example inputs, named as the graph inputs will be.
std::string describe_inputs(const tj::Stack& run, const std::vector<FlatInput>& flat) {
  std::vector<at::Tensor> ts;
  for (const c10::IValue& v : run) collect_tensors(v, ts);
  std::vector<std::string> names;  // of the tensor inputs (numbers are not among ts)
  for (const FlatInput& f : flat)
    if (!f.number) names.push_back(f.name);
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) {
    std::string dims;
    for (int64_t d : ts[i].sizes()) dims += (dims.empty() ? "" : "x") + std::to_string(d);
    s += (i ? ", " : "") + (i < names.size() ? names[i] : "input" + std::to_string(i)) + ":" +
         (dims.empty() ? "scalar" : dims) + " " + std::string(dtype_name(dtype_from_scalar_type(ts[i].scalar_type())));
  }
  return s;
}

// Turns libtorch's interpreter report (two tracebacks, then "SomeError: text") into the error text
// and the innermost line of the user's own code.
std::pair<std::string, std::string> torch_failure(const std::string& report) {
  std::vector<std::string> lines;
  std::stringstream ss(report);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  std::string what = report.substr(0, report.find('\n'));
  size_t err_line = lines.size();
  for (size_t i = lines.size(); i-- > 0;) {
    auto colon = lines[i].find(": ");
    if (colon != std::string::npos && colon > 0 && lines[i][0] != ' ' &&
        lines[i].substr(0, colon).find(' ') == std::string::npos &&
        (lines[i].substr(0, colon).find("Error") != std::string::npos ||
         lines[i].substr(0, colon).find("Exception") != std::string::npos)) {
      err_line = i;
      what = lines[i].substr(colon + 2);
      for (size_t j = i + 1; j < lines.size(); ++j)
        if (!lines[j].empty()) what += " " + lines[j];
      break;
    }
  }
  // The original-code traceback lists `File "PATH", line N, in FN` then the source; keep the last
  // frame outside PyTorch's own package.
  std::string where;
  size_t orig = report.find("original code");
  bool in_orig = orig == std::string::npos;
  for (size_t i = 0; i < err_line; ++i) {
    const std::string& l = lines[i];
    if (l.find("original code") != std::string::npos) in_orig = true;
    if (!in_orig) continue;
    auto f = l.find("File \"");
    if (f == std::string::npos) continue;
    auto q = l.find('"', f + 6);
    if (q == std::string::npos) continue;
    std::string file = l.substr(f + 6, q - f - 6);
    if (file.find("/torch/") != std::string::npos || file.rfind("code/", 0) == 0 || file.rfind("<", 0) == 0)
      continue;
    auto ln = l.find("line ", q);
    std::string line = ln == std::string::npos ? "?" : l.substr(ln + 5, l.find(',', ln) - ln - 5);
    where = std::filesystem::path(file).filename().string() + ":" + line;
    // The frame's source: the line holding the "<--- HERE" marker is preceded by the code line.
    for (size_t j = i + 1; j < err_line && lines[j].find("File \"") == std::string::npos; ++j) {
      if (lines[j].find("<--- HERE") != std::string::npos && j > i + 1) {
        std::string code = lines[j - 1];
        code.erase(0, code.find_first_not_of(' '));
        where += " (" + code + ")";
        break;
      }
    }
  }
  return {what, where};
}

std::string unsupported_report(const Ctx& ctx) {
  size_t total = 0;
  for (const auto& [op, lines] : ctx.unsupported) total += lines.size();
  std::string msg = std::to_string(ctx.unsupported.size()) + " unsupported TorchScript op" +
                    (ctx.unsupported.size() == 1 ? "" : "s") + " (" + std::to_string(total) + " uses):";
  for (const auto& [op, lines] : ctx.unsupported) {
    std::set<std::string> uniq(lines.begin(), lines.end());
    uniq.erase("");
    msg += "\n  " + op + " x" + std::to_string(lines.size());
    if (!uniq.empty()) {
      msg += " at ";
      size_t k = 0;
      for (const auto& l : uniq) {
        if (k == 6) {
          msg += ", ...";
          break;
        }
        msg += (k++ ? ", " : "") + l;
      }
    }
  }
  return msg;
}

at::Tensor example_value(const ConvertOptions& o, const InputSpec& s, const Dims& dims) {
  auto it = o.data.find(s.name);
  if (it == o.data.end()) return random_input(s, dims);
  return resized_data(tensor_to_torch(it->second), dims);
}

// Inputs given only by --data take their dims and dtype from the value.
ConvertOptions with_data_specs(const ConvertOptions& opts) {
  ConvertOptions o = opts;
  for (const auto& entry : opts.data) {
    const std::string& name = entry.first;
    const auto& t = entry.second;
    auto s = std::find_if(o.inputs.begin(), o.inputs.end(), [&](const InputSpec& i) { return i.name == name; });
    if (s == o.inputs.end()) {
      o.inputs.push_back({name, t.dims(), t.dtype()});
    } else if (s->dims != t.dims() || s->dtype != t.dtype()) {
      throw Error("--data " + name + " holds " + std::string(dtype_name(t.dtype())) + "[" + dims_to_string(t.dims()) +
                      "] but --input gives " + std::string(dtype_name(s->dtype)) + "[" + dims_to_string(s->dims) + "]",
                  "give one of them, or make them agree", kExitUsage);
    }
  }
  return o;
}

// Ops whose output sizes follow the values of their inputs (how many elements are nonzero, which
// boxes survive NMS). Profiling on one set of values sees one count and would fix it; a run on
// other values of the same sizes shows it varies.
bool has_value_dependent_sizes(tj::Block* b, const Profile& p) {
  static const std::set<std::string> kinds{
      "aten::nonzero",        "aten::nonzero_numpy", "aten::argwhere",  "aten::masked_select",
      "aten::unique",         "aten::_unique",       "aten::_unique2",  "aten::unique_dim",
      "aten::unique_consecutive", "torchvision::nms", "aten::bincount", "aten::repeat_interleave"};
  for (tj::Node* n : b->nodes()) {
    std::string k = n->kind().toQualString();
    if (kinds.count(k) || (k == "aten::where" && n->inputs().size() == 1)) return true;
    if (k == "aten::index" && n->inputs().size() == 2)  // a boolean mask among the indices
      if (const Observed* o = p.get(n->input(1)))
        for (const Observed& e : o->elems)
          if (e.kind == Observed::Kind::Tensor && (e.dtype == DType::Bool || e.dtype == DType::UInt8)) return true;
    for (tj::Block* sub : n->blocks())
      if (has_value_dependent_sizes(sub, p)) return true;
  }
  return false;
}

// The same inputs with other values of the same sizes and types: floats drawn with each tensor's
// mean and spread, integers within each tensor's range, booleans with its share of trues.
c10::IValue other_values(const c10::IValue& v) {
  if (v.isTensor()) {
    at::Tensor t = v.toTensor();
    if (t.numel() == 0) return t;
    if (t.scalar_type() == at::kBool) {
      double share = t.to(at::kDouble).mean().item<double>();
      return at::rand(t.sizes(), at::TensorOptions().dtype(at::kDouble)) < share;
    }
    if (at::isFloatingType(t.scalar_type())) {
      at::Tensor d = t.to(at::kDouble);
      at::Tensor finite = d.masked_select(at::isfinite(d));
      if (finite.numel() == 0) return t;
      double mean = finite.mean().item<double>();
      double sd = finite.numel() > 1 ? finite.std().item<double>() : 0.0;
      if (!(sd > 0)) return t;
      return (at::randn(t.sizes(), at::TensorOptions().dtype(at::kDouble)) * sd + mean).to(t.scalar_type());
    }
    if (at::isIntegralType(t.scalar_type(), false)) {
      int64_t lo = t.min().item<int64_t>(), hi = t.max().item<int64_t>();
      if (lo == hi) return t;
      return at::randint(lo, hi + 1, t.sizes(), at::TensorOptions().dtype(t.scalar_type()));
    }
    return t;
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(other_values(t).toTensor());
    return out;
  }
  if (v.isList()) {
    c10::impl::GenericList out(v.toList().elementType());
    for (const c10::IValue& e : v.toList()) out.push_back(other_values(e));
    return out;
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> items;
    for (const c10::IValue& e : v.toTupleRef().elements()) items.push_back(other_values(e));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  if (v.isGenericDict()) {
    auto d = v.toGenericDict();
    c10::impl::GenericDict out(d.keyType(), d.valueType());
    for (const auto& e : d) out.insert(e.key(), other_values(e.value()));
    return out;
  }
  return v;
}

}  // namespace

ConvertResult convert_torchscript(const std::string& pt_path, const ConvertOptions& given) {
  if (given.opset < 9 || given.opset > 17)
    throw Error("opset " + std::to_string(given.opset) + " is not supported", "choose an opset from 9 to 17",
                kExitUsage);
  const ConvertOptions opts = with_data_specs(given);
  ConvertResult result;
  auto warn = [&](const std::string& w) {
    result.warnings.push_back(w);
    if (opts.warn) opts.warn(w);
  };
  register_custom_ops(opts.custom_ops, opts.plugins, opts.warn);
  install_cpu_fallbacks();
  auto progress = [&](const std::string& s) {
    if (opts.progress) opts.progress(s);
  };
  progress("loading " + pt_path);
  PreparedGraph prep = load_and_prepare(pt_path, warn, opts.weights, opts.training);
  auto& g = *prep.graph;

  // Example inputs for the profiling runs: one at the given sizes, one with dynamic axes moved.
  // Random values (inputs without --data) follow what each input feeds (input_roles.h).
  const std::map<std::string, InputRole> roles = input_roles(g);
  auto value_for = [&](const InputSpec& s, const Dims& dims, const std::function<std::optional<Dims>(const std::string&)>& dims_of) {
    auto r = roles.find(s.name);
    if (r != roles.end() && !opts.data.count(s.name))
      if (auto v = role_value(r->second, dims, scalar_type_from_dtype(s.dtype), dims_of)) return *v;
    return example_value(opts, s, dims);
  };
  auto given_dims = [&](const std::string& name) -> std::optional<Dims> {
    if (const InputSpec* sp = find_spec(opts, name)) return sp->dims;
    return std::nullopt;
  };
  at::manual_seed(0);
  std::vector<FlatInput> flat;
  tj::Stack run1;
  for (const auto& arg : prep.arguments) {
    size_t before = flat.size();
    run1.push_back(example_arg(arg.type(), arg.name(), opts, default_of(arg), flat,
                               [&](const InputSpec& s) { return value_for(s, s.dims, given_dims); }));
    for (size_t k = before; k < flat.size(); ++k) flat[k].arg_index = run1.size() - 1;
  }
  for (const InputSpec& s : opts.inputs) {
    bool used = std::any_of(flat.begin(), flat.end(), [&](const FlatInput& f) { return f.name == s.name; });
    if (!used) {
      std::string names;
      for (const auto& a : prep.arguments) names += (names.empty() ? "" : ", ") + a.name();
      throw Error("--input " + s.name + " does not name a forward() argument", "arguments: " + names, kExitUsage);
    }
  }
  // Profiling runs the graph on the example inputs. Inputs that do not fit the model get PyTorch's
  // own message and the user's source line. With --dynamic a second run moves the dynamic axes.
  // Inputs whose values were random: a model that needs particular values (lengths that match
  // another input, sorted ids, in-range indices) wants them given with --data.
  auto random_note = [&](const std::vector<FlatInput>& fl) {
    std::string list;
    for (const FlatInput& f : fl) {
      if (opts.data.count(f.name)) continue;
      auto r = roles.find(f.name);
      list += (list.empty() ? "" : ", ") + f.name + (r != roles.end() ? " (random " + r->second.what() + ")" : "");
    }
    if (list.empty()) return std::string();
    return std::string("; the values of ") + list + " were random: if the model needs particular values, give "
           "real ones with --data NAME=FILE.npy";
  };
  Profile profile;
  int profile_runs = 0;
  auto profile_run = [&](const tj::Stack& run, const std::vector<FlatInput>& fl, bool second) {
    progress("learning shapes: " + std::string(second ? "run " + std::to_string(profile_runs + 1) + " (other sizes or values)"
                                                       : "run 1 (the example inputs)"));
    ++profile_runs;
    try {
      return profile.run(prep.graph, {run});
    } catch (const std::exception& e) {
      auto [what, where] = torch_failure(e.what());
      throw Error("the model fails on the " + std::string(second ? "resized " : "") + "example inputs (" +
                      describe_inputs(run, fl) + ")" + (where.empty() ? "" : " at " + where) + ": " + what,
                  second ? "each --dynamic axis is tried one larger, doubled, and (with several axes) doubled while "
                           "the next one stays, to learn which dims follow it; "
                           "mark only axes the model accepts at other sizes" + random_note(fl)
                         : "give each input the shape and dtype forward() expects: --input NAME:DIMS[:DTYPE]" +
                               random_note(fl),
                  kExitUsage);
    }
  };
  std::vector<c10::IValue> run1_outputs = profile_run(run1, flat, false);
  // Every resized run: one larger alone misses dims that halving layers round back to the same size
  // (UNet skips at 100 and 101 wide are both 50, 25, 12), doubled alone misses parity-dependent ones,
  // both miss dims that follow a ratio. A failed run (a model that wants square or proportional
  // inputs) leaves no observations behind; one success is enough.
  if (!opts.dynamic.empty()) {
    std::optional<Error> failure;
    bool any = false;
    std::set<std::string> moved;  // labels that some successful resized run changed
    auto resized_runs = [&](const ConvertOptions& o, std::vector<Resize> hows) {
      for (Resize how : hows) {
        std::vector<FlatInput> flat2;
        tj::Stack run2;
        at::manual_seed(1);
        for (const auto& arg : prep.arguments)
          run2.push_back(example_arg(arg.type(), arg.name(), o, default_of(arg), flat2, [&](const InputSpec& s) {
            return value_for(s, alternate_dims(s, o, how), [&](const std::string& name) -> std::optional<Dims> {
              if (const InputSpec* sp = find_spec(o, name)) return alternate_dims(*sp, o, how);
              return std::nullopt;
            });
          }));
        try {
          profile_run(run2, flat2, true);
          any = true;
          for (const DynamicSpec& ds : opts.dynamic) {
            const InputSpec* s = find_spec(opts, ds.input);
            const InputSpec* moved_spec = find_spec(o, ds.input);
            if (!s || !moved_spec) continue;
            Dims d2 = alternate_dims(*moved_spec, o, how);
            for (const auto& [axis, label] : ds.axes) {
              int a = axis < 0 ? axis + static_cast<int>(s->dims.size()) : axis;
              if (a >= 0 && a < static_cast<int>(s->dims.size()) && d2[static_cast<size_t>(a)] != s->dims[static_cast<size_t>(a)])
                moved.insert(label);
            }
          }
        } catch (const Error& e) {
          if (!failure) failure = e;
        }
      }
    };
    std::set<std::string> labels;
    for (const DynamicSpec& ds : opts.dynamic)
      for (const auto& axis_label : ds.axes) labels.insert(axis_label.second);
    bool several = labels.size() > 1;
    if (several) resized_runs(opts, {Resize::PlusOne, Resize::Doubled, Resize::Skewed, Resize::SkewedBack});
    else resized_runs(opts, {Resize::PlusOne, Resize::Doubled});
    if (!any && several) {
      // Axes under different labels that must stay equal (an RNN's input batch and its h0 batch,
      // labelled apart as torch.onnx's list form does): axes of equal size move together.
      ConvertOptions same = opts;
      for (DynamicSpec& ds : same.dynamic)
        if (const InputSpec* s = find_spec(opts, ds.input))
          for (auto& [axis, label] : ds.axes) {
            int a = axis < 0 ? axis + static_cast<int>(s->dims.size()) : axis;
            if (a >= 0 && a < static_cast<int>(s->dims.size()))
              label = "\x01size" + std::to_string(s->dims[static_cast<size_t>(a)]);
          }
      resized_runs(same, {Resize::PlusOne, Resize::Doubled});
    }
    if (any && failure) {
      // A run that moved other axes worked, none that moved these: the model fails when they change
      // (a size traced as a constant, such as a grouped conv's groups from the batch).
      std::string list;
      for (const std::string& l : labels)
        if (!moved.count(l)) list += (list.empty() ? "" : ", ") + l;
      if (!list.empty())
        warn("the model fails when the --dynamic axes " + list + " change size (" + std::string(failure->what()) +
             "); they were learned at their example sizes, so a size the model computes from them may be fixed in "
             "the ONNX model: check the sizes you will use with 'torch2onnx verify --samples N' (or --data)");
    }
    if (!any) {
      // Some axes cannot change at all (channels marked dynamic with the rest, as torch.onnx's
      // list form invites): each group of equal-sized axes is tried alone, the others kept; the
      // groups that may change are learned, the others stay the example's size.
      std::map<int64_t, std::set<int>> positions;  // size -> the axis positions of that size
      for (const DynamicSpec& ds : opts.dynamic)
        if (const InputSpec* s = find_spec(opts, ds.input))
          for (const auto& [axis, label] : ds.axes) {
            int a = axis < 0 ? axis + static_cast<int>(s->dims.size()) : axis;
            if (a >= 0 && a < static_cast<int>(s->dims.size())) positions[s->dims[static_cast<size_t>(a)]].insert(a);
          }
      // A group that fails is split by axis position: a batch of 2 and a 2x2 feature map of the
      // same size need not move together (the feature map alone may change, the batch not).
      std::vector<std::string> fixed;
      auto try_group = [&](int64_t size, std::optional<int> only_axis) {
        ConvertOptions one = opts;
        for (DynamicSpec& ds : one.dynamic) {
          std::map<int, std::string> keep;
          if (const InputSpec* s = find_spec(opts, ds.input))
            for (const auto& [axis, label] : ds.axes) {
              int a = axis < 0 ? axis + static_cast<int>(s->dims.size()) : axis;
              if (a >= 0 && a < static_cast<int>(s->dims.size()) && s->dims[static_cast<size_t>(a)] == size &&
                  (!only_axis || *only_axis == a))
                keep[axis] = "\x01size" + std::to_string(size);
            }
          ds.axes = keep;
        }
        bool before = any;
        any = false;
        resized_runs(one, {Resize::PlusOne, Resize::Doubled});
        bool ok = any;
        any = any || before;
        return ok;
      };
      for (const auto& [size, at] : positions) {
        if (try_group(size, std::nullopt)) continue;
        if (at.size() < 2) {
          fixed.push_back(std::to_string(size));
          continue;
        }
        for (int a : at)
          if (!try_group(size, a)) fixed.push_back(std::to_string(size) + " (axis " + std::to_string(a) + ")");
      }
      if (any && !fixed.empty()) {
        std::string list;
        for (const std::string& f : fixed) list += (list.empty() ? "" : ", ") + f;
        warn("the model fails when the --dynamic axes of size " + list +
             " change size; those axes were learned at their example sizes (sizes the model computes from them "
             "stay fixed), the other dynamic axes at several sizes");
      }
    }
    // No resized run works (axes whose sizes must keep a relation the resizing breaks, such as
    // repeats of length 1 or of the input's length): the dims are learned from the example inputs
    // alone. The dynamic axes stay symbolic and the shape-generic converters compute sizes at run
    // time, but a size read as a constant would be fixed: say so, and how to check.
    if (!any)
      warn("the model fails at other sizes along the --dynamic axes (" + std::string(failure->what()) +
           "); shapes were learned from the example inputs alone, so a size the model computes may be fixed in "
           "the ONNX model: check the sizes you will use with 'torch2onnx verify --samples N' (or --data)");
  }

  // Sizes that follow values: one more run on other values of the same sizes (a model that wants
  // particular values fails it and leaves no observations).
  if (has_value_dependent_sizes(g.block(), profile)) {
    at::manual_seed(2);
    tj::Stack run3;
    for (const c10::IValue& v : run1) run3.push_back(other_values(v));
    try {
      profile_run(run3, flat, true);
    } catch (const Error&) {
    }
  }
  // Branches no run took: observed by a run forced into them, for ranks and dtypes only.
  for (int round = 0; round < 2; ++round)
    if (!profile.observe_untaken_branches(prep.graph, run1)) break;

  Model& model = result.model;
  model.producer_name = "torch2onnx";
  model.producer_version = "0.1.0";
  model.opset_import = {{"", opts.opset}};
  static const int ir_for_opset[] = {4, 5, 6, 7, 7, 7, 8, 8, 8};  // opsets 9..17
  model.ir_version = ir_for_opset[opts.opset - 9];
  model.graph.name = "main_graph";
  Builder b(model, opts.opset);
  Ctx ctx(b, profile);
  ctx.warn = warn;
  ctx.training = opts.training;
  bind_inputs(g, run1, flat, opts, ctx, model.graph);
  progress("converting to ONNX");
  ctx.convert_block(g.block());
  add_custom_domains(model);

  if (!ctx.unsupported.empty() || !ctx.opset_errors.empty()) {
    std::string msg, hint;
    if (!ctx.unsupported.empty()) {
      msg = unsupported_report(ctx);
      hint = "these ops have no ONNX converter yet; rewrite them in the model or report them";
    }
    if (!ctx.opset_errors.empty()) {
      if (!msg.empty()) msg += "\n";
      msg += "opset " + std::to_string(opts.opset) + " is too old for:";
      std::set<std::string> seen;
      int need = opts.opset + 1;
      for (const auto& e : ctx.opset_errors) {
        if (!seen.insert(e).second) continue;
        msg += "\n  " + e;
        auto k = e.rfind(">= ");
        if (k != std::string::npos) need = std::max(need, std::atoi(e.c_str() + k + 3));
      }
      if (hint.empty()) hint = "convert with --opset " + std::to_string(need) + " or newer";
    }
    throw Error(msg, hint, kExitUnsupported);
  }

  std::vector<TV> outs;
  std::vector<std::string> keys;
  for (const TValue* v : g.outputs()) flatten_outputs(ctx, ctx.get(v), outs, keys, {}, v->type());
  // Fewer names than outputs name the first ones (as torch.onnx's output_names); more is an error.
  if (opts.output_names.size() > outs.size())
    throw Error("--output-names gives " + std::to_string(opts.output_names.size()) + " names but the model has " +
                std::to_string(outs.size()) + " outputs", {}, kExitUsage);
  std::set<std::string> taken;
  std::map<std::string, std::string> renamed;
  for (const auto& i : model.graph.inputs) taken.insert(i.name);
  for (const auto& i : model.graph.initializers) taken.insert(i.name);
  // A dynamic output dim takes the label of the dynamic input dim whose size it had in the first
  // run (e.g. `batch`), when exactly one label had that size; otherwise NAME_dimK.
  std::map<int64_t, std::set<std::string>> label_of_size;
  for (const DynamicSpec& ds : opts.dynamic)
    for (const InputSpec& s : opts.inputs)
      if (s.name == ds.input)
        for (const auto& [axis, label] : ds.axes) {
          int a = axis < 0 ? axis + static_cast<int>(s.dims.size()) : axis;
          if (a >= 0 && a < static_cast<int>(s.dims.size())) label_of_size[s.dims[static_cast<size_t>(a)]].insert(label);
        }
  std::vector<std::vector<int64_t>> out_sizes;
  std::function<void(const c10::IValue&)> sizes_of = [&](const c10::IValue& v) {
    if (v.isTensor()) out_sizes.push_back(v.toTensor().sizes().vec());
    else if (v.isTuple()) for (const auto& e : v.toTupleRef().elements()) sizes_of(e);
    else if (v.isList()) for (const auto& e : v.toListRef()) sizes_of(e);
    else if (v.isGenericDict()) for (const auto& e : v.toGenericDict()) sizes_of(e.value());
    else if (!v.isNone()) out_sizes.push_back({});
  };
  for (const auto& v : run1_outputs) sizes_of(v);
  auto out_label = [&](size_t k, size_t d, const std::string& name) {
    if (out_sizes.size() == outs.size() && d < out_sizes[k].size()) {
      auto it = label_of_size.find(out_sizes[k][d]);
      if (it != label_of_size.end() && it->second.size() == 1) return *it->second.begin();
    }
    return name + "_dim" + std::to_string(d);
  };
  b.set_origin("", "output");
  // Dict values are named by their keys when those name each output once and clash with nothing.
  bool by_key = std::set<std::string>(keys.begin(), keys.end()).size() == keys.size() &&
                std::none_of(keys.begin(), keys.end(), [&](const std::string& k) {
                  return k.empty() || taken.count(k);
                });
  for (size_t k = 0; k < outs.size(); ++k) {
    std::string name = k < opts.output_names.size() ? opts.output_names[k]
                       : by_key                   ? keys[k]
                       : outs.size() == 1         ? "output"
                                                  : "output." + std::to_string(k);
    if (k >= opts.output_names.size())
      while (std::find(opts.output_names.begin(), opts.output_names.end(), name) != opts.output_names.end()) name += "_";
    TV& v = outs[k];
    DType dt = ctx.dtype_of(v);
    if (dt == DType::Complex64 || dt == DType::Complex128)
      throw Error("model output " + std::to_string(k) + " is a complex tensor, which ONNX has no type for",
                  "return torch.view_as_real(x) (real and imaginary parts in a last dim of 2), or x.abs()",
                  kExitUnsupported);
    std::string src;
    bool optional = !v.has.empty();
    if (optional) {
      // An Optional[Tensor] result that may be None: an ONNX optional (opset 15).
      b.require(15, "an Optional tensor model output (ONNX optional type)");
      Type inner = Type::tensor(dt);
      auto branch = [&](bool some) {
        auto g = std::make_shared<Graph>();
        g->name = b.fresh(some ? "some" : "none");
        b.push_graph(g.get());
        std::vector<Attribute> attrs;
        if (!some) {
          Attribute a;
          a.name = "type";
          a.type = AttrType::TypeProto;
          a.tp = inner;
          attrs.push_back(a);
        }
        std::string o = b.op1("Optional", some ? std::vector<std::string>{v.name} : std::vector<std::string>{}, attrs);
        b.pop_graph();
        Type ot;
        ot.kind = Type::Kind::Optional;
        ot.inner = std::make_shared<Type>(inner);
        g->outputs.push_back({o, ot, {}});
        return g;
      };
      src = b.op1("If", {v.has}, {Attribute::make_graph("then_branch", branch(true)),
                                  Attribute::make_graph("else_branch", branch(false))});
    } else if (v.kind == TV::Kind::Tensor && v.sequence) {
      // A list whose length is only known at run time (built in a loop): an ONNX sequence output,
      // as torch.onnx returns a scripted List[Tensor].
      src = v.name;
    } else {
      src = ctx.tensor(v);
    }
    if (renamed.count(src)) src = renamed[src];
    bool produced = std::any_of(model.graph.nodes.begin(), model.graph.nodes.end(), [&](const Node& n) {
      return std::find(n.outputs.begin(), n.outputs.end(), src) != n.outputs.end();
    });
    if (produced && !taken.count(src)) {
      rename_value(model.graph, src, name);
      renamed[src] = name;
    } else {
      std::string id = b.op1("Identity", {src});
      rename_value(model.graph, id, name);
    }
    taken.insert(name);
    std::optional<Shape> shape;
    if (v.kind == TV::Kind::Const && v.c.isTensor()) shape = Shape::of(v.c.toTensor().sizes().vec());
    else if (v.kind == TV::Kind::Const && (v.c.isInt() || v.c.isDouble() || v.c.isBool())) shape = Shape{};
    else if (v.rank_known) {
      Shape s;
      for (size_t d = 0; d < v.shape.size(); ++d)
        s.dims.push_back(v.shape[d] >= 0 ? Dim::fixed(v.shape[d]) : Dim::named(out_label(k, d, name)));
      shape = s;
    } else if (v.rank_seen >= 0) {
      // A rank that depends on values (squeeze of dims that are 1 only sometimes): ONNX wants a
      // shape on every model output, so the first run's rank with no dim known.
      shape = Shape{std::vector<Dim>(static_cast<size_t>(v.rank_seen))};
    }
    Type ty = Type::tensor(dt, shape);
    if (v.kind == TV::Kind::Tensor && v.sequence) {
      Type st;
      st.kind = Type::Kind::Sequence;
      st.inner = std::make_shared<Type>(Type::tensor(dt));
      ty = st;
    } else if (optional) {
      Type ot;
      ot.kind = Type::Kind::Optional;
      ot.inner = std::make_shared<Type>(Type::tensor(dt));
      ty = ot;
    }
    model.graph.outputs.push_back({name, ty, {}});
  }
  model.doc_string = "converted from " + pt_path;
  result.notes = prep.notes;
  for (std::string& n : legalize_types(model)) result.notes.push_back(std::move(n));
  // Top-level values only: values inside If/Loop bodies live in ONNX subgraphs.
  auto link = [&](const TValue* v, std::string kind, std::string src) {
    auto it = ctx.values().find(v);
    if (it == ctx.values().end() || it->second.kind != TV::Kind::Tensor || it->second.name.empty()) return;
    std::string name = renamed.count(it->second.name) ? renamed[it->second.name] : it->second.name;
    result.links.push_back({name, v->debugName(), std::move(kind), std::move(src)});
  };
  for (const TValue* v : g.inputs()) link(v, "input", "");
  for (const TNode* n : g.nodes())
    for (const TValue* v : n->outputs()) link(v, n->kind().toQualString(), Ctx::source_of(n));
  result.keep_inputs = inputs_torch_onnx_keeps(model.graph);
  // An input the TorchScript graph reads for its values stays, even where conversion found the
  // result without it (len() of a list of its slices): torch.onnx keeps such inputs, and callers
  // feed a model the inputs its forward() takes.
  std::map<const TValue*, bool> value_reads;
  for (const TValue* v : g.inputs()) {
    auto it = ctx.values().find(v);
    if (it == ctx.values().end() || it->second.kind != TV::Kind::Tensor || it->second.name.empty()) continue;
    std::string name = renamed.count(it->second.name) ? renamed[it->second.name] : it->second.name;
    if (reads_values(v, ctx.constant_ifs, value_reads) &&
        std::find(result.keep_inputs.begin(), result.keep_inputs.end(), name) == result.keep_inputs.end())
      result.keep_inputs.push_back(name);
  }
  progress("");
  return result;
}

std::vector<std::string> supported_torch_ops() {
  std::vector<std::string> r;
  for (const auto& [k, v] : op_table()) r.push_back(k);
  std::sort(r.begin(), r.end());
  return r;
}

}  // namespace t2o
