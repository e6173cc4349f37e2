// torch2onnx runtime side of the example custom op: the ONNX node mylib::Cbr(x, w, b, scale,
// shift; padding) that `torch2onnx convert --custom-op` emits for mylib::cbr. It uses only the
// C ABI in plugin_abi.h, so it needs neither libtorch nor the torch2onnx libraries.
#include <algorithm>
#include <string>

#include "plugin_abi.h"

namespace {

constexpr int32_t kFloat = 1;

int32_t cbr(const T2oKernelApi* api, void* ctx) {
  T2oTensor t[5];
  for (int i = 0; i < 5; ++i)
    if (api->input(ctx, i, &t[i]) != 0 || t[i].dtype != kFloat) {
      api->set_error(ctx, ("Cbr: input " + std::to_string(i) + " must be a float tensor").c_str());
      return 1;
    }
  const T2oTensor &x = t[0], &w = t[1];
  if (x.rank != 4 || w.rank != 4 || x.dims[1] != w.dims[1]) {
    api->set_error(ctx, "Cbr: x must be NCHW and w OIHW with matching channels");
    return 1;
  }
  const int64_t pad = api->attr_int(ctx, "padding", 1);
  const int64_t n = x.dims[0], ci = x.dims[1], h = x.dims[2], wd = x.dims[3];
  const int64_t co = w.dims[0], kh = w.dims[2], kw = w.dims[3];
  const int64_t oh = h + 2 * pad - kh + 1, ow = wd + 2 * pad - kw + 1;
  const int64_t odims[4] = {n, co, oh, ow};
  auto* y = static_cast<float*>(api->allocate_output(ctx, 0, kFloat, 4, odims));
  if (!y) return 1;
  auto* xs = static_cast<const float*>(x.data);
  auto* ws = static_cast<const float*>(w.data);
  auto* bias = static_cast<const float*>(t[2].data);
  auto* scale = static_cast<const float*>(t[3].data);
  auto* shift = static_cast<const float*>(t[4].data);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < co; ++o)
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t c = 0; c < ow; ++c) {
          float acc = bias[o];
          for (int64_t i = 0; i < ci; ++i)
            for (int64_t u = 0; u < kh; ++u) {
              int64_t yy = r + u - pad;
              if (yy < 0 || yy >= h) continue;
              for (int64_t v = 0; v < kw; ++v) {
                int64_t xx = c + v - pad;
                if (xx < 0 || xx >= wd) continue;
                acc += xs[((b * ci + i) * h + yy) * wd + xx] * ws[((o * ci + i) * kh + u) * kw + v];
              }
            }
          y[((b * co + o) * oh + r) * ow + c] = std::max(0.0f, acc * scale[o] + shift[o]);
        }
  return 0;
}

}  // namespace

extern "C" int32_t t2o_plugin_init(const T2oPluginHost* host) {
  if (host->abi_version != T2O_PLUGIN_ABI_VERSION) return 1;
  T2oOpDef def{"mylib", "Cbr", 1, cbr};
  return host->register_op(host->host, &def);
}
