#pragma once
// Shared by the end-to-end tests that run the command line on the verify fixtures
// (tests/models/verify_models.py): running the CLI, converting a fixture once, breaking a model
// on purpose, and a work directory removed at the end.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "onnx/model_io.h"

namespace fs = std::filesystem;
using namespace t2o;
using nlohmann::json;

namespace {

inline std::string env_or(const char* name, const char* dflt) {
  const char* e = std::getenv(name);
  return e && *e ? e : dflt;
}
inline std::string fixtures() { return env_or("T2O_VERIFY_FIXTURES", T2O_VERIFY_FIXTURES); }

inline fs::path work_dir() {
  fs::path d = fs::temp_directory_path() / ("t2o_verify_e2e_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

struct CliRun {
  int code;
  std::string out;
};

// Runs the CLI with `args` (and `env` settings such as "PATH=/x" before it), capturing stdout and stderr.
inline CliRun cli(const std::string& args, const std::string& env = {}) {
  static int n = 0;
  fs::path log = work_dir() / ("cli_" + std::to_string(n++) + ".txt");
  std::string prefix = env.empty() ? "" : "env " + env + " ";
  int rc = std::system((prefix + std::string(T2O_CLI) + " " + args + " >" + log.string() + " 2>&1").c_str());
  std::ifstream f(log);
  std::stringstream ss;
  ss << f.rdbuf();
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, ss.str()};
}

inline std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

inline std::map<std::string, std::string> tag_lines(const std::string& fixture) {
  std::map<std::string, std::string> r;
  std::ifstream f(fixtures() + "/" + fixture + "/lines.txt");
  std::string tag, line;
  while (f >> tag >> line) r[tag] = line;
  return r;
}

// Converts fixture NAME once per test binary; returns the .onnx path.
inline std::string converted(const std::string& name, const std::string& args) {
  fs::path out = work_dir() / (name + ".onnx");
  if (!fs::exists(out)) {
    CliRun r = cli("convert " + fixtures() + "/" + name + "/model.pt -o " + out.string() + " --quiet " + args);
    EXPECT_EQ(r.code, 0) << r.out;
  }
  return out.string();
}

inline std::string cnn() { return converted("cnn", "--input x:1x3x6x6 --dynamic x:0=batch"); }

// Saves a copy of `onnx` with `edit` applied to the first node `pick` accepts; returns the
// broken model's path and the edited node's name.
inline std::pair<std::string, std::string> broken(const std::string& onnx, const std::string& tag,
                                           const std::function<bool(const Node&)>& pick,
                                           const std::function<void(Model&, Node&)>& edit) {
  Model m = load_model(onnx);
  for (Node& n : m.graph.nodes)
    if (pick(n)) {
      edit(m, n);
      fs::path out = work_dir() / ("broken_" + tag + ".onnx");
      save_model(m, out.string());
      return {out.string(), n.name};
    }
  ADD_FAILURE() << "no node to break for " << tag;
  return {};
}

inline bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// Removes the work directory at the end, unless T2O_E2E_KEEP is set (to look at the reports).
class CleanWorkDir : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    if (!std::getenv("T2O_E2E_KEEP")) fs::remove_all(work_dir(), ec);
  }
};
const auto* const g_clean = ::testing::AddGlobalTestEnvironment(new CleanWorkDir);

}  // namespace
