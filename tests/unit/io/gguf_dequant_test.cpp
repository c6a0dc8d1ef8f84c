// The GGUF block decoders (src/io/gguf_dequant.cpp) on blocks packed here from chosen quants,
// scales and mins as ggml's block_q4_1/q5_0/q5_1/q4_K/q5_K/q6_K lay them out: every value must
// come back as the formula of its type says. (That the whole path agrees with llama.cpp is
// measured in docs/gguf.md: perplexity within 0.02% on llama-quantize's files.)
#include "io/gguf_dequant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/kernels.h"

namespace krafla {
namespace {

void put_half(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }
// Halves used below, exact: 1.0, 0.5, 0.25, 2.0, -1.5
constexpr uint16_t kOne = 0x3C00, kHalf = 0x3800, kQuarter = 0x3400, kTwo = 0x4000,
                   kMinus1_5 = 0xBE00;

std::vector<float> decode(uint32_t type, const std::vector<uint8_t>& b, int n) {
  std::vector<float> y(size_t(n), -999.0f);
  gguf_dequantize_row(type, b.data(), y.data(), n);
  return y;
}

TEST(GgufDequant, SmallBlocks) {
  // Q4_1 (type 3): d 0.5, m -1.5, value j: q = (j * 5) % 16
  std::vector<uint8_t> b(20);
  put_half(&b[0], kHalf);
  put_half(&b[2], kMinus1_5);
  auto q4 = [](int j) { return (j * 5) % 16; };
  for (int j = 0; j < 16; ++j) b[4 + j] = uint8_t(q4(j) | (q4(j + 16) << 4));
  auto y = decode(3, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * q4(j) - 1.5f) << j;

  // Q5_0 (type 6): d 2, q = (j * 7) % 32, value d * (q - 16)
  auto q5 = [](int j) { return (j * 7) % 32; };
  b.assign(22, 0);
  put_half(&b[0], kTwo);
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= uint32_t(q5(j) >> 4) << j;
  std::memcpy(&b[2], &qh, 4);
  for (int j = 0; j < 16; ++j) b[6 + j] = uint8_t((q5(j) & 15) | ((q5(j + 16) & 15) << 4));
  y = decode(6, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 2.0f * float(q5(j) - 16)) << j;

  // Q5_1 (type 7): d 0.25, m 1, value d * q + m
  b.assign(24, 0);
  put_half(&b[0], kQuarter);
  put_half(&b[2], kOne);
  std::memcpy(&b[4], &qh, 4);
  for (int j = 0; j < 16; ++j) b[8 + j] = uint8_t((q5(j) & 15) | ((q5(j + 16) & 15) << 4));
  y = decode(7, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.25f * q5(j) + 1.0f) << j;
  EXPECT_FALSE(gguf_can_dequantize(16));  // IQ2_XXS
  EXPECT_FALSE(gguf_can_dequantize(39));  // MXFP4
  EXPECT_TRUE(gguf_can_dequantize(14));
}

// The 12 bytes of 8 six-bit (scale, min) pairs of Q4_K/Q5_K.
void pack_scales(uint8_t* s, const int* sc, const int* mn) {
  for (int j = 0; j < 4; ++j) {
    s[j] = uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = uint8_t((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    s[j + 8] = uint8_t((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
}

TEST(GgufDequant, Q4KAndQ5K) {
  const int sc[8] = {1, 63, 17, 40, 33, 5, 62, 48}, mn[8] = {0, 2, 63, 31, 16, 47, 9, 60};
  auto q = [](int v) { return (v * 11 + 3) % 32; };  // 5-bit; Q4_K keeps the low 4 bits
  for (bool five : {false, true}) {
    std::vector<uint8_t> b(five ? 176 : 144, 0);
    put_half(&b[0], kHalf);     // d
    put_half(&b[2], kQuarter);  // dmin
    pack_scales(&b[4], sc, mn);
    uint8_t* qh = &b[16];
    uint8_t* qs = &b[five ? 48 : 16];
    for (int k = 0; k < 8; ++k)
      for (int l = 0; l < 32; ++l) {
        const int v = q(32 * k + l);
        qs[32 * (k / 2) + l] |= uint8_t((v & 15) << (4 * (k % 2)));
        if (five) qh[l] |= uint8_t((v >> 4) << k);
      }
    auto y = decode(five ? 13 : 12, b, 256);
    for (int k = 0; k < 8; ++k)
      for (int l = 0; l < 32; ++l) {
        const int v = five ? q(32 * k + l) : q(32 * k + l) & 15;
        EXPECT_EQ(y[32 * k + l], 0.5f * sc[k] * v - 0.25f * mn[k]) << five << " " << k << " " << l;
      }
  }
}

// Q4_1 and Q4_K rows rewritten as Q4_M (what gguf_import runs them as) decode, through the
// kernels' Q4_M, to the values of their own formulas: exactly where each 32 values' scale and
// offset are halves (the blocks of the tests above), within the f16 rounding of each otherwise.
std::vector<float> via_q4_m(uint32_t type, const std::vector<uint8_t>& b, int n) {
  std::vector<kernels::BlockQ4_M> m(size_t(n / 32));
  gguf_to_q4_m(type, b.data(), m.data(), n);
  std::vector<float> y(static_cast<size_t>(n));
  kernels::scalar::dequantize_row(kernels::WType::Q4_M, m.data(), y.data(), n);
  return y;
}

TEST(GgufDequant, ToQ4M) {
  EXPECT_TRUE(gguf_has_q4_m(3) && gguf_has_q4_m(12));
  EXPECT_FALSE(gguf_has_q4_m(13) || gguf_has_q4_m(14) || gguf_has_q4_m(6) || gguf_has_q4_m(2));
  std::vector<uint8_t> b(20);  // Q4_1: d 0.5, m -1.5
  put_half(&b[0], kHalf);
  put_half(&b[2], kMinus1_5);
  for (int j = 0; j < 16; ++j) b[4 + j] = uint8_t(((j * 5) % 16) | (((j * 3 + 1) % 16) << 4));
  EXPECT_EQ(via_q4_m(3, b, 32), decode(3, b, 32));

  const int sc[8] = {1, 63, 17, 40, 33, 5, 62, 48}, mn[8] = {0, 2, 63, 31, 16, 47, 9, 60};
  std::vector<uint8_t> k(144, 0);  // Q4_K: d 0.5, dmin 0.25
  put_half(&k[0], kHalf);
  put_half(&k[2], kQuarter);
  pack_scales(&k[4], sc, mn);
  for (int i = 0; i < 128; ++i) k[16 + i] = uint8_t(i * 37 + 11);
  EXPECT_EQ(via_q4_m(12, k, 256), decode(12, k, 256));

  // d = 0.3 (not a half times a small int): d*sc and the offsets round to f16, the value moves
  // by at most half an f16 step of d*sc per nibble step from 8, plus half a step of the offset.
  put_half(&k[0], 0x34CD);  // 0.30005
  const auto got = via_q4_m(12, k, 256), want = decode(12, k, 256);
  for (int i = 0; i < 256; ++i) {
    const float a = 0.30005f * float(sc[i / 32]), m = 8 * a - 0.25f * float(mn[i / 32]);
    const float bound = std::ldexp(std::fabs(a) * 8 + std::fabs(m), -11) * 1.01f;
    EXPECT_NEAR(got[size_t(i)], want[size_t(i)], bound) << i;
  }
}

// Q5_0, Q5_1 and Q5_K rows rewritten as Q5_M (where the ISA takes it) decode, through the
// kernels' Q5_M, to their own formulas' values: exactly, as every scale and offset here is a small
// multiple of a power of two (the f16 rounding is Q4_M's, bounded in ToQ4M).
std::vector<float> via_q5_m(uint32_t type, const std::vector<uint8_t>& b, int n) {
  std::vector<kernels::BlockQ5_M> m(size_t(n / 32));
  gguf_to_q5_m(type, b.data(), m.data(), n);
  std::vector<float> y(static_cast<size_t>(n));
  kernels::scalar::dequantize_row(kernels::WType::Q5_M, m.data(), y.data(), n);
  return y;
}

TEST(GgufDequant, ToQ5M) {
  EXPECT_EQ(gguf_has_q5_m(6) && gguf_has_q5_m(7) && gguf_has_q5_m(13),
            kernels::takes(kernels::WType::Q5_M));
  EXPECT_FALSE(gguf_has_q5_m(12) || gguf_has_q5_m(14) || gguf_has_q5_m(3));
  auto q5 = [](int j) { return (j * 7 + 3) % 32; };
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= uint32_t(q5(j) >> 4) << j;
  for (uint32_t type : {6u, 7u}) {  // Q5_0: d 2; Q5_1: d 0.25, m -1.5
    const bool has_min = type == 7;
    std::vector<uint8_t> b(has_min ? 24 : 22, 0);
    put_half(&b[0], has_min ? kQuarter : kTwo);
    if (has_min) put_half(&b[2], kMinus1_5);
    uint8_t* p = &b[has_min ? 4 : 2];
    std::memcpy(p, &qh, 4);
    for (int j = 0; j < 16; ++j) p[4 + j] = uint8_t((q5(j) & 15) | ((q5(j + 16) & 15) << 4));
    EXPECT_EQ(via_q5_m(type, b, 32), decode(type, b, 32)) << type;
  }
  const int sc[8] = {1, 63, 17, 40, 33, 5, 62, 48}, mn[8] = {0, 2, 63, 31, 16, 47, 9, 60};
  std::vector<uint8_t> k(176, 0);  // Q5_K: d 0.5, dmin 0.25
  put_half(&k[0], kHalf);
  put_half(&k[2], kQuarter);
  pack_scales(&k[4], sc, mn);
  for (int i = 0; i < 160; ++i) k[16 + i] = uint8_t(i * 37 + 11);  // qh and qs
  EXPECT_EQ(via_q5_m(13, k, 256), decode(13, k, 256));
}

// A Q6_K super-block with scales i * 9 - 70 and quants q(v) = (13v + 5) % 64, d = `d`.
std::vector<uint8_t> q6_k_block(uint16_t d) {
  std::vector<uint8_t> b(210, 0);
  for (int i = 0; i < 16; ++i) b[192 + i] = uint8_t(int8_t(i * 9 - 70));
  put_half(&b[208], d);
  for (int h = 0; h < 2; ++h)
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l) {
        const int q = ((128 * h + 32 * g + l) * 13 + 5) % 64;
        b[64 * h + l + 32 * (g % 2)] |= uint8_t((q & 15) << (4 * (g / 2)));
        b[128 + 32 * h + l] |= uint8_t((q >> 4) << (2 * g));
      }
  return b;
}

// A block b of Q6_K (`type` 14) rewritten as Q6_H, or of Q3_K (11) as Q3_H (`as`: what
// gguf_import runs them as where the ISA takes them) decodes, through the kernels' type, to the
// block's own values: exactly at d = 0.5, where each 16 values' d*scale(v) is a half, otherwise
// within half an f16 step of d*scale(v) per unit of the largest |q| (qmax).
template <class Scale>
void expect_via(kernels::WType as, uint32_t type, const std::vector<uint8_t>& b, uint16_t d,
                int qmax, Scale scale) {
  std::vector<uint8_t> m(kernels::row_bytes(as, 256));
  if (as == kernels::WType::Q3_H)
    gguf_q3_k_to_q3_h(b.data(), reinterpret_cast<kernels::BlockQ3_H*>(m.data()), 256);
  else
    gguf_q6_k_to_q6_h(b.data(), reinterpret_cast<kernels::BlockQ6_H*>(m.data()), 256);
  std::vector<float> got(256);
  kernels::scalar::dequantize_row(as, m.data(), got.data(), 256);
  const auto want = decode(type, b, 256);
  float df;
  kernels::scalar::f16_to_f32(&d, &df, 1);
  for (int v = 0; v < 256; ++v) {
    const float a = df * float(scale(v));
    const float bound = d == kHalf ? 0.0f : std::ldexp(std::fabs(a) * float(qmax), -11) * 1.01f;
    EXPECT_NEAR(got[size_t(v)], want[size_t(v)], bound) << type << " " << d << " " << v;
  }
}

TEST(GgufDequant, ToQ6H) {
  for (uint16_t d : {kHalf, uint16_t(0x34CD)}) {  // 0.5, 0.30005
    const auto b = q6_k_block(d);
    expect_via(kernels::WType::Q6_H, 14, b, d, 32, [&](int v) {
      const int h = v / 128, g = (v % 128) / 32, l = v % 32;
      return int(int8_t(b[192 + 8 * h + 2 * g + l / 16]));
    });
  }
}

TEST(GgufDequant, Q6K) {
  std::vector<uint8_t> b(210, 0);
  int8_t scales[16];
  for (int i = 0; i < 16; ++i) scales[i] = int8_t(i * 9 - 70);
  std::memcpy(&b[192], scales, 16);
  put_half(&b[208], kHalf);
  auto q = [](int v) { return (v * 13 + 5) % 64; };
  // value 128h + 32g + l: low 4 bits in ql[64h + l + 32(g % 2)] (nibble g / 2), top 2 bits in
  // qh[32h + l] at bits 2g..2g+1, scale scales[8h + 2g + l / 16]
  for (int h = 0; h < 2; ++h)
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l) {
        const int v = q(128 * h + 32 * g + l);
        b[64 * h + l + 32 * (g % 2)] |= uint8_t((v & 15) << (4 * (g / 2)));
        b[128 + 32 * h + l] |= uint8_t((v >> 4) << (2 * g));
      }
  auto y = decode(14, b, 256);
  for (int h = 0; h < 2; ++h)
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l) {
        const int i = 128 * h + 32 * g + l;
        EXPECT_EQ(y[i], 0.5f * scales[8 * h + 2 * g + l / 16] * float(q(i) - 32)) << i;
      }
}

// Value 128h + 32g + l of a Q2_K/Q3_K block: 2 bits in qs[32h + l] at bits 2g..2g+1, the scale of
// its 16 values number 8h + 2g + l / 16.
void put_2bit(uint8_t* qs, int v, int q) {
  const int h = v / 128, g = (v % 128) / 32, l = v % 32;
  qs[32 * h + l] |= uint8_t((q & 3) << (2 * g));
}
int sub16(int v) { return 8 * (v / 128) + 2 * ((v % 128) / 32) + (v % 32) / 16; }

TEST(GgufDequant, Q2K) {
  // [scales 16: min << 4 | scale][qs 64][d][dmin]; value = d*scale*q - dmin*min
  std::vector<uint8_t> b(84, 0);
  for (int i = 0; i < 16; ++i) b[i] = uint8_t(((i * 7 + 3) % 16) << 4 | (i * 5 + 1) % 16);
  auto q = [](int v) { return (v * 7 + 1) % 4; };
  for (int v = 0; v < 256; ++v) put_2bit(&b[16], v, q(v));
  put_half(&b[80], kHalf);
  put_half(&b[82], kQuarter);
  const auto y = decode(10, b, 256);
  for (int v = 0; v < 256; ++v) {
    const int s = sub16(v), sc = (s * 5 + 1) % 16, mn = (s * 7 + 3) % 16;
    EXPECT_EQ(y[size_t(v)], 0.5f * float(sc * q(v)) - 0.25f * float(mn)) << v;
  }
}

// A Q3_K super-block, d = `d`: 6-bit scales sc(i) = (11i + 5) % 64 (value scale sc - 32) and
// 3-bit quants q(v) = (5v + 2) % 8 (value q - 4: bit 2 in hmask[l] at bit 4h + g).
int q3_sc(int i) { return (11 * i + 5) % 64; }
int q3_q(int v) { return (5 * v + 2) % 8; }
std::vector<uint8_t> q3_k_block(uint16_t d) {
  std::vector<uint8_t> b(110, 0);  // [hmask 32][qs 64][scales 12][d]
  for (int v = 0; v < 256; ++v) {
    put_2bit(&b[32], v, q3_q(v));
    const int h = v / 128, g = (v % 128) / 32, l = v % 32;
    b[l] |= uint8_t((q3_q(v) >> 2) << (4 * h + g));
  }
  for (int i = 0; i < 16; ++i) {  // low 4 bits: nibble i / 8 of byte i % 8; top 2: byte 8 + i % 4
    b[96 + i % 8] |= uint8_t((q3_sc(i) & 15) << (4 * (i / 8)));
    b[96 + 8 + i % 4] |= uint8_t((q3_sc(i) >> 4) << (2 * (i / 4)));
  }
  put_half(&b[108], d);
  return b;
}

TEST(GgufDequant, Q3K) {
  const auto y = decode(11, q3_k_block(kHalf), 256);
  for (int v = 0; v < 256; ++v)
    EXPECT_EQ(y[size_t(v)], 0.5f * float((q3_sc(sub16(v)) - 32) * (q3_q(v) - 4))) << v;
}

// Q3_K rows rewritten as Q3_H: the 3-bit values as they are (q - 4 as q).
TEST(GgufDequant, Q3KToQ3H) {
  for (uint16_t d : {kHalf, uint16_t(0x34CD)})
    expect_via(kernels::WType::Q3_H, 11, q3_k_block(d), d, 4,
               [](int v) { return q3_sc(sub16(v)) - 32; });
}

// IQ4_NL/IQ4_XS: each nibble indexes this table of levels (ggml's kvalues_iq4nl).
constexpr int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                             1,    13,   25,  38,  53,  69,  89,  113};
int iq4_nib(int v) { return (v * 9 + 4) % 16; }

// The block's 32 values v0.. as IQ4_NL's 16 bytes: byte j = value j (low), j + 16 (high).
void put_iq4(uint8_t* qs, int v0) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(iq4_nib(v0 + j) | iq4_nib(v0 + j + 16) << 4);
}

TEST(GgufDequant, Iq4NlAndXs) {
  std::vector<uint8_t> nl(2 * 18, 0);  // two blocks: d -1.5, then 0.25
  put_half(&nl[0], kMinus1_5);
  put_half(&nl[18], kQuarter);
  put_iq4(&nl[2], 0);
  put_iq4(&nl[20], 32);
  auto y = decode(20, nl, 64);
  for (int v = 0; v < 64; ++v)
    EXPECT_EQ(y[size_t(v)], (v < 32 ? -1.5f : 0.25f) * float(kLevels[iq4_nib(v)])) << v;

  // IQ4_XS: [d][scales_h u16][scales_l 4][qs 128]; 6-bit scale ls(k), value d*(ls - 32)*level
  std::vector<uint8_t> xs(136, 0);
  auto ls = [](int k) { return (13 * k + 7) % 64; };
  put_half(&xs[0], kHalf);
  uint16_t hi = 0;
  for (int k = 0; k < 8; ++k) {
    xs[4 + k / 2] |= uint8_t((ls(k) & 15) << (4 * (k % 2)));
    hi = uint16_t(hi | (ls(k) >> 4) << (2 * k));
    put_iq4(&xs[8 + 16 * k], 32 * k);
  }
  std::memcpy(&xs[2], &hi, 2);
  y = decode(23, xs, 256);
  for (int v = 0; v < 256; ++v)
    EXPECT_EQ(y[size_t(v)], 0.5f * float((ls(v / 32) - 32) * kLevels[iq4_nib(v)])) << v;

  // What the import runs them as: IQ4_NL blocks where the kernels take them, else Q8_0 blocks
  // whose quants are the levels; either way the same values exactly (the scales here are f16).
  const bool iq4 = kernels::takes(kernels::WType::IQ4_NL);
  const auto as = iq4 ? kernels::WType::IQ4_NL : kernels::WType::Q8_0;
  for (auto [type, src] : {std::pair{20u, &nl}, std::pair{23u, &xs}}) {
    const int n = type == 20 ? 64 : 256;
    ASSERT_EQ(gguf_rewrite_type(type), as);
    std::vector<uint8_t> out(kernels::row_bytes(as, n));
    gguf_rewrite_rows(type, src->data(), src->size(), n, 1, out.data());
    std::vector<float> got(static_cast<size_t>(n));
    kernels::scalar::dequantize_row(as, out.data(), got.data(), n);
    EXPECT_EQ(got, decode(type, *src, n)) << type;
    if (type == 20 && iq4) {
      EXPECT_EQ(out, *src);  // IQ4_NL's blocks as they are
    }
  }
  const bool q6 = kernels::takes(kernels::WType::Q6_H);
  EXPECT_EQ(gguf_rewrite_type(11), q6 ? kernels::WType::Q3_H : kernels::WType::Q8_0);
  EXPECT_EQ(kernels::takes(kernels::WType::Q3_H), q6);  // Q3_K as Q3_H wherever Q6_K is Q6_H
  EXPECT_EQ(gguf_rewrite_type(10), kernels::WType::Q8_0);
}

}  // namespace
}  // namespace krafla
