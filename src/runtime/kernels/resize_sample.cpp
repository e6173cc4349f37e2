// Point sampling ops: GridSample (opset 16) and RoiAlign (10, 16).
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/kernels/util.h"

namespace t2o {

namespace {

// Reflects x into [lo, hi]. The period count is kept in floating point: grid values come from the
// model, and casting a huge quotient to an integer would be undefined.
double reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    double d = lo - x;
    double n = std::floor(d / range);
    double r = d - n * range;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double d = x - hi;
    double n = std::floor(d / range);
    double r = d - n * range;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubic_coeffs(double t, double c[4]) {
  const double a = -0.75;
  auto far = [a](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
  auto near = [a](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
  c[0] = far(t + 1), c[1] = near(t), c[2] = near(1 - t), c[3] = far(2 - t);
}

class GridSampleKernel : public OpKernel {
 public:
  explicit GridSampleKernel(const KernelInfo& info)
      : mode_(info.node.attr_string("mode", "bilinear")), padding_(info.node.attr_string("padding_mode", "zeros")),
        align_(info.node.attr_int("align_corners", 0) != 0) {
    const std::string& d = info.node.describe();
    if (mode_ != "bilinear" && mode_ != "nearest" && mode_ != "bicubic") throw Error(d + ": unknown mode '" + mode_ + "'");
    if (padding_ != "zeros" && padding_ != "border" && padding_ != "reflection")
      throw Error(d + ": unknown padding_mode '" + padding_ + "'");
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& grid = ctx.input(1);
    if (x.rank() != 4) ctx.fail("X must be 4-D (N x C x H x W), got " + dims_to_string(x.dims()));
    if (grid.rank() != 4 || grid.dim(0) != x.dim(0) || grid.dim(3) != 2)
      ctx.fail("grid must be N x H_out x W_out x 2, got " + dims_to_string(grid.dims()));
    int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), ho = grid.dim(1), wo = grid.dim(2);
    Tensor& y = ctx.allocate_output(0, x.dtype(), {n, c, ho, wo});
    if (y.numel() == 0) return;
    if (h == 0 || w == 0) ctx.fail("X has an empty spatial dimension");
    double xmin = align_ ? 0 : -0.5, ymin = xmin, xmax = align_ ? static_cast<double>(w - 1) : static_cast<double>(w) - 0.5,
           ymax = align_ ? static_cast<double>(h - 1) : static_cast<double>(h) - 0.5;
    auto denorm = [&](double v, int64_t len) {
      return align_ ? (v + 1) / 2 * static_cast<double>(len - 1) : ((v + 1) * static_cast<double>(len) - 1) / 2;
    };
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> ||
                    std::is_same_v<T, BFloat16>) {
        const T* xp = x.data<T>();
        T* yp = y.data<T>();
        kern::parallel_for(n * c, ctx.threads(), 1, [&](int64_t b, int64_t e) {
          for (int64_t p = b; p < e; ++p) {
            int64_t bn = p / c;
            const T* img = xp + p * h * w;
            auto pixel = [&](int64_t r, int64_t col) -> double {
              if (padding_ == "zeros") {
                if (col < 0 || col >= w || r < 0 || r >= h) return 0.0;
              } else if (padding_ == "border") {
                col = std::clamp<int64_t>(col, 0, w - 1), r = std::clamp<int64_t>(r, 0, h - 1);
              } else {
                col = static_cast<int64_t>(reflect(static_cast<double>(col), xmin, xmax));
                r = static_cast<int64_t>(reflect(static_cast<double>(r), ymin, ymax));
                col = std::clamp<int64_t>(col, 0, w - 1), r = std::clamp<int64_t>(r, 0, h - 1);
              }
              return static_cast<double>(static_cast<float>(img[r * w + col]));
            };
            for (int64_t i = 0; i < ho * wo; ++i) {
              double gx = grid.as_double((bn * ho * wo + i) * 2), gy = grid.as_double((bn * ho * wo + i) * 2 + 1);
              double fx = denorm(gx, w), fy = denorm(gy, h);
              if (mode_ == "nearest") fx = std::nearbyint(fx), fy = std::nearbyint(fy);
              if (!std::isfinite(fx) || !std::isfinite(fy)) {
                // No pixel is at a NaN or infinite position.
                yp[p * ho * wo + i] = T(std::numeric_limits<float>::quiet_NaN());
                continue;
              }
              if (fx < xmin || fx > xmax || fy < ymin || fy > ymax) {
                if (padding_ == "border") {
                  fx = std::clamp(fx, 0.0, static_cast<double>(w - 1)), fy = std::clamp(fy, 0.0, static_cast<double>(h - 1));
                } else if (padding_ == "reflection") {
                  fx = reflect(fx, xmin, xmax), fy = reflect(fy, ymin, ymax);
                }
              }
              // With zero padding every tap of a point this far out reads 0 (bicubic reaches two
              // pixels), so clamping changes nothing but keeps the indices in int64 range.
              fx = std::clamp(fx, -4.0, static_cast<double>(w) + 4), fy = std::clamp(fy, -4.0, static_cast<double>(h) + 4);
              double v;
              if (mode_ == "nearest") {
                v = pixel(static_cast<int64_t>(fy), static_cast<int64_t>(fx));
              } else if (mode_ == "bilinear") {
                int64_t x1 = static_cast<int64_t>(std::floor(fx)), y1 = static_cast<int64_t>(std::floor(fy));
                double dx = fx - static_cast<double>(x1), dy = fy - static_cast<double>(y1);
                v = (1 - dy) * ((1 - dx) * pixel(y1, x1) + dx * pixel(y1, x1 + 1)) +
                    dy * ((1 - dx) * pixel(y1 + 1, x1) + dx * pixel(y1 + 1, x1 + 1));
              } else {
                int64_t x0 = static_cast<int64_t>(std::floor(fx)) - 1, y0 = static_cast<int64_t>(std::floor(fy)) - 1;
                double cx[4], cy[4];
                cubic_coeffs(fx - static_cast<double>(x0) - 1, cx);
                cubic_coeffs(fy - static_cast<double>(y0) - 1, cy);
                v = 0;
                for (int r = 0; r < 4; ++r) {
                  double row = 0;
                  for (int q = 0; q < 4; ++q) row += cx[q] * pixel(y0 + r, x0 + q);
                  v += cy[r] * row;
                }
              }
              yp[p * ho * wo + i] = T(static_cast<float>(v));
            }
          }
        });
      } else {
        ctx.fail("element type " + std::string(dtype_name(x.dtype())) + " is not supported");
      }
    });
  }

 private:
  std::string mode_, padding_;
  bool align_;
};

class RoiAlignKernel : public OpKernel {
 public:
  explicit RoiAlignKernel(const KernelInfo& info)
      : max_(info.node.attr_string("mode", "avg") == "max"), oh_(info.node.attr_int("output_height", 1)),
        ow_(info.node.attr_int("output_width", 1)), ratio_(info.node.attr_int("sampling_ratio", 0)),
        scale_(info.node.attr_float("spatial_scale", 1.0f)) {
    std::string ctm = info.node.attr_string("coordinate_transformation_mode", info.opset >= 16 ? "half_pixel" : "output_half_pixel");
    half_pixel_ = ctm == "half_pixel";
    if (oh_ < 1 || ow_ < 1) throw Error(info.node.describe() + ": output_height and output_width must be positive");
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& rois = ctx.input(1);
    const Tensor& bi = ctx.input(2);
    if (x.rank() != 4) ctx.fail("X must be 4-D, got " + dims_to_string(x.dims()));
    if (rois.rank() != 2 || rois.dim(1) != 4) ctx.fail("rois must be num_rois x 4, got " + dims_to_string(rois.dims()));
    if (bi.rank() != 1 || bi.dim(0) != rois.dim(0)) ctx.fail("batch_indices must have num_rois values");
    int64_t nr = rois.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
    Tensor& y = ctx.allocate_output(0, x.dtype(), {nr, c, oh_, ow_});
    for (int64_t r = 0; r < nr; ++r)
      if (bi.as_int(r) < 0 || bi.as_int(r) >= x.dim(0)) ctx.fail("batch index " + std::to_string(bi.as_int(r)) + " is out of range");
    // Adaptive sampling takes ceil(roi / output) points per bin: a NaN or an absurd roi would make
    // that undefined or practically endless.
    // Checked here, not in the parallel loop, which must not throw.
    for (int64_t k = 0; k < rois.numel(); ++k)
      if (!std::isfinite(rois.as_double(k) * scale_)) ctx.fail("rois must be finite");
    for (int64_t r = 0; r < nr; ++r) {
      double rw = (rois.as_double(r * 4 + 2) - rois.as_double(r * 4)) * scale_;
      double rh = (rois.as_double(r * 4 + 3) - rois.as_double(r * 4 + 1)) * scale_;
      double gh = ratio_ > 0 ? static_cast<double>(ratio_) : std::ceil(rh / static_cast<double>(oh_));
      double gw = ratio_ > 0 ? static_cast<double>(ratio_) : std::ceil(rw / static_cast<double>(ow_));
      // More samples per bin than twice the image has pixels along an axis only re-reads zeros.
      if (gh > 2.0 * static_cast<double>(h + 1) + 2 || gw > 2.0 * static_cast<double>(w + 1) + 2)
        ctx.fail("roi " + std::to_string(r) + " needs " + std::to_string(gh) + " x " + std::to_string(gw) +
                 " samples per bin for a " + std::to_string(h) + " x " + std::to_string(w) + " image");
    }
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> ||
                    std::is_same_v<T, BFloat16>) {
        const T* xp = x.data<T>();
        T* yp = y.data<T>();
        kern::parallel_for(nr * c, ctx.threads(), 1, [&](int64_t b, int64_t e) {
          for (int64_t p = b; p < e; ++p) {
            int64_t r = p / c, ch = p % c;
            const T* img = xp + (bi.as_int(r) * c + ch) * h * w;
            double off = half_pixel_ ? 0.5 : 0.0;
            double x1 = rois.as_double(r * 4) * scale_ - off, y1 = rois.as_double(r * 4 + 1) * scale_ - off;
            double x2 = rois.as_double(r * 4 + 2) * scale_ - off, y2 = rois.as_double(r * 4 + 3) * scale_ - off;
            double rw = x2 - x1, rh = y2 - y1;
            if (!half_pixel_) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
            double bh = rh / static_cast<double>(oh_), bw = rw / static_cast<double>(ow_);
            int64_t gh = ratio_ > 0 ? ratio_ : static_cast<int64_t>(std::ceil(rh / static_cast<double>(oh_)));
            int64_t gw = ratio_ > 0 ? ratio_ : static_cast<int64_t>(std::ceil(rw / static_cast<double>(ow_)));
            double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
            for (int64_t ph = 0; ph < oh_; ++ph)
              for (int64_t pw = 0; pw < ow_; ++pw) {
                double acc = 0;
                bool first = true;
                for (int64_t iy = 0; iy < gh; ++iy) {
                  double yy = y1 + static_cast<double>(ph) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
                  for (int64_t ix = 0; ix < gw; ++ix) {
                    double xx = x1 + static_cast<double>(pw) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
                    double v = sample(img, h, w, yy, xx);
                    if (max_) acc = first ? v : std::max(acc, v);
                    else acc += v;
                    first = false;
                  }
                }
                yp[(p * oh_ + ph) * ow_ + pw] = T(static_cast<float>(max_ ? acc : acc / count));
              }
          }
        });
      } else {
        ctx.fail("element type " + std::string(dtype_name(x.dtype())) + " is not supported");
      }
    });
  }

 private:
  // Bilinear sample; in max mode the largest weighted corner (as ONNX Runtime does).
  template <typename T>
  double sample(const T* img, int64_t h, int64_t w, double y, double x) const {
    if (h <= 0 || w <= 0) return 0.0;  // an empty image has no corners to read
    if (y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(w)) return 0.0;
    y = std::max(y, 0.0), x = std::max(x, 0.0);
    int64_t yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(x), yh, xh;
    if (yl >= h - 1) yh = yl = h - 1, y = static_cast<double>(yl);
    else yh = yl + 1;
    if (xl >= w - 1) xh = xl = w - 1, x = static_cast<double>(xl);
    else xh = xl + 1;
    double ly = y - static_cast<double>(yl), lx = x - static_cast<double>(xl), hy = 1 - ly, hx = 1 - lx;
    auto px = [&](int64_t r, int64_t q) { return static_cast<double>(static_cast<float>(img[r * w + q])); };
    double a = hy * hx * px(yl, xl), b = hy * lx * px(yl, xh), c = ly * hx * px(yh, xl), d = ly * lx * px(yh, xh);
    return max_ ? std::max(std::max(a, b), std::max(c, d)) : a + b + c + d;
  }

  bool max_;
  int64_t oh_, ow_, ratio_;
  double scale_;
  bool half_pixel_ = true;
};

// MaxRoiPool(X, rois[num_rois, 5] = (batch index, x1, y1, x2, y2)): Caffe's RoI pooling, which
// torchvision's roi_pool computes too: corners scaled and rounded, the RoI at least one pixel,
// bin edges floor / ceil of equal fractions of it, clipped to the image; an empty bin is 0.
class MaxRoiPoolKernel : public OpKernel {
 public:
  explicit MaxRoiPoolKernel(const KernelInfo& info) : scale_(info.node.attr_float("spatial_scale", 1.0f)) {
    std::vector<int64_t> shape = info.node.attr_ints("pooled_shape", {});
    if (shape.size() != 2 || shape[0] < 1 || shape[1] < 1)
      throw Error(info.node.describe() + ": pooled_shape must be two positive sizes");
    ph_ = shape[0], pw_ = shape[1];
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& rois = ctx.input(1);
    if (x.rank() != 4) ctx.fail("X must be 4-D, got " + dims_to_string(x.dims()));
    if (rois.rank() != 2 || rois.dim(1) != 5) ctx.fail("rois must be num_rois x 5, got " + dims_to_string(rois.dims()));
    int64_t nr = rois.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
    for (int64_t k = 0; k < rois.numel(); ++k)
      if (!std::isfinite(rois.as_double(k) * scale_)) ctx.fail("rois must be finite");
    for (int64_t r = 0; r < nr; ++r) {
      double b = rois.as_double(r * 5);
      if (b < 0 || b >= static_cast<double>(x.dim(0))) ctx.fail("batch index " + std::to_string(b) + " is out of range");
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), {nr, c, ph_, pw_});
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        const T* xp = x.data<T>();
        T* yp = y.data<T>();
        kern::parallel_for(nr * c, ctx.threads(), 1, [&](int64_t b, int64_t e) {
          for (int64_t p = b; p < e; ++p) {
            int64_t r = p / c, ch = p % c;
            const T* img = xp + (static_cast<int64_t>(rois.as_double(r * 5)) * c + ch) * h * w;
            // Clamped far outside any image before the cast, so absurd corners stay defined.
            auto corner = [&](int k) {
              return static_cast<int64_t>(std::clamp(std::round(rois.as_double(r * 5 + k) * scale_), -1e12, 1e12));
            };
            int64_t x1 = corner(1), y1 = corner(2), x2 = corner(3), y2 = corner(4);
            double bh = static_cast<double>(std::max<int64_t>(y2 - y1 + 1, 1)) / static_cast<double>(ph_);
            double bw = static_cast<double>(std::max<int64_t>(x2 - x1 + 1, 1)) / static_cast<double>(pw_);
            auto clip = [](int64_t v, int64_t hi) { return std::min(std::max<int64_t>(v, 0), hi); };
            for (int64_t i = 0; i < ph_; ++i) {
              int64_t hs = clip(static_cast<int64_t>(std::floor(static_cast<double>(i) * bh)) + y1, h);
              int64_t he = clip(static_cast<int64_t>(std::ceil(static_cast<double>(i + 1) * bh)) + y1, h);
              for (int64_t j = 0; j < pw_; ++j) {
                int64_t ws = clip(static_cast<int64_t>(std::floor(static_cast<double>(j) * bw)) + x1, w);
                int64_t we = clip(static_cast<int64_t>(std::ceil(static_cast<double>(j + 1) * bw)) + x1, w);
                T best = T(0);
                bool any = false;
                for (int64_t yy = hs; yy < he; ++yy)
                  for (int64_t xx = ws; xx < we; ++xx) {
                    T v = img[yy * w + xx];
                    if (!any || v > best) best = v;
                    any = true;
                  }
                yp[(p * ph_ + i) * pw_ + j] = best;
              }
            }
          }
        });
      } else {
        ctx.fail("element type " + std::string(dtype_name(x.dtype())) + " is not supported");
      }
    });
  }

 private:
  double scale_;
  int64_t ph_ = 1, pw_ = 1;
};

}  // namespace

void register_resize_sample_kernels(KernelRegistry& r) {
  r.add("", "GridSample", 16, factory_of<GridSampleKernel>());
  r.add("", "RoiAlign", 10, factory_of<RoiAlignKernel>());
  r.add("", "MaxRoiPool", 1, factory_of<MaxRoiPoolKernel>());
}

}  // namespace t2o
