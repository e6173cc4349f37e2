// The TorchScript path of `convert`: archive records -> .pt zip -> load, checks, freeze, shape
// learning, conversion. libFuzzer mutates a record list rather than the zip itself, because zip
// CRCs would reject nearly every mutated archive before libtorch reads it:
//   repeated { u16 name length, name, u32 data length, data } (little endian)
// The harness writes the archive with libtorch's own writer (which adds "version"). A record named
// "inputs" holds example input specs, one "NAME:AxBxC" per line (default "x:2x4").
// Seeds: tests/fuzz/torch_inputs.py corpus DIR.
#include <caffe2/serialize/inline_container.h>

#include <sstream>

#include "fuzz_support.h"
#include "torch/convert.h"

using namespace t2o;

namespace {

bool parse_records(const uint8_t* p, size_t n, std::vector<std::pair<std::string, std::string>>& out) {
  size_t i = 0;
  while (i < n) {
    if (n - i < 2) return false;
    size_t len = p[i] | (static_cast<size_t>(p[i + 1]) << 8);
    i += 2;
    if (n - i < len + 4) return false;
    std::string name(reinterpret_cast<const char*>(p + i), len);
    i += len;
    size_t dlen = 0;
    for (int k = 0; k < 4; ++k) dlen |= static_cast<size_t>(p[i + static_cast<size_t>(k)]) << (8 * k);
    i += 4;
    if (n - i < dlen) return false;
    out.emplace_back(std::move(name), std::string(reinterpret_cast<const char*>(p + i), dlen));
    i += dlen;
  }
  return true;
}

std::vector<InputSpec> parse_inputs(const std::string& text) {
  std::vector<InputSpec> specs;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line) && specs.size() < 4) {
    auto colon = line.find(':');
    if (colon == std::string::npos || colon == 0) continue;
    InputSpec s;
    s.name = line.substr(0, colon);
    int64_t total = 1;
    std::istringstream dims(line.substr(colon + 1));
    std::string d;
    while (std::getline(dims, d, 'x') && s.dims.size() < 6) {
      int64_t v = std::atoll(d.c_str());
      if (v < 1 || v > 64) v = 1;
      total *= v;
      s.dims.push_back(v);
    }
    if (total <= 4096) specs.push_back(s);
  }
  return specs;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_memory_limit(fuzz::kMemoryLimit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::pair<std::string, std::string>> recs;
  if (!parse_records(data, size, recs) || recs.empty()) return 0;
  std::string path = (fuzz::scratch_dir() / "model.pt").string();
  ConvertOptions opts;
  opts.warn = [](const std::string&) {};
  try {
    caffe2::serialize::PyTorchStreamWriter w(path);
    for (const auto& [name, bytes] : recs) {
      if (name == "inputs") {
        opts.inputs = parse_inputs(bytes);
        continue;
      }
      if (name.empty() || name == "version" || name.find("..") != std::string::npos || name[0] == '/') continue;
      w.writeRecord(name, bytes.data(), bytes.size());
    }
    w.writeEndOfFile();
  } catch (const std::exception&) {
    return 0;  // duplicate or unwritable record names: not an archive libtorch could have made
  }
  if (opts.inputs.empty()) opts.inputs.push_back({"x", {2, 4}, DType::Float});
  try {
    convert_torchscript(path, opts);
  } catch (const std::exception& e) {
    fuzz::note(e);
  }
  return 0;
}
