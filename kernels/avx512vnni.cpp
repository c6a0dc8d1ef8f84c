// AVX-512 VNNI kernels on the row-tiled layout of tiled.h with 16-row tiles: one zmm holds 16
// rows x 4 quant bytes, and vpdpbusd (u8 x s8 -> int32) takes the weights as its unsigned
// operand and a broadcast 4-byte activation group as the signed one:
//  * Q4_0: the nibbles 0..15 are unsigned as they are: dot(n, a) = dot(w, a) + 8*sum(a).
//  * Q8_0: packed as w xor 0x80 = w + 128: dot(w + 128, a) = dot(w, a) + 128*sum(a).
//    quantize_act stores c*sum(a) per block and the int32 accumulator starts at -c*sum(a).
//  * acc = fma(float(isum_b), d_w*d_a, acc) per block, in the row's lane, whatever the register
//    tile (4 tiles x 1-2 tokens, 2 tiles x 3-4 tokens): bitwise batch/range independence.
// GCC 12's own AVX-512 headers (`__m512 __Y = __Y;`) trip the uninitialized warnings.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/common.h"
#include "kernels/kernels.h"
#include "kernels/tiled.h"
#include "kernels/vec_math.h"

namespace krafla::kernels {
namespace {

constexpr int kTile = 16;
using L = tiled::Layout<kTile>;
using tiled::ActBlock;
using tiled::imin;
// Decode prefetch distance, in (tile, block) records ahead of use in each tile stream. 2-8
// measured alike (+15-30% over no prefetch on Zen 4); 16+ starts to lose.
constexpr size_t kPrefetchRecs = 8;

inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
}

// The vector traits of vec_math.h and delta_step.h: zmm registers, opmask tails, FMA.
struct Zmm {
  using F = __m512;
  static int64_t width() { return 16; }
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
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
};

// The block dot: ia starts at -corr, then one vpdpbusd per 4-byte group.
template <bool kQ4, int R, int T>
inline void vnni_block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                       __m512i (&ia)[R][T]) {
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const __m512i c = _mm512_set1_epi32(-a[t][b].corr);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) ia[r][t] = c;
  }
  if constexpr (kQ4) {
    const __m512i m0f = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      __m512i lo[R], hi[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512i v = _mm512_loadu_si512(wb[r] + L::kQuants + 64 * k);
        lo[r] = _mm512_and_si512(v, m0f);
        hi[r] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m0f);
      }
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        int32_t q_lo, q_hi;
        std::memcpy(&q_lo, a[t][b].qs + 4 * k, 4);
        std::memcpy(&q_hi, a[t][b].qs + 16 + 4 * k, 4);
        const __m512i alo = _mm512_set1_epi32(q_lo), ahi = _mm512_set1_epi32(q_hi);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          ia[r][t] = _mm512_dpbusd_epi32(ia[r][t], lo[r], alo);
          ia[r][t] = _mm512_dpbusd_epi32(ia[r][t], hi[r], ahi);
        }
      }
    }
  } else {
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      __m512i v[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) v[r] = _mm512_loadu_si512(wb[r] + L::kQuants + 64 * g);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        int32_t q;
        std::memcpy(&q, a[t][b].qs + 4 * g, 4);
        const __m512i ag = _mm512_set1_epi32(q);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) ia[r][t] = _mm512_dpbusd_epi32(ia[r][t], v[r], ag);
      }
    }
  }
}

// The ISA's tile policy for tiled.h's register-tile bodies and driver.
struct Avx512 {
  using V = Zmm;
  using I = __m512i;
  static constexpr int kTile = krafla::kernels::kTile;
  static constexpr int64_t r_step(int64_t tok_step) { return tok_step <= 2 ? 4 : 2; }
  // Register tiles the driver may ask for: their accumulators must fit the register file.
  static constexpr bool supports(int R, int T) { return T <= 2 || R <= 2; }
  static __m512 to_f32(__m512i x) { return _mm512_cvtepi32_ps(x); }
  static __m512 load_f16(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void prefetch_q(const uint8_t* rec, size_t bytes) {
    tiled::prefetch_lines(rec + kPrefetchRecs * bytes, bytes);
  }
  template <bool kF16>
  static void prefetch_f(const uint8_t* col, int64_t) {
    _mm_prefetch(reinterpret_cast<const char*>(col + 1024), _MM_HINT_T0);
  }
  template <bool kQ4, int R, int T>
  static void block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                    __m512i (&ia)[R][T]) {
    vnni_block<kQ4, R, T>(wb, a, b, ia);
  }
};

}  // namespace

const char* isa_name() { return "avx512vnni"; }
const char* missing_cpu_feature() { return cpu_missing_for("avx512vnni"); }
int row_tile() { return kTile; }

size_t packed_size(WType t, int64_t rows, int64_t cols) {
  return size_t(L::n_tiles(rows)) * L::tile_bytes(t, cols);
}

void pack(WType t, const void* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1, void* dst) {
  L::pack(t, src, rows, cols, r0, r1, 0x80, dst);
}

size_t act_row_size(WType t, int64_t cols) { return tiled::act_row_size(t, cols); }

void quantize_act(WType t, const float* x, int64_t cols, void* dst) {
  if (t == WType::F32 || t == WType::F16) {
    std::memcpy(dst, x, size_t(cols) * 4);
    return;
  }
  const int32_t c = t == WType::Q8_0 ? 128 : 8;  // unsigned-weight offset, see the top comment
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
    out[b].corr = c * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  }
}

void matmul(WType t, const void* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
            const void* act, int64_t n_tok, float* out, int64_t ld_out) {
  tiled::matmul<Avx512>(t, packed, cols, r0, r1, act, n_tok, out, ld_out);
}

void dequantize_row(WType t, const void* src, float* dst, int64_t cols) {
  if (t == WType::F16) return f16_to_f32(static_cast<const uint16_t*>(src), dst, cols);
  scalar::dequantize_row(t, src, dst, cols);
}

void quantize_row_q8_0(const float* x, BlockQ8_0* dst, int64_t cols) {
  scalar::quantize_row_q8_0(x, dst, cols);
}

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
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

KRAFLA_VEC_MATH_ENTRIES(Zmm)

}  // namespace krafla::kernels
