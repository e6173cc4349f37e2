// Folding affine ops into the Conv, ConvTranspose or Gemm before them: BatchNormalization, and
// Mul/Div/Add/Sub by constants that are truly per output channel. The folded node takes the last
// node's output name, so the intermediate name (which held the unfolded value) disappears.
//
// Output channel c of Conv is weight row W[c] (W: [Cout, Cin/group, k...]); of ConvTranspose it
// is W[i, j] for j = c % (Cout/group) and every input channel i of group c / (Cout/group)
// (W: [Cin, Cout/group, k...]); of Gemm it is column c of op(B) (B[:, c], or B[c, :] with transB).
#include <cmath>

#include "passes/graph_util.h"
#include "passes/internal.h"

namespace t2o::passes {

namespace {

bool is(const Node& n, const char* op) { return is_onnx(n) && n.op_type == op; }
bool float_weights(DType t) { return t == DType::Float || t == DType::Double; }

// The layer whose output channels we rescale/shift.
struct Layer {
  enum Kind { Conv, ConvTranspose, Gemm } kind;
  const Tensor* w = nullptr;
  const Tensor* b = nullptr;  // Conv/ConvTranspose bias or Gemm C; may be null
  int64_t channels = 0;
  int64_t group = 1;
  bool trans_b = false;       // Gemm
  float alpha = 1, beta = 1;  // Gemm
};

std::optional<Layer> layer_of(const Node& n, const Scope& s) {
  Layer L;
  if (is(n, "Conv")) L.kind = Layer::Conv;
  else if (is(n, "ConvTranspose")) L.kind = Layer::ConvTranspose;
  else if (is(n, "Gemm")) L.kind = Layer::Gemm;
  else return std::nullopt;
  if (n.outputs.size() != 1 || n.inputs.size() < 2 || n.inputs.size() > 3) return std::nullopt;
  L.w = s.constant(n.inputs[1]);
  if (!L.w || !float_weights(L.w->dtype())) return std::nullopt;
  if (n.has_input(2)) {
    L.b = s.constant(n.inputs[2]);
    if (!L.b || L.b->dtype() != L.w->dtype()) return std::nullopt;
  }
  if (L.kind == Layer::Gemm) {
    if (L.w->rank() != 2) return std::nullopt;
    L.trans_b = n.attr_int("transB", 0) != 0;
    L.alpha = n.attr_float("alpha", 1.0f);
    L.beta = n.attr_float("beta", 1.0f);
    L.channels = L.w->dim(L.trans_b ? 0 : 1);
    if (L.b && L.b->rank() > 2) return std::nullopt;
    return L;
  }
  if (L.w->rank() < 3) return std::nullopt;
  L.group = n.attr_int("group", 1);
  if (L.group < 1) return std::nullopt;
  L.channels = L.kind == Layer::Conv ? L.w->dim(0) : L.w->dim(1) * L.group;
  if (L.kind == Layer::ConvTranspose && L.w->dim(0) % L.group != 0) return std::nullopt;
  if (L.b && (L.b->rank() != 1 || L.b->dim(0) != L.channels)) return std::nullopt;
  return L;
}

// The layer with output channel c scaled by scale[c] and then shifted by shift[c]:
// new output = old output * scale + shift. Returns {weight, bias} tensors.
std::pair<Tensor, Tensor> rescale(const Layer& L, const std::vector<double>& scale, const std::vector<double>& shift) {
  std::vector<double> w = to_doubles(*L.w);
  const Dims& wd = L.w->dims();
  if (L.kind == Layer::Conv) {
    size_t per = w.size() / static_cast<size_t>(L.channels);
    for (size_t i = 0; i < w.size(); ++i) w[i] *= scale[i / per];
  } else if (L.kind == Layer::ConvTranspose) {
    int64_t cin = wd[0], cout_g = wd[1], k = numel_of(Dims(wd.begin() + 2, wd.end()));
    int64_t cin_g = cin / L.group;
    for (int64_t ic = 0; ic < cin; ++ic)
      for (int64_t j = 0; j < cout_g; ++j) {
        double a = scale[static_cast<size_t>((ic / cin_g) * cout_g + j)];
        size_t base = static_cast<size_t>((ic * cout_g + j) * k);
        for (int64_t e = 0; e < k; ++e) w[base + static_cast<size_t>(e)] *= a;
      }
  } else {
    int64_t rows = wd[0], cols = wd[1];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) w[static_cast<size_t>(r * cols + c)] *= scale[static_cast<size_t>(L.trans_b ? r : c)];
  }
  Tensor nw = from_doubles(w, wd, L.w->dtype());
  if (L.kind != Layer::Gemm) {
    std::vector<double> b(static_cast<size_t>(L.channels), 0.0);
    if (L.b) b = to_doubles(*L.b);
    for (size_t c = 0; c < b.size(); ++c) b[c] = b[c] * scale[c] + shift[c];
    return {nw, from_doubles(b, {L.channels}, L.w->dtype())};
  }
  // Gemm: C' = (beta * C) * scale + shift, broadcast over columns; beta becomes 1.
  Dims cd = L.b ? L.b->dims() : Dims{};
  Dims outd;
  if (cd.size() == 2) outd = {cd[0], L.channels};
  else outd = {L.channels};
  std::vector<double> c = L.b ? to_doubles(*L.b) : std::vector<double>{0.0};
  std::vector<double> r(static_cast<size_t>(numel_of(outd)));
  int64_t rows = outd.size() == 2 ? outd[0] : 1;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < L.channels; ++j) {
      // Index into C as broadcast: its dims are 1 or full on each axis.
      int64_t ci = 0;
      if (cd.size() == 2) ci = (cd[0] == 1 ? 0 : i) * cd[1] + (cd[1] == 1 ? 0 : j);
      else if (cd.size() == 1) ci = cd[0] == 1 ? 0 : j;
      double v = static_cast<double>(L.beta) * c[static_cast<size_t>(ci)];
      r[static_cast<size_t>(i * L.channels + j)] = v * scale[static_cast<size_t>(j)] + shift[static_cast<size_t>(j)];
    }
  return {nw, from_doubles(r, outd, L.w->dtype())};
}

// Replaces layer node `li` by its rescaled form writing `out`; the node at `last` goes.
void replace_layer(Graph& g, PassContext& ctx, size_t li, size_t last, const Layer& L, const std::pair<Tensor, Tensor>& wb,
                   const std::string& out) {
  Node f = g.nodes[li];
  std::string wn = ctx.fresh(f.inputs[1] + "_fused"), bn = ctx.fresh((f.has_input(2) ? f.inputs[2] : f.name + "_bias") + "_fused");
  add_initializer(g, wn, wb.first);
  add_initializer(g, bn, wb.second);
  f.inputs.resize(3);
  f.inputs[1] = wn;
  f.inputs[2] = bn;
  f.outputs = {out};
  if (L.kind == Layer::Gemm && L.beta != 1.0f) f.set_attr(Attribute::make_float("beta", 1.0f));
  remove_node(g.nodes[li]);
  g.nodes[last] = std::move(f);
}

// Per-channel values of constant c applied to a layer output of rank `rank` (channels on axis 1,
// or on the last axis for Gemm): nullopt when c varies along any other axis, would broadcast the
// output to a larger shape, or does not match the channel count.
std::optional<std::vector<double>> per_channel(const Tensor& c, int rank, int64_t channels, bool gemm) {
  if (c.rank() > rank) return std::nullopt;
  int axis = gemm ? rank - 1 : 1;
  int off = rank - c.rank();
  bool varies = false;
  for (int k = 0; k < c.rank(); ++k) {
    int64_t d = c.dim(k);
    if (off + k == axis) {
      if (d != channels && d != 1) return std::nullopt;
      varies = d == channels && channels != 1;
    } else if (d != 1) {
      return std::nullopt;
    }
  }
  std::vector<double> v = to_doubles(c);
  std::vector<double> r(static_cast<size_t>(channels));
  for (int64_t i = 0; i < channels; ++i) r[static_cast<size_t>(i)] = v[varies ? static_cast<size_t>(i) : 0];
  return r;
}

bool bn_inference(const Node& bn, const Uses& u, int64_t opset) {
  if (!is(bn, "BatchNormalization") || bn.inputs.size() != 5 || bn.outputs.empty() || opset < 7) return false;
  if (bn.attr_int("training_mode", 0) != 0 || bn.attr_int("spatial", 1) != 1) return false;
  for (size_t k = 1; k < bn.outputs.size(); ++k)
    if (!bn.outputs[k].empty() && u.count(bn.outputs[k]) > 0) return false;
  return true;
}

// BatchNormalization after a layer of `kinds`.
int fold_bn(Model& m, PassContext& ctx, bool gemm) {
  return for_each_graph(m, [&](Scope& s) {
    Graph& g = s.graph();
    auto u = std::make_unique<Uses>(g);
    int n = 0;
    for (size_t j = 0; j < g.nodes.size(); ++j) {
      const Node& bn = g.nodes[j];
      if (removed(bn) || !bn_inference(bn, *u, ctx.opset())) continue;
      int li = u->producer(bn.inputs[0]);
      if (li < 0 || !u->only_reader(bn.inputs[0], j)) continue;
      for (size_t k = 1; k < 5; ++k)
        if (bn.inputs[k] == bn.inputs[0]) li = -1;
      if (li < 0) continue;
      const Node& layer = g.nodes[static_cast<size_t>(li)];
      auto L = layer_of(layer, s);
      if (!L || (L->kind == Layer::Gemm) != gemm) continue;
      std::vector<std::vector<double>> p;
      for (size_t k = 1; k < 5; ++k) {
        const Tensor* t = s.constant(bn.inputs[k]);
        if (!t || !dtype_is_float(t->dtype()) || t->rank() != 1 || t->dim(0) != L->channels) break;
        p.push_back(to_doubles(*t));
      }
      if (p.size() != 4) continue;
      double eps = bn.attr_float("epsilon", 1e-5f);
      std::vector<double> scale(static_cast<size_t>(L->channels)), shift(scale.size());
      for (size_t c = 0; c < scale.size(); ++c) {
        scale[c] = p[0][c] / std::sqrt(p[3][c] + eps);
        shift[c] = p[1][c] - p[2][c] * scale[c];
      }
      if (!ctx.allow(layer)) continue;
      std::string out = bn.outputs[0];
      replace_layer(g, ctx, static_cast<size_t>(li), j, *L, rescale(*L, scale, shift), out);
      ++n;
      u = std::make_unique<Uses>(g);
    }
    drop_removed(g);
    return n;
  });
}

}  // namespace

int fuse_bn_into_conv(Model& m, PassContext& ctx) { return fold_bn(m, ctx, false); }
int fuse_bn_into_gemm(Model& m, PassContext& ctx) { return fold_bn(m, ctx, true); }

int fuse_mul_add_into_conv(Model& m, PassContext& ctx) {
  return for_each_graph(m, [&](Scope& s) {
    Graph& g = s.graph();
    auto u = std::make_unique<Uses>(g);
    int n = 0;
    for (size_t j = 0; j < g.nodes.size(); ++j) {
      const Node& op = g.nodes[j];
      if (removed(op) || !is_onnx(op) || op.inputs.size() != 2 || op.outputs.size() != 1) continue;
      bool mul = op.op_type == "Mul", div = op.op_type == "Div", add = op.op_type == "Add", sub = op.op_type == "Sub";
      if (!mul && !div && !add && !sub) continue;
      // Which input is the layer's output (Div and Sub only as the left operand).
      for (size_t side = 0; side < ((mul || add) ? 2u : 1u); ++side) {
        const std::string& y = op.inputs[side];
        const Tensor* c = s.constant(op.inputs[1 - side]);
        int li = u->producer(y);
        if (!c || li < 0 || op.inputs[0] == op.inputs[1] || !u->only_reader(y, j)) continue;
        const Node& layer = g.nodes[static_cast<size_t>(li)];
        auto L = layer_of(layer, s);
        if (!L || c->dtype() != L->w->dtype()) continue;
        auto ty = known_shape(ctx.type(y));
        int rank = L->kind == Layer::Gemm ? 2 : ty ? ty->rank() : -1;
        if (rank < 2) continue;
        auto v = per_channel(*c, rank, L->channels, L->kind == Layer::Gemm);
        if (!v) continue;
        std::vector<double> scale(v->size(), 1.0), shift(v->size(), 0.0);
        bool ok = true;
        for (size_t k = 0; k < v->size(); ++k) {
          double x = (*v)[k];
          if (mul) scale[k] = x;
          else if (div) ok = ok && x != 0 && std::isfinite(1 / x), scale[k] = 1 / x;
          else if (add) shift[k] = x;
          else shift[k] = -x;
        }
        if (!ok || !ctx.allow(layer)) continue;
        std::string out = op.outputs[0];
        replace_layer(g, ctx, static_cast<size_t>(li), j, *L, rescale(*L, scale, shift), out);
        ++n;
        u = std::make_unique<Uses>(g);
        break;
      }
    }
    drop_removed(g);
    return n;
  });
}

int fuse_pad_into_conv(Model& m, PassContext& ctx) {
  return for_each_graph(m, [&](Scope& s) {
    Graph& g = s.graph();
    auto u = std::make_unique<Uses>(g);
    int n = 0;
    int64_t opset = ctx.opset();
    for (size_t j = 0; j < g.nodes.size(); ++j) {
      Node& conv = g.nodes[j];
      if (removed(conv) || !is(conv, "Conv") || conv.inputs.empty()) continue;
      if (conv.attr_string("auto_pad", "NOTSET") != "NOTSET") continue;
      int pi = u->producer(conv.inputs[0]);
      if (pi < 0 || !u->only_reader(conv.inputs[0], j)) continue;
      const Node& pad = g.nodes[static_cast<size_t>(pi)];
      if (!is(pad, "Pad") || pad.attr_string("mode", "constant") != "constant" || pad.outputs.size() != 1) continue;
      std::vector<int64_t> pads;
      if (opset < 11) {
        pads = pad.attr_ints("pads");
        if (pad.attr_float("value", 0.0f) != 0.0f) continue;
      } else {
        const Tensor* p = pad.has_input(1) ? s.constant(pad.inputs[1]) : nullptr;
        if (!p || pad.has_input(3)) continue;
        pads = to_ints(*p);
        if (pad.has_input(2)) {
          const Tensor* v = s.constant(pad.inputs[2]);
          if (!v || !all_equal(*v, 0)) continue;
        }
      }
      size_t r = pads.size() / 2;
      if (r < 3 || pads.size() != 2 * r) continue;
      bool ok = pads[0] == 0 && pads[1] == 0 && pads[r] == 0 && pads[r + 1] == 0;
      for (int64_t p : pads) ok = ok && p >= 0;
      std::vector<int64_t> cp = conv.attr_ints("pads", std::vector<int64_t>(2 * (r - 2), 0));
      if (!ok || cp.size() != 2 * (r - 2) || !ctx.allow(conv)) continue;
      for (size_t k = 0; k < r - 2; ++k) {
        cp[k] += pads[2 + k];
        cp[(r - 2) + k] += pads[r + 2 + k];
      }
      conv.inputs[0] = pad.inputs[0];
      conv.set_attr(Attribute::make_ints("pads", cp));
      ++n;
      u = std::make_unique<Uses>(g);
    }
    return n;
  });
}

}  // namespace t2o::passes
