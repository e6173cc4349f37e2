// torchvision's detection ops (the file loads once torchvision's library is in the process, see
// op_libraries.cpp): non-maximum suppression and RoI Align, as torchvision's detectors call them.
#include "torch/ops/ops.h"

namespace t2o {
namespace {

// torchvision::nms(dets[N, 4], scores[N], iou_threshold) -> kept indices, by decreasing score.
// NonMaxSuppression suppresses at IoU > threshold as torchvision does, and lists one class's
// selections by decreasing score; it takes boxes [batch, N, 4] and scores [batch, class, N] and
// returns (batch, class, box) rows, of which the box column is the result.
void nms(Ctx& c, const TNode* n) {
  std::string boxes = c.b.unsqueeze(c.t_as(n, 0, DType::Float), {0});
  std::string scores = c.b.unsqueeze(c.t_as(n, 1, DType::Float), {0, 1});
  std::string iou = c.b.vec({c.f(n, 2)}, DType::Float);
  std::string max_out = c.b.i64s({std::numeric_limits<int64_t>::max()});
  std::string sel = c.b.op1("NonMaxSuppression", {boxes, scores, max_out, iou});
  std::string col = c.b.slice(sel, {2}, {3}, {1});
  c.out(n, c.b.squeeze(col, {1}));
}

// torchvision::roi_align(input, rois[K, 5] = (batch index, x1, y1, x2, y2), spatial_scale,
// pooled_height, pooled_width, sampling_ratio, aligned). Both sample each bin on a grid of
// ceil(roi size / bins) points when sampling_ratio <= 0. aligned=False (torchvision's default,
// what MultiScaleRoIAlign uses) is RoiAlign's output_half_pixel mode; aligned=True shifts by half
// a pixel and drops the 1-pixel minimum RoI size, which is half_pixel mode, from opset 16.
// RoiAlign and MaxRoiPool take the scale as an attribute. A scripted MultiScaleRoIAlign computes
// it from the feature map's and the image's sizes, per level in a loop: then the boxes are scaled
// before the op, whose scale is 1 (both ops multiply the box corners by the scale first).
bool computed_scale(Ctx& c, const TNode* n) {
  auto k = Ctx::arg_index(n, "spatial_scale");
  return k && !c.is_const(n, *k);
}
float attr_scale(Ctx& c, const TNode* n) {
  return computed_scale(c, n) ? 1.0f : static_cast<float>(c.f(n, "spatial_scale", 1.0));
}
// The box corners [K, 4], scaled when the scale is computed.
std::string scaled_boxes(Ctx& c, const TNode* n, const std::string& boxes, DType t) {
  if (!computed_scale(c, n)) return boxes;
  return c.b.op1("Mul", {boxes, c.t_as(n, *Ctx::arg_index(n, "spatial_scale"), t)});
}

void roi_align(Ctx& c, const TNode* n) {
  bool aligned = c.flag(n, "aligned", false);
  c.b.require(aligned ? 16 : 10, aligned ? "torchvision::roi_align with aligned=True" : "torchvision::roi_align");
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t);
  std::string rois = c.t_as(n, 1, t);
  std::string boxes = scaled_boxes(c, n, c.b.slice(rois, {1}, {5}, {1}), t);
  std::string batch = c.b.cast(c.b.squeeze(c.b.slice(rois, {0}, {1}, {1}), {1}), DType::Int64);
  int64_t sampling = c.i(n, "sampling_ratio", -1);
  std::vector<Attribute> attrs{Attribute::make_string("mode", "avg"),
                               Attribute::make_int("output_height", c.i(n, "pooled_height", 1)),
                               Attribute::make_int("output_width", c.i(n, "pooled_width", 1)),
                               Attribute::make_int("sampling_ratio", sampling < 0 ? 0 : sampling),
                               Attribute::make_float("spatial_scale", attr_scale(c, n))};
  if (c.b.opset() >= 16)
    attrs.push_back(Attribute::make_string("coordinate_transformation_mode", aligned ? "half_pixel" : "output_half_pixel"));
  c.out(n, c.b.op1("RoiAlign", {x, boxes, batch}, attrs));
}

// torchvision::ps_roi_align(input[N, C * ph * pw, H, W], rois, spatial_scale, pooled_height,
// pooled_width, sampling_ratio) -> (output[K, C, ph, pw], channel_mapping). Position-sensitive:
// bin (i, j) of output channel c averages input channel (c * ph + i) * pw + j, sampled as
// roi_align with aligned=True samples (half-pixel offset, no minimum RoI size). So it is RoiAlign
// over every channel, [K, C, ph * pw, ph * pw] once reshaped, of which the diagonal of the last
// two axes is taken by a Gather of constant indices. The channel mapping only serves the backward
// pass; a model that reads it is reported.
void ps_roi_align(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string x = c.t_as(n, 0, t);
  std::string rois = c.t_as(n, 1, t);
  std::string boxes = scaled_boxes(c, n, c.b.slice(rois, {1}, {5}, {1}), t);
  std::string batch = c.b.cast(c.b.squeeze(c.b.slice(rois, {0}, {1}, {1}), {1}), DType::Int64);
  const int64_t ph = c.i(n, "pooled_height", 1), pw = c.i(n, "pooled_width", 1), bins = ph * pw;
  int64_t sampling = c.i(n, "sampling_ratio", -1);
  std::string all = c.b.op1("RoiAlign", {x, boxes, batch},
                            {Attribute::make_string("mode", "avg"), Attribute::make_int("output_height", ph),
                             Attribute::make_int("output_width", pw),
                             Attribute::make_int("sampling_ratio", sampling < 0 ? 0 : sampling),
                             Attribute::make_float("spatial_scale", attr_scale(c, n)),
                             Attribute::make_string("coordinate_transformation_mode", "half_pixel")});
  std::vector<int64_t> diagonal;
  for (int64_t k = 0; k < bins; ++k) diagonal.push_back(k * (bins + 1));
  std::string flat = c.b.reshape(all, {0, -1, bins * bins});
  std::string picked = c.b.op1("Gather", {flat, c.b.i64s(diagonal)}, {Attribute::make_int("axis", 2)});
  c.out(n, 0, c.b.reshape(picked, {0, -1, ph, pw}));
  if (n->outputs().size() > 1) {
    if (n->output(1)->hasUses())
      throw UnsupportedError("torchvision::ps_roi_align's channel_mapping output (no ONNX form)");
    c.set(n->output(1), TV::constant(c10::IValue()));
  }
}

// torchvision::roi_pool(input, rois[K, 5], spatial_scale, pooled_height, pooled_width) ->
// (output, argmax): ONNX MaxRoiPool, the same Caffe RoI pooling. The argmax (torch's record for
// the backward pass) has no ONNX form; a model that reads it is reported.
void roi_pool(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  std::string rois = c.t_as(n, 1, t);
  if (computed_scale(c, n))
    rois = c.b.op1("Concat", {c.b.slice(rois, {0}, {1}, {1}), scaled_boxes(c, n, c.b.slice(rois, {1}, {5}, {1}), t)},
                   {Attribute::make_int("axis", 1)});
  std::string y = c.b.op1("MaxRoiPool", {c.t_as(n, 0, t), rois},
                          {Attribute::make_ints("pooled_shape", {c.i(n, "pooled_height", 1), c.i(n, "pooled_width", 1)}),
                           Attribute::make_float("spatial_scale", attr_scale(c, n))});
  c.out(n, 0, y);
  if (n->outputs().size() > 1) {
    if (n->output(1)->hasUses()) throw UnsupportedError("torchvision::roi_pool's argmax output (no ONNX form)");
    c.set(n->output(1), TV::constant(c10::IValue()));
  }
}

// torchvision::ps_roi_pool(input[N, C * ph * pw, H, W], rois, spatial_scale, pooled_height,
// pooled_width) -> (output[K, C, ph, pw], channel_mapping): bin (i, j) of output channel c is the
// mean of input channel (c * ph + i) * pw + j over whole pixels, as torchvision computes them:
// corners rounded half away from zero after scaling, a 1-pixel minimum RoI size, bin i covering
// rows [floor(i * bh), ceil((i + 1) * bh)) from the RoI's start, clamped to [0, H - 1] (so the last
// row and column are never read), an empty bin 0. ONNX has no average RoI pooling: each bin's sum
// is four reads of the input's integral image (running sums over H and W, in double so that the
// differences of large sums stay exact to float precision), divided by the bin's area.
void ps_roi_pool(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  const int64_t ph = c.i(n, "pooled_height", 1), pw = c.i(n, "pooled_width", 1);
  auto& b = c.b;
  std::string x = c.t_as(n, 0, t);
  std::string rois = c.t_as(n, 1, t);
  auto binop = [&](const char* op, const std::string& a, const std::string& v) { return b.op1(op, {a, v}); };
  // The corners times the scale, rounded half away from zero: floor(|v|) + (frac >= 0.5), signed.
  std::string scaled = computed_scale(c, n) ? scaled_boxes(c, n, b.slice(rois, {1}, {5}, {1}), t)
                                            : binop("Mul", b.slice(rois, {1}, {5}, {1}),
                                                    b.scalar(static_cast<float>(c.f(n, "spatial_scale", 1.0)), t));
  std::string mag = b.op1("Abs", {scaled});
  std::string whole = b.op1("Floor", {mag});
  std::string up = b.cast(b.op1("Not", {binop("Less", binop("Sub", mag, whole), b.scalar(0.5, t))}), t);
  std::string corner = binop("Mul", b.op1("Sign", {scaled}), binop("Add", whole, up));  // [K, 4]: x1 y1 x2 y2
  std::string start = b.slice(corner, {0}, {2}, {1}), end = b.slice(corner, {2}, {4}, {1});
  std::string size = binop("Max", binop("Sub", end, start), b.scalar(1.0, t));
  std::string bin = binop("Div", size, b.vec({static_cast<double>(pw), static_cast<double>(ph)}, t));  // [K, 2]: w h
  std::string shape = b.shape_of(x);
  // Bounds along one axis (column a of start / bin: 0 for W, 1 for H) for its `bins` bins: [K, bins]
  // int64, clamped to [0, len - 1].
  auto bounds = [&](int64_t a, int64_t bins, int64_t axis, std::string* lo, std::string* hi) {
    std::vector<double> idx;
    for (int64_t k = 0; k < bins; ++k) idx.push_back(static_cast<double>(k));
    std::string at = b.vec(idx, t), next = binop("Add", at, b.scalar(1.0, t));
    std::string s0 = b.slice(start, {a}, {a + 1}, {1}), bs = b.slice(bin, {a}, {a + 1}, {1});
    std::string last = b.cast(binop("Sub", b.slice(shape, {axis}, {axis + 1}, {0}), b.i64s({1})), t);
    auto clamp = [&](const std::string& v) {
      return b.cast(binop("Min", binop("Max", binop("Add", v, s0), b.scalar(0.0, t)), last), DType::Int64);
    };
    *lo = clamp(b.op1("Floor", {binop("Mul", at, bs)}));
    *hi = clamp(b.op1("Ceil", {binop("Mul", next, bs)}));
  };
  std::string hs, he, ws, we;
  bounds(1, ph, 2, &hs, &he);
  bounds(0, pw, 3, &ws, &we);
  // [K, 1, ph, 1] rows and [K, 1, 1, pw] columns
  hs = b.unsqueeze(hs, {1, 3}), he = b.unsqueeze(he, {1, 3});
  ws = b.unsqueeze(ws, {1, 2}), we = b.unsqueeze(we, {1, 2});
  // Integral image [N, C, H + 1, W + 1], flattened.
  std::string xd = b.cast(x, DType::Double);
  std::string sums = b.op1("CumSum", {b.op1("CumSum", {xd, b.i64(2)}), b.i64(3)});
  std::string integral = b.reshape(b.pad(sums, {0, 0, 1, 1, 0, 0, 0, 0}, "constant", 0.0, DType::Double), {-1});
  // Flat index of (roi's image, channel (c * ph + i) * pw + j, row, column).
  std::string channels = b.slice(shape, {1}, {2}, {0});
  std::string cout = binop("Div", channels, b.i64s({ph * pw}));
  std::string cidx = b.op1("Range", {b.i64(0), b.squeeze(cout, {0}), b.i64(1)});
  std::vector<int64_t> pos;
  for (int64_t k = 0; k < ph * pw; ++k) pos.push_back(k);
  std::string ch = binop("Add", b.reshape(binop("Mul", cidx, b.i64(ph * pw)), {1, -1, 1, 1}),
                         b.reshape(b.i64s(pos), {1, 1, ph, pw}));
  std::string image = b.reshape(b.cast(b.slice(rois, {0}, {1}, {1}), DType::Int64), {-1, 1, 1, 1});
  std::string h1 = binop("Add", b.slice(shape, {2}, {3}, {0}), b.i64s({1}));
  std::string w1 = binop("Add", b.slice(shape, {3}, {4}, {0}), b.i64s({1}));
  std::string plane = binop("Mul", binop("Add", binop("Mul", image, channels), ch), h1);  // [K, Co, ph, pw]
  auto read = [&](const std::string& row, const std::string& col) {
    std::string idx = binop("Add", binop("Mul", binop("Add", plane, row), w1), col);
    return b.op1("Gather", {integral, idx}, {Attribute::make_int("axis", 0)});
  };
  std::string sum = binop("Add", binop("Sub", binop("Sub", read(he, we), read(hs, we)), read(he, ws)), read(hs, ws));
  std::string area = b.cast(binop("Mul", binop("Sub", he, hs), binop("Sub", we, ws)), t);
  // An empty bin's sum is exactly 0 (its reads cancel): dividing by max(area, 1) gives torchvision's 0.
  c.out(n, 0, binop("Div", b.cast(sum, t), binop("Max", area, b.scalar(1.0, t))));
  if (n->outputs().size() > 1) {
    if (n->output(1)->hasUses())
      throw UnsupportedError("torchvision::ps_roi_pool's channel_mapping output (no ONNX form)");
    c.set(n->output(1), TV::constant(c10::IValue()));
  }
}

}  // namespace

void register_detection_ops(OpTable& t) {
  t["torchvision::nms"] = {nms, 10};
  t["torchvision::roi_align"] = {roi_align};  // opset 10, or 16 when aligned
  t["torchvision::roi_pool"] = {roi_pool};
  t["torchvision::ps_roi_align"] = {ps_roi_align, 16};
  t["torchvision::ps_roi_pool"] = {ps_roi_pool, 11};
}

}  // namespace t2o
