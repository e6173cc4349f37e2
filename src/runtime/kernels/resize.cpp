// Resize (opsets 10, 11, 13) and Upsample (7, 9). Interpolation is separable, so the kernel
// resamples one axis at a time: each pass maps every output index of that axis to a few input
// taps with weights, computed once per axis. Axes whose size and mapping do not change are skipped.
#include <cmath>
#include <limits>

#include "runtime/kernels/util.h"

namespace t2o {

void register_resize_sample_kernels(KernelRegistry& r);  // resize_sample.cpp

namespace {

struct ResizeAttrs {
  std::string mode = "nearest";
  std::string ctm = "half_pixel";  // coordinate_transformation_mode
  std::string nearest_mode = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

// Input taps of one output index along one axis.
struct AxisMap {
  int n = 1;                  // taps per output index
  std::vector<int64_t> idx;   // out * n
  std::vector<double> w;      // out * n
  std::vector<char> outside;  // tf_crop_and_resize: output takes the extrapolation value
  bool identity = false;
};

void cubic_coeffs(double t, double a, double c[4]) {
  auto far = [a](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
  auto near = [a](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
  c[0] = far(t + 1);
  c[1] = near(t);
  c[2] = near(1 - t);
  c[3] = far(2 - t);
}

AxisMap axis_map(const KernelContext& ctx, const ResizeAttrs& a, int64_t in, int64_t out, double scale, double roi_start,
                 double roi_end) {
  AxisMap m;
  m.n = a.mode == "nearest" ? 1 : a.mode == "linear" ? 2 : 4;
  m.idx.resize(static_cast<size_t>(out * m.n));
  m.w.resize(static_cast<size_t>(out * m.n));
  m.outside.assign(static_cast<size_t>(out), 0);
  bool crop = a.ctm == "tf_crop_and_resize";
  // The resized length in the coordinate formulas is in * scale, unrounded (as in the ONNX
  // reference); with sizes given it equals the output size.
  double len = static_cast<double>(in) * scale;
  for (int64_t o = 0; o < out; ++o) {
    double x;
    double od = static_cast<double>(o);
    if (a.ctm == "half_pixel") x = (od + 0.5) / scale - 0.5;
    else if (a.ctm == "pytorch_half_pixel") x = len > 1 ? (od + 0.5) / scale - 0.5 : 0.0;
    else if (a.ctm == "align_corners") x = len > 1 ? od * static_cast<double>(in - 1) / (len - 1) : 0.0;
    else if (a.ctm == "asymmetric") x = od / scale;
    else if (a.ctm == "tf_half_pixel_for_nn") x = (od + 0.5) / scale;
    else if (crop)
      x = len > 1 ? roi_start * static_cast<double>(in - 1) +
                        od * (roi_end - roi_start) * static_cast<double>(in - 1) / (len - 1)
                  : 0.5 * (roi_start + roi_end) * static_cast<double>(in - 1);
    else ctx.fail("unknown coordinate_transformation_mode '" + a.ctm + "'");
    if (crop && !(x >= 0 && x <= static_cast<double>(in - 1))) {  // NaN too
      m.outside[static_cast<size_t>(o)] = 1;
      for (int t = 0; t < m.n; ++t) m.idx[static_cast<size_t>(o * m.n + t)] = 0;
      continue;
    }
    // Past 4 pixels outside, every tap clamps to the edge (or is excluded) either way; clamping x
    // first keeps the integer conversions below defined for huge or NaN coordinates.
    x = std::isnan(x) ? 0.0 : std::clamp(x, -4.0, static_cast<double>(in) + 4);
    auto clamp = [in](int64_t i) { return std::min<int64_t>(std::max<int64_t>(i, 0), in - 1); };
    int64_t* ip = &m.idx[static_cast<size_t>(o * m.n)];
    double* wp = &m.w[static_cast<size_t>(o * m.n)];
    if (m.n == 1) {
      double f = std::floor(x);
      int64_t i;
      const std::string& nm = a.nearest_mode;
      if (nm == "round_prefer_floor") i = static_cast<int64_t>(x == f + 0.5 ? f : std::round(x));
      else if (nm == "round_prefer_ceil") i = static_cast<int64_t>(x == f + 0.5 ? f + 1 : std::round(x));
      else if (nm == "floor") i = static_cast<int64_t>(f);
      else if (nm == "ceil") i = static_cast<int64_t>(std::ceil(x));
      else if (nm == "simple") i = static_cast<int64_t>(scale < 1 ? std::ceil(x) : f);  // opset < 11
      else ctx.fail("unknown nearest_mode '" + nm + "'");
      ip[0] = clamp(i);
      wp[0] = 1;
      continue;
    }
    double f = std::floor(x), t = x - f;
    int64_t i0 = static_cast<int64_t>(f);
    if (m.n == 2) {
      ip[0] = clamp(i0), ip[1] = clamp(i0 + 1);
      wp[0] = 1 - t, wp[1] = t;
      continue;
    }
    double c[4];
    cubic_coeffs(t, a.cubic_a, c);
    double sum = 0;
    for (int k = 0; k < 4; ++k) {
      int64_t i = i0 - 1 + k;
      if (a.exclude_outside && (i < 0 || i >= in)) c[k] = 0;
      ip[k] = clamp(i);
      wp[k] = c[k];
      sum += c[k];
    }
    if (a.exclude_outside && sum != 0)
      for (int k = 0; k < 4; ++k) wp[k] /= sum;
  }
  m.identity = in == out && !crop;
  for (int64_t o = 0; m.identity && o < out; ++o)
    for (int t = 0; t < m.n; ++t) {
      double w = m.w[static_cast<size_t>(o * m.n + t)];
      int64_t i = m.idx[static_cast<size_t>(o * m.n + t)];
      if (w != 0 && (i != o || w != 1)) m.identity = false;
    }
  return m;
}

// Resamples axis `d` of `src` (dims `dims`) into dst; V is the working element type.
template <typename V>
void resample_axis(const V* src, V* dst, const Dims& dims, size_t d, int64_t out, const AxisMap& m, V extrapolation,
                   int threads) {
  int64_t outer = 1, inner = 1, in = dims[d];
  for (size_t i = 0; i < d; ++i) outer *= dims[i];
  for (size_t i = d + 1; i < dims.size(); ++i) inner *= dims[i];
  kern::parallel_for(outer * out, threads, 64, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t po = r / out, o = r % out;
      V* dp = dst + r * inner;
      const V* sp = src + po * in * inner;
      if (m.outside[static_cast<size_t>(o)]) {
        for (int64_t i = 0; i < inner; ++i) dp[i] = extrapolation;
        continue;
      }
      const int64_t* ip = &m.idx[static_cast<size_t>(o * m.n)];
      const double* wp = &m.w[static_cast<size_t>(o * m.n)];
      if (m.n == 1) {
        const V* s = sp + ip[0] * inner;
        for (int64_t i = 0; i < inner; ++i) dp[i] = s[i];
        continue;
      }
      if constexpr (std::is_floating_point_v<V>) {
        for (int64_t i = 0; i < inner; ++i) dp[i] = 0;
        for (int t = 0; t < m.n; ++t) {
          V w = static_cast<V>(wp[t]);
          if (w == 0) continue;
          const V* s = sp + ip[t] * inner;
          for (int64_t i = 0; i < inner; ++i) dp[i] += w * s[i];
        }
      }
    }
  });
}

template <typename T>
void resize_typed(const Tensor& x, Tensor& y, const std::vector<AxisMap>& maps, double extrapolation, bool nearest,
                  int threads) {
  // Nearest copies elements exactly in their own type; interpolation works in float/double.
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  auto run = [&](auto vtag) {
    using V = decltype(vtag);
    std::vector<V> cur(static_cast<size_t>(x.numel()));
    const T* xp = x.data<T>();
    for (size_t i = 0; i < cur.size(); ++i) cur[i] = static_cast<V>(xp[i]);
    Dims dims = x.dims();
    std::vector<V> next;
    for (size_t d = 0; d < dims.size(); ++d) {
      int64_t out = y.dim(static_cast<int>(d));
      if (maps[d].identity) continue;
      Dims nd = dims;
      nd[d] = out;
      next.assign(static_cast<size_t>(numel_of(nd)), V{});
      resample_axis<V>(cur.data(), next.data(), dims, d, out, maps[d], static_cast<V>(extrapolation), threads);
      cur.swap(next);
      dims = nd;
    }
    T* yp = y.data<T>();
    for (size_t i = 0; i < cur.size(); ++i) {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<V, T>) {
        double v = std::nearbyint(static_cast<double>(cur[i]));
        v = std::min<double>(std::max<double>(v, static_cast<double>(std::numeric_limits<T>::lowest())),
                             static_cast<double>(std::numeric_limits<T>::max()));
        yp[i] = static_cast<T>(v);
      } else {
        yp[i] = static_cast<T>(cur[i]);
      }
    }
  };
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    (void)nearest;
    run(float{});
  } else {
    if (nearest) run(T{});
    else run(A{});
  }
}

class ResizeKernel : public OpKernel {
 public:
  // `upsample`: Upsample-7/9 semantics; `legacy`: Resize-10 (inputs X, scales).
  ResizeKernel(const KernelInfo& info, bool upsample) : upsample_(upsample) {
    const Node& n = info.node;
    legacy_ = upsample || info.opset < 11;
    a_.mode = n.attr_string("mode", "nearest");
    if (a_.mode == "bilinear" || a_.mode == "trilinear") a_.mode = "linear";
    if (legacy_) {
      a_.ctm = "asymmetric";
      a_.nearest_mode = "simple";
    } else {
      a_.ctm = n.attr_string("coordinate_transformation_mode", "half_pixel");
      a_.nearest_mode = n.attr_string("nearest_mode", "round_prefer_floor");
      a_.cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
      a_.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
      a_.extrapolation = n.attr_float("extrapolation_value", 0.0f);
    }
    if (a_.mode != "nearest" && a_.mode != "linear" && a_.mode != "cubic")
      throw Error(n.describe() + ": unknown mode '" + a_.mode + "'");
    if (legacy_ && a_.mode == "cubic") throw Error(n.describe() + ": cubic mode needs opset 11");
    if (upsample && info.opset < 9) attr_scales_ = n.attr_floats("scales");
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    size_t r = static_cast<size_t>(x.rank());
    std::vector<double> scales;
    Dims out(r);
    std::vector<double> roi;
    auto read_scales = [&](const Tensor& t) {
      if (!dtype_is_float(t.dtype())) ctx.fail("scales must be a float tensor");
      for (int64_t i = 0; i < t.numel(); ++i) scales.push_back(static_cast<double>(static_cast<float>(t.as_double(i))));
    };
    if (upsample_ && !attr_scales_.empty()) {
      for (float s : attr_scales_) scales.push_back(s);
    } else if (legacy_) {
      read_scales(ctx.input(1));
    } else {
      if (ctx.has_input(1) && ctx.input(1).numel() > 0)
        for (int64_t i = 0; i < ctx.input(1).numel(); ++i) roi.push_back(ctx.input(1).as_double(i));
      if (ctx.has_input(2) && ctx.input(2).numel() > 0) read_scales(ctx.input(2));
      if (ctx.has_input(3) && ctx.input(3).numel() > 0) {
        if (!scales.empty()) ctx.fail("only one of scales and sizes may be given");
        Dims sizes = kern::to_int_vector(ctx.input(3));
        if (sizes.size() != r) ctx.fail("sizes must have " + std::to_string(r) + " values (the rank of X)");
        for (size_t i = 0; i < r; ++i) {
          if (sizes[i] < 0) ctx.fail("sizes must not be negative");
          out[i] = sizes[i];
          scales.push_back(x.dims()[i] ? static_cast<double>(sizes[i]) / static_cast<double>(x.dims()[i]) : 1.0);
        }
      } else if (scales.empty()) {
        ctx.fail("one of scales and sizes is required");
      }
    }
    if (scales.size() != r)
      ctx.fail("scales must have " + std::to_string(r) + " values (the rank of X), got " + std::to_string(scales.size()));
    bool from_sizes = !legacy_ && ctx.has_input(3) && ctx.input(3).numel() > 0;
    for (size_t i = 0; i < r; ++i) {
      if (!(scales[i] > 0) || !std::isfinite(scales[i])) ctx.fail("scales must be positive and finite");
      if (!from_sizes) {
        double o = std::floor(static_cast<double>(x.dims()[i]) * scales[i]);
        if (o > static_cast<double>(kMaxElements)) ctx.fail("scales make axis " + std::to_string(i) + " impossibly large");
        out[i] = static_cast<int64_t>(o);
      }
    }
    if (a_.ctm == "tf_crop_and_resize" && roi.size() != 2 * r)
      ctx.fail("tf_crop_and_resize needs roi with " + std::to_string(2 * r) + " values");
    Tensor& y = ctx.allocate_output(0, x.dtype(), out);
    if (y.numel() == 0) return;
    if (x.numel() == 0) ctx.fail("cannot resize an empty tensor to a non-empty one");
    std::vector<AxisMap> maps;
    bool crop = a_.ctm == "tf_crop_and_resize";
    for (size_t i = 0; i < r; ++i)
      // Only tf_crop_and_resize reads roi (checked above to hold 2 x rank values); other modes
      // ignore it, whatever its length.
      maps.push_back(axis_map(ctx, a_, x.dims()[i], out[i], scales[i], crop ? roi[i] : 0, crop ? roi[i + r] : 1));
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        ctx.fail("bool input is not supported");
      } else {
        resize_typed<T>(x, y, maps, a_.extrapolation, a_.mode == "nearest", ctx.threads());
      }
    });
  }

 private:
  bool upsample_, legacy_ = false;
  ResizeAttrs a_;
  std::vector<float> attr_scales_;
};

KernelFactory resize_factory(bool upsample) {
  return [upsample](const KernelInfo& info) { return std::make_unique<ResizeKernel>(info, upsample); };
}

}  // namespace

void register_resize_kernels(KernelRegistry& r) {
  r.add("", "Upsample", 7, resize_factory(true));
  r.add("", "Resize", 10, resize_factory(false));
  register_resize_sample_kernels(r);
}

}  // namespace t2o
