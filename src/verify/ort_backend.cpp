#include "verify/ort_backend.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "onnx/model_io.h"
#include "onnx/tensor_io.h"

namespace fs = std::filesystem;

namespace t2o {

namespace {

fs::path cache_dir() {
  if (const char* c = std::getenv("T2O_CACHE_DIR"); c && *c) return c;
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : ".") / ".cache" / "torch2onnx";
}

fs::path find_on_path(const std::string& exe) {
  const char* p = std::getenv("PATH");
  std::string path = p ? p : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    fs::path cand = fs::path(path.substr(start, end - start)) / exe;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return {};
}

// The script is installed next to the binary (build tree: <bin>/verify/ort_backend.js); from a
// source checkout it is src/verify/ort_backend.js.
fs::path find_script() {
  if (const char* s = std::getenv("T2O_ORT_BACKEND"); s && *s) return s;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::exists(exe.parent_path() / "verify" / "ort_backend.js")) return exe.parent_path() / "verify" / "ort_backend.js";
#ifdef T2O_SOURCE_DIR
  fs::path src = fs::path(T2O_SOURCE_DIR) / "src" / "verify" / "ort_backend.js";
  if (fs::exists(src)) return src;
#endif
  return {};
}

std::string quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

}  // namespace

void require_ort() {
  const std::string hint = "install it with: npm install --ignore-scripts --prefix " + cache_dir().string() +
                           " onnxruntime-node (or set T2O_CACHE_DIR)";
  if (find_on_path("node").empty()) throw Error("--backend ort needs Node.js ('node' is not on PATH)", hint, kExitUsage);
  if (!fs::exists(cache_dir() / "node_modules" / "onnxruntime-node"))
    throw Error("--backend ort: onnxruntime-node is not installed in " + (cache_dir() / "node_modules").string(), hint,
                kExitUsage);
  if (find_script().empty())
    throw Error("--backend ort: verify/ort_backend.js not found next to the binary",
                "set T2O_ORT_BACKEND to the path of src/verify/ort_backend.js", kExitUsage);
}

std::vector<Tensor> run_ort(const std::string& onnx_path, const std::vector<std::pair<std::string, Tensor>>& inputs,
                            const std::vector<std::string>& output_names) {
  require_ort();
  std::random_device rd;
  fs::path dir = fs::temp_directory_path() / ("t2o_verify_ort_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  nlohmann::json files = nlohmann::json::object();
  for (size_t k = 0; k < inputs.size(); ++k) {
    std::string f = "in_" + std::to_string(k) + ".npy";
    write_npy((dir / f).string(), inputs[k].second);
    files[inputs[k].first] = f;
  }
  write_file_atomic((dir / "inputs.json").string(), files.dump());
  std::string cmd = quote(find_on_path("node").string()) + " " + quote(find_script().string()) + " " +
                    quote(fs::absolute(onnx_path).string()) + " " + quote(dir.string()) + " 2>" +
                    quote((dir / "stderr.txt").string());
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::string err;
    try {
      err = read_file((dir / "stderr.txt").string());
    } catch (const Error&) {
    }
    while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
    throw Error("ONNX Runtime fails on the model: " + err.substr(0, err.find('\n')));
  }
  auto names = nlohmann::json::parse(read_file((dir / "outputs.json").string()));
  std::map<std::string, Tensor> by_name;
  for (size_t k = 0; k < names.size(); ++k)
    by_name[names[k].get<std::string>()] = read_npy((dir / ("out_" + std::to_string(k) + ".npy")).string());
  std::vector<Tensor> out;
  for (const std::string& n : output_names) {
    auto it = by_name.find(n);
    if (it == by_name.end()) throw Error("ONNX Runtime did not return output '" + n + "'");
    out.push_back(it->second);
  }
  return out;
}

}  // namespace t2o
