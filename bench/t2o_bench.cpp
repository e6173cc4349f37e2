// Times a model in the torch2onnx runtime:  t2o_bench MODEL.onnx INPUT.npy THREADS ITERS [OUT.npy]
// Prints one JSON line: {"median_ms":..., "min_ms":..., "build_ms":..., "build_cpu_ms":...} (build: Session
// construction, the file already read). Input is fed to the first
// graph input; the first output is written to OUT.npy for comparison with other runtimes.
//
// OpenMP waits passively unless OMP_WAIT_POLICY says otherwise: libgomp's default spins at every
// barrier, and on a shared, loaded machine a spinning thread holds a core while its sibling, which
// the barrier is waiting for, sits in the run queue. Measured on 2 cores at load ~12: MobileNetV2
// at 2 threads took ~1070 ms median spinning vs ~30 ms passive. libgomp reads the variable once
// at load, so the process re-executes itself with it set.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "onnx/model_io.h"
#include "onnx/tensor_io.h"
#include "runtime/session.h"

using namespace t2o;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: t2o_bench MODEL.onnx INPUT.npy THREADS ITERS [OUT.npy]\n");
    return 2;
  }
  prefer_passive_omp_wait(argv);
  try {
    int threads = std::stoi(argv[3]);
    int iters = std::stoi(argv[4]);
    // CPU time of the process (all threads): on a loaded machine wall time includes waiting for
    // a core, CPU time does not (it does include spinning).
    auto cpu_ms = [] {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
    };
    Model model = load_model(argv[1]);
    auto t0 = Clock::now();
    double build_cpu0 = cpu_ms();
    Session s(std::move(model), {threads, true});
    double build_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    double build_cpu_ms = cpu_ms() - build_cpu0;
    Tensor x = read_npy(argv[2]);
    std::map<std::string, RValue> feeds{{s.inputs().at(0).name, RValue(x)}};
    auto out = s.run(feeds);  // warm-up: primitive creation, first-touch of buffers
    for (int i = 0; i < 2; ++i) out = s.run(feeds);
    double cpu0 = cpu_ms();
    std::vector<double> ms;
    for (int i = 0; i < iters; ++i) {
      auto a = Clock::now();
      out = s.run(feeds);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
    }
    double cpu_per_run = (cpu_ms() - cpu0) / iters;
    std::sort(ms.begin(), ms.end());
    if (argc > 5) write_npy(argv[5], out.at(s.outputs().at(0).name).tensor);
    const char* wait = std::getenv("OMP_WAIT_POLICY");
    std::printf("{\"median_ms\": %.3f, \"min_ms\": %.3f, \"cpu_ms\": %.3f, \"build_ms\": %.1f, \"build_cpu_ms\": %.1f, "
                "\"omp_wait_policy\": \"%s\"}\n",
                ms[ms.size() / 2], ms[0], cpu_per_run, build_ms, build_cpu_ms, wait ? wait : "default");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 3;
  }
}
