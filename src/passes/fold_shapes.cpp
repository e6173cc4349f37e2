// Shape folding. Shape tensors are tracked element by element: a known number, a symbolic dim
// (the value's dim_param, or a token for an unnamed dim of a given value and axis), or unknown.
// Shape/Size of static dims and the small integer arithmetic on them (Gather, Slice, Concat,
// Unsqueeze, Squeeze, Cast, Reshape, Add/Sub/Mul/Div/Min/Max) fold to constants once every
// element is known. Symbolic dims are never replaced by numbers: a Reshape (Expand) target whose
// unknown elements copy the input's dim at the same position becomes a constant with 0 (1) there.
#include <algorithm>
#include <climits>
#include <unordered_map>

#include "passes/graph_util.h"
#include "passes/internal.h"
#include "passes/op_args.h"

namespace t2o::passes {

namespace {

struct Elem {
  bool known = false;
  int64_t v = 0;
  std::string sym;  // when not known: the dim it equals, or "" (nothing known)
  static Elem num(int64_t x) { return Elem{true, x, {}}; }
  static Elem of(std::string s) { return Elem{false, 0, std::move(s)}; }
};

struct ShapeValue {
  DType dtype = DType::Int64;
  bool scalar = false;
  std::vector<Elem> e;
  bool all_known() const {
    return std::all_of(e.begin(), e.end(), [](const Elem& x) { return x.known; });
  }
};

constexpr size_t kMaxElems = 64;

bool int_type(DType t) { return t == DType::Int64 || t == DType::Int32; }

std::string dim_token(const std::string& value, size_t axis, const Dim& d) {
  if (d.is_symbolic()) return d.symbol;
  return "?" + value + "#" + std::to_string(axis);
}

class ShapeFolder {
 public:
  ShapeFolder(Scope& s, PassContext& ctx) : s_(s), ctx_(ctx) {}

  std::optional<ShapeValue> value(const std::string& name) {
    if (name.empty()) return std::nullopt;
    if (auto it = vals_.find(name); it != vals_.end()) return it->second;
    const Tensor* t = s_.constant(name);
    if (!t || !int_type(t->dtype()) || t->rank() > 1 || static_cast<size_t>(t->numel()) > kMaxElems) return std::nullopt;
    ShapeValue v;
    v.dtype = t->dtype();
    v.scalar = t->rank() == 0;
    for (int64_t x : to_ints(*t)) v.e.push_back(Elem::num(x));
    return v;
  }
  void set(const std::string& name, ShapeValue v) { vals_[name] = std::move(v); }

  // What node n computes, when it is a shape computation we can follow.
  std::optional<ShapeValue> eval(const Node& n) {
    if (!is_onnx(n) || n.outputs.size() != 1) return std::nullopt;
    const std::string& op = n.op_type;
    int64_t opset = ctx_.opset();
    if (op == "Shape") {
      auto s = known_shape(ctx_.type(n.inputs.at(0)));
      if (!s) return std::nullopt;
      int64_t r = s->rank(), start = n.attr_int("start", 0), end = n.attr_int("end", r);
      if (start < 0) start += r;
      if (end < 0) end += r;
      start = std::clamp<int64_t>(start, 0, r);
      end = std::clamp<int64_t>(end, 0, r);
      ShapeValue v;
      for (int64_t a = start; a < end; ++a) {
        const Dim& d = s->dims[static_cast<size_t>(a)];
        v.e.push_back(d.is_static() ? Elem::num(d.value) : Elem::of(dim_token(n.inputs[0], static_cast<size_t>(a), d)));
      }
      return v;
    }
    if (op == "Size") {
      auto s = known_shape(ctx_.type(n.inputs.at(0)));
      if (!s || !s->is_static()) return std::nullopt;
      ShapeValue v;
      v.scalar = true;
      v.e.push_back(Elem::num(numel_of(s->static_dims())));
      return v;
    }
    std::vector<std::optional<ShapeValue>> in;
    for (const auto& i : n.inputs) in.push_back(value(i));
    auto all_in = [&](size_t k) {
      for (size_t i = 0; i < k; ++i)
        if (i >= in.size() || !in[i]) return false;
      return true;
    };
    if (op == "Identity" && all_in(1)) return in[0];
    if (op == "Cast" && all_in(1)) {
      DType to = static_cast<DType>(n.attr_int("to", 0));
      if (!int_type(to)) return std::nullopt;
      ShapeValue v = *in[0];
      v.dtype = to;
      return v;
    }
    if (op == "Gather" && all_in(2) && !in[0]->scalar && in[1]->all_known()) {
      if (n.attr_int("axis", 0) != 0) return std::nullopt;
      ShapeValue v;
      v.dtype = in[0]->dtype;
      v.scalar = in[1]->scalar;
      int64_t len = static_cast<int64_t>(in[0]->e.size());
      for (const Elem& idx : in[1]->e) {
        int64_t k = idx.v < 0 ? idx.v + len : idx.v;
        if (k < 0 || k >= len) return std::nullopt;
        v.e.push_back(in[0]->e[static_cast<size_t>(k)]);
      }
      return v;
    }
    if (op == "Unsqueeze" && all_in(1) && in[0]->scalar) {
      IntsArg axes = ints_arg(n, s_, "axes", axes_input(op, opset));
      if (!axes.known || axes.v.size() != 1 || (axes.v[0] != 0 && axes.v[0] != -1)) return std::nullopt;
      ShapeValue v = *in[0];
      v.scalar = false;
      return v;
    }
    if (op == "Squeeze" && all_in(1) && !in[0]->scalar && in[0]->e.size() == 1) {
      IntsArg axes = ints_arg(n, s_, "axes", axes_input(op, opset));
      if (!axes.known || (axes.present && (axes.v.size() != 1 || (axes.v[0] != 0 && axes.v[0] != -1)))) return std::nullopt;
      ShapeValue v = *in[0];
      v.scalar = true;
      return v;
    }
    if (op == "Reshape" && all_in(2) && in[1]->all_known()) {
      // Only between the forms a shape value takes: scalar, [n].
      std::vector<int64_t> to;
      for (const Elem& x : in[1]->e) to.push_back(x.v);
      ShapeValue v = *in[0];
      if (to.empty() && v.e.size() == 1) v.scalar = true;
      else if (to.size() == 1 && (to[0] == -1 || to[0] == static_cast<int64_t>(v.e.size()))) v.scalar = false;
      else return std::nullopt;
      return v;
    }
    if (op == "Concat" && all_in(n.inputs.size()) && n.attr_int("axis", 0) == 0) {
      ShapeValue v;
      v.dtype = in[0]->dtype;
      for (const auto& x : in) {
        if (x->scalar || x->dtype != v.dtype) return std::nullopt;
        v.e.insert(v.e.end(), x->e.begin(), x->e.end());
      }
      if (v.e.size() > kMaxElems) return std::nullopt;
      return v;
    }
    if (op == "Slice" && all_in(1) && !in[0]->scalar) {
      IntsArg st = ints_arg(n, s_, "starts", opset >= 10 ? 1 : -1), en = ints_arg(n, s_, "ends", opset >= 10 ? 2 : -1);
      IntsArg ax = ints_arg(n, s_, "axes", opset >= 10 ? 3 : -1), sp = ints_arg(n, s_, "steps", opset >= 10 ? 4 : -1);
      if (!st.known || !en.known || !ax.known || !sp.known || st.v.size() != 1 || en.v.size() != 1) return std::nullopt;
      if (ax.present && (ax.v.size() != 1 || (ax.v[0] != 0 && ax.v[0] != -1))) return std::nullopt;
      int64_t len = static_cast<int64_t>(in[0]->e.size());
      int64_t step = sp.present ? sp.v.at(0) : 1;
      if (step == 0) return std::nullopt;
      int64_t b = st.v[0], e = en.v[0];
      // ONNX Slice clamping (as numpy): negative bounds count from the end.
      if (b < 0) b += len;
      if (e < 0) e += len;
      if (step > 0) {
        b = std::clamp<int64_t>(b, 0, len);
        e = std::clamp<int64_t>(e, 0, len);
      } else {
        b = std::clamp<int64_t>(b, -1, len - 1);
        e = std::clamp<int64_t>(e, -1, len - 1);
      }
      ShapeValue v;
      v.dtype = in[0]->dtype;
      for (int64_t k = b; step > 0 ? k < e : k > e; k += step) v.e.push_back(in[0]->e[static_cast<size_t>(k)]);
      return v;
    }
    static const std::set<std::string> arith{"Add", "Sub", "Mul", "Div", "Min", "Max"};
    if (arith.count(op) && n.inputs.size() == 2 && all_in(2) && in[0]->dtype == in[1]->dtype) {
      const ShapeValue &a = *in[0], &b = *in[1];
      size_t len = std::max(a.e.size(), b.e.size());
      if ((a.e.size() != len && a.e.size() != 1) || (b.e.size() != len && b.e.size() != 1)) return std::nullopt;
      ShapeValue v;
      v.dtype = a.dtype;
      v.scalar = a.scalar && b.scalar;
      for (size_t k = 0; k < len; ++k) {
        const Elem& x = a.e[a.e.size() == 1 ? 0 : k];
        const Elem& y = b.e[b.e.size() == 1 ? 0 : k];
        v.e.push_back(combine(op, x, y));
      }
      return v;
    }
    return std::nullopt;
  }

 private:
  static Elem combine(const std::string& op, const Elem& x, const Elem& y) {
    if (x.known && y.known) {
      if (op == "Add") return Elem::num(x.v + y.v);
      if (op == "Sub") return Elem::num(x.v - y.v);
      if (op == "Mul") return Elem::num(x.v * y.v);
      if (op == "Min") return Elem::num(std::min(x.v, y.v));
      if (op == "Max") return Elem::num(std::max(x.v, y.v));
      // Integer division rounding differs between conventions for negative operands.
      if (op == "Div" && y.v > 0 && x.v >= 0) return Elem::num(x.v / y.v);
      return Elem{};
    }
    // Neutral operands keep the dim.
    if (y.known && ((op == "Add" || op == "Sub") && y.v == 0)) return x;
    if (y.known && ((op == "Mul" || op == "Div") && y.v == 1)) return x;
    if (x.known && op == "Add" && x.v == 0) return y;
    if (x.known && op == "Mul" && x.v == 1) return y;
    return Elem{};
  }

  Scope& s_;
  PassContext& ctx_;
  std::unordered_map<std::string, ShapeValue> vals_;
};

Tensor to_tensor(const ShapeValue& v) {
  std::vector<double> d;
  for (const Elem& e : v.e) d.push_back(static_cast<double>(e.v));
  Dims dims;
  if (!v.scalar) dims.push_back(static_cast<int64_t>(v.e.size()));
  return from_doubles(d, dims, v.dtype);
}

// A constant Reshape/Expand target equivalent to `v` for input shape `x`, or nullopt.
std::optional<std::vector<int64_t>> static_target(const Node& n, const ShapeValue& v, const Shape& x, const std::string& xname) {
  std::vector<int64_t> r;
  bool reshape = n.op_type == "Reshape";
  if (reshape && n.attr_int("allowzero", 0) != 0) return std::nullopt;
  size_t off = reshape ? 0 : (v.e.size() >= static_cast<size_t>(x.rank()) ? v.e.size() - static_cast<size_t>(x.rank()) : SIZE_MAX);
  for (size_t k = 0; k < v.e.size(); ++k) {
    const Elem& e = v.e[k];
    if (e.known) {
      r.push_back(e.v);
      continue;
    }
    // Reshape copies dim k with 0, Expand keeps the input's aligned dim with 1.
    if (off == SIZE_MAX || k < off) return std::nullopt;
    size_t axis = k - off;
    if (axis >= static_cast<size_t>(x.rank())) return std::nullopt;
    const Dim& d = x.dims[axis];
    if (e.sym.empty() || e.sym != dim_token(xname, axis, d)) return std::nullopt;
    r.push_back(reshape ? 0 : 1);
  }
  return r;
}

}  // namespace

int fold_shapes(Model& m, PassContext& ctx) {
  return for_each_graph(m, [&](Scope& s) {
    Graph& g = s.graph();
    Uses u(g);
    ShapeFolder f(s, ctx);
    int n = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      Node& node = g.nodes[i];
      if (removed(node)) continue;
      if (auto v = f.eval(node)) {
        const std::string& out = node.outputs[0];
        f.set(out, *v);
        if (v->all_known() && node.op_type != "Constant" && !u.is_output(out) && !s.constant(out) && ctx.allow(node)) {
          Tensor t = to_tensor(*v);
          add_initializer(g, out, t);
          s.define_constant(out, t);
          remove_node(node);
          ++n;
        }
        continue;
      }
      if ((node.op_type == "Reshape" || node.op_type == "Expand") && is_onnx(node) && node.inputs.size() == 2 &&
          !s.constant(node.inputs[1])) {
        auto v = f.value(node.inputs[1]);
        auto x = known_shape(ctx.type(node.inputs[0]));
        if (!v || v->scalar || !x) continue;
        auto target = static_target(node, *v, *x, node.inputs[0]);
        if (!target || !ctx.allow(node)) continue;
        std::string name = ctx.fresh(node.inputs[1] + "_static");
        Tensor t = Tensor::from_vector<int64_t>(*target, {static_cast<int64_t>(target->size())});
        add_initializer(g, name, t);
        s.define_constant(name, t);
        node.inputs[1] = name;
        ++n;
      }
    }
    drop_removed(g);
    return n;
  });
}

}  // namespace t2o::passes
