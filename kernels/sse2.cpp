// SSE2 kernels (the x86-64 baseline): the SSE-class table of sse_table.h with a pmaddwd block
// dot. Without pmaddubsw every product goes through int16, and the weights are widened in a
// way that keeps one int32 lane per row (no horizontal adds):
//  * a tile vector holds 4 rows x bytes (b0 b1 b2 b3) of one 4-element group. Within each
//    16-bit lane, the even bytes (b0, b2) and the odd bytes (b1, b3) are split with shifts
//    (arithmetic for Q8_0's signed bytes, masks for Q4_0's nibbles), so pmaddwd against the
//    activation pairs (a0, a2) and (a1, a3) broadcast in every dword gives each row's
//    a0*b0 + a2*b2 + a1*b1 + a3*b3 in its own lane.
//  * Q4_0: nibbles stay unsigned 0..15, dot(n, a) = dot(w, a) + 8*sum(a): the lane starts at
//    -corr. Q8_0: corr = 0. Sums stay far inside int32 (|dot| <= 32*128*127).
#include "kernels/sse_table.h"

namespace krafla::kernels {
namespace {

using tiled::ActBlock;

// 8 activations at p as int16 in the order (a0 a2 a1 a3 a4 a6 a5 a7): dword 2h holds the
// even pair and dword 2h+1 the odd pair of group h.
inline __m128i act_pairs(const int8_t* p) {
  const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i w = _mm_srai_epi16(_mm_unpacklo_epi8(x, x), 8);
  return _mm_shufflehi_epi16(_mm_shufflelo_epi16(w, 0xd8), 0xd8);
}

template <int h>
inline __m128i even_pair(__m128i pairs) {
  return _mm_shuffle_epi32(pairs, h ? 0xaa : 0x00);
}
template <int h>
inline __m128i odd_pair(__m128i pairs) {
  return _mm_shuffle_epi32(pairs, h ? 0xff : 0x55);
}

struct Sse2Dot {
  // No prefetch: this dot is compute-bound (6-14 GB/s decode on Zen 5) and prefetching
  // measured 3-14% slower.
  static constexpr size_t kPrefetchRecs = 0;

  template <bool kQ4, int R, int T>
  static void block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                    __m128i (&ia)[R][T]) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m128i c = _mm_set1_epi32(-a[t][b].corr);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) ia[r][t] = c;
    }
    if constexpr (kQ4) {
      const __m128i m0f = _mm_set1_epi16(0x000f);
#pragma GCC unroll 2
      for (int q = 0; q < 2; ++q) {  // nibble groups 2q, 2q+1: elements 8q.. and 16+8q..
        __m128i plo[T], phi[T];
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          plo[t] = act_pairs(a[t][b].qs + 8 * q);
          phi[t] = act_pairs(a[t][b].qs + 16 + 8 * q);
        }
        group_q4<0, R, T>(wb, L::kQuants + 16 * (2 * q), m0f, plo, phi, ia);
        group_q4<1, R, T>(wb, L::kQuants + 16 * (2 * q + 1), m0f, plo, phi, ia);
      }
    } else {
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {  // groups 2q, 2q+1: elements 8q..8q+7
        __m128i p[T];
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) p[t] = act_pairs(a[t][b].qs + 8 * q);
        group_q8<0, R, T>(wb, L::kQuants + 16 * (2 * q), p, ia);
        group_q8<1, R, T>(wb, L::kQuants + 16 * (2 * q + 1), p, ia);
      }
    }
  }

  template <int h, int R, int T>
  static void group_q8(const uint8_t* const* wb, size_t off, const __m128i* p,
                       __m128i (&ia)[R][T]) {
    __m128i we[R], wo[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[r] + off));
      we[r] = _mm_srai_epi16(_mm_slli_epi16(v, 8), 8);
      wo[r] = _mm_srai_epi16(v, 8);
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m128i ae = even_pair<h>(p[t]), ao = odd_pair<h>(p[t]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        ia[r][t] = _mm_add_epi32(
            ia[r][t], _mm_add_epi32(_mm_madd_epi16(we[r], ae), _mm_madd_epi16(wo[r], ao)));
    }
  }

  template <int h, int R, int T>
  static void group_q4(const uint8_t* const* wb, size_t off, __m128i m0f, const __m128i* plo,
                       const __m128i* phi, __m128i (&ia)[R][T]) {
    __m128i le[R], lo[R], he[R], ho[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[r] + off));
      le[r] = _mm_and_si128(v, m0f);
      lo[r] = _mm_and_si128(_mm_srli_epi16(v, 8), m0f);
      he[r] = _mm_and_si128(_mm_srli_epi16(v, 4), m0f);
      ho[r] = _mm_srli_epi16(v, 12);
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m128i le_a = even_pair<h>(plo[t]), lo_a = odd_pair<h>(plo[t]);
      const __m128i he_a = even_pair<h>(phi[t]), ho_a = odd_pair<h>(phi[t]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m128i s_lo =
            _mm_add_epi32(_mm_madd_epi16(le[r], le_a), _mm_madd_epi16(lo[r], lo_a));
        const __m128i s_hi =
            _mm_add_epi32(_mm_madd_epi16(he[r], he_a), _mm_madd_epi16(ho[r], ho_a));
        ia[r][t] = _mm_add_epi32(ia[r][t], _mm_add_epi32(s_lo, s_hi));
      }
    }
  }
};

}  // namespace

KRAFLA_TILED_ISA_ENTRIES("sse2", sse::Sse<Sse2Dot>)

}  // namespace krafla::kernels
