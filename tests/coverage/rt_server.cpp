// Runs many ONNX models in our runtime from one process, for the coverage harness: each stdin line is
//   MODEL<TAB>OUT_DIR[<TAB>NAME=FILE.npy]...
// and is answered by one stdout line, "ok" (outputs written as OUT_DIR/output_K.npy in graph-output
// order) or "error: MESSAGE". It is `torch2onnx run` without the per-model process start: the CLI links
// libtorch, whose start-up costs more than running a small model.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "onnx/tensor_io.h"
#include "runtime/session.h"
#include "runtime/value_io.h"

namespace fs = std::filesystem;

namespace {

void run_line(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string part; std::getline(ss, part, '\t');) f.push_back(part);
  if (f.size() < 2) throw t2o::Error("want MODEL<TAB>OUT_DIR[<TAB>NAME=FILE]...");
  t2o::SessionOptions so;
  so.threads = 1;
  t2o::Session s = t2o::Session::from_file(f[0], so);
  std::map<std::string, t2o::RValue> feeds;
  for (size_t k = 2; k < f.size(); ++k) {
    auto eq = f[k].find('=');
    if (eq == std::string::npos) throw t2o::Error("'" + f[k] + "' is not NAME=FILE");
    std::string name = f[k].substr(0, eq);
    const t2o::Type* type = nullptr;
    bool wanted = false;
    for (const auto& vi : s.inputs())
      if (vi.name == name) type = &vi.type, wanted = true;
    if (wanted) feeds[name] = t2o::read_value_file(f[k].substr(eq + 1), type);
  }
  auto outs = s.run(feeds);
  fs::create_directories(f[1]);
  for (size_t k = 0; k < s.outputs().size(); ++k) {
    const t2o::RValue& v = outs.at(s.outputs()[k].name);
    if (!v.is_tensor()) throw t2o::Error("output " + std::to_string(k) + " is not a tensor");
    t2o::write_npy((fs::path(f[1]) / ("output_" + std::to_string(k) + ".npy")).string(), v.tensor);
  }
}

}  // namespace

int main() {
  t2o::set_runtime_threads(1);
  for (std::string line; std::getline(std::cin, line);) {
    std::string reply = "ok";
    try {
      run_line(line);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      for (char& c : msg)
        if (c == '\n') c = ' ';
      reply = "error: " + msg;
    }
    std::printf("%s\n", reply.c_str());
    std::fflush(stdout);
  }
  return 0;
}
