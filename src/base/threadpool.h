// A fixed pool of worker threads. run(fn) calls fn(i) once for every thread index i in
// [0, size()) — the calling thread is index 0 — and returns when all are done. Work is split
// with split_range() (usually through split() / for_each()), a function of the shape and the
// thread count only, so every output element is always computed by the same code path:
// results are bit-identical for any thread count (the kernels' own contract does the rest).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace krafla {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_; }
  void run(const std::function<void(int)>& fn);

  // Splits [0, n) across the threads with split_range (units of `align`) and calls
  // fn(begin, end) on every non-empty part, or fn(thread, begin, end) when fn takes the thread
  // index (for per-thread scratch). When thread 0 gets the whole range (decode's single row)
  // it runs inline without waking the workers: the same part, computed by the same thread.
  template <typename Fn>
  void split(int64_t n, Fn&& fn, int64_t align = 1);
  // Calls fn(i) for every row i in [0, n), the rows split across the threads as split does.
  template <typename Fn>
  void for_each(int64_t n, Fn&& fn) {
    split(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) fn(i);
    });
  }

 private:
  void worker(int index);
  void wake_sleepers();
  int n_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  // Where an idle worker sleeps once it has spun long enough: a mutex and condition variable,
  // not std::atomic::wait, whose fallback in GCC 12's libstdc++ (every target without a futex:
  // MinGW, so Windows) can lose a notify and leave run() waiting for ever (GCC PR 106183).
  std::mutex sleep_mutex_;
  std::condition_variable sleep_cv_;
  std::atomic<int> sleepers_{0};
};

// The part of [0, n) that thread `i` of `n_threads` handles, in units of `align` (the last
// part takes the remainder). Deterministic in (n, n_threads, align).
std::pair<int64_t, int64_t> split_range(int64_t n, int i, int n_threads, int64_t align = 1);

template <typename Fn>
void ThreadPool::split(int64_t n, Fn&& fn, int64_t align) {
  const auto part = [&](int ti) {
    const auto [begin, end] = split_range(n, ti, n_, align);
    if (begin >= end) return;
    if constexpr (std::is_invocable_v<Fn&, int, int64_t, int64_t>) {
      fn(ti, begin, end);
    } else {
      fn(begin, end);
    }
  };
  if (n <= align) {  // one unit: split_range gives it all to thread 0
    part(0);
  } else {
    run(part);
  }
}

}  // namespace krafla
