// Times a model in the torch2onnx runtime:  t2o_bench MODEL.onnx INPUT.npy THREADS ITERS [OUT.npy]
// Prints one JSON line: {"median_ms":..., "min_ms":..., "cpu_ms":..., "rss_mb":..., "build_ms":...,
// "build_cpu_ms":...} (build: Session construction, the file already read; rss_mb: peak resident
// memory minus the resident memory before the model was read). Input is fed to the first graph
// input; the first output is written to OUT.npy for comparison with other runtimes.
//
//   t2o_bench --peak THREADS     the machine's float32 FMA peak in GFLOP/s over THREADS threads
//                                (independent vector FMA chains, AVX-512 where the CPU has it)
//
// OpenMP threads wait as choose_omp_wait (runtime/session.h) decides unless OMP_WAIT_POLICY or
// GOMP_SPINCOUNT is set; the JSON line reports the setting.
#include <immintrin.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "onnx/model_io.h"
#include "onnx/tensor_io.h"
#include "runtime/session.h"

using namespace t2o;
using Clock = std::chrono::steady_clock;

namespace {

// Resident memory now, in MB (VmRSS); peak from VmHWM.
double proc_status_mb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(std::string(key).size())) / 1024.0;
  return 0;
}

// 12 independent FMA chains hide the FMA latency (4 cycles, 2 ports); returns the flops done.
#define T2O_FMA_CHAINS(NAME, TARGET, V, FMA, SET1, LANES)              \
  __attribute__((target(TARGET))) double NAME(long iters, float* sink) { \
    V acc[12];                                                         \
    for (int i = 0; i < 12; ++i) acc[i] = SET1(0.0f);                  \
    V a = SET1(0.999999f), b = SET1(1e-7f);                            \
    for (long n = 0; n < iters; ++n)                                   \
      for (int i = 0; i < 12; ++i) acc[i] = FMA(acc[i], a, b);         \
    for (int i = 1; i < 12; ++i) acc[0] = FMA(acc[0], a, acc[i]);      \
    float out[LANES];                                                  \
    std::memcpy(out, &acc[0], sizeof out);                             \
    *sink = out[0];                                                    \
    return 2.0 * LANES * 12 * double(iters);                           \
  }
T2O_FMA_CHAINS(chains512, "avx512f", __m512, _mm512_fmadd_ps, _mm512_set1_ps, 16)
T2O_FMA_CHAINS(chains256, "avx2,fma", __m256, _mm256_fmadd_ps, _mm256_set1_ps, 8)
#undef T2O_FMA_CHAINS

// Best of 5 half-second rounds, every thread running chains at once.
double fma_peak_gflops(int threads) {
  bool wide = __builtin_cpu_supports("avx512f");
  const long iters = 20'000'000;
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    std::vector<float> sink(threads);
    std::vector<double> flops(threads);
    auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { flops[t] = wide ? chains512(iters, &sink[t]) : chains256(iters, &sink[t]); });
    for (auto& th : pool) th.join();
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    double total = 0;
    for (double f : flops) total += f;
    best = std::max(best, total / secs / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--peak") {
    std::printf("%.1f\n", fma_peak_gflops(std::stoi(argv[2])));
    return 0;
  }
  if (argc < 5) {
    std::fprintf(stderr, "usage: t2o_bench MODEL.onnx INPUT.npy THREADS ITERS [OUT.npy]\n");
    return 2;
  }
  choose_omp_wait(argv);
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
    double rss0 = proc_status_mb("VmRSS:");
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
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    const char* spin = std::getenv("GOMP_SPINCOUNT");
    std::string wait = policy ? policy : spin ? std::string("spin ") + spin : "default";
    std::printf("{\"median_ms\": %.3f, \"min_ms\": %.3f, \"cpu_ms\": %.3f, \"rss_mb\": %.1f, \"build_ms\": %.1f, "
                "\"build_cpu_ms\": %.1f, \"omp_wait_policy\": \"%s\"}\n",
                ms[ms.size() / 2], ms[0], cpu_per_run, proc_status_mb("VmHWM:") - rss0, build_ms, build_cpu_ms,
                wait.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 3;
  }
}
