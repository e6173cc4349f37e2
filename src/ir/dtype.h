#pragma once
// Element types, numbered as ONNX's TensorProto.DataType so conversion is a cast.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace t2o {

enum class DType : int32_t {
  Undefined = 0,
  Float = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  UInt32 = 12,
  UInt64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
};

// Size in bytes of one element; 0 for String and Undefined.
size_t dtype_size(DType t);
// Short name used in the CLI and messages: f32 f64 f16 bf16 i8 i16 i32 i64 u8 u16 u32 u64 bool str c64 c128.
std::string_view dtype_name(DType t);
// Parse a short name (or ONNX long name like "float"); returns Undefined when unknown.
DType dtype_from_name(std::string_view name);
bool dtype_is_float(DType t);    // f16 bf16 f32 f64
bool dtype_is_integer(DType t);  // signed or unsigned ints (not bool)
bool dtype_is_signed(DType t);
bool dtype_is_valid(int32_t v);

// IEEE half and bfloat16 conversions (round to nearest even).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
inline float bfloat16_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t float_to_bfloat16(float f);
// The same conversions over arrays, with the CPU's F16C instructions where it has them: the same
// values bit for bit (F16C rounds to nearest even too), except that a NaN may come out quieted.
void halves_to_floats(const uint16_t* src, float* dst, size_t n);
void floats_to_halves(const float* src, uint16_t* dst, size_t n);

// Strong types so templates can dispatch on f16/bf16 storage.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float f) : bits(float_to_half(f)) {}
  operator float() const { return half_to_float(bits); }
};
static_assert(sizeof(Half) == 2, "Half arrays are read as uint16_t arrays");
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) : bits(float_to_bfloat16(f)) {}
  operator float() const { return bfloat16_to_float(bits); }
};

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::Float; }
template <> constexpr DType dtype_of<double>() { return DType::Double; }
template <> constexpr DType dtype_of<Half>() { return DType::Float16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::BFloat16; }
template <> constexpr DType dtype_of<int8_t>() { return DType::Int8; }
template <> constexpr DType dtype_of<int16_t>() { return DType::Int16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::UInt8; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::UInt16; }
template <> constexpr DType dtype_of<uint32_t>() { return DType::UInt32; }
template <> constexpr DType dtype_of<uint64_t>() { return DType::UInt64; }
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }

}  // namespace t2o
