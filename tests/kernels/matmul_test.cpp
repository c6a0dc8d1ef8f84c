// matmul / pack / quantize_act: the built ISA and the scalar specification against a double
// reference, and the built ISA's bitwise independence of n_tok, r0 and r1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "test_util.h"

namespace krafla::kernels {
namespace {

using test::random_floats;
using test::random_weights;
using test::type_name;

constexpr WType kTypes[] = {WType::F32, WType::F16, WType::Q8_0, WType::Q4_0,
                            WType::Q4_M};  // + Q6_H
constexpr int64_t kRows[] = {1, 2, 3, 5, 7, 15, 17, 31, 33, 64, 100};
constexpr int64_t kCols[] = {32, 64, 96, 160, 352, 1024, 5632};  // 5632: TinyLlama ffn
constexpr int64_t kToks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16};
constexpr int64_t kMaxTok = 33;

// One ISA's view of a weight matrix and a batch of activations.
struct Prepared {
  std::vector<uint8_t> packed, act;
  size_t act_bytes = 0;
};

template <typename Table>
Prepared prepare(const Table& k, WType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                 const std::vector<float>& x, int64_t n_tok) {
  Prepared p;
  p.packed.assign(k.packed_size(t, rows, cols), 0xcd);
  // Pack in two ranges split at a tile boundary, as concurrent loader threads would.
  const int64_t split = std::min<int64_t>(rows, k.row_tile() * ((rows / 2) / k.row_tile()));
  k.pack(t, w.data(), rows, cols, 0, split, p.packed.data());
  k.pack(t, w.data(), rows, cols, split, rows, p.packed.data());
  p.act_bytes = k.act_row_size(t, cols);
  p.act.resize(p.act_bytes * n_tok);
  for (int64_t i = 0; i < n_tok; ++i)
    k.quantize_act(t, x.data() + i * cols, cols, &p.act[i * p.act_bytes]);
  return p;
}

// Function-pointer views of the two tables so one template serves both.
struct Table {
  int (*row_tile)();
  size_t (*packed_size)(WType, int64_t, int64_t);
  void (*pack)(WType, const void*, int64_t, int64_t, int64_t, int64_t, void*);
  size_t (*act_row_size)(WType, int64_t);
  void (*quantize_act)(WType, const float*, int64_t, void*);
  void (*matmul)(WType, const void*, int64_t, int64_t, int64_t, int64_t, const void*, int64_t,
                 float*, int64_t);
};
const Table kIsa{row_tile, packed_size, pack, act_row_size, quantize_act, matmul};
const Table kScalar{scalar::row_tile,     scalar::packed_size,  scalar::pack,
                    scalar::act_row_size, scalar::quantize_act, scalar::matmul};

// Per-element error bound against the exact double product of the stored weights with the
// unquantized activations.
//  * Quantized types: the activation is rounded to q*d_a with d_a = amax/127 per block, an
//    error <= d_a/2 per element; the scalar path also stores d_a as f16 (rel. 2^-11, times
//    |q| <= 127: +0.07 d_a). So |err| <= sum_i |w_i| * 0.57 * d_a(block of i), plus float
//    accumulation.
//  * Float accumulation (all types): n sequential roundings, |err| <= n * 2^-24 * sum|w x|
//    (the classic gamma_n bound; F32/F16 weights are exact inputs, so this is their whole
//    tolerance).
double tolerance(WType t, const float* w_row, const float* x, int64_t cols) {
  double abs_sum = 0, quant = 0;
  for (int64_t c = 0; c < cols; ++c) abs_sum += std::fabs(double(w_row[c]) * x[c]);
  if (t != WType::F32 && t != WType::F16) {
    for (int64_t b = 0; b < cols / kQBlock; ++b) {
      double amax = 0, wsum = 0;
      for (int i = 0; i < kQBlock; ++i) {
        amax = std::max(amax, double(std::fabs(x[b * kQBlock + i])));
        wsum += std::fabs(w_row[b * kQBlock + i]);
      }
      quant += wsum * 0.57 * amax / 127.0;
    }
  }
  return quant + double(cols + 2) * std::ldexp(1.0, -24) * abs_sum * 2 + 1e-30;
}

void check_type(WType t) {
  std::mt19937 rng(1234 + int(t));
  for (int64_t cols : kCols) {
    for (int64_t rows : kRows) {
      if (cols > 1024 && rows > 33) continue;  // keeps the scalar build's run short
      SCOPED_TRACE(testing::Message() << type_name(t) << " rows=" << rows << " cols=" << cols);
      const auto w = random_weights(rng, t, rows, cols);
      const auto x = random_floats(rng, cols * kMaxTok, -2.0f, 2.0f);
      std::vector<float> wf(rows * cols);
      for (int64_t r = 0; r < rows; ++r)
        scalar::dequantize_row(t, w.data() + r * row_bytes(t, cols), &wf[r * cols], cols);

      const Prepared pi = prepare(kIsa, t, w, rows, cols, x, kMaxTok);
      const Prepared ps = prepare(kScalar, t, w, rows, cols, x, kMaxTok);
      const int64_t ld = rows + 3;
      const float kSentinel = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> full(ld * kMaxTok, kSentinel), ref_s(ld * kMaxTok, kSentinel);
      matmul(t, pi.packed.data(), rows, cols, 0, rows, pi.act.data(), kMaxTok, full.data(), ld);
      scalar::matmul(t, ps.packed.data(), rows, cols, 0, rows, ps.act.data(), kMaxTok, ref_s.data(),
                     ld);

      int bad = 0;
      for (int64_t tok = 0; tok < kMaxTok; ++tok) {
        for (int64_t r = 0; r < rows; ++r) {
          double ref = 0;
          for (int64_t c = 0; c < cols; ++c) ref += double(wf[r * cols + c]) * x[tok * cols + c];
          const double tol = tolerance(t, &wf[r * cols], &x[tok * cols], cols);
          const float gi = full[tok * ld + r], gs = ref_s[tok * ld + r];
          if (!(std::fabs(gi - ref) <= tol) || !(std::fabs(gs - ref) <= tol)) {
            if (bad++ < 5)
              ADD_FAILURE() << "tok " << tok << " row " << r << ": isa " << gi << " scalar " << gs
                            << " ref " << ref << " tol " << tol;
          }
        }
        for (int64_t r = rows; r < ld; ++r) EXPECT_TRUE(std::isnan(full[tok * ld + r]));
      }

      // Bitwise independence: any token count, any token offset, any row range.
      for (int64_t n_tok : kToks) {
        for (int64_t tok0 : {int64_t(0), kMaxTok - n_tok}) {
          std::vector<float> part(ld * n_tok, kSentinel);
          matmul(t, pi.packed.data(), rows, cols, 0, rows, &pi.act[tok0 * pi.act_bytes], n_tok,
                 part.data(), ld);
          EXPECT_EQ(0, std::memcmp(part.data(), &full[tok0 * ld], sizeof(float) * ld * n_tok))
              << "n_tok=" << n_tok << " tok0=" << tok0;
        }
      }
      const int64_t tile = row_tile();
      for (int64_t r0 = 0; r0 < rows; r0 += tile) {
        for (int64_t r1 : {std::min(rows, r0 + tile), rows, std::min(rows, r0 + 3 * tile)}) {
          std::vector<float> part(ld * kMaxTok, kSentinel);
          matmul(t, pi.packed.data(), rows, cols, r0, r1, pi.act.data(), kMaxTok, part.data(), ld);
          for (int64_t tok = 0; tok < kMaxTok; ++tok) {
            for (int64_t r = 0; r < ld; ++r) {
              const float got = part[tok * ld + r];
              if (r >= r0 && r < r1) {
                ASSERT_EQ(0, std::memcmp(&got, &full[tok * ld + r], 4))
                    << "r0=" << r0 << " r1=" << r1 << " tok " << tok << " row " << r;
              } else {
                ASSERT_TRUE(std::isnan(got)) << "wrote outside [r0,r1): row " << r;
              }
            }
          }
        }
      }
    }
  }
}

TEST(Matmul, F32) { check_type(WType::F32); }
TEST(Matmul, F16) { check_type(WType::F16); }
TEST(Matmul, Q8_0) { check_type(WType::Q8_0); }
TEST(Matmul, Q4_0) { check_type(WType::Q4_0); }
TEST(Matmul, Q4_M) { check_type(WType::Q4_M); }
TEST(Matmul, Q5_M) {
  if (!takes(WType::Q5_M))
    GTEST_SKIP() << isa_name() << " does not take Q5_M (the loader makes Q8_0)";
  check_type(WType::Q5_M);
}
TEST(Matmul, Q6_H) {
  if (!takes(WType::Q6_H))
    GTEST_SKIP() << isa_name() << " does not take Q6_H (the loader makes Q8_0)";
  check_type(WType::Q6_H);
}
TEST(Matmul, Q3_H) {
  if (!takes(WType::Q3_H))
    GTEST_SKIP() << isa_name() << " does not take Q3_H (the loader makes Q6_H or Q8_0)";
  check_type(WType::Q3_H);
}

// For random matrices of type `t` and their blocks rewritten as type `as` by
// rewrite(src, dst, n_blocks), the built ISA's matmuls agree bit for bit (one token: decode's
// register tiles; nine: prefill's).
template <class From, class To, class Rewrite>
void expect_same_matmul(WType t, WType as, uint32_t seed, Rewrite&& rewrite) {
  std::mt19937 rng(seed);
  for (int64_t rows : {5, 33, 64}) {
    for (int64_t cols : {32, 96, 2048}) {
      SCOPED_TRACE(testing::Message() << "rows=" << rows << " cols=" << cols);
      const auto w = random_weights(rng, t, rows, cols);
      std::vector<uint8_t> w2(row_bytes(as, cols) * rows, 0);
      rewrite(reinterpret_cast<const From*>(w.data()), reinterpret_cast<To*>(w2.data()),
              rows * cols / kQBlock);
      const int64_t n_tok = 9;
      const auto x = random_floats(rng, cols * n_tok, -2.0f, 2.0f);
      const Prepared p1 = prepare(kIsa, t, w, rows, cols, x, n_tok);
      const Prepared p2 = prepare(kIsa, as, w2, rows, cols, x, n_tok);
      for (int64_t n : {int64_t(1), n_tok}) {
        std::vector<float> y1(rows * n), y2(rows * n);
        matmul(t, p1.packed.data(), rows, cols, 0, rows, p1.act.data(), n, y1.data(), rows);
        matmul(as, p2.packed.data(), rows, cols, 0, rows, p2.act.data(), n, y2.data(), rows);
        EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float))) << "n=" << n;
      }
    }
  }
}

// Q3_H's dot is Q6_H's on the same values (q3 - 4 = q6 - 32, the same exact int sums per half, the
// same fold): the matmul of a matrix equals, bit for bit, that of its Q6_H blocks of the same
// scales with q6 = q3 + 28, the bits placed here by their layout in kernels.h.
TEST(Matmul, Q3HIsQ6HOfItsValues) {
  if (!takes(WType::Q3_H)) GTEST_SKIP() << isa_name() << " does not take Q3_H";
  expect_same_matmul<BlockQ3_H, BlockQ6_H>(
      WType::Q3_H, WType::Q6_H, 78, [](const BlockQ3_H* src, BlockQ6_H* dst, int64_t n) {
        for (int64_t b = 0; b < n; ++b) {
          dst[b].d[0] = src[b].d[0];
          dst[b].d[1] = src[b].d[1];
          for (int e = 0; e < 32; ++e) {
            const int h = e / 16, k = (e % 16) / 4, j = e % 4;  // e = 16h + 4k + j
            const int q3 = ((src[b].qs[4 * h + j] >> (2 * k)) & 3) |
                           (((src[b].qh[j] >> (4 * h + k)) & 1) << 2);
            const int q6 = q3 + 28;
            dst[b].qs[e % 16] |= uint8_t((q6 & 15) << (4 * h));
            dst[b].qh[4 * h + j] |= uint8_t((q6 >> 4) << (2 * k));
          }
        }
      });
}

TEST(Matmul, IQ4_NL) {
  if (!takes(WType::IQ4_NL))
    GTEST_SKIP() << isa_name() << " does not take IQ4_NL (the loader makes Q8_0)";
  check_type(WType::IQ4_NL);
}

// IQ4_NL's dot is Q8_0's on the looked-up levels (the same exact int sums, the same fold): the
// matmul of a matrix equals, bit for bit, that of its Q8_0 blocks of the same d with the levels
// as quants, written here from GGUF's level table.
TEST(Matmul, Iq4NlIsQ8_0OfItsLevels) {
  if (!takes(WType::IQ4_NL)) GTEST_SKIP() << isa_name() << " does not take IQ4_NL";
  expect_same_matmul<BlockIQ4_NL, BlockQ8_0>(
      WType::IQ4_NL, WType::Q8_0, 77, [](const BlockIQ4_NL* src, BlockQ8_0* dst, int64_t n) {
        constexpr int8_t kGgufLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
        for (int64_t b = 0; b < n; ++b) {
          dst[b].d = src[b].d;
          for (int j = 0; j < 16; ++j) {
            dst[b].qs[j] = kGgufLevels[src[b].qs[j] & 15];
            dst[b].qs[j + 16] = kGgufLevels[src[b].qs[j] >> 4];
          }
        }
      });
}

TEST(Matmul, RowTileAndSizes) {
  EXPECT_GE(row_tile(), 1);
  for (WType t : kTypes) {
    EXPECT_GE(packed_size(t, 100, 1024), row_bytes(t, 1024) * 100) << type_name(t);
    EXPECT_GE(act_row_size(t, 1024), size_t(1024 / kQBlock) * 34) << type_name(t);
  }
  EXPECT_EQ(row_bytes(WType::Q8_0, 64), 68u);
  EXPECT_EQ(row_bytes(WType::Q4_0, 64), 36u);
  EXPECT_EQ(row_bytes(WType::Q4_M, 64), 40u);
  EXPECT_EQ(row_bytes(WType::Q6_H, 64), 56u);
  EXPECT_EQ(row_bytes(WType::Q5_M, 64), 48u);
  EXPECT_EQ(row_bytes(WType::IQ4_NL, 64), 36u);
  EXPECT_EQ(row_bytes(WType::Q3_H, 64), 32u);
  for (WType t : kTypes) EXPECT_TRUE(takes(t)) << type_name(t);
  EXPECT_TRUE(scalar::takes(WType::Q6_H) && scalar::takes(WType::Q5_M) &&
              scalar::takes(WType::IQ4_NL) && scalar::takes(WType::Q3_H));
  EXPECT_EQ(takes(WType::Q6_H), takes(WType::Q5_M));
  EXPECT_EQ(row_bytes(WType::F16, 64), 128u);
  EXPECT_EQ(row_bytes(WType::F32, 64), 256u);
}

// Zero activations (d = 0) and all-equal weights must not produce NaN or garbage.
TEST(Matmul, ZeroActivation) {
  std::mt19937 rng(7);
  for (WType t : kTypes) {
    const int64_t rows = 19, cols = 64;
    const auto w = random_weights(rng, t, rows, cols);
    std::vector<float> x(cols, 0.0f);
    const Prepared p = prepare(kIsa, t, w, rows, cols, x, 1);
    std::vector<float> out(rows, 1.0f);
    matmul(t, p.packed.data(), rows, cols, 0, rows, p.act.data(), 1, out.data(), rows);
    for (float v : out) EXPECT_EQ(v, 0.0f) << type_name(t);
  }
}

}  // namespace
}  // namespace krafla::kernels
