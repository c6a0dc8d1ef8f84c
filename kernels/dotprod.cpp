// Armv8.2-A dot product kernels: the NEON table of arm_neon_table.h with an sdot block dot on
// the dword-lane tiles. vdotq_laneq_s32 multiplies each row's 4 quants (one int32 lane of the
// weight vector) with activation group k of a 16-byte activation vector, so one instruction
// serves 4 rows and the lane ends the block holding its row's exact int32 sum.
//  * Q8_0: groups 0-3 against the first 16 activation bytes, 4-7 against the second.
//  * Q4_0 (packed signed, n xor 8): v << 4 is 16*(low nibble - 8) and v & 0xf0 is
//    16*(high nibble - 8), both exact int8; the block sum is 16x and shifts back exactly.
//  * Q6_H, Q5_M, IQ4_NL: arm_neon_table.h's SdotTopBits (values rebuilt signed, one sdot per
//    vector).
#include "kernels/arm_neon_table.h"

namespace krafla::kernels {
namespace arm {
namespace {

struct SdotDot : SdotTopBits {
  static constexpr int kDecodeTiles = 4;

  // Quant vector k of each tile (k = 0..3), against activation group k of each half.
  template <bool kQ4, int R, int T, int K>
  static void step(const uint8_t* const* wb, const int8x16_t* al, const int8x16_t* ah,
                   int32x4_t (&isum)[R][T]) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const int8_t* q = reinterpret_cast<const int8_t*>(wb[r] + L::kQuants);
      int8x16_t w0, w1;
      if constexpr (kQ4) {
        nibbles_x16(vld1q_s8(q + 16 * K), w0, w1);
      } else {
        w0 = vld1q_s8(q + 16 * K);
        w1 = vld1q_s8(q + 16 * (K + 4));
      }
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        isum[r][t] = vdotq_laneq_s32(isum[r][t], w0, al[t], K);
        isum[r][t] = vdotq_laneq_s32(isum[r][t], w1, ah[t], K);
      }
    }
  }

  template <bool kQ4, int R, int T>
  static void block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                    int32x4_t (&isum)[R][T]) {
    int8x16_t al[T], ah[T];
    halves(a, b, al, ah);
    zero(isum);
    step<kQ4, R, T, 0>(wb, al, ah, isum);
    step<kQ4, R, T, 1>(wb, al, ah, isum);
    step<kQ4, R, T, 2>(wb, al, ah, isum);
    step<kQ4, R, T, 3>(wb, al, ah, isum);
    unscale_x16<kQ4>(isum);
  }
};

}  // namespace
}  // namespace arm

KRAFLA_ARM_ENTRIES("dotprod", false, arm::SdotDot)

}  // namespace krafla::kernels
