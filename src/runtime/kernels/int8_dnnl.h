#pragma once
// oneDNN plumbing shared by the int8 kernels (matmul_int8.cpp, conv_int8.cpp).
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace t2o::kern::int8_dnnl {

inline dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Constant weights stored as `plain` at `data`, reordered once into the layout `want`.
inline std::shared_ptr<dnnl::memory> pack(const dnnl::memory::desc& plain, const void* data,
                                          const dnnl::memory::desc& want) {
  dnnl::memory src(plain, engine(), const_cast<void*>(data));
  auto dst = std::make_shared<dnnl::memory>(want, engine());
  dnnl::stream st(engine());
  dnnl::reorder(src, *dst).execute(st, src, *dst);
  st.wait();
  return dst;
}

// The user scratchpad a primitive asks for, 64-byte aligned inside `buf` (grown as needed).
inline dnnl::memory scratchpad(const dnnl::memory::desc& md, std::vector<uint8_t>& buf) {
  size_t n = md.get_size();
  if (buf.size() < n + 64) buf.resize(n + 64);
  void* base = buf.data();
  size_t space = buf.size();
  return dnnl::memory(md, engine(), std::align(64, n, base, space));
}

}  // namespace t2o::kern::int8_dnnl
