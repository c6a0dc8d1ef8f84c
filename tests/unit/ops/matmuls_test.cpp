// Matmuls::run_then (the MLP's gate/up projections with the activation fused): the outputs equal
// run()'s bit for bit, `after` sees every row exactly once, in chunks whose outputs are already
// final for every input row, whatever the thread count and batch; jobs of unequal row counts
// are refused.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "krafla/error.h"
#include "ops/matmul.h"

namespace krafla {
namespace {

namespace K = kernels;

Matrix random_q4(int64_t rows, int64_t cols, std::mt19937& rng, std::vector<uint8_t>& stored) {
  std::uniform_int_distribution<int> byte(0, 255);
  stored.resize(K::row_bytes(K::WType::Q4_0, cols) * size_t(rows));
  for (auto& b : stored) b = uint8_t(byte(rng));
  for (size_t i = 0; i < stored.size(); i += sizeof(K::BlockQ4_0)) {
    const uint16_t d = 0x2000 + uint16_t(byte(rng));  // a small positive f16 scale
    std::memcpy(&stored[i], &d, 2);
  }
  Matrix m;
  m.type = K::WType::Q4_0, m.rows = rows, m.cols = cols, m.name = "test";
  m.packed.resize(K::packed_size(m.type, rows, cols));
  K::pack(m.type, stored.data(), rows, cols, 0, rows, m.packed.data());
  return m;
}

TEST(Matmuls, RunThenEqualsRunAndSeesEachRowOnceWhenFinal) {
  const int64_t rows = 600, cols = 256;  // not a multiple of any chunk: a short last one
  std::mt19937 rng(11);
  std::vector<uint8_t> s1, s2;
  const Matrix a = random_q4(rows, cols, rng, s1), b = random_q4(rows, cols, rng, s2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int threads : {1, 2, 3})
    for (int n : {1, 5, 128}) {
      ThreadPool pool(threads);
      Matmuls mm(pool, 128, cols);
      std::vector<float> in(size_t(n) * cols);
      for (float& x : in) x = nd(rng);
      std::vector<float> wa(size_t(n) * rows), wb(wa.size()), ga(wa.size()), gb(wa.size());
      mm.run(Op::MatGateUp, in.data(), cols, n, {{&a, wa.data()}, {&b, wb.data()}});
      std::mutex mu;
      std::vector<int> seen(rows, 0);
      bool final_when_seen = true;
      mm.run_then(Op::MatGateUp, in.data(), cols, n, {{&a, ga.data()}, {&b, gb.data()}},
                  [&](int64_t r0, int64_t r1) {
                    std::lock_guard l(mu);
                    for (int64_t r = r0; r < r1; ++r) {
                      ++seen[r];
                      for (int t = 0; t < n; ++t) {
                        const size_t i = size_t(t) * rows + r;
                        final_when_seen = final_when_seen && ga[i] == wa[i] && gb[i] == wb[i];
                      }
                    }
                  });
      EXPECT_TRUE(final_when_seen) << threads << " threads, n " << n;
      EXPECT_EQ(std::vector<int>(rows, 1), seen) << threads << " threads, n " << n;
      EXPECT_EQ(0, std::memcmp(wa.data(), ga.data(), wa.size() * 4));
      EXPECT_EQ(0, std::memcmp(wb.data(), gb.data(), wb.size() * 4));
    }
  std::vector<uint8_t> s3;
  const Matrix c = random_q4(rows - 16, cols, rng, s3);
  ThreadPool pool(2);
  Matmuls mm(pool, 1, cols);
  std::vector<float> in(cols, 1.0f), o1(rows), o2(rows);
  EXPECT_THROW(mm.run_then(Op::MatGateUp, in.data(), cols, 1, {{&a, o1.data()}, {&c, o2.data()}},
                           [](int64_t, int64_t) {}),
               Error);
}

}  // namespace
}  // namespace krafla
