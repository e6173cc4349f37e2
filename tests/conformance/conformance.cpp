// Runs the ONNX backend test data through the runtime and compares with the expected outputs,
// with the ONNX test loader's tolerance (rtol 1e-3, atol 1e-7, NaN equal to NaN).
//
//   t2o_conformance [--data DIR] [--filter SUBSTR] [--expected FILE] [--write-results FILE] [--optimize] [-v]
//
// With --optimize, every model first goes through the optimizer (all passes, no proof, written and
// read back as bytes), so a pass that breaks a model shows as a regression.
// With --expected, exits 1 when a test listed there no longer passes (a regression).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "onnx/model_io.h"
#include "onnx/tensor_io.h"
#include "passes/passes.h"
#include "runtime/session.h"
#include "runtime/value_io.h"

namespace fs = std::filesystem;
using namespace t2o;

namespace {

// The backend test data stores bfloat16 tensors as uint16 (numpy has no bfloat16): same bits.
Tensor as_bf16_if_stored_as_u16(const Tensor& t, DType expected) {
  if (expected == DType::BFloat16 && t.dtype() == DType::UInt16)
    return Tensor::share(DType::BFloat16, t.dims(), std::make_shared<Tensor>(t), const_cast<void*>(t.raw()));
  return t;
}

bool close_tensor(const Tensor& want_raw, const Tensor& got, std::string& why) {
  Tensor want = as_bf16_if_stored_as_u16(want_raw, got.dtype());
  if (want.dtype() != got.dtype()) {
    why = "dtype " + std::string(dtype_name(got.dtype())) + ", expected " + std::string(dtype_name(want.dtype()));
    return false;
  }
  if (want.dims() != got.dims()) {
    why = "shape " + dims_to_string(got.dims()) + ", expected " + dims_to_string(want.dims());
    return false;
  }
  if (want.dtype() == DType::String) {
    for (int64_t i = 0; i < want.numel(); ++i)
      if (want.strings()[i] != got.strings()[i]) {
        why = "string at " + std::to_string(i) + " differs";
        return false;
      }
    return true;
  }
  if (want.dtype() == DType::Complex64 || want.dtype() == DType::Complex128) {
    bool ok = want.nbytes() == got.nbytes();
    if (!ok) why = "complex data differs";
    return ok;
  }
  bool is_float = dtype_is_float(want.dtype());
  for (int64_t i = 0; i < want.numel(); ++i) {
    double w = want.as_double(i), g = got.as_double(i);
    if (is_float) {
      if (std::isnan(w) && std::isnan(g)) continue;
      if (std::isinf(w) || std::isinf(g)) {
        if (w == g) continue;
      } else if (std::fabs(w - g) <= 1e-7 + 1e-3 * std::fabs(w)) {
        continue;
      }
    } else if (want.dtype() == DType::Int64 || want.dtype() == DType::UInt64) {
      if (want.as_int(i) == got.as_int(i)) continue;
    } else if (w == g) {
      continue;
    }
    why = "value at " + std::to_string(i) + " is " + std::to_string(g) + ", expected " + std::to_string(w);
    return false;
  }
  return true;
}

bool close_value(const PbValue& want, const RValue& got, std::string& why) {
  switch (want.kind) {
    case PbValue::Kind::Tensor:
      if (!got.is_tensor()) {
        why = "not a tensor";
        return false;
      }
      return close_tensor(want.tensor, got.tensor, why);
    case PbValue::Kind::Sequence:
      if (!got.is_sequence() || got.sequence.size() != want.sequence.size()) {
        why = "sequence length differs";
        return false;
      }
      for (size_t i = 0; i < want.sequence.size(); ++i)
        if (!close_tensor(want.sequence[i], got.sequence[i], why)) return false;
      return true;
    case PbValue::Kind::Optional: {
      const RValue* inner = got.is_optional() ? got.element.get() : &got;
      if (!want.has_value) {
        bool ok = got.is_optional() && !got.element;
        if (!ok) why = "expected an empty optional";
        return ok;
      }
      if (!inner) {
        why = "optional is empty";
        return false;
      }
      PbValue w = want;
      w.kind = *want.optional_elem_kind;
      return close_value(w, *inner, why);
    }
  }
  return false;
}

// Runs every test_data_set_* of one test folder. Returns "" on pass, else a one-line reason.
int g_rewritten = 0;  // models the optimizer changed (--optimize)

std::string run_test(const fs::path& dir, bool reference, bool optimized) {
  try {
    Model m = load_model((dir / "model.onnx").string());
    if (optimized) {
      OptimizeOptions o;
      OptimizeReport r = optimize(m, o);
      for (const PassStats& p : r.passes) {
        if (p.rewrites == 0) continue;
        ++g_rewritten;
        break;
      }
      m = load_model_from_bytes(save_model_to_bytes(m), dir.string());
    }
    std::vector<Type> out_types;
    for (const auto& o : m.graph.outputs) out_types.push_back(o.type);
    SessionOptions so;
    so.threads = 1;
    so.fast_paths = !reference;
    Session s(std::move(m), so);
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) return "no test data";
    for (const fs::path& set : sets) {
      std::map<std::string, RValue> feeds;
      for (size_t i = 0; i < s.inputs().size(); ++i) {
        fs::path f = set / ("input_" + std::to_string(i) + ".pb");
        if (!fs::exists(f)) continue;
        RValue v = rvalue_from_pb(read_value_pb(f.string(), pb_kind_of(s.inputs()[i].type)));
        if (v.is_tensor()) v.tensor = as_bf16_if_stored_as_u16(v.tensor, s.inputs()[i].type.elem);
        feeds[s.inputs()[i].name] = v;
      }
      auto outs = s.run(feeds);
      for (size_t k = 0; k < s.outputs().size(); ++k) {
        fs::path f = set / ("output_" + std::to_string(k) + ".pb");
        if (!fs::exists(f)) continue;
        PbValue want = read_value_pb(f.string(), pb_kind_of(out_types[k]));
        std::string why;
        if (!close_value(want, outs.at(s.outputs()[k].name), why))
          return "output " + std::to_string(k) + " ('" + s.outputs()[k].name + "'): " + why;
      }
    }
    return "";
  } catch (const std::exception& e) {
    std::string w = e.what();
    for (char& c : w)
      if (c == '\n') c = ' ';
    return w.empty() ? "error" : w;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = "/usr/share/libonnx-testdata/data";
  std::string filter, expected, results;
  bool verbose = false, reference = false, optimized = false;
  std::vector<std::string> folders = {"node", "pytorch-converted", "pytorch-operator", "simple"};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--data") data = next();
    else if (a == "--filter") filter = next();
    else if (a == "--expected") expected = next();
    else if (a == "--write-results") results = next();
    else if (a == "--reference") reference = true;
    else if (a == "--optimize") optimized = true;
    else if (a == "-v" || a == "--verbose") verbose = true;
    else {
      std::fprintf(stderr, "usage: t2o_conformance [--data DIR] [--filter SUBSTR] [--expected FILE] [--write-results FILE] [--reference] [--optimize] [-v]\n");
      return 2;
    }
  }
  std::set<std::string> want_pass;
  if (!expected.empty()) {
    std::ifstream in(expected);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", expected.c_str());
      return 2;
    }
    std::string line;
    while (std::getline(in, line))
      if (!line.empty() && line[0] != '#') want_pass.insert(line);
  }
  std::map<std::string, std::pair<int, int>> per_folder;
  std::vector<std::string> regressions;
  std::ofstream res;
  if (!results.empty()) res.open(results);
  for (const std::string& folder : folders) {
    fs::path root = fs::path(data) / folder;
    if (!fs::is_directory(root)) continue;
    std::vector<fs::path> tests;
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory()) tests.push_back(e.path());
    std::sort(tests.begin(), tests.end());
    for (const fs::path& t : tests) {
      std::string id = folder + "/" + t.filename().string();
      if (!filter.empty() && id.find(filter) == std::string::npos) continue;
      std::string why = run_test(t, reference, optimized);
      auto& pf = per_folder[folder];
      ++pf.second;
      if (why.empty()) ++pf.first;
      if (res) res << (why.empty() ? "PASS " : "FAIL ") << id << (why.empty() ? "" : "  # " + why) << "\n";
      if (verbose || (!why.empty() && want_pass.count(id)))
        std::printf("%s %s%s\n", why.empty() ? "PASS" : "FAIL", id.c_str(), why.empty() ? "" : ("  # " + why).c_str());
      if (!why.empty() && want_pass.count(id)) regressions.push_back(id);
    }
  }
  int pass = 0, total = 0;
  for (const auto& [f, pt] : per_folder) {
    std::printf("%-20s %4d / %4d passed (%.1f%%)\n", f.c_str(), pt.first, pt.second,
                pt.second ? 100.0 * pt.first / pt.second : 0.0);
    pass += pt.first;
    total += pt.second;
  }
  std::printf("%-20s %4d / %4d passed (%.1f%%)\n", "all", pass, total, total ? 100.0 * pass / total : 0.0);
  if (optimized) std::printf("the optimizer rewrote %d of the %d models\n", g_rewritten, total);
  if (!regressions.empty()) {
    std::printf("%zu regression(s): tests in the expected-pass list now fail\n", regressions.size());
    return 1;
  }
  return 0;
}
