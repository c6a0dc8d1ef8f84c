// SSE4.1 (+SSSE3, POPCNT) kernels: the SSE-class table of sse_table.h with SSE4.1 blends and
// the SSSE3 pmaddubsw/pmaddwd block dot of the AVX2 kernels on 4-row tiles:
//  * Q4_0: nibbles are the unsigned operand, dot(n, a) = dot(w, a) + 8*sum(a). A pair is at
//    most 2*15*127 = 3810, so a block's 8 groups sum in int16 (<= 30480) before one pmaddwd.
//  * Q8_0: weights stay signed; the sign moves to the activation, maddubs(|w|, sign(a, w)).
//    A pair is at most 2*128*127 = 32512: fits int16, but two do not, so every group goes
//    through pmaddwd. No correction term (corr = 0).
#include <tmmintrin.h>

#include "kernels/sse_table.h"

namespace krafla::kernels {
namespace {

using sse::bcast4;
using tiled::ActBlock;

struct Sse41Dot {
  // Decode prefetch distance in (tile, block) records: +18-45% Q8_0/Q4_0 decode on Zen 5.
  static constexpr size_t kPrefetchRecs = 8;

  template <bool kQ4, int R, int T>
  static void block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                    __m128i (&ia)[R][T]) {
    const __m128i ones16 = _mm_set1_epi16(1);
    if constexpr (kQ4) {
      const __m128i m0f = _mm_set1_epi8(0x0f);
      __m128i s16[R][T];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) s16[r][t] = _mm_setzero_si128();
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        __m128i lo[R], hi[R];
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m128i v =
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[r] + L::kQuants + 16 * k));
          lo[r] = _mm_and_si128(v, m0f);
          hi[r] = _mm_and_si128(_mm_srli_epi16(v, 4), m0f);
        }
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const __m128i alo = bcast4(a[t][b].qs + 4 * k), ahi = bcast4(a[t][b].qs + 16 + 4 * k);
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) {
            s16[r][t] = _mm_add_epi16(s16[r][t], _mm_maddubs_epi16(lo[r], alo));
            s16[r][t] = _mm_add_epi16(s16[r][t], _mm_maddubs_epi16(hi[r], ahi));
          }
        }
      }
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m128i c = _mm_set1_epi32(a[t][b].corr);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) ia[r][t] = _mm_sub_epi32(_mm_madd_epi16(s16[r][t], ones16), c);
      }
    } else {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) ia[r][t] = _mm_setzero_si128();
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        __m128i v[R], av[R];
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          v[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[r] + L::kQuants + 16 * g));
          av[r] = _mm_abs_epi8(v[r]);
        }
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const __m128i ag = bcast4(a[t][b].qs + 4 * g);
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) {
            const __m128i p = _mm_maddubs_epi16(av[r], _mm_sign_epi8(ag, v[r]));
            ia[r][t] = _mm_add_epi32(ia[r][t], _mm_madd_epi16(p, ones16));
          }
        }
      }
    }
  }
};

}  // namespace

const char* isa_name() { return "sse41"; }
const char* missing_cpu_feature() { return cpu_missing_for("sse41"); }

void matmul(WType t, const void* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
            const void* act, int64_t n_tok, float* out, int64_t ld_out) {
  tiled::matmul<sse::Sse<Sse41Dot>>(t, packed, cols, r0, r1, act, n_tok, out, ld_out);
}

}  // namespace krafla::kernels
