// ONNX model bytes -> load -> write and read back -> Session -> run on generated inputs.
// Seeds: the models of the ONNX backend test data. Inputs are generated from the declared types
// (symbolic dims become 2, large ones are skipped) with values drawn from the input's own bytes.
#include <cstdio>
#include <map>

#include "fuzz_support.h"
#include "onnx/model_io.h"
#include "runtime/session.h"

using namespace t2o;

namespace {

constexpr int64_t kMaxInputElements = 1 << 14;

// A tensor for a declared tensor type, or nullopt when its declared size is too large to feed.
bool make_input(const Type& t, const uint8_t* seed, size_t seed_len, RValue& out) {
  if (t.kind == Type::Kind::Sequence) {
    out = RValue::make_sequence({}, t.inner ? t.inner->elem : DType::Float);
    return true;
  }
  if (t.kind == Type::Kind::Optional) {
    out = RValue::make_optional(nullptr);
    return true;
  }
  if (t.kind != Type::Kind::Tensor) return false;
  DType dt = t.elem == DType::Undefined ? DType::Float : t.elem;
  if (!dtype_is_valid(static_cast<int32_t>(dt))) return false;
  Dims dims;
  int64_t n = 1;
  if (t.shape) {
    for (const Dim& d : t.shape->dims) {
      int64_t v = d.value >= 0 ? d.value : 2;
      if (v > kMaxInputElements) return false;
      n *= v;
      if (n > kMaxInputElements) return false;
      dims.push_back(v);
    }
  }
  Tensor x(dt, dims);
  if (dt == DType::String) {
    for (int64_t i = 0; i < x.numel(); ++i) x.strings()[i] = std::string(1, static_cast<char>('a' + i % 26));
  } else {
    // Values from the model's own bytes, so mutations reach them; bools and indices stay small.
    auto* p = static_cast<uint8_t*>(x.raw());
    uint8_t mod = dt == DType::Bool ? 2 : 3;  // a bool byte other than 0 or 1 is not a bool
    for (size_t i = 0; i < x.nbytes(); ++i) p[i] = seed_len ? static_cast<uint8_t>(seed[i % seed_len] % mod) : 0;
    if (dt == DType::Float) {
      float* f = x.data<float>();
      for (int64_t i = 0; i < x.numel(); ++i) f[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
    }
  }
  out = RValue(std::move(x));
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_memory_limit(fuzz::kMemoryLimit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    // External data resolves against an empty folder of our own.
    Model m = load_model_from_bytes(bytes, fuzz::scratch_dir().string(), "fuzz input");
    // Writing what was read and reading it back must give the same model. (The onnx checker is
    // left out: it runs in a forked child, which would cut the rate a hundredfold, and its own
    // crashes are onnx's, contained in production.)
    std::string again = save_model_to_bytes(m);
    std::string why;
    if (!equal(load_model_from_bytes(again, fuzz::scratch_dir().string(), "round trip"), m, &why)) {
      std::fprintf(stderr, "write and read back differ: %s\n", why.c_str());
      __builtin_trap();
    }
    SessionOptions so;
    so.threads = 1;
    // Loops run as long as their (generated) data says: a run is stopped after 2 s, as
    // `run --timeout 2` stops it, well inside libFuzzer's 10 s timeout even under ASan on a busy
    // machine.
    so.time_limit_s = 2;
    Session s(std::move(m), so);
    std::map<std::string, RValue> feeds;
    for (const ValueInfo& vi : s.inputs()) {
      RValue v;
      if (!make_input(vi.type, data, size, v)) return 0;
      feeds[vi.name] = std::move(v);
    }
    s.run(feeds);
  } catch (const std::exception& e) {
    fuzz::note(e);
  }
  return 0;
}
