#pragma once
// Softmax fast paths (reduce_softmax.cpp), shared with the fused attention kernel.
#include <cstdint>

namespace t2o::kern {

enum class SoftKind { Softmax, LogSoftmax, Hardmax };

// Softmax / LogSoftmax over contiguous float rows of length n (y may be x).
void softmax_rows_fast(SoftKind kind, const float* x, float* y, int64_t rows, int64_t n, int threads);
// Along the middle axis of (outer, n, inner).
void softmax_strided_fast(SoftKind kind, const float* x, float* y, int64_t outer, int64_t n, int64_t inner, int threads);

}  // namespace t2o::kern
