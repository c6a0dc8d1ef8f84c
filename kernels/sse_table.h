// The 128-bit (SSE-class) kernel table on the row-tiled layout of tiled.h with 4-row tiles,
// shared by sse2.cpp and sse41.cpp: an xmm holds 4 rows x 4 quant bytes and a broadcast 4-byte
// activation group serves all 4 rows. The two differ only in the integer block dot, which each
// TU supplies as a `Dot` policy (Dot::block fills ia[r][t] with the exact int32 dot of a
// (tile, block) record with a token's block, one lane per row). Everything else is SSE2, with
// SSE4.1 blends where the TU is compiled for them:
//  * no F16C: halves convert in software, exactly (subnormals, inf, NaN quieted the way F16C
//    does, round to nearest even), so scalar and SIMD agree bit for bit;
//  * no FMA: acc += float(isum_b) * (d_w*d_a) per block in the row's lane with separate
//    roundings, whatever the register tile: bitwise batch/range independence;
//  * Q8 activations are tiled::ActBlock with corr = 8*sum(a) for Q4_0/Q4_M (unsigned nibbles)
//    and 0 for Q8_0 and IQ4_NL (both dots take the weights' sign as it is).
// Include from exactly one TU (only one kernels/<isa>.cpp is compiled in a build): it defines
// the table entries common to both; the TU adds KRAFLA_TILED_ISA_ENTRIES with its Dot.
// A Dot also names its decode prefetch distance, kPrefetchRecs (tile records ahead, 0: none).
#pragma once
#include <emmintrin.h>
#if defined(__SSE4_1__)
#include <smmintrin.h>
#endif

#include <cmath>
#include <cstring>

#include "kernels/common.h"
#include "kernels/kernels.h"
#include "kernels/tiled.h"
#include "kernels/vec_math.h"

namespace krafla::kernels {
namespace sse {
namespace {

constexpr int kTile = 4;
using L = tiled::Layout<kTile>;
using tiled::ActBlock;
using tiled::imin;
// F32 decode prefetch distance in bytes of a tile's column stream: +7-22% on Zen 5 at
// 2048x2048 and 5632x2048. F16 decode is bound by the software conversion and gets none
// (prefetching measured -3 to -11%). The quantized distance is the Dot's kPrefetchRecs.
constexpr size_t kPrefetchBytes = 1024;

inline __m128i bcast4(const int8_t* p) {
  int32_t q;
  std::memcpy(&q, p, 4);
  return _mm_set1_epi32(q);
}

// mask ? a : b, per lane (masks are all-ones or all-zeros lanes).
inline __m128i select(__m128i mask, __m128i a, __m128i b) {
#if defined(__SSE4_1__)
  return _mm_blendv_epi8(b, a, mask);
#else
  return _mm_or_si128(_mm_and_si128(mask, a), _mm_andnot_si128(mask, b));
#endif
}

// The first n floats at p (n < 4, even <= 0, allowed), the other lanes `fill`.
inline __m128 load_n(const float* p, int64_t n, float fill = 0.0f) {
  if (n >= 4) return _mm_loadu_ps(p);
  float tmp[4] = {fill, fill, fill, fill};
  if (n > 0) std::memcpy(tmp, p, size_t(n) * 4);
  return _mm_loadu_ps(tmp);
}
inline void store_n(float* p, __m128 v, int64_t n) {
  if (n >= 4) {
    _mm_storeu_ps(p, v);
  } else if (n > 0) {
    float tmp[4];
    _mm_storeu_ps(tmp, v);
    std::memcpy(p, tmp, size_t(n) * 4);
  }
}

// ---- software f16 ----

// 4 halves, each in the high 16 bits of its dword (the low 16 bits zero), to floats. The
// exponent rebias 15 -> 127 is a multiply by 2^112: exact for every finite half, and it
// normalises subnormal halves (their bits are float subnormals; DAZ is off, as by default and
// everywhere in Krafla). Inf/NaN get the all-ones exponent; kQuietNan sets the quiet bit as
// vcvtph2ps does (the matmul does not need it: a NaN weight gives NaN either way).
template <bool kQuietNan>
inline __m128 half4_to_ps(__m128i h_hi) {
  const __m128i sign = _mm_and_si128(h_hi, _mm_set1_epi32(int(0x80000000u)));
  const __m128i em = _mm_srli_epi32(_mm_slli_epi32(h_hi, 1), 4);  // (h & 0x7fff) << 13
  const __m128 f = _mm_mul_ps(_mm_castsi128_ps(em), _mm_set1_ps(0x1p112f));
  const __m128i infnan = _mm_cmpgt_epi32(em, _mm_set1_epi32(0x0f7fffff));
  __m128i bits =
      _mm_or_si128(_mm_castps_si128(f), _mm_and_si128(infnan, _mm_set1_epi32(0x7f800000)));
  if constexpr (kQuietNan) {
    const __m128i nan = _mm_cmpgt_epi32(em, _mm_set1_epi32(0x0f800000));
    bits = _mm_or_si128(bits, _mm_and_si128(nan, _mm_set1_epi32(0x00400000)));
  }
  return _mm_castsi128_ps(_mm_or_si128(bits, sign));
}

// 4 halves at p (8 bytes) to floats.
template <bool kQuietNan>
inline __m128 load_half4(const void* p) {
  const __m128i h = _mm_loadl_epi64(static_cast<const __m128i*>(p));
  return half4_to_ps<kQuietNan>(_mm_unpacklo_epi16(_mm_setzero_si128(), h));
}

// 4 floats to halves, round to nearest even, as f32_to_f16_bits: each dword holds the half's
// bit pattern sign-extended from 16 bits, ready for _mm_packs_epi32.
inline __m128i ps_to_half4(__m128 v) {
  const __m128i u = _mm_castps_si128(v);
  const __m128i sign = _mm_and_si128(u, _mm_set1_epi32(int(0x80000000u)));
  const __m128i f = _mm_xor_si128(u, sign);  // |v| bits
  // Normal halves: rebias the exponent (-112 << 23) and round the 13 dropped mantissa bits to
  // even in the integer domain; a carry may reach the exponent, up to 0x7c00 = inf.
  const __m128i odd = _mm_and_si128(_mm_srli_epi32(f, 13), _mm_set1_epi32(1));
  const __m128i nrm =
      _mm_srli_epi32(_mm_add_epi32(_mm_add_epi32(f, _mm_set1_epi32(int(0xc8000fffu))), odd), 13);
  // |v| < 2^-14 (subnormal halves and zero): adding 0.5 rounds |v| to the 2^-24 grid, to even.
  const __m128i sub =
      _mm_sub_epi32(_mm_castps_si128(_mm_add_ps(_mm_castsi128_ps(f), _mm_set1_ps(0.5f))),
                    _mm_set1_epi32(0x3f000000));
  // |v| >= 2^16: inf, or NaN with the payload's top bits and the quiet bit.
  const __m128i nan = _mm_cmpgt_epi32(f, _mm_set1_epi32(0x7f800000));
  const __m128i payload = _mm_and_si128(_mm_srli_epi32(f, 13), _mm_set1_epi32(0x3ff));
  const __m128i big = _mm_or_si128(
      _mm_set1_epi32(0x7c00), _mm_and_si128(nan, _mm_or_si128(payload, _mm_set1_epi32(0x200))));
  __m128i r = select(_mm_cmpgt_epi32(f, _mm_set1_epi32(0x387fffff)), nrm, sub);
  r = select(_mm_cmpgt_epi32(f, _mm_set1_epi32(0x477fffff)), big, r);
  return _mm_or_si128(r, _mm_srai_epi32(sign, 16));
}

// ---- vector math ----

inline float hsum(__m128 v) {
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_shuffle_ps(v, v, 1));
  return _mm_cvtss_f32(v);
}

inline float hmax(__m128 v) {
  v = _mm_max_ps(v, _mm_movehl_ps(v, v));
  v = _mm_max_ss(v, _mm_shuffle_ps(v, v, 1));
  return _mm_cvtss_f32(v);
}

inline int32_t hsum_epi32(__m128i v) {
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0x4e));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xb1));
  return _mm_cvtsi128_si32(v);
}

// The vector traits of vec_math.h and delta_step.h: xmm registers, tails padded through
// memory (no masked loads before AVX), no FMA: fma is a multiply and an add.
struct Xmm {
  using F = __m128;
  static int64_t width() { return 4; }
  static F zero() { return _mm_setzero_ps(); }
  static F set1(float x) { return _mm_set1_ps(x); }
  static F load(const float* p) { return _mm_loadu_ps(p); }
  static void store(float* p, F x) { _mm_storeu_ps(p, x); }
  static F load_n(const float* p, int64_t n, float fill = 0.0f) { return sse::load_n(p, n, fill); }
  static void store_n(float* p, F x, int64_t n) { sse::store_n(p, x, n); }
  static F add(F a, F b) { return _mm_add_ps(a, b); }
  static F sub(F a, F b) { return _mm_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm_mul_ps(a, b); }
  static F div(F a, F b) { return _mm_div_ps(a, b); }
  static F neg(F a) { return _mm_sub_ps(_mm_setzero_ps(), a); }
  static F min(F a, F b) { return _mm_min_ps(a, b); }
  static F max(F a, F b) { return _mm_max_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
  static F fnma(F a, F b, F c) { return _mm_sub_ps(c, _mm_mul_ps(a, b)); }
  static F mul_sub(F a, F b, F c, F d) { return _mm_sub_ps(_mm_mul_ps(a, b), _mm_mul_ps(c, d)); }
  static float hsum(F x) { return sse::hsum(x); }
  static float hmax(F x) { return sse::hmax(x); }
  static F max_n(F acc, F x, int64_t) { return _mm_max_ps(acc, x); }  // padded tails
  static F add_n(F acc, F x, int64_t) { return _mm_add_ps(acc, x); }
  // SSE2 has no roundps: through int32 (cvtps2dq rounds to nearest even).
  static F round(F x) { return _mm_cvtepi32_ps(_mm_cvtps_epi32(x)); }
  static constexpr float kExpLo = -87.0f, kExpHi = 88.0f;
  // 2^n built in the exponent field; 0 below kExpLo, where 2^n would leave the normal range.
  static F exp_scale(F y, F n, F x) {
    const __m128 tiny = _mm_cmplt_ps(x, _mm_set1_ps(kExpLo));
    const __m128i e = _mm_slli_epi32(_mm_add_epi32(_mm_cvtps_epi32(n), _mm_set1_epi32(127)), 23);
    return _mm_andnot_ps(tiny, _mm_mul_ps(y, _mm_castsi128_ps(e)));
  }
};

// ---- matmul ----

// The ISA's tile policy for tiled.h's register-tile bodies and driver, around the TU's block
// dot (Dot::block, Dot::kPrefetchRecs).
template <class Dot>
struct Sse : tiled::SmallRegisterTiles<4> {
  using V = Xmm;
  using I = __m128i;
  static constexpr int kTile = sse::kTile;
  static __m128 to_f32(__m128i x) { return _mm_cvtepi32_ps(x); }
  static __m128 load_f16(const uint8_t* p) { return load_half4<false>(p); }
  static constexpr int64_t kPrefetchRecs = Dot::kPrefetchRecs;
  static void prefetch_q(const uint8_t* rec, size_t bytes) { tiled::prefetch_lines(rec, bytes); }
  // F32 only, once per cache line of the column stream (see kPrefetchBytes).
  template <bool kF16>
  static void prefetch_f(const uint8_t* col, int64_t c) {
    constexpr int64_t kColsPerLine = 64 / (kTile * 4);
    if constexpr (!kF16) {
      if (c % kColsPerLine == 0)
        _mm_prefetch(reinterpret_cast<const char*>(col + kPrefetchBytes), _MM_HINT_T0);
    }
  }
  template <bool kQ4, int R, int T>
  static void block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                    __m128i (&ia)[R][T]) {
    Dot::template block<kQ4, R, T>(wb, a, b, ia);
  }
  static constexpr bool kTopBits = tiled::kHasTopBits<Dot>;
  template <int h, int R, int T>
  static void block6(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     __m128i (&ia)[R][T]) {
    if constexpr (kTopBits) Dot::template block6<h, R, T>(wb, a, b, ia);
  }
  template <int R, int T>
  static void block5(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     __m128i (&ia)[R][T]) {
    if constexpr (kTopBits) Dot::template block5<R, T>(wb, a, b, ia);
  }
  static constexpr bool kIq4 = tiled::kHasIq4<Dot>;
  template <int R, int T>
  static void block_iq4(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                        __m128i (&ia)[R][T]) {
    if constexpr (kIq4) Dot::template block_iq4<R, T>(wb, a, b, ia);
  }
  static constexpr bool kQ3 = tiled::kHasQ3<Dot>;
  template <int h, int R, int T>
  static void block3(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     __m128i (&ia)[R][T]) {
    if constexpr (kQ3) Dot::template block3<h, R, T>(wb, a, b, ia);
  }
};

// One block of 32 floats to int8 with d = max|x|/127 and q = round-half-even(x / d), as
// scalar::quantize_row_q8_0 computes them (same operations, so the same q). Returns sum(q).
inline int32_t quantize_block(const float* x, int8_t* qs, float* d_out) {
  const __m128 sign = _mm_set1_ps(-0.0f);
  __m128 v[8];
  __m128 amax = _mm_setzero_ps();
  for (int j = 0; j < 8; ++j) {
    v[j] = _mm_loadu_ps(x + 4 * j);
    amax = _mm_max_ps(amax, _mm_andnot_ps(sign, v[j]));
  }
  const float d = hmax(amax) / 127.0f;
  const __m128 id = _mm_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  __m128i q[8];
  for (int j = 0; j < 8; ++j) q[j] = _mm_cvtps_epi32(_mm_mul_ps(v[j], id));  // RNE
  for (int h = 0; h < 2; ++h) {
    const __m128i s0 = _mm_packs_epi32(q[4 * h], q[4 * h + 1]);
    const __m128i s1 = _mm_packs_epi32(q[4 * h + 2], q[4 * h + 3]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16 * h), _mm_packs_epi16(s0, s1));
  }
  *d_out = d;
  __m128i s = _mm_setzero_si128();
  for (int j = 0; j < 8; ++j) s = _mm_add_epi32(s, q[j]);
  return hsum_epi32(s);
}

// 16 int8 at p to 4 x 4 floats (sign-extended through int16).
inline void int8x16_to_ps(__m128i x, __m128 out[4]) {
  const __m128i lo = _mm_srai_epi16(_mm_unpacklo_epi8(x, x), 8);
  const __m128i hi = _mm_srai_epi16(_mm_unpackhi_epi8(x, x), 8);
  out[0] = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpacklo_epi16(lo, lo), 16));
  out[1] = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpackhi_epi16(lo, lo), 16));
  out[2] = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpacklo_epi16(hi, hi), 16));
  out[3] = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpackhi_epi16(hi, hi), 16));
}

}  // namespace
}  // namespace sse

using sse::kTile;
using sse::L;
using sse::load_n;
using sse::store_n;

KRAFLA_TILED_LAYOUT_ENTRIES(L)

void pack(WType t, const void* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1, void* dst) {
  L::pack(t, src, rows, cols, r0, r1, 0, dst);
}

void quantize_act(WType t, const float* x, int64_t cols, void* dst) {
  if (copy_float_act(t, x, cols, dst)) return;
  tiled::ActBlock* out = static_cast<tiled::ActBlock*>(dst);
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const int32_t sum = sse::quantize_block(x + b * kQBlock, out[b].qs, &out[b].d);
    // modulo 2^32: see avx2_table.h (inf or NaN rows convert to INT_MIN lanes)
    out[b].corr = is_q4(t) ? static_cast<int32_t>(8u * uint32_t(sum)) : 0;
  }
  tiled::block_sums(t, out, cols / kQBlock);
}

void quantize_row_q8_0(const float* x, BlockQ8_0* dst, int64_t cols) {
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    float d;
    sse::quantize_block(x + b * kQBlock, dst[b].qs, &d);
    dst[b].d = f32_to_f16_bits(d);
  }
}

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  const __m128i zero = _mm_setzero_si128();
  for (int64_t i = 0; i < n; i += 8) {
    __m128i h;
    if (n - i >= 8) {
      h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    } else {
      uint16_t tmp[8] = {};
      std::memcpy(tmp, x + i, size_t(n - i) * 2);
      h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(tmp));
    }
    store_n(y + i, sse::half4_to_ps<true>(_mm_unpacklo_epi16(zero, h)), n - i);
    if (n - i > 4)
      store_n(y + i + 4, sse::half4_to_ps<true>(_mm_unpackhi_epi16(zero, h)), n - i - 4);
  }
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m128i h = _mm_packs_epi32(sse::ps_to_half4(load_n(x + i, n - i)),
                                      sse::ps_to_half4(load_n(x + i + 4, n - i - 4)));
    if (n - i >= 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
    } else {
      uint16_t tmp[8];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(tmp), h);
      std::memcpy(y + i, tmp, size_t(n - i) * 2);
    }
  }
}

void dequantize_row(WType t, const void* src, float* dst, int64_t cols) {
  switch (t) {
    case WType::F32:
      std::memcpy(dst, src, size_t(cols) * 4);
      return;
    case WType::F16:
      return f16_to_f32(static_cast<const uint16_t*>(src), dst, cols);
    case WType::Q4_M:
    case WType::Q6_H:
    case WType::Q5_M:
    case WType::IQ4_NL:
    case WType::Q3_H:
      return scalar::dequantize_row(t, src, dst, cols);
    case WType::Q8_0:
    case WType::Q4_0:
      break;
  }
  const bool q4 = t == WType::Q4_0;
  const uint8_t* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < cols / kQBlock; ++b, p += q4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0)) {
    uint16_t dh;
    std::memcpy(&dh, p, 2);
    const __m128 d = _mm_set1_ps(f16_bits_to_f32(dh));
    __m128i q[2];
    if (q4) {  // low nibbles are elements 0-15, high nibbles 16-31; value n - 8
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
      const __m128i m0f = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
      q[0] = _mm_sub_epi8(_mm_and_si128(v, m0f), eight);
      q[1] = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m0f), eight);
    } else {
      q[0] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
      q[1] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 18));
    }
    for (int h = 0; h < 2; ++h) {
      __m128 f[4];
      sse::int8x16_to_ps(q[h], f);
      for (int j = 0; j < 4; ++j)
        _mm_storeu_ps(dst + b * kQBlock + 16 * h + 4 * j, _mm_mul_ps(d, f[j]));
    }
  }
}

float dot_f32(const float* a, const float* b, int64_t n) {
  __m128 s0 = _mm_setzero_ps(), s1 = _mm_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 = _mm_add_ps(s0, _mm_mul_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
    s1 = _mm_add_ps(s1, _mm_mul_ps(_mm_loadu_ps(a + i + 4), _mm_loadu_ps(b + i + 4)));
  }
  for (; i < n; i += 4) s0 = _mm_add_ps(s0, _mm_mul_ps(load_n(a + i, n - i), load_n(b + i, n - i)));
  return sse::hsum(_mm_add_ps(s0, s1));
}

KRAFLA_VEC_MATH_ENTRIES(sse::Xmm)

}  // namespace krafla::kernels
