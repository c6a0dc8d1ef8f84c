// The AVX2-class kernel table on the row-tiled layout of tiled.h with 8-row tiles, shared by
// avx2.cpp and avxvnni.cpp. A ymm holds 8 rows x 4 quant bytes and a broadcast 4-byte
// activation group serves all 8 rows. The two differ only in the u8 x s8 block dot of
// int_dot.h (see there for the int16 bounds and corrections):
//  * AVX2 (VNNI = false): maddubs_block, vpmaddubsw + vpmaddwd; Q8_0 packed as it is, corr =
//    8*sum(a) for Q4_0 only;
//  * AVX-VNNI (VNNI = true): vnni_block, one vpdpbusd per group; Q8_0 packed xor 0x80 = w + 128,
//    corr = 128*sum(a) for it.
//  * IQ4_NL: Q4_0's nibbles looked up as levels (vpshufb), then as Q8_0 in either dot.
//  * acc = fma(float(isum_b), d_w*d_a, acc) per block in the row's lane, whatever the register
//    tile (4 tiles x 1 token, 2 x 2, 1 x 3-4): bitwise batch/range independence.
// Include from exactly one TU (only one kernels/<isa>.cpp is compiled in a build): it defines
// the table entries common to both, and the TU adds the rest with KRAFLA_AVX2_CLASS_ENTRIES.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/common.h"
#include "kernels/int_dot.h"
#include "kernels/kernels.h"
#include "kernels/tiled.h"
#include "kernels/vec_math.h"

namespace krafla::kernels {
namespace avx2 {
namespace {

constexpr int kTile = 8;
using L = tiled::Layout<kTile>;
using tiled::ActBlock;
using tiled::imin;

inline __m256i lane_mask(int64_t n) {  // lanes < n all-ones
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(imin(n, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline __m256i bcast4(const int8_t* p) {
  int32_t q;
  std::memcpy(&q, p, 4);
  return _mm256_set1_epi32(q);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256 load_n(const float* p, int64_t n) {
  return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lane_mask(n));
}
inline void store_n(float* p, __m256 v, int64_t n) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
  } else {
    _mm256_maskstore_ps(p, lane_mask(n), v);
  }
}

// dot_rows8 below reads a block's keys in a scattered order, which the hardware prefetcher does
// not follow: with kPf each block starts by prefetching 8 keys' bytes from 2 KiB on (bm_attend
// F32, 1B shape: 8-15% faster). Inlined by force, as in avx512vnni.cpp.
template <bool kPf>
[[gnu::always_inline]] inline void prefetch_keys8(const float* kb, int64_t d) {
  if constexpr (kPf) {
    const char* p = reinterpret_cast<const char*>(kb) + 2048;
    for (int64_t l = 0; l < 8 * d * 4; l += 64) __builtin_prefetch(p + l);
  }
}

// dot_rows_f32: 8 keys' vec::dot_lanes summed together by shuffles (7 shuffle+add steps instead of
// 8 reductions), each sum in hsum's order (upper 128 + lower, lanes 2,3 + 0,1, then 1 + 0), so
// bit for bit dot_f32's. The shuffles leave slot s's sum in output lane s / 2 + 4 * (s % 2),
// so key j goes into slot 2 * (j % 4) + j / 4.
template <class V, bool kPf>
void dot_rows8(const float* q, const float* k, int64_t n, int64_t d, float scale, float* out) {
  const __m256 sc = _mm256_set1_ps(scale);
  const auto key = [](int s) { return s / 2 + 4 * (s % 2); };
  int64_t j0 = 0;
  for (; j0 + 8 <= n; j0 += 8) {
    const float* kb = k + j0 * d;
    prefetch_keys8<kPf>(kb, d);
    __m256 a[4], b[2];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {  // 128-bit lanes: x0+x1 | y0+y1
      const __m256 x = vec::dot_lanes<V>(q, kb + key(2 * i) * d, d);
      const __m256 y = vec::dot_lanes<V>(q, kb + key(2 * i + 1) * d, d);
      a[i] = _mm256_add_ps(_mm256_permute2f128_ps(x, y, 0x20), _mm256_permute2f128_ps(x, y, 0x31));
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i) {  // per 128-bit lane: s0+s2, s1+s3 of two slots
      const __m256d x = _mm256_castps_pd(a[2 * i]), y = _mm256_castps_pd(a[2 * i + 1]);
      b[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)),
                           _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
    }
    const __m256 sum = _mm256_add_ps(_mm256_shuffle_ps(b[0], b[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm256_shuffle_ps(b[0], b[1], _MM_SHUFFLE(3, 1, 3, 1)));
    _mm256_storeu_ps(out + j0, _mm256_mul_ps(sum, sc));
  }
  for (; j0 < n; ++j0) out[j0] = hsum(vec::dot_lanes<V>(q, k + j0 * d, d)) * scale;
}

// The vector traits of vec_math.h and delta_step.h: ymm registers, masked tails, FMA.
struct Ymm {
  using F = __m256;
  static int64_t width() { return 8; }
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F load_half(const uint16_t* p) {  // F16C: exact
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(float* p, F x) { _mm256_storeu_ps(p, x); }
  static F load_n(const float* p, int64_t n) { return avx2::load_n(p, n); }
  static F load_n(const float* p, int64_t n, float fill) {
    if (n >= 8) return _mm256_loadu_ps(p);
    const __m256i m = lane_mask(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void store_n(float* p, F x, int64_t n) { avx2::store_n(p, x, n); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F neg(F a) { return _mm256_sub_ps(_mm256_setzero_ps(), a); }
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fnma(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
  static F mul_sub(F a, F b, F c, F d) { return _mm256_fmsub_ps(a, b, _mm256_mul_ps(c, d)); }
  static float hsum(F x) { return avx2::hsum(x); }
  static float hmax(F x) { return avx2::hmax(x); }
  static F max_n(F acc, F x, int64_t n) {
    if (n >= 8) return _mm256_max_ps(acc, x);
    return _mm256_max_ps(acc, _mm256_blendv_ps(acc, x, _mm256_castsi256_ps(lane_mask(n))));
  }
  static F add_n(F acc, F x, int64_t n) {
    if (n >= 8) return _mm256_add_ps(acc, x);
    return _mm256_add_ps(acc, _mm256_and_ps(_mm256_castsi256_ps(lane_mask(n)), x));
  }
  static F round(F x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // Attention's row loops (vec_math.h's hooks): dot_rows8 above; 2 query rows per v-row load.
  static void dot_rows(const float* q, int64_t g, const float* k, int64_t n, int64_t d, float scale,
                       float* out, int64_t ld_out) {
    // the first query row reads the keys from memory, the others from cache
    for (int64_t i = 0; i < g; ++i)
      (i == 0 ? dot_rows8<Ymm, true> : dot_rows8<Ymm, false>)(q + i * d, k, n, d, scale,
                                                              out + i * ld_out);
  }
  // F16 keys through buf, with no prefetch (the rows were just converted into L1).
  static bool dot_rows_half(const float* q, int64_t g, const uint16_t* k, int64_t n, int64_t d,
                            float scale, float* out, int64_t ld_out, float* buf) {
    f16_to_f32(k, buf, n * d);
    for (int64_t i = 0; i < g; ++i)
      dot_rows8<Ymm, false>(q + i * d, buf, n, d, scale, out + i * ld_out);
    return true;
  }
  static void pin(F& a, F& b, F& c, F& d) { __asm__("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d)); }
  static void axpy_rows(const float* w, int64_t ld_w, int64_t g, const float* v, int64_t n,
                        int64_t d, float* out) {
    vec::axpy_rows_grouped<Ymm, 2>(w, ld_w, g, v, n, d, out);
  }
  // The same straight from an F16 cache's halves where each v row is widened once (up to 2
  // query rows, whole 32-float chunks); with more query rows the buffer of widened rows wins.
  static bool axpy_rows_half(const float* w, int64_t ld_w, int64_t g, const uint16_t* v, int64_t n,
                             int64_t d, float* out) {
    if (g > 2 || d % 32 != 0) return false;
    vec::axpy_rows_grouped<Ymm, 2>(w, ld_w, g, v, n, d, out);
    return true;
  }
  static constexpr float kExpLo = -87.0f, kExpHi = 88.0f;
  // 2^n built in the exponent field; 0 below kExpLo, where 2^n would leave the normal range.
  static F exp_scale(F y, F n, F x) {
    const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(kExpLo), _CMP_LT_OQ);
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(tiny, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
  }
};

// ---- matmul ----

// The integer vector trait of int_dot.h: ymm, 8 rows x 4 quant bytes.
struct YmmInt {
  using I = __m256i;
  static constexpr int kTile = avx2::kTile;
  static I load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const I*>(p)); }
  static I bcast4(const int8_t* p) { return avx2::bcast4(p); }
  static I set1(int32_t x) { return _mm256_set1_epi32(x); }
  static I zero() { return _mm256_setzero_si256(); }
  static void nibbles(I v, I& lo, I& hi) {
    const I m0f = _mm256_set1_epi8(0x0f);
    lo = _mm256_and_si256(v, m0f);
    hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f);
  }
  static I add16(I a, I b) { return _mm256_add_epi16(a, b); }
  static I add32(I a, I b) { return _mm256_add_epi32(a, b); }
  static I sub32(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I maddubs(I u, I s) { return _mm256_maddubs_epi16(u, s); }
  static I madd1(I x) { return _mm256_madd_epi16(x, _mm256_set1_epi16(1)); }
  static I abs8(I x) { return _mm256_abs_epi8(x); }
  static I sign8(I a, I b) { return _mm256_sign_epi8(a, b); }
  static I table(const uint8_t* v16) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v16)));
  }
  static I lut(I table, I idx) { return _mm256_shuffle_epi8(table, idx); }
  static I shl4(I v) { return _mm256_slli_epi32(v, 4); }
  static I shr2(I v) { return _mm256_srli_epi32(v, 2); }
  static I shr1(I v) { return _mm256_srli_epi32(v, 1); }
  template <int N>
  static I srl32(I v) {
    return _mm256_srli_epi32(v, N);
  }
  template <int N>
  static I sll32(I v) {
    return _mm256_slli_epi32(v, N);
  }
  static I three(I lo, I top) {  // (lo & 0x03) | (top & 0x04)
    return _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi8(0x03)),
                           _mm256_and_si256(top, _mm256_set1_epi8(0x04)));
  }
  static I five(I nib, I top) {  // nib | (top & 0x10)
    return _mm256_or_si256(nib, _mm256_and_si256(top, _mm256_set1_epi8(0x10)));
  }
  static I six(I nib, I top) {  // nib | (top & 0x30)
    return _mm256_or_si256(nib, _mm256_and_si256(top, _mm256_set1_epi8(0x30)));
  }
#if defined(__AVXVNNI__)
  static I dpbusd(I acc, I u, I s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
#endif
};

// The ISA's tile policy for tiled.h's register-tile bodies and driver.
template <bool kVnni>
struct Avx2 : tiled::SmallRegisterTiles<4>, tiled::StreamPrefetch<8> {
  using V = Ymm;
  using I = __m256i;
  static constexpr int kTile = avx2::kTile;
  static __m256 to_f32(__m256i x) { return _mm256_cvtepi32_ps(x); }
  static __m256 load_f16(const uint8_t* p) {
    return Ymm::load_half(reinterpret_cast<const uint16_t*>(p));
  }
  template <bool kQ4, int R, int T>
  static void block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                    __m256i (&ia)[R][T]) {
    if constexpr (kVnni) {
      tiled::vnni_block<YmmInt, kQ4, R, T>(wb, a, b, ia);
    } else {
      tiled::maddubs_block<YmmInt, kQ4, R, T>(wb, a, b, ia);
    }
  }
  static constexpr bool kTopBits = true;
  template <int h, int R, int T>
  static void block6(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     __m256i (&ia)[R][T]) {
    if constexpr (kVnni) {
      tiled::vnni_block6<YmmInt, h, R, T>(wb, a, b, ia);
    } else {
      tiled::maddubs_block6<YmmInt, h, R, T>(wb, a, b, ia);
    }
  }
  template <int R, int T>
  static void block5(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     __m256i (&ia)[R][T]) {
    if constexpr (kVnni) {
      tiled::vnni_block5<YmmInt, R, T>(wb, a, b, ia);
    } else {
      tiled::maddubs_block5<YmmInt, R, T>(wb, a, b, ia);
    }
  }
  static constexpr bool kIq4 = true;
  template <int R, int T>
  static void block_iq4(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                        __m256i (&ia)[R][T]) {
    if constexpr (kVnni) {
      tiled::vnni_block_iq4<YmmInt, R, T>(wb, a, b, ia);
    } else {
      tiled::maddubs_block_iq4<YmmInt, R, T>(wb, a, b, ia);
    }
  }
  static constexpr bool kQ3 = true;
  template <int h, int R, int T>
  static void block3(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     __m256i (&ia)[R][T]) {
    if constexpr (kVnni) {
      tiled::vnni_block3<YmmInt, h, R, T>(wb, a, b, ia);
    } else {
      tiled::maddubs_block3<YmmInt, h, R, T>(wb, a, b, ia);
    }
  }
};

// Q8 activations for the integer dot: corr = c*sum(q) per block, c = 8 for Q4_0/Q4_M weights (their
// nibbles are unsigned) and q8_c for Q8_0 (0 for maddubs' sign trick, 128 for VNNI's w + 128).
void quantize_act_impl(WType t, const float* x, int64_t cols, void* dst, int32_t q8_c) {
  if (copy_float_act(t, x, cols, dst)) return;
  ActBlock* out = static_cast<ActBlock*>(dst);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(x + b * 32 + 8 * j);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[j]));
    }
    const float d = hmax(amax) / 127.0f;
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m256i q[4];
    for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], id));  // RNE
    // packs work per 128-bit lane; the final permute restores element order.
    const __m256i s01 = _mm256_packs_epi32(q[0], q[1]), s23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(s01, s23),
                                                      _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), bytes);
    out[b].d = d;
    const int32_t c = is_q4(t) ? 8 : q8_c;
    if (c != 0) {
      const __m256i s =
          _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
      __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
      h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
      h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
      // Modulo 2^32, as the vector sums: a row with inf or NaN (a broken model) converts to
      // INT_MIN lanes, and a signed multiply would be undefined. Its d is NaN or inf anyway.
      out[b].corr = static_cast<int32_t>(uint32_t(c) * uint32_t(_mm_cvtsi128_si32(h)));
    } else {
      out[b].corr = 0;
    }
  }
  tiled::block_sums(t, out, cols / kQBlock);
}

}  // namespace
}  // namespace avx2

using avx2::hmax;
using avx2::hsum;
using avx2::kTile;
using avx2::L;
using avx2::load_n;
using avx2::store_n;

KRAFLA_TILED_LAYOUT_ENTRIES(L)
KRAFLA_SCALAR_ROW_ENTRIES()

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  if (i < n) {
    uint16_t tmp[8] = {};
    std::memcpy(tmp, x + i, size_t(n - i) * 2);
    store_n(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tmp))), n - i);
  }
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(load_n(x + i, n - i), _MM_FROUND_TO_NEAREST_INT);
    if (n - i >= 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
    } else {
      uint16_t tmp[8];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(tmp), h);
      std::memcpy(y + i, tmp, size_t(n - i) * 2);
    }
  }
}

float dot_f32(const float* a, const float* b, int64_t n) {
  return avx2::hsum(vec::dot_lanes<avx2::Ymm>(a, b, n));
}

KRAFLA_VEC_MATH_ENTRIES(avx2::Ymm)

}  // namespace krafla::kernels

// The entries where avx2.cpp and avxvnni.cpp differ: the ISA's name and its block dot (VNNI:
// Q8_0 weights packed xor 0x80, corr = 128*sum(a) for them).
#define KRAFLA_AVX2_CLASS_ENTRIES(NAME, VNNI)                                             \
  KRAFLA_TILED_ISA_ENTRIES(NAME, avx2::Avx2<VNNI>)                                        \
  void pack(WType t, const void* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1, \
            void* dst) {                                                                  \
    L::pack(t, src, rows, cols, r0, r1, VNNI ? 0x80 : 0, dst);                            \
  }                                                                                       \
  void quantize_act(WType t, const float* x, int64_t cols, void* dst) {                   \
    avx2::quantize_act_impl(t, x, cols, dst, VNNI ? 128 : 0);                             \
  }
