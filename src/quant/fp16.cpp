// fp16 conversion (quant.h): the ops that compute well in float16 run in it, the rest stays
// float32, and Casts join the two (one per value and direction, shared by its readers).
//
// Which nodes run in float16: "anchors" (products with weights: Conv, MatMul, Gemm, Einsum, and
// Gather from an embedding table) always, when their data is float32; "followers" (elementwise
// ops, activations, pooling, data movement) when one of their float inputs is float16 already, or
// when they compute from constants only and every reader takes the result in float16. A follower
// between two float32 ops so stays float32 instead of adding a Cast pair around itself, while the
// chains after an anchor (bias Add, Relu, pooling, Reshape) stay in float16.
//
// Names: an intermediate value keeps its name for its float32 version; its float16 version gets a
// fresh name. Only what changes type keeps its name: weights read by float16 nodes alone (so tools
// that look weights up by name still find them) and, without keep_io_float32, the graph's float
// inputs and outputs.
#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

#include "passes/graph_util.h"
#include "passes/passes.h"
#include "quant/internal.h"

namespace t2o::quant {

namespace {

using passes::make_node;

enum class Role { Anchor, Follower };

// An op that may run in float16. Its float inputs and outputs all share one type parameter T,
// except the listed slots, which by the ONNX spec are integer or bool (indices, shapes, axes,
// pads, conditions), never float: so no float32 input of another meaning (Resize's scales,
// Dropout's ratio) can be turned into float16.
struct OpRule {
  Role role;
  int64_t since;                   // first opset where the signature below holds
  std::vector<int> other_inputs;   // slots that are not T
  std::vector<int> other_outputs;
  OpRule(Role r, int64_t s = 1, std::vector<int> in = {}, std::vector<int> out = {})
      : role(r), since(s), other_inputs(std::move(in)), other_outputs(std::move(out)) {}
};

const std::unordered_map<std::string, OpRule>& op_rules() {
  using R = Role;
  static const std::unordered_map<std::string, OpRule> rules{
      {"Conv", {R::Anchor}},
      {"ConvTranspose", {R::Anchor}},
      {"MatMul", {R::Anchor}},
      {"Gemm", {R::Anchor}},
      {"Einsum", {R::Anchor, 12}},
      {"Add", {R::Follower}},
      {"Sub", {R::Follower}},
      {"Mul", {R::Follower}},
      {"Div", {R::Follower}},
      {"Relu", {R::Follower}},
      {"LeakyRelu", {R::Follower}},
      {"PRelu", {R::Follower}},
      {"Sigmoid", {R::Follower}},
      {"HardSigmoid", {R::Follower}},
      {"HardSwish", {R::Follower, 14}},
      {"Tanh", {R::Follower}},
      {"Erf", {R::Follower, 9}},
      {"Elu", {R::Follower}},
      {"Selu", {R::Follower}},
      {"Softplus", {R::Follower}},
      {"Neg", {R::Follower}},
      {"Abs", {R::Follower}},
      // Before opset 11 min and max are float attributes, which the kernel applies in T.
      {"Clip", {R::Follower}},
      {"MaxPool", {R::Follower, 1, {}, {1}}},  // output 1: int64 indices
      {"AveragePool", {R::Follower}},
      {"GlobalAveragePool", {R::Follower}},
      {"GlobalMaxPool", {R::Follower}},
      // Inference form only (one output; checked below); scale, bias, mean and var become float16.
      {"BatchNormalization", {R::Follower, 7}},
      {"Concat", {R::Follower}},
      {"Reshape", {R::Follower, 1, {1}}},
      {"Transpose", {R::Follower}},
      {"Flatten", {R::Follower}},
      {"Squeeze", {R::Follower, 1, {1}}},
      {"Unsqueeze", {R::Follower, 1, {1}}},
      {"Slice", {R::Follower, 1, {1, 2, 3, 4}}},
      {"Gather", {R::Follower, 1, {1}}},
      {"Split", {R::Follower, 1, {1}}},
      {"Identity", {R::Follower}},
      {"Where", {R::Follower, 9, {0}}},
      {"Expand", {R::Follower, 8, {1}}},
      {"Tile", {R::Follower, 1, {1}}},
      {"Pad", {R::Follower, 1, {1, 3}}},  // 1: pads, 3: axes (opset 18)
      {"DepthToSpace", {R::Follower}},
      {"SpaceToDepth", {R::Follower}},
  };
  return rules;
}

bool contains(const std::vector<int>& v, int k) { return std::find(v.begin(), v.end(), k) != v.end(); }

bool has_subgraph(const Node& n) {
  return std::any_of(n.attributes.begin(), n.attributes.end(),
                     [](const Attribute& a) { return a.g || !a.graphs.empty(); });
}

Node make_cast(const std::string& x, const std::string& y, DType to, const std::string& name, const std::string& doc) {
  Node c = make_node("Cast", {x}, {y}, name, doc);
  c.set_attr(Attribute::make_int("to", static_cast<int64_t>(to)));
  return c;
}

constexpr float kHalfMax = 65504.0f;

// float32 -> float16. Finite values beyond the float16 range are clamped to +-65504: rounding
// would make them infinities, which turn the sums and products they meet into inf or NaN.
Tensor to_half(const Tensor& t, int64_t& clamped) {
  Tensor h(DType::Float16, t.dims());
  const float* src = t.data<float>();
  Half* dst = h.data<Half>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = src[i];
    if (std::isfinite(v) && std::fabs(v) > kHalfMax) {
      v = std::copysign(kHalfMax, v);
      ++clamped;
    }
    dst[i] = Half(v);
  }
  return h;
}

// The conversion of one graph (the main one; subgraphs stay float32 and read float32 values).
class Converter {
 public:
  Converter(Model& m, PassContext& ctx, const QuantizeOptions& o, QuantizeResult& r)
      : g_(m.graph), ctx_(ctx), o_(o), r_(r), opset_(m.opset("")) {}

  int run() {
    ctx_.type({});  // infers the types of the model as it came, before any edit
    if (!o_.keep_io_float32) retype_inputs();
    uses_ = std::make_unique<passes::Uses>(g_);
    scope_ = std::make_unique<passes::Scope>(g_);
    decide();
    count_demands();
    rewrite();
    if (!o_.keep_io_float32) retype_outputs();
    fix_value_info();
    if (clamped_ > 0 && o_.warn) {
      std::string names;
      for (size_t k = 0; k < clamped_in_.size() && k < 5; ++k) names += (k ? ", '" : "'") + clamped_in_[k] + "'";
      if (clamped_in_.size() > 5) names += ", ...";
      o_.warn(std::to_string(clamped_) +
              " float32 constant value(s) beyond the float16 range were clamped to +-65504 (in " + names +
              "); if they are not masks or sentinels, keep the ops reading them float32 with --exclude");
    }
    return count_;
  }

 private:
  struct Site {
    const OpRule* rule = nullptr;
    std::vector<int> t_inputs, t_outputs;
  };

  // The ops of the allow list whose T is float32 here; nullopt for every other node.
  std::optional<Site> site(const Node& n) {
    if (!passes::is_onnx(n) || has_subgraph(n)) return std::nullopt;
    auto it = op_rules().find(n.op_type);
    if (it == op_rules().end() || opset_ < it->second.since) return std::nullopt;
    if (n.op_type == "BatchNormalization" && (n.outputs.size() != 1 || n.attr_int("training_mode", 0) != 0))
      return std::nullopt;
    Site s;
    s.rule = &it->second;
    bool any_float32 = false;
    for (int k = 0; k < n.num_inputs(); ++k) {
      if (!n.has_input(k) || contains(s.rule->other_inputs, k)) continue;
      DType t = elem(n.inputs[static_cast<size_t>(k)]);
      // T is one type: a known other float type (or integers: shape arithmetic) rules the node out.
      if (t != DType::Undefined && t != DType::Float) return std::nullopt;
      any_float32 = any_float32 || t == DType::Float;
      s.t_inputs.push_back(k);
    }
    if (!any_float32) return std::nullopt;
    for (int k = 0; k < static_cast<int>(n.outputs.size()); ++k)
      if (!n.outputs[static_cast<size_t>(k)].empty() && !contains(s.rule->other_outputs, k)) s.t_outputs.push_back(k);
    return s;
  }

  // Element type of a top-level value: from the constant, what this conversion learnt, or
  // inference; Undefined when unknown.
  DType elem(const std::string& v) {
    if (const Tensor* c = scope_->constant(v)) return c->dtype();
    if (auto it = float32_.find(v); it != float32_.end()) return DType::Float;
    const Type* t = ctx_.type(v);
    if (!t || t->kind != Type::Kind::Tensor) return DType::Undefined;
    return t->elem;
  }

  // Without keep_io_float32 the float32 inputs callers feed become float16. Their readers are
  // first moved to a float32 copy (Cast), which float16 readers then skip.
  void retype_inputs() {
    std::vector<Node> casts;
    for (ValueInfo* in : runtime_inputs()) {
      std::string x = in->name, x32 = ctx_.fresh(x + "_fp32");
      passes::replace_uses(g_, x, x32);
      casts.push_back(make_cast(x, x32, DType::Float, ctx_.fresh(x + "_to_fp32", true), {}));
      in->type.elem = DType::Float16;
      half_[x32] = x;
      float32_.insert(x32);
      retyped_.insert(x);
    }
    g_.nodes.insert(g_.nodes.begin(), std::make_move_iterator(casts.begin()), std::make_move_iterator(casts.end()));
  }

  std::vector<ValueInfo*> runtime_inputs() {
    std::vector<ValueInfo*> r;
    for (ValueInfo& in : g_.inputs)
      if (!g_.find_initializer(in.name) && in.type.kind == Type::Kind::Tensor && in.type.elem == DType::Float)
        r.push_back(&in);
    return r;
  }

  // Which nodes run in float16. Forward: anchors, and followers with a float16 input. Then
  // backward: followers of constants only (a Where or Expand of constants, or chains of them) run
  // in float16 when every reader takes their result in float16. One with a float32 reader stays
  // float32: the round trip would only round a value that may be exact, such as Resize's scales.
  void decide() {
    half_node_.assign(g_.nodes.size(), false);
    for (const Node& n : g_.nodes) {
      sites_.push_back(site(n));
      if (sites_.back())
        for (int k : sites_.back()->t_outputs) float32_.insert(n.outputs[static_cast<size_t>(k)]);
    }
    std::set<std::string> constant_like;
    std::vector<size_t> of_constants;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (!sites_[i]) continue;
      const Node& n = g_.nodes[i];
      const Site& s = *sites_[i];
      bool ready = false, constants = true;
      for (int k : s.t_inputs) {
        const std::string& x = n.inputs[static_cast<size_t>(k)];
        ready = ready || half_.count(x) || ready_.count(x);
        constants = constants && (scope_->constant(x) || constant_like.count(x));
      }
      if (s.rule->role == Role::Anchor || ready || embedding(n)) {
        choose(i);
      } else if (constants) {
        for (int k : s.t_outputs) constant_like.insert(n.outputs[static_cast<size_t>(k)]);
        of_constants.push_back(i);
      }
    }
    for (auto it = of_constants.rbegin(); it != of_constants.rend(); ++it)
      if (feeds_float16_only(*it)) choose(*it);
  }

  // A lookup in a constant table of rank 2 or more (token embeddings): an anchor, as it reads a
  // weight; its rows are data for the ops after it.
  bool embedding(const Node& n) const {
    if (n.op_type != "Gather") return false;
    const Tensor* table = scope_->constant(n.inputs[0]);
    return table && table->rank() >= 2;
  }

  void choose(size_t i) {
    const Node& n = g_.nodes[i];
    if (excluded(n, o_)) {
      r_.skipped.push_back(describe_skip(n, "excluded: stays float32"));
      return;
    }
    half_node_[i] = true;
    for (int k : sites_[i]->t_outputs) ready_.insert(n.outputs[static_cast<size_t>(k)]);
  }

  // Every reader of node i's float outputs runs in float16 and reads them as T.
  bool feeds_float16_only(size_t i) const {
    const Node& n = g_.nodes[i];
    bool read = false;
    for (int k : sites_[i]->t_outputs) {
      const std::string& y = n.outputs[static_cast<size_t>(k)];
      if (uses_->is_output(y) || uses_->captured(y)) return false;
      for (size_t j : uses_->readers(y)) {
        if (!half_node_[j]) return false;
        const Node& r = g_.nodes[j];
        for (int s = 0; s < r.num_inputs(); ++s)
          if (r.inputs[static_cast<size_t>(s)] == y && !contains(sites_[j]->t_inputs, s)) return false;
        read = true;
      }
    }
    return read;
  }

  // Values some reader needs as float32: inputs of float32 nodes (and non-T slots), values
  // subgraphs read by name, and graph outputs (retype_outputs moves those to float16 later).
  void count_demands() {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      for (int k = 0; k < n.num_inputs(); ++k) {
        if (!n.has_input(k)) continue;
        bool t = half_node_[i] && contains(sites_[i]->t_inputs, k);
        if (!t && !reads_shape_of_half(n, k)) need32_.insert(n.inputs[static_cast<size_t>(k)]);
      }
    }
    for (const ValueInfo& out : g_.outputs) need32_.insert(out.name);
    std::set<std::string> captured;
    for (const Node& n : g_.nodes)
      for (const Attribute& a : n.attributes) {
        if (a.g) passes::outer_reads(*a.g, captured);
        for (const auto& s : a.graphs)
          if (s) passes::outer_reads(*s, captured);
      }
    need32_.insert(captured.begin(), captured.end());
  }

  // Shape and Size read no element: they take a value made in float16 as it is (the float16
  // version exists by then, its producer comes first), not through a Cast back.
  bool reads_shape_of_half(const Node& n, int k) const {
    if (k != 0 || !passes::is_onnx(n) || (n.op_type != "Shape" && n.op_type != "Size")) return false;
    return ready_.count(n.inputs[0]) || half_.count(n.inputs[0]);
  }

  void rewrite() {
    std::map<size_t, std::vector<Node>> insert;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (!half_node_[i]) {
        Node& n = g_.nodes[i];
        if (reads_shape_of_half(n, 0)) n.inputs[0] = half_.at(n.inputs[0]);
        continue;
      }
      Node& n = g_.nodes[i];
      const Site& s = *sites_[i];
      for (int k : s.t_inputs) {
        std::string& x = n.inputs[static_cast<size_t>(k)];
        x = half_input(x, n, insert[i]);
      }
      for (int k : s.t_outputs) {
        std::string& y = n.outputs[static_cast<size_t>(k)];
        std::string y32 = y, y16 = ctx_.fresh(y + "_fp16");
        y = y16;
        half_[y32] = y16;
        renamed_[y32] = y16;
        if (need32_.count(y32)) {
          insert[i + 1].push_back(make_cast(y16, y32, DType::Float, ctx_.fresh(y32 + "_to_fp32", true), n.doc_string));
        }
      }
      ++count_;
      ++r_.by_op[n.op_type];
    }
    for (Initializer& x : added_) g_.initializers.push_back(std::move(x));
    passes::compact(g_, {}, std::move(insert));
  }

  // The float16 version of float32 value x for node n (Casts it needs go to `before`).
  std::string half_input(const std::string& x, const Node& n, std::vector<Node>& before) {
    if (auto it = half_.find(x); it != half_.end()) return it->second;
    std::string x16;
    if (const Tensor* c = scope_->constant(x)) {
      int64_t clamped = 0;
      Tensor h = to_half(*c, clamped);
      if (clamped) clamped_ += clamped, clamped_in_.push_back(x);
      if (need32_.count(x) || uses_->is_output(x)) {
        x16 = ctx_.fresh(x + "_fp16");
        added_.push_back({x16, std::move(h), {}});
      } else {
        // Read by float16 nodes only: the weight itself becomes float16 and keeps its name.
        x16 = x;
        retype_constant(x, std::move(h));
      }
    } else {
      x16 = ctx_.fresh(x + "_fp16");
      before.push_back(make_cast(x, x16, DType::Float16, ctx_.fresh(x + "_to_fp16", true), n.doc_string));
    }
    half_[x] = x16;
    return x16;
  }

  void retype_constant(const std::string& x, Tensor h) {
    retyped_.insert(x);
    for (Initializer& i : g_.initializers)
      if (i.name == x) {
        i.tensor = std::move(h);
        return;
      }
    int p = uses_->producer(x);
    if (p < 0) throw Error("internal: constant '" + x + "' has neither initializer nor producer");
    g_.nodes[static_cast<size_t>(p)].attributes = {Attribute::make_tensor("value", std::move(h))};
  }

  // Without keep_io_float32 the float32 outputs become float16: the float16 version takes the
  // output's name and float32 readers move to a fresh name.
  void retype_outputs() {
    std::vector<Node> casts;
    for (ValueInfo& out : g_.outputs) {
      const std::string y = out.name;
      if (out.type.kind != Type::Kind::Tensor || out.type.elem != DType::Float) {
        if (out.type.kind != Type::Kind::Undefined || elem(y) != DType::Float) continue;
        out.type = Type::tensor(DType::Float);  // undeclared: what inference says
      }
      if (!retyped_.insert(y).second) {  // a graph input passed through, or a repeated output
        out.type.elem = DType::Float16;
        continue;
      }
      std::string y32 = ctx_.fresh(y + "_fp32");
      if (!rename(y, y32)) {
        retyped_.erase(y);  // a graph input the caller may override: stays as declared
        continue;
      }
      out.type.elem = DType::Float16;
      // A float16 version made already (by the float16 producer, a Cast for float16 readers or a
      // converted constant) takes the output's name; the float32 one serves float32 readers.
      auto h = half_.find(y);
      if (h != half_.end() && h->second != y && rename(h->second, y)) continue;
      casts.push_back(make_cast(y32, y, DType::Float16, ctx_.fresh(y + "_to_fp16", true), {}));
    }
    for (Node& c : casts) g_.nodes.push_back(std::move(c));
  }

  // Renames a value made by a node or an initializer (not a graph input) for all its readers,
  // subgraphs included; graph outputs keep their names. False when nothing makes it.
  bool rename(const std::string& from, const std::string& to) {
    bool made = false;
    for (Node& n : g_.nodes)
      for (std::string& o : n.outputs)
        if (o == from) o = to, made = true;
    if (!made && !g_.find_input(from))
      for (Initializer& i : g_.initializers)
        if (i.name == from) i.name = to, made = true;
    if (made) passes::replace_uses(g_, from, to);
    return made;
  }

  // value_info of retyped names says float16; a renamed float16 output gets the float32 entry's
  // shape; entries of names that no longer exist go.
  void fix_value_info() {
    std::set<std::string> exists;
    for (const Node& n : g_.nodes)
      for (const std::string& o : n.outputs) exists.insert(o);
    std::vector<ValueInfo> added;
    for (ValueInfo& vi : g_.value_info) {
      if (retyped_.count(vi.name) && vi.type.kind == Type::Kind::Tensor) vi.type.elem = DType::Float16;
      auto it = renamed_.find(vi.name);
      if (it == renamed_.end() || vi.type.kind != Type::Kind::Tensor) continue;
      ValueInfo h = vi;
      h.name = it->second;
      h.type.elem = DType::Float16;
      if (h.name != vi.name) added.push_back(std::move(h));
      else vi = std::move(h);
    }
    for (ValueInfo& vi : added) g_.value_info.push_back(std::move(vi));
    std::erase_if(g_.value_info, [&](const ValueInfo& vi) {
      return !exists.count(vi.name) && !g_.find_initializer(vi.name) && !g_.find_input(vi.name);
    });
  }

  Graph& g_;
  PassContext& ctx_;
  const QuantizeOptions& o_;
  QuantizeResult& r_;
  int64_t opset_;
  std::unique_ptr<passes::Uses> uses_;
  std::unique_ptr<passes::Scope> scope_;
  std::vector<std::optional<Site>> sites_;
  std::vector<bool> half_node_;
  std::set<std::string> float32_;                 // values known to be float32 besides inference's
  std::set<std::string> ready_;                   // float32 values a float16 node produces
  std::set<std::string> need32_;                  // values some reader needs as float32
  std::map<std::string, std::string> half_;       // float32 value -> its float16 version
  std::map<std::string, std::string> renamed_;    // float32 name -> float16 name its producer writes instead
  std::set<std::string> retyped_;                 // names whose own type became float16
  std::vector<Initializer> added_;
  int64_t clamped_ = 0;
  std::vector<std::string> clamped_in_;
  int count_ = 0;
};

}  // namespace

int rewrite_fp16(Model& m, PassContext& ctx, const QuantizeOptions& o, QuantizeResult& r) {
  return Converter(m, ctx, o, r).run();
}

}  // namespace t2o::quant
