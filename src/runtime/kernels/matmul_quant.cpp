// Integer matrix products (MatMulInteger, QLinearMatMul) and Det.
// Zero points are scalars or per-row (A, length M) / per-column (B, length N) vectors.
#include <cmath>
#include <type_traits>

#include "runtime/kernels/int8.h"
#include "runtime/kernels/matmul_util.h"

namespace t2o::kern {

namespace {

bool is_q8(DType t) { return t == DType::UInt8 || t == DType::Int8; }

// Per-row (or per-column) int32 values of a quantization parameter; `len` entries.
std::vector<int32_t> zero_points(const KernelContext& ctx, int idx, int64_t len, const char* what) {
  std::vector<int32_t> zp(static_cast<size_t>(std::max<int64_t>(len, 0)), 0);
  if (!ctx.has_input(idx)) return zp;
  const Tensor& z = ctx.input(idx);
  if (!is_q8(z.dtype())) ctx.fail(std::string(what) + " must be int8 or uint8");
  if (z.numel() == 1) std::fill(zp.begin(), zp.end(), static_cast<int32_t>(z.as_int(0)));
  else if (z.numel() == len)
    for (int64_t i = 0; i < len; ++i) zp[static_cast<size_t>(i)] = static_cast<int32_t>(z.as_int(i));
  else ctx.fail(std::string(what) + " must be a scalar or have " + std::to_string(len) + " elements");
  return zp;
}

std::vector<float> scales(const KernelContext& ctx, int idx, int64_t len, const char* what) {
  const Tensor& s = ctx.input(idx);
  if (!dtype_is_float(s.dtype())) ctx.fail(std::string(what) + " must be floating point");
  std::vector<float> v(static_cast<size_t>(std::max<int64_t>(len, 0)));
  if (s.numel() == 1) std::fill(v.begin(), v.end(), static_cast<float>(s.as_double(0)));
  else if (s.numel() == len)
    for (int64_t i = 0; i < len; ++i) v[static_cast<size_t>(i)] = static_cast<float>(s.as_double(i));
  else ctx.fail(std::string(what) + " must be a scalar or have " + std::to_string(len) + " elements");
  return v;
}

// int32 accumulation of (a - azp[m]) * (b - bzp[n]) over the broadcast batch.
void int_matmul(const MatmulShape& s, const Tensor& A, const Tensor& B, const std::vector<int32_t>& azp,
                const std::vector<int32_t>& bzp, int32_t* y) {
  // Widen once with the zero points taken off, so the inner loop is a plain int32 axpy.
  auto widen = [](const Tensor& t) {
    std::vector<int32_t> v(static_cast<size_t>(t.numel()));
    if (t.dtype() == DType::Int8) std::copy(t.data<int8_t>(), t.data<int8_t>() + t.numel(), v.begin());
    else std::copy(t.data<uint8_t>(), t.data<uint8_t>() + t.numel(), v.begin());
    return v;
  };
  std::vector<int32_t> a = widen(A), b = widen(B);
  for (size_t i = 0; i < b.size(); ++i) b[i] -= bzp[i % static_cast<size_t>(s.N)];
  int64_t idx = 0;
  auto one = [&](int64_t ao, int64_t bo) {
    int32_t* yp = y + idx++ * s.M * s.N;
    for (int64_t m = 0; m < s.M; ++m) {
      int32_t* row = yp + m * s.N;
      std::fill(row, row + s.N, 0);
      for (int64_t k = 0; k < s.K; ++k) {
        int32_t av = a[static_cast<size_t>(ao + m * s.K + k)] - azp[static_cast<size_t>(m)];
        const int32_t* bp = b.data() + bo + k * s.N;
        for (int64_t n = 0; n < s.N; ++n) row[n] += av * bp[n];
      }
    }
  };
  if (s.batch.empty()) one(0, 0);
  else for_each_broadcast(s.batch, {s.a_bstr, s.b_bstr}, [&](int64_t, const int64_t* o) { one(o[0], o[1]); });
}

void matmul_integer(KernelContext& ctx) {
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(1);
  if (!is_q8(A.dtype()) || !is_q8(B.dtype())) ctx.fail("A and B must be int8 or uint8");
  MatmulShape s = matmul_shape(ctx, A.dims(), B.dims());
  auto azp = zero_points(ctx, 2, s.M, "a_zero_point");
  auto bzp = zero_points(ctx, 3, s.N, "b_zero_point");
  Tensor& Y = ctx.allocate_output(0, DType::Int32, s.out);
  if (Y.numel() == 0) return;
  int_matmul(s, A, B, azp, bzp, Y.data<int32_t>());
}

void qlinear_matmul(KernelContext& ctx) {
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(3);
  if (!is_q8(A.dtype()) || !is_q8(B.dtype())) ctx.fail("a and b must be int8 or uint8");
  MatmulShape s = matmul_shape(ctx, A.dims(), B.dims());
  auto azp = zero_points(ctx, 2, s.M, "a_zero_point");
  auto bzp = zero_points(ctx, 5, s.N, "b_zero_point");
  auto asc = scales(ctx, 1, s.M, "a_scale");
  auto bsc = scales(ctx, 4, s.N, "b_scale");
  auto ysc = scales(ctx, 6, 1, "y_scale");
  DType yt = ctx.has_input(7) ? ctx.input(7).dtype() : DType::UInt8;
  if (!is_q8(yt)) ctx.fail("y_zero_point must be int8 or uint8");
  int32_t yzp = ctx.has_input(7) ? static_cast<int32_t>(ctx.input(7).as_int(0)) : 0;
  std::vector<int32_t> acc(static_cast<size_t>(numel_of(s.out)));
  if (acc.empty()) {
    ctx.allocate_output(0, yt, s.out);
    return;
  }
  int_matmul(s, A, B, azp, bzp, acc.data());
  Tensor& Y = ctx.allocate_output(0, yt, s.out);
  int32_t lo = yt == DType::UInt8 ? 0 : -128, hi = yt == DType::UInt8 ? 255 : 127;
  uint8_t* yp = static_cast<uint8_t*>(Y.raw());
  for (size_t i = 0; i < acc.size(); ++i) {
    int64_t mn = static_cast<int64_t>(i) % (s.M * s.N);
    size_t m = static_cast<size_t>(mn / s.N), n = static_cast<size_t>(mn % s.N);
    float real = static_cast<float>(acc[i]) * (asc[m] * bsc[n] / ysc[0]);
    float q = std::nearbyint(real) + static_cast<float>(yzp);
    // NaN (a zero y_scale) maps to the zero point; saturate_cast keeps the conversion defined.
    int32_t v = std::clamp(saturate_cast<int32_t>(q, yzp), lo, hi);
    yp[i] = static_cast<uint8_t>(v);
  }
}

// Determinant of each trailing square matrix by LU with partial pivoting (in double).
void det(KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  if (!dtype_is_float(X.dtype())) ctx.fail("expects a floating-point input");
  if (X.rank() < 2 || X.dim(-1) != X.dim(-2)) ctx.fail("expects [*, M, M], got " + dims_to_string(X.dims()));
  int64_t n = X.dim(-1);
  Dims od(X.dims().begin(), X.dims().end() - 2);
  Tensor& Y = ctx.allocate_output(0, X.dtype(), od);
  std::vector<double> a(static_cast<size_t>(n * n));
  for (int64_t b = 0; b < Y.numel(); ++b) {
    for (int64_t i = 0; i < n * n; ++i) a[static_cast<size_t>(i)] = X.as_double(b * n * n + i);
    double d = 1.0;
    for (int64_t c = 0; c < n && d != 0.0; ++c) {
      int64_t p = c;
      for (int64_t r = c + 1; r < n; ++r)
        if (std::fabs(a[static_cast<size_t>(r * n + c)]) > std::fabs(a[static_cast<size_t>(p * n + c)])) p = r;
      if (a[static_cast<size_t>(p * n + c)] == 0.0) {
        d = 0.0;
        break;
      }
      if (p != c) {
        for (int64_t k = 0; k < n; ++k) std::swap(a[static_cast<size_t>(p * n + k)], a[static_cast<size_t>(c * n + k)]);
        d = -d;
      }
      double piv = a[static_cast<size_t>(c * n + c)];
      d *= piv;
      for (int64_t r = c + 1; r < n; ++r) {
        double f = a[static_cast<size_t>(r * n + c)] / piv;
        for (int64_t k = c; k < n; ++k) a[static_cast<size_t>(r * n + k)] -= f * a[static_cast<size_t>(c * n + k)];
      }
    }
    dispatch_dtype(X.dtype(), [&](auto t) {
      using T = decltype(t);
      if constexpr (std::is_same_v<T, double>) Y.data<T>()[b] = d;
      else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
        Y.data<T>()[b] = static_cast<T>(static_cast<float>(d));
    });
  }
}

}  // namespace

void register_matmul_extra_kernels(KernelRegistry& r) {
  r.add("", "MatMulInteger", 10, stateless(matmul_integer));
  r.add("", "QLinearMatMul", 10, stateless(qlinear_matmul));
  r.add("", "Det", 11, stateless(det));
  register_einsum_kernels(r);
  register_int8_matmul_kernels(r);
  register_int8_conv_kernels(r);
}

}  // namespace t2o::kern
