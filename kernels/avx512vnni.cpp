// AVX-512 VNNI kernels on the row-tiled layout of tiled.h with 16-row tiles: one zmm holds 16
// rows x 4 quant bytes, and vpdpbusd (u8 x s8 -> int32) takes the weights as its unsigned
// operand and a broadcast 4-byte activation group as the signed one:
//  * Q4_0: the nibbles 0..15 are unsigned as they are: dot(n, a) = dot(w, a) + 8*sum(a).
//  * Q8_0: packed as w xor 0x80 = w + 128: dot(w + 128, a) = dot(w, a) + 128*sum(a).
//  * IQ4_NL: Q4_0's nibbles, each looked up (vpshufb) as its level + 128, so as Q8_0.
//    quantize_act stores c*sum(a) per block and the int32 accumulator starts at -c*sum(a)
//    (int_dot.h's vnni_block).
//  * acc = fma(float(isum_b), d_w*d_a, acc) per block, in the row's lane, whatever the register
//    tile (4 tiles x 1-2 tokens, 2 tiles x 3-4 tokens): bitwise batch/range independence.
// GCC 12's own AVX-512 headers (`__m512 __Y = __Y;`) trip the uninitialized warnings.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/common.h"
#include "kernels/int_dot.h"
#include "kernels/kernels.h"
#include "kernels/tiled.h"
#include "kernels/vec_math.h"

namespace krafla::kernels {
namespace {

constexpr int kTile = 16;
using L = tiled::Layout<kTile>;
using tiled::ActBlock;
using tiled::imin;

inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
}

// dot_rows_f32 for head size D (a multiple of 32, q in registers): 16 keys at a time, their
// vec::dot_lanes summed together by shuffles (15 shuffle+add steps instead of 16 reductions), each
// sum in the order of GCC's _mm512_reduce_add_ps (upper 256 + lower, upper 128 + lower, lanes
// 2,3 + 0,1, then 1 + 0), so bit for bit dot_f32's. The steps, for 16 slots s of lane sums:
//  * fold_halves(x, y): 128-bit lanes x0+x2, x1+x3, y0+y2, y1+y3;
//  * fold_quarters(a, b) of two such: 128-bit lane m holds slot 4i+m's four partial sums;
//  * fold_last(b0..b3): slot s's sum in output lane 4*(s%4) + s/4, so key slot_key(s) goes
//    into slot s.
inline int slot_key(int s) { return 4 * (s % 4) + s / 4; }
inline __m512 fold_halves(__m512 x, __m512 y) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xEE));
}
inline __m512 fold_quarters(__m512 x, __m512 y) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88), _mm512_shuffle_f32x4(x, y, 0xDD));
}
inline __m512 fold_last(__m512 b0, __m512 b1, __m512 b2, __m512 b3) {
  const __m512d c0 =
      _mm512_castps_pd(_mm512_add_ps(_mm512_unpacklo_ps(b0, b1), _mm512_unpackhi_ps(b0, b1)));
  const __m512d c1 =
      _mm512_castps_pd(_mm512_add_ps(_mm512_unpacklo_ps(b2, b3), _mm512_unpackhi_ps(b2, b3)));
  return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(c0, c1)),
                       _mm512_castpd_ps(_mm512_unpackhi_pd(c0, c1)));
}

// The dot loops read a block of 16 keys in slot_key's order, which the hardware prefetcher
// does not follow: each block starts by prefetching its bytes from 2 KiB on (F32 keys of 64:
// the second half of this block and the first of the next, 1.9x faster from memory than no
// prefetch in a microbenchmark; one block ahead, or one key at a time, 1.3-1.5x). Inlined by
// force: GCC splits the early return off into a function of prefetches only, takes that for
// pure and deletes its calls. kPf false: rows just converted into L1. Head size 128: one query
// row 1.8x, four 1.1x faster; 256 (16 KiB blocks) was 5-25% slower, so it has none.
template <bool kPf, class T>
[[gnu::always_inline]] inline void prefetch_keys(const T* kb, int64_t d) {
  if constexpr (kPf) {
    const char* p = reinterpret_cast<const char*>(kb) + 2048;
    for (int64_t l = 0; l < 16 * d * int64_t(sizeof(T)); l += 64) __builtin_prefetch(p + l);
  }
}

// 16 floats of a key row: floats, or halves widened (exactly) by vcvtph2ps.
inline __m512 load_key(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load_key(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

template <int64_t D, class T>
inline __m512 dot_lanes_d(const __m512 (&qv)[D / 16], const T* k) {
  static_assert(D % 32 == 0);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int64_t i = 0; i < D; i += 32) {
    s0 = _mm512_fmadd_ps(qv[i / 16], load_key(k + i), s0);
    s1 = _mm512_fmadd_ps(qv[i / 16 + 1], load_key(k + i + 16), s1);
  }
  return _mm512_add_ps(s0, s1);
}

template <int64_t D, bool kPf, class T>
void dot_rows_d(const float* q, const T* k, int64_t n, float scale, float* out) {
  __m512 qv[D / 16];
  for (int64_t i = 0; i < D / 16; ++i) qv[i] = _mm512_loadu_ps(q + 16 * i);
  const __m512 sc = _mm512_set1_ps(scale);
  int64_t j0 = 0;
  for (; j0 + 16 <= n; j0 += 16) {
    const T* kb = k + j0 * D;
    prefetch_keys<kPf>(kb, D);
    __m512 a[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      a[i] = fold_halves(dot_lanes_d<D>(qv, kb + slot_key(2 * i) * D),
                         dot_lanes_d<D>(qv, kb + slot_key(2 * i + 1) * D));
    const __m512 sum = fold_last(fold_quarters(a[0], a[1]), fold_quarters(a[2], a[3]),
                                 fold_quarters(a[4], a[5]), fold_quarters(a[6], a[7]));
    _mm512_storeu_ps(out + j0, _mm512_mul_ps(sum, sc));
  }
  for (; j0 < n; ++j0) out[j0] = _mm512_reduce_add_ps(dot_lanes_d<D>(qv, k + j0 * D)) * scale;
}

// A key row of 64 loaded into four registers and pinned there, for several query rows (x86
// compilers otherwise fold the load into every fma that uses it).
struct Key64 {
  __m512 k0, k1, k2, k3;
  template <class T>
  explicit Key64(const T* r)
      : k0(load_key(r)), k1(load_key(r + 16)), k2(load_key(r + 32)), k3(load_key(r + 48)) {
    __asm__("" : "+v"(k0), "+v"(k1), "+v"(k2), "+v"(k3));
  }
};

// dot_lanes_d<64> of a key row already in registers.
inline __m512 dot_lanes64(const __m512 (&qv)[4], const Key64& k) {
  const __m512 s0 = _mm512_fmadd_ps(qv[2], k.k2, _mm512_fmadd_ps(qv[0], k.k0, _mm512_setzero_ps()));
  const __m512 s1 = _mm512_fmadd_ps(qv[3], k.k3, _mm512_fmadd_ps(qv[1], k.k1, _mm512_setzero_ps()));
  return _mm512_add_ps(s0, s1);
}

// dot_rows_d<64> for two query rows at once: each key row's four vectors are loaded once for
// both and pinned in registers (1.4 -> 0.86 ns per key and row in a microbenchmark), the sums
// folded four keys at a time; each row's sums as dot_rows_d<64> gives them, bit for bit.
template <bool kPf, class T>
void dot_rows_pair64(const float* q, const T* k, int64_t n, float scale, float* out0, float* out1) {
  __m512 qa[4], qb[4];
  for (int i = 0; i < 4; ++i)
    qa[i] = _mm512_loadu_ps(q + 16 * i), qb[i] = _mm512_loadu_ps(q + 64 + 16 * i);
  const __m512 sc = _mm512_set1_ps(scale);
  int64_t j0 = 0;
  for (; j0 + 16 <= n; j0 += 16) {
    const T* kb = k + j0 * 64;
    prefetch_keys<kPf>(kb, 64);
    __m512 ba[4], bb[4];
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h) {  // slots 4h .. 4h+3
      __m512 xa[4], xb[4];
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) {
        const Key64 kr(kb + slot_key(4 * h + u) * 64);
        xa[u] = dot_lanes64(qa, kr);
        xb[u] = dot_lanes64(qb, kr);
      }
      ba[h] = fold_quarters(fold_halves(xa[0], xa[1]), fold_halves(xa[2], xa[3]));
      bb[h] = fold_quarters(fold_halves(xb[0], xb[1]), fold_halves(xb[2], xb[3]));
    }
    _mm512_storeu_ps(out0 + j0, _mm512_mul_ps(fold_last(ba[0], ba[1], ba[2], ba[3]), sc));
    _mm512_storeu_ps(out1 + j0, _mm512_mul_ps(fold_last(bb[0], bb[1], bb[2], bb[3]), sc));
  }
  for (; j0 < n; ++j0) {
    out0[j0] = _mm512_reduce_add_ps(dot_lanes_d<64>(qa, k + j0 * 64)) * scale;
    out1[j0] = _mm512_reduce_add_ps(dot_lanes_d<64>(qb, k + j0 * 64)) * scale;
  }
}

// dot_rows_d<64> for four query rows at once: each key row is loaded once for all four (the
// queries come from L1), the sums folded four keys at a time; each row's sums as
// dot_rows_d<64> gives them, bit for bit.
inline __m512 dot_lanes64_mem(const float* q, const Key64& k) {
  const __m512 s0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 32), k.k2,
                                    _mm512_fmadd_ps(_mm512_loadu_ps(q), k.k0, _mm512_setzero_ps()));
  const __m512 s1 =
      _mm512_fmadd_ps(_mm512_loadu_ps(q + 48), k.k3,
                      _mm512_fmadd_ps(_mm512_loadu_ps(q + 16), k.k1, _mm512_setzero_ps()));
  return _mm512_add_ps(s0, s1);
}

template <bool kPf, class T>
void dot_rows_quad64(const float* q, const T* k, int64_t n, float scale, float* out,
                     int64_t ld_out) {
  const __m512 sc = _mm512_set1_ps(scale);
  int64_t j0 = 0;
  for (; j0 + 16 <= n; j0 += 16) {
    const T* kb = k + j0 * 64;
    prefetch_keys<kPf>(kb, 64);
    __m512 b[4][4];
    for (int h = 0; h < 4; ++h) {  // slots 4h .. 4h+3
      __m512 x[4][4];
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) {
        const Key64 kr(kb + slot_key(4 * h + u) * 64);
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) x[i][u] = dot_lanes64_mem(q + 64 * i, kr);
      }
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i)
        b[i][h] = fold_quarters(fold_halves(x[i][0], x[i][1]), fold_halves(x[i][2], x[i][3]));
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
      _mm512_storeu_ps(out + i * ld_out + j0,
                       _mm512_mul_ps(fold_last(b[i][0], b[i][1], b[i][2], b[i][3]), sc));
  }
  for (; j0 < n; ++j0)
    for (int i = 0; i < 4; ++i) {
      __m512 qv[4];
      for (int c = 0; c < 4; ++c) qv[c] = _mm512_loadu_ps(q + 64 * i + 16 * c);
      out[i * ld_out + j0] = _mm512_reduce_add_ps(dot_lanes_d<64>(qv, k + j0 * 64)) * scale;
    }
}

// The vector traits of vec_math.h and delta_step.h: zmm registers, opmask tails, FMA.
struct Zmm {
  using F = __m512;
  static int64_t width() { return 16; }
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F load_half(const uint16_t* p) { return load_key(p); }
  static void store(float* p, F x) { _mm512_storeu_ps(p, x); }
  static F load_n(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(tail_mask(n), p); }
  static F load_n(const float* p, int64_t n, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), tail_mask(n), p);
  }
  static void store_n(float* p, F x, int64_t n) { _mm512_mask_storeu_ps(p, tail_mask(n), x); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F neg(F a) { return _mm512_sub_ps(_mm512_setzero_ps(), a); }
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static F mul_sub(F a, F b, F c, F d) { return _mm512_fmsub_ps(a, b, _mm512_mul_ps(c, d)); }
  static float hsum(F x) { return _mm512_reduce_add_ps(x); }
  static float hmax(F x) { return _mm512_reduce_max_ps(x); }
  static F max_n(F acc, F x, int64_t n) { return _mm512_mask_max_ps(acc, tail_mask(n), acc, x); }
  static F add_n(F acc, F x, int64_t n) { return _mm512_mask_add_ps(acc, tail_mask(n), acc, x); }
  static F round(F x) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  // scalef flushes huge negative n to 0 and saturates to inf without integer tricks, so the
  // clamp only has to keep n finite.
  static constexpr float kExpLo = -104.0f, kExpHi = 88.7f;
  static F exp_scale(F y, F n, F) { return _mm512_scalef_ps(y, n); }
  // axpy_rows_f32: up to 4 query rows share each v row's loads (vec_math.h).
  static void pin(F& a, F& b, F& c, F& d) { __asm__("" : "+v"(a), "+v"(b), "+v"(c), "+v"(d)); }
  static void axpy_rows(const float* w, int64_t ld_w, int64_t g, const float* v, int64_t n,
                        int64_t d, float* out) {
    vec::axpy_rows_grouped<Zmm, 4>(w, ld_w, g, v, n, d, out);
  }
  // The same straight from an F16 cache's halves, each v row widened as it loads (whole
  // 64-float chunks): against widening 32 rows into a buffer first, 2x faster from cache and
  // 15-25% from memory with 1-4 query rows, 25-30% with 7 (each row widened twice). Past 8
  // query rows the buffer.
  static bool axpy_rows_half(const float* w, int64_t ld_w, int64_t g, const uint16_t* v, int64_t n,
                             int64_t d, float* out) {
    if (g > 8 || d % 64 != 0) return false;
    vec::axpy_rows_grouped<Zmm, 4>(w, ld_w, g, v, n, d, out);
    return true;
  }
  // dot_rows_f32 for the usual head sizes (four or two query rows at a time for 64), with the
  // key prefetch or without it (rows already in L1); the others as the generic loop does.
  template <bool kPf, class T>
  static void dot_rows_t(const float* q, int64_t g, const T* k, int64_t n, int64_t d, float scale,
                         float* out, int64_t ld_out) {
    int64_t i = 0;
    if (d == 64) {
      for (; i + 4 <= g; i += 4)
        dot_rows_quad64<kPf>(q + i * d, k, n, scale, out + i * ld_out, ld_out);
      for (; i + 2 <= g; i += 2)
        dot_rows_pair64<kPf>(q + i * d, k, n, scale, out + i * ld_out, out + (i + 1) * ld_out);
    }
    for (; i < g; ++i) {
      const float* qi = q + i * d;
      float* oi = out + i * ld_out;
      switch (d) {
        case 64:
          dot_rows_d<64, kPf>(qi, k, n, scale, oi);
          break;
        case 128:
          dot_rows_d<128, kPf>(qi, k, n, scale, oi);
          break;
        case 256:  // 16 KiB key blocks: the prefetch measured 5-25% slower here
          dot_rows_d<256, false>(qi, k, n, scale, oi);
          break;
        default:
          if constexpr (std::is_same_v<T, float>)
            for (int64_t j = 0; j < n; ++j)
              oi[j] = _mm512_reduce_add_ps(vec::dot_lanes<Zmm>(qi, k + j * d, d)) * scale;
      }
    }
  }
  static void dot_rows(const float* q, int64_t g, const float* k, int64_t n, int64_t d, float scale,
                       float* out, int64_t ld_out) {
    dot_rows_t<true>(q, g, k, n, d, scale, out, ld_out);
  }
  // The same on an F16 cache's halves: widened as they load where each key row is loaded once
  // (one, two or four query rows of 64, one of 128; bm_attend F16 10-15% faster than
  // through a buffer), else widened into buf first (3 or 5+ rows would widen each twice).
  static bool dot_rows_half(const float* q, int64_t g, const uint16_t* k, int64_t n, int64_t d,
                            float scale, float* out, int64_t ld_out, float* buf) {
    if (d == 64 ? g <= 2 || g == 4 : d == 128 && g == 1) {
      dot_rows_t<true>(q, g, k, n, d, scale, out, ld_out);
    } else {
      f16_to_f32(k, buf, n * d);
      dot_rows_t<false>(q, g, buf, n, d, scale, out, ld_out);
    }
    return true;
  }
};

// The integer vector trait of int_dot.h: zmm, 16 rows x 4 quant bytes.
struct ZmmInt {
  using I = __m512i;
  static constexpr int kTile = krafla::kernels::kTile;
  static I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static I bcast4(const int8_t* p) {
    int32_t q;
    std::memcpy(&q, p, 4);
    return _mm512_set1_epi32(q);
  }
  static I set1(int32_t x) { return _mm512_set1_epi32(x); }
  static void nibbles(I v, I& lo, I& hi) {
    const I m0f = _mm512_set1_epi8(0x0f);
    lo = _mm512_and_si512(v, m0f);
    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m0f);
  }
  static I dpbusd(I acc, I u, I s) { return _mm512_dpbusd_epi32(acc, u, s); }
  static I table(const uint8_t* v16) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v16)));
  }
  static I lut(I table, I idx) { return _mm512_shuffle_epi8(table, idx); }
  static I shl4(I v) { return _mm512_slli_epi32(v, 4); }
  static I shr2(I v) { return _mm512_srli_epi32(v, 2); }
  static I shr1(I v) { return _mm512_srli_epi32(v, 1); }
  template <int N>
  static I srl32(I v) {
    return _mm512_srli_epi32(v, N);
  }
  template <int N>
  static I sll32(I v) {
    return _mm512_slli_epi32(v, N);
  }
  static I three(I lo, I top) {  // (lo & 0x03) | (top & 0x04)
    return _mm512_ternarylogic_epi32(lo, _mm512_and_si512(top, _mm512_set1_epi8(0x04)),
                                     _mm512_set1_epi8(0x03), 0xec);
  }
  static I five(I nib, I top) {  // nib | (top & 0x10)
    return _mm512_ternarylogic_epi32(nib, top, _mm512_set1_epi8(0x10), 0xf8);
  }
  static I six(I nib, I top) {  // nib | (top & 0x30)
    return _mm512_ternarylogic_epi32(nib, top, _mm512_set1_epi8(0x30), 0xf8);
  }
};

// The ISA's tile policy for tiled.h's register-tile bodies and driver.
struct Avx512 : tiled::StreamPrefetchBytes<2048> {
  using V = Zmm;
  using I = __m512i;
  static constexpr int kTile = krafla::kernels::kTile;
  static constexpr int64_t r_step(int64_t tok_step) { return tok_step <= 2 ? 4 : 2; }
  // Register tiles the driver may ask for: their accumulators must fit the register file.
  static constexpr bool supports(int R, int T) { return T <= 2 || R <= 2; }
  static __m512 to_f32(__m512i x) { return _mm512_cvtepi32_ps(x); }
  static __m512 load_f16(const uint8_t* p) {
    return load_key(reinterpret_cast<const uint16_t*>(p));
  }
  template <bool kQ4, int R, int T>
  static void block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                    __m512i (&ia)[R][T]) {
    tiled::vnni_block<ZmmInt, kQ4, R, T>(wb, a, b, ia);
  }
  static constexpr bool kTopBits = true;
  template <int h, int R, int T>
  static void block6(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     __m512i (&ia)[R][T]) {
    tiled::vnni_block6<ZmmInt, h, R, T>(wb, a, b, ia);
  }
  template <int R, int T>
  static void block5(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     __m512i (&ia)[R][T]) {
    tiled::vnni_block5<ZmmInt, R, T>(wb, a, b, ia);
  }
  static constexpr bool kIq4 = true;
  template <int R, int T>
  static void block_iq4(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                        __m512i (&ia)[R][T]) {
    tiled::vnni_block_iq4<ZmmInt, R, T>(wb, a, b, ia);
  }
  static constexpr bool kQ3 = true;
  template <int h, int R, int T>
  static void block3(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                     __m512i (&ia)[R][T]) {
    tiled::vnni_block3<ZmmInt, h, R, T>(wb, a, b, ia);
  }
};

}  // namespace

KRAFLA_TILED_LAYOUT_ENTRIES(L)
KRAFLA_TILED_ISA_ENTRIES("avx512vnni", Avx512)

void pack(WType t, const void* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1, void* dst) {
  L::pack(t, src, rows, cols, r0, r1, 0x80, dst);
}

void quantize_act(WType t, const float* x, int64_t cols, void* dst) {
  if (copy_float_act(t, x, cols, dst)) return;
  // unsigned-weight offset, see the top comment
  const int32_t c = t == WType::Q8_0 || t == WType::IQ4_NL ? 128 : 8;
  ActBlock* out = static_cast<ActBlock*>(dst);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + b * 32), x1 = _mm512_loadu_ps(x + b * 32 + 16);
    const float amax =
        _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, x0), _mm512_andnot_ps(sign, x1)));
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, id));  // round half to even
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, id));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs + 16), _mm512_cvtsepi32_epi8(q1));
    out[b].d = d;
    // modulo 2^32: see avx2_table.h (inf or NaN rows convert to INT_MIN lanes)
    out[b].corr = static_cast<int32_t>(uint32_t(c) *
                                       uint32_t(_mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1))));
  }
  tiled::block_sums(t, out, cols / kQBlock);
}

KRAFLA_SCALAR_ROW_ENTRIES()

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m256i h = _mm256_maskz_loadu_epi16(m, x + i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(h));
  }
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
}

float dot_f32(const float* a, const float* b, int64_t n) {
  return _mm512_reduce_add_ps(vec::dot_lanes<Zmm>(a, b, n));
}

KRAFLA_VEC_MATH_ENTRIES(Zmm)

}  // namespace krafla::kernels
