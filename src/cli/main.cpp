// torch2onnx: convert TorchScript to ONNX, verify it, run it.
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

#include "cli/commands.h"
#include "ir/error.h"
#include "runtime/session.h"

namespace t2o::cli {

bool stderr_is_tty() { return ::isatty(2) != 0; }

namespace {
bool status_shown = false;

void clear_status() {
  if (!status_shown) return;
  std::fputs("\r\x1b[K", stderr);
  status_shown = false;
}
}  // namespace

std::function<void(const std::string&)> status_line() {
  if (!stderr_is_tty()) return {};
  return [](const std::string& s) {
    if (s.empty()) return clear_status();
    // One terminal line: a line that wraps cannot be overwritten with \r.
    winsize ws{};
    size_t width = ::ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 ? ws.ws_col - 1 : 79;
    std::string line = s.size() > width ? s.substr(0, width) : s;
    std::fprintf(stderr, "\r\x1b[K%s", line.c_str());
    std::fflush(stderr);
    status_shown = true;
  };
}

void print_error(const std::string& msg, const std::string& hint) {
  clear_status();
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  if (!hint.empty()) std::fprintf(stderr, "hint: %s\n", hint.c_str());
}

void print_warning(const std::string& msg) {
  clear_status();
  std::fprintf(stderr, "warning: %s\n", msg.c_str());
}

}  // namespace t2o::cli

int main(int argc, char** argv) {
  using namespace t2o::cli;
  // Commands whose point is running models re-run themselves with a chosen OpenMP wait policy
  // (session.h). convert, verify and optimize run a model only a few times to prove or compare
  // it: a second process start (dynamic linking of libtorch, ~1 s) costs more than the policy
  // saves them, so they keep libgomp's default.
  if (argc > 1) {
    std::string cmd = argv[1];
    if (cmd == "run" || cmd == "quantize") t2o::choose_omp_wait(argv);
  }
  CLI::App app{
      "torch2onnx: turn a TorchScript model into a checked, verified ONNX model, and run ONNX models on the CPU.\n\n"
      "Exit codes: 0 ok, 1 verification mismatch, 2 usage error, 3 unsupported or failed conversion,\n"
      "4 unreadable or invalid input file.\n",
      "torch2onnx"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "torch2onnx 0.1.0");
  app.footer("Run 'torch2onnx COMMAND --help' for the options of a command.");
  std::map<CLI::App*, Runner> runners;
  auto add = [&](Runner (*f)(CLI::App&)) {
    size_t before = app.get_subcommands({}).size();
    Runner r = f(app);
    runners[app.get_subcommands({})[before]] = std::move(r);
  };
#ifdef T2O_WITH_TORCH
  add(add_convert);
  add(add_verify);
#endif
  add(add_inspect);
  add(add_check);
  add(add_run);
  add(add_convert_version);
  add(add_optimize);
  add(add_quantize);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    print_error(e.what(), "run 'torch2onnx --help' for usage");
    return t2o::kExitUsage;
  }
  for (auto& [sub, run] : runners) {
    if (!sub->parsed()) continue;
    try {
      return run();
    } catch (const t2o::Error& e) {
      print_error(e.what(), e.hint());
      return e.exit_code();
    } catch (const std::bad_alloc&) {
      print_error("out of memory");
      return t2o::kExitUnsupported;
    } catch (const std::exception& e) {
      print_error(e.what());
      return t2o::kExitUnsupported;
    }
  }
  return t2o::kExitUsage;
}
