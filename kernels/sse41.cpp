// SSE4.1 (+SSSE3, POPCNT) kernels: the SSE-class table of sse_table.h with SSE4.1 blends and
// the SSSE3 pmaddubsw/pmaddwd block dot of int_dot.h (the AVX2 one, on 4-row tiles): Q4_0
// nibbles unsigned with corr = 8*sum(a), Q8_0 signed with its sign moved to the activation,
// IQ4_NL's nibbles looked up (pshufb) as signed levels, then as Q8_0.
#include <tmmintrin.h>

#include "kernels/int_dot.h"
#include "kernels/sse_table.h"

namespace krafla::kernels {
namespace {

using tiled::ActBlock;

// The integer vector trait of int_dot.h: xmm, 4 rows x 4 quant bytes.
struct XmmInt {
  using I = __m128i;
  static constexpr int kTile = sse::kTile;
  static I load(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const I*>(p)); }
  static I bcast4(const int8_t* p) { return sse::bcast4(p); }
  static I set1(int32_t x) { return _mm_set1_epi32(x); }
  static I zero() { return _mm_setzero_si128(); }
  static void nibbles(I v, I& lo, I& hi) {
    const I m0f = _mm_set1_epi8(0x0f);
    lo = _mm_and_si128(v, m0f);
    hi = _mm_and_si128(_mm_srli_epi16(v, 4), m0f);
  }
  static I add16(I a, I b) { return _mm_add_epi16(a, b); }
  static I add32(I a, I b) { return _mm_add_epi32(a, b); }
  static I sub32(I a, I b) { return _mm_sub_epi32(a, b); }
  static I maddubs(I u, I s) { return _mm_maddubs_epi16(u, s); }
  static I madd1(I x) { return _mm_madd_epi16(x, _mm_set1_epi16(1)); }
  static I abs8(I x) { return _mm_abs_epi8(x); }
  static I sign8(I a, I b) { return _mm_sign_epi8(a, b); }
  static I table(const uint8_t* v16) { return load(v16); }
  static I lut(I table, I idx) { return _mm_shuffle_epi8(table, idx); }
  static I shl4(I v) { return _mm_slli_epi32(v, 4); }
  static I shr2(I v) { return _mm_srli_epi32(v, 2); }
  static I shr1(I v) { return _mm_srli_epi32(v, 1); }
  template <int N>
  static I srl32(I v) {
    return _mm_srli_epi32(v, N);
  }
  template <int N>
  static I sll32(I v) {
    return _mm_slli_epi32(v, N);
  }
  static I three(I lo, I top) {  // (lo & 0x03) | (top & 0x04)
    return _mm_or_si128(_mm_and_si128(lo, _mm_set1_epi8(0x03)),
                        _mm_and_si128(top, _mm_set1_epi8(0x04)));
  }
  static I five(I nib, I top) {  // nib | (top & 0x10)
    return _mm_or_si128(nib, _mm_and_si128(top, _mm_set1_epi8(0x10)));
  }
  static I six(I nib, I top) {  // nib | (top & 0x30)
    return _mm_or_si128(nib, _mm_and_si128(top, _mm_set1_epi8(0x30)));
  }
};

struct Sse41Dot {
  // Decode prefetch distance in (tile, block) records: +18-45% Q8_0/Q4_0 decode on Zen 5.
  static constexpr size_t kPrefetchRecs = 8;

  template <bool kQ4, int R, int T>
  static void block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                    __m128i (&ia)[R][T]) {
    tiled::maddubs_block<XmmInt, kQ4, R, T>(wb, a, b, ia);
  }
  static constexpr bool kTopBits = true;
  template <int h, int R, int T>
  static void block6(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     __m128i (&ia)[R][T]) {
    tiled::maddubs_block6<XmmInt, h, R, T>(wb, a, b, ia);
  }
  template <int R, int T>
  static void block5(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     __m128i (&ia)[R][T]) {
    tiled::maddubs_block5<XmmInt, R, T>(wb, a, b, ia);
  }
  static constexpr bool kIq4 = true;
  template <int R, int T>
  static void block_iq4(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                        __m128i (&ia)[R][T]) {
    tiled::maddubs_block_iq4<XmmInt, R, T>(wb, a, b, ia);
  }
  static constexpr bool kQ3 = true;
  template <int h, int R, int T>
  static void block3(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     __m128i (&ia)[R][T]) {
    tiled::maddubs_block3<XmmInt, h, R, T>(wb, a, b, ia);
  }
};

}  // namespace

KRAFLA_TILED_ISA_ENTRIES("sse41", sse::Sse<Sse41Dot>)

}  // namespace krafla::kernels
