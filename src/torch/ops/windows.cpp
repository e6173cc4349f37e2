// Sliding windows: Tensor.unfold, im2col (F.unfold) and col2im (F.fold). Built from Gather, strided
// Slice and Pad, so each value moves unchanged (no products with one-hot weights, which would turn an
// inf or NaN into NaNs across a whole window).
#include <climits>

#include "torch/ops/compose.h"

namespace t2o {
namespace {

// aten::unfold(x, dimension, size, step): windows along `dimension`, which becomes the window index,
// with the window's elements on a new last axis.
void unfold(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  if (r == 0) throw UnsupportedError("aten::unfold of a 0-d tensor");
  int64_t axis = norm_axis(c.i(n, "dimension", 0), r), size = c.i(n, "size", 1), step = c.i(n, "step", 1);
  std::string x = c.t(n, 0);
  std::string idx;
  if (auto len = static_size(c.shape(n, 0), axis)) {
    if (*len < size) throw Error("unfold: size " + std::to_string(size) + " exceeds the dimension's " + std::to_string(*len));
    int64_t windows = (*len - size) / step + 1;
    std::vector<int64_t> v;
    for (int64_t w = 0; w < windows; ++w)
      for (int64_t s = 0; s < size; ++s) v.push_back(w * step + s);
    idx = c.b.constant(Tensor::from_vector<int64_t>(v, {windows, size}), "windows");
  } else {
    std::string windows = c.b.op1("Add", {c.b.op1("Div", {c.b.op1("Sub", {c.b.dim(x, axis), c.b.i64(size)}), c.b.i64(step)}),
                                          c.b.i64(1)});
    std::string starts = c.b.op1("Mul", {arange_of(c, windows), c.b.i64(step)});
    std::vector<int64_t> offs;
    for (int64_t s = 0; s < size; ++s) offs.push_back(s);
    idx = c.b.op1("Add", {c.b.unsqueeze(starts, {1}), c.b.unsqueeze(c.b.i64s(offs), {0})});
  }
  std::string g = c.b.op1("Gather", {x, idx}, {Attribute::make_int("axis", axis)});
  std::vector<int64_t> perm;
  for (int64_t i = 0; i <= r; ++i)
    if (i != axis + 1) perm.push_back(i);
  perm.push_back(axis + 1);
  c.out(n, c.b.transpose(g, perm));
}

std::vector<int64_t> pair(Ctx& c, const TNode* n, const char* name) {
  auto k = Ctx::arg_index(n, name);
  if (!k) throw UnsupportedError(std::string(n->kind().toQualString()) + " without " + name);
  std::vector<int64_t> v = c.ints(n, *k);
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) throw Error(std::string(name) + " must have two values");
  return v;
}

// aten::im2col(x, kernel_size, dilation, padding, stride): [N, C, H, W] -> [N, C*kh*kw, L], the
// kernel offsets as strided slices of the padded input.
void im2col(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  if (r != 3 && r != 4) throw UnsupportedError("aten::im2col on a " + std::to_string(r) + "-d tensor");
  auto k = pair(c, n, "kernel_size"), d = pair(c, n, "dilation"), p = pair(c, n, "padding"), s = pair(c, n, "stride");
  std::string x = c.t_as(n, 0, t);
  auto shape = c.shape(n, 0);
  if (r == 3) x = c.b.unsqueeze(x, {0}), shape.insert(shape.begin(), 1);
  if (p[0] || p[1]) x = c.b.pad(x, {0, 0, p[0], p[1], 0, 0, p[0], p[1]}, "constant", 0, t);
  std::vector<int64_t> padded{shape[2] < 0 ? -1 : shape[2] + 2 * p[0], shape[3] < 0 ? -1 : shape[3] + 2 * p[1]};
  std::vector<std::string> patches;
  for (int64_t ki = 0; ki < k[0]; ++ki)
    for (int64_t kj = 0; kj < k[1]; ++kj) {
      // Offsets from the far end: the last kernel row starts the last window, so the count matches.
      std::vector<int64_t> start{ki * d[0], kj * d[1]};
      std::vector<int64_t> end{(k[0] - 1 - ki) * d[0], (k[1] - 1 - kj) * d[1]};
      for (auto& e : end) e = e == 0 ? INT64_MAX : -e;
      std::string y;
      if (c.b.opset() < 10 && (s[0] != 1 || s[1] != 1)) {
        y = x;
        for (int a = 0; a < 2; ++a) {
          if (padded[static_cast<size_t>(a)] < 0) c.b.require(10, "im2col with strides on dynamic sizes (Slice steps)");
          y = c.b.take(y, padded[static_cast<size_t>(a)], start[static_cast<size_t>(a)], end[static_cast<size_t>(a)],
                       s[static_cast<size_t>(a)], a + 2);
        }
      } else {
        y = c.b.slice(x, start, end, {2, 3}, s);
      }
      patches.push_back(c.b.unsqueeze(y, {2}));
    }
  std::string y = c.b.concat(patches, 2);  // [N, C, K, oh, ow]
  std::string sy = c.b.shape_of(y);
  // Every size spelled out: a -1 cannot be inferred when the batch is empty.
  std::string rows = c.b.op1("Mul", {shape_part(c, sy, 1, 2), shape_part(c, sy, 2, 3)});
  std::string cols = c.b.op1("Mul", {shape_part(c, sy, 3, 4), shape_part(c, sy, 4, 5)});
  y = c.b.op1("Reshape", {y, concat_parts(c, {shape_part(c, sy, 0, 1), rows, cols})});
  c.out(n, r == 3 ? c.b.squeeze(y, {0}) : y);
}

// aten::col2im(x, output_size, kernel_size, dilation, padding, stride): [N, C*kh*kw, L] -> [N, C, H, W],
// overlapping windows summed. Each kernel offset's values are spread to the stride (zeros
// between), shifted to the offset and added; the padding is cropped at the end.
void col2im(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  if (r != 2 && r != 3) throw UnsupportedError("aten::col2im on a " + std::to_string(r) + "-d tensor");
  auto out = pair(c, n, "output_size"), k = pair(c, n, "kernel_size"), d = pair(c, n, "dilation"),
       p = pair(c, n, "padding"), s = pair(c, n, "stride");
  auto shape = c.shape(n, 0);
  int64_t ck = shape[static_cast<size_t>(r - 2)], kk = k[0] * k[1];
  if (ck < 0) throw UnsupportedError("aten::col2im with a dynamic channel dimension");
  int64_t ch = ck / kk;
  std::vector<int64_t> padded{out[0] + 2 * p[0], out[1] + 2 * p[1]}, blocks(2);
  for (int a = 0; a < 2; ++a)
    blocks[static_cast<size_t>(a)] = (padded[static_cast<size_t>(a)] - d[static_cast<size_t>(a)] * (k[static_cast<size_t>(a)] - 1) - 1) / s[static_cast<size_t>(a)] + 1;
  std::string x = c.t_as(n, 0, t);
  if (r == 2) x = c.b.unsqueeze(x, {0});
  x = c.b.reshape(x, {0, ch, kk, blocks[0], blocks[1]});
  std::vector<std::string> parts = c.b.split(x, std::vector<int64_t>(static_cast<size_t>(kk), 1), 2);
  std::string sum;
  for (int64_t ki = 0; ki < k[0]; ++ki)
    for (int64_t kj = 0; kj < k[1]; ++kj) {
      std::string y = c.b.squeeze(parts[static_cast<size_t>(ki * k[1] + kj)], {2});  // [N, C, bh, bw]
      std::vector<int64_t> span{blocks[0], blocks[1]};
      for (int a = 0; a < 2; ++a) {
        int64_t st = s[static_cast<size_t>(a)];
        if (st == 1) continue;
        int64_t ax = 2 + a;
        // [.., b, ..] -> [.., b, st, ..] with zeros after each value -> [.., b * st, ..]
        y = c.b.unsqueeze(y, {ax + 1});
        std::vector<int64_t> pads(10, 0);
        pads[static_cast<size_t>(ax + 1 + 5)] = st - 1;
        y = c.b.pad(y, pads, "constant", 0, t);
        std::vector<int64_t> merged{0, ch, a == 0 ? span[0] * st : span[0], a == 0 ? span[1] : span[1] * st};
        y = c.b.reshape(y, merged);
        span[static_cast<size_t>(a)] *= st;
      }
      int64_t top = ki * d[0], left = kj * d[1];
      int64_t bottom = std::max<int64_t>(0, padded[0] - top - span[0]), right = std::max<int64_t>(0, padded[1] - left - span[1]);
      y = c.b.pad(y, {0, 0, top, left, 0, 0, bottom, right}, "constant", 0, t);
      if (top + span[0] + bottom > padded[0] || left + span[1] + right > padded[1])
        y = c.b.slice(y, {0, 0}, {padded[0], padded[1]}, {2, 3});
      sum = sum.empty() ? y : c.b.op1("Add", {sum, y});
    }
  if (p[0] || p[1]) sum = c.b.slice(sum, {p[0], p[1]}, {p[0] + out[0], p[1] + out[1]}, {2, 3});
  c.out(n, r == 2 ? c.b.squeeze(sum, {0}) : sum);
}

}  // namespace

void register_window_ops(OpTable& t) {
  t["aten::unfold"] = {unfold};
  t["aten::im2col"] = {im2col};
  t["aten::col2im"] = {col2im};
}

}  // namespace t2o
