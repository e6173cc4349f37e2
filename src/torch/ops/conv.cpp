// Convolutions (1-3d, transposed) and pooling (max/avg with ceil_mode, adaptive incl. sizes that
// do not divide the input).
#include <algorithm>
#include <cmath>

#include "torch/ops/ops.h"

namespace t2o {
namespace {

std::vector<int64_t> expand(std::vector<int64_t> v, size_t n) {
  if (v.size() == 1 && n > 1) v.assign(n, v[0]);
  return v;
}

std::vector<int64_t> both_sides(const std::vector<int64_t>& p) {
  std::vector<int64_t> r = p;
  r.insert(r.end(), p.begin(), p.end());
  return r;
}

struct ConvArgs {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
  std::string pad_mode;  // "same" / "valid" for the string-padding overloads
};

void emit_conv(Ctx& c, const TNode* n, const ConvArgs& a) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t), w = c.t_as(n, 1, t);
  int r = c.rank(n, 1);
  size_t sd = static_cast<size_t>(r - 2);
  std::vector<int64_t> wshape = c.in(n, 1).is_const() ? c.in(n, 1).c.toTensor().sizes().vec() : c.shape(n, 1);
  std::vector<int64_t> kernel(wshape.begin() + 2, wshape.end());
  auto dil = expand(a.dilation, sd);
  std::vector<int64_t> pads;
  if (a.pad_mode == "valid") {
    pads.assign(2 * sd, 0);
  } else if (a.pad_mode == "same") {
    pads.assign(2 * sd, 0);
    for (size_t i = 0; i < sd; ++i) {
      int64_t total = dil[i] * (kernel[i] - 1);
      pads[i] = total / 2;
      pads[i + sd] = total - total / 2;
    }
  } else {
    pads = both_sides(expand(a.padding, sd));
  }
  std::vector<Attribute> attrs{Attribute::make_ints("strides", expand(a.stride, sd)),
                               Attribute::make_ints("pads", pads), Attribute::make_ints("dilations", dil),
                               Attribute::make_int("group", a.groups),
                               Attribute::make_ints("kernel_shape", kernel)};
  std::vector<std::string> in{x, w};
  if (!c.is_none(n, 2)) in.push_back(c.t_as(n, 2, t));
  if (a.transposed) {
    auto op = expand(a.output_padding, sd);
    auto st = expand(a.stride, sd);
    bool any = false, large = false;
    for (size_t i = 0; i < sd; ++i) {
      any = any || op[i] != 0;
      large = large || op[i] >= st[i];
    }
    if (!large) {
      if (any) attrs.push_back(Attribute::make_ints("output_padding", op));
      return c.out(n, c.b.op1("ConvTranspose", in, attrs));
    }
    // torch allows output_padding up to the dilation; ONNX Runtime only below the stride. The same
    // result: output_padding taken off the end padding, and where that runs out, the positions no
    // kernel tap reaches appended as zeros (plus the bias).
    std::vector<int64_t> extra(sd, 0);
    bool grow = false;
    for (size_t i = 0; i < sd; ++i) {
      int64_t end = pads[i + sd] - op[i];
      pads[i + sd] = std::max<int64_t>(end, 0);
      extra[i] = std::max<int64_t>(-end, 0);
      grow = grow || extra[i] > 0;
    }
    for (Attribute& at : attrs)
      if (at.name == "pads") at = Attribute::make_ints("pads", pads);
    if (!grow) return c.out(n, c.b.op1("ConvTranspose", in, attrs));
    std::string bias = in.size() > 2 ? in[2] : std::string();
    in.resize(2);
    std::string y = c.b.op1("ConvTranspose", in, attrs);
    std::vector<int64_t> out_pads(2 * (sd + 2), 0);
    for (size_t i = 0; i < sd; ++i) out_pads[sd + 2 + 2 + i] = extra[i];
    y = c.b.pad(y, out_pads, "constant", 0.0, t);
    if (!bias.empty()) {
      std::vector<int64_t> bshape{-1};
      bshape.insert(bshape.end(), sd, 1);
      y = c.b.op1("Add", {y, c.b.reshape(bias, bshape)});
    }
    return c.out(n, y);
  }
  c.out(n, c.b.op1("Conv", in, attrs));
}

// aten::conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups)
void conv_nd(Ctx& c, const TNode* n) {
  ConvArgs a;
  a.stride = c.ints(n, 3);
  if (c.in(n, 4).is_const() && c.in(n, 4).c.isString())
    a.pad_mode = c.str(n, 4);
  else
    a.padding = c.ints(n, 4);
  a.dilation = c.ints(n, 5);
  a.groups = c.i(n, 6);
  emit_conv(c, n, a);
}

// aten::conv_transpose{1,2,3}d(input, weight, bias, stride, padding, output_padding, groups, dilation)
void conv_transpose_nd(Ctx& c, const TNode* n) {
  ConvArgs a;
  a.transposed = true;
  a.stride = c.ints(n, 3);
  a.padding = c.ints(n, 4);
  a.output_padding = c.ints(n, 5);
  a.groups = c.i(n, 6);
  a.dilation = c.ints(n, 7);
  emit_conv(c, n, a);
}

// aten::_convolution / aten::convolution(input, weight, bias, stride, padding, dilation, transposed,
// output_padding, groups, ...)
void convolution(Ctx& c, const TNode* n) {
  ConvArgs a;
  a.stride = c.ints(n, 3);
  a.padding = c.ints(n, 4);
  a.dilation = c.ints(n, 5);
  a.transposed = c.flag(n, 6);
  a.output_padding = c.ints(n, 7);
  a.groups = c.i(n, 8);
  emit_conv(c, n, a);
}

// Pads that make floor-mode pooling produce torch's ceil-mode size (torch drops a last window
// that would start in the right padding; ONNX's ceil_mode does not everywhere).
bool ceil_pads(const std::vector<int64_t>& in, const std::vector<int64_t>& k, const std::vector<int64_t>& s,
               const std::vector<int64_t>& d, std::vector<int64_t>& pads) {
  size_t sd = k.size();
  for (size_t i = 0; i < sd; ++i) {
    if (in[i] < 0) return false;
    int64_t eff = d[i] * (k[i] - 1) + 1;
    int64_t span = in[i] + pads[i] + pads[i + sd] - eff;
    int64_t out = (span + s[i] - 1) / s[i] + 1;
    if ((out - 1) * s[i] >= in[i] + pads[i]) --out;
    int64_t need = (out - 1) * s[i] + eff - in[i] - pads[i];
    pads[i + sd] = std::max(pads[i + sd], need);
  }
  return true;
}

struct PoolArgs {
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool ceil = false;
};

// An index flat over the whole tensor (ONNX MaxPool's) as torch's, flat within its (n, c) plane:
// idx mod plane, for non-negative int64 idx.
std::string within_plane(Ctx& c, const std::string& idx, const std::string& plane) {
  return c.b.op1("Sub", {idx, c.b.op1("Mul", {c.b.op1("Div", {idx, plane}), plane})});
}

// MaxPool's Indices count over the whole tensor (row-major); torch's over each (n, c) plane:
// the remainder by the plane's size.
// `lead`: dims x has before the input's own (1 for an unbatched input pooled as a batch of one).
std::string pool_indices(Ctx& c, const TNode* n, const std::vector<Attribute>& attrs, const std::string& x, size_t sd,
                         int64_t lead = 0) {
  std::vector<int64_t> shape = c.shape(n, 0);
  auto idx = c.b.op("MaxPool", {x}, attrs, 2)[1];
  int64_t area = 1;
  for (size_t i = shape.size() - sd; i < shape.size(); ++i) area = shape[i] < 0 || area < 0 ? -1 : area * shape[i];
  std::string plane;
  if (area >= 0) {
    plane = c.b.i64(area);
  } else {
    for (size_t i = shape.size() - sd; i < shape.size(); ++i) {
      std::string d = c.b.dim(x, static_cast<int64_t>(i) + lead);
      plane = plane.empty() ? d : c.b.op1("Mul", {plane, d});
    }
  }
  return within_plane(c, idx, plane);
}

// `divisor`: average pooling that divides each window's sum by this instead of its size.
void emit_pool(Ctx& c, const TNode* n, const std::string& op, PoolArgs p, bool count_include_pad,
               std::optional<int64_t> divisor = std::nullopt) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  size_t sd = p.kernel.size();
  std::vector<int64_t> in_shape = c.shape(n, 0);
  std::vector<int64_t> spatial(in_shape.end() - static_cast<long>(sd), in_shape.end());
  // An unbatched input (C, spatial...) pools as a batch of one.
  bool unbatched = static_cast<size_t>(r) == sd + 1;
  std::string x = c.t_as(n, 0, t);
  if (unbatched) x = c.b.unsqueeze(x, {0});
  auto unbatch = [&](const std::string& y) { return unbatched ? c.b.squeeze(y, {0}) : y; };
  auto stride = p.stride.empty() ? p.kernel : expand(p.stride, sd);
  auto dil = p.dilation.empty() ? std::vector<int64_t>(sd, 1) : expand(p.dilation, sd);
  auto pads = both_sides(expand(p.padding, sd));
  const std::vector<int64_t> real_pads = pads;
  bool ceil_attr = false;
  if (p.ceil && !ceil_pads(spatial, p.kernel, stride, dil, pads)) ceil_attr = true;
  // torch's divisor with count_include_pad counts the padding but not the part of the last window
  // that ceil_mode lets run past it; ONNX counts that too. Per-position divisors, static sizes.
  std::vector<std::vector<double>> ceil_divisors;
  if (op == "AveragePool" && count_include_pad && p.ceil && !ceil_attr && !divisor && pads != real_pads) {
    for (size_t i = 0; i < sd; ++i) {
      int64_t span = spatial[i] + pads[i] + pads[i + sd] - p.kernel[i];
      int64_t out = span / stride[i] + 1;
      std::vector<double> dv;
      for (int64_t o = 0; o < out; ++o) {
        int64_t start = o * stride[i] - real_pads[i];
        int64_t end = std::min(start + p.kernel[i], spatial[i] + real_pads[i + sd]);
        dv.push_back(static_cast<double>(end - start));
      }
      ceil_divisors.push_back(std::move(dv));
    }
  }
  if (divisor && ceil_attr) throw UnsupportedError("avg_pool with divisor_override and ceil_mode on dynamic sizes");
  std::vector<Attribute> attrs{Attribute::make_ints("kernel_shape", p.kernel), Attribute::make_ints("strides", stride),
                               Attribute::make_ints("pads", pads)};
  bool unit_dil = true;
  for (int64_t v : dil) unit_dil = unit_dil && v == 1;
  if (!unit_dil) {
    c.b.require(10, "pooling with dilation");
    attrs.push_back(Attribute::make_ints("dilations", dil));
  }
  if (ceil_attr) {
    c.b.require(10, "pooling with ceil_mode on dynamic sizes");
    attrs.push_back(Attribute::make_int("ceil_mode", 1));
  }
  if (op == "AveragePool") attrs.push_back(Attribute::make_int("count_include_pad", count_include_pad));
  auto outs = c.b.op(op, {x}, attrs, 1);
  if (!ceil_divisors.empty()) {
    Dims dims{1, 1};
    int64_t count = 1, area = 1;
    for (const auto& dv : ceil_divisors) {
      dims.push_back(static_cast<int64_t>(dv.size()));
      count *= static_cast<int64_t>(dv.size());
    }
    for (int64_t k : p.kernel) area *= k;
    std::vector<float> w(static_cast<size_t>(count));
    for (int64_t e = 0; e < count; ++e) {
      double prod = 1;
      int64_t rest = e;
      for (size_t i = sd; i-- > 0;) {
        int64_t len = static_cast<int64_t>(ceil_divisors[i].size());
        prod *= ceil_divisors[i][static_cast<size_t>(rest % len)];
        rest /= len;
      }
      w[static_cast<size_t>(e)] = static_cast<float>(static_cast<double>(area) / prod);  // ONNX's mean -> torch's
    }
    std::string k = c.b.constant(Tensor::from_vector<float>(w, dims), "pool_divisors");
    outs[0] = c.b.op1("Mul", {outs[0], t == DType::Float ? k : c.b.cast(k, t)});
  }
  if (divisor) {
    // Every window lies inside the (ceil-extended) padding, so mean * kernel size is its sum.
    int64_t area = 1;
    for (int64_t k : p.kernel) area *= k;
    outs[0] = c.b.op1("Div", {c.b.op1("Mul", {outs[0], c.b.scalar(static_cast<double>(area), t)}),
                              c.b.scalar(static_cast<double>(*divisor), t)});
  }
  c.out(n, 0, unbatch(outs[0]));
  if (n->outputs().size() > 1) {
    if (!n->output(1)->hasUses()) return c.set(n->output(1), TV::constant(c10::IValue()));
    if (op != "MaxPool") throw UnsupportedError("indices of " + op);
    c.out(n, 1, unbatch(pool_indices(c, n, attrs, x, sd, unbatched ? 1 : 0)));
  }
}

// aten::max_pool{1,2,3}d(input, kernel_size, stride, padding, dilation, ceil_mode)
void max_pool(Ctx& c, const TNode* n) {
  PoolArgs p{c.ints(n, 1), c.ints(n, 2), c.ints(n, 3), c.ints(n, 4), c.flag(n, 5)};
  p.kernel = expand(p.kernel, static_cast<size_t>(c.rank(n, 0) - 2));
  emit_pool(c, n, "MaxPool", p, false);
}

// aten::max_unpool2d(x, indices, output_size) / max_unpool3d(x, indices, output_size, stride, padding):
// torch's indices are flat within each (n, c) plane of the output, so each plane is a scatter of x
// into zeros of the output's size.
void max_unpool(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  size_t sd = n->kind().toQualString() == std::string("aten::max_unpool3d") ? 3 : 2;
  int lead = r - static_cast<int>(sd);
  if (lead < 1) throw UnsupportedError(std::string(n->kind().toQualString()) + " of rank " + std::to_string(r));
  std::string x = c.t_as(n, 0, t), idx = c.t_as(n, 1, DType::Int64);
  std::string sizes = c.is_const(n, 2) ? c.b.i64s(c.ints(n, 2)) : c.ints_tensor(c.in(n, 2));
  std::string leading = c.b.slice(c.b.shape_of(x), {0}, {lead}, {0});
  std::string flat = c.b.concat({leading, c.b.i64s({-1})}, 0);
  std::string plane = c.b.reduce("ReduceProd", sizes, {0}, true);
  std::string zeros = c.b.op1("Expand", {c.b.scalar(0, t), c.b.concat({leading, plane}, 0)});
  std::string out = c.b.op1(c.b.opset() >= 11 ? "ScatterElements" : "Scatter",
                            {zeros, c.b.op1("Reshape", {idx, flat}), c.b.op1("Reshape", {x, flat})},
                            {Attribute::make_int("axis", lead)});
  c.out(n, c.b.op1("Reshape", {out, c.b.concat({leading, sizes}, 0)}));
}

// aten::avg_pool{1,2,3}d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
void avg_pool(Ctx& c, const TNode* n) {
  PoolArgs p{c.ints(n, 1), c.ints(n, 2), c.ints(n, 3), {}, c.flag(n, 4)};
  p.kernel = expand(p.kernel, static_cast<size_t>(c.rank(n, 0) - 2));
  bool include = c.flag(n, 5);
  if (n->inputs().size() > 6 && !c.is_none(n, 6)) {
    // Sum pooling: padding counts as zeros, and the divisor replaces the window size.
    int64_t d = c.i(n, 6);
    if (d == 0) throw UnsupportedError("avg_pool with divisor_override=0");
    return emit_pool(c, n, "AveragePool", p, true, d);
  }
  bool any_pad = false;
  for (int64_t v : p.padding) any_pad = any_pad || v != 0;
  emit_pool(c, n, "AveragePool", p, include && any_pad);
}

// torch's indices of adaptive max pooling on x (N, C, spatial...): for each output position the
// first position (row-major, flat within its (n, c) plane) of its window's maximum. Each window is
// cut, flattened and ArgMax'ed (ArgMax keeps the first maximum, as torch does); its position in the
// window becomes the plane's by the window's start and widths. Static spatial sizes.
std::string adaptive_max_indices(Ctx& c, const std::string& x, const std::vector<int64_t>& spatial,
                                 const std::vector<int64_t>& out) {
  size_t sd = spatial.size();
  int64_t windows = 1;
  for (size_t i = 0; i < sd; ++i) {
    if (spatial[i] < 0) throw UnsupportedError("adaptive max pooling indices with dynamic spatial sizes");
    windows *= out[i];
  }
  bool divisible = true;
  int64_t plane = 1;
  for (size_t i = 0; i < sd; ++i) {
    divisible = divisible && spatial[i] % out[i] == 0;
    plane *= spatial[i];
  }
  if (divisible) {  // equal windows: MaxPool's indices (flat over the whole tensor) within the plane
    std::vector<int64_t> k;
    for (size_t i = 0; i < sd; ++i) k.push_back(spatial[i] / out[i]);
    std::string idx = c.b.op("MaxPool", {x}, {Attribute::make_ints("kernel_shape", k), Attribute::make_ints("strides", k)},
                             2)[1];
    return within_plane(c, idx, c.b.i64(plane));
  }
  if (windows > 4096) throw UnsupportedError("adaptive max pooling indices of more than 4096 windows per plane");
  std::vector<std::string> parts;
  std::vector<int64_t> flat{0, 0, -1};
  for (int64_t w = 0; w < windows; ++w) {
    std::vector<int64_t> starts(sd), ends(sd), axes(sd), pos(sd);
    for (size_t i = sd, rest = static_cast<size_t>(w); i-- > 0;) {
      pos[i] = static_cast<int64_t>(rest % static_cast<size_t>(out[i]));
      rest /= static_cast<size_t>(out[i]);
    }
    for (size_t i = 0; i < sd; ++i) {
      starts[i] = pos[i] * spatial[i] / out[i];
      ends[i] = ((pos[i] + 1) * spatial[i] + out[i] - 1) / out[i];
      axes[i] = static_cast<int64_t>(2 + i);
    }
    std::string local = c.b.op1("ArgMax", {c.b.reshape(c.b.slice(x, starts, ends, axes), flat)},
                                {Attribute::make_int("axis", 2), Attribute::make_int("keepdims", 1)});
    // local = sum_i (p_i * radix_i), radix over the window's widths; the plane index is
    // sum_i (start_i + p_i) * stride_i, stride over the input's sizes.
    std::string idx;
    int64_t offset = 0, radix = 1, stride = 1;
    for (size_t i = sd; i-- > 0;) {
      int64_t width = ends[i] - starts[i];
      std::string p = radix == 1 ? local : c.b.op1("Div", {local, c.b.i64(radix)});
      if (i > 0) p = within_plane(c, p, c.b.i64(width));  // p mod width
      if (stride != 1) p = c.b.op1("Mul", {p, c.b.i64(stride)});
      idx = idx.empty() ? p : c.b.op1("Add", {idx, p});
      offset += starts[i] * stride;
      radix *= width;
      stride *= spatial[i];
    }
    if (offset) idx = c.b.op1("Add", {idx, c.b.i64(offset)});
    parts.push_back(idx);
  }
  std::string all = parts.size() == 1 ? parts[0] : c.b.concat(parts, 2);
  std::vector<int64_t> shape{0, 0};
  shape.insert(shape.end(), out.begin(), out.end());
  return c.b.reshape(all, shape);
}

// A traced nn.AdaptiveAvgPool2d((1, None)) (CRNN's height pooling) builds its output size from
// the input's own size: [1, x.size(3)], a computed list. Its elements that are x's size along
// their own axis keep that axis (-2, as None does); the others must be constants. Empty when the
// list is not of that form.
std::vector<int64_t> sizes_kept_from_input(const TNode* n, int rank) {
  const torch::jit::Node* list = n->input(1)->node();
  if (list->kind() != c10::prim::ListConstruct) return {};
  const int64_t sd = static_cast<int64_t>(list->inputs().size());
  std::vector<int64_t> out;
  for (int64_t i = 0; i < sd; ++i) {
    const torch::jit::Value* v = list->input(static_cast<size_t>(i));
    if (auto k = torch::jit::toIValue(v); k && k->isInt()) {
      out.push_back(k->toInt());
      continue;
    }
    while (v->node()->kind() == c10::aten::Int || v->node()->kind() == c10::prim::NumToTensor) v = v->node()->input(0);
    const torch::jit::Node* size = v->node();
    if (size->kind() != c10::aten::size || size->inputs().size() != 2 || size->input(0) != n->input(0)) return {};
    auto axis = torch::jit::toIValue(size->input(1));
    if (!axis || !axis->isInt() || rank <= 0) return {};
    int64_t a = axis->toInt() < 0 ? axis->toInt() + rank : axis->toInt();
    if (a != rank - sd + i) return {};
    out.push_back(-2);
  }
  return out;
}

// Adaptive average pooling to output sizes computed at run time (F.interpolate(mode="area") with a
// scale factor, traced): output index j of an axis of length L pooled to O averages
// [floor(j * L / O), ceil((j + 1) * L / O)), here as differences of running sums over the axis, in
// double (exact to float precision), one axis at a time. Opset 11 (CumSum, Range).
void adaptive_avg_computed(Ctx& c, const TNode* n, int r) {
  c.b.require(11, "adaptive average pooling to a computed size");
  auto& b = c.b;
  DType t = c.out_dtype(n);
  std::string sizes = c.ints_tensor(c.in(n, 1));
  std::string y = b.cast(c.t_as(n, 0, t), DType::Double);
  // The list's length is the number of spatial axes, the last ones of the input.
  const TV& list = c.in(n, 1);
  int64_t count = list.kind == TV::Kind::List ? static_cast<int64_t>(list.items.size()) : -1;
  if (count < 1 || count > r) throw UnsupportedError("adaptive pooling to a computed size list of unknown length");
  for (int64_t i = 0; i < count; ++i) {
    const int64_t axis = r - count + i;
    std::string len = b.slice(b.shape_of(y), {axis}, {axis + 1}, {0});          // [1]
    std::string o = b.slice(sizes, {i}, {i + 1}, {0});                         // [1]
    std::string j = b.op1("Range", {b.i64(0), b.squeeze(o, {0}), b.i64(1)});  // [O]
    std::string lo = b.op1("Div", {b.op1("Mul", {j, len}), o});
    std::string next = b.op1("Add", {j, b.i64(1)});
    std::string hi = b.op1("Div", {b.op1("Add", {b.op1("Mul", {next, len}), b.op1("Sub", {o, b.i64s({1})})}), o});
    std::vector<int64_t> pads(static_cast<size_t>(2 * r), 0);
    pads[static_cast<size_t>(axis)] = 1;
    std::string sums = b.op1("CumSum", {b.pad(y, pads, "constant", 0.0, DType::Double), b.i64(axis)});
    std::string total = b.op1("Sub", {b.op1("Gather", {sums, hi}, {Attribute::make_int("axis", axis)}),
                                      b.op1("Gather", {sums, lo}, {Attribute::make_int("axis", axis)})});
    std::vector<int64_t> along(static_cast<size_t>(r), 1);
    along[static_cast<size_t>(axis)] = -1;
    std::string count_along = b.reshape(b.cast(b.op1("Sub", {hi, lo}), DType::Double), along);
    y = b.op1("Div", {total, count_along});
  }
  c.out(n, 0, b.cast(y, t));
  if (n->outputs().size() > 1 && n->output(1)->hasUses()) throw UnsupportedError("adaptive pooling indices to a computed size");
}

// Adaptive pooling: equal windows become one pool; otherwise each output index reduces its own
// [floor(i*in/out), ceil((i+1)*in/out)) window, one spatial axis at a time (exact for mean and max).
void adaptive_pool(Ctx& c, const TNode* n, bool is_max) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  std::vector<int64_t> in_shape = c.shape(n, 0);
  const TV& osz = c.in(n, 1);
  std::vector<int64_t> out;
  if (osz.is_const() && osz.c.isList()) {
    for (const auto& e : osz.c.toListRef()) out.push_back(e.isNone() ? -2 : e.toInt());
  } else if (auto kept = sizes_kept_from_input(n, r); !kept.empty()) {
    out = kept;
  } else {
    try {
      out = c.ints(n, 1);
    } catch (const UnsupportedError&) {
      if (is_max) throw;
      return adaptive_avg_computed(c, n, r);
    }
  }
  size_t sd = out.size();
  out = expand(out, sd);
  std::vector<int64_t> spatial(in_shape.end() - static_cast<long>(sd), in_shape.end());
  for (size_t i = 0; i < sd; ++i)
    if (out[i] == -2) out[i] = spatial[i];
  std::string x = c.t_as(n, 0, t);
  // An unbatched input (C, spatial...) pools as a batch of one.
  bool unbatched = static_cast<size_t>(r) == sd + 1;
  if (unbatched) {
    x = c.b.unsqueeze(x, {0});
    ++r;
  }
  auto unbatch = [&](const std::string& y) { return unbatched ? c.b.squeeze(y, {0}) : y; };
  bool ones = true;
  for (int64_t o : out) ones = ones && o == 1;
  auto finish = [&](const std::string& y) {
    c.out(n, 0, unbatch(y));
    if (n->outputs().size() > 1) {
      if (!n->output(1)->hasUses()) return c.set(n->output(1), TV::constant(c10::IValue()));
      c.out(n, 1, unbatch(adaptive_max_indices(c, x, spatial, out)));
    }
  };
  if (ones) return finish(c.b.op1(is_max ? "GlobalMaxPool" : "GlobalAveragePool", {x}));
  bool divisible = true;
  for (size_t i = 0; i < sd; ++i) divisible = divisible && spatial[i] > 0 && spatial[i] % out[i] == 0;
  if (divisible) {
    std::vector<int64_t> k;
    for (size_t i = 0; i < sd; ++i) k.push_back(spatial[i] / out[i]);
    return finish(c.b.op1(is_max ? "MaxPool" : "AveragePool", {x},
                          {Attribute::make_ints("kernel_shape", k), Attribute::make_ints("strides", k)}));
  }
  std::string y = x;
  for (size_t i = 0; i < sd; ++i) {
    int64_t axis = r - static_cast<int64_t>(sd) + static_cast<int64_t>(i);
    int64_t in = spatial[i], o = out[i];
    if (in == o) continue;
    std::vector<std::string> parts;
    // A dynamic length computes the same window bounds at run time.
    std::string len = in < 0 ? c.b.unsqueeze(c.b.dim(x, axis), {0}) : std::string();
    auto bound = [&](int64_t j, bool up) {
      std::string num = c.b.op1("Mul", {len, c.b.i64s({j})});
      if (up) num = c.b.op1("Add", {num, c.b.i64s({o - 1})});
      return c.b.op1("Div", {num, c.b.i64s({o})});
    };
    for (int64_t j = 0; j < o; ++j) {
      std::string sl = in >= 0 ? c.b.slice(y, {(j * in) / o}, {((j + 1) * in + o - 1) / o}, {axis})
                               : c.b.slice_dyn(y, bound(j, false), bound(j + 1, true), c.b.i64s({axis}));
      parts.push_back(c.b.reduce(is_max ? "ReduceMax" : "ReduceMean", sl, {axis}, true));
    }
    y = c.b.concat(parts, axis);
  }
  finish(y);
}
void adaptive_avg(Ctx& c, const TNode* n) { adaptive_pool(c, n, false); }
void adaptive_max(Ctx& c, const TNode* n) { adaptive_pool(c, n, true); }

}  // namespace

void register_conv_ops(OpTable& t) {
  t["aten::conv1d"] = {conv_nd};
  t["aten::conv2d"] = {conv_nd};
  t["aten::conv3d"] = {conv_nd};
  t["aten::conv_transpose1d"] = {conv_transpose_nd};
  t["aten::conv_transpose2d"] = {conv_transpose_nd};
  t["aten::conv_transpose3d"] = {conv_transpose_nd};
  t["aten::_convolution"] = {convolution};
  t["aten::convolution"] = {convolution};
  t["aten::_convolution_mode"] = {conv_nd};  // traced conv with padding="same" / "valid"
  t["aten::max_pool1d"] = {max_pool};
  t["aten::max_pool2d"] = {max_pool};
  t["aten::max_pool3d"] = {max_pool};
  t["aten::max_pool1d_with_indices"] = {max_pool};
  t["aten::max_pool2d_with_indices"] = {max_pool};
  t["aten::max_pool3d_with_indices"] = {max_pool};
  t["aten::max_unpool2d"] = {max_unpool};
  t["aten::max_unpool3d"] = {max_unpool};
  t["aten::avg_pool1d"] = {avg_pool};
  t["aten::avg_pool2d"] = {avg_pool};
  t["aten::avg_pool3d"] = {avg_pool};
  t["aten::adaptive_avg_pool1d"] = {adaptive_avg};
  t["aten::adaptive_avg_pool2d"] = {adaptive_avg};
  t["aten::adaptive_avg_pool3d"] = {adaptive_avg};
  t["aten::adaptive_max_pool1d"] = {adaptive_max};
  t["aten::adaptive_max_pool2d"] = {adaptive_max};
  t["aten::adaptive_max_pool3d"] = {adaptive_max};
}

}  // namespace t2o
