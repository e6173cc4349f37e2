#pragma once
// Sliding-window geometry shared by the conv and pool families: attributes (auto_pad, pads,
// strides, dilations, ceil_mode) resolved against an input shape into output sizes and pads.
#include <string>

#include "runtime/kernel.h"

namespace t2o::kern {

struct WindowAttrs {
  std::string auto_pad = "NOTSET";
  Dims kernel, strides, dilations, pads;  // empty = default (inferred / ones / zeros)
  bool ceil_mode = false;

  static WindowAttrs from_node(const Node& n) {
    WindowAttrs a;
    a.auto_pad = n.attr_string("auto_pad", "NOTSET");
    a.kernel = n.attr_ints("kernel_shape");
    a.strides = n.attr_ints("strides");
    a.dilations = n.attr_ints("dilations");
    a.pads = n.attr_ints("pads");
    a.ceil_mode = n.attr_int("ceil_mode", 0) != 0;
    return a;
  }
};

// Geometry of one window op. Spatial vectors have `nsp` entries.
struct Geom {
  int nsp = 0;
  Dims in, k, out, stride, dil, pb, pe;
  int64_t in_size() const { return numel_of(in); }
  int64_t out_size() const { return numel_of(out); }
  int64_t k_size() const { return numel_of(k); }
  // The same geometry padded to 3 spatial dims with leading unit dims (for 1d/2d/3d loops).
  Geom as_3d() const {
    Geom g;
    g.nsp = 3;
    int lead = 3 - nsp;
    auto pad = [&](const Dims& v, int64_t fill) {
      Dims r(static_cast<size_t>(lead), fill);
      r.insert(r.end(), v.begin(), v.end());
      return r;
    };
    g.in = pad(in, 1), g.k = pad(k, 1), g.out = pad(out, 1), g.stride = pad(stride, 1);
    g.dil = pad(dil, 1), g.pb = pad(pb, 0), g.pe = pad(pe, 0);
    return g;
  }
};

// Resolves attributes for a forward window (conv or pool) over spatial dims `in_sp`.
// `kernel` is the kernel extent (from the attribute or the weight's shape).
// Throws Error naming `node` on inconsistent attributes (usable at build and at run time).
inline Geom forward_geom(const Node& node, const WindowAttrs& a, const Dims& in_sp, const Dims& kernel) {
  struct {
    const Node& node;
    [[noreturn]] void fail(const std::string& m) const { throw Error(node.describe() + ": " + m); }
  } ctx{node};
  Geom g;
  g.nsp = static_cast<int>(in_sp.size());
  size_t n = in_sp.size();
  if (g.nsp < 1) ctx.fail("input needs at least one spatial dimension");
  if (kernel.size() != n)
    ctx.fail("kernel_shape has " + std::to_string(kernel.size()) + " dims but the input has " + std::to_string(n) +
             " spatial dims");
  auto check_len = [&](const Dims& v, size_t want, const char* what) {
    if (!v.empty() && v.size() != want)
      ctx.fail(std::string(what) + " has " + std::to_string(v.size()) + " values, expected " + std::to_string(want));
  };
  check_len(a.strides, n, "strides");
  check_len(a.dilations, n, "dilations");
  check_len(a.pads, 2 * n, "pads");
  g.in = in_sp;
  g.k = kernel;
  g.stride = a.strides.empty() ? Dims(n, 1) : a.strides;
  g.dil = a.dilations.empty() ? Dims(n, 1) : a.dilations;
  g.pb.assign(n, 0);
  g.pe.assign(n, 0);
  g.out.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (g.k[i] < 1 || g.stride[i] < 1 || g.dil[i] < 1)
      ctx.fail("kernel_shape, strides and dilations must be positive");
    int64_t ext = (g.k[i] - 1) * g.dil[i] + 1;
    if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
      int64_t out = (in_sp[i] + g.stride[i] - 1) / g.stride[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * g.stride[i] + ext - in_sp[i]);
      g.pb[i] = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pe[i] = total - g.pb[i];
      g.out[i] = out;
      continue;
    }
    if (a.auto_pad == "NOTSET" && !a.pads.empty()) {
      g.pb[i] = a.pads[i];
      g.pe[i] = a.pads[i + n];
      if (g.pb[i] < 0 || g.pe[i] < 0) ctx.fail("pads must not be negative");
    } else if (a.auto_pad != "NOTSET" && a.auto_pad != "VALID") {
      ctx.fail("unknown auto_pad '" + a.auto_pad + "'");
    }
    int64_t span = in_sp[i] + g.pb[i] + g.pe[i] - ext;
    if (span < 0)
      ctx.fail("kernel extent " + std::to_string(ext) + " is larger than the padded input (" +
               std::to_string(in_sp[i] + g.pb[i] + g.pe[i]) + ")");
    int64_t out = (a.ceil_mode ? (span + g.stride[i] - 1) / g.stride[i] : span / g.stride[i]) + 1;
    // A window that would start entirely in the end padding is dropped (as PyTorch and ORT do).
    if (a.ceil_mode && (out - 1) * g.stride[i] >= in_sp[i] + g.pb[i]) --out;
    g.out[i] = out;
  }
  return g;
}

}  // namespace t2o::kern
