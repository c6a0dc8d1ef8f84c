// Armv8.6 int8 matrix multiply kernels: the NEON table of arm_neon_table.h on row-pair tiles
// (16 bytes = 8 quants of row 2p, then the same 8 of row 2p+1).
//  * Two tokens: smmla (vmmlaq_s32) takes the 8 quants of both tokens and of both rows and adds
//    the 2x2 token x row dot products: [t0.r0, t0.r1, t1.r0, t1.r1]; two row pairs zip into
//    each token's 4-row vector at the end of the block.
//  * One token (decode, and the odd token of a batch): sdot (vdotq_s32) against the token's
//    8 quants duplicated, giving each row's two halves; vpaddq folds them.
//  Both are exact int32 block sums, converted and accumulated by tiled.h's q_kernel in the
//  same way, so a token's outputs have the same bits whatever its partner or the batch size.
//  * Q4_0 (packed signed, n xor 8): v << 4 and v & 0xf0 are 16x the signed low and high
//    nibbles; the block sum shifts back exactly.
//  * Q6_H, Q5_M, IQ4_NL: packed in dword lanes as tiled.h lays them out, and dotprod's sdot dots
//    (arm_neon_table.h's SdotTopBits).
#include "kernels/arm_neon_table.h"

namespace krafla::kernels {
namespace arm {
namespace {

struct MmlaDot : SdotTopBits {
  static constexpr int kDecodeTiles = 2;

  template <bool kQ4, int R, int T>
  static void block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                    int32x4_t (&isum)[R][T]) {
    // w[r][p][j]: rows 2p, 2p+1 of tile r against activation quants 8j..8j+7.
    int8x16_t w[R][2][4];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const int8_t* q = reinterpret_cast<const int8_t*>(wb[r] + L::kQuants);
#pragma GCC unroll 2
      for (int p = 0; p < 2; ++p) {
        if constexpr (kQ4) {
#pragma GCC unroll 2
          for (int c = 0; c < 2; ++c) {
            nibbles_x16(vld1q_s8(q + (p * 2 + c) * 16), w[r][p][c], w[r][p][2 + c]);
          }
        } else {
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) w[r][p][j] = vld1q_s8(q + (p * 4 + j) * 16);
        }
      }
    }
    int t = 0;
#pragma GCC unroll 2
    for (; t + 1 < T; t += 2) {
      int8x16_t av[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j)
        av[j] = vcombine_s8(vld1_s8(a[t][b].qs + 8 * j), vld1_s8(a[t + 1][b].qs + 8 * j));
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        int32x4_t p0 = vdupq_n_s32(0), p1 = vdupq_n_s32(0);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          p0 = vmmlaq_s32(p0, av[j], w[r][0][j]);
          p1 = vmmlaq_s32(p1, av[j], w[r][1][j]);
        }
        const int64x2_t q0 = vreinterpretq_s64_s32(p0), q1 = vreinterpretq_s64_s32(p1);
        isum[r][t] = vreinterpretq_s32_s64(vzip1q_s64(q0, q1));
        isum[r][t + 1] = vreinterpretq_s32_s64(vzip2q_s64(q0, q1));
      }
    }
    if constexpr (T % 2 == 1) {
      int8x16_t ad[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        int64_t q;
        std::memcpy(&q, a[T - 1][b].qs + 8 * j, 8);
        ad[j] = vreinterpretq_s8_s64(vdupq_n_s64(q));
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        int32x4_t s0 = vdupq_n_s32(0), s1 = vdupq_n_s32(0);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          s0 = vdotq_s32(s0, w[r][0][j], ad[j]);
          s1 = vdotq_s32(s1, w[r][1][j], ad[j]);
        }
        isum[r][T - 1] = pair_sums(s0, s1);
      }
    }
    unscale_x16<kQ4>(isum);
  }
};

}  // namespace
}  // namespace arm

KRAFLA_ARM_ENTRIES("i8mm", true, arm::MmlaDot)

}  // namespace krafla::kernels
