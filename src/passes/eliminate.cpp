// Removal passes: dead nodes and initializers, Identity/Dropout, and ops that return their input.
// All are exact: the values that remain are the values that were.
#include <algorithm>
#include <climits>

#include "passes/graph_util.h"
#include "passes/internal.h"
#include "passes/op_args.h"

namespace t2o::passes {

namespace {

// Ops of other domains may have effects we cannot see, so only standard ones are removed unread.
bool removable(const Node& n) { return is_onnx(n) || n.domain == "ai.onnx.ml"; }

void sub_reads(const Node& n, std::set<std::string>& r) {
  for (const Attribute& a : n.attributes) {
    if (a.g) outer_reads(*a.g, r);
    for (const auto& g : a.graphs)
      if (g) outer_reads(*g, r);
  }
}

int dead_in(Graph& g, PassContext& ctx) {
  Uses u(g);
  std::unordered_map<std::string, int> reads;
  for (const Node& n : g.nodes)
    for (const auto& o : n.outputs)
      if (!o.empty()) reads[o] = u.count(o);
  int removed_count = 0;
  for (size_t k = g.nodes.size(); k-- > 0;) {
    Node& n = g.nodes[k];
    if (!removable(n) || n.outputs.empty()) continue;
    bool unread = std::all_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& o) { return o.empty() || reads[o] == 0; });
    if (!unread || !ctx.allow(n)) continue;
    for (const auto& in : n.inputs)
      if (!in.empty()) --reads[in];
    std::set<std::string> inner;
    sub_reads(n, inner);
    for (const auto& r : inner) --reads[r];
    remove_node(n);
    ++removed_count;
  }
  drop_removed(g);
  // Initializers nothing reads (those that are also graph inputs are part of the interface).
  Uses after(g);
  std::set<std::string> inputs;
  for (const auto& i : g.inputs) inputs.insert(i.name);
  size_t before = g.initializers.size();
  g.initializers.erase(std::remove_if(g.initializers.begin(), g.initializers.end(),
                                      [&](const Initializer& i) { return !inputs.count(i.name) && after.count(i.name) == 0; }),
                       g.initializers.end());
  removed_count += static_cast<int>(before - g.initializers.size());
  // value_info of names that no longer exist.
  std::set<std::string> names(inputs);
  for (const auto& i : g.initializers) names.insert(i.name);
  for (const Node& n : g.nodes) names.insert(n.outputs.begin(), n.outputs.end());
  g.value_info.erase(std::remove_if(g.value_info.begin(), g.value_info.end(),
                                    [&](const ValueInfo& v) { return !names.count(v.name); }),
                     g.value_info.end());
  return removed_count;
}

// Sweeps a graph, asking `target` for each node what input its output equals ("" when it does
// not); such nodes are bypassed and removed.
int remove_identities(Graph& g, PassContext& ctx, const std::function<std::string(const Node&, const Uses&)>& target) {
  int n = 0;
  auto u = std::make_unique<Uses>(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& node = g.nodes[i];
    if (removed(node) || node.outputs.empty() || node.outputs[0].empty()) continue;
    std::string in = target(node, *u);
    if (in.empty() || in == node.outputs[0]) continue;
    if (!ctx.allow(node)) continue;
    if (!bypass(g, *u, i, node.outputs[0], in)) continue;
    remove_node(g.nodes[i]);
    ++n;
    u = std::make_unique<Uses>(g);
  }
  drop_removed(g);
  return n;
}

bool unused_extra_outputs(const Node& n, const Uses& u) {
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (!n.outputs[k].empty() && u.count(n.outputs[k]) > 0) return false;
  return true;
}

// The input a no-op node returns unchanged, or "".
std::string noop_input(const Node& n, const Uses& u, const Scope& s, PassContext& ctx) {
  if (!is_onnx(n) || n.inputs.empty() || n.inputs[0].empty() || !unused_extra_outputs(n, u)) return {};
  const std::string& x = n.inputs[0];
  const Type* tx = ctx.type(x);
  auto sx = known_shape(tx);
  const std::string& op = n.op_type;
  int64_t opset = ctx.opset();
  if (op == "Cast") {
    if (tx && tx->kind == Type::Kind::Tensor && tx->elem != DType::Undefined && n.attr_int("to", 0) == static_cast<int64_t>(tx->elem))
      return x;
    return {};
  }
  if (op == "Transpose") {
    std::vector<int64_t> perm = n.attr_ints("perm");
    if (perm.empty()) return sx && sx->rank() <= 1 ? x : std::string();
    for (size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != static_cast<int64_t>(i)) return {};
    return x;
  }
  if (op == "Reshape" && n.has_input(1) && sx) {
    const Tensor* st = s.constant(n.inputs[1]);
    if (!st) return {};
    std::vector<int64_t> shape = to_ints(*st);
    if (static_cast<int>(shape.size()) != sx->rank()) return {};
    bool allowzero = n.attr_int("allowzero", 0) != 0;
    int unknown = 0;
    for (size_t i = 0; i < shape.size(); ++i) {
      const Dim& d = sx->dims[i];
      if (shape[i] == 0 && !allowzero) continue;
      if (shape[i] == -1) {
        ++unknown;
        continue;
      }
      if (!d.is_static() || d.value != shape[i]) return {};
    }
    return unknown <= 1 ? x : std::string();
  }
  if (op == "Expand" && n.has_input(1) && sx) {
    const Tensor* st = s.constant(n.inputs[1]);
    if (!st) return {};
    std::vector<int64_t> shape = to_ints(*st);
    if (static_cast<int>(shape.size()) > sx->rank()) return {};
    size_t off = static_cast<size_t>(sx->rank()) - shape.size();
    for (size_t i = 0; i < shape.size(); ++i) {
      const Dim& d = sx->dims[off + i];
      if (shape[i] != 1 && !(d.is_static() && d.value == shape[i])) return {};
    }
    return x;
  }
  if (op == "Squeeze" && sx) {
    IntsArg axes = ints_arg(n, s, "axes", axes_input(op, opset));
    if (!axes.known || axes.present) return {};
    // All size-1 dims are removed: none, when no dim can be 1.
    for (const Dim& d : sx->dims)
      if (!d.is_static() || d.value == 1) return {};
    return x;
  }
  if (op == "Slice" && sx) {
    IntsArg starts = ints_arg(n, s, "starts", opset >= 10 ? 1 : -1), ends = ints_arg(n, s, "ends", opset >= 10 ? 2 : -1);
    IntsArg axes = ints_arg(n, s, "axes", opset >= 10 ? 3 : -1), steps = ints_arg(n, s, "steps", opset >= 10 ? 4 : -1);
    if (!starts.known || !ends.known || !axes.known || !steps.known || starts.v.size() != ends.v.size()) return {};
    for (size_t i = 0; i < starts.v.size(); ++i) {
      int64_t axis = axes.present ? axes.v.at(i) : static_cast<int64_t>(i);
      if (axis < 0) axis += sx->rank();
      if (axis < 0 || axis >= sx->rank()) return {};
      int64_t step = steps.present ? steps.v.at(i) : 1;
      const Dim& d = sx->dims[static_cast<size_t>(axis)];
      bool from_start = starts.v[i] == 0 || (d.is_static() && starts.v[i] <= -d.value);
      bool to_end = ends.v[i] >= INT_MAX || (d.is_static() && ends.v[i] >= d.value);
      if (step != 1 || !from_start || !to_end) return {};
    }
    return x;
  }
  if (op == "Pad") {
    IntsArg pads = ints_arg(n, s, "pads", opset >= 11 ? 1 : -1);
    if (!pads.known || !pads.present || (opset >= 18 && n.has_input(3))) return {};
    return std::all_of(pads.v.begin(), pads.v.end(), [](int64_t p) { return p == 0; }) ? x : std::string();
  }
  if (op == "Tile" && n.has_input(1)) {
    const Tensor* r = s.constant(n.inputs[1]);
    return r && all_equal(*r, 1) ? x : std::string();
  }
  if ((op == "Concat" || op == "Sum" || op == "Max" || op == "Min" || op == "Mean") && n.inputs.size() == 1) return x;
  if (op == "Split" && n.outputs.size() == 1 && (opset < 13 || !n.has_input(1))) return x;
  if (op == "Flatten" && sx && sx->rank() == 2 && n.attr_int("axis", 1) == 1) return x;
  // Arithmetic with a neutral constant that does not broadcast x to a larger shape.
  static const std::map<std::string, std::pair<double, bool>> neutral{
      {"Mul", {1, true}}, {"Add", {0, true}}, {"Div", {1, false}}, {"Sub", {0, false}}, {"Pow", {1, false}}};
  auto it = neutral.find(op);
  if (it == neutral.end() || n.inputs.size() != 2) return {};
  auto try_side = [&](size_t xi) -> std::string {
    const std::string& v = n.inputs[xi];
    const Tensor* c = s.constant(n.inputs[1 - xi]);
    const Type* tv = ctx.type(v);
    if (!c || !all_equal(*c, it->second.first) || !tv || tv->kind != Type::Kind::Tensor) return {};
    if (op != "Pow" && c->dtype() != tv->elem) return {};
    if (c->rank() > 0) {
      auto sv = known_shape(tv);
      if (!sv || sv->rank() < c->rank()) return {};
      if (c->numel() != 1) return {};
    }
    return v;
  };
  std::string r = try_side(0);
  if (r.empty() && it->second.second) r = try_side(1);
  return r;
}

}  // namespace

int eliminate_dead(Model& m, PassContext& ctx) {
  // Dead code in a subgraph can make outer values dead: sweep until nothing changes.
  int total = 0;
  for (int round = 0; round < 8; ++round) {
    int n = for_each_graph(m, [&](Scope& s) { return dead_in(s.graph(), ctx); });
    total += n;
    if (!n) break;
  }
  return total;
}

int eliminate_identity(Model& m, PassContext& ctx) {
  return for_each_graph(m, [&](Scope& s) {
    return remove_identities(s.graph(), ctx, [&](const Node& n, const Uses& u) -> std::string {
      if (!is_onnx(n) || n.inputs.empty()) return {};
      if (n.op_type == "Identity") return n.inputs[0];
      if (n.op_type != "Dropout" || !unused_extra_outputs(n, u)) return {};
      // Dropout is the identity in inference mode: always before opset 12 (from 7), and from 12
      // when training_mode is absent or a constant false.
      if (ctx.opset() < 7) return {};
      if (ctx.opset() >= 12 && n.has_input(2)) {
        const Tensor* t = s.constant(n.inputs[2]);
        if (!t || !all_equal(*t, 0)) return {};
      }
      return n.inputs[0];
    });
  });
}

int eliminate_noop(Model& m, PassContext& ctx) {
  return for_each_graph(m, [&](Scope& s) {
    return remove_identities(s.graph(), ctx, [&](const Node& n, const Uses& u) { return noop_input(n, u, s, ctx); });
  });
}

}  // namespace t2o::passes

namespace t2o {

const char* const kRemovedInputsKey = "torch2onnx.removed_inputs";

std::vector<RemovedInput> remove_unused_inputs(Model& m, const std::vector<std::string>& keep) {
  Graph& g = m.graph;
  passes::Uses u(g);
  std::set<std::string> inits;
  for (const auto& i : g.initializers) inits.insert(i.name);
  std::vector<RemovedInput> removed = removed_inputs(m);
  std::vector<ValueInfo> kept;
  std::vector<RemovedInput> now;
  // Positions count every input the model had before any removal.
  int position = 0;
  auto skip_removed = [&] {
    for (bool again = true; again;) {
      again = false;
      for (const RemovedInput& r : removed)
        if (r.position == position) ++position, again = true;
    }
  };
  for (ValueInfo& in : g.inputs) {
    bool is_init = inits.count(in.name) > 0;
    if (!is_init) skip_removed();
    // Plain tensor inputs of known rank (their dims are recorded: static or symbolic).
    bool known = in.type.kind == Type::Kind::Tensor && in.type.shape &&
                 std::all_of(in.type.shape->dims.begin(), in.type.shape->dims.end(),
                             [](const Dim& d) { return d.is_static() || d.is_symbolic(); });
    bool asked = std::find(keep.begin(), keep.end(), in.name) != keep.end();
    if (!is_init && !asked && known && u.count(in.name) == 0) now.push_back({in, position});
    else kept.push_back(std::move(in));
    if (!is_init) ++position;
  }
  g.inputs = std::move(kept);
  if (now.empty()) return now;
  removed.insert(removed.end(), now.begin(), now.end());
  set_removed_inputs(m, removed);
  return now;
}

void set_removed_inputs(Model& m, const std::vector<RemovedInput>& removed) {
  std::string record;
  for (const RemovedInput& r : removed) {
    std::string dims;
    for (const Dim& d : r.info.type.shape->dims) {
      if (!dims.empty()) dims += ',';
      dims += d.is_static() ? std::to_string(d.value) : "=" + d.symbol;
    }
    record += r.info.name + "\t" + std::string(dtype_name(r.info.type.elem)) + "\t" + dims + "\t" +
              std::to_string(r.position) + "\n";
  }
  auto it = std::find_if(m.metadata_props.begin(), m.metadata_props.end(),
                         [](const auto& p) { return p.first == kRemovedInputsKey; });
  if (record.empty()) {
    if (it != m.metadata_props.end()) m.metadata_props.erase(it);
  } else if (it != m.metadata_props.end()) {
    it->second = record;
  } else {
    m.metadata_props.emplace_back(kRemovedInputsKey, record);
  }
}

std::string unused_input_note(const std::string& name) {
  return "input '" + name + "' is not read by the optimized model (only its fixed shape was, or nothing) and was "
         "removed, as torch.onnx removes such inputs; to keep every input, turn the optimizer off "
         "(--no-optimize, optimize=False)";
}

std::vector<RemovedInput> removed_inputs(const Model& m) {
  std::vector<RemovedInput> r;
  auto fields = [](const std::string& line) {
    std::vector<std::string> f;
    size_t p = 0;
    for (size_t t; (t = line.find('\t', p)) != std::string::npos; p = t + 1) f.push_back(line.substr(p, t - p));
    f.push_back(line.substr(p));
    return f;
  };
  for (const auto& [k, v] : m.metadata_props) {
    if (k != kRemovedInputsKey) continue;
    size_t pos = 0;
    while (pos < v.size()) {
      size_t end = v.find('\n', pos);
      if (end == std::string::npos) end = v.size();
      std::vector<std::string> f = fields(v.substr(pos, end - pos));
      pos = end + 1;
      if (f.size() != 4) continue;
      DType dt = dtype_from_name(f[1]);
      if (dt == DType::Undefined) continue;
      Shape s;
      try {
        for (size_t p = 0; p < f[2].size();) {
          size_t c = f[2].find(',', p);
          if (c == std::string::npos) c = f[2].size();
          std::string d = f[2].substr(p, c - p);
          s.dims.push_back(!d.empty() && d[0] == '=' ? Dim::named(d.substr(1)) : Dim::fixed(std::stoll(d)));
          p = c + 1;
        }
        RemovedInput ri;
        ri.info.name = f[0];
        ri.info.type = Type::tensor(dt, s);
        ri.position = std::stoi(f[3]);
        r.push_back(ri);
      } catch (const std::exception&) {
        continue;  // a damaged record: that input is simply not known
      }
    }
  }
  return r;
}

}  // namespace t2o
