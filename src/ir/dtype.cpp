#include "ir/dtype.h"

#include <array>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace t2o {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float: case DType::Int32: case DType::UInt32: return 4;
    case DType::Double: case DType::Int64: case DType::UInt64: case DType::Complex64: return 8;
    case DType::Complex128: return 16;
    case DType::Float16: case DType::BFloat16: case DType::Int16: case DType::UInt16: return 2;
    case DType::Int8: case DType::UInt8: case DType::Bool: return 1;
    default: return 0;
  }
}

namespace {
struct NameEntry {
  DType t;
  std::string_view short_name;
  std::string_view long_name;
};
constexpr std::array<NameEntry, 16> kNames = {{
    {DType::Float, "f32", "float"},      {DType::Double, "f64", "double"},
    {DType::Float16, "f16", "float16"},  {DType::BFloat16, "bf16", "bfloat16"},
    {DType::Int8, "i8", "int8"},         {DType::Int16, "i16", "int16"},
    {DType::Int32, "i32", "int32"},      {DType::Int64, "i64", "int64"},
    {DType::UInt8, "u8", "uint8"},       {DType::UInt16, "u16", "uint16"},
    {DType::UInt32, "u32", "uint32"},    {DType::UInt64, "u64", "uint64"},
    {DType::Bool, "bool", "bool"},       {DType::String, "str", "string"},
    {DType::Complex64, "c64", "complex64"}, {DType::Complex128, "c128", "complex128"},
}};
}  // namespace

std::string_view dtype_name(DType t) {
  for (const auto& e : kNames)
    if (e.t == t) return e.short_name;
  return "undefined";
}

DType dtype_from_name(std::string_view name) {
  for (const auto& e : kNames)
    if (e.short_name == name || e.long_name == name) return e.t;
  return DType::Undefined;
}

bool dtype_is_float(DType t) {
  return t == DType::Float || t == DType::Double || t == DType::Float16 || t == DType::BFloat16;
}
bool dtype_is_integer(DType t) {
  switch (t) {
    case DType::Int8: case DType::Int16: case DType::Int32: case DType::Int64:
    case DType::UInt8: case DType::UInt16: case DType::UInt32: case DType::UInt64: return true;
    default: return false;
  }
}
bool dtype_is_signed(DType t) {
  return t == DType::Int8 || t == DType::Int16 || t == DType::Int32 || t == DType::Int64 || dtype_is_float(t);
}
bool dtype_is_valid(int32_t v) { return v >= 1 && v <= 16; }

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 | ((absx >> 13) & 0x3ff) : 0));
  }
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00);  // overflow after rounding
  if (absx < 0x38800000u) {  // subnormal or zero in half
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t e = absx >> 23;
    uint32_t m = (absx & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e;  // 14 - (e - 127) + 13 - 1 ... ; result = m >> (shift)
    // value = m * 2^(e-150); half subnormal unit = 2^-24 -> count = m * 2^(e-126)
    uint32_t rshift = 126 - e;
    uint32_t q = m >> rshift;
    uint32_t rem = m & ((1u << rshift) - 1);
    uint32_t half = 1u << (rshift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    (void)shift;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t e = (absx >> 23) - 127 + 15;
  uint32_t m = absx & 0x7fffff;
  uint32_t q = (e << 10) | (m >> 13);
  uint32_t rem = m & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) ++q;
  return static_cast<uint16_t>(sign | q);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define T2O_F16C 1
namespace {
__attribute__((target("avx,f16c"))) void halves_to_floats_f16c(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = half_to_float(src[i]);
}
__attribute__((target("avx,f16c"))) void floats_to_halves_f16c(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) dst[i] = float_to_half(src[i]);
}
bool has_f16c() {
  // F16C: CPUID leaf 1, ECX bit 29 (clang 14 has no "f16c" for __builtin_cpu_supports); AVX
  // also says the OS saves the YMM registers.
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
  }();
  return yes;
}
}  // namespace
#endif

void halves_to_floats(const uint16_t* src, float* dst, size_t n) {
#ifdef T2O_F16C
  if (has_f16c()) return halves_to_floats_f16c(src, dst, n);
#endif
  for (size_t i = 0; i < n; ++i) dst[i] = half_to_float(src[i]);
}

void floats_to_halves(const float* src, uint16_t* dst, size_t n) {
#ifdef T2O_F16C
  if (has_f16c()) return floats_to_halves_f16c(src, dst, n);
#endif
  for (size_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
}

uint16_t float_to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  uint32_t lsb = (x >> 16) & 1;
  x += 0x7fff + lsb;
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace t2o
