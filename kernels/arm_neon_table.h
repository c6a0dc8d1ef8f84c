// The NEON kernel table shared by neon32.cpp (ARMv7-A), neon.cpp (Armv8.0), dotprod.cpp and
// i8mm.cpp, on the row-tiled layout of tiled.h with 4-row tiles (one q register):
//  * F32/F16: a tile column is one vector; fma with the broadcast activation element.
//  * Q8_0/Q4_0/Q4_M records of kTile f16 scales, then the quants in one of two arrangements
//    (then Q4_M's kTile f16 offsets):
//    - dword lanes (tiled.h's, kPairs = false): 16 bytes = 4 rows x 4 consecutive quants, so
//      a broadcast 4-byte activation group serves the 4 rows (sdot by lane, or vmull_s8 into
//      int16 and vpadalq into int32 pairs);
//    - row pairs (kPairs = true, for i8mm's smmla): 16 bytes = 8 consecutive quants of row 2p,
//      then the same 8 of row 2p+1.
//    Q4_0 nibbles are stored in signed form, n xor 8 = (n - 8) as 4-bit two's complement, so a
//    shift (and a mask or arithmetic shift) gives the signed value: no activation block sums.
//  * Q6_H/Q5_M: tiled.h's records (dword lanes, unsigned nibbles, then the top-bit vectors) in
//    every arrangement; the dots rebuild q and subtract 32 or 16, so again no block sums.
//  * Q3_H: tiled.h's records (dword lanes, bit pairs, top bits); the dots rebuild q - 4.
//  * IQ4_NL: tiled.h's Q4_0 records (dword lanes, unsigned nibbles) in every arrangement; the
//    dots look the nibbles up as signed levels (vqtbl1q_s8, ARMv7 vtbl2_s8): no block sums.
//  * Every ISA's block dot ("Dot" below) produces each (row, token)'s exact int32 block sum in
//    the row's lane; tiled.h's q_kernel then does acc = fma(float(isum), d_w*d_a, acc) per
//    block, whatever the register tile or token grouping: bitwise batch/range independence.
// Include from exactly one TU (only one kernels/<isa>.cpp is compiled in a build): it defines
// the table entries common to the four; the TU adds the rest with KRAFLA_ARM_ENTRIES.
#pragma once
#include <arm_neon.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/common.h"
#include "kernels/kernels.h"
#include "kernels/tiled.h"
#include "kernels/vec_math.h"

namespace krafla::kernels {
namespace arm {
namespace {

constexpr int kTile = 4;
using L = tiled::Layout<kTile>;
using tiled::ActBlock;
using tiled::imin;

// ---- what ARMv7 NEON lacks (horizontal ops, round to nearest, division) ----
#if defined(__aarch64__)
inline float hsum(float32x4_t v) { return vaddvq_f32(v); }
inline float hmax(float32x4_t v) { return vmaxvq_f32(v); }
// [a0+a1, a2+a3, b0+b1, b2+b3]
inline int32x4_t pair_sums(int32x4_t a, int32x4_t b) { return vpaddq_s32(a, b); }
inline float32x4_t round_even(float32x4_t v) { return vrndnq_f32(v); }
inline float32x4_t div4(float32x4_t a, float32x4_t b) { return vdivq_f32(a, b); }
#else
inline float hsum(float32x4_t v) {
  const float32x2_t s = vadd_f32(vget_low_f32(v), vget_high_f32(v));
  return vget_lane_f32(vpadd_f32(s, s), 0);
}
inline float hmax(float32x4_t v) {
  const float32x2_t s = vmax_f32(vget_low_f32(v), vget_high_f32(v));
  return vget_lane_f32(vpmax_f32(s, s), 0);
}
inline int32x4_t pair_sums(int32x4_t a, int32x4_t b) {
  return vcombine_s32(vpadd_s32(vget_low_s32(a), vget_high_s32(a)),
                      vpadd_s32(vget_low_s32(b), vget_high_s32(b)));
}
// Adding and removing 1.5*2^23 rounds to an integer, half to even (NEON's fixed rounding
// mode); exact for |v| < 2^22, which every caller guarantees.
inline float32x4_t round_even(float32x4_t v) {
  const float32x4_t m = vdupq_n_f32(12582912.0f);
  return vsubq_f32(vaddq_f32(v, m), m);
}
// Reciprocal estimate (8 bits) and three Newton steps: ~1 ulp, then one rounding for a*(1/b).
inline float32x4_t div4(float32x4_t a, float32x4_t b) {
  float32x4_t r = vrecpeq_f32(b);
  r = vmulq_f32(r, vrecpsq_f32(b, r));
  r = vmulq_f32(r, vrecpsq_f32(b, r));
  r = vmulq_f32(r, vrecpsq_f32(b, r));
  return vmulq_f32(a, r);
}
#endif

inline float32x4_t load_n(const float* p, int64_t n, float fill = 0.0f) {
  if (n >= 4) return vld1q_f32(p);
  float t[4] = {fill, fill, fill, fill};
  std::memcpy(t, p, size_t(n) * 4);
  return vld1q_f32(t);
}
inline void store_n(float* p, float32x4_t v, int64_t n) {
  if (n >= 4) {
    vst1q_f32(p, v);
  } else {
    float t[4];
    vst1q_f32(t, v);
    std::memcpy(p, t, size_t(n) * 4);
  }
}
inline float32x4_t half4(const void* p) {  // 4 f16 -> 4 f32, exact
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(static_cast<const uint16_t*>(p))));
}
inline int8x8_t dup4(const int8_t* p) {  // a 4-byte activation group, twice
  int32_t q;
  std::memcpy(&q, p, 4);
  return vreinterpret_s8_s32(vdup_n_s32(q));
}
// The signed-dot Q4_0 forms (sdot, smmla; nibbles packed xor 8, i.e. as signed 4-bit
// n - 8): 16 packed bytes -> 16 x the low and 16 x the high signed nibbles, exact int8 ...
inline void nibbles_x16(int8x16_t v, int8x16_t& lo, int8x16_t& hi) {
  lo = vshlq_n_s8(v, 4);
  hi = vandq_s8(v, vdupq_n_s8(-16));
}
// ... and the block's integer sums divided by that 16 again (exact: every product is a
// multiple of 16).
template <bool kQ4, int R, int T>
inline void unscale_x16(int32x4_t (&isum)[R][T]) {
  if constexpr (kQ4) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) isum[r][t] = vshrq_n_s32(isum[r][t], 4);
  }
}

// ---- the types with top bits (Q6_H, Q5_M): tiled.h's dword-lane records, unsigned nibbles ----
// The block dots rebuild each value from its nibble and top bits and make it signed (q - 32,
// q - 16), so, as for Q4_0, no activation block sums (the corr terms block_sums sets for the
// x86 dots' unsigned form are not used).

// f(integral_constant<int, K>) for K = 0..3: quant vector K, with K a constant (lane indices
// and shift counts are immediates).
template <class F>
inline void each_vector(F&& f) {
  f(std::integral_constant<int, 0>{});
  f(std::integral_constant<int, 1>{});
  f(std::integral_constant<int, 2>{});
  f(std::integral_constant<int, 3>{});
}

// Q6_H half H, quant vector K of the record at rec, as signed q - 32 (-32..31): the half's
// nibbles (low for H = 0, high for H = 1) with bits 2K, 2K+1 of top-bit vector H as bits 4-5.
template <int H, int K>
inline int8x16_t q6_quants(const uint8_t* rec) {
  const uint8x16_t v = vld1q_u8(rec + L::kTopQuants + 4 * kTile * K);
  const uint8x16_t top = vld1q_u8(rec + L::kTopQuants + 4 * kTile * (4 + H));
  uint8x16_t t = top;  // K = 2: bits 4-5 already
  if constexpr (K < 2) t = vshlq_n_u8(top, 4 - 2 * K);
  if constexpr (K == 3) t = vshrq_n_u8(top, 2);
  const uint8x16_t nib = H == 0 ? vandq_u8(v, vdupq_n_u8(0x0f)) : vshrq_n_u8(v, 4);
  const uint8x16_t q = vorrq_u8(nib, vandq_u8(t, vdupq_n_u8(0x30)));
  return vreinterpretq_s8_u8(vsubq_u8(q, vdupq_n_u8(32)));
}

// Q5_M quant vector K of the record at rec as signed q - 16 (-16..15): the low nibbles with bit
// K of the top-bit vector as bit 4 (elements 4K..), the high ones with bit 4 + K (16+4K..).
template <int K>
inline void q5_quants(const uint8_t* rec, int8x16_t& lo, int8x16_t& hi) {
  const uint8x16_t v = vld1q_u8(rec + L::kTopQuants + 4 * kTile * K);
  const uint8x16_t top = vld1q_u8(rec + L::kTopQuants + 4 * kTile * 4);
  const uint8x16_t bit4 = vdupq_n_u8(0x10), sixteen = vdupq_n_u8(16);
  uint8x16_t th = top;
  if constexpr (K > 0) th = vshrq_n_u8(top, K);
  const uint8x16_t ql =
      vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0f)), vandq_u8(vshlq_n_u8(top, 4 - K), bit4));
  const uint8x16_t qh = vorrq_u8(vshrq_n_u8(v, 4), vandq_u8(th, bit4));
  lo = vreinterpretq_s8_u8(vsubq_u8(ql, sixteen));
  hi = vreinterpretq_s8_u8(vsubq_u8(qh, sixteen));
}

// Q3_H half H, group K of the record at rec as signed q - 4 (-4..3): bits 2K, 2K+1 of quant
// vector H with bit 4H + K of the top-bit vector as bit 2.
template <int H, int K>
inline int8x16_t q3_quants(const uint8_t* rec) {
  const uint8x16_t v = vld1q_u8(rec + L::kTopQuants + 4 * kTile * H);
  const uint8x16_t top = vld1q_u8(rec + L::kTopQuants + 4 * kTile * 2);
  constexpr int kP = 4 * H + K;  // the top bit's position
  uint8x16_t lo = v, t = top;
  if constexpr (K > 0) lo = vshrq_n_u8(v, 2 * K);
  if constexpr (kP < 2) t = vshlq_n_u8(top, 2 - kP);
  if constexpr (kP > 2) t = vshrq_n_u8(top, kP - 2);
  const uint8x16_t q = vorrq_u8(vandq_u8(lo, vdupq_n_u8(0x03)), vandq_u8(t, vdupq_n_u8(0x04)));
  return vreinterpretq_s8_u8(vsubq_u8(q, vdupq_n_u8(4)));
}

// IQ4_NL quant vector K of the record at rec (Q4_0's layout, unsigned nibbles) as its signed
// levels: lo for the low nibbles (elements 4K..), hi for the high ones (16+4K..).
template <int K>
inline void iq4_quants(const uint8_t* rec, int8x16_t& lo, int8x16_t& hi) {
  const uint8x16_t v = vld1q_u8(rec + L::kQuants + 4 * kTile * K);
  const uint8x16_t nl = vandq_u8(v, vdupq_n_u8(0x0f)), nh = vshrq_n_u8(v, 4);
#if defined(__aarch64__)
  const int8x16_t table = vld1q_s8(kIq4Levels);
  lo = vqtbl1q_s8(table, nl);
  hi = vqtbl1q_s8(table, nh);
#else
  const int8x8x2_t table = {{vld1_s8(kIq4Levels), vld1_s8(kIq4Levels + 8)}};
  const auto look = [&](uint8x16_t n) {
    return vcombine_s8(vtbl2_s8(table, vreinterpret_s8_u8(vget_low_u8(n))),
                       vtbl2_s8(table, vreinterpret_s8_u8(vget_high_u8(n))));
  };
  lo = look(nl);
  hi = look(nh);
#endif
}

#if defined(__ARM_FEATURE_DOTPROD)
// The sdot pieces of dotprod's block dot, and its dots of Q6_H (half H), Q5_M and IQ4_NL on the
// dword lanes, which i8mm shares (its row pairs serve only Q8_0/Q4_0/Q4_M): vector K of each
// tile against activation group K of the half's 16 bytes, one instruction for the tile's 4 rows.
struct SdotTopBits {
  static constexpr bool kTopBits = true;
  template <int H, int R, int T>
  static void block6(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     int32x4_t (&isum)[R][T]) {
    half_block<H, R, T>(wb, a, b, isum, [](auto k, const uint8_t* rec) {
      return q6_quants<H, decltype(k)::value>(rec);
    });
  }
  static constexpr bool kQ3 = true;
  template <int H, int R, int T>
  static void block3(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     int32x4_t (&isum)[R][T]) {
    half_block<H, R, T>(wb, a, b, isum, [](auto k, const uint8_t* rec) {
      return q3_quants<H, decltype(k)::value>(rec);
    });
  }
  template <int R, int T>
  static void block5(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     int32x4_t (&isum)[R][T]) {
    lo_hi_block<R, T>(wb, a, b, isum, [](auto k, const uint8_t* rec, int8x16_t& lo, int8x16_t& hi) {
      q5_quants<decltype(k)::value>(rec, lo, hi);
    });
  }
  static constexpr bool kIq4 = true;
  template <int R, int T>
  static void block_iq4(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                        int32x4_t (&isum)[R][T]) {
    lo_hi_block<R, T>(wb, a, b, isum, [](auto k, const uint8_t* rec, int8x16_t& lo, int8x16_t& hi) {
      iq4_quants<decltype(k)::value>(rec, lo, hi);
    });
  }

 protected:
  // Q6_H, Q3_H half H: make(k, rec) gives vector k of the half of the record at rec as signed
  // values (elements 16H + 4k..).
  template <int H, int R, int T, class Make>
  static void half_block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                         int32x4_t (&isum)[R][T], Make&& make) {
    int8x16_t al[T], ah[T];
    halves(a, b, al, ah);
    zero(isum);
    each_vector([&](auto k) {
      constexpr int K = decltype(k)::value;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const int8x16_t w = make(k, wb[r]);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t)
          isum[r][t] = vdotq_laneq_s32(isum[r][t], w, H ? ah[t] : al[t], K);
      }
    });
  }
  // Q5_M, IQ4_NL: make(k, rec, lo, hi) gives vector k of the record at rec as signed values, its
  // low nibbles' (elements 4k..) and its high nibbles' (16+4k..).
  template <int R, int T, class Make>
  static void lo_hi_block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                          int32x4_t (&isum)[R][T], Make&& make) {
    int8x16_t al[T], ah[T];
    halves(a, b, al, ah);
    zero(isum);
    each_vector([&](auto k) {
      constexpr int K = decltype(k)::value;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        int8x16_t lo, hi;
        make(k, wb[r], lo, hi);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          isum[r][t] = vdotq_laneq_s32(isum[r][t], lo, al[t], K);
          isum[r][t] = vdotq_laneq_s32(isum[r][t], hi, ah[t], K);
        }
      }
    });
  }
  // Token t's activation quants 0..15 and 16..31 of block b.
  template <int T>
  static void halves(const ActBlock* const* a, int64_t b, int8x16_t (&al)[T], int8x16_t (&ah)[T]) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      al[t] = vld1q_s8(a[t][b].qs);
      ah[t] = vld1q_s8(a[t][b].qs + 16);
    }
  }
  template <int R, int T>
  static void zero(int32x4_t (&isum)[R][T]) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) isum[r][t] = vdupq_n_s32(0);
  }
};
#endif

// ---- packing ----

// Offset of quant byte j (of nq per block) of tile row `lane` in the record's quant area.
template <bool kPairs>
constexpr size_t quant_pos(int lane, int j, int nq) {
  if constexpr (kPairs) {
    return size_t(((lane / 2) * (nq / 8) + j / 8) * 16 + (lane % 2) * 8 + j % 8);
  } else {
    return size_t((j / 4) * 16 + lane * 4 + j % 4);
  }
}

template <bool kPairs>
void pack_tiles(WType t, const void* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
                void* dst) {
  if (t == WType::F32 || t == WType::F16 || t == WType::Q6_H || t == WType::Q5_M ||
      t == WType::IQ4_NL || t == WType::Q3_H)
    return L::pack(t, src, rows, cols, r0, r1, 0, dst);
  const bool q4 = is_q4(t), q4m = t == WType::Q4_M;
  const int nq = q4 ? 16 : 32, qs = quants_offset(t);  // quant bytes; their offset in a block
  constexpr int kChunk = kPairs ? 8 : 4;               // consecutive quants kept together
  const uint8_t flip = q4 ? 0x88 : 0x00;
  const size_t src_blk = row_bytes(t, kQBlock), rec = L::rec_bytes(t);
  const size_t rb = row_bytes(t, cols), tb = L::tile_bytes(t, cols);
  for (int64_t i = r0 / kTile; i < L::n_tiles(r1); ++i) {
    uint8_t* tile = static_cast<uint8_t*>(dst) + i * tb;
    std::memset(tile, 0, tb);
    for (int lane = 0; lane < kTile && i * kTile + lane < rows; ++lane) {
      const uint8_t* row = static_cast<const uint8_t*>(src) + (i * kTile + lane) * rb;
      for (int64_t b = 0; b < cols / kQBlock; ++b) {
        const uint8_t* blk = row + b * src_blk;
        uint8_t* out = tile + b * rec;
        std::memcpy(out + 2 * lane, blk, 2);
        if (q4m) std::memcpy(out + L::kQ4Rec + 2 * lane, blk + 2, 2);  // the offsets
        for (int j = 0; j < nq; j += kChunk) {
          uint8_t* q = out + L::kQuants + quant_pos<kPairs>(lane, j, nq);
          for (int k = 0; k < kChunk; ++k) q[k] = blk[qs + j + k] ^ flip;
        }
      }
    }
  }
}

// ---- matmul ----

// Plain NEON block dot on the dword-lane arrangement (neon32, neon): vmull_s8 products of a
// row's 4 quants with the group's activations, widened pairwise into int32 (vpadalq_s16).
//  * Q8_0: a product is at most 128*127 = 16256, so two groups share one int16 (vmlal_s8)
//    before each vpadalq.
//  * Q4_0: signed nibbles (-8..7) times <= 127 is <= 1016: a block's 8 products fit one int16.
//  * Q5_M: 8 products of at most 16*127 = 2032 per int16 lane; Q6_H (a half at a time): 4 of
//    at most 32*127 = 4064. Each fits one int16 for the block.
// Each vmull covers two rows (8 int16 = rows r, r+1 x 4 quants); pair_sums ends the block.
struct MullDot {
  static constexpr int kDecodeTiles = 2;
  template <bool kQ4, int R, int T>
  static void block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                    int32x4_t (&isum)[R][T]) {
    if constexpr (kQ4) {
      nibble_block<R, T>(a, b, isum, [&](auto k, int r, int8x16_t& lo, int8x16_t& hi) {
        const int8x16_t v = vld1q_s8(reinterpret_cast<const int8_t*>(wb[r] + L::kQuants) +
                                     4 * kTile * decltype(k)::value);
        lo = vshrq_n_s8(vshlq_n_s8(v, 4), 4);  // elements 4k..4k+3
        hi = vshrq_n_s8(v, 4);                 // elements 16+4k..
      });
      return;
    }
    int32x4_t lo[R][T], hi[R][T];  // rows 0-1 and rows 2-3, two partial sums per row
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) lo[r][t] = hi[r][t] = vdupq_n_s32(0);
#pragma GCC unroll 4
    for (int g = 0; g < 8; g += 2) {
      int8x16_t w0[R], w1[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        w0[r] = vld1q_s8(reinterpret_cast<const int8_t*>(wb[r] + L::kQuants + 16 * g));
        w1[r] = vld1q_s8(reinterpret_cast<const int8_t*>(wb[r] + L::kQuants + 16 * g + 16));
      }
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const int8x8_t a0 = dup4(a[t][b].qs + 4 * g), a1 = dup4(a[t][b].qs + 4 * g + 4);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const int16x8_t pl = vmlal_s8(vmull_s8(vget_low_s8(w0[r]), a0), vget_low_s8(w1[r]), a1);
          const int16x8_t ph = vmlal_s8(vmull_s8(vget_high_s8(w0[r]), a0), vget_high_s8(w1[r]), a1);
          lo[r][t] = vpadalq_s16(lo[r][t], pl);
          hi[r][t] = vpadalq_s16(hi[r][t], ph);
        }
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) isum[r][t] = pair_sums(lo[r][t], hi[r][t]);
  }

  static constexpr bool kTopBits = true;
  template <int H, int R, int T>
  static void block6(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     int32x4_t (&isum)[R][T]) {
    half_block<H, R, T>(a, b, isum,
                        [&](auto k, int r) { return q6_quants<H, decltype(k)::value>(wb[r]); });
  }
  // Q3_H half H: 4 products of at most 4*128 = 512 per int16 lane.
  static constexpr bool kQ3 = true;
  template <int H, int R, int T>
  static void block3(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     int32x4_t (&isum)[R][T]) {
    half_block<H, R, T>(a, b, isum,
                        [&](auto k, int r) { return q3_quants<H, decltype(k)::value>(wb[r]); });
  }
  template <int R, int T>
  static void block5(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     int32x4_t (&isum)[R][T]) {
    nibble_block<R, T>(a, b, isum, [&](auto k, int r, int8x16_t& lo, int8x16_t& hi) {
      q5_quants<decltype(k)::value>(wb[r], lo, hi);
    });
  }
  // IQ4_NL: levels up to 127 in size, so a product is at most 127*127 = 16129 and only a low and
  // a high nibble's product share an int16 (as Q8_0's two groups) before each vpadalq.
  static constexpr bool kIq4 = true;
  template <int R, int T>
  static void block_iq4(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                        int32x4_t (&isum)[R][T]) {
    int32x4_t s01[R][T], s23[R][T];  // rows 0-1 and rows 2-3, two partial sums per row
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) s01[r][t] = s23[r][t] = vdupq_n_s32(0);
    each_vector([&](auto k) {
      constexpr int K = decltype(k)::value;
      int8x16_t lo[R], hi[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) iq4_quants<K>(wb[r], lo[r], hi[r]);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const int8x8_t al = dup4(a[t][b].qs + 4 * K), ah = dup4(a[t][b].qs + 16 + 4 * K);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          s01[r][t] = vpadalq_s16(
              s01[r][t], vmlal_s8(vmull_s8(vget_low_s8(lo[r]), al), vget_low_s8(hi[r]), ah));
          s23[r][t] = vpadalq_s16(
              s23[r][t], vmlal_s8(vmull_s8(vget_high_s8(lo[r]), al), vget_high_s8(hi[r]), ah));
        }
      }
    });
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) isum[r][t] = pair_sums(s01[r][t], s23[r][t]);
  }

 private:
  // Q6_H, Q3_H half H: make(k, r) gives tile r's vector k of the half as signed values, which
  // meet activation group 4H + k.
  template <int H, int R, int T, class Make>
  static void half_block(const ActBlock* const* a, int64_t b, int32x4_t (&isum)[R][T],
                         Make&& make) {
    int16x8_t pl[R][T], ph[R][T];
    zero16(pl, ph);
    each_vector([&](auto k) {
      constexpr int K = decltype(k)::value;
      int8x16_t w[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) w[r] = make(k, r);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const int8x8_t ag = dup4(a[t][b].qs + 16 * H + 4 * K);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          pl[r][t] = vmlal_s8(pl[r][t], vget_low_s8(w[r]), ag);
          ph[r][t] = vmlal_s8(ph[r][t], vget_high_s8(w[r]), ag);
        }
      }
    });
    widen_pairs(pl, ph, isum);
  }
  // Q4_0, Q5_M: make(k, r, lo, hi) gives tile r's vector k as signed values, its low nibbles'
  // (elements 4k..) and its high nibbles' (16+4k..), which meet activation groups k and 4 + k.
  template <int R, int T, class Make>
  static void nibble_block(const ActBlock* const* a, int64_t b, int32x4_t (&isum)[R][T],
                           Make&& make) {
    int16x8_t pl[R][T], ph[R][T];
    zero16(pl, ph);
    each_vector([&](auto k) {
      constexpr int K = decltype(k)::value;
      int8x16_t lo[R], hi[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) make(k, r, lo[r], hi[r]);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const int8x8_t al = dup4(a[t][b].qs + 4 * K), ah = dup4(a[t][b].qs + 16 + 4 * K);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          pl[r][t] = vmlal_s8(pl[r][t], vget_low_s8(lo[r]), al);
          ph[r][t] = vmlal_s8(ph[r][t], vget_high_s8(lo[r]), al);
          pl[r][t] = vmlal_s8(pl[r][t], vget_low_s8(hi[r]), ah);
          ph[r][t] = vmlal_s8(ph[r][t], vget_high_s8(hi[r]), ah);
        }
      }
    });
    widen_pairs(pl, ph, isum);
  }
  template <int R, int T>
  static void zero16(int16x8_t (&pl)[R][T], int16x8_t (&ph)[R][T]) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) pl[r][t] = ph[r][t] = vdupq_n_s16(0);
  }
  // The int16 sums of rows 0-1 (pl) and rows 2-3 (ph) into each row's int32 sum.
  template <int R, int T>
  static void widen_pairs(const int16x8_t (&pl)[R][T], const int16x8_t (&ph)[R][T],
                          int32x4_t (&isum)[R][T]) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t)
        isum[r][t] = pair_sums(vpaddlq_s16(pl[r][t]), vpaddlq_s16(ph[r][t]));
  }
};

// The vector traits of vec_math.h and delta_step.h: q registers, tails padded through memory.
// vfmaq_f32 is fused on AArch64 and on ARMv7 with VFPv4 (the neon32 guard's floor).
struct Qreg {
  using F = float32x4_t;
  static int64_t width() { return 4; }
  static F zero() { return vdupq_n_f32(0.0f); }
  static F set1(float x) { return vdupq_n_f32(x); }
  static F load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, F x) { vst1q_f32(p, x); }
  static F load_n(const float* p, int64_t n, float fill = 0.0f) { return arm::load_n(p, n, fill); }
  static void store_n(float* p, F x, int64_t n) { arm::store_n(p, x, n); }
  static F add(F a, F b) { return vaddq_f32(a, b); }
  static F sub(F a, F b) { return vsubq_f32(a, b); }
  static F mul(F a, F b) { return vmulq_f32(a, b); }
  static F div(F a, F b) { return div4(a, b); }
  static F neg(F a) { return vnegq_f32(a); }
  static F min(F a, F b) { return vminq_f32(a, b); }
  static F max(F a, F b) { return vmaxq_f32(a, b); }
  static F fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  static F fnma(F a, F b, F c) { return vfmsq_f32(c, a, b); }
  static F mul_sub(F a, F b, F c, F d) { return vfmsq_f32(vmulq_f32(a, b), c, d); }
  static float hsum(F x) { return arm::hsum(x); }
  static float hmax(F x) { return arm::hmax(x); }
  static F max_n(F acc, F x, int64_t) { return vmaxq_f32(acc, x); }  // padded tails
  static F add_n(F acc, F x, int64_t) { return vaddq_f32(acc, x); }
  static F round(F x) { return round_even(x); }
  static constexpr float kExpLo = -87.0f, kExpHi = 88.0f;
  // 2^n built in the exponent field; 0 below kExpLo, where 2^n would leave the normal range.
  static F exp_scale(F y, F n, F x) {
    const uint32x4_t tiny = vcltq_f32(x, vdupq_n_f32(kExpLo));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    const float32x4_t v = vmulq_f32(y, vreinterpretq_f32_s32(e));
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(v), tiny));
  }
};

// The ISA's tile policy for tiled.h's register-tile bodies and driver, around the TU's block
// dot (Dot::block; Dot::kDecodeTiles: row tiles per single-token pass).
template <class Dot>
struct Tiled : tiled::SmallRegisterTiles<Dot::kDecodeTiles> {
  using V = Qreg;
  using I = int32x4_t;
  static constexpr int kTile = arm::kTile;
  static float32x4_t to_f32(int32x4_t x) { return vcvtq_f32_s32(x); }
  static float32x4_t load_f16(const uint8_t* p) { return half4(p); }
  // The first line of the record 8 ahead: the hardware prefetcher follows the stream.
  static constexpr int64_t kPrefetchRecs = 8;
  static void prefetch_q(const uint8_t* rec, size_t) { __builtin_prefetch(rec); }
  template <bool kF16>
  static void prefetch_f(const uint8_t* col, int64_t) {
    __builtin_prefetch(col + 512);
  }
  template <bool kQ4, int R, int T>
  static void block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                    int32x4_t (&isum)[R][T]) {
    Dot::template block<kQ4, R, T>(wb, a, b, isum);
  }
  static constexpr bool kTopBits = tiled::kHasTopBits<Dot>;
  template <int h, int R, int T>
  static void block6(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     int32x4_t (&isum)[R][T]) {
    if constexpr (kTopBits) Dot::template block6<h, R, T>(wb, a, b, isum);
  }
  template <int R, int T>
  static void block5(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     int32x4_t (&isum)[R][T]) {
    if constexpr (kTopBits) Dot::template block5<R, T>(wb, a, b, isum);
  }
  static constexpr bool kIq4 = tiled::kHasIq4<Dot>;
  template <int R, int T>
  static void block_iq4(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                        int32x4_t (&isum)[R][T]) {
    if constexpr (kIq4) Dot::template block_iq4<R, T>(wb, a, b, isum);
  }
  static constexpr bool kQ3 = tiled::kHasQ3<Dot>;
  template <int h, int R, int T>
  static void block3(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     int32x4_t (&isum)[R][T]) {
    if constexpr (kQ3) Dot::template block3<h, R, T>(wb, a, b, isum);
  }
};

// One Q8 activation block: d = amax/127 kept as f32, q = round-half-even(x/d), no block sum
// (Q4_0 weights are signed on Arm).
inline void quantize_block(const float* x, ActBlock* out) {
  float32x4_t v[8];
  float32x4_t amax = vdupq_n_f32(0.0f);
  for (int j = 0; j < 8; ++j) {
    v[j] = vld1q_f32(x + 4 * j);
    amax = vmaxq_f32(amax, vabsq_f32(v[j]));
  }
  const float d = hmax(amax) / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int16x8_t s[4];
  for (int j = 0; j < 4; ++j) {
    const int32x4_t q0 = vcvtq_s32_f32(round_even(vmulq_n_f32(v[2 * j], id)));
    const int32x4_t q1 = vcvtq_s32_f32(round_even(vmulq_n_f32(v[2 * j + 1], id)));
    s[j] = vcombine_s16(vqmovn_s32(q0), vqmovn_s32(q1));
  }
  vst1q_s8(out->qs, vcombine_s8(vqmovn_s16(s[0]), vqmovn_s16(s[1])));
  vst1q_s8(out->qs + 16, vcombine_s8(vqmovn_s16(s[2]), vqmovn_s16(s[3])));
  out->d = d;
  out->corr = 0;
}

}  // namespace
}  // namespace arm

// ---- the table entries common to the NEON ISAs ----

KRAFLA_TILED_LAYOUT_ENTRIES(arm::L)

void quantize_act(WType t, const float* x, int64_t cols, void* dst) {
  if (copy_float_act(t, x, cols, dst)) return;
  for (int64_t b = 0; b < cols / kQBlock; ++b)
    arm::quantize_block(x + b * kQBlock, static_cast<tiled::ActBlock*>(dst) + b);
  tiled::block_sums(t, static_cast<tiled::ActBlock*>(dst), cols / kQBlock);
}

KRAFLA_SCALAR_ROW_ENTRIES()

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, arm::half4(x + i));
  if (i < n) {
    uint16_t tmp[4] = {};
    std::memcpy(tmp, x + i, size_t(n - i) * 2);
    arm::store_n(y + i, arm::half4(tmp), n - i);
  }
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 4) {
    const uint16x4_t h = vreinterpret_u16_f16(vcvt_f16_f32(arm::load_n(x + i, n - i)));
    if (n - i >= 4) {
      vst1_u16(y + i, h);
    } else {
      uint16_t tmp[4];
      vst1_u16(tmp, h);
      std::memcpy(y + i, tmp, size_t(n - i) * 2);
    }
  }
}

float dot_f32(const float* a, const float* b, int64_t n) {
  float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
  }
  for (; i < n; i += 4) s0 = vfmaq_f32(s0, arm::load_n(a + i, n - i), arm::load_n(b + i, n - i));
  return arm::hsum(vaddq_f32(s0, s1));
}

KRAFLA_VEC_MATH_ENTRIES(arm::Qreg)

}  // namespace krafla::kernels

// The entries where the NEON ISAs differ: the name, the pack (MMLA: i8mm's row pairs) and the
// block dot policy DOT.
#define KRAFLA_ARM_ENTRIES(NAME, MMLA, DOT)                                               \
  KRAFLA_TILED_ISA_ENTRIES(NAME, arm::Tiled<DOT>)                                         \
  void pack(WType t, const void* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1, \
            void* dst) {                                                                  \
    arm::pack_tiles<MMLA>(t, src, rows, cols, r0, r1, dst);                               \
  }
