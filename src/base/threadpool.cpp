#include "base/threadpool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KRAFLA_PAUSE() _mm_pause()
#elif defined(__aarch64__) || defined(__arm__)
#define KRAFLA_PAUSE() __asm__ __volatile__("yield")
#else
#define KRAFLA_PAUSE() ((void)0)
#endif

namespace krafla {
namespace {
// Spin this many rounds before sleeping: decode steps come every few ms and a wake-up from
// sleep costs tens of microseconds, but a machine shared with other work must not burn
// a core while idle.
constexpr int kSpinRounds = 20000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_(std::max(1, n_threads)) {
  for (int i = 1; i < n_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  wake_sleepers();
  for (auto& t : threads_) t.join();
}

// After generation_ changed. Both sides are sequentially consistent (the worker: sleepers_++
// then read generation_; here: generation_++ then read sleepers_), so a worker that is about
// to sleep either sees the new generation or is seen here; taking the mutex then means it is
// either still before its check or already waiting, and is woken either way. Nobody asleep, the
// usual case while decoding: no lock, no system call.
void ThreadPool::wake_sleepers() {
  if (sleepers_.load() == 0) return;
  { std::lock_guard lock(sleep_mutex_); }
  sleep_cv_.notify_all();
}

void ThreadPool::run(const std::function<void(int)>& fn) {
  if (n_ == 1) {
    fn(0);
    return;
  }
  job_ = &fn;
  pending_.store(n_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1);
  wake_sleepers();
  fn(0);
  int spins = 0;
  while (pending_.load(std::memory_order_acquire) != 0) {
    if (++spins < kSpinRounds) {
      KRAFLA_PAUSE();
    } else {
      std::this_thread::yield();
    }
  }
  job_ = nullptr;
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    uint64_t g;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinRounds) {
        KRAFLA_PAUSE();
      } else {
        std::unique_lock lock(sleep_mutex_);
        sleepers_.fetch_add(1);
        sleep_cv_.wait(lock, [&] { return generation_.load() != seen; });
        sleepers_.fetch_sub(1);
      }
    }
    seen = g;
    if (stop_.load()) return;
    (*job_)(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

std::pair<int64_t, int64_t> split_range(int64_t n, int i, int n_threads, int64_t align) {
  const int64_t units = (n + align - 1) / align;
  const int64_t per = units / n_threads, extra = units % n_threads;
  const int64_t b = i * per + std::min<int64_t>(i, extra);
  const int64_t e = b + per + (i < extra ? 1 : 0);
  return {std::min(n, b * align), std::min(n, e * align)};
}

}  // namespace krafla
