#pragma once
// The runtime's int8 products (Int8MatMul in matmul_int8.cpp, Int8Conv in conv_int8.cpp; the
// rewrites that make them are in runtime/optimize.cpp).
#include "runtime/kernel.h"

namespace t2o::kern {

// Whether oneDNN's int8 kernels on this CPU sum u8 x s8 products exactly in int32 (VNNI or AMX).
// Without VNNI they add pairs of products in 16 bits, which can saturate; the rewrites that would
// otherwise only trade float products for slow reference loops are then left out.
bool int8_products_exact();

void register_int8_matmul_kernels(KernelRegistry& r);  // matmul_int8.cpp
void register_int8_conv_kernels(KernelRegistry& r);    // conv_int8.cpp

}  // namespace t2o::kern
