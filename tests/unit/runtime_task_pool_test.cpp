// The task pool (runtime/kernels/task_pool.h): every task runs exactly once whatever the thread
// count, nested and concurrent callers, exceptions, helpers joining a slow caller, and OpenMP
// limited to one thread inside a task (regions that do not name a thread count).
#include <gtest/gtest.h>

#include <omp.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/kernels/task_pool.h"

using namespace t2o;

TEST(TaskPool, EveryTaskRunsOnce) {
  for (int threads : {1, 2, 3, 8})
    for (int64_t n : {0, 1, 2, 3, 7, 64, 1000}) {
      std::vector<std::atomic<int>> count(static_cast<size_t>(n));
      kern::run_tasks(n, threads, [&](int64_t i) { count[static_cast<size_t>(i)].fetch_add(1); });
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(count[static_cast<size_t>(i)].load(), 1) << "task " << i << " of " << n << ", " << threads << " threads";
    }
}

TEST(TaskPool, NestedCallsRunOnTheTasksThread) {
  EXPECT_FALSE(kern::in_task());
  std::atomic<int> inner{0}, elsewhere{0}, outside{0};
  kern::run_tasks(8, 2, [&](int64_t) {
    if (!kern::in_task()) outside.fetch_add(1);
    const std::thread::id me = std::this_thread::get_id();
    kern::run_tasks(5, 2, [&](int64_t) {
      inner.fetch_add(1);
      if (std::this_thread::get_id() != me) elsewhere.fetch_add(1);
    });
  });
  EXPECT_EQ(inner.load(), 40);
  EXPECT_EQ(elsewhere.load(), 0);
  EXPECT_EQ(outside.load(), 0);
  EXPECT_FALSE(kern::in_task());
}

TEST(TaskPool, OpenMPUsesOneThreadInsideATask) {
  const int before = omp_get_max_threads();
  std::atomic<int> wider{0};
  kern::run_tasks(6, 2, [&](int64_t) {
    if (omp_get_max_threads() != 1) wider.fetch_add(1);
    int team = 0;
#pragma omp parallel
    {
#pragma omp single
      team = omp_get_num_threads();
    }
    if (team != 1) wider.fetch_add(1);
  });
  EXPECT_EQ(wider.load(), 0);
  EXPECT_EQ(omp_get_max_threads(), before);
}

TEST(TaskPool, HelpersTakeOverFromASlowCaller) {
  // Eight tasks of 3 ms: a helper that wakes within the first 21 ms takes some of them.
  const uint64_t before = kern::tasks_run_by_helpers();
  std::set<std::thread::id> ids;
  std::mutex mu;
  kern::run_tasks(8, 2, [&](int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_GT(kern::tasks_run_by_helpers(), before);
  EXPECT_EQ(ids.size(), 2u);
}

TEST(TaskPool, ConcurrentCallersEachGetTheirTasksDone) {
  constexpr int kCallers = 4, kRounds = 200, kTasks = 16;
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&] {
      for (int r = 0; r < kRounds; ++r) {
        std::vector<std::atomic<int>> count(kTasks);
        kern::run_tasks(kTasks, 2, [&](int64_t i) { count[static_cast<size_t>(i)].fetch_add(1); });
        for (auto& k : count)
          if (k.load() != 1) wrong.fetch_add(1);
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(TaskPool, AnExceptionReachesTheCaller) {
  std::atomic<int> ran{0};
  EXPECT_THROW(kern::run_tasks(50, 2,
                               [&](int64_t i) {
                                 ran.fetch_add(1);
                                 if (i == 3) throw std::runtime_error("task 3");
                               }),
               std::runtime_error);
  EXPECT_GE(ran.load(), 4);
  EXPECT_FALSE(kern::in_task());
  // The pool still works.
  std::atomic<int> after{0};
  kern::run_tasks(10, 2, [&](int64_t) { after.fetch_add(1); });
  EXPECT_EQ(after.load(), 10);
}
