// Cast and CastLike between numeric types, bool, f16/bf16 and strings. Strings follow numpy:
// "1.5", "NaN", "-INF" parse; floats print as numpy's str (shortest round-trip digits,
// positional for 1e-4 <= |x| < 1e16, scientific otherwise).
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/kernels/elementwise_util.h"
#include "runtime/optimize.h"

namespace t2o {

namespace {

using namespace kern;

// Shortest digits of v that read back as v when rounded to the storage type.
template <typename T>
std::string shortest_digits(float v, bool scientific) {
  if constexpr (std::is_same_v<T, float>) {
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, v,
                             scientific ? std::chars_format::scientific : std::chars_format::fixed);
    return std::string(buf, res.ptr);
  } else {
    // f16/bf16 have few digits: try increasing precision until the value round-trips.
    char buf[64];
    for (int p = 1; p <= 9; ++p) {
      std::snprintf(buf, sizeof buf, "%.*e", p - 1, static_cast<double>(v));
      float back = std::strtof(buf, nullptr);
      if (static_cast<float>(T(back)) == v) break;
    }
    if (!scientific) {
      // Rewrite the found digits positionally through to_chars of the parsed float.
      float back = std::strtof(buf, nullptr);
      auto res = std::to_chars(buf, buf + sizeof buf, back, std::chars_format::fixed);
      return std::string(buf, res.ptr);
    }
    // With the minimal precision %e has no trailing zeros, and its exponent has at least two
    // digits, as numpy prints.
    return buf;
  }
}

template <typename T>
std::string float_to_string(T value) {
  double d = static_cast<double>(ld(value));
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  double a = std::fabs(d);
  bool sci = a < 1e-4 || a >= 1e16;
  std::string s;
  if constexpr (std::is_same_v<T, double>) {
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, d, sci ? std::chars_format::scientific : std::chars_format::fixed);
    s.assign(buf, res.ptr);
  } else {
    s = shortest_digits<T>(static_cast<float>(d), sci);
  }
  if (!sci && s.find('.') == std::string::npos) s += ".0";
  return s;
}

template <typename T>
std::string to_string_of(T v) {
  if constexpr (std::is_same_v<T, bool>) return v ? "True" : "False";
  else if constexpr (is_float_like<T>) return float_to_string(v);
  else return std::to_string(v);
}

// Parses one string as a number; false when it is not one.
bool parse_number(const std::string& s, double& d, bool& is_int, long long& i, unsigned long long& u) {
  const char* b = s.c_str();
  char* end = nullptr;
  errno = 0;
  if (!s.empty() && s[0] == '-') {
    i = std::strtoll(b, &end, 10);
    is_int = *end == '\0' && end != b && errno == 0;
    u = static_cast<unsigned long long>(i);
  } else {
    u = std::strtoull(b, &end, 10);
    is_int = *end == '\0' && end != b && errno == 0;
    i = static_cast<long long>(u);
  }
  if (is_int) {
    d = s[0] == '-' ? static_cast<double>(i) : static_cast<double>(u);
    return true;
  }
  if (s == "True" || s == "true") return d = 1, true;
  if (s == "False" || s == "false") return d = 0, true;
  d = std::strtod(b, &end);
  return end != b && *end == '\0';
}

template <typename R>
R from_string(const KernelContext& ctx, const std::string& s) {
  double d = 0;
  bool is_int = false;
  long long i = 0;
  unsigned long long u = 0;
  if (!parse_number(s, d, is_int, i, u)) ctx.fail("cannot parse '" + s + "' as a number");
  if constexpr (std::is_integral_v<R> && !std::is_same_v<R, bool>) {
    if (is_int) return std::is_signed_v<R> ? static_cast<R>(i) : static_cast<R>(u);
  }
  if constexpr (std::is_same_v<R, float>) {
    // Parse as float directly so "0.1" is the nearest float, not a twice-rounded double.
    char* end = nullptr;
    float f = std::strtof(s.c_str(), &end);
    if (!is_int && *end == '\0') return f;
  }
  return st<R>(d);
}

void cast_tensor(KernelContext& ctx, const Tensor& x, DType to, bool fast) {
  Tensor& out = ctx.allocate_output(0, to, x.dims());
  int64_t n = x.numel();
  if (x.dtype() == DType::String && to == DType::String) {
    for (int64_t i = 0; i < n; ++i) out.strings()[i] = x.strings()[i];
    return;
  }
  if (x.dtype() == DType::String) {
    dispatch_dtype(to, [&](auto tag) {
      using R = decltype(tag);
      R* po = out.data<R>();
      for (int64_t i = 0; i < n; ++i) po[i] = from_string<R>(ctx, x.strings()[i]);
    });
    return;
  }
  if (to == DType::String) {
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* px = x.data<T>();
      for (int64_t i = 0; i < n; ++i) out.strings()[i] = to_string_of(px[i]);
    });
    return;
  }
  if (x.dtype() == to) {
    std::memcpy(out.raw(), x.raw(), x.nbytes());
    return;
  }
  // float32 <-> float16 in bulk (F16C), the same values as the element-wise conversions below.
  if (fast && x.dtype() == DType::Float && to == DType::Float16) {
    parallel_for(n, ctx.threads(), kGrain, [&](int64_t b, int64_t e) {
      floats_to_halves(x.data<float>() + b, reinterpret_cast<uint16_t*>(out.data<Half>() + b), static_cast<size_t>(e - b));
    });
    return;
  }
  if (fast && x.dtype() == DType::Float16 && to == DType::Float) {
    parallel_for(n, ctx.threads(), kGrain, [&](int64_t b, int64_t e) {
      halves_to_floats(reinterpret_cast<const uint16_t*>(x.data<Half>() + b), out.data<float>() + b, static_cast<size_t>(e - b));
    });
    return;
  }
  dispatch_dtype(x.dtype(), [&](auto tin) {
    using T = decltype(tin);
    dispatch_dtype(to, [&](auto tout) {
      using R = decltype(tout);
      unary_apply<T, R>(x, out, [](auto v) { return v; }, fast, ctx.threads());
    });
  });
}

// internal::HalfToFloat, the input side of a float16 product computed in float32
// (runtime/optimize.h): a Cast to float32 that only takes float16, so a file whose product mixes
// types fails here as the product itself would on the reference kernels.
void half_to_float_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::Float16)
    ctx.fail("the product's inputs must all be float16 (its weights are), got " + std::string(dtype_name(x.dtype())));
  cast_tensor(ctx, x, DType::Float, true);
}

DType dtype_of_attr(const KernelInfo& info) {
  int64_t to = info.node.attr_int("to");
  if (!dtype_is_valid(static_cast<int32_t>(to)) || to == 0 || to == 14 || to == 15)
    throw Error(info.node.describe() + ": cannot cast to element type " + std::to_string(to));
  return static_cast<DType>(to);
}

}  // namespace

void register_elementwise_cast_kernels(KernelRegistry& r) {
  r.add("", "Cast", 6, [](const KernelInfo& info) {
    DType to = dtype_of_attr(info);
    bool fast = info.fast_paths;
    return std::make_unique<FnKernel>([to, fast](KernelContext& ctx) { cast_tensor(ctx, ctx.input(0), to, fast); });
  });
  r.add(kInternalDomain, "HalfToFloat", 1, stateless(half_to_float_kernel));
  r.add("", "CastLike", 15, [](const KernelInfo& info) {
    bool fast = info.fast_paths;
    return std::make_unique<FnKernel>(
        [fast](KernelContext& ctx) { cast_tensor(ctx, ctx.input(0), ctx.input(1).dtype(), fast); });
  });
}

}  // namespace t2o
