#include "io/gguf_dequant.h"

#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "krafla/error.h"

namespace krafla {
namespace {

enum : uint32_t {
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
};

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  float f;
  kernels::f16_to_f32(&h, &f, 1);
  return f;
}

// 32-value blocks: [d f16][m f16 (Q4_1, Q5_1)][qh u32 (Q5_*)][16 bytes]; byte j holds value j in
// its low nibble and value j + 16 in its high one; Q5 adds bit j (value j) and bit j + 16
// (value j + 16) of qh as the fifth bit. Value = d·q + m, or d·(q − 8) / d·(q − 16) without m.
// The 32 quants of such a block, q[j] of value j.
void small_quants(uint32_t type, const uint8_t* b, uint8_t* q) {
  const bool has_min = type == kQ4_1 || type == kQ5_1, five = type != kQ4_1;
  const uint8_t* p = b + (has_min ? 4 : 2);
  uint32_t qh = 0;
  if (five) {
    std::memcpy(&qh, p, 4);
    p += 4;
  }
  for (int j = 0; j < 16; ++j) {
    q[j] = uint8_t((p[j] & 15) | (((qh >> j) & 1) << 4));
    q[j + 16] = uint8_t((p[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
  }
}

void small_block(uint32_t type, const uint8_t* b, float* y) {
  const bool has_min = type == kQ4_1 || type == kQ5_1, five = type != kQ4_1;
  const float d = half(b), m = has_min ? half(b + 2) : 0.0f;
  const int offset = has_min ? 0 : five ? 16 : 8;
  uint8_t q[32];
  small_quants(type, b, q);
  for (int j = 0; j < 32; ++j) y[j] = d * float(int(q[j]) - offset) + m;
}

// Q4_K/Q5_K: 8 sub-blocks of 32 with a 6-bit scale and a 6-bit min each, packed in 12 bytes:
// sub-block j < 4 in the low 6 bits of bytes j (scale) and j + 4 (min); j >= 4 in the nibbles
// of byte j + 4 (scale low, min high) with their top 2 bits in bits 6-7 of bytes j - 4 (scale)
// and j (min).
void scale_min(int j, const uint8_t* s, int& sc, int& mn) {
  if (j < 4) {
    sc = s[j] & 63;
    mn = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// [d f16][dmin f16][scales 12][Q5_K: qh 32][qs 128]. Sub-blocks 2i and 2i + 1 share qs bytes
// 32i..32i+31 (low and high nibbles); Q5_K's fifth bits: sub-block k uses bit k of qh[l].
// Value = d·sc·q − dmin·m.
// The 4- or 5-bit quant l of sub-block k of the super-block at b (the layout above).
int k4_quant(bool five, const uint8_t* b, int k, int l) {
  const uint8_t* q = b + (five ? 48 : 16) + 32 * (k / 2);
  int v = (k % 2) ? q[l] >> 4 : q[l] & 15;
  if (five) v |= ((b[16 + l] >> k) & 1) << 4;
  return v;
}

// f(j, scale, min, q) for each 32-value sub-block j of the n values of Q4_K (Q5_K with five)
// at src: scale = d·sc, min = −dmin·m and q its 32 quants, value = scale·q + min.
template <class F>
void k4_sub_blocks(bool five, const uint8_t* src, int64_t n, F&& f) {
  uint8_t q[32];
  for (int64_t i = 0; i < n / 256; ++i, src += five ? 176 : 144) {
    const float d = half(src), dmin = half(src + 2);
    for (int k = 0; k < 8; ++k) {
      int sc, mn;
      scale_min(k, src + 4, sc, mn);
      for (int l = 0; l < 32; ++l) q[l] = uint8_t(k4_quant(five, src, k, l));
      f(8 * i + k, d * float(sc), -dmin * float(mn), q);
    }
  }
}

// Q6_K: [ql 128][qh 64][scales 16 × int8][d f16]; two halves of 128 values; in half h, value
// 32g + l (g = 0..3, l = 0..31) takes its low 4 bits from ql[64h + l + 32·(g % 2)] (low
// nibble for g < 2, high for g >= 2) and its top 2 bits from qh[32h + l] bits 2g..2g+1; the
// scale of each 16 values is scales[8h + 2g + l / 16]. Value = d·scale·(q − 32).
// The 6-bit quant (0..63) of value 128h + 32g + l.
int k6_quant(const uint8_t* b, int h, int g, int l) {
  const uint8_t lo = b[64 * h + l + 32 * (g % 2)];
  return (g < 2 ? lo & 15 : lo >> 4) | (((b[128 + 32 * h + l] >> (2 * g)) & 3) << 4);
}

void k6_block(const uint8_t* b, float* y) {
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half(b + 208);
  for (int h = 0; h < 2; ++h)
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l)
        y[128 * h + 32 * g + l] =
            d * float(sc[8 * h + 2 * g + l / 16]) * float(k6_quant(b, h, g, l) - 32);
}

// Q2_K: [scales 16][qs 64][d f16][dmin f16]; Q3_K: [hmask 32][qs 64][scales 12][d f16]. Both
// have two halves of 128 values; in half h, value 32g + l (g = 0..3, l = 0..31) takes 2 bits
// from qs[32h + l] at bits 2g..2g+1 and the scale of 16 values number 8h + 2g + l / 16.
// Q2_K: scale byte = 4-bit scale (low nibble) and 4-bit min (high), value = d·sc·q − dmin·mn.
// Q3_K: 6-bit scales (below), value = d·(sc − 32)·(q − 4) with bit 2 of q from hmask[l] at
// bit 4h + g.
int k2_quant(const uint8_t* qs, int h, int g, int l) { return (qs[32 * h + l] >> (2 * g)) & 3; }

void q2_k_block(const uint8_t* b, float* y) {
  const float d = half(b + 80), dmin = half(b + 82);
  for (int v = 0; v < 256; ++v) {
    const int h = v / 128, g = (v % 128) / 32, l = v % 32, sc = b[8 * h + 2 * g + l / 16];
    y[v] = d * float(sc & 15) * float(k2_quant(b + 16, h, g, l)) - dmin * float(sc >> 4);
  }
}

// Q3_K's 16 six-bit scales in 12 bytes: scale s's low 4 bits in the low (s < 8) or high
// (s >= 8) nibble of byte s % 8, its top 2 bits in byte 8 + s % 4 at bits 2(s / 4)...
int q3_k_scale(const uint8_t* sc, int s) {
  const int lo = s < 8 ? sc[s] & 15 : sc[s - 8] >> 4;
  return lo | (((sc[8 + s % 4] >> (2 * (s / 4))) & 3) << 4);
}
// Value v of a Q3_K block: its scale − 32 and its q − 4 (−4..3).
void q3_k_value(const uint8_t* b, int v, int& scale, int& q) {
  const int h = v / 128, g = (v % 128) / 32, l = v % 32;
  scale = q3_k_scale(b + 96, 8 * h + 2 * g + l / 16) - 32;
  q = k2_quant(b + 32, h, g, l) - ((b[l] >> (4 * h + g)) & 1 ? 0 : 4);
}

void q3_k_block(const uint8_t* b, float* y) {
  const float d = half(b + 108);
  for (int v = 0; v < 256; ++v) {
    int scale, q;
    q3_k_value(b, v, scale, q);
    y[v] = d * float(scale) * float(q);
  }
}

// IQ4_NL: [d f16][16 bytes] per 32 values, byte j's low nibble indexes value j's level in the
// table below, its high nibble value j + 16's; value = d·level. IQ4_XS: [d f16][scales_h u16]
// [scales_l 4][qs 128] per 256: sub-block k of 32 as IQ4_NL's bytes at qs + 16k, with the
// 6-bit scale (nibble k % 2 of scales_l[k / 2], top bits 2k..2k+1 of scales_h) − 32 times d.
// The table is kernels::kIq4Levels.
using kernels::kIq4Levels;

float iq4_xs_scale(const uint8_t* b, int k) {
  uint16_t hi;
  std::memcpy(&hi, b + 2, 2);
  const int ls = ((b[4 + k / 2] >> (4 * (k % 2))) & 15) | (((hi >> (2 * k)) & 3) << 4);
  return half(b) * float(ls - 32);
}

// The 32 levels of IQ4_NL-layout bytes qs.
void iq4_levels(const uint8_t* qs, int8_t* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = kIq4Levels[qs[j] & 15];
    y[j + 16] = kIq4Levels[qs[j] >> 4];
  }
}

uint16_t to_half(float f) {
  uint16_t h;
  kernels::f32_to_f16(&f, &h, 1);
  return h;
}

// The f16 scale and the 16 nibble bytes of sub-block i of 32 values of IQ4_NL or IQ4_XS (IQ4_NL's
// own scale; IQ4_XS's d·(ls − 32) rounded once).
const uint8_t* iq4_sub_block(uint32_t type, const uint8_t* src, int64_t i, uint16_t& d) {
  if (type == kIQ4_NL) {
    std::memcpy(&d, src + 18 * i, 2);
    return src + 18 * i + 2;
  }
  const uint8_t* b = src + 136 * (i / 8);
  d = to_half(iq4_xs_scale(b, int(i % 8)));
  return b + 8 + 16 * (i % 8);
}

// n values of IQ4_NL or IQ4_XS as Q8_0 blocks (the levels are int8 quants), or as IQ4_NL blocks
// where the kernels take them.
void iq4_to_q8_0(uint32_t type, const uint8_t* src, kernels::BlockQ8_0* dst, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i) iq4_levels(iq4_sub_block(type, src, i, dst[i].d), dst[i].qs);
}
void iq4_to_iq4_nl(uint32_t type, const uint8_t* src, kernels::BlockIQ4_NL* dst, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i)
    std::memcpy(dst[i].qs, iq4_sub_block(type, src, i, dst[i].d), 16);
}

// One Q4_M block of value d·q + min (q = 0..15), q[l] its 32 nibbles.
kernels::BlockQ4_M q4_m_block(float d, float min, const uint8_t* q) {
  kernels::BlockQ4_M b;
  b.d = to_half(d);
  b.m = to_half(8.0f * d + min);  // exact in float: d and min are f16 (times a 6-bit int)
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(q[j] | (q[j + 16] << 4));
  return b;
}

// One Q5_M block of value d·q + min (q = 0..31), q[l] its 32 five-bit values.
kernels::BlockQ5_M q5_m_block(float d, float min, const uint8_t* q) {
  kernels::BlockQ5_M b{};
  b.d = to_half(d);
  b.m = to_half(16.0f * d + min);  // exact in float: d and min are f16 (times a 6-bit int)
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t((q[j] & 15) | ((q[j + 16] & 15) << 4));
  for (int e = 0; e < 32; ++e)  // e = 16h + 4k + j: bit 4h + k of qh[j]
    b.qh[e % 4] |= uint8_t((q[e] >> 4) << (4 * (e / 16) + (e % 16) / 4));
  return b;
}

// One Q6_H block of value d[l / 16]·(q[l] − 32), q[l] (0..63) its 32 values.
kernels::BlockQ6_H q6_h_block(float d0, float d1, const int* q) {
  kernels::BlockQ6_H b{};
  b.d[0] = to_half(d0);
  b.d[1] = to_half(d1);
  for (int l = 0; l < 32; ++l) {
    // element l: nibble in qs[l % 16] (low for l < 16), top bits in qh[4(l/16) + l%4]
    b.qs[l % 16] |= uint8_t((q[l] & 15) << (l < 16 ? 0 : 4));
    b.qh[4 * (l / 16) + l % 4] |= uint8_t((q[l] >> 4) << (2 * ((l % 16) / 4)));
  }
  return b;
}

}  // namespace

bool gguf_has_q5_m(uint32_t type) {
  return (type == kQ5_0 || type == kQ5_1 || type == kQ5_K) && kernels::takes(kernels::WType::Q5_M);
}

void gguf_to_q5_m(uint32_t type, const uint8_t* src, kernels::BlockQ5_M* dst, int64_t n) {
  uint8_t q[32];
  if (type == kQ5_0 || type == kQ5_1) {  // [d f16][m f16 (Q5_1)][qh u32][16 bytes]
    const bool has_min = type == kQ5_1;
    const size_t bytes = has_min ? 24 : 22;
    for (int64_t i = 0; i < n / 32; ++i, src += bytes) {
      small_quants(type, src, q);
      const float d = half(src);
      dst[i] = q5_m_block(d, has_min ? half(src + 2) : -16.0f * d, q);
    }
    return;
  }
  if (type != kQ5_K) throw Error("internal: gguf_to_q5_m of a type it does not take");
  k4_sub_blocks(true, src, n, [&](int64_t j, float scale, float min, const uint8_t* kq) {
    dst[j] = q5_m_block(scale, min, kq);
  });
}

bool gguf_has_q4_m(uint32_t type) { return type == kQ4_1 || type == kQ4_K; }

void gguf_to_q4_m(uint32_t type, const uint8_t* src, kernels::BlockQ4_M* dst, int64_t n) {
  uint8_t q[32];
  if (type == kQ4_1) {  // [d f16][m f16][16 bytes as Q4_M's]
    for (int64_t i = 0; i < n / 32; ++i, src += 20) {
      small_quants(type, src, q);
      dst[i] = q4_m_block(half(src), half(src + 2), q);
    }
    return;
  }
  if (type != kQ4_K) throw Error("internal: gguf_to_q4_m of a type it does not take");
  k4_sub_blocks(false, src, n, [&](int64_t j, float scale, float min, const uint8_t* kq) {
    dst[j] = q4_m_block(scale, min, kq);
  });
}

void gguf_q6_k_to_q6_h(const uint8_t* src, kernels::BlockQ6_H* dst, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i, src += 210) {  // as k6_block reads it
    const int8_t* sc = reinterpret_cast<const int8_t*>(src + 192);
    const float d = half(src + 208);
    for (int k = 0; k < 8; ++k) {  // values 32k.. : half h = k / 4, group g = k % 4
      const int h = k / 4, g = k % 4;
      int q[32];
      for (int l = 0; l < 32; ++l) q[l] = k6_quant(src, h, g, l);
      dst[8 * i + k] =
          q6_h_block(d * float(sc[8 * h + 2 * g]), d * float(sc[8 * h + 2 * g + 1]), q);
    }
  }
}

// Q3_K's sub-blocks of 32 values, in order: f(j, d·scale of values 0..15, of 16..31, q) with
// q[l] the 3-bit values − 4 (−4..3), as q3_k_block reads them.
template <class F>
void q3_k_sub_blocks(const uint8_t* src, int64_t n, F&& f) {
  for (int64_t i = 0; i < n / 256; ++i, src += 110) {
    const float d = half(src + 108);
    for (int k = 0; k < 8; ++k) {
      int q[32], scale[2];
      for (int l = 0; l < 32; ++l) q3_k_value(src, 32 * k + l, scale[l / 16], q[l]);
      f(8 * i + k, d * float(scale[0]), d * float(scale[1]), q);
    }
  }
}

void gguf_q3_k_to_q3_h(const uint8_t* src, kernels::BlockQ3_H* dst, int64_t n) {
  q3_k_sub_blocks(src, n, [&](int64_t i, float d0, float d1, const int* q) {
    kernels::BlockQ3_H& b = dst[i];
    b = {};
    b.d[0] = to_half(d0);
    b.d[1] = to_half(d1);
    for (int e = 0; e < 32; ++e) {  // e = 16h + 4g + j: bits 2g of qs[4h + j], 4h + g of qh[j]
      const int h = e / 16, g = (e % 16) / 4, j = e % 4, u = q[e] + 4;
      b.qs[4 * h + j] |= uint8_t((u & 3) << (2 * g));
      b.qh[j] |= uint8_t((u >> 2) << (4 * h + g));
    }
  });
}

kernels::WType gguf_rewrite_type(uint32_t type) {
  if (gguf_has_q4_m(type)) return kernels::WType::Q4_M;
  if (type == kQ3_K && kernels::takes(kernels::WType::Q3_H)) return kernels::WType::Q3_H;
  if (type == kQ6_K && kernels::takes(kernels::WType::Q6_H)) return kernels::WType::Q6_H;
  if (gguf_has_q5_m(type)) return kernels::WType::Q5_M;
  if ((type == kIQ4_NL || type == kIQ4_XS) && kernels::takes(kernels::WType::IQ4_NL))
    return kernels::WType::IQ4_NL;
  return kernels::WType::Q8_0;
}

void gguf_rewrite_rows(uint32_t type, const uint8_t* src, uint64_t in_row, int64_t cols, int64_t n,
                       uint8_t* dst) {
  using kernels::WType;
  const WType as = gguf_rewrite_type(type);
  const size_t out_row = kernels::row_bytes(as, cols);
  std::vector<float> row;
  for (int64_t r = 0; r < n; ++r, src += in_row, dst += out_row) {
    switch (as) {
      case WType::Q4_M:
        gguf_to_q4_m(type, src, reinterpret_cast<kernels::BlockQ4_M*>(dst), cols);
        break;
      case WType::Q3_H:
        gguf_q3_k_to_q3_h(src, reinterpret_cast<kernels::BlockQ3_H*>(dst), cols);
        break;
      case WType::Q6_H:
        gguf_q6_k_to_q6_h(src, reinterpret_cast<kernels::BlockQ6_H*>(dst), cols);
        break;
      case WType::IQ4_NL:
        iq4_to_iq4_nl(type, src, reinterpret_cast<kernels::BlockIQ4_NL*>(dst), cols);
        break;
      case WType::Q5_M:
        gguf_to_q5_m(type, src, reinterpret_cast<kernels::BlockQ5_M*>(dst), cols);
        break;
      default:  // Q8_0: IQ4's levels as its quants, the others decoded and requantized
        if (type == kIQ4_NL || type == kIQ4_XS) {
          iq4_to_q8_0(type, src, reinterpret_cast<kernels::BlockQ8_0*>(dst), cols);
        } else {
          row.resize(size_t(cols));
          gguf_dequantize_row(type, src, row.data(), cols);
          kernels::quantize_row_q8_0(row.data(), reinterpret_cast<kernels::BlockQ8_0*>(dst), cols);
        }
    }
  }
}

bool gguf_can_dequantize(uint32_t type) {
  switch (type) {
    case kQ4_1:
    case kQ5_0:
    case kQ5_1:
    case kQ4_K:
    case kQ5_K:
    case kQ6_K:
    case kQ2_K:
    case kQ3_K:
    case kIQ4_NL:
    case kIQ4_XS:
      return true;
    default:
      return false;
  }
}

void gguf_dequantize_row(uint32_t type, const uint8_t* src, float* dst, int64_t n) {
  switch (type) {
    case kQ4_1:
    case kQ5_0:
    case kQ5_1: {
      const int bytes = type == kQ4_1 ? 20 : type == kQ5_0 ? 22 : 24;
      for (int64_t i = 0; i < n / 32; ++i) small_block(type, src + i * bytes, dst + i * 32);
      return;
    }
    case kQ4_K:
    case kQ5_K:
      k4_sub_blocks(type == kQ5_K, src, n,
                    [&](int64_t j, float scale, float min, const uint8_t* q) {
                      for (int l = 0; l < 32; ++l) dst[32 * j + l] = scale * float(q[l]) + min;
                    });
      return;
    case kQ6_K:
      for (int64_t i = 0; i < n / 256; ++i) k6_block(src + i * 210, dst + i * 256);
      return;
    case kQ2_K:
      for (int64_t i = 0; i < n / 256; ++i) q2_k_block(src + i * 84, dst + i * 256);
      return;
    case kQ3_K:
      for (int64_t i = 0; i < n / 256; ++i) q3_k_block(src + i * 110, dst + i * 256);
      return;
    case kIQ4_NL:
    case kIQ4_XS:
      for (int64_t i = 0; i < n / 32; ++i) {
        const float d =
            type == kIQ4_NL ? half(src + 18 * i) : iq4_xs_scale(src + 136 * (i / 8), int(i % 8));
        int8_t lv[32];
        iq4_levels(type == kIQ4_NL ? src + 18 * i + 2 : src + 136 * (i / 8) + 8 + 16 * (i % 8), lv);
        for (int j = 0; j < 32; ++j) dst[32 * i + j] = d * float(lv[j]);
      }
      return;
    default:
      throw Error("internal: gguf_dequantize_row of an unknown type");
  }
}

}  // namespace krafla
