// Signal ops (opset 17): DFT, STFT, window generators, MelWeightMatrix.
// Complex values travel as a trailing dimension of 2 (real, imaginary); real input has 1 there.
#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <string>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/kernels/util.h"

namespace t2o {
namespace {

using cd = std::complex<double>;

int64_t int_scalar(const KernelContext& ctx, int i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1 || !dtype_is_integer(t.dtype())) ctx.fail(std::string(what) + " must be a single integer");
  return t.as_int(0);
}

double float_scalar(const KernelContext& ctx, int i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1) ctx.fail(std::string(what) + " must be a single number");
  return t.as_double(0);
}

template <typename T>
void store(T* p, int64_t i, double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) p[i] = T(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>) p[i] = v != 0;
  else p[i] = static_cast<T>(v);
}

void fill_from(Tensor& t, const std::vector<double>& v) {
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) store(p, static_cast<int64_t>(i), v[i]);
  });
}

// out[k] = sum_j in[j * stride] * e^(∓2πi jk/n) for k < m; twiddles come from one table so that
// the index product is reduced exactly modulo n.
void dft_line(const cd* in, int64_t stride, int64_t n, cd* out, int64_t m, const std::vector<cd>& tw) {
  for (int64_t k = 0; k < m; ++k) {
    cd s = 0;
    int64_t idx = 0;
    for (int64_t j = 0; j < n; ++j) {
      s += in[j * stride] * tw[static_cast<size_t>(idx)];
      idx += k;
      if (idx >= n) idx %= n;
    }
    out[k] = s;
  }
}

bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// In-place iterative radix-2 FFT (fast path for power-of-two lengths); same sign convention as dft_line.
void fft_pow2(std::vector<cd>& a, bool inverse) {
  size_t n = a.size();
  for (size_t i = 1, j = 0; i < n; ++i) {
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  double sign = inverse ? 1.0 : -1.0;
  for (size_t len = 2; len <= n; len <<= 1) {
    size_t half = len / 2;
    for (size_t k = 0; k < half; ++k) {
      double ang = sign * 2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(len);
      cd w(std::cos(ang), std::sin(ang));
      for (size_t i = k; i < n; i += len) {
        cd u = a[i], v = a[i + half] * w;
        a[i] = u + v;
        a[i + half] = u - v;
      }
    }
  }
}

// One line of the transform: the FFT when allowed and the length is a power of two, else direct.
void transform_line(const cd* in, int64_t stride, int64_t n, cd* out, int64_t m, const std::vector<cd>& tw,
                    bool fast, bool inverse, std::vector<cd>& scratch) {
  if (!fast || !is_pow2(n)) {
    dft_line(in, stride, n, out, m, tw);
    return;
  }
  scratch.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) scratch[static_cast<size_t>(j)] = in[j * stride];
  fft_pow2(scratch, inverse);
  for (int64_t k = 0; k < m; ++k) out[k] = scratch[static_cast<size_t>(k)];
}

std::vector<cd> twiddles(int64_t n, bool inverse) {
  std::vector<cd> tw(static_cast<size_t>(n));
  double sign = inverse ? 1.0 : -1.0;
  for (int64_t i = 0; i < n; ++i) {
    double a = sign * 2.0 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(n);
    tw[static_cast<size_t>(i)] = cd(std::cos(a), std::sin(a));
  }
  return tw;
}

void check_signal(const KernelContext& ctx, const Tensor& x) {
  if (!dtype_is_float(x.dtype())) ctx.fail("the signal must be floating point");
  if (x.rank() < 2 || (x.dim(-1) != 1 && x.dim(-1) != 2))
    ctx.fail("the signal's last dimension must be 1 (real) or 2 (complex), got shape " + dims_to_string(x.dims()));
}

void dft(KernelContext& ctx, bool fast) {
  const Tensor& x = ctx.input(0);
  check_signal(ctx, x);
  const Node& n = ctx.node();
  int64_t r = x.rank();
  // Opset 20 moved axis from an attribute (default 1) to input 2 (default -2).
  int64_t given = ctx.opset() >= 20 ? (ctx.has_input(2) ? int_scalar(ctx, 2, "axis") : -2) : n.attr_int("axis", 1);
  int64_t axis = given < 0 ? given + r : given;
  if (axis < 0 || axis > r - 2) ctx.fail("axis " + std::to_string(given) + " is not a signal axis");
  bool inverse = n.attr_int("inverse", 0) != 0, onesided = n.attr_int("onesided", 0) != 0;
  const Dims& d = x.dims();
  int64_t len = d[static_cast<size_t>(axis)];
  int64_t nfft = ctx.has_input(1) ? int_scalar(ctx, 1, "dft_length") : len;
  if (nfft < 1) ctx.fail("dft_length must be positive");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= d[static_cast<size_t>(i)];
  for (int64_t i = axis + 1; i < r - 1; ++i) inner *= d[static_cast<size_t>(i)];
  int64_t comps = d.back();
  // Zero-padded / truncated complex copy laid out [outer, nfft, inner].
  std::vector<cd> in(static_cast<size_t>(outer * nfft * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < std::min(len, nfft); ++j)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t src = ((o * len + j) * inner + i) * comps;
        in[static_cast<size_t>((o * nfft + j) * inner + i)] = cd(x.as_double(src), comps == 2 ? x.as_double(src + 1) : 0.0);
      }
  int64_t m = onesided ? nfft / 2 + 1 : nfft;
  Dims od = d;
  od[static_cast<size_t>(axis)] = m;
  od.back() = 2;
  std::vector<cd> tw = twiddles(nfft, inverse);
  std::vector<double> out(static_cast<size_t>(numel_of(od)));
  double scale = inverse ? 1.0 / static_cast<double>(nfft) : 1.0;
  std::vector<cd> line(static_cast<size_t>(m)), scratch;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      transform_line(in.data() + o * nfft * inner + i, inner, nfft, line.data(), m, tw, fast, inverse, scratch);
      for (int64_t k = 0; k < m; ++k) {
        size_t dst = static_cast<size_t>(((o * m + k) * inner + i) * 2);
        out[dst] = line[static_cast<size_t>(k)].real() * scale;
        out[dst + 1] = line[static_cast<size_t>(k)].imag() * scale;
      }
    }
  fill_from(ctx.allocate_output(0, x.dtype(), od), out);
}

void stft(KernelContext& ctx, bool fast) {
  const Tensor& x = ctx.input(0);
  check_signal(ctx, x);
  if (x.rank() != 3) ctx.fail("the signal must have shape [batch, length, 1 or 2]");
  int64_t step = int_scalar(ctx, 1, "frame_step");
  if (step < 1) ctx.fail("frame_step must be positive");
  std::vector<double> window;
  if (ctx.has_input(2)) {
    const Tensor& w = ctx.input(2);
    if (w.rank() != 1) ctx.fail("window must be 1-D");
    for (int64_t i = 0; i < w.numel(); ++i) window.push_back(w.as_double(i));
  }
  int64_t flen = ctx.has_input(3) ? int_scalar(ctx, 3, "frame_length") : static_cast<int64_t>(window.size());
  if (flen < 1) ctx.fail("frame_length (or a window) is required and must be positive");
  if (!window.empty() && static_cast<int64_t>(window.size()) != flen) ctx.fail("window length differs from frame_length");
  int64_t batch = x.dim(0), len = x.dim(1), comps = x.dim(2);
  // Before sizing anything by frame_length, which comes from the model.
  if (len < flen) ctx.fail("the signal is shorter than one frame");
  if (window.empty()) window.assign(static_cast<size_t>(flen), 1.0);
  bool onesided = ctx.node().attr_int("onesided", 1) != 0;
  int64_t frames = 1 + (len - flen) / step;
  int64_t bins = onesided ? flen / 2 + 1 : flen;
  Dims od{batch, frames, bins, 2};
  std::vector<double> out(static_cast<size_t>(numel_of(od)));
  std::vector<cd> tw = twiddles(flen, false), frame(static_cast<size_t>(flen)), line(static_cast<size_t>(bins)), scratch;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t j = 0; j < flen; ++j) {
        int64_t src = (b * len + f * step + j) * comps;
        double w = window[static_cast<size_t>(j)];
        frame[static_cast<size_t>(j)] = cd(x.as_double(src) * w, comps == 2 ? x.as_double(src + 1) * w : 0.0);
      }
      transform_line(frame.data(), 1, flen, line.data(), bins, tw, fast, false, scratch);
      for (int64_t k = 0; k < bins; ++k) {
        size_t dst = static_cast<size_t>(((b * frames + f) * bins + k) * 2);
        out[dst] = line[static_cast<size_t>(k)].real();
        out[dst + 1] = line[static_cast<size_t>(k)].imag();
      }
    }
  fill_from(ctx.allocate_output(0, x.dtype(), od), out);
}

DType output_datatype(const KernelContext& ctx) {
  int64_t v = ctx.node().attr_int("output_datatype", static_cast<int64_t>(DType::Float));
  DType dt = static_cast<DType>(v);
  if (!dtype_is_valid(static_cast<int32_t>(v)) || dt == DType::String || dt == DType::Complex64 ||
      dt == DType::Complex128 || dt == DType::Undefined)
    ctx.fail("unsupported output_datatype " + std::to_string(v));
  return dt;
}

// Cosine-sum windows: a0 - a1 cos(2πn/N) + a2 cos(4πn/N), N = size (periodic) or size - 1.
FnKernel::Fn cosine_window(double a0, double a1, double a2) {
  return [a0, a1, a2](KernelContext& ctx) {
    int64_t size = int_scalar(ctx, 0, "size");
    if (size < 0) ctx.fail("size must be non-negative");
    bool periodic = ctx.node().attr_int("periodic", 1) != 0;
    double N = static_cast<double>(periodic ? size : size - 1);
    // The output first: its allocation is what the memory limit checks (size comes from data).
    Tensor& out = ctx.allocate_output(0, output_datatype(ctx), {size});
    // cos(t_i) by rotating (cos, sin) one step at a time from an exact value every 256 elements
    // (errors stay near 1e-14), and cos(2t) = 2 cos(t)^2 - 1: a window of hundreds of millions of
    // points (the memory limit allows them) takes a second, not minutes of libm calls.
    double step = N > 0 ? 2.0 * std::numbers::pi / N : 0.0;
    double cd = std::cos(step), sd = std::sin(step);
    dispatch_dtype(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* p = out.data<T>();
      kern::parallel_for(size, ctx.threads(), 4096, [&](int64_t b, int64_t e) {
        double c = 1.0, sn = 0.0;
        for (int64_t i = b; i < e; ++i) {
          if (i == b || (i & 255) == 0) {
            c = std::cos(step * static_cast<double>(i));
            sn = std::sin(step * static_cast<double>(i));
          }
          store(p, i, a0 - a1 * c + a2 * (2.0 * c * c - 1.0));
          double nc = c * cd - sn * sd;
          sn = sn * cd + c * sd;
          c = nc;
        }
      });
    });
  };
}

void mel_weight_matrix(KernelContext& ctx) {
  int64_t mels = int_scalar(ctx, 0, "num_mel_bins"), nfft = int_scalar(ctx, 1, "dft_length");
  int64_t rate = int_scalar(ctx, 2, "sample_rate");
  double lo = float_scalar(ctx, 3, "lower_edge_hertz"), hi = float_scalar(ctx, 4, "upper_edge_hertz");
  if (mels < 1 || nfft < 1 || rate < 1) ctx.fail("num_mel_bins, dft_length and sample_rate must be positive");
  int64_t bins = nfft / 2 + 1;
  // The output first: its size is checked against the memory limit before anything is sized from
  // the inputs (a 100-byte model asked for petabytes here).
  Tensor& y = ctx.allocate_output(0, output_datatype(ctx), {bins, mels});
  auto to_mel = [](double f) { return 2595.0 * std::log10(1.0 + f / 700.0); };
  double lo_mel = to_mel(lo), hi_mel = to_mel(hi);
  // As the ONNX reference: mel_step divides by num_mel_bins + 2 points.
  double step = (hi_mel - lo_mel) / static_cast<double>(mels + 2);
  std::vector<int64_t> fb(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    double hz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * step + lo_mel) / 2595.0) - 1.0);
    fb[static_cast<size_t>(i)] = static_cast<int64_t>(std::floor(static_cast<double>(nfft + 1) * hz / static_cast<double>(rate)));
  }
  dispatch_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = y.data<T>();
    auto set = [&](int64_t j, int64_t i, double v) {
      if (j < 0 || j >= bins) ctx.fail("a mel band edge falls outside the spectrogram; check the edge frequencies");
      store(p, j * mels + i, v);
    };
    for (int64_t i = 0; i < mels; ++i) {
      int64_t l = fb[static_cast<size_t>(i)], c = fb[static_cast<size_t>(i + 1)], h = fb[static_cast<size_t>(i + 2)];
      if (c == l) set(c, i, 1.0);
      else
        for (int64_t j = l; j <= c; ++j) set(j, i, static_cast<double>(j - l) / static_cast<double>(c - l));
      if (h > c)
        for (int64_t j = c; j < h; ++j) set(j, i, static_cast<double>(h - j) / static_cast<double>(h - c));
    }
  });
}

// The FFT fast path is chosen at build from KernelInfo::fast_paths.
KernelFactory with_fast(void (*f)(KernelContext&, bool)) {
  return [f](const KernelInfo& info) {
    bool fast = info.fast_paths;
    return std::make_unique<FnKernel>([f, fast](KernelContext& ctx) { f(ctx, fast); });
  };
}

}  // namespace

void register_signal_kernels(KernelRegistry& r) {
  r.add("", "DFT", 17, with_fast(dft));
  r.add("", "DFT", 20, with_fast(dft));
  r.add("", "STFT", 17, with_fast(stft));
  r.add("", "HannWindow", 17, stateless(cosine_window(0.5, 0.5, 0.0)));
  r.add("", "HammingWindow", 17, stateless(cosine_window(25.0 / 46.0, 21.0 / 46.0, 0.0)));
  r.add("", "BlackmanWindow", 17, stateless(cosine_window(0.42, 0.5, 0.08)));
  r.add("", "MelWeightMatrix", 17, stateless(mel_weight_matrix));
}

}  // namespace t2o
