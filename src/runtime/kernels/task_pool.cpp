#include "runtime/kernels/task_pool.h"

#include <immintrin.h>
#include <omp.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace t2o::kern {

namespace {

thread_local bool t_in_task = false;
std::atomic<uint64_t> g_helper_tasks{0};

struct Job {
  int64_t n = 0;
  void (*call)(void*, int64_t) = nullptr;
  void* ctx = nullptr;
  int helpers = 0;  // at most this many helpers join
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex err_mu;
  std::exception_ptr err;

  // Claims and runs tasks until none is left; returns how many this thread ran.
  uint64_t drain() {
    uint64_t ran = 0;
    for (int64_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
      try {
        call(ctx, i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (!err) err = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
      }
      ++ran;
    }
    return ran;
  }
};

class Pool {
 public:
  static Pool& get() {
    // Never destroyed: helpers may still be asleep in it when the process exits.
    static Pool* p = new Pool();
    return *p;
  }

  void run(int64_t n, int threads, void (*call)(void*, int64_t), void* ctx) {
    if (n <= 0) return;
    if (n == 1 || threads <= 1 || t_in_task || busy_.exchange(true, std::memory_order_acquire)) {
      serial(n, call, ctx);
      return;
    }
    Job job;
    job.n = n;
    job.call = call;
    job.ctx = ctx;
    job.helpers = static_cast<int>(std::min<int64_t>(threads - 1, n - 1));
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (static_cast<int>(workers_.size()) < job.helpers) workers_.emplace_back([this] { helper(); });
      job_ = &job;
      joined_ = 0;
      ++gen_;
    }
    cv_.notify_all();
    {
      const int saved = omp_get_max_threads();
      omp_set_num_threads(1);
      t_in_task = true;
      job.drain();
      t_in_task = false;
      omp_set_num_threads(saved);
    }
    {
      // Closed: helpers that wake from now on leave this job alone.
      std::lock_guard<std::mutex> lock(mu_);
      job_ = nullptr;
    }
    // Only tasks a helper is running are left: a short wait, unless the helper shares this core.
    for (int spins = 0; active_.load(std::memory_order_acquire) != 0; ++spins) {
      if (spins < 4096) _mm_pause();
      else std::this_thread::yield();
    }
    busy_.store(false, std::memory_order_release);
    if (job.err) std::rethrow_exception(job.err);
  }

 private:
  Pool() = default;

  static void serial(int64_t n, void (*call)(void*, int64_t), void* ctx) {
    for (int64_t i = 0; i < n; ++i) call(ctx, i);
  }

  void helper() {
    omp_set_num_threads(1);
    t_in_task = true;
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return job_ && gen_ != seen; });
      seen = gen_;
      Job* job = job_;
      if (joined_ >= job->helpers) continue;
      ++joined_;
      // Counted while the job is open (under mu_): the caller closes it under mu_ and then waits
      // for the count to fall to zero.
      active_.fetch_add(1, std::memory_order_relaxed);
      lock.unlock();
      g_helper_tasks.fetch_add(job->drain(), std::memory_order_relaxed);
      active_.fetch_sub(1, std::memory_order_release);
      lock.lock();
    }
  }

  std::atomic<bool> busy_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> workers_;
  Job* job_ = nullptr;
  uint64_t gen_ = 0;
  int joined_ = 0;
  std::atomic<int> active_{0};
};

}  // namespace

namespace detail {
void run_tasks(int64_t n, int threads, void (*call)(void*, int64_t), void* ctx) {
  Pool::get().run(n, threads, call, ctx);
}
}  // namespace detail

bool in_task() { return t_in_task; }

uint64_t tasks_run_by_helpers() { return g_helper_tasks.load(std::memory_order_relaxed); }

}  // namespace t2o::kern
