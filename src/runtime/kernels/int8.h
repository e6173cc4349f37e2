#pragma once
// The runtime's int8 products (Int8MatMul in matmul_int8.cpp, Int8Conv in conv_int8.cpp; the
// rewrites that make them are in runtime/optimize.cpp).
#include <optional>

#include "runtime/kernels/util.h"

namespace t2o::kern {

// Whether oneDNN's int8 kernels on this CPU sum u8 x s8 products exactly in int32 (VNNI or AMX).
// Without VNNI they add pairs of products in 16 bits, which can saturate; the rewrites that would
// otherwise only trade float products for slow reference loops are then left out.
bool int8_products_exact();

// A constant quantization of the node's inputs `scale_input` (one finite float > 0) and
// `scale_input + 1` (its zero point: one uint8 or int8; absent means uint8 0); nullopt when the
// inputs are not that.
struct QuantParam {
  float scale = 1;
  int32_t zero = 0;
  bool is_signed = false;  // int8 values (else uint8)
  float lo() const { return is_signed ? -128.0f : 0.0f; }
  float hi() const { return is_signed ? 127.0f : 255.0f; }
};
std::optional<QuantParam> constant_quant_param(const KernelInfo& info, int scale_input);

// x / s rounded half to even plus z, saturated to [lo, hi]; NaN to z. The arithmetic of the
// QuantizeLinear and DynamicQuantizeLinear kernels, in a form the compiler vectorizes: adding and
// taking off 1.5 * 2^23 rounds a float below 2^22 in magnitude as nearbyint does, and larger
// quotients saturate either way. Returns the integer as a float.
inline float quantize_one(float x, float s, float z, float lo, float hi) {
  constexpr float kRound = 12582912.0f, kBig = 4194304.0f;
  float v = x / s;
  v = v < -kBig ? -kBig : (v > kBig ? kBig : v);
  float r = ((v + kRound) - kRound) + z;
  r = r != r ? z : r;
  return r < lo ? lo : (r > hi ? hi : r);
}

// quantize_one over n floats, threaded, each result's low byte stored (uint8, or int8 as two's
// complement). AVX-512 where the CPU has it, with the same values bit for bit.
void quantize_bytes(const float* x, int64_t n, float s, float z, float lo, float hi, uint8_t* q, int threads);

// DynamicQuantizeLinear's parameters for n floats: the range widened to include 0 (NaN skipped),
// s = (max - min) / 255, z = round(-min / s) saturated to uint8 (0 when s is 0). Threaded.
void dynamic_quant_params(const float* x, int64_t n, float& s, int32_t& z, int threads);
// DynamicQuantizeLinear's uint8 values for those parameters, bit for bit, threaded; a zero or
// non-finite s takes the kernel's own scalar rules (every value z, or saturated NaN quotients).
void dynamic_quantize_bytes(const float* x, int64_t n, float s, int32_t z, uint8_t* q, int threads);

void register_int8_matmul_kernels(KernelRegistry& r);  // matmul_int8.cpp
void register_int8_conv_kernels(KernelRegistry& r);    // conv_int8.cpp

}  // namespace t2o::kern
