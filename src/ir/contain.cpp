#include "ir/contain.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>

#include "ir/error.h"

// Present only in sanitizer builds.
extern "C" void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));

namespace t2o {

// The result comes back through a pipe: "O" + bytes, or "E" + exit code + message + NUL + hint.
std::string run_contained(const std::function<std::string()>& f, int timeout_seconds,
                          const std::function<std::string(const std::string& how)>& what, const std::string& hint) {
  int fds[2];
  if (::pipe(fds) != 0) return f();
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return f();
  }
  if (pid == 0) {
    ::close(fds[0]);
    // The child dies by the plain signal: handlers a sanitizer or fuzzer installed in the parent
    // would report the contained crash as the parent's own.
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGALRM}) std::signal(sig, SIG_DFL);
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(nullptr);
    ::alarm(static_cast<unsigned>(timeout_seconds));
    std::string out = "O";  // appended, not "O" + f(): GCC 12 warns falsely on that form
    try {
      out += f();
    } catch (const Error& e) {
      out = "E" + std::string(1, static_cast<char>(e.exit_code())) + e.what() + '\0' + e.hint();
    } catch (const std::exception& e) {
      out = "E" + std::string(1, static_cast<char>(kExitUnsupported)) + e.what() + '\0';
    }
    size_t done = 0;
    while (done < out.size()) {
      ssize_t k = ::write(fds[1], out.data() + done, out.size() - done);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) ::_exit(3);
      done += static_cast<size_t>(k);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[65536];
  for (;;) {
    ssize_t k = ::read(fds[0], buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got.append(buf, static_cast<size_t>(k));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !got.empty();
  if (!clean) {
    std::string how = WIFSIGNALED(status) ? (WTERMSIG(status) == SIGALRM ? "ran past " + std::to_string(timeout_seconds) + " s"
                                                                         : "crashed (signal " + std::to_string(WTERMSIG(status)) + ")")
                                          : "failed (exit " + std::to_string(WEXITSTATUS(status)) + ")";
    throw InputError(what(how), hint);
  }
  if (got[0] == 'O') return got.substr(1);
  int code = got.size() > 1 ? static_cast<int>(static_cast<unsigned char>(got[1])) : static_cast<int>(kExitUnsupported);
  std::string rest = got.size() > 2 ? got.substr(2) : std::string();
  auto z = rest.find('\0');
  std::string msg = rest.substr(0, z), said = z == std::string::npos ? std::string() : rest.substr(z + 1);
  if (code == kExitBadInput) throw InputError(msg, said);
  throw Error(msg, said, code);
}

}  // namespace t2o
