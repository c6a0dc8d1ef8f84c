// A fixed pool of worker threads. run(fn) calls fn(i) once for every thread index i in
// [0, size()) — the calling thread is index 0 — and returns when all are done. Work is split
// by the callers with split_range(), a function of the shape and the thread count only, so
// every output element is always computed by the same code path: results are bit-identical
// for any thread count (the kernels' own contract does the rest).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
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

 private:
  void worker(int index);
  int n_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

// The part of [0, n) that thread `i` of `n_threads` handles, in units of `align` (the last
// part takes the remainder). Deterministic in (n, n_threads, align).
std::pair<int64_t, int64_t> split_range(int64_t n, int i, int n_threads, int64_t align = 1);

}  // namespace krafla
