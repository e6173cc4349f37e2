#pragma once
// Small helpers shared by kernel families: axes, broadcasting, strides, parallel loops.
#include <omp.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <string>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/kernels/task_pool.h"

namespace t2o::kern {

// A float that a file controls, as an integer: a plain cast of NaN or of a value out of range is
// undefined behaviour. NaN gives `nan_value`; other values saturate to I's range.
template <typename I>
I saturate_cast(double v, I nan_value = I{0}) {
  if (std::isnan(v)) return nan_value;
  constexpr double lo = static_cast<double>(std::numeric_limits<I>::lowest());
  // The largest double below 2^digits: max() itself rounds up to it for 64-bit types.
  constexpr double hi = std::is_signed_v<I> ? -lo : 2.0 * (static_cast<double>(std::numeric_limits<I>::max() / 2) + 1);
  if (v <= lo) return std::numeric_limits<I>::lowest();
  if (v >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

// Normalises a possibly negative axis against `rank`; throws naming the node when out of range.
inline int64_t norm_axis(const KernelContext& ctx, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return a;
}

// Numpy-style broadcast of two shapes; throws naming the node when incompatible.
inline Dims broadcast_dims(const KernelContext& ctx, const Dims& a, const Dims& b) {
  size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      ctx.fail("cannot broadcast shapes " + dims_to_string(a) + " and " + dims_to_string(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

inline Dims strides_of(const Dims& d) {
  Dims s(d.size(), 1);
  for (int64_t i = static_cast<int64_t>(d.size()) - 2; i >= 0; --i)
    s[static_cast<size_t>(i)] = s[static_cast<size_t>(i + 1)] * d[static_cast<size_t>(i + 1)];
  return s;
}

// Strides of `in` (right-aligned) viewed as `out`: 0 on broadcast axes.
inline Dims broadcast_strides(const Dims& in, const Dims& out) {
  Dims s(out.size(), 0);
  Dims is = strides_of(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[i + off] = in[i] == 1 ? 0 : is[i];
  return s;
}

// For each flat output index, the flat offsets into up to 3 broadcast inputs.
// Iterates with an odometer so there is no division per element.
template <typename F>
void for_each_broadcast(const Dims& out, const std::vector<Dims>& in_strides, F&& f) {
  int64_t n = numel_of(out);
  if (n == 0) return;
  size_t r = out.size();
  size_t k = in_strides.size();
  std::vector<int64_t> idx(r, 0);
  std::vector<int64_t> off(k, 0);
  for (int64_t i = 0; i < n; ++i) {
    f(i, off.data());
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < out[d]) {
        for (size_t j = 0; j < k; ++j) off[j] += in_strides[j][d];
        break;
      }
      for (size_t j = 0; j < k; ++j) off[j] -= in_strides[j][d] * (out[d] - 1);
      idx[d] = 0;
    }
  }
}

// Whether OpenMP's idle threads sleep as soon as a parallel region ends (OMP_WAIT_POLICY=passive,
// GOMP_SPINCOUNT=0): each region then pays for waking them, 30-60 us on the machines measured.
inline bool omp_waits_passively() {
  static const bool passive = [] {
    const char* p = std::getenv("OMP_WAIT_POLICY");
    const char* s = std::getenv("GOMP_SPINCOUNT");
    std::string policy = p ? p : "";
    for (char& ch : policy) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return policy == "passive" || (s && std::string(s) == "0");
  }();
  return passive;
}

// A rough single-thread time of an op, in microseconds, from its arithmetic and the bytes it
// touches (about 170 GFLOP/s and 25 GB/s on one AVX-512 core).
inline double work_us(double flops, double bytes) { return flops / 170e3 + bytes / 25e3; }

// The threads worth using for an op of about `us` microseconds on one thread: all of `threads`,
// or one when idle threads sleep and waking another costs more than it saves. (MobileNetV2's
// 14 x 14 and 7 x 7 layers at 2 threads waiting passively: a 24 us depthwise conv took 52 us, a
// 60 us 1x1 conv 70 us.)
inline int threads_for(int threads, double us, double worth_waking_us = 100) {
  return threads > 1 && us < worth_waking_us && omp_waits_passively() ? 1 : threads;
}

// The same for work that runs as tasks (parallel_for, run_tasks): the caller never waits for a
// sleeping thread to wake, so only waking it (a few microseconds) is at stake.
inline int task_threads_for(int threads, double us) { return threads_for(threads, us, 20); }

// While alive, parallel regions opened on this thread (oneDNN's among them) use at most n threads.
class OmpThreadLimit {
 public:
  explicit OmpThreadLimit(int n) : saved_(omp_get_max_threads()) {
    if (n < saved_) omp_set_num_threads(n);
    else saved_ = 0;
  }
  ~OmpThreadLimit() {
    if (saved_) omp_set_num_threads(saved_);
  }
  OmpThreadLimit(const OmpThreadLimit&) = delete;
  OmpThreadLimit& operator=(const OmpThreadLimit&) = delete;

 private:
  int saved_;
};

// Runs f(begin, end) over [0, n) in chunks on the session's threads (serially when small). When
// idle threads sleep, the chunks are tasks (task_pool.h), four per thread, that the caller starts
// on its own and sleeping threads take over as they wake.
template <typename F>
void parallel_for(int64_t n, int threads, int64_t grain, F&& f) {
  if (threads <= 1 || n <= grain || in_task() || omp_in_parallel()) {
    f(int64_t{0}, n);
    return;
  }
  if (omp_waits_passively()) {
    const int64_t tasks = std::min<int64_t>(4 * static_cast<int64_t>(threads), (n + grain - 1) / grain);
    run_tasks(tasks, threads, [&](int64_t c) { f(n * c / tasks, n * (c + 1) / tasks); });
    return;
  }
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
    f(b, e);
  }
}

// Reads an int64/int32 tensor as a vector of int64.
inline std::vector<int64_t> to_int_vector(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.as_int(i);
  return v;
}

}  // namespace t2o::kern
