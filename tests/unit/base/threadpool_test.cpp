#include "base/threadpool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace krafla {

TEST(SplitRange, CoversDisjointAligned) {
  for (int64_t n : {0, 1, 7, 16, 17, 100, 1023, 32000})
    for (int nt : {1, 2, 3, 5, 8})
      for (int64_t align : {1, 4, 16}) {
        int64_t next = 0;
        for (int i = 0; i < nt; ++i) {
          auto [b, e] = split_range(n, i, nt, align);
          EXPECT_EQ(b, next) << n << " " << nt << " " << align;
          EXPECT_LE(b, e);
          if (b < n) {
            EXPECT_EQ(b % align, 0);
          }
          next = e;
        }
        EXPECT_EQ(next, n);
      }
}

TEST(ThreadPool, EveryIndexOncePerRun) {
  for (int nt : {1, 2, 3, 4}) {
    ThreadPool pool(nt);
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<std::atomic<int>> hits(nt);
      pool.run([&](int i) { hits[i].fetch_add(1); });
      for (int i = 0; i < nt; ++i) ASSERT_EQ(hits[i].load(), 1) << "thread " << i;
    }
  }
}

TEST(ThreadPool, ResultsVisibleAfterRun) {
  ThreadPool pool(3);
  std::vector<int64_t> out(3000, 0);
  for (int rep = 0; rep < 50; ++rep) {
    pool.run([&](int i) {
      auto [b, e] = split_range(int64_t(out.size()), i, pool.size());
      for (int64_t j = b; j < e; ++j) out[j] = j * rep;
    });
    for (size_t j = 0; j < out.size(); ++j) ASSERT_EQ(out[j], int64_t(j) * rep);
  }
}

}  // namespace krafla

namespace krafla {

TEST(ThreadPoolSplit, EveryRowOnceInItsThreadsPart) {
  for (int nt : {1, 2, 3, 5}) {
    ThreadPool pool(nt);
    for (int64_t n : {0, 1, 2, 7, 64, 1000}) {
      std::vector<int> seen(size_t(n), 0), owner(size_t(n), -1);
      pool.split(n, [&](int ti, int64_t b, int64_t e) {
        const auto [want_b, want_e] = split_range(n, ti, nt);
        EXPECT_EQ(b, want_b);
        EXPECT_EQ(e, want_e);
        for (int64_t i = b; i < e; ++i) owner[size_t(i)] = ti;
      });
      pool.for_each(n, [&](int64_t i) { ++seen[size_t(i)]; });
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(seen[size_t(i)], 1) << nt << " " << n << " " << i;
        EXPECT_GE(owner[size_t(i)], 0);
      }
    }
  }
}

TEST(ThreadPoolSplit, AlignedPartsAndNoEmptyCalls) {
  ThreadPool pool(3);
  std::atomic<int> calls{0};
  pool.split(
      40,
      [&](int64_t b, int64_t e) {
        EXPECT_LT(b, e);
        EXPECT_EQ(b % 16, 0);
        ++calls;
      },
      16);
  EXPECT_EQ(calls.load(), 3);  // 3 tiles of 16 (the last partial) over 3 threads
  calls = 0;
  pool.split(
      5, [&](int64_t, int64_t) { ++calls; }, 16);  // one tile: thread 0 only
  EXPECT_EQ(calls.load(), 1);
}

}  // namespace krafla
