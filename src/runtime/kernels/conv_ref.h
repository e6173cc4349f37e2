#pragma once
// Reference convolution loops over geometry padded to 3 spatial dims. T is the compute type
// (float, double, or int32 for the quantized ops with zero points already subtracted).
#include "runtime/kernels/conv_geom.h"
#include "runtime/kernels/util.h"

namespace t2o::kern {

// y[n, m] = b[m] + sum_{c in group(m), k} x[n, c, o*s - pb + k*d] * w[m, c, k]
template <typename T>
void conv_ref(const T* x, const T* w, const T* b, T* y, int64_t n_, int64_t c_, int64_t m_, int64_t group,
              const Geom& g, int threads) {
  int64_t cg = c_ / group, mg = m_ / group;
  int64_t isz = g.in_size(), osz = g.out_size(), ksz = g.k_size();
  const Dims &in = g.in, &k = g.k, &out = g.out, &s = g.stride, &d = g.dil, &pb = g.pb;
  parallel_for(n_ * m_, threads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nm = begin; nm < end; ++nm) {
      int64_t n = nm / m_, m = nm % m_, grp = m / mg;
      const T* xb = x + (n * c_ + grp * cg) * isz;
      const T* wm = w + m * cg * ksz;
      T* yp = y + nm * osz;
      for (int64_t o0 = 0; o0 < out[0]; ++o0)
        for (int64_t o1 = 0; o1 < out[1]; ++o1)
          for (int64_t o2 = 0; o2 < out[2]; ++o2) {
            T acc = b ? b[m] : T(0);
            for (int64_t ic = 0; ic < cg; ++ic) {
              const T* xc = xb + ic * isz;
              const T* wc = wm + ic * ksz;
              for (int64_t k0 = 0; k0 < k[0]; ++k0) {
                int64_t i0 = o0 * s[0] - pb[0] + k0 * d[0];
                if (i0 < 0 || i0 >= in[0]) continue;
                for (int64_t k1 = 0; k1 < k[1]; ++k1) {
                  int64_t i1 = o1 * s[1] - pb[1] + k1 * d[1];
                  if (i1 < 0 || i1 >= in[1]) continue;
                  const T* xr = xc + (i0 * in[1] + i1) * in[2];
                  const T* wr = wc + (k0 * k[1] + k1) * k[2];
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    int64_t i2 = o2 * s[2] - pb[2] + k2 * d[2];
                    if (i2 < 0 || i2 >= in[2]) continue;
                    acc += xr[i2] * wr[k2];
                  }
                }
              }
            }
            yp[(o0 * out[1] + o1) * out[2] + o2] = acc;
          }
    }
  });
}

// Transposed convolution; w is C x M/group x k. Each input element scatters into the output at
// o = i*s - pb + k*d; positions outside [0, out) are dropped (this also covers output_padding).
template <typename T>
void conv_transpose_ref(const T* x, const T* w, const T* b, T* y, int64_t n_, int64_t c_, int64_t m_, int64_t group,
                        const Geom& g, int threads) {
  int64_t cg = c_ / group, mg = m_ / group;
  int64_t isz = g.in_size(), osz = g.out_size(), ksz = g.k_size();
  const Dims &in = g.in, &k = g.k, &out = g.out, &s = g.stride, &d = g.dil, &pb = g.pb;
  parallel_for(n_ * m_, threads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nm = begin; nm < end; ++nm) {
      int64_t n = nm / m_, m = nm % m_, grp = m / mg, mm = m % mg;
      T* yp = y + nm * osz;
      for (int64_t i = 0; i < osz; ++i) yp[i] = b ? b[m] : T(0);
      for (int64_t ic = 0; ic < cg; ++ic) {
        int64_t c = grp * cg + ic;
        const T* xc = x + (n * c_ + c) * isz;
        const T* wc = w + (c * mg + mm) * ksz;
        for (int64_t i0 = 0; i0 < in[0]; ++i0)
          for (int64_t i1 = 0; i1 < in[1]; ++i1)
            for (int64_t i2 = 0; i2 < in[2]; ++i2) {
              T xv = xc[(i0 * in[1] + i1) * in[2] + i2];
              for (int64_t k0 = 0; k0 < k[0]; ++k0) {
                int64_t o0 = i0 * s[0] - pb[0] + k0 * d[0];
                if (o0 < 0 || o0 >= out[0]) continue;
                for (int64_t k1 = 0; k1 < k[1]; ++k1) {
                  int64_t o1 = i1 * s[1] - pb[1] + k1 * d[1];
                  if (o1 < 0 || o1 >= out[1]) continue;
                  T* yr = yp + (o0 * out[1] + o1) * out[2];
                  const T* wr = wc + (k0 * k[1] + k1) * k[2];
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    int64_t o2 = i2 * s[2] - pb[2] + k2 * d[2];
                    if (o2 < 0 || o2 >= out[2]) continue;
                    yr[o2] += xv * wr[k2];
                  }
                }
              }
            }
      }
    }
  });
}

}  // namespace t2o::kern
