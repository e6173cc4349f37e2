// Tensor files as `run --input` reads them: .npy, and TensorProto / SequenceProto / OptionalProto
// .pb files. The first byte picks the kind; the rest is the file. What reads back must write and
// read again to the same value (a silent change of data would be worse than an error).
#include <fstream>

#include "fuzz_support.h"
#include "onnx/tensor_io.h"

using namespace t2o;

namespace {

bool same(const PbValue& a, const PbValue& b) {
  if (a.kind != b.kind || a.has_value != b.has_value || a.sequence.size() != b.sequence.size()) return false;
  if (a.tensor.defined() != b.tensor.defined() || (a.tensor.defined() && !a.tensor.equals(b.tensor))) return false;
  for (size_t i = 0; i < a.sequence.size(); ++i)
    if (!a.sequence[i].equals(b.sequence[i])) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_memory_limit(fuzz::kMemoryLimit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const char* kinds[] = {"npy", "tensor", "sequence", "optional"};
  const char* kind = kinds[data[0] % 4];
  auto dir = fuzz::scratch_dir();
  std::string in = (dir / (std::string(kind) == "npy" ? "x.npy" : "x.pb")).string();
  {
    std::ofstream f(in, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  }
  try {
    if (std::string(kind) == "npy") {
      Tensor t = read_npy(in);
      std::string out = (dir / "y.npy").string();
      write_npy(out, t);
      if (!read_npy(out).equals(t)) __builtin_trap();
    } else {
      PbValue v = read_value_pb(in, kind);
      std::string out = (dir / "y.pb").string();
      write_value_pb(out, v);
      if (!same(read_value_pb(out, kind), v)) __builtin_trap();
    }
  } catch (const std::exception& e) {
    fuzz::note(e);
  }
  return 0;
}
