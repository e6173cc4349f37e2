// Opset adapters for ops whose arguments changed form across opsets 9..17 (attribute <-> input,
// new attributes with a default that old opsets cannot express, negative axes before 11).
#include <algorithm>
#include <climits>
#include <cmath>

#include "passes/opset_adapt.h"

namespace t2o::passes {

namespace {

bool any_negative(const std::vector<int64_t>& v) {
  return std::any_of(v.begin(), v.end(), [](int64_t x) { return x < 0; });
}

// An int list that is an attribute up to opset `v - 1` and input `input` from `v` on.
void move_ints(Adapt& a, const char* attr, int input, int64_t v, int rank_for_negative) {
  IntsArg arg = a.ints(attr, a.from >= v ? input : -1);
  bool normalize = a.to < 11 && arg.known && any_negative(arg.v);
  if (!a.crosses(v) && !normalize) return;
  if (!arg.known) a.fail(std::string("its ") + attr + " are computed at run time; opset " + std::to_string(a.to) +
                         " takes them only as an attribute");
  std::vector<int64_t> vals = a.axes(arg.v, rank_for_negative);
  Node& n = a.n;
  drop_attr(n, attr);
  if (a.at_target(v)) {
    if (n.inputs.size() <= static_cast<size_t>(input)) n.inputs.resize(static_cast<size_t>(input) + 1);
    n.inputs[static_cast<size_t>(input)] = arg.present ? a.i64s(vals) : std::string();
    while (!n.inputs.empty() && n.inputs.back().empty()) n.inputs.pop_back();
  } else {
    if (a.from >= v && n.inputs.size() > static_cast<size_t>(input)) n.inputs.resize(static_cast<size_t>(input));
    if (arg.present) n.set_attr(Attribute::make_ints(attr, vals));
  }
  a.touch();
}

void squeeze(Adapt& a) {
  int r = a.rank_of_input(0);
  IntsArg ax = a.ints("axes", a.from >= 13 ? 1 : -1);
  // Unsqueeze's axes count in the output's rank.
  if (a.n.op_type == "Unsqueeze" && r >= 0) r += static_cast<int>(ax.v.size());
  move_ints(a, "axes", 1, 13, r);
}

void reduce(Adapt& a) {
  int r = a.rank_of_input(0);
  if (a.n.op_type != "ReduceSum") {
    IntsArg ax = a.ints("axes", -1);
    if (a.to < 11 && any_negative(ax.v)) {
      a.n.set_attr(Attribute::make_ints("axes", a.axes(ax.v, r)));
      a.touch();
    }
    if (a.crosses(12) && a.down() && a.n.attr_int("select_last_index", 0)) a.fail("select_last_index needs opset 12");
    return;
  }
  if (a.down() && a.crosses(13)) {
    IntsArg ax = a.ints("axes", 1);
    bool noop = a.n.attr_int("noop_with_empty_axes", 0) != 0;
    drop_attr(a.n, "noop_with_empty_axes");
    if (noop && ax.known && ax.v.empty()) return a.finish_as(a.n.inputs[0]);  // reduces nothing
    if (noop && !ax.known) a.fail("noop_with_empty_axes with axes computed at run time");
  }
  move_ints(a, "axes", 1, 13, r);
}

void split(Adapt& a) {
  int r = a.rank_of_input(0);
  int64_t axis = a.n.attr_int("axis", 0);
  if (a.to < 11 && axis < 0) {
    a.n.set_attr(Attribute::make_int("axis", a.axis(axis, r)));
    a.touch();
  }
  move_ints(a, "split", 1, 13, -1);
}

// Ops with a single "axis" attribute that may be negative from opset 11.
void axis_attr(Adapt& a) {
  int64_t axis = a.n.attr_int("axis", 0);
  if (a.to >= 11 || axis >= 0) return;
  int r = a.rank_of_input(0);
  if (a.n.op_type == "OneHot" && r >= 0) r += 1;  // OneHot's axis counts in the output's rank
  a.n.set_attr(Attribute::make_int("axis", a.axis(axis, r)));
  a.touch();
}

void gather(Adapt& a) {
  axis_attr(a);
  if (a.to >= 11) return;
  const Tensor* idx = a.constant(1);
  if (!idx) return;
  std::vector<int64_t> v = to_ints(*idx);
  if (!any_negative(v)) return;
  int r = a.rank_of_input(0);
  int64_t axis = a.n.attr_int("axis", 0);
  if (axis < 0) axis += r;
  int64_t dim = a.dim_of(a.n.inputs[0], axis);
  if (dim < 0) a.fail("negative indices need the gathered dim's size, which is not known");
  for (int64_t& x : v)
    if (x < 0) x += dim;
  Tensor t = Tensor::from_vector<int64_t>(v, idx->dims());
  a.n.inputs[1] = a.add_constant(idx->dtype() == DType::Int64 ? t : from_doubles(to_doubles(t), t.dims(), idx->dtype()), "indices");
  a.touch();
}

void clip(Adapt& a) {
  DType t = a.dtype(a.n.inputs[0]);
  bool float_t = t == DType::Float || t == DType::Double || t == DType::Float16;
  if (!a.crosses(11) && !(a.down() && a.crosses(12) && !float_t)) return;
  if (a.down()) {
    // Inputs (11) to attributes (6), or Max/Min where the attribute form cannot say it.
    const Tensor* lo = a.constant(1);
    const Tensor* hi = a.constant(2);
    bool computed = (a.n.has_input(1) && !lo) || (a.n.has_input(2) && !hi);
    if (a.to < 11 && float_t && !computed) {
      a.n.inputs.resize(1);
      if (lo) a.n.set_attr(Attribute::make_float("min", static_cast<float>(lo->as_double(0))));
      if (hi) a.n.set_attr(Attribute::make_float("max", static_cast<float>(hi->as_double(0))));
      return a.touch();
    }
    std::string y = a.n.inputs[0];
    if (a.n.has_input(1)) y = a.emit1("Max", {y, a.n.inputs[1]});
    if (a.n.has_input(2)) y = a.emit1("Min", {y, a.n.inputs[2]});
    return a.finish_as(y);
  }
  if (t == DType::Undefined) a.fail("the input's element type is not known");
  std::vector<std::string> ins{a.n.inputs[0], "", ""};
  if (a.n.has_attr("min")) ins[1] = a.add_constant(from_doubles({a.n.attr_float("min", 0)}, {}, t), "min");
  if (a.n.has_attr("max")) ins[2] = a.add_constant(from_doubles({a.n.attr_float("max", 0)}, {}, t), "max");
  while (ins.back().empty()) ins.pop_back();
  a.n.inputs = ins;
  drop_attr(a.n, "min");
  drop_attr(a.n, "max");
  a.touch();
}

void pad(Adapt& a) {
  if (!a.crosses(11)) return;
  if (a.down()) {
    const Tensor* p = a.constant(1);
    if (!p) a.fail("its pads are computed at run time; before opset 11 they are an attribute");
    const Tensor* v = a.constant(2);
    if (a.n.has_input(2) && !v) a.fail("its pad value is computed at run time");
    a.n.set_attr(Attribute::make_ints("pads", to_ints(*p)));
    if (v) a.n.set_attr(Attribute::make_float("value", static_cast<float>(v->as_double(0))));
    a.n.inputs.resize(1);
    return a.touch();
  }
  std::vector<std::string> ins{a.n.inputs[0], a.i64s(a.n.attr_ints("pads"))};
  float value = a.n.attr_float("value", 0.0f);
  if (value != 0.0f) {
    DType t = a.dtype(a.n.inputs[0]);
    if (t == DType::Undefined) a.fail("the input's element type is not known");
    ins.push_back(a.add_constant(from_doubles({value}, {}, t), "value"));
  }
  drop_attr(a.n, "pads");
  drop_attr(a.n, "value");
  a.n.inputs = ins;
  a.touch();
}

void slice(Adapt& a) {
  int r = a.rank_of_input(0);
  if (!a.crosses(10)) {
    IntsArg axes = a.ints("axes", a.from >= 10 ? 3 : -1);
    if (a.to < 11 && axes.known && any_negative(axes.v)) {
      if (a.from >= 10) a.n.inputs[3] = a.i64s(a.axes(axes.v, r));
      else a.n.set_attr(Attribute::make_ints("axes", a.axes(axes.v, r)));
      a.touch();
    }
    return;
  }
  if (!a.down()) {
    std::vector<std::string> ins{a.n.inputs[0], a.i64s(a.n.attr_ints("starts")), a.i64s(a.n.attr_ints("ends"))};
    if (a.n.has_attr("axes")) ins.push_back(a.i64s(a.n.attr_ints("axes")));
    a.n.inputs = ins;
    a.n.attributes.clear();
    return a.touch();
  }
  IntsArg st = a.ints("starts", 1), en = a.ints("ends", 2), ax = a.ints("axes", 3), sp = a.ints("steps", 4);
  if (!st.known || !en.known || !ax.known || !sp.known) a.fail("its bounds are computed at run time; opset 9's Slice takes them only as attributes");
  std::vector<int64_t> axes = ax.present ? a.axes(ax.v, r) : std::vector<int64_t>();
  if (!ax.present)
    for (size_t i = 0; i < st.v.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  bool unit = !sp.present || std::all_of(sp.v.begin(), sp.v.end(), [](int64_t s) { return s == 1; });
  if (unit) {
    a.n.inputs.resize(1);
    a.n.set_attr(Attribute::make_ints("starts", st.v));
    a.n.set_attr(Attribute::make_ints("ends", en.v));
    a.n.set_attr(Attribute::make_ints("axes", axes));
    return a.touch();
  }
  // Steps: one Gather of the selected indices per axis (opset 9's Slice has no steps).
  std::string y = a.n.inputs[0];
  for (size_t i = 0; i < st.v.size(); ++i) {
    int64_t axis = axes[i];
    if (axis < 0) axis += r;
    int64_t len = a.dim_of(a.n.inputs[0], axis);
    if (len < 0) a.fail("a stepped slice of a dim whose size is not known");
    int64_t step = sp.v[i], b = st.v[i], e = en.v[i];
    if (b < 0) b += len;
    if (e < 0) e += len;
    b = step > 0 ? std::clamp<int64_t>(b, 0, len) : std::clamp<int64_t>(b, -1, len - 1);
    e = step > 0 ? std::clamp<int64_t>(e, 0, len) : std::clamp<int64_t>(e, -1, len - 1);
    std::vector<int64_t> idx;
    for (int64_t k = b; step > 0 ? k < e : k > e; k += step) idx.push_back(k);
    y = a.emit1("Gather", {y, a.i64s(idx)}, {Attribute::make_int("axis", axis)});
  }
  a.finish_as(y);
}

void topk(Adapt& a) {
  int r = a.rank_of_input(0);
  int64_t axis = a.n.attr_int("axis", -1);
  if (a.to < 11 && axis < 0) {
    if (r < 0) a.fail("a negative axis needs the input's rank, which is not known");
    axis += r;
  }
  if (!a.crosses(10) && !a.crosses(11) && axis == a.n.attr_int("axis", -1)) return;
  std::string k;
  if (a.from >= 10) {
    k = a.n.inputs.at(1);
  } else {
    k = a.i64s({a.n.attr_int("k")});
  }
  bool largest = a.n.attr_int("largest", 1) != 0;
  std::vector<Attribute> attrs{Attribute::make_int("axis", axis)};
  if (a.to >= 11) {
    attrs.push_back(Attribute::make_int("largest", largest));
    attrs.push_back(Attribute::make_int("sorted", a.n.attr_int("sorted", 1)));
  }
  std::vector<std::string> ins{a.n.inputs[0]};
  if (a.to >= 10) {
    ins.push_back(k);
  } else {
    const Tensor* kt = a.constant(1);
    if (!kt) a.fail("its k is computed at run time; opset 9 takes k only as an attribute");
    attrs.push_back(Attribute::make_int("k", kt->as_int(0)));
  }
  if (a.to < 11 && !largest) {
    // Smallest k = largest k of the negation (sorted outputs are a valid answer for sorted=0).
    std::vector<std::string> neg_ins = ins;
    neg_ins[0] = a.emit1("Neg", {ins[0]});
    std::string vals = a.fresh_value("TopK");
    a.emit_to("TopK", neg_ins, attrs, {vals, a.n.outputs.size() > 1 ? a.n.outputs[1] : std::string()});
    a.emit_to("Neg", {vals}, {}, {a.n.outputs[0]});
    return a.done();
  }
  ins[0] = a.n.inputs[0];
  a.n.inputs = ins;
  a.n.attributes = attrs;
  a.touch();
}

void dropout(Adapt& a) {
  bool mask_used = a.n.outputs.size() > 1 && !a.n.outputs[1].empty();
  if (a.crosses(10) && mask_used) a.fail("its mask changed type at opset 10");
  if (!a.crosses(12)) return;
  if (a.down()) {
    if (a.n.has_input(2)) {
      const Tensor* t = a.constant(2);
      if (!t || !all_equal(*t, 0)) a.fail("training_mode is not a constant false");
    }
    const Tensor* ratio = a.constant(1);
    if (a.n.has_input(1) && !ratio) a.fail("its ratio is computed at run time");
    if (ratio) a.n.set_attr(Attribute::make_float("ratio", static_cast<float>(ratio->as_double(0))));
    a.n.inputs.resize(1);
    return a.touch();
  }
  if (a.n.has_attr("ratio")) {
    a.n.inputs.push_back(a.add_constant(Tensor::scalar<float>(a.n.attr_float("ratio", 0.5f)), "ratio"));
    drop_attr(a.n, "ratio");
  }
  a.touch();
}

void batch_norm(Adapt& a) {
  if (!(a.down() && a.crosses(14))) return;
  if (a.n.attr_int("training_mode", 0) != 0) a.fail("training mode needs opset 14");
  drop_attr(a.n, "training_mode");
  a.n.outputs.resize(1);
  a.touch();
}

void gemm(Adapt& a) {
  if (!(a.down() && a.crosses(11)) || a.n.has_input(2)) return;
  DType t = a.dtype(a.n.inputs[0]);
  if (t == DType::Undefined) a.fail("the input's element type is not known");
  a.n.inputs.resize(3);
  a.n.inputs[2] = a.add_constant(from_doubles({0.0}, {}, t), "c");
  a.touch();
}

void arg_reduce(Adapt& a) {
  axis_attr(a);
  if (a.down() && a.crosses(12)) {
    if (a.n.attr_int("select_last_index", 0) != 0) a.fail("select_last_index needs opset 12");
    drop_attr(a.n, "select_last_index");
    a.touch();
  }
}

void shape(Adapt& a) {
  if (!(a.down() && a.crosses(15)) || (!a.n.has_attr("start") && !a.n.has_attr("end"))) return;
  int r = a.rank_of_input(0);
  int64_t start = a.n.attr_int("start", 0), end = a.n.attr_int("end", INT_MAX);
  drop_attr(a.n, "start");
  drop_attr(a.n, "end");
  a.touch();
  if (start == 0 && (end == INT_MAX || (r >= 0 && end >= r))) return;
  std::string s = a.emit1("Shape", {a.n.inputs[0]});
  if (a.to >= 10) return a.finish("Slice", {s, a.i64s({start}), a.i64s({end}), a.i64s({0})});
  if (start < 0 || end < 0) {
    if (r < 0) a.fail("negative start/end need the input's rank, which is not known");
    start = start < 0 ? start + r : start;
    end = end < 0 ? end + r : end;
  }
  a.finish("Slice", {s}, {Attribute::make_ints("starts", {start}), Attribute::make_ints("ends", {end}), Attribute::make_ints("axes", {0})});
}

void reshape(Adapt& a) {
  if (!(a.down() && a.crosses(14)) || !a.n.has_attr("allowzero")) return;
  if (a.n.attr_int("allowzero", 0) != 0) {
    const Tensor* s = a.constant(1);
    std::vector<int64_t> v = s ? to_ints(*s) : std::vector<int64_t>{0};
    if (std::find(v.begin(), v.end(), 0) != v.end()) a.fail("allowzero=1 with a zero in the shape needs opset 14");
  }
  drop_attr(a.n, "allowzero");
  a.touch();
}

void rnn(Adapt& a) {
  if (!(a.down() && a.crosses(14)) || !a.n.has_attr("layout")) return;
  if (a.n.attr_int("layout", 0) != 0) a.fail("batch-first layout needs opset 14");
  drop_attr(a.n, "layout");
  a.touch();
}

void pool(Adapt& a) {
  if (!(a.down() && a.crosses(10))) return;
  if (a.n.attr_int("ceil_mode", 0) != 0) a.fail("ceil_mode needs opset 10");
  std::vector<int64_t> d = a.n.attr_ints("dilations");
  if (std::any_of(d.begin(), d.end(), [](int64_t x) { return x != 1; })) a.fail("dilations need opset 10");
  drop_attr(a.n, "ceil_mode");
  drop_attr(a.n, "dilations");
  a.touch();
}

void constant(Adapt& a) {
  if (!a.down() || a.n.attributes.size() != 1) return;
  const Attribute& at = a.n.attributes[0];
  if (at.name == "sparse_value") {
    if (a.to < 11) a.fail("a sparse constant needs opset 11");
    return;
  }
  if (a.to >= 12 || at.name == "value") return;
  Tensor t = constant_node_value(a.n);
  if (!t.defined()) a.fail("its value attribute is not readable");
  a.n.attributes = {Attribute::make_tensor("value", t)};
  a.touch();
}

void scatter(Adapt& a) {
  bool old = a.n.op_type == "Scatter";
  if (a.n.op_type != "ScatterND" && a.to < 11 && !old) {
    if (a.n.attr_string("reduction", "none") != "none") a.fail("reduction needs opset 16");
    a.n.op_type = "Scatter";
    drop_attr(a.n, "reduction");
    axis_attr(a);
    return a.touch();
  }
  if (old && a.to >= 11) {
    a.n.op_type = "ScatterElements";
    return a.touch();
  }
  if (a.down() && a.crosses(16) && a.n.has_attr("reduction")) {
    if (a.n.attr_string("reduction", "none") != "none") a.fail("reduction needs opset 16");
    drop_attr(a.n, "reduction");
    a.touch();
  }
  if (old) axis_attr(a);
}

void gather_nd(Adapt& a) {
  if (a.down() && a.crosses(12) && a.n.has_attr("batch_dims")) {
    if (a.n.attr_int("batch_dims", 0) != 0) a.fail("batch_dims needs opset 12");
    drop_attr(a.n, "batch_dims");
    a.touch();
  }
}

void depth_to_space(Adapt& a) {
  if (!(a.down() && a.crosses(11)) || !a.n.has_attr("mode")) return;
  std::string mode = a.n.attr_string("mode", "DCR");
  drop_attr(a.n, "mode");
  a.touch();
  if (mode == "DCR") return;
  // CRD as reshape / transpose / reshape, which needs C, H, W.
  int64_t b = a.n.attr_int("blocksize");
  int64_t c = a.dim_of(a.n.inputs[0], 1), h = a.dim_of(a.n.inputs[0], 2), w = a.dim_of(a.n.inputs[0], 3);
  if (c < 0 || h < 0 || w < 0) a.fail("CRD mode before opset 11 needs static channel and spatial sizes");
  std::string y = a.emit1("Reshape", {a.n.inputs[0], a.i64s({0, c / (b * b), b, b, h, w})});
  y = a.emit1("Transpose", {y}, {Attribute::make_ints("perm", {0, 1, 4, 2, 5, 3})});
  a.finish("Reshape", {y, a.i64s({0, c / (b * b), h * b, w * b})});
}

}  // namespace

void register_form_adapters(std::map<std::string, Adapter>& t) {
  t["Squeeze"] = squeeze;
  t["Unsqueeze"] = squeeze;
  for (const char* r : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                        "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
    t[r] = reduce;
  t["Split"] = split;
  for (const char* o : {"Concat", "Flatten", "OneHot", "Compress", "CumSum"}) t[o] = axis_attr;
  t["Gather"] = gather;
  t["Clip"] = clip;
  t["Pad"] = pad;
  t["Slice"] = slice;
  t["TopK"] = topk;
  t["Dropout"] = dropout;
  t["BatchNormalization"] = batch_norm;
  t["Gemm"] = gemm;
  t["ArgMax"] = arg_reduce;
  t["ArgMin"] = arg_reduce;
  t["Shape"] = shape;
  t["Reshape"] = reshape;
  for (const char* o : {"LSTM", "GRU", "RNN"}) t[o] = rnn;
  t["MaxPool"] = pool;
  t["AveragePool"] = pool;
  t["Constant"] = constant;
  t["Scatter"] = scatter;
  t["ScatterElements"] = scatter;
  t["ScatterND"] = scatter;
  t["GatherND"] = gather_nd;
  t["DepthToSpace"] = depth_to_space;
}

}  // namespace t2o::passes
