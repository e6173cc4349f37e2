// Converter additions for the export pitfalls (docs/pitfalls.md) that extend op families owned by
// other files without changing them: each wraps the registered converter and handles only the
// case it cannot.
#include "torch/ops/ops.h"

namespace t2o {
namespace {

// F.interpolate(x, size=(x.shape[2] * 2, ...)) on dynamic H/W: the sizes are computed in the
// graph, so Resize takes them as a tensor (N and C from the input's shape).
Converter resize_from_computed_sizes(Converter inner, std::string mode, std::string coord, std::string nearest,
                                     int align_arg) {
  return [=](Ctx& c, const TNode* n) {
    const TV& size = c.in(n, 1);
    auto in = c.shape(n, 0), out = c.out_shape(n);
    bool dynamic = false;
    for (size_t i = 2; i < in.size(); ++i) dynamic = dynamic || in[i] < 0 || (i < out.size() && out[i] < 0);
    if (!dynamic || size.kind != TV::Kind::List || c.b.opset() < 11) return inner(c, n);
    std::string ct = align_arg >= 0 && c.flag(n, static_cast<size_t>(align_arg)) ? "align_corners" : coord;
    DType t = c.out_dtype(n);
    std::string x = c.t_as(n, 0, t);
    std::string nc = c.b.slice(c.b.shape_of(x), {0}, {2}, {0});
    std::string sizes = c.b.concat({nc, c.ints_tensor(size)}, 0);
    std::vector<Attribute> attrs{Attribute::make_string("mode", mode),
                                 Attribute::make_string("coordinate_transformation_mode", ct)};
    if (mode == "nearest") attrs.push_back(Attribute::make_string("nearest_mode", nearest));
    std::string roi = c.b.opset() >= 13 ? std::string() : c.b.vec({}, DType::Float);
    std::string scales = c.b.opset() >= 13 ? std::string() : c.b.vec({}, DType::Float);
    c.out(n, c.b.op1("Resize", {x, roi, scales, sizes}, attrs));
  };
}

void wrap(OpTable& t, const std::string& op, const std::function<Converter(Converter)>& f) {
  auto it = t.find(op);
  if (it != t.end()) it->second.fn = f(it->second.fn);
}

}  // namespace

void register_pitfall_ops(OpTable& t) {
  for (const char* op : {"aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d"})
    wrap(t, op, [](Converter in) { return resize_from_computed_sizes(in, "nearest", "asymmetric", "floor", -1); });
  for (const char* op : {"aten::upsample_linear1d", "aten::upsample_bilinear2d", "aten::upsample_trilinear3d"})
    wrap(t, op, [](Converter in) { return resize_from_computed_sizes(in, "linear", "half_pixel", "", 2); });
  // A CPU trace of LSTMCell records unsafe_chunk/unsafe_split: same results as chunk/split.
  for (const char* op : {"chunk", "split", "split_with_sizes"}) {
    std::string safe = std::string("aten::") + op, unsafe = std::string("aten::unsafe_") + op;
    if (t.count(safe) && !t.count(unsafe)) t[unsafe] = t[safe];
  }
}

}  // namespace t2o
