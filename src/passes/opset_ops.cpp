// Opset adapters for ops whose meaning changed (Softmax's axis at 13, Resize's coordinates at 11)
// and for ops newer than the target, written out with older ops.
#include <cfloat>
#include <cmath>
#include <unordered_map>

#include "passes/internal.h"
#include "passes/opset_adapt.h"

namespace t2o::passes {

namespace {

// Softmax, LogSoftmax, Hardmax: before 13 they flatten the input to 2-D at `axis` (default 1) and
// normalize each row; from 13 they normalize along the one `axis` (default -1).
void softmax(Adapt& a) {
  const std::string op = a.n.op_type;
  const std::string x = a.n.inputs.at(0);
  int r = a.rank_of_input(0);
  if (!a.crosses(13)) {
    int64_t axis = a.n.attr_int("axis", a.from >= 13 ? -1 : 1);
    if (a.to < 11 && axis < 0) a.n.set_attr(Attribute::make_int("axis", a.axis(axis, r))), a.touch();
    return;
  }
  if (!a.down()) {
    int64_t axis = a.n.attr_int("axis", 1);
    if (r >= 0 && (axis == r - 1 || axis == -1)) return a.finish(op, {x}, {Attribute::make_int("axis", -1)});
    std::string flat = a.emit1("Flatten", {x}, {Attribute::make_int("axis", axis)});
    std::string y = a.emit1(op, {flat}, {Attribute::make_int("axis", -1)});
    return a.finish("Reshape", {y, a.emit1("Shape", {x})});
  }
  int64_t axis = a.n.attr_int("axis", -1);
  if (r < 0) {
    if (axis == -1 && a.to >= 11) return a.finish(op, {x}, {Attribute::make_int("axis", -1)});
    a.fail("the input's rank is not known");
  }
  if (axis < 0) axis += r;
  if (axis == r - 1) return a.finish(op, {x}, {Attribute::make_int("axis", r - 1)});
  // Move the axis last, normalize rows, move it back.
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i)
    if (i != axis) perm.push_back(i);
  perm.push_back(axis);
  std::vector<int64_t> inv(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) inv[static_cast<size_t>(perm[static_cast<size_t>(i)])] = i;
  std::string t = a.emit1("Transpose", {x}, {Attribute::make_ints("perm", perm)});
  std::string y = a.emit1(op, {t}, {Attribute::make_int("axis", r - 1)});
  a.finish("Transpose", {y}, {Attribute::make_ints("perm", inv)});
}

// Resize as the opset-10 forms (Upsample 9, Resize 10) compute it: floor(i / scale) for nearest,
// x / scale for linear ("asymmetric"), with whole scales only (their output size is
// floor(in * scale), which a fractional float scale may round down).
struct ResizePlan {
  Dims in, out;
  std::string mode, coord, nearest;
};

std::optional<ResizePlan> resize_plan(Adapt& a) {
  ResizePlan p;
  p.mode = a.n.attr_string("mode", "nearest");
  p.coord = a.from >= 11 ? a.n.attr_string("coordinate_transformation_mode", "half_pixel") : "asymmetric";
  p.nearest = a.from >= 11 ? a.n.attr_string("nearest_mode", "round_prefer_floor") : "floor";
  int r = a.rank_of_input(0);
  if (r < 0) return std::nullopt;
  for (int k = 0; k < r; ++k) {
    int64_t i = a.dim_of(a.n.inputs[0], k), o = a.dim_of(a.n.outputs[0], k);
    if (k >= 2 && (i < 0 || o < 0)) return std::nullopt;
    p.in.push_back(i);
    p.out.push_back(o);
  }
  return p;
}

void to_resize10(Adapt& a, const std::vector<double>& scales, const std::string& mode) {
  std::vector<float> f(scales.begin(), scales.end());
  std::string sc = a.add_constant(Tensor::from_vector<float>(f, {static_cast<int64_t>(f.size())}), "scales");
  a.finish(a.to >= 10 ? "Resize" : "Upsample", {a.n.inputs[0], sc}, {Attribute::make_string("mode", mode)});
}

// Any separable resize of static spatial sizes: per axis, nearest picks (Gather) or a linear map
// (MatMul), found by running the node itself on one-hot inputs with the reference kernel.
void resize_by_matrices(Adapt& a, const ResizePlan& p) {
  if (p.coord == "tf_crop_and_resize") a.fail("tf_crop_and_resize needs opset 11");
  std::unordered_map<std::string, int64_t> opsets{{"", a.from}};
  std::string y = a.n.inputs[0];
  int r = static_cast<int>(p.in.size());
  DType t = a.dtype(y);
  for (int d = 2; d < r; ++d) {
    int64_t li = p.in[static_cast<size_t>(d)], lo = p.out[static_cast<size_t>(d)];
    if (li == lo && (p.mode == "nearest" || p.coord != "tf_half_pixel_for_nn")) continue;
    Dims bd(static_cast<size_t>(r), 1), od(static_cast<size_t>(r), 1);
    bd[0] = li;
    bd[static_cast<size_t>(d)] = li;
    od[0] = li;
    od[static_cast<size_t>(d)] = lo;
    Tensor basis(DType::Float, bd);
    for (int64_t k = 0; k < li; ++k) basis.data<float>()[k * li + k] = 1.0f;
    Node probe = a.n;
    probe.outputs = {"y"};
    // The probe resizes axis d alone, with the node's own scale when it has one (its coordinates
    // follow the scale, not out/in).
    Tensor sizes = Tensor::from_vector<int64_t>(od, {r});
    Tensor empty_f(DType::Float, {0}), scales;
    const Tensor* given = a.n.has_input(2) ? a.constant(2) : nullptr;
    probe.inputs = {"x", "roi", "scales", "sizes"};
    std::vector<const Tensor*> ins{&basis, &empty_f, &empty_f, &sizes};
    if (given && given->numel() == r) {
      std::vector<float> sc(static_cast<size_t>(r), 1.0f);
      sc[static_cast<size_t>(d)] = static_cast<float>(given->as_double(d));
      scales = Tensor::from_vector<float>(sc, {r});
      probe.inputs.pop_back();
      ins = {&basis, &empty_f, &scales};
    } else if (a.n.has_input(2) && !given) {
      a.fail("its scales are computed at run time");
    }
    auto out = evaluate_node(probe, ins, opsets);
    if (!out || out->at(0).dims() != od) a.fail("the runtime cannot evaluate it to rewrite it");
    const Tensor& m = out->at(0);  // m[k, ..., o, ...] = weight of input k in output o
    if (p.mode == "nearest") {
      std::vector<int64_t> idx(static_cast<size_t>(lo), -1);
      for (int64_t k = 0; k < li; ++k)
        for (int64_t o = 0; o < lo; ++o)
          if (m.data<float>()[k * lo + o] == 1.0f) idx[static_cast<size_t>(o)] = k;
      for (int64_t v : idx)
        if (v < 0) a.fail("its nearest picks could not be read back");
      y = a.emit1("Gather", {y, a.i64s(idx)}, {Attribute::make_int("axis", d)});
      continue;
    }
    if (t != DType::Float && t != DType::Double) a.fail("linear and cubic modes before opset 11 need float input");
    // W [li, lo]: y' = y @ W along the last axis; the axis is moved last and back if needed.
    std::vector<double> w(static_cast<size_t>(li * lo));
    for (int64_t k = 0; k < li; ++k)
      for (int64_t o = 0; o < lo; ++o) w[static_cast<size_t>(k * lo + o)] = m.data<float>()[k * lo + o];
    std::string wn = a.add_constant(from_doubles(w, {li, lo}, t), "resize_weights");
    if (d == r - 1) {
      y = a.emit1("MatMul", {y, wn});
    } else {
      std::vector<int64_t> perm;
      for (int i = 0; i < r; ++i) perm.push_back(i);
      std::swap(perm[static_cast<size_t>(d)], perm.back());
      y = a.emit1("Transpose", {y}, {Attribute::make_ints("perm", perm)});
      y = a.emit1("MatMul", {y, wn});
      y = a.emit1("Transpose", {y}, {Attribute::make_ints("perm", perm)});
    }
  }
  a.finish_as(y);
}

void resize(Adapt& a) {
  bool upsample = a.n.op_type == "Upsample";
  if (!a.down()) {
    if (a.to >= 10 && upsample) a.n.op_type = "Resize", a.touch();
    if (a.from >= 11 || a.to < 11) return;
    // The opset-10 meaning, said explicitly in the opset-11 form.
    std::string mode = a.n.attr_string("mode", "nearest");
    std::vector<Attribute> attrs{Attribute::make_string("mode", mode),
                                 Attribute::make_string("coordinate_transformation_mode", "asymmetric")};
    if (mode == "nearest") attrs.push_back(Attribute::make_string("nearest_mode", "floor"));
    std::string roi = a.to >= 13 ? std::string() : a.add_constant(Tensor(DType::Float, {0}), "roi");
    return a.finish("Resize", {a.n.inputs[0], roi, a.n.inputs[1]}, attrs);
  }
  if (a.from >= 13 && a.to >= 11 && a.to < 13) {
    // roi and scales are required inputs at 11 and 12 (empty tensors when unused).
    a.n.inputs.resize(std::max<size_t>(a.n.inputs.size(), 3));
    for (size_t k : {size_t{1}, size_t{2}})
      if (a.n.inputs[k].empty()) a.n.inputs[k] = a.add_constant(Tensor(DType::Float, {0}), k == 1 ? "roi" : "scales");
    return a.touch();
  }
  if (a.to >= 11) return;
  if (a.from < 11) {
    if (a.to < 10 && !upsample) a.n.op_type = "Upsample", a.touch();
    return;
  }
  auto p = resize_plan(a);
  if (!p) a.fail("its spatial sizes are not static, which opsets before 11 need");
  bool nc_same = p->in[0] == p->out[0] && p->in[1] == p->out[1];
  bool whole = nc_same;
  std::vector<double> scales{1.0, 1.0};
  for (size_t k = 2; k < p->in.size(); ++k) {
    whole = whole && p->in[k] > 0 && p->out[k] % p->in[k] == 0;
    scales.push_back(p->in[k] > 0 ? static_cast<double>(p->out[k]) / static_cast<double>(p->in[k]) : 1.0);
  }
  bool same_meaning = p->coord == "asymmetric" && (p->mode == "linear" || (p->mode == "nearest" && p->nearest == "floor"));
  if (same_meaning && whole) return to_resize10(a, scales, p->mode);
  if (!nc_same && p->in[0] >= 0) a.fail("it resizes the batch or channel axis");
  resize_by_matrices(a, *p);
}

// a == b for the target: Equal takes floats only from opset 11 (before: neither a < b nor a > b,
// nor NaN), and before 11 only bool/int32/int64.
std::string equal(Adapt& a, const std::string& x, const std::string& y, DType t) {
  if (a.to >= 11 || t == DType::Bool || t == DType::Int32 || t == DType::Int64) return a.emit1("Equal", {x, y});
  if (!dtype_is_float(t)) {
    auto c = [&](const std::string& v) { return a.emit1("Cast", {v}, {Attribute::make_int("to", static_cast<int64_t>(DType::Int64))}); };
    return a.emit1("Equal", {c(x), c(y)});
  }
  std::string ordered = a.emit1("Or", {a.emit1("Less", {x, y}), a.emit1("Greater", {x, y})});
  std::string nan = a.emit1("Or", {a.emit1("IsNaN", {x}), a.emit1("IsNaN", {y})});
  return a.emit1("Not", {a.emit1("Or", {ordered, nan})});
}

void equal_op(Adapt& a) {
  if (!(a.down() && a.to < 11)) return;
  DType t = a.dtype(a.n.inputs[0]);
  if (t == DType::Undefined) a.fail("the input's element type is not known");
  if (t == DType::Bool || t == DType::Int32 || t == DType::Int64) return;
  a.finish_as(equal(a, a.n.inputs[0], a.n.inputs[1], t));
}

void or_equal(Adapt& a) {
  if (a.to >= 12) return;
  DType t = a.dtype(a.n.inputs[0]);
  if (t == DType::Undefined) a.fail("the input's element type is not known");
  const std::string &x = a.n.inputs[0], &y = a.n.inputs[1];
  // Not Greater would call NaN <= 1 true.
  std::string strict = a.emit1(a.n.op_type == "LessOrEqual" ? "Less" : "Greater", {x, y});
  a.finish("Or", {strict, equal(a, x, y, t)});
}

void layer_norm(Adapt& a) {
  if (a.to >= 17) return;
  for (size_t k = 1; k < a.n.outputs.size(); ++k)
    if (!a.n.outputs[k].empty()) a.fail("its Mean/InvStdDev outputs have no equivalent before opset 17");
  int r = a.rank_of_input(0);
  DType t = a.dtype(a.n.inputs[0]);
  if (r < 0 || t == DType::Undefined) a.fail("the input's rank and element type are not known");
  int64_t axis = a.n.attr_int("axis", -1);
  if (axis < 0) axis += r;
  std::vector<int64_t> axes;
  for (int64_t i = axis; i < r; ++i) axes.push_back(i);
  const std::string& x = a.n.inputs[0];
  std::vector<Attribute> red{Attribute::make_ints("axes", axes), Attribute::make_int("keepdims", 1)};
  std::string mean = a.emit1("ReduceMean", {x}, red);
  std::string d = a.emit1("Sub", {x, mean});
  std::string var = a.emit1("ReduceMean", {a.emit1("Mul", {d, d})}, red);
  std::string eps = a.add_constant(from_doubles({a.n.attr_float("epsilon", 1e-5f)}, {}, t), "epsilon");
  std::string y = a.emit1("Div", {d, a.emit1("Sqrt", {a.emit1("Add", {var, eps})})});
  if (!a.n.has_input(2)) return a.finish("Mul", {y, a.n.inputs[1]});
  a.finish("Add", {a.emit1("Mul", {y, a.n.inputs[1]}), a.n.inputs[2]});
}

void hard_swish(Adapt& a) {
  if (a.to >= 14) return;
  std::string hs = a.emit1("HardSigmoid", {a.n.inputs[0]},
                           {Attribute::make_float("alpha", 1.0f / 6), Attribute::make_float("beta", 0.5f)});
  a.finish("Mul", {a.n.inputs[0], hs});
}

void trilu(Adapt& a) {
  if (a.to >= 14) return;
  int r = a.rank_of_input(0);
  int64_t rows = r >= 2 ? a.dim_of(a.n.inputs[0], r - 2) : -1, cols = r >= 2 ? a.dim_of(a.n.inputs[0], r - 1) : -1;
  const Tensor* kt = a.constant(1);
  if (rows < 0 || cols < 0 || (a.n.has_input(1) && !kt)) a.fail("Trilu before opset 14 needs static matrix sizes and a constant k");
  int64_t k = kt ? kt->as_int(0) : 0;
  bool upper = a.n.attr_int("upper", 1) != 0;
  Tensor mask(DType::Bool, {rows, cols});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) mask.data<bool>()[i * cols + j] = upper ? j - i >= k : j - i <= k;
  DType t = a.dtype(a.n.inputs[0]);
  if (t == DType::Undefined) a.fail("the input's element type is not known");
  a.finish("Where", {a.add_constant(mask, "mask"), a.n.inputs[0], a.add_constant(from_doubles({0.0}, {}, t), "zero")});
}

// Round half to even: floor, plus one above 1/2 or at 1/2 with an odd floor (x - floor(x) is exact).
void round(Adapt& a) {
  if (a.to >= 11) return;
  DType t = a.dtype(a.n.inputs[0]);
  if (!dtype_is_float(t)) a.fail("the input's element type is not known");
  const std::string& x = a.n.inputs[0];
  auto c = [&](double v) { return a.add_constant(from_doubles({v}, {}, t), "c"); };
  std::string fl = a.emit1("Floor", {x});
  std::string frac = a.emit1("Sub", {x, fl});
  std::string half = c(0.5);
  std::string parity = a.emit1("Sub", {fl, a.emit1("Mul", {a.emit1("Floor", {a.emit1("Mul", {fl, half})}), c(2)})});
  std::string tie_up = a.emit1("And", {equal(a, frac, half, t), a.emit1("Greater", {parity, half})});
  std::string up = a.emit1("Or", {a.emit1("Greater", {frac, half}), tie_up});
  a.finish("Add", {fl, a.emit1("Cast", {up}, {Attribute::make_int("to", static_cast<int64_t>(t))})});
}

void is_inf(Adapt& a) {
  if (a.to >= 10) return;
  DType t = a.dtype(a.n.inputs[0]);
  if (t != DType::Float && t != DType::Double) a.fail("IsInf before opset 10 is written for float and double only");
  double big = t == DType::Float ? FLT_MAX : DBL_MAX;
  bool pos = a.n.attr_int("detect_positive", 1) != 0, neg = a.n.attr_int("detect_negative", 1) != 0;
  const std::string& x = a.n.inputs[0];
  std::string p = pos ? a.emit1("Greater", {x, a.add_constant(from_doubles({big}, {}, t), "max")}) : std::string();
  std::string q = neg ? a.emit1("Less", {x, a.add_constant(from_doubles({-big}, {}, t), "lowest")}) : std::string();
  if (p.empty() && q.empty()) return a.finish("Greater", {x, x});  // always false (NaN too)
  if (p.empty() || q.empty()) return a.finish_as(p.empty() ? q : p);
  a.finish("Or", {p, q});
}

void cast_like(Adapt& a) {
  if (a.to >= 15) return;
  DType t = a.dtype(a.n.inputs[1]);
  if (t == DType::Undefined) a.fail("the element type of its 'like' input is not known");
  a.finish("Cast", {a.n.inputs[0]}, {Attribute::make_int("to", static_cast<int64_t>(t))});
}

void range(Adapt& a) {
  if (a.to >= 11) return;
  std::vector<const Tensor*> ins;
  for (int k = 0; k < 3; ++k) {
    ins.push_back(a.constant(k));
    if (!ins.back()) a.fail("Range before opset 11 needs constant bounds");
  }
  auto out = evaluate_node(a.n, ins, {{"", a.from}});
  if (!out) a.fail("the runtime cannot evaluate it");
  a.finish_as(a.add_constant(out->at(0), "range"));
}

// GatherElements before opset 11: a Gather from the flattened data at flat offsets, the base
// offset of every output position being a constant (static shapes only).
void gather_elements(Adapt& a) {
  if (a.to >= 11) return;
  int r = a.rank_of_input(0);
  if (r < 1 || a.rank_of_input(1) != r) a.fail("its ranks are not known");
  Dims xs, is;
  for (int d = 0; d < r; ++d) {
    xs.push_back(a.dim_of(a.n.inputs[0], d));
    is.push_back(a.dim_of(a.n.inputs[1], d));
    if (xs.back() < 0 || is.back() < 0) a.fail("GatherElements before opset 11 needs static shapes");
  }
  int64_t axis = a.n.attr_int("axis", 0);
  if (axis < 0) axis += r;
  std::vector<int64_t> stride(static_cast<size_t>(r), 1);
  for (int d = r - 1; d > 0; --d) stride[static_cast<size_t>(d - 1)] = stride[static_cast<size_t>(d)] * xs[static_cast<size_t>(d)];
  int64_t total = numel_of(is);
  std::vector<int64_t> base(static_cast<size_t>(total), 0);
  for (int64_t k = 0; k < total; ++k) {
    int64_t rest = k;
    for (int d = r - 1; d >= 0; --d) {
      int64_t coord = rest % is[static_cast<size_t>(d)];
      rest /= is[static_cast<size_t>(d)];
      if (d != axis) base[static_cast<size_t>(k)] += coord * stride[static_cast<size_t>(d)];
    }
  }
  std::string idx = a.n.inputs[1];
  if (a.dtype(idx) != DType::Int64) idx = a.emit1("Cast", {idx}, {Attribute::make_int("to", static_cast<int64_t>(DType::Int64))});
  // Negative indices count from the end of the axis.
  std::string zero = a.add_constant(Tensor::scalar<int64_t>(0), "zero");
  std::string len = a.add_constant(Tensor::scalar<int64_t>(xs[static_cast<size_t>(axis)]), "len");
  idx = a.emit1("Where", {a.emit1("Less", {idx, zero}), a.emit1("Add", {idx, len}), idx});
  std::string offs = a.emit1("Mul", {idx, a.add_constant(Tensor::scalar<int64_t>(stride[static_cast<size_t>(axis)]), "stride")});
  std::string flat = a.emit1("Add", {a.add_constant(Tensor::from_vector<int64_t>(base, is), "base"), offs});
  std::string data = a.emit1("Reshape", {a.n.inputs[0], a.i64s({-1})});
  a.finish("Gather", {data, flat}, {Attribute::make_int("axis", 0)});
}

}  // namespace

// RoiAlign 16 added coordinate_transformation_mode, whose default (half_pixel) is not what the
// op did before (output_half_pixel, which also makes every roi at least one pixel).
void roi_align(Adapt& a) {
  if (!a.crosses(16)) return;
  const char* kMode = "coordinate_transformation_mode";
  if (a.at_target(16)) {
    if (!a.n.has_attr(kMode)) a.n.set_attr(Attribute::make_string(kMode, "output_half_pixel"));
  } else {
    if (a.n.attr_string(kMode, "half_pixel") != "output_half_pixel")
      a.fail("coordinate_transformation_mode half_pixel (torchvision's aligned=True) exists only from opset 16");
    drop_attr(a.n, kMode);
  }
  a.touch();
}

// QuantizeLinear/DequantizeLinear took per-axis scales (and the axis attribute) at opset 13; below
// that, scale and zero point are scalars and the attribute does not exist.
void quantize_linear(Adapt& a) {
  if (!a.crosses(13) || a.at_target(13) || !a.n.has_attr("axis")) return;
  const Tensor* scale = a.constant(1);
  bool scalar = scale ? scale->numel() == 1 : a.rank_of_input(1) == 0;
  if (!scalar) a.fail("per-axis (per-channel) quantization exists only from opset 13");
  drop_attr(a.n, "axis");
  a.touch();
}

void register_op_adapters(std::map<std::string, Adapter>& t) {
  t["Softmax"] = softmax;
  t["LogSoftmax"] = softmax;
  t["Hardmax"] = softmax;
  t["Resize"] = resize;
  t["Upsample"] = resize;
  t["Equal"] = equal_op;
  t["GreaterOrEqual"] = or_equal;
  t["LessOrEqual"] = or_equal;
  t["LayerNormalization"] = layer_norm;
  t["HardSwish"] = hard_swish;
  t["Trilu"] = trilu;
  t["Round"] = round;
  t["IsInf"] = is_inf;
  t["CastLike"] = cast_like;
  t["Range"] = range;
  t["GatherElements"] = gather_elements;
  t["RoiAlign"] = roi_align;
  t["QuantizeLinear"] = quantize_linear;
  t["DequantizeLinear"] = quantize_linear;
}

}  // namespace t2o::passes
