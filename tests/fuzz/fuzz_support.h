#pragma once
// Shared by the libFuzzer harnesses: the limits every harness runs under, and a scratch folder.
// A harness accepts any t2o::Error or std::exception (the CLI prints those as one line); what it
// must never do is crash, read or write out of bounds, hang, or allocate without limit.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "ir/tensor.h"

namespace t2o::fuzz {

// Tensors may hold at most this much at once; the harnesses run with -rss_limit_mb=2048 and
// -timeout=10. 256 MiB, not more: merely writing a 1 GiB output (a window or constant whose size
// comes from the file) took over 10 s under ASan on a busy 2-core machine, a timeout that is
// the instrumentation's cost and no hang.
constexpr size_t kMemoryLimit = size_t{256} << 20;

// A private folder for files a harness writes (removed at exit).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("t2o_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return dir;
}

// T2O_FUZZ_VERBOSE=1: print the errors the harness accepts (to see how far inputs get).
inline void note(const std::exception& e) {
  static const bool verbose = std::getenv("T2O_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "accepted error: %s\n", e.what());
}

}  // namespace t2o::fuzz
