#pragma once
// Parallel work for threads that sleep when idle (OMP_WAIT_POLICY=passive): tasks that the caller
// starts on its own, and that helper threads take over as they wake up.
//
// An OpenMP region splits its work between its threads in advance, so when idle threads sleep,
// the caller waits for each of them to wake up (tens of microseconds on a virtual machine) and
// finish its share; a network of 60 small convolutions pays that 60 times. Here the caller never
// waits for a thread that has not started: it claims tasks one by one from a shared counter,
// while woken helpers claim from the same counter, and at the end it only waits for tasks that a
// helper is already running. A helper that wakes after the work is done finds nothing to do.
//
// One job runs at a time, process-wide; a caller that finds the pool busy (another session
// running on another thread), or that is itself inside a task, runs its tasks on its own thread.
// Inside a task, OpenMP regions that do not name a thread count use one thread (oneDNN's
// primitives made under kern::OmpThreadLimit(1) among them).
#include <cstdint>
#include <type_traits>
#include <utility>

namespace t2o::kern {

namespace detail {
void run_tasks(int64_t n, int threads, void (*call)(void*, int64_t), void* ctx);
}

// Calls fn(i) once for each i in [0, n), on the calling thread and on up to threads - 1 helpers.
// Returns when every call has returned. An exception thrown by a call is rethrown here (the
// first one; tasks not yet started are then skipped).
template <typename F>
void run_tasks(int64_t n, int threads, F&& fn) {
  detail::run_tasks(n, threads, [](void* c, int64_t i) { (*static_cast<std::remove_reference_t<F>*>(c))(i); },
                    const_cast<void*>(static_cast<const void*>(&fn)));
}

// Whether the calling thread is running a task (or is one of the pool's helpers).
bool in_task();

// Tasks run so far by helpers rather than by the thread that asked for them, process-wide (for
// tests and diagnostics).
uint64_t tasks_run_by_helpers();

}  // namespace t2o::kern
