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

}  // namespace

void register_detection_ops(OpTable& t) {
  t["torchvision::nms"] = {nms, 10};
  t["torchvision::roi_align"] = {roi_align};  // opset 10, or 16 when aligned
  t["torchvision::roi_pool"] = {roi_pool};
}

}  // namespace t2o
