// Graphviz's dot as a child process: the layout is dot's (a well-kept library), the page only
// embeds the SVG it writes. A missing dot, a failing one or one running past the timeout each
// give a sentence for the page instead of an error: the rest of the report stays useful.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "report/graph_draw.h"

extern char** environ;

namespace fs = std::filesystem;

namespace t2o {

namespace {

std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    fs::path p = fs::path(dir.empty() ? "." : dir) / name;
    if (access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A scratch folder removed when it goes out of scope.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    static std::atomic<int> n{0};
    path = fs::temp_directory_path() / ("t2o_report_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

std::string run_dot(const std::string& dot_text, const RenderOptions& o, std::string& why) {
  std::string dot = find_program(o.dot);
  if (dot.empty()) {
    why = "the graph needs Graphviz's dot, which is not installed (Debian: apt-get install graphviz)";
    return "";
  }
  ScratchDir dir;
  fs::path in = dir.path / "graph.dot", out = dir.path / "graph.svg", err = dir.path / "stderr.txt";
  {
    std::ofstream f(in, std::ios::binary);
    f << dot_text;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string a0 = dot, a1 = "-Tsvg", a2 = "-o" + out.string(), a3 = in.string();
  char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawn(&pid, dot.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    why = "could not start " + dot + ": " + std::strerror(rc);
    return "";
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.dot_timeout_s);
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      why = "lost the dot process";
      return "";
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      why = "Graphviz's dot took longer than " + std::to_string(o.dot_timeout_s) + " s to lay the graph out";
      return "";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string e = read_all(err);
    if (auto nl = e.find('\n'); nl != std::string::npos) e.resize(nl);
    why = "Graphviz's dot failed" + (e.empty() ? std::string() : ": " + e);
    return "";
  }
  return read_all(out);
}

}  // namespace t2o
